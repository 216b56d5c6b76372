/* scratch.c: context buffer sizes, one rule per kernel (docs/cmsisnn.md, "Scratch buffer sizes").
 *
 * conv int8: 0 on the 1x1 paths (1x1 kernel, no padding, dilation 1, any stride: the library's
 *   own buffer-less path on every architecture with GCC); on the 1xN path (input and kernel
 *   height 1, dilation 1, (stride_w * C_IN) % 4 == 0) MVE needs the 1xN column (below), the others
 *   the general size; otherwise col = KH * KW * C_IN and MVE: 4 * roundup16(col), else
 *   2 * align4(col) * 2 (the non-MVE build keeps two int16 im2col columns).
 * depthwise int8 (C_IN == C_OUT, batch 1, dilation 1): MVE 4 * 124 * KW * KH; DSP without MVE:
 *   0 for 3x3 kernels padded by at most 1, else C_IN * KW * KH * 2; neither 0.
 * avg pool: DSP without MVE C_IN * 4, else 0.
 * fully connected: the MVE build reads C_OUT int32 kernel sums from the context; those are
 *   constants (cn_fc_kernel_sums), not scratch, so no LOCAL bytes here.
 * max pool, softmax, add, mul: no context. */
#include "scratch.h"

static int64_t round_up(int64_t v, int64_t to)
{
    return (v + to - 1) / to * to;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t conv_general(const cn_match *m, int mve)
{
    int64_t col = m->kh * m->kw * m->c;
    return mve ? 4 * round_up(col, 16) : 2 * round_up(col, 4) * 2;
}

/* The MVE 1xN kernel keeps one padded input column: left-padded, middle and right-padded output
 * positions must add up to the output width, else it falls back to the general kernel's size. */
static int64_t conv_1xn_mve(const cn_match *m)
{
    int64_t pad_x = m->pad[1], stride = m->stride[1];
    int64_t total_pad = (m->ow - 1) * stride + m->kw - m->w_;
    int64_t asym = total_pad % 2;
    int64_t right = pad_x + asym != 0 ? max64(1, (pad_x + asym + stride - 1) / stride) : 0;
    int64_t left = pad_x != 0 ? max64(1, (pad_x + stride - 1) / stride) : 0;
    int64_t mid = max64(m->ow - (right + left), 0);
    if (right + mid + left != m->ow)
        return conv_general(m, 1);
    int64_t pad_left = pad_x * m->c;
    int64_t pad_right = asym ? right * m->c : pad_left;
    int64_t elems_left = m->kw * m->c;
    return max64(elems_left + pad_left, elems_left - m->c + pad_right);
}

int64_t cn_scratch_bytes(const cn_match *m, cn_features f)
{
    int mve = f.mve, dsp = f.dsp && !f.mve;
    switch (m->kind) {
    case CN_CONV: {
        int nopad = !m->pad[0] && !m->pad[1] && !m->pad[2] && !m->pad[3];
        int undilated = m->dilation[0] == 1 && m->dilation[1] == 1;
        if (m->kh == 1 && m->kw == 1 && nopad && undilated)
            return 0;
        if (m->h == 1 && m->kh == 1 && m->dilation[1] == 1 && (m->stride[1] * m->c) % 4 == 0)
            return mve ? conv_1xn_mve(m) : conv_general(m, 0);
        return conv_general(m, mve);
    }
    case CN_DWCONV:
        if (mve)
            return 4 * 124 * m->kw * m->kh;
        if (dsp && m->kh == 3 && m->kw == 3 && m->pad[0] <= 1 && m->pad[1] <= 1)
            return 0;
        return dsp ? m->c * m->kw * m->kh * 2 : 0;
    case CN_AVGPOOL: return dsp ? m->c * 4 : 0;
    default: return 0;
    }
}
