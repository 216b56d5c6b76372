/* lower_attention.c: nn.attention, softmax(scale * q k^T + mask) v (docs/lowering.md,
 * "Attention"), one kernel for every target (vectors of the target's lanes; one lane on scalar
 * targets). The scores of a block of RM query rows live on the task's stack, never the whole
 * [Lq, Lk] matrix:
 *   0. the keys transposed once into kt [D][Lk] (skipped when they come transposed), so that a
 *      vector holds consecutive keys;
 *   per (batch, block of query rows), the parallel loop:
 *   1. s[r][j] = scale * sum_d q[r][d] kt[d][j] + mask[r][j]: register tiles of RM rows times RN
 *      vectors of keys, q broadcast, kt loaded;
 *   2. per row the maximum, e = exp(s - max) in place (exp as arithmetic, "Math functions"), the sum;
 *   3. o[r][:] = sum_j e[r][j] v[j][:] / sum: register tiles of RM rows times the vectors of v's
 *      row, e broadcast, v loaded; through the epilogue. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

int lw_attention_check(const tth_rexpr *call, char *why, size_t len)
{
    for (size_t i = 0; i < call->u.call.nargs; i++) {
        const tth_ttype *t = lw_ty(lw_arg(call, i));
        if (!t || t->dtype != TTH_F32) {
            snprintf(why, len, "nn.attention: float32 only");
            return 0;
        }
    }
    return 1;
}

/* strategy attention/rows-tiled: the kernel, recorded by name, on vector targets */
int lw_attention_tiled_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    char why[64];
    return c->vec.f32_lanes >= 4 && lw_attention_check(call, why, sizeof why);
}

typedef struct at_k {
    lw_ctx *c;
    const lw_sink *s;
    tth_tbuffer *q, *kt, *v, *mask, *sb, *sc;
    const tth_ttype *qt, *kt_t, *vt, *mt, *ot;
    int nb;                   /* batch dimensions of the output */
    int64_t Lq, Lk, D, Dv, RM, RN;
    int vl;
    double scale;
    tth_texpr *bidx[TTH_MAX_RANK]; /* the output's batch indices */
    tth_texpr *qb, *kb, *vb;  /* the batch's offsets into q, kt, v */
} at_k;

static tth_texpr *vld(lw_ctx *c, tth_tbuffer *b, tth_texpr *at, int lanes)
{
    return lanes == 1 ? tth_tir_load(c->m, b, at) : tth_tir_vload(c->m, b, at, lanes, 0);
}

static tth_tstmt *vst(lw_ctx *c, tth_tbuffer *b, tth_texpr *at, tth_texpr *v)
{
    return v && v->lanes == 1 ? tth_tir_store(c->m, b, at, v) : tth_tir_vstore(c->m, b, at, v, 0);
}

static tth_texpr *zeros(lw_ctx *c, int lanes)
{
    tth_texpr *z = lw_imm(c, TTH_F32, 0);
    return lanes == 1 ? z : tth_tir_broadcast(c->m, z, lanes);
}

/* offset of an operand's matrix for the output's batch indices (its own dimensions broadcast) */
static tth_texpr *batch_off(at_k *a, const tth_ttype *t, int64_t mat)
{
    lw_ctx *c = a->c;
    tth_texpr *off = lw_i(c, 0);
    int tb = t->rank - 2;
    int64_t stride = mat;
    for (int d = tb - 1; d >= 0; d--) {
        int od = d + (a->nb - tb);
        if (t->shape[d] != 1 && od >= 0)
            off = lw_add(c, off, lw_mul(c, a->bidx[od], lw_i(c, stride)));
        stride *= t->shape[d];
    }
    return off;
}

