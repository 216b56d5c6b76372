/* emit.c: the cmsis-nn kind's tir_to_runtime: the PrimFuncs relay_to_tir wrote → one C source,
 * `cmsisnn_lib0.c`, for the host's C compiler with CMSIS-NN's headers and library:
 *
 *   #include "arm_nnfunctions.h"
 *   static const int8_t <sym>_k0_filter[...] = {...};      CONST buffers of the TIR
 *   static int32_t <sym>_k0(const int8_t *input, ...)      one wrapper per call_extern: fills
 *   {  ... cmsis_nn_conv_params ...; arm_convolve_wrapper_s8(...); }   the structs from attrs
 *   int32_t <sym>(int8_t *restrict p0, ..., int8_t *restrict out, uint8_t *restrict ws)
 *   {  int8_t *k0_ctx = (int8_t *)(ws + <planned offset>); ... }
 *
 * PrimFuncs follow the C ABI of the c-host plugin (codegen.c): every buffer parameter is written
 * through by an extern call so none is const, then the workspace base; 0 on success, else the
 * arm_cmsis_nn_status of the first call that failed. Requires memory planning (LOCAL buffers have
 * offsets). It prints exactly the TIR shapes relay_to_tir writes (ALLOCATE, SEQ, EVALUATE of a
 * call_extern of buffer addresses); anything else is refused with TTH_EUNSUPPORTED.
 * Deterministic: module order, no timestamps. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <tth/artifact.h>
#include <tth/strbuf.h>
#include <tth/tir.h>

static const char *ctype(tth_dtype d)
{
    switch (d) {
    case TTH_I8: return "int8_t";
    case TTH_I16: return "int16_t";
    case TTH_I32: return "int32_t";
    case TTH_U8: return "uint8_t";
    default: return NULL;
    }
}

typedef struct emitter {
    tth_strbuf out;
    int err;
    tth_diag *diag;
    const tth_tbuffer **consts;
    size_t nconsts, cap;
} emitter;

static int fail(emitter *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(emitter *e, int code, const char *fmt, ...)
{
    if (e->err)
        return e->err;
    va_list ap;
    va_start(ap, fmt);
    tth_diag_vset(e->diag, code, "cmsis-nn tir_to_runtime", fmt, ap);
    va_end(ap);
    e->err = code;
    return code;
}

/* ---- walking the TIR relay_to_tir writes ---- */

typedef struct walk {
    const tth_tbuffer *locals[256];
    size_t nlocals;
    const tth_texpr *calls[256];
    size_t ncalls;
} walk;

static void walk_stmt(emitter *e, const tth_tstmt *s, walk *w)
{
    if (!s || e->err)
        return;
    switch (s->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < s->u.seq.n; i++)
            walk_stmt(e, s->u.seq.stmts[i], w);
        break;
    case TTH_TSTMT_ALLOCATE:
        if (w->nlocals >= 256) {
            fail(e, TTH_ELIMIT, "more than 256 LOCAL buffers in one PrimFunc");
            return;
        }
        w->locals[w->nlocals++] = s->u.alloc.buf;
        walk_stmt(e, s->u.alloc.body, w);
        break;
    case TTH_TSTMT_EVALUATE:
        if (s->u.eval.value->kind != TTH_TEXPR_CALL_EXTERN) {
            fail(e, TTH_EUNSUPPORTED, "an evaluated expression other than a call_extern");
            return;
        }
        if (w->ncalls >= 256) {
            fail(e, TTH_ELIMIT, "more than 256 CMSIS-NN calls in one PrimFunc");
            return;
        }
        w->calls[w->ncalls++] = s->u.eval.value;
        break;
    default:
        fail(e, TTH_EUNSUPPORTED, "TIR statement kind %d: cmsis-nn's code generator prints the call_extern "
             "PrimFuncs its relay_to_tir writes", (int)s->kind);
        break;
    }
}

static int const_seen(emitter *e, const tth_tbuffer *b)
{
    for (size_t i = 0; i < e->nconsts; i++)
        if (e->consts[i] == b)
            return 1;
    if (e->nconsts == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 16;
        const tth_tbuffer **v = realloc(e->consts, cap * sizeof *v);
        if (!v) {
            fail(e, TTH_ENOMEM, "out of memory");
            return 1;
        }
        e->consts = v;
        e->cap = cap;
    }
    e->consts[e->nconsts++] = b;
    return 0;
}

