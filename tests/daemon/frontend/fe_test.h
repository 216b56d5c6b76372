/* fe_test.h: helpers shared by the front-end tests (reading files, running the constant
 * folder as an evaluator, comparing tensors, checking the fusion contract). */
#ifndef TTH_FE_TEST_H
#define TTH_FE_TEST_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "frontend.h"
#include "helpers.h"
#include "onnx_build.h"

#define FE_TESTDATA "/usr/share/libonnx-testdata/data"

static inline tth_tensor *fe_read_tensor(const char *path, char *name, size_t name_len)
{
    size_t len;
    uint8_t *b = test_read_file(path, &len);
    if (!b)
        return NULL;
    tth_tensor *t = NULL;
    tth_diag d;
    tth_diag_clear(&d);
    tth_onnx_tensor_decode(b, len, &t, name, name_len, &d);
    free(b);
    return t;
}

static inline int fe_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entry names of a directory (malloc'd strings in a malloc'd array). */
static inline char **fe_list_dir(const char *path, size_t *n)
{
    DIR *d = opendir(path);
    *n = 0;
    if (!d)
        return NULL;
    size_t cap = 64;
    char **v = malloc(cap * sizeof(char *));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (*n == cap) {
            cap *= 2;
            v = realloc(v, cap * sizeof(char *));
        }
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(v, *n, sizeof(char *), fe_cmp_names);
    return v;
}

static inline void fe_free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The test data's inputs vals[n] fitted to fn's params: ONNX's test data stores bfloat16 as uint16
 * (its bits: NumPy has no bfloat16), and gives CastLike's `like`, read for its element type only,
 * another shape than the model declares: that input becomes zeros of its declared type (the
 * outputs are still compared). */
static inline void fe_fit_inputs(const tth_relay_function *fn, tth_tensor **vals, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        const tth_ttype *pt = &fn->params[k]->type.tensor;
        if (pt->dtype == TTH_BF16 && vals[k]->type.dtype == TTH_U16)
            vals[k]->type.dtype = TTH_BF16;
        if (vals[k]->type.dtype == pt->dtype && !tth_ttype_equal(&vals[k]->type, pt)) {
            tth_tensor_unref(vals[k]);
            vals[k] = tth_tensor_new(pt, NULL);
        }
    }
}

/* Compare got with want: same shape and dtype; floats within atol + rtol*|want|; integers
 * within itol. Writes the first difference into why. Returns 1 when they match. */
static inline int fe_tensors_close(const tth_tensor *got, const tth_tensor *want, double atol, double rtol, double itol,
                                   char *why, size_t why_len)
{
    if (got->type.dtype != want->type.dtype || !tth_ttype_equal(&got->type, &want->type)) {
        char a[100], b[100];
        tth_ttype_format(&got->type, a, sizeof a);
        tth_ttype_format(&want->type, b, sizeof b);
        snprintf(why, why_len, "type %s, expected %s", a, b);
        return 0;
    }
    int64_t n = tth_ttype_numel(&want->type);
    int isf = tth_dtype_is_float(want->type.dtype);
    for (int64_t i = 0; i < n; i++) {
        double g = tth_tensor_get_f64(got, i), w = tth_tensor_get_f64(want, i);
        if (isnan(w) && isnan(g))
            continue;
        if (isinf(w) && g == w)
            continue;
        double tol = isf ? atol + rtol * fabs(w) : itol;
        if (!(fabs(g - w) <= tol)) {
            snprintf(why, why_len, "element %lld is %.9g, expected %.9g", (long long)i, g, w);
            return 0;
        }
    }
    return 1;
}

/* Run a pass of frontend.h on m; the test fails with the pass's message when it fails. */
static inline void fe_pass(tth_relay_module *m, int (*pass)(tth_relay_module *, tth_diag *))
{
    tth_diag d;
    tth_diag_clear(&d);
    int rc = pass(m, &d);
    cr_assert_eq(rc, 0, "%s at %s", d.message, d.location);
}

/* The module verifies (tth_relay_verify); the test fails with its message when not. */
static inline void fe_verify(const tth_relay_module *m)
{
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_relay_verify(m, &d), 0, "%s", d.message);
}

/* The model in bytes imported as name: *rc is tth_onnx_import's, the module NULL unless it is 0;
 * d says why. */
static inline tth_relay_module *fe_try_import(const uint8_t *bytes, size_t len, const char *name, tth_diag *d, int *rc)
{
    tth_relay_module *m = NULL;
    tth_diag_clear(d);
    *rc = tth_onnx_import(bytes, len, name, &m, d);
    return m;
}

/* The model in bytes imported as "t"; the test fails when it does not import. */
static inline tth_relay_module *fe_import_bytes(const uint8_t *bytes, size_t len)
{
    tth_diag d;
    int rc;
    tth_relay_module *m = fe_try_import(bytes, len, "t", &d, &rc);
    cr_assert_eq(rc, 0, "%s at %s", d.message, d.location);
    return m;
}

