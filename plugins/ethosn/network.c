/* network.c: the ethos-n kind's partition_supports, relay_to_runtime and constant_updater hooks.
 *
 * relay_to_runtime writes the region as a serialized, versioned, deterministic network
 * (FORMAT.md: operators in dependency order, shapes, attributes, quantization, references to the
 * constants, and the N78 configuration from the target) as a TTH_FILE_BLOB, and a C source
 * `<global_symbol>_ethosn.c` defining `<global_symbol>` with tth's PrimFunc C ABI. That entry holds
 * the network's bytes and runs them on tth's functional model of the Ethos-N78
 * (model/ethosn_model.c, carried in the module as C source so the artifact builds without tth;
 * docs/ethosn.md, "The functional model"). Constants of more than one element (weights, biases,
 * per-channel scales) are not in the blob: constant_updater hands them to the host, which stores
 * them with the artifact's parameters, and the entry gets them back at run time through
 * `<global_symbol>_bind_constants` / `_bind_parameters` (FORMAT.md, "The generated C"). Before
 * writing anything, relay_to_runtime runs the model's own validation on the blob, so a compile
 * never produces a region the model cannot run. It also estimates the NPU cycles of each MAC layer
 * (docs/ethosn.md, "Cycle estimate") into the module's meta.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <tth/artifact.h>
#include <tth/plugin.h>
#include <tth/relay.h>
#include <tth/strbuf.h>
#include <tth/target.h>

#include "ethosn.h"
#include "model/ethosn_model.h"

TTH_PLUGIN_EXPORT int tth_partition_supports(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                             const tth_rexpr *call, char *why, size_t why_len)
{
    (void)host;
    (void)target;
    return ethosn_supports(fn, call, why, why_len);
}

typedef struct config {
    const char *variant;
    int64_t tops, ple_ratio, sram_kib;
} config;

static int config_of(const json_t *target, config *c, tth_diag *diag)
{
    const json_t *t = tth_target_member(target, "ethos-n");
    c->variant = json_string_value(json_object_get(t, "variant"));
    c->tops = json_integer_value(json_object_get(t, "tops"));
    c->ple_ratio = json_integer_value(json_object_get(t, "ple_ratio"));
    c->sram_kib = json_integer_value(json_object_get(t, "sram_size"));
    if (!c->variant || strcmp(c->variant, "n78") != 0)
        return tth_diag_set(diag, TTH_EUNSUPPORTED, "ethos-n target", "Ethos-N variant '%s' is not supported; tth "
                            "compiles for the Ethos-N78 only", c->variant ? c->variant : "(none)");
    if (c->tops <= 0 || c->ple_ratio <= 0 || c->sram_kib <= 0)
        return tth_diag_set(diag, TTH_EINVAL, "ethos-n target", "the target lacks tops, ple_ratio or sram_size "
                            "(run it through the ethos-n target_parser)");
    return 0;
}

/* ---- the blob writer ---- */

typedef struct wbuf {
    tth_strbuf bytes;     /* the blob so far (failed: out of memory) */
    const char *bad_attr; /* the first attribute FORMAT.md cannot encode */
} wbuf;

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void put(wbuf *b, const void *d, size_t n)
{
    if (n)
        tth_strbuf_putn(&b->bytes, d, n);
}

static void put_u8(wbuf *b, uint8_t v)
{
    put(b, &v, 1);
}

