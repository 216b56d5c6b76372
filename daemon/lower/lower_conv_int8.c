/* lower_conv_int8.c: qnn.conv2d on the CPU's four-byte dot products (docs/int8.md).
 *
 * What is int8 here is the data, not the kernels: the channel-blocked and row-vectorized kernels
 * are the float ones (lower_conv_tiled.c) with the step `tk.dot` (a dot product of four input
 * channels instead of a multiply-add), and the depthwise kernel is the float one on int8 input
 * (`tk.xdt`). This file prepares what they read:
 *   - the words of each image: before the convolution the image is copied into words of four
 *     channels,
 *         xq[((c4*Hp + y)*sp + ph)*Wq + j] = bytes b = 0..3 of channel 4*c4 + b at padded row y,
 *                                            padded column j*sp + ph (sp: the stride's phases,
 *                                            1 for the channel-blocked kernel)
 *     each byte the input plus koff, the offset that puts it in the range the instruction takes
 *     (x86's vpdpbusd multiplies unsigned by signed bytes: int8 inputs get +128; AArch64's sdot
 *     takes signed bytes: uint8 inputs get -128); padding and the channels past C hold the zero
 *     point in that range;
 *   - the weights, packed at compile time as words of the same four channels, vl (or RO) output
 *     channels of a group side by side:
 *         wq[((B*C4g + c4)*KK + kk)*vl + l] = bytes of w[g*Og + bg*vl + l, 4*c4 .. 4*c4 + 3, kk]
 *   - comp[o] = -(x_zp + koff) * sum of w[o], added to the accumulators before the epilogue:
 *     every byte read is x + koff and the padding x_zp + koff, so
 *         sum (x - x_zp) * w = sum (x + koff) * w - (x_zp + koff) * sum w
 *     (docs/int8.md, "Zero points").
 * Requires constant weights with zero points 0 (symmetric, as ONNX Runtime's quantizer writes
 * int8 weights) and a scalar constant input zero point; otherwise the generic lowering runs. */
#include <stdio.h>
#include <string.h>

#include "lower_conv_tiled.h"

typedef struct qconv {
    tk k;                /* k.x: the words of the image; k.w: the packed weights */
    lw_conv_p g;         /* the shapes the kernel walks: a 1x1 stride-1 unpadded convolution is
                            one row of OH*OW pixels */
    int64_t C4;
    int64_t xzp;         /* the input's zero point */
    int64_t koff, padv;  /* byte offset, and the zero point's byte (plus koff) */
    tth_tbuffer *comp;   /* int32 [O] */
    int RO;
    tth_tbuffer *xin;    /* the input, while its words are made */
} qconv;

enum { Q_ONE_GROUP, Q_DEPTHWISE, Q_GROUPED, Q_DEPTHWISE_NCHWC };

/* a qnn.conv2d the kernels compute: NCHW, one group (Q_ONE_GROUP), depthwise (groups = C = O),
 * or one group or groups of whole words of input channels (Q_GROUPED: Cg a multiple of 4, not
 * depthwise); int8 or uint8 input with a scalar constant zero point, constant int8 weights with
 * zero points 0, on a vector target */
