/* relay_text.c: the Relay verifier, printer and JSON form (to and from). */
#include "ir_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared: a function's nodes in order, and local names ---- */

typedef struct fn_nodes {
    tth_rexpr **order;   /* malloc'd: params first, then producers before users */
    int64_t n;
    int64_t *local;      /* by node id: printer number (%N or @cN), -1 for none */
} fn_nodes;

static void fn_nodes_free(fn_nodes *fnn)
{
    free(fnn->order);
    free(fnn->local);
}

/* Order a function's nodes; 0, TTH_EINVAL (cycle or foreign node) or TTH_ENOMEM. */
static int fn_nodes_get(const tth_relay_function *fn, fn_nodes *out)
{
    memset(out, 0, sizeof *out);
    const tth_relay_module *m = fn->module;
    uint32_t limit = tth__rmod(m)->next_id;
    uint8_t *state = calloc(limit ? limit : 1, 1);
    if (!state)
        return TTH_ENOMEM;
    for (size_t i = 0; i < fn->nparams; i++) {
        const tth_rexpr *p = fn->params[i];
        if (!p || TTH__RNODE(p)->owner != m || p->id >= limit) {
            free(state);
            return TTH_EINVAL;
        }
        state[p->id] = 2;
    }
    tth_rexpr **order;
    int64_t n = tth__relay_walk(m, fn->body, state, &order);
    free(state);
    if (n < 0)
        return (int)n;
    out->order = malloc(((size_t)n + fn->nparams + 1) * sizeof *out->order);
    out->local = malloc((limit ? limit : 1) * sizeof *out->local);
    if (!out->order || !out->local) {
        free(order);
        fn_nodes_free(out);
        return TTH_ENOMEM;
    }
    for (size_t i = 0; i < fn->nparams; i++)
        out->order[i] = fn->params[i];
    memcpy(out->order + fn->nparams, order, (size_t)n * sizeof *order);
    free(order);
    out->n = n + (int64_t)fn->nparams;
    for (uint32_t i = 0; i < limit; i++)
        out->local[i] = -1;
    int64_t nexpr = 0, nconst = 0;
    for (int64_t i = 0; i < out->n; i++) {
        const tth_rexpr *e = out->order[i];
        if (e->kind == TTH_REXPR_CONST)
            out->local[e->id] = nconst++;
        else if (e->kind != TTH_REXPR_VAR)
            out->local[e->id] = nexpr++;
    }
    return 0;
}

/* ---- verifier ---- */

static int fn_index(const tth_relay_module *m, const tth_relay_function *f)
{
    for (size_t i = 0; i < m->nfuncs; i++)
        if (m->funcs[i] == f)
            return (int)i;
    return -1;
}

