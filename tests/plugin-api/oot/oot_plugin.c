/* The plugin docs/plugin-guide.md walks through: built by oot_test.sh with nothing but an
 * installed tth and
 *   cc -shared -fPIC -fvisibility=hidden oot_plugin.c $(pkg-config --cflags --libs tth-plugin)
 * Kind "oot-npu" with one attribute, one tag, a target_parser that uses libtth, and the two hooks
 * that let it take part in a compile: partition_supports (which operators it takes) and
 * relay_to_runtime (C source implementing each region it took). oot_test.sh compiles an ONNX
 * model for "oot-npu,c" through tthd, runs it and compares the numbers. */
#include <stdio.h>
#include <stdlib.h>

#include <tth/artifact.h>
#include <tth/plugin.h>
#include <tth/relay.h>
#include <tth/target.h>

static const tth_attr_schema lanes = {
    .size = sizeof(tth_attr_schema), .name = "lanes", .type = TTH_ATTR_INT,
    .default_json = "8", .doc = "vector lanes"};
static const tth_attr_schema *const attrs[] = {&lanes, NULL}; /* NULL-terminated */
static const char *const default_keys[] = {"npu", NULL};

static const char *const aliases[] = {"oot/npu16", NULL};
static const tth_tag_def npu16 = {
    .size = sizeof(tth_tag_def), .name = "oot/npu-16", .aliases = aliases,
    .config_json = "{\"kind\": \"oot-npu\", \"lanes\": 16}", .doc = "the 16-lane NPU"};
static const tth_tag_def *const tags[] = {&npu16, NULL};

TTH_PLUGIN_EXPORT const tth_plugin_descriptor tth_descriptor = {
    .size = sizeof(tth_plugin_descriptor),
    .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR,
    .plugin_name = "oot-npu", .plugin_version = "1.0.0",
    .kind = "oot-npu", .doc = "an out-of-tree test NPU",
    .device_type = TTH_DEVICE_EXT_DEV,
    .flags = TTH_KIND_NEEDS_HOST, /* its code is driven by a host target */
    .attrs = attrs, .default_keys = default_keys, .tags = tags,
};

/* Not exported: -fvisibility=hidden keeps it private. */
int oot_helper(void);
int oot_helper(void)
{
    return 42;
}

TTH_PLUGIN_EXPORT int tth_target_parser(const tth_host *host, const json_t *target, json_t **out, tth_diag *diag)
{
    (void)host;
    json_int_t n = json_integer_value(json_object_get(target, "lanes"));
    if (n < 1 || n > 64)
        return tth_diag_set(diag, TTH_EINVAL, "-lanes", "lanes must be 1 to 64, not %d", (int)n);
    json_t *t = json_deep_copy(target);
    static const char *const keys[] = {"oot"};
    if (!t || tth_target_keys_prepend(t, keys, 1) != 0 ||
        json_object_set_new(t, "features", json_pack("{s:b}", "wide", n >= 16)) != 0) {
        json_decref(t);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    *out = t;
    return 0;
}

/* Which operator calls of the model this kind takes: a float32 add of two graph values of the
 * same shape, one add per region (an add fed by another add stays with the host). Saying no
 * fills `why`: `tthctl compile --explain` shows it. */
TTH_PLUGIN_EXPORT int tth_partition_supports(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                             const tth_rexpr *call, char *why, size_t why_len)
{
    (void)host;
    (void)target;
    (void)fn;
    if (call->u.call.op != TTH_OP_ADD) {
        snprintf(why, why_len, "%s: this NPU only adds", tth_op_name(call->u.call.op));
        return 0;
    }
    const tth_ttype *t = &call->type.tensor;
    if (t->dtype != TTH_F32) {
        snprintf(why, why_len, "add on %s: only float32", tth_dtype_name(t->dtype));
        return 0;
    }
    for (size_t a = 0; a < 2; a++) {
        const tth_rexpr *x = call->u.call.args[a];
        int same = x->type.tensor.rank == t->rank;
        for (int32_t d = 0; same && d < t->rank; d++)
            same = x->type.tensor.shape[d] == t->shape[d];
        if (!same) {
            snprintf(why, why_len, "add with broadcasting: not supported");
            return 0;
        }
        if (x->kind != TTH_REXPR_VAR && !(x->kind == TTH_REXPR_CALL && x->u.call.op != TTH_OP_ADD)) {
            snprintf(why, why_len, "add of a constant or of another add: one add of two values per region");
            return 0;
        }
    }
    return 1;
}

/* The region `fn` (one add of its two parameters, as partition_supports promised) as a C
 * function with tth's region ABI: one pointer per parameter, one per result, the workspace. */
TTH_PLUGIN_EXPORT int tth_relay_to_runtime(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                           const char *global_symbol, tth_runtime_module *out, tth_diag *diag)
{
    (void)host;
    json_int_t lanes = json_integer_value(json_object_get(target, "lanes"));
    const tth_rexpr *add = fn->body;
    if (add->kind != TTH_REXPR_CALL || add->u.call.op != TTH_OP_ADD || fn->nparams != 2)
        return tth_diag_set(diag, TTH_EUNSUPPORTED, global_symbol, "a region of oot-npu is one add of two values");
    int a = add->u.call.args[0] == fn->params[0] ? 0 : 1, b = add->u.call.args[1] == fn->params[0] ? 0 : 1;
    int64_t n = 1;
    for (int32_t d = 0; d < add->type.tensor.rank; d++)
        n *= add->type.tensor.shape[d];
    char src[1024], name[160];
    int len = snprintf(src, sizeof src,
                       "/* %s: generated by the oot-npu plugin (%d lanes) */\n"
                       "#include <stdint.h>\n"
                       "int32_t %s(const float *p0, const float *p1, float *out0, uint8_t *ws)\n{\n"
                       "    (void)ws;\n"
                       "    for (long i = 0; i < %lld; i++)\n"
                       "        out0[i] = p%d[i] + p%d[i];\n"
                       "    return 0;\n}\n",
                       global_symbol, (int)lanes, global_symbol, (long long)n, a, b);
    snprintf(name, sizeof name, "%s.c", global_symbol);
    if (len < 0 || (size_t)len >= sizeof src)
        return tth_diag_set(diag, TTH_ELIMIT, global_symbol, "generated source too long");
    return tth_runtime_module_add_file(out, name, TTH_FILE_C_SOURCE, src, (size_t)len, diag);
}
