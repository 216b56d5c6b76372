/* relay.c: Relay modules, node builders (typed through each op's relation), functions,
 * topological order and pruning. */
#include "ir_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- modules ---- */

tth_relay_module *tth_relay_module_new(const char *name)
{
    tth__relay_module *pm = calloc(1, sizeof *pm);
    if (pm && (pm->pub.arena = tth_arena_new()) &&
        (pm->pub.name = tth_arena_strdup(pm->pub.arena, name ? name : "")))
        return &pm->pub;
    tth_relay_module_free(pm ? &pm->pub : NULL);
    return NULL;
}

void tth_relay_module_free(tth_relay_module *m)
{
    if (m)
        tth__module_free(m, &tth__rmod(m)->own, m->funcs, m->arena);
}

TTH__MODULE_FUNCS(tth_relay_module, tth_relay_function, tth_relay_module_find, funcs_push, &tth__rmod(m)->own)

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return (x > y) - (x < y);
}

size_t tth_relay_module_drop_constants(tth_relay_module *m)
{
    return tth_relay_module_drop_constants_if(m, NULL, NULL);
}

size_t tth_relay_module_drop_constants_if(tth_relay_module *m, int (*keep)(void *ctx, const tth_tensor *t), void *ctx)
{
    tth__ptrvec *v = m ? &tth__rmod(m)->own.tensors : NULL;
    if (!v || !v->n)
        return 0;
    void **sorted = malloc(v->n * sizeof *sorted);
    if (!sorted)
        return 0;
    memcpy(sorted, v->items, v->n * sizeof *sorted);
    qsort(sorted, v->n, sizeof *sorted, by_address);
    size_t freed = 0;
    for (size_t i = 0, j; i < v->n; i = j) {
        /* the module's own references to it: a tensor kept twice is held twice */
        for (j = i + 1; j < v->n && sorted[j] == sorted[i]; j++)
            ;
        tth_tensor *t = sorted[i];
        if (!t || !t->data || __atomic_load_n(&t->refcount, __ATOMIC_ACQUIRE) != (uint32_t)(j - i))
            continue; /* the TIR, a constant map or a caller holds it too */
        if (keep && keep(ctx, t))
            continue;
        freed += t->nbytes;
        tth__tensor_drop_data(t);
    }
    free(sorted);
    return freed;
}

uint32_t tth_relay_next_id(const tth_relay_module *m)
{
    return m ? tth__rmod((tth_relay_module *)m)->next_id : 0;
}

tth_relay_function *tth_relay_module_main(const tth_relay_module *m)
{
    return tth_relay_module_find(m, "main");
}

int tth__relay_keep_json(tth_relay_module *m, json_t *j)
{
    if (tth__ptrvec_push(&tth__rmod(m)->own.jsons, j) != 0) {
        json_decref(j);
        return TTH_ENOMEM;
    }
    return 0;
}

void tth_relay_set_span(tth_relay_module *m, const char *span)
{
    if (!m)
        return;
    tth__relay_module *pm = tth__rmod(m);
    if (!span) {
        pm->span = NULL;
        return;
    }
    if (pm->span && strcmp(pm->span, span) == 0)
        return;
    pm->span = tth_arena_strdup(m->arena, span);
}

int tth__rtype_equal(const tth_rtype *a, const tth_rtype *b)
{
    if (a->nfields != b->nfields)
        return 0;
    if (a->nfields < 0)
        return tth_ttype_equal(&a->tensor, &b->tensor);
    for (int32_t i = 0; i < a->nfields; i++)
        if (!tth_ttype_equal(&a->fields[i], &b->fields[i]))
            return 0;
    return 1;
}

/* ---- nodes ---- */

static tth_rexpr *node_new(tth_relay_module *m, tth_rexpr_kind kind)
{
    tth__rnode *n = tth_arena_alloc(m->arena, sizeof *n);
    if (!n)
        return NULL;
    tth__relay_module *pm = tth__rmod(m);
    n->owner = m;
    n->pub.kind = kind;
    n->pub.id = pm->next_id++;
    n->pub.span = pm->span;
    n->pub.type.nfields = -1;
    return &n->pub;
}

static int owned(const tth_relay_module *m, const tth_rexpr *e)
{
    return e && TTH__RNODE(e)->owner == m;
}

/* "node 'span' (op)" or "op" for diagnostics. */
static const char *node_location(tth_relay_module *m, const char *what, char *buf, size_t len)
{
    const char *span = tth__rmod(m)->span;
    if (!span)
        return what;
    snprintf(buf, len, "node '%s' (%s)", span, what);
    return buf;
}

