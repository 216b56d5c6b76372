/* common.c: data types, tensor types, the arena, refcounted tensors, and the small helpers the
 * IR files share (pointer vectors, text buffers, ttype JSON). */
#include "ir_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>

/* ---- data types ---- */

typedef struct dtype_info {
    const char *name;
    size_t bytes;
    int is_float, is_signed;
} dtype_info;

static const dtype_info dtype_table[] = {
#define TTH__DT_INFO(e, v, n, b, f, s) [v] = {n, b, f, s},
    TTH_DTYPES(TTH__DT_INFO)
#undef TTH__DT_INFO
};

#define DTYPE_COUNT (sizeof dtype_table / sizeof dtype_table[0])

static const dtype_info *dtype_get(tth_dtype t)
{
    if ((unsigned)t == 0 || (unsigned)t >= DTYPE_COUNT || !dtype_table[t].name)
        return NULL;
    return &dtype_table[t];
}

const char *tth_dtype_name(tth_dtype t)
{
    const dtype_info *d = dtype_get(t);
    return d ? d->name : "invalid";
}

tth_dtype tth_dtype_from_name(const char *name)
{
    if (!name)
        return TTH_DTYPE_INVALID;
    for (size_t i = 1; i < DTYPE_COUNT; i++)
        if (dtype_table[i].name && strcmp(dtype_table[i].name, name) == 0)
            return (tth_dtype)i;
    return TTH_DTYPE_INVALID;
}

size_t tth_dtype_size(tth_dtype t)
{
    const dtype_info *d = dtype_get(t);
    return d ? d->bytes : 0;
}

int tth_dtype_is_float(tth_dtype t)
{
    const dtype_info *d = dtype_get(t);
    return d ? d->is_float : 0;
}

int tth_dtype_is_signed(tth_dtype t)
{
    const dtype_info *d = dtype_get(t);
    return d ? d->is_signed : 0;
}

/* ---- tensor types ---- */