/* Before element i of an initializer, `per` to a line. */
static const char *sep(int64_t i, int64_t per)
{
    return i == 0 ? "\n    " : i % per == 0 ? ",\n    " : ", ";
}

static void emit_const(emitter *e, const tth_tbuffer *b)
{
    const char *ct = ctype(b->dtype);
    if (!ct || !b->data) {
        fail(e, TTH_EUNSUPPORTED, "constant '%s' of type %s", b->name, tth_dtype_name(b->dtype));
        return;
    }
    int64_t n = tth_tbuffer_numel(b);
    tth_strbuf_printf(&e->out, "static const %s %s[%" PRId64 "] = {", ct, b->name, n);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = tth_tensor_get_i64(b->data, i);
        if (b->dtype == TTH_I32 && v == INT32_MIN)
            tth_strbuf_printf(&e->out, "%s(-2147483647 - 1)", sep(i, 16));
        else
            tth_strbuf_printf(&e->out, "%s%" PRId64, sep(i, 16), v);
    }
    tth_strbuf_printf(&e->out, "\n};\n\n");
}

/* ---- one wrapper per call ---- */

static json_int_t ji(const json_t *d, const char *key, size_t i)
{
    const json_t *v = json_object_get(d, key);
    return json_is_array(v) ? json_integer_value(json_array_get(v, i)) : json_integer_value(v);
}

static const char *role_type(const char *role)
{
    if (!strcmp(role, "input") || !strcmp(role, "input2") || !strcmp(role, "filter"))
        return "const int8_t *";
    if (!strcmp(role, "bias") || !strcmp(role, "kernel_sum"))
        return "const int32_t *";
    return "int8_t *";
}

static int has_role(const json_t *d, const char *role)
{
    const json_t *a = json_object_get(d, "args");
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!strcmp(json_string_value(json_array_get(a, i)), role))
            return 1;
    return 0;
}

static void dims(tth_strbuf *t, const json_t *d, const char *key)
{
    tth_strbuf_printf(t, "    const cmsis_nn_dims %s = {.n = %" JSON_INTEGER_FORMAT ", .h = %" JSON_INTEGER_FORMAT
          ", .w = %" JSON_INTEGER_FORMAT ", .c = %" JSON_INTEGER_FORMAT "};\n",
          key, ji(d, key, 0), ji(d, key, 1), ji(d, key, 2), ji(d, key, 3));
}

static void q_array(tth_strbuf *t, const json_t *d, const char *key)
{
    const json_t *a = json_object_get(d, key);
    tth_strbuf_printf(t, "    static const int32_t %s[%zu] = {", key, json_array_size(a));
    for (size_t i = 0; i < json_array_size(a); i++)
        tth_strbuf_printf(t, "%s%s%" JSON_INTEGER_FORMAT, i && i % 8 == 0 ? "," : "", i % 8 ? ", " : "\n        ",
              json_integer_value(json_array_get(a, i)));
    tth_strbuf_printf(t, "\n    };\n");
}