static int verify_node(const tth_relay_module *m, const tth_relay_function *fn, const tth_rexpr *e,
                       tth_arena *scratch, tth_diag *diag)
{
    char loc[TTH_DIAG_LOCATION_MAX], want[200], got[200];
    const char *what = e->kind == TTH_REXPR_CALL ? (e->u.call.fn ? "call" : tth_op_name(e->u.call.op))
                       : e->kind == TTH_REXPR_CONST ? "constant"
                       : e->kind == TTH_REXPR_TUPLE ? "tuple"
                       : e->kind == TTH_REXPR_TUPLE_GET ? "tuple_get"
                                                         : "var";
    if (e->span)
        snprintf(loc, sizeof loc, "function @%s, node %u '%s' (%s)", fn->name, e->id, e->span, what);
    else
        snprintf(loc, sizeof loc, "function @%s, node %u (%s)", fn->name, e->id, what);
    tth_rtype t = {.nfields = -1};
    switch (e->kind) {
    case TTH_REXPR_VAR:
        return tth_diag_set(diag, TTH_EINVAL, loc, "%%%s is not a parameter of @%s", e->u.var.name, fn->name);
    case TTH_REXPR_CONST:
        if (!e->u.constant.value)
            return tth_diag_set(diag, TTH_EINVAL, loc, "constant without a value");
        t.tensor = e->u.constant.value->type;
        break;
    case TTH_REXPR_CALL:
        if (!e->u.call.fn) {
            if (!json_is_object(e->u.call.attrs))
                return tth_diag_set(diag, TTH_EINVAL, loc, "%s: attributes are not a JSON object",
                                    tth_op_name(e->u.call.op));
            const tth_rtype *small[16];
            const tth_rtype **types = e->u.call.nargs <= 16 ? small : malloc(e->u.call.nargs * sizeof *types);
            if (!types)
                return tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
            for (size_t i = 0; i < e->u.call.nargs; i++)
                types[i] = &e->u.call.args[i]->type;
            int rc = tth__relay_infer_fill(e->u.call.op, types, e->u.call.nargs, NULL, e->u.call.attrs, &t, scratch,
                                           loc, diag);
            if (types != small)
                free(types);
            if (rc)
                return rc;
        } else {
            const tth_relay_function *g = e->u.call.fn;
            if (fn_index(m, g) < 0)
                return tth_diag_set(diag, TTH_EUNKNOWN, loc, "the callee @%s is not a function of the module",
                                    g->name ? g->name : "?");
            if (e->u.call.nargs != g->nparams)
                return tth_diag_set(diag, TTH_ETYPE, loc, "@%s takes %zu arguments, the call passes %zu", g->name,
                                    g->nparams, e->u.call.nargs);
            for (size_t i = 0; i < g->nparams; i++)
                if (!tth__rtype_equal(&e->u.call.args[i]->type, &g->params[i]->type)) {
                    tth__rtype_format(&g->params[i]->type, want, sizeof want);
                    tth__rtype_format(&e->u.call.args[i]->type, got, sizeof got);
                    return tth_diag_set(diag, TTH_ETYPE, loc, "@%s: argument %zu must be %s, got %s", g->name, i,
                                        want, got);
                }
            t = g->body->type;
        }
        break;
    case TTH_REXPR_TUPLE: {
        tth_ttype *fields = tth_arena_alloc(scratch, (e->u.tuple.nfields + 1) * sizeof *fields);
        if (!fields)
            return tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        for (size_t i = 0; i < e->u.tuple.nfields; i++) {
            if (e->u.tuple.fields[i]->type.nfields >= 0)
                return tth_diag_set(diag, TTH_ETYPE, loc, "tuple field %zu is a tuple", i);
            fields[i] = e->u.tuple.fields[i]->type.tensor;
        }
        t.nfields = (int32_t)e->u.tuple.nfields;
        t.fields = fields;
        break;
    }
    case TTH_REXPR_TUPLE_GET: {
        const tth_rtype *tt = &e->u.get.tuple->type;
        if (tt->nfields < 0 || e->u.get.index < 0 || e->u.get.index >= tt->nfields)
            return tth_diag_set(diag, TTH_ETYPE, loc, "index %d does not select a field of the tuple",
                                e->u.get.index);
        t.tensor = tt->fields[e->u.get.index];
        break;
    }
    default:
        return tth_diag_set(diag, TTH_EINVAL, loc, "unknown node kind %d", (int)e->kind);
    }
    if (!tth__rtype_equal(&t, &e->type)) {
        tth__rtype_format(&e->type, got, sizeof got);
        tth__rtype_format(&t, want, sizeof want);
        return tth_diag_set(diag, TTH_ETYPE, loc, "recorded type %s differs from the inferred type %s", got, want);
    }
    return 0;
}