static void put_u32(wbuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

static void put_u64(wbuf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_f64(wbuf *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_u64(b, v);
}

static void put_str(wbuf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put_u32(b, (uint32_t)n);
    put(b, s, n);
}

static void put_type(wbuf *b, const tth_ttype *t)
{
    put_u8(b, (uint8_t)t->dtype);
    put_u8(b, (uint8_t)t->rank);
    for (int i = 0; i < t->rank; i++)
        put_u64(b, (uint64_t)t->shape[i]);
}

/* The region's nodes (topological) and the index of each by id. */
typedef struct region {
    tth_rexpr **nodes;
    int64_t n;
    uint32_t *index_of; /* node id -> position */
    uint32_t *const_of; /* node id -> constant number (by first appearance) */
    uint32_t nconsts;
} region;

static int region_load(const tth_relay_function *fn, region *r)
{
    memset(r, 0, sizeof *r);
    r->n = tth_relay_topo(fn->module, fn, &r->nodes);
    if (r->n < 0)
        return (int)r->n;
    uint32_t max_id = 0;
    for (int64_t i = 0; i < r->n; i++)
        max_id = r->nodes[i]->id > max_id ? r->nodes[i]->id : max_id;
    r->index_of = calloc((size_t)max_id + 1, sizeof *r->index_of);
    r->const_of = calloc((size_t)max_id + 1, sizeof *r->const_of);
    if (!r->index_of || !r->const_of)
        return TTH_ENOMEM;
    for (int64_t i = 0; i < r->n; i++) {
        r->index_of[r->nodes[i]->id] = (uint32_t)i;
        if (r->nodes[i]->kind == TTH_REXPR_CONST)
            r->const_of[r->nodes[i]->id] = r->nconsts++;
    }
    return 0;
}

static void region_free(region *r)
{
    free(r->index_of);
    free(r->const_of);
}

/* Constants stored with the parameters: every one with more than one element. */
static int external_const(const tth_tensor *t)
{
    return tth_ttype_numel(&t->type) > 1;
}

static void const_name(char *buf, size_t len, const char *gsym, uint32_t i)
{
    snprintf(buf, len, "%s_const%" PRIu32, gsym, i);
}

/* A JSON array's numbers: 1 when every one is an integer, 2 when any is a real, 0 otherwise. */
static int number_array(const json_t *a)
{
    int real = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) {
        if (json_is_real(v))
            real = 1;
        else if (!json_is_integer(v))
            return 0;
    }
    return real ? 2 : 1;
}

/* A call's attributes (FORMAT.md, "Attributes"): keys sorted, each value tagged. An attribute no
 * tag can hold (an object, an array of strings) sets b->bad_attr. */
static void put_attrs(wbuf *b, const json_t *attrs)
{
    size_t n = json_object_size(attrs), k = 0;
    const char **keys = calloc(n + 1, sizeof *keys);
    if (!keys) {
        b->bytes.failed = 1;
        return;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)attrs, key, v)
        keys[k++] = key;
    qsort(keys, n, sizeof *keys, cmp_key);
    put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        v = json_object_get(attrs, keys[i]);
        put_str(b, keys[i]);
        if (json_is_integer(v)) {
            put_u8(b, ETHOSN_ATTR_INT);
            put_u64(b, (uint64_t)json_integer_value(v));
        } else if (json_is_real(v)) {
            put_u8(b, ETHOSN_ATTR_REAL);
            put_f64(b, json_real_value(v));
        } else if (json_is_string(v)) {
            put_u8(b, ETHOSN_ATTR_STR);
            put_str(b, json_string_value(v));
        } else if (json_is_boolean(v)) {
            put_u8(b, ETHOSN_ATTR_BOOL);
            put_u8(b, json_is_true(v));
        } else if (json_is_null(v)) {
            put_u8(b, ETHOSN_ATTR_NULL);
        } else if (json_is_array(v) && number_array(v)) {
            int real = number_array(v) == 2;
            put_u8(b, real ? ETHOSN_ATTR_REALS : ETHOSN_ATTR_INTS);
            put_u32(b, (uint32_t)json_array_size(v));
            for (size_t e = 0; e < json_array_size(v); e++) {
                const json_t *x = json_array_get(v, e);
                if (real)
                    put_f64(b, json_number_value(x));
                else
                    put_u64(b, (uint64_t)json_integer_value(x));
            }
        } else if (!b->bad_attr) {
            b->bad_attr = keys[i];
        }
    }
    free(keys);
}

