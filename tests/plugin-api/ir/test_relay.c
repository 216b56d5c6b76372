/* Relay builders, functions, topological order, verifier, printer, JSON round trip, pruning. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tth/relay.h>

static tth_ttype tt4(tth_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d)
{
    tth_ttype t = {dt, 4, {a, b, c, d}};
    return t;
}

static tth_ttype tt1(tth_dtype dt, int64_t a)
{
    tth_ttype t = {dt, 1, {a}};
    return t;
}

static tth_tensor *ramp(const tth_ttype *t)
{
    tth_tensor *x = tth_tensor_new(t, NULL);
    for (int64_t i = 0; i < tth_ttype_numel(t); i++)
        ((float *)x->data)[i] = (float)i * 0.5f;
    return x;
}

/* conv → +bias → relu → split in two → concat(b, a): a small graph using every node kind. */
typedef struct small {
    tth_relay_module *m;
    tth_tensor *w, *b;
    tth_relay_function *main_fn;
} small;

static small build_small(void)
{
    small s;
    tth_diag d;
    tth_diag_clear(&d);
    s.m = tth_relay_module_new("tiny");
    tth_ttype xt = tt4(TTH_F32, 1, 3, 8, 8), wt = tt4(TTH_F32, 4, 3, 3, 3), bt = {TTH_F32, 3, {4, 1, 1}};
    s.w = ramp(&wt);
    s.b = ramp(&bt);
    tth_rexpr *x = tth_relay_var(s.m, "x", &xt);
    tth_rexpr *w = tth_relay_const(s.m, tth_tensor_ref(s.w), "conv.weight");
    tth_rexpr *b = tth_relay_const(s.m, tth_tensor_ref(s.b), NULL);
    tth_relay_set_span(s.m, "conv1");
    tth_rexpr *a1[2] = {x, w};
    tth_rexpr *conv = tth_relay_call(s.m, TTH_OP_CONV2D, a1, 2, json_pack("{s:[iiii]}", "padding", 1, 1, 1, 1), &d);
    cr_assert_not_null(conv, "%s", d.message);
    tth_relay_set_span(s.m, NULL);
    tth_rexpr *a2[2] = {conv, b};
    tth_rexpr *add = tth_relay_call(s.m, TTH_OP_ADD, a2, 2, NULL, &d);
    tth_rexpr *relu = tth_relay_call(s.m, TTH_OP_RELU, &add, 1, NULL, &d);
    tth_rexpr *sp = tth_relay_call(s.m, TTH_OP_SPLIT, &relu, 1, json_pack("{s:i, s:[ii]}", "axis", 1, "sizes", 1, 3), &d);
    cr_assert_not_null(sp, "%s", d.message);
    tth_rexpr *g0 = tth_relay_tuple_get(s.m, sp, 0, &d), *g1 = tth_relay_tuple_get(s.m, sp, 1, &d);
    tth_rexpr *a3[2] = {g1, g0};
    tth_rexpr *cat = tth_relay_call(s.m, TTH_OP_CONCATENATE, a3, 2, json_pack("{s:i}", "axis", 1), &d);
    cr_assert_not_null(cat, "%s", d.message);
    s.main_fn = tth_relay_function_add(s.m, "main", &x, 1, cat, json_pack("{s:[s]}", "input_names", "x"), &d);
    cr_assert_not_null(s.main_fn, "%s", d.message);
    return s;
}

static void free_small(small *s)
{
    tth_relay_module_free(s->m);
    tth_tensor_unref(s->w);
    tth_tensor_unref(s->b);
}

Test(relay, builders_type_and_fill_default_attrs)
{
    small s = build_small();
    const tth_rexpr *body = s.main_fn->body;
    char buf[128];
    tth_ttype_format(&body->type.tensor, buf, sizeof buf);
    cr_assert_str_eq(buf, "float32[1, 4, 8, 8]");
    /* The conv: defaults were written into its attrs. */
    const tth_rexpr *g1 = body->u.call.args[0];
    const tth_rexpr *conv = g1->u.get.tuple->u.call.args[0]->u.call.args[0]->u.call.args[0];
    cr_assert_eq(conv->u.call.op, TTH_OP_CONV2D);
    cr_assert_str_eq(conv->span, "conv1");
    json_t *want = json_pack("{s:[ii], s:[iiii], s:[ii], s:i}", "strides", 1, 1, "padding", 1, 1, 1, 1, "dilation", 1, 1,
                             "groups", 1);
    cr_assert(json_equal(conv->u.call.attrs, want));
    json_decref(want);
    cr_assert_eq(g1->u.get.tuple->type.nfields, 2);
    cr_assert_null(conv->u.call.fn);
    free_small(&s);
}

