/* onnx_control.c: control flow: If, Loop and Scan, unrolled or folded at import.
 * One function per operator, and the family's rows of the operator table: each row names the
 * opset range it imports (docs/operators.md, "The operator table"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

/* Loop and Scan (docs/operators.md, "Control flow") are unrolled at import: the body is imported
 * once per iteration, its loop-carried values feeding the next, so the trip count must be known
 * at compile time (a constant, or a graph input bound with --bind) and is bounded. */
#define TTH_UNROLL_MAX 1024
#define TTH_UNROLL_TOTAL 8192 /* bodies in the whole model: nested loops multiply */

static int unroll_one(tth_onnx_ctx *c)
{
    if (++c->unrolled <= TTH_UNROLL_TOTAL)
        return 0;
    return tth__onnx_fail(c, TTH_ELIMIT, "the model's loops unroll into more than %d bodies (nested loops multiply)",
                          TTH_UNROLL_TOTAL);
}

/* The per-iteration values of a scan output stacked along a new axis `axis` (0 for Loop). */
static tth_rexpr *stack(tth_onnx_ctx *c, tth_rexpr **v, int64_t n, int64_t axis)
{
    tth_rexpr **parts = tth_arena_alloc(c->m->arena, sizeof *parts * (size_t)n);
    if (!parts) {
        tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        const tth_ttype *t = tt(v[k]);
        int64_t shape[TTH_MAX_RANK];
        if (t->rank + 1 > TTH_MAX_RANK) {
            tth__onnx_fail(c, TTH_EUNSUPPORTED, "a scan output of rank %d is too large to stack", t->rank);
            return NULL;
        }
        for (int d = 0, j = 0; d <= t->rank; d++)
            shape[d] = d == axis ? 1 : t->shape[j++];
        if (!(parts[k] = reshape(c, v[k], shape, t->rank + 1)))
            return NULL;
    }
    return n == 1 ? parts[0] : call(c, TTH_OP_CONCATENATE, parts, (size_t)n, json_pack("{s:I}", "axis", (json_int_t)axis));
}

static int op_loop(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    const Onnx__AttributeProto *ba = attr(c, "body");
    if (!ba || !ba->g)
        return tth__onnx_fail(c, TTH_EMODEL, "Loop needs the graph attribute body");
    const Onnx__GraphProto *body = ba->g;
    size_t ncarried = nin >= 2 ? nin - 2 : 0;
    if (nin < 2 || ncarried > 32 || nout < ncarried || nout - ncarried > 32)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop with %zu inputs and %zu outputs (up to 32 loop-carried values "
                                                   "and 32 scan outputs are supported)", nin, nout);
    size_t nscan = nout - ncarried;
    for (size_t i = 2; i < nin; i++)
        if (!in[i] || in[i]->type.nfields >= 0)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop's loop-carried value %zu is not a tensor", i - 2);
    const char *m_name = c->node->n_input > 0 ? c->node->input[0] : "", *cond_name = c->node->n_input > 1 ? c->node->input[1] : "";
    int64_t trips;
    if (!in[0])
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop without a trip count: tth unrolls loops and needs it");
    if (vints(c, in[0], m_name, &trips, 1) != 1)
        return c->diag->code;
    if (trips < 0 || trips > TTH_UNROLL_MAX)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop of %lld iterations (tth unrolls loops: 0 to %d)", (long long)trips,
                              TTH_UNROLL_MAX);
    int go = 1;
    if (in[1]) {
        double v;
        if (in[1]->kind != TTH_REXPR_CONST) {
            tth__onnx_fail(c, TTH_EUNSUPPORTED, "input '%s' is not a constant (a loop condition known only at run time)",
                           cond_name);
            tth_diag_hint(c->diag, "tth unrolls loops at compile time: when the condition is a graph input, fix it: "
                                   "tthctl compile --bind NAME=FILE");
            return TTH_EUNSUPPORTED;
        }
        if (vscalar(c, in[1], cond_name, &v))
            return c->diag->code;
        go = v != 0;
    }
    tth_rexpr *carried[32];
    tth_rexpr **scanned = tth_arena_alloc(c->m->arena, sizeof *scanned * (size_t)(nscan * (size_t)(trips ? trips : 1) + 1));
    if (!scanned)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (size_t i = 0; i < ncarried; i++)
        carried[i] = in[2 + i];
    int64_t done = 0;
    for (int64_t k = 0; k < trips && go; k++) {
        tth_rexpr *bin[34], *bout[65];
        CHECK(bin[0] = k_scalar(c, TTH_I64, (double)k));
        CHECK(bin[1] = k_scalar(c, TTH_BOOL, 1));
        for (size_t i = 0; i < ncarried; i++)
            bin[2 + i] = carried[i];
        int rc = unroll_one(c);
        if (!rc)
            rc = tth__onnx_import_body(c, body, bin, 2 + ncarried, bout, 1 + ncarried + nscan);
        if (rc)
            return rc;
        if (bout[0]->kind != TTH_REXPR_CONST) {
            tth__onnx_fail(c, TTH_EUNSUPPORTED, "the loop's condition is computed from the data in iteration %lld: tth "
                                                "unrolls loops and needs it known at compile time", (long long)k);
            return TTH_EUNSUPPORTED;
        }
        double v;
        if (vscalar(c, bout[0], "the body's condition", &v))
            return c->diag->code;
        for (size_t i = 0; i < ncarried; i++)
            carried[i] = bout[1 + i];
        for (size_t i = 0; i < nscan; i++)
            scanned[i * (size_t)trips + (size_t)k] = bout[1 + ncarried + i];
        done++;
        go = v != 0;
    }
    for (size_t i = 0; i < ncarried; i++)
        out[i] = carried[i];
    for (size_t i = 0; i < nscan; i++) {
        if (done == 0)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop that runs no iteration has empty scan outputs, which tth "
                                                       "does not support");
        CHECK(out[ncarried + i] = stack(c, &scanned[i * (size_t)trips], done, 0));
    }
    return 0;
}