static void write_blob(wbuf *b, const tth_relay_function *fn, const region *r, const char *gsym, const config *c,
                       const char *note)
{
    put(b, ETHOSN_BLOB_MAGIC, 8);
    put_u32(b, ETHOSN_BLOB_VERSION);
    put_str(b, "tth ethos-n plugin 0.1.0");
    put_str(b, note);
    put_str(b, c->variant);
    put_u32(b, (uint32_t)c->tops);
    put_u32(b, (uint32_t)c->ple_ratio);
    put_u32(b, (uint32_t)c->sram_kib);
    put_str(b, gsym);
    put_u32(b, (uint32_t)fn->nparams);
    for (size_t i = 0; i < fn->nparams; i++) {
        put_str(b, fn->params[i]->u.var.name);
        put_type(b, &fn->params[i]->type.tensor);
    }
    put_u32(b, r->nconsts);
    for (int64_t i = 0; i < r->n; i++) {
        const tth_rexpr *e = r->nodes[i];
        if (e->kind != TTH_REXPR_CONST)
            continue;
        const tth_tensor *t = e->u.constant.value;
        char name[256];
        const_name(name, sizeof name, gsym, r->const_of[e->id]);
        put_str(b, name);
        put_str(b, e->u.constant.name);
        put_type(b, &t->type);
        put_u64(b, tth_tensor_hash(t));
        if (external_const(t)) {
            put_u8(b, 0); /* stored with the parameters under `name` */
        } else {
            put_u8(b, 1); /* inline: its one value */
            put_f64(b, tth_tensor_get_f64(t, 0));
        }
    }
    put_u32(b, (uint32_t)r->n);
    for (int64_t i = 0; i < r->n; i++) {
        const tth_rexpr *e = r->nodes[i];
        put_u8(b, (uint8_t)e->kind);
        switch (e->kind) {
        case TTH_REXPR_VAR: {
            uint32_t p = 0;
            while (p < fn->nparams && fn->params[p] != e)
                p++;
            put_u32(b, p);
            break;
        }
        case TTH_REXPR_CONST: put_u32(b, r->const_of[e->id]); break;
        case TTH_REXPR_CALL: {
            put_str(b, tth_op_name(e->u.call.op));
            put_u32(b, (uint32_t)e->u.call.nargs);
            for (size_t a = 0; a < e->u.call.nargs; a++)
                put_u32(b, r->index_of[e->u.call.args[a]->id]);
            put_attrs(b, e->u.call.attrs);
            break;
        }
        case TTH_REXPR_TUPLE:
            put_u32(b, (uint32_t)e->u.tuple.nfields);
            for (size_t a = 0; a < e->u.tuple.nfields; a++)
                put_u32(b, r->index_of[e->u.tuple.fields[a]->id]);
            break;
        case TTH_REXPR_TUPLE_GET:
            put_u32(b, r->index_of[e->u.get.tuple->id]);
            put_u32(b, (uint32_t)e->u.get.index);
            break;
        }
        if (e->type.nfields < 0) {
            put_u32(b, 1);
            put_type(b, &e->type.tensor);
        } else {
            put_u32(b, (uint32_t)e->type.nfields);
            for (int32_t f = 0; f < e->type.nfields; f++)
                put_type(b, &e->type.fields[f]);
        }
    }
    put_u32(b, r->index_of[fn->body->id]);
}

/* ---- the cycle estimate (docs/ethosn.md, "Cycle estimate") ---- */

/* Engines and output groups per engine of each N78 configuration (docs/ethosn.md,
 * "Configurations"); peak MACs per cycle: 512 per TOPS. */
typedef struct geometry {
    int64_t engines, ogs_per_engine, macs_per_cycle;
} geometry;

static geometry geometry_of(const config *c)
{
    geometry g = {2, 4, 512 * c->tops};
    switch (c->tops) {
    case 2: g.engines = 4; break;
    case 4:
        g.engines = c->ple_ratio == 4 ? 8 : 4;
        g.ogs_per_engine = c->ple_ratio == 4 ? 2 : 4;
        break;
    case 8: g.engines = 8; break;
    default: break;
    }
    return g;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return b > 0 ? (a + b - 1) / b : 0;
}

static int64_t tensor_bytes(const tth_ttype *t)
{
    return tth_ttype_numel(t) * (int64_t)tth_dtype_size(t->dtype);
}

