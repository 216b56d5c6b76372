/* Memory planning (daemon/compile/memplan*.c): no two buffers live at the same time overlap,
 * offsets and sizes respect each buffer's alignment, space is reused, the plan's numbers agree;
 * every algorithm alone is valid, the kept one is never worse than any, the result is
 * deterministic; and the same checks on the plan of every model of the conformance set that
 * compiles (see conformance_set below). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compile.h"
#include "compile_internal.h"
#include "helpers.h"
#include "model_fixture.h"
#include "tth/target.h"

/* A PrimFunc `name(in, out)` with one LOCAL scratch of `local` floats (0: none). */
static void add_op(tth_tir_module *m, const char *name, int64_t n, int64_t local)
{
    int64_t s[1] = {n}, ls[1] = {local};
    tth_tbuffer *in = tth_tir_buffer(m, "in", TTH_F32, 1, s, TTH_SCOPE_PARAM);
    tth_tbuffer *out = tth_tir_buffer(m, "out", TTH_F32, 1, s, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tstmt *body = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, n), TTH_LOOP_SERIAL,
        tth_tir_store(m, out, tth_tir_ref(m, i), tth_tir_load(m, in, tth_tir_ref(m, i))));
    if (local) {
        tth_tbuffer *l = tth_tir_buffer(m, "scratch", TTH_F32, 1, ls, TTH_SCOPE_LOCAL);
        tth_tvar *j = tth_tir_var(m, "j", TTH_I64);
        tth_tstmt *fill = tth_tir_for(m, j, tth_tir_i64(m, 0), tth_tir_i64(m, local), TTH_LOOP_SERIAL,
            tth_tir_store(m, l, tth_tir_ref(m, j), tth_tir_float(m, TTH_F32, 0)));
        tth_tstmt *both[2] = {fill, body};
        body = tth_tir_allocate(m, l, tth_tir_seq(m, both, 2));
    }
    tth_tbuffer *p[2] = {in, out};
    tth_diag d;
    cr_assert_not_null(tth_tir_func_add(m, name, p, 2, body, "c", NULL, &d), "%s", d.message);
}

/* An AOT entry's body: fns[k](args[k][0], args[k][1]) for each of the n calls, in order. */
static tth_tstmt *calls(tth_tir_module *m, const char *const *fns, tth_tbuffer *(*args)[2], size_t n)
{
    tth_tstmt *body = NULL;
    for (size_t k = 0; k < n; k++)
        tth_tir_seq_append(m, &body, tth_tir_call_func(m, fns[k], args[k], 2));
    return body;
}

/* The entry `name`(x, y) of buffers of n elements of dt: t = fns[0](x), y = fns[1](t). */
static void xty_entry(tth_tir_module *m, const char *name, tth_dtype dt, int64_t n, const char *const *fns)
{
    const test_tbuf spec[] = {{"x", dt, n, TTH_SCOPE_INPUT}, {"t", dt, n, TTH_SCOPE_WORKSPACE},
                              {"y", dt, n, TTH_SCOPE_OUTPUT}};
    tth_tbuffer *b[3];
    test_tir_buffers(m, spec, 3, b);
    tth_tbuffer *args[][2] = {{b[0], b[1]}, {b[1], b[2]}};
    test_tir_entry(m, name, (tth_tbuffer *[]){b[0], b[2]}, 2, calls(m, fns, args, 2));
}

/* input → a → b → c → d → output through a chain of ops, plus a long-lived `keep` buffer
 * written first and read last (it must not share space with anything). */
static tth_tir_module *chain(void)
{
    tth_tir_module *m = tth_tir_module_new();
    add_op(m, "op_small", 10, 0);
    add_op(m, "op_big", 1000, 0);
    add_op(m, "op_scratch", 1000, 300);
    static const test_tbuf spec[] = {
        {"x", TTH_F32, 1000, TTH_SCOPE_INPUT},      {"y", TTH_F32, 1000, TTH_SCOPE_OUTPUT},
        {"a", TTH_F32, 1000, TTH_SCOPE_WORKSPACE},  {"b", TTH_F32, 1000, TTH_SCOPE_WORKSPACE},
        {"c", TTH_F32, 1000, TTH_SCOPE_WORKSPACE},  {"d", TTH_F32, 1000, TTH_SCOPE_WORKSPACE},
        {"keep", TTH_F32, 10, TTH_SCOPE_WORKSPACE}, {"keep2", TTH_F32, 10, TTH_SCOPE_WORKSPACE},
    };
    enum { X, Y, A, B, C, D, K, K2 };
    tth_tbuffer *t[8];
    test_tir_buffers(m, spec, 8, t);
    /* call 0: x→keep (x is 1000, reads 10) */
    static const char *const fns[] = {"op_small", "op_big", "op_scratch", "op_big", "op_big", "op_big", "op_small"};
    tth_tbuffer *args[][2] = {{t[X], t[K]}, {t[X], t[A]}, {t[A], t[B]}, {t[B], t[C]}, {t[C], t[D]}, {t[D], t[Y]},
                              {t[K], t[K2]}};
    tth_tstmt *body = calls(m, fns, args, 7);
    t[K2]->scope = TTH_SCOPE_OUTPUT;
    test_tir_entry(m, "tth_chain_run", (tth_tbuffer *[]){t[X], t[Y], t[K2]}, 3, body);
    return m;
}

