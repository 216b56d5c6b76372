/* names.c: edit distance and "did you mean" suggestions. */
#include "target_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Levenshtein distance with two rows; O(len(a) * len(b)) time, O(len(b)) memory. */
size_t tth_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n == 0)
        return m;
    if (m == 0)
        return n;
    size_t small[64 * 2];
    size_t *row = m + 1 <= 64 ? small : malloc(2 * (m + 1) * sizeof *row);
    if (!row)
        return n > m ? n : m; /* out of memory: an upper bound */
    size_t *prev = row, *cur = row + m + 1;
    for (size_t j = 0; j <= m; j++)
        prev[j] = j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t best = sub < del ? sub : del;
            cur[j] = best < ins ? best : ins;
        }
        size_t *t = prev;
        prev = cur;
        cur = t;
    }
    size_t d = prev[m];
    if (row != small)
        free(row);
    return d;
}

typedef struct scored {
    const char *name;
    size_t dist;
} scored;

static int cmp_scored(const void *pa, const void *pb)
{
    const scored *a = pa, *b = pb;
    if (a->dist != b->dist)
        return a->dist < b->dist ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The nearest names, closest first and alphabetical among equals, so the order never depends on
 * the order of `candidates` (registry load order, hash order). */
size_t tth_nearest_names(const char *word, const char *const *candidates, size_t n, size_t max,
                         char *buf, size_t len)
{
    if (buf && len)
        buf[0] = '\0';
    if (!word || !candidates || n == 0 || max == 0)
        return 0;
    size_t limit = strlen(word) / 3;
    if (limit < 2)
        limit = 2;
    scored *s = malloc(n * sizeof *s);
    if (!s)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!candidates[i] || strcmp(candidates[i], word) == 0)
            continue;
        /* the same name twice (a tag listed under two spellings) is suggested once */
        int seen = 0;
        for (size_t j = 0; j < k && !seen; j++)
            seen = strcmp(s[j].name, candidates[i]) == 0;
        if (seen)
            continue;
        size_t d = tth_edit_distance(word, candidates[i]);
        if (d <= limit)
            s[k++] = (scored){candidates[i], d};
    }
    qsort(s, k, sizeof *s, cmp_scored);
    if (k > max)
        k = max;
    size_t used = 0;
    for (size_t i = 0; i < k && buf && len; i++) {
        int w = snprintf(buf + used, len - used, "%s'%s'", i ? ", " : "", s[i].name);
        if (w < 0 || (size_t)w >= len - used) {
            buf[used] = '\0'; /* keep only whole names */
            k = i;
            break;
        }
        used += (size_t)w;
    }
    free(s);
    return k;
}

void tth__hint_nearest(tth_diag *d, const char *word, const char *const *candidates, size_t n,
                       const char *fallback)
{
    char names[TTH_DIAG_HINT_MAX - 32];
    size_t k = tth_nearest_names(word, candidates, n, 3, names, sizeof names);
    if (k == 1)
        tth_diag_hint(d, "did you mean %s?", names);
    else if (k > 1)
        tth_diag_hint(d, "did you mean one of %s?", names);
    else if (fallback)
        tth_diag_hint(d, "%s", fallback);
}
