/* The c-host code generator (plugins/c-host/codegen.c) on hand-built TIR: golden text for a tiny
 * module, warning-free compiles with gcc and clang, and the generated code's results. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../support/bf16_cases.h"
#include "helpers.h"
#include "tth/artifact.h"
#include "tth/tir.h"

/* The world of every test: the build tree's plugins, the module under test, its code built. */
static tth_registry *reg;
static tth_tir_module *mod;
static char *text;      /* the C source the hook wrote for mod (one file) */
static size_t text_len;
static char dir[512];   /* where it was built ("" when it was not) */
static void *dl;        /* the shared object built from it */

static void setup(void)
{
    reg = test_registry();
}

static void teardown(void)
{
    if (dl)
        dlclose(dl);
    if (dir[0])
        test_rmtree(dir);
    free(text);
    tth_tir_module_free(mod);
    tth_registry_free(reg);
}

TestSuite(codegen, .init = setup, .fini = teardown);

static const tth_plugin *c_plugin(void)
{
    const tth_plugin *p = tth_registry_find_kind(reg, "c");
    cr_assert_not_null(p);
    cr_assert_not_null(p->tir_to_runtime, "the c plugin exports no tir_to_runtime");
    return p;
}

/* Verify m and run the hook on it for target c; the runtime module it filled. */
static tth_runtime_module *run_hook(tth_tir_module *m)
{
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_tir_verify(m, &d), 0, "verify: %s (%s)", d.message, d.location);
    tth_runtime_module *rt = tth_runtime_module_new("c");
    tth_host host = {.size = sizeof host, .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR};
    json_t *target = json_pack("{s:s}", "kind", "c");
    int rc = c_plugin()->tir_to_runtime(&host, target, m, rt, &d);
    json_decref(target);
    cr_assert_eq(rc, 0, "tir_to_runtime: %s (%s)", d.message, d.location);
    return rt;
}

/* Run the hook; returns the one C source (malloc'd). */
static char *generate(tth_tir_module *m, size_t *len)
{
    tth_runtime_module *rt = run_hook(m);
    cr_assert_eq(tth_runtime_module_count(rt), 1);
    const tth_module_file *f = tth_runtime_module_file(rt, 0);
    cr_assert_eq(f->kind, TTH_FILE_C_SOURCE);
    char *t = malloc(f->len + 1);
    memcpy(t, f->data, f->len);
    t[f->len] = 0;
    *len = f->len;
    tth_runtime_module_free(rt);
    return t;
}

/* One buffer in `scope` per parameter of `params` (the same name, dtype and shape) into out: the
 * entry's view of what it passes to the operators. */
static void scoped(tth_tir_module *m, tth_tbuffer *const *params, size_t n, tth_buffer_scope scope, tth_tbuffer **out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = tth_tir_buffer(m, params[i]->name, params[i]->dtype, params[i]->rank, params[i]->shape, scope);
}

/* tiny: y = x + 1 in a vectorized loop, and the entry calling it */
static tth_tir_module *build_tiny(void)
{
    tth_tir_module *m = tth_tir_module_new();
    int64_t shape[1] = {4};
    tth_tbuffer *x = tth_tir_buffer(m, "x", TTH_F32, 1, shape, TTH_SCOPE_PARAM);
    tth_tbuffer *y = tth_tir_buffer(m, "y", TTH_F32, 1, shape, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tstmt *st = tth_tir_store(m, y, tth_tir_ref(m, i),
                                  tth_tir_bin(m, TTH_TBIN_ADD, tth_tir_load(m, x, tth_tir_ref(m, i)),
                                              tth_tir_float(m, TTH_F32, 1.0)));
    tth_tstmt *loop = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, 4), TTH_LOOP_VECTORIZED, st);
    tth_tbuffer *params[2] = {x, y};
    tth_diag d;
    cr_assert_not_null(tth_tir_func_add(m, "tiny_add_one", params, 2, loop, "c",
                                        json_pack("{s:s}", "op", "add"), &d));
    tth_tbuffer *in = tth_tir_buffer(m, "input", TTH_F32, 1, shape, TTH_SCOPE_INPUT);
    tth_tbuffer *out = tth_tir_buffer(m, "output", TTH_F32, 1, shape, TTH_SCOPE_OUTPUT);
    tth_tbuffer *args[2] = {in, out};
    tth_tstmt *body = NULL;
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "tiny_add_one", args, 2));
    cr_assert_not_null(tth_tir_func_add(m, "tth_tiny_run", args, 2, body, "c",
                                        json_pack("{s:s}", "model", "tiny"), &d));
    m->entry = "tth_tiny_run";
    return m;
}

