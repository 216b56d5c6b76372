/* lower_matmul.c: matmul (numpy semantics: batch dimensions broadcast, a 1-D operand gets a
 * unit dimension that is dropped from the result) and qnn.matmul (ONNX MatMulInteger: int32
 * accumulation of (a - a_zero_point[row]) * (b - b_zero_point[col])).
 *
 * One output row at a time:
 *   acc[j] = 0;  for k: av = a[b, i, k]; for j (vectorized): acc[j] += av * b[b, k, j]
 *   out[b, i, j] = epilogue(acc[j])
 * The row accumulates in the destination itself when the dtypes agree (then rows are
 * independent and the outermost loop is parallel), else in a LOCAL row. */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

typedef struct mm_p {
    int ra, rb, ro, nbatch;
    int64_t M, K, N;
    int quant;
    tth_dtype acc;
} mm_p;

static int mm_params(const tth_rexpr *call, mm_p *p, char *why, size_t len)
{
    const tth_ttype *a = lw_ty(lw_arg(call, 0)), *b = lw_ty(lw_arg(call, 1)), *o = lw_ty(call);
    const char *op = tth_op_name(call->u.call.op);
    memset(p, 0, sizeof *p);
    if (!a || !b || !o || a->rank < 1 || b->rank < 1) {
        snprintf(why, len, "%s: operands must have rank >= 1", op);
        return 0;
    }
    p->ra = a->rank;
    p->rb = b->rank;
    p->ro = o->rank;
    p->M = a->rank == 1 ? 1 : a->shape[a->rank - 2];
    p->K = a->shape[a->rank - 1];
    p->N = b->rank == 1 ? 1 : b->shape[b->rank - 1];
    p->nbatch = o->rank - (a->rank > 1) - (b->rank > 1);
    if (p->nbatch < 0 || (b->rank == 1 ? b->shape[0] : b->shape[b->rank - 2]) != p->K) {
        snprintf(why, len, "%s: inner dimensions do not agree", op);
        return 0;
    }
    p->quant = call->u.call.op == TTH_OP_QNN_MATMUL;
    p->acc = p->quant ? TTH_I32 : o->dtype;
    if (p->quant) {
        if ((a->dtype != TTH_I8 && a->dtype != TTH_U8 && a->dtype != TTH_I16) ||
            (b->dtype != TTH_I8 && b->dtype != TTH_U8 && b->dtype != TTH_I16)) {
            snprintf(why, len, "%s: operands must be int8, uint8 or int16", op);
            return 0;
        }
    } else if (o->dtype == TTH_BOOL) {
        snprintf(why, len, "%s: bool is not supported", op);
        return 0;
    }
    return 1;
}

int lw_matmul_check(const tth_rexpr *call, char *why, size_t len)
{
    mm_p p;
    return mm_params(call, &p, why, len);
}

/* flat offset of the batch part of an operand of rank r (matrix dims excluded: mdims of them) */
static tth_texpr *batch_base(lw_ctx *c, const tth_ttype *t, int mdims, const mm_p *p, lw_ax *bat)
{
    tth_texpr *base = lw_i(c, 0);
    int tb = t->rank - mdims; /* operand batch rank */
    int64_t stride = 1;
    for (int d = t->rank - 1; d >= tb; d--)
        stride *= t->shape[d];
    for (int d = tb - 1; d >= 0; d--) {
        int od = d + (p->nbatch - tb);
        if (t->shape[d] != 1 && od >= 0)
            base = lw_add(c, base, lw_mul(c, bat[od].e, lw_i(c, stride)));
        stride *= t->shape[d];
    }
    return base;
}

/* The register tile: RM rows times RN vectors of vl columns (6 x 4 with 32 vector registers,
 * 4 x 2 with 16), no more rows than R and no more vectors than N holds */
static void mm_tile_shape(const lw_ctx *c, int64_t R, int64_t N, int vl, int *RM, int *RN)
{
    int regs = c->vec.registers;
    *RM = regs >= 32 ? 6 : 4;
    *RN = regs >= 32 ? 4 : 2;
    if (*RM > R)
        *RM = (int)R;
    if (N / vl < *RN)
        *RN = (int)(N / vl);
}

/* ---- the register-tiled float32 kernel (docs/lowering.md, "Matmul kernel") ----
 * A [.., M, K] (batch dims flattened into R = rows) times B [K, N] (shared by every batch):
 * a tile is RM rows times RN vectors of vl columns, accumulated in a REGISTER buffer:
 *   for k: b_j = B[k, n0 + j*vl .. +vl] (contiguous); for r: acc[r][j] = fma(broadcast(A[m0+r, k]), b_j, acc[r][j])
 * then each accumulator goes through the epilogue and is stored as vl contiguous columns.
 * A constant B is packed at compile time into panels of PW = RN*vl columns, panel after panel,
 * each K rows of PW (the last one zero-filled): a tile then reads one contiguous stream instead
 * of K rows N apart. */

/* an input B of at least this many elements (1 MB of float32) is packed at run time */
#define MM_PACK_MIN (256 * 1024)

typedef struct mmt {
    lw_ctx *c;
    const lw_sink *s;
    tth_tbuffer *A, *B;
    int64_t R, K, N;
    int64_t PW;             /* panel width of a packed B, else 0 (B as it is: row k at k*N) */
    const tth_ttype *ot;
    int b_outer;            /* column tiles outermost: B larger than A (docs/lowering.md) */
    /* a batched B (one matrix per batch): the offsets of this batch's A and B matrices, and the
     * output's batch indices; R is then the rows of one batch (NULL / 0 when B is shared) */
    tth_texpr *abase, *bofs;
    tth_texpr *bidx[TTH_MAX_RANK];
    int nbidx;
    /* K in blocks (mm_cols_kb): a tile sums k in [k0, k0 + klen) (k0 NULL: all of K), starts
     * from the partial sums in cin (NULL: zeros) and stores them to cout (NULL: the output) */
    tth_texpr *k0;
    int64_t klen;
    tth_tbuffer *cin, *cout;
    /* int8 (docs/int8.md, "Matmul"): 0 for float32, else the dot product; A and B are then
     * words of four bytes along K (K counts words), and comp [N] int32 is added to every row */
    tth_tir_intrin_op dot;
    tth_tbuffer *comp;
} mmt;

/* acc + a * b: a multiply-add, or for int8 four of them in one dot product (a: the word of A,
 * broadcast) */
static tth_texpr *mm_step(mmt *t, tth_texpr *a, tth_texpr *b, tth_texpr *acc)
{
    lw_ctx *c = t->c;
    if (!t->dot)
        return lw_madd(c, a, b, acc);
    if (b->lanes > 1 && a->lanes == 1)
        a = tth_tir_broadcast(c->m, a, b->lanes);
    return tth_tir_intrin3(c->m, t->dot, acc, a, b);
}

static tth_dtype mm_acc_dtype(const mmt *t)
{
    return t->dot ? TTH_I32 : TTH_F32;
}