static int valid_ttype(const tth_ttype *t)
{
    if (!t || tth_dtype_size(t->dtype) == 0 || t->rank < 0 || t->rank > TTH_MAX_RANK)
        return 0;
    for (int32_t i = 0; i < t->rank; i++)
        if (t->shape[i] < 0)
            return 0;
    return 1;
}

tth_rexpr *tth_relay_var(tth_relay_module *m, const char *name, const tth_ttype *type)
{
    if (!m || !valid_ttype(type))
        return NULL;
    tth_rexpr *e = node_new(m, TTH_REXPR_VAR);
    if (!e)
        return NULL;
    e->type.tensor = *type;
    for (int32_t i = type->rank; i < TTH_MAX_RANK; i++)
        e->type.tensor.shape[i] = 0;
    e->u.var.name = name ? tth_arena_strdup(m->arena, name) : tth_arena_printf(m->arena, "v%u", e->id);
    return e->u.var.name ? e : NULL;
}

tth_rexpr *tth_relay_const(tth_relay_module *m, tth_tensor *value, const char *name)
{
    if (!m || !value) {
        tth_tensor_unref(value);
        return NULL;
    }
    if (tth__ptrvec_push(&tth__rmod(m)->own.tensors, value) != 0) {
        tth_tensor_unref(value);
        return NULL;
    }
    /* From here the module holds the reference, whatever happens. */
    tth_rexpr *e = node_new(m, TTH_REXPR_CONST);
    if (!e)
        return NULL;
    e->type.tensor = value->type;
    e->u.constant.value = value;
    if (name) {
        e->u.constant.name = tth_arena_strdup(m->arena, name);
        if (!e->u.constant.name)
            return NULL;
    }
    return e;
}

static tth_rexpr **copy_args(tth_relay_module *m, tth_rexpr *const *args, size_t n)
{
    tth_rexpr **a = tth_arena_alloc(m->arena, (n ? n : 1) * sizeof *a);
    if (a && n)
        memcpy(a, args, n * sizeof *a);
    return a;
}

/* 0 when every argument is a node of m, else TTH_EINVAL with diag set ("<what>: argument i is"). */
static int args_owned(const tth_relay_module *m, tth_rexpr *const *args, size_t nargs, const char *what,
                      const char *loc, tth_diag *diag)
{
    for (size_t i = 0; i < nargs; i++)
        if (!args[i] || !owned(m, args[i]))
            return tth_diag_set(diag, TTH_EINVAL, loc, "%s: argument %zu is %s", what, i,
                                args[i] ? "a node of another module" : "NULL");
    return 0;
}

/* A call node of the given type, of op or of fn, with a copy of args and attrs (kept by m); NULL
 * with diag set when out of memory. */
static tth_rexpr *call_node(tth_relay_module *m, const tth_rtype *type, tth_op op, tth_relay_function *fn,
                            tth_rexpr *const *args, size_t nargs, json_t *attrs, const char *loc, tth_diag *diag)
{
    tth_rexpr *e = node_new(m, TTH_REXPR_CALL);
    tth_rexpr **a = e ? copy_args(m, args, nargs) : NULL;
    if (!a) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    e->type = *type;
    e->u.call.op = op;
    e->u.call.fn = fn;
    e->u.call.args = a;
    e->u.call.nargs = nargs;
    e->u.call.attrs = attrs;
    return e;
}

tth_rexpr *tth_relay_call(tth_relay_module *m, tth_op op, tth_rexpr *const *args, size_t nargs, json_t *attrs,
                          tth_diag *diag)
{
    char locbuf[TTH_DIAG_LOCATION_MAX];
    if (!m) {
        json_decref(attrs);
        tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
        return NULL;
    }
    const char *loc = node_location(m, tth_op_name(op), locbuf, sizeof locbuf);
    if (!attrs)
        attrs = json_object();
    if (!attrs) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    if (!json_is_object(attrs)) {
        json_decref(attrs);
        tth_diag_set(diag, TTH_EINVAL, loc, "%s: attributes must be a JSON object", tth_op_name(op));
        return NULL;
    }
    if (nargs && !args) {
        json_decref(attrs);
        tth_diag_set(diag, TTH_EINVAL, loc, "%s: no arguments given", tth_op_name(op));
        return NULL;
    }
    if (args_owned(m, args, nargs, tth_op_name(op), loc, diag) != 0) {
        json_decref(attrs);
        return NULL;
    }
    const tth_rtype *small[16];
    const tth_rtype **types = nargs <= 16 ? small : malloc(nargs * sizeof *types);
    if (!types) {
        json_decref(attrs);
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < nargs; i++)
        types[i] = &args[i]->type;
    tth_rtype out;
    int rc = tth__relay_infer_fill(op, types, nargs, attrs, attrs, &out, m->arena, loc, diag);
    if (types != small)
        free(types);
    if (rc) {
        json_decref(attrs);
        return NULL;
    }
    if (tth__relay_keep_json(m, attrs) != 0) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    return call_node(m, &out, op, NULL, args, nargs, attrs, loc, diag);
}

