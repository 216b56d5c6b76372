/* Constant folding computes what compiled code computes (docs/operators.md, "Constant folding"):
 * an ONNX node model compiled with its inputs given at run time, and compiled again with every
 * input bound at compile time (options.bind, so the whole graph folds to constants), give the
 * same outputs bit for bit, on the inputs of test_data_set_0. For `c` every operator below; for
 * `llvm` (this machine, vector kernels) the element-wise ones, since a vector kernel may sum a
 * reduction in another order than the scalar kernels the folder runs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "helpers.h"
#include "tth/target.h"
#include "tthrt.h"

#define NODE "/usr/share/libonnx-testdata/data/node/"
#define MAX_IO 8

typedef struct outputs {
    size_t n;
    tthrt_array a[MAX_IO];
} outputs;

/* Compile the model for `target` with `bind` (NULL: none); the artifact's dump of the Relay
 * after optimization goes to *relay (malloc'd). */
static tthrt_model *compile(const char *test, const char *target, json_t *bind, char **relay)
{
    char path[512];
    snprintf(path, sizeof path, NODE "%s/model.onnx", test);
    size_t len = 0;
    unsigned char *model = test_read_file(path, &len);
    cr_assert_not_null(model, "cannot read %s", path);
    tth_registry *r = test_registry();
    tth_diag d;
    tth_diag_clear(&d);
    json_t *t = tth_target_parse(r, NULL, target, &d);
    cr_assert_not_null(t, "target '%s': %s", target, d.message);
    json_t *opts = json_pack("{s:b, s:s}", "build_shared", 1, "dump_ir", "optimize");
    if (bind)
        json_object_set(opts, "bind", bind);
    tth_host host = {.size = sizeof host, .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR};
    tth_compile_request req = {.model = model, .model_len = len, .model_name = "m", .target = t,
                               .options = opts, .registry = r, .host = &host};
    tth_compile_result cr;
    cr_assert_eq(tth_compile(&req, &cr, &d), 0, "%s for %s%s: %s", test, target, bind ? " (bound)" : "",
                 d.message);
    const char *txt = json_string_value(json_object_get(cr.dumps, "optimize"));
    cr_assert_not_null(txt, "no optimize dump");
    *relay = strdup(txt);
    tthrt_model *m = NULL;
    cr_assert_eq(tthrt_model_open_memory(cr.artifact, cr.artifact_len, &m, &d), 0, "%s", d.message);
    tth_compile_result_free(&cr);
    json_decref(opts);
    json_decref(t);
    tth_registry_free(r);
    free(model);
    return m;
}

/* Run m and keep copies of its outputs. */
static void run(tthrt_model *m, outputs *o)
{
    tth_diag d;
    cr_assert_eq(tthrt_model_run(m, 1, NULL, &d), 0, "%s", d.message);
    o->n = tthrt_model_output_count(m);
    cr_assert_leq(o->n, MAX_IO);
    for (size_t j = 0; j < o->n; j++) {
        tthrt_array v;
        cr_assert_eq(tthrt_model_output_array(m, j, &v, &d), 0, "%s", d.message);
        cr_assert_eq(tthrt_array_init(&o->a[j], v.dtype, v.rank, v.shape, &d), 0, "%s", d.message);
        memcpy(o->a[j].data, v.data, v.nbytes);
    }
}

/* Whether main's body (after its signature line) calls anything: "name(" in the Relay text (a
 * tuple's parenthesis follows a space). */
static int calls_an_op(const char *relay)
{
    const char *body = strstr(relay, "fn @main(");
    cr_assert_not_null(body, "no main in:\n%s", relay);
    body = strchr(body, '\n');
    for (const char *p = body ? strchr(body, '(') : NULL; p; p = strchr(p + 1, '('))
        if (p[-1] == '_' || p[-1] == '.' || (p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= '0' && p[-1] <= '9'))
            return 1;
    return 0;
}

