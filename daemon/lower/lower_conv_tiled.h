/* lower_conv_tiled.h: what the float32 convolution kernels share (lower_conv_tiled.c: the
 * register-tiled kernels; lower_conv_winograd.c: Winograd). docs/lowering.md, "Convolution
 * kernels". */
#ifndef TTH_LOWER_CONV_TILED_H
#define TTH_LOWER_CONV_TILED_H

#include "lower_internal.h"

/* One convolution being lowered: the call, its shapes, the input as read and the weights. */
typedef struct tk {
    lw_ctx *c;
    const tth_rexpr *call;
    const lw_conv_p *p;
    const lw_sink *s;
    tth_tbuffer *x;          /* the input as read: x itself, or the padded copy of one image */
    int64_t Hp, Wp;          /* plane of the input as read (padded) */
    int64_t sp, Wq, Wrow;    /* a row of the input as read: sp phases of Wq columns, Wrow = sp*Wq
                                elements; column col is at (col % sp)*Wq + col / sp. sp is the
                                stride for a strided depthwise or row-vectorized convolution, 4
                                for Winograd (their taps then read contiguous vectors), else 1 and Wq = Wrow = Wp */
    tth_texpr *xbase;        /* offset of image n in the input as read */
    int64_t xblk;            /* the input as read is NCHW<xblk>c (0: NCHW); p->xb is the input's
                                own layout, which a kernel's copy may change (Winograd's is NCHW) */
    tth_texpr *wrow0;        /* NULL, or x is a window of the padded input (some rows) whose
                                row 0 is padded row wrow0: of one channel (depthwise, "window")
                                when wH is 0, else of every channel, wH rows each, from offset
                                xbase (Winograd, "bands") */
    int64_t wH;
    int64_t xwin;            /* channel-blocked, grouped, padded, blocked input: each task copies
                                the padded rows its tiles read, of its group's channels only, into
                                a window of this many rows on its stack (wrow0, wH and xbase 0
                                while its tiles are made), and x is the input itself; 0 without
                                (docs/lowering.md, "Windows of a group") */
    tth_texpr *n;            /* image index */
    tth_tbuffer *w;          /* packed weights (channel-blocked) or the weights (depthwise) */
    int wpacked;             /* depthwise NCHW<b>c: w is the constant weight packed at compile time
                                (else the weight as computed) */
    int64_t Cg, Og;
    int vl;                  /* lanes */
    int64_t NB;              /* blocks of vl output channels per group */
    int obp;                 /* NCHW<b>c output with b narrower than the vector: b-channel blocks
                                per accumulator (vl = obp * b), else 1 (docs/layouts.md) */
    int RC, RW;              /* the tile (tk_choose_tile): RC channel blocks times at most RW
                                pixels; the packed weights hold each tile's RC blocks side by
                                side (tk_packed_at) */
    int flat;                /* the image as one row of OH*OW pixels: 1 for a 1x1 stride-1 unpadded
                                convolution (pixel p is input offset p), 2 for a narrow image
                                (each tile computes its pixels' input offsets) */
    const tth_rexpr *bias;   /* NULL without */
    int wouter;              /* the weights are larger than the image: channel blocks outermost,
                                each block's weights read once for every pixel (docs/lowering.md,
                                "Loop order") */
    tth_dtype xdt;           /* element dtype of the input as read: float32, or for the int8
                                depthwise kernel (docs/int8.md) int8/uint8 */
    int64_t xzp;             /* int8: the input's zero point, the value of the padding */
    tth_tbuffer *comp;       /* int8: int32 [C], -x_zp * sum of the channel's weights, added to
                                each accumulator (the int32 accumulators then hold
                                sum (x - x_zp) * w) */
    int dot;                 /* int8 channel-blocked kernel (docs/int8.md): the dot product
                                (TTH_TINTRIN_DOT4_US/SS) of an input word of four channels,
                                broadcast, with a vector of packed weight words; x is then the
                                words of the image and Cg counts words; 0 for float32 */
    int xbytes;              /* int8 channel-blocked kernel on a blocked input (docs/int8.md,
                                "Blocked channels"): x holds bytes, and word i of the input as
                                read is bytes 4i .. 4i+3 (four channels of a pixel), read as
                                one 32-bit load */
    int skip_taps;           /* channel-blocked, row tiles: each tile loops over the taps that read
                                its row and columns inside the image only (a dilated kernel mostly
                                in the padding; docs/lowering.md, "Taps in the padding"); no tile
                                straddles a column where a tap starts or stops reading the image,
                                so the kernel reads the image itself, unpadded */
    double tap_share;        /* with skip_taps: the share of taps that read the image (below 0.5),
                                which sizes the blocks of input channels */
    tth_tbuffer *psum;       /* channel-blocked, input channels in blocks (docs/lowering.md,
                                "Blocks of input channels"): the partial sums, per output channel
                                block and pixel [NB*vl lanes][OH*OW], NULL without blocks */
    int64_t kcs;             /* input channels per block (all of one length) */
    int64_t nkc;             /* blocks of input channels */
    tth_texpr *kb;           /* the block a tile reduces over (0 .. nkc-1): the first starts from
                                zeros, the last goes through the epilogue, the others load and
                                store the partial sums */
    int dwdot;               /* int8 depthwise, at most eight taps a kernel row, a target with the
                                dot-product instruction: the intrinsic (docs/int8.md, "Depthwise
                                in dot products"). x is then words of the image as read: the word
                                where tap 0 of an output is read holds the bytes of four of the
                                row's taps of that output (plus koff), and w holds the taps'
                                weights as words, [C][KH][ceil(KW/4)]; 0 otherwise */
    int64_t koff;
    int64_t dwtot;           /* dot form: the words of a kernel row's taps 4*wk .. are at offset
                                wk*dwtot (kernels of more than four taps a row) */
    int dwflat;              /* depthwise, stride 1, narrow rows, the padded copy of the image: a
                                tile of R output rows is one run of (R-1)*Wrow + OW outputs in
                                whole vectors, the columns of the padding computed and dropped
                                (docs/lowering.md, "Depthwise kernel"); the copy has vl elements
                                more, set to the padding's value, for the last vector to read */
} tk;