/* One MAC layer (qnn.conv2d, qnn.matmul) of the region: its estimate as JSON, or NULL for any
 * other node. */
static json_t *layer_estimate(const tth_rexpr *e, const geometry *g, int64_t sram_bytes)
{
    if (e->kind != TTH_REXPR_CALL || e->type.nfields >= 0 ||
        (e->u.call.op != TTH_OP_QNN_CONV2D && e->u.call.op != TTH_OP_QNN_MATMUL))
        return NULL;
    const tth_ttype *x = &e->u.call.args[0]->type.tensor, *w = &e->u.call.args[1]->type.tensor, *o = &e->type.tensor;
    int64_t channels, per_channel;
    if (e->u.call.op == TTH_OP_QNN_CONV2D) {
        if (x->rank != 4 || w->rank != 4 || o->rank != 4)
            return NULL;
        channels = o->shape[1];
        per_channel = o->shape[0] * o->shape[2] * o->shape[3] * w->shape[1] * w->shape[2] * w->shape[3];
    } else {
        if (x->rank != 2 || w->rank != 2 || o->rank != 2)
            return NULL;
        channels = o->shape[1];
        per_channel = o->shape[0] * x->shape[1];
    }
    int64_t ogs = g->engines * g->ogs_per_engine, passes = ceil_div(channels, ogs);
    int64_t macs = channels * per_channel;
    int64_t cycles = ceil_div(passes * per_channel * ogs, g->macs_per_cycle);
    /* the working set: input, weights, and the output at one byte an element (the NPU writes
     * int8/uint8 after requantizing) */
    int64_t bytes = tensor_bytes(x) + tensor_bytes(w) + tth_ttype_numel(o);
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:I, s:b}", "op", tth_op_name(e->u.call.op), "node",
                     e->span ? e->span : "", "macs", (json_int_t)macs, "output_channels", (json_int_t)channels,
                     "passes", (json_int_t)passes, "cycles", (json_int_t)cycles, "utilization",
                     cycles ? (double)macs / ((double)cycles * (double)g->macs_per_cycle) : 0.0, "working_set_bytes",
                     (json_int_t)bytes, "fits_sram", bytes <= sram_bytes);
}

/* The region's estimate; explain (a JSON array) gets the --explain notes. */
static json_t *estimate(const region *r, const config *c, const char *gsym, json_t *explain)
{
    geometry g = geometry_of(c);
    json_t *layers = json_array();
    int64_t total_macs = 0, total_cycles = 0;
    for (int64_t i = 0; i < r->n; i++) {
        json_t *l = layer_estimate(r->nodes[i], &g, c->sram_kib * 1024);
        if (!l)
            continue;
        total_macs += json_integer_value(json_object_get(l, "macs"));
        total_cycles += json_integer_value(json_object_get(l, "cycles"));
        json_array_append_new(layers, l);
    }
    char msg[512];
    snprintf(msg, sizeof msg, "ethos-n: region '%s': %zu MAC layer%s, %" PRId64 " MACs, about %" PRId64
             " NPU cycles on the Ethos-N78 %" PRId64 "TOPS (%" PRId64 " engines x %" PRId64 " output groups, %" PRId64
             " MACs/cycle; docs/ethosn.md \"Cycle estimate\")", gsym, json_array_size(layers),
             json_array_size(layers) == 1 ? "" : "s", total_macs,
             total_cycles, c->tops, g.engines, g.ogs_per_engine, g.macs_per_cycle);
    json_array_append_new(explain, json_string(msg));
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l) {
        if (i == 32) {
            snprintf(msg, sizeof msg, "ethos-n:   ... and %zu more layers (metadata.json: modules[].meta.ethos-n."
                     "performance)", json_array_size(layers) - 32);
            json_array_append_new(explain, json_string(msg));
            break;
        }
        json_int_t passes = json_integer_value(json_object_get(l, "passes"));
        snprintf(msg, sizeof msg, "ethos-n:   %s '%s': %" JSON_INTEGER_FORMAT " MACs, %" JSON_INTEGER_FORMAT
                 " output channels in %" JSON_INTEGER_FORMAT " pass%s, about %" JSON_INTEGER_FORMAT
                 " cycles (%.0f%% of peak)%s", json_string_value(json_object_get(l, "op")),
                 json_string_value(json_object_get(l, "node")), json_integer_value(json_object_get(l, "macs")),
                 json_integer_value(json_object_get(l, "output_channels")), passes, passes == 1 ? "" : "es",
                 json_integer_value(json_object_get(l, "cycles")),
                 100.0 * json_real_value(json_object_get(l, "utilization")),
                 json_is_true(json_object_get(l, "fits_sram")) ? "" : "; its working set exceeds the SRAM, which the "
                                                                       "estimate does not model");
        json_array_append_new(explain, json_string(msg));
    }
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "model",
                     "MAC array only: ceil(output channels / output groups) passes, each of the per-channel MACs at "
                     "peak MACs per cycle / output groups; 512 MACs per cycle per TOPS (1 GHz, 2 ops per MAC)",
                     "engines", (json_int_t)g.engines, "output_groups_per_engine", (json_int_t)g.ogs_per_engine,
                     "macs_per_cycle", (json_int_t)g.macs_per_cycle, "clock_hz", (json_int_t)1000000000,
                     "total_macs", (json_int_t)total_macs, "total_cycles", (json_int_t)total_cycles, "layers", layers);
}