Test(relay, const_steals_and_module_releases_tensors)
{
    tth_ttype t = tt1(TTH_F32, 3);
    tth_tensor *v = tth_tensor_new(&t, NULL);
    tth_tensor_ref(v);
    cr_assert_eq(v->refcount, 2);
    tth_relay_module *m = tth_relay_module_new("m");
    tth_rexpr *c = tth_relay_const(m, v, "k");
    cr_assert_not_null(c);
    cr_assert_eq(c->u.constant.value, v);
    cr_assert_eq(v->refcount, 2); /* the reference moved into the module */
    tth_relay_module_free(m);
    cr_assert_eq(v->refcount, 1);
    tth_tensor_unref(v);
    /* A NULL module still consumes the reference (checked by the leak detector). */
    cr_assert_null(tth_relay_const(NULL, tth_tensor_new(&t, NULL), "x"));
}

/* Dropping a module's constants frees small and large tensors' data alike (the leak detector
 * checks the freeing) and leaves the tensors typed, empty and still referenced by the module. */
Test(relay, drop_constants_frees_small_and_large_data)
{
    tth_ttype little = tt1(TTH_F32, 3), large = tt1(TTH_F32, 1 << 19);
    tth_relay_module *m = tth_relay_module_new("m");
    tth_tensor *s = tth_tensor_new(&little, NULL), *l = tth_tensor_new(&large, NULL), *kept = tth_tensor_new(&large, NULL);
    cr_assert(s && l && kept);
    cr_assert(tth_relay_const(m, s, "s") && tth_relay_const(m, l, "l") && tth_relay_const(m, tth_tensor_ref(kept), "k"));
    cr_assert_eq(tth_relay_module_drop_constants(m), 12u + (1u << 21));
    cr_assert(s->data == NULL && s->nbytes == 0 && l->data == NULL && l->nbytes == 0);
    cr_assert_eq(l->type.shape[0], 1 << 19);
    cr_assert_not_null(kept->data); /* another holder: kept */
    tth_relay_module_free(m);
    cr_assert_eq(kept->refcount, 1);
    tth_tensor_unref(kept);
}

Test(relay, type_error_names_op_span_and_shapes)
{
    tth_relay_module *m = tth_relay_module_new("m");
    tth_ttype a = tt1(TTH_F32, 3), b = tt1(TTH_F32, 4);
    tth_rexpr *x = tth_relay_var(m, "x", &a), *y = tth_relay_var(m, "y", &b);
    tth_rexpr *args[2] = {x, y};
    tth_diag d;
    tth_relay_set_span(m, "Add_7");
    cr_assert_null(tth_relay_call(m, TTH_OP_ADD, args, 2, json_object(), &d));
    cr_assert_eq(d.code, TTH_ETYPE);
    cr_assert_str_eq(d.message, "add: shapes of arguments 0 and 1 do not broadcast (arguments: float32[3], float32[4])");
    cr_assert_str_eq(d.location, "node 'Add_7' (add)");
    tth_relay_set_span(m, NULL);
    cr_assert_null(tth_relay_call(m, TTH_OP_ADD, args, 2, json_array(), &d));
    cr_assert_str_eq(d.message, "add: attributes must be a JSON object");
    cr_assert_str_eq(d.location, "add");
    /* A node of another module. */
    tth_relay_module *other = tth_relay_module_new("o");
    tth_rexpr *z = tth_relay_var(other, "z", &a);
    tth_rexpr *mixed[2] = {x, z};
    cr_assert_null(tth_relay_call(m, TTH_OP_ADD, mixed, 2, NULL, &d));
    cr_assert_str_eq(d.message, "add: argument 1 is a node of another module");
    tth_relay_module_free(other);
    tth_relay_module_free(m);
}

