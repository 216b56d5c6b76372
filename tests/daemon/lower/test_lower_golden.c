/* Printer goldens: the TIR of a few lowered functions, compared with the files in
 * tests/daemon/lower/golden/ so that any change in the lowering (or in the TIR printer) shows up
 * in review. Regenerate with LT_UPDATE_GOLDEN=1 after checking the new text by eye. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "lt_util.h"

/* the function under test: a new one for every test */
static lt_fn t;
static void fn_begin(void) { lt_init(&t); }
static void fn_end(void) { lt_free(&t); }
TestSuite(golden, .init = fn_begin, .fini = fn_end);

/* body lowered (lt_lower), its TIR against golden/<name>.tir */
static void check_golden(tth_rexpr *body, const char *name)
{
    cr_assert_eq(lt_lower(&t, body), 0, "%s", t.diag.message);
    char path[1024];
    snprintf(path, sizeof path, "%s/golden/%s.tir", LT_SOURCE_DIR, name);
    char *txt = tth_tir_print_func(t.pf);
    cr_assert_not_null(txt);
    if (getenv("LT_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f, "cannot write %s", path);
        fputs(txt, f);
        fclose(f);
    }
    char *want = (char *)test_read_file(path, NULL);
    cr_assert_not_null(want, "golden file %s is missing (run with LT_UPDATE_GOLDEN=1)", path);
    if (strcmp(txt, want) != 0)
        cr_log_error("lowered TIR:\n%s", txt);
    cr_assert_str_eq(txt, want, "TIR of %s differs from %s", name, path);
    free(txt);
    free(want);
}

static tth_ttype tt(tth_dtype dt, int rank, const int64_t *shape)
{
    tth_ttype ty;
    memset(&ty, 0, sizeof ty);
    ty.dtype = dt;
    ty.rank = rank;
    memcpy(ty.shape, shape, sizeof(int64_t) * (size_t)rank);
    return ty;
}

Test(golden, add_broadcast_relu)
{
    int64_t xs[2] = {4, 8}, ys[1] = {8};
    tth_ttype xt = tt(TTH_F32, 2, xs), yt = tt(TTH_F32, 1, ys);
    tth_rexpr *a[2] = {lt_param(&t, "x", &xt), lt_param(&t, "y", &yt)};
    tth_rexpr *add = lt_call(&t, TTH_OP_ADD, a, 2, NULL);
    tth_rexpr *r = lt_call(&t, TTH_OP_RELU, &add, 1, NULL);
    check_golden(r, "add_broadcast_relu");
}

Test(golden, max_pool2d)
{
    int64_t xs[4] = {1, 2, 4, 4};
    tth_ttype xt = tt(TTH_F32, 4, xs);
    tth_rexpr *x = lt_param(&t, "x", &xt);
    tth_rexpr *p = lt_call(&t, TTH_OP_MAX_POOL2D, &x, 1, "{\"pool_size\": [2, 2], \"strides\": [2, 2]}");
    check_golden(p, "max_pool2d");
}

Test(golden, dense_bias_softmax)
{
    int64_t xs[2] = {1, 4}, ws[2] = {4, 3}, bs[1] = {3};
    tth_ttype xt = tt(TTH_F32, 2, xs), wt = tt(TTH_F32, 2, ws), bt = tt(TTH_F32, 1, bs);
    tth_rexpr *a[2] = {lt_param(&t, "x", &xt), tth_relay_const(t.rm, tth_tensor_new(&wt, NULL), "w")};
    tth_rexpr *mm = lt_call(&t, TTH_OP_MATMUL, a, 2, NULL);
    tth_rexpr *a2[2] = {mm, tth_relay_const(t.rm, tth_tensor_new(&bt, NULL), "b")};
    tth_rexpr *add = lt_call(&t, TTH_OP_ADD, a2, 2, NULL);
    tth_rexpr *sm = lt_call(&t, TTH_OP_SOFTMAX, &add, 1, "{\"axis\": 1}");
    check_golden(sm, "dense_bias_softmax");
}