Test(codegen, golden_tiny)
{
    mod = build_tiny();
    text = generate(mod, &text_len);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/plugins/c-host/golden/tiny_lib0.c", getenv("TTH_SOURCE_ROOT"));
    if (getenv("TTH_UPDATE_GOLDEN"))
        cr_assert_eq(test_write_file(path, text, text_len), 0);
    size_t glen;
    char *golden = (char *)test_read_file(path, &glen);
    cr_assert_not_null(golden, "no golden file %s (run with TTH_UPDATE_GOLDEN=1)", path);
    cr_assert_str_eq(text, golden, "generated C differs from %s", path);
    /* the same module twice gives the same text */
    size_t len2;
    char *again = generate(mod, &len2);
    cr_assert_str_eq(text, again);
    free(again);
    free(golden);
}

/* sink: many features at once; see expected values in the test below */
static tth_tir_module *build_sink(void)
{
    tth_tir_module *m = tth_tir_module_new();
    int64_t s8[1] = {8};
    tth_diag d;
    /* constant w = i * 0.5 */
    tth_ttype wt = {.dtype = TTH_F32, .rank = 1, .shape = {8}};
    float wv[8];
    for (int k = 0; k < 8; k++)
        wv[k] = (float)k * 0.5f;
    tth_tensor *wten = tth_tensor_new(&wt, wv);
    tth_tbuffer *w = tth_tir_const_buffer(m, "w", wten); /* the module takes its own reference */
    tth_tensor_unref(wten);

    /* sink_f(x, t): local l[i] = max(x[i] * w[i], 0); t[i] = l[i] > 1 ? exp(l[i]) : l[i] - 1 */
    tth_tbuffer *fx = tth_tir_buffer(m, "x", TTH_F32, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *ft = tth_tir_buffer(m, "t", TTH_F32, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *l = tth_tir_buffer(m, "l", TTH_F32, 1, s8, TTH_SCOPE_LOCAL);
    l->offset = 64;
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64), *j = tth_tir_var(m, "i", TTH_I64);
    tth_tstmt *s1 = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, 8), TTH_LOOP_SERIAL,
        tth_tir_store(m, l, tth_tir_ref(m, i),
            tth_tir_bin(m, TTH_TBIN_MAX,
                tth_tir_bin(m, TTH_TBIN_MUL, tth_tir_load(m, fx, tth_tir_ref(m, i)),
                            tth_tir_load(m, w, tth_tir_ref(m, i))),
                tth_tir_float(m, TTH_F32, 0.0))));
    tth_tvar *v = tth_tir_var(m, "v", TTH_F32);
    tth_tstmt *s2 = tth_tir_for(m, j, tth_tir_i64(m, 0), tth_tir_i64(m, 8), TTH_LOOP_UNROLLED,
        tth_tir_let(m, v, tth_tir_load(m, l, tth_tir_ref(m, j)),
            tth_tir_store(m, ft, tth_tir_ref(m, j),
                tth_tir_select(m, tth_tir_bin(m, TTH_TBIN_GT, tth_tir_ref(m, v), tth_tir_float(m, TTH_F32, 1.0)),
                               tth_tir_intrin(m, TTH_TINTRIN_EXP, tth_tir_ref(m, v), NULL),
                               tth_tir_bin(m, TTH_TBIN_SUB, tth_tir_ref(m, v), tth_tir_float(m, TTH_F32, 1.0))))));
    tth_tstmt *seq[2] = {s1, s2};
    tth_tbuffer *fp[2] = {fx, ft};
    cr_assert_not_null(tth_tir_func_add(m, "sink_f", fp, 2,
                                        tth_tir_allocate(m, l, tth_tir_seq(m, seq, 2)), "c", NULL, &d),
                       "%s", d.message);

    /* sink_g(t, y): y[0] = t[0]; y[i] = t[i] + min(t[i], 2) for i in 1..7, split by an if */
    tth_tbuffer *gt = tth_tir_buffer(m, "t", TTH_F32, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *gy = tth_tir_buffer(m, "y", TTH_F32, 1, s8, TTH_SCOPE_PARAM);
    tth_tvar *k = tth_tir_var(m, "k", TTH_I64);
    tth_texpr *tk = tth_tir_load(m, gt, tth_tir_ref(m, k));
    tth_tstmt *gs = tth_tir_for(m, k, tth_tir_i64(m, 0), tth_tir_i64(m, 8), TTH_LOOP_SERIAL,
        tth_tir_if(m, tth_tir_bin(m, TTH_TBIN_EQ, tth_tir_ref(m, k), tth_tir_i64(m, 0)),
                   tth_tir_store(m, gy, tth_tir_ref(m, k), tk),
                   tth_tir_store(m, gy, tth_tir_ref(m, k),
                                 tth_tir_bin(m, TTH_TBIN_ADD, tk,
                                             tth_tir_bin(m, TTH_TBIN_MIN, tk, tth_tir_float(m, TTH_F32, 2.0))))));
    tth_tbuffer *gp[2] = {gt, gy};
    cr_assert_not_null(tth_tir_func_add(m, "sink_g", gp, 2, gs, "c", NULL, &d), "%s", d.message);

    /* sink_q(q, r): r[i] = floormod(q[i], 3) + q[i] * 2 in int8 (wrapping), from index 2 */
    tth_tbuffer *qq = tth_tir_buffer(m, "q", TTH_I8, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *qr = tth_tir_buffer(m, "r", TTH_I8, 1, s8, TTH_SCOPE_PARAM);
    tth_tvar *n = tth_tir_var(m, "n", TTH_I64);
    tth_texpr *qn = tth_tir_load(m, qq, tth_tir_ref(m, n));
    tth_tstmt *qs = tth_tir_for(m, n, tth_tir_i64(m, 0), tth_tir_i64(m, 8), TTH_LOOP_SERIAL,
        tth_tir_store(m, qr, tth_tir_ref(m, n),
            tth_tir_bin(m, TTH_TBIN_ADD,
                tth_tir_bin(m, TTH_TBIN_FLOORMOD, qn, tth_tir_int(m, TTH_I8, 3)),
                tth_tir_bin(m, TTH_TBIN_MUL, qn, tth_tir_int(m, TTH_I8, 2)))));
    tth_tbuffer *qp[2] = {qq, qr};
    cr_assert_not_null(tth_tir_func_add(m, "sink_q", qp, 2, qs, "c", NULL, &d), "%s", d.message);

    /* sink_h(h, hh): hh[i] = h[i] * 2 in float16 */
    tth_tbuffer *hh = tth_tir_buffer(m, "h", TTH_F16, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *ho = tth_tir_buffer(m, "ho", TTH_F16, 1, s8, TTH_SCOPE_PARAM);
    tth_tvar *p = tth_tir_var(m, "p", TTH_I64);
    tth_tstmt *hs = tth_tir_for(m, p, tth_tir_i64(m, 0), tth_tir_i64(m, 8), TTH_LOOP_VECTORIZED,
        tth_tir_store(m, ho, tth_tir_ref(m, p),
                      tth_tir_bin(m, TTH_TBIN_MUL, tth_tir_load(m, hh, tth_tir_ref(m, p)),
                                  tth_tir_float(m, TTH_F16, 2.0))));
    tth_tbuffer *hp[2] = {hh, ho};
    cr_assert_not_null(tth_tir_func_add(m, "sink_h", hp, 2, hs, "c", NULL, &d), "%s", d.message);

    /* the entry: inputs x, q, h; outputs y, r, ho; t in the workspace */
    tth_tbuffer *ep[6], *wt2;
    scoped(m, (tth_tbuffer *[]){fx, qq, hh}, 3, TTH_SCOPE_INPUT, ep);
    scoped(m, (tth_tbuffer *[]){gy, qr, ho}, 3, TTH_SCOPE_OUTPUT, ep + 3);
    scoped(m, &ft, 1, TTH_SCOPE_WORKSPACE, &wt2);
    wt2->offset = 0;
    tth_tstmt *body = NULL;
    tth_tbuffer *a1[2] = {ep[0], wt2}, *a2[2] = {wt2, ep[3]}, *a3[2] = {ep[1], ep[4]}, *a4[2] = {ep[2], ep[5]};
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "sink_f", a1, 2));
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "sink_g", a2, 2));
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "sink_q", a3, 2));
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "sink_h", a4, 2));
    cr_assert_not_null(tth_tir_func_add(m, "tth_sink_run", ep, 6, body, "c", NULL, &d), "%s", d.message);
    m->entry = "tth_sink_run";
    return m;
}

