/* onnx_signal.c: signal processing: DFT, STFT, the windows and the mel weight matrix.
 * One function per operator, and the family's rows of the operator table: each row names the
 * opset range it imports (docs/operators.md, "The operator table"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

/* The output_datatype attribute (default 1, float32); TTH_DTYPE_INVALID with diag when tth has
 * no such type. */
static tth_dtype out_datatype(tth_onnx_ctx *c)
{
    tth_dtype dt = tth__onnx_dtype((int32_t)ai(c, "output_datatype", 1));
    if (dt == TTH_DTYPE_INVALID)
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: output_datatype %lld",
                       (long long)ai(c, "output_datatype", 1));
    return dt;
}

/* Hann, Hamming and Blackman windows of a constant size: computed here. periodic (default 1)
 * divides by N, symmetric by N - 1. */
static int window(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, const double *a, int na)
{
    NEED(1);
    double nv;
    if (vscalar(c, in[0], "size", &nv))
        return c->diag->code;
    if (nv < 0 || nv > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_EMODEL, "window size %g", nv);
    tth_ttype ty = {.dtype = out_datatype(c), .rank = 1, .shape = {(int64_t)nv}};
    if (ty.dtype == TTH_DTYPE_INVALID)
        return c->diag->code;
    int64_t n = ty.shape[0];
    double den = ai(c, "periodic", 1) ? (double)n : (double)(n - 1);
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    for (int64_t i = 0; t && i < n; i++) {
        double v = 0;
        for (int k = 0; k < na; k++)
            v += a[k] * cos(2.0 * M_PI * k * (double)i / (den > 0 ? den : 1));
        tth__st_f64(t, i, v);
    }
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}
static int op_hann_window(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    static const double a[2] = {0.5, -0.5};
    return window(c, in, nin, out, a, 2);
}
static int op_hamming_window(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    static const double a[2] = {25.0 / 46, -21.0 / 46};
    return window(c, in, nin, out, a, 2);
}
static int op_blackman_window(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    static const double a[3] = {0.42, -0.5, 0.08};
    return window(c, in, nin, out, a, 3);
}

/* The mel-scale band edges' spectrogram bins (see op_mel_weight_matrix): nb + 2 edges. */
static int mel_edges(tth_onnx_ctx *c, const double *v, int64_t nb, int64_t *edge)
{
    double lo = 2595 * log10(1 + v[3] / 700), hi = 2595 * log10(1 + v[4] / 700), step = (hi - lo) / (double)(nb + 2);
    int64_t bins = (int64_t)v[1] / 2 + 1;
    for (int64_t i = 0; i < nb + 2; i++) {
        double hz = 700 * (pow(10, (lo + (double)i * step) / 2595) - 1);
        double b = floor((v[1] + 1) * hz / v[2]);
        if (!(b >= 0 && b <= (double)(i == nb + 1 ? bins : bins - 1))) /* the last edge bounds, it is not set */
            return tth__onnx_fail(c, TTH_EMODEL,
                                  "MelWeightMatrix band edge %lld (%g Hz) falls on bin %g, outside the %lld bins of "
                                  "a %lld-point DFT", (long long)i, hz, b, (long long)bins, (long long)v[1]);
        edge[i] = (int64_t)b;
    }
    return 0;
}

/* MelWeightMatrix: all five inputs constants, the [dft_length / 2 + 1, num_mel_bins] matrix
 * computed here (output_datatype, default float32). num_mel_bins + 2 band edges evenly spaced on
 * the mel scale (mel(f) = 2595 log10(1 + f / 700)) from mel(lower_edge_hertz), the step being
 * (mel(upper_edge_hertz) - mel(lower_edge_hertz)) / (num_mel_bins + 2) as in ONNX's reference,
 * each at bin floor((dft_length + 1) f / sample_rate). Band i rises linearly from 0 at edge i
 * to 1 at edge i + 1 (just 1 there when the two coincide) and falls to 0 at edge i + 2. */
