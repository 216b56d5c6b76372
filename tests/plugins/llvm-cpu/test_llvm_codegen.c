/* test_llvm_codegen.c: the llvm-cpu plugin's tir_to_runtime hook, end to end.
 *
 * Each test builds a TIR module with the IR builders, runs the hook of the real plugin
 * (build/plugins/tth-llvm-cpu.so), links the object it returns into a shared object with the
 * host's cc, loads that and calls the generated functions. Expected values are computed here in
 * plain C (closed form or a direct loop), never by the code under test.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../support/bf16_cases.h"
#include "helpers.h"
#include "tth/artifact.h"
#include "tth/plugin.h"
#include "tth/target.h"
#include "tth/tir.h"
#include "tth_config.h"

/* ---------------------------------------------------------------- harness */

static tth_tir_to_runtime_fn hook;
static char logged[4096];

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    (void)level;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", msg);
}

static void load_plugin(void)
{
    const char *root = getenv("TTH_BUILD_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/plugins/tth-llvm-cpu.so", root ? root : TTH_BUILD_ROOT);
    /* Kept loaded for the life of the test process (Criterion runs each test in its own). */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "dlopen %s: %s", path, dlerror());
    hook = (tth_tir_to_runtime_fn)dlsym(h, TTH_HOOK_TIR_TO_RUNTIME_SYMBOL);
    cr_assert_not_null(hook, "the plugin exports no %s", TTH_HOOK_TIR_TO_RUNTIME_SYMBOL);
}

TestSuite(llvm, .init = load_plugin, .fini = test_cleanup);

/* Run the hook for a target given as JSON text; returns its code, *out holds the files. */
static int run_hook(tth_tir_module *m, const char *target_json, tth_runtime_module **out, tth_diag *d)
{
    json_error_t je;
    json_t *raw = json_loads(target_json, 0, &je), *t = NULL;
    cr_assert_not_null(raw, "bad target JSON in the test: %s", je.text);
    /* the hook is given a parsed target (features filled in), as the daemon gives it; one the
     * parser refuses goes to the hook as it is, to see the hook refuse it too */
    if (tth_cpu_target_parse(raw, &t, d) != 0)
        t = json_incref(raw);
    json_decref(raw);
    *out = tth_runtime_module_new("llvm");
    cr_assert_not_null(*out);
    tth_host host = {.size = sizeof host, .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR,
                     .log = log_cb};
    int rc = hook(&host, t, m, *out, d);
    json_decref(t);
    return rc;
}

#define HOST_TARGET "{\"kind\": \"llvm\"}"

typedef struct linked {
    char dir[512];
    char obj[800], so[800], src[800], pool[800];
    void *lib;
} linked;

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void unlink_module(linked *l)
{
    if (l->lib)
        dlclose(l->lib);
    test_rmtree(l->dir);
}

static void unlink_copy(void *l)
{
    unlink_module(l);
    free(l);
}

/* Link the module's object (plus optional C source) into a shared object and load it: with the
 * thread pool's C source when the module has parallel loops, or, with from_objects set, with the
 * module's link objects in its place as tthd's build links them (docs/artifact.md, "The host
 * library"). */
static int from_objects;

static void link_module(const tth_runtime_module *rm, const char *extra_c, linked *l)
{
    memset(l, 0, sizeof *l);
    test_mkdtemp(l->dir, sizeof l->dir);
    char links[2400] = "";
    size_t nobj = 0, nsrc = 0;
    for (size_t i = 0; i < tth_runtime_module_count(rm); i++) {
        const tth_module_file *f = tth_runtime_module_file(rm, i);
        char path[700];
        snprintf(path, sizeof path, "%s/%s", l->dir, f->name);
        if (f->kind == TTH_FILE_OBJECT) {
            cr_assert_eq(nobj++, 0, "more than one object");
            snprintf(l->obj, sizeof l->obj, "%s", path);
        } else if (f->kind == TTH_FILE_C_SOURCE) {
            cr_assert_eq(nsrc++, 0, "more than one source");
            if (!from_objects)
                snprintf(l->pool, sizeof l->pool, "%s", path);
        } else {
            cr_assert_eq(f->kind, TTH_FILE_LINK_OBJECT, "file kind %d", (int)f->kind);
            if (from_objects)
                snprintf(links + strlen(links), sizeof links - strlen(links), " '%s'", path);
        }
        write_file(path, f->data, f->len);
    }
    cr_assert_eq(nobj, 1, "no object");
    cr_assert(!from_objects || links[0], "no link objects");
    snprintf(l->so, sizeof l->so, "%s/libmodel.so", l->dir);
    char cmd[6400];
    if (extra_c) {
        snprintf(l->src, sizeof l->src, "%s/extra.c", l->dir);
        write_file(l->src, extra_c, strlen(extra_c));
    }
    snprintf(cmd, sizeof cmd, "%s -shared -fPIC -pthread -o '%s' '%s' %s%s%s %s%s%s%s -lm", TTH_CC, l->so, l->obj,
             extra_c ? "'" : "", extra_c ? l->src : "", extra_c ? "'" : "", l->pool[0] ? "'" : "",
             l->pool[0] ? l->pool : "", l->pool[0] ? "'" : "", links);
    cr_assert_eq(system(cmd), 0, "link failed: %s", cmd);
    l->lib = dlopen(l->so, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(l->lib, "dlopen: %s", dlerror());
    /* unlinked after the test, from a copy (l is the test's) */
    linked *copy = malloc(sizeof *copy);
    cr_assert_not_null(copy);
    *copy = *l;
    test_defer(unlink_copy, copy);
}


static void *sym(linked *l, const char *name)
{
    void *p = dlsym(l->lib, name);
    cr_assert_not_null(p, "no symbol %s", name);
    return p;
}

/* Build, run the hook (must succeed), link. */
static void compile(tth_tir_module *m, const char *target, const char *extra_c, linked *l)
{
    tth_diag d;
    tth_runtime_module *rm;
    int rc = run_hook(m, target, &rm, &d);
    cr_assert_eq(rc, 0, "hook failed: %s (%s) at %s", d.message, tth_error_name(rc), d.location);
    link_module(rm, extra_c, l);
    tth_runtime_module_free(rm);
}

static void assert_close(double got, double want, double rel, const char *what, int i)
{
    if (isnan(want)) {
        cr_assert(isnan(got), "%s[%d]: got %.17g, want NaN", what, i, got);
        return;
    }
    double tol = rel * fmax(1.0, fabs(want));
    cr_assert(fabs(got - want) <= tol, "%s[%d]: got %.17g, want %.17g", what, i, got, want);
}

/* ---------------------------------------------------------------- IR shorthands */

static tth_tbuffer *buf1(tth_tir_module *m, const char *name, tth_dtype dt, int64_t n, tth_buffer_scope sc)
{
    tth_tbuffer *b = tth_tir_buffer(m, name, dt, 1, &n, sc);
    cr_assert_not_null(b);
    return b;
}

static void func(tth_tir_module *m, const char *name, tth_tbuffer *const *params, size_t n, tth_tstmt *body)
{
    tth_diag d;
    cr_assert_not_null(body, "a builder returned NULL for %s", name);
    cr_assert_not_null(tth_tir_func_add(m, name, params, n, body, "llvm", NULL, &d), "%s", d.message);
}

#define I64(v) tth_tir_i64(m, (v))
#define F32(v) tth_tir_float(m, TTH_F32, (v))
#define REF(v) tth_tir_ref(m, (v))
#define LOAD(b, i) tth_tir_load(m, (b), (i))
#define BIN(op, a, b) tth_tir_bin(m, TTH_TBIN_##op, (a), (b))
#define STORE(b, i, v) tth_tir_store(m, (b), (i), (v))
#define FOR(v, n, kind, body) tth_tir_for(m, (v), I64(0), I64(n), (kind), (body))

typedef int32_t (*fn2)(void *, void *, void *);
typedef int32_t (*fn3)(void *, void *, void *, void *);
typedef int32_t (*fn4)(void *, void *, void *, void *, void *);
typedef int32_t (*fn_vk)(void *, void *, void *, void *, void *, void *);
typedef int32_t (*entry_fn)(const void *inputs, void *outputs, void *workspace);

/* ---------------------------------------------------------------- elementwise and loops */

/* o[i] = a[i] * 2 + b[i] - 1 over n elements, loop of the given kind. */
static tth_tir_module *axpy_module(int64_t n, tth_loop_kind kind)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *b = buf1(m, "b", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_texpr *v = BIN(SUB, BIN(ADD, BIN(MUL, LOAD(a, REF(i)), F32(2)), LOAD(b, REF(i))), F32(1));
    tth_tbuffer *ps[] = {a, b, o};
    func(m, "axpy", ps, 3, FOR(i, n, kind, STORE(o, REF(i), v)));
    return m;
}

static void check_axpy(int64_t n, tth_loop_kind kind, const char *target)
{
    tth_tir_module *m = axpy_module(n, kind);
    linked l;
    compile(m, target, NULL, &l);
    fn3 f = (fn3)sym(&l, "axpy");
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *o = malloc((size_t)n * 4 + 4);
    for (int64_t i = 0; i < n; i++) {
        a[i] = (float)i * 0.25f - 3.0f;
        b[i] = (float)(i % 7) - 2.5f;
    }
    o[n] = 12345.0f;   /* past the end: must stay */
    cr_assert_eq(f(a, b, o, NULL), 0);
    for (int64_t i = 0; i < n; i++)
        assert_close(o[i], a[i] * 2.0f + b[i] - 1.0f, 1e-6, "o", (int)i);
    cr_assert_eq(o[n], 12345.0f, "the loop wrote past its extent");
    free(a);
    free(b);
    free(o);
}

Test(llvm, elementwise_vectorized_o3)
{
    check_axpy(1003, TTH_LOOP_VECTORIZED, "{\"kind\": \"llvm\", \"opt-level\": 3}");
}

Test(llvm, elementwise_serial_o0)
{
    check_axpy(37, TTH_LOOP_SERIAL, "{\"kind\": \"llvm\", \"opt-level\": 0}");
}

Test(llvm, elementwise_parallel_on_the_pool)
{
    check_axpy(1000, TTH_LOOP_PARALLEL, HOST_TARGET);
}

Test(llvm, elementwise_parallel_one_core_is_serial)
{
    check_axpy(100, TTH_LOOP_PARALLEL, "{\"kind\": \"llvm\", \"num-cores\": 1}");
}

/* The thread pool (docs/threads.md) behind a parallel loop whose body reads a LET variable and a
 * loop variable bound outside it (captured through the task's env), calls back into C to learn
 * which thread runs each iteration, and holds an inner PARALLEL loop (serial inside a task):
 *   for j < 2: let sc = s[j] in for i < 64 (parallel): for k < 3 (parallel):
 *       o[j*192 + i*3 + k] = sc * i + k;  who[j*64 + i] = tst_thread_slot(i)
 * With TTH_NUM_THREADS=2 on a machine with two or more CPUs, iterations run on two threads (in at
 * least one of up to 10 runs). */
static const char *const pool_c =
    "#include <stdint.h>\n"
    "static int next_slot;\n"
    "int tst_calls;\n"
    "static __thread int slot;\n"
    "int32_t tst_thread_slot(int64_t i) {\n"
    "    __atomic_add_fetch(&tst_calls, 1, __ATOMIC_SEQ_CST);\n"
    "    if (!slot) slot = __atomic_add_fetch(&next_slot, 1, __ATOMIC_SEQ_CST);\n"
    "    volatile double x = (double)i; for (int k = 0; k < 20000; k++) x = x * 1.0000001 + 1e-9;\n"
    "    return slot;\n"
    "}\n";

static void check_pool(void)
{
    setenv("TTH_NUM_THREADS", "2", 1);
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *s = buf1(m, "s", TTH_F32, 2, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_F32, 2 * 64 * 3, TTH_SCOPE_PARAM);
    tth_tbuffer *who = buf1(m, "who", TTH_I32, 2 * 64, TTH_SCOPE_PARAM);
    tth_tvar *j = tth_tir_var(m, "j", TTH_I64), *i = tth_tir_var(m, "i", TTH_I64), *k = tth_tir_var(m, "k", TTH_I64);
    tth_tvar *sc = tth_tir_var(m, "sc", TTH_F32);
    tth_texpr *oi = BIN(ADD, BIN(ADD, BIN(MUL, REF(j), I64(192)), BIN(MUL, REF(i), I64(3))), REF(k));
    tth_texpr *val = BIN(ADD, BIN(MUL, REF(sc), tth_tir_cast(m, TTH_F32, REF(i))), tth_tir_cast(m, TTH_F32, REF(k)));
    tth_texpr *slot_args[] = {REF(i)};
    tth_tstmt *body[] = {
        FOR(k, 3, TTH_LOOP_PARALLEL, STORE(o, oi, val)),
        STORE(who, BIN(ADD, BIN(MUL, REF(j), I64(64)), REF(i)), tth_tir_call_extern(m, TTH_I32, "tst_thread_slot", slot_args, 1)),
    };
    tth_tstmt *loop = FOR(i, 64, TTH_LOOP_PARALLEL, tth_tir_seq(m, body, 2));
    tth_tbuffer *ps[] = {s, o, who};
    func(m, "par", ps, 3, FOR(j, 2, TTH_LOOP_SERIAL, tth_tir_let(m, sc, LOAD(s, REF(j)), loop)));
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, HOST_TARGET, &rm, &d), 0, "%s", d.message);
    cr_assert_not_null(strstr(tth_runtime_module_file(rm, 1)->name, "_parallel.c"),
                       "the pool's C source comes with the object");
    /* on this machine, the pool's core and the model's launch function in its place */
    const json_t *rep = json_object_get(tth_runtime_module_meta(rm), "link_replaces");
    cr_assert_eq(json_array_size(rep), 1);
    cr_assert_str_eq(json_string_value(json_array_get(rep, 0)), tth_runtime_module_file(rm, 1)->name);
    cr_assert_eq(tth_runtime_module_count(rm), 4, "the object, the pool's source, its core and the link object");
    linked l;
    link_module(rm, pool_c, &l);
    tth_runtime_module_free(rm);
    typedef int32_t (*fn)(void *, void *, void *, void *);
    fn f = (fn)sym(&l, "par");
    float sv[2] = {0.5f, -2.0f}, ov[2 * 64 * 3];
    int32_t wv[2 * 64];
    /* which thread takes a task is up to the scheduler: on a busy machine the launching thread
     * may finish both tasks of a launch before the worker wakes, so up to 10 runs, and at least
     * one must spread over both threads */
    int runs = 0, distinct = 0;
    while (runs < 10 && distinct != 2) {
        memset(ov, 0, sizeof ov);
        cr_assert_eq(f(sv, ov, wv, NULL), 0);
        runs++;
        for (int jj = 0; jj < 2; jj++)
            for (int ii = 0; ii < 64; ii++)
                for (int kk = 0; kk < 3; kk++)
                    assert_close(ov[jj * 192 + ii * 3 + kk], sv[jj] * (float)ii + (float)kk, 1e-6, "o",
                                 jj * 192 + ii * 3 + kk);
        int seen[8] = {0};
        distinct = 0;
        for (int n = 0; n < 2 * 64; n++) {
            cr_assert(wv[n] >= 1 && wv[n] < 8, "slot %d", wv[n]);
            distinct += !seen[wv[n]]++;
        }
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
            break;
    }
    if (sysconf(_SC_NPROCESSORS_ONLN) >= 2)
        cr_assert_eq(distinct, 2, "TTH_NUM_THREADS=2: in %d runs the iterations never ran on two threads", runs);
    cr_assert_eq(*(int *)sym(&l, "tst_calls"), runs * 2 * 64, "every iteration runs exactly once");
    unsetenv("TTH_NUM_THREADS");
}

