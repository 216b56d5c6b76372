/* TIR: folding and simplification, statements, seq_append, verifier, printer, JSON, subset view. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tth/tir.h>

static tth_tir_module *M;

static void setup(void)
{
    M = tth_tir_module_new();
}

static void teardown(void)
{
    tth_tir_module_free(M);
}

TestSuite(tir, .init = setup, .fini = teardown);

static tth_texpr *I(int64_t v)
{
    return tth_tir_i64(M, v);
}

static int64_t folded(tth_texpr *e)
{
    cr_assert_not_null(e);
    cr_assert_eq(e->kind, TTH_TEXPR_INT, "not folded (kind %d)", e->kind);
    return e->u.i;
}

Test(tir, integer_constant_folding)
{
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_ADD, I(2), I(3))), 5);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_MUL, I(6), I(7))), 42);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_DIV, I(-7), I(2))), -3);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_MOD, I(-7), I(2))), -1);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_FLOORDIV, I(-7), I(2))), -4);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_FLOORMOD, I(-7), I(2))), 1);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_FLOORMOD, I(7), I(-2))), -1);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_MIN, I(-1), I(4))), -1);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_MAX, I(-1), I(4))), 4);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_SHL, I(1), I(10))), 1024);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_BITAND, I(12), I(10))), 8);
    tth_texpr *lt = tth_tir_bin(M, TTH_TBIN_LT, I(1), I(2));
    cr_assert_eq(folded(lt), 1);
    cr_assert_eq(lt->dtype, TTH_BOOL);
    /* int8 wraps like the dtype */
    tth_texpr *w = tth_tir_bin(M, TTH_TBIN_ADD, tth_tir_int(M, TTH_I8, 100), tth_tir_int(M, TTH_I8, 100));
    cr_assert_eq(folded(w), -56);
    cr_assert_eq(w->dtype, TTH_I8);
    cr_assert_eq(tth_tir_int(M, TTH_U8, 300)->u.i, 44);
    /* unsigned comparison */
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_LT, tth_tir_int(M, TTH_U64, -1), tth_tir_int(M, TTH_U64, 1))), 0);
    /* division by zero is left for run time */
    tth_texpr *dz = tth_tir_bin(M, TTH_TBIN_DIV, I(1), I(0));
    cr_assert_eq(dz->kind, TTH_TEXPR_BINARY);
    /* negation and not */
    cr_assert_eq(folded(tth_tir_un(M, TTH_TUN_NEG, I(5))), -5);
    tth_texpr *nt = tth_tir_un(M, TTH_TUN_NOT, I(0));
    cr_assert_eq(folded(nt), 1);
    cr_assert_eq(nt->dtype, TTH_BOOL);
}

Test(tir, float_folding_and_casts)
{
    tth_texpr *f = tth_tir_bin(M, TTH_TBIN_MUL, tth_tir_float(M, TTH_F32, 1.5), tth_tir_float(M, TTH_F32, 2));
    cr_assert_eq(f->kind, TTH_TEXPR_FLOAT);
    cr_assert_eq(f->u.f, 3.0);
    cr_assert_eq(tth_tir_float(M, TTH_F32, 0.1)->u.f, (double)0.1f); /* rounded to float32 */
    tth_texpr *cmp = tth_tir_bin(M, TTH_TBIN_GE, tth_tir_float(M, TTH_F64, 2), tth_tir_float(M, TTH_F64, 3));
    cr_assert_eq(cmp->kind, TTH_TEXPR_INT);
    cr_assert_eq(cmp->u.i, 0);
    cr_assert_eq(cmp->dtype, TTH_BOOL);
    /* casts of immediates */
    tth_texpr *c1 = tth_tir_cast(M, TTH_I32, tth_tir_float(M, TTH_F32, -3.7));
    cr_assert_eq(folded(c1), -3);
    cr_assert_eq(c1->dtype, TTH_I32);
    cr_assert_eq(folded(tth_tir_cast(M, TTH_U8, I(300))), 44);
    tth_texpr *c2 = tth_tir_cast(M, TTH_F32, I(7));
    cr_assert_eq(c2->kind, TTH_TEXPR_FLOAT);
    cr_assert_eq(c2->u.f, 7.0);
    /* out of range float -> int is not folded */
    cr_assert_eq(tth_tir_cast(M, TTH_I8, tth_tir_float(M, TTH_F32, 1000))->kind, TTH_TEXPR_CAST);
    /* a cast to the same dtype is the value */
    tth_tvar *v = tth_tir_var(M, "v", TTH_F32);
    tth_texpr *rv = tth_tir_ref(M, v);
    cr_assert_eq(tth_tir_cast(M, TTH_F32, rv), rv);
    cr_assert_eq(tth_tir_cast(M, TTH_F64, rv)->kind, TTH_TEXPR_CAST);
}