static int op_mel_weight_matrix(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(5);
    static const char *names[5] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"};
    double v[5];
    for (int i = 0; i < 5; i++)
        if (vscalar(c, in[i], names[i], &v[i]))
            return c->diag->code;
    if (!(v[0] >= 1 && v[1] >= 1 && v[2] > 0 && v[0] * (v[1] / 2 + 1) <= (double)TTH_IMPORT_MAX_ELEMS))
        return tth__onnx_fail(c, TTH_EMODEL, "MelWeightMatrix of %g bins for a %g-point DFT at %g Hz", v[0], v[1],
                              v[2]);
    tth_ttype ty = {.dtype = out_datatype(c), .rank = 2, .shape = {(int64_t)v[1] / 2 + 1, (int64_t)v[0]}};
    if (ty.dtype == TTH_DTYPE_INVALID)
        return c->diag->code;
    int64_t nb = ty.shape[1], *e = malloc(sizeof(int64_t) * (size_t)(nb + 2));
    tth_tensor *t = e && !mel_edges(c, v, nb, e) ? tth_tensor_new(&ty, NULL) : NULL;
    for (int64_t i = 0; t && i < nb; i++) {
        if (e[i + 1] == e[i])
            tth__st_f64(t, e[i + 1] * nb + i, 1);
        for (int64_t j = e[i]; j <= e[i + 1] && e[i + 1] > e[i]; j++)
            tth__st_f64(t, j * nb + i, (double)(j - e[i]) / (double)(e[i + 1] - e[i]));
        for (int64_t j = e[i + 1]; j < e[i + 2]; j++)
            tth__st_f64(t, j * nb + i, (double)(e[i + 2] - j) / (double)(e[i + 2] - e[i + 1]));
    }
    free(e);
    if (!t)
        return c->diag->code ? c->diag->code : tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* ---------------------------------------------------------------- Fourier transforms
 *
 * DFT and STFT of static sizes as a direct transform: the signal with the transformed axis and
 * the real/imaginary pair flattened together ([..., N * C]) times a constant [N * C, K * 2]
 * matrix of cosines and sines computed here in float64 and rounded to the compute type (float32,
 * or float64 for a float64 input). Truncation to dft_length leaves the samples past it out of the
 * matrix; zero padding needs no rows. */

typedef struct dft_spec {
    int64_t n;   /* samples along the axis */
    int64_t c;   /* 1 (real) or 2 (complex) */
    int64_t len; /* the transform's length (dft_length) */
    int64_t k;   /* output bins: len, or len / 2 + 1 when onesided */
    int inverse; /* e^{+2 pi i kn / len} / len instead of e^{-2 pi i kn / len} */
} dft_spec;

/* Row n * C + part, column 2 k + part: x[n] (re + i im) times w = cos + i sin contributes
 * re cos - im sin to the real part of bin k and re sin + im cos to its imaginary part. */
static tth_rexpr *dft_matrix(tth_onnx_ctx *c, const dft_spec *s, tth_dtype dt)
{
    int64_t rows = s->n * s->c, cols = s->k * 2;
    if (rows * cols > TTH_IMPORT_MAX_ELEMS) {
        tth__onnx_fail(c, TTH_ELIMIT,
                       "%s of %lld samples into %lld bins needs a %lld x %lld matrix (at most %lld elements)",
                       c->node->op_type, (long long)s->n, (long long)s->k, (long long)rows, (long long)cols,
                       (long long)TTH_IMPORT_MAX_ELEMS);
        return NULL;
    }
    tth_ttype ty = {.dtype = dt, .rank = 2, .shape = {rows, cols}};
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    double sign = s->inverse ? 1 : -1, scale = s->inverse ? 1.0 / (double)s->len : 1;
    for (int64_t n = 0; t && n < s->n && n < s->len; n++)
        for (int64_t k = 0; k < s->k; k++) {
            double a = 2 * M_PI * (double)(n * k % s->len) / (double)s->len;
            double co = scale * cos(a), si = scale * sign * sin(a);
            int64_t re = n * s->c * cols + 2 * k;
            tth__st_f64(t, re, co);
            tth__st_f64(t, re + 1, si);
            if (s->c == 2) {
                tth__st_f64(t, re + cols, -si);
                tth__st_f64(t, re + cols + 1, co);
            }
        }
    return k_tensor(c, t);
}

/* x transposed by perm; x itself for the identity. */
static tth_rexpr *permute(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *perm, int r)
{
    int id = 1;
    for (int i = 0; i < r; i++)
        id &= perm[i] == i;
    return !x || id ? x : call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, r)));
}

