/* profile.c: the calls of a profiling artifact's entry, as metadata.json's "profile" describes
 * them (docs/profiling.md): per call of tth_<model>_run, in order, the PrimFunc, its kind, the
 * ONNX nodes it came from (the spans of its Relay function's operators), its operators and
 * strategies, its input and output shapes, its multiply-adds and the bytes it reads and writes. */
#include <stdlib.h>
#include <string.h>

#include "compile_internal.h"

/* multiply-adds of one operator call: a convolution's outputs times its taps per output (input
 * channels of a group times the kernel), a transposed convolution's inputs times its taps per
 * input, a matmul's outputs times its inner dimension; 0 for the others */
static int64_t op_macs(const tth_rexpr *e)
{
    if (e->kind != TTH_REXPR_CALL || e->u.call.fn || e->type.nfields >= 0)
        return 0;
    const tth_ttype *out = &e->type.tensor;
    const tth_ttype *a = e->u.call.nargs > 0 && e->u.call.args[0]->type.nfields < 0 ? &e->u.call.args[0]->type.tensor : NULL;
    const tth_ttype *w = e->u.call.nargs > 1 && e->u.call.args[1]->type.nfields < 0 ? &e->u.call.args[1]->type.tensor : NULL;
    switch (e->u.call.op) {
    case TTH_OP_CONV2D:
    case TTH_OP_QNN_CONV2D:
        return w && w->rank == 4 ? tth_ttype_numel(out) * w->shape[1] * w->shape[2] * w->shape[3] : 0;
    case TTH_OP_CONV2D_TRANSPOSE:
        return a && w && w->rank == 4 ? tth_ttype_numel(a) * w->shape[1] * w->shape[2] * w->shape[3] : 0;
    case TTH_OP_MATMUL:
    case TTH_OP_QNN_MATMUL:
        return a && a->rank >= 1 ? tth_ttype_numel(out) * a->shape[a->rank - 1] : 0;
    default:
        return 0;
    }
}

static json_t *buffer_json(const tth_tbuffer *b)
{
    json_t *shape = json_array();
    for (int32_t d = 0; shape && d < b->rank; d++)
        json_array_append_new(shape, json_integer(b->shape[d]));
    return json_pack("{s:s, s:o*, s:s, s:I}", "name", b->name, "shape", shape, "dtype", tth_dtype_name(b->dtype),
                     "bytes", (json_int_t)tth_tbuffer_nbytes(b));
}

/* the bytes of the constants f reads (each once) */
typedef struct const_bytes {
    const tth_tbuffer *seen[512];
    size_t n;
    int64_t bytes;
} const_bytes;

static int count_const(void *ctx, const tth_texpr *e)
{
    const_bytes *cb = ctx;
    if ((e->kind != TTH_TEXPR_LOAD && e->kind != TTH_TEXPR_ADDRESS_OF) || e->u.load.buf->scope != TTH_SCOPE_CONST)
        return 0;
    for (size_t i = 0; i < cb->n; i++)
        if (cb->seen[i] == e->u.load.buf)
            return 0;
    if (cb->n < sizeof cb->seen / sizeof cb->seen[0])
        cb->seen[cb->n++] = e->u.load.buf;
    cb->bytes += (int64_t)tth_tbuffer_nbytes(e->u.load.buf);
    return 0;
}

