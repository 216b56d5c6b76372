/* ONNX import: diagnostics (unsupported operator, dynamic shape, malformed input), the Relay a
 * model becomes (shapes, attributes, folded shape arithmetic), and specific testdata models. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/mman.h>

#include "fe_test.h"
#include "onnx_build.h"

/* b imported as "t" (fe_try_import); b stays the caller's. */
static tth_relay_module *import_ob(ob *b, tth_diag *d, int *rc)
{
    size_t len;
    uint8_t *bytes = ob_pack(b, &len);
    tth_relay_module *m = fe_try_import(bytes, len, "t", d, rc);
    free(bytes);
    return m;
}

/* b does not import: the module is NULL and the code is code (any error when code is 0); d says
 * why. b stays the caller's. */
static void expect_refused(ob *b, int code, tth_diag *d)
{
    int rc;
    cr_assert_null(import_ob(b, d, &rc), "the model imported");
    if (code)
        cr_assert_eq(rc, code, "code %d: %s", rc, d->message);
}

/* b does not import (expect_refused) and the diagnostic's location is location; frees b. */
static void expect_refused_at(ob *b, int code, const char *location)
{
    tth_diag d;
    expect_refused(b, code, &d);
    cr_assert_str_eq(d.location, location);
    ob_free(b);
}

/* b imports (the test fails with the importer's message when not). b stays the caller's. */
static tth_relay_module *imported(ob *b)
{
    tth_diag d;
    int rc;
    tth_relay_module *m = import_ob(b, &d, &rc);
    cr_assert_eq(rc, 0, "%s at %s", d.message, d.location);
    return m;
}

static tth_relay_module *import_file(const char *rel, tth_diag *d)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/model.onnx", FE_TESTDATA, rel);
    size_t len;
    uint8_t *bytes = test_read_file(path, &len);
    cr_assert(bytes, "cannot read %s", path);
    tth_relay_module *m = NULL;
    tth_diag_clear(d);
    int rc = tth_onnx_import(bytes, len, "t", &m, d);
    free(bytes);
    cr_assert_eq(rc, 0, "%s: %s at %s", rel, d->message, d->location);
    return m;
}

static const tth_ttype *out_type(tth_relay_module *m)
{
    return &tth_relay_module_main(m)->body->type.tensor;
}

static void assert_shape(const tth_ttype *t, int rank, const int64_t *dims)
{
    char buf[128];
    tth_ttype_format(t, buf, sizeof buf);
    cr_assert_eq(t->rank, rank, "got %s", buf);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(t->shape[i], dims[i], "got %s", buf);
}

/* The n-th op call (topological order) of main with op `op`, or NULL. */
static tth_rexpr *find_op(tth_relay_module *m, tth_op op, int nth)
{
    tth_rexpr **nodes;
    int64_t n = tth_relay_topo(m, tth_relay_module_main(m), &nodes);
    for (int64_t i = 0; i < n; i++)
        if (nodes[i]->kind == TTH_REXPR_CALL && !nodes[i]->u.call.fn && nodes[i]->u.call.op == op && nth-- == 0)
            return nodes[i];
    return NULL;
}

static int count_calls(tth_relay_module *m)
{
    tth_rexpr **nodes;
    int64_t n = tth_relay_topo(m, tth_relay_module_main(m), &nodes);
    int c = 0;
    for (int64_t i = 0; i < n; i++)
        c += nodes[i]->kind == TTH_REXPR_CALL;
    return c;
}

static void json_ints_eq(const json_t *attrs, const char *key, const int64_t *want, size_t n)
{
    json_t *a = json_object_get(attrs, key);
    cr_assert(json_is_array(a), "attribute %s missing", key);
    cr_assert_eq(json_array_size(a), n, "attribute %s has %zu values", key, json_array_size(a));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(json_integer_value(json_array_get(a, i)), want[i], "attribute %s[%zu] = %lld, want %lld", key, i,
                     (long long)json_integer_value(json_array_get(a, i)), (long long)want[i]);
}

/* ---- diagnostics ---- */

Test(import, unsupported_operator_names_node_and_op)
{
    tth_diag d;
    int rc;
    ob b;
    ob_begin(&b, (const int64_t[]){1, 4}, 2);
    ob_node(&b, "Relu", "r", "x", "y");
    ob_node(&b, "NonMaxSuppression", "nms_1", "y,y", "z");
    ob_output(&b, "z");
    tth_relay_module *m = import_ob(&b, &d, &rc);
    cr_assert_null(m);
    cr_assert_eq(rc, TTH_EUNSUPPORTED);
    cr_assert_str_eq(d.message, "unsupported operator 'NonMaxSuppression'");
    cr_assert_str_eq(d.location, "node 'nms_1' (NonMaxSuppression)");
    ob_free(&b);
}

/* Outputs that would share a buffer are refused with their name: one listed twice, one that is
 * a graph input (an Identity node's own output is fine), and names that are not UTF-8. */
Test(import, outputs_of_one_name_or_an_input_are_refused)
{
    static const char *const cases[][3] = {
        /* outputs, expected message, location */
        {"y,y", "graph output 'y' is listed twice (outputs 0 and 1)", "output 'y'"},
        {"x", "graph output 'x' is also a graph input", "output 'x'"},
        {"y,x", "graph output 'x' is also a graph input", "output 'x'"},
    };
    int64_t dims[2] = {1, 4};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ob b;
        ob_init(&b, 13);
        ob_input(&b, "x", dims, 2);
        ob_node(&b, "Relu", "r", "x", "y");
        char outs[16];
        snprintf(outs, sizeof outs, "%s", cases[i][0]);
        for (char *tok = strtok(outs, ","); tok; tok = strtok(NULL, ","))
            ob_output(&b, tok);
        tth_diag d;
        int rc;
        tth_relay_module *m = import_ob(&b, &d, &rc);
        cr_assert_null(m, "outputs %s", cases[i][0]);
        cr_assert_eq(rc, TTH_EMODEL);
        cr_assert_str_eq(d.message, cases[i][1]);
        cr_assert_str_eq(d.location, cases[i][2]);
        ob_free(&b);
    }
    /* Identity(x) -> y, output y: a model of its own right */
    ob b;
    ob_init(&b, 13);
    ob_input(&b, "x", dims, 2);
    ob_node(&b, "Identity", "i", "x", "y");
    ob_output(&b, "y");
    tth_diag d;
    int rc;
    tth_relay_module *m = import_ob(&b, &d, &rc);
    cr_assert_not_null(m, "%s", d.message);
    tth_relay_module_free(m);
    ob_free(&b);
    /* an output named with bytes that are not UTF-8 */
    ob_init(&b, 13);
    ob_input(&b, "x", dims, 2);
    ob_node(&b, "Relu", "r", "x", "y\xff");
    ob_output(&b, "y\xff");
    m = import_ob(&b, &d, &rc);
    cr_assert_null(m);
    cr_assert_eq(rc, TTH_EMODEL);
    cr_assert_str_eq(d.message, "the name of graph output 0 is not valid UTF-8");
    ob_free(&b);
}

Test(import, unnamed_node_is_named_by_its_first_output)
{
    ob b;
    ob_begin(&b, (const int64_t[]){4}, 1);
    ob_node(&b, "Hardmax2", "", "x", "out7");
    ob_output(&b, "out7");
    expect_refused_at(&b, 0, "node 'out7' (Hardmax2)");
}

