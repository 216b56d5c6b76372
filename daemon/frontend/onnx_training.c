/* onnx_training.c: training: the losses and the operators of ai.onnx.preview.training.
 * One function per operator, and the family's rows of the operator table: each row names the
 * opset range it imports (docs/operators.md, "The operator table"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

/* The negative log-likelihood of `logp` ([N, C, d...]) at `target` ([N, d...]) with optional
 * class weights and ignore_index, reduced as ONNX says: none; sum; mean, which divides by the
 * sum of the weights that applied (the count of the targets not ignored without weights).
 * Composed of gather_elements, take, where and reductions (docs/operators.md). */
static int nll_loss(tth_onnx_ctx *c, tth_rexpr *logp, tth_rexpr *target, tth_rexpr *weight, tth_rexpr **out)
{
    const char *red = as(c, "reduction", "mean");
    if (strcmp(red, "none") && strcmp(red, "sum") && strcmp(red, "mean"))
        return tth__onnx_fail(c, TTH_EMODEL, "reduction '%s' is not none, sum or mean", red);
    int r = rank(logp);
    if (r < 2 || rank(target) != r - 1)
        return tth__onnx_fail(c, TTH_EMODEL, "the scores are [N, C, ...] (rank %d) and the target [N, ...] (rank %d)",
                              r, rank(target));
    tth_dtype fdt = tt(logp)->dtype;
    tth_rexpr *t = cast_to(c, target, TTH_I64), *eq = NULL;
    CHECK(t);
    const Onnx__AttributeProto *ig = attr(c, "ignore_index");
    if (ig && ig->has_i) {
        tth_rexpr *k = k_scalar(c, TTH_I64, (double)ig->i), *z = k_scalar(c, TTH_I64, 0);
        CHECK(k && z);
        CHECK(eq = call2(c, TTH_OP_EQUAL, t, k, NULL));
        tth_rexpr *wa[3] = {eq, z, t};
        CHECK(t = call(c, TTH_OP_WHERE, wa, 3, NULL)); /* an ignored target reads class 0, weighted 0 */
    }
    int64_t us[TTH_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++)
        us[i] = i == 1 ? 1 : tt(t)->shape[j++];
    tth_rexpr *t1, *g, *loss;
    CHECK(t1 = reshape(c, t, us, r));
    CHECK(g = gather_elements(c, logp, t1, 1));
    CHECK(g = reshape(c, g, tt(t)->shape, r - 1));
    CHECK(loss = call1(c, TTH_OP_NEGATIVE, g, NULL));
    tth_rexpr *w = NULL;
    if (weight)
        CHECK(w = call2(c, TTH_OP_TAKE, weight, t, json_pack("{s:i}", "axis", 0)));
    if (eq) {
        tth_rexpr *zero = k_scalar(c, fdt, 0), *one = k_scalar(c, fdt, 1);
        CHECK(zero && one);
        tth_rexpr *wa[3] = {eq, zero, w ? w : one};
        CHECK(w = call(c, TTH_OP_WHERE, wa, 3, NULL));
    }
    if (w)
        CHECK(loss = call2(c, TTH_OP_MULTIPLY, loss, w, NULL));
    if (!strcmp(red, "none")) {
        out[0] = loss;
        return 0;
    }
    int64_t ax[TTH_MAX_RANK];
    for (int i = 0; i < r - 1; i++)
        ax[i] = i;
    json_t *all = tth__json_ints(ax, r - 1);
    tth_rexpr *sum;
    CHECK(sum = call1(c, TTH_OP_SUM, loss, json_pack("{s:O,s:b}", "axis", all, "keepdims", 0)));
    if (!strcmp(red, "sum")) {
        json_decref(all);
        out[0] = sum;
        return 0;
    }
    if (!w) {
        json_decref(all);
        CHECK(out[0] = call1(c, TTH_OP_MEAN, loss, json_pack("{s:o,s:b}", "axis", tth__json_ints(ax, r - 1),
                                                                 "keepdims", 0)));
        return 0;
    }
    tth_rexpr *wsum;
    CHECK(wsum = call1(c, TTH_OP_SUM, w, json_pack("{s:o,s:b}", "axis", all, "keepdims", 0)));
    CHECK(out[0] = call2(c, TTH_OP_DIVIDE, sum, wsum, NULL));
    return 0;
}

