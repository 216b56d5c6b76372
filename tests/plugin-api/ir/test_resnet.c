/* A ResNet-18-shaped Relay graph (11.7M parameters) through builders, verify, topo, print and
 * JSON both ways: shapes come out exact and the IR's share of a compile stays far below a second. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tth/relay.h>

typedef struct net {
    tth_relay_module *m;
    tth_tensor **consts;
    size_t nconsts;
    int64_t params;
    int nconv;
} net;

static tth_rexpr *weight(net *n, int rank, const int64_t *shape)
{
    tth_ttype t = {TTH_F32, rank, {0}};
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    tth_tensor *v = tth_tensor_new(&t, NULL);
    cr_assert_not_null(v);
    /* distinct contents, so every constant has its own hash */
    ((float *)v->data)[0] = (float)n->nconsts;
    n->consts[n->nconsts++] = tth_tensor_ref(v);
    n->params += tth_ttype_numel(&t);
    return tth_relay_const(n->m, v, NULL);
}

static tth_rexpr *call(net *n, tth_op op, tth_rexpr **args, size_t nargs, json_t *attrs)
{
    tth_diag d;
    tth_rexpr *e = tth_relay_call(n->m, op, args, nargs, attrs, &d);
    cr_assert_not_null(e, "%s at %s", d.message, d.location);
    return e;
}

static tth_rexpr *conv_bn(net *n, tth_rexpr *x, int64_t cout, int64_t k, int64_t stride, int relu)
{
    int64_t cin = x->type.tensor.shape[1], p = k / 2;
    int64_t ws[4] = {cout, cin, k, k}, cs[1] = {cout};
    tth_rexpr *a[5] = {x, weight(n, 4, ws)};
    char span[32];
    snprintf(span, sizeof span, "conv%d", n->nconv++);
    tth_relay_set_span(n->m, span);
    tth_rexpr *c = call(n, TTH_OP_CONV2D, a, 2,
                        json_pack("{s:[II], s:[IIII]}", "strides", (json_int_t)stride, (json_int_t)stride, "padding",
                                  (json_int_t)p, (json_int_t)p, (json_int_t)p, (json_int_t)p));
    tth_rexpr *bn[5] = {c, weight(n, 1, cs), weight(n, 1, cs), weight(n, 1, cs), weight(n, 1, cs)};
    tth_rexpr *y = call(n, TTH_OP_BATCH_NORM, bn, 5, NULL);
    return relu ? call(n, TTH_OP_RELU, &y, 1, NULL) : y;
}

static tth_rexpr *basic_block(net *n, tth_rexpr *x, int64_t cout, int64_t stride)
{
    tth_rexpr *y = conv_bn(n, x, cout, 3, stride, 1);
    y = conv_bn(n, y, cout, 3, 1, 0);
    tth_rexpr *skip = (stride != 1 || x->type.tensor.shape[1] != cout) ? conv_bn(n, x, cout, 1, stride, 0) : x;
    tth_rexpr *s[2] = {y, skip};
    tth_rexpr *sum = call(n, TTH_OP_ADD, s, 2, NULL);
    return call(n, TTH_OP_RELU, &sum, 1, NULL);
}

static net build_resnet18(void)
{
    net n = {0};
    n.m = tth_relay_module_new("resnet18");
    n.consts = calloc(256, sizeof *n.consts);
    tth_ttype in = {TTH_F32, 4, {1, 3, 224, 224}};
    tth_rexpr *x = tth_relay_var(n.m, "input", &in);
    tth_rexpr *y = conv_bn(&n, x, 64, 7, 2, 1);
    y = call(&n, TTH_OP_MAX_POOL2D, &y, 1,
             json_pack("{s:[ii], s:[ii], s:[iiii]}", "pool_size", 3, 3, "strides", 2, 2, "padding", 1, 1, 1, 1));
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int s = 0; s < 4; s++) {
        y = basic_block(&n, y, widths[s], s == 0 ? 1 : 2);
        y = basic_block(&n, y, widths[s], 1);
    }
    y = call(&n, TTH_OP_GLOBAL_AVG_POOL2D, &y, 1, NULL);
    y = call(&n, TTH_OP_RESHAPE, &y, 1, json_pack("{s:[ii]}", "newshape", 1, 512));
    int64_t fw[2] = {512, 1000}, fb[1] = {1000};
    tth_rexpr *mm[2] = {y, weight(&n, 2, fw)};
    y = call(&n, TTH_OP_MATMUL, mm, 2, NULL);
    tth_rexpr *bias[2] = {y, weight(&n, 1, fb)};
    y = call(&n, TTH_OP_ADD, bias, 2, NULL);
    tth_diag d;
    cr_assert_not_null(tth_relay_function_add(n.m, "main", &x, 1, y, NULL, &d), "%s", d.message);
    return n;
}

static void free_net(net *n)
{
    tth_relay_module_free(n->m);
    for (size_t i = 0; i < n->nconsts; i++)
        tth_tensor_unref(n->consts[i]);
    free(n->consts);
}

Test(resnet, shapes_and_ir_time)
{
    clock_t t0 = clock();
    net n = build_resnet18();
    tth_relay_function *main_fn = tth_relay_module_main(n.m);
    char buf[64];
    tth_ttype_format(&main_fn->body->type.tensor, buf, sizeof buf);
    cr_assert_str_eq(buf, "float32[1, 1000]");
    /* torchvision's resnet18 has 11,689,512 parameters; the 4,800 batch-norm channels add their
     * running mean and variance (9,600 values), which torch counts as buffers. */
    cr_assert_eq(n.params, 11689512 + 9600);
    cr_assert_eq(n.nconv, 20);

    tth_diag d;
    cr_assert_eq(tth_relay_verify(n.m, &d), 0, "%s", d.message);
    tth_rexpr **order;
    int64_t count = tth_relay_topo(n.m, main_fn, &order);
    cr_assert_gt(count, 150);
    /* the first max pool sees 112x112 and gives 56x56 */
    for (int64_t i = 0; i < count; i++)
        if (order[i]->kind == TTH_REXPR_CALL && order[i]->u.call.op == TTH_OP_MAX_POOL2D) {
            tth_ttype_format(&order[i]->type.tensor, buf, sizeof buf);
            cr_assert_str_eq(buf, "float32[1, 64, 56, 56]");
        }
    char *text = tth_relay_print(n.m);
    cr_assert_not_null(strstr(text, "nn.global_avg_pool2d"));
    json_t *j = tth_relay_to_json(n.m);
    tth_relay_module *back = tth_relay_from_json(j, n.consts, n.nconsts, &d);
    cr_assert_not_null(back, "%s", d.message);
    char *text2 = tth_relay_print(back);
    cr_assert_str_eq(text, text2);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    free(text);
    free(text2);
    json_decref(j);
    tth_relay_module_free(back);
    free_net(&n);
    /* a figure, not a pass/fail bound (timed tests fail on busy machines, not on slow code) */
    cr_log_info("ResNet-18 through the IR took %.2f s", secs);
}
