/* lower_reduce.c: sum, mean, max, min, prod over a set of axes (empty: all), argmax/argmin over
 * one axis (first index of the extreme value, or the last with select_last_index).
 *
 * The input is walked once in storage order (contiguous innermost loop); every element updates
 * the accumulator of its output position, which lives in the destination when the dtypes agree:
 *   acc[o] = identity (max/min: the first element reduced into o)
 *   for every input index i: acc[out(i)] = acc[out(i)] (+ * max min) x[i]
 *   out[o] = epilogue(acc[o]  (/ count for mean))
 * The outer loop is parallel only when its dimension is kept (iterations then write disjoint
 * accumulators); the inner loop is vectorized only when the last dimension is kept. */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

typedef struct red_p {
    int rank;
    int reduced[TTH_MAX_RANK];
    int keepdims;
    int64_t count;            /* elements reduced into each output */
    int axis;                 /* argmax/argmin */
    int last;                 /* select_last_index */
} red_p;

static int red_params(const tth_rexpr *call, red_p *p, char *why, size_t len)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    const char *op = tth_op_name(call->u.call.op);
    memset(p, 0, sizeof *p);
    if (!xt || !lw_ty(call)) {
        snprintf(why, len, "%s: tuple operand", op);
        return 0;
    }
    p->rank = xt->rank;
    p->keepdims = (int)lw_attr_int(call, "keepdims", 1);
    int arg = call->u.call.op == TTH_OP_ARGMAX || call->u.call.op == TTH_OP_ARGMIN;
    if (arg) {
        int64_t ax = lw_attr_int(call, "axis", 0);
        if (ax < 0)
            ax += xt->rank;
        if (ax < 0 || ax >= xt->rank) {
            snprintf(why, len, "%s: axis out of range", op);
            return 0;
        }
        p->axis = (int)ax;
        p->reduced[ax] = 1;
        p->last = (int)lw_attr_int(call, "select_last_index", 0);
    } else {
        int64_t axes[TTH_MAX_RANK];
        int n = lw_attr_ints(call, "axis", axes, TTH_MAX_RANK);
        if (n > TTH_MAX_RANK) {
            snprintf(why, len, "%s: too many axes", op);
            return 0;
        }
        if (n <= 0) {
            for (int d = 0; d < xt->rank; d++)
                p->reduced[d] = 1;
        }
        for (int i = 0; i < n; i++) {
            int64_t ax = axes[i] < 0 ? axes[i] + xt->rank : axes[i];
            if (ax < 0 || ax >= xt->rank) {
                snprintf(why, len, "%s: axis %lld out of range", op, (long long)axes[i]);
                return 0;
            }
            p->reduced[ax] = 1;
        }
    }
    p->count = 1;
    for (int d = 0; d < xt->rank; d++)
        if (p->reduced[d])
            p->count *= xt->shape[d];
    if (xt->dtype == TTH_BOOL) {
        snprintf(why, len, "%s: bool is not supported", op);
        return 0;
    }
    return call->u.call.op != TTH_OP_MEAN || lw_float_only(op, xt->dtype, why, len);
}

int lw_reduce_check(const tth_rexpr *call, char *why, size_t len)
{
    red_p p;
    return red_params(call, &p, why, len);
}

/* output flat index for input index idx */
static tth_texpr *out_flat(lw_ctx *c, const red_p *p, const tth_ttype *ot, tth_texpr *const *idx)
{
    tth_texpr *oi[TTH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < p->rank; d++) {
        if (p->reduced[d]) {
            if (p->keepdims)
                oi[r++] = lw_i(c, 0);
        } else {
            oi[r++] = idx[d];
        }
    }
    return lw_flat(c, ot->shape, ot->rank, oi);
}

typedef struct red_arg {
    const tth_rexpr *call;
    red_p p;
    const lw_sink *s;
    tth_tbuffer *x, *acc, *best;
    tth_texpr *init;
} red_arg;

