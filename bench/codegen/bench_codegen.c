/* bench_codegen: the same TIR kernels built by the two host code generators and timed here.
 *
 *   c       the c-host plugin's C source, compiled with `cc -std=c99 -O2 -fPIC -shared`
 *           (what the compile pipeline does)
 *   llvm    the llvm-cpu plugin's object (opt-level 3, generic CPU of the host triple), linked
 *           with cc
 *   native  the llvm-cpu plugin with -mcpu=native (this machine's CPU and features)
 *
 * Kernels (float32): a 256x256x256 matmul written two ways (i-j-k with the reduction innermost,
 * and i-k-j with the j loop VECTORIZED) and a 3x3 convolution, 16 → 16 channels over a
 * pre-padded 66x66 input (the x loop VECTORIZED). Every build's output is checked against the
 * c build's before timing. Prints the median ms per run of each.
 *
 * Usage: tth-bench-codegen [runs]   (default 15). Not part of the test run.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_time.h"
#include "tth/artifact.h"
#include "tth/plugin.h"
#include "tth/tir.h"
#include "tth_config.h"

typedef int32_t (*kernel3)(void *, void *, void *, void *);

/* ---------------------------------------------------------------- kernels as TIR */

#define I64(v) tth_tir_i64(m, (v))
#define REF(v) tth_tir_ref(m, (v))
#define LOAD(b, i) tth_tir_load(m, (b), (i))
#define BIN(op, a, b) tth_tir_bin(m, TTH_TBIN_##op, (a), (b))
#define STORE(b, i, v) tth_tir_store(m, (b), (i), (v))
#define FOR(v, n, kind, body) tth_tir_for(m, (v), I64(0), I64(n), (kind), (body))

static tth_tbuffer *buf1(tth_tir_module *m, const char *name, int64_t n)
{
    return tth_tir_buffer(m, name, TTH_F32, 1, &n, TTH_SCOPE_PARAM);
}

enum { MM = 256, CIN = 16, COUT = 16, H = 64, W = 64 };

/* C[i, j] = sum_k A[i, k] * B[k, j]; ikj: j innermost and vectorized, else k innermost. */
static int matmul(tth_tir_module *m, int ikj, tth_diag *d)
{
    tth_tbuffer *A = buf1(m, "A", MM * MM), *B = buf1(m, "B", MM * MM), *C = buf1(m, "C", MM * MM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64), *j = tth_tir_var(m, "j", TTH_I64), *k = tth_tir_var(m, "k", TTH_I64);
    tth_texpr *cij = BIN(ADD, BIN(MUL, REF(i), I64(MM)), REF(j));
    tth_texpr *aik = LOAD(A, BIN(ADD, BIN(MUL, REF(i), I64(MM)), REF(k)));
    tth_texpr *bkj = LOAD(B, BIN(ADD, BIN(MUL, REF(k), I64(MM)), REF(j)));
    tth_tstmt *acc = STORE(C, cij, BIN(ADD, LOAD(C, cij), BIN(MUL, aik, bkj)));
    tth_tstmt *body;
    if (ikj) {
        tth_tstmt *init = FOR(j, MM, TTH_LOOP_VECTORIZED, STORE(C, cij, tth_tir_float(m, TTH_F32, 0)));
        tth_tstmt *row[] = {init, FOR(k, MM, TTH_LOOP_SERIAL, FOR(j, MM, TTH_LOOP_VECTORIZED, acc))};
        body = FOR(i, MM, TTH_LOOP_SERIAL, tth_tir_seq(m, row, 2));
    } else {
        tth_tstmt *cell[] = {STORE(C, cij, tth_tir_float(m, TTH_F32, 0)), FOR(k, MM, TTH_LOOP_SERIAL, acc)};
        body = FOR(i, MM, TTH_LOOP_SERIAL, FOR(j, MM, TTH_LOOP_SERIAL, tth_tir_seq(m, cell, 2)));
    }
    tth_tbuffer *ps[] = {A, B, C};
    return tth_tir_func_add(m, "kernel", ps, 3, body, "c", NULL, d) ? 0 : -1;
}

