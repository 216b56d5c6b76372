/* codegen.c: the c-host plugin's tir_to_runtime hook: TIR → portable C99 source files.
 *
 * Requires: a verified TIR module whose WORKSPACE and LOCAL buffers all have a workspace offset
 * (memory planning ran). Produces `<model>_lib0.c` (TTH_FILE_C_SOURCE) holding, in this order:
 * helpers the code needs (min/max, floor division, float16 and bfloat16 conversion), the constants as aligned
 * `static const` arrays, one prototype per PrimFunc, the PrimFuncs, and the AOT entry. A large
 * module whose large constants are bound at run time is split into `<model>_lib1.c`, ... as well
 * (add_parts): each part repeats everything before the PrimFuncs and holds some of them, so the
 * parts compile in parallel.
 *
 * The C ABI of a PrimFunc: `int32_t name(T0 *restrict p0, const T1 *restrict p1, ...,
 * uint8_t *restrict ws)` — a parameter is const when the body never stores to it, `ws` is the
 * base of the caller's workspace (LOCAL buffers live at their planned offsets in it). The AOT
 * entry (the module's `entry`) is `int32_t tth_<model>_run(const struct tth_<model>_inputs *,
 * struct tth_<model>_outputs *, void *workspace)`, structs of `void *` named after its INPUT and
 * OUTPUT buffers in parameter order, so it is reentrant: all state is in the caller's workspace.
 *
 * Output is deterministic (no timestamps, everything in module order) and compiles without a
 * warning under `cc -std=c99 -O2 -Wall` with gcc and clang: no OpenMP, VECTORIZED loops get an
 * `ivdep`-style pragma where the compiler has one, float16 and bfloat16 are stored as uint16_t
 * and computed in float (docs/tir.md, "float16 and bfloat16"). Constants are written in hexadecimal floating point, so they round-trip exactly.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tth/artifact.h"
#include "tth/diag.h"
#include "tth/plugin.h"
#include "tth/strbuf.h"
#include "tth/tir.h"

/* descriptor.c: the plugin version written into the code it generates */
extern const tth_plugin_descriptor tth_descriptor;

/* ---- output text ---------------------------------------------------------------------------- */

/* four spaces per level of C nesting */
static void text_indent(tth_strbuf *t, int depth)
{
    tth_strbuf_spaces(t, 4 * depth);
}

static int dtype_is_half(tth_dtype t) { return t == TTH_F16 || t == TTH_BF16; }

/* The C type a dtype is stored as. */
static const char *ctype_storage(tth_dtype t)
{
    switch (t) {
    case TTH_F32: return "float";
    case TTH_F16: return "uint16_t";
    case TTH_BF16: return "uint16_t";
    case TTH_F64: return "double";
    case TTH_I8: return "int8_t";
    case TTH_I16: return "int16_t";
    case TTH_I32: return "int32_t";
    case TTH_I64: return "int64_t";
    case TTH_U8: return "uint8_t";
    case TTH_U16: return "uint16_t";
    case TTH_U32: return "uint32_t";
    case TTH_U64: return "uint64_t";
    case TTH_BOOL: return "uint8_t";
    default: return NULL;
    }
}

/* The C type a value of that dtype has inside an expression. */
static const char *ctype_value(tth_dtype t)
{
    return dtype_is_half(t) ? "float" : ctype_storage(t);
}

/* A short tag used in helper names: tth_min_f32 ... */
static const char *dtype_tag(tth_dtype t)
{
    switch (t) {
    case TTH_F32: return "f32";
    case TTH_F16: return "f32"; /* computed in float */
    case TTH_BF16: return "f32";
    case TTH_F64: return "f64";
    case TTH_I8: return "i8";
    case TTH_I16: return "i16";
    case TTH_I32: return "i32";
    case TTH_I64: return "i64";
    case TTH_U8: return "u8";
    case TTH_U16: return "u16";
    case TTH_U32: return "u32";
    case TTH_U64: return "u64";
    case TTH_BOOL: return "u8";
    default: return "x";
    }
}

static int dtype_is_float(tth_dtype t) { return t == TTH_F32 || dtype_is_half(t) || t == TTH_F64; }
static int dtype_is_signed_int(tth_dtype t)
{
    return t == TTH_I8 || t == TTH_I16 || t == TTH_I32 || t == TTH_I64;
}

/* ---- helpers the generated code may need, emitted only when used ----------------------------- */

enum {
    HELP_MIN = 0,
    HELP_MAX,
    HELP_FLOORDIV,
    HELP_FLOORMOD,
    HELP_COUNT_
};
#define DTYPE_SLOTS 16

typedef struct cg_name {
    const void *key;   /* a tth_tbuffer* or tth_tvar* */
    char *name;
    uint32_t next_name, next_key; /* hash chains: 1 + index of the next entry, 0 at the end */
} cg_name;

typedef struct cg {
    const tth_tir_module *mod;
    const char *model;            /* for the entry's interface structs */
    tth_strbuf out;
    tth_diag *diag;
    int err;                      /* first error code (diag filled) */
    unsigned char help[HELP_COUNT_][DTYPE_SLOTS];
    int need_f16_load;            /* float16 -> float */
    int need_f16_store;           /* float -> float16 */
    int need_bf16_load;           /* bfloat16 -> float */
    int need_bf16_store;          /* float -> bfloat16 */
    int need_math;
    int need_dot4[2];             /* tth_dot4_us / tth_dot4_ss (DOT4_US, DOT4_SS) */
    unsigned char bits[DTYPE_SLOTS][DTYPE_SLOTS]; /* reinterpret helpers [to][from] */
    /* globals: constants, by buffer, with their C names */
    const tth_tbuffer **consts;
    size_t nconsts;
    /* names in the function being emitted (vars and buffers), and the global names */
    cg_name *names;
    size_t nnames, capnames;
    size_t nglobal_names;         /* names[0..nglobal_names) are globals */
    /* hash indexes, so naming stays O(1) in modules of thousands of functions and constants:
     * chains by name and by key over `names` (newest first, so popping unlinks heads), the
     * module's function names (open addressing), and the constants already collected */
    uint32_t *hname, *hkey;
    size_t hcap;
    uint32_t *hfunc;
    size_t hfunccap;
    const tth_tbuffer **hconst;
    size_t hconstcap;
    const tth_prim_func *func;    /* the function being emitted */
    int in_entry;
    /* vectors are written lane by lane: the C name of the lane being emitted (NULL in scalar
     * context), a counter for lane and reduction names, and the reductions already computed
     * into locals before the statement that reads them */
    const char *lane;
    unsigned nlanes_named;
    const tth_texpr *reduce_key[32];
    char reduce_name[32][16];
    int nreduce;
    const unsigned char *written; /* per param of func: stored to */
    /* emitting a shared body (docs/tir.md, "Functions with the same code"): its data buffers,
     * which are its parameters instead of constants or workspace slices */
    const tth_tbuffer **share_data;
    size_t nshare_data;
    /* constants bound at run time (docs/artifact.md): of at least TTH_BIND_MIN_BYTES bytes, slot k of
     * <bind_prefix>_const_slots is bound[k]; no binding when bind_prefix is NULL */
    const char *bind_prefix;
    const tth_tbuffer **bound;
    unsigned *bound_align;
    size_t nbound;
} cg;


static int cg_fail(cg *g, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cg_fail(cg *g, int code, const char *fmt, ...)
{
    if (g->err)
        return g->err;
    char loc[TTH_DIAG_LOCATION_MAX];
    snprintf(loc, sizeof loc, "c-host tir_to_runtime, PrimFunc '%s'",
             g->func ? g->func->name : "(module)");
    va_list ap;
    va_start(ap, fmt);
    tth_diag_vset(g->diag, code, loc, fmt, ap);
    va_end(ap);
    g->err = code;
    return code;
}

static const char *const c_keywords[] = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
    /* names the generated code itself uses */
    "ws", "workspace", "rc", "inputs", "outputs", "main",
    /* library names the generated code calls */
    "floor", "floorf", "fmod", "fmodf", "memcpy", "INFINITY", "NAN", NULL,
};

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static uint32_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> 32);
}

/* Link names[i] at the heads of its chains. */
static void names_link(cg *g, size_t i)
{
    uint32_t hn = hash_str(g->names[i].name) & (uint32_t)(g->hcap - 1);
    uint32_t hk = hash_ptr(g->names[i].key) & (uint32_t)(g->hcap - 1);
    g->names[i].next_name = g->hname[hn];
    g->hname[hn] = (uint32_t)i + 1;
    g->names[i].next_key = g->hkey[hk];
    g->hkey[hk] = (uint32_t)i + 1;
}

/* Size the chains for nnames entries and relink them all in order. */
static int names_rehash(cg *g, size_t want)
{
    size_t cap = g->hcap ? g->hcap : 256;
    while (cap < want * 2)
        cap *= 2;
    if (cap == g->hcap)
        return 0;
    uint32_t *hn = calloc(cap, sizeof *hn), *hk = calloc(cap, sizeof *hk);
    if (!hn || !hk) {
        free(hn);
        free(hk);
        return TTH_ENOMEM;
    }
    free(g->hname);
    free(g->hkey);
    g->hname = hn;
    g->hkey = hk;
    g->hcap = cap;
    for (size_t i = 0; i < g->nnames; i++)
        names_link(g, i);
    return 0;
}

/* Is s the name of one of the module's functions? (set built on first use) */
static int func_name_taken(cg *g, const char *s)
{
    if (!g->hfunc && g->mod->nfuncs) {
        size_t cap = 16;
        while (cap < g->mod->nfuncs * 2)
            cap *= 2;
        g->hfunc = calloc(cap, sizeof *g->hfunc);
        if (!g->hfunc) {
            cg_fail(g, TTH_ENOMEM, "out of memory indexing function names");
            return 1;
        }
        g->hfunccap = cap;
        for (size_t i = 0; i < g->mod->nfuncs; i++) {
            size_t h = hash_str(g->mod->funcs[i]->name) & (cap - 1);
            while (g->hfunc[h])
                h = (h + 1) & (cap - 1);
            g->hfunc[h] = (uint32_t)i + 1;
        }
    }
    if (!g->hfunc)
        return 0;
    for (size_t h = hash_str(s) & (g->hfunccap - 1); g->hfunc[h]; h = (h + 1) & (g->hfunccap - 1))
        if (strcmp(g->mod->funcs[g->hfunc[h] - 1]->name, s) == 0)
            return 1;
    return 0;
}

static int name_taken(cg *g, const char *s)
{
    for (const char *const *k = c_keywords; *k; k++)
        if (strcmp(*k, s) == 0)
            return 1;
    if (strncmp(s, "tth_", 4) == 0 || strncmp(s, "TTH_", 4) == 0)
        return 1;
    static const char *const intrins[] = {
#define TTH__INTRIN_NAME(e, n, a) n,
        TTH_TIR_INTRINS(TTH__INTRIN_NAME)
#undef TTH__INTRIN_NAME
    };
    for (size_t i = 0; i < sizeof intrins / sizeof intrins[0]; i++) {
        size_t n = strlen(intrins[i]);
        if (strncmp(s, intrins[i], n) == 0 && (s[n] == '\0' || (s[n] == 'f' && s[n + 1] == '\0')))
            return 1;
    }
    if (g->hcap)
        for (uint32_t i = g->hname[hash_str(s) & (g->hcap - 1)]; i; i = g->names[i - 1].next_name)
            if (strcmp(g->names[i - 1].name, s) == 0)
                return 1;
    return func_name_taken(g, s);
}

/* Give `key` a C name derived from `base`, unique among the names in scope; `id` disambiguates. */
static const char *cg_lookup(cg *g, const void *key);

/* a new name for key, hiding any it has (a shared body's parameter for a constant) */
static const char *cg_bind_new(cg *g, const void *key, const char *base, uint32_t id);

static const char *cg_bind(cg *g, const void *key, const char *base, uint32_t id)
{
    const char *known = cg_lookup(g, key);
    return known ? known : cg_bind_new(g, key, base, id);
}