/* Compile dir/file with cc, which must print nothing. */
static void compile_with(const char *cc, const char *file)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s -std=c99 -O2 -Wall -Wextra -Werror -pedantic "
             "-Wno-unused-parameter -c %s -o %s.o > %s.log 2>&1 || cat %s.log >&2",
             dir, cc, file, cc, cc, cc);
    cr_assert_eq(test_run(cmd), 0, "%s reported warnings or errors on the generated code (%s/%s)",
                 cc, dir, file);
    snprintf(cmd, sizeof cmd, "test ! -s '%s/%s.log'", dir, cc);
    cr_assert_eq(test_run(cmd), 0, "%s printed diagnostics for the generated code", cc);
}

typedef int32_t (*entry_fn)(void *const *, void *const *, void *);

/* Generate mod's C into text, write it to a new directory as <name>_lib0.c, compile it cleanly
 * with gcc (and with clang too when `clang` and it is installed), build <name>.so and load it;
 * returns its entry tth_<name>_run. */
static entry_fn build_c(const char *name, int clang)
{
    text = generate(mod, &text_len);
    char file[64], path[1024], cmd[2048];
    test_mkdtemp(dir, sizeof dir);
    snprintf(file, sizeof file, "%s_lib0.c", name);
    test_put_file(dir, file, text, text_len);
    compile_with("gcc", file);
    if (clang && test_have("clang"))
        compile_with("clang", file);
    snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c99 -O2 -fPIC -shared -o %s.so %s -lm", dir, name, file);
    cr_assert_eq(test_run(cmd), 0);
    snprintf(path, sizeof path, "%s/%s.so", dir, name);
    dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(dl, "%s", dlerror());
    entry_fn run;
    snprintf(path, sizeof path, "tth_%s_run", name);
    *(void **)&run = dlsym(dl, path);
    cr_assert_not_null(run, "no %s", path);
    return run;
}