/* B [K, N] as wp[(n / PW)*K*PW + k*PW + n % PW] (zeros past N) */
static tth_tbuffer *mm_pack(lw_ctx *c, const tth_tensor *b, int64_t K, int64_t N, int64_t PW)
{
    int64_t npanel = (N + PW - 1) / PW;
    tth_tensor *pk = lw_packed_new(c, npanel * K * PW);
    if (!pk)
        return NULL;
    float *dst = pk->data;
    const float *src = b->data;
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            dst[(n / PW) * K * PW + k * PW + n % PW] = src[k * N + n];
    return lw_packed_const(c, pk);
}

/* The same packing at run time, for a B that is an input: B [K, N] into the LOCAL wp, (panel, k)
 * pairs in parallel when par, each copying its PW columns as vectors (the last panel's columns
 * past N are never read by a tile, so they are left as they are). */
static tth_tstmt *mm_pack_loop(lw_ctx *c, tth_tbuffer *B, tth_tbuffer *wp, int64_t K, int64_t N, int64_t PW, int vl,
                               int par)
{
    int64_t nfull = N / PW, rem = N % PW;
    tth_tstmt *seq = NULL;
    for (int part = 0; part < 2; part++) {
        int64_t np = part == 0 ? nfull : (rem ? 1 : 0), cols = part == 0 ? PW : rem;
        if (np == 0)
            continue;
        lw_ax q;
        if (lw_ax_make(c, &q, "pq", np * K))
            return NULL;
        /* panel = nfull*part + q / K, k = q % K; destination (panel*K + k)*PW */
        tth_texpr *panel = lw_add(c, lw_i(c, part ? nfull : 0), part ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, K)));
        tth_texpr *k = part ? q.e : lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, K));
        tth_texpr *src = lw_add(c, lw_mul(c, k, lw_i(c, N)), lw_mul(c, panel, lw_i(c, PW)));
        tth_texpr *dst = lw_mul(c, lw_add(c, lw_mul(c, panel, lw_i(c, K)), k), lw_i(c, PW));
        tth_tstmt *body = NULL;
        for (int64_t j = 0; j < cols; j += vl) {
            int lanes = (int)(cols - j < vl ? cols - j : vl);
            tth_tstmt *st = tth_tir_vstore(c->m, wp, lw_add(c, dst, lw_i(c, j)),
                                           tth_tir_vload(c->m, B, lw_add(c, src, lw_i(c, j)), lanes, 0), 0);
            if (!st || lw_append(c, &body, st))
                return NULL;
        }
        body = lw_ax_loop(c, &q, par && np * K > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
        if (!body || lw_append(c, &seq, body))
            return NULL;
    }
    return seq;
}

/* bbase: offset of B[0, n0] (packed: in its panel); row k of B is k*N (packed: k*PW) further */
/* A tile of one row (a matrix-vector product: a fully connected layer of batch 1, a recurrent
 * step) reads B once with nothing to reuse it: it is bound by how fast B streams in. One stream
 * through K leaves most of the memory system idle, so the row runs KSPLIT parts of K at once,
 * each into accumulators of its own, added at the end: KSPLIT streams of B (AlexNet's 9216 x
 * 4096 layer, 151 MB from memory: 29 -> 36 GB/s on the Zen 5 machine). */
#define KSPLIT 4
static tth_tstmt *mm_row_tile(mmt *t, tth_texpr *m0, tth_texpr *n0, tth_texpr *bbase, int RN, int vl);

/* the output store of tile row m0 + r, accumulator vectors acc[(r*RN + j)*vl ..] */
static int mm_store_row(mmt *t, tth_tbuffer *acc, tth_texpr *m0, int r, tth_texpr *n0, int RN, int vl, tth_tstmt **seq)
{
    lw_ctx *c = t->c;
    const tth_ttype *ot = t->ot;
    /* the output index of row m0 + r: its batch dims and M, then the columns */
    tth_texpr *idx[TTH_MAX_RANK], *row = lw_add(c, m0, lw_i(c, r));
    if (t->nbidx) { /* a batched B: the batch's indices, then the row */
        for (int d = 0; d < t->nbidx; d++)
            idx[d] = t->bidx[d];
        idx[ot->rank - 2] = row;
    }
    for (int d = ot->rank - 2; d >= 0 && !t->nbidx; d--) {
        idx[d] = ot->shape[d] == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, row, lw_i(c, ot->shape[d]));
        row = lw_bin(c, TTH_TBIN_DIV, row, lw_i(c, ot->shape[d]));
    }
    for (int j = 0; j < RN; j++) {
        tth_texpr *col = lw_add(c, n0, lw_i(c, (int64_t)j * vl));
        idx[ot->rank - 1] = vl > 1 ? tth_tir_ramp(c->m, col, 1, vl) : col;
        tth_texpr *val = tth_tir_vload(c->m, acc, lw_i(c, ((int64_t)r * RN + j) * vl), vl, 0);
        if (t->comp)
            val = lw_add(c, val, vl > 1 ? tth_tir_vload(c->m, t->comp, col, vl, 0) : tth_tir_load(c->m, t->comp, col));
        tth_tstmt *st = lw_sink_store(c, t->s, 0, idx, val);
        if (!st || lw_append(c, seq, st))
            return -1;
    }
    return 0;
}

/* The tile's accumulators from (load) or to (else) the partial sums buf [R, N] of the blocks of K */
static int mm_partials(mmt *t, tth_tbuffer *acc, tth_tbuffer *buf, int load, tth_texpr *m0, tth_texpr *n0, int RM,
                       int RN, int vl, tth_tstmt **seq)
{
    lw_ctx *c = t->c;
    for (int r = 0; r < RM; r++)
        for (int j = 0; j < RN; j++) {
            tth_texpr *bi = lw_add(c, lw_mul(c, lw_add(c, m0, lw_i(c, r)), lw_i(c, t->N)), lw_add(c, n0, lw_i(c, (int64_t)j * vl)));
            tth_texpr *ti = lw_i(c, ((int64_t)r * RN + j) * vl);
            tth_tstmt *st = load ? tth_tir_vstore(c->m, acc, ti, tth_tir_vload(c->m, buf, bi, vl, 0), 0)
                                 : tth_tir_vstore(c->m, buf, bi, tth_tir_vload(c->m, acc, ti, vl, 0), 0);
            if (!st || lw_append(c, seq, st))
                return -1;
        }
    return 0;
}