Test(llvm, parallel_loop_runs_on_pool_threads_with_captures)
{
    check_pool();
}

/* The same with the pool's core and the link object in place of its source, as tthd links it. */
Test(llvm, parallel_loop_runs_on_the_linked_pool_core)
{
    from_objects = 1;
    check_pool();
}

Test(llvm, elementwise_unrolled)
{
    check_axpy(16, TTH_LOOP_UNROLLED, "{\"kind\": \"llvm\", \"opt-level\": 2}");
}

/* ---------------------------------------------------------------- vector TIR (ABI 1.2) */

/* a program built with a cross compiler and run under qemu-user (helpers further down) */
typedef struct cross_run {
    char dir[512], obj[600], src[600], exe[600], out[600], pool[600];
    FILE *fp;   /* the program's standard output */
} cross_run;
static int have_prog(const char *p);
static void cross_aarch64(const tth_runtime_module *rm, const char *main_c, cross_run *r);
static double cross_next(cross_run *r);
static void cross_done(cross_run *r);

/* A micro-kernel in vector TIR, n = 8 * nb + tail:
 *   acc (REGISTER, 2 vectors of 8) = 0
 *   for k < K: acc[r] = fma(a[ramp(r*8 + k*16)], broadcast(s[k]), acc[r])
 *   o[ramp(r*8)] = acc[r] + g[ramp(r*2*8 .. stride 2)]   (a gathered operand)
 *   sum[0] = reduce_add(o[0..8]) ; mx[0] = reduce_max(o[8..16])
 * checked against the same arithmetic in C. */
Test(llvm, vector_tir_fma_gather_reduce_register)
{
    enum { L = 8, R = 2, K = 5 };
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, K * R * L, TTH_SCOPE_PARAM);
    tth_tbuffer *s = buf1(m, "s", TTH_F32, K, TTH_SCOPE_PARAM);
    tth_tbuffer *g = buf1(m, "g", TTH_F32, 2 * R * L, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_F32, R * L, TTH_SCOPE_PARAM);
    tth_tbuffer *red = buf1(m, "red", TTH_F32, 2, TTH_SCOPE_PARAM);
    tth_tbuffer *acc = buf1(m, "acc", TTH_F32, R * L, TTH_SCOPE_REGISTER);
    tth_tvar *k = tth_tir_var(m, "k", TTH_I64);
    tth_tvar *sv = tth_tir_var_vec(m, "sv", TTH_F32, L);
    tth_tstmt *body = NULL;
    for (int r = 0; r < R; r++)
        cr_assert_eq(tth_tir_seq_append(m, &body, tth_tir_vstore(m, acc, I64(r * L),
                                                                 tth_tir_broadcast(m, F32(0), L), 32)), 0);
    tth_tstmt *kb = NULL;
    for (int r = 0; r < R; r++) {
        tth_texpr *av = tth_tir_vload(m, a, BIN(ADD, BIN(MUL, REF(k), I64(R * L)), I64(r * L)), L, 4);
        tth_texpr *upd = tth_tir_fma(m, av, REF(sv), tth_tir_vload(m, acc, I64(r * L), L, 32));
        cr_assert_eq(tth_tir_seq_append(m, &kb, tth_tir_vstore(m, acc, I64(r * L), upd, 32)), 0);
    }
    tth_tstmt *kl = tth_tir_let(m, sv, tth_tir_broadcast(m, LOAD(s, REF(k)), L), kb);
    cr_assert_eq(tth_tir_seq_append(m, &body, FOR(k, K, TTH_LOOP_SERIAL, kl)), 0);
    for (int r = 0; r < R; r++) {
        tth_texpr *gv = LOAD(g, tth_tir_ramp(m, I64(r * 2 * L), 2, L));
        cr_assert_not_null(gv);
        tth_texpr *v = BIN(ADD, tth_tir_vload(m, acc, I64(r * L), L, 32), gv);
        cr_assert_eq(tth_tir_seq_append(m, &body, tth_tir_vstore(m, o, I64(r * L), v, 0)), 0);
    }
    cr_assert_eq(tth_tir_seq_append(m, &body, STORE(red, I64(0), tth_tir_intrin(m, TTH_TINTRIN_REDUCE_ADD,
                                                                                 tth_tir_vload(m, o, I64(0), L, 0), NULL))), 0);
    cr_assert_eq(tth_tir_seq_append(m, &body, STORE(red, I64(1), tth_tir_intrin(m, TTH_TINTRIN_REDUCE_MAX,
                                                                                 tth_tir_vload(m, o, I64(L), L, 0), NULL))), 0);
    body = tth_tir_allocate(m, acc, body);
    tth_tbuffer *ps[] = {a, s, g, o, red};
    func(m, "vk", ps, 5, body);
    tth_diag d;
    cr_assert_eq(tth_tir_verify(m, &d), 0, "%s", d.message);
    char *text = tth_tir_print(m);
    cr_assert(text && strstr(text, "ramp(") && strstr(text, "broadcast(") && strstr(text, "fma("), "%s", text);
    free(text);

    float av[K * R * L], sv_[K], gv_[2 * R * L], want[R * L], out[R * L + 1], rv[2];
    for (int i = 0; i < K * R * L; i++)
        av[i] = (float)((i * 37) % 23) * 0.125f - 1.0f;
    for (int i = 0; i < K; i++)
        sv_[i] = 0.5f + (float)i * 0.25f;
    for (int i = 0; i < 2 * R * L; i++)
        gv_[i] = (float)i * 0.01f;
    for (int j = 0; j < R * L; j++) {
        float x = 0;
        for (int kk = 0; kk < K; kk++)
            x = fmaf(av[kk * R * L + j], sv_[kk], x);
        want[j] = x + gv_[(j / L) * 2 * L + (j % L) * 2];
    }
    float wsum = 0, wmax = -INFINITY;
    for (int j = 0; j < L; j++)
        wsum += want[j];
    for (int j = L; j < 2 * L; j++)
        wmax = want[j] > wmax ? want[j] : wmax;
    const char *targets[] = {HOST_TARGET, "{\"kind\": \"llvm\", \"opt-level\": 0}",
                             "{\"kind\": \"llvm\", \"mcpu\": \"generic\"}"};
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        linked l;
        compile(m, targets[t], NULL, &l);
        fn_vk f = (fn_vk)sym(&l, "vk");
        out[R * L] = 777.0f;
        cr_assert_eq(f(av, sv_, gv_, out, rv, NULL), 0);
        for (int j = 0; j < R * L; j++)
            assert_close(out[j], want[j], 1e-6, "o", j);
        cr_assert_eq(out[R * L], 777.0f, "a vector store wrote past the buffer");
        assert_close(rv[0], wsum, 1e-5, "reduce_add", 0);
        assert_close(rv[1], wmax, 0, "reduce_max", 0);
    }
    /* the same kernel as NEON code, run under qemu-aarch64 */
    if (have_prog("aarch64-linux-gnu-gcc") && have_prog("qemu-aarch64")) {
        tth_runtime_module *rm;
        cr_assert_eq(run_hook(m, "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\", \"mcpu\": \"cortex-a72\"}",
                              &rm, &d), 0, "%s", d.message);
        char main_c[2048];
        snprintf(main_c, sizeof main_c,
                 "#include <stdint.h>\n#include <stdio.h>\n"
                 "int32_t vk(void *, void *, void *, void *, void *, void *);\n"
                 "int main(void) {\n"
                 "    static float a[%d], s[%d], g[%d], o[%d], r[2];\n"
                 "    for (int i = 0; i < %d; i++) a[i] = (float)((i * 37) %% 23) * 0.125f - 1.0f;\n"
                 "    for (int i = 0; i < %d; i++) s[i] = 0.5f + (float)i * 0.25f;\n"
                 "    for (int i = 0; i < %d; i++) g[i] = (float)i * 0.01f;\n"
                 "    int32_t rc = vk(a, s, g, o, r, 0);\n"
                 "    for (int j = 0; j < %d; j++) printf(\"%%a\\n\", (double)o[j]);\n"
                 "    printf(\"%%a\\n%%a\\n\", (double)r[0], (double)r[1]);\n"
                 "    return rc;\n}\n",
                 K * R * L, K, 2 * R * L, R * L, K * R * L, K, 2 * R * L, R * L);
        cross_run cr;
        cross_aarch64(rm, main_c, &cr);
        for (int j = 0; j < R * L; j++)
            assert_close(cross_next(&cr), want[j], 1e-6, "aarch64 o", j);
        assert_close(cross_next(&cr), wsum, 1e-5, "aarch64 reduce_add", 0);
        assert_close(cross_next(&cr), wmax, 0, "aarch64 reduce_max", 0);
        cross_done(&cr);
        tth_runtime_module_free(rm);
    }
}

/* n floats that end where a PROT_NONE page begins: an access past the last one faults. */
static float *guarded(size_t n, void **map, size_t *maplen)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = n * sizeof(float);
    size_t span = (bytes + page - 1) / page * page;
    *maplen = span + page;
    *map = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(*map, MAP_FAILED);
    cr_assert_eq(mprotect((char *)*map + span, page, PROT_NONE), 0);
    return (float *)((char *)*map + span - bytes);
}

/* Vectors whose lane count is not a power of two (docs/lowering.md, "Vector tails"): on AVX-512
 * they become masked accesses of the next power of two, which must neither read nor write past
 * their last lane. a (27 floats) and o (21) end at a guard page, so a wider access faults:
 *   t (a REGISTER tile of 14 lanes) = 2 * a[13 .. 27)
 *   o[7 .. 21) = t + 1
 *   o[0 .. 7)  = a[14, 16, .., 26]   (stride 2: one load of the 13-element span and a shuffle) */
Test(llvm, vector_tails_stay_inside_their_buffers)
{
    enum { NA = 27, NO = 21 };
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, NA, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_F32, NO, TTH_SCOPE_PARAM);
    tth_tbuffer *t = buf1(m, "t", TTH_F32, 14, TTH_SCOPE_REGISTER);
    tth_tstmt *body = NULL;
    cr_assert_eq(tth_tir_seq_append(m, &body, tth_tir_vstore(m, t, I64(0),
                 BIN(MUL, tth_tir_vload(m, a, I64(NA - 14), 14, 0), tth_tir_broadcast(m, F32(2), 14)), 0)), 0);
    cr_assert_eq(tth_tir_seq_append(m, &body, tth_tir_vstore(m, o, I64(NO - 14),
                 BIN(ADD, tth_tir_vload(m, t, I64(0), 14, 0), tth_tir_broadcast(m, F32(1), 14)), 0)), 0);
    cr_assert_eq(tth_tir_seq_append(m, &body, tth_tir_vstore(m, o, I64(0),
                 LOAD(a, tth_tir_ramp(m, I64(NA - 13), 2, 7)), 0)), 0);
    tth_tbuffer *ps[] = {a, o};
    func(m, "tails", ps, 2, tth_tir_allocate(m, t, body));
    /* this machine's CPU (masked accesses where it has AVX-512), and the portable x86-64 */
    const char *targets[] = {"{\"kind\": \"llvm\", \"mcpu\": \"native\"}", HOST_TARGET};
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        linked l;
        compile(m, targets[k], NULL, &l);
        fn2 f = (fn2)sym(&l, "tails");
        void *ma, *mo;
        size_t la, lo;
        float *av = guarded(NA, &ma, &la), *ov = guarded(NO, &mo, &lo);
        for (int i = 0; i < NA; i++)
            av[i] = (float)i * 0.5f - 3.0f;
        for (int i = 0; i < NO; i++)
            ov[i] = -99.0f;
        cr_assert_eq(f(av, ov, NULL), 0);
        for (int j = 0; j < 7; j++)
            assert_close(ov[j], av[NA - 13 + 2 * j], 0, "o (stride 2)", j);
        for (int j = 0; j < 14; j++)
            assert_close(ov[NO - 14 + j], 2.0f * av[NA - 14 + j] + 1.0f, 1e-6, "o (14 lanes)", NO - 14 + j);
        munmap(ma, la);
        munmap(mo, lo);
    }
}

/* Bytes and halves a constant stride apart (docs/llvm.md, "Strided bytes"): one scalar access per
 * lane, in both directions, every lane in its place:
 *   o8[ramp(3, 7, 16)] = a8[ramp(100, -6, 16)] + 1          (uint8: stride 7 stores, -6 loads)
 *   o16[ramp(0, 5, 9)] = a16[ramp(2, 9, 9)]                  (int16, 9 lanes)
 * and the elements between the stored lanes keep their values. */