/* ---- the generated C (FORMAT.md, "The generated C") ---- */

static const char *ctype(tth_dtype t)
{
    switch (t) {
    case TTH_F32: return "float";
    case TTH_F64: return "double";
    case TTH_I8: return "int8_t";
    case TTH_I16: return "int16_t";
    case TTH_I32: return "int32_t";
    case TTH_I64: return "int64_t";
    case TTH_U8: case TTH_BOOL: return "uint8_t";
    case TTH_U16: case TTH_F16: return "uint16_t";
    case TTH_U32: return "uint32_t";
    case TTH_U64: return "uint64_t";
    default: return "void";
    }
}

/* The result tensors of a region: the body's type, or each field of a tuple. */
static size_t nresults(const tth_relay_function *fn)
{
    return fn->body->type.nfields >= 0 ? (size_t)fn->body->type.nfields : 1;
}

static const tth_ttype *result_type(const tth_relay_function *fn, size_t k)
{
    return fn->body->type.nfields >= 0 ? &fn->body->type.fields[k] : &fn->body->type.tensor;
}

static void write_entry(tth_strbuf *src, const tth_relay_function *fn, const char *gsym, const char *blob_name,
                        const char *note, const wbuf *blob, uint32_t nconsts, int nexternal)
{
    size_t nres = nresults(fn), nin = fn->nparams;
    tth_strbuf_printf(src,
         "/* %s_ethosn.c: the Arm Ethos-N78 region '%s', %s.\n"
         " * The network (%s, tth-ethosn-network v%u: plugins/ethosn/FORMAT.md in tth's sources) is\n"
         " * embedded below and runs on tth's functional model of the Ethos-N78 (ethosn_model.c; on a\n"
         " * device, replace ethosn_model_run by the Ethos-N driver: tth's docs/ethosn.md).\n"
         " * The constants stored outside the network (the artifact's parameters \"ethos-n.%s_const<i>\")\n"
         " * must be bound once before the first call: %s_bind_parameters(bytes of parameters/<model>.params,\n"
         " * their length) or %s_bind_constants(data, bytes, %u); until then %s returns %d. */\n"
         "#include <stddef.h>\n#include <stdint.h>\n\n#include \"ethosn_model.h\"\n\n",
         gsym, gsym, note, blob_name, ETHOSN_BLOB_VERSION, gsym, gsym, gsym, (unsigned)nconsts, gsym,
         ETHOSN_MODEL_E_UNBOUND);
    tth_strbuf_printf(src, "static const unsigned char %s_network[%zu] = {", gsym, blob->bytes.n);
    for (size_t i = 0; i < blob->bytes.n; i++)
        tth_strbuf_printf(src, "%s0x%02x,", i % 16 ? " " : "\n    ", (uint8_t)blob->bytes.s[i]);
    tth_strbuf_printf(src, "\n};\n\n");
    size_t nc = nconsts ? nconsts : 1;
    tth_strbuf_printf(src, "static const void *%s_const_data[%zu];\nstatic size_t %s_const_bytes[%zu];\n"
              "static int %s_bound = %d; /* set by %s_bind_constants */\n\n",
         gsym, nc, gsym, nc, gsym, nexternal ? 0 : 1, gsym);
    tth_strbuf_printf(src, "int32_t %s" TTH_BIND_SYM_CONSTANTS "(const void *const *data, const size_t *bytes, size_t n);\n"
              "int32_t %s" TTH_BIND_SYM_PARAMETERS "(const void *params, size_t len);\n", gsym, gsym);
    for (int pass = 0; pass < 2; pass++) {
        tth_strbuf_printf(src, "int32_t %s(", gsym);
        for (size_t i = 0; i < nin + nres; i++) {
            const tth_ttype *t = i < nin ? &fn->params[i]->type.tensor : result_type(fn, i - nin);
            tth_strbuf_printf(src, i < nin ? "const %s *in%zu, " : "%s *out%zu, ", ctype(t->dtype), i);
        }
        tth_strbuf_printf(src, "uint8_t *ws)%s", pass ? "\n{\n" : ";\n\n");
    }
    tth_strbuf_printf(src, "    const void *in[%zu];\n    void *out[%zu];\n", nin ? nin : 1, nres);
    tth_strbuf_printf(src, "    static const size_t in_bytes[%zu] = {", nin ? nin : 1);
    for (size_t i = 0; i < nin; i++)
        tth_strbuf_printf(src, "%s%" PRId64, i ? ", " : "", tensor_bytes(&fn->params[i]->type.tensor));
    tth_strbuf_printf(src, "%s};\n    static const size_t out_bytes[%zu] = {", nin ? "" : "0", nres);
    for (size_t k = 0; k < nres; k++)
        tth_strbuf_printf(src, "%s%" PRId64, k ? ", " : "", tensor_bytes(result_type(fn, k)));
    tth_strbuf_printf(src, "};\n");
    for (size_t i = 0; i < nin; i++)
        tth_strbuf_printf(src, "    in[%zu] = in%zu;\n", i, i);
    for (size_t k = 0; k < nres; k++)
        tth_strbuf_printf(src, "    out[%zu] = out%zu;\n", k, nin + k);
    tth_strbuf_printf(src, "    ethosn_model_io io = {in, in_bytes, %zu, out, out_bytes, %zu, %s_const_data, %s_const_bytes, %u, "
              "NULL, 0};\n"
              "    (void)ws;\n"
              "    if (!%s_bound)\n        return ETHOSN_MODEL_E_UNBOUND;\n"
              "    return ethosn_model_run(%s_network, sizeof %s_network, &io, NULL, 0);\n}\n\n",
         nin, nres, gsym, gsym, (unsigned)nconsts, gsym, gsym, gsym);
    tth_strbuf_printf(src,
         "/* data[i], bytes[i]: constant i of the network (%u in all); NULL and 0 for the ones it holds\n"
         " * inline. The data must stay valid while the region runs. */\n"
         "int32_t %s" TTH_BIND_SYM_CONSTANTS "(const void *const *data, const size_t *bytes, size_t n)\n{\n"
         "    int32_t rc = ethosn_model_check_constants(%s_network, sizeof %s_network, data, bytes, n, NULL, 0);\n"
         "    if (rc)\n        return rc;\n"
         "    for (size_t i = 0; i < n; i++) {\n"
         "        %s_const_data[i] = data[i];\n        %s_const_bytes[i] = bytes[i];\n    }\n"
         "    %s_bound = 1;\n    return 0;\n}\n\n",
         (unsigned)nconsts, gsym, gsym, gsym, gsym, gsym, gsym);
    tth_strbuf_printf(src,
         "/* params: the bytes of the artifact's parameters/<model>.params, kept valid while the region\n"
         " * runs (the constants are used in place). */\n"
         "int32_t %s" TTH_BIND_SYM_PARAMETERS "(const void *params, size_t len)\n{\n"
         "    const void *data[%zu];\n    size_t bytes[%zu];\n"
         "    int32_t rc = ethosn_model_find_constants(%s_network, sizeof %s_network, params, len, \"ethos-n.\", data, "
         "bytes,\n                                             %u, NULL, 0);\n"
         "    return rc ? rc : %s" TTH_BIND_SYM_CONSTANTS "(data, bytes, %u);\n}\n",
         gsym, nc, nc, gsym, gsym, (unsigned)nconsts, gsym, (unsigned)nconsts);
}

