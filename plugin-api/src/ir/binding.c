/* binding.c: constants bound at run time (docs/artifact.md, "Constants bound at run time"), the
 * part a code generator shares: the C source that binds them (runtime/bind/tth_bind.c with the
 * module's names and its table of constants in front) and the module meta that tells the
 * runtime, the header and the CMake file about it. The llvm and c kinds use both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tth/artifact.h"
#include "tth/tir.h"
#include "tth_bind_src.h"
#include "tth/strbuf.h"

/* A C string literal of s: bytes other than letters, digits, '_' and '.' as octal escapes. */
static void put_c_string(tth_strbuf *b, const char *s)
{
    tth_strbuf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.')
            tth_strbuf_putc(b, (char)*p);
        else
            tth_strbuf_printf(b, "\\%03o", *p);
    }
    tth_strbuf_putc(b, '"');
}

/* Slot k is a derived constant (docs/artifact.md, "Derived constants") when its source has a slot
 * too: the binding source computes it from that slot; else it is read from the parameters file
 * like any other. *from: the source's slot. */
static int derived_slot(const tth_tbuffer *const *bound, size_t n, size_t k, size_t *from)
{
    const tth_tbuffer *src = bound[k]->derive ? bound[k]->derive_from : NULL;
    for (size_t j = 0; src && j < n; j++)
        if (bound[j] == src) {
            *from = j;
            return 1;
        }
    return 0;
}

size_t tth_binding_derived(const tth_tbuffer *const *bound, size_t n, size_t *fields, size_t *store_bytes)
{
    size_t nd = 0, off = 0, from;
    for (size_t k = 0; k < n; k++)
        if (derived_slot(bound, n, k, &from)) {
            if (fields) {
                size_t *f = fields + nd * TTH_BIND_DERIVED_FIELDS;
                f[0] = k, f[1] = from, f[2] = TTH_BIND_DERIVE_WINOGRAD_F4X4_3X3;
                f[3] = (size_t)bound[from]->shape[0], f[4] = (size_t)bound[from]->shape[1], f[5] = off;
            }
            nd++;
            off += (tth_tbuffer_nbytes(bound[k]) + 63) / 64 * 64;
        }
    if (store_bytes)
        *store_bytes = off;
    return nd;
}

/* The binding source's table of derived constants (tth_binding_derived), 0 when out of memory. */
static int put_derived(tth_strbuf *b, const tth_tbuffer *const *bound, size_t n)
{
    size_t bytes, nd = tth_binding_derived(bound, n, NULL, &bytes);
    tth_strbuf_printf(b, "#define TTH_BIND_NDERIVED %zu\n#define TTH_BIND_DERIVED_BYTES %zu\n", nd, bytes);
    if (!nd)
        return 1;
    size_t *f = malloc(nd * TTH_BIND_DERIVED_FIELDS * sizeof *f);
    if (!f)
        return 0;
    tth_binding_derived(bound, n, f, NULL);
    tth_strbuf_printf(b, "static const size_t tth_bind_derived[%zu] = {\n", nd * TTH_BIND_DERIVED_FIELDS);
    for (size_t d = 0; d < nd; d++) {
        const size_t *e = f + d * TTH_BIND_DERIVED_FIELDS;
        tth_strbuf_printf(b, "    %zu, %zu, %zu, %zu, %zu, %zu,\n", e[0], e[1], e[2], e[3], e[4], e[5]);
    }
    tth_strbuf_puts(b, "};\n");
    free(f);
    return 1;
}