int tth_relay_verify(const tth_relay_module *m, tth_diag *diag)
{
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
    tth_arena *scratch = tth_arena_new();
    if (!scratch)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    int rc = 0;
    for (size_t f = 0; f < m->nfuncs && !rc; f++) {
        const tth_relay_function *fn = m->funcs[f];
        char loc[TTH_DIAG_LOCATION_MAX];
        snprintf(loc, sizeof loc, "function @%s", fn->name ? fn->name : "?");
        if (!fn->name || fn->module != m || !fn->body) {
            rc = tth_diag_set(diag, TTH_EINVAL, loc, "function %zu is incomplete (name, module or body)", f);
            break;
        }
        for (size_t g = 0; g < f; g++)
            if (strcmp(m->funcs[g]->name, fn->name) == 0) {
                rc = tth_diag_set(diag, TTH_EDUPLICATE, loc, "two functions are named @%s", fn->name);
                break;
            }
        if (rc)
            break;
        for (size_t i = 0; i < fn->nparams && !rc; i++)
            if (!fn->params[i] || fn->params[i]->kind != TTH_REXPR_VAR || TTH__RNODE(fn->params[i])->owner != m)
                rc = tth_diag_set(diag, TTH_EINVAL, loc, "parameter %zu is not a var of this module", i);
        if (rc)
            break;
        fn_nodes fnn;
        int wrc = fn_nodes_get(fn, &fnn);
        if (wrc) {
            rc = tth_diag_set(diag, wrc, loc,
                              wrc == TTH_ENOMEM ? "out of memory" : "the body has a cycle or a node of another module");
            break;
        }
        for (int64_t i = (int64_t)fn->nparams; i < fnn.n && !rc; i++)
            rc = verify_node(m, fn, fnn.order[i], scratch, diag);
        fn_nodes_free(&fnn);
    }
    tth_arena_free(scratch);
    return rc;
}

/* ---- printer ---- */

static void sb_json(tth_strbuf *b, const json_t *j)
{
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_REAL_PRECISION(9) | JSON_ENCODE_ANY);
    if (!s) {
        b->failed = 1;
        return;
    }
    tth_strbuf_puts(b, s);
    free(s);
}

/* %name; a name that could be read as a node number (ONNX allows "0") is quoted: %"0". */
static void sb_var(tth_strbuf *b, const char *name)
{
    size_t n = strspn(name, "0123456789");
    if (name[0] == '\0' || name[n] == '\0' || strpbrk(name, " \",(){}"))
        tth_strbuf_printf(b, "%%\"%s\"", name);
    else
        tth_strbuf_printf(b, "%%%s", name);
}

static void sb_ref(tth_strbuf *b, const fn_nodes *fnn, const tth_rexpr *e)
{
    if (e->kind == TTH_REXPR_VAR)
        sb_var(b, e->u.var.name);
    else if (e->kind == TTH_REXPR_CONST)
        tth_strbuf_printf(b, "@c%" PRId64, fnn->local[e->id]);
    else
        tth_strbuf_printf(b, "%%%" PRId64, fnn->local[e->id]);
}