/* the mask at query row `row` (of the block's first row m0 + r) and keys j .. j + lanes */
static tth_texpr *mask_at(at_k *a, tth_texpr *row, tth_texpr *j, int lanes)
{
    lw_ctx *c = a->c;
    tth_ttype st = *a->ot;
    st.shape[st.rank - 1] = a->Lk;
    tth_texpr *idx[TTH_MAX_RANK], *midx[TTH_MAX_RANK];
    for (int d = 0; d < a->nb; d++)
        idx[d] = a->bidx[d];
    idx[a->nb] = row;
    idx[a->nb + 1] = lanes == 1 ? j : tth_tir_ramp(c->m, j, 1, lanes);
    lw_bcast_idx(c, &st, a->mt, idx, midx);
    return lw_load_at(c, a->mask, midx);
}

/* the scalar of row r of a tile at step k of its sum: q's for the scores, e's for the output */
typedef tth_texpr *(*row_fn)(at_k *a, tth_texpr *m0, int r, tth_texpr *k);

static tth_texpr *q_row(at_k *a, tth_texpr *m0, int r, tth_texpr *d)
{
    lw_ctx *c = a->c;
    return tth_tir_load(c->m, a->q, lw_add(c, a->qb, lw_add(c, lw_mul(c, lw_add(c, m0, lw_i(c, r)), lw_i(c, a->D)), d)));
}

static tth_texpr *e_row(at_k *a, tth_texpr *m0, int r, tth_texpr *j)
{
    (void)m0;
    lw_ctx *c = a->c;
    return tth_tir_load(c->m, a->sb, lw_add(c, lw_i(c, (int64_t)r * a->Lk), j));
}

/* A register tile of rm rows times rn vectors of `lanes`, zeroed, then summed over k < n (a loop
 * variable named kname): acc[r][j] += row(r, k) * cb[cbase + k * cstride + n0 + j * lanes]. The
 * tile, its statements appended to *seq; NULL on OOM. */
static tth_tbuffer *tile_sum(at_k *a, tth_tstmt **seq, const char *kname, int64_t n, row_fn row, tth_texpr *m0,
                             int rm, tth_tbuffer *cb, tth_texpr *cbase, int64_t cstride, tth_texpr *n0, int rn,
                             int lanes)
{
    lw_ctx *c = a->c;
    tth_tbuffer *acc = lw_reg_tile(c, (int64_t)rm * rn, lanes, seq);
    lw_ax k;
    if (!acc || lw_ax_make(c, &k, kname, n))
        return NULL;
    tth_tstmt *upd = NULL;
    for (int r = 0; r < rm; r++) {
        tth_texpr *rv = row(a, m0, r, k.e);
        for (int j = 0; j < rn; j++) {
            tth_texpr *ai = lw_i(c, ((int64_t)r * rn + j) * lanes);
            tth_texpr *cv = vld(c, cb, lw_add(c, cbase, lw_add(c, lw_mul(c, k.e, lw_i(c, cstride)),
                                                              lw_add(c, n0, lw_i(c, (int64_t)j * lanes)))), lanes);
            if (lw_append(c, &upd, vst(c, acc, ai, lw_madd(c, rv, cv, vld(c, acc, ai, lanes)))))
                return NULL;
        }
    }
    return lw_append(c, seq, lw_ax_loop(c, &k, TTH_LOOP_SERIAL, upd)) ? NULL : acc;
}

/* step 1, one tile: rows m0 .. m0 + rm, keys n0 .. n0 + rn vectors of `lanes` */
static tth_tstmt *scores_tile(at_k *a, tth_texpr *m0, int rm, tth_texpr *n0, int rn, int lanes)
{
    lw_ctx *c = a->c;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = tile_sum(a, &seq, "d", a->D, q_row, m0, rm, a->kt, a->kb, a->Lk, n0, rn, lanes);
    if (!acc)
        return NULL;
    for (int r = 0; r < rm; r++)
        for (int j = 0; j < rn; j++) {
            tth_texpr *col = lw_add(c, n0, lw_i(c, (int64_t)j * lanes));
            tth_texpr *v = lw_mul(c, vld(c, acc, lw_i(c, ((int64_t)r * rn + j) * lanes), lanes), lw_imm(c, TTH_F32, a->scale));
            if (a->mask)
                v = lw_add(c, v, mask_at(a, lw_add(c, m0, lw_i(c, r)), col, lanes));
            if (lw_append(c, &seq, vst(c, a->sb, lw_add(c, lw_i(c, (int64_t)r * a->Lk), col), v)))
                return NULL;
        }
    return tth_tir_allocate(c->m, acc, seq);
}