/* The invariants of a plan: every item placed at a multiple of its alignment (which divides
 * the workspace's), inside the workspace, size rounded up to the alignment, and no two items
 * live at the same time overlapping (a sweep by start keeps it O(n log n + overlaps)). */
static void check_plan(const tth_mem_plan *p, uint32_t align)
{
    for (size_t i = 0; i < p->nitems; i++) {
        const tth_mem_item *a = &p->items[i];
        cr_assert_geq(a->buf->offset, 0, "%s has no offset", a->buf->name);
        cr_assert_geq(a->align, align, "%s: alignment %u below the target's %u", a->buf->name,
                      a->align, align);
        cr_assert_eq(p->alignment % a->align, 0, "%s: alignment %u does not divide the "
                     "workspace's %u", a->buf->name, a->align, p->alignment);
        cr_assert_eq(a->buf->offset % a->align, 0, "%s at %lld is not %u-aligned", a->buf->name,
                     (long long)a->buf->offset, a->align);
        cr_assert_eq(a->size % a->align, 0);
        cr_assert_geq(a->size, tth_tbuffer_nbytes(a->buf));
        cr_assert_leq((size_t)a->buf->offset + a->size, p->workspace_bytes);
        for (size_t j = i + 1; j < p->nitems; j++) {
            const tth_mem_item *b = &p->items[j];
            int live_together = a->start <= b->end && b->start <= a->end;
            int overlap = a->buf->offset < b->buf->offset + (int64_t)b->size &&
                          b->buf->offset < a->buf->offset + (int64_t)a->size && a->size && b->size;
            cr_assert(!(live_together && overlap), "%s [%lld,%lld] and %s [%lld,%lld] overlap",
                      a->buf->name, (long long)a->start, (long long)a->end, b->buf->name,
                      (long long)b->start, (long long)b->end);
        }
    }
    cr_assert_geq(p->workspace_bytes, p->lower_bound_bytes);
    cr_assert_leq(p->workspace_bytes, p->total_bytes);
}

/* m planned at alignment align by algo into p, which keeps the invariants (check_plan) */
static void plan(tth_tir_module *m, uint32_t align, tth_memplan_algo algo, tth_mem_plan *p)
{
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_memplan_run(m, align, algo, p, &d), 0, "%s", d.message);
    check_plan(p, align);
}

/* One function running three kernels in a row (as a cmsis-nn region does): t1 = k0(in),
 * t2 = k1(t1), out = k2(t2). Its LOCAL buffers live from the first to the last of its statements
 * naming them, so t1 and t3 (the third kernel's scratch) share bytes; the function's parameters
 * live through all three. */
Test(memplan, locals_of_one_function_share_bytes_once_dead)
{
    tth_tir_module *m = tth_tir_module_new();
    int64_t n[1] = {1000};
    tth_tbuffer *in = tth_tir_buffer(m, "in", TTH_F32, 1, n, TTH_SCOPE_PARAM);
    tth_tbuffer *out = tth_tir_buffer(m, "out", TTH_F32, 1, n, TTH_SCOPE_PARAM);
    tth_tbuffer *t[3];
    for (int k = 0; k < 3; k++) {
        char nm[8];
        snprintf(nm, sizeof nm, "t%d", k + 1);
        t[k] = tth_tir_buffer(m, nm, TTH_F32, 1, n, TTH_SCOPE_LOCAL);
    }
    /* copy src -> dst, as one statement */
    tth_tstmt *st[3];
    tth_tbuffer *src[3] = {in, t[0], t[1]}, *dst[3] = {t[0], t[1], out};
    for (int k = 0; k < 3; k++) {
        tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
        tth_texpr *v = tth_tir_load(m, src[k], tth_tir_ref(m, i));
        if (k == 2) /* the third kernel also uses t3 as scratch */
            v = tth_tir_bin(m, TTH_TBIN_ADD, v, tth_tir_load(m, t[2], tth_tir_ref(m, i)));
        st[k] = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, 1000), TTH_LOOP_SERIAL,
                            tth_tir_store(m, dst[k], tth_tir_ref(m, i), v));
    }
    tth_tstmt *body = tth_tir_seq(m, st, 3);
    for (int k = 2; k >= 0; k--)
        body = tth_tir_allocate(m, t[k], body);
    tth_tbuffer *fp[2] = {in, out};
    tth_diag d;
    cr_assert_not_null(tth_tir_func_add(m, "region", fp, 2, body, "c", NULL, &d), "%s", d.message);
    tth_tbuffer *x = tth_tir_buffer(m, "x", TTH_F32, 1, n, TTH_SCOPE_INPUT);
    tth_tbuffer *args[][2] = {{x, tth_tir_buffer(m, "y", TTH_F32, 1, n, TTH_SCOPE_OUTPUT)}};
    test_tir_entry(m, "tth_r_run", args[0], 2, calls(m, (const char *const[]){"region"}, args, 1));
    tth_mem_plan p;
    plan(m, 16, TTH_MEMPLAN_BEST, &p);
    cr_assert_eq(p.steps, 3);
    for (size_t i = 0; i < p.nitems; i++) {
        const char *nm = p.items[i].buf->name;
        int64_t want_start = nm[1] == '1' ? 0 : nm[1] == '2' ? 1 : 2;
        int64_t want_end = nm[1] == '1' ? 1 : 2;
        cr_assert_eq(p.items[i].start, want_start, "%s starts at %lld", nm, (long long)p.items[i].start);
        cr_assert_eq(p.items[i].end, want_end, "%s ends at %lld", nm, (long long)p.items[i].end);
    }
    /* t1 dies before t3 is born: two buffers' worth, not three */
    cr_assert_eq(p.lower_bound_bytes, 2 * 4000);
    cr_assert_eq(p.workspace_bytes, 2 * 4000);
    tth_mem_plan_clear(&p);
    tth_tir_module_free(m);
}