Test(tir, integer_identities_and_float_non_identities)
{
    tth_tvar *i = tth_tir_var(M, "i", TTH_I64);
    tth_texpr *x = tth_tir_ref(M, i);
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_ADD, x, I(0)), x);
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_ADD, I(0), x), x);
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_SUB, x, I(0)), x);
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_MUL, x, I(1)), x);
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_MUL, I(1), x), x);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_MUL, x, I(0))), 0);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_MUL, I(0), x)), 0);
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_FLOORDIV, x, I(1)), x);
    cr_assert_eq(folded(tth_tir_bin(M, TTH_TBIN_FLOORMOD, x, I(1))), 0);
    /* index arithmetic collapses: ((i * 1) + 0) * 4 + 0 */
    tth_texpr *idx = tth_tir_bin(M, TTH_TBIN_ADD,
                                 tth_tir_bin(M, TTH_TBIN_MUL, tth_tir_bin(M, TTH_TBIN_ADD, tth_tir_bin(M, TTH_TBIN_MUL, x, I(1)), I(0)), I(4)),
                                 I(0));
    cr_assert_eq(idx->kind, TTH_TEXPR_BINARY);
    cr_assert_eq(idx->u.bin.op, TTH_TBIN_MUL);
    cr_assert_eq(idx->u.bin.a, x);
    /* floats keep x + 0.0 (it differs for -0.0) */
    tth_tvar *f = tth_tir_var(M, "f", TTH_F32);
    tth_texpr *fx = tth_tir_ref(M, f);
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_ADD, fx, tth_tir_float(M, TTH_F32, 0))->kind, TTH_TEXPR_BINARY);
    /* mixed dtypes are not simplified (the verifier reports them) */
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_ADD, x, tth_tir_int(M, TTH_I32, 0))->kind, TTH_TEXPR_BINARY);
    /* select on a constant condition */
    tth_texpr *a = I(1), *b = I(2);
    cr_assert_eq(tth_tir_select(M, tth_tir_int(M, TTH_BOOL, 1), a, b), a);
    cr_assert_eq(tth_tir_select(M, tth_tir_int(M, TTH_BOOL, 0), a, b), b);
    cr_assert_eq(tth_tir_select(M, tth_tir_bin(M, TTH_TBIN_LT, x, I(3)), a, b)->kind, TTH_TEXPR_SELECT);
}

Test(tir, seq_append_grows_and_wraps)
{
    int64_t shape[1] = {200};
    tth_tbuffer *o = tth_tir_buffer(M, "o", TTH_I64, 1, shape, TTH_SCOPE_PARAM);
    tth_tstmt *seq = NULL;
    for (int k = 0; k < 200; k++)
        cr_assert_eq(tth_tir_seq_append(M, &seq, tth_tir_store(M, o, I(k), I(k * 2))), 0);
    cr_assert_eq(seq->kind, TTH_TSTMT_SEQ);
    cr_assert_eq(seq->u.seq.n, 200);
    for (int k = 0; k < 200; k++)
        cr_assert_eq(seq->u.seq.stmts[k]->u.store.value->u.i, k * 2);
    /* appending to a non-SEQ statement wraps it */
    tth_tstmt *one = tth_tir_store(M, o, I(0), I(1));
    tth_tstmt *s = one;
    cr_assert_eq(tth_tir_seq_append(M, &s, tth_tir_store(M, o, I(1), I(2))), 0);
    cr_assert_eq(s->kind, TTH_TSTMT_SEQ);
    cr_assert_eq(s->u.seq.n, 2);
    cr_assert_eq(s->u.seq.stmts[0], one);
    cr_assert_eq(tth_tir_seq_append(M, &s, NULL), TTH_EINVAL);
    tth_tstmt *fixed[2] = {one, one};
    tth_tstmt *q = tth_tir_seq(M, fixed, 2);
    cr_assert_eq(tth_tir_seq_append(M, &q, one), 0);
    cr_assert_eq(q->u.seq.n, 3);
    /* An empty SEQ, grown past several powers of two, with statements removed in place. */
    tth_tstmt *e = tth_tir_seq(M, NULL, 0);
    tth_tstmt *st[40];
    for (int k = 0; k < 40; k++) {
        st[k] = tth_tir_store(M, o, I(k), I(k));
        cr_assert_eq(tth_tir_seq_append(M, &e, st[k]), 0);
        if (k == 20)
            e->u.seq.n -= 5; /* a pass dropping the last five */
    }
    cr_assert_eq(e->u.seq.n, 35);
    for (int k = 0; k < 16; k++)
        cr_assert_eq(e->u.seq.stmts[k], st[k]);
    cr_assert_eq(e->u.seq.stmts[16], st[21]);
    cr_assert_eq(e->u.seq.stmts[34], st[39]);
}