tth_rexpr *tth_relay_call_fn(tth_relay_module *m, tth_relay_function *fn, tth_rexpr *const *args, size_t nargs,
                             tth_diag *diag)
{
    char locbuf[TTH_DIAG_LOCATION_MAX];
    if (!m || !fn) {
        tth_diag_set(diag, TTH_EINVAL, NULL, "call of a NULL function");
        return NULL;
    }
    char what[160];
    snprintf(what, sizeof what, "@%s", fn->name);
    const char *loc = node_location(m, what, locbuf, sizeof locbuf);
    if (fn->module != m) {
        tth_diag_set(diag, TTH_EINVAL, loc, "function @%s belongs to another module", fn->name);
        return NULL;
    }
    if (nargs != fn->nparams) {
        tth_diag_set(diag, TTH_ETYPE, loc, "@%s: expected %zu arguments, got %zu", fn->name, fn->nparams, nargs);
        return NULL;
    }
    if (args_owned(m, args, nargs, what, loc, diag) != 0)
        return NULL;
    for (size_t i = 0; i < nargs; i++) {
        if (!tth__rtype_equal(&args[i]->type, &fn->params[i]->type)) {
            char want[160], got[160];
            tth__rtype_format(&fn->params[i]->type, want, sizeof want);
            tth__rtype_format(&args[i]->type, got, sizeof got);
            tth_diag_set(diag, TTH_ETYPE, loc, "@%s: argument %zu (%%%s) must be %s, got %s", fn->name, i,
                         fn->params[i]->u.var.name, want, got);
            return NULL;
        }
    }
    json_t *attrs = json_object();
    if (!attrs || tth__relay_keep_json(m, attrs) != 0) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    return call_node(m, &fn->body->type, TTH_OP_INVALID, fn, args, nargs, attrs, loc, diag);
}

tth_rexpr *tth_relay_tuple(tth_relay_module *m, tth_rexpr *const *fields, size_t n, tth_diag *diag)
{
    char locbuf[TTH_DIAG_LOCATION_MAX];
    if (!m) {
        tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
        return NULL;
    }
    const char *loc = node_location(m, "tuple", locbuf, sizeof locbuf);
    if (n > INT32_MAX) {
        tth_diag_set(diag, TTH_ELIMIT, loc, "tuple: too many fields");
        return NULL;
    }
    tth_ttype *types = tth_arena_alloc(m->arena, (n ? n : 1) * sizeof *types);
    if (!types) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!fields[i] || !owned(m, fields[i])) {
            tth_diag_set(diag, TTH_EINVAL, loc, "tuple: field %zu is %s", i,
                         fields[i] ? "a node of another module" : "NULL");
            return NULL;
        }
        if (fields[i]->type.nfields >= 0) {
            tth_diag_set(diag, TTH_ETYPE, loc, "tuple: field %zu is itself a tuple (tuples do not nest)", i);
            return NULL;
        }
        types[i] = fields[i]->type.tensor;
    }
    tth_rexpr *e = node_new(m, TTH_REXPR_TUPLE);
    tth_rexpr **f = e ? copy_args(m, fields, n) : NULL;
    if (!f) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    e->type.nfields = (int32_t)n;
    e->type.fields = types;
    e->u.tuple.fields = f;
    e->u.tuple.nfields = n;
    return e;
}

