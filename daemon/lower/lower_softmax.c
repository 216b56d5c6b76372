/* lower_softmax.c: nn.softmax and nn.log_softmax over one axis, numerically stable:
 *   m = max_k x[k];  s = sum_k exp(x[k] - m)
 *   softmax = exp(x - m) / s;   log_softmax = x - m - log(s)
 * The tensor is seen as [outer, A, inner] (A the axis); m and s are LOCAL rows of `inner`
 * elements, so every pass has the contiguous inner index innermost. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

int lw_softmax_check(const tth_rexpr *call, char *why, size_t len)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    int64_t ax = lw_attr_int(call, "axis", -1);
    if (ax < 0)
        ax += xt->rank;
    if (ax < 0 || ax >= xt->rank) {
        snprintf(why, len, "%s: axis out of range", tth_op_name(call->u.call.op));
        return 0;
    }
    return lw_float_only(tth_op_name(call->u.call.op), xt->dtype, why, len);
}

tth_tstmt *lw_softmax(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    if (lw_check_call(c, call, lw_softmax_check))
        return NULL;
    int is_log = call->u.call.op == TTH_OP_LOG_SOFTMAX;
    tth_tbuffer *x = lw_buf(c, lw_arg(call, 0));
    if (!x)
        return NULL;
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    tth_dtype t = xt->dtype;
    int64_t ax = lw_attr_int(call, "axis", -1);
    if (ax < 0)
        ax += xt->rank;
    int64_t A = xt->shape[ax], inner = 1;
    for (int d = (int)ax + 1; d < xt->rank; d++)
        inner *= xt->shape[d];
    tth_tbuffer *mb = lw_local(c, "smax", t, 1, &inner), *sb = lw_local(c, "ssum", t, 1, &inner);
    if (!mb || !sb)
        return NULL;
    /* outer loops: one per dimension before the axis */
    lw_ax outer[TTH_MAX_RANK], ak, ai;
    for (int d = 0; d < ax; d++)
        if (lw_ax_make(c, &outer[d], "o", xt->shape[d]))
            return NULL;
    if (lw_ax_make(c, &ak, "k", A) || lw_ax_make(c, &ai, "i", inner))
        return NULL;
    tth_tvar *vob = lw_var(c, "ob", TTH_I64), *vxb = lw_var(c, "xb", TTH_I64);
    if (!vob || !vxb)
        return NULL;
    /* ob = flat outer index * A * inner; xb = ob + k * inner */
    tth_texpr *ob = lw_i(c, 0);
    int64_t stride = A * inner;
    for (int d = (int)ax - 1; d >= 0; d--) {
        ob = lw_add(c, ob, lw_mul(c, outer[d].e, lw_i(c, stride)));
        stride *= xt->shape[d];
    }
    tth_texpr *xb = lw_add(c, lw_ref(c, vob), lw_mul(c, ak.e, lw_i(c, inner)));
    tth_texpr *xi = lw_add(c, lw_ref(c, vxb), ai.e);
    tth_texpr *xv = tth_tir_load(c->m, x, xi);
    tth_texpr *mv = tth_tir_load(c->m, mb, ai.e), *sv = tth_tir_load(c->m, sb, ai.e);

    /* the running maximum starts from the first element along the axis */
    tth_texpr *first = tth_tir_load(c->m, x, lw_add(c, lw_ref(c, vob), ai.e));
    tth_tstmt *p0 = lw_ax_loop(c, &ai, TTH_LOOP_VECTORIZED, tth_tir_store(c->m, mb, ai.e, first));
    tth_tstmt *p1 = lw_ax_loop(c, &ai, TTH_LOOP_VECTORIZED, tth_tir_store(c->m, mb, ai.e, lw_bin(c, TTH_TBIN_MAX, mv, xv)));
    p1 = lw_ax_loop(c, &ak, TTH_LOOP_SERIAL, lw_let(c, vxb, xb, p1));
    tth_tstmt *p2 = lw_ax_loop(c, &ai, TTH_LOOP_VECTORIZED, tth_tir_store(c->m, sb, ai.e, lw_imm(c, t, 0)));
    tth_texpr *e = tth_tir_intrin(c->m, TTH_TINTRIN_EXP, lw_sub(c, xv, mv), NULL);
    tth_tstmt *p3 = lw_ax_loop(c, &ai, TTH_LOOP_VECTORIZED, tth_tir_store(c->m, sb, ai.e, lw_add(c, sv, e)));
    p3 = lw_ax_loop(c, &ak, TTH_LOOP_SERIAL, lw_let(c, vxb, xb, p3));
    if (is_log) {
        /* s = log(s) once per row */
        tth_tstmt *pl = lw_ax_loop(c, &ai, TTH_LOOP_VECTORIZED,
                                   tth_tir_store(c->m, sb, ai.e, tth_tir_intrin(c->m, TTH_TINTRIN_LOG, sv, NULL)));
        tth_tstmt *q = NULL;
        if (lw_append(c, &q, p3) || lw_append(c, &q, pl))
            return NULL;
        p3 = q;
    }
    tth_texpr *val = is_log ? lw_sub(c, lw_sub(c, xv, mv), sv) : lw_bin(c, TTH_TBIN_DIV, e, sv);
    tth_tstmt *st;
    if (!s->epi) {
        st = tth_tir_store(c->m, s->dest[0], xi, lw_cast(c, s->dest[0]->dtype, val));
    } else {
        /* the epilogue needs the full index: split the inner position */
        tth_texpr *idx[TTH_MAX_RANK];
        for (int d = 0; d < ax; d++)
            idx[d] = outer[d].e;
        idx[ax] = ak.e;
        int64_t st2 = inner;
        for (int d = (int)ax + 1; d < xt->rank; d++) {
            st2 /= xt->shape[d];
            tth_texpr *q = st2 == 1 ? ai.e : lw_bin(c, TTH_TBIN_DIV, ai.e, lw_i(c, st2));
            idx[d] = xt->shape[d] == 1 ? lw_i(c, 0) : (d == (int)ax + 1 ? q : lw_bin(c, TTH_TBIN_MOD, q, lw_i(c, xt->shape[d])));
        }
        st = lw_sink_store(c, s, 0, idx, val);
    }
    tth_tstmt *p4 = lw_ax_loop(c, &ai, TTH_LOOP_VECTORIZED, st);
    p4 = lw_ax_loop(c, &ak, TTH_LOOP_SERIAL, lw_let(c, vxb, xb, p4));
    tth_tstmt *seq = NULL;
    if (!p0 || !p1 || !p2 || !p3 || !p4 || lw_append(c, &seq, p0) || lw_append(c, &seq, p1) ||
        lw_append(c, &seq, p2) || lw_append(c, &seq, p3) || lw_append(c, &seq, p4))
        return NULL;
    tth_tstmt *body = lw_let(c, vob, ob, seq);
    for (int d = (int)ax - 1; d >= 0; d--)
        body = lw_ax_loop(c, &outer[d], TTH_LOOP_SERIAL, body);
    if (!body)
        return NULL;
    return tth_tir_allocate(c->m, mb, tth_tir_allocate(c->m, sb, body));
}