/* out[i] = exp(x[i]) + c0[i % 4], with an allocated scratch, a let and an if. */
static tth_prim_func *build_func(tth_tir_module *m, const char *name, const char *kind, tth_tensor *c)
{
    int64_t shape[2] = {2, 4};
    tth_tbuffer *x = tth_tir_buffer(m, "x", TTH_F32, 2, shape, TTH_SCOPE_PARAM);
    tth_tbuffer *out = tth_tir_buffer(m, "out", TTH_F32, 2, shape, TTH_SCOPE_PARAM);
    tth_tbuffer *cb = tth_tir_const_buffer(m, "c0", c);
    int64_t sshape[1] = {8};
    tth_tbuffer *tmp = tth_tir_buffer(m, "tmp", TTH_F32, 1, sshape, TTH_SCOPE_LOCAL);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64), *k = tth_tir_var(m, "k", TTH_I64);
    tth_texpr *iv = tth_tir_ref(m, i);
    tth_texpr *e = tth_tir_intrin(m, TTH_TINTRIN_EXP, tth_tir_load(m, x, iv), NULL);
    tth_tstmt *st = tth_tir_store(m, tmp, iv, e);
    tth_tstmt *loop1 = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, 8), TTH_LOOP_VECTORIZED, st);
    tth_texpr *kv = tth_tir_ref(m, k);
    tth_texpr *sum = tth_tir_bin(m, TTH_TBIN_ADD, tth_tir_load(m, tmp, iv),
                                 tth_tir_load(m, cb, tth_tir_bin(m, TTH_TBIN_FLOORMOD, iv, tth_tir_i64(m, 4))));
    tth_tstmt *guarded = tth_tir_if(m, tth_tir_bin(m, TTH_TBIN_LT, kv, tth_tir_i64(m, 8)),
                                    tth_tir_store(m, out, kv, sum), tth_tir_store(m, out, kv, tth_tir_float(m, TTH_F32, 0)));
    tth_tstmt *let = tth_tir_let(m, k, tth_tir_bin(m, TTH_TBIN_ADD, iv, tth_tir_i64(m, 0)), guarded);
    tth_tstmt *loop2 = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, 8), TTH_LOOP_PARALLEL, let);
    tth_tstmt *body = NULL;
    tth_tir_seq_append(m, &body, loop1);
    tth_tir_seq_append(m, &body, loop2);
    tth_tstmt *alloc = tth_tir_allocate(m, tmp, body);
    tth_tbuffer *params[2] = {x, out};
    tth_diag d;
    tth_prim_func *f = tth_tir_func_add(m, name, params, 2, alloc, kind, json_pack("{s:s}", "op", "exp_add"), &d);
    cr_assert_not_null(f, "%s", d.message);
    return f;
}

static tth_tensor *const_tensor(void)
{
    tth_ttype t = {TTH_F32, 1, {4}};
    float v[4] = {1, 2, 3, 4};
    return tth_tensor_new(&t, v);
}

Test(tir, printer_golden_text)
{
    tth_tensor *c = const_tensor();
    tth_prim_func *f = build_func(M, "fused_exp_add", "c", c);
    tth_diag d;
    cr_assert_eq(tth_tir_verify(M, &d), 0, "%s", d.message);
    char *text = tth_tir_print_func(f);
    char expect[2048];
    snprintf(expect, sizeof expect,
             "// prim_func fused_exp_add, target \"c\", attrs {\"op\": \"exp_add\"}\n"
             "// const float32 c0[4] #%016" PRIx64 "\n"
             "void fused_exp_add(float32 x[2, 4], float32 out[2, 4]) {\n"
             "  allocate float32 tmp[8] /* 32 bytes, local, align 16 */ {\n"
             "    vectorized for (int64 i = 0; i < 8; i++) {\n"
             "      tmp[i] = exp(x[i]);\n"
             "    }\n"
             "    parallel for (int64 i = 0; i < 8; i++) {\n"
             "      let int64 k = i;\n"
             "      if ((k < 8)) {\n"
             "        out[k] = (tmp[i] + c0[floormod(i, 4)]);\n"
             "      } else {\n"
             "        out[k] = 0.0f;\n"
             "      }\n"
             "    }\n"
             "  }\n"
             "}\n",
             tth_tensor_hash(c));
    cr_assert_str_eq(text, expect);
    free(text);
    tth_tensor_unref(c);
}