/* What one unrolled Scan runs: the body, the counts of states, scan inputs and scan outputs, the
 * steps, and per scan input / output its axis and direction (1: reversed). */
typedef struct scan_spec {
    const Onnx__GraphProto *body;
    size_t nstate, nscan_in, nscan_out;
    int64_t trips, in_axes[32], in_dirs[32], out_axes[32], out_dirs[32];
} scan_spec;

/* The unrolled scan of in (the states, then the scan inputs): step k takes slice k of each scan
 * input along its axis (from the end when reversed); out gets the final states, then each scan
 * output's steps stacked along its axis (in reverse order when reversed). */
static int scan_unroll(tth_onnx_ctx *c, const scan_spec *s, tth_rexpr *const *in, tth_rexpr **out)
{
    size_t nstate = s->nstate, nin = nstate + s->nscan_in, nout = nstate + s->nscan_out;
    int64_t trips = s->trips;
    tth_rexpr *state[32], **scanned = tth_arena_alloc(c->m->arena, sizeof(tth_rexpr *) * (s->nscan_out * (size_t)trips + 1));
    if (!scanned)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (size_t i = 0; i < nstate; i++)
        state[i] = in[i];
    for (int64_t k = 0; k < trips; k++) {
        tth_rexpr *bin[32], *bout[32];
        for (size_t i = 0; i < nstate; i++)
            bin[i] = state[i];
        for (size_t j = 0; j < s->nscan_in; j++) {
            tth_rexpr *idx;
            CHECK(idx = k_scalar(c, TTH_I64, (double)(s->in_dirs[j] ? trips - 1 - k : k)));
            CHECK(bin[nstate + j] = call2(c, TTH_OP_TAKE, in[nstate + j], idx,
                                          json_pack("{s:I}", "axis", (json_int_t)s->in_axes[j])));
        }
        int rc = unroll_one(c);
        if (!rc)
            rc = tth__onnx_import_body(c, s->body, bin, nin, bout, nout);
        if (rc)
            return rc;
        for (size_t i = 0; i < nstate; i++)
            state[i] = bout[i];
        for (size_t i = 0; i < s->nscan_out; i++)
            scanned[i * (size_t)trips + (size_t)(s->out_dirs[i] ? trips - 1 - k : k)] = bout[nstate + i];
    }
    for (size_t i = 0; i < nstate; i++)
        out[i] = state[i];
    for (size_t i = 0; i < s->nscan_out; i++) {
        int64_t ax;
        if (norm_axis(c, s->out_axes[i], rank(scanned[i * (size_t)trips]) + 1, &ax))
            return c->diag->code;
        CHECK(out[nstate + i] = stack(c, &scanned[i * (size_t)trips], trips, ax));
    }
    return 0;
}