Test(relay, tuples_functions_and_calls)
{
    tth_relay_module *m = tth_relay_module_new("m");
    tth_ttype a = tt1(TTH_F32, 3), b = tt1(TTH_I64, 2);
    tth_diag d;
    tth_rexpr *p = tth_relay_var(m, "p", &a);
    tth_rexpr *e = tth_relay_call(m, TTH_OP_EXP, &p, 1, NULL, &d);
    tth_relay_function *f = tth_relay_function_add(m, "fused_exp", &p, 1, e, json_pack("{s:i}", "Primitive", 1), &d);
    cr_assert_not_null(f);
    cr_assert_eq(f->module, m);

    tth_rexpr *x = tth_relay_var(m, "x", &a), *i = tth_relay_var(m, "i", &b);
    tth_rexpr *call = tth_relay_call_fn(m, f, &x, 1, &d);
    cr_assert_not_null(call, "%s", d.message);
    cr_assert_eq(call->u.call.fn, f);
    cr_assert(tth_ttype_equal(&call->type.tensor, &a));
    cr_assert_null(tth_relay_call_fn(m, f, &i, 1, &d));
    cr_assert_str_eq(d.message, "@fused_exp: argument 0 (%p) must be float32[3], got int64[2]");
    cr_assert_null(tth_relay_call_fn(m, f, NULL, 0, &d));
    cr_assert_str_eq(d.message, "@fused_exp: expected 1 arguments, got 0");

    tth_rexpr *fields[2] = {call, i};
    tth_rexpr *tup = tth_relay_tuple(m, fields, 2, &d);
    cr_assert_eq(tup->type.nfields, 2);
    tth_rexpr *nested[1] = {tup};
    cr_assert_null(tth_relay_tuple(m, nested, 1, &d));
    cr_assert_str_eq(d.message, "tuple: field 0 is itself a tuple (tuples do not nest)");
    cr_assert_null(tth_relay_tuple_get(m, tup, 2, &d));
    cr_assert_str_eq(d.message, "tuple_get: index 2 is out of range for a tuple of 2 fields");
    cr_assert_null(tth_relay_tuple_get(m, x, 0, &d));
    cr_assert_str_eq(d.message, "tuple_get: the argument is a tensor (float32[3]), not a tuple");
    tth_rexpr *g = tth_relay_tuple_get(m, tup, 1, &d);
    cr_assert(tth_ttype_equal(&g->type.tensor, &b));

    tth_rexpr *params[2] = {x, i};
    cr_assert_not_null(tth_relay_function_add(m, "main", params, 2, tup, NULL, &d));
    cr_assert_eq(tth_relay_module_main(m)->body, tup);
    cr_assert_eq(tth_relay_module_find(m, "fused_exp"), f);
    cr_assert_null(tth_relay_module_find(m, "nope"));

    cr_assert_null(tth_relay_function_add(m, "main", params, 2, tup, NULL, &d));
    cr_assert_eq(d.code, TTH_EDUPLICATE);
    cr_assert_str_eq(d.message, "function @main already exists");
    cr_assert_null(tth_relay_function_add(m, "main2", &x, 1, tup, NULL, &d));
    cr_assert_str_eq(d.message, "the body uses %i, which is not a parameter of @main2");
    tth_rexpr *twice[2] = {x, x};
    cr_assert_null(tth_relay_function_add(m, "main3", twice, 2, tup, NULL, &d));
    cr_assert_str_eq(d.message, "parameter %x is listed twice");
    cr_assert_eq(tth_relay_verify(m, &d), 0, "%s", d.message);
    tth_relay_module_free(m);
}

Test(relay, topo_params_first_shared_nodes_once)
{
    tth_relay_module *m = tth_relay_module_new("m");
    tth_ttype a = tt1(TTH_F32, 3);
    tth_diag d;
    tth_rexpr *x = tth_relay_var(m, "x", &a), *unused = tth_relay_var(m, "u", &a);
    tth_rexpr *e = tth_relay_call(m, TTH_OP_EXP, &x, 1, NULL, &d);
    tth_rexpr *l = tth_relay_call(m, TTH_OP_LOG, &e, 1, NULL, &d);
    tth_rexpr *s = tth_relay_call(m, TTH_OP_SIN, &e, 1, NULL, &d);
    tth_rexpr *ab[2] = {l, s};
    tth_rexpr *add = tth_relay_call(m, TTH_OP_ADD, ab, 2, NULL, &d);
    tth_rexpr *params[2] = {x, unused};
    tth_relay_function *f = tth_relay_function_add(m, "main", params, 2, add, NULL, &d);
    tth_rexpr **order;
    int64_t n = tth_relay_topo(m, f, &order);
    cr_assert_eq(n, 6);
    cr_assert_eq(order[0], x);
    cr_assert_eq(order[1], unused);
    cr_assert_eq(order[2], e); /* shared by log and sin, listed once */
    cr_assert(order[3] == l || order[3] == s);
    cr_assert(order[4] == l || order[4] == s);
    cr_assert_eq(order[5], add);
    tth_relay_module_free(m);
}

