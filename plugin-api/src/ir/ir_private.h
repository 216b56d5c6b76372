/* ir_private.h: what the IR's source files share and nobody else sees: the private halves of the
 * module structs, a growable text buffer, and small vector helpers. */
#ifndef TTH_IR_PRIVATE_H
#define TTH_IR_PRIVATE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/ir_common.h"
#include "tth/relay.h"
#include "tth/tir.h"

/* A growable array of pointers (malloc'd, not arena: it is freed or released one by one). */
typedef struct tth__ptrvec {
    void **items;
    size_t n, cap;
} tth__ptrvec;

int tth__ptrvec_push(tth__ptrvec *v, void *p); /* 0 or TTH_ENOMEM */
void tth__ptrvec_free(tth__ptrvec *v);
/* The malloc'd array items (n used of *cap, elem bytes each) with room for one more: items
 * itself, or moved with *cap doubled (from 8); NULL when out of memory (items is kept). */
void *tth__grow(void *items, size_t n, size_t *cap, size_t elem);
/* Free a tth_tensor_new tensor's data (however it was allocated) and leave it empty: data NULL,
 * nbytes 0 (common.c). */
void tth__tensor_drop_data(tth_tensor *t);

/* What both IR modules own beside their arena and functions. */
typedef struct tth__module_own {
    tth__ptrvec jsons;       /* json_t references to release */
    tth__ptrvec tensors;     /* tensor references to release */
    size_t funcs_cap;        /* capacity of the public funcs array (malloc'd) */
} tth__module_own;

/* Free a module: release own's references (json_decref, tth_tensor_unref), then free funcs, the
 * arena and the private struct pm: what every IR module does when freed. */
void tth__module_free(void *pm, tth__module_own *own, void *funcs, tth_arena *arena);

/* The two functions each IR module has over its public funcs array, written once for both
 * (module_t: tth_relay_module or tth_tir_module; func_t: its function type, named by `name`):
 * the public `find` (the function called name, or NULL) and a static `push` (append: 0 or
 * TTH_ENOMEM). own: the expression giving the module's tth__module_own. */
#define TTH__MODULE_FUNCS(module_t, func_t, find, push, own)                                   \
    func_t *find(const module_t *m, const char *name)                                         \
    {                                                                                           \
        if (!m || !name)                                                                        \
            return NULL;                                                                        \
        for (size_t i = 0; i < m->nfuncs; i++)                                                  \
            if (strcmp(m->funcs[i]->name, name) == 0)                                           \
                return m->funcs[i];                                                             \
        return NULL;                                                                            \
    }                                                                                           \
    static int push(module_t *m, func_t *f)                                                     \
    {                                                                                           \
        func_t **funcs = tth__grow(m->funcs, m->nfuncs, &(own)->funcs_cap, sizeof *funcs);      \
        if (!funcs)                                                                             \
            return TTH_ENOMEM;                                                                  \
        m->funcs = funcs;                                                                       \
        m->funcs[m->nfuncs++] = f;                                                              \
        return 0;                                                                               \
    }

/* Refuse to add a function: release its attributes (a stolen reference), set diag; NULL. */
void *tth__refuse_func(json_t *attrs, tth_diag *diag, int code, const char *loc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A new function's attributes (stolen; NULL for {}), kept in own until the module is freed;
 * NULL with diag set when they are not an object (`what` names the function: "PrimFunc") or
 * memory ran out. */
json_t *tth__keep_attrs(tth__module_own *own, json_t *attrs, const char *what, const char *loc, tth_diag *diag);

/* The module's private bookkeeping: the public struct comes first, so the module pointer is
 * also a pointer to this. */
typedef struct tth__relay_module {
    tth_relay_module pub;
    uint32_t next_id;        /* ids handed out so far */
    const char *span;        /* span of nodes built now (arena), or NULL */
    tth__module_own own;
} tth__relay_module;

/* Every Relay node carries a private header before the public struct: its owner. */
typedef struct tth__rnode {
    const tth_relay_module *owner;
    tth_rexpr pub;
} tth__rnode;

#define TTH__RNODE(e) ((tth__rnode *)((char *)(e) - offsetof(tth__rnode, pub)))

static inline tth__relay_module *tth__rmod(const tth_relay_module *m)
{
    return (tth__relay_module *)m;
}

/* Keep a json_t reference until the module is freed (steals it; on failure releases it). */
int tth__relay_keep_json(tth_relay_module *m, json_t *j);

/* The op relation as run by the builder: attrs may be completed with defaults (fill). */
int tth__relay_infer_fill(tth_op op, const tth_rtype *const *arg_types, size_t nargs, json_t *fill,
                          const json_t *attrs, tth_rtype *out, tth_arena *arena, const char *location,
                          tth_diag *diag);

/* Post-order walk of the nodes reachable from root, each once (iterative: deep graphs are fine).
 * state: caller's zeroed array of m's next_id bytes; nodes already marked 2 are skipped (used to
 * leave parameters out, or to share one walk over several roots). *out: malloc'd array of the
 * newly visited nodes (caller frees). Returns their count, TTH_EINVAL on a cycle or a node of
 * another module, TTH_ENOMEM. */
int64_t tth__relay_walk(const tth_relay_module *m, const tth_rexpr *root, uint8_t *state, tth_rexpr ***out);

int tth__rtype_equal(const tth_rtype *a, const tth_rtype *b);

/* "float32[1, 2]" or "(float32[1], int64[])" into buf. */
size_t tth__rtype_format(const tth_rtype *t, char *buf, size_t len);

/* The TIR module's private half. */
typedef struct tth__tir_module {
    tth_tir_module pub;
    uint32_t next_buf_id, next_var_id;
    tth__module_own own;
    int is_view;             /* made by tth_tir_module_subset: nodes belong to the parent */
} tth__tir_module;

static inline tth__tir_module *tth__tmod(const tth_tir_module *m)
{
    return (tth__tir_module *)m;
}

#include "tth/strbuf.h"

/* Render a ttype/rtype into a sbuf. */
void tth__sb_ttype(tth_strbuf *b, const tth_ttype *t);
void tth__sb_rtype(tth_strbuf *b, const tth_rtype *t);

/* JSON for a ttype: {"dtype": "float32", "shape": [..]}; parse back (0 or TTH_EINVAL). */
json_t *tth__ttype_to_json(const tth_ttype *t);
int tth__ttype_from_json(const json_t *j, tth_ttype *t);

/* The product of a shape's dimensions (1 for rank 0). */
int64_t tth__shape_numel(int32_t rank, const int64_t *shape);

/* A C identifier: [A-Za-z_][A-Za-z0-9_]*. */
int tth__is_c_ident(const char *s);

#endif