static const char *cg_bind_new(cg *g, const void *key, const char *base, uint32_t id)
{
    if (g->nnames == g->capnames) {
        size_t cap = g->capnames ? g->capnames * 2 : 64;
        cg_name *nn = realloc(g->names, cap * sizeof *nn);
        if (!nn) {
            cg_fail(g, TTH_ENOMEM, "out of memory naming '%s'", base);
            return "oom";
        }
        g->names = nn;
        g->capnames = cap;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", base && *base ? base : "v");
    /* keep it an identifier even if the IR's name is not (the verifier should have said so) */
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
    if (buf[0] >= '0' && buf[0] <= '9') {
        memmove(buf + 1, buf, strlen(buf) + 1 < sizeof buf - 1 ? strlen(buf) + 1 : sizeof buf - 2);
        buf[0] = 'v';
        buf[sizeof buf - 1] = '\0';
    }
    if (name_taken(g, buf)) {
        char alt[sizeof buf];
        snprintf(alt, sizeof alt, "%.200s_%" PRIu32, buf, id);
        int k = 2;
        while (name_taken(g, alt))
            snprintf(alt, sizeof alt, "%.200s_%" PRIu32 "_%d", buf, id, k++);
        snprintf(buf, sizeof buf, "%s", alt);
    }
    char *s = strdup(buf);
    if (!s) {
        cg_fail(g, TTH_ENOMEM, "out of memory naming '%s'", base);
        return "oom";
    }
    g->names[g->nnames].key = key;
    g->names[g->nnames].name = s;
    g->nnames++;
    if (g->nnames * 2 > g->hcap) {
        if (names_rehash(g, g->nnames) != 0) {
            cg_fail(g, TTH_ENOMEM, "out of memory naming '%s'", base);
            return s;
        }
    } else {
        names_link(g, g->nnames - 1);
    }
    return s;
}

static const char *cg_lookup(cg *g, const void *key)
{
    if (!g->hcap)
        return NULL;
    for (uint32_t i = g->hkey[hash_ptr(key) & (g->hcap - 1)]; i; i = g->names[i - 1].next_key)
        if (g->names[i - 1].key == key)
            return g->names[i - 1].name;
    return NULL;
}

/* Forget the names of the function just emitted (globals stay). Entries leave newest first,
 * so each is the head of its chains. */
static void cg_names_pop_to(cg *g, size_t n)
{
    while (g->nnames > n) {
        size_t i = --g->nnames;
        if (g->hcap) {
            g->hname[hash_str(g->names[i].name) & (g->hcap - 1)] = g->names[i].next_name;
            g->hkey[hash_ptr(g->names[i].key) & (g->hcap - 1)] = g->names[i].next_key;
        }
        free(g->names[i].name);
    }
}

/* ---- scanning: constants, helpers, written params -------------------------------------------- */

static void scan_buffer(cg *g, const tth_tbuffer *b)
{
    if (b->scope != TTH_SCOPE_CONST)
        return;
    if (g->nconsts * 2 >= g->hconstcap) {
        size_t cap = g->hconstcap ? g->hconstcap * 2 : 64;
        const tth_tbuffer **h = calloc(cap, sizeof *h);
        if (!h) {
            cg_fail(g, TTH_ENOMEM, "out of memory collecting constants");
            return;
        }
        for (size_t i = 0; i < g->nconsts; i++) {
            size_t k = hash_ptr(g->consts[i]) & (cap - 1);
            while (h[k])
                k = (k + 1) & (cap - 1);
            h[k] = g->consts[i];
        }
        free(g->hconst);
        g->hconst = h;
        g->hconstcap = cap;
    }
    size_t slot = hash_ptr(b) & (g->hconstcap - 1);
    for (; g->hconst[slot]; slot = (slot + 1) & (g->hconstcap - 1))
        if (g->hconst[slot] == b)
            return;
    const tth_tbuffer **nc = realloc(g->consts, (g->nconsts + 1) * sizeof *nc);
    if (!nc) {
        cg_fail(g, TTH_ENOMEM, "out of memory collecting constants");
        return;
    }
    g->consts = nc;
    g->consts[g->nconsts++] = b;
    g->hconst[slot] = b;
}

/* What one expression needs of the prologue (helpers, half conversions) and which buffers it
 * names; tth_tir_walk brings every sub-expression. */
static int scan_expr(void *ctx, const tth_texpr *e)
{
    cg *g = ctx;
    switch (e->kind) {
    case TTH_TEXPR_LOAD:
    case TTH_TEXPR_ADDRESS_OF:
        if (e->kind == TTH_TEXPR_LOAD && e->u.load.buf->dtype == TTH_F16)
            g->need_f16_load = 1;
        if (e->kind == TTH_TEXPR_LOAD && e->u.load.buf->dtype == TTH_BF16)
            g->need_bf16_load = 1;
        scan_buffer(g, e->u.load.buf);
        break;
    case TTH_TEXPR_BINARY: {
        tth_dtype t = e->u.bin.a->dtype;
        unsigned slot = (unsigned)t < DTYPE_SLOTS ? (unsigned)t : 0;
        if (dtype_is_half(t))
            slot = TTH_F32;
        switch (e->u.bin.op) {
        case TTH_TBIN_MIN: g->help[HELP_MIN][slot] = 1; break;
        case TTH_TBIN_MAX: g->help[HELP_MAX][slot] = 1; break;
        case TTH_TBIN_FLOORDIV:
            if (dtype_is_float(t))
                g->need_math = 1;
            else
                g->help[HELP_FLOORDIV][slot] = 1;
            break;
        case TTH_TBIN_FLOORMOD:
            if (dtype_is_float(t))
                g->need_math = 1;
            g->help[HELP_FLOORMOD][slot] = 1;
            break;
        default: break;
        }
        break;
    }
    case TTH_TEXPR_REINTERPRET:
        if ((unsigned)e->dtype < DTYPE_SLOTS && (unsigned)e->u.cast.value->dtype < DTYPE_SLOTS)
            g->bits[e->dtype][e->u.cast.value->dtype] = 1;
        break;
    case TTH_TEXPR_CAST:
        /* a cast to bfloat16 rounds in place: there and back */
        if (e->dtype == TTH_BF16 && e->u.cast.value->dtype != TTH_BF16)
            g->need_bf16_load = g->need_bf16_store = 1;
        break;
    case TTH_TEXPR_INTRIN: {
        unsigned slot = (unsigned)e->dtype < DTYPE_SLOTS ? (unsigned)e->dtype : 0;
        if (e->u.intrin.op == TTH_TINTRIN_REDUCE_MAX)
            g->help[HELP_MAX][dtype_is_half(e->dtype) ? TTH_F32 : slot] = 1;
        else if (e->u.intrin.op == TTH_TINTRIN_REDUCE_MIN)
            g->help[HELP_MIN][dtype_is_half(e->dtype) ? TTH_F32 : slot] = 1;
        else if (e->u.intrin.op == TTH_TINTRIN_DOT4_US || e->u.intrin.op == TTH_TINTRIN_DOT4_SS)
            g->need_dot4[e->u.intrin.op == TTH_TINTRIN_DOT4_SS] = 1;
        else if (e->u.intrin.op != TTH_TINTRIN_REDUCE_ADD)
            g->need_math = 1;
        break;
    }
    default: break;
    }
    return 0;
}

static int scan_stmt(void *ctx, const tth_tstmt *s)
{
    cg *g = ctx;
    tth_tir_visitor exprs = {.expr = scan_expr, .ctx = g};
    switch (s->kind) {
    case TTH_TSTMT_STORE:
        if (s->u.store.buf->dtype == TTH_F16)
            g->need_f16_store = 1;
        if (s->u.store.buf->dtype == TTH_BF16)
            g->need_bf16_store = 1;
        scan_buffer(g, s->u.store.buf);
        tth_tir_walk_expr(s->u.store.index, &exprs);
        /* a stored cast to bfloat16 rounds once, at the store (emit_stmt): no round trip */
        if (s->u.store.buf->dtype == TTH_BF16 && s->u.store.value->kind == TTH_TEXPR_CAST &&
            s->u.store.value->u.cast.value->dtype != TTH_BF16)
            tth_tir_walk_expr(s->u.store.value->u.cast.value, &exprs);
        else
            tth_tir_walk_expr(s->u.store.value, &exprs);
        return TTH_TIR_WALK_SKIP;
    case TTH_TSTMT_ALLOCATE: scan_buffer(g, s->u.alloc.buf); break;
    case TTH_TSTMT_CALL_FUNC:
        for (size_t i = 0; i < s->u.call.nargs; i++)
            scan_buffer(g, s->u.call.args[i]);
        break;
    default: break;
    }
    return 0;
}

static void scan(cg *g, const tth_tstmt *s)
{
    tth_tir_visitor v = {.stmt = scan_stmt, .expr = scan_expr, .ctx = g};
    tth_tir_walk(s, &v);
}

/* Which params of f a statement writes: stores, addresses passed to extern calls (which may write
 * through them), and params passed on to a callee (conservatively: any such param). */
typedef struct written_ctx {
    const tth_prim_func *f;
    unsigned char *w;
} written_ctx;

static void mark_param(const written_ctx *x, const tth_tbuffer *b)
{
    for (size_t i = 0; i < x->f->nparams; i++)
        if (x->f->params[i] == b)
            x->w[i] = 1;
}

static int written_stmt(void *ctx, const tth_tstmt *s)
{
    if (s->kind == TTH_TSTMT_STORE)
        mark_param(ctx, s->u.store.buf);
    for (size_t a = 0; s->kind == TTH_TSTMT_CALL_FUNC && a < s->u.call.nargs; a++)
        mark_param(ctx, s->u.call.args[a]);
    return 0;
}

static int written_expr(void *ctx, const tth_texpr *e)
{
    if (e->kind == TTH_TEXPR_ADDRESS_OF)
        mark_param(ctx, e->u.load.buf);
    return 0;
}

static void mark_written(const tth_tstmt *s, const tth_prim_func *f, unsigned char *w)
{
    written_ctx x = {f, w};
    tth_tir_visitor v = {.stmt = written_stmt, .expr = written_expr, .ctx = &x};
    tth_tir_walk(s, &v);
}

/* written[i] for every param of every function, computed once. */
typedef struct cg_sig {
    const tth_prim_func *f;
    unsigned char *written;
} cg_sig;

/* A shared body takes at most this many data buffers (more: the functions stay apart) */
#define C_SHARE_MAX_DATA 256

/* ---- literals --------------------------------------------------------------------------------- */

static void emit_int_literal(tth_strbuf *t, tth_dtype dt, int64_t v)
{
    switch (dt) {
    case TTH_I64:
        if (v == INT64_MIN)
            tth_strbuf_puts(t, "(-INT64_MAX - 1)");
        else if (v >= INT32_MIN && v <= INT32_MAX)
            tth_strbuf_printf(t, v < 0 ? "(%" PRId64 ")" : "%" PRId64, v); /* an int, widened */
        else
            tth_strbuf_printf(t, "INT64_C(%" PRId64 ")", v);
        break;
    case TTH_U64:
        if ((uint64_t)v <= UINT32_MAX)
            tth_strbuf_printf(t, "%" PRIu64 "u", (uint64_t)v);
        else
            tth_strbuf_printf(t, "UINT64_C(%" PRIu64 ")", (uint64_t)v);
        break;
    case TTH_U32: tth_strbuf_printf(t, "%" PRIu32 "u", (uint32_t)v); break;
    case TTH_I32:
        if ((int32_t)v == INT32_MIN)
            tth_strbuf_puts(t, "(-INT32_MAX - 1)");
        else
            tth_strbuf_printf(t, (int32_t)v < 0 ? "(%" PRId32 ")" : "%" PRId32, (int32_t)v);
        break;
    case TTH_BOOL: tth_strbuf_puts(t, v ? "1" : "0"); break;
    default:
        /* narrow integers: an int literal, converted where used */
        tth_strbuf_printf(t, v < 0 ? "(%" PRId64 ")" : "%" PRId64, v);
        break;
    }
}

/* The shortest decimal that reads back as exactly v (as float when f32), with a '.' or an
 * exponent so C reads it as floating point. */
static void shortest_decimal(char *buf, size_t len, double v, int f32)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    if (!strpbrk(buf, ".eE"))
        strncat(buf, ".0", len - strlen(buf) - 1);
}

/* An exact C99 hex-float literal for a finite float32 ("-0x1.8p-3f"), written without printf or
 * a round-trip search: arrays of millions of weights are emitted at copying speed (the decimal
 * search costs microseconds a value). Returns the length written (at most 20 bytes). */