Test(relay, long_chain_is_linear_and_needs_no_deep_recursion)
{
    tth_relay_module *m = tth_relay_module_new("m");
    tth_ttype a = tt4(TTH_F32, 1, 8, 4, 4);
    tth_diag d;
    tth_rexpr *x = tth_relay_var(m, "x", &a), *e = x;
    const int n = 200000;
    clock_t t0 = clock();
    for (int i = 0; i < n; i++) {
        e = tth_relay_call(m, (i & 1) ? TTH_OP_RELU : TTH_OP_SIGMOID, &e, 1, NULL, &d);
        cr_assert_not_null(e);
    }
    tth_relay_function *f = tth_relay_function_add(m, "main", &x, 1, e, NULL, &d);
    cr_assert_not_null(f);
    tth_rexpr **order;
    cr_assert_eq(tth_relay_topo(m, f, &order), n + 1);
    cr_assert_eq(order[n], e);
    cr_assert_eq(tth_relay_verify(m, &d), 0, "%s", d.message);
    char *text = tth_relay_print(m);
    cr_assert_not_null(text);
    free(text);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    /* A figure, not a pass/fail bound: a quadratic walk would take many minutes and meet the
     * test's meson timeout instead. */
    cr_log_info("200k nodes took %.1f s", secs);
    tth_relay_module_free(m);
}

Test(relay, printer_golden_text)
{
    small s = build_small();
    char *text = tth_relay_print(s.m);
    char expect[4096];
    snprintf(expect, sizeof expect,
             "// module \"tiny\"\n"
             "\n"
             "fn @main(%%x: float32[1, 3, 8, 8]) -> float32[1, 4, 8, 8] attrs={\"input_names\": [\"x\"]} {\n"
             "  @c0: float32[4, 3, 3, 3] #%016" PRIx64 " \"conv.weight\"\n"
             "  %%0 = nn.conv2d(%%x, @c0, {\"dilation\": [1, 1], \"groups\": 1, \"padding\": [1, 1, 1, 1], \"strides\": [1, 1]}) : float32[1, 4, 8, 8]  // conv1\n"
             "  @c1: float32[4, 1, 1] #%016" PRIx64 "\n"
             "  %%1 = add(%%0, @c1) : float32[1, 4, 8, 8]\n"
             "  %%2 = nn.relu(%%1) : float32[1, 4, 8, 8]\n"
             "  %%3 = split(%%2, {\"axis\": 1, \"sizes\": [1, 3]}) : (float32[1, 1, 8, 8], float32[1, 3, 8, 8])\n"
             "  %%4 = %%3.1 : float32[1, 3, 8, 8]\n"
             "  %%5 = %%3.0 : float32[1, 1, 8, 8]\n"
             "  %%6 = concatenate(%%4, %%5, {\"axis\": 1}) : float32[1, 4, 8, 8]\n"
             "  %%6\n"
             "}\n",
             tth_tensor_hash(s.w), tth_tensor_hash(s.b));
    cr_assert_str_eq(text, expect);
    /* Deterministic: printing twice gives the same text. */
    char *again = tth_relay_print(s.m);
    cr_assert_str_eq(text, again);
    free(again);
    free(text);
    free_small(&s);
}

Test(relay, printer_shows_scalar_constants_and_function_calls)
{
    tth_relay_module *m = tth_relay_module_new("q");
    tth_ttype a = tt1(TTH_F32, 2), sc = {TTH_F32, 0, {0}};
    float half = 0.5f;
    tth_diag d;
    tth_rexpr *p = tth_relay_var(m, "p", &a);
    tth_rexpr *c = tth_relay_const(m, tth_tensor_new(&sc, &half), "alpha");
    tth_rexpr *pc[2] = {p, c};
    tth_rexpr *mul = tth_relay_call(m, TTH_OP_MULTIPLY, pc, 2, NULL, &d);
    tth_relay_function *f = tth_relay_function_add(m, "fused_mul", &p, 1, mul, json_pack("{s:i}", "Primitive", 1), &d);
    tth_rexpr *x = tth_relay_var(m, "x", &a);
    tth_rexpr *call = tth_relay_call_fn(m, f, &x, 1, &d);
    tth_relay_function_add(m, "main", &x, 1, call, NULL, &d);
    char *text = tth_relay_print_function(tth_relay_module_main(m));
    cr_assert_str_eq(text, "fn @main(%x: float32[2]) -> float32[2] {\n"
                           "  %0 = @fused_mul(%x) : float32[2]\n"
                           "  %0\n"
                           "}\n");
    free(text);
    text = tth_relay_print_function(f);
    char expect[512];
    snprintf(expect, sizeof expect,
             "fn @fused_mul(%%p: float32[2]) -> float32[2] attrs={\"Primitive\": 1} {\n"
             "  @c0: float32[] #%016" PRIx64 " = 0.5 \"alpha\"\n"
             "  %%0 = multiply(%%p, @c0) : float32[2]\n"
             "  %%0\n"
             "}\n",
             tth_tensor_hash(c->u.constant.value));
    cr_assert_str_eq(text, expect);
    free(text);
    tth_relay_module_free(m);
}

