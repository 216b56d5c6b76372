/* lower_norm.c: nn.layer_norm over the last axis (docs/lowering.md, "Layer normalization"), a
 * row at a time in vectors of the target's lanes (one lane on scalar targets: the same kernel):
 *   mean = x0 + sum(x - x0) / D (x0 the row's first value: the sum of small differences loses
 *   less than a sum of large values);  var = sum((x - mean)^2) / D;  q = 1 / sqrt(var + epsilon)
 *   y = (x - mean) * q * scale + bias, through the epilogue.
 * Three passes over a row that stays in L1; rows are the parallel loop. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

int lw_layer_norm_check(const tth_rexpr *call, char *why, size_t len)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    if (!xt || xt->dtype != TTH_F32) {
        snprintf(why, len, "nn.layer_norm: %s is not supported (float32 only)", xt ? tth_dtype_name(xt->dtype) : "a tuple");
        return 0;
    }
    return 1;
}

/* b[at .. at + lanes) as a vector, a scalar for one lane; a one-value buffer broadcast */
static tth_texpr *row_at(lw_ctx *c, tth_tbuffer *b, tth_texpr *at, int lanes)
{
    if (tth_tbuffer_numel(b) == 1)
        return tth_tir_load(c->m, b, lw_i(c, 0));
    return lanes == 1 ? tth_tir_load(c->m, b, at) : tth_tir_vload(c->m, b, at, lanes, 0);
}

static tth_texpr *hsum(lw_ctx *c, tth_texpr *v)
{
    return v->lanes == 1 ? v : tth_tir_intrin(c->m, TTH_TINTRIN_REDUCE_ADD, v, NULL);
}

/* the accumulator: a vector of `lanes`, a scalar for one lane */
static tth_texpr *acc_get(lw_ctx *c, tth_tbuffer *acc, int lanes)
{
    return lanes == 1 ? tth_tir_load(c->m, acc, lw_i(c, 0)) : tth_tir_vload(c->m, acc, lw_i(c, 0), lanes, 0);
}

static tth_tstmt *acc_set(lw_ctx *c, tth_tbuffer *acc, tth_texpr *v)
{
    return v->lanes == 1 ? tth_tir_store(c->m, acc, lw_i(c, 0), v) : tth_tir_vstore(c->m, acc, lw_i(c, 0), v, 0);
}

typedef struct ln_row {
    tth_tbuffer *x, *scale, *bias, *acc, *sc;
    tth_texpr *xb, *m, *q, *row;
    const tth_ttype *xt;
    const lw_sink *s;
} ln_row;

/* adds x (what 0), (x - m)^2 (what 1) or x - m (what 3) into acc (lanes wide) or, for the row's
 * narrower last vector, into sc[1] */
static tth_tstmt *ln_add(lw_ctx *c, ln_row *g, tth_texpr *at, int lanes, int what, int into_acc)
{
    tth_texpr *v = row_at(c, g->x, lw_add(c, g->xb, at), lanes);
    if (what) {
        tth_tvar *dv = lw_var_vec(c, "d", TTH_F32, lanes);
        if (!dv)
            return NULL;
        tth_texpr *d = lw_ref(c, dv), *one = lw_i(c, 1), *t = what == 1 ? lw_mul(c, d, d) : d;
        tth_tstmt *st = into_acc ? acc_set(c, g->acc, lw_add(c, acc_get(c, g->acc, lanes), t))
                                 : tth_tir_store(c->m, g->sc, one, lw_add(c, tth_tir_load(c->m, g->sc, one), hsum(c, t)));
        return lw_let(c, dv, lw_sub(c, v, g->m), st);
    }
    tth_texpr *one = lw_i(c, 1);
    return into_acc ? acc_set(c, g->acc, lw_add(c, acc_get(c, g->acc, lanes), v))
                    : tth_tir_store(c->m, g->sc, one, lw_add(c, tth_tir_load(c->m, g->sc, one), hsum(c, v)));
}

/* pass 3: the output at column `at`, lanes wide */
static tth_tstmt *ln_out(lw_ctx *c, ln_row *g, tth_texpr *at, int lanes)
{
    tth_texpr *x = row_at(c, g->x, lw_add(c, g->xb, at), lanes);
    tth_texpr *v = lw_add(c, lw_mul(c, lw_mul(c, lw_sub(c, x, g->m), g->q), row_at(c, g->scale, at, lanes)),
                          row_at(c, g->bias, at, lanes));
    tth_texpr *idx[TTH_MAX_RANK];
    lw_row_idx(c, g->xt, g->row, at, lanes, idx);
    return lw_sink_store(c, g->s, 0, idx, v);
}

