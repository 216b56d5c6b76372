/* file_io.c: file helpers (file_io.h). */
#include "file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int tth_file_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

uint8_t *tth_file_read(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return NULL;
    uint8_t *buf = NULL;
    size_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size < ((uint64_t)1 << 40) &&
        (buf = malloc(st.st_size ? (size_t)st.st_size : 1))) {
        while (got < (size_t)st.st_size) {
            ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got != (size_t)st.st_size) {
            free(buf);
            buf = NULL;
            errno = EIO;
        }
    } else if (!buf) {
        errno = errno ? errno : EINVAL;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    if (buf)
        *len = got;
    return buf;
}