static tth_tstmt *red_init(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    red_arg *a = arg;
    const tth_ttype *ot = lw_ty(a->call);
    tth_texpr *init = a->init;
    if (!init) {
        /* max/min start from the first element reduced into this output (exact for -inf, NaN) */
        tth_texpr *in[TTH_MAX_RANK];
        int r = 0;
        for (int d = 0; d < a->p.rank; d++) {
            if (a->p.reduced[d]) {
                in[d] = lw_i(c, 0);
                r += a->p.keepdims;
            } else {
                in[d] = idx[r++];
            }
        }
        init = lw_cast(c, a->acc->dtype, lw_load_at(c, a->x, in));
    }
    return tth_tir_store(c->m, a->acc, lw_flat(c, ot->shape, ot->rank, idx), init);
}

static tth_tstmt *red_update(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    red_arg *a = arg;
    const tth_ttype *ot = lw_ty(a->call);
    tth_texpr *o = out_flat(c, &a->p, ot, idx);
    tth_texpr *xv = lw_cast(c, a->acc->dtype, lw_load_at(c, a->x, idx));
    tth_texpr *cur = tth_tir_load(c->m, a->acc, o);
    tth_texpr *v;
    switch (a->call->u.call.op) {
    case TTH_OP_SUM: case TTH_OP_MEAN: v = lw_add(c, cur, xv); break;
    case TTH_OP_PROD: v = lw_mul(c, cur, xv); break;
    case TTH_OP_MAX: v = lw_bin(c, TTH_TBIN_MAX, cur, xv); break;
    default: v = lw_bin(c, TTH_TBIN_MIN, cur, xv); break;
    }
    return tth_tir_store(c->m, a->acc, o, v);
}

static tth_tstmt *red_finish(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    red_arg *a = arg;
    const tth_ttype *ot = lw_ty(a->call);
    tth_texpr *v = tth_tir_load(c->m, a->acc, lw_flat(c, ot->shape, ot->rank, idx));
    if (a->call->u.call.op == TTH_OP_MEAN)
        v = lw_bin(c, TTH_TBIN_DIV, v, lw_imm(c, v->dtype, (double)a->p.count));
    return lw_sink_store(c, a->s, 0, idx, v);
}

static int red_flags(const tth_ttype *xt, const red_p *p)
{
    int flags = 0;
    for (int d = 0; d < xt->rank; d++)
        if (xt->shape[d] != 1) {
            if (!p->reduced[d])
                flags |= LW_PARALLEL;
            break;
        }
    if (xt->rank > 0 && !p->reduced[xt->rank - 1])
        flags |= LW_VECTOR;
    return flags;
}

/* The loops' argument of a reduction: its parameters, its input, accumulating in the
 * destination; the output's type, or NULL (diag set) when it is not lowered */
static const tth_ttype *red_start(lw_ctx *c, const tth_rexpr *call, const lw_sink *s, red_arg *a)
{
    char why[256];
    memset(a, 0, sizeof *a);
    if (!red_params(call, &a->p, why, sizeof why)) {
        lw_fail(c, TTH_EUNSUPPORTED, call, "%s", why);
        return NULL;
    }
    a->call = call;
    a->s = s;
    a->x = lw_buf(c, lw_arg(call, 0));
    a->acc = s->dest[0];
    return a->x ? lw_ty(call) : NULL;
}

