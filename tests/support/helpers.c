/* helpers.c: see helpers.h. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

tth_registry *test_registry(void)
{
    const char *root = getenv("TTH_BUILD_ROOT");
    cr_assert_not_null(root, "TTH_BUILD_ROOT is not set");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/plugins", root);
    tth_registry *r = tth_registry_new();
    cr_assert_not_null(r);
    tth_diag d;
    tth_diag_clear(&d);
    int n = tth_registry_load_dir(r, dir, &d);
    cr_assert_geq(n, 1, "loading plugins from %s: %s", dir, d.message);
    cr_assert_not_null(tth_registry_find_kind(r, "c"), "no plugin for kind 'c' in %s", dir);
    return r;
}

static struct deferred {
    void (*fn)(void *);
    void *arg;
} *deferred;
static size_t ndeferred;

void test_defer(void (*fn)(void *), void *arg)
{
    struct deferred *more = realloc(deferred, (ndeferred + 1) * sizeof *more);
    cr_assert_not_null(more);
    deferred = more;
    deferred[ndeferred++] = (struct deferred){fn, arg};
}

void test_cleanup(void)
{
    while (ndeferred) {
        ndeferred--;
        deferred[ndeferred].fn(deferred[ndeferred].arg);
    }
    free(deferred);
    deferred = NULL;
}

static void free_tir_module(void *m)
{
    tth_tir_module_free(m);
}

static void free_relay_module(void *m)
{
    tth_relay_module_free(m);
}

tth_tir_module *test_tir_module(void)
{
    tth_tir_module *m = tth_tir_module_new();
    cr_assert_not_null(m);
    test_defer(free_tir_module, m);
    return m;
}

tth_relay_module *test_relay_module(void)
{
    tth_relay_module *m = tth_relay_module_new("t");
    cr_assert_not_null(m);
    test_defer(free_relay_module, m);
    return m;
}

void test_mkdtemp(char *buf, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, len, "%s/tth-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(buf));
}

void test_rmtree(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

int test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : -1;
}

void test_put_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(test_write_file(path, data, len), 0, "writing %s", path);
}

uint8_t *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return NULL;
    }
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!buf || n != (size_t)st.st_size) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

int test_run(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *test_partition_kind(const json_t *meta, const char *op)
{
    const json_t *ops = json_object_get(json_object_get(meta, "partition"), "ops");
    size_t i;
    const json_t *o;
    json_array_foreach(ops, i, o)
        if (strcmp(json_string_value(json_object_get(o, "op")), op) == 0)
            return json_string_value(json_object_get(o, "kind"));
    return NULL;
}

int test_have(const char *prog)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return test_run(cmd) == 0;
}

int32_t test_dot4(int us, int32_t acc, int32_t a, int32_t b)
{
    int64_t sum = acc;
    for (int j = 0; j < 4; j++) {
        uint32_t ab = ((uint32_t)a >> (8 * j)) & 0xffu, bb = ((uint32_t)b >> (8 * j)) & 0xffu;
        sum += (us ? (int64_t)ab : (int64_t)(int8_t)ab) * (int8_t)bb;
    }
    return (int32_t)(uint32_t)(uint64_t)sum;
}

void test_dot4_operands(int32_t *a, int32_t *b, int32_t *acc, int n)
{
    for (int i = 0; i < n; i++) {
        a[i] = (int32_t)(0x80ff7f00u ^ ((uint32_t)i * 0x01010101u * 37u));
        b[i] = (int32_t)(0x7f8001ffu ^ ((uint32_t)i * 0x02030405u));
        acc[i] = i % 3 == 0 ? INT32_MAX - 1000 : i % 3 == 1 ? INT32_MIN + 5 : i * 1000 - 7000;
    }
}