static void agree(const char *test, const char *target)
{
    char path[512];
    json_t *bind = json_object();
    char *relay_run = NULL, *relay_bound = NULL;
    tthrt_model *m = compile(test, target, NULL, &relay_run);
    /* inputs at run time, and the same values collected for the bound compile */
    tth_diag d;
    for (size_t i = 0; i < tthrt_model_input_count(m); i++) {
        snprintf(path, sizeof path, NODE "%s/test_data_set_0/input_%zu.pb", test, i);
        tthrt_array a = {0};
        cr_assert_eq(tthrt_pb_read(path, &a, &d), 0, "%s", d.message);
        cr_assert_eq(tthrt_model_bind(m, tthrt_model_input(m, i)->name, &a, &d), 0, "%s", d.message);
        char why[128];
        json_t *v = tthrt_array_to_bind_json(&a, TTHRT_BIND_MAX_ELEMENTS, why, sizeof why);
        cr_assert_not_null(v, "%s: %s", path, why);
        json_object_set_new(bind, tthrt_model_input(m, i)->name, v);
        tthrt_array_clear(&a);
    }
    outputs compiled, folded;
    run(m, &compiled);
    tthrt_model_close(m);

    m = compile(test, target, bind, &relay_bound);
    cr_assert_eq(tthrt_model_input_count(m), 0);
    run(m, &folded);
    tthrt_model_close(m);
    /* the bound model really was folded: what reaches the lowering calls no operator, while
     * the unbound one does */
    cr_assert(calls_an_op(relay_run), "%s: the unbound model calls no operator:\n%s", test, relay_run);
    cr_assert_not(calls_an_op(relay_bound), "%s: the bound model was not folded:\n%s", test, relay_bound);

    cr_assert_eq(compiled.n, folded.n);
    for (size_t j = 0; j < compiled.n; j++) {
        const tthrt_array *c = &compiled.a[j], *f = &folded.a[j];
        cr_assert_eq(c->nbytes, f->nbytes, "%s output %zu size", test, j);
        const unsigned char *cb = c->data, *fb = f->data;
        size_t w = tth_dtype_size(c->dtype);
        for (size_t k = 0; k < c->nbytes; k += w)
            if (memcmp(cb + k, fb + k, w) != 0) {
                double cv = 0, fv = 0;
                if (c->dtype == TTH_F32) {
                    float x, y;
                    memcpy(&x, cb + k, 4);
                    memcpy(&y, fb + k, 4);
                    cv = x;
                    fv = y;
                }
                cr_assert_fail("%s for %s, output %zu element %zu: compiled %.9g, folded %.9g", test, target, j,
                               k / w, cv, fv);
            }
        tthrt_array_clear(&compiled.a[j]);
        tthrt_array_clear(&folded.a[j]);
    }
    free(relay_run);
    free(relay_bound);
    json_decref(bind);
}

/* element-wise, and data movement: the same bits for c and for llvm's vector kernels */
static const char *const elementwise[] = {
    "test_exp", "test_log", "test_sqrt", "test_tanh", "test_sigmoid", "test_erf", "test_div", "test_pow",
    "test_hardswish", "test_selu", "test_elu", "test_softplus", "test_cos", "test_atan", "test_leakyrelu",
    "test_transpose_all_permutations_4", "test_transpose_default",
    /* folded natively, at any size (fold_native) */
    "test_concat_3d_axis_1", "test_concat_3d_axis_negative_1", "test_split_equal_parts_2d",
    "test_split_equal_parts_default_axis",
    "test_flatten_axis2",
};
/* reductions: the same bits for c */
static const char *const reductions[] = {
    "test_softmax_axis_1", "test_logsoftmax_axis_1", "test_reduce_mean_default_axes_keepdims_random",
    "test_conv_with_strides_padding", "test_matmul_3d", "test_gemm_default_matrix_bias",
    "test_layer_normalization_4d_axis1", "test_averagepool_2d_pads", "test_lrn",
};

Test(fold, elementwise_for_c)
{
    for (size_t i = 0; i < sizeof elementwise / sizeof *elementwise; i++)
        agree(elementwise[i], "c");
}

Test(fold, elementwise_for_llvm)
{
    for (size_t i = 0; i < sizeof elementwise / sizeof *elementwise; i++)
        agree(elementwise[i], "llvm");
}

Test(fold, reductions_for_c)
{
    for (size_t i = 0; i < sizeof reductions / sizeof *reductions; i++)
        agree(reductions[i], "c");
}
