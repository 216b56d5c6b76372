/* lower_softmax.c: nn.softmax and nn.log_softmax over one axis, numerically stable:
 *   m = max_k x[k];  s = sum_k exp(x[k] - m)
 *   softmax = exp(x - m) / s;   log_softmax = x - m - log(s)
 * The tensor is seen as [outer, A, inner] (A the axis); m and s are LOCAL rows of `inner`
 * elements, so every pass has the contiguous inner index innermost. */
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
    if (!tth_dtype_is_float(xt->dtype)) {
        snprintf(why, len, "%s: %s is not supported (floating point only)", tth_op_name(call->u.call.op),
                 tth_dtype_name(xt->dtype));
        return 0;
    }
    return 1;
}

tth_tstmt *lw_softmax(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    char why[256];
    if (!lw_softmax_check(call, why, sizeof why)) {
        lw_fail(c, TTH_EUNSUPPORTED, call, "%s", why);
        return NULL;
    }
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