static void emit_wrapper(emitter *e, const json_t *d)
{
    tth_strbuf *t = &e->out;
    const char *name = json_string_value(json_object_get(d, "wrapper"));
    const char *fn = json_string_value(json_object_get(d, "function"));
    const char *pat = json_string_value(json_object_get(d, "pattern"));
    const json_t *roles = json_object_get(d, "args");
    tth_strbuf_printf(t, "/* %s: %s */\nstatic int32_t %s(", pat, fn, name);
    for (size_t i = 0; i < json_array_size(roles); i++) {
        const char *r = json_string_value(json_array_get(roles, i));
        tth_strbuf_printf(t, "%s%s%s", i ? ", " : "", role_type(r), strcmp(r, "ctx") ? r : "ctx_buf");
    }
    tth_strbuf_printf(t, ")\n{\n");
    int sin = has_role(d, "input_nhwc"), sout = has_role(d, "output_nhwc");
    const char *x = sin ? "input_nhwc" : "input", *y = sout ? "output_nhwc" : "output";
    json_int_t amin = ji(d, "activation", 0), amax = ji(d, "activation", 1);
    /* the context: scratch (a planned LOCAL), or constants the call reads (an MVE build's fully
     * connected kernel sums; docs/cmsisnn.md, "What a context must hold"), or nothing */
    const char *ctx = has_role(d, "ctx") ? "ctx_buf" : has_role(d, "kernel_sum") ? "(void *)kernel_sum" : "NULL";
    if (strcmp(fn, "arm_softmax_s8") && strncmp(fn, "arm_elementwise", 15))
        tth_strbuf_printf(t, "    const cmsis_nn_context ctx = {%s, %" JSON_INTEGER_FORMAT "};\n", ctx, ji(d, "ctx_size", 0));
    if (sin)
        tth_strbuf_printf(t, "    tth_cmsisnn_to_nhwc(input, input_nhwc, %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
              ", %" JSON_INTEGER_FORMAT ");\n", ji(d, "input_dims", 3), ji(d, "input_dims", 1), ji(d, "input_dims", 2));
    if (!strcmp(fn, "arm_convolve_wrapper_s8") || !strcmp(fn, "arm_depthwise_conv_wrapper_s8")) {
        int dw = fn[4] == 'd';
        tth_strbuf_printf(t, "    const %s params = {\n        .input_offset = %" JSON_INTEGER_FORMAT ",\n        .output_offset = %"
              JSON_INTEGER_FORMAT ",\n", dw ? "cmsis_nn_dw_conv_params" : "cmsis_nn_conv_params",
              ji(d, "input_offset", 0), ji(d, "output_offset", 0));
        if (dw)
            tth_strbuf_printf(t, "        .ch_mult = %" JSON_INTEGER_FORMAT ",\n", ji(d, "ch_mult", 0));
        tth_strbuf_printf(t, "        .stride = {.w = %" JSON_INTEGER_FORMAT ", .h = %" JSON_INTEGER_FORMAT "},\n"
              "        .padding = {.w = %" JSON_INTEGER_FORMAT ", .h = %" JSON_INTEGER_FORMAT "},\n"
              "        .dilation = {.w = %" JSON_INTEGER_FORMAT ", .h = %" JSON_INTEGER_FORMAT "},\n"
              "        .activation = {.min = %" JSON_INTEGER_FORMAT ", .max = %" JSON_INTEGER_FORMAT "},\n    };\n",
              ji(d, "stride", 1), ji(d, "stride", 0), ji(d, "padding", 1), ji(d, "padding", 0),
              ji(d, "dilation", 1), ji(d, "dilation", 0), amin, amax);
        q_array(t, d, "multiplier");
        q_array(t, d, "shift");
        tth_strbuf_printf(t, "    const cmsis_nn_per_channel_quant_params quant = {(int32_t *)multiplier, (int32_t *)shift};\n");
        dims(t, d, "input_dims");
        dims(t, d, "filter_dims");
        dims(t, d, "bias_dims");
        dims(t, d, "output_dims");
        tth_strbuf_printf(t, "    const arm_cmsis_nn_status status = %s(&ctx, &params, &quant, &input_dims, %s, &filter_dims, "
              "filter, &bias_dims, %s, &output_dims, %s);\n", fn, x, has_role(d, "bias") ? "bias" : "NULL", y);
    } else if (!strcmp(fn, "arm_fully_connected_s8")) {
        tth_strbuf_printf(t, "    const cmsis_nn_fc_params params = {\n        .input_offset = %" JSON_INTEGER_FORMAT
              ",\n        .filter_offset = %" JSON_INTEGER_FORMAT ",\n        .output_offset = %" JSON_INTEGER_FORMAT
              ",\n        .activation = {.min = %" JSON_INTEGER_FORMAT ", .max = %" JSON_INTEGER_FORMAT "},\n    };\n",
              ji(d, "input_offset", 0), ji(d, "filter_offset", 0), ji(d, "output_offset", 0), amin, amax);
        tth_strbuf_printf(t, "    const cmsis_nn_per_tensor_quant_params quant = {.multiplier = %" JSON_INTEGER_FORMAT
              ", .shift = %" JSON_INTEGER_FORMAT "};\n", ji(d, "multiplier", 0), ji(d, "shift", 0));
        dims(t, d, "input_dims");
        dims(t, d, "filter_dims");
        dims(t, d, "bias_dims");
        dims(t, d, "output_dims");
        tth_strbuf_printf(t, "    const arm_cmsis_nn_status status = %s(&ctx, &params, &quant, &input_dims, input, &filter_dims, "
              "filter, &bias_dims, %s, &output_dims, output);\n", fn, has_role(d, "bias") ? "bias" : "NULL");
    } else if (!strcmp(fn, "arm_max_pool_s8") || !strcmp(fn, "arm_avgpool_s8")) {
        tth_strbuf_printf(t, "    const cmsis_nn_pool_params params = {\n"
              "        .stride = {.w = %" JSON_INTEGER_FORMAT ", .h = %" JSON_INTEGER_FORMAT "},\n"
              "        .padding = {.w = %" JSON_INTEGER_FORMAT ", .h = %" JSON_INTEGER_FORMAT "},\n"
              "        .activation = {.min = %" JSON_INTEGER_FORMAT ", .max = %" JSON_INTEGER_FORMAT "},\n    };\n",
              ji(d, "stride", 1), ji(d, "stride", 0), ji(d, "padding", 1), ji(d, "padding", 0), amin, amax);
        dims(t, d, "input_dims");
        dims(t, d, "filter_dims");
        dims(t, d, "output_dims");
        tth_strbuf_printf(t, "    const arm_cmsis_nn_status status = %s(&ctx, &params, &input_dims, %s, &filter_dims, "
              "&output_dims, %s);\n", fn, x, y);
    } else if (!strcmp(fn, "arm_softmax_s8")) {
        tth_strbuf_printf(t, "    %s(input, %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
              ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", output);\n    return 0;\n}\n\n",
              fn, ji(d, "num_rows", 0), ji(d, "row_size", 0), ji(d, "mult", 0), ji(d, "shift", 0), ji(d, "diff_min", 0));
        return;
    } else if (!strcmp(fn, "arm_elementwise_add_s8")) {
        tth_strbuf_printf(t, "    const arm_cmsis_nn_status status = %s(input, input2, %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
              ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
              ", %" JSON_INTEGER_FORMAT ", output, %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %"
              JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ");\n",
              fn, ji(d, "input_offsets", 0), ji(d, "multiplier", 0), ji(d, "shift", 0), ji(d, "input_offsets", 1),
              ji(d, "multiplier", 1), ji(d, "shift", 1), ji(d, "left_shift", 0), ji(d, "output_offset", 0),
              ji(d, "multiplier", 2), ji(d, "shift", 2), amin, amax, ji(d, "block_size", 0));
    } else if (!strcmp(fn, "arm_elementwise_mul_s8")) {
        tth_strbuf_printf(t, "    const arm_cmsis_nn_status status = %s(input, input2, %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
              ", output, %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %"
              JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT ");\n",
              fn, ji(d, "input_offsets", 0), ji(d, "input_offsets", 1), ji(d, "output_offset", 0),
              ji(d, "multiplier", 0), ji(d, "shift", 0), amin, amax, ji(d, "block_size", 0));
    } else {
        fail(e, TTH_EUNSUPPORTED, "CMSIS-NN function '%s'", fn ? fn : "?");
        return;
    }
    tth_strbuf_printf(t, "    if (status != ARM_CMSIS_NN_SUCCESS)\n        return (int32_t)status;\n");
    if (sout)
        tth_strbuf_printf(t, "    tth_cmsisnn_to_nchw(output_nhwc, output, %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
              ", %" JSON_INTEGER_FORMAT ");\n", ji(d, "output_dims", 3), ji(d, "output_dims", 1), ji(d, "output_dims", 2));
    tth_strbuf_printf(t, "    return 0;\n}\n\n");
}