static tth_tstmt *mm_tile(mmt *t, tth_texpr *m0, tth_texpr *n0, tth_texpr *bbase, int RM, int RN, int vl)
{
    lw_ctx *c = t->c;
    if (RM == 1 && vl > 1 && !t->k0 && t->K >= 64 * KSPLIT && KSPLIT * RN + RN + 1 <= c->vec.registers)
        return mm_row_tile(t, m0, n0, bbase, RN, vl);
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = lw_reg_tile_of(c, mm_acc_dtype(t), (int64_t)RM * RN, vl, &seq);
    if (!acc)
        return NULL;
    if (t->cin && mm_partials(t, acc, t->cin, 1, m0, n0, RM, RN, vl, &seq)) /* the blocks of K before */
        return NULL;
    lw_ax ak;
    if (lw_ax_make(c, &ak, "k", t->k0 ? t->klen : t->K))
        return NULL;
    tth_texpr *kk = t->k0 ? lw_add(c, t->k0, ak.e) : ak.e;
    tth_tvar *bv[8];
    for (int j = 0; j < RN; j++) 
        if (!(bv[j] = lw_var_vec(c, "b", mm_acc_dtype(t), vl)))
            return NULL;
    tth_tstmt *upd = NULL;
    for (int r = 0; r < RM; r++) {
        tth_texpr *ai = lw_add(c, lw_mul(c, lw_add(c, m0, lw_i(c, r)), lw_i(c, t->K)), kk);
        tth_texpr *av = tth_tir_load(c->m, t->A, t->abase ? lw_add(c, t->abase, ai) : ai);
        for (int j = 0; j < RN; j++) {
            tth_texpr *ti = lw_i(c, ((int64_t)r * RN + j) * vl);
            tth_texpr *f = mm_step(t, av, lw_ref(c, bv[j]), tth_tir_vload(c->m, acc, ti, vl, 0));
            if (lw_append(c, &upd, tth_tir_vstore(c->m, acc, ti, f, 0)))
                return NULL;
        }
    }
    tth_tstmt *inner = upd;
    tth_texpr *bb0 = t->bofs ? lw_add(c, t->bofs, bbase) : bbase;
    for (int j = RN - 1; j >= 0; j--)
        inner = lw_let(c, bv[j], tth_tir_vload(c->m, t->B, lw_add(c, lw_add(c, lw_mul(c, kk, lw_i(c, t->PW ? t->PW : t->N)), bb0),
                                                                  lw_i(c, (int64_t)j * vl)), vl, 0), inner);
    inner = lw_ax_loop(c, &ak, TTH_LOOP_SERIAL, inner);
    if (!inner || lw_append(c, &seq, inner))
        return NULL;
    if (t->cout) /* partial sums, for the next block of K */
        return mm_partials(t, acc, t->cout, 0, m0, n0, RM, RN, vl, &seq) ? NULL : tth_tir_allocate(c->m, acc, seq);
    for (int r = 0; r < RM; r++)
        if (mm_store_row(t, acc, m0, r, n0, RN, vl, &seq))
            return NULL;
    return tth_tir_allocate(c->m, acc, seq);
}

static tth_tstmt *mm_row_tile(mmt *t, tth_texpr *m0, tth_texpr *n0, tth_texpr *bbase, int RN, int vl)
{
    lw_ctx *c = t->c;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = lw_reg_tile_of(c, mm_acc_dtype(t), (int64_t)KSPLIT * RN, vl, &seq);
    if (!acc)
        return NULL;
    int64_t KS = t->K / KSPLIT, tail = t->K - KSPLIT * KS;
    tth_texpr *bb0 = t->bofs ? lw_add(c, t->bofs, bbase) : bbase;
    tth_texpr *arow = lw_mul(c, m0, lw_i(c, t->K));
    if (t->abase)
        arow = lw_add(c, t->abase, arow);
    int64_t bstride = t->PW ? t->PW : t->N;
    for (int part = 0; part < 2; part++) {
        int64_t n = part == 0 ? KS : tail, nsplit = part == 0 ? KSPLIT : 1;
        if (n == 0)
            continue;
        lw_ax ak;
        if (lw_ax_make(c, &ak, "k", n))
            return NULL;
        tth_tstmt *upd = NULL;
        for (int64_t sp = 0; sp < nsplit; sp++) {
            /* split sp: row k + sp*KS (the tail: the rows after the splits, into split 0) */
            tth_texpr *kk = lw_add(c, ak.e, lw_i(c, part == 0 ? sp * KS : KSPLIT * KS));
            tth_texpr *av = tth_tir_load(c->m, t->A, lw_add(c, arow, kk));
            for (int j = 0; j < RN; j++) {
                tth_texpr *ai = lw_i(c, (sp * RN + j) * vl);
                tth_texpr *bv = tth_tir_vload(c->m, t->B, lw_add(c, lw_add(c, lw_mul(c, kk, lw_i(c, bstride)), bb0),
                                                                  lw_i(c, (int64_t)j * vl)), vl, 0);
                tth_texpr *f = mm_step(t, av, bv, tth_tir_vload(c->m, acc, ai, vl, 0));
                if (lw_append(c, &upd, tth_tir_vstore(c->m, acc, ai, f, 0)))
                    return NULL;
            }
        }
        tth_tstmt *loop = lw_ax_loop(c, &ak, TTH_LOOP_SERIAL, upd);
        if (!loop || lw_append(c, &seq, loop))
            return NULL;
    }
    /* the splits' sums into split 0, in order */
    for (int j = 0; j < RN; j++) {
        tth_texpr *sum = tth_tir_vload(c->m, acc, lw_i(c, (int64_t)j * vl), vl, 0);
        for (int sp = 1; sp < KSPLIT; sp++)
            sum = lw_add(c, sum, tth_tir_vload(c->m, acc, lw_i(c, ((int64_t)sp * RN + j) * vl), vl, 0));
        if (lw_append(c, &seq, tth_tir_vstore(c->m, acc, lw_i(c, (int64_t)j * vl), sum, 0)))
            return NULL;
    }
    if (mm_store_row(t, acc, m0, 0, n0, RN, vl, &seq))
        return NULL;
    return tth_tir_allocate(c->m, acc, seq);
}

/* Rows in blocks of balanced heights: as few blocks as RM allows, nb[0] of rm[0] rows from row
 * 0 and nb[1] of rm[0] - 1 from row first[1] (49 rows: four of 6 and five of 5, not eight of 6
 * and a single row, whose tile does a sixth of the work per load of B) */
typedef struct mm_blocks {
    int64_t nb[2], first[2];
    int rm[2];
} mm_blocks;
static mm_blocks mm_row_blocks(int64_t R, int RM)
{
    int64_t nblk = (R + RM - 1) / RM, RM1 = (R + nblk - 1) / nblk, n1 = R - nblk * (RM1 - 1);
    return (mm_blocks){.nb = {n1, nblk - n1}, .first = {0, n1 * RM1}, .rm = {(int)RM1, (int)RM1 - 1}};
}

/* every row block of columns [n0, n0 + ncol*RN*vl) in ncol tiles of RN vectors (ncol loop) */
static tth_tstmt *mm_cols(mmt *t, int64_t col0, int64_t ncol, int RN, int vl, int RM, int par)
{
    lw_ctx *c = t->c;
    tth_tstmt *seq = NULL;
    mm_blocks b = mm_row_blocks(t->R, RM);
    for (int part = 0; part < 2; part++) {
        int64_t nb = b.nb[part];
        int rm = b.rm[part];
        if (nb * ncol == 0 || rm == 0)
            continue;
        lw_ax q;
        if (lw_ax_make(c, &q, "q", nb * ncol))
            return NULL;
        /* (row block, column tile) pairs: with B outermost a column tile's panel of B stays in the
         * cache while every row block passes over it, else a row block's rows of A do */
        tth_texpr *rb, *cb;
        if (t->b_outer && nb > 1) {
            rb = ncol > 1 ? lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nb)) : q.e;
            cb = ncol > 1 ? lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nb)) : lw_i(c, 0);
        } else {
            rb = ncol > 1 ? (nb > 1 ? lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, ncol)) : lw_i(c, 0)) : q.e;
            cb = ncol > 1 ? (nb > 1 ? lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, ncol)) : q.e) : lw_i(c, 0);
        }
        tth_texpr *m0 = lw_add(c, lw_i(c, b.first[part]), lw_mul(c, rb, lw_i(c, rm)));
        tth_texpr *n0 = lw_add(c, lw_i(c, col0), lw_mul(c, cb, lw_i(c, (int64_t)RN * vl)));
        /* packed: the tiles of whole panels step by a panel; the narrower ones all lie in the
         * last panel, from col0 on */
        int64_t PW = t->PW;
        tth_texpr *bb = !PW ? n0
                            : lw_add(c, lw_i(c, col0 / PW * t->K * PW + col0 % PW),
                                     lw_mul(c, cb, lw_i(c, RN * vl == PW ? t->K * PW : (int64_t)RN * vl)));
        tth_tstmt *tl = mm_tile(t, m0, n0, bb, rm, RN, vl);
        tl = lw_ax_loop(c, &q, par && nb * ncol > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, tl);
        if (!tl || lw_append(c, &seq, tl))
            return NULL;
    }
    return seq;
}