Test(relay, verify_catches_broken_modules)
{
    tth_diag d;
    small s = build_small();
    cr_assert_eq(tth_relay_verify(s.m, &d), 0, "%s", d.message);

    /* A recorded type that inference disagrees with. */
    tth_rexpr *cat = s.main_fn->body;
    cat->type.tensor.shape[1] = 5;
    cr_assert_eq(tth_relay_verify(s.m, &d), TTH_ETYPE);
    char want[256];
    snprintf(want, sizeof want, "function @main, node %u (concatenate)", cat->id);
    cr_assert_str_eq(d.location, want);
    cr_assert_str_eq(d.message, "recorded type float32[1, 5, 8, 8] differs from the inferred type float32[1, 4, 8, 8]");
    cat->type.tensor.shape[1] = 4;

    /* An attribute the op does not know. */
    json_object_set_new(cat->u.call.attrs, "bogus", json_true());
    cr_assert_eq(tth_relay_verify(s.m, &d), TTH_EINVAL);
    cr_assert_str_eq(d.message, "concatenate: unknown attribute 'bogus'");
    json_object_del(cat->u.call.attrs, "bogus");

    /* A var that is not a parameter. */
    tth_ttype t = tt4(TTH_F32, 1, 3, 8, 8);
    tth_rexpr *stray = tth_relay_var(s.m, "stray", &t);
    tth_rexpr *conv = cat->u.call.args[0]->u.get.tuple->u.call.args[0]->u.call.args[0]->u.call.args[0];
    tth_rexpr *x = conv->u.call.args[0];
    conv->u.call.args[0] = stray;
    cr_assert_eq(tth_relay_verify(s.m, &d), TTH_EINVAL);
    cr_assert_str_eq(d.message, "%stray is not a parameter of @main");
    conv->u.call.args[0] = x;

    /* A cycle. */
    tth_rexpr *relu = cat->u.call.args[0]->u.get.tuple->u.call.args[0];
    tth_rexpr *add = relu->u.call.args[0];
    relu->u.call.args[0] = cat;
    cr_assert_neq(tth_relay_verify(s.m, &d), 0);
    cr_assert_str_eq(d.message, "the body has a cycle or a node of another module");
    relu->u.call.args[0] = add;
    cr_assert_eq(tth_relay_verify(s.m, &d), 0, "%s", d.message);
    free_small(&s);
}

/* A module of @f(p) = tanh(p) (with attrs f_attrs) and @main(x) = @f(x), in that order. */
static tth_relay_module *main_calls_tanh(json_t *f_attrs)
{
    tth_relay_module *m = tth_relay_module_new("m");
    tth_ttype a = tt1(TTH_F32, 2);
    tth_diag d;
    tth_rexpr *p = tth_relay_var(m, "p", &a);
    tth_relay_function *f = tth_relay_function_add(m, "f", &p, 1, tth_relay_call(m, TTH_OP_TANH, &p, 1, NULL, &d),
                                                   f_attrs, &d);
    tth_rexpr *x = tth_relay_var(m, "x", &a);
    tth_rexpr *call = tth_relay_call_fn(m, f, &x, 1, &d);
    cr_assert_not_null(tth_relay_function_add(m, "main", &x, 1, call, NULL, &d), "%s", d.message);
    return m;
}

Test(relay, verify_catches_a_callee_outside_the_module)
{
    tth_relay_module *m = main_calls_tanh(NULL);
    tth_diag d;
    cr_assert_eq(tth_relay_verify(m, &d), 0, "%s", d.message);
    /* Drop @f from the list behind the API's back. */
    m->funcs[0] = m->funcs[1];
    m->nfuncs = 1;
    cr_assert_eq(tth_relay_verify(m, &d), TTH_EUNKNOWN);
    cr_assert_str_eq(d.message, "the callee @f is not a function of the module");
    m->nfuncs = 1;
    tth_relay_module_free(m);
}