static int q_params(const lw_ctx *c, const tth_rexpr *call, lw_conv_p *p, int64_t *xzp, int kind)
{
    char why[256];
    if (call->u.call.op != TTH_OP_QNN_CONV2D || !lw_conv_params(call, p, why, sizeof why) || p->transpose)
        return 0;
    /* NCHW on vector targets; blocked tensors (which only the layout pass makes, for vector
     * targets) on any, so that the scalar reference lowering computes them too */
    if (!c->dot && !p->xb && !p->ob)
        return 0;
    int dw = p->groups == p->C && p->O == p->C && p->C > 1;
    int64_t Cg = p->C / p->groups, Og = p->O / p->groups;
    /* blocked channels (docs/int8.md, "Blocked channels"): the channel-blocked kernel reads an
     * input whose blocks are whole words and whose groups are whole blocks, and writes blocks
     * that groups fill; the blocked depthwise kernel reads and writes one layout */
    int blk = p->xb || p->ob;
    if (kind == Q_DEPTHWISE_NCHWC ? !dw || !p->xb || p->xb != p->ob
        : kind == Q_DEPTHWISE     ? !dw || blk
        : kind == Q_ONE_GROUP     ? p->groups != 1 || blk
                                  : (p->groups != 1 && (dw || Cg % 4 != 0)) || p->xb % 4 != 0 ||
                                        (p->xb && Cg % p->xb) || (p->ob && Og % p->ob))
        return 0;
    const tth_rexpr *x = lw_arg(call, 0), *w = lw_arg(call, 1), *xz = lw_arg(call, 2), *wz = lw_arg(call, 3);
    tth_dtype xd = lw_ty(x)->dtype;
    return (xd == TTH_I8 || xd == TTH_U8) && lw_ty(w)->dtype == TTH_I8 && lw_ty(call)->dtype == TTH_I32 &&
           w->kind == TTH_REXPR_CONST && lw_dot_zero_points(xz, wz, xzp);
}

/* 1x1, stride 1, no padding: the image is one row of OH*OW pixels */
static int flat_ok(const lw_conv_p *p, const lw_sink *s)
{
    return !p->pt && !p->pl && !p->pb && !p->pr && p->KH == 1 && p->KW == 1 && p->sh == 1 && p->sw == 1 &&
           (!s->epi || tk_epi_hw_ok(s->epi, s->anchor, p->OH, p->OW, 0));
}

/* Few words of reduction per output (input channels x taps / 4): the row kernel's rule, as the
 * float row-vectorized kernel's (at most 192 channel-taps); the stems */
#define ROWS_MAX_WORDS 64

/* Output channels on the lanes (the channel-blocked kernel) unless pixels on the lanes (this
 * kernel) use them better (docs/int8.md): a 1x1 layer of at least four vectors of pixels, fewer
 * output channels than lanes, or a short reduction (the epilogue and the store then weigh as much
 * as the sums), each with rows that fill a vector */
static int rows_better(const lw_ctx *c, const lw_conv_p *p, const lw_sink *s)
{
    int vl = c->vec.f32_lanes;
    int flat = flat_ok(p, s);
    int64_t row = flat ? p->OH * p->OW : p->OW;
    int64_t words = (p->C + 3) / 4 * p->KH * p->KW;
    return (flat && row >= 4 * vl) || (row >= vl && (p->O < vl || words <= ROWS_MAX_WORDS));
}

int lw_qconv_dot_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_conv_p p;
    int64_t xzp;
    return q_params(c, call, &p, &xzp, Q_ONE_GROUP) && rows_better(c, &p, s);
}


/* ---- the words of the image ---- */

/* The word of channels 4*c4 .. 4*c4 + nv - 1 (the rest: the zero point) at image row iy, from
 * image column col0 (a vector of `lanes` columns sp apart, or one column) */
static tth_texpr *q_word(qconv *q, tth_tbuffer *x, tth_texpr *c4, int nv, tth_texpr *iy, tth_texpr *col0, int lanes)
{
    lw_ctx *c = q->k.c;
    const lw_conv_p *p = &q->g;
    tth_texpr *bytes[4] = {NULL, NULL, NULL, NULL};
    for (int b = 0; b < nv; b++) {
        tth_texpr *ch = lw_add(c, lw_mul(c, c4, lw_i(c, 4)), lw_i(c, b));
        tth_texpr *row = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, q->k.n, lw_i(c, p->C)), ch), lw_i(c, p->H)), iy);
        tth_texpr *at = lw_add(c, lw_mul(c, row, lw_i(c, p->W)), col0);
        bytes[b] = tth_tir_load(c->m, x, lanes > 1 ? tth_tir_ramp(c->m, at, q->k.sp, lanes) : at);
    }
    return lw_dot_word(c, bytes, q->koff, q->padv, lanes);
}