/* ---- strategy softmax/rows-vectorized (docs/lowering.md, "Softmax") ----
 * Softmax along the last axis, a row at a time, in vectors of the target's lanes: the row's
 * maximum (a vector of running maxima, then one horizontal max), the exponentials and their sum
 * (exp written as arithmetic, lower_math.c: vector code), then the quotients through the
 * epilogue. A row of at most ROW_KEEP elements keeps its exponentials in a buffer on the task's
 * stack, so each is computed once; a longer row computes them again in the last pass. The last
 * vector of a row is narrower when the lanes do not divide it. Rows are the parallel loop. */
#define ROW_KEEP 8192

int lw_softmax_rows_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    char why[128];
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    if (c->vec.f32_lanes < 4 || !xt || xt->dtype != TTH_F32 || !lw_softmax_check(call, why, sizeof why))
        return 0;
    int64_t ax = lw_attr_int(call, "axis", -1);
    ax += ax < 0 ? xt->rank : 0;
    return ax == xt->rank - 1 && xt->shape[ax] >= 2;
}

/* x[at .. at + lanes) as a vector (a scalar for one lane) */
static tth_texpr *vec_at(lw_ctx *c, tth_tbuffer *b, tth_texpr *at, int lanes)
{
    return lanes == 1 ? tth_tir_load(c->m, b, at) : tth_tir_vload(c->m, b, at, lanes, 0);
}

static tth_tstmt *vec_store(lw_ctx *c, tth_tbuffer *b, tth_texpr *at, tth_texpr *v)
{
    return v && v->lanes == 1 ? tth_tir_store(c->m, b, at, v) : tth_tir_vstore(c->m, b, at, v, 0);
}