static const json_t *call_desc(const tth_prim_func *f, const char *wrapper)
{
    const json_t *calls = json_object_get(f->attrs, "cmsis_nn");
    for (size_t i = 0; i < json_array_size(calls); i++) {
        const char *w = json_string_value(json_object_get(json_array_get(calls, i), "wrapper"));
        if (w && !strcmp(w, wrapper))
            return json_array_get(calls, i);
    }
    return NULL;
}

static void emit_signature(emitter *e, const tth_prim_func *f)
{
    tth_strbuf_printf(&e->out, "int32_t %s(", f->name);
    for (size_t i = 0; i < f->nparams; i++) {
        const char *ct = ctype(f->params[i]->dtype);
        if (!ct) {
            fail(e, TTH_EUNSUPPORTED, "PrimFunc '%s' parameter '%s' of type %s", f->name, f->params[i]->name,
                 tth_dtype_name(f->params[i]->dtype));
            return;
        }
        /* the region's inputs (attrs "inputs", set by the host) are read only: docs/plugin-guide.md */
        int in = (json_int_t)i < json_integer_value(json_object_get(f->attrs, "inputs"));
        tth_strbuf_printf(&e->out, "%s%s *restrict %s, ", in ? "const " : "", ct, f->params[i]->name);
    }
    tth_strbuf_printf(&e->out, "uint8_t *restrict ws)");
}