/* the zero point's word in `lanes` lanes */
static tth_texpr *q_pad_word(qconv *q, int lanes)
{
    lw_ctx *c = q->k.c;
    uint32_t b = (uint32_t)q->padv & 0xffu;
    tth_texpr *w = tth_tir_int(c->m, TTH_I32, (int64_t)(int32_t)(b | b << 8 | b << 16 | b << 24));
    return lanes > 1 ? tth_tir_broadcast(c->m, w, lanes) : w;
}

/* `count` words of padding from word offset at */
static tth_tstmt *q_fill(qconv *q, tth_texpr *at, int64_t count)
{
    lw_ctx *c = q->k.c;
    int vl = c->vec.f32_lanes;
    tth_tstmt *seq = NULL;
    int64_t nv = count / vl, tail = count % vl;
    if (nv > 0) {
        lw_ax j;
        if (lw_ax_make(c, &j, "fj", nv))
            return NULL;
        tth_tstmt *st = tth_tir_vstore(c->m, q->k.x, lw_add(c, at, lw_mul(c, j.e, lw_i(c, vl))), q_pad_word(q, vl), 0);
        if (lw_append(c, &seq, lw_ax_loop(c, &j, TTH_LOOP_SERIAL, st)))
            return NULL;
    }
    if (tail > 0) {
        tth_tstmt *st = tth_tir_vstore(c->m, q->k.x, lw_add(c, at, lw_i(c, nv * vl)), q_pad_word(q, (int)tail), 0);
        if (lw_append(c, &seq, st))
            return NULL;
    }
    return seq;
}