/* NegativeLogLikelihoodLoss(input, target[, weight]). */
static int op_nll_loss(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    return nll_loss(c, in[0], in[1], nin > 2 ? in[2] : NULL, out);
}

/* SoftmaxCrossEntropyLoss(scores, labels[, weights]): the negative log-likelihood of
 * log_softmax over the class axis 1; the optional second output is that log_softmax. */
static int op_softmax_ce_loss(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    if (rank(in[0]) < 2)
        return tth__onnx_fail(c, TTH_EMODEL, "the scores are [N, C, ...]: rank %d", rank(in[0]));
    tth_rexpr *logp;
    CHECK(logp = call1(c, TTH_OP_LOG_SOFTMAX, in[0], json_pack("{s:i}", "axis", 1)));
    if (nout > 1)
        out[1] = logp;
    return nll_loss(c, logp, in[1], nin > 2 ? in[2] : NULL, out);
}

/* A float attribute the operator requires (Momentum's): 0, or a diagnostic naming it when it is
 * absent or not a float. */
static int af_required(tth_onnx_ctx *c, const char *name, double *out)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || !a->has_f)
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' requires the float attribute '%s'", c->node->op_type, name);
    *out = a->f;
    return 0;
}

/* x * k for a constant k of x's dtype. */
static tth_rexpr *scale_by(tth_onnx_ctx *c, tth_rexpr *x, double k)
{
    tth_rexpr *kk = x ? kx(c, x, k) : NULL;
    return kk ? call2(c, TTH_OP_MULTIPLY, x, kk, NULL) : NULL;
}

/* The optimizers' inputs R, T, then `groups` lists of n tensors each (X..., G..., V..., H...):
 * checks the counts, that R and T hold one value each (T an integer) and that the tensors of one
 * index are float of one shape. Sets *n, and R and T as rank-0 values of X's dtype (R cast). */
static int optimizer_inputs(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, size_t nout, int groups, size_t *n,
                            tth_rexpr **r, tth_rexpr **t)
{
    NEED(2);
    if (nin < 2 + (size_t)groups || (nin - 2) % (size_t)groups)
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' takes R, T and %d lists of as many tensors; it has %zu inputs",
                              c->node->op_type, groups, nin);
    *n = (nin - 2) / (size_t)groups;
    if (nout != *n * (size_t)(groups - 1))
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' of %zu tensors has %zu outputs; the node lists %zu",
                              c->node->op_type, *n, *n * (size_t)(groups - 1), nout);
    for (size_t i = 2; i < nin; i++) {
        tth_rexpr *x = in[2 + (i - 2) % *n];
        if (!in[i] || !tth_dtype_is_float(tt(in[i])->dtype) || tt(in[i])->dtype != tt(x)->dtype ||
            rank(in[i]) != rank(x) || memcmp(tt(in[i])->shape, tt(x)->shape, sizeof(int64_t) * (size_t)rank(x)))
            return tth__onnx_fail(c, TTH_EMODEL, "input %zu of '%s' is absent, not float, or not of the dtype and "
                                  "shape of the tensor it updates (input %zu)", i, c->node->op_type, 2 + (i - 2) % *n);
    }
    if (tth_ttype_numel(tt(in[0])) != 1 || !tth_dtype_is_float(tt(in[0])->dtype))
        return tth__onnx_fail(c, TTH_EMODEL, "the learning rate R of '%s' must be one float", c->node->op_type);
    if (tth_ttype_numel(tt(in[1])) != 1 || tth_dtype_is_float(tt(in[1])->dtype))
        return tth__onnx_fail(c, TTH_EMODEL, "the step count T of '%s' must be one integer", c->node->op_type);
    tth_dtype dt = tt(in[2])->dtype;
    int64_t scalar[1] = {1};
    CHECK(*r = cast_to(c, reshape(c, in[0], scalar, 0), dt));
    CHECK(*t = cast_to(c, reshape(c, in[1], scalar, 0), dt));
    return 0;
}

/* norm_coefficient * x + g: the gradient with the L2 regularization's term. */
static tth_rexpr *regularized(tth_onnx_ctx *c, tth_rexpr *x, tth_rexpr *g, double norm)
{
    tth_rexpr *nx = scale_by(c, x, norm);
    return nx ? call2(c, TTH_OP_ADD, nx, g, NULL) : NULL;
}