/* a float32 nn.conv2d (not quantized, not transposed) in NCHW, its shapes and attributes in *p */
int tk_conv_f32(const tth_rexpr *call, lw_conv_p *p);
/* the same in any layout (p->xb, p->ob: docs/layouts.md) */
int tk_conv_f32_any(const tth_rexpr *call, lw_conv_p *p);
/* k for call: padded plane, one phase per row, bias */
void tk_init(tk *k, lw_ctx *c, const tth_rexpr *call, const lw_conv_p *p, const lw_sink *s);
/* offset of pixel (row, col) of input channel ch in the input as read (col in phase-split units
 * when k->sp > 1: the caller computes (phase*Wq + j)); in a window (k->wrow0) the channel is the
 * window's and row is counted from wrow0 */
tth_texpr *tk_x_at(tk *k, tth_texpr *ch, tth_texpr *row, tth_texpr *col);
/* padded row ih (in [0, Hp)) of channel ch of image k->n of src into xp at dst_row: the image
 * row ih - pt, or zeros above and below the image */
tth_tstmt *tk_pad_row_or_zeros(tk *k, tth_tbuffer *src, tth_tbuffer *xp, tth_texpr *dst_row, tth_texpr *ch,
                               tth_texpr *ih);
/* the padded (and, with k->sp > 1, phase-split) copy of image k->n of src into xp; channels in
 * parallel when large */
tth_tstmt *tk_pad_copy(tk *k, tth_tbuffer *src, tth_tbuffer *xp);
/* 1 when a convolution's weights (packed, `wfloats` floats) are more than its input image: its
 * kernels then run channel blocks outermost (docs/lowering.md, "Loop order") */
int tk_weights_outer(const lw_conv_p *p, int64_t wfloats, int cores);
/* With the weights outermost, the parallel loop runs over channel blocks (or groups of them)
 * alone only from this many, enough to share among the cores */
#define TK_OUTER_MIN_BLOCKS 4
/* with more than one core, weights outermost only when they are this many times the image
 * (docs/lowering.md, "Loop order") */
#define TK_OUTER_PARALLEL_RATIO 8
/* The channel-blocked kernel reduces over input channels in blocks whose packed weights for one
 * tile's channel blocks take at most this many bytes, when they are more than twice this
 * (docs/lowering.md, "Blocks of input channels") */
#define TK_KC_BYTES (32 << 10)
/* bias (if any) + val through the epilogue, stored at output channel(s) oc of pixel (oh, ow) */
tth_tstmt *tk_epi_store(tk *k, tth_texpr *oc, tth_texpr *oh, tth_texpr *ow, tth_texpr *val);
/* the same for an NCHW<b>c output: val is block blk (b channels) of pixel (oh, ow) */
tth_tstmt *tk_epi_store_block(tk *k, tth_texpr *blk, tth_texpr *oh, tth_texpr *ow, tth_texpr *val);
/* the depthwise kernels' sums: int32 for an int8 or uint8 input (products of widened bytes and
 * int32 weights), else float32; acc + x * w in that dtype (a fused multiply-add for floats where
 * the target has one) */
tth_dtype tk_acc_dtype(const tk *k);
tth_texpr *tk_madd(tk *k, tth_texpr *x, tth_texpr *w, tth_texpr *acc);
/* the channel-blocked kernel's tile for k (k->RC, k->RW), chosen before its weights are packed */
void tk_choose_tile(tk *k);
/* the place of weight `l` of step `step` (of `steps`: input channel or word times tap) of block B
 * (of NBT, all groups) in the channel-blocked kernel's packing, vl lanes a block: the RCt blocks
 * of B's tile (RC from a multiple of RC, the last tile narrower) side by side for each step, so a
 * tile reads its weights as one run (docs/lowering.md, "Channel-blocked kernel") */
