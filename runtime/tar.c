/* tar.c: the files of an uncompressed tar in memory, for reading artifacts (docs/artifact.md,
 * "Reading an artifact"). tth writes artifacts in the POSIX ustar format (daemon/compile/package.c);
 * this reader takes ustar, its pax extended headers' `path` and `size` records and GNU long
 * names, and returns each regular file as a path and a view of its bytes: nothing is copied, and
 * a program that runs models needs no archive library. */
#include "tthrt_tar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 512

/* an octal field (NUL- or space-terminated), or a base-256 one (high bit of the first byte) */
static int field_num(const unsigned char *p, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    if (p[0] & 0x80) {
        for (size_t i = 1; i < n; i++) {
            if (x >> 56)
                return -1;
            x = (x << 8) | p[i];
        }
        *v = x;
        return 0;
    }
    size_t i = 0;
    while (i < n && p[i] == ' ')
        i++;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
        if (x >> 60)
            return -1;
        x = x * 8 + (uint64_t)(p[i] - '0');
    }
    if (i < n && p[i] != 0 && p[i] != ' ')
        return -1;
    *v = x;
    return 0;
}

static int all_zero(const unsigned char *p)
{
    for (size_t i = 0; i < BLOCK; i++)
        if (p[i])
            return 0;
    return 1;
}

/* the header's checksum: its bytes summed with the checksum field taken as spaces */
static int checksum_ok(const unsigned char *h)
{
    uint64_t want;
    if (field_num(h + 148, 8, &want) != 0)
        return 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += i >= 148 && i < 156 ? (unsigned char)' ' : h[i];
    return sum == want;
}

/* a pax extended header's records ("LEN key=value\n"): path and size */
static void pax_records(const unsigned char *p, size_t n, char *path, size_t path_len, uint64_t *size, int *has_size)
{
    size_t off = 0;
    while (off < n) {
        size_t len = 0, i = off;
        while (i < n && p[i] >= '0' && p[i] <= '9' && len < n)
            len = len * 10 + (size_t)(p[i++] - '0');
        if (i >= n || p[i] != ' ' || len == 0 || len > n - off)
            return;
        const unsigned char *kv = p + i + 1, *end = p + off + len - 1; /* end: the '\n' */
        const unsigned char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (eq) {
            size_t kl = (size_t)(eq - kv), vl = (size_t)(end - eq - 1);
            if (kl == 4 && memcmp(kv, "path", 4) == 0 && vl < path_len) {
                memcpy(path, eq + 1, vl);
                path[vl] = 0;
            } else if (kl == 4 && memcmp(kv, "size", 4) == 0) {
                uint64_t v = 0;
                size_t k = 0;
                for (; k < vl && eq[1 + k] >= '0' && eq[1 + k] <= '9' && v < (UINT64_MAX - 9) / 10; k++)
                    v = v * 10 + (uint64_t)(eq[1 + k] - '0');
                if (k == vl) {
                    *size = v;
                    *has_size = 1;
                }
            }
        }
        off += len;
    }
}

int tthrt__tar_next(const unsigned char *tar, size_t len, size_t *off, tthrt__tar_file *f, const char **why)
{
    char long_path[sizeof f->path] = "";
    uint64_t pax_size = 0;
    int has_pax_size = 0;
    for (;;) {
        if (*off > len || len - *off < BLOCK) {
            *why = "the tar ends inside a header (truncated?)";
            return -1;
        }
        const unsigned char *h = tar + *off;
        if (all_zero(h))
            return 0; /* the end-of-archive blocks */
        if (!checksum_ok(h)) {
            *why = "a tar header's checksum does not match (not a tar, or corrupt)";
            return -1;
        }
        uint64_t size;
        if (field_num(h + 124, 12, &size) != 0) {
            *why = "a tar header's size field is malformed";
            return -1;
        }
        char type = (char)h[156];
        if (has_pax_size && type != 'x' && type != 'g')
            size = pax_size;
        size_t data = *off + BLOCK;
        if (size > len - data) {
            *why = "a tar entry runs past the end of the archive (truncated?)";
            return -1;
        }
        *off = data + (size_t)((size + BLOCK - 1) / BLOCK * BLOCK);
        if (*off > len)
            *off = len;
        if (type == 'x') {
            pax_records(tar + data, (size_t)size, long_path, sizeof long_path, &pax_size, &has_pax_size);
            continue;
        }
        if (type == 'L') {
            size_t n = size < sizeof long_path ? (size_t)size : sizeof long_path - 1;
            memcpy(long_path, tar + data, n);
            long_path[n] = 0;
            continue;
        }
        if (type != '0' && type != '\0' && type != '7') {
            long_path[0] = 0; /* directories, links, global headers: not files */
            has_pax_size = 0;
            continue;
        }
        if (long_path[0]) {
            snprintf(f->path, sizeof f->path, "%s", long_path);
        } else {
            char name[101], prefix[156];
            memcpy(name, h, 100);
            name[100] = 0;
            memcpy(prefix, h + 345, 155);
            prefix[155] = 0;
            if (memcmp(h + 257, "ustar", 5) == 0 && prefix[0])
                snprintf(f->path, sizeof f->path, "%s/%s", prefix, name);
            else
                snprintf(f->path, sizeof f->path, "%s", name);
        }
        f->data = tar + data;
        f->size = (size_t)size;
        return 1;
    }
}
