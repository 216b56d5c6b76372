/* scratch.c: context buffer sizes, one rule per kernel.
 *
 * conv int8: 0 on the 1x1 fast path (1x1 kernel, no padding, C_IN % 4 == 0, stride 1, dilation 1);
 *   with MVE 0 also on the 1xN path (input and kernel height 1, (stride_w * C_IN) % 4 == 0);
 *   otherwise col = KH * KW * C_IN and MVE: 4 * roundup16(col), else 2 * align4(col) * 2 (the
 *   non-MVE build, DSP or not, keeps two int16 im2col columns).
 * depthwise int8 (C_IN == C_OUT, batch 1, dilation 1): MVE 4 * 124 * KW * KH; DSP C_IN * KW * KH * 2;
 *   neither 0.
 * avg pool: DSP without MVE C_IN * 4, else 0. fully connected: MVE C_OUT * 4, else 0.
 * max pool, softmax, add, mul: no context. */
#include "scratch.h"

static int64_t round_up(int64_t v, int64_t to)
{
    return (v + to - 1) / to * to;
}

int64_t cn_scratch_bytes(const cn_match *m, cn_features f)
{
    int mve = f.mve, dsp = f.dsp && !f.mve;
    switch (m->kind) {
    case CN_CONV: {
        int nopad = !m->pad[0] && !m->pad[1] && !m->pad[2] && !m->pad[3];
        if (m->kh == 1 && m->kw == 1 && nopad && m->c % 4 == 0 && m->stride[0] == 1 && m->stride[1] == 1)
            return 0;
        if (mve && m->h == 1 && m->kh == 1 && (m->stride[1] * m->c) % 4 == 0)
            return 0;
        int64_t col = m->kh * m->kw * m->c;
        return mve ? 4 * round_up(col, 16) : 2 * round_up(col, 4) * 2;
    }
    case CN_DWCONV:
        if (mve)
            return 4 * 124 * m->kw * m->kh;
        return dsp ? m->c * m->kw * m->kh * 2 : 0;
    case CN_AVGPOOL: return dsp ? m->c * 4 : 0;
    case CN_FC: return mve ? m->oc * 4 : 0;
    default: return 0;
    }
}