/* Scan's body, num_scan_inputs (M of the nin inputs after `first`, the rest states) and the
 * counts of s; 0 or a failure */
static int scan_counts(tth_onnx_ctx *c, size_t first, size_t nin, size_t nout, scan_spec *s)
{
    const Onnx__AttributeProto *ba = attr(c, "body");
    if (!ba || !ba->g)
        return tth__onnx_fail(c, TTH_EMODEL, "Scan needs the graph attribute body");
    int64_t nscan_in = ai(c, "num_scan_inputs", -1);
    if (nscan_in < 1 || (size_t)nscan_in > nin - first || nin - first > 32 || nout > 32)
        return tth__onnx_fail(c, TTH_EMODEL, "Scan's num_scan_inputs %lld does not fit its %zu inputs (at most 32)",
                              (long long)nscan_in, nin - first);
    memset(s, 0, sizeof *s);
    s->body = ba->g;
    s->nscan_in = (size_t)nscan_in;
    s->nstate = nin - first - s->nscan_in;
    if (nout < s->nstate)
        return tth__onnx_fail(c, TTH_EMODEL, "Scan has %zu outputs for %zu states", nout, s->nstate);
    s->nscan_out = nout - s->nstate;
    return 0;
}

/* The steps of the scan inputs xs (n of them) along their axes, all the same, within the unroll
 * limit; -1 with diag otherwise */
static int64_t scan_trips(tth_onnx_ctx *c, tth_rexpr *const *xs, size_t n, const int64_t *axes)
{
    int64_t trips = -1;
    for (size_t j = 0; j < n; j++) {
        int64_t steps = tt(xs[j])->shape[axes[j]];
        if (trips >= 0 && steps != trips) {
            tth__onnx_fail(c, TTH_EMODEL, "scan inputs of %lld and %lld steps", (long long)trips, (long long)steps);
            return -1;
        }
        trips = steps;
    }
    if (trips < 1 || trips > TTH_UNROLL_MAX) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "Scan of %lld steps (tth unrolls scans: 1 to %d)", (long long)trips,
                       TTH_UNROLL_MAX);
        return -1;
    }
    return trips;
}

/* Scan's sequence_lens (opset 8): absent, or a constant whose every length is the full `trips` */
static int scan8_lens(tth_onnx_ctx *c, tth_rexpr *lens, int64_t batch, int64_t trips)
{
    int64_t v[TTH_UNROLL_MAX];
    if (!lens)
        return 0;
    if (lens->kind != TTH_REXPR_CONST)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Scan's sequence_lens known only at "
                                                   "run time (tth takes it absent or all %lld, the full length)",
                              (long long)trips);
    int n = vints(c, lens, "sequence_lens", v, TTH_UNROLL_MAX);
    if (n < 0)
        return c->diag->code;
    if (n != batch)
        return tth__onnx_fail(c, TTH_EMODEL, "Scan's sequence_lens has %d values for a batch of %lld", n,
                              (long long)batch);
    for (int b = 0; b < n; b++)
        if (v[b] != trips)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Scan's sequence_lens %lld "
                                                       "(batch %d) is not the full length %lld", (long long)v[b], b,
                                  (long long)trips);
    return 0;
}

/* The batch size of Scan 8's states and scan inputs (axis 0 of each; scan inputs have a sequence
 * axis 1 too), the same for all; -1 with diag otherwise */