Test(import, dynamic_dimension_names_input_and_dim)
{
    ob b;
    ob_init(&b, 13);
    int64_t dims[2] = {0, 3};
    OB_PUSH(&b, b.graph.input, b.graph.n_input, ob_value_info(&b, "images", 1, dims, 2, "batch", 0));
    ob_node(&b, "Relu", "r", "images", "y");
    ob_output(&b, "y");
    tth_diag d;
    expect_refused(&b, TTH_EUNSUPPORTED, &d);
    cr_assert(strstr(d.message, "'images'") && strstr(d.message, "'batch'") && strstr(d.message, "dimension 0"),
              "message: %s", d.message);
    cr_assert_str_eq(d.location, "input 'images'");
    cr_assert(d.hint[0], "a dynamic shape comes with a hint");
    ob_free(&b);
}

Test(import, dynamic_shape_value_is_a_diagnostic)
{
    /* Reshape whose shape is a graph input: not static */
    ob b;
    ob_init(&b, 13);
    int64_t dims[2] = {2, 6}, sd[1] = {2};
    ob_input(&b, "x", dims, 2);
    OB_PUSH(&b, b.graph.input, b.graph.n_input, ob_value_info(&b, "shape", 7, sd, 1, NULL, -1));
    ob_node(&b, "Reshape", "rs", "x,shape", "y");
    ob_output(&b, "y");
    tth_diag d;
    expect_refused(&b, TTH_EUNSUPPORTED, &d);
    cr_assert_str_eq(d.location, "node 'rs' (Reshape)");
    cr_assert(strstr(d.message, "'shape'"), "message: %s", d.message);
    ob_free(&b);
}

Test(import, malformed_bytes)
{
    tth_relay_module *m = (tth_relay_module *)1;
    tth_diag d;
    tth_diag_clear(&d);
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x99};
    cr_assert_eq(tth_onnx_import(junk, sizeof junk, "t", &m, &d), TTH_EPARSE);
    cr_assert_null(m);
    cr_assert_eq(tth_onnx_import(NULL, 0, "t", &m, &d), TTH_EINVAL);
}

Test(import, every_truncation_of_a_model_is_handled)
{
    char path[512];
    snprintf(path, sizeof path, "%s/node/test_conv_with_strides_and_asymmetric_padding/model.onnx", FE_TESTDATA);
    size_t len;
    uint8_t *bytes = test_read_file(path, &len);
    cr_assert(bytes);
    int ok = 0;
    for (size_t n = 0; n <= len; n++) {
        tth_relay_module *m = NULL;
        tth_diag d;
        tth_diag_clear(&d);
        uint8_t *copy = malloc(n ? n : 1); /* exact-size buffer so ASan sees any overread */
        memcpy(copy, bytes, n);
        int rc = tth_onnx_import(copy, n, "t", &m, &d);
        free(copy);
        if (rc == 0) {
            ok++;
            tth_relay_module_free(m);
        } else {
            cr_assert(d.message[0], "an error at length %zu without a message", n);
        }
    }
    cr_assert_geq(ok, 1, "the whole model imports");
    free(bytes);
}

Test(import, missing_graph)
{
    ob b;
    ob_init(&b, 13);
    b.model.graph = NULL;
    tth_diag d;
    expect_refused(&b, TTH_EMODEL, &d);
    cr_assert(strstr(d.message, "no graph"), "%s", d.message);
    ob_free(&b);
}

Test(import, opset_out_of_range)
{
    ob b;
    ob_init(&b, 22); /* one past TTH_ONNX_MAX_OPSET */
    int64_t dims[1] = {4};
    ob_input(&b, "x", dims, 1);
    ob_node(&b, "Relu", "r", "x", "y");
    ob_output(&b, "y");
    tth_diag d;
    expect_refused(&b, TTH_EUNSUPPORTED, &d);
    cr_assert(strstr(d.message, "opset 22") && strstr(d.message, "1 to 21"), "%s", d.message);
    ob_free(&b);
}

Test(import, bad_tensor_size_names_the_initializer)
{
    ob b;
    ob_init(&b, 13);
    int64_t dims[2] = {2, 3}, wd[2] = {2, 3};
    float five[5] = {1, 2, 3, 4, 5};
    ob_input(&b, "x", dims, 2);
    OB_PUSH(&b, b.graph.initializer, b.graph.n_initializer, ob_tensor(&b, "w", 1, wd, 2, five, sizeof five));
    ob_node(&b, "Add", "a", "x,w", "y");
    ob_output(&b, "y");
    expect_refused_at(&b, TTH_EMODEL, "initializer 'w'");
}

Test(import, out_of_range_attributes)
{
    struct {
        const char *op, *attr;
        int64_t v;
    } cases[] = {{"Concat", "axis", 5}, {"Softmax", "axis", -9}, {"Flatten", "axis", 7}, {"Gather", "axis", 3}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ob b;
        ob_begin(&b, (const int64_t[]){2, 3}, 2);
        ob_init_i64(&b, "idx", (int64_t[]){1}, 1, (int64_t[]){0});
        Onnx__NodeProto *n = ob_node(&b, cases[k].op, "n", !strcmp(cases[k].op, "Gather") ? "x,idx" : "x", "y");
        ob_attr_i(&b, n, cases[k].attr, cases[k].v);
        ob_output(&b, "y");
        tth_diag d;
        int rc;
        cr_assert_null(import_ob(&b, &d, &rc), "%s accepted %s=%lld", cases[k].op, cases[k].attr, (long long)cases[k].v);
        cr_assert_eq(rc, TTH_EMODEL, "%s: %s", cases[k].op, d.message);
        cr_assert(strstr(d.location, cases[k].op), "%s", d.location);
        ob_free(&b);
    }
}

Test(import, zero_stride_is_rejected)
{
    ob b;
    ob_init(&b, 13);
    int64_t xd[4] = {1, 1, 4, 4}, wd[4] = {1, 1, 3, 3};
    float w[9] = {0};
    ob_input(&b, "x", xd, 4);
    ob_init_f32(&b, "w", wd, 4, w);
    Onnx__NodeProto *n = ob_node(&b, "Conv", "c", "x,w", "y");
    ob_attr_ints(&b, n, "strides", (int64_t[]){0, 1}, 2);
    ob_output(&b, "y");
    expect_refused_at(&b, 0, "node 'c' (Conv)");
}

/* ---- what a model becomes ---- */

Test(import, initializers_are_constants_and_inputs_params)
{
    const int64_t dims[2] = {2, 3};
    ob b;
    ob_begin(&b, dims, 2);
    ob_input(&b, "w", dims, 2); /* also an initializer: a constant, not a param */
    ob_init_f32(&b, "w", dims, 2, (const float[]){1, 2, 3, 4, 5, 6});
    ob_node(&b, "Add", "a", "x,w", "y");
    ob_node(&b, "Relu", "r", "y", "z");
    ob_output(&b, "y");
    ob_output(&b, "z");
    tth_relay_module *m = imported(&b);
    tth_relay_function *f = tth_relay_module_main(m);
    cr_assert_eq(f->nparams, 1);
    cr_assert_str_eq(f->params[0]->u.var.name, "x");
    cr_assert_eq(f->body->kind, TTH_REXPR_TUPLE, "two outputs make a tuple");
    cr_assert_eq(f->body->u.tuple.nfields, 2);
    json_t *outs = json_object_get(f->attrs, "output_names");
    cr_assert_str_eq(json_string_value(json_array_get(outs, 1)), "z");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(f->attrs, "input_names"), 0)), "x");
    tth_rexpr *add = find_op(m, TTH_OP_ADD, 0);
    cr_assert(add);
    cr_assert_eq(add->u.call.args[1]->kind, TTH_REXPR_CONST);
    fe_verify(m);
    tth_relay_module_free(m);
    ob_free(&b);
}