Test(tir, printer_entry_calls_and_immediates)
{
    int64_t shape[1] = {4};
    tth_tbuffer *in = tth_tir_buffer(M, "input0", TTH_I8, 1, shape, TTH_SCOPE_INPUT);
    tth_tbuffer *out = tth_tir_buffer(M, "output0", TTH_I8, 1, shape, TTH_SCOPE_OUTPUT);
    tth_tbuffer *ws = tth_tir_buffer(M, "sid_1", TTH_I8, 1, shape, TTH_SCOPE_WORKSPACE);
    ws->offset = 64;
    tth_tbuffer *p0 = tth_tir_buffer(M, "a", TTH_I8, 1, shape, TTH_SCOPE_PARAM);
    tth_tbuffer *p1 = tth_tir_buffer(M, "b", TTH_I8, 1, shape, TTH_SCOPE_PARAM);
    tth_texpr *args[3] = {tth_tir_address_of(M, p0, tth_tir_i64(M, 0)), tth_tir_address_of(M, p1, tth_tir_i64(M, 0)),
                          tth_tir_int(M, TTH_I32, 4)};
    tth_tstmt *call = tth_tir_evaluate(M, tth_tir_call_extern(M, TTH_I32, "arm_copy_s8", args, 3));
    tth_tbuffer *pp[2] = {p0, p1};
    tth_diag d;
    cr_assert_not_null(tth_tir_func_add(M, "op0", pp, 2, call, "cmsis-nn", NULL, &d));
    tth_tstmt *body = NULL;
    tth_tbuffer *a1[2] = {in, ws}, *a2[2] = {ws, out};
    tth_tir_seq_append(M, &body, tth_tir_call_func(M, "op0", a1, 2));
    tth_tir_seq_append(M, &body, tth_tir_call_func(M, "op0", a2, 2));
    tth_tbuffer *ep[2] = {in, out};
    cr_assert_not_null(tth_tir_func_add(M, "tvmgen_default_run", ep, 2, body, "c", NULL, &d));
    M->entry = "tvmgen_default_run";
    cr_assert_eq(tth_tir_verify(M, &d), 0, "%s", d.message);
    char *text = tth_tir_print(M);
    cr_assert_str_eq(text, "// prim_func op0, target \"cmsis-nn\"\n"
                           "void op0(int8 a[4], int8 b[4]) {\n"
                           "  arm_copy_s8(&a[0], &b[0], (int32)4);\n"
                           "}\n"
                           "\n"
                           "// prim_func tvmgen_default_run (entry), target \"c\"\n"
                           "// workspace int8 sid_1[4] @64\n"
                           "void tvmgen_default_run(input int8 input0[4], output int8 output0[4]) {\n"
                           "  op0(input0, sid_1);\n"
                           "  op0(sid_1, output0);\n"
                           "}\n");
    free(text);

    /* Immediates of every flavour. */
    tth_tvar *v = tth_tir_var(M, "v", TTH_F64);
    tth_tbuffer *fb = tth_tir_buffer(M, "fb", TTH_F64, 1, shape, TTH_SCOPE_PARAM);
    tth_texpr *e = tth_tir_select(M, tth_tir_un(M, TTH_TUN_NOT, tth_tir_bin(M, TTH_TBIN_EQ, tth_tir_ref(M, v), tth_tir_float(M, TTH_F64, 0.25))),
                                  tth_tir_un(M, TTH_TUN_NEG, tth_tir_ref(M, v)),
                                  tth_tir_intrin(M, TTH_TINTRIN_POW, tth_tir_ref(M, v), tth_tir_float(M, TTH_F64, 2)));
    tth_tstmt *st = tth_tir_let(M, v, tth_tir_cast(M, TTH_F64, tth_tir_load(M, fb, tth_tir_i64(M, 1))),
                                tth_tir_store(M, fb, tth_tir_i64(M, 0), e));
    tth_prim_func *g = tth_tir_func_add(M, "g", &fb, 1, st, "c", NULL, &d);
    cr_assert_eq(tth_tir_verify(M, &d), 0, "%s", d.message);
    text = tth_tir_print_func(g);
    cr_assert_str_eq(text, "// prim_func g, target \"c\"\n"
                           "void g(float64 fb[4]) {\n"
                           "  let float64 v = fb[1];\n"
                           "  fb[0] = ((!(v == 0.25)) ? (-v) : pow(v, 2.0));\n"
                           "}\n");
    free(text);
}

