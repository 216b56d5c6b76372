/* network.c: the ethos-n kind's partition_supports, relay_to_runtime and constant_updater hooks.
 *
 * There is no Ethos-N driver stack (and no NPU) here, so relay_to_runtime does not pretend to
 * compile a command stream. It writes what can honestly be produced: a serialized, versioned,
 * deterministic description of the compiled network (FORMAT.md: operators in dependency order,
 * shapes, quantization, references to the constants, and the N78 configuration from the target),
 * as a TTH_FILE_BLOB, plus a C source defining `<global_symbol>` with tth's PrimFunc C ABI that
 * returns ETHOSN_RUNTIME_NO_DRIVER at run time: it never computes anything on the CPU. Constants
 * of more than one element (weights, biases, per-channel scales) are not in the blob: the blob
 * names them and constant_updater hands them to the host, stored with the parameters.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <tth/artifact.h>
#include <tth/plugin.h>
#include <tth/relay.h>

#include "../cmsisnn/graph.h"
#include "ethosn.h"

TTH_PLUGIN_EXPORT int tth_partition_supports(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                             const tth_rexpr *call, char *why, size_t why_len)
{
    (void)host;
    (void)target;
    if (!fn || !call || call->kind != TTH_REXPR_CALL)
        return TTH_EINVAL;
    return ethosn_supports(fn, call, why, why_len);
}

/* The ethos-n member of a (possibly composite) target. */
static const json_t *member(const json_t *target)
{
    const char *kind = json_string_value(json_object_get(target, "kind"));
    if (kind && strcmp(kind, "composite") == 0) {
        json_t *ts = json_object_get(target, "targets");
        for (size_t i = 0; i < json_array_size(ts); i++) {
            const char *k = json_string_value(json_object_get(json_array_get(ts, i), "kind"));
            if (k && strcmp(k, "ethos-n") == 0)
                return json_array_get(ts, i);
        }
    }
    return target;
}

typedef struct config {
    const char *variant;
    int64_t tops, ple_ratio, sram_kib;
} config;

static int config_of(const json_t *target, config *c, tth_diag *diag)
{
    const json_t *t = member(target);
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
    uint8_t *p;
    size_t len, cap;
    int oom;
} wbuf;

static void put(wbuf *b, const void *d, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
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
            char *attrs = json_dumps(e->u.call.attrs, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
            if (!attrs)
                b->oom = 1;
            put_str(b, attrs);
            free(attrs);
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
    /* the entry takes the inputs, then one buffer per result tensor (each field of a tuple) */
    size_t nbuf = fn->nparams + (fn->body->type.nfields >= 0 ? (size_t)fn->body->type.nfields : 1);
    region r;
    rc = region_load(fn, &r);
    if (rc) {
        region_free(&r);
        return tth_diag_set(diag, TTH_ENOMEM, "ethos-n relay_to_runtime", "out of memory");
    }
    char note[256];
    snprintf(note, sizeof note, "compiled for Ethos-N78 %" PRId64 "TOPS (PLE ratio %" PRId64 ", %" PRId64
             " KiB SRAM); runs only with the Ethos-N driver", c.tops, c.ple_ratio, c.sram_kib);
    wbuf b = {0};
    write_blob(&b, fn, &r, global_symbol, &c, note);
    region_free(&r);
    char blob_name[256], c_name[256];
    snprintf(blob_name, sizeof blob_name, "%s.ethosn", global_symbol);
    snprintf(c_name, sizeof c_name, "%s_ethosn.c", global_symbol);
    /* the C entry: tth's PrimFunc ABI (inputs, output, workspace), no computation */
    wbuf src = {0};
    char line[2048];
    snprintf(line, sizeof line,
             "/* %s: the Arm Ethos-N78 region '%s', %s.\n"
             " * The network description is %s (tth-ethosn-network v%u, see plugins/ethosn/FORMAT.md);\n"
             " * the Ethos-N driver stack turns it into a command stream and runs it. This build has no\n"
             " * Ethos-N driver, so calling this function computes nothing and returns %d\n"
             " * (TTH_EUNSUPPORTED: no Ethos-N driver). */\n#include <stdint.h>\n\n#define %s_NO_DRIVER (%d)\n\n",
             c_name, global_symbol, note, blob_name, ETHOSN_BLOB_VERSION, ETHOSN_RUNTIME_NO_DRIVER, global_symbol,
             ETHOSN_RUNTIME_NO_DRIVER);
    put(&src, line, strlen(line));
    for (int pass = 0; pass < 2; pass++) {
        snprintf(line, sizeof line, "int32_t %s(", global_symbol);
        put(&src, line, strlen(line));
        for (size_t i = 0; i < nbuf; i++) {
            snprintf(line, sizeof line, i >= fn->nparams ? "void *out%zu, " : "const void *in%zu, ", i);
            put(&src, line, strlen(line));
        }
        snprintf(line, sizeof line, "uint8_t *ws)%s", pass ? "\n{\n" : ";\n\n");
        put(&src, line, strlen(line));
    }
    for (size_t i = 0; i < nbuf; i++) {
        snprintf(line, sizeof line, "    (void)%s%zu;\n", i >= fn->nparams ? "out" : "in", i);
        put(&src, line, strlen(line));
    }
    snprintf(line, sizeof line, "    (void)ws;\n    return %s_NO_DRIVER;\n}\n", global_symbol);
    put(&src, line, strlen(line));
    if (b.oom || src.oom) {
        rc = tth_diag_set(diag, TTH_ENOMEM, "ethos-n relay_to_runtime", "out of memory");
    } else {
        rc = tth_runtime_module_add_file(out, blob_name, TTH_FILE_BLOB, b.p, b.len, diag);
        if (!rc)
            rc = tth_runtime_module_add_file(out, c_name, TTH_FILE_C_SOURCE, src.p, src.len, diag);
    }
    if (!rc) {
        json_t *meta = json_pack("{s:s,s:[s],s:[s],s:{s:s,s:I,s:I,s:I,s:s,s:i,s:s,s:i}}", "language", "c99",
                                 "sources", c_name, "entry_symbols", global_symbol, "ethos-n", "variant", c.variant,
                                 "tops", (json_int_t)c.tops, "ple_ratio", (json_int_t)c.ple_ratio, "sram_size",
                                 (json_int_t)c.sram_kib, "network", blob_name, "format_version",
                                 (int)ETHOSN_BLOB_VERSION, "note", note, "runtime_error", ETHOSN_RUNTIME_NO_DRIVER);
        rc = meta ? tth_runtime_module_set_meta(out, meta, diag)
                  : tth_diag_set(diag, TTH_ENOMEM, "ethos-n relay_to_runtime", "out of memory");
        json_decref(meta);
    }
    free(b.p);
    free(src.p);
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
