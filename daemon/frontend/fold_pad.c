/* fold_pad.c: a zero padding of the image's rows and columns, written as its own nn.pad before a
 * convolution or an average pool (older exporters write ONNX Pad + AveragePool, TensorFlow's
 * converters Pad + Conv), becomes that operator's own padding (docs/operators.md, "Passes"):
 *  - nn.conv2d: its padding grows by the pad's amounts; the taps on the zeros add nothing either
 *    way;
 *  - nn.avg_pool2d without padding of its own, or counting it (count_include_pad): its padding
 *    grows and it counts the padding, as the average over the padded image did.
 * The pad must be constant mode with value 0, leave N and C alone, and have that operator as its
 * only user. Then the image is not copied into a padded one, and the layout pass, which keeps
 * convolutions and pools in blocked channels but not nn.pad, no longer converts the layout
 * around it (Inception-v3's nine pool branches). Requires: a well-typed module; NCHW operators
 * (before the layout pass). */
#include <string.h>

#include "frontend_internal.h"

/* The pad's rows and columns before and after (top, left, bottom, right) when it is a zero pad of
 * H and W only of a rank-4 tensor; 0 otherwise. */
static int zero_pad_hw(const tth_rexpr *pad, int64_t hw[4])
{
    tth_pad_attrs p;
    if (pad->u.call.nargs != 1 || pad->type.nfields >= 0 || pad->type.tensor.rank != 4 ||
        tth_pad_attrs_of(pad->u.call.attrs, 4, &p, NULL) || p.mode != TTH_PAD_CONSTANT || p.value != 0.0 ||
        p.before[0] || p.before[1] || p.after[0] || p.after[1])
        return 0;
    hw[0] = p.before[2];
    hw[1] = p.before[3];
    hw[2] = p.after[2];
    hw[3] = p.after[3];
    return 1;
}

static tth_rexpr *pad_visit(void *ctx, tth_relay_module *m, tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                            tth_diag *diag)
{
    tth__rewriter *rw = ctx;
    if (orig->kind != TTH_REXPR_CALL || orig->u.call.fn || nargs < 1 ||
        (orig->u.call.op != TTH_OP_CONV2D && orig->u.call.op != TTH_OP_AVG_POOL2D))
        return TTH_REWRITE_KEEP;
    const json_t *at = orig->u.call.attrs;
    tth_rexpr *pad = args[0], *opad = orig->u.call.args[0];
    int64_t hw[4], p[4];
    if (pad->kind != TTH_REXPR_CALL || pad->u.call.fn || pad->u.call.op != TTH_OP_PAD || opad->id > rw->max_id ||
        rw->nusers[opad->id] != 1 || !zero_pad_hw(pad, hw) || json_object_get(at, "data_layout") ||
        json_object_get(at, "layout") || tth__attr_ints(at, "padding", p, 4) != 4)
        return TTH_REWRITE_KEEP;
    int pool = orig->u.call.op == TTH_OP_AVG_POOL2D;
    int counted = json_is_true(json_object_get(at, "count_include_pad"));
    if (pool && !counted && (p[0] || p[1] || p[2] || p[3]))
        return TTH_REWRITE_KEEP; /* its own padding is not counted, the pad's zeros were */
    for (int i = 0; i < 4; i++)
        p[i] += hw[i];
    json_t *na = json_deep_copy(at);
    if (!na || json_object_set_new(na, "padding", tth__json_ints(p, 4)) ||
        (pool && json_object_set_new(na, "count_include_pad", json_true()))) {
        json_decref(na);
        tth_diag_set(diag, TTH_ENOMEM, orig->span, "out of memory folding a pad");
        return NULL;
    }
    tth_rexpr *nargs_[3];
    memcpy(nargs_, args, sizeof(tth_rexpr *) * (nargs < 3 ? nargs : 3));
    nargs_[0] = pad->u.call.args[0];
    tth_relay_set_span(m, orig->span);
    tth_rexpr *r = tth_relay_call(m, orig->u.call.op, nargs_, nargs < 3 ? nargs : 3, na, diag);
    tth_relay_set_span(m, NULL);
    return r;
}

int tth_relay_fold_pad(tth_relay_module *m, tth_diag *diag)
{
    return tth__rewrite_module(m, pad_visit, diag);
}