static tth_texpr *hreduce(lw_ctx *c, tth_tir_intrin_op op, tth_texpr *v)
{
    return !v || v->lanes == 1 ? v : tth_tir_intrin(c->m, op, v, NULL);
}

typedef struct sm_row {
    lw_ctx *c;
    const tth_rexpr *call;
    const lw_sink *s;
    tth_tbuffer *x, *eb;      /* input; the row's exponentials (NULL: computed again) */
    tth_texpr *xb, *m, *post; /* row start; maximum; 1/sum (softmax) or log(sum) (log_softmax) */
    tth_texpr *row;           /* flat row index */
    const tth_ttype *xt;
    int is_log;
} sm_row;

/* the result at column `at` (lanes wide) through the epilogue */
static tth_tstmt *sm_out(sm_row *g, tth_texpr *at, int lanes)
{
    lw_ctx *c = g->c;
    int mark = lw_lets_open(c);
    tth_texpr *xv = vec_at(c, g->x, lw_add(c, g->xb, at), lanes), *val;
    if (g->is_log)
        val = lw_sub(c, lw_sub(c, xv, g->m), g->post);
    else
        val = lw_mul(c, g->eb ? vec_at(c, g->eb, at, lanes) : lw_math(c, LW_MATH_EXP, lw_sub(c, xv, g->m)), g->post);
    tth_texpr *idx[TTH_MAX_RANK];
    lw_row_idx(c, g->xt, g->row, at, lanes, idx);
    return lw_lets_close(c, mark, lw_sink_store(c, g->s, 0, idx, val));
}

/* the exponentials of `lanes` columns at `at`: kept in eb, added into the accumulator acc
 * (lanes wide) or, for the tail, into sc[1] */
static tth_tstmt *sm_exp(sm_row *g, tth_texpr *at, int lanes, tth_tbuffer *acc, tth_tbuffer *sc)
{
    lw_ctx *c = g->c;
    int mark = lw_lets_open(c);
    tth_texpr *e = lw_bind(c, lw_math(c, LW_MATH_EXP, lw_sub(c, vec_at(c, g->x, lw_add(c, g->xb, at), lanes), g->m)));
    tth_tstmt *st = NULL;
    if (g->eb && lw_append(c, &st, vec_store(c, g->eb, at, e)))
        return NULL;
    tth_texpr *one = lw_i(c, 1);
    tth_tstmt *add = acc ? tth_tir_vstore(c->m, acc, lw_i(c, 0), lw_add(c, tth_tir_vload(c->m, acc, lw_i(c, 0), lanes, 0), e), 0)
                         : tth_tir_store(c->m, sc, one, lw_add(c, tth_tir_load(c->m, sc, one), hreduce(c, TTH_TINTRIN_REDUCE_ADD, e)));
    if (lw_append(c, &st, add))
        return NULL;
    return lw_lets_close(c, mark, st);
}