Test(relay, json_round_trip)
{
    small s = build_small();
    json_t *j = tth_relay_to_json(s.m);
    cr_assert_not_null(j);
    cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "tiny");
    json_t *consts = json_object_get(j, "constants");
    cr_assert_eq(json_array_size(consts), 2);
    char hash[17];
    snprintf(hash, sizeof hash, "%016" PRIx64, tth_tensor_hash(s.w));
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(consts, 0), "hash")), hash);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(consts, 0), "name")), "conv.weight");
    json_t *fn = json_array_get(json_object_get(j, "functions"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(fn, "name")), "main");
    json_t *nodes = json_object_get(fn, "nodes");
    cr_assert_eq(json_array_size(nodes), 10);
    json_t *conv = json_array_get(nodes, 2);
    cr_assert_str_eq(json_string_value(json_object_get(conv, "op")), "nn.conv2d");
    cr_assert_str_eq(json_string_value(json_object_get(conv, "span")), "conv1");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(conv, "type"), "dtype")), "float32");

    /* Back, given the constants in any order. */
    tth_tensor *tensors[2] = {s.b, s.w};
    tth_diag d;
    tth_relay_module *back = tth_relay_from_json(j, tensors, 2, &d);
    cr_assert_not_null(back, "%s", d.message);
    cr_assert_eq(tth_relay_verify(back, &d), 0, "%s", d.message);
    char *t1 = tth_relay_print(s.m), *t2 = tth_relay_print(back);
    cr_assert_str_eq(t1, t2);
    free(t1);
    free(t2);
    json_t *j2 = tth_relay_to_json(back);
    char *d1 = json_dumps(j, JSON_SORT_KEYS), *d2 = json_dumps(j2, JSON_SORT_KEYS);
    cr_assert_str_eq(d1, d2);
    free(d1);
    free(d2);
    json_decref(j2);
    tth_relay_module_free(back);

    /* A missing constant is named by hash. */
    back = tth_relay_from_json(j, tensors, 1, &d);
    cr_assert_null(back);
    cr_assert_eq(d.code, TTH_ENOENT);
    char want[128];
    snprintf(want, sizeof want, "Relay JSON: no constant tensor has hash %s", hash);
    cr_assert_str_eq(d.message, want);

    /* A type that does not match is refused. */
    json_object_set_new(json_object_get(conv, "attrs"), "strides", json_pack("[ii]", 2, 2));
    back = tth_relay_from_json(j, tensors, 2, &d);
    cr_assert_null(back);
    cr_assert_eq(d.code, TTH_ETYPE);
    json_decref(j);
    free_small(&s);
}

Test(relay, json_round_trip_with_functions_called_before_defined)
{
    /* main is added first and calls @f, added later, as after fusion. */
    tth_relay_module *m = main_calls_tanh(json_pack("{s:i}", "Primitive", 1));
    tth_diag d;
    tth_relay_function *tmp = m->funcs[0];
    m->funcs[0] = m->funcs[1];
    m->funcs[1] = tmp;
    json_t *j = tth_relay_to_json(m);
    tth_relay_module *back = tth_relay_from_json(j, NULL, 0, &d);
    cr_assert_not_null(back, "%s", d.message);
    cr_assert_str_eq(back->funcs[0]->name, "main");
    cr_assert_str_eq(back->funcs[1]->name, "f");
    char *t1 = tth_relay_print(m), *t2 = tth_relay_print(back);
    cr_assert_str_eq(t1, t2);
    free(t1);
    free(t2);
    json_decref(j);
    tth_relay_module_free(back);
    tth_relay_module_free(m);
}