static void print_function(tth_strbuf *b, const tth_relay_function *fn)
{
    fn_nodes fnn;
    if (fn_nodes_get(fn, &fnn) != 0) {
        tth_strbuf_printf(b, "fn @%s <malformed: cycle or foreign node>\n", fn->name);
        return;
    }
    tth_strbuf_printf(b, "fn @%s(", fn->name);
    for (size_t i = 0; i < fn->nparams; i++) {
        tth_strbuf_puts(b, i ? ", " : "");
        sb_var(b, fn->params[i]->u.var.name);
        tth_strbuf_puts(b, ": ");
        tth__sb_rtype(b, &fn->params[i]->type);
    }
    tth_strbuf_puts(b, ") -> ");
    tth__sb_rtype(b, &fn->body->type);
    if (fn->attrs && json_object_size(fn->attrs)) {
        tth_strbuf_puts(b, " attrs=");
        sb_json(b, fn->attrs);
    }
    tth_strbuf_puts(b, " {\n");
    for (int64_t i = (int64_t)fn->nparams; i < fnn.n; i++) {
        const tth_rexpr *e = fnn.order[i];
        tth_strbuf_puts(b, "  ");
        switch (e->kind) {
        case TTH_REXPR_VAR: /* unreachable in a verified module: a free var */
            sb_var(b, e->u.var.name);
            tth_strbuf_puts(b, ": ");
            tth__sb_rtype(b, &e->type);
            tth_strbuf_puts(b, " <free variable>");
            break;
        case TTH_REXPR_CONST: {
            const tth_tensor *t = e->u.constant.value;
            tth_strbuf_printf(b, "@c%" PRId64 ": ", fnn.local[e->id]);
            tth__sb_rtype(b, &e->type);
            tth_strbuf_printf(b, " #%016" PRIx64, tth_tensor_hash(t));
            if (tth_ttype_numel(&t->type) == 1)
                tth_strbuf_printf(b, " = %.9g", tth_tensor_get_f64(t, 0));
            if (e->u.constant.name)
                tth_strbuf_printf(b, " \"%s\"", e->u.constant.name);
            break;
        }
        case TTH_REXPR_CALL:
            sb_ref(b, &fnn, e);
            if (e->u.call.fn)
                tth_strbuf_printf(b, " = @%s(", e->u.call.fn->name);
            else
                tth_strbuf_printf(b, " = %s(", tth_op_name(e->u.call.op));
            for (size_t k = 0; k < e->u.call.nargs; k++) {
                if (k)
                    tth_strbuf_puts(b, ", ");
                sb_ref(b, &fnn, e->u.call.args[k]);
            }
            if (!e->u.call.fn && e->u.call.attrs && json_object_size(e->u.call.attrs)) {
                tth_strbuf_puts(b, e->u.call.nargs ? ", " : "");
                sb_json(b, e->u.call.attrs);
            }
            tth_strbuf_puts(b, ") : ");
            tth__sb_rtype(b, &e->type);
            break;
        case TTH_REXPR_TUPLE:
            sb_ref(b, &fnn, e);
            tth_strbuf_puts(b, " = (");
            for (size_t k = 0; k < e->u.tuple.nfields; k++) {
                if (k)
                    tth_strbuf_puts(b, ", ");
                sb_ref(b, &fnn, e->u.tuple.fields[k]);
            }
            tth_strbuf_puts(b, ") : ");
            tth__sb_rtype(b, &e->type);
            break;
        case TTH_REXPR_TUPLE_GET:
            sb_ref(b, &fnn, e);
            tth_strbuf_puts(b, " = ");
            sb_ref(b, &fnn, e->u.get.tuple);
            tth_strbuf_printf(b, ".%d : ", e->u.get.index);
            tth__sb_rtype(b, &e->type);
            break;
        }
        if (e->span && e->kind != TTH_REXPR_CONST)
            tth_strbuf_printf(b, "  // %s", e->span);
        tth_strbuf_puts(b, "\n");
    }
    tth_strbuf_puts(b, "  ");
    sb_ref(b, &fnn, fn->body);
    tth_strbuf_puts(b, "\n}\n");
    fn_nodes_free(&fnn);
}

char *tth_relay_print_function(const tth_relay_function *fn)
{
    if (!fn || !fn->body)
        return NULL;
    tth_strbuf b = {0};
    print_function(&b, fn);
    return tth_strbuf_finish(&b);
}

char *tth_relay_print(const tth_relay_module *m)
{
    if (!m)
        return NULL;
    tth_strbuf b = {0};
    tth_strbuf_printf(&b, "// module \"%s\"\n", m->name ? m->name : "");
    for (size_t i = 0; i < m->nfuncs; i++) {
        tth_strbuf_puts(&b, "\n");
        print_function(&b, m->funcs[i]);
    }
    return tth_strbuf_finish(&b);
}

/* ---- JSON ---- */

static json_t *rtype_to_json(const tth_rtype *t)
{
    if (t->nfields < 0)
        return tth__ttype_to_json(&t->tensor);
    json_t *fields = json_array();
    for (int32_t i = 0; i < t->nfields; i++)
        json_array_append_new(fields, tth__ttype_to_json(&t->fields[i]));
    return json_pack("{s:o}", "tuple", fields);
}

static const char *kind_name(tth_rexpr_kind k)
{
    switch (k) {
    case TTH_REXPR_VAR: return "var";
    case TTH_REXPR_CONST: return "const";
    case TTH_REXPR_CALL: return "call";
    case TTH_REXPR_TUPLE: return "tuple";
    case TTH_REXPR_TUPLE_GET: return "tuple_get";
    }
    return "?";
}

/* Node ids in JSON are canonical: numbered by first appearance over the functions in order,
 * so the JSON does not depend on how the module was built. */