Test(codegen, sink_compiles_cleanly_and_computes)
{
    mod = build_sink();
    entry_fn run = build_c("sink", 1);
    cr_assert(strstr(text, "#pragma omp") == NULL);
    cr_assert(strstr(text, "restrict") != NULL, "operator parameters should be restrict");

    float x[8] = {-1, 0, 1, 2, 3, -4, 0.5f, 10};
    int8_t q[8] = {-7, -3, -1, 0, 1, 5, 100, -128};
    uint16_t h[8] = {0x3E00, 0xC000, 0x3800, 0x7BFF, 0x0000, 0x8000, 0x0001, 0x1419};
    float y[8];
    int8_t r[8];
    uint16_t ho[8];
    _Alignas(64) unsigned char ws[256];
    void *ins[3] = {x, q, h}, *outs[3] = {y, r, ho};
    cr_assert_eq(run(ins, outs, ws), 0);
    for (int k = 0; k < 8; k++) {
        float lv = fmaxf(x[k] * ((float)k * 0.5f), 0.0f);
        float t = lv > 1.0f ? expf(lv) : lv - 1.0f;
        float want = k == 0 ? t : t + fminf(t, 2.0f);
        cr_assert_float_eq(y[k], want, 1e-5f * fabsf(want) + 1e-6f, "y[%d] = %g, want %g", k, y[k], want);
        int fm = ((q[k] % 3) + 3) % 3;
        int8_t want_r = (int8_t)(fm + (int8_t)(q[k] * 2));
        cr_assert_eq(r[k], want_r, "r[%d] = %d, want %d (q = %d)", k, r[k], want_r, q[k]);
    }
    uint16_t want_h[8] = {0x4200, 0xC400, 0x3C00, 0x7C00, 0x0000, 0x8000, 0x0002, 0x1819};
    for (int k = 0; k < 8; k++)
        cr_assert_eq(ho[k], want_h[k], "ho[%d] = 0x%04x, want 0x%04x", k, ho[k], want_h[k]);
}