tth_rexpr *tth_relay_tuple_get(tth_relay_module *m, tth_rexpr *tuple, int32_t index, tth_diag *diag)
{
    char locbuf[TTH_DIAG_LOCATION_MAX];
    if (!m) {
        tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
        return NULL;
    }
    const char *loc = node_location(m, "tuple_get", locbuf, sizeof locbuf);
    if (!tuple || !owned(m, tuple)) {
        tth_diag_set(diag, TTH_EINVAL, loc, "tuple_get: the tuple is %s", tuple ? "a node of another module" : "NULL");
        return NULL;
    }
    if (tuple->type.nfields < 0) {
        char t[160];
        tth__rtype_format(&tuple->type, t, sizeof t);
        tth_diag_set(diag, TTH_ETYPE, loc, "tuple_get: the argument is a tensor (%s), not a tuple", t);
        return NULL;
    }
    if (index < 0 || index >= tuple->type.nfields) {
        tth_diag_set(diag, TTH_ETYPE, loc, "tuple_get: index %d is out of range for a tuple of %d fields", index,
                     tuple->type.nfields);
        return NULL;
    }
    tth_rexpr *e = node_new(m, TTH_REXPR_TUPLE_GET);
    if (!e) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    e->type.tensor = tuple->type.fields[index];
    e->u.get.tuple = tuple;
    e->u.get.index = index;
    return e;
}

/* ---- walking ---- */

size_t tth_relay_expr_args(const tth_rexpr *e, tth_rexpr *const **out)
{
    switch (e->kind) {
    case TTH_REXPR_CALL: *out = e->u.call.args; return e->u.call.nargs;
    case TTH_REXPR_TUPLE: *out = e->u.tuple.fields; return e->u.tuple.nfields;
    case TTH_REXPR_TUPLE_GET: *out = &e->u.get.tuple; return 1;
    default: *out = NULL; return 0;
    }
}

typedef struct walk_frame {
    const tth_rexpr *e;
    size_t next;
} walk_frame;

int64_t tth__relay_walk(const tth_relay_module *m, const tth_rexpr *root, uint8_t *state, tth_rexpr ***out)
{
    *out = NULL;
    uint32_t limit = tth__rmod(m)->next_id;
    if (!root || TTH__RNODE(root)->owner != m || root->id >= limit)
        return TTH_EINVAL;
    size_t scap = 64, ocap = 64, sn = 0, on = 0;
    walk_frame *stack = malloc(scap * sizeof *stack);
    tth_rexpr **order = malloc(ocap * sizeof *order);
    int64_t rc = 0;
    if (!stack || !order) {
        rc = TTH_ENOMEM;
        goto done;
    }
    if (state[root->id] == 2)
        goto done;
    stack[sn++] = (walk_frame){root, 0};
    state[root->id] = 1;
    while (sn) {
        walk_frame *f = &stack[sn - 1];
        tth_rexpr *const *args;
        if (f->next < tth_relay_expr_args(f->e, &args)) {
            const tth_rexpr *c = args[f->next++];
            if (!c || TTH__RNODE(c)->owner != m || c->id >= limit) {
                rc = TTH_EINVAL;
                goto done;
            }
            if (state[c->id] == 2)
                continue;
            if (state[c->id] == 1) { /* back edge: a cycle */
                rc = TTH_EINVAL;
                goto done;
            }
            if (sn == scap) {
                walk_frame *ns = realloc(stack, 2 * scap * sizeof *ns);
                if (!ns) {
                    rc = TTH_ENOMEM;
                    goto done;
                }
                stack = ns;
                scap *= 2;
            }
            state[c->id] = 1;
            stack[sn++] = (walk_frame){c, 0};
            continue;
        }
        if (on == ocap) {
            tth_rexpr **no = realloc(order, 2 * ocap * sizeof *no);
            if (!no) {
                rc = TTH_ENOMEM;
                goto done;
            }
            order = no;
            ocap *= 2;
        }
        state[f->e->id] = 2;
        order[on++] = (tth_rexpr *)f->e;
        sn--;
    }
done:
    free(stack);
    if (rc < 0) {
        free(order);
        return rc;
    }
    *out = order;
    return (int64_t)on;
}

int64_t tth_relay_topo(tth_relay_module *m, const tth_relay_function *fn, tth_rexpr ***out)
{
    *out = NULL;
    if (!m || !fn || !fn->body)
        return TTH_EINVAL;
    uint32_t limit = tth__rmod(m)->next_id;
    uint8_t *state = calloc(limit ? limit : 1, 1);
    if (!state)
        return TTH_ENOMEM;
    for (size_t i = 0; i < fn->nparams; i++)
        if (fn->params[i]->id < limit)
            state[fn->params[i]->id] = 2;
    tth_rexpr **order;
    int64_t n = tth__relay_walk(m, fn->body, state, &order);
    free(state);
    if (n < 0)
        return n;
    tth_rexpr **res = tth_arena_alloc(m->arena, ((size_t)n + fn->nparams + 1) * sizeof *res);
    if (!res) {
        free(order);
        return TTH_ENOMEM;
    }
    for (size_t i = 0; i < fn->nparams; i++)
        res[i] = fn->params[i];
    memcpy(res + fn->nparams, order, (size_t)n * sizeof *res);
    free(order);
    *out = res;
    return n + (int64_t)fn->nparams;
}