static json_t *node_to_json(const tth_rexpr *e, const int64_t *canon)
{
    json_t *n = json_pack("{s:I, s:s, s:o}", "id", (json_int_t)canon[e->id], "kind", kind_name(e->kind), "type",
                          rtype_to_json(&e->type));
    if (!n)
        return NULL;
    json_t *args = NULL;
    switch (e->kind) {
    case TTH_REXPR_VAR:
        json_object_set_new(n, "name", json_string(e->u.var.name));
        break;
    case TTH_REXPR_CONST:
        break;
    case TTH_REXPR_CALL:
        if (e->u.call.fn)
            json_object_set_new(n, "fn", json_string(e->u.call.fn->name));
        else {
            json_object_set_new(n, "op", json_string(tth_op_name(e->u.call.op)));
            json_object_set_new(n, "attrs", e->u.call.attrs ? json_deep_copy(e->u.call.attrs) : json_object());
        }
        args = json_array();
        for (size_t i = 0; i < e->u.call.nargs; i++)
            json_array_append_new(args, json_integer(canon[e->u.call.args[i]->id]));
        break;
    case TTH_REXPR_TUPLE:
        args = json_array();
        for (size_t i = 0; i < e->u.tuple.nfields; i++)
            json_array_append_new(args, json_integer(canon[e->u.tuple.fields[i]->id]));
        break;
    case TTH_REXPR_TUPLE_GET:
        args = json_array();
        json_array_append_new(args, json_integer(canon[e->u.get.tuple->id]));
        json_object_set_new(n, "index", json_integer(e->u.get.index));
        break;
    }
    if (args)
        json_object_set_new(n, "args", args);
    if (e->span)
        json_object_set_new(n, "span", json_string(e->span));
    return n;
}

json_t *tth_relay_to_json(const tth_relay_module *m)
{
    if (!m)
        return NULL;
    uint32_t limit = tth__rmod(m)->next_id;
    uint8_t *const_seen = calloc(limit ? limit : 1, 1);
    int64_t *canon = malloc((limit ? limit : 1) * sizeof *canon), next = 0;
    for (uint32_t i = 0; canon && i < limit; i++)
        canon[i] = -1;
    json_t *funcs = json_array(), *consts = json_array();
    json_t *root = json_pack("{s:s, s:o, s:o}", "name", m->name ? m->name : "", "functions", funcs, "constants", consts);
    if (!root || !const_seen || !canon) {
        free(const_seen);
        free(canon);
        json_decref(root);
        return NULL;
    }
    for (size_t f = 0; f < m->nfuncs; f++) {
        const tth_relay_function *fn = m->funcs[f];
        fn_nodes fnn;
        if (fn_nodes_get(fn, &fnn) != 0) {
            free(const_seen);
            free(canon);
            json_decref(root);
            return NULL;
        }
        for (int64_t i = 0; i < fnn.n; i++)
            if (canon[fnn.order[i]->id] < 0)
                canon[fnn.order[i]->id] = next++;
        json_t *params = json_array(), *nodes = json_array();
        for (size_t i = 0; i < fn->nparams; i++)
            json_array_append_new(params, json_integer(canon[fn->params[i]->id]));
        for (int64_t i = 0; i < fnn.n; i++) {
            const tth_rexpr *e = fnn.order[i];
            json_array_append_new(nodes, node_to_json(e, canon));
            if (e->kind == TTH_REXPR_CONST && !const_seen[e->id]) {
                const_seen[e->id] = 1;
                char hash[17];
                snprintf(hash, sizeof hash, "%016" PRIx64, tth_tensor_hash(e->u.constant.value));
                json_t *c = json_pack("{s:I, s:o, s:s}", "id", (json_int_t)canon[e->id], "type",
                                      tth__ttype_to_json(&e->u.constant.value->type), "hash", hash);
                if (c && e->u.constant.name)
                    json_object_set_new(c, "name", json_string(e->u.constant.name));
                json_array_append_new(consts, c);
            }
        }
        json_array_append_new(funcs, json_pack("{s:s, s:O, s:o, s:o, s:I}", "name", fn->name, "attrs",
                                               fn->attrs ? fn->attrs : json_object(), "params", params, "nodes",
                                               nodes, "result", (json_int_t)canon[fn->body->id]));
        fn_nodes_free(&fnn);
    }
    free(const_seen);
    free(canon);
    return root;
}

/* from_json: rebuilds through the builders, so the result is type-checked again. */