/* x [2] and the initializer k of ONNX element type elem (holding h), out = Mul(x, k) */
static void half_model(ob *b, int elem, const uint16_t *h, const char *out)
{
    const int64_t dims[1] = {2};
    ob_init(b, 13);
    OB_PUSH(b, b->graph.input, b->graph.n_input, ob_value_info(b, "x", elem, dims, 1, NULL, -1));
    OB_PUSH(b, b->graph.initializer, b->graph.n_initializer, ob_tensor(b, "k", elem, dims, 1, h, 2 * sizeof *h));
    ob_node(b, "Mul", "m", "x,k", out);
}

Test(import, float16_initializer_stays_f16)
{
    ob b;
    half_model(&b, 10, (const uint16_t[]){0x3c00, 0xc000} /* 1.0, -2.0 */, "y");
    ob_output(&b, "y");
    tth_relay_module *m = imported(&b);
    tth_rexpr *mul = find_op(m, TTH_OP_MULTIPLY, 0);
    const tth_tensor *k = mul->u.call.args[1]->u.constant.value;
    cr_assert_eq(k->type.dtype, TTH_F16);
    cr_assert_float_eq(tth_tensor_get_f64(k, 1), -2.0, 1e-9);
    tth_relay_module_free(m);
    ob_free(&b);
}

/* bfloat16 (ONNX elem type 16): a graph input, an initializer (its bits kept, not widened) and
 * the output stay bfloat16; Cast to 16 is a cast to bfloat16. */
Test(import, bfloat16_input_initializer_and_cast_stay_bf16)
{
    ob b;
    const uint16_t h[2] = {0x3f80, 0xc0a0}; /* 1.0, -5.0 */
    half_model(&b, 16, h, "p");
    ob_attr_i(&b, ob_node(&b, "Cast", "c", "p", "q"), "to", 1);
    ob_attr_i(&b, ob_node(&b, "Cast", "c2", "q", "y"), "to", 16);
    ob_output(&b, "y");
    tth_relay_module *m = imported(&b);
    tth_relay_function *f = tth_relay_module_main(m);
    cr_assert_eq(f->params[0]->type.tensor.dtype, TTH_BF16);
    tth_rexpr *mul = find_op(m, TTH_OP_MULTIPLY, 0);
    const tth_tensor *k = mul->u.call.args[1]->u.constant.value;
    cr_assert_eq(k->type.dtype, TTH_BF16);
    cr_assert_eq(memcmp(k->data, h, sizeof h), 0);
    cr_assert_eq(tth_tensor_get_f64(k, 1), -5.0);
    cr_assert_eq(f->body->type.tensor.dtype, TTH_BF16);
    tth_relay_module_free(m);
    ob_free(&b);
}

Test(import, shape_arithmetic_is_folded)
{
    /* y = Reshape(x, Concat(Slice(Shape(x), 0, 1), [-1])): static [1, 48] */
    ob b;
    ob_init(&b, 13);
    int64_t xd[4] = {1, 3, 4, 4}, one[1] = {1};
    ob_input(&b, "x", xd, 4);
    ob_init_i64(&b, "s0", one, 1, (int64_t[]){0});
    ob_init_i64(&b, "s1", one, 1, (int64_t[]){1});
    ob_init_i64(&b, "m1", one, 1, (int64_t[]){-1});
    ob_node(&b, "Shape", "sh", "x", "shape");
    ob_node(&b, "Slice", "sl", "shape,s0,s1", "n");
    Onnx__NodeProto *c = ob_node(&b, "Concat", "cat", "n,m1", "newshape");
    ob_attr_i(&b, c, "axis", 0);
    ob_node(&b, "Reshape", "rs", "x,newshape", "y");
    ob_output(&b, "y");
    tth_relay_module *m = imported(&b);
    assert_shape(out_type(m), 2, (int64_t[]){1, 48});
    cr_assert_eq(count_calls(m), 1, "only the reshape is left");
    tth_rexpr *rs = find_op(m, TTH_OP_RESHAPE, 0);
    cr_assert(rs);
    json_ints_eq(rs->u.call.attrs, "newshape", (int64_t[]){1, 48}, 2);
    tth_relay_module_free(m);
    ob_free(&b);
}

Test(import, reshape_zero_and_minus_one)
{
    int64_t xd[3] = {2, 3, 4};
    struct {
        int64_t shape[3];
        int allowzero, ok;
        int64_t want[3];
    } cases[] = {
        {{0, -1, 2}, 0, 1, {2, 6, 2}},
        {{-1, 0, 4}, 0, 1, {2, 3, 4}},
        {{0, 4, 3}, 1, 0, {0}}, /* allowzero: a real 0 dim; 24 elements do not fit */
    };
    for (size_t k = 0; k < 3; k++) {
        ob b;
        ob_init(&b, 14);
        ob_input(&b, "x", xd, 3);
        ob_init_i64(&b, "s", (int64_t[]){3}, 1, cases[k].shape);
        Onnx__NodeProto *n = ob_node(&b, "Reshape", "rs", "x,s", "y");
        ob_attr_i(&b, n, "allowzero", cases[k].allowzero);
        ob_output(&b, "y");
        tth_diag d;
        int rc;
        tth_relay_module *m = import_ob(&b, &d, &rc);
        if (cases[k].ok) {
            cr_assert_eq(rc, 0, "case %zu: %s", k, d.message);
            assert_shape(out_type(m), 3, cases[k].want);
            tth_relay_module_free(m);
        } else {
            cr_assert_neq(rc, 0, "case %zu imported", k);
        }
        ob_free(&b);
    }
}

