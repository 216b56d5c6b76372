/* code_store.h: the store of compiled code a host keeps between compiles (docs/cache.md,
 * "Compiled code"), behind tth_host.store_get/store_put (ABI 1.5): one file per key in a
 * directory, shared by every process that opens it (tthd's workers), bounded in bytes, least
 * recently used dropped first. */
#ifndef TTH_CODE_STORE_H
#define TTH_CODE_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tth_code_store tth_code_store;

/* The store in dir (created, with its parents, when missing), holding at most about max_bytes;
 * NULL when the directory cannot be made or used (then nothing is kept). */
tth_code_store *tth_code_store_open(const char *dir, uint64_t max_bytes);
void tth_code_store_close(tth_code_store *s);
/* 1 with *data (malloc'd: the caller frees it) and *len: the bytes kept under key, checked; 0
 * when there are none, or they were damaged (then they are removed). Thread-safe. */
int tth_code_store_get(tth_code_store *s, const uint8_t key[16], void **data, size_t *len);
/* Keep len bytes under key (best effort: a failure keeps nothing). Thread-safe. */
void tth_code_store_put(tth_code_store *s, const uint8_t key[16], const void *data, size_t len);
/* Remove every entry; the number removed. */
uint64_t tth_code_store_clear(const char *dir);
/* The entries in dir and, in *bytes, the size of their files. */
uint64_t tth_code_store_usage(const char *dir, uint64_t *bytes);

#endif