Test(llvm, strided_bytes_and_halves)
{
    enum { NA8 = 101, NO8 = 3 + 7 * 15 + 1, NA16 = 2 + 9 * 8 + 1, NO16 = 5 * 8 + 1 };
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a8 = buf1(m, "a8", TTH_U8, NA8, TTH_SCOPE_PARAM), *o8 = buf1(m, "o8", TTH_U8, NO8, TTH_SCOPE_PARAM);
    tth_tbuffer *a16 = buf1(m, "a16", TTH_I16, NA16, TTH_SCOPE_PARAM), *o16 = buf1(m, "o16", TTH_I16, NO16, TTH_SCOPE_PARAM);
    tth_tstmt *body = NULL;
    tth_texpr *one = tth_tir_broadcast(m, tth_tir_int(m, TTH_U8, 1), 16);
    cr_assert_eq(tth_tir_seq_append(m, &body, STORE(o8, tth_tir_ramp(m, I64(3), 7, 16),
                                                    BIN(ADD, LOAD(a8, tth_tir_ramp(m, I64(100), -6, 16)), one))), 0);
    cr_assert_eq(tth_tir_seq_append(m, &body, STORE(o16, tth_tir_ramp(m, I64(0), 5, 9), LOAD(a16, tth_tir_ramp(m, I64(2), 9, 9)))), 0);
    tth_tbuffer *ps[] = {a8, o8, a16, o16};
    func(m, "strided", ps, 4, body);
    const char *targets[] = {"{\"kind\": \"llvm\", \"mcpu\": \"native\"}", HOST_TARGET};
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        linked l;
        compile(m, targets[k], NULL, &l);
        uint8_t va8[NA8], vo8[NO8];
        int16_t va16[NA16], vo16[NO16];
        for (int i = 0; i < NA8; i++)
            va8[i] = (uint8_t)(i * 37 + 11);
        for (int i = 0; i < NA16; i++)
            va16[i] = (int16_t)(i * -1013 + 7);
        memset(vo8, 0xAB, sizeof vo8);
        for (int i = 0; i < NO16; i++)
            vo16[i] = -5;
        cr_assert_eq(((fn4)sym(&l, "strided"))(va8, vo8, va16, vo16, NULL), 0);
        for (int i = 0; i < NO8; i++) {
            int lane = (i - 3) / 7;
            uint8_t want = i >= 3 && (i - 3) % 7 == 0 ? (uint8_t)(va8[100 - 6 * lane] + 1) : 0xAB;
            cr_assert_eq(vo8[i], want, "o8[%d] on %s: got %d, want %d", i, targets[k], vo8[i], want);
        }
        for (int i = 0; i < NO16; i++) {
            int16_t want = i % 5 == 0 ? va16[2 + 9 * (i / 5)] : -5;
            cr_assert_eq(vo16[i], want, "o16[%d] on %s: got %d, want %d", i, targets[k], vo16[i], want);
        }
    }
}

/* Lanes that are a constant permutation of a short span (docs/llvm.md, "Permuted loads"): the
 * grouped kernel's index broadcast(s) + (ramp(0, 1, 16) / g) * g + i, s a runtime scalar, and a
 * reversed span broadcast(s) + (15 - ramp): every lane where its index says, on this CPU and on
 * the plain target, for g = 4 and 8 and each i.
 *   o[ramp(16*q, 1, 16)] = a[broadcast(s) + perm_q]   (q over the six permutations below) */
Test(llvm, permuted_loads)
{
    enum { NA = 64, NO = 6 * 16 };
    static const int gs[6][2] = {{4, 0}, {4, 3}, {8, 1}, {8, 7}, {2, 1}, {0, 0}}; /* {0, 0}: reversed */
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, NA, TTH_SCOPE_PARAM), *o = buf1(m, "o", TTH_F32, NO, TTH_SCOPE_PARAM);
    tth_tbuffer *sb = buf1(m, "s", TTH_I64, 1, TTH_SCOPE_PARAM);
    tth_tstmt *body = NULL;
    for (int q = 0; q < 6; q++) {
        tth_texpr *lanes = tth_tir_ramp(m, I64(0), 1, 16), *perm;
        if (gs[q][0])
            perm = BIN(ADD, BIN(MUL, BIN(DIV, lanes, I64(gs[q][0])), I64(gs[q][0])), I64(gs[q][1]));
        else
            perm = BIN(SUB, I64(15), lanes);
        tth_texpr *ix = BIN(ADD, tth_tir_broadcast(m, LOAD(sb, I64(0)), 16), perm);
        cr_assert_eq(tth_tir_seq_append(m, &body, STORE(o, tth_tir_ramp(m, I64(16 * q), 1, 16), LOAD(a, ix))), 0);
    }
    tth_tbuffer *ps[] = {a, o, sb};
    func(m, "permuted", ps, 3, body);
    const char *targets[] = {"{\"kind\": \"llvm\", \"mcpu\": \"native\"}", HOST_TARGET};
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        linked l;
        compile(m, targets[k], NULL, &l);
        float va[NA], vo[NO];
        for (int i = 0; i < NA; i++)
            va[i] = (float)(i * 3 + 1);
        int64_t s = 21;
        cr_assert_eq(((fn3)sym(&l, "permuted"))(va, vo, &s, NULL), 0);
        for (int q = 0; q < 6; q++)
            for (int lane = 0; lane < 16; lane++) {
                int off = gs[q][0] ? lane / gs[q][0] * gs[q][0] + gs[q][1] : 15 - lane;
                cr_assert_eq(vo[16 * q + lane], va[s + off], "permutation %d lane %d on %s: got %g, want %g", q, lane,
                             targets[k], vo[16 * q + lane], va[s + off]);
            }
    }
}

/* C[i, j] = sum_k A[i, k] * B[k, j]: i parallel, j vectorized, k serial reduction into C. */
Test(llvm, matmul_reduction)
{
    enum { M = 13, N = 17, K = 9 };
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *A = buf1(m, "A", TTH_F32, M * K, TTH_SCOPE_PARAM);
    tth_tbuffer *B = buf1(m, "B", TTH_F32, K * N, TTH_SCOPE_PARAM);
    tth_tbuffer *C = buf1(m, "C", TTH_F32, M * N, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64), *j = tth_tir_var(m, "j", TTH_I64), *k = tth_tir_var(m, "k", TTH_I64);
    tth_texpr *cij = BIN(ADD, BIN(MUL, REF(i), I64(N)), REF(j));
    tth_texpr *aik = LOAD(A, BIN(ADD, BIN(MUL, REF(i), I64(K)), REF(k)));
    tth_texpr *bkj = LOAD(B, BIN(ADD, BIN(MUL, REF(k), I64(N)), REF(j)));
    tth_tstmt *acc = STORE(C, cij, BIN(ADD, LOAD(C, cij), BIN(MUL, aik, bkj)));
    tth_tstmt *body[] = {STORE(C, cij, F32(0)), FOR(k, K, TTH_LOOP_SERIAL, acc)};
    tth_tstmt *jl = FOR(j, N, TTH_LOOP_VECTORIZED, tth_tir_seq(m, body, 2));
    tth_tbuffer *ps[] = {A, B, C};
    func(m, "matmul", ps, 3, FOR(i, M, TTH_LOOP_PARALLEL, jl));

    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    fn3 f = (fn3)sym(&l, "matmul");
    float a[M * K], b[K * N], c[M * N];
    for (int x = 0; x < M * K; x++)
        a[x] = (float)((x * 7) % 9 - 4);          /* small integers: sums are exact */
    for (int x = 0; x < K * N; x++)
        b[x] = (float)((x * 5) % 11 - 5);
    cr_assert_eq(f(a, b, c, NULL), 0);
    for (int r = 0; r < M; r++)
        for (int s = 0; s < N; s++) {
            float want = 0;
            for (int t = 0; t < K; t++)
                want += a[r * K + t] * b[t * N + s];
            cr_assert_eq(c[r * N + s], want, "C[%d,%d] = %g, want %g", r, s, c[r * N + s], want);
        }
}

/* ---------------------------------------------------------------- integer semantics */

static const tth_tir_binop int_ops[] = {TTH_TBIN_ADD, TTH_TBIN_SUB, TTH_TBIN_MUL, TTH_TBIN_DIV,
                                        TTH_TBIN_MOD, TTH_TBIN_FLOORDIV, TTH_TBIN_FLOORMOD, TTH_TBIN_MIN,
                                        TTH_TBIN_MAX, TTH_TBIN_BITAND, TTH_TBIN_BITOR};
#define NOPS (sizeof int_ops / sizeof int_ops[0])

static int64_t int_ref(tth_tir_binop op, int64_t a, int64_t b)
{
    switch (op) {
    case TTH_TBIN_ADD: return a + b;
    case TTH_TBIN_SUB: return a - b;
    case TTH_TBIN_MUL: return a * b;
    case TTH_TBIN_DIV: return a / b;
    case TTH_TBIN_MOD: return a % b;
    case TTH_TBIN_FLOORDIV: return (int64_t)floor((double)a / (double)b);
    case TTH_TBIN_FLOORMOD: return a - (int64_t)floor((double)a / (double)b) * b;
    case TTH_TBIN_MIN: return a < b ? a : b;
    case TTH_TBIN_MAX: return a > b ? a : b;
    case TTH_TBIN_BITAND: return a & b;
    case TTH_TBIN_BITOR: return a | b;
    default: return 0;
    }
}

/* o[k * n + i] = op_k(a[i], b[i]) for every op in int_ops, in the given integer dtype. */
static tth_tir_module *int_ops_module(tth_dtype dt, int64_t n)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", dt, n, TTH_SCOPE_PARAM);
    tth_tbuffer *b = buf1(m, "b", dt, n, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", dt, n * (int64_t)NOPS, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tstmt *seq = NULL;
    for (size_t k = 0; k < NOPS; k++) {
        tth_texpr *v = tth_tir_bin(m, int_ops[k], LOAD(a, REF(i)), LOAD(b, REF(i)));
        cr_assert_eq(tth_tir_seq_append(m, &seq, STORE(o, BIN(ADD, REF(i), I64((int64_t)k * n)), v)), 0);
    }
    tth_tbuffer *ps[] = {a, b, o};
    func(m, "intops", ps, 3, FOR(i, n, TTH_LOOP_SERIAL, seq));
    return m;
}

Test(llvm, int32_semantics_floordiv_floormod)
{
    enum { n = 10 };
    int32_t a[n] = {7, -7, 7, -7, 0, 13, -13, 5, -1, 2147483647};
    int32_t b[n] = {2, 2, -2, -2, 3, -4, -4, 7, 3, 1};
    int32_t o[n * NOPS];
    tth_tir_module *m = int_ops_module(TTH_I32, n);
    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    cr_assert_eq(((fn3)sym(&l, "intops"))(a, b, o, NULL), 0);
    for (size_t k = 0; k < NOPS; k++)
        for (int i = 0; i < n; i++) {
            if (int_ops[k] == TTH_TBIN_ADD && i == n - 1)
                continue;   /* INT32_MAX + 1 overflows: undefined in C and in the IR */
            if (int_ops[k] == TTH_TBIN_MUL && i == n - 1)
                continue;
            int64_t want = int_ref(int_ops[k], a[i], b[i]);
            cr_assert_eq(o[k * n + (size_t)i], (int32_t)want, "op %zu on (%d, %d): got %d, want %lld", k,
                         a[i], b[i], o[k * n + (size_t)i], (long long)want);
        }
}

/* int8 arithmetic is done in int and wrapped back, as C does; int8 division of -128 by -1 too. */
Test(llvm, int8_wraps_like_c)
{
    enum { n = 5 };
    int8_t a[n] = {100, -128, 127, -1, -100};
    int8_t b[n] = {100, -1, 1, -1, 3};
    int8_t o[n * NOPS];
    tth_tir_module *m = int_ops_module(TTH_I8, n);
    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    cr_assert_eq(((fn3)sym(&l, "intops"))(a, b, o, NULL), 0);
    for (size_t k = 0; k < NOPS; k++)
        for (int i = 0; i < n; i++) {
            int8_t want = (int8_t)int_ref(int_ops[k], a[i], b[i]);
            cr_assert_eq(o[k * n + (size_t)i], want, "op %zu on (%d, %d): got %d, want %d", k, a[i], b[i],
                         o[k * n + (size_t)i], want);
        }
}

/* DOT4_US / DOT4_SS (docs/tir.md, "Dot products") at 1, 5, 16 and 24 lanes: one lane, a piece
 * narrower than the instruction (padded), its width, and more (cut in pieces), on the machine's
 * own CPU (vpdpbusd where it has VNNI) and on AVX2 without it (widening multiplies); against the
 * definition, with the bytes' extremes and sums that wrap. */
static const int dot_lanes[] = {1, 5, 16, 24};

static tth_tir_module *dot4_module(void)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_I32, 24, TTH_SCOPE_PARAM), *b = buf1(m, "b", TTH_I32, 24, TTH_SCOPE_PARAM);
    tth_tbuffer *acc = buf1(m, "acc", TTH_I32, 24, TTH_SCOPE_PARAM), *o = buf1(m, "o", TTH_I32, 2 * 46, TTH_SCOPE_PARAM);
    tth_tstmt *body = NULL;
    int64_t at = 0;
    for (int us = 0; us < 2; us++)
        for (size_t k = 0; k < sizeof dot_lanes / sizeof dot_lanes[0]; k++) {
            int n = dot_lanes[k];
            tth_texpr *v[3];
            tth_tbuffer *src[3] = {acc, a, b};
            for (int i = 0; i < 3; i++)
                v[i] = n == 1 ? LOAD(src[i], I64(0)) : tth_tir_vload(m, src[i], I64(0), n, 0);
            tth_texpr *d = tth_tir_intrin3(m, us ? TTH_TINTRIN_DOT4_US : TTH_TINTRIN_DOT4_SS, v[0], v[1], v[2]);
            cr_assert_not_null(d);
            tth_tstmt *st = n == 1 ? STORE(o, I64(at), d) : tth_tir_vstore(m, o, I64(at), d, 0);
            cr_assert_eq(tth_tir_seq_append(m, &body, st), 0);
            at += n;
        }
    tth_tbuffer *p[4] = {a, b, acc, o};
    func(m, "dot", p, 4, body);
    return m;
}

static void check_dot4(const char *target)
{
    int32_t a[24], b[24], acc[24], o[2 * 46];
    test_dot4_operands(a, b, acc, 24);
    tth_tir_module *m = dot4_module();
    linked l;
    compile(m, target, NULL, &l);
    cr_assert_eq(((fn4)sym(&l, "dot"))(a, b, acc, o, NULL), 0);
    int at = 0;
    for (int us = 0; us < 2; us++)
        for (size_t k = 0; k < sizeof dot_lanes / sizeof dot_lanes[0]; k++)
            for (int i = 0; i < dot_lanes[k]; i++, at++) {
                int32_t want = test_dot4(us, acc[i], a[i], b[i]);
                cr_assert_eq(o[at], want, "%s, %d lanes, lane %d on %s: got %d, want %d", us ? "dot4_us" : "dot4_ss",
                             dot_lanes[k], i, target, o[at], want);
            }
}

Test(llvm, dot4_products_every_width)
{
    check_dot4(HOST_TARGET);
    check_dot4("{\"kind\": \"llvm\", \"mcpu\": \"haswell\"}");
}