/* bfloat16: bf_add(a, b, o) o[i] = a[i] + b[i] (vectorized); bf_cast(x, y, z) y[i] = bfloat16(x[i]),
 * z[i] = float32(bfloat16(x[i])), so the cast rounds where it is, not only where it is stored. */
static tth_tir_module *build_bf16(void)
{
    tth_tir_module *m = tth_tir_module_new();
    tth_diag d;
    int64_t s8[1] = {BF16_NCASES};
    tth_tbuffer *a = tth_tir_buffer(m, "a", TTH_BF16, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *b = tth_tir_buffer(m, "b", TTH_BF16, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *o = tth_tir_buffer(m, "o", TTH_BF16, 1, s8, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tstmt *as = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, BF16_NCASES), TTH_LOOP_VECTORIZED,
        tth_tir_store(m, o, tth_tir_ref(m, i),
                      tth_tir_bin(m, TTH_TBIN_ADD, tth_tir_load(m, a, tth_tir_ref(m, i)),
                                  tth_tir_load(m, b, tth_tir_ref(m, i)))));
    tth_tbuffer *ap[3] = {a, b, o};
    cr_assert_not_null(tth_tir_func_add(m, "bf_add", ap, 3, as, "c", NULL, &d), "%s", d.message);

    tth_tbuffer *x = tth_tir_buffer(m, "x", TTH_F32, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *y = tth_tir_buffer(m, "y", TTH_BF16, 1, s8, TTH_SCOPE_PARAM);
    tth_tbuffer *z = tth_tir_buffer(m, "z", TTH_F32, 1, s8, TTH_SCOPE_PARAM);
    tth_tvar *j = tth_tir_var(m, "j", TTH_I64);
    tth_tstmt *st[2] = {
        tth_tir_store(m, y, tth_tir_ref(m, j), tth_tir_cast(m, TTH_BF16, tth_tir_load(m, x, tth_tir_ref(m, j)))),
        tth_tir_store(m, z, tth_tir_ref(m, j),
                      tth_tir_cast(m, TTH_F32, tth_tir_cast(m, TTH_BF16, tth_tir_load(m, x, tth_tir_ref(m, j))))),
    };
    tth_tstmt *cs = tth_tir_for(m, j, tth_tir_i64(m, 0), tth_tir_i64(m, BF16_NCASES), TTH_LOOP_SERIAL,
                                tth_tir_seq(m, st, 2));
    tth_tbuffer *cp[3] = {x, y, z};
    cr_assert_not_null(tth_tir_func_add(m, "bf_cast", cp, 3, cs, "c", NULL, &d), "%s", d.message);

    /* the entry: inputs a, b, x; outputs o, y, z */
    tth_tbuffer *ep[6];
    scoped(m, (tth_tbuffer *[]){a, b, x}, 3, TTH_SCOPE_INPUT, ep);
    scoped(m, (tth_tbuffer *[]){o, y, z}, 3, TTH_SCOPE_OUTPUT, ep + 3);
    tth_tstmt *body = NULL;
    tth_tbuffer *c1[3] = {ep[0], ep[1], ep[3]}, *c2[3] = {ep[2], ep[4], ep[5]};
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "bf_add", c1, 3));
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "bf_cast", c2, 3));
    cr_assert_not_null(tth_tir_func_add(m, "tth_bfx_run", ep, 6, body, "c", NULL, &d), "%s", d.message);
    m->entry = "tth_bfx_run";
    return m;
}