static tth_relay_module *conv_model(const char *auto_pad, int64_t hw, int64_t stride)
{
    ob b;
    ob_init(&b, 13);
    int64_t xd[4] = {1, 1, hw, hw}, wd[4] = {1, 1, 3, 3};
    float w[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ob_input(&b, "x", xd, 4);
    ob_init_f32(&b, "w", wd, 4, w);
    Onnx__NodeProto *n = ob_node(&b, "Conv", "c", "x,w", "y");
    ob_attr_s(&b, n, "auto_pad", auto_pad);
    ob_attr_ints(&b, n, "strides", (int64_t[]){stride, stride}, 2);
    ob_output(&b, "y");
    return fe_import_ob(&b);
}

/* out 3 for SAME_UPPER at 6, stride 2: total padding (3-1)*2+3-6 = 1, the extra one at the end;
 * SAME_LOWER puts it first; the output's side (0: not checked) */
Test(import, auto_pad_is_explicit_padding)
{
    static const struct {
        const char *auto_pad;
        int64_t hw, stride, padding[4], out;
    } cases[] = {
        {"SAME_UPPER", 6, 2, {0, 0, 1, 1}, 3},
        {"SAME_LOWER", 6, 2, {1, 1, 0, 0}, 0},
        {"VALID", 6, 1, {0, 0, 0, 0}, 4},
        {"SAME_UPPER", 5, 1, {1, 1, 1, 1}, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tth_relay_module *m = conv_model(cases[k].auto_pad, cases[k].hw, cases[k].stride);
        json_ints_eq(find_op(m, TTH_OP_CONV2D, 0)->u.call.attrs, "padding", cases[k].padding, 4);
        if (cases[k].out)
            assert_shape(out_type(m), 4, (int64_t[]){1, 1, cases[k].out, cases[k].out});
        tth_relay_module_free(m);
    }
}

Test(import, conv1d_goes_through_conv2d)
{
    tth_diag d;
    tth_relay_module *m = import_file("pytorch-converted/test_Conv1d_stride", &d);
    tth_rexpr *conv = find_op(m, TTH_OP_CONV2D, 0);
    cr_assert(conv, "a 1-D Conv becomes nn.conv2d");
    cr_assert_eq(conv->u.call.args[0]->type.tensor.rank, 4);
    cr_assert_eq(conv->u.call.args[0]->type.tensor.shape[2], 1, "the added spatial dim has size 1");
    cr_assert_eq(out_type(m)->rank, 3, "the result is reshaped back to rank 3");
    tth_relay_module_free(m);
}

static tth_relay_module *softmax_model(int64_t opset)
{
    ob b;
    ob_init(&b, opset);
    int64_t xd[3] = {2, 3, 4};
    ob_input(&b, "x", xd, 3);
    Onnx__NodeProto *n = ob_node(&b, "Softmax", "sm", "x", "y");
    ob_attr_i(&b, n, "axis", 1);
    ob_output(&b, "y");
    return fe_import_ob(&b);
}

Test(import, softmax_axis_semantics_by_opset)
{
    /* opset 11: the input is flattened to [2, 12] at axis 1 */
    tth_relay_module *m = softmax_model(11);
    tth_rexpr *sm = find_op(m, TTH_OP_SOFTMAX, 0);
    assert_shape(&sm->u.call.args[0]->type.tensor, 2, (int64_t[]){2, 12});
    assert_shape(out_type(m), 3, (int64_t[]){2, 3, 4});
    tth_relay_module_free(m);
    /* opset 13: one axis, no reshape */
    m = softmax_model(13);
    sm = find_op(m, TTH_OP_SOFTMAX, 0);
    cr_assert_eq(count_calls(m), 1);
    cr_assert_eq(json_integer_value(json_object_get(sm->u.call.attrs, "axis")), 1);
    tth_relay_module_free(m);
}

Test(import, clip_attribute_and_input_forms)
{
    for (int form = 0; form < 2; form++) {
        ob b;
        ob_init(&b, form ? 13 : 6);
        int64_t xd[1] = {4};
        ob_input(&b, "x", xd, 1);
        Onnx__NodeProto *n;
        if (form) {
            float lo = -1.5f, hi = 2.0f;
            OB_PUSH(&b, b.graph.initializer, b.graph.n_initializer, ob_tensor(&b, "lo", 1, NULL, 0, &lo, 4));
            OB_PUSH(&b, b.graph.initializer, b.graph.n_initializer, ob_tensor(&b, "hi", 1, NULL, 0, &hi, 4));
            n = ob_node(&b, "Clip", "c", "x,lo,hi", "y");
        } else {
            n = ob_node(&b, "Clip", "c", "x", "y");
            ob_attr_f(&b, n, "min", -1.5f);
            ob_attr_f(&b, n, "max", 2.0f);
        }
        ob_output(&b, "y");
        tth_relay_module *m = imported(&b);
        tth_rexpr *c = find_op(m, TTH_OP_CLIP, 0);
        cr_assert_float_eq(json_number_value(json_object_get(c->u.call.attrs, "a_min")), -1.5, 1e-9);
        cr_assert_float_eq(json_number_value(json_object_get(c->u.call.attrs, "a_max")), 2.0, 1e-9);
        tth_relay_module_free(m);
        ob_free(&b);
    }
}

Test(import, slice_negative_steps_are_normalized)
{
    /* x[5]; starts -1, ends -100 (before the start), steps -2: indices 4, 2, 0 */
    ob b;
    ob_init(&b, 13);
    int64_t xd[1] = {5}, one[1] = {1};
    ob_input(&b, "x", xd, 1);
    ob_init_i64(&b, "st", one, 1, (int64_t[]){-1});
    ob_init_i64(&b, "en", one, 1, (int64_t[]){-100});
    ob_init_i64(&b, "ax", one, 1, (int64_t[]){0});
    ob_init_i64(&b, "sp", one, 1, (int64_t[]){-2});
    ob_node(&b, "Slice", "sl", "x,st,en,ax,sp", "y");
    ob_output(&b, "y");
    tth_relay_module *m = imported(&b);
    tth_rexpr *s = find_op(m, TTH_OP_STRIDED_SLICE, 0);
    json_ints_eq(s->u.call.attrs, "begin", (int64_t[]){4}, 1);
    json_ints_eq(s->u.call.attrs, "end", (int64_t[]){-1}, 1);
    json_ints_eq(s->u.call.attrs, "strides", (int64_t[]){-2}, 1);
    assert_shape(out_type(m), 1, (int64_t[]){3});
    /* and the evaluator agrees */
    tth_ttype xt = {.dtype = TTH_F32, .rank = 1, .shape = {5}};
    float xv[5] = {10, 11, 12, 13, 14};
    tth_tensor *x = tth_tensor_new(&xt, xv);
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_relay_bind_params(m, &x, 1, &d), 0, "%s", d.message);
    tth_tensor_unref(x);
    cr_assert_eq(tth_relay_fold_constants(m, &d), 0, "%s", d.message);
    tth_rexpr *body = tth_relay_module_main(m)->body;
    cr_assert_eq(body->kind, TTH_REXPR_CONST);
    cr_assert_float_eq(tth_tensor_get_f64(body->u.constant.value, 0), 14, 0);
    cr_assert_float_eq(tth_tensor_get_f64(body->u.constant.value, 1), 12, 0);
    cr_assert_float_eq(tth_tensor_get_f64(body->u.constant.value, 2), 10, 0);
    tth_relay_module_free(m);
    ob_free(&b);
}

Test(import, printed_relay_names_ops_and_types)
{
    tth_diag d;
    tth_relay_module *m = import_file("pytorch-converted/test_Conv2d", &d);
    char *text = tth_relay_print(m);
    cr_assert(text);
    cr_assert(strstr(text, "nn.conv2d"), "%s", text);
    cr_assert(strstr(text, "fn @main("), "%s", text);
    char ty[128];
    tth_ttype_format(out_type(m), ty, sizeof ty);
    cr_assert(strstr(text, ty), "the printed text names the result type %s", ty);
    free(text);
    tth_relay_module_free(m);
}

Test(import, testdata_shapes)
{
    struct {
        const char *model;
        int rank;
        int64_t dims[4];
    } cases[] = {
        {"node/test_conv_with_autopad_same", 4, {1, 1, 3, 3}},
        {"node/test_convtranspose_output_shape", 4, {1, 2, 10, 8}},
        {"node/test_maxpool_2d_ceil", 4, {1, 1, 2, 2}},
        {"node/test_averagepool_2d_same_lower", 4, {1, 3, 32, 32}},
        {"node/test_gemm_all_attributes", 2, {3, 5}},
        {"node/test_flatten_axis2", 2, {6, 20}},
        {"node/test_globalaveragepool", 4, {1, 3, 1, 1}},
        {"pytorch-converted/test_MaxPool1d_stride", 3, {2, 10, 1}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tth_diag d;
        tth_relay_module *m = import_file(cases[k].model, &d);
        assert_shape(out_type(m), cases[k].rank, cases[k].dims);
        tth_relay_module_free(m);
    }
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

Test(import, deeply_nested_messages_are_refused)
{
    /* Model{graph{node{attribute{g{node{attribute{g ...}}}}}}} 100000 levels deep: protobuf-c
     * would recurse once per level and overflow the stack */
    const int depth = 100000;
    size_t cap = (size_t)depth * 3 * 12 + 64, used = 0;
    uint8_t *hdr = malloc(cap), tmp[12];
    uint64_t inner = 0;
    /* headers from the inside out, written backwards into the end of the buffer */
    size_t pos = cap;
    const int fields[3] = {6, 5, 1}; /* AttributeProto.g, NodeProto.attribute, GraphProto.node */
    for (int i = 0; i < depth; i++)
        for (int k = 0; k < 3; k++) {
            size_t n = put_varint(tmp, ((uint64_t)fields[k] << 3) | 2);
            n += put_varint(tmp + n, inner);
            pos -= n;
            memcpy(hdr + pos, tmp, n);
            inner += n;
        }
    size_t n = put_varint(tmp, (7u << 3) | 2); /* ModelProto.graph */
    n += put_varint(tmp + n, inner);
    pos -= n;
    memcpy(hdr + pos, tmp, n);
    pos -= 2;
    hdr[pos] = 1 << 3; /* ModelProto.ir_version = 8 */
    hdr[pos + 1] = 8;
    used = cap - pos;
    tth_relay_module *m = NULL;
    tth_diag d;
    tth_diag_clear(&d);
    int rc = tth_onnx_import(hdr + pos, used, "deep", &m, &d);
    cr_assert_eq(rc, TTH_ELIMIT, "%s", d.message);
    cr_assert_null(m);
    free(hdr);
}

/* ---- ai.onnx.preview.training and TfIdfVectorizer (docs/operators.md "Training operators") ---- */

/* A model whose only operator set is ai.onnx.preview.training (as ONNX's optimizer tests). */
static void ob_training_only(ob *b)
{
    b->opset.domain = (char *)"ai.onnx.preview.training";
    b->opset.version = 1;
}

/* Momentum(R, T, X, G, V) over one [3] tensor, R and T scalars. */
static Onnx__NodeProto *momentum_model(ob *b)
{
    ob_init(b, 1);
    ob_training_only(b);
    int64_t d3[1] = {3};
    ob_input(b, "R", NULL, 0);
    OB_PUSH(b, b->graph.input, b->graph.n_input, ob_value_info(b, "T", 7, NULL, 0, NULL, -1));
    ob_input(b, "X", d3, 1);
    ob_input(b, "G", d3, 1);
    ob_input(b, "V", d3, 1);
    Onnx__NodeProto *n = ob_node(b, "Momentum", "mom", "R,T,X,G,V", "X_new,V_new");
    n->domain = (char *)"ai.onnx.preview.training";
    ob_output(b, "X_new");
    ob_output(b, "V_new");
    return n;
}

Test(import, training_domain_alone_is_accepted)
{
    ob b;
    Onnx__NodeProto *n = momentum_model(&b);
    ob_attr_f(&b, n, "alpha", 0.9f);
    ob_attr_f(&b, n, "beta", 0.1f);
    ob_attr_f(&b, n, "norm_coefficient", 0.f);
    ob_attr_s(&b, n, "mode", "nesterov");
    tth_relay_module *m = imported(&b);
    cr_assert_not_null(find_op(m, TTH_OP_WHERE, 0), "beta is chosen by T > 0");
    tth_relay_module_free(m);
    /* an operator of the default set in such a model is refused by name */
    ob_node(&b, "Relu", "r", "X_new", "Z");
    ob_output(&b, "Z");
    tth_diag d;
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "'Relu' of the default ONNX operator set"), "%s", d.message);
    cr_assert_str_eq(d.location, "node 'r' (Relu)");
    ob_free(&b);
}

Test(import, momentum_requires_its_attributes)
{
    ob b;
    Onnx__NodeProto *n = momentum_model(&b);
    ob_attr_f(&b, n, "alpha", 0.9f);
    ob_attr_i(&b, n, "beta", 1); /* of the wrong type */
    ob_attr_f(&b, n, "norm_coefficient", 0.f);
    ob_attr_s(&b, n, "mode", "standard");
    tth_diag d;
    expect_refused(&b, TTH_EMODEL, &d);
    cr_assert(strstr(d.message, "float attribute 'beta'"), "%s", d.message);
    cr_assert_str_eq(d.location, "node 'mom' (Momentum)");
    n->attribute[1]->has_f = 1;
    n->attribute[1]->has_i = 0;
    n->attribute[3]->s.len = 4; /* "stan" */
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "mode 'stan'"), "%s", d.message);
    n->n_output = 1; /* V_new missing */
    n->attribute[3]->s.len = 8;
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "has 2 outputs; the node lists 1"), "%s", d.message);
    ob_free(&b);
}