static int64_t floordiv64(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* Image row iy of channels 4*c4 .. (nv of them) into padded row iy + pt of the words: per phase,
 * the columns left of the image and right of it are padding, the rest vectors of columns */
static tth_tstmt *q_image_row(qconv *q, tth_tbuffer *x, tth_texpr *c4, int nv, tth_texpr *iy)
{
    lw_ctx *c = q->k.c;
    const lw_conv_p *p = &q->g;
    int64_t sp = q->k.sp, Wq = q->k.Wq;
    int vl = c->vec.f32_lanes;
    tth_texpr *row = lw_mul(c, lw_add(c, lw_mul(c, c4, lw_i(c, q->k.Hp)), lw_add(c, iy, lw_i(c, p->pt))),
                            lw_i(c, q->k.Wrow));
    tth_tstmt *seq = NULL;
    for (int64_t ph = 0; ph < sp; ph++) {
        /* word j is image column j*sp + ph - pl */
        int64_t lo = -floordiv64(-(p->pl - ph), sp), hi = floordiv64(p->W - 1 + p->pl - ph, sp);
        if (lo < 0)
            lo = 0;
        if (hi > Wq - 1)
            hi = Wq - 1;
        tth_texpr *base = lw_add(c, row, lw_i(c, ph * Wq));
        if (hi < lo) {
            if (lw_append(c, &seq, q_fill(q, base, Wq)))
                return NULL;
            continue;
        }
        if (lo > 0 && lw_append(c, &seq, q_fill(q, base, lo)))
            return NULL;
        int64_t m = hi - lo + 1, nvec = m / vl, tail = m % vl;
        if (nvec > 0) {
            lw_ax j;
            if (lw_ax_make(c, &j, "wj", nvec))
                return NULL;
            tth_texpr *j0 = lw_add(c, lw_i(c, lo), lw_mul(c, j.e, lw_i(c, vl)));
            tth_texpr *col0 = lw_sub(c, lw_add(c, lw_mul(c, j0, lw_i(c, sp)), lw_i(c, ph)), lw_i(c, p->pl));
            tth_texpr *wv = q_word(q, x, c4, nv, iy, col0, vl);
            if (!wv || lw_append(c, &seq, lw_ax_loop(c, &j, TTH_LOOP_SERIAL,
                                                     tth_tir_vstore(c->m, q->k.x, lw_add(c, base, j0), wv, 0))))
                return NULL;
        }
        if (tail > 0) {
            int64_t j0 = lo + nvec * vl;
            tth_texpr *col0 = lw_i(c, j0 * sp + ph - p->pl);
            tth_texpr *wv = q_word(q, x, c4, nv, iy, col0, (int)tail);
            if (!wv || lw_append(c, &seq, tth_tir_vstore(c->m, q->k.x, lw_add(c, base, lw_i(c, j0)), wv, 0)))
                return NULL;
        }
        if (hi < Wq - 1 && lw_append(c, &seq, q_fill(q, lw_add(c, base, lw_i(c, hi + 1)), Wq - 1 - hi)))
            return NULL;
    }
    return seq;
}

/* The words of channels 4*c4 .. (nv of them): padding rows, image rows, padding rows */
static tth_tstmt *q_pack_group(qconv *q, tth_tbuffer *x, tth_texpr *c4, int nv)
{
    lw_ctx *c = q->k.c;
    const lw_conv_p *p = &q->g;
    tth_texpr *plane = lw_mul(c, c4, lw_i(c, q->k.Hp * q->k.Wrow));
    tth_tstmt *seq = NULL;
    if (p->pt && lw_append(c, &seq, q_fill(q, plane, p->pt * q->k.Wrow)))
        return NULL;
    lw_ax iy;
    if (lw_ax_make(c, &iy, "iy", p->H))
        return NULL;
    tth_tstmt *rows = q_image_row(q, x, c4, nv, iy.e);
    if (!rows || lw_append(c, &seq, lw_ax_loop(c, &iy, TTH_LOOP_SERIAL, rows)))
        return NULL;
    if (p->pb && lw_append(c, &seq, q_fill(q, lw_add(c, plane, lw_i(c, (p->pt + p->H) * q->k.Wrow)), p->pb * q->k.Wrow)))
        return NULL;
    return seq;
}

/* n bytes of the copy from byte offset at, in vectors of four words' bytes and a tail: the
 * input's bytes from offset src plus koff (wrapping), or with src NULL the zero point's byte */
static tth_tstmt *q_bytes(qconv *q, tth_texpr *at, int64_t n, tth_texpr *src)
{
    lw_ctx *c = q->k.c;
    int vl = 4 * (c->vec.f32_lanes > 1 ? c->vec.f32_lanes : 1);
    tth_tstmt *seq = NULL;
    for (int part = 0; part < 2; part++) {
        int64_t cnt = part == 0 ? n / vl : (n % vl ? 1 : 0);
        int lanes = part == 0 ? vl : (int)(n % vl);
        if (cnt == 0)
            continue;
        lw_ax j;
        if (lw_ax_make(c, &j, "bj", cnt))
            return NULL;
        tth_texpr *o = lw_add(c, lw_i(c, part ? n / vl * vl : 0), lw_mul(c, j.e, lw_i(c, vl)));
        tth_texpr *v = tth_tir_int(c->m, TTH_U8, (src ? q->koff : q->padv) & 0xff);
        v = lanes > 1 ? tth_tir_broadcast(c->m, v, lanes) : v;
        if (src) {
            tth_texpr *x = lw_cast(c, TTH_U8, tth_tir_vload(c->m, q->xin, lw_add(c, src, o), lanes, 0));
            v = q->koff ? lw_add(c, x, v) : x;
        }
        if (lw_append(c, &seq, lw_ax_loop(c, &j, TTH_LOOP_SERIAL, tth_tir_vstore(c->m, q->k.x, lw_add(c, at, o), v, 0))))
            return NULL;
    }
    return seq;
}

/* Padded row ih of block cb of a blocked input (NCHW<b>c, b a multiple of 4) into the copy of
 * bytes [C/b][Hp][Wp][b], each byte plus koff (wrapping: the range the dot product's first
 * operand takes), the padding the zero point's byte. The channel-blocked kernel reads its words
 * (k.xbytes), k.xblk = b/4 words per pixel of a block. */
static tth_tstmt *q_blocked_row(tk *k, void *ctx, tth_texpr *cb, tth_texpr *ih)
{
    qconv *q = ctx;
    lw_ctx *c = k->c;
    const lw_conv_p *p = &q->g;
    int64_t b = p->xb, C1 = p->C / b;
    tth_texpr *row = lw_mul(c, lw_add(c, lw_mul(c, cb, lw_i(c, k->Hp)), ih), lw_i(c, k->Wp * b));
    tth_tstmt *in = NULL;
    /* the image row: W*b bytes from its first */
    tth_texpr *src = lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, k->n, lw_i(c, C1)), cb), lw_i(c, p->H)),
                                      lw_sub(c, ih, lw_i(c, p->pt))), lw_i(c, p->W * b));
    if ((p->pl && lw_append(c, &in, q_bytes(q, row, p->pl * b, NULL))) ||
        lw_append(c, &in, q_bytes(q, lw_add(c, row, lw_i(c, p->pl * b)), p->W * b, src)) ||
        (p->pr && lw_append(c, &in, q_bytes(q, lw_add(c, row, lw_i(c, (p->pl + p->W) * b)), p->pr * b, NULL))))
        return NULL;
    if (!p->pt && !p->pb)
        return in;
    tth_tstmt *pad = q_bytes(q, row, k->Wp * b, NULL);
    tth_texpr *inside = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, ih, lw_i(c, p->pt)),
                               lw_bin(c, TTH_TBIN_LT, ih, lw_i(c, p->pt + p->H)));
    return in && pad ? tth_tir_if(c->m, inside, in, pad) : NULL;
}