json_t *tth_profile_calls(tth_relay_module *rm, const tth_tir_module *tmod, const tth_prim_func *entry,
                          const tth_lowered *lowered, size_t nlowered, const json_t *node_outputs)
{
    json_t *calls = json_array();
    const tth_tstmt *body = entry->body;
    size_t n = body && body->kind == TTH_TSTMT_SEQ ? body->u.seq.n : 0;
    int64_t k = 0;
    for (size_t i = 0; calls && i < n; i++) {
        const tth_tstmt *st = body->u.seq.stmts[i];
        if (st->kind != TTH_TSTMT_CALL_FUNC)
            continue;
        const tth_prim_func *pf = tth_tir_module_find(tmod, st->u.call.func);
        const tth_relay_function *fn = NULL;
        for (size_t j = 0; j < nlowered && !fn; j++)
            if (lowered[j].prim_name && strcmp(lowered[j].prim_name, st->u.call.func) == 0)
                fn = lowered[j].fn;
        json_t *nodes = json_array(), *ins = json_array(), *outs = json_array();
        int64_t macs = 0, rd = 0, wr = 0, params = 0;
        if (fn) {
            tth_rexpr **topo = NULL;
            int64_t nt = tth_relay_topo(rm, fn, &topo);
            for (int64_t t = 0; t < nt; t++) {
                const tth_rexpr *e = topo[t];
                if (e->kind != TTH_REXPR_CALL)
                    continue;
                macs += op_macs(e);
                if (!e->span)
                    continue;
                size_t s;
                json_t *v;
                int dup = 0;
                json_array_foreach(nodes, s, v) dup |= strcmp(json_string_value(v), e->span) == 0;
                if (!dup)
                    json_array_append_new(nodes, json_string(e->span));
            }
        }
        /* the call's buffers: the function's inputs, then its results */
        size_t nin = fn && fn->nparams <= st->u.call.nargs ? fn->nparams : (st->u.call.nargs ? st->u.call.nargs - 1 : 0);
        for (size_t a = 0; a < st->u.call.nargs; a++) {
            const tth_tbuffer *b = st->u.call.args[a];
            json_array_append_new(a < nin ? ins : outs, buffer_json(b));
            if (a < nin)
                rd += (int64_t)tth_tbuffer_nbytes(b);
            else
                wr += (int64_t)tth_tbuffer_nbytes(b);
        }
        if (pf && pf->body) {
            const_bytes *cb = calloc(1, sizeof *cb);
            tth_tir_visitor v = {.expr = count_const, .ctx = cb};
            if (cb) {
                tth_tir_walk(pf->body, &v);
                rd += cb->bytes;
                params = cb->bytes;
                free(cb);
            }
        }
        const json_t *attrs = pf ? pf->attrs : NULL;
        /* a region another kind builds is declared in the host's TIR: its kind is the builder's */
        const char *kind = json_string_value(json_object_get(attrs, "defined_by"));
        if (!kind)
            kind = json_string_value(json_object_get(attrs, "Compiler"));
        if (!kind)
            kind = pf && pf->target_kind ? pf->target_kind : "?";
        json_t *row = json_pack("{s:I, s:s, s:s, s:s*, s:O*, s:O*, s:o, s:o, s:o, s:I, s:I, s:I}", "index", (json_int_t)k,
                                "function", st->u.call.func, "kind", kind,
                                "op", json_string_value(json_object_get(attrs, "op")), "ops", json_object_get(attrs, "ops"),
                                "strategies", json_object_get(attrs, "strategies"), "nodes", nodes, "inputs", ins,
                                "outputs", outs, "macs", (json_int_t)macs, "bytes_read", (json_int_t)rd,
                                "bytes_written", (json_int_t)wr);
        if (row)
            json_object_set_new(row, "param_bytes", json_integer(params));
        /* the ONNX tensors its nodes write, in the nodes' order */
        json_t *tensors = json_array();
        size_t ni;
        json_t *nv;
        json_array_foreach(nodes, ni, nv) {
            size_t oi;
            json_t *ov;
            json_array_foreach(json_object_get(node_outputs, json_string_value(nv)), oi, ov)
                json_array_append(tensors, ov);
        }
        if (row && tensors)
            json_object_set_new(row, "tensors", tensors);
        else
            json_decref(tensors);
        if (row && json_object_get(attrs, "strategy_why"))
            json_object_set(row, "strategy_why", json_object_get(attrs, "strategy_why"));
        if (!row || json_array_append_new(calls, row)) {
            json_decref(calls);
            return NULL;
        }
        k++;
    }
    return calls;
}
