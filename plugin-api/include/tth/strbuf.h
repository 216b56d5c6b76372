/* tth/strbuf.h: a growable text buffer (ABI 1.4), the one that libtth's printers, the code
 * generators and the explain writers build their text in.
 *
 * Start from a zeroed struct. Every function appends and keeps the text NUL-terminated; when
 * memory runs out `failed` is set and the buffer stops growing, so a writer checks once at the
 * end instead of after every append. */
#ifndef TTH_STRBUF_H
#define TTH_STRBUF_H

#include <stddef.h>

#include "tth/ir_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tth_strbuf {
    char *s;          /* the text so far (NULL until the first append) */
    size_t n, cap;    /* its length; the bytes allocated */
    int failed;       /* an allocation failed: the text is incomplete */
} tth_strbuf;

TTH_API void tth_strbuf_putn(tth_strbuf *b, const char *s, size_t n);
TTH_API void tth_strbuf_puts(tth_strbuf *b, const char *s);
TTH_API void tth_strbuf_putc(tth_strbuf *b, char c);
TTH_API void tth_strbuf_printf(tth_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n spaces (an indentation) */
TTH_API void tth_strbuf_spaces(tth_strbuf *b, int n);
/* The text (malloc'd, the caller frees it; "" when nothing was appended), the buffer emptied;
 * NULL, with the buffer freed, after a failed allocation. */
TTH_API char *tth_strbuf_finish(tth_strbuf *b);
/* Free the text and empty the buffer. */
TTH_API void tth_strbuf_free(tth_strbuf *b);

#ifdef __cplusplus
}
#endif

#endif