/* ---- functions ---- */

tth_relay_function *tth_relay_function_add(tth_relay_module *m, const char *name, tth_rexpr *const *params,
                                           size_t nparams, tth_rexpr *body, json_t *attrs, tth_diag *diag)
{
    char loc[TTH_DIAG_LOCATION_MAX];
    snprintf(loc, sizeof loc, "function @%s", name ? name : "(null)");
    if (!m || !name || !*name)
        return tth__refuse_func(attrs, diag, TTH_EINVAL, loc, "a function needs a module and a name");
    if (tth_relay_module_find(m, name))
        return tth__refuse_func(attrs, diag, TTH_EDUPLICATE, loc, "function @%s already exists", name);
    if (!(attrs = tth__keep_attrs(&tth__rmod(m)->own, attrs, "function", loc, diag)))
        return NULL;
    if (!body || !owned(m, body)) {
        tth_diag_set(diag, TTH_EINVAL, loc, "the body is %s", body ? "a node of another module" : "NULL");
        return NULL;
    }
    uint32_t limit = tth__rmod(m)->next_id;
    uint8_t *state = calloc(limit ? limit : 1, 1);
    if (!state) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < nparams; i++) {
        if (!params[i] || !owned(m, params[i]) || params[i]->kind != TTH_REXPR_VAR) {
            free(state);
            tth_diag_set(diag, TTH_EINVAL, loc, "parameter %zu is not a var of this module", i);
            return NULL;
        }
        if (state[params[i]->id]) {
            free(state);
            tth_diag_set(diag, TTH_EDUPLICATE, loc, "parameter %%%s is listed twice", params[i]->u.var.name);
            return NULL;
        }
        state[params[i]->id] = 2;
    }
    tth_rexpr **order;
    int64_t n = tth__relay_walk(m, body, state, &order);
    free(state);
    if (n < 0) {
        tth_diag_set(diag, (int)n, loc, n == TTH_ENOMEM ? "out of memory" : "the body has a cycle or a foreign node");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (order[i]->kind == TTH_REXPR_VAR) {
            tth_diag_set(diag, TTH_EINVAL, loc, "the body uses %%%s, which is not a parameter of @%s",
                         order[i]->u.var.name, name);
            free(order);
            return NULL;
        }
    }
    free(order);
    tth_relay_function *f = tth_arena_alloc(m->arena, sizeof *f);
    tth_rexpr **p = f ? copy_args(m, params, nparams) : NULL;
    if (!p || !(f->name = tth_arena_strdup(m->arena, name)) || funcs_push(m, f) != 0) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    f->params = p;
    f->nparams = nparams;
    f->body = body;
    f->attrs = attrs;
    f->module = m;
    return f;
}

void tth_relay_module_prune(tth_relay_module *m)
{
    tth_relay_function *main_fn = tth_relay_module_main(m);
    if (!main_fn)
        return;
    uint32_t limit = tth__rmod(m)->next_id;
    uint8_t *state = calloc(limit ? limit : 1, 1);
    uint8_t *keep = calloc(m->nfuncs ? m->nfuncs : 1, 1);
    tth_relay_function **work = malloc((m->nfuncs ? m->nfuncs : 1) * sizeof *work);
    if (!state || !keep || !work)
        goto done; /* out of memory: keep everything */
    size_t nw = 0;
    for (size_t i = 0; i < m->nfuncs; i++)
        if (m->funcs[i] == main_fn) {
            keep[i] = 1;
            work[nw++] = main_fn;
        }
    while (nw) {
        tth_relay_function *f = work[--nw];
        tth_rexpr **order;
        int64_t n = tth__relay_walk(m, f->body, state, &order);
        if (n < 0)
            goto done;
        for (int64_t i = 0; i < n; i++) {
            const tth_rexpr *e = order[i];
            if (e->kind != TTH_REXPR_CALL || !e->u.call.fn)
                continue;
            for (size_t k = 0; k < m->nfuncs; k++)
                if (m->funcs[k] == e->u.call.fn && !keep[k]) {
                    keep[k] = 1;
                    work[nw++] = m->funcs[k];
                }
        }
        free(order);
    }
    size_t j = 0;
    for (size_t i = 0; i < m->nfuncs; i++)
        if (keep[i])
            m->funcs[j++] = m->funcs[i];
    m->nfuncs = j;
done:
    free(state);
    free(keep);
    free(work);
}
