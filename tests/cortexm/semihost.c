/* Semihosting console and exit, and the few system calls newlib's libc and libm need, for the
 * firmware scripts/run-cortexm builds. The semihosting operations (number in r0, argument in
 * r1, BKPT 0xAB on M-profile) are listed in docs/cortexm.md. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cortexm.h"

#define SYS_WRITEC 0x03u
#define SYS_WRITE0 0x04u
#define SYS_EXIT 0x18u
#define SYS_EXIT_EXTENDED 0x20u

#define ADP_STOPPED_APPLICATION_EXIT 0x20026u
#define ADP_STOPPED_RUNTIME_ERROR_UNKNOWN 0x20023u

extern char __heap_start[], __heap_end[];

static uint32_t semihost(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void tth_cm_puts(const char *s)
{
    semihost(SYS_WRITE0, s);
}

static const char hexdigits[] = "0123456789abcdef";

void tth_cm_put_hex32(const char *s, uint32_t v)
{
    char buf[10];
    for (int i = 0; i < 8; i++)
        buf[i] = hexdigits[(v >> (28 - 4 * i)) & 0xfu];
    buf[8] = '\n';
    buf[9] = '\0';
    tth_cm_puts(s);
    tth_cm_puts(buf);
}

void tth_cm_put_dec(const char *s, uint64_t v)
{
    char buf[24];
    int i = (int)sizeof buf - 1;
    buf[i--] = '\0';
    buf[i--] = '\n';
    do {
        buf[i--] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0);
    tth_cm_puts(s);
    tth_cm_puts(buf + i + 1);
}

void tth_cm_put_bytes_hex(const void *p, size_t n)
{
    const uint8_t *b = p;
    char line[2 * 64 + 2];
    while (n > 0) {
        size_t k = n < 64 ? n : 64;
        for (size_t i = 0; i < k; i++) {
            line[2 * i] = hexdigits[b[i] >> 4];
            line[2 * i + 1] = hexdigits[b[i] & 0xfu];
        }
        line[2 * k] = '\n';
        line[2 * k + 1] = '\0';
        tth_cm_puts(line);
        b += k;
        n -= k;
    }
}

/* defined in startup.c */
int tth_cm_stack_overflowed(void);

void tth_cm_exit(int status)
{
    if (tth_cm_stack_overflowed()) {
        tth_cm_puts("TTH-ERROR stack overflow: the stack grew past its limit "
                    "(give a bigger stack, docs/cortexm.md)\n");
        status = TTH_CM_EXIT_STACK;
    }
    /* SYS_EXIT_EXTENDED: a block of the reason and the status; QEMU exits with the status */
    uint32_t block[2] = { ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status };
    semihost(SYS_EXIT_EXTENDED, block);
    /* a debugger without it: SYS_EXIT, whose reason can only tell success from failure */
    semihost(SYS_EXIT, (const void *)(uintptr_t)(status == 0 ? ADP_STOPPED_APPLICATION_EXIT
                                                              : ADP_STOPPED_RUNTIME_ERROR_UNKNOWN));
    for (;;)
        __asm__ volatile("wfi");
}

/* newlib's system calls: the console is semihosting; there are no files */

void _exit(int status);
void _exit(int status)
{
    tth_cm_exit(status);
}

int _kill(int pid, int sig);
int _kill(int pid, int sig)
{
    (void)pid;
    tth_cm_put_hex32("TTH-ERROR abort: signal 0x", (uint32_t)sig);
    tth_cm_exit(TTH_CM_EXIT_ABORT);
}

int _getpid(void);
int _getpid(void)
{
    return 1;
}

void *_sbrk(ptrdiff_t incr);
void *_sbrk(ptrdiff_t incr)
{
    static char *brk = __heap_start;
    if (incr > __heap_end - brk || incr < __heap_start - brk) {
        errno = ENOMEM;
        return (void *)-1;
    }
    char *old = brk;
    brk += incr;
    return old;
}

int _write(int fd, const char *buf, int len);
int _write(int fd, const char *buf, int len)
{
    if (fd != 1 && fd != 2) {
        errno = EBADF;
        return -1;
    }
    char chunk[129];
    int done = 0;
    while (done < len) {
        int k = len - done < 128 ? len - done : 128;
        memcpy(chunk, buf + done, (size_t)k);
        chunk[k] = '\0';
        tth_cm_puts(chunk); /* a NUL byte ends that chunk early: the console carries text */
        done += k;
    }
    return len;
}

int _read(int fd, char *buf, int len);
int _read(int fd, char *buf, int len)
{
    (void)fd;
    (void)buf;
    (void)len;
    return 0;
}

int _close(int fd);
int _close(int fd)
{
    (void)fd;
    errno = EBADF;
    return -1;
}

int _lseek(int fd, int off, int whence);
int _lseek(int fd, int off, int whence)
{
    (void)fd;
    (void)off;
    (void)whence;
    return 0;
}

int _fstat(int fd, struct stat *st);
int _fstat(int fd, struct stat *st)
{
    if (fd < 0 || fd > 2) {
        errno = EBADF;
        return -1;
    }
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFCHR;
    return 0;
}

int _isatty(int fd);
int _isatty(int fd)
{
    return fd >= 0 && fd <= 2;
}