static size_t hexfloat32(char *buf, float v)
{
    static const char hex[] = "0123456789abcdef";
    uint32_t u;
    memcpy(&u, &v, 4);
    char *p = buf;
    if (u >> 31)
        *p++ = '-';
    uint32_t e = (u >> 23) & 0xffu, f = (u & 0x7fffffu) << 1; /* 24 fraction bits: 6 digits */
    *p++ = '0';
    *p++ = 'x';
    int exp = 0;
    if (e == 0 && f == 0) {
        *p++ = '0';
    } else {
        *p++ = e == 0 ? '0' : '1';
        exp = e == 0 ? -126 : (int)e - 127;
        if (f) {
            *p++ = '.';
            int last = 0;
            char d[6];
            for (int i = 0; i < 6; i++) {
                d[i] = hex[(f >> (20 - 4 * i)) & 0xfu];
                if (d[i] != '0')
                    last = i;
            }
            for (int i = 0; i <= last; i++)
                *p++ = d[i];
        }
    }
    *p++ = 'p';
    *p++ = exp < 0 ? '-' : '+';
    unsigned a = (unsigned)(exp < 0 ? -exp : exp);
    if (a >= 100)
        *p++ = (char)('0' + a / 100);
    if (a >= 10)
        *p++ = (char)('0' + a / 10 % 10);
    *p++ = (char)('0' + a % 10);
    *p++ = 'f';
    *p = '\0';
    return (size_t)(p - buf);
}

/* Constant arrays longer than this are written as hex floats (exact, fast); shorter ones as
 * the shortest decimal, which people can read. */
#define CG_DECIMAL_CONST_MAX 256

/* An exact float literal: the shortest round-tripping decimal, or INFINITY/NAN. */
static void emit_float_literal(tth_strbuf *t, tth_dtype dt, double v)
{
    int f32 = dt != TTH_F64;
    if (isnan(v)) {
        tth_strbuf_puts(t, f32 ? "NAN" : "((double)NAN)");
        return;
    }
    if (isinf(v)) {
        if (f32)
            tth_strbuf_puts(t, v < 0 ? "(-INFINITY)" : "INFINITY");
        else
            tth_strbuf_puts(t, v < 0 ? "(-(double)INFINITY)" : "((double)INFINITY)");
        return;
    }
    char buf[64];
    if (f32) {
        float x = (float)v;
        shortest_decimal(buf, sizeof buf, (double)x, 1);
        /* a negative literal is parenthesized so it never follows a '-' directly */
        tth_strbuf_printf(t, x < 0 || signbit(x) ? "(%sf)" : "%sf", buf);
    } else {
        shortest_decimal(buf, sizeof buf, v, 0);
        tth_strbuf_printf(t, v < 0 || signbit(v) ? "(%s)" : "%s", buf);
    }
}

/* ---- expressions ----------------------------------------------------------------------------- */

static void emit_expr(cg *g, const tth_texpr *e);

/* A buffer's C name at its use: params and locals by name, constants by their global name,
 * and in the entry, I/O through the interface structs and workspace buffers at their offset. */
static void emit_buffer_ref(cg *g, const tth_tbuffer *b)
{
    const char *n = cg_lookup(g, b);
    if (n) {
        tth_strbuf_puts(&g->out, n);
        return;
    }
    cg_fail(g, TTH_EINVAL, "buffer '%s' (id %" PRIu32 ") is not a parameter, allocation, "
            "constant or workspace buffer of this function", b->name, b->id);
}

static const char *binop_c(tth_tir_binop op)
{
    switch (op) {
    case TTH_TBIN_ADD: return "+";
    case TTH_TBIN_SUB: return "-";
    case TTH_TBIN_MUL: return "*";
    case TTH_TBIN_DIV: return "/";
    case TTH_TBIN_MOD: return "%";
    case TTH_TBIN_EQ: return "==";
    case TTH_TBIN_NE: return "!=";
    case TTH_TBIN_LT: return "<";
    case TTH_TBIN_LE: return "<=";
    case TTH_TBIN_GT: return ">";
    case TTH_TBIN_GE: return ">=";
    case TTH_TBIN_AND: return "&&";
    case TTH_TBIN_OR: return "||";
    case TTH_TBIN_SHL: return "<<";
    case TTH_TBIN_SHR: return ">>";
    case TTH_TBIN_BITAND: return "&";
    case TTH_TBIN_BITOR: return "|";
    default: return NULL;
    }
}

static const char *intrin_name(tth_tir_intrin_op op, int *nargs)
{
    switch (op) {
#define TTH__INTRIN_CASE(e, s, n) case TTH_TINTRIN_##e: *nargs = n; return s;
        TTH_TIR_INTRINS(TTH__INTRIN_CASE)
#undef TTH__INTRIN_CASE
    }
    *nargs = 0;
    return NULL;
}

/* Arithmetic on types narrower than int is done in int by C; the result is converted back to
 * the IR's dtype so wrap-around matches the dtype (e.g. int8 + int8 stays int8). */
static int needs_narrowing(tth_dtype t)
{
    return t == TTH_I8 || t == TTH_I16 || t == TTH_U8 || t == TTH_U16 || t == TTH_BOOL;
}

/* open, the n expressions with sep between them, close. */
static void emit_list(cg *g, const char *open, tth_texpr *const *es, size_t n, const char *sep, const char *close)
{
    tth_strbuf_puts(&g->out, open);
    for (size_t i = 0; i < n; i++) {
        if (i)
            tth_strbuf_puts(&g->out, sep);
        emit_expr(g, es[i]);
    }
    tth_strbuf_puts(&g->out, close);
}

static void emit_binary(cg *g, const tth_texpr *e)
{
    tth_strbuf *t = &g->out;
    tth_dtype at = e->u.bin.a->dtype;
    tth_tir_binop op = e->u.bin.op;
    tth_texpr *const ab[] = {e->u.bin.a, e->u.bin.b};
    switch (op) {
    case TTH_TBIN_MIN:
    case TTH_TBIN_MAX:
        tth_strbuf_printf(t, "tth_%s_%s", op == TTH_TBIN_MIN ? "min" : "max", dtype_tag(at));
        emit_list(g, "(", ab, 2, ", ", ")");
        return;
    case TTH_TBIN_FLOORDIV:
    case TTH_TBIN_FLOORMOD:
        if (dtype_is_float(at) && op == TTH_TBIN_FLOORDIV) {
            tth_strbuf_puts(t, at == TTH_F64 ? "floor" : "floorf");
            emit_list(g, "(", ab, 2, " / ", ")");
        } else if (dtype_is_float(at)) {
            /* the remainder with the sign of the divisor, via fmod to stay exact */
            tth_strbuf_printf(t, "tth_floormod_%s", dtype_tag(at));
            emit_list(g, "(", ab, 2, ", ", ")");
        } else {
            tth_strbuf_printf(t, "tth_%s_%s", op == TTH_TBIN_FLOORDIV ? "floordiv" : "floormod", dtype_tag(at));
            emit_list(g, "(", ab, 2, ", ", ")");
        }
        return;
    case TTH_TBIN_MOD:
        if (dtype_is_float(at)) {
            tth_strbuf_puts(t, at == TTH_F64 ? "fmod" : "fmodf");
            emit_list(g, "(", ab, 2, ", ", ")");
            return;
        }
        break;
    default: break;
    }
    const char *c = binop_c(op);
    if (!c) {
        cg_fail(g, TTH_EUNSUPPORTED, "binary operator %d has no C form", (int)op);
        return;
    }
    int arith = op == TTH_TBIN_ADD || op == TTH_TBIN_SUB || op == TTH_TBIN_MUL ||
                op == TTH_TBIN_DIV || op == TTH_TBIN_MOD || op == TTH_TBIN_SHL ||
                op == TTH_TBIN_SHR || op == TTH_TBIN_BITAND || op == TTH_TBIN_BITOR;
    if (arith && needs_narrowing(e->dtype))
        tth_strbuf_printf(t, "(%s)", ctype_value(e->dtype));
    char sep[8];
    snprintf(sep, sizeof sep, " %s ", c);
    emit_list(g, "(", ab, 2, sep, ")");
}

static void emit_expr(cg *g, const tth_texpr *e)
{
    tth_strbuf *t = &g->out;
    if (g->err)
        return;
    if (!e) {
        cg_fail(g, TTH_EINVAL, "missing expression");
        return;
    }
    switch (e->kind) {
    case TTH_TEXPR_INT:
        if (dtype_is_float(e->dtype))
            emit_float_literal(t, e->dtype, (double)e->u.i);
        else
            emit_int_literal(t, e->dtype, e->u.i);
        break;
    case TTH_TEXPR_FLOAT:
        if (dtype_is_float(e->dtype))
            emit_float_literal(t, e->dtype, e->u.f);
        else
            emit_int_literal(t, e->dtype, (int64_t)e->u.f);
        break;
    case TTH_TEXPR_VAR: {
        const char *n = cg_lookup(g, e->u.var);
        if (!n) {
            cg_fail(g, TTH_EINVAL, "variable '%s' (id %" PRIu32 ") is used outside its loop or let",
                    e->u.var->name, e->u.var->id);
            return;
        }
        tth_strbuf_puts(t, n);
        if (e->u.var->lanes > 1) {
            if (!g->lane) {
                cg_fail(g, TTH_EINVAL, "vector variable '%s' read as a scalar", e->u.var->name);
                return;
            }
            tth_strbuf_printf(t, "[%s]", g->lane);
        }
        break;
    }
    case TTH_TEXPR_RAMP:
        if (!g->lane) {
            cg_fail(g, TTH_EINVAL, "a ramp read as a scalar");
            return;
        }
        emit_list(g, "(", &e->u.ramp.base, 1, "", "");
        tth_strbuf_printf(t, " + %" PRId64 " * (int64_t)%s)", e->u.ramp.stride, g->lane);
        break;
    case TTH_TEXPR_BROADCAST: emit_expr(g, e->u.bcast.value); break;
    case TTH_TEXPR_LOAD: {
        int half = dtype_is_half(e->u.load.buf->dtype);
        if (half)
            tth_strbuf_puts(t, e->u.load.buf->dtype == TTH_F16 ? "tth_f16_to_f32(" : "tth_bf16_to_f32(");
        emit_buffer_ref(g, e->u.load.buf);
        emit_list(g, "[", &e->u.load.index, 1, "", half ? "])" : "]");
        break;
    }
    case TTH_TEXPR_ADDRESS_OF:
        tth_strbuf_puts(t, "(");
        emit_buffer_ref(g, e->u.load.buf);
        emit_list(g, " + ", &e->u.load.index, 1, "", ")");
        break;
    case TTH_TEXPR_BINARY: emit_binary(g, e); break;
    case TTH_TEXPR_UNARY:
        if (e->u.un.op == TTH_TUN_NOT) {
            emit_list(g, "(!", &e->u.un.a, 1, "", ")");
            break;
        }
        if (needs_narrowing(e->dtype))
            tth_strbuf_printf(t, "(%s)", ctype_value(e->dtype));
        emit_list(g, "(-(", &e->u.un.a, 1, "", "))");
        break;
    case TTH_TEXPR_SELECT:
        emit_list(g, "(", &e->u.select.cond, 1, "", " ? ");
        emit_list(g, "", &e->u.select.a, 1, "", " : ");
        emit_list(g, "", &e->u.select.b, 1, "", ")");
        break;
    case TTH_TEXPR_CAST: {
        tth_dtype to = e->dtype, from = e->u.cast.value->dtype;
        char open[48];
        if (to == TTH_BOOL) {
            emit_list(g, "(uint8_t)(", &e->u.cast.value, 1, "", " != 0)");
        } else if (to == TTH_BF16 && from != TTH_BF16) {
            /* bfloat16 is rounded where the cast is (float16 where it is stored) */
            emit_list(g, "tth_bf16_to_f32(tth_f32_to_bf16((float)(", &e->u.cast.value, 1, "", ")))");
        } else if (to == from || (to == TTH_F16 && from == TTH_F32) ||
                   (to == TTH_F32 && dtype_is_half(from)) || (to == TTH_F16 && from == TTH_BF16)) {
            emit_expr(g, e->u.cast.value); /* float16 and bfloat16 values are already float */
        } else {
            snprintf(open, sizeof open, "(%s)(", ctype_value(to));
            emit_list(g, open, &e->u.cast.value, 1, "", ")");
        }
        break;
    }
    case TTH_TEXPR_REINTERPRET:
        tth_strbuf_printf(t, "tth_as_%s_%s", dtype_tag(e->dtype), dtype_tag(e->u.cast.value->dtype));
        emit_list(g, "(", &e->u.cast.value, 1, "", ")");
        break;
    case TTH_TEXPR_INTRIN: {
        int nargs = 0;
        const char *name = intrin_name(e->u.intrin.op, &nargs);
        if (e->u.intrin.op == TTH_TINTRIN_REDUCE_ADD || e->u.intrin.op == TTH_TINTRIN_REDUCE_MAX ||
            e->u.intrin.op == TTH_TINTRIN_REDUCE_MIN) {
            for (int i = 0; i < g->nreduce; i++)
                if (g->reduce_key[i] == e) {
                    tth_strbuf_puts(t, g->reduce_name[i]);
                    return;
                }
            cg_fail(g, TTH_EINTERNAL, "a reduction was not computed before its statement");
            return;
        }
        if (e->u.intrin.op == TTH_TINTRIN_DOT4_US || e->u.intrin.op == TTH_TINTRIN_DOT4_SS) {
            tth_strbuf_printf(t, "tth_%s", name);
            emit_list(g, "(", e->u.intrin.args, 3, ", ", ")");
            break;
        }
        if (!name || !dtype_is_float(e->dtype)) {
            cg_fail(g, TTH_EUNSUPPORTED, "intrinsic %d on %s has no C form", (int)e->u.intrin.op,
                    ctype_storage(e->dtype) ? ctype_storage(e->dtype) : "?");
            return;
        }
        tth_strbuf_printf(t, "%s%s", name, e->dtype == TTH_F64 ? "" : "f");
        emit_list(g, "(", e->u.intrin.args, (size_t)nargs, ", ", ")");
        break;
    }
    case TTH_TEXPR_CALL_EXTERN:
        tth_strbuf_puts(t, e->u.call.name);
        emit_list(g, "(", e->u.call.args, e->u.call.nargs, ", ", ")");
        break;
    default: cg_fail(g, TTH_EINVAL, "unknown expression kind %d", (int)e->kind); break;
    }
}