/* ---- K in blocks, for a B larger than A (docs/lowering.md, "Blocks of K") ----
 * With column tiles outermost, a tile still streams its panel's K x PW floats from L2 (768 x 64:
 * 196 KB, four cache lines per step of K for 24 FMAs), and a 197 x 768 x 3072 product ran at
 * 78 % of the FMA peak. Cut into blocks of about MM_KC steps, a panel's block (32 KB) stays in
 * L1 while every row block passes over it; tiles carry their partial sums from block to block
 * in cb [R, N] (the workspace), and the last block's tiles store through the epilogue. The
 * panels are the parallel loop; in each: the first block (from zeros), the middle ones (a
 * loop), the last one. */
#define MM_KC 128

/* every row block of the columns of tile n0 (serial loops, balanced heights as mm_cols) */
static tth_tstmt *mm_rows(mmt *t, tth_texpr *n0, tth_texpr *bb, int RN, int vl, int RM)
{
    lw_ctx *c = t->c;
    tth_tstmt *seq = NULL;
    mm_blocks b = mm_row_blocks(t->R, RM);
    for (int part = 0; part < 2; part++) {
        if (b.nb[part] == 0 || b.rm[part] == 0)
            continue;
        lw_ax q;
        if (lw_ax_make(c, &q, "r", b.nb[part]))
            return NULL;
        tth_texpr *m0 = lw_add(c, lw_i(c, b.first[part]), lw_mul(c, q.e, lw_i(c, b.rm[part])));
        tth_tstmt *tl = lw_ax_loop(c, &q, TTH_LOOP_SERIAL, mm_tile(t, m0, n0, bb, b.rm[part], RN, vl));
        if (!tl || lw_append(c, &seq, tl))
            return NULL;
    }
    return seq;
}

static tth_tstmt *mm_cols_kb(mmt *t, tth_tbuffer *cb, int64_t ncol, int RN, int vl, int RM, int par)
{
    lw_ctx *c = t->c;
    int64_t nkb = (t->K + MM_KC - 1) / MM_KC, ks = (t->K + nkb - 1) / nkb, last = t->K - (nkb - 1) * ks;
    lw_ax q;
    if (lw_ax_make(c, &q, "q", ncol))
        return NULL;
    tth_texpr *n0 = lw_mul(c, q.e, lw_i(c, t->PW)), *bb = lw_mul(c, q.e, lw_i(c, t->K * t->PW));
    tth_tstmt *body = NULL;
    for (int phase = 0; phase < 3; phase++) {
        if (phase == 1 && nkb < 3)
            continue;
        lw_ax kb = {0};
        if (phase == 1 && lw_ax_make(c, &kb, "kb", nkb - 2))
            return NULL;
        t->k0 = phase == 0 ? lw_i(c, 0) : phase == 2 ? lw_i(c, (nkb - 1) * ks) : lw_mul(c, lw_add(c, kb.e, lw_i(c, 1)), lw_i(c, ks));
        t->klen = phase == 2 ? last : ks;
        t->cin = phase == 0 ? NULL : cb;
        t->cout = phase == 2 ? NULL : cb;
        tth_tstmt *rows = mm_rows(t, n0, bb, RN, vl, RM);
        if (phase == 1)
            rows = lw_ax_loop(c, &kb, TTH_LOOP_SERIAL, rows);
        if (!rows || lw_append(c, &body, rows))
            return NULL;
    }
    t->k0 = NULL;
    t->klen = 0;
    t->cin = t->cout = NULL;
    return lw_ax_loop(c, &q, par && ncol > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
}

/* The tiles of t over all of A's rows and B's columns, appended to seq: B's panels outermost when
 * B is the larger, K in blocks when that leaves work for the tiles, then the columns past the
 * last whole tile and the last vector. */
static tth_tstmt *mm_run(mmt *t, tth_tstmt *seq, int RM, int RN, int vl, int par)
{
    lw_ctx *c = t->c;
    tth_tstmt *part;
    /* B larger than A (a transformer's projections: 768 x 3072 weights for 197 rows): each panel
     * of B is read from memory once and kept in L2 while every row block passes over it; A, the
     * smaller, is read again from L2 for each panel. (Rows outermost, a 197 x 768 x 3072 product
     * streamed the 9.4 MB of B from L3 once per row block: 33 times.) */
    t->b_outer = t->PW && t->N > t->R;
    int64_t nvec = t->N / vl, ntile = nvec / RN, restv = nvec % RN, tail = t->N % vl;
    /* K in blocks: B larger than A, blocks of K that leave work for the tiles, enough row blocks
     * to reuse a block of B, and panels for every core */
    tth_tbuffer *cb = NULL;
    if (t->b_outer && t->K >= 2 * MM_KC && t->R >= 4 * RM && ntile >= 8) {
        int64_t n = t->R * t->N;
        if (!(cb = lw_local(c, "cb", mm_acc_dtype(t), 1, &n)))
            return NULL;
    }
    if (ntile && (!(part = cb ? mm_cols_kb(t, cb, ntile, RN, vl, RM, par) : mm_cols(t, 0, ntile, RN, vl, RM, par)) ||
                  lw_append(c, &seq, part)))
        return NULL;
    if (restv && (!(part = mm_cols(t, ntile * RN * vl, 1, (int)restv, vl, RM, par)) || lw_append(c, &seq, part)))
        return NULL;
    if (tail && (!(part = mm_cols(t, nvec * vl, tail, 1, 1, RM, par)) || lw_append(c, &seq, part)))
        return NULL;
    if (cb && seq)
        seq = tth_tir_allocate(c->m, cb, seq);
    return seq;
}

/* What the float32 tiled kernels need: a float32 matmul of A of rank 2 or more on a vector target,
 * at least a vector of columns */
static int mm_tiles_fit(const lw_ctx *c, const tth_rexpr *call)
{
    mm_p p;
    char why[256];
    if (call->u.call.op != TTH_OP_MATMUL || !mm_params(call, &p, why, sizeof why))
        return 0;
    const tth_ttype *at = lw_ty(lw_arg(call, 0)), *bt = lw_ty(lw_arg(call, 1)), *ot = lw_ty(call);
    int vl = c->vec.f32_lanes;
    return !p.quant && vl >= 4 && at->dtype == TTH_F32 && bt->dtype == TTH_F32 && ot->dtype == TTH_F32 &&
           at->rank >= 2 && p.N >= vl;
}

int lw_matmul_tiled_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    if (!mm_tiles_fit(c, call))
        return 0;
    const tth_ttype *at = lw_ty(lw_arg(call, 0)), *bt = lw_ty(lw_arg(call, 1)), *ot = lw_ty(call);
    return bt->rank == 2 && ot->rank == at->rank;
}