Test(relay, from_json_rejects_malformed_input)
{
    tth_diag d;
    json_t *j = json_pack("{s:s}", "name", "x");
    cr_assert_null(tth_relay_from_json(j, NULL, 0, &d));
    cr_assert_eq(d.code, TTH_EPARSE);
    json_decref(j);
    j = json_loads("{\"name\": \"m\", \"functions\": [{\"name\": \"main\", \"params\": [],"
                   " \"nodes\": [{\"id\": 4000000000, \"kind\": \"var\"}], \"result\": 0}]}",
                   0, NULL);
    cr_assert_null(tth_relay_from_json(j, NULL, 0, &d));
    cr_assert_str_eq(d.message, "Relay JSON: node id 4000000000 exceeds the 1 nodes listed");
    json_decref(j);
    j = json_loads("{\"name\": \"m\", \"constants\": [], \"functions\": [{\"name\": \"main\", \"params\": [0],"
                   " \"nodes\": [{\"id\": 0, \"kind\": \"var\", \"name\": \"x\", \"type\": {\"dtype\": \"float32\", \"shape\": [2]}},"
                   " {\"id\": 1, \"kind\": \"call\", \"op\": \"nn.bogus\", \"args\": [0], \"attrs\": {}, \"type\": {\"dtype\": \"float32\", \"shape\": [2]}}],"
                   " \"result\": 1}]}",
                   0, NULL);
    cr_assert_not_null(j);
    cr_assert_null(tth_relay_from_json(j, NULL, 0, &d));
    cr_assert_eq(d.code, TTH_EUNKNOWN);
    cr_assert_str_eq(d.message, "Relay JSON: unknown operator 'nn.bogus'");
    cr_assert_str_eq(d.location, "function @main");
    json_decref(j);
}

Test(relay, prune_drops_unreachable_functions)
{
    tth_relay_module *m = tth_relay_module_new("m");
    tth_ttype a = tt1(TTH_F32, 2);
    tth_diag d;
    tth_rexpr *p = tth_relay_var(m, "p", &a), *q = tth_relay_var(m, "q", &a), *r = tth_relay_var(m, "r", &a);
    tth_relay_function *used = tth_relay_function_add(m, "used", &p, 1, tth_relay_call(m, TTH_OP_EXP, &p, 1, NULL, &d), NULL, &d);
    tth_relay_function_add(m, "dead", &q, 1, tth_relay_call(m, TTH_OP_LOG, &q, 1, NULL, &d), NULL, &d);
    tth_rexpr *inner_call = tth_relay_call_fn(m, used, &r, 1, &d);
    tth_relay_function *mid = tth_relay_function_add(m, "mid", &r, 1, inner_call, NULL, &d);
    tth_rexpr *x = tth_relay_var(m, "x", &a);
    tth_relay_function_add(m, "main", &x, 1, tth_relay_call_fn(m, mid, &x, 1, &d), NULL, &d);
    cr_assert_eq(m->nfuncs, 4);
    tth_relay_module_prune(m);
    cr_assert_eq(m->nfuncs, 3);
    cr_assert_not_null(tth_relay_module_find(m, "used"));
    cr_assert_not_null(tth_relay_module_find(m, "mid"));
    cr_assert_null(tth_relay_module_find(m, "dead"));
    cr_assert_str_eq(m->funcs[0]->name, "used"); /* order kept */
    cr_assert_eq(tth_relay_verify(m, &d), 0, "%s", d.message);
    tth_relay_module_free(m);
}

/* Every key of every node removed, or replaced by a value of the wrong type: from_json either
 * rebuilds a module that verifies or returns a diagnostic; it never crashes or leaks. */
Test(relay, from_json_survives_damaged_input)
{
    small s = build_small();
    json_t *good = tth_relay_to_json(s.m);
    tth_tensor *tensors[2] = {s.w, s.b};
    json_t *fn0 = json_array_get(json_object_get(good, "functions"), 0);
    size_t nnodes = json_array_size(json_object_get(fn0, "nodes"));
    json_t *bad_values[3] = {json_string("x"), json_integer(-1), json_array()};
    int failures = 0, runs = 0;
    for (size_t i = 0; i < nnodes; i++) {
        const char *keys[] = {"id", "kind", "op", "args", "attrs", "type", "index", "name", "span"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            for (int v = -1; v < 3; v++) {
                json_t *j = json_deep_copy(good);
                json_t *node = json_array_get(json_object_get(json_array_get(json_object_get(j, "functions"), 0), "nodes"), i);
                if (!json_object_get(node, keys[k])) {
                    json_decref(j);
                    continue;
                }
                if (v < 0)
                    json_object_del(node, keys[k]);
                else
                    json_object_set(node, keys[k], bad_values[v]);
                tth_diag d;
                tth_diag_clear(&d);
                tth_relay_module *m = tth_relay_from_json(j, tensors, 2, &d);
                runs++;
                if (m) {
                    cr_assert_eq(tth_relay_verify(m, &d), 0, "rebuilt module does not verify: %s", d.message);
                    tth_relay_module_free(m);
                } else {
                    cr_assert_neq(d.code, 0, "node %zu key %s: NULL without a diagnostic", i, keys[k]);
                    cr_assert_neq(d.message[0], '\0');
                    failures++;
                }
                json_decref(j);
            }
        }
    }
    cr_assert_gt(runs, 100);
    cr_assert_gt(failures, runs / 2);
    for (int v = 0; v < 3; v++)
        json_decref(bad_values[v]);
    json_decref(good);
    free_small(&s);
}