/* ---- statements ------------------------------------------------------------------------------ */

static const cg_sig *find_sig(const cg_sig *sigs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(sigs[i].f->name, name) == 0)
            return &sigs[i];
    return NULL;
}

typedef struct cg_fctx {
    const cg_sig *sigs;
    size_t nsigs;
} cg_fctx;

/* tail: s is the last statement of its C block, so a LET or ALLOCATE may declare its name in
 * that block instead of opening a new one (the block's end ends its scope). */
static void emit_stmt(cg *g, const cg_fctx *fx, const tth_tstmt *s, int depth, int tail);

/* restrict only where buffers never overlap: inside an operator; in the entry, workspace buffers
 * whose lifetimes do not overlap share addresses. */
static void emit_workspace_ptr(cg *g, const tth_tbuffer *b, const char *name, int depth, int is_const)
{
    if (b->offset < 0) {
        cg_fail(g, TTH_EINVAL, "buffer '%s' has no workspace offset: memory planning must run "
                "before code generation", b->name);
        return;
    }
    text_indent(&g->out, depth);
    tth_strbuf_printf(&g->out, "%s%s *%s%s = (%s *)(ws + %" PRId64 ");\n", is_const ? "const " : "",
                ctype_storage(b->dtype), g->in_entry ? "" : "restrict ", name,
                ctype_storage(b->dtype), b->offset);
}

static void emit_call(cg *g, const cg_fctx *fx, const tth_tstmt *s, int depth)
{
    tth_strbuf *t = &g->out;
    const cg_sig *sig = find_sig(fx->sigs, fx->nsigs, s->u.call.func);
    if (!sig) {
        cg_fail(g, TTH_EUNSUPPORTED, "calls '%s', which is not in this module (calls across "
                "target kinds are not supported yet)", s->u.call.func);
        return;
    }
    const tth_prim_func *callee = sig->f;
    if (callee->nparams != s->u.call.nargs) {
        cg_fail(g, TTH_EINVAL, "calls '%s' with %zu buffers; it takes %zu", callee->name,
                s->u.call.nargs, callee->nparams);
        return;
    }
    text_indent(t, depth);
    tth_strbuf_printf(t, "rc = %s(", callee->name);
    for (size_t i = 0; i < s->u.call.nargs; i++) {
        const tth_tbuffer *a = s->u.call.args[i];
        const tth_tbuffer *p = callee->params[i];
        if (i)
            tth_strbuf_puts(t, ", ");
        if (a->scope == TTH_SCOPE_CONST && sig->written[i]) {
            cg_fail(g, TTH_EINVAL, "passes constant '%s' to '%s', which writes its parameter %zu",
                    a->name, callee->name, i);
            return;
        }
        if (a->dtype != p->dtype)
            tth_strbuf_printf(t, "(%s%s *)", sig->written[i] ? "" : "const ", ctype_storage(p->dtype));
        emit_buffer_ref(g, a);
    }
    tth_strbuf_puts(t, s->u.call.nargs ? ", ws);\n" : "ws);\n");
    text_indent(t, depth);
    tth_strbuf_puts(t, "if (rc != 0)\n");
    text_indent(t, depth + 1);
    tth_strbuf_puts(t, "return rc;\n");
}

/* tth's own functions that the code calls (a profiling entry's timing hooks, docs/profiling.md):
 * one prototype each, from the call's types, so the C compiler does not declare them implicitly */
typedef struct hook_protos {
    cg *g;
    const char *seen[16];
    int n;
} hook_protos;

static int proto_hook(void *ctx, const tth_texpr *e)
{
    hook_protos *h = ctx;
    if (e->kind != TTH_TEXPR_CALL_EXTERN || strncmp(e->u.call.name, "tth_", 4) != 0)
        return 0;
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->seen[i], e->u.call.name) == 0)
            return 0;
    if (h->n < 16)
        h->seen[h->n++] = e->u.call.name;
    tth_strbuf *t = &h->g->out;
    tth_strbuf_printf(t, "%s %s(", ctype_value(e->dtype), e->u.call.name);
    for (size_t i = 0; i < e->u.call.nargs; i++) {
        const tth_texpr *a = e->u.call.args[i];
        tth_strbuf_printf(t, "%s%s%s", i ? ", " : "", ctype_value(a->dtype), a->kind == TTH_TEXPR_ADDRESS_OF ? " *" : "");
    }
    tth_strbuf_puts(t, e->u.call.nargs ? ");\n" : "void);\n");
    return 0;
}

static int is_call_extern(void *ctx, const tth_texpr *e)
{
    (void)ctx;
    return e->kind == TTH_TEXPR_CALL_EXTERN;
}

/* Does e call an external function (and so must be evaluated even when its value is unused)? */
static int expr_has_call(const tth_texpr *e)
{
    tth_tir_visitor v = {.expr = is_call_extern};
    return tth_tir_walk_expr(e, &v);
}

/* Does emit_expr write this expression wrapped in one pair of parentheses? */
static int emit_is_parenthesized(const tth_texpr *e)
{
    if (e->kind == TTH_TEXPR_SELECT)
        return 1;
    if (e->kind != TTH_TEXPR_BINARY)
        return 0;
    switch (e->u.bin.op) {
    case TTH_TBIN_EQ: case TTH_TBIN_NE: case TTH_TBIN_LT: case TTH_TBIN_LE: case TTH_TBIN_GT:
    case TTH_TBIN_GE: case TTH_TBIN_AND: case TTH_TBIN_OR:
        return 1;
    case TTH_TBIN_MIN: case TTH_TBIN_MAX: case TTH_TBIN_FLOORDIV: case TTH_TBIN_FLOORMOD:
        return 0;
    case TTH_TBIN_MOD:
        if (dtype_is_float(e->u.bin.a->dtype))
            return 0;
        return !needs_narrowing(e->dtype);
    default: return !needs_narrowing(e->dtype);
    }
}

/* `for (int32_t lN = 0; lN < lanes; ++lN) {` with g->lane set to lN; returns the previous lane. */
static const char *open_lanes(cg *g, int32_t lanes, int depth, char *name, size_t len)
{
    snprintf(name, len, "l%u_", g->nlanes_named++);
    text_indent(&g->out, depth);
    tth_strbuf_printf(&g->out, "for (int32_t %s = 0; %s < %d; ++%s) {\n", name, name, (int)lanes, name);
    const char *save = g->lane;
    g->lane = name;
    return save;
}

static void close_lanes(cg *g, const char *save, int depth)
{
    text_indent(&g->out, depth);
    tth_strbuf_puts(&g->out, "}\n");
    g->lane = save;
}

/* Every REDUCE inside e (innermost first) computed into a local before the statement:
 *   T rN = <lane 0>; for (lanes 1..) rN = rN op <lane>;
 * emit_expr then reads rN. Returns the count added (popped by the caller). */
static int emit_reductions(cg *g, const tth_texpr *e, int depth)
{
    if (!e || g->err)
        return 0;
    int added = 0;
    tth_texpr *scratch[3], *const *kids;
    size_t n = tth_tir_expr_children(e, scratch, &kids);
    for (size_t i = 0; i < n; i++)
        added += emit_reductions(g, kids[i], depth);
    if (e->kind != TTH_TEXPR_INTRIN || (e->u.intrin.op != TTH_TINTRIN_REDUCE_ADD &&
                                        e->u.intrin.op != TTH_TINTRIN_REDUCE_MAX &&
                                        e->u.intrin.op != TTH_TINTRIN_REDUCE_MIN))
        return added;
    if (g->nreduce >= (int)(sizeof g->reduce_key / sizeof g->reduce_key[0])) {
        cg_fail(g, TTH_ELIMIT, "more than %d reductions in one statement", g->nreduce);
        return added;
    }
    tth_strbuf *t = &g->out;
    const tth_texpr *a = e->u.intrin.args[0];
    const char *vt = ctype_value(e->dtype);
    char *rn = g->reduce_name[g->nreduce];
    snprintf(rn, sizeof g->reduce_name[0], "r%u_", g->nlanes_named++);
    const char *save = g->lane;
    text_indent(t, depth);
    tth_strbuf_printf(t, "%s %s = ", vt, rn);
    g->lane = "0";
    emit_expr(g, a);
    tth_strbuf_puts(t, ";\n");
    char ln[16];
    snprintf(ln, sizeof ln, "l%u_", g->nlanes_named++);
    text_indent(t, depth);
    tth_strbuf_printf(t, "for (int32_t %s = 1; %s < %d; ++%s) {\n", ln, ln, (int)a->lanes, ln);
    g->lane = ln;
    text_indent(t, depth + 1);
    if (e->u.intrin.op == TTH_TINTRIN_REDUCE_ADD) {
        tth_strbuf_printf(t, "%s = (%s)(%s + ", rn, vt, rn);
        emit_expr(g, a);
        tth_strbuf_puts(t, ");\n");
    } else {
        tth_dtype dt = dtype_is_half(e->dtype) ? TTH_F32 : e->dtype;
        tth_strbuf_printf(t, "%s = tth_%s_%s(%s, ", rn, e->u.intrin.op == TTH_TINTRIN_REDUCE_MAX ? "max" : "min",
                    dtype_tag(dt), rn);
        emit_expr(g, a);
        tth_strbuf_puts(t, ");\n");
    }
    text_indent(t, depth);
    tth_strbuf_puts(t, "}\n");
    g->lane = save;
    g->reduce_key[g->nreduce++] = e;
    return added + 1;
}

static void emit_stmt_scalar(cg *g, const cg_fctx *fx, const tth_tstmt *s, int depth, int tail);

static void emit_stmt(cg *g, const cg_fctx *fx, const tth_tstmt *s, int depth, int tail)
{
    if (g->err || !s)
        return;
    const tth_texpr *scalar = s->kind == TTH_TSTMT_STORE      ? s->u.store.value
                              : s->kind == TTH_TSTMT_LET      ? s->u.let.value
                              : s->kind == TTH_TSTMT_EVALUATE ? s->u.eval.value
                              : s->kind == TTH_TSTMT_IF       ? s->u.cond.cond
                                                              : NULL;
    /* reductions read by the statement's own expression are computed first (they are scalars,
     * so they do not depend on a lane loop the statement may open); their names are unique */
    int base = g->nreduce;
    if (scalar)
        emit_reductions(g, scalar, depth);
    emit_stmt_scalar(g, fx, s, depth, tail);
    g->nreduce = base;
}

