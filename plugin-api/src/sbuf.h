/* sbuf.h: libtth's one growable text buffer (implemented in ir/common.c), used by the IR printers
 * and the target printer. Internal to libtth: not installed, not part of the plugin API. */
#ifndef TTH_SBUF_H
#define TTH_SBUF_H

#include <stddef.h>

/* A growable, malloc'd text buffer; on OOM it sets `failed` and stops growing. */
typedef struct tth__sbuf {
    char *s;
    size_t n, cap;
    int failed;
} tth__sbuf;

void tth__sb_puts(tth__sbuf *b, const char *s);
void tth__sb_putc(tth__sbuf *b, char c);
void tth__sb_printf(tth__sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tth__sb_indent(tth__sbuf *b, int level);
/* The text (malloc'd, caller frees), or NULL after an OOM. */
char *tth__sb_finish(tth__sbuf *b);

#endif