/* out[co, y, x] = sum_{ci, ky, kx} in[ci, y + ky, x + kx] * w[co, ci, ky, kx] (input pre-padded) */
static int conv3x3(tth_tir_module *m, tth_diag *d)
{
    const int64_t HP = H + 2, WP = W + 2;
    tth_tbuffer *in = buf1(m, "inp", CIN * HP * WP), *w = buf1(m, "w", COUT * CIN * 9), *out = buf1(m, "out", COUT * H * W);
    tth_tvar *co = tth_tir_var(m, "co", TTH_I64), *ci = tth_tir_var(m, "ci", TTH_I64);
    tth_tvar *ky = tth_tir_var(m, "ky", TTH_I64), *kx = tth_tir_var(m, "kx", TTH_I64);
    tth_tvar *y = tth_tir_var(m, "y", TTH_I64), *x = tth_tir_var(m, "x", TTH_I64);
    tth_texpr *oi = BIN(ADD, BIN(MUL, BIN(ADD, BIN(MUL, REF(co), I64(H)), REF(y)), I64(W)), REF(x));
    tth_texpr *ii = BIN(ADD, BIN(MUL, BIN(ADD, BIN(MUL, REF(ci), I64(HP)), BIN(ADD, REF(y), REF(ky))), I64(WP)),
                        BIN(ADD, REF(x), REF(kx)));
    tth_texpr *wi = BIN(ADD, BIN(MUL, BIN(ADD, BIN(MUL, BIN(ADD, BIN(MUL, REF(co), I64(CIN)), REF(ci)), I64(3)), REF(ky)),
                                 I64(3)), REF(kx));
    tth_tstmt *acc = STORE(out, oi, BIN(ADD, LOAD(out, oi), BIN(MUL, LOAD(in, ii), LOAD(w, wi))));
    tth_tstmt *init = FOR(y, H, TTH_LOOP_SERIAL, FOR(x, W, TTH_LOOP_VECTORIZED, STORE(out, oi, tth_tir_float(m, TTH_F32, 0))));
    tth_tstmt *red = FOR(ci, CIN, TTH_LOOP_SERIAL, FOR(ky, 3, TTH_LOOP_SERIAL, FOR(kx, 3, TTH_LOOP_SERIAL,
                         FOR(y, H, TTH_LOOP_SERIAL, FOR(x, W, TTH_LOOP_VECTORIZED, acc)))));
    tth_tstmt *per_co[] = {init, red};
    tth_tbuffer *ps[] = {in, w, out};
    return tth_tir_func_add(m, "kernel", ps, 3, FOR(co, COUT, TTH_LOOP_SERIAL, tth_tir_seq(m, per_co, 2)), "c",
                            NULL, d) ? 0 : -1;
}

/* ---------------------------------------------------------------- building */

static tth_tir_to_runtime_fn plugin_hook(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", TTH_PLUGINS_BUILD_DIR, file);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bench: %s\n", dlerror());
        return NULL;
    }
    return (tth_tir_to_runtime_fn)dlsym(h, TTH_HOOK_TIR_TO_RUNTIME_SYMBOL);
}

/* Run a hook, write its file into dir, build dir/<tag>.so with cc, load it; NULL on failure. */
static void *build(tth_tir_to_runtime_fn hook, const char *target, const tth_tir_module *m, const char *dir,
                   const char *tag)
{
    json_t *t = json_loads(target, 0, NULL);
    tth_runtime_module *rm = tth_runtime_module_new("bench");
    tth_diag d;
    void *lib = NULL;
    if (!t || !rm || hook(NULL, t, m, rm, &d) != 0) {
        fprintf(stderr, "bench: %s: %s\n", tag, d.message);
        goto done;
    }
    const tth_module_file *f = tth_runtime_module_file(rm, 0);
    char path[1200], so[1200], cmd[4000];
    snprintf(path, sizeof path, "%s/%s_%s", dir, tag, f->name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(f->data, 1, f->len, fp) != f->len) {
        if (fp)
            fclose(fp);
        goto done;
    }
    fclose(fp);
    snprintf(so, sizeof so, "%s/%s.so", dir, tag);
    if (f->kind == TTH_FILE_C_SOURCE)
        snprintf(cmd, sizeof cmd, "%s -std=c99 -O2 -fPIC -shared -o '%s' '%s' -lm", TTH_CC, so, path);
    else
        snprintf(cmd, sizeof cmd, "%s -shared -o '%s' '%s' -lm", TTH_CC, so, path);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench: %s failed\n", cmd);
        goto done;
    }
    lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    unlink(so);
    unlink(path);