Test(codegen, bfloat16_compiles_cleanly_and_rounds_to_nearest_even)
{
    mod = build_bf16();
    entry_fn run = build_c("bfx", 1);
    cr_assert(strstr(text, "static inline TTH_MAYBE_UNUSED uint16_t tth_f32_to_bf16(float f)"), "%s", text);

    uint16_t o[BF16_NCASES], y[BF16_NCASES];
    float x[BF16_NCASES], z[BF16_NCASES];
    memcpy(x, bf16_narrow_in, sizeof x);
    _Alignas(64) unsigned char ws[64];
    void *ins[3] = {(void *)bf16_add_a, (void *)bf16_add_b, x}, *outs[3] = {o, y, z};
    cr_assert_eq(run(ins, outs, ws), 0);
    bf16_check(o, y, z);
}

/* DOT4_US / DOT4_SS (docs/tir.md, "Dot products") in C: 1 and 7 lanes of each, through the entry;
 * the generated C compiles cleanly and gives the definition's results. */
Test(codegen, dot4_compiles_cleanly_and_computes)
{
    tth_tir_module *m = mod = tth_tir_module_new();
    tth_diag d;
    int64_t n7 = 7, n16 = 16;
    tth_tbuffer *pa = tth_tir_buffer(m, "a", TTH_I32, 1, &n7, TTH_SCOPE_PARAM);
    tth_tbuffer *pb = tth_tir_buffer(m, "b", TTH_I32, 1, &n7, TTH_SCOPE_PARAM);
    tth_tbuffer *pc = tth_tir_buffer(m, "acc", TTH_I32, 1, &n7, TTH_SCOPE_PARAM);
    tth_tbuffer *po = tth_tir_buffer(m, "o", TTH_I32, 1, &n16, TTH_SCOPE_PARAM);
    tth_tstmt *body = NULL;
    for (int us = 0; us < 2; us++)
        for (int lanes = 1; lanes <= 7; lanes += 6) {
            tth_texpr *v[3];
            tth_tbuffer *src[3] = {pc, pa, pb};
            for (int i = 0; i < 3; i++)
                v[i] = lanes == 1 ? tth_tir_load(m, src[i], tth_tir_i64(m, 0)) : tth_tir_vload(m, src[i], tth_tir_i64(m, 0), lanes, 0);
            tth_texpr *e = tth_tir_intrin3(m, us ? TTH_TINTRIN_DOT4_US : TTH_TINTRIN_DOT4_SS, v[0], v[1], v[2]);
            tth_texpr *at = tth_tir_i64(m, us * 8 + (lanes == 1 ? 7 : 0));
            tth_tir_seq_append(m, &body, lanes == 1 ? tth_tir_store(m, po, at, e) : tth_tir_vstore(m, po, at, e, 0));
        }
    tth_tbuffer *fp[4] = {pa, pb, pc, po};
    cr_assert_not_null(tth_tir_func_add(m, "dk", fp, 4, body, "c", NULL, &d), "%s", d.message);
    tth_tbuffer *ep[4];
    scoped(m, fp, 3, TTH_SCOPE_INPUT, ep);
    scoped(m, &po, 1, TTH_SCOPE_OUTPUT, ep + 3);
    cr_assert_not_null(tth_tir_func_add(m, "tth_dk_run", ep, 4, tth_tir_call_func(m, "dk", ep, 4), "c", NULL, &d),
                       "%s", d.message);
    m->entry = "tth_dk_run";
    entry_fn run = build_c("dk", 0);
    int32_t a[7], b[7], acc[7], o[16];
    test_dot4_operands(a, b, acc, 7);
    _Alignas(64) unsigned char ws[64];
    void *ins[3] = {a, b, acc}, *outs[1] = {o};
    cr_assert_eq(run(ins, outs, ws), 0);
    for (int us = 0; us < 2; us++) {
        for (int i = 0; i < 7; i++)
            cr_assert_eq(o[us * 8 + i], test_dot4(us, acc[i], a[i], b[i]), "lane %d of %s", i, us ? "us" : "ss");
        cr_assert_eq(o[us * 8 + 7], test_dot4(us, acc[0], a[0], b[0]), "one lane of %s", us ? "us" : "ss");
    }
}