/* the words of image k.n: groups of four channels (in parallel when the convolution is), then
 * the last group of C % 4 */
static tth_tstmt *q_pack_image(qconv *q, tth_tbuffer *x)
{
    lw_ctx *c = q->k.c;
    const lw_conv_p *p = &q->g;
    if (p->xb) { /* blocked: by blocks of channels and bands of rows, as the kernel reads them */
        q->xin = x;
        return tk_pad_split_blocked(&q->k, p->C / p->xb, q_blocked_row, q);
    }
    tth_tstmt *seq = NULL;
    int64_t full = p->C / 4;
    if (full > 0) {
        lw_ax g;
        if (lw_ax_make(c, &g, "g4", full))
            return NULL;
        tth_tstmt *body = q_pack_group(q, x, g.e, 4);
        int64_t work = p->O * p->OH * p->OW * p->C * p->KH * p->KW;
        if (!body || lw_append(c, &seq, lw_ax_loop(c, &g, work >= LW_PARALLEL_MIN_DOT && full > 1 ? TTH_LOOP_PARALLEL
                                                                                              : TTH_LOOP_SERIAL,
                                                   body)))
            return NULL;
    }
    if (p->C % 4) {
        tth_tstmt *body = q_pack_group(q, x, lw_i(c, full), (int)(p->C % 4));
        if (!body || lw_append(c, &seq, body))
            return NULL;
    }
    return seq;
}

/* ---- the weights ---- */

/* Weights as words of four input channels of their group, vl output channels of the group side
 * by side (block B = g*NB + bg), and the RC blocks of a tile side by side (tk_packed_at; RC 1:
 * each block its own run, as the row kernel reads them):
 *     wq[tk_packed_at(RC, groups*NB, C4g*KK, vl, B, c4*KK + kk, l)]
 *         = bytes of w[g*Og + bg*vl + l, 4*c4 .. 4*c4 + 3, kk]
 * (zeros past Og and Cg), and comp[o] = -(x_zp + koff) * sum of w[o] */