static int64_t scan8_batch(tth_onnx_ctx *c, tth_rexpr *const *in, const scan_spec *s)
{
    int64_t batch = -1;
    for (size_t i = 0; i < s->nstate + s->nscan_in; i++) {
        int need = i < s->nstate ? 1 : 2;
        if (rank(in[i]) < need || (batch >= 0 && tt(in[i])->shape[0] != batch)) {
            tth__onnx_fail(c, TTH_EMODEL, "Scan (opset 8): input %zu is not [batch%s, ...] with the others' batch", i + 1,
                           need == 2 ? ", sequence" : "");
            return -1;
        }
        batch = tt(in[i])->shape[0];
    }
    if (batch < 1) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "Scan (opset 8) of an empty batch");
        return -1;
    }
    return batch;
}

/* Scan of opset 8: sequence_lens (absent or all the full length), then the states and the scan
 * inputs, each with the batch axis 0 (the scan inputs' sequence axis is 1), `directions` per scan
 * input. Each batch element is its own unrolled scan of the slices at that element (axis 0 taken
 * away, so the sequence axis becomes 0); the final states and the scan outputs of the elements
 * are stacked along axis 0 again. */
static int scan8(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    scan_spec s;
    int rc = nin ? scan_counts(c, 1, nin, nout, &s) : tth__onnx_fail(c, TTH_EMODEL, "Scan needs inputs");
    if (rc || (rc = tensor_input(c, in, nin)))
        return rc;
    tth_rexpr **xin = in + 1;
    for (size_t i = 0; i < s.nstate + s.nscan_in; i++)
        if (!xin[i])
            return tth__onnx_fail(c, TTH_EMODEL, "Scan's input %zu is missing", i + 1);
    int n;
    if (attr(c, "directions") && (n = aints(c, "directions", s.in_dirs, 32)) != (int)s.nscan_in)
        return tth__onnx_fail(c, TTH_EMODEL, "directions has %d values for %zu scan inputs", n, s.nscan_in);
    int64_t batch = scan8_batch(c, xin, &s), seq_axis[32];
    if (batch < 0)
        return c->diag->code;
    for (size_t j = 0; j < s.nscan_in; j++)
        seq_axis[j] = 1;
    if ((s.trips = scan_trips(c, xin + s.nstate, s.nscan_in, seq_axis)) < 0 || (rc = scan8_lens(c, in[0], batch, s.trips)))
        return c->diag->code;
    tth_rexpr **per = tth_arena_alloc(c->m->arena, sizeof *per * nout * (size_t)batch);
    if (!per)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (int64_t b = 0; b < batch; b++) {
        tth_rexpr *slice[32], *idx;
        CHECK(idx = k_scalar(c, TTH_I64, (double)b));
        for (size_t i = 0; i < s.nstate + s.nscan_in; i++)
            CHECK(slice[i] = call2(c, TTH_OP_TAKE, xin[i], idx, json_pack("{s:I}", "axis", (json_int_t)0)));
        tth_rexpr *res[32];
        if ((rc = scan_unroll(c, &s, slice, res)))
            return rc;
        for (size_t i = 0; i < nout; i++)
            per[i * (size_t)batch + (size_t)b] = res[i];
    }
    for (size_t i = 0; i < nout; i++)
        CHECK(out[i] = stack(c, &per[i * (size_t)batch], batch, 0));
    return 0;
}

/* Scan (opset 9 and later): each iteration takes slice k of every scan input along its axis;
 * opset 8 (a batch axis): scan8. */
static int op_scan(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    if (c->version < 9)
        return scan8(c, in, nin, out, nout);
    scan_spec s;
    int rc = scan_counts(c, 0, nin, nout, &s);
    if (rc)
        return rc;
    NEED(nin);
    int n;
    if (attr(c, "scan_input_axes") && (n = aints(c, "scan_input_axes", s.in_axes, 32)) != (int)s.nscan_in)
        return tth__onnx_fail(c, TTH_EMODEL, "scan_input_axes has %d values for %zu scan inputs", n, s.nscan_in);
    if (attr(c, "scan_input_directions") && (n = aints(c, "scan_input_directions", s.in_dirs, 32)) != (int)s.nscan_in)
        return tth__onnx_fail(c, TTH_EMODEL, "scan_input_directions has %d values for %zu scan inputs", n, s.nscan_in);
    if (attr(c, "scan_output_axes") && (n = aints(c, "scan_output_axes", s.out_axes, 32)) != (int)s.nscan_out)
        return tth__onnx_fail(c, TTH_EMODEL, "scan_output_axes has %d values for %zu scan outputs", n, s.nscan_out);
    if (attr(c, "scan_output_directions") && (n = aints(c, "scan_output_directions", s.out_dirs, 32)) != (int)s.nscan_out)
        return tth__onnx_fail(c, TTH_EMODEL, "scan_output_directions has %d values for %zu scan outputs", n, s.nscan_out);
    for (size_t j = 0; j < s.nscan_in; j++)
        if (norm_axis(c, s.in_axes[j], rank(in[s.nstate + j]), &s.in_axes[j]))
            return c->diag->code;
    if ((s.trips = scan_trips(c, in + s.nstate, s.nscan_in, s.in_axes)) < 0)
        return c->diag->code;
    return scan_unroll(c, &s, in, out);
}