/* The scalar where(T > 0, a, b). */
static tth_rexpr *if_t_positive(tth_onnx_ctx *c, tth_rexpr *t, tth_rexpr *a, tth_rexpr *b)
{
    tth_rexpr *zero = kx(c, t, 0), *pos = zero ? call2(c, TTH_OP_GREATER, t, zero, NULL) : NULL;
    tth_rexpr *wa[3] = {pos, a, b};
    return pos && a && b ? call(c, TTH_OP_WHERE, wa, 3, NULL) : NULL;
}

/* Adagrad(R, T, X..., G..., H...) -> X_new..., H_new...: with r = R / (1 + T * decay_factor) and
 * g = norm_coefficient * X + G, H_new = H + g * g and X_new = X - r * g / (sqrt(H_new) + epsilon).
 * Defaults: decay_factor 0, epsilon 1e-6, norm_coefficient 0. */
static int op_adagrad(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    size_t n;
    tth_rexpr *r, *t, *d;
    int rc = optimizer_inputs(c, in, nin, nout, 3, &n, &r, &t);
    if (rc)
        return rc;
    double decay = af(c, "decay_factor", 0), eps = af(c, "epsilon", 1e-6), norm = af(c, "norm_coefficient", 0);
    CHECK(d = scale_by(c, t, decay));
    CHECK(d = call2(c, TTH_OP_ADD, d, kx(c, t, 1), NULL));
    CHECK(r = call2(c, TTH_OP_DIVIDE, r, d, NULL));
    for (size_t i = 0; i < n; i++) {
        tth_rexpr *x = in[2 + i], *g, *h, *s, *u;
        CHECK(g = regularized(c, x, in[2 + n + i], norm));
        CHECK(h = call2(c, TTH_OP_MULTIPLY, g, g, NULL));
        CHECK(h = call2(c, TTH_OP_ADD, in[2 + 2 * n + i], h, NULL));
        CHECK(s = call1(c, TTH_OP_SQRT, h, NULL));
        CHECK(s = call2(c, TTH_OP_ADD, s, kx(c, s, eps), NULL));
        CHECK(u = call2(c, TTH_OP_MULTIPLY, r, g, NULL));
        CHECK(u = call2(c, TTH_OP_DIVIDE, u, s, NULL));
        CHECK(out[i] = call2(c, TTH_OP_SUBTRACT, x, u, NULL));
        out[n + i] = h;
    }
    return 0;
}

/* Momentum(R, T, X..., G..., V...) -> X_new..., V_new...: with g = norm_coefficient * X + G,
 * V_new = alpha * V + beta' * g where beta' is beta when T > 0 and 1 on the first step; mode
 * "standard": X_new = X - R * V_new; "nesterov": X_new = X - R * (g + alpha * V_new). All four
 * attributes are required. */
static int op_momentum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    size_t n;
    tth_rexpr *r, *t, *b;
    double alpha = 0, beta = 0, norm = 0;
    int rc = optimizer_inputs(c, in, nin, nout, 3, &n, &r, &t);
    if (!rc)
        rc = af_required(c, "alpha", &alpha);
    if (!rc)
        rc = af_required(c, "beta", &beta);
    if (!rc)
        rc = af_required(c, "norm_coefficient", &norm);
    if (rc)
        return rc;
    const char *mode = as(c, "mode", "");
    int nesterov = !strcmp(mode, "nesterov");
    if (!nesterov && strcmp(mode, "standard"))
        return tth__onnx_fail(c, TTH_EMODEL, "Momentum's mode '%s' is not 'standard' or 'nesterov'", mode);
    CHECK(b = if_t_positive(c, t, kx(c, t, beta), kx(c, t, 1)));
    for (size_t i = 0; i < n; i++) {
        tth_rexpr *x = in[2 + i], *g, *v, *u;
        CHECK(g = regularized(c, x, in[2 + n + i], norm));
        CHECK(u = call2(c, TTH_OP_MULTIPLY, b, g, NULL));
        CHECK(v = scale_by(c, in[2 + 2 * n + i], alpha));
        CHECK(v = call2(c, TTH_OP_ADD, v, u, NULL));
        u = v;
        if (nesterov) {
            CHECK(u = scale_by(c, v, alpha));
            CHECK(u = call2(c, TTH_OP_ADD, g, u, NULL));
        }
        CHECK(u = call2(c, TTH_OP_MULTIPLY, r, u, NULL));
        CHECK(out[i] = call2(c, TTH_OP_SUBTRACT, x, u, NULL));
        out[n + i] = v;
    }
    return 0;
}