tth_tstmt *lw_matmul_tiled(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    mm_p pp;
    char why[256];
    if (!mm_params(call, &pp, why, sizeof why))
        return lw_fail(c, TTH_EINTERNAL, call, "matmul/register-tiled does not apply"), NULL;
    const mm_p *p = &pp;
    const tth_ttype *at = lw_ty(lw_arg(call, 0)), *ot = lw_ty(call);
    int vl = c->vec.f32_lanes;
    const tth_rexpr *barg = lw_arg(call, 1);
    mmt t = {c, s, lw_buf(c, lw_arg(call, 0)), NULL, 0, p->K, p->N, 0, ot, 0, NULL, NULL, {0}, 0, NULL, 0, NULL, NULL, 0, NULL};
    t.R = lw_numel(at->shape, at->rank) / p->K;
    int RM, RN;
    mm_tile_shape(c, t.R, p->N, vl, &RM, &RN);
    /* split among the cores when the work is large, or when a constant B is larger than a core's
     * share of cache: each core then keeps its own columns of B from one call to the next (a
     * recurrent layer's step, 256 x 768 floats, read again at every step) */
    int par = t.R * p->N * p->K >= LW_PARALLEL_MIN ||
              (barg->kind == TTH_REXPR_CONST && p->K * p->N * 4 >= LW_PARALLEL_WEIGHT_BYTES);
    tth_tbuffer *wp = NULL; /* B packed at run time */
    tth_tstmt *seq = NULL;
    if (barg->kind == TTH_REXPR_CONST) {
        t.PW = (int64_t)RN * vl;
        t.B = mm_pack(c, barg->u.constant.value, p->K, p->N, t.PW);
    } else if (p->K * p->N >= MM_PACK_MIN && t.R >= 16) {
        /* an input B of more than L2 holds, read by many rows: rows N apart thrash the cache
         * (N = 2048: 30 GFLOP/s instead of 100 on one Zen 4 core), so pack it first */
        t.PW = (int64_t)RN * vl;
        int64_t n = (p->N + t.PW - 1) / t.PW * t.PW * p->K;
        tth_tbuffer *B = lw_buf(c, barg);
        wp = B ? lw_local(c, "bp", TTH_F32, 1, &n) : NULL;
        tth_tstmt *pk = wp ? mm_pack_loop(c, B, wp, p->K, p->N, t.PW, vl, par) : NULL;
        if (!pk || lw_append(c, &seq, pk))
            return NULL;
        t.B = wp;
    } else {
        t.B = lw_buf(c, barg);
    }
    if (!t.A || !t.B)
        return NULL;
    seq = mm_run(&t, seq, RM, RN, vl, par);
    return wp && seq ? tth_tir_allocate(c->m, wp, seq) : seq;
}

/* ---- strategy qnn.matmul/int8-dot (docs/int8.md, "Matmul") ----
 * The register-tiled kernel above on words of four bytes along K: A's rows are copied into words
 * (each byte plus koff, the offset into the dot product's first operand range; the bytes past K
 * hold the zero point), B is packed at compile time into panels of words, and each step of the
 * tile is a dot product of A's word (broadcast) with a vector of B's words. comp[n] =
 * -(a_zp + koff) * sum over k of B[k, n] turns sum (a + koff) * b into sum (a - a_zp) * b. */

/* a qnn.matmul the kernel computes; *azp: A's zero point */
static int qmm_params(const lw_ctx *c, const tth_rexpr *call, mm_p *p, int64_t *azp)
{
    char why[256];
    if (!c->dot || call->u.call.op != TTH_OP_QNN_MATMUL || !mm_params(call, p, why, sizeof why))
        return 0;
    const tth_rexpr *a = lw_arg(call, 0), *b = lw_arg(call, 1), *az = lw_arg(call, 2), *bz = lw_arg(call, 3);
    const tth_ttype *at = lw_ty(a), *bt = lw_ty(b), *ot = lw_ty(call);
    return (at->dtype == TTH_I8 || at->dtype == TTH_U8) && bt->dtype == TTH_I8 && ot->dtype == TTH_I32 &&
           at->rank >= 2 && bt->rank == 2 && ot->rank == at->rank && b->kind == TTH_REXPR_CONST &&
           p->N >= c->vec.f32_lanes && lw_dot_zero_points(az, bz, azp);
}

int lw_qmatmul_dot_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    mm_p p;
    int64_t azp;
    return qmm_params(c, call, &p, &azp);
}

/* B [K, N] int8 as words: wp[(n / PW)*K4*PW + k4*PW + n % PW] holds B[4*k4 .. 4*k4 + 3, n] (zeros
 * past K and N); comp[n] = -(azp + koff) * sum of column n */
static tth_tbuffer *qmm_pack(lw_ctx *c, const tth_tensor *b, int64_t K, int64_t N, int64_t PW, int64_t azp,
                             int64_t koff, tth_tbuffer **comp)
{
    int64_t K4 = (K + 3) / 4, npanel = (N + PW - 1) / PW;
    tth_tensor *pk = lw_table_new(c, TTH_I32, npanel * K4 * PW, NULL), *cp = lw_table_new(c, TTH_I32, N, NULL);
    if (!pk || !cp) {
        tth_tensor_unref(pk);
        tth_tensor_unref(cp);
        return NULL;
    }
    uint32_t *dst = pk->data;
    int32_t *cs = cp->data;
    const int8_t *src = b->data;
    for (int64_t n = 0; n < N; n++) {
        int64_t sum = 0;
        for (int64_t k = 0; k < K; k++) {
            int8_t v = src[k * N + n];
            sum += v;
            dst[(n / PW) * K4 * PW + (k / 4) * PW + n % PW] |= (uint32_t)(uint8_t)v << (8 * (k % 4));
        }
        cs[n] = lw_dot_comp(azp, koff, sum);
    }
    if (!(*comp = lw_packed_const(c, cp))) {
        tth_tensor_unref(pk);
        return NULL;
    }
    return lw_packed_const(c, pk);
}

/* A [R, K] into words Aq [R, K4]: rows in parallel when large, vectors of vl words (four
 * loads of stride 4 each), then the last K % 4 bytes with the zero point after them */
