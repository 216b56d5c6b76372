/* aot.c: the AOT executor entry, `tth_<model>_run`, a PrimFunc calling each operator in order.
 *
 * Requires: the Relay module is fused (every op call of "main" is inside a function called from
 * main) and every such function was lowered (the `lowered` table maps it to its PrimFunc, whose
 * params are the function's params then one per result tensor). Produces: the entry PrimFunc
 * (params: one INPUT buffer per main param, then one OUTPUT buffer per main result field), its
 * body a sequence of TTH_TSTMT_CALL_FUNC in main's topological order over INPUT, OUTPUT,
 * CONST and WORKSPACE buffers; a result that is not computed by a call (an input or a constant
 * returned as is, or one value returned twice) is copied into its output at the end. A flat
 * concatenation of workspace buffers calls nothing: its inputs become slices of its output
 * (out->aliases, docs/lowering.md "Concatenation in place"); nor does a view, whose result
 * becomes a slice of its input (docs/lowering.md, "Views").
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compile_internal.h"

static const char *const c_reserved[] = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
    "unused_",
    /* TTH_<MODEL>_WORKSPACE_SIZE is the workspace's macro: no input or output may take it */
    "workspace", NULL,
};

/* A C identifier from an ONNX name, unique (ignoring case, so the upper-case size macros are
 * unique too) among `taken`. Written into the module's arena. */
static const char *c_name_for(tth_tir_module *m, const char *onnx, const char *const *taken,
                              size_t ntaken)
{
    char base[96];
    size_t n = 0;
    for (const char *p = onnx; *p && n < sizeof base - 1; p++)
        base[n++] = isalnum((unsigned char)*p) ? *p : '_';
    base[n] = 0;
    if (n == 0 || isdigit((unsigned char)base[0])) {
        memmove(base + 2, base, n + 1 < sizeof base - 2 ? n + 1 : sizeof base - 3);
        base[0] = 't';
        base[1] = '_';
        base[sizeof base - 1] = 0;
    }
    for (const char *const *k = c_reserved; *k; k++)
        if (strcasecmp(*k, base) == 0) {
            size_t l = strlen(base);
            if (l + 2 < sizeof base)
                memcpy(base + l, "_", 2);
        }
    char cand[128];
    snprintf(cand, sizeof cand, "%s", base);
    for (int k = 2;; k++) {
        int clash = 0;
        for (size_t i = 0; i < ntaken && !clash; i++)
            clash = strcasecmp(taken[i], cand) == 0;
        if (!clash)
            break;
        snprintf(cand, sizeof cand, "%s_%d", base, k);
    }
    return tth_arena_strdup(m->arena, cand);
}

/* What a node of main produces: its buffers (a tensor has one; a tuple-returning call many). */
typedef struct node_bufs {
    tth_tbuffer **bufs;
    size_t n;
} node_bufs;

typedef struct aot_ctx {
    const tth_relay_module *rmod;
    tth_tir_module *tmod;
    node_bufs *by_id;          /* indexed by rexpr id */
    uint32_t max_id;
    tth_diag *diag;
} aot_ctx;

/* The (call, field) that produces a tensor value, or NULL when no call does. */
static const tth_rexpr *producing_call(const tth_rexpr *e, int32_t *field)
{
    switch (e->kind) {
    case TTH_REXPR_CALL:
        if (e->type.nfields >= 0)
            return NULL;
        *field = 0;
        return e;
    case TTH_REXPR_TUPLE_GET: {
        const tth_rexpr *t = e->u.get.tuple;
        if (t->kind == TTH_REXPR_CALL) {
            *field = e->u.get.index;
            return t;
        }
        if (t->kind == TTH_REXPR_TUPLE && e->u.get.index >= 0 &&
            (size_t)e->u.get.index < t->u.tuple.nfields)
            return producing_call(t->u.tuple.fields[e->u.get.index], field);
        return NULL;
    }
    default: return NULL;
    }
}

/* The buffers of a value; a tensor value yields exactly one. */
static const node_bufs *bufs_of(aot_ctx *c, const tth_rexpr *e)
{
    if (e->id > c->max_id || !c->by_id[e->id].bufs)
        return NULL;
    return &c->by_id[e->id];
}

static int set_bufs(aot_ctx *c, const tth_rexpr *e, tth_tbuffer **bufs, size_t n)
{
    node_bufs *nb = &c->by_id[e->id];
    nb->bufs = tth_arena_alloc(c->tmod->arena, (n ? n : 1) * sizeof *nb->bufs);
    if (!nb->bufs)
        return tth_diag_set(c->diag, TTH_ENOMEM, "aot", "out of memory");
    memcpy(nb->bufs, bufs, n * sizeof *bufs);
    nb->n = n;
    return 0;
}