/* y = unary(a) * b, Gradient of y with respect to a and b. */
static Onnx__NodeProto *gradient_model(ob *b, const char *unary)
{
    ob_init(b, 13);
    OB_PUSH(b, b->model.opset_import, b->model.n_opset_import, ob_alloc(b, sizeof(Onnx__OperatorSetIdProto)));
    Onnx__OperatorSetIdProto *o = b->model.opset_import[1];
    onnx__operator_set_id_proto__init(o);
    o->domain = (char *)"ai.onnx.preview.training";
    o->has_version = 1;
    o->version = 1;
    int64_t d2[2] = {2, 3}, d1[1] = {3};
    ob_input(b, "a", d2, 2);
    ob_input(b, "b", d1, 1);
    ob_node(b, unary, "u", "a", "e");
    ob_node(b, "Mul", "mul", "e,b", "y");
    Onnx__NodeProto *n = ob_node(b, "Gradient", "grad", "a,b", "ga,gb");
    n->domain = (char *)"ai.onnx.preview.training";
    Onnx__AttributeProto *xs = ob_attr(b, n, "xs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    xs->n_strings = 2;
    xs->strings = ob_alloc(b, 2 * sizeof *xs->strings);
    xs->strings[0] = (ProtobufCBinaryData){1, (uint8_t *)ob_str(b, "a")};
    xs->strings[1] = (ProtobufCBinaryData){1, (uint8_t *)ob_str(b, "b")};
    ob_attr_s(b, n, "y", "y");
    ob_output(b, "ga");
    ob_output(b, "gb");
    return n;
}

Test(import, gradient_sums_over_broadcast_axes)
{
    ob b;
    gradient_model(&b, "Neg");
    tth_relay_module *m = imported(&b);
    const tth_rexpr *body = tth_relay_module_main(m)->body;
    int64_t d2[2] = {2, 3}, d1[1] = {3};
    assert_shape(&body->u.tuple.fields[0]->type.tensor, 2, d2);
    assert_shape(&body->u.tuple.fields[1]->type.tensor, 1, d1);
    tth_rexpr *sum = find_op(m, TTH_OP_SUM, 0);
    cr_assert_not_null(sum, "b's gradient is summed over the axis it was broadcast along");
    int64_t ax[1] = {0};
    json_ints_eq(sum->u.call.attrs, "axis", ax, 1);
    tth_relay_module_free(m);
    ob_free(&b);
}

Test(import, gradient_through_an_unsupported_operator_is_refused)
{
    ob b;
    gradient_model(&b, "Exp");
    tth_diag d;
    expect_refused(&b, TTH_EUNSUPPORTED, &d);
    cr_assert_str_eq(d.message, "Gradient through operator 'exp' (node 'u') is not supported");
    cr_assert_str_eq(d.location, "node 'grad' (Gradient)");
    ob_free(&b);
}

Test(import, gradient_names_must_match_its_inputs)
{
    ob b;
    Onnx__NodeProto *n = gradient_model(&b, "Neg");
    n->input[1] = (char *)"e"; /* not the value of xs[1] */
    tth_diag d;
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "input 1 of Gradient is not the value of 'b'"), "%s", d.message);
    n->input[1] = (char *)"b";
    n->attribute[1]->s.data = (uint8_t *)"q"; /* y names no value */
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "y 'q'"), "%s", d.message);
    n->attribute[1]->s.data = (uint8_t *)"y";
    n->attribute[0]->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    n->attribute[0]->n_strings = 0; /* xs of the wrong type */
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "needs the attributes 'xs'"), "%s", d.message);
    cr_assert_str_eq(d.location, "node 'grad' (Gradient)");
    ob_free(&b);
}