/* Adam's step size: R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R. */
static tth_rexpr *adam_rate(tth_onnx_ctx *c, tth_rexpr *r, tth_rexpr *t, double alpha, double beta)
{
    tth_rexpr *one = kx(c, t, 1), *pa, *pb, *q;
    if (!one || !(pa = call2(c, TTH_OP_POWER, kx(c, t, alpha), t, NULL)) ||
        !(pb = call2(c, TTH_OP_POWER, kx(c, t, beta), t, NULL)) || !(pa = call2(c, TTH_OP_SUBTRACT, one, pa, NULL)) ||
        !(pb = call2(c, TTH_OP_SUBTRACT, one, pb, NULL)) || !(pb = call1(c, TTH_OP_SQRT, pb, NULL)) ||
        !(q = call2(c, TTH_OP_MULTIPLY, r, pb, NULL)) || !(q = call2(c, TTH_OP_DIVIDE, q, pa, NULL)))
        return NULL;
    return if_t_positive(c, t, q, r);
}

/* Adam(R, T, X..., G..., V..., H...) -> X_new..., V_new..., H_new...: with g = norm_coefficient *
 * X + G, V_new = alpha * V + (1 - alpha) * g, H_new = beta * H + (1 - beta) * g * g, X_new =
 * (1 - norm_coefficient_post) * (X - adam_rate * V_new / (sqrt(H_new) + epsilon)). Defaults:
 * alpha 0.9, beta 0.999, epsilon 1e-6, both norm coefficients 0. */
static int op_adam(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    size_t n;
    tth_rexpr *r, *t;
    int rc = optimizer_inputs(c, in, nin, nout, 4, &n, &r, &t);
    if (rc)
        return rc;
    double alpha = af(c, "alpha", 0.9), beta = af(c, "beta", 0.999), eps = af(c, "epsilon", 1e-6);
    double norm = af(c, "norm_coefficient", 0), post = af(c, "norm_coefficient_post", 0);
    CHECK(r = adam_rate(c, r, t, alpha, beta));
    for (size_t i = 0; i < n; i++) {
        tth_rexpr *x = in[2 + i], *g, *v, *h, *u, *s;
        CHECK(g = regularized(c, x, in[2 + n + i], norm));
        CHECK(v = call2(c, TTH_OP_ADD, scale_by(c, in[2 + 2 * n + i], alpha), scale_by(c, g, 1 - alpha), NULL));
        CHECK(h = call2(c, TTH_OP_MULTIPLY, g, g, NULL));
        CHECK(h = call2(c, TTH_OP_ADD, scale_by(c, in[2 + 3 * n + i], beta), scale_by(c, h, 1 - beta), NULL));
        CHECK(s = call1(c, TTH_OP_SQRT, h, NULL));
        CHECK(s = call2(c, TTH_OP_ADD, s, kx(c, s, eps), NULL));
        CHECK(u = call2(c, TTH_OP_DIVIDE, v, s, NULL));
        CHECK(u = call2(c, TTH_OP_MULTIPLY, r, u, NULL));
        CHECK(u = call2(c, TTH_OP_SUBTRACT, x, u, NULL));
        CHECK(out[i] = scale_by(c, u, 1 - post));
        out[n + i] = v;
        out[2 * n + i] = h;
    }
    return 0;
}

/* A string-list attribute as NUL-terminated copies in the module arena: the count, -1 when
 * absent or of another type, -2 with a diagnostic when longer than max. */
static int astrings(tth_onnx_ctx *c, const char *name, const char **out, int max)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || !a->n_strings)
        return -1;
    if (a->n_strings > (size_t)max) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "attribute '%s' has %zu values (at most %d)", name, a->n_strings, max);
        return -2;
    }
    for (size_t i = 0; i < a->n_strings; i++) {
        char *s = tth_arena_alloc(c->m->arena, a->strings[i].len + 1);
        if (!s) {
            tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
            return -2;
        }
        if (a->strings[i].len)
            memcpy(s, a->strings[i].data, a->strings[i].len);
        s[a->strings[i].len] = 0;
        out[i] = s;
    }
    return (int)a->n_strings;
}

/* The values between the xs and y, in post-order (y last), each with its adjoint and whether it
 * depends on an x; found by pointer through an open-addressing index. */
typedef struct grad_node {
    tth_rexpr *e, *adj;
    int active, is_x;
} grad_node;