static const char *find_prim(const tth_lowered *l, size_t n, const tth_relay_function *fn)
{
    for (size_t i = 0; i < n; i++)
        if (l[i].fn == fn)
            return l[i].prim_name;
    return NULL;
}

static tth_tstmt *copy_stmt(tth_tir_module *m, tth_tbuffer *dst, tth_tbuffer *src)
{
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    if (!i)
        return NULL;
    tth_texpr *idx = tth_tir_ref(m, i);
    tth_tstmt *st = tth_tir_store(m, dst, idx, tth_tir_load(m, src, tth_tir_ref(m, i)));
    if (!st)
        return NULL;
    return tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, tth_tbuffer_numel(dst)),
                       TTH_LOOP_SERIAL, st);
}

/* Concatenation in place (docs/lowering.md): fn is one concatenation of its params in order,
 * along an axis with only ones before it, so each input is one run of the output's bytes. */
static int is_flat_concat(const tth_relay_function *fn)
{
    const tth_rexpr *b = fn->body;
    if (!b || b->kind != TTH_REXPR_CALL || b->u.call.fn || b->u.call.op != TTH_OP_CONCATENATE ||
        b->type.nfields >= 0 || b->u.call.nargs != fn->nparams || fn->nparams < 2)
        return 0;
    for (size_t i = 0; i < fn->nparams; i++)
        if (b->u.call.args[i] != fn->params[i])
            return 0;
    const tth_ttype *t = &b->type.tensor;
    json_int_t axis = json_integer_value(json_object_get(b->u.call.attrs, "axis"));
    if (axis < 0)
        axis += t->rank;
    if (axis < 0 || axis >= t->rank)
        return 0;
    for (json_int_t d = 0; d < axis; d++)
        if (t->shape[d] != 1)
            return 0;
    return 1;
}

/* The ONNX node whose output field k of fn's result is: the span of the call computing it, or of
 * the first call with one down its first arguments (a reshape the importer added has none). */
static const char *output_node(const tth_relay_function *fn, size_t k)
{
    const tth_rexpr *b = fn ? fn->body : NULL;
    if (b && b->kind == TTH_REXPR_TUPLE)
        b = k < b->u.tuple.nfields ? b->u.tuple.fields[k] : NULL;
    for (int depth = 0; b && b->kind == TTH_REXPR_CALL && !b->span && b->u.call.nargs && depth < 64; depth++)
        b = b->u.call.args[0];
    return b && b->kind == TTH_REXPR_CALL ? b->span : NULL;
}

static int add_node(tth_aot_result *out, const tth_tbuffer *b, const char *node, const char *func)
{
    if (!node)
        return 0;
    tth_buffer_node *n = realloc(out->nodes, (out->nnodes + 1) * sizeof *n);
    if (!n)
        return TTH_ENOMEM;
    out->nodes = n;
    n[out->nnodes++] = (tth_buffer_node){b, node, func};
    return 0;
}

/* The buffer whose bytes b is: the one b is a slice of (*off its offset there), or b itself. */
static tth_tbuffer *bytes_of(const tth_aot_result *out, tth_tbuffer *b, uint64_t *off)
{
    *off = 0;
    for (size_t i = 0; i < out->naliases; i++)
        if (out->aliases[i].part == b) {
            *off = out->aliases[i].offset;
            return out->aliases[i].whole;
        }
    return b;
}

/* Make the n inputs of a flat concatenation slices of its output `whole` (a buffer made for this
 * call, so in no slice yet), when whole is a workspace buffer, each input's bytes are a workspace
 * buffer of their own (the input, or all of the buffer it is a view of), no two inputs share
 * bytes, and each place in whole keeps the alignment of the buffer put there; whole's alignment
 * is raised to theirs. A buffer put there moves in with its slices (its views, or the inputs of
 * an earlier join). 1 when done (the concatenation then needs no code), 0 when not, negative on
 * OOM. */
static int slice_inputs(tth_aot_result *out, tth_tbuffer *const *in, size_t n, tth_tbuffer *whole,
                        uint32_t ws_align)
{
    if (whole->scope != TTH_SCOPE_WORKSPACE)
        return 0;
    tth_tbuffer **own = calloc(n, sizeof *own);
    if (!own)
        return TTH_ENOMEM;
    uint64_t off = 0;
    uint32_t need = whole->align;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        uint64_t at;
        own[i] = bytes_of(out, in[i], &at);
        ok = in[i]->scope == TTH_SCOPE_WORKSPACE && own[i]->scope == TTH_SCOPE_WORKSPACE && at == 0 &&
             tth_tbuffer_nbytes(own[i]) == tth_tbuffer_nbytes(in[i]);
        for (size_t j = 0; j < i && ok; j++)
            ok = own[j] != own[i];
        uint32_t a = tth_memplan_align(own[i], ws_align);
        ok = ok && off % a == 0;
        if (a > need)
            need = a;
        off += tth_tbuffer_nbytes(in[i]);
    }
    tth_mem_alias *na = ok && off == tth_tbuffer_nbytes(whole) ? realloc(out->aliases, (out->naliases + n) * sizeof *na)
                                                               : NULL;
    if (!na) {
        free(own);
        return ok && off == tth_tbuffer_nbytes(whole) ? TTH_ENOMEM : 0;
    }
    out->aliases = na;
    off = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < out->naliases; k++)
            if (na[k].whole == own[i]) {
                na[k].whole = whole;
                na[k].offset += off;
            }
        na[out->naliases++] = (tth_mem_alias){.part = own[i], .whole = whole, .offset = off};
        off += tth_tbuffer_nbytes(in[i]);
    }
    whole->align = need;
    free(own);
    return 1;
}