/* TfIdfVectorizer over x [2, 5] int64 with unigrams {1, 2} and the bigram (1, 2). */
static Onnx__NodeProto *tfidf_model(ob *b)
{
    ob_init(b, 9);
    int64_t d2[2] = {2, 5};
    OB_PUSH(b, b->graph.input, b->graph.n_input, ob_value_info(b, "x", 7, d2, 2, NULL, -1));
    Onnx__NodeProto *n = ob_node(b, "TfIdfVectorizer", "tfidf", "x", "y");
    int64_t pool[4] = {1, 2, 1, 2}, counts[2] = {0, 2}, idx[3] = {0, 1, 2};
    ob_attr_i(b, n, "min_gram_length", 1);
    ob_attr_i(b, n, "max_gram_length", 2);
    ob_attr_i(b, n, "max_skip_count", 1);
    ob_attr_s(b, n, "mode", "TF");
    ob_attr_ints(b, n, "pool_int64s", pool, 4);
    ob_attr_ints(b, n, "ngram_counts", counts, 2);
    ob_attr_ints(b, n, "ngram_indexes", idx, 3);
    ob_output(b, "y");
    return n;
}

Test(import, tfidf_output_shape_is_the_largest_index_plus_one)
{
    ob b;
    Onnx__NodeProto *n = tfidf_model(&b);
    n->attribute[6]->ints[2] = 6;
    tth_relay_module *m = imported(&b);
    int64_t want[2] = {2, 7};
    assert_shape(out_type(m), 2, want);
    tth_relay_module_free(m);
    ob_free(&b);
}

Test(import, tfidf_malformed_attributes_are_refused)
{
    ob b;
    Onnx__NodeProto *n = tfidf_model(&b);
    tth_diag d;
    n->attribute[5]->ints[1] = 3; /* the bigrams would start inside one */
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "ngram_counts[1] = 3"), "%s", d.message);
    cr_assert_str_eq(d.location, "node 'tfidf' (TfIdfVectorizer)");
    n->attribute[5]->ints[1] = 2;
    n->attribute[6]->n_ints = 2; /* three n-grams, two indexes */
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "holds 3 n-grams; ngram_indexes has 2"), "%s", d.message);
    n->attribute[6]->n_ints = 3;
    n->attribute[6]->ints[0] = -1;
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "ngram_indexes[0] = -1"), "%s", d.message);
    n->attribute[6]->ints[0] = 0;
    n->attribute[0]->i = -2; /* a negative length */
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "min_gram_length"), "%s", d.message);
    n->attribute[0]->i = 1;
    n->attribute[5]->ints[0] = 1; /* the unigrams do not start the pool */
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "ngram_counts"), "%s", d.message);
    n->attribute[5]->ints[0] = 0;
    ob_attr_s(&b, n, "weights", "x"); /* weights of the wrong type: ignored in TF mode... */
    n->attribute[3]->s.data = (uint8_t *)"IDF"; /* ... and none in IDF mode */
    n->attribute[3]->s.len = 3;
    tth_relay_module *m = imported(&b);
    tth_relay_module_free(m);
    float w[2] = {1, 2};
    Onnx__AttributeProto *wa = n->attribute[7];
    wa->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    wa->n_floats = 2;
    wa->floats = w; /* two weights for three n-grams */
    expect_refused(&b, 0, &d);
    cr_assert(strstr(d.message, "2 weights for 3 n-grams"), "%s", d.message);
    ob_free(&b);
}

Test(import, tfidf_over_strings_is_refused_by_name)
{
    ob b;
    Onnx__NodeProto *n = tfidf_model(&b);
    ob_attr_s(&b, n, "pool_strings", "a");
    tth_diag d;
    expect_refused(&b, TTH_EUNSUPPORTED, &d);
    cr_assert_str_eq(d.message, "TfIdfVectorizer over strings (pool_strings) is not supported");
    cr_assert_str_eq(d.location, "node 'tfidf' (TfIdfVectorizer)");
    ob_free(&b);
}

/* ---- DFT, STFT and MelWeightMatrix (docs/operators.md "DFT, STFT and MelWeightMatrix") ---- */

/* DFT of x [2, 6, 3, c] (axis 1 by default); dft_length n an initializer (n > 0), a graph input
 * (n < 0) or absent (0). */
static Onnx__NodeProto *dft_model(ob *b, int64_t c, int64_t n)
{
    ob_init(b, 17);
    ob_input(b, "x", (int64_t[]){2, 6, 3, c}, 4);
    if (n > 0)
        ob_init_i64(b, "n", NULL, 0, &n);
    if (n < 0)
        OB_PUSH(b, b->graph.input, b->graph.n_input, ob_value_info(b, "n", 7, NULL, 0, NULL, -1));
    Onnx__NodeProto *node = ob_node(b, "DFT", "dft", n ? "x,n" : "x", "y");
    ob_output(b, "y");
    return node;
}

/* Import refused with code, the message holding want. */
static void assert_refused(ob *b, int code, const char *want)
{
    tth_diag d;
    int rc;
    cr_assert_null(import_ob(b, &d, &rc));
    cr_assert_eq(rc, code, "%s", d.message);
    cr_assert(strstr(d.message, want), "%s", d.message);
}

Test(import, dft_is_one_matmul_by_a_constant_matrix)
{
    ob b;
    ob_attr_i(&b, dft_model(&b, 1, 9), "onesided", 1); /* 6 samples zero-padded to 9: bins 0 .. 4 */
    tth_relay_module *m = imported(&b);
    assert_shape(out_type(m), 4, (int64_t[]){2, 5, 3, 2});
    tth_rexpr *mm = find_op(m, TTH_OP_MATMUL, 0);
    cr_assert(mm && !find_op(m, TTH_OP_MATMUL, 1));
    cr_assert_eq(mm->u.call.args[1]->kind, TTH_REXPR_CONST);
    assert_shape(&mm->u.call.args[1]->type.tensor, 2, (int64_t[]){6, 10});
    tth_relay_module_free(m);
    ob_free(&b);
}