typedef struct from_ctx {
    tth_relay_module *m;
    const json_t *funcs;        /* the "functions" array */
    const json_t *consts;       /* the "constants" array */
    tth_tensor *const *tensors;
    uint64_t *hashes;           /* of tensors */
    size_t ntensors;
    tth_rexpr **map;            /* JSON id -> node */
    size_t nmap;
    uint8_t *fstate;            /* per function: 0 not yet visited, 1 being built, 2 built */
    tth_relay_function **built; /* per function */
    tth_diag *diag;
} from_ctx;

static int bad(from_ctx *c, const char *where, const char *what)
{
    return tth_diag_set(c->diag, TTH_EPARSE, where, "Relay JSON: %s", what);
}

static int rtype_from_json(const json_t *j, tth_rtype *t, tth_arena *a)
{
    const json_t *tup = json_object_get(j, "tuple");
    if (tup) {
        if (!json_is_array(tup))
            return TTH_EINVAL;
        size_t n = json_array_size(tup);
        tth_ttype *f = tth_arena_alloc(a, (n + 1) * sizeof *f);
        if (!f)
            return TTH_ENOMEM;
        for (size_t i = 0; i < n; i++)
            if (tth__ttype_from_json(json_array_get(tup, i), &f[i]) != 0)
                return TTH_EINVAL;
        t->nfields = (int32_t)n;
        t->fields = f;
        memset(&t->tensor, 0, sizeof t->tensor);
        return 0;
    }
    t->nfields = -1;
    t->fields = NULL;
    return tth__ttype_from_json(j, &t->tensor);
}

static int build_function(from_ctx *c, size_t fi);

static int find_function(from_ctx *c, const char *name, size_t *out)
{
    for (size_t i = 0; i < json_array_size(c->funcs); i++) {
        const json_t *n = json_object_get(json_array_get(c->funcs, i), "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) {
            *out = i;
            return 0;
        }
    }
    return TTH_ENOENT;
}

static tth_rexpr *lookup(from_ctx *c, const json_t *id)
{
    if (!json_is_integer(id) || json_integer_value(id) < 0 || (size_t)json_integer_value(id) >= c->nmap)
        return NULL;
    return c->map[json_integer_value(id)];
}