static tth_tstmt *qmm_words(lw_ctx *c, tth_tbuffer *A, tth_tbuffer *Aq, int64_t R, int64_t K, int64_t koff,
                            int64_t azp, int vl, int par)
{
    int64_t K4 = (K + 3) / 4, full = K / 4;
    lw_ax r;
    if (lw_ax_make(c, &r, "ar", R))
        return NULL;
    tth_tstmt *body = NULL;
    /* pieces: [0, full/vl*vl) in vectors, the rest of the whole words one vector, the last word */
    int64_t nv = full / vl, rest = full % vl;
    for (int part = 0; part < 3; part++) {
        int64_t cnt = part == 0 ? nv : 1, w0 = part == 0 ? 0 : part == 1 ? nv * vl : full;
        int lanes = part == 0 ? vl : part == 1 ? (int)rest : 1;
        int nb = part == 2 ? (int)(K % 4) : 4;
        if (cnt == 0 || lanes == 0 || (part == 2 && K4 == full))
            continue;
        lw_ax j;
        if (lw_ax_make(c, &j, "aw", cnt))
            return NULL;
        tth_texpr *wi = lw_add(c, lw_i(c, w0), lw_mul(c, j.e, lw_i(c, vl)));
        tth_texpr *bytes[4] = {NULL, NULL, NULL, NULL};
        for (int b = 0; b < nb; b++) {
            tth_texpr *at = lw_add(c, lw_mul(c, r.e, lw_i(c, K)), lw_add(c, lw_mul(c, wi, lw_i(c, 4)), lw_i(c, b)));
            bytes[b] = tth_tir_load(c->m, A, lanes > 1 ? tth_tir_ramp(c->m, at, 4, lanes) : at);
        }
        tth_texpr *val = lw_dot_word(c, bytes, koff, azp + koff, lanes);
        if (!val)
            return NULL;
        tth_texpr *to = lw_add(c, lw_mul(c, r.e, lw_i(c, K4)), wi);
        tth_tstmt *st = lanes > 1 ? tth_tir_vstore(c->m, Aq, to, val, 0) : tth_tir_store(c->m, Aq, to, val);
        if (lw_append(c, &body, lw_ax_loop(c, &j, TTH_LOOP_SERIAL, st)))
            return NULL;
    }
    return lw_ax_loop(c, &r, par && R > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
}

tth_tstmt *lw_qmatmul_dot(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    mm_p p;
    int64_t azp;
    if (!qmm_params(c, call, &p, &azp))
        return lw_fail(c, TTH_EINTERNAL, call, "qnn.matmul/int8-dot does not apply"), NULL;
    const tth_ttype *at = lw_ty(lw_arg(call, 0)), *ot = lw_ty(call);
    int vl = c->vec.f32_lanes;
    int64_t K4 = (p.K + 3) / 4, R = lw_numel(at->shape, at->rank) / p.K;
    mmt t = {c, s, NULL, NULL, R, K4, p.N, 0, ot, 0, NULL, NULL, {0}, 0, NULL, 0, NULL, NULL, (tth_tir_intrin_op)c->dot, NULL};
    int RM, RN;
    mm_tile_shape(c, t.R, p.N, vl, &RM, &RN);
    int par = t.R * p.N * p.K >= LW_PARALLEL_MIN_DOT;
    int64_t koff = lw_dot_koff(c->dot, at->dtype);
    t.PW = (int64_t)RN * vl;
    t.B = qmm_pack(c, lw_arg(call, 1)->u.constant.value, p.K, p.N, t.PW, azp, koff, &t.comp);
    tth_tbuffer *A = lw_buf(c, lw_arg(call, 0));
    int64_t nw = R * K4;
    tth_tbuffer *Aq = lw_local(c, "aq", TTH_I32, 1, &nw);
    if (!t.B || !A || !Aq)
        return NULL;
    t.A = Aq;
    tth_tstmt *seq = qmm_words(c, A, Aq, R, p.K, koff, azp, vl, par);
    if (!seq)
        return NULL;
    seq = mm_run(&t, seq, RM, RN, vl, par);
    return seq ? tth_tir_allocate(c->m, Aq, seq) : NULL;
}

/* ---- strategy matmul/batched-tiled: a B of its own per batch (attention's Q K^T and A V) ----
 * The register tiles of the kernel above over each batch's matrices, B read in place (row k of
 * batch b at its batch offset + k*N); batch dimensions broadcast as numpy's do. The batches are
 * the parallel loop. */
int lw_matmul_batched_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    if (!mm_tiles_fit(c, call))
        return 0;
    const tth_ttype *at = lw_ty(lw_arg(call, 0)), *bt = lw_ty(lw_arg(call, 1)), *ot = lw_ty(call);
    return bt->rank >= 3 && ot->rank == (at->rank > bt->rank ? at->rank : bt->rank);
}