/* the columns of a row of Lk (or Dv) in groups: tiles of RN vectors, one vector at a time for
 * the rest, then a narrower vector; fn(a, start, vectors, lanes) makes each piece */
typedef tth_tstmt *(*piece_fn)(at_k *a, void *ctx, tth_texpr *n0, int rn, int lanes);
static tth_tstmt *columns(at_k *a, int64_t n, int RN, piece_fn fn, void *ctx)
{
    lw_ctx *c = a->c;
    int vl = a->vl;
    int64_t nvec = n / vl, ntile = nvec / RN, rest = nvec % RN;
    int tl = (int)(n % vl);
    tth_tstmt *seq = NULL;
    if (ntile) {
        lw_ax t;
        if (lw_ax_make(c, &t, "ct", ntile) ||
            lw_append(c, &seq, lw_ax_loop(c, &t, TTH_LOOP_SERIAL, fn(a, ctx, lw_mul(c, t.e, lw_i(c, (int64_t)RN * vl)), RN, vl))))
            return NULL;
    }
    if (rest && lw_append(c, &seq, fn(a, ctx, lw_i(c, ntile * RN * vl), (int)rest, vl)))
        return NULL;
    if (tl && lw_append(c, &seq, fn(a, ctx, lw_i(c, nvec * vl), 1, tl)))
        return NULL;
    return seq;
}

typedef struct blk {
    tth_texpr *m0;
    int rm;
} blk;

static tth_tstmt *scores_piece(at_k *a, void *ctx, tth_texpr *n0, int rn, int lanes)
{
    blk *b = ctx;
    return scores_tile(a, b->m0, b->rm, n0, rn, lanes);
}