static void emit_func(emitter *e, const tth_prim_func *f)
{
    walk w = {0};
    walk_stmt(e, f->body, &w);
    if (e->err)
        return;
    /* constants, then the wrappers, then the PrimFunc */
    for (size_t i = 0; i < w.ncalls; i++)
        for (size_t a = 0; a < w.calls[i]->u.call.nargs; a++) {
            const tth_texpr *x = w.calls[i]->u.call.args[a];
            if (x->kind != TTH_TEXPR_ADDRESS_OF) {
                fail(e, TTH_EUNSUPPORTED, "call_extern '%s' argument %zu is not a buffer address",
                     w.calls[i]->u.call.name, a);
                return;
            }
            const tth_tbuffer *b = x->u.load.buf;
            if (b->scope == TTH_SCOPE_CONST && !const_seen(e, b))
                emit_const(e, b);
        }
    for (size_t i = 0; i < w.ncalls; i++) {
        const json_t *d = call_desc(f, w.calls[i]->u.call.name);
        if (!d) {
            fail(e, TTH_EUNSUPPORTED, "call_extern '%s' in '%s' has no cmsis_nn description in the PrimFunc's attrs",
                 w.calls[i]->u.call.name, f->name);
            return;
        }
        emit_wrapper(e, d);
    }
    emit_signature(e, f);
    tth_strbuf_printf(&e->out, "\n{\n");
    if (!w.nlocals)
        tth_strbuf_printf(&e->out, "    (void)ws;\n");
    for (size_t i = 0; i < w.nlocals; i++) {
        const tth_tbuffer *b = w.locals[i];
        if (b->offset < 0) {
            fail(e, TTH_EINVAL, "LOCAL buffer '%s' of '%s' has no workspace offset: memory planning must run first",
                 b->name, f->name);
            return;
        }
        tth_strbuf_printf(&e->out, "    int8_t *%s = (int8_t *)(ws + %" PRId64 ");\n", b->name, b->offset);
    }
    tth_strbuf_printf(&e->out, "    int32_t status;\n");
    for (size_t i = 0; i < w.ncalls; i++) {
        const tth_texpr *c = w.calls[i];
        tth_strbuf_printf(&e->out, "    status = %s(", c->u.call.name);
        for (size_t a = 0; a < c->u.call.nargs; a++) {
            const tth_texpr *x = c->u.call.args[a];
            if (x->u.load.index->kind != TTH_TEXPR_INT) {
                fail(e, TTH_EUNSUPPORTED, "a buffer address with a computed index");
                return;
            }
            tth_strbuf_printf(&e->out, "%s%s + %" PRId64, a ? ", " : "", x->u.load.buf->name, x->u.load.index->u.i);
        }
        tth_strbuf_printf(&e->out, ");\n    if (status != 0)\n        return status;\n");
    }
    tth_strbuf_printf(&e->out, "    return 0;\n}\n\n");
}

static const char prologue[] =
    "/* Generated by tth's cmsis-nn plugin: CMSIS-NN calls for the operators offloaded to it.\n"
    " * Build with CMSIS-NN's include directory and link its library. Each PrimFunc follows tth's\n"
    " * C ABI (buffers, then the workspace); it returns 0 or the first failing arm_cmsis_nn_status. */\n"
    "#include <stddef.h>\n#include <stdint.h>\n\n#include \"arm_nnfunctions.h\"\n\n";