Test(memplan, no_live_overlap_and_reuse)
{
    tth_tir_module *m = chain();
    tth_mem_plan p;
    plan(m, 16, TTH_MEMPLAN_GREEDY_BY_SIZE, &p);
    /* a, b, c, d, keep, scratch: 4 x 4000 + 48 (keep, rounded) + 1200 */
    cr_assert_eq(p.nitems, 6);
    cr_assert_eq(p.total_bytes, 4 * 4000 + 48 + 1200);
    /* at most two 4000-byte buffers are live at once, plus keep, plus scratch during call 2 */
    cr_assert_eq(p.lower_bound_bytes, 2 * 4000 + 48 + 1200);
    cr_assert_lt(p.workspace_bytes, p.total_bytes, "no space was reused");
    cr_assert_leq(p.workspace_bytes, 2 * 4000 + 48 + 1200 + 4000);
    /* keep lives from call 0 to call 6, which is time step 7: call 2's function runs two
     * statements (fill, copy), one step each; never shared */
    for (size_t i = 0; i < p.nitems; i++)
        if (strcmp(p.items[i].buf->name, "keep") == 0) {
            cr_assert_eq(p.items[i].start, 0);
            cr_assert_eq(p.items[i].end, 7);
        } else if (strcmp(p.items[i].buf->name, "scratch") == 0) {
            cr_assert_eq(p.items[i].buf->scope, TTH_SCOPE_LOCAL);
            cr_assert_eq(p.items[i].start, 2);
            cr_assert_eq(p.items[i].end, 2);
            cr_assert_str_eq(p.items[i].func, "op_scratch");
        }
    /* per-operator LOCAL bytes */
    json_t *ops = tth_mem_plan_per_operator(m, &p);
    cr_assert_eq(json_array_size(ops), 3);
    for (size_t i = 0; i < 3; i++) {
        const json_t *o = json_array_get(ops, i);
        const char *fn = json_string_value(json_object_get(o, "function"));
        json_int_t lb = json_integer_value(json_object_get(o, "local_bytes"));
        cr_assert_eq(lb, strcmp(fn, "op_scratch") == 0 ? 1200 : 0, "%s: %lld", fn, (long long)lb);
    }
    json_decref(ops);
    tth_mem_plan_clear(&p);
    tth_tir_module_free(m);
}

Test(memplan, alignment_from_the_target)
{
    tth_tir_module *m = chain();
    tth_mem_plan p;
    tth_diag d;
    plan(m, 256, TTH_MEMPLAN_GREEDY_BY_SIZE, &p);
    json_t *j = tth_mem_plan_summary(&p);
    cr_assert_eq(json_integer_value(json_object_get(j, "alignment")), 256);
    cr_assert_str_eq(json_string_value(json_object_get(j, "algorithm")), "greedy-by-size");
    cr_assert_eq(json_object_size(json_object_get(j, "algorithms")), 1);
    json_decref(j);
    tth_mem_plan_clear(&p);
    /* not a power of two */
    cr_assert_eq(tth_memplan_run(m, 24, TTH_MEMPLAN_GREEDY_BY_SIZE, &p, &d), TTH_EINVAL);
    tth_tir_module_free(m);
}

Test(memplan, needs_an_entry)
{
    tth_tir_module *m = tth_tir_module_new();
    add_op(m, "op", 4, 0);
    tth_mem_plan p;
    tth_diag d;
    cr_assert_eq(tth_memplan_run(m, 16, TTH_MEMPLAN_GREEDY_BY_SIZE, &p, &d), TTH_EINVAL);
    cr_assert(strstr(d.message, "aot"), "%s", d.message);
    tth_tir_module_free(m);
}

static const tth_memplan_algo all_algos[] = {TTH_MEMPLAN_GREEDY_BY_SIZE, TTH_MEMPLAN_GREEDY_BY_CONFLICTS,
                                             TTH_MEMPLAN_GREEDY_BY_START, TTH_MEMPLAN_SEARCH};
#define NALGOS (sizeof all_algos / sizeof all_algos[0])

