/* entry_file.h: what tthd and its workers both know about files (docs/cache.md):
 *   - a model's digest, the model's part of the cache key (XXH3-128 of its bytes);
 *   - the format of a cache entry file, which the daemon writes and reads and a worker writes
 *     when it hands its artifact over as a file:
 *       "TTHCACHE" | u64 meta_len | u64 artifact_len | u64 XXH64(meta + artifact) | meta | artifact
 *     (little-endian; meta is the artifact's metadata as compact JSON with sorted keys).
 * Neither needs libuv: the worker links this file alone. */
#ifndef TTHD_ENTRY_FILE_H
#define TTHD_ENTRY_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../compile/file_io.h" /* tth_file_read, tth_file_write_all, the le64 helpers */

#define TTHD_ENTRY_MAGIC "TTHCACHE"
#define TTHD_ENTRY_HDR 32

void tthd_model_digest(const uint8_t *model, size_t len, uint8_t digest[16]);
/* The same digest of the next size bytes of fd, read in pieces: 0, or -1 when they cannot all
 * be read */
int tthd_model_digest_fd(int fd, size_t size, uint8_t digest[16]);
/* digest as 32 lowercase hex digits and a NUL */
void tthd_digest_hex(const uint8_t digest[16], char hex[33]);

/* A whole entry in memory (malloc'd, *blob_len bytes; *art_offset where the artifact starts in
 * it, unless art_offset is NULL), or NULL when out of memory. */
uint8_t *tthd_cache_blob(const json_t *metadata, const uint8_t *artifact, size_t len, size_t *blob_len,
                         size_t *art_offset);
/* An entry's bytes checked (magic, lengths, checksum, metadata JSON): 0 with *metadata (new
 * reference), *art_offset and *art_len set, or -1. */
int tthd_cache_blob_check(const uint8_t *blob, size_t len, json_t **metadata, size_t *art_offset, size_t *art_len);



/* The size of the entry file of metadata and an artifact of len bytes, or 0 (out of memory) */
size_t tthd_entry_size(const json_t *metadata, size_t len);

/* An entry of metadata and artifact written to fd from its start, without a copy of the
 * artifact: 0 with *art_offset (where the artifact starts in the file), *file_size and *art_sum
 * (XXH64 of the artifact alone) set, or a negative errno. */
int tthd_entry_write(int fd, const json_t *metadata, const uint8_t *artifact, size_t len, uint64_t *art_offset,
                     uint64_t *file_size, uint64_t *art_sum);

#endif