int tth_runtime_module_add_binding(tth_runtime_module *out, const char *model, const char *prefix,
                                   const tth_tbuffer *const *bound, const unsigned *align, size_t n,
                                   int32_t unbound_status, tth_diag *diag)
{
    if (!out || !model || !prefix || !bound || !align || n == 0)
        return tth_diag_set(diag, TTH_EINVAL, "binding", "no module, names or constants to bind");
    tth_strbuf b = {0};
    const char *p = prefix;
    tth_strbuf_printf(&b, "#define TTH_BIND_SLOTS %s" TTH_BIND_SYM_SLOTS "\n#define TTH_BIND_FLAG %s" TTH_BIND_SYM_FLAG "\n"
                   "#define TTH_BIND_CONSTANTS %s" TTH_BIND_SYM_CONSTANTS "\n"
                   "#define TTH_BIND_PARAMETERS %s" TTH_BIND_SYM_PARAMETERS "\n"
                   "#define TTH_BIND_STATUS_TEXT %s" TTH_BIND_SYM_STATUS_TEXT "\n"
                   "#define TTH_BIND_ENSURE %s" TTH_BIND_SYM_ENSURE "\n",
                   p, p, p, p, p, p);
    tth_strbuf_printf(&b, "#define TTH_BIND_BLOB tth_%s_parameters\n#define TTH_BIND_BLOB_END tth_%s_parameters_end\n"
                   "#define TTH_BIND_COUNT %zu\n#define TTH_BIND_UNBOUND (%d)\n#include <stddef.h>\n"
                   "static const char *const tth_bind_names[%zu] = {\n",
                   model, model, n, (int)unbound_status, n);
    size_t from;
    for (size_t k = 0; k < n; k++) {
        tth_strbuf_puts(&b, "    ");
        if (derived_slot(bound, n, k, &from))
            tth_strbuf_puts(&b, "0 /* derived */");
        else
            put_c_string(&b, bound[k]->name);
        tth_strbuf_puts(&b, ",\n");
    }
    tth_strbuf_printf(&b, "};\nstatic const size_t tth_bind_bytes[%zu] = {", n);
    for (size_t k = 0; k < n; k++)
        tth_strbuf_printf(&b, "%s%zu", k == 0 ? "\n    " : k % 8 ? ", " : ",\n    ", tth_tbuffer_nbytes(bound[k]));
    tth_strbuf_printf(&b, "\n};\nstatic const size_t tth_bind_align[%zu] = {", n);
    for (size_t k = 0; k < n; k++)
        tth_strbuf_printf(&b, "%s%u", k == 0 ? "\n    " : k % 16 ? ", " : ",\n    ", align[k]);
    tth_strbuf_puts(&b, "\n};\n");
    int ok = put_derived(&b, bound, n);
    tth_strbuf_puts(&b, tth_bind_src);
    char *text = tth_strbuf_finish(&b);
    if (!ok) {
        free(text);
        text = NULL;
    }
    if (!text)
        return tth_diag_set(diag, TTH_ENOMEM, "binding", "out of memory");
    char name[256];
    snprintf(name, sizeof name, "%s_bind.c", model);
    int rc = tth_runtime_module_add_file(out, name, TTH_FILE_C_SOURCE, text, strlen(text), diag);
    free(text);
    return rc;
}

json_t *tth_binding_meta(const char *prefix, const char *model, const tth_tbuffer *const *bound, size_t n,
                         int32_t unbound_status)
{
    json_t *list = json_array(), *derived = json_array();
    for (size_t k = 0; list && derived && k < n; k++) {
        const tth_tbuffer *b = bound[k];
        json_t *shape = json_array();
        for (int32_t d = 0; shape && d < b->rank; d++)
            json_array_append_new(shape, json_integer(b->shape[d]));
        size_t from;
        if (derived_slot(bound, n, k, &from))
            json_array_append_new(derived, json_pack("{s:I, s:s, s:s, s:s, s:o*, s:I}", "index", (json_int_t)k,
                                                     "parameter", b->name, "transform", b->derive, "from",
                                                     bound[from]->name, "shape", shape, "bytes",
                                                     (json_int_t)tth_tbuffer_nbytes(b)));
        else
            json_array_append_new(list, json_pack("{s:I, s:s, s:s, s:o*, s:I}", "index", (json_int_t)k, "parameter",
                                                  b->name, "dtype", tth_dtype_name(b->dtype), "shape", shape,
                                                  "bytes", (json_int_t)tth_tbuffer_nbytes(b)));
    }
    char sym[300], psym[300], blob[300];
    snprintf(sym, sizeof sym, "%s" TTH_BIND_SYM_CONSTANTS, prefix);
    snprintf(psym, sizeof psym, "%s" TTH_BIND_SYM_PARAMETERS, prefix);
    snprintf(blob, sizeof blob, "tth_%s_parameters", model);
    json_t *meta = json_pack("{s:s, s:s, s:s, s:I, s:o*, s:I}", "symbol", sym, "parameters_symbol", psym,
                             "blob_symbol", blob, "count", (json_int_t)n, "constants", list, "unbound_status",
                             (json_int_t)unbound_status);
    if (meta && json_array_size(derived))
        json_object_set(meta, "derived", derived);
    json_decref(derived);
    return meta;
}
