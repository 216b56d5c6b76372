/* attention.c: softmax(scale * q k^T + mask) v becomes one nn.attention (docs/operators.md,
 * "Attention"), whose kernel never holds more scores than a block of query rows
 * (docs/lowering.md). The pattern, as exporters write scaled dot-product attention:
 *
 *   matmul(softmax(S, last axis), v)   S = [add(] T [, mask)]   T = M | multiply(M, s) | divide(M, s)
 *   M = matmul(Q, K^T)                 Q = q | multiply(q, s')  K^T = transpose(k, last two axes) | kt
 *
 * with s and s' scalar constants, float32 throughout, and every inner value used by the pattern
 * only. The keys are taken before their transpose when there is one (keys_transposed false: the
 * kernel transposes them itself, once, into the layout it reads), else as they are
 * (keys_transposed). Requires: constants folded. */
#include <string.h>

#include "frontend_internal.h"

typedef struct at_ctx {
    tth__rewriter *rw;
} at_ctx;

static int is_op(const tth_rexpr *e, tth_op op)
{
    return e->kind == TTH_REXPR_CALL && !e->u.call.fn && e->u.call.op == op && e->type.nfields < 0;
}

/* a scalar float constant's value */
static int scalar_const(const tth_rexpr *e, double *v)
{
    if (e->kind != TTH_REXPR_CONST || tth_ttype_numel(&e->u.constant.value->type) != 1)
        return 0;
    *v = tth_tensor_get_f64(e->u.constant.value, 0);
    return 1;
}

/* used once, by the pattern */
static int sole(at_ctx *c, const tth_rexpr *e)
{
    return e->id <= c->rw->max_id && c->rw->nusers[e->id] == 1;
}

/* transpose of the last two axes, the others in place */
static int swaps_last_two(const tth_rexpr *e)
{
    int64_t axes[TTH_MAX_RANK];
    int n = tth__attr_ints(e->u.call.attrs, "axes", axes, TTH_MAX_RANK);
    int r = e->type.tensor.rank;
    if (n != r || r < 2)
        return 0;
    for (int d = 0; d < r - 2; d++)
        if (axes[d] != d)
            return 0;
    return axes[r - 2] == r - 1 && axes[r - 1] == r - 2;
}

static tth_rexpr *mapped(at_ctx *c, const tth_rexpr *e)
{
    return c->rw->map[e->id];
}

/* M = matmul(Q, K^T), or M times / divided by a scalar constant (the scale): M, or NULL */
static const tth_rexpr *scores_product(at_ctx *c, const tth_rexpr *t, double *scale)
{
    double k;
    const tth_rexpr *mm = t;
    *scale = 1.0;
    if ((is_op(t, TTH_OP_MULTIPLY) || is_op(t, TTH_OP_DIVIDE)) && sole(c, t) && scalar_const(t->u.call.args[1], &k)) {
        *scale = t->u.call.op == TTH_OP_MULTIPLY ? k : 1.0 / k;
        mm = t->u.call.args[0];
    } else if (is_op(t, TTH_OP_MULTIPLY) && sole(c, t) && scalar_const(t->u.call.args[0], &k)) {
        *scale = k;
        mm = t->u.call.args[1];
    }
    return is_op(mm, TTH_OP_MATMUL) && sole(c, mm) ? mm : NULL;
}

static tth_rexpr *at_visit(void *ctx, tth_relay_module *m, tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                           tth_diag *diag)
{
    at_ctx *c = ctx;
    (void)args;
    if (!is_op(orig, TTH_OP_MATMUL) || nargs != 2 || orig->type.tensor.dtype != TTH_F32)
        return TTH_REWRITE_KEEP;
    const tth_rexpr *p = orig->u.call.args[0], *v = orig->u.call.args[1];
    if (!is_op(p, TTH_OP_SOFTMAX) || !sole(c, p) || v->type.nfields >= 0 || v->type.tensor.rank < 2)
        return TTH_REWRITE_KEEP;
    int64_t ax = tth__attr_int(p->u.call.attrs, "axis", -1);
    if (ax != -1 && ax != p->type.tensor.rank - 1)
        return TTH_REWRITE_KEEP;
    const tth_rexpr *s = p->u.call.args[0], *mask = NULL, *mm = NULL;
    double scale = 1.0, k;
    if (!(mm = scores_product(c, s, &scale)) && is_op(s, TTH_OP_ADD) && sole(c, s)) {
        /* a mask added: the operand that is the scores' product (of the scores' shape) */
        for (int i = 0; i < 2 && !mm; i++) {
            const tth_rexpr *t = s->u.call.args[i];
            if (tth_ttype_equal(&t->type.tensor, &s->type.tensor) && (mm = scores_product(c, t, &scale)))
                mask = s->u.call.args[1 - i];
        }
        if (mm && (mask->type.nfields >= 0 || mask->type.tensor.dtype != TTH_F32))
            return TTH_REWRITE_KEEP;
    }
    if (!mm)
        return TTH_REWRITE_KEEP;
    const tth_rexpr *q = mm->u.call.args[0], *kt = mm->u.call.args[1];
    if (q->type.nfields >= 0 || kt->type.nfields >= 0 || q->type.tensor.rank < 2 || kt->type.tensor.rank < 2 ||
        q->type.tensor.dtype != TTH_F32 || kt->type.tensor.dtype != TTH_F32 || v->type.tensor.dtype != TTH_F32)
        return TTH_REWRITE_KEEP;
    if (is_op(q, TTH_OP_MULTIPLY) && sole(c, q) && scalar_const(q->u.call.args[1], &k)) {
        scale *= k;
        q = q->u.call.args[0];
    }
    int keys_transposed = 1;
    const tth_rexpr *keys = kt;
    if (is_op(kt, TTH_OP_TRANSPOSE) && sole(c, kt) && swaps_last_two(kt)) {
        keys = kt->u.call.args[0];
        keys_transposed = 0;
    }
    tth_rexpr *aargs[4] = {mapped(c, q), mapped(c, keys), mapped(c, v), mask ? mapped(c, mask) : NULL};
    if (!aargs[0] || !aargs[1] || !aargs[2] || (mask && !aargs[3]))
        return TTH_REWRITE_KEEP;
    json_t *a = json_pack("{s:f, s:b}", "scale", scale, "keys_transposed", keys_transposed);
    tth_relay_set_span(m, orig->span);
    tth_diag local;
    tth_diag_clear(&local);
    tth_rexpr *r = tth_relay_call(m, TTH_OP_ATTENTION, aargs, mask ? 4 : 3, a, &local);
    tth_relay_set_span(m, NULL);
    (void)diag;
    if (!r || !tth_ttype_equal(&r->type.tensor, &orig->type.tensor))
        return TTH_REWRITE_KEEP; /* a shape the operator does not take (a batch that does not broadcast) */
    return r;
}

int tth_relay_fuse_attention(tth_relay_module *m, tth_diag *diag)
{
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
    for (size_t i = 0; i < m->nfuncs; i++) {
        tth__rewriter rw = {.visit = at_visit};
        at_ctx c = {&rw};
        rw.ctx = &c;
        int rc = tth__rewrite_function(m, m->funcs[i], &rw, diag);
        if (rc)
            return rc;
    }
    return 0;
}
