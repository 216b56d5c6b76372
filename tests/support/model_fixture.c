/* model_fixture.c: see model_fixture.h. */
#include "model_fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tth/target.h"

tth_registry *test_reg;
json_t *test_tc;

void test_fixture_c(void)
{
    test_reg = test_registry();
    test_tc = test_target(test_reg, "c");
}

void test_fixture_fini(void)
{
    json_decref(test_tc);
    tth_registry_free(test_reg);
    test_tc = NULL;
    test_reg = NULL;
}

json_t *test_target(const tth_registry *r, const char *text)
{
    tth_diag d;
    tth_diag_clear(&d);
    json_t *t = tth_target_parse(r, NULL, text, &d);
    cr_assert_not_null(t, "target '%s': %s", text, d.message);
    return t;
}

tth_host test_host(void *ctx, void (*log)(void *ctx, int level, const char *msg))
{
    return (tth_host){.size = sizeof(tth_host), .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR,
                      .ctx = ctx, .log = log};
}

int test_compile(const tth_registry *r, const json_t *target, const uint8_t *model, size_t len, const char *name,
                 const json_t *opts, const tth_host *host, tth_compile_result *res, tth_diag *d)
{
    tth_compile_request req = {.model = model, .model_len = len, .model_name = name, .target = target,
                               .options = opts, .registry = r, .host = host};
    tth_diag_clear(d);
    return tth_compile(&req, res, d);
}

int test_compile_text(const tth_registry *r, const char *target, const uint8_t *model, size_t len, const char *name,
                      const json_t *opts, const tth_host *host, tth_compile_result *res, tth_diag *d)
{
    json_t *t = test_target(r, target);
    int rc = test_compile(r, t, model, len, name, opts, host, res, d);
    json_decref(t);
    return rc;
}

uint8_t *test_slurp(const char *path, size_t *len)
{
    uint8_t *b = test_read_file(path, len);
    cr_assert_not_null(b, "cannot read %s", path);
    return b;
}

int test_compile_file(const tth_registry *r, const json_t *target, const char *path, const char *name,
                      const json_t *opts, tth_compile_result *res, tth_diag *d)
{
    size_t len;
    uint8_t *model = test_slurp(path, &len);
    int rc = test_compile(r, target, model, len, name, opts, NULL, res, d);
    free(model);
    return rc;
}

tthrt_model *test_open_artifact(const tth_compile_result *res)
{
    tthrt_model *m = NULL;
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tthrt_model_open_memory(res->artifact, res->artifact_len, &m, &d), 0, "%s", d.message);
    return m;
}

void test_bind_f32(tthrt_model *m, const char *name, int rank, const int64_t *shape, const float *values)
{
    tthrt_array a = {0};
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tthrt_array_init(&a, TTH_F32, rank, shape, &d), 0, "%s", d.message);
    memcpy(a.data, values, a.nbytes);
    cr_assert_eq(tthrt_model_bind(m, name, &a, &d), 0, "%s: %s", name, d.message);
    tthrt_array_clear(&a);
}

void test_run_once(tthrt_model *m)
{
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tthrt_model_run(m, 1, NULL, &d), 0, "%s", d.message);
}

tthrt_array test_output(const tthrt_model *m, size_t i)
{
    tthrt_array y;
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tthrt_model_output_array(m, i, &y, &d), 0, "output %zu: %s", i, d.message);
    return y;
}

const char *test_node_kind(const json_t *meta, const char *node)
{
    const json_t *ops = json_object_get(json_object_get(meta, "partition"), "ops");
    for (size_t i = 0; i < json_array_size(ops); i++) {
        const json_t *o = json_array_get(ops, i);
        if (!strcmp(json_string_value(json_object_get(o, "node")), node))
            return json_string_value(json_object_get(o, "kind"));
    }
    return NULL;
}

void test_extract(const tth_compile_result *res, char *dir, size_t len)
{
    char path[1100], cmd[1200];
    test_mkdtemp(dir, len);
    snprintf(path, sizeof path, "%s/a.tar", dir);
    cr_assert_eq(test_write_file(path, res->artifact, res->artifact_len), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && tar xf a.tar", dir);
    cr_assert_eq(test_run(cmd), 0, "tar refused the artifact");
}

void test_tir_buffers(tth_tir_module *m, const test_tbuf *spec, size_t n, tth_tbuffer **out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = tth_tir_buffer(m, spec[i].name, spec[i].dtype, 1, &spec[i].n, spec[i].scope);
}

void test_tir_entry(tth_tir_module *m, const char *name, tth_tbuffer **params, size_t n, tth_tstmt *body)
{
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_not_null(tth_tir_func_add(m, name, params, n, body, "c", NULL, &d), "%s", d.message);
    m->entry = name;
}