Test(memplan, every_algorithm_alone_and_the_best)
{
    size_t alone[NALGOS];
    for (size_t k = 0; k < NALGOS; k++) {
        tth_tir_module *m = chain();
        tth_mem_plan p;
        plan(m, 16, all_algos[k], &p);
        cr_assert_eq(p.algo, all_algos[k]);
        cr_assert_eq(p.algo_bytes[all_algos[k]], p.workspace_bytes);
        alone[k] = p.workspace_bytes;
        tth_mem_plan_clear(&p);
        tth_tir_module_free(m);
    }
    tth_tir_module *m = chain();
    tth_mem_plan p;
    plan(m, 16, TTH_MEMPLAN_BEST, &p);
    for (size_t k = 0; k < NALGOS; k++) {
        cr_assert_leq(p.workspace_bytes, alone[k], "best %zu > %s alone %zu", p.workspace_bytes,
                      tth_memplan_algo_name(all_algos[k]), alone[k]);
        cr_assert_leq(p.workspace_bytes, p.algo_bytes[all_algos[k]]);
    }
    /* this chain has a plan at the lower bound: keep sits beside two live tensors + scratch */
    cr_assert_eq(p.workspace_bytes, p.lower_bound_bytes);
    json_t *j = tth_mem_plan_summary(&p);
    cr_assert_eq(json_object_size(json_object_get(j, "algorithms")), NALGOS);
    cr_assert_str_eq(json_string_value(json_object_get(j, "algorithm")),
                     tth_memplan_algo_name(p.algo));
    json_decref(j);
    tth_mem_plan_clear(&p);
    tth_tir_module_free(m);
}

Test(memplan, deterministic)
{
    tth_tir_module *m1 = chain(), *m2 = chain();
    tth_mem_plan p1, p2;
    tth_diag d;
    cr_assert_eq(tth_memplan_run(m1, 16, TTH_MEMPLAN_BEST, &p1, &d), 0, "%s", d.message);
    cr_assert_eq(tth_memplan_run(m2, 16, TTH_MEMPLAN_BEST, &p2, &d), 0, "%s", d.message);
    json_t *j1 = tth_mem_plan_to_json(&p1), *j2 = tth_mem_plan_to_json(&p2);
    cr_assert(json_equal(j1, j2), "two runs gave different plans");
    char *s1 = tth_explain_memory_svg(&p1, "chain"), *s2 = tth_explain_memory_svg(&p2, "chain");
    cr_assert_str_eq(s1, s2);
    /* the picture: one rectangle per buffer, the lower bound line, names and sizes */
    size_t rects = 0;
    for (const char *q = s1; (q = strstr(q, "<rect x=")) != NULL; q++)
        rects++;
    cr_assert_eq(rects, p1.nitems + 1, "%zu rectangles for %zu buffers + background", rects, p1.nitems);
    cr_assert(strstr(s1, "lower bound"), "no lower bound line");
    cr_assert(strstr(s1, "stroke-dasharray"), "no lower bound line");
    cr_assert(strstr(s1, "<title>scratch (scratch of op_scratch): 1200 bytes"), "%s", s1);
    cr_assert(strncmp(s1, "<?xml", 5) == 0 && strstr(s1, "</svg>\n"));
    free(s1);
    free(s2);
    json_decref(j1);
    json_decref(j2);
    tth_mem_plan_clear(&p1);
    tth_mem_plan_clear(&p2);
    tth_tir_module_free(m1);
    tth_tir_module_free(m2);
}

Test(memplan, alignment_per_buffer)
{
    /* target 8: buffers that kept the default 16 take 8; one asking for 64 keeps it (and the
     * workspace's alignment becomes 64); a float64 buffer under target 2 still gets 8 */
    tth_tir_module *m = chain();
    tth_prim_func *e = tth_tir_module_find(m, "tth_chain_run");
    tth_tbuffer *b = NULL;
    const tth_tstmt *body = e->body;
    for (size_t k = 0; k < body->u.seq.n; k++)
        for (size_t i = 0; i < body->u.seq.stmts[k]->u.call.nargs; i++)
            if (strcmp(body->u.seq.stmts[k]->u.call.args[i]->name, "b") == 0)
                b = body->u.seq.stmts[k]->u.call.args[i];
    cr_assert_not_null(b);
    b->align = 64;
    tth_mem_plan p;
    plan(m, 8, TTH_MEMPLAN_BEST, &p);
    cr_assert_eq(p.alignment, 64);
    for (size_t i = 0; i < p.nitems; i++) {
        uint32_t want = p.items[i].buf == b ? 64 : 8;
        cr_assert_eq(p.items[i].align, want, "%s: %u", p.items[i].buf->name, p.items[i].align);
        cr_assert_eq(p.items[i].buf->align, want, "the pass writes the alignment back");
    }
    /* keep is 40 bytes: rounded to 40 under 8, to 48 under 16 */
    for (size_t i = 0; i < p.nitems; i++)
        if (strcmp(p.items[i].buf->name, "keep") == 0)
            cr_assert_eq(p.items[i].size, 40);
    tth_mem_plan_clear(&p);
    tth_tir_module_free(m);

    m = chain();
    plan(m, 1, TTH_MEMPLAN_BEST, &p);
    for (size_t i = 0; i < p.nitems; i++)
        cr_assert_eq(p.items[i].align, 4, "float32 is never below 4 bytes");
    tth_mem_plan_clear(&p);
    tth_tir_module_free(m);
}