/* Shifts: arithmetic for signed, logical for unsigned; unsigned division and floordiv. */
Test(llvm, shifts_and_unsigned)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *s = buf1(m, "s", TTH_I32, 2, TTH_SCOPE_PARAM);
    tth_tbuffer *u = buf1(m, "u", TTH_U32, 2, TTH_SCOPE_PARAM);
    tth_tbuffer *os = buf1(m, "os", TTH_I32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *ou = buf1(m, "ou", TTH_U32, 4, TTH_SCOPE_PARAM);
    tth_texpr *s0 = LOAD(s, I64(0)), *u0 = LOAD(u, I64(0));
    tth_texpr *s1 = LOAD(s, I64(1)), *u1 = LOAD(u, I64(1));
    tth_tstmt *st[] = {
        STORE(os, I64(0), BIN(SHR, s0, s1)),
        STORE(os, I64(1), BIN(SHL, s0, s1)),
        STORE(ou, I64(0), BIN(SHR, u0, u1)),
        STORE(ou, I64(1), BIN(DIV, u0, u1)),
        STORE(ou, I64(2), BIN(FLOORDIV, u0, u1)),
        STORE(ou, I64(3), BIN(MAX, u0, u1)),
        STORE(os, I64(2), BIN(MIN, s0, s1)),
        STORE(os, I64(3), tth_tir_un(m, TTH_TUN_NEG, s0)),
    };
    tth_tbuffer *ps[] = {s, u, os, ou};
    func(m, "shifts", ps, 4, tth_tir_seq(m, st, 8));
    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    int32_t sv[2] = {-96, 3}, osv[4];
    uint32_t uv[2] = {0xF0000000u, 16u}, ouv[4];
    cr_assert_eq(((fn4)sym(&l, "shifts"))(sv, uv, osv, ouv, NULL), 0);
    cr_assert_eq(osv[0], -12);
    cr_assert_eq(osv[1], -768);
    cr_assert_eq(osv[2], -96);
    cr_assert_eq(osv[3], 96);
    cr_assert_eq(ouv[0], 0x0000F000u);   /* logical: no sign bits shifted in */
    cr_assert_eq(ouv[1], 0x0F000000u);
    cr_assert_eq(ouv[2], 0x0F000000u);
    cr_assert_eq(ouv[3], 0xF0000000u);   /* unsigned compare: 0xF0000000 > 16 */
}

/* ---------------------------------------------------------------- comparisons, select, bool */

