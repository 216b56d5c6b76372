/* Out of memory: make the Nth jansson allocation fail, for every N, while parsing and exporting
 * targets. Each run must either give exactly the right target or fail with a code; never crash,
 * never leak (ASan checks), never return a wrong target. */
#include "common.h"

static long budget = -1, used;

static void *failing_malloc(size_t n)
{
    if (budget >= 0 && used++ >= budget)
        return NULL;
    return malloc(n);
}

TestSuite(oom, .init = load_plugins, .fini = unload_plugins, .timeout = 600);

static void every_failure(const char *text)
{
    json_t *want = ok(text);
    char *want_s = tth_target_to_string(want);
    json_set_alloc_funcs(failing_malloc, free);
    long n;
    for (n = 0; n < 100000; n++) {
        budget = n;
        used = 0;
        tth_diag d;
        tth_diag_clear(&d);
        json_t *t = tth_target_parse(reg, NULL, text, &d);
        char *s = t ? tth_target_to_string(t) : NULL;
        budget = -1;
        if (t) {
            int same = json_equal(t, want);
            json_decref(t);
            if (!same) {
                json_set_alloc_funcs(malloc, free);
                cr_assert_fail("'%s' with allocation %ld failing gave a different target", text, n);
            }
            if (s && strcmp(s, want_s) != 0) {
                json_set_alloc_funcs(malloc, free);
                cr_assert_fail("'%s' with allocation %ld failing exported '%s'", text, n, s);
            }
        } else if (d.code == TTH_OK) {
            json_set_alloc_funcs(malloc, free);
            cr_assert_fail("'%s' failed at allocation %ld without an error code", text, n);
        }
        free(s);
        if (t && used <= n)
            break; /* nothing failed: every allocation has had its turn */
    }
    json_set_alloc_funcs(malloc, free);
    cr_assert_gt(n, 10, "'%s' allocates through jansson", text);
    free(want_s);
    json_decref(want);
}

Test(oom, string_forms)
{
    every_failure("llvm -mtriple=aarch64-linux-gnu -mattr=+v8.4a -model='a b'");
    every_failure("raspberry-pi/5 -num-cores=2");
    every_failure("cmsis-nn -mcpu=cortex-m55+nomve -host='c -mcpu=cortex-m55'");
}

Test(oom, composite)
{
    every_failure("ethos-n,cmsis-nn,c -mcpu=cortex-m55 -tops=4");
}

Test(oom, json_forms)
{
    every_failure("{\"kind\":\"c\",\"attrs\":{\"mcpu\":\"cortex-m4\",\"mattr\":\"+nodsp\"},\"keys\":[\"a\",\"a\"]}");
    every_failure("{\"kind\":\"composite\",\"targets\":[\"cmsis-nn -mcpu=cortex-m7\",{\"kind\":\"c\"}]}");
}

Test(oom, default_host_tags_and_native)
{
    every_failure("ethos-n -tops=2");
    every_failure("{\"tag\": \"arm/corstone-300\", \"mattr\": [\"+nomve\"]}");
    every_failure("llvm -mcpu=native");
}

/* A bad target stays an error (with a code) whichever allocation fails. */
static void every_failure_of_error(const char *text)
{
    tth_diag d;
    json_t *t = tth_target_parse(reg, NULL, text, &d);
    cr_assert_null(t);
    json_set_alloc_funcs(failing_malloc, free);
    long n;
    for (n = 0; n < 100000; n++) {
        budget = n;
        used = 0;
        tth_diag_clear(&d);
        t = tth_target_parse(reg, NULL, text, &d);
        budget = -1;
        if (t || d.code == TTH_OK) {
            json_decref(t);
            json_set_alloc_funcs(malloc, free);
            cr_assert_fail("'%s' with allocation %ld failing: no error", text, n);
        }
        if (used <= n)
            break;
    }
    json_set_alloc_funcs(malloc, free);
}

Test(oom, errors_stay_errors)
{
    every_failure_of_error("llvm -mcpux=a");
    every_failure_of_error("{\"kind\":\"llvm\",\"num-cores\":\"4\"}");
    every_failure_of_error("cmsis-nn,c -mcpu=cortex-m99");
    every_failure_of_error("arm/cortex-m5");
}
