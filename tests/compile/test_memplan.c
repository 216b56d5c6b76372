/* Memory planning (daemon/compile/memplan.c): no two buffers live at the same time overlap,
 * offsets and sizes respect the alignment, space is reused, and the plan's numbers agree. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "compile_internal.h"

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

/* input → a → b → c → d → output through a chain of ops, plus a long-lived `keep` buffer
 * written first and read last (it must not share space with anything). */
static tth_tir_module *chain(void)
{
    tth_tir_module *m = tth_tir_module_new();
    add_op(m, "op_small", 10, 0);
    add_op(m, "op_big", 1000, 0);
    add_op(m, "op_scratch", 1000, 300);
    int64_t s10[1] = {10}, s1000[1] = {1000};
    tth_tbuffer *x = tth_tir_buffer(m, "x", TTH_F32, 1, s1000, TTH_SCOPE_INPUT);
    tth_tbuffer *y = tth_tir_buffer(m, "y", TTH_F32, 1, s1000, TTH_SCOPE_OUTPUT);
    tth_tbuffer *a = tth_tir_buffer(m, "a", TTH_F32, 1, s1000, TTH_SCOPE_WORKSPACE);
    tth_tbuffer *b = tth_tir_buffer(m, "b", TTH_F32, 1, s1000, TTH_SCOPE_WORKSPACE);
    tth_tbuffer *c = tth_tir_buffer(m, "c", TTH_F32, 1, s1000, TTH_SCOPE_WORKSPACE);
    tth_tbuffer *dd = tth_tir_buffer(m, "d", TTH_F32, 1, s1000, TTH_SCOPE_WORKSPACE);
    tth_tbuffer *k = tth_tir_buffer(m, "keep", TTH_F32, 1, s10, TTH_SCOPE_WORKSPACE);
    tth_tbuffer *k2 = tth_tir_buffer(m, "keep2", TTH_F32, 1, s10, TTH_SCOPE_WORKSPACE);
    tth_tstmt *body = NULL;
    tth_tbuffer *c0[2] = {x, k}, *c1[2] = {x, a}, *c2[2] = {a, b}, *c3[2] = {b, c},
                *c4[2] = {c, dd}, *c5[2] = {dd, y}, *c6[2] = {k, k2};
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "op_small", c0, 2)); /* 0: x→keep (x is 1000, reads 10) */
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "op_big", c1, 2));   /* 1 */
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "op_scratch", c2, 2)); /* 2 */
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "op_big", c3, 2));   /* 3 */
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "op_big", c4, 2));   /* 4 */
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "op_big", c5, 2));   /* 5 */
    tth_tir_seq_append(m, &body, tth_tir_call_func(m, "op_small", c6, 2)); /* 6 */
    tth_tbuffer *ep[3] = {x, y, k2};
    k2->scope = TTH_SCOPE_OUTPUT;
    tth_diag d;
    cr_assert_not_null(tth_tir_func_add(m, "tth_chain_run", ep, 3, body, "c", NULL, &d), "%s",
                       d.message);
    m->entry = "tth_chain_run";
    return m;
}

static void check_plan(const tth_mem_plan *p, uint32_t align)
{
    cr_assert_gt(p->nitems, 0);
    for (size_t i = 0; i < p->nitems; i++) {
        const tth_mem_item *a = &p->items[i];
        cr_assert_geq(a->buf->offset, 0, "%s has no offset", a->buf->name);
        cr_assert_eq(a->buf->offset % align, 0, "%s at %lld is not %u-aligned", a->buf->name,
                     (long long)a->buf->offset, align);
        cr_assert_eq(a->size % align, 0);
        cr_assert_geq(a->size, tth_tbuffer_nbytes(a->buf));
        cr_assert_leq((size_t)a->buf->offset + a->size, p->workspace_bytes);
        for (size_t j = i + 1; j < p->nitems; j++) {
            const tth_mem_item *b = &p->items[j];
            int live_together = a->start <= b->end && b->start <= a->end;
            int overlap = a->buf->offset < b->buf->offset + (int64_t)b->size &&
                          b->buf->offset < a->buf->offset + (int64_t)a->size;
            cr_assert(!(live_together && overlap), "%s [%lld,%lld] and %s [%lld,%lld] overlap",
                      a->buf->name, (long long)a->start, (long long)a->end, b->buf->name,
                      (long long)b->start, (long long)b->end);
        }
    }
    cr_assert_geq(p->workspace_bytes, p->lower_bound_bytes);
    cr_assert_leq(p->workspace_bytes, p->total_bytes);
}

Test(memplan, no_live_overlap_and_reuse)
{
    tth_tir_module *m = chain();
    tth_mem_plan p;
    tth_diag d;
    cr_assert_eq(tth_memplan_run(m, 16, TTH_MEMPLAN_GREEDY_BY_SIZE, &p, &d), 0, "%s", d.message);
    check_plan(&p, 16);
    /* a, b, c, d, keep, scratch: 4 x 4000 + 48 (keep, rounded) + 1200 */
    cr_assert_eq(p.nitems, 6);
    cr_assert_eq(p.total_bytes, 4 * 4000 + 48 + 1200);
    /* at most two 4000-byte buffers are live at once, plus keep, plus scratch during call 2 */
    cr_assert_eq(p.lower_bound_bytes, 2 * 4000 + 48 + 1200);
    cr_assert_lt(p.workspace_bytes, p.total_bytes, "no space was reused");
    cr_assert_leq(p.workspace_bytes, 2 * 4000 + 48 + 1200 + 4000);
    /* keep lives from call 0 to call 6: never shared */
    for (size_t i = 0; i < p.nitems; i++)
        if (strcmp(p.items[i].buf->name, "keep") == 0) {
            cr_assert_eq(p.items[i].start, 0);
            cr_assert_eq(p.items[i].end, 6);
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
    cr_assert_eq(tth_memplan_run(m, 256, TTH_MEMPLAN_GREEDY_BY_SIZE, &p, &d), 0, "%s", d.message);
    check_plan(&p, 256);
    json_t *j = tth_mem_plan_summary(&p);
    cr_assert_eq(json_integer_value(json_object_get(j, "alignment")), 256);
    cr_assert_str_eq(json_string_value(json_object_get(j, "algorithm")), "greedy-by-size");
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