tth_tstmt *lw_softmax_rows(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    int is_log = call->u.call.op == TTH_OP_LOG_SOFTMAX;
    tth_tbuffer *x = lw_buf(c, lw_arg(call, 0));
    if (!x)
        return NULL;
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    int rank = xt->rank, vl = c->vec.f32_lanes;
    int64_t A = xt->shape[rank - 1], R = lw_numel(xt->shape, rank) / A, nv = A / vl;
    int tl = (int)(A % vl);
    lw_ax row, j;
    if (lw_ax_make(c, &row, "r", R) || lw_ax_make(c, &j, "j", nv))
        return NULL;
    tth_tvar *vxb = lw_var(c, "xb", TTH_I64), *vm = lw_var(c, "m", TTH_F32), *vp = lw_var(c, "q", TTH_F32);
    char name[32];
    int64_t nacc = vl, nsc = 2;
    snprintf(name, sizeof name, "sacc%u", c->nbufs++);
    tth_tbuffer *acc = tth_tir_buffer(c->m, name, TTH_F32, 1, &nacc, TTH_SCOPE_REGISTER);
    snprintf(name, sizeof name, "ssc%u", c->nbufs++);
    tth_tbuffer *sc = tth_tir_buffer(c->m, name, TTH_F32, 1, &nsc, TTH_SCOPE_REGISTER);
    tth_tbuffer *eb = NULL;
    if (!is_log && A <= ROW_KEEP) {
        snprintf(name, sizeof name, "sex%u", c->nbufs++);
        eb = tth_tir_buffer(c->m, name, TTH_F32, 1, &A, TTH_SCOPE_REGISTER);
        if (!eb)
            return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
    }
    if (!vxb || !vm || !vp || !acc || !sc)
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
    sm_row g = {c, call, s, x, eb, lw_ref(c, vxb), lw_ref(c, vm), lw_ref(c, vp), row.e, xt, is_log};
    tth_texpr *zero = lw_i(c, 0), *one = lw_i(c, 1), *jv = lw_mul(c, j.e, lw_i(c, vl)), *tail_at = lw_i(c, nv * vl);
    tth_texpr *accv = tth_tir_vload(c->m, acc, zero, vl, 0);

    /* pass 1: the maximum, into sc[0] */
    tth_tstmt *p1 = NULL;
    tth_texpr *ninf = lw_imm(c, TTH_F32, -INFINITY);
    if (nv) {
        tth_tstmt *upd = tth_tir_vstore(c->m, acc, zero, lw_bin(c, TTH_TBIN_MAX, accv, vec_at(c, x, lw_add(c, g.xb, jv), vl)), 0);
        if (lw_append(c, &p1, tth_tir_vstore(c->m, acc, zero, tth_tir_broadcast(c->m, ninf, vl), 0)) ||
            lw_append(c, &p1, lw_ax_loop(c, &j, TTH_LOOP_SERIAL, upd)) ||
            lw_append(c, &p1, tth_tir_store(c->m, sc, zero, hreduce(c, TTH_TINTRIN_REDUCE_MAX, accv))))
            return NULL;
    } else if (lw_append(c, &p1, tth_tir_store(c->m, sc, zero, ninf))) {
        return NULL;
    }
    if (tl && lw_append(c, &p1, tth_tir_store(c->m, sc, zero, lw_bin(c, TTH_TBIN_MAX, tth_tir_load(c->m, sc, zero),
                                                                        hreduce(c, TTH_TINTRIN_REDUCE_MAX,
                                                                                vec_at(c, x, lw_add(c, g.xb, tail_at), tl))))))
        return NULL;

    /* pass 2: the exponentials' sum, into sc[1] */
    tth_tstmt *p2 = NULL;
    if (nv) {
        if (lw_append(c, &p2, tth_tir_vstore(c->m, acc, zero, tth_tir_broadcast(c->m, lw_imm(c, TTH_F32, 0), vl), 0)) ||
            lw_append(c, &p2, lw_ax_loop(c, &j, TTH_LOOP_SERIAL, sm_exp(&g, jv, vl, acc, sc))) ||
            lw_append(c, &p2, tth_tir_store(c->m, sc, one, hreduce(c, TTH_TINTRIN_REDUCE_ADD, accv))))
            return NULL;
    } else if (lw_append(c, &p2, tth_tir_store(c->m, sc, one, lw_imm(c, TTH_F32, 0)))) {
        return NULL;
    }
    if (tl && lw_append(c, &p2, sm_exp(&g, tail_at, tl, NULL, sc)))
        return NULL;

    /* pass 3: the results */
    tth_tstmt *p3 = NULL;
    if ((nv && lw_append(c, &p3, lw_ax_loop(c, &j, TTH_LOOP_SERIAL, sm_out(&g, jv, vl)))) ||
        (tl && lw_append(c, &p3, sm_out(&g, tail_at, tl))))
        return NULL;
    tth_texpr *sum = tth_tir_load(c->m, sc, one);
    tth_texpr *post = is_log ? tth_tir_intrin(c->m, TTH_TINTRIN_LOG, sum, NULL)
                             : lw_bin(c, TTH_TBIN_DIV, lw_imm(c, TTH_F32, 1), sum);
    p3 = lw_let(c, vp, post, p3);
    tth_tstmt *rest = NULL, *body = NULL;
    if (!p1 || !p2 || !p3 || lw_append(c, &rest, p2) || lw_append(c, &rest, p3) || lw_append(c, &body, p1) ||
        lw_append(c, &body, lw_let(c, vm, tth_tir_load(c->m, sc, zero), rest)))
        return NULL;
    body = lw_let(c, vxb, lw_mul(c, row.e, lw_i(c, A)), body);
    if (eb)
        body = body ? tth_tir_allocate(c->m, eb, body) : NULL;
    body = body ? tth_tir_allocate(c->m, sc, tth_tir_allocate(c->m, acc, body)) : NULL;
    return lw_ax_loop(c, &row, R > 1 && R * A * LW_SOFTMAX_WORK >= LW_PARALLEL_MIN ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL,
                      body);
}