/* Views (docs/lowering.md, "Views"): fn is one op on its param whose result is a run of the
 * param's bytes, *at elements from its start: a reshape; a transpose that keeps the order of the
 * axes longer than 1 ([1, 197, 768] -> [197, 1, 768]); a strided_slice that takes one index of
 * each axis before some axis k, a range of k with step 1, and all of every axis after k (one
 * time step of [T, 1, H], a batch of one). */
static int is_view(const tth_relay_function *fn, int64_t *at)
{
    const tth_rexpr *b = fn->body;
    *at = 0;
    if (!b || b->kind != TTH_REXPR_CALL || b->u.call.fn || b->type.nfields >= 0 || fn->nparams != 1 ||
        b->u.call.nargs != 1 || b->u.call.args[0] != fn->params[0] || fn->params[0]->type.nfields >= 0)
        return 0;
    const tth_ttype *in = &fn->params[0]->type.tensor, *res = &b->type.tensor;
    int64_t v[TTH_MAX_RANK], begin[TTH_MAX_RANK], strides[TTH_MAX_RANK];
    switch (b->u.call.op) {
    case TTH_OP_RESHAPE:
        return 1;
    case TTH_OP_TRANSPOSE:
        if (tth_transpose_axes_of(b->u.call.attrs, in->rank, v, NULL) != 0)
            return 0;
        for (int32_t d = 0, last = -1; d < in->rank; d++) {
            if (in->shape[v[d]] == 1)
                continue;
            if (v[d] < last)
                return 0;
            last = (int32_t)v[d];
        }
        return 1;
    case TTH_OP_STRIDED_SLICE: {
        if (res->rank != in->rank)
            return 0;
        int nb = tth_call_attr_ints(b, "begin", begin, TTH_MAX_RANK);
        int ns = tth_call_attr_ints(b, "strides", strides, TTH_MAX_RANK);
        int32_t k = -1; /* the last axis not taken whole */
        for (int32_t d = 0; d < in->rank; d++)
            if (res->shape[d] != in->shape[d])
                k = d;
        int64_t step = 1;
        for (int32_t d = in->rank - 1; d >= 0; d--) {
            int64_t first = d < nb ? begin[d] : 0, by = d < ns ? strides[d] : 1;
            if ((d < k && res->shape[d] != 1) || (res->shape[d] > 1 && by != 1) || first < 0 || first >= in->shape[d])
                return 0;
            *at += first * step;
            step *= in->shape[d];
        }
        return 1;
    }
    default:
        return 0;
    }
}

/* Make the result res of a view (a buffer made for this call, so in no slice yet) a slice of in's
 * bytes, at elements from in's start (of the buffer in is a slice of, at in's offset plus that,
 * so every slice names a buffer that is no slice itself), when both are workspace buffers and
 * the place keeps res's alignment, which the buffer's is raised to. 1 when done (the view then
 * needs no code), 0 when not, negative on OOM. */
static int view_input(tth_aot_result *out, tth_tbuffer *in, int64_t at, tth_tbuffer *res, uint32_t ws_align)
{
    uint64_t bytes = (uint64_t)at * tth_dtype_size(in->dtype);
    if (in->scope != TTH_SCOPE_WORKSPACE || res->scope != TTH_SCOPE_WORKSPACE ||
        bytes + tth_tbuffer_nbytes(res) > tth_tbuffer_nbytes(in))
        return 0;
    uint64_t off;
    tth_tbuffer *whole = bytes_of(out, in, &off);
    off += bytes;
    uint32_t a = tth_memplan_align(res, ws_align);
    if (off % a != 0)
        return 0;
    tth_mem_alias *na = realloc(out->aliases, (out->naliases + 1) * sizeof *na);
    if (!na)
        return TTH_ENOMEM;
    out->aliases = na;
    na[out->naliases++] = (tth_mem_alias){.part = res, .whole = whole, .offset = off};
    if (a > whole->align)
        whole->align = a;
    return 1;
}