Test(tir, verify_failures)
{
    tth_diag d;
    int64_t shape[1] = {4};
    tth_tbuffer *a = tth_tir_buffer(M, "a", TTH_F32, 1, shape, TTH_SCOPE_PARAM);
    tth_tbuffer *stray = tth_tir_buffer(M, "stray", TTH_F32, 1, shape, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(M, "i", TTH_I64), *j = tth_tir_var(M, "j", TTH_I64);

    struct {
        const char *name;
        tth_tstmt *body;
        const char *msg;
    } cases[] = {
        {"unbound", tth_tir_store(M, a, tth_tir_ref(M, i), tth_tir_float(M, TTH_F32, 1)),
         "variable i is used outside the loop or let that binds it"},
        {"undeclared", tth_tir_store(M, stray, tth_tir_i64(M, 0), tth_tir_float(M, TTH_F32, 1)),
         "buffer stray (param) is neither a parameter of undeclared nor allocated around its use"},
        {"mixed", tth_tir_store(M, a, tth_tir_i64(M, 0), tth_tir_bin(M, TTH_TBIN_ADD, tth_tir_load(M, a, tth_tir_i64(M, 1)), tth_tir_float(M, TTH_F64, 1))),
         "operands of '+' differ in dtype: float32 and float64"},
        {"oob", tth_tir_store(M, a, tth_tir_i64(M, 4), tth_tir_float(M, TTH_F32, 1)),
         "constant index 4 is out of bounds for a (4 elements)"},
        {"badstore", tth_tir_store(M, a, tth_tir_i64(M, 0), tth_tir_i64(M, 1)), "store of a int64 value into a (float32)"},
        {"nofunc", tth_tir_call_func(M, "missing", &a, 1), "call of missing, which is not a PrimFunc of the module"},
        {"rebound", tth_tir_for(M, j, tth_tir_i64(M, 0), tth_tir_i64(M, 2), TTH_LOOP_SERIAL,
                                tth_tir_for(M, j, tth_tir_i64(M, 0), tth_tir_i64(M, 2), TTH_LOOP_SERIAL,
                                            tth_tir_evaluate(M, tth_tir_ref(M, j)))),
         "variable j is bound again inside its own scope"},
        {"floatidx", tth_tir_store(M, a, tth_tir_float(M, TTH_F32, 0), tth_tir_float(M, TTH_F32, 1)),
         "index into a is float32, not an integer"},
        {"badname", tth_tir_store(M, tth_tir_buffer(M, "bad name", TTH_F32, 1, shape, TTH_SCOPE_WORKSPACE), tth_tir_i64(M, 0), tth_tir_float(M, TTH_F32, 1)),
         "buffer name 'bad name' is not a C identifier"},
        {"badextern", tth_tir_evaluate(M, tth_tir_call_extern(M, TTH_I32, "not-c", NULL, 0)),
         "call_extern name 'not-c' is not a C identifier"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tth_tir_module *m = tth_tir_module_new();
        /* Reuse the nodes of M: verification only reads them. */
        tth_prim_func *f = tth_tir_func_add(m, cases[k].name, &a, 1, cases[k].body, "c", NULL, &d);
        cr_assert_not_null(f, "%s", d.message);
        tth_diag_clear(&d);
        cr_expect_neq(tth_tir_verify(m, &d), 0, "case %s passed", cases[k].name);
        cr_expect_str_eq(d.message, cases[k].msg, "case %s", cases[k].name);
        char loc[64];
        snprintf(loc, sizeof loc, "prim_func %s", cases[k].name);
        cr_expect_str_eq(d.location, loc);
        tth_tir_module_free(m);
    }

    /* Arity of CALL_FUNC and bad names. */
    tth_tir_func_add(M, "one", &a, 1, tth_tir_store(M, a, tth_tir_i64(M, 0), tth_tir_float(M, TTH_F32, 0)), "c", NULL, &d);
    tth_tbuffer *two[2] = {a, a};
    tth_tir_func_add(M, "caller", &a, 1, tth_tir_call_func(M, "one", two, 2), "c", NULL, &d);
    cr_assert_eq(tth_tir_verify(M, &d), TTH_ETYPE);
    cr_assert_str_eq(d.message, "one takes 1 buffers, the call passes 2");
    cr_assert_null(tth_tir_func_add(M, "9lives", &a, 1, tth_tir_evaluate(M, tth_tir_i64(M, 0)), "c", NULL, &d));
    cr_assert_str_eq(d.message, "PrimFunc name '9lives' is not a C identifier");
    cr_assert_null(tth_tir_func_add(M, "one", &a, 1, tth_tir_evaluate(M, tth_tir_i64(M, 0)), "c", NULL, &d));
    cr_assert_eq(d.code, TTH_EDUPLICATE);
}

Test(tir, verify_const_buffer_is_read_only)
{
    tth_diag d;
    tth_tensor *c = const_tensor();
    tth_tbuffer *cb = tth_tir_const_buffer(M, "w", c);
    cr_assert_eq(cb->scope, TTH_SCOPE_CONST);
    cr_assert_eq(cb->data, c);
    cr_assert_eq(c->refcount, 2); /* the module took a reference */
    int64_t shape[1] = {4};
    tth_tbuffer *a = tth_tir_buffer(M, "a", TTH_F32, 1, shape, TTH_SCOPE_PARAM);
    tth_tir_func_add(M, "f", &a, 1, tth_tir_store(M, cb, tth_tir_i64(M, 0), tth_tir_float(M, TTH_F32, 0)), "c", NULL, &d);
    cr_assert_eq(tth_tir_verify(M, &d), TTH_EINVAL);
    cr_assert_str_eq(d.message, "store into the constant buffer w");
    tth_tir_module_free(M);
    M = NULL;
    cr_assert_eq(c->refcount, 1);
    tth_tensor_unref(c);
}

Test(tir, buffers_and_vars)
{
    int64_t shape[3] = {2, 3, 4};
    tth_tbuffer *b = tth_tir_buffer(M, "b", TTH_I16, 3, shape, TTH_SCOPE_WORKSPACE);
    cr_assert_eq(tth_tbuffer_numel(b), 24);
    cr_assert_eq(tth_tbuffer_nbytes(b), 48);
    cr_assert_eq(b->align, 16);
    cr_assert_eq(b->offset, -1);
    tth_tbuffer *b2 = tth_tir_buffer(M, "b2", TTH_I16, 0, NULL, TTH_SCOPE_LOCAL);
    cr_assert_neq(b->id, b2->id);
    cr_assert_eq(tth_tbuffer_numel(b2), 1);
    int64_t neg[1] = {-1};
    cr_assert_null(tth_tir_buffer(M, "n", TTH_F32, 1, neg, TTH_SCOPE_LOCAL));
    cr_assert_null(tth_tir_buffer(M, "n", TTH_DTYPE_INVALID, 1, shape, TTH_SCOPE_LOCAL));
    tth_tvar *v = tth_tir_var(M, "v", TTH_I32), *w = tth_tir_var(M, "w", TTH_I32);
    cr_assert_str_eq(v->name, "v");
    cr_assert_neq(v->id, w->id);
    tth_texpr *ld = tth_tir_load(M, b, tth_tir_ref(M, tth_tir_var(M, "i", TTH_I64)));
    cr_assert_eq(ld->dtype, TTH_I16);
    cr_assert_eq(tth_tir_bin(M, TTH_TBIN_LT, ld, ld)->dtype, TTH_BOOL);
}

Test(tir, json_form)
{
    tth_tensor *c = const_tensor();
    build_func(M, "fused", "c", c);
    M->entry = "fused";
    json_t *j = tth_tir_to_json(M);
    cr_assert_not_null(j);
    cr_assert_str_eq(json_string_value(json_object_get(j, "entry")), "fused");
    json_t *f = json_array_get(json_object_get(j, "functions"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(f, "name")), "fused");
    cr_assert_str_eq(json_string_value(json_object_get(f, "target_kind")), "c");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(f, "attrs"), "op")), "exp_add");
    json_t *body = json_object_get(f, "body");
    cr_assert_str_eq(json_string_value(json_object_get(body, "k")), "allocate");
    json_t *seq = json_object_get(body, "body");
    cr_assert_str_eq(json_string_value(json_object_get(seq, "k")), "seq");
    json_t *loop = json_array_get(json_object_get(seq, "stmts"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(loop, "loop")), "vectorized");
    json_t *bufs = json_object_get(j, "buffers");
    cr_assert_eq(json_array_size(bufs), 4); /* x, out, tmp, c0 */
    int saw_const = 0;
    for (size_t k = 0; k < json_array_size(bufs); k++) {
        json_t *b = json_array_get(bufs, k);
        if (strcmp(json_string_value(json_object_get(b, "scope")), "const") == 0) {
            char hash[17];
            snprintf(hash, sizeof hash, "%016" PRIx64, tth_tensor_hash(c));
            cr_assert_str_eq(json_string_value(json_object_get(b, "hash")), hash);
            cr_assert_null(json_object_get(b, "data")); /* by reference only */
            saw_const = 1;
        }
    }
    cr_assert(saw_const);
    cr_assert_eq(json_array_size(json_object_get(j, "vars")), 2); /* i, k */
    /* Deterministic. */
    json_t *j2 = tth_tir_to_json(M);
    cr_assert(json_equal(j, j2));
    json_decref(j2);
    json_decref(j);
    tth_tensor_unref(c);
}