Test(llvm, compare_select_bool)
{
    enum { n = 6 };
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *b = buf1(m, "b", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *lt = buf1(m, "lt", TTH_BOOL, n, TTH_SCOPE_PARAM);
    tth_tbuffer *fl = buf1(m, "fl", TTH_F32, 2 * n, TTH_SCOPE_PARAM);
    tth_tbuffer *ii = buf1(m, "ii", TTH_I32, 4 * n, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_texpr *ai = LOAD(a, REF(i)), *bi = LOAD(b, REF(i));
    tth_texpr *pos_a = BIN(GT, ai, F32(0)), *pos_b = BIN(GT, bi, F32(0));
    tth_tstmt *st[] = {
        STORE(lt, REF(i), BIN(LT, ai, bi)),
        STORE(fl, REF(i), tth_tir_select(m, BIN(GE, ai, bi), ai, bi)),
        STORE(fl, BIN(ADD, REF(i), I64(n)), BIN(MAX, ai, bi)),
        /* bool read back from memory */
        STORE(ii, REF(i), tth_tir_cast(m, TTH_I32, LOAD(lt, REF(i)))),
        STORE(ii, BIN(ADD, REF(i), I64(n)), tth_tir_cast(m, TTH_I32, BIN(NE, ai, bi))),
        STORE(ii, BIN(ADD, REF(i), I64(2 * n)), tth_tir_cast(m, TTH_I32, tth_tir_un(m, TTH_TUN_NOT, BIN(AND, pos_a, pos_b)))),
        STORE(ii, BIN(ADD, REF(i), I64(3 * n)), tth_tir_cast(m, TTH_I32, BIN(OR, pos_a, BIN(EQ, ai, bi)))),
    };
    tth_tbuffer *ps[] = {a, b, lt, fl, ii};
    func(m, "cmp", ps, 5, FOR(i, n, TTH_LOOP_SERIAL, tth_tir_seq(m, st, 7)));
    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    float av[n] = {1, -2, 3, NAN, 0, -1}, bv[n] = {2, -3, 3, 1, 0, 5}, flv[2 * n];
    uint8_t ltv[n];
    int32_t iiv[4 * n];
    typedef int32_t (*fn5)(void *, void *, void *, void *, void *, void *);
    cr_assert_eq(((fn5)sym(&l, "cmp"))(av, bv, ltv, flv, iiv, NULL), 0);
    for (int k = 0; k < n; k++) {
        float x = av[k], y = bv[k];
        cr_assert_eq(ltv[k], (uint8_t)(x < y), "lt[%d]", k);
        assert_close(flv[k], x >= y ? x : y, 0, "select", k);
        assert_close(flv[n + k], x > y ? x : y, 0, "max", k);
        cr_assert_eq(iiv[k], (int32_t)(x < y), "bool reload[%d]", k);
        cr_assert_eq(iiv[n + k], (int32_t)(x != y), "ne[%d] (NaN != y is true)", k);
        cr_assert_eq(iiv[2 * n + k], (int32_t)!(x > 0 && y > 0), "not-and[%d]", k);
        cr_assert_eq(iiv[3 * n + k], (int32_t)(x > 0 || x == y), "or[%d]", k);
    }
}

/* ---------------------------------------------------------------- casts */

Test(llvm, casts_follow_c)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *f = buf1(m, "f", TTH_F32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *s8 = buf1(m, "s8", TTH_I8, 2, TTH_SCOPE_PARAM);
    tth_tbuffer *u8 = buf1(m, "u8", TTH_U8, 2, TTH_SCOPE_PARAM);
    tth_tbuffer *oi = buf1(m, "oi", TTH_I32, 8, TTH_SCOPE_PARAM);
    tth_tbuffer *od = buf1(m, "od", TTH_F64, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *ob = buf1(m, "ob", TTH_BOOL, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *o16 = buf1(m, "o16", TTH_I16, 1, TTH_SCOPE_PARAM);
    tth_tbuffer *ou8 = buf1(m, "ou8", TTH_U8, 1, TTH_SCOPE_PARAM);
#define C(dt, e) tth_tir_cast(m, TTH_##dt, (e))
    tth_tstmt *st[] = {
        STORE(oi, I64(0), C(I32, LOAD(f, I64(0)))),           /* -2.7 → -2 */
        STORE(oi, I64(1), C(I32, LOAD(f, I64(1)))),           /* 2.7 → 2 */
        STORE(oi, I64(2), C(I32, LOAD(s8, I64(0)))),          /* -5 → -5 */
        STORE(oi, I64(3), C(I32, LOAD(u8, I64(0)))),          /* 200 → 200 */
        STORE(oi, I64(4), C(I32, C(U8, LOAD(s8, I64(0))))),   /* -5 → 251 */
        STORE(oi, I64(5), C(I32, C(I8, LOAD(u8, I64(0))))),   /* 200 → -56 */
        STORE(oi, I64(6), C(I32, C(BOOL, LOAD(f, I64(2))))),  /* -0.5 → 1 */
        STORE(oi, I64(7), C(I32, C(BOOL, LOAD(f, I64(3))))),  /* 0.0 → 0 */
        STORE(od, I64(0), C(F64, LOAD(f, I64(0)))),
        STORE(od, I64(1), C(F64, LOAD(s8, I64(1)))),          /* int8 → double, signed */
        STORE(od, I64(2), C(F64, LOAD(u8, I64(1)))),          /* uint8 → double, unsigned */
        STORE(od, I64(3), C(F64, C(BOOL, LOAD(u8, I64(1))))),
        STORE(ob, I64(0), C(BOOL, LOAD(s8, I64(0)))),
        STORE(ob, I64(1), C(BOOL, LOAD(f, I64(3)))),
        STORE(ob, I64(2), BIN(LT, LOAD(s8, I64(0)), LOAD(s8, I64(1)))),
        STORE(ob, I64(3), C(BOOL, C(I64, LOAD(u8, I64(1))))),
        STORE(o16, I64(0), C(I16, C(I64, C(I32, BIN(MUL, LOAD(f, I64(1)), F32(30000)))))),   /* 81000 → int16 wraps */
        STORE(ou8, I64(0), C(U8, LOAD(f, I64(1)))),           /* 2.7 → 2 */
    };
#undef C
    tth_tbuffer *ps[] = {f, s8, u8, oi, od, ob, o16, ou8};
    func(m, "casts", ps, 8, tth_tir_seq(m, st, sizeof st / sizeof st[0]));
    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    float fv[4] = {-2.7f, 2.7f, -0.5f, 0.0f};
    int8_t s8v[2] = {-5, -128};
    uint8_t u8v[2] = {200, 255}, obv[4], ou8v[1];
    int32_t oiv[8];
    double odv[4];
    int16_t o16v[1];
    typedef int32_t (*fn8)(void *, void *, void *, void *, void *, void *, void *, void *, void *);
    cr_assert_eq(((fn8)sym(&l, "casts"))(fv, s8v, u8v, oiv, odv, obv, o16v, ou8v, NULL), 0);
    int32_t want_i[8] = {-2, 2, -5, 200, 251, -56, 1, 0};
    for (int k = 0; k < 8; k++)
        cr_assert_eq(oiv[k], want_i[k], "oi[%d] = %d, want %d", k, oiv[k], want_i[k]);
    cr_assert_eq(odv[0], (double)-2.7f);
    cr_assert_eq(odv[1], -128.0);
    cr_assert_eq(odv[2], 255.0);
    cr_assert_eq(odv[3], 1.0);
    uint8_t want_b[4] = {1, 0, 0, 1};
    for (int k = 0; k < 4; k++)
        cr_assert_eq(obv[k], want_b[k], "ob[%d] = %d", k, obv[k]);
    cr_assert_eq(o16v[0], (int16_t)(int32_t)(2.7f * 30000.0f));
    cr_assert_eq(ou8v[0], 2);
}

/* float16 is a storage type: values round to the nearest half on store. */
Test(llvm, float16_storage)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *x = buf1(m, "x", TTH_F32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *h = buf1(m, "h", TTH_F16, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *y = buf1(m, "y", TTH_F32, 4, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_texpr *hv = tth_tir_cast(m, TTH_F16, LOAD(x, REF(i)));
    tth_texpr *back = tth_tir_cast(m, TTH_F32, tth_tir_intrin(m, TTH_TINTRIN_FABS, LOAD(h, REF(i)), NULL));
    /* float16 arithmetic: computed in float32, rounded to float16 */
    tth_tbuffer *z = buf1(m, "z", TTH_F32, 8, TTH_SCOPE_PARAM);
    tth_texpr *hi = LOAD(h, REF(i));
    tth_texpr *sum = tth_tir_cast(m, TTH_F32, BIN(ADD, hi, hi));
    tth_texpr *fdiv = tth_tir_cast(m, TTH_F32, BIN(FLOORDIV, hi, tth_tir_float(m, TTH_F16, 0.75)));
    tth_tstmt *st[] = {STORE(h, REF(i), hv), STORE(y, REF(i), back), STORE(z, REF(i), sum),
                       STORE(z, BIN(ADD, REF(i), I64(4)), fdiv)};
    tth_tbuffer *ps[] = {x, h, y, z};
    func(m, "half", ps, 4, FOR(i, 4, TTH_LOOP_SERIAL, tth_tir_seq(m, st, 4)));
    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    float xv[4] = {1.5f, -0.25f, 0.1f, 65504.0f}, yv[4], zv[8];
    uint16_t hv_bits[4];
    cr_assert_eq(((fn4)sym(&l, "half"))(xv, hv_bits, yv, zv, NULL), 0);
    float want_z[8] = {3.0f, -0.5f, 0.199951171875f, INFINITY, /* floor(h / 0.75) */ 2.0f, -1.0f, 0.0f, INFINITY};
    for (int k = 0; k < 8; k++)
        cr_assert_eq(zv[k], want_z[k], "z[%d] = %.9g, want %.9g", k, zv[k], want_z[k]);
    /* IEEE binary16 bit patterns, worked out by hand */
    uint16_t want_bits[4] = {0x3E00, 0xB400, 0x2E66, 0x7BFF};
    for (int k = 0; k < 4; k++)
        cr_assert_eq(hv_bits[k], want_bits[k], "h[%d] = 0x%04x", k, hv_bits[k]);
    cr_assert_eq(yv[0], 1.5f);
    cr_assert_eq(yv[1], 0.25f);
    cr_assert_eq(yv[2], 0.0999755859375f);
    cr_assert_eq(yv[3], 65504.0f);
}

/* bfloat16 is held as its bits: a + b is computed in float32 and rounded to nearest even (a
 * vectorized loop, so the conversions run lane-wise); a cast rounds where it is, so
 * float32(bfloat16(x)) is x rounded. The same cases as the c test (tests/support/bf16_cases.h). */
Test(llvm, bfloat16_rounds_to_nearest_even)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_BF16, BF16_NCASES, TTH_SCOPE_PARAM);
    tth_tbuffer *b = buf1(m, "b", TTH_BF16, BF16_NCASES, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_BF16, BF16_NCASES, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tbuffer *ap[] = {a, b, o};
    func(m, "bf_add", ap, 3, FOR(i, BF16_NCASES, TTH_LOOP_VECTORIZED, STORE(o, REF(i), BIN(ADD, LOAD(a, REF(i)), LOAD(b, REF(i))))));
    tth_tbuffer *x = buf1(m, "x", TTH_F32, BF16_NCASES, TTH_SCOPE_PARAM);
    tth_tbuffer *y = buf1(m, "y", TTH_BF16, BF16_NCASES, TTH_SCOPE_PARAM);
    tth_tbuffer *z = buf1(m, "z", TTH_F32, BF16_NCASES, TTH_SCOPE_PARAM);
    tth_tvar *j = tth_tir_var(m, "j", TTH_I64);
    tth_tstmt *st[] = {STORE(y, REF(j), tth_tir_cast(m, TTH_BF16, LOAD(x, REF(j)))),
                       STORE(z, REF(j), tth_tir_cast(m, TTH_F32, tth_tir_cast(m, TTH_BF16, LOAD(x, REF(j)))))};
    tth_tbuffer *cp[] = {x, y, z};
    func(m, "bf_cast", cp, 3, FOR(j, BF16_NCASES, TTH_LOOP_SERIAL, tth_tir_seq(m, st, 2)));
    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    uint16_t ov[BF16_NCASES], yv[BF16_NCASES];
    float xv[BF16_NCASES], zv[BF16_NCASES];
    memcpy(xv, bf16_narrow_in, sizeof xv);
    cr_assert_eq(((fn3)sym(&l, "bf_add"))((void *)bf16_add_a, (void *)bf16_add_b, ov, NULL), 0);
    cr_assert_eq(((fn3)sym(&l, "bf_cast"))(xv, yv, zv, NULL), 0);
    bf16_check(ov, yv, zv);
}

/* ---------------------------------------------------------------- intrinsics */

static double intrin_ref(tth_tir_intrin_op op, double x, double y, int is_f32)
{
    if (is_f32) {
        float a = (float)x, b = (float)y;
        switch (op) {
        case TTH_TINTRIN_EXP: return expf(a);
        case TTH_TINTRIN_LOG: return logf(a);
        case TTH_TINTRIN_SQRT: return sqrtf(a);
        case TTH_TINTRIN_TANH: return tanhf(a);
        case TTH_TINTRIN_ERF: return erff(a);
        case TTH_TINTRIN_POW: return powf(a, b);
        case TTH_TINTRIN_FABS: return fabsf(a);
        case TTH_TINTRIN_FLOOR: return floorf(a);
        case TTH_TINTRIN_CEIL: return ceilf(a);
        case TTH_TINTRIN_ROUND_EVEN: return nearbyintf(a);
        case TTH_TINTRIN_SIN: return sinf(a);
        case TTH_TINTRIN_COS: return cosf(a);
        case TTH_TINTRIN_FMOD: return fmodf(a, b);
        case TTH_TINTRIN_LOG1P: return log1pf(a);
        case TTH_TINTRIN_EXPM1: return expm1f(a);
        default: break; /* FMA and the reductions are tested with vector TIR */
        }
        return 0;
    }
    switch (op) {
    case TTH_TINTRIN_EXP: return exp(x);
    case TTH_TINTRIN_LOG: return log(x);
    case TTH_TINTRIN_SQRT: return sqrt(x);
    case TTH_TINTRIN_TANH: return tanh(x);
    case TTH_TINTRIN_ERF: return erf(x);
    case TTH_TINTRIN_POW: return pow(x, y);
    case TTH_TINTRIN_FABS: return fabs(x);
    case TTH_TINTRIN_FLOOR: return floor(x);
    case TTH_TINTRIN_CEIL: return ceil(x);
    case TTH_TINTRIN_ROUND_EVEN: return nearbyint(x);
    case TTH_TINTRIN_SIN: return sin(x);
    case TTH_TINTRIN_COS: return cos(x);
    case TTH_TINTRIN_FMOD: return fmod(x, y);
    case TTH_TINTRIN_LOG1P: return log1p(x);
    case TTH_TINTRIN_EXPM1: return expm1(x);
    default: break;
    }
    return 0;
}

static void check_intrinsics(tth_dtype dt, const char *target)
{
    enum { n = 6 };
    static const tth_tir_intrin_op ops[] = {
        TTH_TINTRIN_EXP, TTH_TINTRIN_LOG, TTH_TINTRIN_SQRT, TTH_TINTRIN_TANH, TTH_TINTRIN_ERF,
        TTH_TINTRIN_POW, TTH_TINTRIN_FABS, TTH_TINTRIN_FLOOR, TTH_TINTRIN_CEIL, TTH_TINTRIN_ROUND_EVEN,
        TTH_TINTRIN_SIN, TTH_TINTRIN_COS, TTH_TINTRIN_FMOD, TTH_TINTRIN_LOG1P, TTH_TINTRIN_EXPM1};
    const size_t nops = sizeof ops / sizeof ops[0];
    int f32 = dt == TTH_F32;
    /* positive inputs (x) for log/sqrt/pow..., signed halves (z) for rounding and fabs */
    double xs[n] = {0.5, 1.25, 2.0, 3.7, 0.01, 7.5};
    double ys[n] = {2.0, -1.5, 0.5, 3.0, 1.0, 2.25};
    double zs[n] = {-2.5, -0.5, 0.5, 2.5, 1.5, -1.7};

    tth_tir_module *m = test_tir_module();
    tth_tbuffer *x = buf1(m, "x", dt, n, TTH_SCOPE_PARAM);
    tth_tbuffer *y = buf1(m, "y", dt, n, TTH_SCOPE_PARAM);
    tth_tbuffer *z = buf1(m, "z", dt, n, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", dt, (int64_t)(n * nops), TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tstmt *seq = NULL;
    for (size_t k = 0; k < nops; k++) {
        int signed_in = ops[k] == TTH_TINTRIN_FABS || ops[k] == TTH_TINTRIN_FLOOR ||
                        ops[k] == TTH_TINTRIN_CEIL || ops[k] == TTH_TINTRIN_ROUND_EVEN ||
                        ops[k] == TTH_TINTRIN_SIN || ops[k] == TTH_TINTRIN_TANH || ops[k] == TTH_TINTRIN_ERF;
        int two = ops[k] == TTH_TINTRIN_POW || ops[k] == TTH_TINTRIN_FMOD;
        tth_texpr *v = tth_tir_intrin(m, ops[k], LOAD(signed_in ? z : x, REF(i)), two ? LOAD(y, REF(i)) : NULL);
        cr_assert_eq(tth_tir_seq_append(m, &seq, STORE(o, BIN(ADD, REF(i), I64((int64_t)(k * n))), v)), 0);
    }
    tth_tbuffer *ps[] = {x, y, z, o};
    func(m, "intrins", ps, 4, FOR(i, n, TTH_LOOP_SERIAL, seq));
    linked l;
    compile(m, target, NULL, &l);
    fn4 fn = (fn4)sym(&l, "intrins");
    if (f32) {
        float xv[n], yv[n], zv[n], ov[n * 15];
        for (int k = 0; k < n; k++)
            xv[k] = (float)xs[k], yv[k] = (float)ys[k], zv[k] = (float)zs[k];
        cr_assert_eq(fn(xv, yv, zv, ov, NULL), 0);
        for (size_t k = 0; k < nops; k++)
            for (int e = 0; e < n; e++) {
                int signed_in = ops[k] == TTH_TINTRIN_FABS || ops[k] == TTH_TINTRIN_FLOOR ||
                                ops[k] == TTH_TINTRIN_CEIL || ops[k] == TTH_TINTRIN_ROUND_EVEN ||
                                ops[k] == TTH_TINTRIN_SIN || ops[k] == TTH_TINTRIN_TANH ||
                                ops[k] == TTH_TINTRIN_ERF;
                double in = signed_in ? zv[e] : xv[e];
                char what[32];
                snprintf(what, sizeof what, "f32 intrinsic %zu", k);
                assert_close(ov[k * n + (size_t)e], intrin_ref(ops[k], in, yv[e], 1), 2e-6, what, e);
            }
    } else {
        double ov[n * 15];
        cr_assert_eq(fn(xs, ys, zs, ov, NULL), 0);
        for (size_t k = 0; k < nops; k++)
            for (int e = 0; e < n; e++) {
                int signed_in = ops[k] == TTH_TINTRIN_FABS || ops[k] == TTH_TINTRIN_FLOOR ||
                                ops[k] == TTH_TINTRIN_CEIL || ops[k] == TTH_TINTRIN_ROUND_EVEN ||
                                ops[k] == TTH_TINTRIN_SIN || ops[k] == TTH_TINTRIN_TANH ||
                                ops[k] == TTH_TINTRIN_ERF;
                char what[32];
                snprintf(what, sizeof what, "f64 intrinsic %zu", k);
                assert_close(ov[k * n + (size_t)e], intrin_ref(ops[k], signed_in ? zs[e] : xs[e], ys[e], 0),
                             1e-14, what, e);
            }
    }
}

Test(llvm, intrinsics_float32) { check_intrinsics(TTH_F32, HOST_TARGET); }

Test(llvm, intrinsics_float64) { check_intrinsics(TTH_F64, HOST_TARGET); }

/* opt-level 0 keeps every intrinsic call and frem as written: the back end's own lowering. */
Test(llvm, intrinsics_float32_o0) { check_intrinsics(TTH_F32, "{\"kind\": \"llvm\", \"opt-level\": 0}"); }

/* Round half to even, and float floordiv / floormod with the divisor's sign. */
Test(llvm, float_rounding_and_floor_ops)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *b = buf1(m, "b", TTH_F32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_F32, 12, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_texpr *ai = LOAD(a, REF(i)), *bi = LOAD(b, REF(i));
    tth_tstmt *st[] = {
        STORE(o, REF(i), tth_tir_intrin(m, TTH_TINTRIN_ROUND_EVEN, ai, NULL)),
        STORE(o, BIN(ADD, REF(i), I64(4)), BIN(FLOORDIV, ai, bi)),
        STORE(o, BIN(ADD, REF(i), I64(8)), BIN(FLOORMOD, ai, bi)),
    };
    tth_tbuffer *ps[] = {a, b, o};
    func(m, "fround", ps, 3, FOR(i, 4, TTH_LOOP_SERIAL, tth_tir_seq(m, st, 3)));
    linked l;
    compile(m, HOST_TARGET, NULL, &l);
    float av[4] = {2.5f, -2.5f, 3.5f, -7.0f}, bv[4] = {2.0f, 2.0f, -2.0f, 3.0f}, ov[12];
    cr_assert_eq(((fn3)sym(&l, "fround"))(av, bv, ov, NULL), 0);
    float want[12] = {2, -2, 4, -7, /* floordiv */ 1, -2, -2, -3, /* floormod */ 0.5f, 1.5f, -0.5f, 2};
    for (int k = 0; k < 12; k++)
        cr_assert_eq(ov[k], want[k], "o[%d] = %g, want %g", k, ov[k], want[k]);
}

/* ---------------------------------------------------------------- extern calls, let, if */

static const char *extern_c =
    "#include <stdint.h>\n"
    "float tst_dot(const float *a, const float *b, int32_t n)\n"
    "{ float s = 0; for (int32_t i = 0; i < n; i++) s += a[i] * b[i]; return s; }\n"
    "int32_t tst_widen(int8_t x, uint16_t y, _Bool f) { return f ? (int32_t)x * 100000 + y : -1; }\n"
    "int32_t tst_fill(float *p, int32_t n, float v) { for (int32_t i = 0; i < n; i++) p[i] = v; return n; }\n"
    "int32_t tst_failing_op(void *buf, void *ws) { (void)ws; ((float *)buf)[0] = 99.0f; return 7; }\n";

Test(llvm, call_extern_address_of_let_if)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, 8, TTH_SCOPE_PARAM);
    tth_tbuffer *b = buf1(m, "b", TTH_F32, 8, TTH_SCOPE_PARAM);
    tth_tbuffer *s = buf1(m, "s", TTH_I8, 1, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_F32, 8, TTH_SCOPE_PARAM);
    tth_tbuffer *q = buf1(m, "q", TTH_I32, 2, TTH_SCOPE_PARAM);
    tth_texpr *dot_args[] = {tth_tir_address_of(m, a, I64(0)), tth_tir_address_of(m, b, I64(0)),
                             tth_tir_int(m, TTH_I32, 8)};
    tth_texpr *widen_args[] = {LOAD(s, I64(0)), tth_tir_int(m, TTH_U16, 65535), tth_tir_int(m, TTH_BOOL, 1)};
    tth_texpr *fill_args[] = {tth_tir_address_of(m, o, I64(4)), tth_tir_int(m, TTH_I32, 3), F32(2.5)};
    /* let d = tst_dot(a, b, 8) in if (d > 10) o[0] = d else o[0] = -d; o[1] = d * 2 */
    tth_tvar *d = tth_tir_var(m, "d", TTH_F32);
    tth_tstmt *then_s = STORE(o, I64(0), REF(d));
    tth_tstmt *else_s = STORE(o, I64(0), tth_tir_un(m, TTH_TUN_NEG, REF(d)));
    tth_tstmt *let_body[] = {tth_tir_if(m, BIN(GT, REF(d), F32(10)), then_s, else_s),
                             STORE(o, I64(1), BIN(MUL, REF(d), F32(2)))};
    /* if without else: only taken when s[0] < 0 */
    tth_tstmt *st[] = {
        tth_tir_let(m, d, tth_tir_call_extern(m, TTH_F32, "tst_dot", dot_args, 3), tth_tir_seq(m, let_body, 2)),
        STORE(q, I64(0), tth_tir_call_extern(m, TTH_I32, "tst_widen", widen_args, 3)),
        tth_tir_evaluate(m, tth_tir_call_extern(m, TTH_I32, "tst_fill", fill_args, 3)),
        tth_tir_if(m, BIN(LT, LOAD(s, I64(0)), tth_tir_int(m, TTH_I8, 0)), STORE(q, I64(1), tth_tir_int(m, TTH_I32, 42)), NULL),
    };
    tth_tbuffer *ps[] = {a, b, s, o, q};
    func(m, "ext", ps, 5, tth_tir_seq(m, st, 4));
    linked l;
    compile(m, HOST_TARGET, extern_c, &l);
    typedef int32_t (*fn5)(void *, void *, void *, void *, void *, void *);
    fn5 f = (fn5)sym(&l, "ext");

    float av[8], bv[8], ov[8] = {0};
    float dot = 0;
    for (int k = 0; k < 8; k++) {
        av[k] = (float)k * 0.5f;
        bv[k] = (float)(8 - k);
        dot += av[k] * bv[k];
    }
    int8_t sv[1] = {-3};
    int32_t qv[2] = {0, 0};
    cr_assert_eq(f(av, bv, sv, ov, qv, NULL), 0);
    cr_assert_eq(ov[0], dot > 10 ? dot : -dot);
    cr_assert_eq(ov[1], dot * 2);
    cr_assert_eq(ov[3], 0.0f);
    cr_assert_eq(ov[4], 2.5f);
    cr_assert_eq(ov[6], 2.5f);
    cr_assert_eq(ov[7], 0.0f, "tst_fill wrote past n");
    cr_assert_eq(qv[0], -3 * 100000 + 65535, "signext/zeroext arguments: got %d", qv[0]);
    cr_assert_eq(qv[1], 42);

    /* the else branch and the untaken if */
    for (int k = 0; k < 8; k++)
        bv[k] = 0.0f;
    bv[7] = 1.0f;   /* dot = 3.5 → o[0] = -3.5 */
    sv[0] = 5;
    qv[1] = 0;
    cr_assert_eq(f(av, bv, sv, ov, qv, NULL), 0);
    cr_assert_eq(ov[0], -3.5f);
    cr_assert_eq(qv[0], 5 * 100000 + 65535);
    cr_assert_eq(qv[1], 0, "the if without else ran although s[0] >= 0");
}

/* ---------------------------------------------------------------- the AOT entry */

/* tth_demo_run(inputs {x}, outputs {y, y2}, workspace):
 *   scale(x, cst, w)   w[i] = x[i] * cst[i]                w: WORKSPACE at offset 0
 *   post(w, y, y2)     tmp (LOCAL, planned at offset 64) = max(w, 0);
 *                      y[i] = let s = tmp[i] * 0.5 in floormod(i, 2) == 0 ? s : -s
 *                      sq (LOCAL, not planned: stack) = j * j; y2[j] = sq[j] + 1 */
static tth_tir_module *aot_module(void)
{
    enum { n = 8 };
    tth_tir_module *m = test_tir_module();
    float cvals[n] = {1, -2, 3, -4, 0.5f, -0.5f, 2, 10};
    int64_t shape[1] = {n};
    tth_ttype ct = {.dtype = TTH_F32, .rank = 1, .shape = {n}};
    tth_tensor *cten = tth_tensor_new(&ct, cvals);
    cr_assert_not_null(cten);
    tth_tbuffer *cst = tth_tir_const_buffer(m, "cst", cten);
    tth_tensor_unref(cten);
    cr_assert_not_null(cst);

    /* scale */
    tth_tbuffer *px = buf1(m, "x", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *pc = buf1(m, "c", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *pw = buf1(m, "w", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tbuffer *sp[] = {px, pc, pw};
    func(m, "scale", sp, 3, FOR(i, n, TTH_LOOP_VECTORIZED, STORE(pw, REF(i), BIN(MUL, LOAD(px, REF(i)), LOAD(pc, REF(i))))));

    /* post */
    tth_tbuffer *qw = buf1(m, "w", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *qy = buf1(m, "y", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *qy2 = buf1(m, "y2", TTH_I32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *tmp = buf1(m, "tmp", TTH_F32, n, TTH_SCOPE_LOCAL);
    tmp->offset = 64;
    tth_tbuffer *sq = buf1(m, "sq", TTH_I32, 4, TTH_SCOPE_LOCAL);
    tth_tvar *k = tth_tir_var(m, "k", TTH_I64), *j = tth_tir_var(m, "j", TTH_I64);
    tth_tvar *s = tth_tir_var(m, "s", TTH_F32);
    tth_tstmt *pick = tth_tir_if(m, BIN(EQ, BIN(FLOORMOD, REF(k), I64(2)), I64(0)), STORE(qy, REF(k), REF(s)),
                                 STORE(qy, REF(k), tth_tir_un(m, TTH_TUN_NEG, REF(s))));
    tth_texpr *j32 = tth_tir_cast(m, TTH_I32, REF(j));
    tth_tstmt *sqs[] = {
        FOR(j, 4, TTH_LOOP_UNROLLED, STORE(sq, REF(j), BIN(MUL, j32, j32))),
        FOR(j, 4, TTH_LOOP_SERIAL, STORE(qy2, REF(j), BIN(ADD, LOAD(sq, REF(j)), tth_tir_int(m, TTH_I32, 1)))),
    };
    tth_tstmt *body[] = {
        FOR(k, n, TTH_LOOP_SERIAL, STORE(tmp, REF(k), BIN(MAX, LOAD(qw, REF(k)), F32(0)))),
        FOR(k, n, TTH_LOOP_SERIAL, tth_tir_let(m, s, BIN(MUL, LOAD(tmp, REF(k)), F32(0.5)), pick)),
        tth_tir_allocate(m, sq, tth_tir_seq(m, sqs, 2)),
    };
    tth_tbuffer *pp[] = {qw, qy, qy2};
    func(m, "post", pp, 3, tth_tir_allocate(m, tmp, tth_tir_seq(m, body, 3)));

    /* entry */
    tth_tbuffer *x = tth_tir_buffer(m, "x", TTH_F32, 1, shape, TTH_SCOPE_INPUT);
    tth_tbuffer *y = tth_tir_buffer(m, "y", TTH_F32, 1, shape, TTH_SCOPE_OUTPUT);
    int64_t four = 4;
    tth_tbuffer *y2 = tth_tir_buffer(m, "y2", TTH_I32, 1, &four, TTH_SCOPE_OUTPUT);
    tth_tbuffer *w = tth_tir_buffer(m, "w", TTH_F32, 1, shape, TTH_SCOPE_WORKSPACE);
    w->offset = 0;
    tth_tbuffer *a1[] = {x, cst, w}, *a2[] = {w, y, y2};
    tth_tstmt *calls[] = {tth_tir_call_func(m, "scale", a1, 3), tth_tir_call_func(m, "post", a2, 3)};
    tth_tbuffer *ep[] = {x, y, y2};
    func(m, "tth_demo_run", ep, 3, tth_tir_seq(m, calls, 2));
    m->entry = tth_arena_strdup(m->arena, "tth_demo_run");
    return m;
}

static void check_aot(const char *target)
{
    tth_tir_module *m = aot_module();
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, target, &rm, &d), 0, "%s", d.message);
    cr_assert_str_eq(tth_runtime_module_file(rm, 0)->name, "demo_llvm.o");
    const json_t *meta = tth_runtime_module_meta(rm);
    cr_assert_str_eq(json_string_value(json_object_get(meta, "link")), "object");
    const json_t *es = json_object_get(meta, "entry_symbols");
    cr_assert_eq(json_array_size(es), 1);
    cr_assert_str_eq(json_string_value(json_array_get(es, 0)), "tth_demo_run");
    cr_assert_not_null(json_string_value(json_object_get(meta, "triple")));
    linked l;
    link_module(rm, NULL, &l);
    tth_runtime_module_free(rm);
    entry_fn run = (entry_fn)sym(&l, "tth_demo_run");

    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, c[8] = {1, -2, 3, -4, 0.5f, -0.5f, 2, 10};
    float y[8];
    int32_t y2[4];
    void *in[1] = {x}, *out[2] = {y, y2};
    _Alignas(16) unsigned char ws[128];
    for (int rep = 0; rep < 2; rep++) {   /* reentrant: all state in the workspace */
        memset(ws, 0xAB, sizeof ws);
        memset(y, 0, sizeof y);
        cr_assert_eq(run(in, out, ws), 0);
        for (int k = 0; k < 8; k++) {
            float w = x[k] * c[k];
            float r = (w > 0 ? w : 0) * 0.5f;
            cr_assert_eq(y[k], k % 2 == 0 ? r : -r, "y[%d] = %g", k, y[k]);
            float wsw, wst;
            memcpy(&wsw, ws + 4 * k, 4);
            memcpy(&wst, ws + 64 + 4 * k, 4);
            cr_assert_eq(wsw, w, "workspace buffer w is not at offset 0");
            cr_assert_eq(wst, w > 0 ? w : 0, "local buffer tmp is not at its planned offset 64");
        }
        for (int k = 0; k < 4; k++)
            cr_assert_eq(y2[k], k * k + 1);
        for (int k = 32; k < 64; k++)
            cr_assert_eq(ws[k], 0xAB, "byte %d of the workspace, between the planned buffers, was written", k);
    }
}

Test(llvm, aot_entry_workspace_constants_locals) { check_aot(HOST_TARGET); }

Test(llvm, aot_entry_o0) { check_aot("{\"kind\": \"llvm\", \"opt-level\": 0}"); }

Test(llvm, aot_entry_fast_math_native) { check_aot("{\"kind\": \"llvm\", \"mcpu\": \"native\", \"fast-math\": true}"); }

/* A PrimFunc of another module (here C) is called with the operator convention; a non-zero
 * status stops the entry and is returned. */
Test(llvm, entry_returns_a_failing_status)
{
    tth_tir_module *m = test_tir_module();
    int64_t one = 1;
    tth_tbuffer *y = tth_tir_buffer(m, "y", TTH_F32, 1, &one, TTH_SCOPE_OUTPUT);
    tth_tbuffer *p = buf1(m, "p", TTH_F32, 1, TTH_SCOPE_PARAM);
    tth_tbuffer *pp[] = {p};
    func(m, "mark", pp, 1, STORE(p, I64(0), F32(1)));
    tth_tbuffer *args[] = {y};
    tth_tstmt *calls[] = {tth_tir_call_func(m, "tst_failing_op", args, 1), tth_tir_call_func(m, "mark", args, 1)};
    tth_tbuffer *ep[] = {y};
    json_t *attrs = json_pack("{s:s}", "model", "failing");
    tth_diag d;
    cr_assert_not_null(tth_tir_func_add(m, "failing_entry", ep, 1, tth_tir_seq(m, calls, 2), "llvm", attrs, &d));
    m->entry = tth_arena_strdup(m->arena, "failing_entry");
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, HOST_TARGET, &rm, &d), 0, "%s", d.message);
    cr_assert_str_eq(tth_runtime_module_file(rm, 0)->name, "failing_llvm.o", "the model name comes from attrs");
    linked l;
    link_module(rm, extern_c, &l);
    tth_runtime_module_free(rm);
    float yv[1] = {0};
    void *out[1] = {yv};
    cr_assert_eq(((entry_fn)sym(&l, "failing_entry"))(NULL, out, NULL), 7);
    cr_assert_eq(yv[0], 99.0f, "the external operator did not run, or 'mark' ran after it failed");
}

/* ---------------------------------------------------------------- objects and targets */

static uint16_t elf_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static int run_hook_quiet(tth_tir_module *m, const char *target, tth_runtime_module **out, tth_diag *d,
                          size_t *err_bytes);

/* The object's ELF header: class (1 = 32-bit, 2 = 64-bit) and e_machine; nothing on stderr. */
static void check_elf(const char *target, int want_class, uint16_t want_machine)
{
    tth_tir_module *m = aot_module();
    tth_diag d;
    tth_runtime_module *rm;
    size_t err_bytes;
    cr_assert_eq(run_hook_quiet(m, target, &rm, &d, &err_bytes), 0, "%s: %s", target, d.message);
    cr_assert_eq(err_bytes, 0, "%s: %zu bytes on stderr", target, err_bytes);
    const tth_module_file *f = tth_runtime_module_file(rm, 0);
    cr_assert_not_null(f);
    cr_assert_eq(f->kind, TTH_FILE_OBJECT);
    cr_assert(f->len > 64);
    cr_assert(memcmp(f->data, "\177ELF", 4) == 0, "not an ELF object");
    cr_assert_eq(f->data[4], want_class, "ELF class %d for %s", f->data[4], target);
    cr_assert_eq(f->data[5], 1, "not little-endian");
    cr_assert_eq(elf_u16(f->data + 16), 1, "e_type is not ET_REL");
    cr_assert_eq(elf_u16(f->data + 18), want_machine, "e_machine %u for %s", elf_u16(f->data + 18), target);
    const json_t *meta = tth_runtime_module_meta(rm);
    cr_assert_str_eq(json_string_value(json_object_get(meta, "link")), "object");
    tth_runtime_module_free(rm);
}

Test(llvm, cross_aarch64_object)
{
    check_elf("{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\", \"mcpu\": \"cortex-a72\", "
              "\"mattr\": [\"+neon\"]}", 2, 183 /* EM_AARCH64 */);
}

Test(llvm, cross_cortex_m55_object)
{
    check_elf("{\"kind\": \"llvm\", \"mtriple\": \"thumbv8.1m.main-none-eabi\", \"mcpu\": \"cortex-m55\", "
              "\"mattr\": [\"+mve.fp\"], \"opt-level\": 2}", 1, 40 /* EM_ARM */);
}

Test(llvm, host_x86_64_object)
{
    check_elf("{\"kind\": \"llvm\", \"mtriple\": \"x86_64-linux-gnu\", \"mcpu\": \"skylake\"}", 2, 62 /* EM_X86_64 */);
}

Test(llvm, deterministic_bytes)
{
    const char *targets[] = {HOST_TARGET, "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\"}"};
    for (size_t t = 0; t < 2; t++) {
        tth_runtime_module *r1, *r2;
        tth_diag d;
        tth_tir_module *m1 = aot_module(), *m2 = aot_module();
        cr_assert_eq(run_hook(m1, targets[t], &r1, &d), 0, "%s", d.message);
        cr_assert_eq(run_hook(m2, targets[t], &r2, &d), 0, "%s", d.message);
        const tth_module_file *f1 = tth_runtime_module_file(r1, 0), *f2 = tth_runtime_module_file(r2, 0);
        cr_assert_eq(f1->len, f2->len, "object sizes differ: %zu vs %zu", f1->len, f2->len);
        cr_assert(memcmp(f1->data, f2->data, f1->len) == 0, "two runs gave different bytes");
        tth_runtime_module_free(r1);
        tth_runtime_module_free(r2);
    }
}

/* Shards share out the work, not the count of functions (codegen.c, plan_homes): of four
 * bodies (two shards), one is as large as the three others together, so it has a shard of its own
 * and the three small ones share the other. Dealt out in turn, the large one would have had a
 * small one beside it. */
Test(llvm, shards_share_out_the_work)
{
    tth_tir_module *m = test_tir_module();
    for (int f = 0; f < 4; f++) {
        int stores = f == 0 ? 300 : 100;
        tth_tbuffer *o = buf1(m, "o", TTH_F32, stores, TTH_SCOPE_PARAM);
        tth_tstmt *seq = NULL;
        for (int i = 0; i < stores; i++) /* o[i] = i * (f + 1): each function its own code */
            cr_assert_eq(tth_tir_seq_append(m, &seq, STORE(o, I64(i), F32((double)i * (f + 1)))), 0);
        char name[32];
        snprintf(name, sizeof name, f == 0 ? "large" : "small%d", f);
        func(m, name, &o, 1, seq);
    }
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, HOST_TARGET, &rm, &d), 0, "%s", d.message);
    cr_assert_eq(tth_runtime_module_count(rm), 2, "%zu objects, not two shards", tth_runtime_module_count(rm));
    char dir[512];
    test_mkdtemp(dir, sizeof dir);
    int with_large = -1, small_in[2] = {0, 0};
    for (size_t k = 0; k < 2; k++) {
        const tth_module_file *f = tth_runtime_module_file(rm, k);
        char path[600], cmd[700], line[256];
        snprintf(path, sizeof path, "%s/%zu.o", dir, k);
        cr_assert_eq(test_write_file(path, f->data, f->len), 0);
        snprintf(cmd, sizeof cmd, "nm --defined-only '%s'", path);
        FILE *nm = popen(cmd, "r");
        cr_assert_not_null(nm);
        while (fgets(line, sizeof line, nm)) {
            if (strstr(line, " T large"))
                with_large = (int)k;
            if (strstr(line, " T small"))
                small_in[k]++;
        }
        cr_assert_eq(pclose(nm), 0, "nm failed on %s", path);
    }
    test_rmtree(dir);
    cr_assert(with_large >= 0, "no object defines 'large'");
    cr_assert_eq(small_in[with_large], 0, "the large body shares its shard with %d small ones", small_in[with_large]);
    cr_assert_eq(small_in[1 - with_large], 3);
    tth_runtime_module_free(rm);
}

/* ---------------------------------------------------------------- what is refused */

Test(llvm, math_intrinsic_on_integers_is_unsupported)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_I32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *ps[] = {a};
    func(m, "bad", ps, 1, STORE(a, I64(0), tth_tir_intrin(m, TTH_TINTRIN_EXP, LOAD(a, I64(1)), NULL)));
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, HOST_TARGET, &rm, &d), TTH_EUNSUPPORTED);
    cr_assert_eq(d.code, TTH_EUNSUPPORTED);
    cr_assert(strstr(d.message, "exp") && strstr(d.message, "int32"), "message: %s", d.message);
    cr_assert(strstr(d.location, "bad"), "location: %s", d.location);
    cr_assert_eq(tth_runtime_module_count(rm), 0);
    tth_runtime_module_free(rm);
}

Test(llvm, unplanned_large_local_is_unsupported)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *big = buf1(m, "big", TTH_F32, 1 << 20, TTH_SCOPE_LOCAL);
    tth_tbuffer *ps[] = {a};
    func(m, "big_local", ps, 1, tth_tir_allocate(m, big, STORE(big, I64(0), LOAD(a, I64(0)))));
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, HOST_TARGET, &rm, &d), TTH_EUNSUPPORTED);
    cr_assert(strstr(d.message, "big"), "message: %s", d.message);
    cr_assert(d.hint[0], "no hint");
    tth_runtime_module_free(rm);
}