/* The transform of x [..., C] along axis (not the last): the axis moved next to the last dim,
 * flattened with it, one matmul, the [K, 2] result moved back in place of the axis. */
static tth_rexpr *dft_along(tth_onnx_ctx *c, tth_rexpr *x, int axis, const dft_spec *s)
{
    int r = rank(x);
    tth_dtype dt = tt(x)->dtype, ct = dt == TTH_F64 ? TTH_F64 : TTH_F32;
    int64_t perm[TTH_MAX_RANK], back[TTH_MAX_RANK], shape[TTH_MAX_RANK];
    for (int i = 0, j = 0; i < r - 1; i++)
        if (i != axis)
            perm[j++] = i;
    perm[r - 2] = axis;
    perm[r - 1] = r - 1;
    for (int i = 0; i < r; i++) {
        back[perm[i]] = i;
        shape[i] = tt(x)->shape[perm[i]];
    }
    shape[r - 2] = s->n * s->c;
    tth_rexpr *w = dft_matrix(c, s, ct);
    tth_rexpr *y = w ? reshape(c, cast_to(c, permute(c, x, perm, r), ct), shape, r - 1) : NULL;
    if (!(y = y ? call2(c, TTH_OP_MATMUL, y, w, NULL) : NULL))
        return NULL;
    shape[r - 2] = s->k;
    shape[r - 1] = 2;
    return cast_to(c, permute(c, reshape(c, y, shape, r), back, r), dt);
}

/* A constant integer input of one value: 0, or negative with diag (naming the input when it is
 * not a constant). */
static int vint(tth_onnx_ctx *c, tth_rexpr *e, const char *what, int64_t *out)
{
    int n = vints(c, e, what, out, 1);
    if (n == 1)
        return 0;
    return n < 0 ? c->diag->code : tth__onnx_fail(c, TTH_EMODEL, "input '%s' holds no value", what);
}

/* onesided keeps bins 0 .. len / 2 of the forward transform of a real signal (the rest are their
 * conjugates); with a complex signal or the inverse transform it is refused. */
static int dft_bins(tth_onnx_ctx *c, dft_spec *s, int64_t onesided)
{
    if (onesided && (s->inverse || s->c == 2))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s onesided 1 with %s",
                              c->node->op_type, s->inverse ? "inverse 1" : "a complex input");
    s->k = onesided ? s->len / 2 + 1 : s->len;
    return 0;
}

/* The [..., C] input of DFT and STFT: C 1 (real) or 2 (complex), a float type, rank >= min. */
static int dft_input(tth_onnx_ctx *c, tth_rexpr *x, int min, dft_spec *s)
{
    int r = rank(x);
    s->c = r ? tt(x)->shape[r - 1] : 0;
    if (r < min || (s->c != 1 && s->c != 2) || !tth_dtype_is_float(tt(x)->dtype))
        return tth__onnx_fail(c, TTH_EMODEL,
                              "%s takes a float [..., 1] (real) or [..., 2] (complex) input of rank >= %d, "
                              "not %s of rank %d, last dim %lld", c->node->op_type, min, tth_dtype_name(tt(x)->dtype),
                              r, (long long)s->c);
    return 0;
}

/* DFT: along axis (opset 17: attribute, default 1; opset 20: a constant input, default -2;
 * negative counts from the back; never the last dim, which holds the real and imaginary parts),
 * of length dft_length (a constant input, default the axis' dim; shorter truncates, longer
 * zero-pads), forward or inverse (divided by the length); output [..., K, ..., 2]. */