/* The module meta's bind_constants (docs/artifact.md, "Constants bound at run time"). */
static json_t *bind_meta(const region *r, const char *gsym)
{
    json_t *list = json_array();
    for (int64_t i = 0; i < r->n; i++) {
        const tth_rexpr *e = r->nodes[i];
        if (e->kind != TTH_REXPR_CONST || !external_const(e->u.constant.value))
            continue;
        const tth_tensor *t = e->u.constant.value;
        char name[300], cn[256];
        const_name(cn, sizeof cn, gsym, r->const_of[e->id]);
        snprintf(name, sizeof name, "ethos-n.%s", cn);
        json_t *shape = json_array();
        for (int d = 0; d < t->type.rank; d++)
            json_array_append_new(shape, json_integer(t->type.shape[d]));
        json_array_append_new(list, json_pack("{s:I, s:s, s:s, s:o, s:I}", "index", (json_int_t)r->const_of[e->id],
                                              "parameter", name, "dtype", tth_dtype_name(t->type.dtype), "shape",
                                              shape, "bytes", (json_int_t)t->nbytes));
    }
    char sym[300], psym[300];
    snprintf(sym, sizeof sym, "%s" TTH_BIND_SYM_CONSTANTS, gsym);
    snprintf(psym, sizeof psym, "%s" TTH_BIND_SYM_PARAMETERS, gsym);
    return json_pack("{s:s, s:s, s:I, s:o, s:I}", "symbol", sym, "parameters_symbol", psym, "count",
                     (json_int_t)r->nconsts, "constants", list, "unbound_status", (json_int_t)ETHOSN_MODEL_E_UNBOUND);
}