/* A function calling another: the callee's LOCAL buffers live during the caller's call. */
Test(memplan, nested_calls_and_uncalled_functions)
{
    tth_tir_module *m = tth_tir_module_new();
    add_op(m, "inner", 100, 64);
    add_op(m, "unused_op", 100, 32);
    int64_t s[1] = {100};
    tth_tbuffer *pi = tth_tir_buffer(m, "pi", TTH_F32, 1, s, TTH_SCOPE_PARAM);
    tth_tbuffer *po = tth_tir_buffer(m, "po", TTH_F32, 1, s, TTH_SCOPE_PARAM);
    tth_tbuffer *pa[2] = {pi, po};
    tth_diag d;
    cr_assert_not_null(tth_tir_func_add(m, "outer", pa, 2, tth_tir_call_func(m, "inner", pa, 2), "c",
                                        NULL, &d), "%s", d.message);
    xty_entry(m, "tth_n_run", TTH_F32, 100, (const char *const[]){"outer", "inner"});
    tth_mem_plan p;
    plan(m, 16, TTH_MEMPLAN_BEST, &p);
    int seen = 0;
    for (size_t i = 0; i < p.nitems; i++) {
        const tth_mem_item *it = &p.items[i];
        if (it->func && strcmp(it->func, "inner") == 0) {
            cr_assert_eq(it->start, 0, "inner's scratch is live in outer's call");
            cr_assert_eq(it->end, 1);
            seen |= 1;
        } else if (it->func && strcmp(it->func, "unused_op") == 0) {
            cr_assert_gt(it->start, 1, "an uncalled function's scratch lives after the entry");
            seen |= 2;
        }
    }
    cr_assert_eq(seen, 3);
    tth_mem_plan_clear(&p);
    tth_tir_module_free(m);
}

/* Items for tth_memplan_place without a module: fake buffers of `n` bytes. */
typedef struct fake_plan {
    tth_mem_plan plan;
    tth_tbuffer *bufs;
    char (*names)[32];
} fake_plan;

static void fake_init(fake_plan *f, size_t n)
{
    memset(f, 0, sizeof *f);
    f->plan.items = calloc(n ? n : 1, sizeof *f->plan.items);
    f->bufs = calloc(n ? n : 1, sizeof *f->bufs);
    f->names = calloc(n ? n : 1, sizeof *f->names);
    f->plan.nitems = n;
    f->plan.alignment = 1;
}

static void fake_item(fake_plan *f, size_t i, int64_t start, int64_t end, size_t bytes, uint32_t align)
{
    snprintf(f->names[i], sizeof f->names[i], "b%zu", i);
    tth_tbuffer *b = &f->bufs[i];
    b->id = (uint32_t)i;
    b->name = f->names[i];
    b->dtype = TTH_U8;
    b->rank = 1;
    b->shape[0] = (int64_t)bytes;
    b->scope = TTH_SCOPE_WORKSPACE;
    b->align = align;
    b->offset = -1;
    f->plan.items[i] = (tth_mem_item){.buf = b, .start = start, .end = end,
                                      .size = (bytes + align - 1) / align * align, .align = align};
}

static void fake_free(fake_plan *f)
{
    free(f->plan.items);
    free(f->bufs);
    free(f->names);
}

/* Every algorithm alone on the same items, then the best: each valid, the best no worse.
 * Returns 1 when the search beat every greedy order. */
static int check_all_algorithms(fake_plan *f, const char *what)
{
    size_t alone[NALGOS];
    for (size_t k = 0; k < NALGOS; k++) {
        cr_assert_eq(tth_memplan_place(&f->plan, all_algos[k]), 0);
        check_plan(&f->plan, 1);
        alone[k] = f->plan.workspace_bytes;
    }
    cr_assert_eq(tth_memplan_place(&f->plan, TTH_MEMPLAN_BEST), 0);
    check_plan(&f->plan, 1);
    for (size_t k = 0; k < NALGOS; k++)
        cr_assert_leq(f->plan.workspace_bytes, alone[k], "%s: best %zu > %s %zu", what,
                      f->plan.workspace_bytes, tth_memplan_algo_name(all_algos[k]), alone[k]);
    return alone[3] < alone[0] && alone[3] < alone[1] && alone[3] < alone[2];
}

Test(memplan, random_lifetimes)
{
    uint64_t seed = 12345;
    int improved = 0;
    for (int round = 0; round < 20; round++) {
        size_t n = 5 + (size_t)round * 15;
        fake_plan f;
        fake_init(&f, n);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int64_t start = (int64_t)((seed >> 33) % 50);
            int64_t len = (int64_t)((seed >> 20) % 8);
            size_t bytes = 1 + (size_t)((seed >> 40) % 5000);
            uint32_t align = 1u << ((seed >> 12) % 7);
            fake_item(&f, i, start, start + len, bytes, align);
        }
        char what[32];
        snprintf(what, sizeof what, "round %d", round);
        improved += check_all_algorithms(&f, what);
        fake_free(&f);
    }
    /* the search earns its place: on some of these it beats every greedy order */
    cr_log_info("memplan random_lifetimes: the search beat every greedy order %d times of 20",
                improved);
    cr_assert_gt(improved, 0);
}