int64_t tk_packed_at(int64_t RC, int64_t NBT, int64_t steps, int64_t vl, int64_t B, int64_t step, int64_t l);
/* the channel-blocked kernel's lanes for k's output: k->vl, k->obp (blocks of an NCHW<b>c output
 * to an accumulator) and k->NB (accumulators to a group) */
void tk_block_lanes(tk *k);
/* the padded copy of image k->n of an NCHW<b>c input: [C/b][Hp][Wp][b] */
tth_tstmt *tk_pad_rows_blocked(tk *k, tth_tbuffer *src, tth_tbuffer *dst, tth_texpr *base, tth_texpr *row0,
                               int64_t nrows, int par);
tth_tstmt *tk_pad_copy_blocked(tk *k, tth_tbuffer *src, tth_tbuffer *xp);
/* padded row ih of block cb of a blocked copy (the caller's ctx) */
typedef tth_tstmt *(*tk_prow_fn)(tk *k, void *ctx, tth_texpr *cb, tth_texpr *ih);
/* the padded copy of image k->n in C1 blocks, row by row, split among the cores as the kernel
 * reads it (tk_pad_copy_blocked; the int8 kernels' words, lower_conv_int8.c) */
tth_tstmt *tk_pad_split_blocked(tk *k, int64_t C1, tk_prow_fn row, void *ctx);

/* The epilogue s->epi may take the pixel index of an OH x OW output as (0, p) (a flat image):
 * every tensor in it is constant along H and W or has the output's full H and W. With OH < 0:
 * every tensor it reads is constant along H and W (any pixel index reads the same values). */
int tk_epi_hw_ok(const tth_rexpr *e, const tth_rexpr *anchor, int64_t OH, int64_t OW, int depth);
/* Offset in the input as read of tap (kh, kw) for output pixel (oh, ow0) of input channel ch:
 * row oh*sh + kh*dh; column ow0*sw + kw*dw, or in a phase-split row (k->sp > 1, sp = sw) phase
 * (kw*dw) % sw at ow0 + (kw*dw) / sw, so consecutive output pixels are consecutive elements */
tth_texpr *tk_tap_at(tk *k, tth_texpr *ch, tth_texpr *oh, tth_texpr *ow0, tth_texpr *kh, tth_texpr *kw);
/* One accumulator of a tile along output rows: `lanes` pixels of output row oh0 + drow from
 * column ow0 + dcol. */
typedef struct dseg {
    int64_t drow, dcol;
    int lanes;
} dseg;
/* A tile of n accumulators sg along one output row, from column ow0 (the kernel's own tile). */
typedef tth_tstmt *(*row_tile_fn)(tk *k, void *ctx, tth_texpr *ow0, const dseg *sg, int n);
/* One output row in vectors: OW / vl vectors of vl pixels and one of OW % vl, as a loop of tiles
 * of RV vectors and one tile of what is left (the whole vectors and the tail). */
tth_tstmt *tk_row_in_vectors(tk *k, int RV, int vl, row_tile_fn tile, void *ctx);
/* An int8 depthwise convolution (docs/int8.md): its shapes, input dtype and zero point, and the
 * per-channel constant -x_zp * sum w; the depthwise kernel then reads int8 or uint8, pads with
 * the zero point and accumulates in int32 */
typedef struct tk_int8 {
    lw_conv_p p;
    tth_dtype xdt;
    int64_t xzp;
    tth_tbuffer *comp;
    int dot;                 /* the depthwise kernel's dot form (k->dwdot), else 0 */
    int64_t koff;            /* with it: added to every input byte (lw_dot_koff) */
    tth_tbuffer *wd;         /* with it: the weights as words of four of a kernel row's taps,
                                [C][KH][ceil(KW/4)] */
} tk_int8;
tth_tstmt *tk_conv_depthwise_int8(lw_ctx *c, const tth_rexpr *call, const lw_sink *s, const tk_int8 *q);
/* the depthwise kernel on NCHW<b>c (lower_conv_nchwc.c) for a qnn.conv2d of shapes p whose input
 * (int8 or uint8) has the zero point xzp: (x - xzp) * w summed in int32 */
tth_tstmt *tk_conv_depthwise_nchwc_int8(lw_ctx *c, const tth_rexpr *call, const lw_sink *s, const lw_conv_p *p,
                                        int64_t xzp);
/* the channel-blocked and the row-vectorized kernels over k as set up by their caller (the int8
 * strategies: lower_conv_int8.c); the row kernel's weights are k->w packed in blocks of RO
 * channels, and its reduction runs over k->Cg (input channels, or words of four) */
tth_tstmt *tk_blocked_kernel(tk *k);
tth_tstmt *tk_rows_kernel(tk *k, int RO, int RP);
#endif
