/* entry_file.c: the model digest and the cache entry format (entry_file.h, docs/cache.md). */
#include "entry_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

void tthd_model_digest(const uint8_t *model, size_t len, uint8_t digest[16])
{
    XXH128_hash_t h = XXH3_128bits(model, len);
    XXH128_canonicalFromHash((XXH128_canonical_t *)digest, h);
}

int tthd_model_digest_fd(int fd, size_t size, uint8_t digest[16])
{
    enum { PIECE = 1 << 20 };
    XXH3_state_t *h = XXH3_createState();
    uint8_t *buf = malloc(PIECE);
    size_t got = 0;
    if (h && buf && XXH3_128bits_reset(h) == XXH_OK) {
        while (got < size) {
            ssize_t n = read(fd, buf, size - got < PIECE ? size - got : PIECE);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            XXH3_128bits_update(h, buf, (size_t)n);
            got += (size_t)n;
        }
    }
    if (h && buf && got == size)
        XXH128_canonicalFromHash((XXH128_canonical_t *)digest, XXH3_128bits_digest(h));
    free(buf);
    int ok = h && buf && got == size;
    XXH3_freeState(h);
    return ok ? 0 : -1;
}

void tthd_digest_hex(const uint8_t digest[16], char hex[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

/* The metadata's text (malloc'd) and the header of an entry of it and the artifact. */
static char *entry_header(const json_t *metadata, const uint8_t *artifact, size_t len, uint8_t hdr[TTHD_ENTRY_HDR],
                          size_t *meta_len)
{
    char *meta = json_dumps(metadata ? metadata : json_null(), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!meta)
        return NULL;
    *meta_len = strlen(meta);
    XXH64_state_t *h = XXH64_createState();
    if (!h) {
        free(meta);
        return NULL;
    }
    XXH64_reset(h, 0);
    XXH64_update(h, meta, *meta_len);
    if (len)
        XXH64_update(h, artifact, len);
    memcpy(hdr, TTHD_ENTRY_MAGIC, 8);
    tth_put_le64(hdr + 8, *meta_len);
    tth_put_le64(hdr + 16, len);
    tth_put_le64(hdr + 24, XXH64_digest(h));
    XXH64_freeState(h);
    return meta;
}

size_t tthd_entry_size(const json_t *metadata, size_t len)
{
    size_t meta_len = json_dumpb(metadata ? metadata : json_null(), NULL, 0,
                                 JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    return meta_len ? TTHD_ENTRY_HDR + meta_len + len : 0;
}

uint8_t *tthd_cache_blob(const json_t *metadata, const uint8_t *artifact, size_t len, size_t *blob_len,
                         size_t *art_offset)
{
    uint8_t hdr[TTHD_ENTRY_HDR];
    size_t meta_len;
    char *meta = entry_header(metadata, artifact, len, hdr, &meta_len);
    if (!meta)
        return NULL;
    size_t size = TTHD_ENTRY_HDR + meta_len + len;
    uint8_t *blob = malloc(size);
    if (blob) {
        memcpy(blob, hdr, TTHD_ENTRY_HDR);
        memcpy(blob + TTHD_ENTRY_HDR, meta, meta_len);
        if (len)
            memcpy(blob + TTHD_ENTRY_HDR + meta_len, artifact, len);
        *blob_len = size;
        if (art_offset)
            *art_offset = TTHD_ENTRY_HDR + meta_len;
    }
    free(meta);
    return blob;
}

int tthd_cache_blob_check(const uint8_t *blob, size_t len, json_t **metadata, size_t *art_offset, size_t *art_len)
{
    if (len < TTHD_ENTRY_HDR || memcmp(blob, TTHD_ENTRY_MAGIC, 8) != 0)
        return -1;
    uint64_t meta_len = tth_get_le64(blob + 8), alen = tth_get_le64(blob + 16), sum = tth_get_le64(blob + 24);
    if (meta_len >= (1u << 30) || alen >= (1ull << 40) || (uint64_t)len != TTHD_ENTRY_HDR + meta_len + alen ||
        XXH64(blob + TTHD_ENTRY_HDR, meta_len + alen, 0) != sum)
        return -1;
    json_t *meta = json_loadb((const char *)blob + TTHD_ENTRY_HDR, meta_len, 0, NULL);
    if (!meta)
        return -1;
    *metadata = meta;
    *art_offset = TTHD_ENTRY_HDR + meta_len;
    *art_len = alen;
    return 0;
}

int tthd_entry_write(int fd, const json_t *metadata, const uint8_t *artifact, size_t len, uint64_t *art_offset,
                     uint64_t *file_size, uint64_t *art_sum)
{
    uint8_t hdr[TTHD_ENTRY_HDR];
    size_t meta_len;
    char *meta = entry_header(metadata, artifact, len, hdr, &meta_len);
    if (!meta)
        return -ENOMEM;
    int rc = tth_file_write_all(fd, hdr, sizeof hdr);
    if (rc == 0)
        rc = tth_file_write_all(fd, meta, meta_len);
    if (rc == 0 && len)
        rc = tth_file_write_all(fd, artifact, len);
    free(meta);
    if (rc == 0) {
        *art_offset = TTHD_ENTRY_HDR + meta_len;
        *file_size = TTHD_ENTRY_HDR + meta_len + len;
        *art_sum = XXH64(artifact, len, 0);
    }
    return rc;
}