/* ---- the conformance set ----------------------------------------------------------------------
 * Every model of the conformance runner's directories (libonnx-testdata: node, simple,
 * pytorch-converted, pytorch-operator) that compiles for target c is compiled in-process (no C
 * compiler: build_shared=false) and its plan, from the memplan dump, is checked; then the same
 * buffers are placed by every algorithm alone and checked again. All of them take about a
 * second under ASan (most models are one operator with no intermediate tensor). */

#define TESTDATA "/usr/share/libonnx-testdata/data"

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The plan of the dump as fake items; returns 0 when it has none. */
static size_t plan_from_dump(const json_t *j, fake_plan *f)
{
    const json_t *items = json_object_get(j, "items");
    size_t n = json_array_size(items);
    fake_init(f, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(items, i);
        const json_t *live = json_object_get(it, "live");
        size_t size = (size_t)json_integer_value(json_object_get(it, "size"));
        uint32_t align = (uint32_t)json_integer_value(json_object_get(it, "align"));
        cr_assert_gt(align, 0);
        fake_item(f, i, json_integer_value(json_array_get(live, 0)),
                  json_integer_value(json_array_get(live, 1)), size, align);
        f->bufs[i].offset = json_integer_value(json_object_get(it, "offset"));
    }
    f->plan.workspace_bytes = (size_t)json_integer_value(json_object_get(j, "workspace_bytes"));
    f->plan.lower_bound_bytes = (size_t)json_integer_value(json_object_get(j, "lower_bound_bytes"));
    f->plan.total_bytes = (size_t)json_integer_value(json_object_get(j, "total_bytes"));
    f->plan.alignment = (uint32_t)json_integer_value(json_object_get(j, "alignment"));
    return n;
}

/* options.explain puts explain/memory.svg in the artifact (an uncompressed tar: the name and
 * the picture's text are in its bytes); without it there is none. */
static void check_explain(tth_registry *r, const json_t *target, const char *path, const char *name)
{
    for (int explain = 0; explain < 2; explain++) {
        size_t len = 0;
        uint8_t *model = test_read_file(path, &len);
        cr_assert_not_null(model);
        json_t *opts = json_pack("{s:b, s:b}", "explain", explain, "build_shared", 0);
        tth_compile_request req = {.model = model, .model_len = len, .model_name = "m",
                                   .target = target, .options = opts, .registry = r};
        tth_compile_result res;
        tth_diag d;
        tth_diag_clear(&d);
        cr_assert_eq(tth_compile(&req, &res, &d), 0, "%s: %s", name, d.message);
        const void *at = memmem(res.artifact, res.artifact_len, "explain/memory.svg", 18);
        if (explain) {
            cr_assert_not_null(at, "%s: no explain/memory.svg with options.explain", name);
            cr_assert_not_null(memmem(res.artifact, res.artifact_len, "memory plan of 'm'", 18));
            cr_assert_not_null(memmem(res.artifact, res.artifact_len, "stroke-dasharray", 16));
        } else {
            cr_assert_null(at, "%s: explain/memory.svg without options.explain", name);
        }
        tth_compile_result_free(&res);
        json_decref(opts);
        free(model);
    }
}

Test(memplan, conformance_set, .timeout = 600)
{
    static const char *const sets[] = {"node", "simple", "pytorch-converted", "pytorch-operator"};
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        char path[512];
        snprintf(path, sizeof path, TESTDATA "/%s", sets[k]);
        DIR *dir = opendir(path);
        if (!dir)
            continue;
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            if (e->d_name[0] == '.')
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                names = realloc(names, cap * sizeof *names);
                cr_assert_not_null(names);
            }
            char *nm = NULL;
            cr_assert_geq(asprintf(&nm, "%s/%s", sets[k], e->d_name), 0);
            names[n++] = nm;
        }
        closedir(dir);
    }
    if (n == 0)
        cr_skip_test("%s is not installed", TESTDATA);
    qsort(names, n, sizeof *names, cmp_name);

    tth_registry *r = test_registry();
    tth_diag d;
    tth_diag_clear(&d);
    json_t *target = tth_target_parse(r, NULL, "c", &d);
    cr_assert_not_null(target, "%s", d.message);
    json_t *opts = json_pack("{s:s, s:b}", "dump_ir", "memplan", "build_shared", 0);
    size_t tried = 0, planned = 0, with_buffers = 0;
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, TESTDATA "/%s/model.onnx", names[i]);
        size_t len = 0;
        uint8_t *model = test_read_file(path, &len);
        if (!model)
            continue;
        tried++;
        tth_compile_request req = {.model = model, .model_len = len, .model_name = "m",
                                   .target = target, .options = opts, .registry = r};
        tth_compile_result res;
        tth_diag_clear(&d);
        int rc = tth_compile(&req, &res, &d);
        free(model);
        if (rc != 0)
            continue; /* what does not compile has no plan; the conformance runner reports it */
        planned++;
        const char *text = json_string_value(json_object_get(res.dumps, "memplan"));
        cr_assert_not_null(text, "%s: no memplan dump", names[i]);
        json_t *j = json_loads(text, 0, NULL);
        cr_assert_not_null(j, "%s: the memplan dump is not JSON", names[i]);
        /* the metadata reports the plan */
        const json_t *meta_plan = json_object_get(json_object_get(res.metadata, "memory"), "plan");
        cr_assert_eq(json_integer_value(json_object_get(meta_plan, "workspace_bytes")),
                     json_integer_value(json_object_get(j, "workspace_bytes")), "%s", names[i]);
        cr_assert_not_null(json_object_get(meta_plan, "lower_bound_bytes"));
        cr_assert_not_null(json_object_get(meta_plan, "total_bytes"));
        cr_assert_not_null(json_string_value(json_object_get(meta_plan, "algorithm")));
        fake_plan f;
        if (plan_from_dump(j, &f) > 0) {
            if (with_buffers++ == 0)
                check_explain(r, target, path, names[i]);
            check_plan(&f.plan, 16); /* the chosen plan as the compile left it */
            size_t chosen = f.plan.workspace_bytes, lb = f.plan.lower_bound_bytes;
            check_all_algorithms(&f, names[i]);
            cr_assert_eq(f.plan.lower_bound_bytes, lb, "%s", names[i]);
            cr_assert_eq(f.plan.workspace_bytes, chosen, "%s: the same buffers planned again "
                         "gave %zu, the compile %zu", names[i], f.plan.workspace_bytes, chosen);
        }
        fake_free(&f);
        json_decref(j);
        tth_compile_result_free(&res);
    }
    cr_log_info("memplan conformance_set: %zu cases tried, %zu compiled, %zu with planned buffers",
                tried, planned, with_buffers);
    cr_assert_gt(planned, 100, "only %zu of %zu cases compiled", planned, tried);
    cr_assert_gt(with_buffers, 10);
    json_decref(opts);
    json_decref(target);
    tth_registry_free(r);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* A plugin's relay_to_tir PrimFunc (as cmsis-nn makes them): a context buffer allocated and only
 * passed by address to an extern call is planned like any other LOCAL buffer. */