static int op_dft(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    dft_spec s = {.inverse = ai(c, "inverse", 0) != 0};
    int64_t axis = c->version >= 20 ? -2 : ai(c, "axis", 1);
    if (dft_input(c, in[0], 2, &s) || (c->version >= 20 && nin > 2 && in[2] && vint(c, in[2], "axis", &axis)))
        return c->diag->code;
    if (axis < -r || axis > r - 2 || axis == -1)
        return tth__onnx_fail(c, TTH_EMODEL, "DFT axis %lld is out of range for rank %d (the last dim is the real and "
                                             "imaginary parts)", (long long)axis, r);
    axis = axis < 0 ? axis + r : axis;
    s.n = s.len = tt(in[0])->shape[axis];
    if (nin > 1 && in[1] && vint(c, in[1], "dft_length", &s.len))
        return c->diag->code;
    if (s.len < 1)
        return tth__onnx_fail(c, TTH_EMODEL, "DFT dft_length %lld is not positive", (long long)s.len);
    if (dft_bins(c, &s, ai(c, "onesided", 0)))
        return c->diag->code;
    CHECK(out[0] = dft_along(c, in[0], (int)axis, &s));
    return 0;
}

/* STFT: signal [B, T, C]; frames of W samples every frame_step (a constant), F = 1 + (T - W) /
 * frame_step of them; W is the window's length, else frame_length (a constant), else T (a window
 * and a frame_length that differ are refused). Each frame times the window, then its DFT of
 * length W (onesided, default 1, for a real signal): [B, F, K, 2]. The frames are a take of a
 * constant [F, W] index. */
static int op_stft(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    dft_spec s = {0};
    int64_t step, fl = -1;
    tth_rexpr *x = in[0], *win = nin > 2 ? in[2] : NULL;
    if (dft_input(c, x, 3, &s) || vint(c, in[1], "frame_step", &step) ||
        (nin > 3 && in[3] && vint(c, in[3], "frame_length", &fl)))
        return c->diag->code;
    if (rank(x) != 3 || (win && rank(win) != 1))
        return tth__onnx_fail(c, TTH_EMODEL, "STFT takes a [B, T, C] signal and a 1-D window");
    int64_t t = tt(x)->shape[1], w = win ? tt(win)->shape[0] : fl >= 0 ? fl : t;
    if (win && fl >= 0 && fl != w)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED,
                              "unsupported input value: STFT frame_length %lld with a window of %lld", (long long)fl,
                              (long long)w);
    if (step < 1 || w < 1 || w > t)
        return tth__onnx_fail(c, TTH_EMODEL, "STFT frame_step %lld and frame length %lld for a signal of %lld samples",
                              (long long)step, (long long)w, (long long)t);
    int64_t nf = 1 + (t - w) / step;
    if (nf * w > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_ELIMIT, "STFT of %lld frames of %lld samples (at most %lld in all)", (long long)nf,
                              (long long)w, (long long)TTH_IMPORT_MAX_ELEMS);
    s.n = s.len = w;
    if (dft_bins(c, &s, ai(c, "onesided", 1)))
        return c->diag->code;
    tth_ttype ity = {.dtype = TTH_I64, .rank = 2, .shape = {nf, w}};
    tth_tensor *idx = tth_tensor_new(&ity, NULL);
    for (int64_t f = 0; idx && f < nf; f++)
        for (int64_t i = 0; i < w; i++)
            ((int64_t *)idx->data)[f * w + i] = f * step + i;
    tth_rexpr *ki = k_tensor(c, idx), *frames;
    CHECK(ki && (frames = call2(c, TTH_OP_TAKE, x, ki, json_pack("{s:i}", "axis", 1))));
    if (win) {
        int64_t ws[2] = {w, 1};
        CHECK(frames = call2(c, TTH_OP_MULTIPLY, frames, reshape(c, cast_to(c, win, tt(x)->dtype), ws, 2), NULL));
    }
    CHECK(out[0] = dft_along(c, frames, 2, &s));
    return 0;
}

/* ---------------------------------------------------------------- the rows */

const tth_onnx_op tth__onnx_signal_ops[] = {
    {"BlackmanWindow", 17, op_blackman_window, 0, NULL},
    {"DFT", 17, op_dft, 0, NULL},
    {"DFT", 20, op_dft, 0, NULL},
    {"HammingWindow", 17, op_hamming_window, 0, NULL},
    {"HannWindow", 17, op_hann_window, 0, NULL},
    {"MelWeightMatrix", 17, op_mel_weight_matrix, 0, NULL},
    {"STFT", 17, op_stft, 0, NULL},
    {NULL, 0, NULL, 0, NULL},
};