tth_tstmt *lw_matmul_batched(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    mm_p p;
    char why[256];
    if (!mm_params(call, &p, why, sizeof why))
        return lw_fail(c, TTH_EINTERNAL, call, "matmul/batched-tiled does not apply"), NULL;
    const tth_ttype *at = lw_ty(lw_arg(call, 0)), *bt = lw_ty(lw_arg(call, 1)), *ot = lw_ty(call);
    int vl = c->vec.f32_lanes, nb = p.nbatch;
    mmt t = {c, s, lw_buf(c, lw_arg(call, 0)), lw_buf(c, lw_arg(call, 1)), p.M, p.K, p.N, 0, ot, 0, NULL, NULL, {0}, 0, NULL, 0, NULL, NULL, 0, NULL};
    if (!t.A || !t.B)
        return NULL;
    int64_t OB = lw_numel(ot->shape, nb);
    lw_ax qb, bat[TTH_MAX_RANK];
    if (lw_ax_make(c, &qb, "bq", OB))
        return NULL;
    int64_t stride = 1;
    for (int d = nb - 1; d >= 0; d--) {
        bat[d].v = NULL;
        bat[d].n = ot->shape[d];
        bat[d].e = ot->shape[d] == 1 ? lw_i(c, 0)
                                     : lw_bin(c, TTH_TBIN_MOD, stride == 1 ? qb.e : lw_bin(c, TTH_TBIN_DIV, qb.e, lw_i(c, stride)),
                                              lw_i(c, ot->shape[d]));
        stride *= ot->shape[d];
        t.bidx[d] = bat[d].e;
    }
    t.nbidx = nb;
    tth_tvar *vab = lw_var(c, "ab", TTH_I64), *vbb = lw_var(c, "bb", TTH_I64);
    if (!vab || !vbb)
        return NULL;
    t.abase = lw_ref(c, vab);
    t.bofs = lw_ref(c, vbb);
    int RM, RN;
    mm_tile_shape(c, t.R, p.N, vl, &RM, &RN);
    int64_t nvec = p.N / vl, ntile = nvec / RN, restv = nvec % RN, tail = p.N % vl;
    tth_tstmt *seq = NULL, *part;
    if (ntile && (!(part = mm_cols(&t, 0, ntile, RN, vl, RM, 0)) || lw_append(c, &seq, part)))
        return NULL;
    if (restv && (!(part = mm_cols(&t, ntile * RN * vl, 1, (int)restv, vl, RM, 0)) || lw_append(c, &seq, part)))
        return NULL;
    if (tail && (!(part = mm_cols(&t, nvec * vl, tail, 1, 1, RM, 0)) || lw_append(c, &seq, part)))
        return NULL;
    tth_tstmt *body = lw_let(c, vab, batch_base(c, at, 2, &p, bat), lw_let(c, vbb, batch_base(c, bt, 2, &p, bat), seq));
    int par = OB > 1 && OB * p.M * p.N * p.K >= LW_PARALLEL_MIN;
    return lw_ax_loop(c, &qb, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
}

tth_tstmt *lw_matmul(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    mm_p p;
    char why[256];
    if (!mm_params(call, &p, why, sizeof why)) {
        lw_fail(c, TTH_EUNSUPPORTED, call, "%s", why);
        return NULL;
    }

    const tth_ttype *at = lw_ty(lw_arg(call, 0)), *bt = lw_ty(lw_arg(call, 1)), *ot = lw_ty(call);
    tth_tbuffer *A = lw_buf(c, lw_arg(call, 0)), *B = lw_buf(c, lw_arg(call, 1));
    if (!A || !B)
        return NULL;
    int direct = lw_sink_direct(s, 0, p.acc);
    tth_tbuffer *acc = s->dest[0];
    if (!direct) {
        int64_t shp[1] = {p.N};
        acc = lw_local(c, "acc", p.acc, 1, shp);
        if (!acc)
            return NULL;
    }
    lw_ax bat[TTH_MAX_RANK], ai, ak, aj;
    for (int d = 0; d < p.nbatch; d++)
        if (lw_ax_make(c, &bat[d], "b", ot->shape[d]))
            return NULL;
    if (lw_ax_make(c, &ai, "i", p.M) || lw_ax_make(c, &ak, "k", p.K) || lw_ax_make(c, &aj, "j", p.N))
        return NULL;
    tth_tvar *vrow = lw_var(c, "row", TTH_I64), *vab = lw_var(c, "ab", TTH_I64), *vbb = lw_var(c, "bb", TTH_I64);
    tth_tvar *vav = lw_var(c, "av", p.acc), *vbr = lw_var(c, "br", TTH_I64);
    if (!vrow || !vab || !vbb || !vav || !vbr)
        return NULL;
    /* out row base: (flat batch * M + i) * N  (in the destination) or 0 (LOCAL row) */
    tth_texpr *obatch = lw_i(c, 0);
    {
        int64_t stride = 1;
        for (int d = p.nbatch - 1; d >= 0; d--) {
            obatch = lw_add(c, obatch, lw_mul(c, bat[d].e, lw_i(c, stride)));
            stride *= ot->shape[d];
        }
    }
    tth_texpr *rowbase = direct ? lw_mul(c, lw_add(c, lw_mul(c, obatch, lw_i(c, p.M)), ai.e), lw_i(c, p.N)) : lw_i(c, 0);
    tth_texpr *row = lw_ref(c, vrow);
    tth_texpr *ab = batch_base(c, at, at->rank > 1 ? 2 : 1, &p, bat);
    tth_texpr *bb = batch_base(c, bt, bt->rank > 1 ? 2 : 1, &p, bat);

    /* init: acc[row + j] = 0 */
    tth_texpr *zero = lw_imm(c, p.acc, 0);
    tth_tstmt *init = lw_ax_loop(c, &aj, TTH_LOOP_VECTORIZED, tth_tir_store(c->m, acc, lw_add(c, row, aj.e), zero));
    /* a value: a[ab + i*K + k] (minus its zero point) */
    tth_texpr *av = tth_tir_load(c->m, A, lw_add(c, lw_ref(c, vab), lw_add(c, lw_mul(c, ai.e, lw_i(c, p.K)), ak.e)));
    tth_texpr *bv = tth_tir_load(c->m, B, lw_add(c, lw_ref(c, vbr), aj.e));
    if (p.quant) {
        tth_texpr *azp = lw_axis_value(c, lw_arg(call, 2), ai.e);
        tth_texpr *bzp = lw_axis_value(c, lw_arg(call, 3), aj.e);
        if (!azp || !bzp)
            return NULL;
        av = lw_sub(c, lw_cast(c, TTH_I32, av), lw_cast(c, TTH_I32, azp));
        bv = lw_sub(c, lw_cast(c, TTH_I32, bv), lw_cast(c, TTH_I32, bzp));
    } else {
        av = lw_cast(c, p.acc, av);
        bv = lw_cast(c, p.acc, bv);
    }
    tth_texpr *aidx = lw_add(c, row, aj.e);
    tth_tstmt *upd = tth_tir_store(c->m, acc, aidx, lw_add(c, tth_tir_load(c->m, acc, aidx), lw_mul(c, lw_ref(c, vav), bv)));
    tth_tstmt *kl = lw_ax_loop(c, &aj, TTH_LOOP_VECTORIZED, upd);
    kl = lw_let(c, vbr, lw_add(c, lw_ref(c, vbb), lw_mul(c, ak.e, lw_i(c, p.N))), lw_let(c, vav, av, kl));
    kl = lw_ax_loop(c, &ak, TTH_LOOP_SERIAL, kl);
    /* finish */
    tth_tstmt *fin = NULL;
    if (!direct || s->epi) {
        tth_texpr *oidx[TTH_MAX_RANK];
        int r = 0;
        for (int d = 0; d < p.nbatch; d++)
            oidx[r++] = bat[d].e;
        if (at->rank > 1)
            oidx[r++] = ai.e;
        if (bt->rank > 1)
            oidx[r++] = aj.e;
        fin = lw_ax_loop(c, &aj, TTH_LOOP_VECTORIZED,
                         lw_sink_store(c, s, 0, oidx, tth_tir_load(c->m, acc, lw_add(c, row, aj.e))));
        if (!fin)
            return NULL;
    }
    tth_tstmt *seq = NULL;
    if (!init || !kl || lw_append(c, &seq, init) || lw_append(c, &seq, kl) || lw_append(c, &seq, fin))
        return NULL;
    tth_tstmt *body = lw_let(c, vrow, rowbase, seq);
    /* loops: batch dims (binding the operands' batch offsets), then i; the outermost real loop
     * is parallel when rows are independent */
    int64_t work = lw_numel(ot->shape, ot->rank) * p.K;
    int par = direct && work >= LW_PARALLEL_MIN;
    int outer = p.nbatch; /* index of the outermost real loop: batch dim d, or nbatch for i */
    for (int d = 0; d < p.nbatch; d++)
        if (bat[d].v) {
            outer = d;
            break;
        }
    body = lw_ax_loop(c, &ai, par && outer == p.nbatch ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
    body = lw_let(c, vab, ab, lw_let(c, vbb, bb, body));
    for (int d = p.nbatch - 1; d >= 0; d--)
        body = lw_ax_loop(c, &bat[d], par && outer == d ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
    if (body && !direct)
        body = tth_tir_allocate(c->m, acc, body);
    return body;
}

/* ------------------------------------------------------------------------------ det ---- */

/* det: float32 [..., n, n] -> [...] */
int lw_det_check(const tth_rexpr *call, char *why, size_t len)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    if (!xt || xt->dtype != TTH_F32 || xt->rank < 2 || xt->shape[xt->rank - 1] < 1) {
        snprintf(why, len, "det: only float32 matrices of at least 1x1 are supported");
        return 0;
    }
    return 1;
}

typedef struct det_arg {
    tth_tbuffer *x, *a, *d, *piv; /* input; LOCAL matrix copy, determinant, pivot row */
    int64_t n;
    const tth_ttype *ot;
    const lw_sink *s;
} det_arg;

/* for v in [lo, n): body (v bound) */
static tth_tstmt *det_for(lw_ctx *c, tth_tvar *v, tth_texpr *lo, int64_t n, tth_tstmt *body)
{
    return lw_for(c, v, lo, lw_sub(c, lw_i(c, n), lo), TTH_LOOP_SERIAL, body);
}

/* Elimination step k of one matrix in a: the row of the largest |a[i][k]| (i >= k, the first
 * on ties) swapped into row k (the determinant negated), the determinant times the pivot, and,
 * when the pivot is not zero, a[i][j] -= a[i][k] / a[k][k] * a[k][j] for the rows below. */
static tth_tstmt *det_step(lw_ctx *c, const det_arg *g, tth_tvar *vk)
{
    int64_t n = g->n;
    tth_tvar *vi = lw_var(c, "i", TTH_I64), *vj = lw_var(c, "j", TTH_I64), *vt = lw_var(c, "t", TTH_F32);
    tth_tvar *vi2 = lw_var(c, "i", TTH_I64), *vj2 = lw_var(c, "j", TTH_I64), *vf = lw_var(c, "f", TTH_F32);
    if (!vi || !vj || !vt || !vi2 || !vj2 || !vf)
        return NULL;
    tth_texpr *k = lw_ref(c, vk), *zero = lw_i(c, 0), *N = lw_i(c, n);
#define AT(r, col) lw_add(c, lw_mul(c, (r), N), (col))
    tth_texpr *p = tth_tir_load(c->m, g->piv, zero);
    tth_texpr *fabs_i = tth_tir_intrin(c->m, TTH_TINTRIN_FABS, tth_tir_load(c->m, g->a, AT(lw_ref(c, vi), k)), NULL);
    tth_texpr *fabs_p = tth_tir_intrin(c->m, TTH_TINTRIN_FABS, tth_tir_load(c->m, g->a, AT(p, k)), NULL);
    tth_tstmt *seq = NULL;
    /* the pivot row */
    if (lw_append(c, &seq, tth_tir_store(c->m, g->piv, zero, k)) ||
        lw_append(c, &seq, det_for(c, vi, lw_add(c, k, lw_i(c, 1)), n,
                                   tth_tir_if(c->m, lw_bin(c, TTH_TBIN_GT, fabs_i, fabs_p),
                                              tth_tir_store(c->m, g->piv, zero, lw_ref(c, vi)), NULL))))
        return NULL;
    /* the swap */
    tth_tstmt *sw = NULL;
    tth_texpr *pj = AT(tth_tir_load(c->m, g->piv, zero), lw_ref(c, vj)), *kj = AT(k, lw_ref(c, vj));
    tth_tstmt *swap1 = NULL;
    if (lw_append(c, &swap1, tth_tir_store(c->m, g->a, kj, tth_tir_load(c->m, g->a, pj))) ||
        lw_append(c, &swap1, tth_tir_store(c->m, g->a, AT(tth_tir_load(c->m, g->piv, zero), lw_ref(c, vj)),
                                           lw_ref(c, vt))))
        return NULL;
    if (lw_append(c, &sw, det_for(c, vj, zero, n, lw_let(c, vt, tth_tir_load(c->m, g->a, AT(k, lw_ref(c, vj))), swap1))) ||
        lw_append(c, &sw, tth_tir_store(c->m, g->d, zero, tth_tir_un(c->m, TTH_TUN_NEG, tth_tir_load(c->m, g->d, zero)))))
        return NULL;
    tth_texpr *pkk = tth_tir_load(c->m, g->a, AT(k, k));
    if (lw_append(c, &seq, tth_tir_if(c->m, lw_bin(c, TTH_TBIN_NE, tth_tir_load(c->m, g->piv, zero), k), sw, NULL)) ||
        lw_append(c, &seq, tth_tir_store(c->m, g->d, zero, lw_mul(c, tth_tir_load(c->m, g->d, zero), pkk))))
        return NULL;
    /* the rows below */
    tth_texpr *ij = AT(lw_ref(c, vi2), lw_ref(c, vj2));
    tth_tstmt *upd = tth_tir_store(c->m, g->a, ij, lw_sub(c, tth_tir_load(c->m, g->a, ij),
                                                          lw_mul(c, lw_ref(c, vf), tth_tir_load(c->m, g->a, AT(k, lw_ref(c, vj2))))));
    tth_texpr *f = lw_bin(c, TTH_TBIN_DIV, tth_tir_load(c->m, g->a, AT(lw_ref(c, vi2), k)), tth_tir_load(c->m, g->a, AT(k, k)));
    tth_tstmt *rows = det_for(c, vi2, lw_add(c, k, lw_i(c, 1)), n,
                              lw_let(c, vf, f, det_for(c, vj2, lw_add(c, k, lw_i(c, 1)), n, upd)));
    if (lw_append(c, &seq, tth_tir_if(c->m, lw_bin(c, TTH_TBIN_NE, pkk, lw_imm(c, TTH_F32, 0)), rows, NULL)))
        return NULL;
#undef AT
    return seq;
}

/* One matrix (output position idx): copied into a, eliminated step by step, d stored. */
static tth_tstmt *det_one(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    const det_arg *g = arg;
    int64_t nn = g->n * g->n;
    tth_tvar *ve = lw_var(c, "e", TTH_I64), *vk = lw_var(c, "k", TTH_I64);
    if (!ve || !vk)
        return NULL;
    tth_texpr *base = lw_mul(c, lw_flat(c, g->ot->shape, g->ot->rank, idx), lw_i(c, nn)), *zero = lw_i(c, 0);
    tth_tstmt *seq = NULL;
    tth_tstmt *copy = lw_for(c, ve, zero, lw_i(c, nn), TTH_LOOP_SERIAL,
                             tth_tir_store(c->m, g->a, lw_ref(c, ve),
                                           tth_tir_load(c->m, g->x, lw_add(c, base, lw_ref(c, ve)))));
    if (lw_append(c, &seq, copy) || lw_append(c, &seq, tth_tir_store(c->m, g->d, zero, lw_imm(c, TTH_F32, 1))) ||
        lw_append(c, &seq, lw_for(c, vk, zero, lw_i(c, g->n), TTH_LOOP_SERIAL, det_step(c, g, vk))) ||
        lw_append(c, &seq, lw_sink_store(c, g->s, 0, idx, tth_tir_load(c->m, g->d, zero))))
        return NULL;
    return seq;
}

/* det by LU with partial pivoting, one matrix at a time in a LOCAL copy (docs/operators.md) */
tth_tstmt *lw_det(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    if (lw_check_call(c, call, lw_det_check))
        return NULL;
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    int64_t one = 1, nn = xt->shape[xt->rank - 1] * xt->shape[xt->rank - 1];
    det_arg g = {lw_buf(c, lw_arg(call, 0)), NULL, NULL, NULL, xt->shape[xt->rank - 1], lw_ty(call), s};
    if (!g.x || !(g.a = lw_local(c, "lu", TTH_F32, 1, &nn)) || !(g.d = lw_local(c, "det", TTH_F32, 1, &one)) ||
        !(g.piv = lw_local(c, "piv", TTH_I64, 1, &one)))
        return NULL;
    if (lw_numel(g.ot->shape, g.ot->rank) == 0)
        return tth_tir_seq(c->m, NULL, 0); /* an empty batch */
    tth_tstmt *body = lw_nest(c, g.ot->shape, g.ot->rank, 0, det_one, &g);
    body = body ? tth_tir_allocate(c->m, g.a, body) : NULL;
    body = body ? tth_tir_allocate(c->m, g.d, body) : NULL;
    return body ? tth_tir_allocate(c->m, g.piv, body) : NULL;
}