done:
    json_decref(t);
    tth_runtime_module_free(rm);
    return lib;
}

static double median_ms(kernel3 k, float *a, float *b, float *c, int runs)
{
    double *t = malloc((size_t)runs * sizeof *t);
    if (!t)
        return -1;
    k(a, b, c, NULL);   /* warm up */
    for (int r = 0; r < runs; r++) {
        double t0 = bench_now();
        k(a, b, c, NULL);
        t[r] = (bench_now() - t0) * 1e3;
    }
    qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
    double med = t[runs / 2];
    free(t);
    return med;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 15;
    if (runs < 1)
        runs = 1;
    tth_tir_to_runtime_fn c_hook = plugin_hook("tth-c-host.so"), llvm_hook = plugin_hook("tth-llvm-cpu.so");
    if (!c_hook || !llvm_hook)
        return 1;
    char dir[] = "/tmp/tth-bench-codegen-XXXXXX";
    if (!mkdtemp(dir))
        return 1;

    static const struct {
        const char *name;
        int kind;   /* 0 matmul ijk, 1 matmul ikj, 2 conv */
        size_t na, nb, nc;
    } kernels[] = {
        {"matmul 256^3 i-j-k", 0, MM * MM, MM * MM, MM * MM},
        {"matmul 256^3 i-k-j (j vectorized)", 1, MM * MM, MM * MM, MM * MM},
        {"conv 3x3 16->16 64x64 (x vectorized)", 2, CIN * (H + 2) * (W + 2), COUT * CIN * 9, COUT * H * W},
    };
    static const char *const builds[] = {"c", "llvm", "native"};
    const char *targets[] = {"{\"kind\": \"c\"}", "{\"kind\": \"llvm\", \"opt-level\": 3}",
                             "{\"kind\": \"llvm\", \"opt-level\": 3, \"mcpu\": \"native\"}"};
    tth_tir_to_runtime_fn hooks[] = {c_hook, llvm_hook, llvm_hook};
    int status = 0;

    printf("%-40s %12s %12s %12s   (median ms of %d runs; c = c-host + cc -O2)\n", "kernel", builds[0], builds[1],
           builds[2], runs);
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        tth_tir_module *m = tth_tir_module_new();
        tth_diag d;
        int rc = kernels[k].kind == 2 ? conv3x3(m, &d) : matmul(m, kernels[k].kind, &d);
        float *a = malloc(kernels[k].na * 4), *b = malloc(kernels[k].nb * 4);
        float *ref = malloc(kernels[k].nc * 4), *c = malloc(kernels[k].nc * 4);
        if (rc || !a || !b || !ref || !c) {
            fprintf(stderr, "bench: cannot build kernel %s\n", kernels[k].name);
            return 1;
        }
        for (size_t i = 0; i < kernels[k].na; i++)
            a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
        for (size_t i = 0; i < kernels[k].nb; i++)
            b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
        double ms[3] = {-1, -1, -1};
        for (int bi = 0; bi < 3; bi++) {
            void *lib = build(hooks[bi], targets[bi], m, dir, builds[bi]);
            kernel3 fn = lib ? (kernel3)dlsym(lib, "kernel") : NULL;
            if (!fn) {
                status = 1;
                continue;
            }
            fn(a, b, bi == 0 ? ref : c, NULL);
            double maxdiff = 0;
            if (bi > 0)
                for (size_t i = 0; i < kernels[k].nc; i++)
                    maxdiff = fmax(maxdiff, fabs((double)c[i] - (double)ref[i]));
            if (maxdiff > 1e-3) {
                fprintf(stderr, "bench: %s: %s differs from c by %g\n", kernels[k].name, builds[bi], maxdiff);
                status = 1;
            }
            ms[bi] = median_ms(fn, a, b, c, runs);
            dlclose(lib);
        }
        printf("%-40s %12.3f %12.3f %12.3f\n", kernels[k].name, ms[0], ms[1], ms[2]);
        free(a);
        free(b);
        free(c);
        free(ref);
        tth_tir_module_free(m);
    }
    rmdir(dir);
    return status;
}