Test(relay, printer_quotes_var_names_that_look_like_numbers)
{
    tth_relay_module *m = tth_relay_module_new("m");
    tth_ttype a = tt1(TTH_F32, 2);
    tth_diag d;
    tth_rexpr *x = tth_relay_var(m, "0", &a), *y = tth_relay_var(m, "input.1", &a);
    tth_rexpr *xy[2] = {x, y};
    tth_rexpr *s = tth_relay_call(m, TTH_OP_ADD, xy, 2, NULL, &d);
    tth_relay_function *f = tth_relay_function_add(m, "main", xy, 2, s, NULL, &d);
    char *text = tth_relay_print_function(f);
    cr_assert_str_eq(text, "fn @main(%\"0\": float32[2], %input.1: float32[2]) -> float32[2] {\n"
                           "  %0 = add(%\"0\", %input.1) : float32[2]\n"
                           "  %0\n"
                           "}\n");
    free(text);
    tth_relay_module_free(m);
}

/* The users index and readers plugins match patterns with (tth/relay.h, "Users and readers"):
 * counts (a split used by two tuple_gets, the result counting once), the sole user of an op, and
 * the cache kept while the function is unchanged and rebuilt once a node is added. */
Test(relay, users_index_and_readers)
{
    small s = build_small();
    tth_relay_users *cache = NULL;
    const tth_relay_users *u = tth_relay_users_of(&cache, s.main_fn);
    cr_assert_not_null(u);
    const tth_rexpr *cat = s.main_fn->body, *g1 = cat->u.call.args[0], *sp = g1->u.get.tuple;
    const tth_rexpr *relu = sp->u.call.args[0], *add = relu->u.call.args[0], *conv = add->u.call.args[0];
    cr_assert_eq(tth_relay_nusers(u, sp), 2);
    cr_assert_eq(tth_relay_nusers(u, cat), 1, "the result leaves the function");
    cr_assert_null(tth_relay_user(u, cat, 0));
    cr_assert_eq(tth_relay_user(u, conv, 0), add);
    cr_assert_eq(tth_relay_sole_user_op(u, add, TTH_OP_RELU), relu);
    cr_assert_null(tth_relay_sole_user_op(u, add, TTH_OP_ADD));
    cr_assert_null(tth_relay_sole_user_op(u, sp, TTH_OP_CONCATENATE), "two users");
    cr_assert(tth_rexpr_is_op(conv, TTH_OP_CONV2D));
    cr_assert_not(tth_rexpr_is_op(g1, TTH_OP_CONV2D));
    int64_t pad[4];
    cr_assert_eq(tth_call_attr_ints(conv, "padding", pad, 4), 4);
    cr_assert_eq(pad[3], 1);
    cr_assert_eq(tth_call_attr_ints(conv, "no_such", pad, 4), -1);
    cr_assert_eq(tth_call_attr_int(cat, "axis", 7), 1);
    cr_assert_eq(tth_call_attr_int(cat, "no_such", 7), 7);
    cr_assert_not_null(tth_rexpr_const(conv->u.call.args[1]));
    cr_assert_null(tth_rexpr_const(conv));
    double v;
    cr_assert_not(tth_rexpr_const_scalar(conv->u.call.args[1], &v), "a ramp has different elements");
    char buf[64];
    cr_assert_str_eq(tth_rexpr_type_str(sp, buf, sizeof buf), "tuple");
    cr_assert_null(tth_rexpr_ttype(sp));
    cr_assert_eq(tth_rexpr_ttype(conv)->rank, 4);
    /* unchanged: the same index; a node added to the module: rebuilt */
    cr_assert_eq(tth_relay_users_of(&cache, s.main_fn), u);
    tth_diag d;
    tth_diag_clear(&d);
    tth_rexpr *extra = tth_relay_call(s.m, TTH_OP_RELU, (tth_rexpr **)&relu, 1, NULL, &d);
    cr_assert_not_null(extra, "%s", d.message);
    const tth_relay_users *u2 = tth_relay_users_of(&cache, s.main_fn);
    cr_assert_not_null(u2);
    cr_assert_eq(tth_relay_nusers(u2, relu), 1, "the new relu is not in main's body");
    tth_relay_users_free(cache);
    free_small(&s);
}