Test(memplan, plugin_scratch_passed_by_address)
{
    tth_tir_module *m = tth_tir_module_new();
    int64_t s[1] = {64}, cs[1] = {300};
    tth_tbuffer *pi = tth_tir_buffer(m, "pi", TTH_I8, 1, s, TTH_SCOPE_PARAM);
    tth_tbuffer *po = tth_tir_buffer(m, "po", TTH_I8, 1, s, TTH_SCOPE_PARAM);
    tth_tbuffer *ctx = tth_tir_buffer(m, "ctx_buf", TTH_I8, 1, cs, TTH_SCOPE_LOCAL);
    tth_texpr *args[3] = {tth_tir_address_of(m, ctx, tth_tir_i64(m, 0)),
                          tth_tir_address_of(m, pi, tth_tir_i64(m, 0)),
                          tth_tir_address_of(m, po, tth_tir_i64(m, 0))};
    tth_tstmt *call = tth_tir_evaluate(m, tth_tir_call_extern(m, TTH_I32, "arm_kernel_s8", args, 3));
    tth_tbuffer *pa[2] = {pi, po};
    tth_diag d;
    cr_assert_not_null(tth_tir_func_add(m, "cmsis_op", pa, 2, tth_tir_allocate(m, ctx, call),
                                        "cmsis-nn", json_pack("{s:s}", "origin", "relay_to_tir"), &d),
                       "%s", d.message);
    xty_entry(m, "tth_p_run", TTH_I8, 64, (const char *const[]){"cmsis_op", "cmsis_op"});
    tth_mem_plan p;
    plan(m, 16, TTH_MEMPLAN_BEST, &p);
    cr_assert_eq(p.nitems, 2);
    int found = 0;
    for (size_t i = 0; i < p.nitems; i++)
        if (p.items[i].buf == ctx) {
            found = 1;
            cr_assert_str_eq(p.items[i].func, "cmsis_op");
            cr_assert_eq(p.items[i].size, 304);
            cr_assert_eq(p.items[i].start, 0);
            cr_assert_eq(p.items[i].end, 1, "live during both calls of its function");
        }
    cr_assert(found, "the context buffer was not planned");
    /* t (64) and ctx (304) are live together: nothing to share */
    cr_assert_eq(p.workspace_bytes, 64 + 304);
    tth_mem_plan_clear(&p);
    tth_tir_module_free(m);
}

/* Slices (tth_mem_alias, the AOT entry's concatenation in place): the parts get no place of their
 * own but their whole's offset plus their own; the whole lives from the first part's producer to
 * its last reader, so a buffer made in between cannot take its bytes. */
