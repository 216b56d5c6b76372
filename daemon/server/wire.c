/* wire.c: framed writes on libuv streams, and the buffers reads land in. Each write owns a copy
 * of its frame, so the caller's buffers may go away at once; the copy is freed in the write
 * callback. */
#include <stdlib.h>
#include <string.h>

#include "tthd.h"

typedef struct tthd_write {
    uv_write_t req;
    tthd_written_cb cb;
    void *data;
    size_t hdr_len;
    char hdr[96];
    uint8_t body[];
} tthd_write;

static void on_written(uv_write_t *req, int status)
{
    tthd_write *w = (tthd_write *)req;
    if (w->cb)
        w->cb(w->data, status);
    free(w);
}

int tthd_write_frame(uv_stream_t *s, const void *body, size_t len, int binary, tthd_written_cb cb,
                     void *data)
{
    tthd_write *w = malloc(sizeof *w + len);
    if (!w)
        return UV_ENOMEM;
    w->cb = cb;
    w->data = data;
    w->hdr_len = tthp_frame_header(w->hdr, sizeof w->hdr, len, binary);
    if (len)
        memcpy(w->body, body, len);
    uv_buf_t bufs[2] = {uv_buf_init(w->hdr, (unsigned)w->hdr_len), uv_buf_init((char *)w->body, (unsigned)len)};
    int rc = uv_write(&w->req, s, bufs, 2, on_written);
    if (rc < 0)
        free(w);
    return rc;
}

int tthd_write_msg(uv_stream_t *s, const json_t *msg, tthd_written_cb cb, void *data)
{
    size_t len;
    char *text = tthp_message_dump(msg, &len);
    if (!text)
        return UV_ENOMEM;
    int rc = tthd_write_frame(s, text, len, 0, cb, data);
    free(text);
    return rc;
}

void tthd_read_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}
