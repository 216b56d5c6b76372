/* log.c: one line per event on stderr, "tthd[pid]: level: message". */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "tthd.h"

int tthd_log_level = TTHD_LOG_INFO;

void tthd_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (level > tthd_log_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tthd[%d]: %s: %s\n", (int)getpid(), names[level < 0 ? 0 : level > 3 ? 3 : level], line);
}