/* Drop from the module the PrimFuncs of concatenations and views that were all done in place. */
static void drop_uncalled(tth_tir_module *tmod, const tth_tstmt *body, const char *const *names, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int called = 0;
        for (size_t i = 0; body && body->kind == TTH_TSTMT_SEQ && i < body->u.seq.n && !called; i++) {
            const tth_tstmt *st = body->u.seq.stmts[i];
            called = st->kind == TTH_TSTMT_CALL_FUNC && strcmp(st->u.call.func, names[k]) == 0;
        }
        size_t w = 0;
        for (size_t i = 0; i < tmod->nfuncs; i++)
            if (called || strcmp(tmod->funcs[i]->name, names[k]) != 0)
                tmod->funcs[w++] = tmod->funcs[i];
        tmod->nfuncs = w;
    }
}

void tth_aot_result_clear(tth_aot_result *r)
{
    if (!r)
        return;
    free(r->inputs);
    free(r->outputs);
    free(r->aliases);
    free(r->nodes);
    memset(r, 0, sizeof *r);
}

int tth_aot_build(const tth_relay_module *rmod, tth_tir_module *tmod, const tth_lowered *lowered,
                  size_t nlowered, const char *model, const char *target_kind, uint32_t ws_align,
                  tth_aot_result *out, tth_diag *diag)
{
    memset(out, 0, sizeof *out);
    tth_relay_function *main_fn = tth_relay_module_main(rmod);
    if (!main_fn)
        return tth_diag_set(diag, TTH_EINVAL, "aot", "the model has no \"main\" function");
    tth_rexpr **topo = NULL;
    int64_t ntopo = tth_relay_topo((tth_relay_module *)rmod, main_fn, &topo);
    if (ntopo < 0)
        return tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory ordering main");

    aot_ctx c = {.rmod = rmod, .tmod = tmod, .diag = diag};
    for (int64_t i = 0; i < ntopo; i++)
        if (topo[i]->id > c.max_id)
            c.max_id = topo[i]->id;
    for (size_t i = 0; i < main_fn->nparams; i++)
        if (main_fn->params[i]->id > c.max_id)
            c.max_id = main_fn->params[i]->id;
    c.by_id = calloc((size_t)c.max_id + 1, sizeof *c.by_id);
    const json_t *in_names = json_object_get(main_fn->attrs, "input_names");
    const json_t *out_names = json_object_get(main_fn->attrs, "output_names");

    /* the result fields of main */
    const tth_rexpr *res = main_fn->body;
    size_t nres = res->type.nfields < 0 ? 1 : (size_t)res->type.nfields;
    const tth_rexpr **res_fields = calloc(nres ? nres : 1, sizeof *res_fields);
    const char **taken = calloc(main_fn->nparams + nres + 1, sizeof *taken);
    tth_tstmt *body = NULL;
    int rc = 0;
    out->inputs = calloc(main_fn->nparams ? main_fn->nparams : 1, sizeof *out->inputs);
    out->outputs = calloc(nres ? nres : 1, sizeof *out->outputs);
    if (!c.by_id || !res_fields || !taken || !out->inputs || !out->outputs) {
        rc = tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
        goto done;
    }
    if (res->type.nfields < 0) {
        res_fields[0] = res;
    } else if (res->kind == TTH_REXPR_TUPLE) {
        for (size_t i = 0; i < nres; i++)
            res_fields[i] = res->u.tuple.fields[i];
    } else {
        /* a call returning a tuple, returned as is: field i is that call's result i */
        for (size_t i = 0; i < nres; i++)
            res_fields[i] = NULL;
    }

    /* inputs */
    size_t ntaken = 0;
    for (size_t i = 0; i < main_fn->nparams; i++) {
        const tth_rexpr *p = main_fn->params[i];
        const char *onnx = json_string_value(json_array_get(in_names, i));
        if (!onnx)
            onnx = p->u.var.name;
        const char *cn = c_name_for(tmod, onnx, taken, ntaken);
        if (p->type.nfields >= 0) {
            rc = tth_diag_set(diag, TTH_EUNSUPPORTED, "aot", "input '%s' is a tuple", onnx);
            goto done;
        }
        tth_tbuffer *b = cn ? tth_tir_buffer(tmod, cn, p->type.tensor.dtype, p->type.tensor.rank,
                                             p->type.tensor.shape, TTH_SCOPE_INPUT) : NULL;
        if (!b) {
            rc = tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
            goto done;
        }
        taken[ntaken++] = cn;
        out->inputs[i] = (tth_io_info){.onnx_name = tth_arena_strdup(tmod->arena, onnx),
                                       .c_name = cn, .buf = b};
        if ((rc = set_bufs(&c, p, &b, 1)))
            goto done;
    }
    out->ninputs = main_fn->nparams;

    /* output names; which (call, field) computes each output directly */
    const tth_rexpr **claim_call = calloc(nres ? nres : 1, sizeof *claim_call);
    int32_t *claim_field = calloc(nres ? nres : 1, sizeof *claim_field);
    if (!claim_call || !claim_field) {
        free(claim_call);
        free(claim_field);
        rc = tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
        goto done;
    }
    for (size_t j = 0; j < nres; j++) {
        const char *onnx = json_string_value(json_array_get(out_names, j));
        char fallback[32];
        if (!onnx) {
            snprintf(fallback, sizeof fallback, "output_%zu", j);
            onnx = fallback;
        }
        const char *cn = c_name_for(tmod, onnx, taken, ntaken);
        taken[ntaken++] = cn;
        out->outputs[j] = (tth_io_info){.onnx_name = tth_arena_strdup(tmod->arena, onnx),
                                        .c_name = cn};
        int32_t field = 0;
        const tth_rexpr *call = NULL;
        if (res_fields[j]) {
            call = producing_call(res_fields[j], &field);
        } else {
            call = res;
            field = (int32_t)j;
        }
        for (size_t k = 0; call && k < j; k++)
            if (claim_call[k] == call && claim_field[k] == field)
                call = NULL; /* returned twice: the second is a copy */
        claim_call[j] = call;
        claim_field[j] = field;
    }
    out->noutputs = nres;

    /* the calls, in order; the PrimFuncs of concatenations done in place */
    const char **elided = calloc((size_t)ntopo + 1, sizeof *elided);
    size_t nelided = 0;
    if (!elided)
        rc = tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
    for (int64_t t = 0; t < ntopo && !rc; t++) {
        const tth_rexpr *e = topo[t];
        switch (e->kind) {
        case TTH_REXPR_VAR: break; /* inputs, done above */
        case TTH_REXPR_CONST: {
            const char *nm = e->u.constant.name;
            char buf[64];
            if (!nm) {
                snprintf(buf, sizeof buf, "c%u", (unsigned)e->id);
                nm = buf;
            }
            char cn[96];
            size_t n = 0;
            for (const char *p = nm; *p && n < sizeof cn - 3; p++)
                cn[n++] = isalnum((unsigned char)*p) ? *p : '_';
            cn[n] = 0;
            if (!n || isdigit((unsigned char)cn[0])) {
                memmove(cn + 2, cn, n + 1);
                cn[0] = 'c';
                cn[1] = '_';
            }
            tth_tbuffer *b = tth_tir_const_buffer(tmod, cn, e->u.constant.value);
            if (!b) {
                rc = tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
                break;
            }
            rc = set_bufs(&c, e, &b, 1);
            break;
        }
        case TTH_REXPR_TUPLE: {
            tth_tbuffer *fb[64];
            if (e->u.tuple.nfields > 64) {
                rc = tth_diag_set(diag, TTH_ELIMIT, "aot", "a tuple of more than 64 fields");
                break;
            }
            for (size_t i = 0; i < e->u.tuple.nfields && !rc; i++) {
                const node_bufs *nb = bufs_of(&c, e->u.tuple.fields[i]);
                if (!nb || nb->n != 1)
                    rc = tth_diag_set(diag, TTH_EUNSUPPORTED, "aot", "nested tuples in main");
                else
                    fb[i] = nb->bufs[0];
            }
            if (!rc)
                rc = set_bufs(&c, e, fb, e->u.tuple.nfields);
            break;
        }
        case TTH_REXPR_TUPLE_GET: {
            const node_bufs *nb = bufs_of(&c, e->u.get.tuple);
            if (!nb || e->u.get.index < 0 || (size_t)e->u.get.index >= nb->n) {
                rc = tth_diag_set(diag, TTH_EINTERNAL, "aot", "tuple_get %d out of range",
                                  (int)e->u.get.index);
                break;
            }
            rc = set_bufs(&c, e, &nb->bufs[e->u.get.index], 1);
            break;
        }
        case TTH_REXPR_CALL: {
            char loc[TTH_DIAG_LOCATION_MAX];
            snprintf(loc, sizeof loc, "aot, node %u%s%s%s", (unsigned)e->id,
                     e->span ? " '" : "", e->span ? e->span : "", e->span ? "'" : "");
            if (!e->u.call.fn) {
                rc = tth_diag_set(diag, TTH_EINTERNAL, loc, "main calls operator '%s' directly; "
                                  "every operator must be inside a fused function",
                                  tth_op_name(e->u.call.op));
                break;
            }
            const char *pname = find_prim(lowered, nlowered, e->u.call.fn);
            tth_prim_func *pf = pname ? tth_tir_module_find(tmod, pname) : NULL;
            if (!pf) {
                rc = tth_diag_set(diag, TTH_EINTERNAL, loc, "function '%s' was not lowered",
                                  e->u.call.fn->name);
                break;
            }
            size_t nouts = e->type.nfields < 0 ? 1 : (size_t)e->type.nfields;
            size_t nargs = e->u.call.nargs + nouts;
            if (nargs != pf->nparams) {
                rc = tth_diag_set(diag, TTH_EINTERNAL, loc, "PrimFunc '%s' takes %zu buffers; the "
                                  "call has %zu inputs and %zu results", pf->name, pf->nparams,
                                  e->u.call.nargs, nouts);
                break;
            }
            tth_tbuffer **args = tth_arena_alloc(tmod->arena, nargs * sizeof *args);
            if (!args) {
                rc = tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
                break;
            }
            for (size_t a = 0; a < e->u.call.nargs && !rc; a++) {
                const node_bufs *nb = bufs_of(&c, e->u.call.args[a]);
                if (!nb || nb->n != 1)
                    rc = tth_diag_set(diag, TTH_EUNSUPPORTED, loc, "argument %zu of '%s' is a "
                                      "tuple", a, e->u.call.fn->name);
                else
                    args[a] = nb->bufs[0];
            }
            for (size_t k = 0; k < nouts && !rc; k++) {
                const tth_ttype *tt = e->type.nfields < 0 ? &e->type.tensor : &e->type.fields[k];
                tth_tbuffer *b = NULL;
                for (size_t j = 0; j < nres; j++)
                    if (claim_call[j] == e && claim_field[j] == (int32_t)k) {
                        b = tth_tir_buffer(tmod, out->outputs[j].c_name, tt->dtype, tt->rank,
                                           tt->shape, TTH_SCOPE_OUTPUT);
                        out->outputs[j].buf = b;
                        if (!b)
                            rc = tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
                        break;
                    }
                if (!b && !rc) {
                    char nm[64];
                    snprintf(nm, sizeof nm, "sid_%u_%zu", (unsigned)e->id, k);
                    b = tth_tir_buffer(tmod, nm, tt->dtype, tt->rank, tt->shape,
                                       TTH_SCOPE_WORKSPACE);
                    if (!b || add_node(out, b, output_node(e->u.call.fn, k), pname) < 0)
                        rc = tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
                }
                args[e->u.call.nargs + k] = b;
            }
            if (rc)
                break;
            if ((rc = set_bufs(&c, e, args + e->u.call.nargs, nouts)))
                break;
            int64_t at;
            int view = nouts == 1 && is_view(e->u.call.fn, &at);
            if (view || (nouts == 1 && is_flat_concat(e->u.call.fn))) {
                int done = view ? view_input(out, args[0], at, args[1], ws_align)
                                : slice_inputs(out, args, e->u.call.nargs, args[e->u.call.nargs], ws_align);
                if (done < 0)
                    rc = tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
                if (done) {
                    elided[nelided++] = pf->name;
                    if (done > 0)
                        *(view ? &out->views : &out->joins) += 1;
                    break;
                }
            }
            tth_tstmt *call = tth_tir_call_func(tmod, pf->name, args, nargs);
            if (!call || tth_tir_seq_append(tmod, &body, call) != 0)
                rc = tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
            break;
        }
        }
    }

    /* outputs not computed in place: copy */
    for (size_t j = 0; j < nres && !rc; j++) {
        if (out->outputs[j].buf)
            continue;
        const node_bufs *nb = res_fields[j] ? bufs_of(&c, res_fields[j]) : NULL;
        tth_tbuffer *src = NULL;
        if (nb && nb->n == 1)
            src = nb->bufs[0];
        else if (!res_fields[j] && (nb = bufs_of(&c, res)) && j < nb->n)
            src = nb->bufs[j];
        if (!src) {
            rc = tth_diag_set(diag, TTH_EINTERNAL, "aot", "output '%s' has no value",
                              out->outputs[j].onnx_name);
            break;
        }
        tth_tbuffer *b = tth_tir_buffer(tmod, out->outputs[j].c_name, src->dtype, src->rank,
                                        src->shape, TTH_SCOPE_OUTPUT);
        out->outputs[j].buf = b;
        tth_tstmt *cp = b ? copy_stmt(tmod, b, src) : NULL;
        if (!cp || tth_tir_seq_append(tmod, &body, cp) != 0)
            rc = tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
    }
    free(claim_call);
    free(claim_field);
    if (!rc)
        drop_uncalled(tmod, body, elided, nelided);
    free(elided);
    if (rc)
        goto done;
    if (!body)
        body = tth_tir_seq(tmod, NULL, 0);

    {
        size_t np = out->ninputs + out->noutputs;
        tth_tbuffer **params = calloc(np ? np : 1, sizeof *params);
        if (!params || !body) {
            free(params);
            rc = tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
            goto done;
        }
        for (size_t i = 0; i < out->ninputs; i++)
            params[i] = out->inputs[i].buf;
        for (size_t j = 0; j < out->noutputs; j++)
            params[out->ninputs + j] = out->outputs[j].buf;
        char name[256];
        snprintf(name, sizeof name, "tth_%s_run", model);
        json_t *attrs = json_pack("{s:s, s:s, s:s, s:s}", "op", "aot.run", "origin", "aot",
                                  "model", model, "executor", "aot");
        out->entry = tth_tir_func_add(tmod, name, params, np, body, target_kind, attrs, diag);
        free(params);
        if (!out->entry) {
            tth_diag_prefix(diag, "aot");
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
            goto done;
        }
        tmod->entry = out->entry->name;
    }

done:
    free(c.by_id);
    free(res_fields);
    free(taken);
    if (rc)
        tth_aot_result_clear(out);
    return rc;
}