static tth_tbuffer *q_pack_blocked(qconv *q, const tth_tensor *wt, int64_t xzp, int vl, int64_t NB, int RC)
{
    lw_ctx *c = q->k.c;
    const lw_conv_p *p = &q->g;
    int64_t KK = p->KH * p->KW, Cg = p->C / p->groups, Og = p->O / p->groups, C4g = (Cg + 3) / 4;
    tth_tensor *pk = lw_table_new(c, TTH_I32, p->groups * NB * C4g * KK * vl, NULL);
    tth_tensor *cp = lw_table_new(c, TTH_I32, p->O, NULL);
    if (!pk || !cp) {
        tth_tensor_unref(pk);
        tth_tensor_unref(cp);
        return NULL;
    }
    const int8_t *src = wt->data;
    uint32_t *dst = pk->data;
    int32_t *comp = cp->data;
    for (int64_t o = 0; o < p->O; o++) {
        int64_t sum = 0, g = o / Og, og = o % Og, B = g * NB + og / vl;
        for (int64_t ic = 0; ic < Cg; ic++)
            for (int64_t kk = 0; kk < KK; kk++) {
                int8_t v = src[(o * Cg + ic) * KK + kk];
                sum += v;
                dst[tk_packed_at(RC, p->groups * NB, C4g * KK, vl, B, ic / 4 * KK + kk, og % vl)] |=
                    (uint32_t)(uint8_t)v << (8 * (ic % 4));
            }
        comp[o] = lw_dot_comp(xzp, q->koff, sum);
    }
    q->comp = lw_packed_const(c, cp);
    return q->comp ? lw_packed_const(c, pk) : (tth_tensor_unref(pk), NULL);
}


/* ---- the convolution ---- */

/* koff and the zero point's byte for the dot product the target has (docs/int8.md); a target
 * without vectors (blocked tensors only) takes the unsigned-by-signed form */
static void q_offsets(qconv *q, lw_ctx *c, const tth_rexpr *call, int64_t xzp)
{
    q->k.dot = c->dot ? c->dot : TTH_TINTRIN_DOT4_US;
    q->koff = lw_dot_koff(q->k.dot, lw_ty(lw_arg(call, 0))->dtype);
    q->padv = (xzp + q->koff) & 0xff;
}

/* The words of each image (k.x, after q's geometry), then `kern` over them; the words buffer
 * allocated around the images' loop */
static tth_tstmt *q_run(qconv *q, const tth_rexpr *call, tth_tstmt *(*kern)(qconv *, void *), void *arg)
{
    tk *k = &q->k;
    lw_ctx *c = k->c;
    const lw_conv_p *p = &q->g;
    tth_tbuffer *x = lw_buf(c, lw_arg(call, 0));
    /* a blocked input is read as words of its own bytes (k.xbytes): in place when nothing is to
     * be padded or offset (a 1x1 layer of a uint8 input on x86), else from a padded copy of
     * bytes; an NCHW input from its words */
    int direct = p->xb && k->flat == 1 && q->koff == 0;
    int64_t nw = p->xb ? p->C * k->Hp * k->Wp : q->C4 * k->Hp * k->Wrow;
    tth_tbuffer *xq = direct ? NULL : lw_local(c, "xq", p->xb ? TTH_U8 : TTH_I32, 1, &nw);
    if (!x || (!direct && !xq))
        return NULL;
    k->x = direct ? x : xq;
    k->xbytes = p->xb != 0;
    lw_ax an;
    if (lw_ax_make(c, &an, "n", q->g.N))
        return NULL;
    k->n = an.e;
    k->xbase = direct ? lw_mul(c, an.e, lw_i(c, p->C * p->H * p->W / 4)) : lw_i(c, 0);
    tth_tstmt *img = NULL;
    tth_tstmt *pk = direct ? NULL : q_pack_image(q, x);
    if ((!direct && !pk) || lw_append(c, &img, pk))
        return NULL;
    tth_tstmt *kr = kern(q, arg);
    if (!kr || lw_append(c, &img, kr))
        return NULL;
    tth_tstmt *body = lw_ax_loop(c, &an, TTH_LOOP_SERIAL, img);
    return body && xq ? tth_tir_allocate(c->m, xq, body) : body;
}

static tth_tstmt *q_rows(qconv *q, void *arg)
{
    return tk_rows_kernel(&q->k, q->RO, *(int *)arg);
}

static tth_tstmt *q_blocked(qconv *q, void *arg)
{
    (void)arg;
    return tk_blocked_kernel(&q->k);
}

/* q for a call the strategy `name` applies to (kind as q_params): the call's shapes in q->g and
 * the input's zero point; 0, or -1 (diag set) */