/* If (docs/operators.md, "Control flow"): a condition known at compile time (a constant, or a graph input
 * bound with --bind) imports only the branch it takes. Otherwise both branches are imported and
 * each output is where(cond, then, else): both are computed, and the condition picks, which ONNX's
 * side-effect-free branches allow; their outputs must then have the same dtype and shape. */
static int op_if(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    const Onnx__AttributeProto *tb = attr(c, "then_branch"), *eb = attr(c, "else_branch");
    if (!tb || !tb->g || !eb || !eb->g)
        return tth__onnx_fail(c, TTH_EMODEL, "If needs the graph attributes then_branch and else_branch");
    if (in[0]->type.nfields >= 0 || in[0]->type.tensor.dtype != TTH_BOOL || tth_ttype_numel(&in[0]->type.tensor) != 1)
        return tth__onnx_fail(c, TTH_EMODEL, "If's condition must be one bool value");
    if (nout == 0 || nout > 64)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "If with %zu outputs (1 to 64 are supported)", nout);
    if (in[0]->kind == TTH_REXPR_CONST) {
        int take = tth__ld_f64(in[0]->u.constant.value, 0) != 0;
        return tth__onnx_import_body(c, take ? tb->g : eb->g, NULL, 0, out, nout);
    }
    tth_rexpr *then_out[64], *else_out[64];
    int rc = tth__onnx_import_body(c, tb->g, NULL, 0, then_out, nout);
    if (!rc)
        rc = tth__onnx_import_body(c, eb->g, NULL, 0, else_out, nout);
    if (rc)
        return rc;
    static const int64_t scalar[1] = {0};
    tth_rexpr *cond = rank(in[0]) == 0 ? in[0] : reshape(c, in[0], scalar, 0);
    if (!cond)
        return c->diag->code;
    for (size_t i = 0; i < nout; i++) {
        const tth_ttype *t = &then_out[i]->type.tensor, *e = &else_out[i]->type.tensor;
        int same = t->dtype == e->dtype && t->rank == e->rank;
        for (int d = 0; same && d < t->rank; d++)
            same = t->shape[d] == e->shape[d];
        if (!same) {
            char ts[160], es[160];
            tth_ttype_format(t, ts, sizeof ts);
            tth_ttype_format(e, es, sizeof es);
            tth__onnx_fail(c, TTH_EUNSUPPORTED,
                           "If's output %zu is %s in then_branch and %s in else_branch, and the condition is not "
                           "known at compile time", i, ts, es);
            tth_diag_hint(c->diag, "tth compiles both branches and picks at run time, which needs equal shapes; "
                                   "if the condition is a graph input, fix it: tthctl compile --bind NAME=FILE");
            return TTH_EUNSUPPORTED;
        }
        tth_rexpr *args[3] = {cond, then_out[i], else_out[i]};
        CHECK(out[i] = call(c, TTH_OP_WHERE, args, 3, NULL));
    }
    return 0;
}

/* ---------------------------------------------------------------- the rows */

const tth_onnx_op tth__onnx_control_ops[] = {
    {"If", 1, op_if, 0, NULL},
    {"Loop", 1, op_loop, 0, NULL},
    {"Scan", 8, op_scan, 0, NULL},
    {"Scan", 9, op_scan, 0, NULL},
    {NULL, 0, NULL, 0, NULL},
};