Test(llvm, unknown_triple_is_refused)
{
    tth_tir_module *m = axpy_module(4, TTH_LOOP_SERIAL);
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, "{\"kind\": \"llvm\", \"mtriple\": \"nosuchcpu-unknown-none\"}", &rm, &d),
                 TTH_EUNSUPPORTED);
    cr_assert(strstr(d.message, "nosuchcpu"), "message: %s", d.message);
    tth_runtime_module_free(rm);
}

Test(llvm, bad_opt_level_is_refused)
{
    tth_tir_module *m = axpy_module(4, TTH_LOOP_SERIAL);
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, "{\"kind\": \"llvm\", \"opt-level\": 7}", &rm, &d), TTH_EINVAL);
    tth_runtime_module_free(rm);
}

/* A VECTORIZED loop LLVM cannot vectorize (no vector unit on a plain Cortex-M0) still compiles;
 * LLVM's remark reaches the host's log, not stderr. */
Test(llvm, unvectorizable_loop_warns_through_host_log)
{
    tth_tir_module *m = axpy_module(64, TTH_LOOP_VECTORIZED);
    tth_diag d;
    tth_runtime_module *rm;
    logged[0] = '\0';
    cr_assert_eq(run_hook(m, "{\"kind\": \"llvm\", \"mtriple\": \"thumbv6m-none-eabi\", \"mcpu\": \"cortex-m0\"}",
                          &rm, &d), 0, "%s", d.message);
    cr_assert(strstr(logged, "not vectorized"), "log: %s", logged);
    tth_runtime_module_free(rm);
}