/* step 2 for row r of the block: the maximum into sc[2r], e in place, the sum into sc[2r + 1] */
static tth_tstmt *softmax_row(at_k *a, int r)
{
    lw_ctx *c = a->c;
    int vl = a->vl;
    int64_t nv = a->Lk / vl;
    int tl = (int)(a->Lk % vl);
    tth_tbuffer *acc = NULL;
    tth_tstmt *seq = NULL;
    char name[32];
    snprintf(name, sizeof name, "aacc%u", c->nbufs++);
    int64_t one_vec = vl;
    acc = tth_tir_buffer(c->m, name, TTH_F32, 1, &one_vec, TTH_SCOPE_REGISTER);
    lw_ax j;
    if (!acc || lw_ax_make(c, &j, "j", nv))
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
    tth_texpr *row = lw_i(c, (int64_t)r * a->Lk), *jv = lw_add(c, row, lw_mul(c, j.e, lw_i(c, vl)));
    tth_texpr *tail = lw_add(c, row, lw_i(c, nv * vl)), *mi = lw_i(c, 2 * r), *si = lw_i(c, 2 * r + 1);
    tth_texpr *z = lw_i(c, 0);
    tth_texpr *hmax = vl == 1 ? tth_tir_load(c->m, acc, z) : tth_tir_intrin(c->m, TTH_TINTRIN_REDUCE_MAX, vld(c, acc, z, vl), NULL);
    tth_texpr *hsum = vl == 1 ? tth_tir_load(c->m, acc, z) : tth_tir_intrin(c->m, TTH_TINTRIN_REDUCE_ADD, vld(c, acc, z, vl), NULL);
    /* the maximum */
    tth_texpr *ninf = lw_imm(c, TTH_F32, -INFINITY);
    if (lw_append(c, &seq, vst(c, acc, z, vl == 1 ? ninf : tth_tir_broadcast(c->m, ninf, vl))) ||
        (nv && lw_append(c, &seq, lw_ax_loop(c, &j, TTH_LOOP_SERIAL,
                                             vst(c, acc, z, lw_bin(c, TTH_TBIN_MAX, vld(c, acc, z, vl), vld(c, a->sb, jv, vl)))))) ||
        lw_append(c, &seq, tth_tir_store(c->m, a->sc, mi, hmax)))
        return NULL;
    if (tl) {
        tth_texpr *tm = vld(c, a->sb, tail, tl);
        if (tl > 1)
            tm = tth_tir_intrin(c->m, TTH_TINTRIN_REDUCE_MAX, tm, NULL);
        if (lw_append(c, &seq, tth_tir_store(c->m, a->sc, mi, lw_bin(c, TTH_TBIN_MAX, tth_tir_load(c->m, a->sc, mi), tm))))
            return NULL;
    }
    /* e = exp(s - max), in place, and the sum */
    tth_texpr *m = tth_tir_load(c->m, a->sc, mi);
    if (lw_append(c, &seq, vst(c, acc, z, zeros(c, vl))))
        return NULL;
    if (nv) {
        int mark = lw_lets_open(c);
        tth_texpr *e = lw_bind(c, lw_math(c, LW_MATH_EXP, lw_sub(c, vld(c, a->sb, jv, vl), m)));
        tth_tstmt *st = NULL;
        if (lw_append(c, &st, vst(c, a->sb, jv, e)) || lw_append(c, &st, vst(c, acc, z, lw_add(c, vld(c, acc, z, vl), e))))
            return NULL;
        st = lw_lets_close(c, mark, st);
        if (lw_append(c, &seq, lw_ax_loop(c, &j, TTH_LOOP_SERIAL, st)))
            return NULL;
    }
    if (lw_append(c, &seq, tth_tir_store(c->m, a->sc, si, hsum)))
        return NULL;
    if (tl) {
        int mark = lw_lets_open(c);
        tth_texpr *e = lw_bind(c, lw_math(c, LW_MATH_EXP, lw_sub(c, vld(c, a->sb, tail, tl), m)));
        tth_tstmt *st = NULL;
        tth_texpr *es = tl == 1 ? e : tth_tir_intrin(c->m, TTH_TINTRIN_REDUCE_ADD, e, NULL);
        if (lw_append(c, &st, vst(c, a->sb, tail, e)) ||
            lw_append(c, &st, tth_tir_store(c->m, a->sc, si, lw_add(c, tth_tir_load(c->m, a->sc, si), es))))
            return NULL;
        if (lw_append(c, &seq, lw_lets_close(c, mark, st)))
            return NULL;
    }
    return tth_tir_allocate(c->m, acc, seq);
}

/* step 3, one tile: rows m0 .. m0 + rm, output columns n0 .. n0 + rn vectors of `lanes` */
static tth_tstmt *out_tile(at_k *a, tth_texpr *m0, int rm, tth_texpr *n0, int rn, int lanes)
{
    lw_ctx *c = a->c;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = tile_sum(a, &seq, "j", a->Lk, e_row, m0, rm, a->v, a->vb, a->Dv, n0, rn, lanes);
    if (!acc)
        return NULL;
    for (int r = 0; r < rm; r++) {
        tth_texpr *inv = lw_bin(c, TTH_TBIN_DIV, lw_imm(c, TTH_F32, 1.0), tth_tir_load(c->m, a->sc, lw_i(c, 2 * r + 1)));
        for (int q = 0; q < rn; q++) {
            tth_texpr *idx[TTH_MAX_RANK];
            for (int d = 0; d < a->nb; d++)
                idx[d] = a->bidx[d];
            idx[a->nb] = lw_add(c, m0, lw_i(c, r));
            tth_texpr *col = lw_add(c, n0, lw_i(c, (int64_t)q * lanes));
            idx[a->nb + 1] = lanes == 1 ? col : tth_tir_ramp(c->m, col, 1, lanes);
            tth_tstmt *st = lw_sink_store(c, a->s, 0, idx, lw_mul(c, vld(c, acc, lw_i(c, ((int64_t)r * rn + q) * lanes), lanes), inv));
            if (!st || lw_append(c, &seq, st))
                return NULL;
        }
    }
    return tth_tir_allocate(c->m, acc, seq);
}