typedef struct grad_graph {
    grad_node *nodes;
    size_t n, cap;
    size_t *slots; /* index + 1, 0 when free */
    size_t nslots;
} grad_graph;

#define GRAD_MAX_NODES ((size_t)1 << 20)

static size_t grad_slot(const grad_graph *g, const tth_rexpr *e)
{
    size_t j = ((uintptr_t)e >> 4) * 0x9E3779B97F4A7C15ull & (g->nslots - 1);
    while (g->slots[j] && g->nodes[g->slots[j] - 1].e != e)
        j = (j + 1) & (g->nslots - 1);
    return j;
}

/* The index of e in g, or -1. */
static int64_t grad_find(const grad_graph *g, const tth_rexpr *e)
{
    if (!g->nslots)
        return -1;
    size_t j = grad_slot(g, e);
    return g->slots[j] ? (int64_t)g->slots[j] - 1 : -1;
}

/* Appends e (not yet in g); 0 or TTH_ENOMEM / TTH_ELIMIT. */
static int grad_add(grad_graph *g, tth_rexpr *e, int active, int is_x)
{
    if (g->n >= GRAD_MAX_NODES)
        return TTH_ELIMIT;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        grad_node *nn = realloc(g->nodes, cap * sizeof *nn);
        if (!nn)
            return TTH_ENOMEM;
        g->nodes = nn;
        g->cap = cap;
    }
    if (2 * (g->n + 1) > g->nslots) {
        size_t ns = g->nslots ? 2 * g->nslots : 128;
        free(g->slots);
        if (!(g->slots = calloc(ns, sizeof *g->slots)))
            return TTH_ENOMEM;
        g->nslots = ns;
        for (size_t i = 0; i < g->n; i++)
            g->slots[grad_slot(g, g->nodes[i].e)] = i + 1;
    }
    g->nodes[g->n] = (grad_node){.e = e, .active = active, .is_x = is_x};
    g->slots[grad_slot(g, e)] = ++g->n;
    return 0;
}

static void grad_free(grad_graph *g)
{
    free(g->nodes);
    free(g->slots);
}

/* Walks from y down to the xs (not below them) through each value's operands (tth__node_args:
 * a call's arguments, a tuple's fields, the tuple a field is taken from), depth first without
 * recursion, adding each value after its operands; a value is active when it is an x or an
 * operand of it is. */
static int grad_collect(tth_onnx_ctx *c, grad_graph *g, tth_rexpr *y, tth_rexpr **xs, size_t nx)
{
    typedef struct { tth_rexpr *e; size_t next; } frame;
    size_t sn = 0, scap = 64;
    frame *st = malloc(scap * sizeof *st);
    int rc = st ? 0 : TTH_ENOMEM;
    if (st)
        st[sn++] = (frame){y, 0};
    while (!rc && sn) {
        frame *f = &st[sn - 1];
        int is_x = 0;
        for (size_t i = 0; i < nx; i++)
            is_x |= xs[i] == f->e;
        tth_rexpr *const *kids;
        size_t nk = is_x ? 0 : tth__node_args(f->e, &kids);
        while (f->next < nk && grad_find(g, kids[f->next]) >= 0)
            f->next++;
        if (f->next < nk) {
            tth_rexpr *k = kids[f->next];
            if (sn == scap) {
                frame *ns = realloc(st, 2 * scap * sizeof *ns);
                if (!ns) {
                    rc = TTH_ENOMEM;
                    break;
                }
                st = ns;
                scap *= 2;
            }
            st[sn++] = (frame){k, 0};
            continue;
        }
        int active = is_x;
        for (size_t i = 0; i < nk; i++)
            active |= g->nodes[grad_find(g, kids[i])].active;
        rc = grad_add(g, f->e, active, is_x);
        sn--;
    }
    free(st);
    if (rc)
        return tth__onnx_fail(c, rc, rc == TTH_ENOMEM ? "out of memory" : "the graph to differentiate has more than "
                              "%zu values", GRAD_MAX_NODES);
    return 0;
}

/* grad (of the shape of a broadcast result) summed over the axes along which `to` was broadcast,
 * reshaped to `to`'s shape. */