Test(import, dft_refusals_name_the_input_or_attribute)
{
    ob b;
    dft_model(&b, 1, -1);
    assert_refused(&b, TTH_EUNSUPPORTED, "input 'dft_length' is not a constant");
    ob_free(&b);
    ob_attr_i(&b, dft_model(&b, 2, 0), "onesided", 1);
    assert_refused(&b, TTH_EUNSUPPORTED, "unsupported attribute value: DFT onesided 1 with a complex input");
    ob_free(&b);
    Onnx__NodeProto *n = dft_model(&b, 1, 0);
    ob_attr_i(&b, n, "onesided", 1);
    ob_attr_i(&b, n, "inverse", 1);
    assert_refused(&b, TTH_EUNSUPPORTED, "unsupported attribute value: DFT onesided 1 with inverse 1");
    ob_free(&b);
    ob_attr_i(&b, dft_model(&b, 1, 0), "axis", -1);
    assert_refused(&b, TTH_EMODEL, "DFT axis -1 is out of range for rank 4");
    ob_free(&b);
}

/* STFT of x [2, 40, 1] every 6 samples: frame_step an initializer or (step_input) a graph input,
 * the window [10] a graph input or, without one, frame_length 10 a graph input. */
static void stft_model(ob *b, int step_input, int window)
{
    ob_init(b, 17);
    ob_input(b, "x", (int64_t[]){2, 40, 1}, 3);
    if (step_input)
        OB_PUSH(b, b->graph.input, b->graph.n_input, ob_value_info(b, "s", 7, NULL, 0, NULL, -1));
    else
        ob_init_i64(b, "s", NULL, 0, (int64_t[]){6});
    if (window)
        ob_input(b, "w", (int64_t[]){10}, 1);
    else
        OB_PUSH(b, b->graph.input, b->graph.n_input, ob_value_info(b, "l", 7, NULL, 0, NULL, -1));
    ob_attr_i(b, ob_node(b, "STFT", "stft", window ? "x,s,w" : "x,s,,l", "y"), "onesided", 0);
    ob_output(b, "y");
}

Test(import, stft_frames_a_signal_and_names_non_constant_inputs)
{
    ob b;
    stft_model(&b, 0, 1);
    tth_relay_module *m = imported(&b);
    assert_shape(out_type(m), 4, (int64_t[]){2, 6, 10, 2}); /* 1 + (40 - 10) / 6 frames */
    tth_rexpr *take = find_op(m, TTH_OP_TAKE, 0);
    cr_assert(take);
    assert_shape(&take->u.call.args[1]->type.tensor, 2, (int64_t[]){6, 10});
    tth_relay_module_free(m);
    ob_free(&b);
    stft_model(&b, 1, 1);
    assert_refused(&b, TTH_EUNSUPPORTED, "input 'frame_step' is not a constant");
    ob_free(&b);
    stft_model(&b, 0, 0);
    assert_refused(&b, TTH_EUNSUPPORTED, "input 'frame_length' is not a constant");
    ob_free(&b);
}

/* MelWeightMatrix of ONNX's node test (8 bands, a 16-point DFT at 8192 Hz, 0 to 4096 Hz), its
 * inputs initializers, or num_mel_bins a graph input. */
static void mel_model(ob *b, int bins_input)
{
    ob_init(b, 17);
    int32_t iv[3] = {8, 16, 8192};
    float fv[2] = {0, 4096};
    const char *names[5] = {"bins", "len", "rate", "lo", "hi"};
    for (int i = bins_input; i < 5; i++)
        OB_PUSH(b, b->graph.initializer, b->graph.n_initializer,
                i < 3 ? ob_tensor(b, names[i], 6, NULL, 0, &iv[i], 4) : ob_tensor(b, names[i], 1, NULL, 0, &fv[i - 3], 4));
    if (bins_input)
        OB_PUSH(b, b->graph.input, b->graph.n_input, ob_value_info(b, "bins", 6, NULL, 0, NULL, -1));
    ob_node(b, "MelWeightMatrix", "mel", "bins,len,rate,lo,hi", "y");
    ob_output(b, "y");
}

Test(import, mel_weight_matrix_is_a_constant)
{
    ob b;
    mel_model(&b, 0);
    tth_relay_module *m = imported(&b);
    tth_rexpr *y = tth_relay_module_main(m)->body;
    cr_assert_eq(y->kind, TTH_REXPR_CONST);
    assert_shape(out_type(m), 2, (int64_t[]){9, 8});
    /* the band edges fall on bins 0 0 0 1 1 2 3 4 5 6: each band is a single 1 (at its center,
     * or where its rise ends) and zeros, as in ONNX's expected output */
    static const int64_t peak[8] = {0, 0, 1, 1, 2, 3, 4, 5};
    const float *v = y->u.constant.value->data;
    for (int64_t i = 0; i < 9 * 8; i++)
        cr_assert_eq(v[i], i / 8 == peak[i % 8] ? 1.0f : 0.0f, "bin %lld band %lld: %g", (long long)(i / 8),
                     (long long)(i % 8), v[i]);
    tth_relay_module_free(m);
    ob_free(&b);
    mel_model(&b, 1);
    assert_refused(&b, TTH_EUNSUPPORTED, "input 'num_mel_bins' is not a constant");
    ob_free(&b);
}

/* An element type tth does not take is refused by its name: a string input (ONNX's text
 * normalizer test; docs/operators.md, "Element types"). */
Test(import, foreign_element_types_are_named)
{
    char path[512];
    snprintf(path, sizeof path, "%s/simple/test_strnorm_model_nostopwords_nochangecase/model.onnx", FE_TESTDATA);
    tth_diag d;
    int rc;
    cr_assert_null(fe_import_path(path, "t", &d, &rc));
    cr_assert_neq(rc, 0);
    cr_assert(strstr(d.message, "element type string (ONNX element type 8)"), "%s", d.message);
    cr_assert_eq(d.code, TTH_EUNSUPPORTED);
}

/* Scan of opset 8 (docs/operators.md, "Control flow"): sequence_lens must be absent or a constant
 * of full lengths; anything else is refused by name. body: s <- s + x_k, y_k = s. */