/* The model b describes imported as "t" (fe_import_bytes); frees b. */
static inline tth_relay_module *fe_import_ob(ob *b)
{
    size_t len;
    uint8_t *bytes = ob_done(b, &len);
    tth_relay_module *m = fe_import_bytes(bytes, len);
    free(bytes);
    return m;
}

/* The model file at path imported as name: rc is tth_onnx_import's (-1 when the file cannot be
 * read), the module NULL unless it is 0; d says why. */
static inline tth_relay_module *fe_import_path(const char *path, const char *name, tth_diag *d, int *rc)
{
    size_t len;
    uint8_t *bytes = test_read_file(path, &len);
    tth_relay_module *m = NULL;
    if (bytes)
        m = fe_try_import(bytes, len, name, d, rc);
    else
        *rc = -1;
    free(bytes);
    return m;
}

/* The digits example (examples/digits.onnx of $TTH_SOURCE_ROOT) imported as "digits"; the test
 * fails when it does not import. */
static inline tth_relay_module *fe_digits(void)
{
    const char *root = getenv("TTH_SOURCE_ROOT");
    cr_assert_not_null(root, "TTH_SOURCE_ROOT is not set");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/digits.onnx", root);
    tth_diag d;
    int rc;
    tth_relay_module *m = fe_import_path(path, "digits", &d, &rc);
    cr_assert_eq(rc, 0, "%s: %s at %s", path, d.message, d.location);
    return m;
}

/* main's calls of op (not those inside fused functions) */
static inline int fe_count_op(tth_relay_module *m, tth_op op)
{
    tth_rexpr **nodes;
    int64_t n = tth_relay_topo(m, tth_relay_module_main(m), &nodes);
    int c = 0;
    for (int64_t i = 0; i < n; i++)
        c += nodes[i]->kind == TTH_REXPR_CALL && !nodes[i]->u.call.fn && nodes[i]->u.call.op == op;
    return c;
}

/* The fusion contract of frontend.h: 0 when it holds, else -1 with why filled. */
static inline int fe_check_fusion_contract(tth_relay_module *m, char *why, size_t why_len)
{
    tth_relay_function *mainfn = tth_relay_module_main(m);
    tth_rexpr **nodes;
    int64_t n = tth_relay_topo(m, mainfn, &nodes);
    if (n < 0) {
        snprintf(why, why_len, "topo failed");
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        tth_rexpr *e = nodes[i];
        if (e->kind != TTH_REXPR_CALL)
            continue;
        if (!e->u.call.fn) {
            snprintf(why, why_len, "main calls op '%s' directly", tth_op_name(e->u.call.op));
            return -1;
        }
        tth_relay_function *fn = e->u.call.fn;
        json_t *prim = json_object_get(fn->attrs, "Primitive");
        if (!prim || json_integer_value(prim) != 1) {
            snprintf(why, why_len, "function '%s' is not Primitive", fn->name);
            return -1;
        }
        tth_rexpr **body;
        int64_t nb = tth_relay_topo(m, fn, &body);
        int anchors = 0;
        tth_rexpr *anchor = NULL;
        for (int64_t k = 0; k < nb; k++) {
            tth_rexpr *b = body[k];
            if (b->kind == TTH_REXPR_VAR) {
                int isparam = 0;
                for (size_t p = 0; p < fn->nparams; p++)
                    isparam |= fn->params[p] == b;
                if (!isparam) {
                    snprintf(why, why_len, "function '%s' uses a var that is not its param", fn->name);
                    return -1;
                }
                continue;
            }
            if (b->kind == TTH_REXPR_CONST)
                continue;
            if (b->kind != TTH_REXPR_CALL || b->u.call.fn) {
                /* a tuple-producing op gets a function of its own; nothing else may be in there */
                snprintf(why, why_len, "function '%s' holds a non-op node", fn->name);
                return -1;
            }
            if (!tth_op_is_elementwise(b->u.call.op)) {
                anchors++;
                anchor = b;
                /* the anchor comes first: its operands are params or constants */
                for (size_t a = 0; a < b->u.call.nargs; a++)
                    if (b->u.call.args[a]->kind == TTH_REXPR_CALL) {
                        snprintf(why, why_len, "function '%s': anchor '%s' follows another call", fn->name,
                                 tth_op_name(b->u.call.op));
                        return -1;
                    }
            }
        }
        if (anchors > 1) {
            snprintf(why, why_len, "function '%s' has %d anchors", fn->name, anchors);
            return -1;
        }
        (void)anchor; /* used only inside: it is not a param and main cannot name it */
    }
    return 0;
}

#endif
