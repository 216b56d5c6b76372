/* A test plugin for composite targets: kind TP_KIND takes float32 `add` and `multiply` without
 * broadcasting (partition_supports) and exports the hooks chosen at build time:
 *   TP_R2T  relay_to_tir: its own TIR loops (intermediates in LOCAL buffers);
 *   TP_T2R  tir_to_runtime: C source for the PrimFuncs the default lowering made for it;
 *   TP_R2R  relay_to_runtime + constant_updater: C source implementing the region; constant
 *           operands are allowed and are both reported by constant_updater and baked in;
 *   TP_ONLY_MUL  partition_supports takes multiply only;
 *   TP_DEVICE    the descriptor's device type (default TTH_DEVICE_CPU);
 *   TP_NOPS no partition_supports (it can only be a composite's last kind).
 * TP_FAIL names a hook that returns an error instead. Every hook call is appended to the file
 * named by $TTH_TEST_HOOK_LOG: "<kind> <hook> <region or ->". */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tth/artifact.h>
#include <tth/plugin.h>
#include <tth/relay.h>
#include <tth/tir.h>

#ifndef TP_KIND
#define TP_KIND "test-part"
#endif
#ifndef TP_DEVICE
#define TP_DEVICE TTH_DEVICE_CPU
#endif
#ifndef TP_FAIL
#define TP_FAIL ""
#endif

static const char *const keys[] = {"test", NULL};

TTH_PLUGIN_EXPORT const tth_plugin_descriptor tth_descriptor = {
    .size = sizeof(tth_plugin_descriptor),
    .abi_major = TTH_ABI_MAJOR,
    .abi_minor = TTH_ABI_MINOR,
    .plugin_name = "tp-" TP_KIND,
    .plugin_version = "0.0.1",
    .kind = TP_KIND,
    .doc = "composite-target test plugin",
    .device_type = TP_DEVICE,
    .flags = TTH_KIND_NEEDS_HOST,
    .attrs = NULL,
    .default_keys = keys,
    .tags = NULL,
};