static int build_node(from_ctx *c, const char *where, const json_t *n)
{
    const json_t *jid = json_object_get(n, "id");
    const char *kind = json_string_value(json_object_get(n, "kind"));
    if (!json_is_integer(jid) || json_integer_value(jid) < 0 || (size_t)json_integer_value(jid) >= c->nmap || !kind)
        return bad(c, where, "a node needs an integer \"id\" and a \"kind\"");
    size_t id = (size_t)json_integer_value(jid);
    if (c->map[id])
        return 0; /* shared with a function built before */
    tth_rtype want;
    if (rtype_from_json(json_object_get(n, "type"), &want, c->m->arena) != 0)
        return bad(c, where, "a node has a malformed \"type\"");
    const json_t *span = json_object_get(n, "span");
    tth_relay_set_span(c->m, json_is_string(span) ? json_string_value(span) : NULL);
    const json_t *args = json_object_get(n, "args");
    size_t nargs = json_is_array(args) ? json_array_size(args) : 0;
    tth_rexpr *small[16];
    tth_rexpr **a = nargs <= 16 ? small : malloc(nargs * sizeof *a);
    if (!a)
        return tth_diag_set(c->diag, TTH_ENOMEM, where, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < nargs && !rc; i++)
        if (!(a[i] = lookup(c, json_array_get(args, i))))
            rc = bad(c, where, "a node refers to an argument not defined before it");
    tth_rexpr *e = NULL;
    if (rc) {
        /* reported */
    } else if (strcmp(kind, "var") == 0) {
        if (want.nfields >= 0)
            rc = bad(c, where, "a var must have a tensor type");
        else if (!(e = tth_relay_var(c->m, json_string_value(json_object_get(n, "name")), &want.tensor)))
            rc = bad(c, where, "a var has an invalid type");
    } else if (strcmp(kind, "const") == 0) {
        const json_t *entry = NULL;
        for (size_t i = 0; i < json_array_size(c->consts) && !entry; i++) {
            const json_t *ci = json_array_get(c->consts, i);
            if (json_equal(json_object_get(ci, "id"), (json_t *)jid))
                entry = ci;
        }
        const char *hash = entry ? json_string_value(json_object_get(entry, "hash")) : NULL;
        if (!hash) {
            rc = bad(c, where, "a const node has no entry with a \"hash\" in \"constants\"");
        } else {
            uint64_t h = strtoull(hash, NULL, 16);
            size_t k = 0;
            while (k < c->ntensors && c->hashes[k] != h)
                k++;
            if (k == c->ntensors) {
                rc = tth_diag_set(c->diag, TTH_ENOENT, where, "Relay JSON: no constant tensor has hash %s", hash);
            } else {
                e = tth_relay_const(c->m, tth_tensor_ref(c->tensors[k]),
                                    json_string_value(json_object_get(entry, "name")));
                if (!e)
                    rc = tth_diag_set(c->diag, TTH_ENOMEM, where, "out of memory");
            }
        }
    } else if (strcmp(kind, "call") == 0) {
        const json_t *fname = json_object_get(n, "fn");
        if (json_is_string(fname)) {
            size_t fi;
            if (find_function(c, json_string_value(fname), &fi) != 0)
                rc = bad(c, where, "a call names a function that is not in the module");
            else if (!(rc = build_function(c, fi)))
                e = tth_relay_call_fn(c->m, c->built[fi], a, nargs, c->diag);
        } else {
            tth_op op = tth_op_from_name(json_string_value(json_object_get(n, "op")));
            const json_t *attrs = json_object_get(n, "attrs");
            if (op == TTH_OP_INVALID)
                rc = tth_diag_set(c->diag, TTH_EUNKNOWN, where, "Relay JSON: unknown operator '%s'",
                                  json_string_value(json_object_get(n, "op")) ? json_string_value(json_object_get(n, "op")) : "");
            else
                e = tth_relay_call(c->m, op, a, nargs, attrs ? json_deep_copy(attrs) : NULL, c->diag);
        }
        if (!rc && !e)
            rc = c->diag && c->diag->code ? c->diag->code : TTH_ETYPE;
    } else if (strcmp(kind, "tuple") == 0) {
        if (!(e = tth_relay_tuple(c->m, a, nargs, c->diag)))
            rc = c->diag && c->diag->code ? c->diag->code : TTH_ETYPE;
    } else if (strcmp(kind, "tuple_get") == 0) {
        const json_t *idx = json_object_get(n, "index");
        if (nargs != 1 || !json_is_integer(idx))
            rc = bad(c, where, "a tuple_get needs one argument and an \"index\"");
        else if (!(e = tth_relay_tuple_get(c->m, a[0], (int32_t)json_integer_value(idx), c->diag)))
            rc = c->diag && c->diag->code ? c->diag->code : TTH_ETYPE;
    } else {
        rc = bad(c, where, "unknown node kind");
    }
    if (a != small)
        free(a);
    tth_relay_set_span(c->m, NULL);
    if (rc)
        return rc;
    if (!tth__rtype_equal(&e->type, &want)) {
        char got[200], exp[200];
        tth__rtype_format(&e->type, got, sizeof got);
        tth__rtype_format(&want, exp, sizeof exp);
        return tth_diag_set(c->diag, TTH_ETYPE, where, "Relay JSON: node %zu is recorded as %s but infers to %s", id,
                            exp, got);
    }
    c->map[id] = e;
    return 0;
}