static void emit_stmt_scalar(cg *g, const cg_fctx *fx, const tth_tstmt *s, int depth, int tail)
{
    tth_strbuf *t = &g->out;
    if (g->err || !s)
        return;
    switch (s->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < s->u.seq.n; i++)
            emit_stmt(g, fx, s->u.seq.stmts[i], depth, tail && i + 1 == s->u.seq.n);
        break;
    case TTH_TSTMT_FOR: {
        const tth_tvar *v = s->u.loop.var;
        size_t mark = g->nnames;
        const char *vt = ctype_value(v->dtype);
        if (!vt || dtype_is_float(v->dtype)) {
            cg_fail(g, TTH_ETYPE, "loop variable '%s' is not an integer", v->name);
            return;
        }
        if (s->u.loop.loop == TTH_LOOP_VECTORIZED) {
            text_indent(t, depth);
            tth_strbuf_puts(t, "TTH_IVDEP\n");
        }
        const char *n = cg_bind(g, v, v->name, v->id);
        text_indent(t, depth);
        const tth_texpr *mn = s->u.loop.min;
        if (mn->kind == TTH_TEXPR_INT && mn->u.i == 0) {
            tth_strbuf_printf(t, "for (%s %s = 0; %s < ", vt, n, n);
            emit_expr(g, s->u.loop.extent);
        } else {
            /* the bound is computed once, before the loop */
            tth_strbuf_printf(t, "for (%s %s = ", vt, n);
            emit_expr(g, mn);
            tth_strbuf_printf(t, ", %s_end = ", n);
            emit_expr(g, mn);
            tth_strbuf_puts(t, " + ");
            emit_expr(g, s->u.loop.extent);
            tth_strbuf_printf(t, "; %s < %s_end", n, n);
        }
        tth_strbuf_printf(t, "; ++%s) {\n", n);
        emit_stmt(g, fx, s->u.loop.body, depth + 1, 1);
        text_indent(t, depth);
        tth_strbuf_puts(t, "}\n");
        cg_names_pop_to(g, mark);
        break;
    }
    case TTH_TSTMT_STORE: {
        const tth_tbuffer *b = s->u.store.buf;
        const char *save_lane = g->lane;
        char ln[16];
        int vec = s->u.store.index->lanes > 1;
        if (vec) {
            save_lane = open_lanes(g, s->u.store.index->lanes, depth, ln, sizeof ln);
            depth++;
        }
        text_indent(t, depth);
        emit_buffer_ref(g, b);
        tth_strbuf_puts(t, "[");
        emit_expr(g, s->u.store.index);
        tth_strbuf_puts(t, "] = ");
        if (b->dtype == TTH_F16) {
            tth_strbuf_puts(t, "tth_f32_to_f16(");
            emit_expr(g, s->u.store.value);
            tth_strbuf_puts(t, ")");
        } else if (b->dtype == TTH_BF16) {
            /* a stored cast to bfloat16 rounds once, here */
            const tth_texpr *v = s->u.store.value;
            int cast = v->kind == TTH_TEXPR_CAST && v->u.cast.value->dtype != TTH_BF16;
            tth_strbuf_puts(t, cast ? "tth_f32_to_bf16((float)(" : "tth_f32_to_bf16(");
            emit_expr(g, cast ? v->u.cast.value : v);
            tth_strbuf_puts(t, cast ? "))" : ")");
        } else if (b->dtype == TTH_BOOL && s->u.store.value->dtype != TTH_BOOL) {
            tth_strbuf_puts(t, "(uint8_t)(");
            emit_expr(g, s->u.store.value);
            tth_strbuf_puts(t, " != 0)");
        } else {
            emit_expr(g, s->u.store.value); /* assignment converts to the stored type */
        }
        tth_strbuf_puts(t, ";\n");
        if (vec)
            close_lanes(g, save_lane, depth - 1);
        break;
    }
    case TTH_TSTMT_ALLOCATE: {
        const tth_tbuffer *b = s->u.alloc.buf;
        size_t mark = g->nnames;
        int inner = tail ? depth : depth + 1;
        if (!tail) {
            text_indent(t, depth);
            tth_strbuf_puts(t, "{\n");
        }
        int is_data = 0;
        for (size_t k = 0; k < g->nshare_data && !is_data; k++)
            is_data = g->share_data[k] == b;
        const char *n = cg_bind(g, b, b->name, b->id);
        if (is_data) {
            /* a shared body's workspace slice: its parameter, bound by emit_shared */
        } else if (b->scope == TTH_SCOPE_REGISTER) {
            /* a small array on the stack (a micro-kernel's accumulators) */
            text_indent(t, inner);
            tth_strbuf_printf(t, "%s %s[%" PRId64 "];\n", ctype_storage(b->dtype), n, tth_tbuffer_numel(b));
        } else {
            emit_workspace_ptr(g, b, n, inner, 0);
        }
        emit_stmt(g, fx, s->u.alloc.body, inner, 1);
        if (!tail) {
            text_indent(t, depth);
            tth_strbuf_puts(t, "}\n");
            cg_names_pop_to(g, mark);
        }
        break;
    }
    case TTH_TSTMT_IF: {
        text_indent(t, depth);
        /* binary expressions bring their own parentheses; doubling them warns under clang */
        if (emit_is_parenthesized(s->u.cond.cond)) {
            tth_strbuf_puts(t, "if ");
            emit_expr(g, s->u.cond.cond);
            tth_strbuf_puts(t, " {\n");
        } else {
            tth_strbuf_puts(t, "if (");
            emit_expr(g, s->u.cond.cond);
            tth_strbuf_puts(t, ") {\n");
        }
        size_t mark = g->nnames;
        emit_stmt(g, fx, s->u.cond.then_s, depth + 1, 1);
        cg_names_pop_to(g, mark);
        text_indent(t, depth);
        if (s->u.cond.else_s) {
            tth_strbuf_puts(t, "} else {\n");
            emit_stmt(g, fx, s->u.cond.else_s, depth + 1, 1);
            cg_names_pop_to(g, mark);
            text_indent(t, depth);
        }
        tth_strbuf_puts(t, "}\n");
        break;
    }
    case TTH_TSTMT_LET: {
        const tth_tvar *v = s->u.let.var;
        size_t mark = g->nnames;
        /* a LET whose variable is never used is not emitted: an unused local warns under -Wall */
        if (!tth_tir_stmt_uses_var(s->u.let.body, v)) {
            if (expr_has_call(s->u.let.value)) {
                text_indent(t, depth);
                tth_strbuf_puts(t, "(void)");
                emit_expr(g, s->u.let.value);
                tth_strbuf_puts(t, ";\n");
            }
            emit_stmt(g, fx, s->u.let.body, depth, tail);
            break;
        }
        const char *vt = ctype_value(v->dtype);
        if (!vt) {
            cg_fail(g, TTH_ETYPE, "let variable '%s' has no C type", v->name);
            return;
        }
        int inner = tail ? depth : depth + 1;
        if (!tail) {
            text_indent(t, depth);
            tth_strbuf_puts(t, "{\n");
        }
        /* the value cannot use the variable (the verifier checks), so binding first is safe */
        text_indent(t, inner);
        if (v->lanes > 1) {
            /* a vector: an array filled lane by lane (the name is bound after the value) */
            char ln[16];
            const char *n = cg_bind(g, v, v->name, v->id);
            tth_strbuf_printf(t, "%s %s[%d];\n", vt, n, (int)v->lanes);
            const char *save_lane = open_lanes(g, v->lanes, inner, ln, sizeof ln);
            text_indent(t, inner + 1);
            tth_strbuf_printf(t, "%s[%s] = ", n, ln);
            emit_expr(g, s->u.let.value);
            tth_strbuf_puts(t, ";\n");
            close_lanes(g, save_lane, inner);
        } else {
            const char *n = cg_bind(g, v, v->name, v->id);
            tth_strbuf_printf(t, "const %s %s = ", vt, n);
            emit_expr(g, s->u.let.value);
            tth_strbuf_puts(t, ";\n");
        }
        emit_stmt(g, fx, s->u.let.body, inner, 1);
        if (!tail) {
            text_indent(t, depth);
            tth_strbuf_puts(t, "}\n");
            cg_names_pop_to(g, mark);
        }
        break;
    }
    case TTH_TSTMT_EVALUATE:
        text_indent(t, depth);
        tth_strbuf_puts(t, "(void)");
        emit_expr(g, s->u.eval.value);
        tth_strbuf_puts(t, ";\n");
        break;
    case TTH_TSTMT_CALL_FUNC: emit_call(g, fx, s, depth); break;
    default: cg_fail(g, TTH_EINVAL, "unknown statement kind %d", (int)s->kind); break;
    }
}

static int allocates_or_calls(void *ctx, const tth_tstmt *s)
{
    (void)ctx;
    return s->kind == TTH_TSTMT_ALLOCATE || s->kind == TTH_TSTMT_CALL_FUNC;
}

/* Does the statement use the workspace (an allocation, a call)? */
static int uses_workspace(const tth_tstmt *s)
{
    tth_tir_visitor v = {.stmt = allocates_or_calls};
    return tth_tir_walk(s, &v);
}

static int calls_func(void *ctx, const tth_tstmt *s)
{
    (void)ctx;
    return s->kind == TTH_TSTMT_CALL_FUNC;
}

static int has_calls(const tth_tstmt *s)
{
    tth_tir_visitor v = {.stmt = calls_func};
    return tth_tir_walk(s, &v);
}

/* The buffers collect_buffers gathers: WORKSPACE ones, or only `only`, in first-use order. */
typedef struct ws_list {
    const tth_tbuffer *only;
    const tth_tbuffer **v;
    size_t n;
    int oom;
} ws_list;

static void ws_add(ws_list *l, const tth_tbuffer *b)
{
    if (l->only ? b != l->only : b->scope != TTH_SCOPE_WORKSPACE)
        return;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == b)
            return;
    const tth_tbuffer **nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    if (!nv) {
        l->oom = 1;
        return;
    }
    l->v = nv;
    nv[l->n++] = b;
}

static int ws_stmt(void *ctx, const tth_tstmt *s)
{
    if (s->kind == TTH_TSTMT_STORE)
        ws_add(ctx, s->u.store.buf);
    for (size_t i = 0; s->kind == TTH_TSTMT_CALL_FUNC && i < s->u.call.nargs; i++)
        ws_add(ctx, s->u.call.args[i]);
    return 0;
}

static int ws_expr(void *ctx, const tth_texpr *e)
{
    if (e->kind == TTH_TEXPR_LOAD || e->kind == TTH_TEXPR_ADDRESS_OF)
        ws_add(ctx, e->u.load.buf);
    return 0;
}

/* The WORKSPACE buffers s uses (b NULL), or b alone when s uses it, in first-use order. */
static void collect_buffers(const tth_tstmt *s, const tth_tbuffer *b, const tth_tbuffer ***v,
                            size_t *n, int *oom)
{
    ws_list l = {.only = b, .v = *v, .n = *n};
    tth_tir_visitor vis = {.stmt = ws_stmt, .expr = ws_expr, .ctx = &l};
    tth_tir_walk(s, &vis);
    *v = l.v;
    *n = l.n;
    *oom |= l.oom;
}

/* f's signature; with sh, that of the shared body of f's class (docs/tir.md): named
 * <f>__shared, taking the workspace only when it passes it on (its slices among the data are
 * parts of it, so those are not restrict then), then its data buffers. */
static void emit_signature(cg *g, const cg_sig *sig, int bind, const tth_tir_share *sh)
{
    tth_strbuf *t = &g->out;
    const tth_prim_func *f = sig->f;
    tth_strbuf_printf(t, "int32_t %s%s(", f->name, sh ? "__shared" : "");
    for (size_t i = 0; i < f->nparams; i++) {
        const tth_tbuffer *p = f->params[i];
        const char *ct = ctype_storage(p->dtype);
        const char *n = bind ? cg_bind(g, p, p->name, p->id) : p->name;
        if (!ct) {
            cg_fail(g, TTH_ETYPE, "parameter '%s' has an invalid dtype", p->name);
            return;
        }
        tth_strbuf_printf(t, "%s%s%s *restrict %s", i ? ", " : "", sig->written[i] ? "" : "const ", ct, n);
    }
    int ws = !sh || has_calls(f->body);
    if (ws)
        tth_strbuf_puts(t, f->nparams ? ", uint8_t *" : "uint8_t *");
    if (ws)
        tth_strbuf_puts(t, sh ? "ws" : "restrict ws");
    for (size_t k = 0; sh && k < sh->ndata; k++) {
        const tth_tbuffer *d = sh->data[k];
        char base[64];
        snprintf(base, sizeof base, "data%zu", k);
        const char *n = bind ? cg_bind_new(g, d, base, d->id) : base;
        int c = d->scope == TTH_SCOPE_CONST;
        tth_strbuf_printf(t, "%s%s%s *%s%s", k || ws || f->nparams ? ", " : "", c ? "const " : "",
                          ctype_storage(d->dtype), c || !ws ? "restrict " : "", n);
    }
    if (!ws && !f->nparams && !(sh && sh->ndata))
        tth_strbuf_puts(t, "void");
    tth_strbuf_puts(t, ")");
}