__attribute__((unused)) static void log_call(const char *hook, const char *region)
{
    const char *path = getenv("TTH_TEST_HOOK_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    fprintf(f, "%s %s %s\n", TP_KIND, hook, region ? region : "-");
    fclose(f);
}

__attribute__((unused)) static int failing(const char *hook, tth_diag *diag)
{
    if (strcmp(TP_FAIL, hook) != 0)
        return 0;
    return tth_diag_set(diag, TTH_EINTERNAL, NULL, "%s refused on purpose (test)", hook);
}

__attribute__((unused)) static int64_t numel(const tth_ttype *t)
{
    int64_t n = 1;
    for (int32_t i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

__attribute__((unused)) static int same_type(const tth_ttype *a, const tth_ttype *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return 0;
    for (int32_t i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

/* Which result of fn e is (the body, or a field of a tuple body), or -1. */
__attribute__((unused)) static int result_index(const tth_relay_function *fn, const tth_rexpr *e)
{
    if (fn->body->kind != TTH_REXPR_TUPLE)
        return fn->body == e ? 0 : -1;
    for (size_t k = 0; k < fn->body->u.tuple.nfields; k++)
        if (fn->body->u.tuple.fields[k] == e)
            return (int)k;
    return -1;
}

__attribute__((unused)) static size_t result_count(const tth_relay_function *fn)
{
    return fn->body->type.nfields >= 0 ? (size_t)fn->body->type.nfields : 1;
}

#ifndef TP_NOPS
TTH_PLUGIN_EXPORT int tth_partition_supports(const tth_host *host, const json_t *target,
                                             const tth_relay_function *fn, const tth_rexpr *call,
                                             char *why, size_t why_len)
{
    (void)host;
    (void)target;
    (void)fn;
    const char *op = tth_op_name(call->u.call.op);
    if (call->u.call.op != TTH_OP_ADD && call->u.call.op != TTH_OP_MULTIPLY) {
        snprintf(why, why_len, "%s is not add or multiply", op);
        return 0;
    }
#ifdef TP_ONLY_MUL
    if (call->u.call.op != TTH_OP_MULTIPLY) {
        snprintf(why, why_len, "%s: this kind takes only multiply", op);
        return 0;
    }
#endif
    if (call->type.tensor.dtype != TTH_F32) {
        snprintf(why, why_len, "%s on %s: only float32", op, tth_dtype_name(call->type.tensor.dtype));
        return 0;
    }
    for (size_t a = 0; a < call->u.call.nargs; a++) {
        const tth_rexpr *x = call->u.call.args[a];
        if (!same_type(&x->type.tensor, &call->type.tensor)) {
            snprintf(why, why_len, "%s with broadcasting not supported", op);
            return 0;
        }
#ifndef TP_R2R
        if (x->kind == TTH_REXPR_CONST) {
            snprintf(why, why_len, "%s with a constant operand not supported", op);
            return 0;
        }
#endif
    }
    return 1;
}
#endif

#ifdef TP_R2T
/* relay_to_tir: out = the region computed element by element through LOCAL buffers. */
TTH_PLUGIN_EXPORT int tth_relay_to_tir(const tth_host *host, const json_t *target,
                                       const tth_relay_function *fn, const char *global_symbol,
                                       tth_tir_module *mod, tth_diag *diag)
{
    (void)host;
    (void)target;
    log_call("relay_to_tir", global_symbol);
    if (failing("relay_to_tir", diag))
        return TTH_EINTERNAL;
    tth_relay_module *rm = fn->module;
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(rm, fn, &nodes);
    if (n < 0 || fn->nparams + result_count(fn) > 64)
        return tth_diag_set(diag, TTH_ELIMIT, NULL, "more than 64 parameters and results");
    tth_tbuffer **buf = calloc((size_t)n + 1, sizeof *buf);
    tth_tbuffer *params[64];
    tth_tbuffer *locals[256];
    tth_tstmt *seq = NULL;
    size_t np = 0, nl = 0;
    int rc = 0;
    for (int64_t i = 0; i < n && !rc; i++) {
        tth_rexpr *e = nodes[i];
        const tth_ttype *t = &e->type.tensor;
        if (e->kind == TTH_REXPR_VAR) {
            size_t p = 0;
            while (p < fn->nparams && fn->params[p] != e)
                p++;
            char nm[16];
            snprintf(nm, sizeof nm, "in%zu", p);
            if (p >= 64) {
                rc = tth_diag_set(diag, TTH_ELIMIT, NULL, "more than 64 params");
                break;
            }
            buf[i] = params[p] = tth_tir_buffer(mod, nm, t->dtype, t->rank, t->shape, TTH_SCOPE_PARAM);
        } else if (e->kind == TTH_REXPR_CALL) {
            char nm[32];
            snprintf(nm, sizeof nm, "t%" PRId64, i);
            buf[i] = tth_tir_buffer(mod, nm, t->dtype, t->rank, t->shape,
                                    result_index(fn, e) >= 0 ? TTH_SCOPE_PARAM : TTH_SCOPE_LOCAL);
            if (result_index(fn, e) >= 0)
                params[fn->nparams + (size_t)result_index(fn, e)] = buf[i];
            else if (nl < 256)
                locals[nl++] = buf[i];
            tth_tbuffer *a = NULL, *b = NULL;
            for (int64_t j = 0; j < i; j++) {
                if (nodes[j] == e->u.call.args[0])
                    a = buf[j];
                if (nodes[j] == e->u.call.args[1])
                    b = buf[j];
            }
            tth_tvar *v = tth_tir_var(mod, "i", TTH_I64);
            tth_texpr *x = tth_tir_load(mod, a, tth_tir_ref(mod, v));
            tth_texpr *y = tth_tir_load(mod, b, tth_tir_ref(mod, v));
            tth_texpr *val = tth_tir_bin(mod, e->u.call.op == TTH_OP_ADD ? TTH_TBIN_ADD : TTH_TBIN_MUL, x, y);
            tth_tstmt *loop = tth_tir_for(mod, v, tth_tir_i64(mod, 0), tth_tir_i64(mod, numel(t)),
                                          TTH_LOOP_SERIAL,
                                          tth_tir_store(mod, buf[i], tth_tir_ref(mod, v), val));
            rc = tth_tir_seq_append(mod, &seq, loop);
        }
        if (!buf[i] && (e->kind == TTH_REXPR_VAR || e->kind == TTH_REXPR_CALL))
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    np = fn->nparams + result_count(fn);
    free(buf);
    for (size_t k = nl; k > 0 && !rc; k--)
        seq = tth_tir_allocate(mod, locals[k - 1], seq);
    if (rc)
        return rc;
    return tth_tir_func_add(mod, global_symbol, params, np, seq, TP_KIND,
                            json_pack("{s:s}", "op", "tp-loops"), diag) ? 0 : diag->code;
}
#endif

#ifdef TP_T2R
/* C text helpers */
typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void tprintf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tprintf(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        t->p = realloc(t->p, t->cap);
    }
    va_start(ap, fmt);
    vsnprintf(t->p + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static void arg_ref(text *t, const tth_tbuffer *b)
{
    if (b->scope == TTH_SCOPE_LOCAL)
        tprintf(t, "(float *)(ws + %" PRId64 ")", b->offset);
    else
        tprintf(t, "%s", b->name);
}

/* The default lowering's PrimFuncs of one add/multiply, and region functions calling them. */
static int emit_func(text *t, const tth_prim_func *f, tth_diag *diag)
{
    tprintf(t, "int32_t %s(", f->name);
    for (size_t i = 0; i < f->nparams; i++)
        tprintf(t, "float *%s, ", f->params[i]->name);
    tprintf(t, "uint8_t *ws)\n{\n    (void)ws;\n");
    const tth_tstmt *s = f->body;
    while (s && s->kind == TTH_TSTMT_ALLOCATE)
        s = s->u.alloc.body;
    const char *op = f->attrs ? json_string_value(json_object_get(f->attrs, "op")) : NULL;
    if (s && s->kind == TTH_TSTMT_SEQ && op && strcmp(op, "region") == 0) {
        for (size_t k = 0; k < s->u.seq.n; k++) {
            const tth_tstmt *c = s->u.seq.stmts[k];
            if (c->kind != TTH_TSTMT_CALL_FUNC)
                return tth_diag_set(diag, TTH_EUNSUPPORTED, f->name, "only calls in a region");
            tprintf(t, "    %s(", c->u.call.func);
            for (size_t a = 0; a < c->u.call.nargs; a++) {
                arg_ref(t, c->u.call.args[a]);
                tprintf(t, ", ");
            }
            tprintf(t, "ws);\n");
        }
    } else if (op && (strcmp(op, "add") == 0 || strcmp(op, "multiply") == 0) &&
               (f->nparams == 2 || f->nparams == 3)) {
        const char *a = f->params[0]->name, *b = f->params[f->nparams - 2]->name;
        const char *o = f->params[f->nparams - 1]->name;
        tprintf(t, "    for (long i = 0; i < %" PRId64 "; i++)\n        %s[i] = %s[i] %c %s[i];\n",
                tth_tbuffer_numel(f->params[f->nparams - 1]), o, a, op[0] == 'a' ? '+' : '*', b);
    } else {
        return tth_diag_set(diag, TTH_EUNSUPPORTED, f->name, "this test kind only builds add, "
                            "multiply and regions of them");
    }
    tprintf(t, "    return 0;\n}\n\n");
    return 0;
}

TTH_PLUGIN_EXPORT int tth_tir_to_runtime(const tth_host *host, const json_t *target,
                                         const tth_tir_module *mod, tth_runtime_module *out,
                                         tth_diag *diag)
{
    (void)host;
    (void)target;
    log_call("tir_to_runtime", mod->nfuncs ? mod->funcs[0]->name : NULL);
    if (failing("tir_to_runtime", diag))
        return TTH_EINTERNAL;
    text t = {0};
    tprintf(&t, "/* generated by the " TP_KIND " test plugin */\n#include <stdint.h>\n\n");
    for (size_t i = 0; i < mod->nfuncs; i++) {
        const tth_prim_func *f = mod->funcs[i];
        tprintf(&t, "int32_t %s(", f->name);
        for (size_t p = 0; p < f->nparams; p++)
            tprintf(&t, "float *, ");
        tprintf(&t, "uint8_t *);\n");
    }
    tprintf(&t, "\n");
    int rc = 0;
    for (size_t i = 0; i < mod->nfuncs && !rc; i++)
        rc = emit_func(&t, mod->funcs[i], diag);
    if (!rc)
        rc = tth_runtime_module_add_file(out, "tp_" TP_KIND ".c", TTH_FILE_C_SOURCE, t.p, t.len, diag);
    free(t.p);
    return rc;
}
#endif

#ifdef TP_R2R

/* relay_to_runtime: the region as one C function over stack temporaries. */
TTH_PLUGIN_EXPORT int tth_relay_to_runtime(const tth_host *host, const json_t *target,
                                           const tth_relay_function *fn, const char *global_symbol,
                                           tth_runtime_module *out, tth_diag *diag)
{
    (void)host;
    (void)target;
    log_call("relay_to_runtime", global_symbol);
    if (failing("relay_to_runtime", diag))
        return TTH_EINTERNAL;

    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(fn->module, fn, &nodes);
    size_t cap = 4096 + (size_t)n * 512, w = 0;
    char *src = malloc(cap);
    if (!src || n < 0) {
        free(src);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    w += (size_t)snprintf(src + w, cap - w, "/* generated by the " TP_KIND " test plugin */\n"
                          "#include <stdint.h>\n\nint32_t %s(", global_symbol);
    for (size_t p = 0; p < fn->nparams; p++)
        w += (size_t)snprintf(src + w, cap - w, "float *p%zu, ", p);
    for (size_t o = 0; o < result_count(fn); o++)
        w += (size_t)snprintf(src + w, cap - w, "float *out%zu, ", o);
    w += (size_t)snprintf(src + w, cap - w, "uint8_t *ws)\n{\n    (void)ws;\n");
    for (int64_t i = 0; i < n; i++) {
        const tth_rexpr *e = nodes[i];
        int64_t ne = numel(&e->type.tensor);
        if (e->kind == TTH_REXPR_CONST) {
            const float *v = e->u.constant.value->data;
            w += (size_t)snprintf(src + w, cap - w, "    static const float n%u[%" PRId64 "] = {", e->id, ne);
            for (int64_t k = 0; k < ne && w + 64 < cap; k++)
                w += (size_t)snprintf(src + w, cap - w, "%a, ", (double)v[k]);
            w += (size_t)snprintf(src + w, cap - w, "};\n");
        } else if (e->kind == TTH_REXPR_VAR) {
            size_t p = 0;
            while (p < fn->nparams && fn->params[p] != e)
                p++;
            w += (size_t)snprintf(src + w, cap - w, "    const float *n%u = p%zu;\n", e->id, p);
        } else if (e->kind == TTH_REXPR_CALL) {
            if (result_index(fn, e) >= 0)
                w += (size_t)snprintf(src + w, cap - w, "    float *n%u = out%d;\n", e->id,
                                      result_index(fn, e));
            else
                w += (size_t)snprintf(src + w, cap - w, "    float n%u[%" PRId64 "];\n", e->id, ne);
            w += (size_t)snprintf(src + w, cap - w, "    for (long i = 0; i < %" PRId64 "; i++)\n"
                                  "        n%u[i] = n%u[i] %c n%u[i];\n", ne, e->id,
                                  e->u.call.args[0]->id, e->u.call.op == TTH_OP_ADD ? '+' : '*',
                                  e->u.call.args[1]->id);
        }
        if (w + 256 >= cap) {
            free(src);
            return tth_diag_set(diag, TTH_ELIMIT, NULL, "region too large for this test plugin");
        }
    }
    w += (size_t)snprintf(src + w, cap - w, "    return 0;\n}\n");
    char name[300];
    snprintf(name, sizeof name, "%s.c", global_symbol);
    int rc = tth_runtime_module_add_file(out, name, TTH_FILE_C_SOURCE, src, w, diag);
    free(src);
    return rc;
}

/* constant_updater: the region's constant operands, by name. */
TTH_PLUGIN_EXPORT int tth_constant_updater(const tth_host *host, const json_t *target,
                                           const tth_relay_function *fn, const char *global_symbol,
                                           tth_const_map *out, tth_diag *diag)
{
    (void)host;
    (void)target;
    log_call("constant_updater", global_symbol);
    if (failing("constant_updater", diag))
        return TTH_EINTERNAL;
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(fn->module, fn, &nodes);
    int rc = 0;
    for (int64_t i = 0; i < n && !rc; i++)
        if (nodes[i]->kind == TTH_REXPR_CONST) {
            char name[300];
            snprintf(name, sizeof name, "%s_c%u", global_symbol, nodes[i]->id);
            rc = tth_const_map_add(out, name, nodes[i]->u.constant.value, diag);
        }
    return rc;
}
#endif
