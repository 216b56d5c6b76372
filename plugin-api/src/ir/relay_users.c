/* relay_users.c: the users index of a function's nodes and the small readers of constants,
 * attributes and types that plugins' pattern matchers use (tth/relay.h, "Users and readers";
 * docs/plugin-guide.md). */
#include "tth/relay.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

struct tth_relay_users {
    const tth_relay_function *fn; /* the cache key: function, body and module */
    const tth_rexpr *body;
    const tth_relay_module *module;
    size_t arena_used;            /* the module's arena after the build: anything new rebuilds */
    uint32_t max_id;              /* ids index the arrays below */
    uint32_t *start;              /* users of node id: list[start[id] .. start[id + 1]) */
    const tth_rexpr **list;
    uint8_t *is_result;           /* node id is the function's result */
};

void tth_relay_users_free(tth_relay_users *u)
{
    if (!u)
        return;
    free(u->start);
    free(u->list);
    free(u->is_result);
    free(u);
}

static tth_relay_users *users_build(const tth_relay_function *fn)
{
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(fn->module, fn, &nodes);
    if (n < 0)
        return NULL;
    tth_relay_users *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->fn = fn;
    u->body = fn->body;
    u->module = fn->module;
    uint32_t max_id = 0;
    for (int64_t i = 0; i < n; i++)
        if (nodes[i]->id > max_id)
            max_id = nodes[i]->id;
    u->max_id = max_id;
    u->start = calloc((size_t)max_id + 2, sizeof *u->start);
    u->is_result = calloc((size_t)max_id + 1, 1);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        tth_rexpr *const *args;
        total += tth_relay_expr_args(nodes[i], &args);
    }
    u->list = calloc(total ? total : 1, sizeof *u->list);
    if (!u->start || !u->is_result || !u->list) {
        tth_relay_users_free(u);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) { /* count per used node, in start[id + 1] */
        tth_rexpr *const *args;
        size_t na = tth_relay_expr_args(nodes[i], &args);
        for (size_t a = 0; a < na; a++)
            u->start[args[a]->id + 1]++;
    }
    for (uint32_t id = 0; id <= max_id; id++)
        u->start[id + 1] += u->start[id];
    uint32_t *fill = calloc((size_t)max_id + 1, sizeof *fill);
    if (!fill) {
        tth_relay_users_free(u);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) { /* topological order: users listed producers-first */
        tth_rexpr *const *args;
        size_t na = tth_relay_expr_args(nodes[i], &args);
        for (size_t a = 0; a < na; a++) {
            uint32_t id = args[a]->id;
            /* a node using the same argument twice (add(x, x)) is listed twice: two uses */
            u->list[u->start[id] + fill[id]++] = nodes[i];
        }
    }
    free(fill);
    if (fn->body->id <= max_id)
        u->is_result[fn->body->id] = 1;
    return u;
}

const tth_relay_users *tth_relay_users_of(tth_relay_users **cache, const tth_relay_function *fn)
{
    tth_relay_users *c = *cache;
    if (c && c->fn == fn && c->body == fn->body && c->module == fn->module &&
        c->arena_used == tth_arena_used(fn->module->arena))
        return c;
    tth_relay_users_free(c);
    c = *cache = users_build(fn);
    if (c)
        c->arena_used = tth_arena_used(fn->module->arena);
    return c;
}

size_t tth_relay_nusers(const tth_relay_users *u, const tth_rexpr *e)
{
    if (!u || e->id > u->max_id)
        return 0;
    return u->start[e->id + 1] - u->start[e->id] + u->is_result[e->id];
}

const tth_rexpr *tth_relay_user(const tth_relay_users *u, const tth_rexpr *e, size_t i)
{
    if (!u || e->id > u->max_id)
        return NULL;
    size_t n = u->start[e->id + 1] - u->start[e->id];
    return i < n ? u->list[u->start[e->id] + i] : NULL;
}

const tth_rexpr *tth_relay_sole_user_op(const tth_relay_users *u, const tth_rexpr *e, tth_op op)
{
    if (tth_relay_nusers(u, e) != 1)
        return NULL;
    const tth_rexpr *x = tth_relay_user(u, e, 0);
    return x && tth_rexpr_is_op(x, op) ? x : NULL;
}

int tth_rexpr_is_op(const tth_rexpr *e, tth_op op)
{
    return e && e->kind == TTH_REXPR_CALL && e->u.call.op == op;
}

const tth_tensor *tth_rexpr_const(const tth_rexpr *e)
{
    return e && e->kind == TTH_REXPR_CONST ? e->u.constant.value : NULL;
}

int tth_rexpr_const_scalar(const tth_rexpr *e, double *v)
{
    const tth_tensor *t = tth_rexpr_const(e);
    if (!t)
        return 0;
    int64_t n = tth_ttype_numel(&t->type);
    if (n < 1)
        return 0;
    double first = tth_tensor_get_f64(t, 0);
    for (int64_t i = 1; i < n; i++)
        if (tth_tensor_get_f64(t, i) != first)
            return 0;
    *v = first;
    return 1;
}

int tth_rexpr_const_all_zero(const tth_rexpr *e)
{
    double v;
    return tth_rexpr_const_scalar(e, &v) && v == 0.0;
}

int tth_call_attr_ints(const tth_rexpr *call, const char *key, int64_t *out, int max)
{
    json_t *a = json_object_get(call->u.call.attrs, key);
    if (!json_is_array(a))
        return -1;
    int n = 0;
    for (size_t i = 0; i < json_array_size(a) && n < max; i++)
        out[n++] = (int64_t)json_integer_value(json_array_get(a, i));
    return n;
}

int64_t tth_call_attr_int(const tth_rexpr *call, const char *key, int64_t dflt)
{
    json_t *a = json_object_get(call->u.call.attrs, key);
    if (json_is_integer(a))
        return (int64_t)json_integer_value(a);
    if (json_is_boolean(a))
        return json_is_true(a);
    return dflt;
}

double tth_call_attr_real(const tth_rexpr *call, const char *key, double dflt)
{
    json_t *a = json_object_get(call->u.call.attrs, key);
    return json_is_number(a) ? json_number_value(a) : dflt;
}

const tth_ttype *tth_rexpr_ttype(const tth_rexpr *e)
{
    return e && e->type.nfields < 0 ? &e->type.tensor : NULL;
}

const char *tth_rexpr_type_str(const tth_rexpr *e, char *buf, size_t len)
{
    const tth_ttype *t = tth_rexpr_ttype(e);
    if (t)
        tth_ttype_format(t, buf, len);
    else
        snprintf(buf, len, "tuple");
    return buf;
}