/* ---------------------------------------------------------------- more target attributes */

static uint32_t elf_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* The contents of a named section of an ELF32 little-endian object, or NULL. */
static const uint8_t *elf32_section(const uint8_t *e, size_t len, const char *want, size_t *size)
{
    uint32_t shoff = elf_u32(e + 32);
    uint16_t shentsize = elf_u16(e + 46), shnum = elf_u16(e + 48), shstrndx = elf_u16(e + 50);
    cr_assert(shoff + (size_t)shnum * shentsize <= len, "section headers out of bounds");
    const uint8_t *strsh = e + shoff + (size_t)shstrndx * shentsize;
    const char *names = (const char *)e + elf_u32(strsh + 16);
    for (uint16_t i = 0; i < shnum; i++) {
        const uint8_t *sh = e + shoff + (size_t)i * shentsize;
        if (strcmp(names + elf_u32(sh), want) == 0) {
            *size = elf_u32(sh + 20);
            return e + elf_u32(sh + 16);
        }
    }
    return NULL;
}

/* Does the Arm object record Tag_ABI_VFP_args = 1 (floats in VFP registers)? The tag (28) and
 * value (1) are two ULEB128 bytes in the "aeabi" attributes subsection. */
static int arm_vfp_args(const char *target)
{
    tth_tir_module *m = axpy_module(16, TTH_LOOP_SERIAL);
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, target, &rm, &d), 0, "%s: %s", target, d.message);
    const tth_module_file *f = tth_runtime_module_file(rm, 0);
    cr_assert_eq(f->data[4], 1);
    cr_assert_eq(elf_u16(f->data + 18), 40);
    size_t n = 0;
    const uint8_t *attrs = elf32_section(f->data, f->len, ".ARM.attributes", &n);
    cr_assert_not_null(attrs, "no .ARM.attributes section for %s", target);
    int found = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (attrs[i] == 28 && attrs[i + 1] == 1)
            found = 1;
    tth_runtime_module_free(rm);
    return found;
}

Test(llvm, arm_float_abi)
{
    cr_assert(arm_vfp_args("{\"kind\": \"llvm\", \"mtriple\": \"thumbv7em-none-eabi\", \"mcpu\": \"cortex-m4\", "
                           "\"mfloat-abi\": \"hard\"}"), "-mfloat-abi=hard: no Tag_ABI_VFP_args");
    cr_assert(arm_vfp_args("{\"kind\": \"llvm\", \"mtriple\": \"thumbv7em-none-eabihf\", \"mcpu\": \"cortex-m7\"}"),
              "an eabihf triple means the hard float ABI");
    cr_assert(!arm_vfp_args("{\"kind\": \"llvm\", \"mtriple\": \"thumbv7em-none-eabihf\", \"mcpu\": \"cortex-m4\", "
                            "\"mfloat-abi\": \"softfp\"}"), "softfp passes floats in core registers");
    cr_assert(!arm_vfp_args("{\"kind\": \"llvm\", \"mtriple\": \"thumbv7em-none-eabi\", \"mcpu\": \"cortex-m4\"}"),
              "eabi defaults to the soft float ABI");
}

Test(llvm, float_abi_on_x86_is_refused)
{
    tth_tir_module *m = axpy_module(4, TTH_LOOP_SERIAL);
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, "{\"kind\": \"llvm\", \"mtriple\": \"x86_64-linux-gnu\", \"mfloat-abi\": \"hard\"}",
                          &rm, &d), TTH_EUNSUPPORTED);
    cr_assert(strstr(d.message, "mfloat-abi"), "message: %s", d.message);
    tth_runtime_module_free(rm);
}

/* fast-math may reassociate the reduction; the sum of small integers stays exact. */
Test(llvm, fast_math_reduction)
{
    enum { n = 1000 };
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *a = buf1(m, "a", TTH_F32, n, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_F32, 1, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tstmt *st[] = {STORE(o, I64(0), F32(0)),
                       FOR(i, n, TTH_LOOP_SERIAL, STORE(o, I64(0), BIN(ADD, LOAD(o, I64(0)), LOAD(a, REF(i)))))};
    tth_tbuffer *ps[] = {a, o};
    func(m, "sum", ps, 2, tth_tir_seq(m, st, 2));
    linked l;
    compile(m, "{\"kind\": \"llvm\", \"fast-math\": true}", NULL, &l);
    float av[n], ov[1];
    for (int k = 0; k < n; k++)
        av[k] = (float)(k % 13 - 6);
    float want = 0;
    for (int k = 0; k < n; k++)
        want += av[k];
    cr_assert_eq(((fn2)sym(&l, "sum"))(av, ov, NULL), 0);
    cr_assert_eq(ov[0], want, "sum %g, want %g", ov[0], want);
}

/* In a composite target the llvm member's attributes are used (here: its triple). */
Test(llvm, composite_target_uses_the_llvm_member)
{
    tth_tir_module *m = axpy_module(4, TTH_LOOP_SERIAL);
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, "{\"kind\": \"composite\", \"targets\": [{\"kind\": \"cmsis-nn\"}, "
                             "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\"}]}", &rm, &d), 0, "%s", d.message);
    cr_assert_eq(elf_u16(tth_runtime_module_file(rm, 0)->data + 18), 183);
    tth_runtime_module_free(rm);
}

/* Constants are stored in the target's byte order: on a big-endian triple the int32 0x11223344
 * appears as 11 22 33 44 in the object, on a little-endian one as 44 33 22 11. The table is
 * read through a run-time index, so it stays in the object as data. */
static int object_has(const tth_runtime_module *rm, const uint8_t *pat, size_t n)
{
    const tth_module_file *f = tth_runtime_module_file(rm, 0);
    for (size_t i = 0; i + n <= f->len; i++)
        if (memcmp(f->data + i, pat, n) == 0)
            return 1;
    return 0;
}

Test(llvm, constants_in_target_byte_order)
{
    enum { n = 64 };
    int32_t vals[n];
    for (int k = 0; k < n; k++)
        vals[k] = 0x11223344 + k * 0x100;
    const char *targets[] = {"{\"kind\": \"llvm\", \"mtriple\": \"aarch64_be-linux-gnu\"}",
                             "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\"}"};
    for (int be = 1; be >= 0; be--) {
        tth_tir_module *m = test_tir_module();
        tth_ttype tt = {.dtype = TTH_I32, .rank = 1, .shape = {n}};
        tth_tensor *t = tth_tensor_new(&tt, vals);
        tth_tbuffer *cst = tth_tir_const_buffer(m, "table", t);
        tth_tensor_unref(t);
        tth_tbuffer *ix = buf1(m, "ix", TTH_I32, 4, TTH_SCOPE_PARAM);
        tth_tbuffer *o = buf1(m, "o", TTH_I32, 4, TTH_SCOPE_PARAM);
        tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
        tth_tbuffer *ps[] = {ix, o};
        func(m, "lookup", ps, 2, FOR(i, 4, TTH_LOOP_SERIAL, STORE(o, REF(i), LOAD(cst, LOAD(ix, REF(i))))));
        tth_diag d;
        tth_runtime_module *rm;
        cr_assert_eq(run_hook(m, targets[1 - be], &rm, &d), 0, "%s", d.message);
        cr_assert_eq(tth_runtime_module_file(rm, 0)->data[5], be ? 2 : 1, "ELF data encoding");
        static const uint8_t big[4] = {0x11, 0x22, 0x33, 0x44}, little[4] = {0x44, 0x33, 0x22, 0x11};
        cr_assert(object_has(rm, be ? big : little, 4), "the constant is not in the object in target order");
        cr_assert(!object_has(rm, be ? little : big, 4), "the constant is in the object in the wrong order");
        tth_runtime_module_free(rm);
    }
}

/* ---------------------------------------------------------------- loop metadata reaches LLVM */

static uint64_t elf_u64(const uint8_t *p) { return (uint64_t)elf_u32(p) | (uint64_t)elf_u32(p + 4) << 32; }

/* How many AArch64 FADD (vector, single or double) instructions the .text of an ELF64 object
 * holds: 0 Q 0 01110 0 sz 1 Rm 110101 Rn Rd. */
static int aarch64_vector_fadds(const tth_module_file *f)
{
    const uint8_t *e = f->data;
    uint64_t shoff = elf_u64(e + 40);
    uint16_t shentsize = elf_u16(e + 58), shnum = elf_u16(e + 60), shstrndx = elf_u16(e + 62);
    cr_assert(shoff + (uint64_t)shnum * shentsize <= f->len);
    const char *names = (const char *)e + elf_u64(e + shoff + (uint64_t)shstrndx * shentsize + 24);
    int count = 0, found = 0;
    for (uint16_t i = 0; i < shnum; i++) {
        const uint8_t *sh = e + shoff + (uint64_t)i * shentsize;
        if (strcmp(names + elf_u32(sh), ".text") != 0)
            continue;
        found = 1;
        const uint8_t *text = e + elf_u64(sh + 24);
        uint64_t size = elf_u64(sh + 32);
        for (uint64_t k = 0; k + 4 <= size; k += 4)
            if ((elf_u32(text + k) & 0xBFA0FC00u) == 0x0E20D400u)
                count++;
    }
    cr_assert(found, "no .text section");
    return count;
}

/* At opt-level 1 LLVM vectorizes only loops that ask for it: the VECTORIZED loop gets vector
 * adds, the same loop SERIAL gets none. */
Test(llvm, vectorized_loops_are_vectorized)
{
    const char *target = "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\", \"opt-level\": 1}";
    int counts[2];
    for (int v = 0; v < 2; v++) {
        tth_tir_module *m = axpy_module(1024, v ? TTH_LOOP_VECTORIZED : TTH_LOOP_SERIAL);
        tth_diag d;
        tth_runtime_module *rm;
        cr_assert_eq(run_hook(m, target, &rm, &d), 0, "%s", d.message);
        counts[v] = aarch64_vector_fadds(tth_runtime_module_file(rm, 0));
        tth_runtime_module_free(rm);
    }
    cr_assert_eq(counts[0], 0, "the serial loop was vectorized at opt-level 1 (%d vector adds)", counts[0]);
    cr_assert(counts[1] > 0, "the VECTORIZED loop has no vector adds");
}

/* At opt-level 2 and 3 the loop vectorizer takes any loop it finds worth it: the SERIAL axpy gets
 * vector adds too (docs/llvm.md, "Passes"). */
Test(llvm, serial_loops_are_vectorized_from_level_2)
{
    for (int level = 2; level <= 3; level++) {
        char target[128];
        snprintf(target, sizeof target, "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\", \"opt-level\": %d}",
                 level);
        tth_tir_module *m = axpy_module(1024, TTH_LOOP_SERIAL);
        tth_diag d;
        tth_runtime_module *rm;
        cr_assert_eq(run_hook(m, target, &rm, &d), 0, "%s", d.message);
        int n = aarch64_vector_fadds(tth_runtime_module_file(rm, 0));
        tth_runtime_module_free(rm);
        cr_assert(n > 0, "the serial loop has no vector adds at opt-level %d", level);
    }
}

/* Straight-line scalar work (o[k] = a[k] + b[k] for k < 4, written out, no loop) gets vector
 * adds from the SLP vectorizer at opt-level 3 in TIR that tth's lowering did not write (a
 * plugin's relay_to_tir: origin "relay_to_tir", or no origin), and none in the lowering's own
 * (origin "default"), which writes its vectors itself; the loop vectorizer still takes the
 * lowering's serial loops (docs/llvm.md, "Passes"). The numbers are the same either way
 * (check_axpy and the lowering's suites run them). */