/* f; with sh, the shared body of f's class (docs/tir.md): f's code with its data buffers
 * (constants, workspace slices) as parameters after the workspace */
static void emit_func(cg *g, const cg_fctx *fx, const cg_sig *sig, const tth_tir_share *sh)
{
    tth_strbuf *t = &g->out;
    const tth_prim_func *f = sig->f;
    size_t mark = g->nnames;
    g->func = f;
    g->share_data = sh ? sh->data : NULL;
    g->nshare_data = sh ? sh->ndata : 0;
    const char *op = NULL;
    if (f->attrs && json_is_object(f->attrs))
        op = json_string_value(json_object_get(f->attrs, "op"));
    if (sh)
        tth_strbuf_puts(t, "/* the code of the functions that call it, each with its own data */\n");
    else if (op)
        tth_strbuf_printf(t, "/* %s */\n", op);
    emit_signature(g, sig, 1, sh);
    tth_strbuf_puts(t, "\n{\n");
    if (!sh && !uses_workspace(f->body))
        tth_strbuf_puts(t, "    (void)ws;\n");
    if (has_calls(f->body))
        tth_strbuf_puts(t, "    int32_t rc;\n");
    emit_stmt(g, fx, f->body, 1, 1);
    tth_strbuf_puts(t, "    return 0;\n}\n\n");
    cg_names_pop_to(g, mark);
    g->share_data = NULL;
    g->nshare_data = 0;
    g->func = NULL;
}

/* A function of such a class: the shared body on its own parameters and data. */
static void emit_wrapper(cg *g, const cg_sig *sig, const tth_prim_func *first, const tth_tir_share *sh)
{
    tth_strbuf *t = &g->out;
    const tth_prim_func *f = sig->f;
    size_t mark = g->nnames;
    g->func = f;
    const char *op = f->attrs && json_is_object(f->attrs) ? json_string_value(json_object_get(f->attrs, "op")) : NULL;
    if (op)
        tth_strbuf_printf(t, "/* %s */\n", op);
    emit_signature(g, sig, 1, NULL);
    tth_strbuf_printf(t, "\n{\n    (void)ws;\n    return %s__shared(", first->name);
    size_t nargs = 0;
    for (size_t i = 0; i < f->nparams; i++, nargs++) {
        if (nargs)
            tth_strbuf_puts(t, ", ");
        emit_buffer_ref(g, f->params[i]);
    }
    if (has_calls(first->body))
        tth_strbuf_puts(t, nargs++ ? ", ws" : "ws");
    for (size_t k = 0; k < sh->ndata; k++, nargs++) {
        const tth_tbuffer *d = sh->data[k];
        if (nargs)
            tth_strbuf_puts(t, ", ");
        if (d->scope == TTH_SCOPE_CONST) {
            emit_buffer_ref(g, d);
        } else if (d->offset >= 0) {
            tth_strbuf_printf(t, "(%s *)(ws + %" PRId64 ")", ctype_storage(d->dtype), d->offset);
        } else {
            cg_fail(g, TTH_EINVAL, "buffer '%s' has no workspace offset: memory planning must run before code "
                    "generation", d->name);
        }
    }
    tth_strbuf_puts(t, ");\n}\n\n");
    cg_names_pop_to(g, mark);
    g->func = NULL;
}

/* The entry: the interface structs' fields are the INPUT/OUTPUT params, in order. */
static void emit_entry(cg *g, const cg_fctx *fx, const tth_prim_func *f)
{
    tth_strbuf *t = &g->out;
    size_t mark = g->nnames;
    g->func = f;
    g->in_entry = 1;
    const char *m = g->model;
    tth_strbuf_printf(t, "int32_t %s(const struct tth_%s_inputs *inputs, "
                "struct tth_%s_outputs *outputs, void *workspace)\n{\n", f->name, m, m);
    tth_strbuf_puts(t, "    uint8_t *ws = (uint8_t *)workspace;\n");
    if (g->nbound)
        tth_strbuf_printf(t, "    if (!__atomic_load_n(&%s" TTH_BIND_SYM_FLAG ", __ATOMIC_ACQUIRE)) {\n"
                    "        int32_t bind_status = %s" TTH_BIND_SYM_ENSURE "();\n"
                    "        if (bind_status != 0)\n            return bind_status;\n    }\n",
                    g->bind_prefix, g->bind_prefix);
    if (has_calls(f->body))
        tth_strbuf_puts(t, "    int32_t rc;\n");
    for (size_t i = 0; i < f->nparams; i++) {
        const tth_tbuffer *p = f->params[i];
        const char *ct = ctype_storage(p->dtype);
        if (!ct) {
            cg_fail(g, TTH_ETYPE, "parameter '%s' has an invalid dtype", p->name);
            break;
        }
        if (p->scope != TTH_SCOPE_INPUT && p->scope != TTH_SCOPE_OUTPUT) {
            cg_fail(g, TTH_EINVAL, "entry parameter '%s' is neither a model input nor output",
                    p->name);
            break;
        }
        int in = p->scope == TTH_SCOPE_INPUT;
        const tth_tbuffer **used = NULL;
        size_t nused = 0;
        int oom = 0;
        collect_buffers(f->body, p, &used, &nused, &oom);
        free(used);
        if (nused == 0)
            continue; /* an input nothing reads (an unused local would warn) */
        const char *n = cg_bind(g, p, p->name, p->id);
        tth_strbuf_printf(t, "    %s%s *%s = (%s%s *)%s->%s;\n", in ? "const " : "", ct, n,
                    in ? "const " : "", ct, in ? "inputs" : "outputs", p->name);
    }
    const tth_tbuffer **wsb = NULL;
    size_t nws = 0;
    int oom = 0;
    collect_buffers(f->body, NULL, &wsb, &nws, &oom);
    if (oom)
        cg_fail(g, TTH_ENOMEM, "out of memory");
    for (size_t i = 0; i < nws && !g->err; i++) {
        const char *n = cg_bind(g, wsb[i], wsb[i]->name, wsb[i]->id);
        emit_workspace_ptr(g, wsb[i], n, 1, 0);
    }
    free(wsb);
    if (!uses_workspace(f->body) && nws == 0)
        tth_strbuf_puts(t, "    (void)ws;\n");
    emit_stmt(g, fx, f->body, 1, 1);
    tth_strbuf_puts(t, "    return 0;\n}\n");
    cg_names_pop_to(g, mark);
    g->func = NULL;
    g->in_entry = 0;
}

/* ---- constants -------------------------------------------------------------------------------- */

static void emit_const(cg *g, const tth_tbuffer *b, const char *name)
{
    tth_strbuf *t = &g->out;
    const tth_tensor *ten = b->data;
    if (!ten || !ten->data) {
        cg_fail(g, TTH_EINVAL, "constant buffer '%s' has no data", b->name);
        return;
    }
    int64_t n = tth_tbuffer_numel(b);
    size_t esz = tth_dtype_size(b->dtype);
    if (n < 0 || esz == 0 || (size_t)n * esz > ten->nbytes) {
        cg_fail(g, TTH_EINVAL, "constant buffer '%s' holds %zu bytes, its shape needs more",
                b->name, ten->nbytes);
        return;
    }
    char shape[128];
    tth_ttype tt = {.dtype = b->dtype, .rank = b->rank};
    memcpy(tt.shape, b->shape, sizeof tt.shape);
    tth_ttype_format(&tt, shape, sizeof shape);
    tth_strbuf_printf(t, "/* %s: %s */\n", b->name, shape);
    /* a source split in parts (tth__c_generate) repeats the constants in each part: a part whose
     * functions do not read one must not warn */
    tth_strbuf_printf(t, "static const %s %s[%" PRId64 "] TTH_ALIGNED(%u)%s = {", ctype_storage(b->dtype), name,
                n > 0 ? n : 1, b->align >= 16 ? b->align : 16, g->bind_prefix ? " TTH_MAYBE_UNUSED" : "");
    if (n == 0)
        tth_strbuf_puts(t, "0");
    const unsigned char *p = ten->data;
    for (int64_t i = 0; i < n; i++) {
        tth_strbuf_puts(t, i % 8 == 0 ? "\n    " : " ");
        const void *ep = p + (size_t)i * esz;
        switch (b->dtype) {
        case TTH_F32: {
            float v;
            char buf[64];
            memcpy(&v, ep, 4);
            if (isfinite(v) && n > CG_DECIMAL_CONST_MAX) {
                tth_strbuf_putn(t, buf, hexfloat32(buf, v));
            } else if (isfinite(v)) {
                shortest_decimal(buf, sizeof buf, (double)v, 1);
                tth_strbuf_printf(t, "%sf", buf);
            } else {
                emit_float_literal(t, TTH_F32, v);
            }
            break;
        }
        case TTH_F64: {
            double v;
            char buf[64];
            memcpy(&v, ep, 8);
            if (isfinite(v)) {
                shortest_decimal(buf, sizeof buf, v, 0);
                tth_strbuf_puts(t, buf);
            } else {
                emit_float_literal(t, TTH_F64, v);
            }
            break;
        }
        case TTH_F16:
        case TTH_BF16:
        case TTH_U16: {
            uint16_t v;
            memcpy(&v, ep, 2);
            tth_strbuf_printf(t, "%uu", (unsigned)v);
            break;
        }
        case TTH_I8: tth_strbuf_printf(t, "%d", (int)*(const int8_t *)ep); break;
        case TTH_U8:
        case TTH_BOOL: tth_strbuf_printf(t, "%u", (unsigned)*(const uint8_t *)ep); break;
        case TTH_I16: {
            int16_t v;
            memcpy(&v, ep, 2);
            tth_strbuf_printf(t, "%d", (int)v);
            break;
        }
        case TTH_I32: {
            int32_t v;
            memcpy(&v, ep, 4);
            if (v == INT32_MIN)
                tth_strbuf_puts(t, "(-INT32_MAX - 1)");
            else
                tth_strbuf_printf(t, "%" PRId32, v);
            break;
        }
        case TTH_U32: {
            uint32_t v;
            memcpy(&v, ep, 4);
            emit_int_literal(t, TTH_U32, v);
            break;
        }
        case TTH_I64: {
            int64_t v;
            memcpy(&v, ep, 8);
            if (v == INT64_MIN)
                tth_strbuf_puts(t, "(-INT64_MAX - 1)");
            else
                tth_strbuf_printf(t, "INT64_C(%" PRId64 ")", v);
            break;
        }
        case TTH_U64: {
            uint64_t v;
            memcpy(&v, ep, 8);
            emit_int_literal(t, TTH_U64, (int64_t)v);
            break;
        }
        default: cg_fail(g, TTH_ETYPE, "constant '%s' has an invalid dtype", b->name); return;
        }
        if (i + 1 < n)
            tth_strbuf_puts(t, ",");
    }
    tth_strbuf_puts(t, "\n};\n\n");
}

/* ---- the prologue: includes, portability macros, helpers ------------------------------------- */