Test(tir, subset_view_shares_nodes)
{
    tth_tensor *c = const_tensor();
    tth_prim_func *f1 = build_func(M, "op_c", "c", c);
    tth_prim_func *f2 = build_func(M, "op_nn", "cmsis-nn", c);
    tth_prim_func *f3 = build_func(M, "op_c2", "c", c);
    M->entry = "op_c2";
    tth_tir_module *v = tth_tir_module_subset(M, "c");
    cr_assert_eq(v->nfuncs, 2);
    cr_assert_eq(v->funcs[0], f1);
    cr_assert_eq(v->funcs[1], f3);
    cr_assert_str_eq(v->entry, "op_c2");
    tth_diag d;
    cr_assert_eq(tth_tir_verify(v, &d), 0, "%s", d.message);
    /* Builders work on a view; what they make belongs to the view. */
    int64_t shape[1] = {1};
    tth_tbuffer *p = tth_tir_buffer(v, "p", TTH_F32, 1, shape, TTH_SCOPE_PARAM);
    cr_assert_not_null(tth_tir_func_add(v, "extra", &p, 1, tth_tir_store(v, p, tth_tir_i64(v, 0), tth_tir_float(v, TTH_F32, 1)), "c", NULL, &d));
    cr_assert_eq(v->nfuncs, 3);
    cr_assert_eq(M->nfuncs, 3);
    tth_tir_module *v2 = tth_tir_module_subset(M, "cmsis-nn");
    cr_assert_eq(v2->nfuncs, 1);
    cr_assert_eq(v2->funcs[0], f2);
    cr_assert_null(v2->entry);
    tth_tir_module *v3 = tth_tir_module_subset(M, "llvm");
    cr_assert_eq(v3->nfuncs, 0);
    tth_tir_module_free(v);
    tth_tir_module_free(v2);
    tth_tir_module_free(v3);
    /* The parent is intact after the views are gone. */
    char *text = tth_tir_print(M);
    cr_assert_not_null(strstr(text, "void op_nn("));
    free(text);
    cr_assert_eq(tth_tir_verify(M, &d), 0, "%s", d.message);
    tth_tensor_unref(c);
}

