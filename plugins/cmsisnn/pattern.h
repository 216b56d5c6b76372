/* pattern.h: the operator patterns the cmsis-nn kind takes (docs/cmsisnn.md, "What is offloaded"), as
 * tth's importer writes them, and what a matched pattern means for the CMSIS-NN call.
 *
 *   conv       qnn.conv2d(x int8, w const int8, x_zp, w_zp = 0) [-> add(., bias const int32)]
 *              -> qnn.requantize(-> int8) [-> clip]                  arm_convolve_wrapper_s8
 *   depthwise  the same with groups == C_in == C_out and a bias      arm_depthwise_conv_wrapper_s8
 *   fc         qnn.matmul(a int8 [M, K], b const int8 [K, N], a_zp, b_zp = 0) [-> add(bias)]
 *              -> qnn.requantize (per tensor) [-> clip]              arm_fully_connected_s8
 *   softmax    qnn.dequantize(int8) -> nn.softmax(last axis) -> qnn.quantize(int8, 1/256, -128)
 *                                                                     arm_softmax_s8
 *   add, mul   qnn.dequantize(int8) x2 -> add|multiply (same shapes) -> qnn.quantize(int8)
 *                                                                     arm_elementwise_{add,mul}_s8
 *   max/avg pool  qnn.dequantize(int8) -> nn.{max,avg}_pool2d -> qnn.quantize(int8) with the
 *              same scale and zero point on both sides               arm_{max_pool,avgpool}_s8
 *              (or nn.max_pool2d on int8, the QDQ pass's form of the max pool)
 * Every node of a pattern but the last has exactly one user, inside the pattern.
 */
#ifndef TTH_CMSISNN_PATTERN_H
#define TTH_CMSISNN_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#include <tth/relay.h>


typedef enum cn_kind {
    CN_CONV = 1,
    CN_DWCONV,
    CN_FC,
    CN_SOFTMAX,
    CN_ADD,
    CN_MUL,
    CN_MAXPOOL,
    CN_AVGPOOL,
} cn_kind;

#define CN_MAX_NODES 6

typedef struct cn_match {
    cn_kind kind;
    const tth_rexpr *nodes[CN_MAX_NODES]; /* the calls of the pattern, producers first */
    size_t nnodes;
    const tth_rexpr *in[2];   /* the data inputs from outside the pattern (in[1]: add/mul) */
    const tth_rexpr *out;     /* the last node: its value leaves the pattern */
    const tth_tensor *w;      /* conv/fc weights (OIHW / [K, N]) */
    const tth_tensor *bias;   /* int32, or NULL */
    const tth_tensor *req_scale; /* requantize in_scale: one value or one per output channel */
    double in_scale[2], out_scale;
    int32_t in_zp[2], out_zp;
    int32_t act_min, act_max; /* int8 clamp of the output */
    /* NCHW geometry: input, kernel, output */
    int64_t n, c, h, w_, kh, kw, oc, oh, ow;
    int64_t stride[2], pad[4], dilation[2];
} cn_match;

/* The pattern anchored at `anchor` (qnn.conv2d, qnn.matmul, nn.softmax, float add/multiply,
 * nn.max_pool2d, nn.avg_pool2d). 1 and *m filled on a match; 0 with the reason in why. */
int cn_match_at(const tth_relay_users *u, const tth_rexpr *anchor, cn_match *m, char *why, size_t len);

/* The pattern `call` belongs to: tries each anchor call could belong to. 1 on a match; 0 with
 * the most specific reason. */
int cn_match_containing(const tth_relay_users *u, const tth_rexpr *call, cn_match *m, char *why, size_t len);

const char *cn_kind_name(cn_kind k);

#endif