static const char transposes[] =
    "/* tth's tensors are NCHW, CMSIS-NN's NHWC: stage through planned LOCAL buffers. */\n"
    "static void tth_cmsisnn_to_nhwc(const int8_t *src, int8_t *dst, int32_t c, int32_t h, int32_t w)\n{\n"
    "    for (int32_t k = 0; k < c; k++)\n        for (int32_t y = 0; y < h; y++)\n"
    "            for (int32_t x = 0; x < w; x++)\n                dst[(y * w + x) * c + k] = src[(k * h + y) * w + x];\n}\n\n"
    "static void tth_cmsisnn_to_nchw(const int8_t *src, int8_t *dst, int32_t c, int32_t h, int32_t w)\n{\n"
    "    for (int32_t k = 0; k < c; k++)\n        for (int32_t y = 0; y < h; y++)\n"
    "            for (int32_t x = 0; x < w; x++)\n                dst[(k * h + y) * w + x] = src[(y * w + x) * c + k];\n}\n\n";

TTH_PLUGIN_EXPORT int tth_tir_to_runtime(const tth_host *host, const json_t *target, const tth_tir_module *mod,
                                         tth_runtime_module *out, tth_diag *diag)
{
    (void)host;
    (void)target;
    if (!mod || !out)
        return tth_diag_set(diag, TTH_EINVAL, "cmsis-nn tir_to_runtime", "no module given");
    emitter e = {.diag = diag};
    tth_strbuf_printf(&e.out, "%s", prologue);
    /* the staging helpers only when some wrapper stages (unused statics warn) */
    int in = 0, outs = 0;
    for (size_t i = 0; i < mod->nfuncs; i++) {
        const json_t *calls = json_object_get(mod->funcs[i]->attrs, "cmsis_nn");
        for (size_t k = 0; k < json_array_size(calls); k++) {
            in |= has_role(json_array_get(calls, k), "input_nhwc");
            outs |= has_role(json_array_get(calls, k), "output_nhwc");
        }
    }
    if (in || outs) {
        /* print only the halves in use */
        const char *mid = strstr(transposes, "static void tth_cmsisnn_to_nchw");
        if (in)
            tth_strbuf_printf(&e.out, "%.*s", (int)(mid - transposes), transposes);
        if (outs)
            tth_strbuf_printf(&e.out, "%s%s", in ? "" : "/* tth's tensors are NCHW, CMSIS-NN's NHWC. */\n", mid);
    }
    for (size_t i = 0; i < mod->nfuncs && !e.err; i++) {
        emit_signature(&e, mod->funcs[i]);
        tth_strbuf_printf(&e.out, ";\n");
    }
    tth_strbuf_printf(&e.out, "\n");
    for (size_t i = 0; i < mod->nfuncs && !e.err; i++)
        emit_func(&e, mod->funcs[i]);
    if (!e.err && e.out.failed)
        fail(&e, TTH_ENOMEM, "out of memory writing C source");
    int rc = e.err;
    if (!rc)
        rc = tth_runtime_module_add_file(out, "cmsisnn_lib0.c", TTH_FILE_C_SOURCE, e.out.s, e.out.n, diag);
    if (!rc) {
        json_t *syms = json_array();
        for (size_t i = 0; syms && i < mod->nfuncs; i++)
            json_array_append_new(syms, json_string(mod->funcs[i]->name));
        /* the library the code calls, for the artifact's README, CMakeLists.txt and metadata
         * (docs/plugin-guide.md, "Libraries a module needs") */
        json_t *meta = json_pack("{s:s,s:[s],s:[s],s:o,s:[{s:s,s:s,s:s,s:[s],s:s}]}", "language", "c99", "sources",
                                 "cmsisnn_lib0.c", "libs", "cmsis-nn", "entry_symbols", syms, "requires", "library",
                                 "CMSIS-NN", "header", "arm_nnfunctions.h", "root_variable", "CMSIS_NN_ROOT",
                                 "include_dirs", "Include", "cmake_target", "cmsis-nn");
        rc = meta ? tth_runtime_module_set_meta(out, meta, diag) : tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        json_decref(meta);
    }
    tth_strbuf_free(&e.out);
    free(e.consts);
    return rc;
}