int64_t tth__shape_numel(int32_t rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int32_t i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

int64_t tth_ttype_numel(const tth_ttype *t)
{
    return tth__shape_numel(t->rank, t->shape);
}

size_t tth_ttype_nbytes(const tth_ttype *t)
{
    return (size_t)tth_ttype_numel(t) * tth_dtype_size(t->dtype);
}

int tth_ttype_equal(const tth_ttype *a, const tth_ttype *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return 0;
    for (int32_t i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

size_t tth_ttype_format(const tth_ttype *t, char *buf, size_t len)
{
    size_t n = 0;
    int w = snprintf(buf, len, "%s[", tth_dtype_name(t->dtype));
    if (w > 0)
        n = (size_t)w;
    for (int32_t i = 0; i < t->rank && i < TTH_MAX_RANK; i++) {
        w = snprintf(n < len ? buf + n : NULL, n < len ? len - n : 0, "%s%lld", i ? ", " : "",
                     (long long)t->shape[i]);
        if (w > 0)
            n += (size_t)w;
    }
    w = snprintf(n < len ? buf + n : NULL, n < len ? len - n : 0, "]");
    if (w > 0)
        n += (size_t)w;
    return n < len ? n : (len ? len - 1 : 0);
}

size_t tth__rtype_format(const tth_rtype *t, char *buf, size_t len)
{
    if (t->nfields < 0)
        return tth_ttype_format(&t->tensor, buf, len);
    tth_strbuf b = {0};
    tth__sb_rtype(&b, t);
    size_t n = 0;
    if (!b.failed && b.s) {
        n = b.n < len ? b.n : (len ? len - 1 : 0);
        memcpy(buf, b.s, n);
    }
    if (len)
        buf[n] = '\0';
    free(b.s);
    return n;
}

/* ---- arena ---- */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    /* 16-byte aligned payload follows */
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct tth_arena {
    arena_chunk *head;
    size_t handed;
};

#define ARENA_CHUNK 65536u

tth_arena *tth_arena_new(void)
{
    return calloc(1, sizeof(tth_arena));
}

void tth_arena_free(tth_arena *a)
{
    if (!a)
        return;
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(a);
}

void *tth_arena_alloc(tth_arena *a, size_t size)
{
    if (!a)
        return NULL;
    if (size > SIZE_MAX / 2)
        return NULL;
    size_t need = (size + 15u) & ~(size_t)15u;
    if (need == 0)
        need = 16;
    arena_chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        if (need > ARENA_CHUNK / 4) {
            /* A big block gets a chunk of its own, kept behind the current one. */
            arena_chunk *big = malloc(sizeof(arena_chunk) + need);
            if (!big)
                return NULL;
            big->size = big->used = need;
            if (c) {
                big->next = c->next;
                c->next = big;
            } else {
                big->next = NULL;
                a->head = big;
            }
            memset(big->data, 0, need);
            a->handed += size;
            return big->data;
        }
        c = malloc(sizeof(arena_chunk) + ARENA_CHUNK);
        if (!c)
            return NULL;
        c->size = ARENA_CHUNK;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, need);
    a->handed += size;
    return p;
}

char *tth_arena_strdup(tth_arena *a, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *p = tth_arena_alloc(a, n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

char *tth_arena_printf(tth_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = tth_arena_alloc(a, (size_t)n + 1);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

size_t tth_arena_used(const tth_arena *a)
{
    return a ? a->handed : 0;
}

/* ---- tensors ---- */

/* A tensor as this file allocates it: the public part, then how its data was allocated. */
typedef struct tensor_box {
    tth_tensor t;
    void *map;     /* the data's own mapping (map_huge), or NULL: from aligned_alloc */
    size_t mapped; /* its length */
} tensor_box;

/* Tensors of at least HUGE_MIN bytes get a mapping of their own, at a HUGE_PAGE boundary and
 * advised as transparent huge pages (docs/tthctl.md, "Memory pages"): a compile writes every
 * weight several times into fresh memory (import, folding, packing), and one fault per 4 KiB page
 * costs more than the copies themselves. glibc's own huge pages (its hugetlb tunable) miss most
 * of them: its mappings start anywhere, and only the whole 2 MiB pages inside one can be huge.
 * The mapping is a whole number of huge pages, so a tensor's last part is one too; a new mapping
 * is zero-filled, so it needs no memset. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN ((size_t)1 << 20)

/* Under AddressSanitizer the mapping past a tensor's 64-byte rounded size is poisoned, so a read
 * or write past a large tensor is caught as past a small one's (aligned_alloc) is. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SLACK_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define SLACK_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define SLACK_POISON(p, n) ((void)(p), (void)(n))
#define SLACK_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* A zero-filled mapping of at least len bytes at a HUGE_PAGE boundary into *map / *mapped; the
 * data's address, or NULL when the system refuses. */
static void *map_huge(size_t len, void **map, size_t *mapped)
{
    size_t want = (len + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (want < len || want > SIZE_MAX - HUGE_PAGE)
        return NULL;
    char *p = mmap(NULL, want + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* keep the aligned part, give the rest back */
    char *a = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + want + HUGE_PAGE > a + want)
        munmap(a + want, (size_t)(p + want + HUGE_PAGE - (a + want)));
#ifdef MADV_HUGEPAGE
    madvise(a, want, MADV_HUGEPAGE); /* advice: without it the tensor works as well, in small pages */
#endif
    *map = a;
    *mapped = want;
    return a;
}

tth_tensor *tth_tensor_new(const tth_ttype *type, const void *data)
{
    if (!type || !tth_dtype_size(type->dtype) || type->rank < 0 || type->rank > TTH_MAX_RANK)
        return NULL;
    /* The byte size, refusing shapes whose size overflows. */
    size_t bytes = tth_dtype_size(type->dtype);
    for (int32_t i = 0; i < type->rank; i++)
        if (type->shape[i] < 0 || __builtin_mul_overflow(bytes, (size_t)type->shape[i], &bytes))
            return NULL;
    if (bytes > SIZE_MAX - 64)
        return NULL;
    tensor_box *box = calloc(1, sizeof *box);
    if (!box)
        return NULL;
    tth_tensor *t = &box->t;
    t->type = *type;
    for (int32_t i = type->rank; i < TTH_MAX_RANK; i++)
        t->type.shape[i] = 0;
    t->nbytes = bytes;
    size_t alloc = (t->nbytes + 63u) & ~(size_t)63u;
    if (alloc == 0)
        alloc = 64;
    /* a new mapping is zero already; aligned_alloc's memory is cleared past the copied bytes */
    int zeroed = alloc >= HUGE_MIN && (t->data = map_huge(alloc, &box->map, &box->mapped)) != NULL;
    if (zeroed)
        SLACK_POISON((char *)t->data + alloc, box->mapped - alloc);
    else if (!(t->data = aligned_alloc(64, alloc))) {
        free(box);
        return NULL;
    }
    size_t copied = data ? t->nbytes : 0;
    if (copied)
        memcpy(t->data, data, copied);
    if (!zeroed)
        memset((char *)t->data + copied, 0, alloc - copied);
    t->refcount = 1;
    return t;
}

tth_tensor *tth_tensor_ref(tth_tensor *t)
{
    if (t)
        __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

void tth__tensor_drop_data(tth_tensor *t)
{
    tensor_box *box = (tensor_box *)t;
    if (box->map) {
        SLACK_UNPOISON(box->map, box->mapped);
        munmap(box->map, box->mapped);
    } else {
        free(t->data);
    }
    box->map = NULL;
    t->data = NULL;
    t->nbytes = 0;
}

void tth_tensor_unref(tth_tensor *t)
{
    if (!t)
        return;
    if (__atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) == 0) {
        tth__tensor_drop_data(t);
        free((tensor_box *)t);
    }
}

uint64_t tth_tensor_hash(const tth_tensor *t)
{
    /* The header (dtype, rank, shape as little-endian-agnostic int64s) seeds the data hash. */
    int64_t head[2 + TTH_MAX_RANK] = {0};
    head[0] = t->type.dtype;
    head[1] = t->type.rank;
    for (int32_t i = 0; i < t->type.rank; i++)
        head[2 + i] = t->type.shape[i];
    uint64_t seed = XXH64(head, sizeof(int64_t) * (size_t)(2 + t->type.rank), 0);
    return XXH64(t->data, t->nbytes, seed);
}

/* A float and its bits (C11 reads a union's other member as the same bytes). */
typedef union f32_pun {
    float f;
    uint32_t u;
} f32_pun;

/* float16 (ir_common.h). */
float tth_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return (f32_pun){.u = u}.f;
}

uint16_t tth_f32_to_f16(float f)
{
    uint32_t u = (f32_pun){.f = f}.u;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    int32_t exp = (int32_t)((u >> 23) & 0xff);
    uint32_t man = u & 0x7fffff;
    if (exp == 0xff)
        return sign | 0x7c00 | (man ? 0x200 : 0);
    int32_t e = exp - 127 + 15;
    if (e >= 0x1f)
        return sign | 0x7c00;
    if (e <= 0) { /* subnormal or zero */
        if (e < -10)
            return sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return sign | (uint16_t)half;
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent, which is right (rounds up to inf at the top) */
    return sign | (uint16_t)half;
}

/* bfloat16 (ir_common.h). */
float tth_bf16_to_f32(uint16_t b)
{
    return (f32_pun){.u = (uint32_t)b << 16}.f;
}

uint16_t tth_f32_to_bf16(float f)
{
    uint32_t u = (f32_pun){.f = f}.u;
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncating could clear every mantissa bit */
        return (uint16_t)((u >> 16) | 0x40);
    /* adding 0x7fff rounds up past the halfway point; adding the kept lsb too breaks ties to
     * even. A carry into the exponent is right, also at the top (to infinity). */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

double tth_tensor_get_f64(const tth_tensor *t, int64_t i)
{
    const void *p = t->data;
    switch (t->type.dtype) {
    case TTH_F32: return ((const float *)p)[i];
    case TTH_F16: return tth_f16_to_f32(((const uint16_t *)p)[i]);
    case TTH_BF16: return tth_bf16_to_f32(((const uint16_t *)p)[i]);
    case TTH_F64: return ((const double *)p)[i];
    case TTH_I8: return ((const int8_t *)p)[i];
    case TTH_I16: return ((const int16_t *)p)[i];
    case TTH_I32: return ((const int32_t *)p)[i];
    case TTH_I64: return (double)((const int64_t *)p)[i];
    case TTH_U8: return ((const uint8_t *)p)[i];
    case TTH_U16: return ((const uint16_t *)p)[i];
    case TTH_U32: return ((const uint32_t *)p)[i];
    case TTH_U64: return (double)((const uint64_t *)p)[i];
    case TTH_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    default: return 0.0;
    }
}

int64_t tth_tensor_get_i64(const tth_tensor *t, int64_t i)
{
    const void *p = t->data;
    switch (t->type.dtype) {
    case TTH_F32:
    case TTH_F16:
    case TTH_BF16:
    case TTH_F64: {
        double v = tth_tensor_get_f64(t, i);
        if (v != v)
            return 0;
        if (v >= 9223372036854775807.0)
            return INT64_MAX;
        if (v <= -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)v;
    }
    case TTH_I8: return ((const int8_t *)p)[i];
    case TTH_I16: return ((const int16_t *)p)[i];
    case TTH_I32: return ((const int32_t *)p)[i];
    case TTH_I64: return ((const int64_t *)p)[i];
    case TTH_U8: return ((const uint8_t *)p)[i];
    case TTH_U16: return ((const uint16_t *)p)[i];
    case TTH_U32: return ((const uint32_t *)p)[i];
    case TTH_U64: return (int64_t)((const uint64_t *)p)[i];
    case TTH_BOOL: return ((const uint8_t *)p)[i] ? 1 : 0;
    default: return 0;
    }
}

/* ---- shared helpers ---- */

void *tth__grow(void *items, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap)
        return items;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *p = realloc(items, ncap * elem);
    if (p)
        *cap = ncap;
    return p;
}

int tth__ptrvec_push(tth__ptrvec *v, void *p)
{
    void **items = tth__grow(v->items, v->n, &v->cap, sizeof *items);
    if (!items)
        return TTH_ENOMEM;
    v->items = items;
    v->items[v->n++] = p;
    return 0;
}

void tth__ptrvec_free(tth__ptrvec *v)
{
    free(v->items);
    v->items = NULL;
    v->n = v->cap = 0;
}

void tth__module_free(void *pm, tth__module_own *own, void *funcs, tth_arena *arena)
{
    for (size_t i = 0; i < own->jsons.n; i++)
        json_decref(own->jsons.items[i]);
    for (size_t i = 0; i < own->tensors.n; i++)
        tth_tensor_unref(own->tensors.items[i]);
    tth__ptrvec_free(&own->jsons);
    tth__ptrvec_free(&own->tensors);
    free(funcs);
    tth_arena_free(arena);
    free(pm);
}

void *tth__refuse_func(json_t *attrs, tth_diag *diag, int code, const char *loc, const char *fmt, ...)
{
    json_decref(attrs);
    va_list ap;
    va_start(ap, fmt);
    tth_diag_vset(diag, code, loc, fmt, ap);
    va_end(ap);
    return NULL;
}

json_t *tth__keep_attrs(tth__module_own *own, json_t *attrs, const char *what, const char *loc, tth_diag *diag)
{
    if (!attrs)
        attrs = json_object();
    if (!json_is_object(attrs))
        return tth__refuse_func(attrs, diag, TTH_EINVAL, loc, "%s attributes must be a JSON object", what);
    if (tth__ptrvec_push(&own->jsons, attrs) != 0)
        return tth__refuse_func(attrs, diag, TTH_ENOMEM, loc, "out of memory");
    return attrs;
}

static void sb_reserve(tth_strbuf *b, size_t more)
{
    if (b->failed)
        return;
    if (b->n + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = 1;
        return;
    }
    b->s = s;
    b->cap = cap;
}

void tth_strbuf_putn(tth_strbuf *b, const char *s, size_t n)
{
    sb_reserve(b, n);
    if (b->failed)
        return;
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void tth_strbuf_puts(tth_strbuf *b, const char *s)
{
    tth_strbuf_putn(b, s, strlen(s));
}

void tth_strbuf_putc(tth_strbuf *b, char c)
{
    tth_strbuf_putn(b, &c, 1);
}

void tth_strbuf_printf(tth_strbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        tth_strbuf_putn(b, small, (size_t)n);
        return;
    }
    sb_reserve(b, (size_t)n);
    if (b->failed)
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void tth_strbuf_spaces(tth_strbuf *b, int n)
{
    static const char sp[] = "                                ";
    for (; n > 0; n -= (int)(sizeof sp - 1))
        tth_strbuf_putn(b, sp, n < (int)(sizeof sp - 1) ? (size_t)n : sizeof sp - 1);
}

char *tth_strbuf_finish(tth_strbuf *b)
{
    if (!b->failed && !b->s)
        sb_reserve(b, 0);
    if (b->failed) {
        tth_strbuf_free(b);
        return NULL;
    }
    b->s[b->n] = '\0';
    char *s = b->s;
    b->s = NULL;
    b->n = b->cap = 0;
    return s;
}

void tth_strbuf_free(tth_strbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}

void tth__sb_ttype(tth_strbuf *b, const tth_ttype *t)
{
    tth_strbuf_printf(b, "%s[", tth_dtype_name(t->dtype));
    for (int32_t i = 0; i < t->rank && i < TTH_MAX_RANK; i++)
        tth_strbuf_printf(b, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    tth_strbuf_puts(b, "]");
}

void tth__sb_rtype(tth_strbuf *b, const tth_rtype *t)
{
    if (t->nfields < 0) {
        tth__sb_ttype(b, &t->tensor);
        return;
    }
    tth_strbuf_puts(b, "(");
    for (int32_t i = 0; i < t->nfields; i++) {
        if (i)
            tth_strbuf_puts(b, ", ");
        tth__sb_ttype(b, &t->fields[i]);
    }
    tth_strbuf_puts(b, ")");
}

json_t *tth__ttype_to_json(const tth_ttype *t)
{
    json_t *shape = json_array();
    for (int32_t i = 0; i < t->rank; i++)
        json_array_append_new(shape, json_integer(t->shape[i]));
    return json_pack("{s:s, s:o}", "dtype", tth_dtype_name(t->dtype), "shape", shape);
}

int tth__ttype_from_json(const json_t *j, tth_ttype *t)
{
    memset(t, 0, sizeof *t);
    const json_t *dt = json_object_get(j, "dtype");
    const json_t *shape = json_object_get(j, "shape");
    if (!json_is_string(dt) || !json_is_array(shape) || json_array_size(shape) > TTH_MAX_RANK)
        return TTH_EINVAL;
    t->dtype = tth_dtype_from_name(json_string_value(dt));
    if (t->dtype == TTH_DTYPE_INVALID)
        return TTH_EINVAL;
    t->rank = (int32_t)json_array_size(shape);
    for (int32_t i = 0; i < t->rank; i++) {
        const json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return TTH_EINVAL;
        t->shape[i] = json_integer_value(d);
    }
    return 0;
}

int tth__is_c_ident(const char *s)
{
    if (!s || !*s)
        return 0;
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}