Test(llvm, slp_vectorizer_only_for_tir_tth_did_not_write)
{
    const char *target = "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\", \"opt-level\": 3}";
    const char *origins[] = {NULL, "relay_to_tir", "default"};
    for (int k = 0; k < 3; k++) {
        tth_tir_module *m = test_tir_module();
        tth_tbuffer *a = buf1(m, "a", TTH_F32, 4, TTH_SCOPE_PARAM);
        tth_tbuffer *b = buf1(m, "b", TTH_F32, 4, TTH_SCOPE_PARAM);
        tth_tbuffer *o = buf1(m, "o", TTH_F32, 4, TTH_SCOPE_PARAM);
        tth_tstmt *body = NULL;
        for (int64_t j = 0; j < 4; j++)
            cr_assert_eq(tth_tir_seq_append(m, &body, STORE(o, I64(j), BIN(ADD, LOAD(a, I64(j)), LOAD(b, I64(j))))), 0);
        tth_tbuffer *ps[] = {a, b, o};
        tth_diag d;
        json_t *attrs = origins[k] ? json_pack("{s:s}", "origin", origins[k]) : NULL;
        cr_assert_not_null(tth_tir_func_add(m, "add4", ps, 3, body, "llvm", attrs, &d), "%s", d.message);
        tth_runtime_module *rm;
        cr_assert_eq(run_hook(m, target, &rm, &d), 0, "%s", d.message);
        int n = aarch64_vector_fadds(tth_runtime_module_file(rm, 0));
        tth_runtime_module_free(rm);
        if (k < 2)
            cr_assert(n > 0, "origin %s: the four scalar adds were not vectorized", origins[k] ? origins[k] : "(none)");
        else
            cr_assert_eq(n, 0, "origin default: the SLP vectorizer ran on the lowering's TIR (%d vector adds)", n);
    }
    /* the lowering's serial loop: still vectorized */
    tth_tir_module *m = axpy_module(1024, TTH_LOOP_SERIAL);
    cr_assert_eq(json_object_set_new(m->funcs[0]->attrs, "origin", json_string("default")), 0);
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, target, &rm, &d), 0, "%s", d.message);
    int n = aarch64_vector_fadds(tth_runtime_module_file(rm, 0));
    tth_runtime_module_free(rm);
    cr_assert(n > 0, "origin default: the serial loop has no vector adds");
}

/* ---------------------------------------------------------------- cross code that runs */

/* The AArch64 object, linked statically with the cross compiler and run under qemu-user, gives
 * the same numbers as the host. Skipped when aarch64-linux-gnu-gcc or qemu-aarch64 is missing
 * (Debian: gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user). */
static int have_prog(const char *p)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", p);
    return system(cmd) == 0;
}


/* Link the module's object with main_c by a cross compiler (static) and run it under qemu. */
static void cross_build_run(const tth_runtime_module *rm, const char *main_c, const char *cc, const char *qemu,
                            cross_run *r)
{
    test_mkdtemp(r->dir, sizeof r->dir);
    const tth_module_file *f = tth_runtime_module_file(rm, 0);
    snprintf(r->obj, sizeof r->obj, "%s/%s", r->dir, f->name);
    snprintf(r->src, sizeof r->src, "%s/main.c", r->dir);
    snprintf(r->exe, sizeof r->exe, "%s/prog", r->dir);
    snprintf(r->out, sizeof r->out, "%s/out.txt", r->dir);
    write_file(r->obj, f->data, f->len);
    write_file(r->src, main_c, strlen(main_c));
    r->pool[0] = 0;
    if (tth_runtime_module_count(rm) > 1) { /* the thread pool's source (docs/threads.md) */
        const tth_module_file *p = tth_runtime_module_file(rm, 1);
        snprintf(r->pool, sizeof r->pool, "%s/%s", r->dir, p->name);
        write_file(r->pool, p->data, p->len);
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -static -O1 -pthread -o '%s' '%s' '%s' %s%s%s -lm && %s '%s' > '%s'", cc, r->exe,
             r->src, r->obj, r->pool[0] ? "'" : "", r->pool, r->pool[0] ? "'" : "", qemu, r->exe, r->out);
    cr_assert_eq(system(cmd), 0, "cross build or run failed: %s", cmd);
    r->fp = fopen(r->out, "r");
    cr_assert_not_null(r->fp);
}

static void cross_aarch64(const tth_runtime_module *rm, const char *main_c, cross_run *r)
{
    cross_build_run(rm, main_c, "aarch64-linux-gnu-gcc", "qemu-aarch64", r);
}

static double cross_next(cross_run *r)
{
    char line[128];
    cr_assert_not_null(fgets(line, sizeof line, r->fp), "the program printed too little");
    return strtod(line, NULL);
}

static void cross_done(cross_run *r)
{
    fclose(r->fp);
    test_rmtree(r->dir);
}

#define NEED_AARCH64_TOOLS()                                                      \
    do {                                                                          \
        if (!have_prog("aarch64-linux-gnu-gcc") || !have_prog("qemu-aarch64"))    \
            cr_skip_test("aarch64-linux-gnu-gcc or qemu-aarch64 not installed");  \
    } while (0)

Test(llvm, cross_aarch64_runs_under_qemu)
{
    NEED_AARCH64_TOOLS();
    tth_tir_module *m = aot_module();
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\", \"mcpu\": \"cortex-a72\"}",
                          &rm, &d), 0, "%s", d.message);
    static const char main_c[] =
        "#include <stdint.h>\n#include <stdio.h>\n"
        "int32_t tth_demo_run(const void *in, void *out, void *ws);\n"
        "int main(void) {\n"
        "    static float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];\n"
        "    static int32_t y2[4];\n"
        "    static _Alignas(16) unsigned char ws[128];\n"
        "    void *in[1] = {x}, *out[2] = {y, y2};\n"
        "    int32_t rc = tth_demo_run(in, out, ws);\n"
        "    for (int k = 0; k < 8; k++) printf(\"%a\\n\", (double)y[k]);\n"
        "    for (int k = 0; k < 4; k++) printf(\"%d\\n\", (int)y2[k]);\n"
        "    return rc;\n}\n";
    cross_run r;
    cross_aarch64(rm, main_c, &r);
    float c[8] = {1, -2, 3, -4, 0.5f, -0.5f, 2, 10};
    for (int k = 0; k < 8; k++) {
        float w = (float)(k + 1) * c[k];
        float want = (w > 0 ? w : 0) * 0.5f;
        double got = cross_next(&r);
        cr_assert_eq((float)got, k % 2 == 0 ? want : -want, "aarch64 y[%d] = %g", k, got);
    }
    for (int k = 0; k < 4; k++)
        cr_assert_eq(cross_next(&r), k * k + 1, "aarch64 y2[%d]", k);
    cross_done(&r);
    tth_runtime_module_free(rm);
}

/* A float-returning C call (float, double and int8 arguments) and libm calls: across a
 * target's C ABI, checked by running the code. */
static tth_tir_module *fcalls_module(void)
{
    tth_tir_module *m = test_tir_module();
    tth_tbuffer *x = buf1(m, "x", TTH_F32, 4, TTH_SCOPE_PARAM);
    tth_tbuffer *o = buf1(m, "o", TTH_F32, 20, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_texpr *xi = LOAD(x, REF(i));
    tth_texpr *mix_args[] = {xi, tth_tir_float(m, TTH_F64, 0.25), tth_tir_int(m, TTH_I8, -3)};
    tth_tstmt *st[] = {
        STORE(o, REF(i), tth_tir_call_extern(m, TTH_F32, "tst_mix", mix_args, 3)),
        STORE(o, BIN(ADD, REF(i), I64(4)), tth_tir_intrin(m, TTH_TINTRIN_EXP, xi, NULL)),
        STORE(o, BIN(ADD, REF(i), I64(8)), tth_tir_intrin(m, TTH_TINTRIN_TANH, xi, NULL)),
        STORE(o, BIN(ADD, REF(i), I64(12)), tth_tir_intrin(m, TTH_TINTRIN_POW, tth_tir_intrin(m, TTH_TINTRIN_FABS, xi, NULL), F32(1.5))),
        STORE(o, BIN(ADD, REF(i), I64(16)), BIN(FLOORMOD, xi, F32(0.75))),
    };
    tth_tbuffer *ps[] = {x, o};
    func(m, "fcalls", ps, 2, FOR(i, 4, TTH_LOOP_SERIAL, tth_tir_seq(m, st, 5)));
    return m;
}

static const char fcalls_main[] =
    "#include <stdint.h>\n#include <stdio.h>\n"
    "float tst_mix(float a, double b, int8_t k) { return (float)(a * b) + (float)k; }\n"
    "int32_t fcalls(void *x, void *o, void *ws);\n"
    "int main(void) {\n"
    "    static float x[4] = {0.5f, -1.25f, 2.0f, 3.5f}, o[20];\n"
    "    int32_t rc = fcalls(x, o, 0);\n"
    "    for (int k = 0; k < 20; k++) printf(\"%a\\n\", (double)o[k]);\n"
    "    return rc;\n}\n";

static void check_fcalls(const char *target, const char *cc, const char *qemu)
{
    tth_tir_module *m = fcalls_module();
    tth_diag d;
    tth_runtime_module *rm;
    cr_assert_eq(run_hook(m, target, &rm, &d), 0, "%s", d.message);
    cross_run r;
    cross_build_run(rm, fcalls_main, cc, qemu, &r);
    float xs[4] = {0.5f, -1.25f, 2.0f, 3.5f};
    for (int k = 0; k < 4; k++)
        cr_assert_eq((float)cross_next(&r), (float)(xs[k] * 0.25) - 3.0f, "tst_mix(x[%d]) for %s", k, target);
    for (int k = 0; k < 4; k++)
        assert_close(cross_next(&r), expf(xs[k]), 2e-6, "exp", k);
    for (int k = 0; k < 4; k++)
        assert_close(cross_next(&r), tanhf(xs[k]), 2e-6, "tanh", k);
    for (int k = 0; k < 4; k++)
        assert_close(cross_next(&r), powf(fabsf(xs[k]), 1.5f), 2e-6, "pow", k);
    float want_mod[4] = {0.5f, 0.25f, 0.5f, 0.5f};
    for (int k = 0; k < 4; k++)
        cr_assert_eq((float)cross_next(&r), want_mod[k], "floormod(x[%d], 0.75)", k);
    cross_done(&r);
    tth_runtime_module_free(rm);
}

Test(llvm, cross_aarch64_float_calls_under_qemu)
{
    NEED_AARCH64_TOOLS();
    check_fcalls("{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\"}", "aarch64-linux-gnu-gcc", "qemu-aarch64");
}

/* 32-bit Arm with the hard float ABI (floats in VFP registers), from the eabihf triple and from
 * -mfloat-abi=hard: the static link against the hard-float C library also checks the object's
 * Tag_ABI_VFP_args. Skipped without arm-linux-gnueabihf-gcc (gcc-arm-linux-gnueabihf,
 * libc6-dev-armhf-cross) or qemu-arm. */
Test(llvm, cross_arm_hard_float_calls_under_qemu)
{
    if (!have_prog("arm-linux-gnueabihf-gcc") || !have_prog("qemu-arm"))
        cr_skip_test("arm-linux-gnueabihf-gcc or qemu-arm not installed");
    check_fcalls("{\"kind\": \"llvm\", \"mtriple\": \"armv7a-linux-gnueabihf\", \"mcpu\": \"cortex-a9\"}",
                 "arm-linux-gnueabihf-gcc", "qemu-arm");
    check_fcalls("{\"kind\": \"llvm\", \"mtriple\": \"armv7a-linux-gnueabi\", \"mcpu\": \"cortex-a9\", "
                 "\"mfloat-abi\": \"hard\", \"opt-level\": 1}",
                 "arm-linux-gnueabihf-gcc", "qemu-arm");
}

/* ---------------------------------------------------------------- M-profile options, quietly */

#include <sys/stat.h>

/* run_hook with file descriptor 2 sent to a file: *err_bytes is what the hook (and LLVM under
 * it) wrote to stderr, which must be nothing. */
static int run_hook_quiet(tth_tir_module *m, const char *target, tth_runtime_module **out, tth_diag *d,
                          size_t *err_bytes)
{
    char path[] = "/tmp/tth-llvm-stderr-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int rc = run_hook(m, target, out, d);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    *err_bytes = (size_t)st.st_size;
    close(fd);
    unlink(path);
    return rc;
}

/* "+nomve" / "+nodsp" after the CPU or in mattr are tth's M-profile options: they turn LLVM's
 * MVE (and DSP) off, so a VECTORIZED float loop is not vectorized on a Cortex-M55 without MVE. */
Test(llvm, cortex_m55_mve_options)
{
    static const struct {
        const char *target;
        int vectorized;
    } cases[] = {
        {"{\"kind\": \"llvm\", \"mtriple\": \"thumbv8.1m.main-none-eabi\", \"mcpu\": \"cortex-m55\"}", 1},
        {"{\"kind\": \"llvm\", \"mtriple\": \"thumbv8.1m.main-none-eabi\", \"mcpu\": \"cortex-m55+nomve\"}", 0},
        {"{\"kind\": \"llvm\", \"mtriple\": \"thumbv8.1m.main-none-eabi\", \"mcpu\": \"cortex-m55+nodsp\"}", 0},
        {"{\"kind\": \"llvm\", \"mtriple\": \"thumbv8.1m.main-none-eabi\", \"mcpu\": \"cortex-m55\", "
         "\"mattr\": [\"+nomve\"]}", 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tth_tir_module *m = axpy_module(64, TTH_LOOP_VECTORIZED);
        tth_diag d;
        tth_runtime_module *rm;
        size_t err_bytes;
        logged[0] = '\0';
        cr_assert_eq(run_hook_quiet(m, cases[k].target, &rm, &d, &err_bytes), 0, "%s", d.message);
        cr_assert_eq(err_bytes, 0, "%s: the hook wrote %zu bytes to stderr", cases[k].target, err_bytes);
        int warned = strstr(logged, "not vectorized") != NULL;
        cr_assert_eq(warned, !cases[k].vectorized, "%s: log '%s'", cases[k].target, logged);
        tth_runtime_module_free(rm);
    }
}

Test(llvm, cortex_m_cpu_without_triple_is_refused)
{
    tth_tir_module *m = axpy_module(4, TTH_LOOP_SERIAL);
    tth_diag d;
    tth_runtime_module *rm;
    size_t err_bytes;
    cr_assert_eq(run_hook_quiet(m, "{\"kind\": \"llvm\", \"mcpu\": \"cortex-m55\"}", &rm, &d, &err_bytes), TTH_EINVAL);
    cr_assert_eq(err_bytes, 0);
    cr_assert(strstr(d.hint, "mtriple"), "hint: %s", d.hint);
    cr_assert_eq(tth_runtime_module_count(rm), 0);
    tth_runtime_module_free(rm);
}