static void emit_prologue(cg *g)
{
    tth_strbuf *t = &g->out;
    tth_strbuf_printf(t, "/* Generated by tth's c-host plugin %s. Do not edit.\n"
                " * Portable C99: compile each %s_lib<N>.c with e.g. `cc -std=c99 -O2 -c`. */\n",
                tth_descriptor.plugin_version, g->model);
    tth_strbuf_puts(t, "#include <stddef.h>\n#include <stdint.h>\n");
    tth_strbuf_puts(t, "#include <math.h>\n");
    int need_bits = 0;
    for (int a = 0; a < DTYPE_SLOTS; a++)
        for (int b = 0; b < DTYPE_SLOTS; b++)
            need_bits |= g->bits[a][b];
    if (g->need_f16_load || g->need_f16_store || g->need_bf16_load || g->need_bf16_store || need_bits)
        tth_strbuf_puts(t, "#include <string.h>\n");
    tth_strbuf_puts(t, "\n"
                 "#if defined(__GNUC__) || defined(__clang__)\n"
                 "#define TTH_ALIGNED(n) __attribute__((aligned(n)))\n"
                 "#define TTH_MAYBE_UNUSED __attribute__((unused))\n"
                 "#else\n"
                 "#define TTH_ALIGNED(n)\n"
                 "#define TTH_MAYBE_UNUSED\n"
                 "#endif\n"
                 "/* no loop-carried dependences: GCC's ivdep; clang vectorizes restrict loops\n"
                 " * without being asked (and warns when a forced vectorization fails) */\n"
                 "#if defined(__GNUC__) && !defined(__clang__)\n"
                 "#define TTH_IVDEP _Pragma(\"GCC ivdep\")\n"
                 "#else\n"
                 "#define TTH_IVDEP\n"
                 "#endif\n\n");
    /* each helper TTH_MAYBE_UNUSED: a file of a module in parts repeats them all, and may call
     * none of one (clang's -Wunused-function) */
    static const tth_dtype all[] = {TTH_F32, TTH_F64, TTH_I8,  TTH_I16, TTH_I32,
                                    TTH_I64, TTH_U8,  TTH_U16, TTH_U32, TTH_U64, TTH_BOOL};
    /* reinterpret: the bits of one type read as another of its size, through memcpy (C99's
     * defined way; compilers make it a register move) */
    for (int to = 0; to < DTYPE_SLOTS; to++)
        for (int from = 0; from < DTYPE_SLOTS; from++)
            if (g->bits[to][from])
                tth_strbuf_printf(t, "static inline TTH_MAYBE_UNUSED %s tth_as_%s_%s(%s x) { %s r; memcpy(&r, &x, sizeof r); "
                                  "return r; }\n", ctype_storage((tth_dtype)to), dtype_tag((tth_dtype)to),
                                  dtype_tag((tth_dtype)from), ctype_storage((tth_dtype)from), ctype_storage((tth_dtype)to));
    /* the four-byte dot products of int32 lanes (DOT4_US / DOT4_SS, docs/tir.md) */
    for (int ss = 0; ss < 2; ss++)
        if (g->need_dot4[ss])
            tth_strbuf_printf(t, "static inline TTH_MAYBE_UNUSED int32_t tth_dot4_%s(int32_t acc, int32_t a, int32_t b)\n{\n"
                              "    int64_t s = acc;\n"
                              "    for (int j = 0; j < 4; j++)\n"
                              "        s += (int64_t)(%s)((uint32_t)a >> (8 * j)) * (int8_t)((uint32_t)b >> (8 * j));\n"
                              "    return (int32_t)(uint32_t)(uint64_t)s;\n}\n",
                              ss ? "ss" : "us", ss ? "int8_t" : "uint8_t");
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        tth_dtype d = all[k];
        if (d == TTH_BOOL && (g->help[HELP_MIN][TTH_U8] || g->help[HELP_MAX][TTH_U8]))
            continue; /* bool shares uint8_t's helpers */
        const char *ct = ctype_storage(d), *tg = dtype_tag(d);
        if (g->help[HELP_MIN][d])
            tth_strbuf_printf(t, "static inline TTH_MAYBE_UNUSED %s tth_min_%s(%s a, %s b) { return a < b ? a : b; }\n",
                        ct, tg, ct, ct);
        if (g->help[HELP_MAX][d])
            tth_strbuf_printf(t, "static inline TTH_MAYBE_UNUSED %s tth_max_%s(%s a, %s b) { return a > b ? a : b; }\n",
                        ct, tg, ct, ct);
        if (g->help[HELP_FLOORDIV][d]) {
            if (dtype_is_signed_int(d))
                tth_strbuf_printf(t, "static inline TTH_MAYBE_UNUSED %s tth_floordiv_%s(%s a, %s b)\n{\n"
                            "    %s q = (%s)(a / b);\n"
                            "    return (%s)((a %% b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q);\n}\n",
                            ct, tg, ct, ct, ct, ct, ct);
            else
                tth_strbuf_printf(t, "static inline TTH_MAYBE_UNUSED %s tth_floordiv_%s(%s a, %s b) { return (%s)(a / b); }\n",
                            ct, tg, ct, ct, ct);
        }
        if (g->help[HELP_FLOORMOD][d] && !dtype_is_float(d)) {
            if (dtype_is_signed_int(d))
                tth_strbuf_printf(t, "static inline TTH_MAYBE_UNUSED %s tth_floormod_%s(%s a, %s b)\n{\n"
                            "    %s r = (%s)(a %% b);\n"
                            "    return (%s)((r != 0 && ((r < 0) != (b < 0))) ? r + b : r);\n}\n",
                            ct, tg, ct, ct, ct, ct, ct);
            else
                tth_strbuf_printf(t, "static inline TTH_MAYBE_UNUSED %s tth_floormod_%s(%s a, %s b) { return (%s)(a %% b); }\n",
                            ct, tg, ct, ct, ct);
        }
    }
    /* float floormod: the remainder with the sign of the divisor */
    if (g->help[HELP_FLOORMOD][TTH_F32])
        tth_strbuf_puts(t, "static inline TTH_MAYBE_UNUSED float tth_floormod_f32(float a, float b)\n{\n"
                     "    float r = fmodf(a, b);\n"
                     "    return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;\n}\n");
    if (g->help[HELP_FLOORMOD][TTH_F64])
        tth_strbuf_puts(t, "static inline TTH_MAYBE_UNUSED double tth_floormod_f64(double a, double b)\n{\n"
                     "    double r = fmod(a, b);\n"
                     "    return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;\n}\n");
    if (g->need_f16_load) {
        /* IEEE binary16 <-> binary32, round to nearest even, NaN and infinity kept */
        tth_strbuf_puts(t,
                  "static inline TTH_MAYBE_UNUSED float tth_f16_to_f32(uint16_t h)\n{\n"
                  "    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;\n"
                  "    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;\n"
                  "    float f;\n"
                  "    if (exp == 0x1fu) {\n"
                  "        bits = sign | 0x7f800000u | (man << 13);\n"
                  "    } else if (exp != 0) {\n"
                  "        bits = sign | ((exp + 112u) << 23) | (man << 13);\n"
                  "    } else if (man == 0) {\n"
                  "        bits = sign;\n"
                  "    } else {\n"
                  "        f = (float)man * 5.9604644775390625e-8f; /* man * 2^-24 */\n"
                  "        return sign ? -f : f;\n"
                  "    }\n"
                  "    memcpy(&f, &bits, sizeof f);\n"
                  "    return f;\n}\n");
    }
    if (g->need_f16_store) {
        tth_strbuf_puts(t,
                  "static inline TTH_MAYBE_UNUSED uint16_t tth_f32_to_f16(float f)\n{\n"
                  "    uint32_t x, sign, exp, man;\n"
                  "    memcpy(&x, &f, sizeof x);\n"
                  "    sign = (x >> 16) & 0x8000u;\n"
                  "    exp = (x >> 23) & 0xffu;\n"
                  "    man = x & 0x7fffffu;\n"
                  "    if (exp == 0xffu)\n"
                  "        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));\n"
                  "    if (exp > 142u)\n"
                  "        return (uint16_t)(sign | 0x7c00u);\n"
                  "    if (exp > 112u) {\n"
                  "        uint32_t h = ((exp - 112u) << 10) | (man >> 13);\n"
                  "        uint32_t rest = man & 0x1fffu;\n"
                  "        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))\n"
                  "            h++;\n"
                  "        return (uint16_t)(sign | h);\n"
                  "    }\n"
                  "    if (exp < 102u)\n"
                  "        return (uint16_t)sign;\n"
                  "    {\n"
                  "        uint32_t m = man | 0x800000u, shift = 126u - exp;\n"
                  "        uint32_t h = m >> shift, rest = m & ((1u << shift) - 1u);\n"
                  "        uint32_t half = 1u << (shift - 1u);\n"
                  "        if (rest > half || (rest == half && (h & 1u)))\n"
                  "            h++;\n"
                  "        return (uint16_t)(sign | h);\n"
                  "    }\n}\n");
    }
    /* bfloat16 <-> binary32, the same conversions as libtth's tth_bf16_to_f32/tth_f32_to_bf16
     * (docs/tir.md, "float16 and bfloat16"): generated code does not link libtth, so these and
     * the float16 ones above are the only other copies. */
    if (g->need_bf16_load)
        tth_strbuf_puts(t,
                  "static inline TTH_MAYBE_UNUSED float tth_bf16_to_f32(uint16_t b)\n{\n"
                  "    uint32_t bits = (uint32_t)b << 16;\n"
                  "    float f;\n"
                  "    memcpy(&f, &bits, sizeof f);\n"
                  "    return f;\n}\n");
    if (g->need_bf16_store)
        tth_strbuf_puts(t,
                  "static inline TTH_MAYBE_UNUSED uint16_t tth_f32_to_bf16(float f)\n{\n"
                  "    uint32_t x;\n"
                  "    memcpy(&x, &f, sizeof x);\n"
                  "    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN stays NaN (quiet) */\n"
                  "        return (uint16_t)((x >> 16) | 0x40u);\n"
                  "    x += 0x7fffu + ((x >> 16) & 1u); /* to nearest, ties to even */\n"
                  "    return (uint16_t)(x >> 16);\n}\n");
    tth_strbuf_puts(t, "\n");
}

static void emit_interface(cg *g, const tth_prim_func *entry)
{
    tth_strbuf *t = &g->out;
    const char *m = g->model;
    for (int out = 0; out < 2; out++) {
        tth_strbuf_printf(t, "struct tth_%s_%s {\n", m, out ? "outputs" : "inputs");
        int any = 0;
        for (size_t i = 0; i < entry->nparams; i++) {
            const tth_tbuffer *p = entry->params[i];
            if (p->scope == (out ? TTH_SCOPE_OUTPUT : TTH_SCOPE_INPUT)) {
                tth_strbuf_printf(t, "    void *%s;\n", p->name);
                any = 1;
            }
        }
        if (!any)
            tth_strbuf_puts(t, "    void *unused_;\n");
        tth_strbuf_puts(t, "};\n");
    }
    tth_strbuf_printf(t, "int32_t %s(const struct tth_%s_inputs *inputs, "
                "struct tth_%s_outputs *outputs, void *workspace);\n\n", entry->name, m, m);
}

/* ---- the module ------------------------------------------------------------------------------- */

/* The model name the entry's interface is named after: attrs.model, else the entry's name
 * without "tth_" and "_run". */
static int entry_model_name(const tth_prim_func *entry, char *buf, size_t len)
{
    const char *m = NULL;
    if (entry->attrs && json_is_object(entry->attrs))
        m = json_string_value(json_object_get(entry->attrs, "model"));
    if (m) {
        snprintf(buf, len, "%s", m);
        return 0;
    }
    size_t n = strlen(entry->name);
    if (n > 8 && strncmp(entry->name, "tth_", 4) == 0 && strcmp(entry->name + n - 4, "_run") == 0) {
        snprintf(buf, len, "%.*s", (int)(n - 8), entry->name + 4);
        return 0;
    }
    return -1;
}

/* Which constants are bound at run time: every one of at least TTH_BIND_MIN_BYTES bytes with a name,
 * loaded with the alignment its array would have had. */
static int plan_binding(cg *g)
{
    g->bound = calloc(g->nconsts ? g->nconsts : 1, sizeof *g->bound);
    g->bound_align = calloc(g->nconsts ? g->nconsts : 1, sizeof *g->bound_align);
    if (!g->bound || !g->bound_align)
        return tth_diag_set(g->diag, TTH_ENOMEM, "c-host tir_to_runtime", "out of memory");
    for (size_t i = 0; i < g->nconsts; i++) {
        const tth_tbuffer *b = g->consts[i];
        if (tth_tbuffer_nbytes(b) < TTH_BIND_MIN_BYTES || !b->name || !*b->name || !b->data)
            continue;
        unsigned a = b->align >= 16 ? b->align : 16;
        g->bound_align[g->nbound] = a > 64 ? 64 : a;
        g->bound[g->nbound++] = b;
    }
    return 0;
}