static tth_rexpr *unbroadcast(tth_onnx_ctx *c, tth_rexpr *grad, const tth_rexpr *to)
{
    int r = rank(grad), k = rank(to), na = 0;
    int64_t axes[TTH_MAX_RANK];
    for (int i = 0; i < r; i++)
        if (i < r - k || (tt(to)->shape[i - (r - k)] == 1 && tt(grad)->shape[i] != 1))
            axes[na++] = i;
    if (na)
        grad = call1(c, TTH_OP_SUM, grad, json_pack("{s:o,s:b}", "axis", tth__json_ints(axes, na), "keepdims", 1));
    return reshape(c, grad, tt(to)->shape, k);
}

/* The contribution to operand `arg` of the call z = e (adjoint a): the derivative of add,
 * subtract, multiply, divide and negative times a, summed back to the operand's shape (over the
 * axes it was broadcast along); a reshaped back for reshape; NULL with a diagnostic for another
 * operator. */
static tth_rexpr *grad_operand(tth_onnx_ctx *c, tth_rexpr *e, size_t arg, tth_rexpr *a)
{
    tth_rexpr **x = e->u.call.args, *d = NULL;
    switch (e->kind == TTH_REXPR_CALL && !e->u.call.fn ? e->u.call.op : TTH_OP_INVALID) {
    case TTH_OP_ADD: d = a; break;
    case TTH_OP_SUBTRACT: d = arg ? call1(c, TTH_OP_NEGATIVE, a, NULL) : a; break;
    case TTH_OP_NEGATIVE: d = call1(c, TTH_OP_NEGATIVE, a, NULL); break;
    case TTH_OP_MULTIPLY: d = call2(c, TTH_OP_MULTIPLY, a, x[1 - arg], NULL); break;
    case TTH_OP_RESHAPE: return reshape(c, a, tt(x[0])->shape, rank(x[0]));
    case TTH_OP_DIVIDE:
        if (!arg) {
            d = call2(c, TTH_OP_DIVIDE, a, x[1], NULL);
        } else { /* d(x0 / x1)/d(x1) = -x0 / x1^2 */
            tth_rexpr *q = call2(c, TTH_OP_DIVIDE, x[0], call2(c, TTH_OP_MULTIPLY, x[1], x[1], NULL), NULL);
            d = call1(c, TTH_OP_NEGATIVE, call2(c, TTH_OP_MULTIPLY, a, q, NULL), NULL);
        }
        break;
    default: {
        const char *what = e->kind == TTH_REXPR_CALL && !e->u.call.fn ? tth_op_name(e->u.call.op)
                           : e->kind == TTH_REXPR_CALL ? "a function call" : "a tuple";
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "Gradient through operator '%s'%s%s%s is not supported", what,
                       e->span ? " (node '" : "", e->span ? e->span : "", e->span ? "')" : "");
        tth_diag_hint(c->diag, "tth differentiates Add, Sub, Mul, Div, Neg and Reshape (docs/operators.md "
                               "\"Training operators\")");
        return NULL;
    }
    }
    return d ? unbroadcast(c, d, x[arg]) : NULL;
}

/* Reverse-mode differentiation over g (y last): y's adjoint is `seed`, each active call passes
 * its adjoint's contributions on to its active operands, summed where a value has several
 * users. The xs' adjoints are then in g. */
static int grad_backward(tth_onnx_ctx *c, grad_graph *g, tth_rexpr *seed)
{
    g->nodes[g->n - 1].adj = seed;
    for (size_t i = g->n; i-- > 0;) {
        grad_node *v = &g->nodes[i];
        if (!v->adj || !v->active || v->is_x)
            continue;
        tth_rexpr *const *kids;
        size_t nk = tth__node_args(v->e, &kids);
        for (size_t k = 0; k < nk; k++) {
            grad_node *o = &g->nodes[grad_find(g, kids[k])];
            if (!o->active)
                continue;
            tth_rexpr *d = grad_operand(c, v->e, k, v->adj);
            CHECK(d);
            CHECK(o->adj = o->adj ? call2(c, TTH_OP_ADD, o->adj, d, NULL) : d);
        }
    }
    return 0;
}

/* The constant v broadcast to the shape of `like`. */
static tth_rexpr *filled_like(tth_onnx_ctx *c, tth_rexpr *like, double v)
{
    tth_rexpr *k = kx(c, like, v);
    return k ? call1(c, TTH_OP_BROADCAST_TO, k, json_pack("{s:o}", "shape", tth__json_ints(tt(like)->shape,
                                                                                           rank(like)))) : NULL;
}