/* Functions with the same code (tth_tir_func_same_code): equal up to names, with the constants
 * and workspace-planned LOCAL buffers as data that may differ, listed as pairs in first-use order;
 * anything else that differs (a loop kind, the target kind, a small constant's bytes when
 * const_min leaves it out of the data, a LOCAL planned in one and on the stack in the other) is
 * different code, and the hash agrees with the comparison on these cases. */
Test(tir, same_code_up_to_data)
{
    tth_ttype t = {TTH_F32, 1, {4}};
    float v2[4] = {5, 6, 7, 8};
    tth_tensor *c1 = const_tensor(), *c2 = tth_tensor_new(&t, v2);
    tth_prim_func *f1 = build_func(M, "f1", "c", c1), *f2 = build_func(M, "f2", "c", c2);
    tth_prim_func *f3 = build_func(M, "f3", "llvm", c1), *f4 = build_func(M, "f4", "c", c1);
    tth_tensor_unref(c1);
    tth_tensor_unref(c2);
    const tth_tbuffer *pairs[8];
    size_t np = 99;
    cr_assert_eq(tth_tir_func_same_code(f1, f2, 0, pairs, 4, &np), 1);
    cr_assert_eq(np, 1);
    cr_assert_str_eq(pairs[0]->name, "c0");
    cr_assert_neq(pairs[0], pairs[1]);
    cr_assert_eq(((const float *)pairs[1]->data->data)[0], 5.0f, "the second of a pair is f2's constant");
    cr_assert_eq(tth_tir_func_code_hash(f1, 0), tth_tir_func_code_hash(f2, 0));
    /* a 16-byte constant below const_min must hold the same bytes */
    cr_assert_eq(tth_tir_func_same_code(f1, f2, 1024, pairs, 4, &np), 0);
    cr_assert_eq(tth_tir_func_same_code(f1, f4, 1024, pairs, 4, &np), 1);
    cr_assert_eq(np, 0);
    cr_assert_neq(tth_tir_func_code_hash(f1, 1024), tth_tir_func_code_hash(f2, 1024));
    /* another target kind */
    cr_assert_eq(tth_tir_func_same_code(f1, f3, 0, pairs, 4, &np), 0);
    cr_assert_neq(tth_tir_func_code_hash(f1, 0), tth_tir_func_code_hash(f3, 0));
    /* the scratch planned in the workspace at different offsets: data, first in use order */
    tth_tbuffer *tmp1 = f1->body->u.alloc.buf, *tmp2 = f2->body->u.alloc.buf;
    tmp1->offset = 0;
    tmp2->offset = 64;
    cr_assert_eq(tth_tir_func_same_code(f1, f2, 0, pairs, 4, &np), 1);
    cr_assert_eq(np, 2);
    cr_assert_eq(pairs[0], tmp1);
    cr_assert_eq(pairs[1], tmp2);
    cr_assert_eq(pairs[3]->scope, TTH_SCOPE_CONST);
    cr_assert_eq(tth_tir_func_same_code(f1, f2, 0, pairs, 1, &np), TTH_ELIMIT);
    cr_assert_eq(tth_tir_func_same_code(f1, f1, 0, pairs, 4, &np), 1, "a function has its own code");
    cr_assert_eq(np, 2);
    cr_assert_eq(pairs[0], pairs[1]);
    /* planned in one, on the stack in the other */
    cr_assert_eq(tth_tir_func_same_code(f1, f4, 0, pairs, 4, &np), 0);
    /* a loop of another kind */
    tmp2->offset = 0;
    f2->body->u.alloc.body->u.seq.stmts[0]->u.loop.loop = TTH_LOOP_SERIAL;
    cr_assert_eq(tth_tir_func_same_code(f1, f2, 0, pairs, 4, &np), 0);
    cr_assert_neq(tth_tir_func_code_hash(f1, 0), tth_tir_func_code_hash(f2, 0));
}