/* one pass: the vectors of the row, then its narrower last vector */
static tth_tstmt *ln_pass(lw_ctx *c, ln_row *g, lw_ax *j, int vl, int64_t nv, int tl, int what)
{
    tth_texpr *jv = lw_mul(c, j->e, lw_i(c, vl)), *tail_at = lw_i(c, nv * vl), *one = lw_i(c, 1);
    tth_tstmt *seq = NULL;
    if (what != 2) {
        tth_texpr *z = vl == 1 ? lw_imm(c, TTH_F32, 0) : tth_tir_broadcast(c->m, lw_imm(c, TTH_F32, 0), vl);
        if (lw_append(c, &seq, acc_set(c, g->acc, z)) || lw_append(c, &seq, tth_tir_store(c->m, g->sc, one, lw_imm(c, TTH_F32, 0))))
            return NULL;
    }
    tth_tstmt *body = what != 2 ? ln_add(c, g, jv, vl, what, 1) : ln_out(c, g, jv, vl);
    if (nv && lw_append(c, &seq, lw_ax_loop(c, j, TTH_LOOP_SERIAL, body)))
        return NULL;
    if (tl && lw_append(c, &seq, what != 2 ? ln_add(c, g, tail_at, tl, what, 0) : ln_out(c, g, tail_at, tl)))
        return NULL;
    return seq;
}

/* strategy layer_norm/rows-vectorized: the same kernel, recorded by name, on vector targets */
int lw_layer_norm_rows_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    char why[128];
    return c->vec.f32_lanes >= 4 && lw_layer_norm_check(call, why, sizeof why);
}

tth_tstmt *lw_layer_norm(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    if (lw_check_call(c, call, lw_layer_norm_check))
        return NULL;
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    ln_row g = {lw_buf(c, lw_arg(call, 0)), lw_buf(c, lw_arg(call, 1)), lw_buf(c, lw_arg(call, 2)), NULL, NULL,
                NULL, NULL, NULL, NULL, xt, s};
    if (!g.x || !g.scale || !g.bias)
        return NULL;
    int vl = c->vec.f32_lanes > 1 ? c->vec.f32_lanes : 1;
    int64_t D = xt->shape[xt->rank - 1], R = lw_numel(xt->shape, xt->rank) / (D ? D : 1), nv = D / vl;
    int tl = (int)(D % vl);
    if (D == 0 || R == 0)
        return tth_tir_seq(c->m, NULL, 0);
    double eps = lw_attr_float(call, "epsilon", 1e-5);
    lw_ax row, j;
    if (lw_ax_make(c, &row, "r", R) || lw_ax_make(c, &j, "j", nv))
        return NULL;
    char name[32];
    int64_t nacc = vl, nsc = 2;
    snprintf(name, sizeof name, "lacc%u", c->nbufs++);
    g.acc = tth_tir_buffer(c->m, name, TTH_F32, 1, &nacc, TTH_SCOPE_REGISTER);
    snprintf(name, sizeof name, "lsc%u", c->nbufs++);
    g.sc = tth_tir_buffer(c->m, name, TTH_F32, 1, &nsc, TTH_SCOPE_REGISTER);
    tth_tvar *vxb = lw_var(c, "xb", TTH_I64), *vm = lw_var(c, "mu", TTH_F32), *vq = lw_var(c, "q", TTH_F32);
    if (!g.acc || !g.sc || !vxb || !vm || !vq)
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
    g.xb = lw_ref(c, vxb);
    g.m = lw_ref(c, vm);
    g.q = lw_ref(c, vq);
    g.row = row.e;
    tth_texpr *zero = lw_i(c, 0), *one = lw_i(c, 1);
    tth_texpr *sum = lw_add(c, hsum(c, acc_get(c, g.acc, vl)), tth_tir_load(c->m, g.sc, one));
    (void)zero;
    tth_texpr *invD = lw_imm(c, TTH_F32, 1.0 / (double)D);
    /* y = (x - mean) * q ..., q from the second pass, mean from the first */
    tth_texpr *q = lw_bin(c, TTH_TBIN_DIV, lw_imm(c, TTH_F32, 1.0),
                          tth_tir_intrin(c->m, TTH_TINTRIN_SQRT, lw_add(c, lw_mul(c, sum, invD), lw_imm(c, TTH_F32, eps)), NULL));
    tth_tstmt *p3 = lw_let(c, vq, q, ln_pass(c, &g, &j, vl, nv, tl, 2));
    tth_tvar *vx0 = lw_var(c, "x0", TTH_F32);
    if (!vx0)
        return NULL;
    tth_tstmt *p2 = ln_pass(c, &g, &j, vl, nv, tl, 1), *rest = NULL;
    if (!p2 || !p3 || lw_append(c, &rest, p2) || lw_append(c, &rest, p3))
        return NULL;
    g.m = lw_ref(c, vx0); /* pass 1 sums x - x0 */
    tth_tstmt *p1 = ln_pass(c, &g, &j, vl, nv, tl, 3), *body = NULL;
    g.m = lw_ref(c, vm);
    if (!p1 || lw_append(c, &body, p1) ||
        lw_append(c, &body, lw_let(c, vm, lw_add(c, lw_ref(c, vx0), lw_mul(c, sum, invD)), rest)))
        return NULL;
    body = lw_let(c, vxb, lw_mul(c, row.e, lw_i(c, D)), lw_let(c, vx0, tth_tir_load(c->m, g.x, g.xb), body));
    body = body ? tth_tir_allocate(c->m, g.sc, tth_tir_allocate(c->m, g.acc, body)) : NULL;
    return lw_ax_loop(c, &row, R > 1 && R * D * LW_NORM_WORK >= LW_PARALLEL_MIN ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL,
                      body);
}