Test(memplan, slices_sit_inside_their_whole)
{
    tth_tir_module *m = tth_tir_module_new();
    add_op(m, "op", 100, 0);
    static const test_tbuf spec[] = {
        {"x", TTH_F32, 100, TTH_SCOPE_INPUT},     {"y", TTH_F32, 100, TTH_SCOPE_OUTPUT},
        {"a", TTH_F32, 100, TTH_SCOPE_WORKSPACE}, {"t", TTH_F32, 100, TTH_SCOPE_WORKSPACE},
        {"b", TTH_F32, 100, TTH_SCOPE_WORKSPACE}, {"whole", TTH_F32, 200, TTH_SCOPE_WORKSPACE},
    };
    tth_tbuffer *v[6];
    test_tir_buffers(m, spec, 6, v);
    tth_tbuffer *x = v[0], *y = v[1], *a = v[2], *t = v[3], *b = v[4], *w = v[5];
    /* a (the first half), t (a temporary), b (the second half), then the whole read */
    tth_tbuffer *args[][2] = {{x, a}, {x, t}, {t, b}, {w, y}};
    static const char *const fns[] = {"op", "op", "op", "op"};
    test_tir_entry(m, "tth_s_run", (tth_tbuffer *[]){x, y}, 2, calls(m, fns, args, 4));
    tth_diag d;
    tth_mem_alias al[2] = {{.part = a, .whole = w, .offset = 0}, {.part = b, .whole = w, .offset = 400}};
    tth_mem_plan p;
    cr_assert_eq(tth_memplan_run_aliased(m, 16, TTH_MEMPLAN_BEST, al, 2, &p, &d), 0, "%s", d.message);
    check_plan(&p, 16);
    cr_assert_eq(p.nitems, 2, "only the whole and the temporary are placed");
    for (size_t i = 0; i < p.nitems; i++)
        cr_assert(p.items[i].buf == w || p.items[i].buf == t);
    cr_assert_eq(a->offset, w->offset);
    cr_assert_eq(b->offset, w->offset + 400);
    /* t is made while a is live: it must not share the whole's bytes */
    cr_assert(t->offset >= w->offset + 800 || t->offset + 400 <= w->offset, "t at %lld inside the whole at %lld",
              (long long)t->offset, (long long)w->offset);
    cr_assert_eq(p.workspace_bytes, 1200);
    tth_mem_plan_clear(&p);
    tth_tir_module_free(m);
}

/* Names that lead back to the model (docs/profiling.md): every workspace tensor of the digits
 * example is labelled, in the memplan dump and in explain/memory.svg, with the ONNX tensor it is
 * and the node it is the output of; those are the model's, and the ones whose outputs stay in
 * the workspace (the last is the model's output, not planned) all appear. */
Test(memplan, tensors_are_named_by_their_onnx_nodes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/digits.onnx", getenv("TTH_SOURCE_ROOT"));
    size_t len = 0;
    uint8_t *model = test_read_file(path, &len);
    cr_assert_not_null(model, "%s", path);
    tth_registry *r = test_registry();
    tth_diag d;
    tth_diag_clear(&d);
    json_t *target = tth_target_parse(r, NULL, "c", &d);
    cr_assert_not_null(target, "%s", d.message);
    json_t *opts = json_pack("{s:s, s:b, s:b}", "dump_ir", "memplan", "explain", 1, "build_shared", 0);
    tth_compile_request req = {.model = model, .model_len = len, .model_name = "m", .target = target,
                               .options = opts, .registry = r};
    tth_compile_result res;
    cr_assert_eq(tth_compile(&req, &res, &d), 0, "%s", d.message);
    json_t *j = json_loads(json_string_value(json_object_get(res.dumps, "memplan")), 0, NULL);
    cr_assert_not_null(j);
    /* the graph's nodes: conv1 relu1 pool1 conv2 relu2 pool2 flatten fc softmax */
    static const char *const graph[] = {"conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flatten", "fc", "softmax"};
    static const char *const output[] = {"c1", "r1", "p1", "c2", "r2", "p2", "flat", "logits", "probabilities"};
    size_t i, named = 0;
    json_t *it;
    json_array_foreach(json_object_get(j, "items"), i, it) {
        if (strcmp(json_string_value(json_object_get(it, "scope")), "workspace") != 0)
            continue;
        const char *node = json_string_value(json_object_get(it, "node"));
        cr_assert_not_null(node, "workspace tensor %s has no ONNX node", json_string_value(json_object_get(it, "buffer")));
        const char *tensor = json_string_value(json_object_get(it, "tensor"));
        int known = 0;
        for (size_t k = 0; k < sizeof graph / sizeof graph[0]; k++)
            if (strcmp(node, graph[k]) == 0) {
                known = 1;
                cr_assert(tensor && strcmp(tensor, output[k]) == 0, "node %s's tensor is %s, not %s", node,
                          tensor ? tensor : "(none)", output[k]);
            }
        cr_assert(known, "node '%s' is not a node of the model", node);
        cr_assert_not_null(json_string_value(json_object_get(it, "function")));
        char want[128];
        snprintf(want, sizeof want, "ONNX tensor %s, the output of ONNX node %s (", tensor, node);
        cr_assert_not_null(memmem(res.artifact, res.artifact_len, want, strlen(want)), "memory.svg lacks '%s'", want);
        named++;
    }
    /* relu1's and pool1's outputs at least (the convolution's ReLU is fused: its tensor is relu1's) */
    cr_assert_geq(named, 2, "only %zu named workspace tensors", named);
    cr_assert_not_null(memmem(res.artifact, res.artifact_len, "ONNX tensor p1, the output of ONNX node pool1", 45));
    json_decref(j);
    tth_compile_result_free(&res);
    json_decref(opts);
    json_decref(target);
    free(model);
    tth_registry_free(r);
}