static int q_start(qconv *q, lw_ctx *c, const tth_rexpr *call, int kind, const char *name)
{
    memset(q, 0, sizeof *q);
    if (!q_params(c, call, &q->g, &q->xzp, kind))
        return lw_fail(c, TTH_EINTERNAL, call, "%s does not apply", name), -1;
    return 0;
}

tth_tstmt *lw_qconv_dot(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    qconv q;
    if (q_start(&q, c, call, Q_ONE_GROUP, "qnn.conv2d/int8-dot-rows"))
        return NULL;
    lw_conv_p p = q.g;
    if (flat_ok(&p, s)) {
        q.g.H = q.g.OH = 1;
        q.g.W = q.g.OW = p.OH * p.OW;
    }
    tk *k = &q.k;
    tk_init(k, c, call, &q.g, s);
    k->flat = 0;
    k->bias = NULL;
    if (q.g.sw > 1) { /* phase-split rows: every tap reads contiguous words */
        k->sp = q.g.sw;
        k->Wq = (k->Wp + k->sp - 1) / k->sp;
        k->Wrow = k->sp * k->Wq;
    }
    q_offsets(&q, c, call, q.xzp);
    q.C4 = (p.C + 3) / 4;
    int vl = c->vec.f32_lanes, big = c->vec.registers >= 32;
    int64_t vecs = (q.g.OW + vl - 1) / vl;
    int RP = (int)(vecs < (big ? 3 : 2) ? vecs : big ? 3 : 2);
    q.RO = (big ? 24 : 12) / RP;
    if (q.RO > p.O)
        q.RO = (int)p.O;
    if (!(k->w = q_pack_blocked(&q, lw_arg(call, 1)->u.constant.value, q.xzp, q.RO, (p.O + q.RO - 1) / q.RO, 1)))
        return NULL;
    k->comp = q.comp;
    k->Cg = q.C4; /* the reduction counts words */
    return q_run(&q, call, q_rows, &RP);
}

/* ---- channel-blocked: the float channel-blocked kernel on words (lower_conv_tiled.c) ---- */


int lw_qconv_blocked_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_conv_p p;
    int64_t xzp;
    return q_params(c, call, &p, &xzp, Q_GROUPED) && (p.groups > 1 || p.xb || p.ob || !rows_better(c, &p, s));
}

/* The image as words of four channels (padded, no phase split), then the channel-blocked
 * kernel: a tile is RC blocks of vl output channels times RW pixels, each step one word of a
 * pixel broadcast against RC vectors of weight words (docs/int8.md). */
tth_tstmt *lw_qconv_blocked(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    qconv q;
    if (q_start(&q, c, call, Q_GROUPED, "qnn.conv2d/int8-dot-blocked"))
        return NULL;
    lw_conv_p p = q.g;
    tk *k = &q.k;
    tk_init(k, c, call, &q.g, s);
    k->bias = NULL;
    k->skip_taps = 0; /* comp counts every tap's padding */
    if (!k->flat && p.OW <= 16)
        k->flat = 2; /* a narrow image: tiles run across rows */
    q_offsets(&q, c, call, q.xzp);
    q.C4 = (p.C + 3) / 4;
    int64_t C4g = (p.C / p.groups + 3) / 4;
    k->xblk = p.xb / 4; /* a blocked input's copy: b/4 words per pixel of a block */
    tk_block_lanes(k);
    tk_choose_tile(k); /* the packing puts each tile's blocks side by side */
    int vl = k->vl;
    if (!(k->w = q_pack_blocked(&q, lw_arg(call, 1)->u.constant.value, q.xzp, vl, k->NB, k->RC)))
        return NULL;
    k->comp = q.comp;
    k->Cg = C4g; /* the reduction counts words of the group's input channels */
    k->wouter = tk_weights_outer(&p, p.groups * k->NB * C4g * p.KH * p.KW * vl, c->cores);
    return q_run(&q, call, q_blocked, NULL);
}

/* ---- depthwise: the float depthwise kernel on int8 (lower_conv_tiled.c) ---- */

/* q_params of the given kind holds for call */
static int q_applies(const lw_ctx *c, const tth_rexpr *call, int kind)
{
    lw_conv_p p;
    int64_t xzp;
    return q_params(c, call, &p, &xzp, kind);
}