TTH_PLUGIN_EXPORT int tth_relay_to_runtime(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                           const char *global_symbol, tth_runtime_module *out, tth_diag *diag)
{
    (void)host;
    if (!fn || !global_symbol || !out)
        return tth_diag_set(diag, TTH_EINVAL, "ethos-n relay_to_runtime", "no function, symbol or module given");
    config c;
    int rc = config_of(target, &c, diag);
    if (rc)
        return rc;
    region r;
    rc = region_load(fn, &r);
    if (rc) {
        region_free(&r);
        return tth_diag_set(diag, TTH_ENOMEM, "ethos-n relay_to_runtime", "out of memory");
    }
    char note[256];
    snprintf(note, sizeof note, "compiled for Ethos-N78 %" PRId64 "TOPS (PLE ratio %" PRId64 ", %" PRId64 " KiB SRAM)",
             c.tops, c.ple_ratio, c.sram_kib);
    wbuf b = {0};
    tth_strbuf src = {0};
    write_blob(&b, fn, &r, global_symbol, &c, note);
    json_t *explain = json_array(), *meta = NULL;
    char blob_name[256], c_name[256], why[512] = "";
    snprintf(blob_name, sizeof blob_name, "%s.ethosn", global_symbol);
    snprintf(c_name, sizeof c_name, "%s_ethosn.c", global_symbol);
    if (b.bytes.failed || !explain) {
        rc = tth_diag_set(diag, TTH_ENOMEM, "ethos-n relay_to_runtime", "out of memory");
        goto done;
    }
    if (b.bad_attr) {
        rc = tth_diag_set(diag, TTH_EUNSUPPORTED, "ethos-n relay_to_runtime", "attribute '%s' of a call in region "
                          "'%s' has a value the network format cannot hold (FORMAT.md, \"Attributes\")", b.bad_attr,
                          global_symbol);
        goto done;
    }
    /* the functional model must be able to run what was written */
    int32_t st = ethosn_model_check(b.bytes.s, b.bytes.n, NULL, why, sizeof why);
    if (st) {
        rc = tth_diag_set(diag, st == ETHOSN_MODEL_E_UNSUPPORTED ? TTH_EUNSUPPORTED : TTH_EINTERNAL,
                          "ethos-n relay_to_runtime", "region '%s' cannot run on the Ethos-N78 functional model: %s",
                          global_symbol, why);
        goto done;
    }
    int nexternal = 0;
    for (int64_t i = 0; i < r.n; i++)
        nexternal += r.nodes[i]->kind == TTH_REXPR_CONST && external_const(r.nodes[i]->u.constant.value);
    write_entry(&src, fn, global_symbol, blob_name, note, &b, r.nconsts, nexternal);
    json_t *perf = estimate(&r, &c, global_symbol, explain);
    meta = json_pack("{s:s, s:[s,s], s:[s], s:{s:s,s:I,s:I,s:I,s:s,s:i,s:s,s:o}, s:o, s:s, s:O}", "language", "c99",
                     "sources", c_name, ETHOSN_MODEL_C_NAME, "entry_symbols", global_symbol, "ethos-n", "variant", c.variant,
                     "tops", (json_int_t)c.tops, "ple_ratio", (json_int_t)c.ple_ratio, "sram_size",
                     (json_int_t)c.sram_kib, "network", blob_name, "format_version", (int)ETHOSN_BLOB_VERSION, "note",
                     note, "performance", perf, "bind_constants", bind_meta(&r, global_symbol),
                     "status_text_symbol", "ethosn_model_status_text", "explain", explain);
    if (src.failed || !meta) {
        rc = tth_diag_set(diag, TTH_ENOMEM, "ethos-n relay_to_runtime", "out of memory");
        goto done;
    }
    if ((rc = tth_runtime_module_add_file(out, blob_name, TTH_FILE_BLOB, b.bytes.s, b.bytes.n, diag)) ||
        (rc = tth_runtime_module_add_file(out, c_name, TTH_FILE_C_SOURCE, src.s, src.n, diag)) ||
        (rc = tth_runtime_module_add_file(out, ETHOSN_MODEL_C_NAME, TTH_FILE_C_SOURCE, ethosn_model_c_text,
                                          ethosn_model_c_size, diag)) ||
        (rc = tth_runtime_module_add_file(out, ETHOSN_MODEL_H_NAME, TTH_FILE_C_HEADER, ethosn_model_h_text,
                                          ethosn_model_h_size, diag)))
        goto done;
    rc = tth_runtime_module_set_meta(out, meta, diag);
done:
    region_free(&r);
    json_decref(meta);
    json_decref(explain);
    tth_strbuf_free(&b.bytes);
    tth_strbuf_free(&src);
    return rc;
}

TTH_PLUGIN_EXPORT int tth_constant_updater(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                           const char *global_symbol, tth_const_map *out, tth_diag *diag)
{
    (void)host;
    (void)target;
    if (!fn || !global_symbol || !out)
        return tth_diag_set(diag, TTH_EINVAL, "ethos-n constant_updater", "no function, symbol or map given");
    region r;
    int rc = region_load(fn, &r);
    if (rc) {
        region_free(&r);
        return tth_diag_set(diag, TTH_ENOMEM, "ethos-n constant_updater", "out of memory");
    }
    for (int64_t i = 0; i < r.n && !rc; i++) {
        const tth_rexpr *e = r.nodes[i];
        if (e->kind != TTH_REXPR_CONST || !external_const(e->u.constant.value))
            continue;
        char name[256];
        const_name(name, sizeof name, global_symbol, r.const_of[e->id]);
        rc = tth_const_map_add(out, name, e->u.constant.value, diag);
    }
    region_free(&r);
    return rc;
}