/* The walker visits every statement before its operands and its operands before its
 * sub-statements; SKIP leaves a statement's inside out, any other value ends the walk. */
typedef struct walk_log {
    char text[256];
    int skip_if, stop_at_store;
} walk_log;

static int log_stmt(void *ctx, const tth_tstmt *s)
{
    walk_log *l = ctx;
    static const char *const names[] = {"?", "seq", "for", "store", "alloc", "if", "let", "eval", "call"};
    snprintf(l->text + strlen(l->text), sizeof l->text - strlen(l->text), "%s ", names[s->kind]);
    if (s->kind == TTH_TSTMT_IF && l->skip_if)
        return TTH_TIR_WALK_SKIP;
    return s->kind == TTH_TSTMT_STORE && l->stop_at_store ? 7 : 0;
}

static int log_expr(void *ctx, const tth_texpr *e)
{
    walk_log *l = ctx;
    const char *k = e->kind == TTH_TEXPR_VAR ? e->u.var->name : e->kind == TTH_TEXPR_INT ? "#" : e->kind == TTH_TEXPR_LOAD ? "ld" : "op";
    snprintf(l->text + strlen(l->text), sizeof l->text - strlen(l->text), "%s ", k);
    return 0;
}

Test(tir, walker_order_skip_and_stop)
{
    int64_t n8[1] = {8};
    tth_tbuffer *a = tth_tir_buffer(M, "a", TTH_I64, 1, n8, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(M, "i", TTH_I64), *t = tth_tir_var(M, "t", TTH_I64), *u = tth_tir_var(M, "u", TTH_I64);
    tth_tstmt *store = tth_tir_store(M, a, tth_tir_ref(M, i), tth_tir_load(M, a, tth_tir_ref(M, t)));
    tth_tstmt *let = tth_tir_let(M, t, tth_tir_bin(M, TTH_TBIN_ADD, tth_tir_ref(M, i), I(1)), store);
    tth_tstmt *cond = tth_tir_if(M, tth_tir_bin(M, TTH_TBIN_LT, tth_tir_ref(M, i), I(4)), let, NULL);
    tth_tstmt *loop = tth_tir_for(M, i, I(0), I(8), TTH_LOOP_SERIAL, cond);
    tth_tir_visitor v = {.stmt = log_stmt, .expr = log_expr};
    walk_log l = {0};
    v.ctx = &l;
    cr_assert_eq(tth_tir_walk(loop, &v), 0);
    cr_assert_str_eq(l.text, "for # # if op i # let op i # store i ld t ");
    walk_log skip = {.skip_if = 1};
    v.ctx = &skip;
    cr_assert_eq(tth_tir_walk(loop, &v), 0);
    cr_assert_str_eq(skip.text, "for # # if ");
    walk_log stop = {.stop_at_store = 1};
    v.ctx = &stop;
    cr_assert_eq(tth_tir_walk(loop, &v), 7);
    cr_assert_str_eq(stop.text, "for # # if op i # let op i # store ");
    cr_assert(tth_tir_stmt_uses_var(loop, t));
    cr_assert_not(tth_tir_stmt_uses_var(loop, u));
    cr_assert(tth_tir_expr_uses_var(store->u.store.value, t));
    cr_assert_not(tth_tir_expr_uses_var(store->u.store.value, i));
    cr_assert_not(tth_tir_stmt_uses_var(NULL, t));
}

/* tth_tir_balance: heaviest first, each to the lightest part (the lowest index on a tie, equal
 * weights in index order), starting from given loads or from nothing. */
Test(tir, balance_heaviest_first_to_the_lightest_part)
{
    const size_t w[6] = {3, 9, 4, 4, 1, 6};
    unsigned bin[6];
    cr_assert_eq(tth_tir_balance(w, 6, 2, NULL, bin), 0);
    /* 9 -> 0; 6 -> 1; 4 (item 2) -> 1 (6 < 9); 4 (item 3) -> 0 (9 < 10); 3 -> 1 (10 < 13); 1 -> 0 */
    const unsigned want[6] = {1, 0, 1, 0, 0, 1};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(bin[i], want[i], "item %d in part %u, want %u", i, bin[i], want[i]);
    size_t load[3] = {20, 0, 0};
    cr_assert_eq(tth_tir_balance(w, 6, 3, load, bin), 0);
    cr_assert_eq(bin[1], 1); /* 9 -> 1, 6 -> 2, 4 -> 2, 4 -> 1, 3 -> 2, 1 -> 1 */
    cr_assert_eq(bin[5], 2);
    cr_assert(bin[0] == 2 && bin[2] == 2 && bin[3] == 1 && bin[4] == 1);
    cr_assert(load[0] == 20 && load[1] == 14 && load[2] == 13, "loads %zu %zu %zu", load[0], load[1], load[2]);
    cr_assert_eq(tth_tir_balance(w, 0, 4, NULL, bin), 0);
}