Test(codegen, unplanned_workspace_is_an_error)
{
    mod = build_sink();
    for (size_t i = 0; i < mod->nfuncs; i++)
        if (strcmp(mod->funcs[i]->name, "sink_f") == 0)
            mod->funcs[i]->body->u.alloc.buf->offset = -1;
    tth_runtime_module *rt = tth_runtime_module_new("c");
    tth_diag d;
    tth_diag_clear(&d);
    int rc = c_plugin()->tir_to_runtime(NULL, NULL, mod, rt, &d);
    cr_assert_eq(rc, TTH_EINVAL);
    cr_assert(strstr(d.message, "memory planning") != NULL, "message: %s", d.message);
    cr_assert(strstr(d.location, "sink_f") != NULL, "location: %s", d.location);
    tth_runtime_module_free(rt);
}

/* A module whose C is larger than one part (docs/artifact.md, "C sources"), with a class of
 * functions that share their code (docs/tir.md): 40 different functions of 100 statements
 * f<i>: y[j] = x[j] * (i + 1) + j, and 6 functions g<k>: y[j] = x[j] + c_k[j] with a constant of
 * their own. The parts compile cleanly together; g's code is written once and called by all six;
 * the functions of every part compute their results. */
Test(codegen, large_module_in_parts_with_shared_bodies)
{
    tth_tir_module *m = mod = tth_tir_module_new();
    int64_t n = 100;
    tth_diag d;
    char name[32];
    for (int i = 0; i < 40; i++) {
        tth_tbuffer *x = tth_tir_buffer(m, "x", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
        tth_tbuffer *y = tth_tir_buffer(m, "y", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
        tth_tstmt *body = NULL;
        for (int64_t j = 0; j < n; j++)
            tth_tir_seq_append(m, &body, tth_tir_store(m, y, tth_tir_i64(m, j),
                tth_tir_bin(m, TTH_TBIN_ADD, tth_tir_bin(m, TTH_TBIN_MUL, tth_tir_load(m, x, tth_tir_i64(m, j)),
                                                         tth_tir_float(m, TTH_F32, i + 1)),
                            tth_tir_float(m, TTH_F32, (double)j))));
        tth_tbuffer *p[2] = {x, y};
        snprintf(name, sizeof name, "f%d", i);
        cr_assert_not_null(tth_tir_func_add(m, name, p, 2, body, "c", NULL, &d), "%s", d.message);
    }
    for (int k = 0; k < 6; k++) {
        tth_ttype ct = {.dtype = TTH_F32, .rank = 1, .shape = {n}};
        tth_tensor *cv = tth_tensor_new(&ct, NULL);
        for (int64_t j = 0; j < n; j++)
            ((float *)cv->data)[j] = (float)(k * 1000 + j);
        snprintf(name, sizeof name, "c%d", k);
        tth_tbuffer *c = tth_tir_const_buffer(m, name, cv);
        tth_tensor_unref(cv);
        tth_tbuffer *x = tth_tir_buffer(m, "x", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
        tth_tbuffer *y = tth_tir_buffer(m, "y", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
        tth_tvar *j = tth_tir_var(m, "j", TTH_I64);
        tth_tstmt *body = tth_tir_for(m, j, tth_tir_i64(m, 0), tth_tir_i64(m, n), TTH_LOOP_SERIAL,
            tth_tir_store(m, y, tth_tir_ref(m, j), tth_tir_bin(m, TTH_TBIN_ADD, tth_tir_load(m, x, tth_tir_ref(m, j)),
                                                               tth_tir_load(m, c, tth_tir_ref(m, j)))));
        tth_tbuffer *p[2] = {x, y};
        snprintf(name, sizeof name, "g%d", k);
        cr_assert_not_null(tth_tir_func_add(m, name, p, 2, body, "c", NULL, &d), "%s", d.message);
    }
    tth_runtime_module *rt = run_hook(m);
    char path[1024], cmd[4096] = "";
    test_mkdtemp(dir, sizeof dir);
    size_t nsrc = 0, used = 0;
    for (size_t i = 0; i < tth_runtime_module_count(rt); i++) {
        const tth_module_file *f = tth_runtime_module_file(rt, i);
        if (f->kind != TTH_FILE_C_SOURCE)
            continue;
        test_put_file(dir, f->name, f->data, f->len);
        used += (size_t)snprintf(cmd + used, sizeof cmd - used, " %s", f->name);
        nsrc++;
    }
    cr_assert_geq(nsrc, 2, "%zu C source for about 250 KB of functions, expected parts", nsrc);
    char build[4600];
    snprintf(build, sizeof build, "cd '%s' && cat%s > all.c && test $(grep -c '^int32_t g[0-9]__shared(.*)$' all.c) -eq 1 && "
             "test $(grep -c 'return g[0-9]__shared(' all.c) -eq 6 && cc -std=c99 -O1 -Wall -Wextra -Werror "
             "-Wno-unused-parameter -fPIC -shared -o big.so%s -lm", dir, cmd, cmd);
    cr_assert_eq(test_run(build), 0, "one shared g body called six times, and the parts build cleanly (%s)", dir);
    snprintf(path, sizeof path, "%s/big.so", dir);
    dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(dl, "%s", dlerror());
    tth_runtime_module_free(rt);
    float x[100], y[100];
    for (int j = 0; j < 100; j++)
        x[j] = (float)j * 0.5f;
    static const char *const fns[] = {"f0", "f17", "f39", "g0", "g3", "g5"};
    for (size_t q = 0; q < 6; q++) {
        int32_t (*fn)(const float *, float *, uint8_t *);
        *(void **)&fn = dlsym(dl, fns[q]);
        cr_assert_not_null(fn, "%s", fns[q]);
        cr_assert_eq(fn(x, y, NULL), 0);
        int k = atoi(fns[q] + 1);
        for (int j = 0; j < 100; j++) {
            float want = fns[q][0] == 'f' ? x[j] * (float)(k + 1) + (float)j : x[j] + (float)(k * 1000 + j);
            cr_assert_float_eq(y[j], want, 1e-4f, "%s: y[%d] = %g, want %g", fns[q], j, y[j], want);
        }
    }
}