/* ---- profiling (docs/profiling.md) ---- */

static tth_tstmt *hook(tth_tir_module *m, const char *name, int64_t k)
{
    tth_texpr *arg = tth_tir_int(m, TTH_I32, k);
    tth_texpr *call = arg ? tth_tir_call_extern(m, TTH_I32, name, &arg, 1) : NULL;
    return call ? tth_tir_evaluate(m, call) : NULL;
}

int64_t tth_aot_add_timing(tth_tir_module *tmod, tth_prim_func *entry, const char *model, tth_diag *diag)
{
    tth_tstmt *body = entry->body;
    if (!body || body->kind != TTH_TSTMT_SEQ)
        return tth_diag_set(diag, TTH_EINTERNAL, "aot", "the entry is not a sequence of calls");
    char begin[160], end[160];
    snprintf(begin, sizeof begin, "tth_%s_profile_begin", model);
    snprintf(end, sizeof end, "tth_%s_profile_end", model);
    tth_tstmt *seq = NULL;
    int64_t k = 0;
    for (size_t i = 0; i < body->u.seq.n; i++) {
        tth_tstmt *st = body->u.seq.stmts[i];
        if (st->kind == TTH_TSTMT_CALL_FUNC) {
            if (tth_tir_seq_append(tmod, &seq, hook(tmod, begin, k)) || tth_tir_seq_append(tmod, &seq, st) ||
                tth_tir_seq_append(tmod, &seq, hook(tmod, end, k)))
                return tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
            k++;
        } else if (tth_tir_seq_append(tmod, &seq, st)) {
            return tth_diag_set(diag, TTH_ENOMEM, "aot", "out of memory");
        }
    }
    entry->body = seq ? seq : body;
    return k;
}