static tth_tstmt *out_piece(at_k *a, void *ctx, tth_texpr *n0, int rn, int lanes)
{
    blk *b = ctx;
    return out_tile(a, b->m0, b->rm, n0, rn, lanes);
}

/* one block of rm query rows from m0: steps 1 to 3 */
static tth_tstmt *block(at_k *a, tth_texpr *m0, int rm)
{
    lw_ctx *c = a->c;
    blk b = {m0, rm};
    tth_tstmt *seq = NULL;
    if (lw_append(c, &seq, columns(a, a->Lk, (int)a->RN, scores_piece, &b)))
        return NULL;
    for (int r = 0; r < rm; r++)
        if (lw_append(c, &seq, softmax_row(a, r)))
            return NULL;
    if (lw_append(c, &seq, columns(a, a->Dv, (int)a->RN, out_piece, &b)))
        return NULL;
    return seq;
}

tth_tstmt *lw_attention(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    if (lw_check_call(c, call, lw_attention_check))
        return NULL;
    int ktr = (int)lw_attr_int(call, "keys_transposed", 0);
    at_k a = {.c = c, .s = s, .scale = lw_attr_float(call, "scale", 1.0)};
    a.qt = lw_ty(lw_arg(call, 0));
    const tth_ttype *kt0 = lw_ty(lw_arg(call, 1));
    a.vt = lw_ty(lw_arg(call, 2));
    a.ot = lw_ty(call);
    a.q = lw_buf(c, lw_arg(call, 0));
    tth_tbuffer *k = lw_buf(c, lw_arg(call, 1));
    a.v = lw_buf(c, lw_arg(call, 2));
    if (call->u.call.nargs > 3) {
        a.mask = lw_buf(c, lw_arg(call, 3));
        a.mt = lw_ty(lw_arg(call, 3));
        if (!a.mask)
            return NULL;
    }
    if (!a.q || !k || !a.v)
        return NULL;
    a.nb = a.ot->rank - 2;
    a.Lq = a.qt->shape[a.qt->rank - 2];
    a.D = a.qt->shape[a.qt->rank - 1];
    a.Lk = kt0->shape[kt0->rank - (ktr ? 1 : 2)];
    a.Dv = a.vt->shape[a.vt->rank - 1];
    a.vl = c->vec.f32_lanes > 1 ? c->vec.f32_lanes : 1;
    int regs = c->vec.registers > 0 ? c->vec.registers : 16;
    a.RM = a.vl > 1 ? (regs >= 32 ? 6 : 4) : 1;
    a.RN = a.vl > 1 ? (regs >= 32 ? 4 : 2) : 4;
    if (a.RM > a.Lq)
        a.RM = a.Lq;
    int64_t OB = lw_numel(a.ot->shape, a.nb), KB = lw_numel(kt0->shape, kt0->rank - 2);
    if (a.Lq == 0 || a.Dv == 0 || OB == 0)
        return tth_tir_seq(c->m, NULL, 0);
    tth_tstmt *seq = NULL;
    /* step 0: kt [KB][D][Lk] */
    if (ktr) {
        a.kt = k;
        a.kt_t = kt0;
    } else {
        int64_t n = KB * a.D * a.Lk;
        a.kt = lw_local(c, "kt", TTH_F32, 1, &n);
        lw_ax kb, j;
        if (!a.kt || lw_ax_make(c, &kb, "kb", KB) || lw_ax_make(c, &j, "kj", a.Lk))
            return NULL;
        lw_ax dd;
        if (lw_ax_make(c, &dd, "kd", a.D))
            return NULL;
        tth_texpr *src = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, kb.e, lw_i(c, a.Lk)), j.e), lw_i(c, a.D)), dd.e);
        tth_texpr *dst = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, kb.e, lw_i(c, a.D)), dd.e), lw_i(c, a.Lk)), j.e);
        tth_tstmt *cp = lw_ax_loop(c, &j, TTH_LOOP_SERIAL, tth_tir_store(c->m, a.kt, dst, tth_tir_load(c->m, k, src)));
        cp = lw_ax_loop(c, &dd, TTH_LOOP_SERIAL, cp);
        cp = lw_ax_loop(c, &kb, KB > 1 && KB * a.D * a.Lk >= LW_PARALLEL_MIN / 4 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, cp);
        if (!cp || lw_append(c, &seq, cp))
            return NULL;
        tth_ttype *kt_t = tth_arena_alloc(c->m->arena, sizeof *kt_t);
        if (!kt_t)
            return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
        *kt_t = *kt0;
        kt_t->shape[kt_t->rank - 2] = a.D;
        kt_t->shape[kt_t->rank - 1] = a.Lk;
        a.kt_t = kt_t;
    }
    /* the blocks of query rows of every batch: rows in blocks of balanced heights (as the matmul's) */
    int64_t nblk = (a.Lq + a.RM - 1) / a.RM, RM1 = (a.Lq + nblk - 1) / nblk, n1 = a.Lq - nblk * (RM1 - 1);
    char name[32];
    int64_t ns = RM1 * a.Lk, nsc = 2 * RM1;
    snprintf(name, sizeof name, "asc%u", c->nbufs++);
    a.sb = tth_tir_buffer(c->m, name, TTH_F32, 1, &ns, TTH_SCOPE_REGISTER);
    snprintf(name, sizeof name, "ast%u", c->nbufs++);
    a.sc = tth_tir_buffer(c->m, name, TTH_F32, 1, &nsc, TTH_SCOPE_REGISTER);
    if (!a.sb || !a.sc)
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
    for (int part = 0; part < 2; part++) {
        int64_t nbp = part == 0 ? n1 : nblk - n1;
        int rm = (int)(part == 0 ? RM1 : RM1 - 1);
        if (nbp == 0 || rm == 0)
            continue;
        lw_ax q;
        if (lw_ax_make(c, &q, "aq", OB * nbp))
            return NULL;
        tth_texpr *b = nbp > 1 ? lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nbp)) : q.e;
        tth_texpr *rb = nbp > 1 ? lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nbp)) : lw_i(c, 0);
        tth_tvar *vb = lw_var(c, "ab", TTH_I64);
        if (!vb)
            return NULL;
        tth_texpr *bb = lw_ref(c, vb);
        int64_t stride = 1;
        for (int d = a.nb - 1; d >= 0; d--) {
            a.bidx[d] = a.ot->shape[d] == 1 ? lw_i(c, 0)
                                            : lw_bin(c, TTH_TBIN_MOD, stride == 1 ? bb : lw_bin(c, TTH_TBIN_DIV, bb, lw_i(c, stride)),
                                                     lw_i(c, a.ot->shape[d]));
            stride *= a.ot->shape[d];
        }
        tth_tvar *vq = lw_var(c, "aqb", TTH_I64), *vk = lw_var(c, "akb", TTH_I64), *vv = lw_var(c, "avb", TTH_I64);
        if (!vq || !vk || !vv)
            return NULL;
        a.qb = lw_ref(c, vq);
        a.kb = lw_ref(c, vk);
        a.vb = lw_ref(c, vv);
        tth_texpr *m0 = lw_add(c, lw_i(c, part == 0 ? 0 : n1 * RM1), lw_mul(c, rb, lw_i(c, rm)));
        tth_tstmt *body = block(&a, m0, rm);
        body = lw_let(c, vq, batch_off(&a, a.qt, a.Lq * a.D),
                      lw_let(c, vk, batch_off(&a, a.kt_t, a.D * a.Lk), lw_let(c, vv, batch_off(&a, a.vt, a.Lk * a.Dv), body)));
        body = lw_let(c, vb, b, body);
        body = body ? tth_tir_allocate(c->m, a.sc, tth_tir_allocate(c->m, a.sb, body)) : NULL;
        int par = OB * nbp > 1 && OB * a.Lq * a.Lk * (a.D + a.Dv) >= LW_PARALLEL_MIN;
        if (lw_append(c, &seq, lw_ax_loop(c, &q, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body)))
            return NULL;
    }
    return a.kt != k && seq ? tth_tir_allocate(c->m, a.kt, seq) : seq;
}
