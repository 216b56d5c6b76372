/* lower_strategies.c: the table of strategies (docs/lowering.md, "Strategies"): target-aware
 * kernels tried in order before an op's generic lowering. A new kernel for one CPU family is a
 * function pair (applies, lower) in its op's file and one row here, above the rows it should win
 * over. */
#include <stdio.h>

#include "lower_internal.h"

static const lw_strategy table[] = {
    {TTH_OP_CONV2D, "conv2d/pixel-vectorized", lw_conv_pixel_applies, lw_conv_pixel},
    {TTH_OP_CONV2D, "conv2d/depthwise-rows", lw_conv_depthwise_applies, lw_conv_depthwise},
    {TTH_OP_CONV2D, "conv2d/winograd", lw_conv_winograd_applies, lw_conv_winograd},
    /* NCHW<b>c convolutions (docs/layouts.md): the layout pass made them for these kernels */
    {TTH_OP_CONV2D, "conv2d/depthwise-nchwc", lw_conv_depthwise_nchwc_applies, lw_conv_depthwise_nchwc},
    {TTH_OP_CONV2D, "conv2d/groups-nchwc", lw_conv_groups_nchwc_applies, lw_conv_groups_nchwc},
    {TTH_OP_CONV2D, "conv2d/channel-blocked-nchwc", lw_conv_nchwc_applies, lw_conv_blocked},
    {TTH_OP_CONV2D, "conv2d/row-vectorized", lw_conv_rows_applies, lw_conv_rows},
    {TTH_OP_CONV2D, "conv2d/channel-blocked", lw_conv_blocked_applies, lw_conv_blocked},
    /* int8 on the CPU's dot products (docs/int8.md) */
    {TTH_OP_QNN_CONV2D, "qnn.conv2d/int8-depthwise-nchwc", lw_qconv_depthwise_nchwc_applies, lw_qconv_depthwise_nchwc},
    {TTH_OP_QNN_CONV2D, "qnn.conv2d/int8-dot-blocked", lw_qconv_blocked_applies, lw_qconv_blocked},
    {TTH_OP_QNN_CONV2D, "qnn.conv2d/int8-dot-rows", lw_qconv_dot_applies, lw_qconv_dot},
    {TTH_OP_QNN_CONV2D, "qnn.conv2d/int8-depthwise-rows", lw_qconv_depthwise_applies, lw_qconv_depthwise},
    {TTH_OP_QNN_MATMUL, "qnn.matmul/int8-dot", lw_qmatmul_dot_applies, lw_qmatmul_dot},
    {TTH_OP_MATMUL, "matmul/register-tiled", lw_matmul_tiled_applies, lw_matmul_tiled},
    {TTH_OP_MATMUL, "matmul/batched-tiled", lw_matmul_batched_applies, lw_matmul_batched},
    {TTH_OP_ATTENTION, "attention/rows-tiled", lw_attention_tiled_applies, lw_attention},
    {TTH_OP_LAYER_NORM, "layer_norm/rows-vectorized", lw_layer_norm_rows_applies, lw_layer_norm},
    {TTH_OP_SOFTMAX, "softmax/rows-vectorized", lw_softmax_rows_applies, lw_softmax_rows},
    {TTH_OP_LOG_SOFTMAX, "log_softmax/rows-vectorized", lw_softmax_rows_applies, lw_softmax_rows},
    {TTH_OP_MAX_POOL2D, "max_pool2d/row-vectorized", lw_pool_rows_applies, lw_pool_rows},
    {TTH_OP_AVG_POOL2D, "avg_pool2d/row-vectorized", lw_pool_rows_applies, lw_pool_rows},
};

const lw_strategy *lw_strategy_for(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s, char *skipped,
                                   size_t len)
{
    size_t n = 0;
    if (skipped && len)
        skipped[0] = 0;
    if (call->kind != TTH_REXPR_CALL || c->generic)
        return NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].op != call->u.call.op)
            continue;
        if (table[i].applies(c, call, s))
            return &table[i];
        if (skipped && n < len) /* the rows above the one taken, whose conditions do not hold */
            n += (size_t)snprintf(skipped + n, len - n, "%s%s", n ? ", " : "", table[i].name);
    }
    return NULL;
}

const lw_strategy *lw_strategy_table(size_t *n)
{
    *n = sizeof table / sizeof table[0];
    return table;
}