/* Whether the code binds its large constants at run time (docs/artifact.md, "Constants bound at
 * run time"): for the plain `c` target, the C compiled for this machine (no mtriple or mcpu, not
 * a member of a composite target), which is little-endian like the parameters file. Code for a
 * named CPU (Cortex-M and other boards without files) keeps them in its read-only data. */
static int binds_constants(const json_t *target)
{
    const char *kind = json_string_value(json_object_get(target, "kind"));
    const uint16_t one = 1;
    return kind && strcmp(kind, "c") == 0 && !json_object_get(target, "mtriple") &&
           !json_object_get(target, "mcpu") && *(const uint8_t *)&one == 1;
}

/* ---- the source, in parts compiled in parallel -------------------------------------------- */

typedef struct cg_range {
    size_t start, end; /* of one function's text in cg.out */
} cg_range;

/* Function text per part at most: a module with more is split in as few parts as keep each
 * below it, so the host build compiles them on all cores without paying each part's fixed cost
 * (compiler start, the repeated declarations) too often (docs/artifact.md, "C sources"). */
#define CG_PART_BYTES (64u * 1024u)
#define CG_MAX_PARTS 16u

/* The part of each function: the largest first, each to the part with the least text so far
 * (tth_tir_balance); a single part when constants are in the code (a named CPU's C, one file to
 * hand to its toolchain) or the code is small. 0 when out of memory. */
static size_t plan_parts(const cg *g, const cg_range *r, size_t n, unsigned *part)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += r[i].end - r[i].start;
    size_t nparts = g->bind_prefix ? (total + CG_PART_BYTES - 1) / CG_PART_BYTES : 1;
    if (nparts > n)
        nparts = n;
    if (nparts > CG_MAX_PARTS)
        nparts = CG_MAX_PARTS;
    if (nparts < 1)
        nparts = 1; /* no function at all: one file of declarations */
    size_t *size = malloc((n ? n : 1) * sizeof *size);
    if (!size)
        return 0;
    for (size_t i = 0; i < n; i++)
        size[i] = r[i].end - r[i].start;
    int rc = tth_tir_balance(size, n, nparts, NULL, part);
    free(size);
    return rc ? 0 : nparts;
}

/* `<model>_lib<k>.c` for each part: the common text (helpers, interface, constants,
 * prototypes), the flag of bound constants in part 0 only, then its functions in module order;
 * their names appended to sources. 0, or an error code (diag set). */
static int add_parts(cg *g, size_t common, const cg_range *r, size_t n, tth_runtime_module *out, json_t *sources)
{
    unsigned *part = calloc(n ? n : 1, sizeof *part);
    size_t nparts = part ? plan_parts(g, r, n, part) : 0;
    int rc = nparts ? 0 : tth_diag_set(g->diag, TTH_ENOMEM, "c-host tir_to_runtime", "out of memory");
    for (size_t p = 0; p < nparts && rc == 0; p++) {
        tth_strbuf t = {0};
        tth_strbuf_putn(&t, g->out.s, common);
        if (p == 0 && g->nbound)
            tth_strbuf_printf(&t, "int32_t %s" TTH_BIND_SYM_FLAG " = 0;\n\n", g->bind_prefix);
        for (size_t i = 0; i < n; i++)
            if (part[i] == p)
                tth_strbuf_putn(&t, g->out.s + r[i].start, r[i].end - r[i].start);
        char fname[200];
        snprintf(fname, sizeof fname, "%s_lib%zu.c", g->model, p);
        if (t.failed || !sources || json_array_append_new(sources, json_string(fname)) != 0)
            rc = tth_diag_set(g->diag, TTH_ENOMEM, "c-host tir_to_runtime", "out of memory");
        else
            rc = tth_runtime_module_add_file(out, fname, TTH_FILE_C_SOURCE, t.s, t.n, g->diag);
        tth_strbuf_free(&t);
    }
    free(part);
    return rc;
}

static int tth__c_generate(const tth_tir_module *mod, const json_t *target, tth_runtime_module *out,
                           tth_diag *diag)
{
    cg g;
    memset(&g, 0, sizeof g);
    g.mod = mod;
    g.diag = diag;
    const tth_prim_func *entry = mod->entry ? tth_tir_module_find(mod, mod->entry) : NULL;
    char model[128] = "default";
    if (entry && entry_model_name(entry, model, sizeof model) != 0)
        return tth_diag_set(diag, TTH_EINVAL, "c-host tir_to_runtime",
                            "the entry '%s' is not named tth_<model>_run and has no \"model\" attr",
                            entry->name);
    g.model = model;
    char bind_prefix[160];
    snprintf(bind_prefix, sizeof bind_prefix, "tth_%s_c", model);
    g.bind_prefix = binds_constants(target) ? bind_prefix : NULL;

    cg_sig *sigs = calloc(mod->nfuncs ? mod->nfuncs : 1, sizeof *sigs);
    if (!sigs)
        return tth_diag_set(diag, TTH_ENOMEM, "c-host tir_to_runtime", "out of memory");
    tth_tir_share *share = NULL;
    size_t bodies = 0;
    int rc = 0;
    for (size_t i = 0; i < mod->nfuncs; i++) {
        const tth_prim_func *f = mod->funcs[i];
        sigs[i].f = f;
        sigs[i].written = calloc(f->nparams ? f->nparams : 1, 1);
        if (!sigs[i].written) {
            rc = tth_diag_set(diag, TTH_ENOMEM, "c-host tir_to_runtime", "out of memory");
            goto done;
        }
        mark_written(f->body, f, sigs[i].written);
        if (f->attrs && json_is_true(json_object_get(f->attrs, "extern"))) {
            /* defined by another module: only the region's inputs are known to be read-only */
            json_int_t nin = json_integer_value(json_object_get(f->attrs, "inputs"));
            for (size_t p = 0; p < f->nparams; p++)
                sigs[i].written[p] = (json_int_t)p >= nin;
        }
        for (size_t p = 0; p < f->nparams; p++)
            scan_buffer(&g, f->params[p]);
        scan(&g, f->body);
    }
    if (g.err) {
        rc = g.err;
        goto done;
    }

    emit_prologue(&g);
    if (entry)
        emit_interface(&g, entry);

    /* constants: global names first, so function-local names avoid them; the large ones bound
     * at run time are their slot's pointer */
    if (g.bind_prefix && entry)
        rc = plan_binding(&g);
    if (rc)
        goto done;
    if (g.nbound)
        tth_strbuf_printf(&g.out, "/* constants bound at run time (%s_bind.c) */\nextern const void *%s" TTH_BIND_SYM_SLOTS "[];\n"
                    "extern int32_t %s" TTH_BIND_SYM_FLAG ";\nint32_t %s" TTH_BIND_SYM_ENSURE "(void);\n\n",
                    model, g.bind_prefix, g.bind_prefix, g.bind_prefix);
    /* plan_binding listed the bound constants in this order: slot k is the k-th of them */
    for (size_t i = 0, k = 0; i < g.nconsts; i++) {
        const char *n = cg_bind(&g, g.consts[i], g.consts[i]->name, g.consts[i]->id);
        if (k < g.nbound && g.bound[k] == g.consts[i])
            tth_strbuf_printf(&g.out, "#define %s ((const %s *)%s" TTH_BIND_SYM_SLOTS "[%zu])\n", n,
                        ctype_storage(g.consts[i]->dtype), g.bind_prefix, k++);
        else
            emit_const(&g, g.consts[i], n);
    }
    if (g.nbound)
        tth_strbuf_puts(&g.out, "\n");
    g.nglobal_names = g.nnames;

    /* functions with the same code share one body (docs/tir.md) */
    rc = tth_tir_share_plan(mod, entry, 0, C_SHARE_MAX_DATA, &share, &bodies);
    if (rc) {
        tth_diag_set(diag, rc, "c-host tir_to_runtime", "out of memory planning shared code");
        goto done;
    }
    hook_protos hp = {.g = &g};
    tth_tir_visitor hv = {.expr = proto_hook, .ctx = &hp};
    for (size_t i = 0; i < mod->nfuncs; i++)
        if (mod->funcs[i]->body)
            tth_tir_walk(mod->funcs[i]->body, &hv);
    /* prototypes, so functions may appear in module order */
    int nproto = 0;
    for (size_t i = 0; i < mod->nfuncs; i++) {
        if (sigs[i].f == entry)
            continue;
        emit_signature(&g, &sigs[i], 0, NULL);
        tth_strbuf_puts(&g.out, ";\n");
        if (share[i].rep == i && share[i].members > 1) {
            emit_signature(&g, &sigs[i], 0, &share[i]);
            tth_strbuf_puts(&g.out, ";\n");
        }
        nproto++;
    }
    if (nproto)
        tth_strbuf_puts(&g.out, "\n");

    /* the functions, each a range of the text after the common part */
    size_t common = g.out.n, nranges = 0;
    cg_range *ranges = calloc(mod->nfuncs + 1, sizeof *ranges);
    if (!ranges) {
        rc = tth_diag_set(diag, TTH_ENOMEM, "c-host tir_to_runtime", "out of memory");
        goto done;
    }
    cg_fctx fx = {.sigs = sigs, .nsigs = mod->nfuncs};
    for (size_t i = 0; i < mod->nfuncs && !g.err; i++)
        if (sigs[i].f != entry && !(sigs[i].f->attrs && json_is_true(json_object_get(sigs[i].f->attrs, "extern")))) {
            const tth_tir_share *first = &share[share[i].rep];
            ranges[nranges].start = g.out.n;
            if (first->members < 2) {
                emit_func(&g, &fx, &sigs[i], NULL); /* an extern PrimFunc (tth/tir.h) gets only its prototype */
            } else {
                if (share[i].rep == i)
                    emit_func(&g, &fx, &sigs[i], &share[i]);
                emit_wrapper(&g, &sigs[i], mod->funcs[share[i].rep], &share[i]);
            }
            ranges[nranges++].end = g.out.n;
        }
    if (entry && !g.err) {
        ranges[nranges].start = g.out.n;
        emit_entry(&g, &fx, entry);
        ranges[nranges++].end = g.out.n;
    }

    if (!g.err && g.out.failed)
        cg_fail(&g, TTH_ENOMEM, "out of memory writing C source");
    json_t *sources = g.err ? NULL : json_array();
    if (!g.err)
        rc = add_parts(&g, common, ranges, nranges, out, sources);
    free(ranges);
    if (g.err || rc) {
        json_decref(sources);
        rc = g.err ? g.err : rc;
        goto done;
    }
    if (g.nbound)
        rc = tth_runtime_module_add_binding(out, model, g.bind_prefix, g.bound, g.bound_align, g.nbound,
                                            TTH_BIND_E_UNBOUND, diag);
    if (rc == 0) {
        json_t *meta = json_pack("{s:s, s:O}", "language", "c99", "sources", sources);
        if (entry && meta)
            json_object_set_new(meta, "entry_symbols", json_pack("[s]", entry->name));
        if (g.nbound && meta) {
            char text[300];
            snprintf(text, sizeof text, "%s" TTH_BIND_SYM_STATUS_TEXT, g.bind_prefix);
            json_object_set_new(meta, "bind_constants",
                                tth_binding_meta(g.bind_prefix, model, g.bound, g.nbound, TTH_BIND_E_UNBOUND));
            json_object_set_new(meta, "status_text_symbol", json_string(text));
        }
        if (meta)
            rc = tth_runtime_module_set_meta(out, meta, diag);
        json_decref(meta);
    }
    json_decref(sources);

done:
    tth_tir_share_free(share, share ? mod->nfuncs : 0);
    for (size_t i = 0; i < mod->nfuncs; i++)
        free(sigs[i].written);
    free(sigs);
    cg_names_pop_to(&g, 0);
    free(g.names);
    free(g.consts);
    free(g.hname);
    free(g.hkey);
    free(g.hfunc);
    free(g.hconst);
    free(g.bound);
    free(g.bound_align);
    tth_strbuf_free(&g.out);
    return rc;
}

TTH_PLUGIN_EXPORT int tth_tir_to_runtime(const tth_host *host, const json_t *target,
                                         const tth_tir_module *mod, tth_runtime_module *out,
                                         tth_diag *diag)
{
    (void)host;
    if (!mod || !out)
        return tth_diag_set(diag, TTH_EINVAL, "c-host tir_to_runtime", "no module given");
    return tth__c_generate(mod, target, out, diag);
}