static int build_function(from_ctx *c, size_t fi)
{
    if (c->fstate[fi] == 2)
        return 0;
    const json_t *f = json_array_get(c->funcs, fi);
    const char *name = json_string_value(json_object_get(f, "name"));
    char where[TTH_DIAG_LOCATION_MAX];
    snprintf(where, sizeof where, "function @%s", name ? name : "?");
    if (c->fstate[fi] == 1)
        return bad(c, where, "functions call each other in a cycle");
    c->fstate[fi] = 1;
    const json_t *nodes = json_object_get(f, "nodes"), *params = json_object_get(f, "params");
    if (!name || !json_is_array(nodes) || !json_is_array(params))
        return bad(c, where, "a function needs \"name\", \"params\" and \"nodes\"");
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        int rc = build_node(c, where, json_array_get(nodes, i));
        if (rc)
            return rc;
    }
    size_t np = json_array_size(params);
    tth_rexpr **p = malloc((np ? np : 1) * sizeof *p);
    if (!p)
        return tth_diag_set(c->diag, TTH_ENOMEM, where, "out of memory");
    for (size_t i = 0; i < np; i++)
        if (!(p[i] = lookup(c, json_array_get(params, i)))) {
            free(p);
            return bad(c, where, "a parameter id has no node");
        }
    tth_rexpr *body = lookup(c, json_object_get(f, "result"));
    if (!body) {
        free(p);
        return bad(c, where, "the \"result\" id has no node");
    }
    const json_t *attrs = json_object_get(f, "attrs");
    c->built[fi] = tth_relay_function_add(c->m, name, p, np, body, attrs ? json_deep_copy(attrs) : NULL, c->diag);
    free(p);
    if (!c->built[fi])
        return c->diag && c->diag->code ? c->diag->code : TTH_EINVAL;
    c->fstate[fi] = 2;
    return 0;
}

static int scan_max_id(const json_t *arr, const char *key, json_int_t *max)
{
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *id = json_object_get(json_array_get(arr, i), key);
        if (!json_is_integer(id) || json_integer_value(id) < 0)
            return TTH_EINVAL;
        if (json_integer_value(id) > *max)
            *max = json_integer_value(id);
    }
    return 0;
}

tth_relay_module *tth_relay_from_json(const json_t *j, tth_tensor *const *constants, size_t nconstants,
                                      tth_diag *diag)
{
    const json_t *funcs = json_object_get(j, "functions"), *consts = json_object_get(j, "constants");
    if (!json_is_object(j) || !json_is_array(funcs) || (consts && !json_is_array(consts))) {
        tth_diag_set(diag, TTH_EPARSE, NULL, "Relay JSON: expected {\"name\", \"functions\": [..], \"constants\": [..]}");
        return NULL;
    }
    json_int_t max = -1;
    size_t total = 0;
    for (size_t i = 0; i < json_array_size(funcs); i++) {
        const json_t *nodes = json_object_get(json_array_get(funcs, i), "nodes");
        if (!json_is_array(nodes) || scan_max_id(nodes, "id", &max) != 0) {
            tth_diag_set(diag, TTH_EPARSE, NULL, "Relay JSON: function %zu has malformed \"nodes\"", i);
            return NULL;
        }
        total += json_array_size(nodes);
    }
    /* Ids are canonical (0, 1, ... in order of first appearance), so none exceeds the count. */
    if (max >= (json_int_t)total) {
        tth_diag_set(diag, TTH_EPARSE, NULL, "Relay JSON: node id %lld exceeds the %zu nodes listed", (long long)max,
                     total);
        return NULL;
    }
    from_ctx c = {.funcs = funcs, .consts = consts, .tensors = constants, .ntensors = nconstants, .diag = diag};
    c.m = tth_relay_module_new(json_string_value(json_object_get(j, "name")));
    c.nmap = (size_t)(max + 1);
    c.map = calloc(c.nmap ? c.nmap : 1, sizeof *c.map);
    c.hashes = malloc((nconstants ? nconstants : 1) * sizeof *c.hashes);
    c.fstate = calloc(json_array_size(funcs) + 1, 1);
    c.built = calloc(json_array_size(funcs) + 1, sizeof *c.built);
    int rc = 0;
    if (!c.m || !c.map || !c.hashes || !c.fstate || !c.built)
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < nconstants && !rc; i++)
        c.hashes[i] = constants[i] ? tth_tensor_hash(constants[i]) : 0;
    for (size_t i = 0; i < json_array_size(funcs) && !rc; i++)
        rc = build_function(&c, i);
    if (!rc) {
        /* Keep the functions in the order of the JSON (callees may have been built first). */
        for (size_t i = 0; i < c.m->nfuncs; i++)
            c.m->funcs[i] = c.built[i];
    }
    free(c.map);
    free(c.hashes);
    free(c.fstate);
    free(c.built);
    if (rc) {
        tth_relay_module_free(c.m);
        return NULL;
    }
    return c.m;
}