tth_tstmt *lw_reduce(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    red_arg a;
    const tth_ttype *ot = red_start(c, call, s, &a), *xt = lw_ty(lw_arg(call, 0));
    if (!ot)
        return NULL;
    tth_dtype t = ot->dtype;
    int direct = lw_sink_direct(s, 0, t);
    if (!direct) {
        a.acc = lw_local(c, "acc", t, ot->rank, ot->shape);
        if (!a.acc)
            return NULL;
    }
    switch (call->u.call.op) {
    case TTH_OP_PROD: a.init = lw_imm(c, t, 1); break;
    case TTH_OP_MAX: case TTH_OP_MIN: a.init = NULL; break;
    default: a.init = lw_imm(c, t, 0); break;
    }
    tth_tstmt *init = lw_nest(c, ot->shape, ot->rank, LW_PARALLEL | LW_VECTOR, red_init, &a);
    tth_tstmt *upd = lw_nest(c, xt->shape, xt->rank, red_flags(xt, &a.p), red_update, &a);
    tth_tstmt *fin = NULL;
    if (!direct || s->epi || call->u.call.op == TTH_OP_MEAN) {
        fin = lw_nest(c, ot->shape, ot->rank, LW_PARALLEL | LW_VECTOR, red_finish, &a);
        if (!fin)
            return NULL;
    }
    tth_tstmt *seq = NULL;
    if (!init || !upd || lw_append(c, &seq, init) || lw_append(c, &seq, upd) || lw_append(c, &seq, fin))
        return NULL;
    return direct ? seq : tth_tir_allocate(c->m, a.acc, seq);
}

static tth_tstmt *arg_update(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    red_arg *a = arg;
    const tth_ttype *ot = lw_ty(a->call);
    tth_texpr *o = out_flat(c, &a->p, ot, idx);
    tth_texpr *xv = lw_load_at(c, a->x, idx);
    tth_texpr *cur = tth_tir_load(c->m, a->best, o);
    int is_max = a->call->u.call.op == TTH_OP_ARGMAX;
    tth_tir_binop cmp = is_max ? (a->p.last ? TTH_TBIN_GE : TTH_TBIN_GT) : (a->p.last ? TTH_TBIN_LE : TTH_TBIN_LT);
    tth_texpr *k = idx[a->p.axis];
    tth_texpr *cond = lw_bin(c, TTH_TBIN_OR, lw_bin(c, TTH_TBIN_EQ, k, lw_i(c, 0)), lw_bin(c, cmp, xv, cur));
    tth_tstmt *seq = NULL;
    if (lw_append(c, &seq, tth_tir_store(c->m, a->best, o, xv)) ||
        lw_append(c, &seq, tth_tir_store(c->m, a->acc, o, lw_cast(c, a->acc->dtype, k))))
        return NULL;
    return tth_tir_if(c->m, cond, seq, NULL);
}

static tth_tstmt *arg_finish(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    red_arg *a = arg;
    const tth_ttype *ot = lw_ty(a->call);
    return lw_sink_store(c, a->s, 0, idx, tth_tir_load(c->m, a->acc, lw_flat(c, ot->shape, ot->rank, idx)));
}

tth_tstmt *lw_argreduce(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    red_arg a;
    const tth_ttype *ot = red_start(c, call, s, &a), *xt = lw_ty(lw_arg(call, 0));
    if (!ot)
        return NULL;
    int direct = lw_sink_direct(s, 0, TTH_I64);
    a.best = lw_local(c, "best", xt->dtype, ot->rank, ot->shape);
    if (!a.best)
        return NULL;
    if (!direct) {
        a.acc = lw_local(c, "ind", TTH_I64, ot->rank, ot->shape);
        if (!a.acc)
            return NULL;
    }
    /* storage order visits the reduced axis in increasing order for each output */
    tth_tstmt *upd = lw_nest(c, xt->shape, xt->rank, red_flags(xt, &a.p) & ~LW_VECTOR, arg_update, &a);
    tth_tstmt *fin = NULL;
    if (!direct || s->epi) {
        fin = lw_nest(c, ot->shape, ot->rank, LW_PARALLEL | LW_VECTOR, arg_finish, &a);
        if (!fin)
            return NULL;
    }
    tth_tstmt *seq = NULL;
    if (!upd || lw_append(c, &seq, upd) || lw_append(c, &seq, fin))
        return NULL;
    tth_tstmt *r = direct ? seq : tth_tir_allocate(c->m, a.acc, seq);
    return r ? tth_tir_allocate(c->m, a.best, r) : NULL;
}
