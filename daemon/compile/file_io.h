/* file_io.h: small file helpers the compile flow, the worker and tthd share (build.c, the code
 * store, the cache entry format, the daemon's methods). */
#ifndef TTH_FILE_IO_H
#define TTH_FILE_IO_H

#include <stddef.h>
#include <stdint.h>

/* A whole file's bytes (malloc'd, *len of them), or NULL with errno set */
uint8_t *tth_file_read(const char *path, size_t *len);
/* n bytes to fd, through short writes and EINTR: 0, or a negative errno */
int tth_file_write_all(int fd, const void *buf, size_t n);

/* 8 bytes little-endian, as the code store's and the cache's files hold them */
static inline void tth_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t tth_get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