int lw_qconv_depthwise_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    return q_applies(c, call, Q_DEPTHWISE);
}

/* The depthwise kernel with vectors along output rows, reading the int8 or uint8 input (padded
 * with its zero point), int32 products and sums, and comp[ch] = -x_zp * sum of w[ch] added
 * before the epilogue: sum (x - x_zp) * w over the taps, padding included. */
tth_tstmt *lw_qconv_depthwise(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    tk_int8 q;
    memset(&q, 0, sizeof q);
    if (!q_params(c, call, &q.p, &q.xzp, Q_DEPTHWISE))
        return lw_fail(c, TTH_EINTERNAL, call, "qnn.conv2d/int8-depthwise-rows does not apply"), NULL;
    q.xdt = lw_ty(lw_arg(call, 0))->dtype;
    const tth_tensor *wt = lw_arg(call, 1)->u.constant.value;
    int64_t KK = q.p.KH * q.p.KW;
    tth_tensor *cp = lw_table_new(c, TTH_I32, q.p.C, NULL);
    if (!cp)
        return NULL;
    const int8_t *w = wt->data;
    int32_t *comp = cp->data;
    /* the dot form (docs/int8.md, "Depthwise in dot products"): a kernel row's taps in words of
     * four (at most two words: 5x5 and 7x7 kernels), on targets whose dot product is one
     * instruction (widened multiplies cost more than the int32 multiply-adds they replace) */
    int64_t nwk = (q.p.KW + 3) / 4;
    if (c->dot_native && nwk <= 2) { /* dot_native: c->dot, on a target with vectors */
        q.dot = c->dot;
        q.koff = lw_dot_koff(c->dot, q.xdt);
        tth_tensor *wd = lw_table_new(c, TTH_I32, q.p.C * q.p.KH * nwk, NULL);
        if (!wd) {
            tth_tensor_unref(cp);
            return NULL;
        }
        int32_t *words = wd->data;
        for (int64_t ch = 0; ch < q.p.C; ch++)
            for (int64_t kh = 0; kh < q.p.KH; kh++)
                for (int64_t kw = 0; kw < q.p.KW; kw++) {
                    uint32_t *word = (uint32_t *)&words[(ch * q.p.KH + kh) * nwk + kw / 4];
                    *word |= (uint32_t)(uint8_t)w[(ch * q.p.KH + kh) * q.p.KW + kw] << (8 * (kw % 4));
                }
        if (!(q.wd = lw_packed_const(c, wd))) {
            tth_tensor_unref(cp);
            return NULL;
        }
    }
    for (int64_t ch = 0; ch < q.p.C; ch++) {
        int64_t sum = 0;
        for (int64_t kk = 0; kk < KK; kk++)
            sum += w[ch * KK + kk];
        comp[ch] = lw_dot_comp(q.xzp, q.koff, sum);
    }
    if (!(q.comp = lw_packed_const(c, cp)))
        return NULL;
    return tk_conv_depthwise_int8(c, call, s, &q);
}

/* ---- depthwise in blocked channels: the float kernel of lower_conv_nchwc.c on int8 ---- */

int lw_qconv_depthwise_nchwc_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    return q_applies(c, call, Q_DEPTHWISE_NCHWC);
}

/* One vector is the b channels of a pixel: each tap's bytes widened to int32, minus the zero
 * point, times the tap's weights (int32, packed [C/b][KH][KW][b] at compile time), summed in
 * int32; taps outside the image are skipped (their x - x_zp is 0), so no comp term. */
tth_tstmt *lw_qconv_depthwise_nchwc(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_conv_p p;
    int64_t xzp;
    if (!q_params(c, call, &p, &xzp, Q_DEPTHWISE_NCHWC))
        return lw_fail(c, TTH_EINTERNAL, call, "qnn.conv2d/int8-depthwise-nchwc does not apply"), NULL;
    return tk_conv_depthwise_nchwc_int8(c, call, s, &p, xzp);
}