Test(import, scan8_sequence_lens_must_be_the_full_length)
{
    ob body, b;
    int64_t d1[1] = {2}, d2[2] = {2, 2}, d3[3] = {2, 3, 2};
    ob_init(&body, 8);
    ob_input(&body, "s_in", d1, 1);
    ob_input(&body, "x_k", d1, 1);
    ob_node(&body, "Add", "add", "s_in,x_k", "s_out");
    ob_node(&body, "Identity", "id", "s_out", "y_k");
    ob_output(&body, "s_out");
    ob_output(&body, "y_k");
    ob_init(&b, 8);
    ob_input(&b, "init", d2, 2);
    ob_input(&b, "x", d3, 3);
    OB_PUSH(&b, b.graph.input, b.graph.n_input, ob_value_info(&b, "lens", 7, d1, 1, NULL, -1));
    Onnx__NodeProto *n = ob_node(&b, "Scan", "scan", "lens,init,x", "s,y");
    ob_attr(&b, n, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = &body.graph;
    ob_attr_i(&b, n, "num_scan_inputs", 1);
    ob_output(&b, "s");
    ob_output(&b, "y");
    tth_diag d;
    expect_refused(&b, TTH_EUNSUPPORTED, &d);
    cr_assert(strstr(d.message, "Scan's sequence_lens known only at run time"), "%s", d.message);
    b.graph.n_input--; /* lens becomes an initializer: one sequence shorter than 3 */
    int64_t lens[2] = {3, 2};
    ob_init_i64(&b, "lens", d1, 1, lens);
    expect_refused(&b, TTH_EUNSUPPORTED, &d);
    cr_assert_str_eq(d.message, "unsupported attribute value: Scan's sequence_lens 2 (batch 1) is not the full length 3");
    cr_assert_str_eq(d.location, "node 'scan' (Scan)");
    lens[1] = 3;
    memcpy(b.graph.initializer[0]->raw_data.data, lens, sizeof lens);
    tth_relay_module *m = imported(&b);
    const tth_rexpr *out = tth_relay_module_main(m)->body;
    assert_shape(&out->u.tuple.fields[0]->type.tensor, 2, d2);
    assert_shape(&out->u.tuple.fields[1]->type.tensor, 3, d3);
    tth_relay_module_free(m);
    ob_free(&b);
    ob_free(&body);
}


/* ---- a mapped model (docs/tthctl.md, "Large models") ---- */

/* bytes in a fresh private mapping, as the worker maps a model file */
static uint8_t *mapped_copy(const uint8_t *bytes, size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    memcpy(p, bytes, len);
    return p;
}

/* A model read from a mapping is parsed without its weights (the skeleton) and each weight read
 * from the mapping: the same Relay as from bytes in memory, with the same values, for
 * initializers above and below the skeleton's 64-byte threshold, one a Gemm transposes (the
 * original then dead and freed during the import) and one read twice; a truncated model is
 * refused the same way on both paths. */
Test(import, mapped_model_imports_as_in_memory)
{
    ob b;
    ob_begin(&b, (const int64_t[]){2, 64}, 2);
    static float w[64 * 96], v[96 * 32], k[8];
    for (size_t i = 0; i < 64 * 96; i++)
        w[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < 96 * 32; i++)
        v[i] = (float)((i * 104729) % 997) / 997.0f;
    for (size_t i = 0; i < 8; i++)
        k[i] = (float)i;
    ob_init_f32(&b, "w", (const int64_t[]){96, 64}, 2, w);   /* 24 KiB, transposed by Gemm */
    ob_init_f32(&b, "v", (const int64_t[]){96, 32}, 2, v);   /* 12 KiB, read twice */
    ob_init_f32(&b, "k", (const int64_t[]){8}, 1, k);        /* 32 bytes: stays in the skeleton */
    Onnx__NodeProto *g = ob_node(&b, "Gemm", "g", "x,w", "h");
    ob_attr_i(&b, g, "transB", 1);
    ob_node(&b, "MatMul", "m1", "h,v", "y1");
    ob_node(&b, "Relu", "r", "h", "hr");
    ob_node(&b, "MatMul", "m2", "hr,v", "y2");
    ob_node(&b, "Add", "a", "y1,y2", "y3");
    ob_node(&b, "Reshape", "rs", "y3,shape", "y4");
    ob_init_i64(&b, "shape", (const int64_t[]){2}, 1, (const int64_t[]){8, 8});
    ob_node(&b, "Add", "a2", "y4,k", "y");
    ob_output(&b, "y");
    size_t len;
    uint8_t *bytes = ob_done(&b, &len);
    tth_diag d1, d2;
    tth_relay_module *plain = NULL, *mapped = NULL;
    cr_assert_eq(tth_onnx_import_ext(bytes, len, "m", NULL, NULL, NULL, &plain, &d1), 0, "%s", d1.message);
    uint8_t *map = mapped_copy(bytes, len);
    tth_onnx_external ext = {.bytes_mapped = 1};
    cr_assert_eq(tth_onnx_import_ext(map, len, "m", NULL, NULL, &ext, &mapped, &d2), 0, "%s", d2.message);
    char *a = tth_relay_print(plain), *c = tth_relay_print(mapped);
    cr_assert_str_eq(a, c, "the mapped model imports otherwise:\n%s\n---\n%s", a, c);
    /* the values: every constant of main's result's ancestry, in order */
    tth_rexpr **na = NULL, **nc = NULL;
    int64_t n1 = tth_relay_topo(plain, tth_relay_module_main(plain), &na);
    int64_t n2 = tth_relay_topo(mapped, tth_relay_module_main(mapped), &nc);
    cr_assert_eq(n1, n2);
    int consts = 0;
    for (int64_t i = 0; i < n1; i++) {
        if (na[i]->kind != TTH_REXPR_CONST)
            continue;
        consts++;
        const tth_tensor *x = na[i]->u.constant.value, *y = nc[i]->u.constant.value;
        cr_assert(x->data && y->data && x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0,
                  "constant %lld differs between the mapped and the in-memory import", (long long)i);
    }
    cr_assert_geq(consts, 3);
    free(a);
    free(c);
    tth_relay_module_free(plain);
    tth_relay_module_free(mapped);
    munmap(map, len);
    /* truncated inside the first weight: refused on both paths, with the same code */
    for (size_t cut = len / 2; cut < len; cut += len / 5) {
        plain = mapped = NULL;
        int r1 = tth_onnx_import_ext(bytes, cut, "m", NULL, NULL, NULL, &plain, &d1);
        map = mapped_copy(bytes, cut);
        int r2 = tth_onnx_import_ext(map, cut, "m", NULL, NULL, &ext, &mapped, &d2);
        munmap(map, cut);
        cr_assert(r1 != 0 && r1 == r2 && !plain && !mapped, "cut at %zu: %d (%s) in memory, %d (%s) mapped", cut, r1,
                  d1.message, r2, d2.message);
    }
    free(bytes);
}

/* An LSTM of 96 steps reading constant weights: one ONNX node that becomes thousands of Relay
 * nodes sharing their operands. The walk that decides whether the weights are dead after it
 * (onnx_import.c, held_constants) visits each new node once; it used to follow every path, and
 * a 100-step LSTM never finished importing. */
Test(import, long_recurrence_imports, .timeout = 60)
{
    enum { T = 96, I = 8, H = 16 };
    ob b;
    ob_begin(&b, (const int64_t[]){T, 1, I}, 3);
    static float w[4 * H * I], r[4 * H * H], bias[8 * H];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        w[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        r[i] = (float)((i * 53) % 19) / 19.0f - 0.5f;
    ob_init_f32(&b, "W", (const int64_t[]){1, 4 * H, I}, 3, w);
    ob_init_f32(&b, "R", (const int64_t[]){1, 4 * H, H}, 3, r);
    ob_init_f32(&b, "B", (const int64_t[]){1, 8 * H}, 2, bias);
    Onnx__NodeProto *n = ob_node(&b, "LSTM", "lstm", "x,W,R,B", "Y,Yh");
    ob_attr_i(&b, n, "hidden_size", H);
    ob_output(&b, "Yh");
    tth_diag d;
    int rc;
    tth_relay_module *m = import_ob(&b, &d, &rc);
    cr_assert_not_null(m, "%s", d.message);
    tth_relay_module_free(m);
    ob_free(&b);
}
