/* tthrt_tar.h: the runtime's tar reader (tar.c), private to the runtime. */
#ifndef TTHRT_TAR_H
#define TTHRT_TAR_H

#include <stddef.h>
#include <stdint.h>

/* One regular file of the archive: its path and a view of its bytes inside the archive. */
typedef struct tthrt__tar_file {
    char path[1024];
    const unsigned char *data;
    size_t size;
} tthrt__tar_file;

/* The next regular file at or after *off (start at 0) of the tar in tar[0, len): 1 and *f (and
 * *off moved past it), 0 at the end of the archive, -1 with *why on a malformed archive. */
int tthrt__tar_next(const unsigned char *tar, size_t len, size_t *off, tthrt__tar_file *f, const char **why);

#endif