/* The values a Gradient node names: xs (the node's first inputs must be their values), y, and
 * the count of zs (the inputs after the xs). */
static int gradient_names(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, size_t nout, const char **xs, int *nx,
                          tth_rexpr **y)
{
    const char *zs[MAXV], *yname = as(c, "y", NULL);
    *nx = astrings(c, "xs", xs, MAXV);
    int nz = astrings(c, "zs", zs, MAXV);
    if (*nx == -2 || nz == -2)
        return c->diag->code;
    if (*nx < 1 || !yname)
        return tth__onnx_fail(c, TTH_EMODEL, "Gradient needs the attributes 'xs' (names) and 'y' (a name)");
    nz = nz < 0 ? 0 : nz;
    if (nin != (size_t)(*nx + nz) || nout != (size_t)*nx)
        return tth__onnx_fail(c, TTH_EMODEL, "Gradient takes one input per name of xs and zs (%d) and gives one output "
                              "per name of xs (%d); the node has %zu inputs and %zu outputs", *nx + nz, *nx, nin, nout);
    for (int i = 0; i < *nx; i++)
        if (!in[i] || in[i] != tth__onnx_value(c, xs[i]))
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input %d of Gradient is not the value of '%s' (xs[%d]): "
                                  "tth differentiates the graph as computed", i, xs[i], i);
    *y = tth__onnx_value(c, yname);
    if (!*y || (*y)->type.nfields >= 0 || !tth_dtype_is_float(tt(*y)->dtype))
        return tth__onnx_fail(c, TTH_EMODEL, "Gradient's y '%s' is not a float tensor computed before the node", yname);
    return 0;
}

/* Gradient (ai.onnx.preview.training): outputs dy/dx for each x of the attribute xs, y being
 * the tensor the attribute y names; reverse-mode differentiation over the values between them,
 * seeded with ones of y's shape (so each output is the gradient of the sum of y). An x y does
 * not depend on gets zeros. docs/operators.md "Training operators". */
static int op_gradient(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    const char *xs[MAXV];
    int nx = 0;
    tth_rexpr *y = NULL, *seed;
    int rc = tensor_input(c, in, nin);
    if (!rc)
        rc = gradient_names(c, in, nin, nout, xs, &nx, &y);
    if (rc)
        return rc;
    for (int i = 0; i < nx; i++) {
        if (!tth_dtype_is_float(tt(in[i])->dtype))
            return tth__onnx_fail(c, TTH_EMODEL, "Gradient with respect to '%s', which is not float", xs[i]);
        if (in[i]->kind == TTH_REXPR_CONST) /* what was computed from it is folded away */
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Gradient with respect to '%s', a constant: the importer "
                                  "folds what is computed from constants, so tth cannot differentiate it", xs[i]);
    }
    grad_graph g = {0};
    rc = grad_collect(c, &g, y, in, (size_t)nx);
    if (!rc && !(seed = filled_like(c, y, 1)))
        rc = c->diag->code;
    if (!rc)
        rc = grad_backward(c, &g, seed);
    for (int i = 0; !rc && i < nx; i++) {
        int64_t k = grad_find(&g, in[i]);
        out[i] = k >= 0 && g.nodes[k].adj ? g.nodes[k].adj : filled_like(c, in[i], 0);
        if (!out[i] || tt(out[i])->dtype != tt(in[i])->dtype)
            rc = out[i] ? tth__onnx_fail(c, TTH_EMODEL, "the gradient of '%s' is not of its dtype", xs[i])
                        : c->diag->code;
    }
    grad_free(&g);
    return rc;
}

/* ---------------------------------------------------------------- the rows */

const tth_onnx_op tth__onnx_training_ops[] = {
    {"NegativeLogLikelihoodLoss", 12, op_nll_loss, 0, NULL},
    {"SoftmaxCrossEntropyLoss", 12, op_softmax_ce_loss, 0, NULL},
    {NULL, 0, NULL, 0, NULL},
};

/* The operators of the domain ai.onnx.preview.training (docs/operators.md "Training operators"), at its
 * version 1. */
const tth_onnx_op tth__onnx_training_domain_ops[] = {
    {"Adagrad", 1, op_adagrad, 0, NULL},
    {"Adam", 1, op_adam, 0, NULL},
    {"Gradient", 1, op_gradient, 0, NULL},
    {"Momentum", 1, op_momentum, 0, NULL},
    {NULL, 0, NULL, 0, NULL},
};