/* The DWT's cycle counter is in Armv7-M and Armv8-M Mainline cores; Armv6-M (M0, M0+, M1) and
 * Armv8-M Baseline (M23) have none (docs/profiling.md, "Bare metal"). */
int tth_cpu_has_cycle_counter(const char *mcpu)
{
    static const char *const with[] = {"cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m35p",
                                       "cortex-m52", "cortex-m55", "cortex-m85"};
    for (size_t i = 0; mcpu && i < sizeof with / sizeof with[0]; i++)
        if (strcmp(mcpu, with[i]) == 0)
            return 1;
    return 0;
}

char *tth_profile_source(const char *model, int64_t ncalls, tth_profile_clock clock, const char *mcpu)
{
    char M[300], head[1600], now[3000];
    tth_upper_name(M, model, sizeof M);
    int bare = clock != TTH_CLOCK_MONOTONIC;
    /* what differs: the file's head, and the clock (tth_profile_time and tth_profile_now) */
    if (!bare) {
        snprintf(head, sizeof head,
                 "/* Generated by tth: the timing hooks of a profiling artifact (docs/profiling.md). The\n"
                 " * entry tth_%1$s_run calls tth_%1$s_profile_begin(k) and _end(k) around its call k;\n"
                 " * tth_%1$s_profile_ns[k] sums the nanoseconds of call k (CLOCK_MONOTONIC) and\n"
                 " * tth_%1$s_profile_calls[k] counts them, until the caller sets them back to zero. One run\n"
                 " * at a time: runs from several threads at once mix their times. */\n"
                 "#define _POSIX_C_SOURCE 199309L\n"
                 "#include <stdint.h>\n"
                 "#include <time.h>\n",
                 model);
        snprintf(now, sizeof now,
                 "typedef uint64_t tth_profile_time;\n"
                 "static tth_profile_time tth_profile_now(void)\n"
                 "{\n"
                 "    struct timespec t;\n"
                 "    clock_gettime(CLOCK_MONOTONIC, &t);\n"
                 "    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;\n"
                 "}\n");
    } else {
        snprintf(head, sizeof head,
                 "/* Generated by tth: the timing hooks of a profiling artifact for bare metal\n"
                 " * (docs/profiling.md, \"Bare metal\"). The entry tth_%1$s_run calls\n"
                 " * tth_%1$s_profile_begin(k) and _end(k) around its call k; tth_%1$s_profile_cycles[k]\n"
                 " * sums the counts of call k and tth_%1$s_profile_calls[k] counts them, until the caller\n"
                 " * sets them back to zero. The count: when TTH_%2$s_PROFILE_CLOCK is defined as this\n"
                 " * file is compiled, it names the application's function 'uint32_t f(void)' returning a\n"
                 " * free-running 32-bit count (a timer, or an emulator's instruction clock); otherwise the\n"
                 " * core's own cycle counter. A call may last up to 2^32 counts. */\n"
                 "#include <stdint.h>\n",
                 model, M);
        int m7 = mcpu && strcmp(mcpu, "cortex-m7") == 0;
        char dflt[1000];
        if (clock == TTH_CLOCK_DWT)
            snprintf(dflt, sizeof dflt,
                     "/* The DWT's cycle counter: DEMCR.TRCENA (0xE000EDFC, bit 24) enables the DWT,\n"
                     " * DWT_CTRL.CYCCNTENA (0xE0001000, bit 0) starts CYCCNT (0xE0001004)%s. */\n"
                     "static tth_profile_time tth_profile_now(void)\n"
                     "{\n"
                     "    volatile uint32_t *demcr = (volatile uint32_t *)0xE000EDFCu;\n"
                     "    volatile uint32_t *ctrl = (volatile uint32_t *)0xE0001000u;\n"
                     "    if (!(*ctrl & 1u)) {\n"
                     "        *demcr |= 1u << 24;\n%s"
                     "        *ctrl |= 1u;\n"
                     "    }\n"
                     "    return *(volatile uint32_t *)0xE0001004u;\n"
                     "}\n",
                     m7 ? "; the Cortex-M7 wants its lock access register (0xE0001FB0) unlocked first" : "",
                     m7 ? "        *(volatile uint32_t *)0xE0001FB0u = 0xC5ACCE55u;\n" : "");
        else
            snprintf(dflt, sizeof dflt,
                     "#error \"tth: %s has no cycle counter tth knows: define TTH_%s_PROFILE_CLOCK to a function "
                     "'uint32_t f(void)' returning a free-running 32-bit count (docs/profiling.md, Bare metal)\"\n",
                     mcpu ? mcpu : "this target", M);
        snprintf(now, sizeof now,
                 "typedef uint32_t tth_profile_time;\n"
                 "#ifdef TTH_%s_PROFILE_CLOCK\n"
                 "uint32_t TTH_%s_PROFILE_CLOCK(void);\n"
                 "#define tth_profile_now TTH_%s_PROFILE_CLOCK\n"
                 "#else\n"
                 "%s"
                 "#endif\n",
                 M, M, M, dflt);
    }
    const char *fmt =
        "%3$s"
        "\n"
        "#define TTH_PROFILE_CALLS %2$lld\n"
        "uint64_t tth_%1$s_profile_%5$s[TTH_PROFILE_CALLS];\n"
        "uint64_t tth_%1$s_profile_calls[TTH_PROFILE_CALLS];\n"
        "const uint32_t tth_%1$s_profile_count = TTH_PROFILE_CALLS;\n"
        "\n"
        "%4$s"
        "static tth_profile_time tth_%1$s_profile_t0;\n"
        "\n"
        "int32_t tth_%1$s_profile_begin(int32_t k);\n"
        "int32_t tth_%1$s_profile_end(int32_t k);\n"
        "\n"
        "int32_t tth_%1$s_profile_begin(int32_t k)\n"
        "{\n"
        "    (void)k;\n"
        "    tth_%1$s_profile_t0 = tth_profile_now();\n"
        "    return 0;\n"
        "}\n"
        "\n"
        "int32_t tth_%1$s_profile_end(int32_t k)\n"
        "{\n"
        "    tth_profile_time t = tth_profile_now();\n"
        "    if (k < 0 || k >= TTH_PROFILE_CALLS)\n"
        "        return 0;\n"
        "    tth_%1$s_profile_%5$s[k] += (tth_profile_time)(t - tth_%1$s_profile_t0);\n"
        "    tth_%1$s_profile_calls[k]++;\n"
        "    return 0;\n"
        "}\n";
    size_t n = strlen(fmt) + 12 * strlen(model) + strlen(head) + strlen(now) + 64;
    char *src = malloc(n);
    if (src)
        snprintf(src, n, fmt, model, (long long)(ncalls > 0 ? ncalls : 1), head, now, bare ? "cycles" : "ns");
    return src;
}
