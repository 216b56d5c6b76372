/* explain_svg.c: the memory plan as an SVG picture (explain/memory.svg in the artifact when
 * options.explain is set). Requires a plan (memplan.c).
 *
 * Time (the statement of the AOT entry) runs across, the workspace offset up; each buffer is a
 * rectangle from its first to its last statement and from its offset to its end, blue for
 * intermediate tensors (WORKSPACE), orange for operator scratch (LOCAL); a label with the ONNX
 * tensor's name (else the node it is the output of, else the buffer's name) and its size sits
 * inside when the rectangle is big enough (the name's tail when it is narrow), and every
 * rectangle carries a <title> (shown on hover) with name, ONNX tensor and node, function, size,
 * offset and lifetime. The lower bound is a dashed
 * red line. Hand-written text with fixed number formats: the same plan gives the same bytes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_internal.h"
#include "tth/strbuf.h"

/* Text for XML: escapes & < > " */
static void svg_text(tth_strbuf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': tth_strbuf_printf(b, "&amp;"); break;
        case '<': tth_strbuf_printf(b, "&lt;"); break;
        case '>': tth_strbuf_printf(b, "&gt;"); break;
        case '"': tth_strbuf_printf(b, "&quot;"); break;
        default: tth_strbuf_printf(b, "%c", *s);
        }
    }
}

/* "1.5 MiB", "12 KiB", "96 B" */
static void human(char *out, size_t len, size_t bytes)
{
    if (bytes >= (size_t)1 << 20)
        snprintf(out, len, "%.1f MiB", (double)bytes / (1 << 20));
    else if (bytes >= 1024)
        snprintf(out, len, "%.1f KiB", (double)bytes / 1024);
    else
        snprintf(out, len, "%zu B", bytes);
}

enum { LEFT = 90, TOP = 70, PLOT_W = 1000, PLOT_H = 560, RIGHT = 30, BOTTOM = 60 };

char *tth_explain_memory_svg(const tth_mem_plan *plan, const char *model)
{
    tth_strbuf b = {0};
    int64_t steps = 1;
    for (size_t i = 0; i < plan->nitems; i++)
        if (plan->items[i].end + 1 > steps)
            steps = plan->items[i].end + 1;
    size_t ymax = plan->workspace_bytes > plan->lower_bound_bytes ? plan->workspace_bytes
                                                                    : plan->lower_bound_bytes;
    if (ymax == 0)
        ymax = 1;
    double xs = (double)PLOT_W / (double)steps, ys = (double)PLOT_H / (double)ymax;
    char ws[32], lb[32], tot[32];
    human(ws, sizeof ws, plan->workspace_bytes);
    human(lb, sizeof lb, plan->lower_bound_bytes);
    human(tot, sizeof tot, plan->total_bytes);

    tth_strbuf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
               LEFT + PLOT_W + RIGHT, TOP + PLOT_H + BOTTOM, LEFT + PLOT_W + RIGHT, TOP + PLOT_H + BOTTOM);
    tth_strbuf_printf(&b, "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    tth_strbuf_printf(&b, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">memory plan of '",
               LEFT);
    svg_text(&b, model ? model : "model");
    tth_strbuf_printf(&b, "'</text>\n<text x=\"%d\" y=\"42\">workspace %s (%zu bytes), lower bound %s "
               "(%zu bytes), %zu buffers totalling %s; algorithm %s, alignment %u</text>\n",
               LEFT, ws, plan->workspace_bytes, lb, plan->lower_bound_bytes, plan->nitems, tot,
               tth_memplan_algo_name(plan->algo), plan->alignment);
    tth_strbuf_printf(&b, "<text x=\"%d\" y=\"58\" fill=\"#555\">time: statement of the entry, across; "
               "offset in the workspace, up. Blue: intermediate tensors; orange: operator "
               "scratch.</text>\n", LEFT);

    /* axes and ticks */
    tth_strbuf_printf(&b, "<g stroke=\"#333\" stroke-width=\"1\">\n"
               "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n"
               "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n</g>\n",
               LEFT, TOP, LEFT, TOP + PLOT_H, LEFT, TOP + PLOT_H, LEFT + PLOT_W, TOP + PLOT_H);
    for (int k = 0; k <= 4; k++) {
        size_t v = ymax / 4 * (size_t)k;
        double y = TOP + PLOT_H - (double)v * ys;
        char hv[32];
        human(hv, sizeof hv, v);
        tth_strbuf_printf(&b, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#ccc\"/>"
                   "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\">%s</text>\n",
                   LEFT - 4, y, LEFT + PLOT_W, y, LEFT - 6, y + 4, hv);
    }
    int64_t tstep = steps <= 10 ? 1 : (steps + 9) / 10;
    for (int64_t t = 0; t < steps; t += tstep)
        tth_strbuf_printf(&b, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%lld</text>\n",
                   LEFT + ((double)t + 0.5) * xs, TOP + PLOT_H + 16, (long long)t);
    tth_strbuf_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">statement of the entry "
               "(call index)</text>\n", LEFT + PLOT_W / 2, TOP + PLOT_H + 40);
    tth_strbuf_printf(&b, "<text x=\"16\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">"
               "offset (bytes)</text>\n", TOP + PLOT_H / 2, TOP + PLOT_H / 2);

    /* the buffers */
    for (size_t i = 0; i < plan->nitems; i++) {
        const tth_mem_item *it = &plan->items[i];
        if (it->buf->offset < 0)
            continue;
        int local = it->buf->scope == TTH_SCOPE_LOCAL;
        double x = LEFT + (double)it->start * xs, w = (double)(it->end - it->start + 1) * xs;
        double y = TOP + PLOT_H - (double)((size_t)it->buf->offset + it->size) * ys;
        double h = (double)it->size * ys;
        /* alternate two shades so neighbours stay apart */
        const char *fill = local ? (i % 2 ? "#f5b971" : "#f0a04b") : (i % 2 ? "#8fb8e0" : "#6a9fd4");
        char hs[32];
        human(hs, sizeof hs, it->size);
        tth_strbuf_printf(&b, "<g><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
                   "stroke=\"#234\" stroke-width=\"0.5\"/><title>", x, y, w, h < 0.5 ? 0.5 : h, fill);
        svg_text(&b, it->buf->name);
        if (local && it->func) {
            tth_strbuf_printf(&b, " (scratch of ");
            svg_text(&b, it->func);
            tth_strbuf_printf(&b, ")");
        } else if (it->node) {
            if (it->tensor) {
                tth_strbuf_printf(&b, ", ONNX tensor ");
                svg_text(&b, it->tensor);
            }
            tth_strbuf_printf(&b, ", the output of ONNX node ");
            svg_text(&b, it->node);
            if (it->func) {
                tth_strbuf_printf(&b, " (");
                svg_text(&b, it->func);
                tth_strbuf_printf(&b, ")");
            }
        }
        tth_strbuf_printf(&b, ": %zu bytes at offset %lld, live at statements %lld..%lld</title>",
                   it->size, (long long)it->buf->offset, (long long)it->start, (long long)it->end);
        if (w >= 48 && h >= 13) {
            /* the ONNX node's name and the size; in a narrower box the name alone, then its
             * tail, then the size alone (about 5 px a character at this font size) */
            const char *label = !local && it->tensor ? it->tensor : !local && it->node ? it->node : it->buf->name;
            size_t fit = (size_t)(w / 5), len = strlen(label), hl = strlen(hs);
            const char *show = label, *size = hs;
            int cut = 0;
            if (len + 1 + hl > fit) {
                size = NULL;
                if (len > fit) {
                    if (fit >= 6) {
                        show = label + len - (fit - 1);
                        while (((unsigned char)*show & 0xC0) == 0x80) /* not inside a UTF-8 character */
                            show++;
                        cut = 1;
                    } else {
                        show = NULL;
                        size = hl <= fit ? hs : NULL;
                    }
                }
            }
            if (show || size) {
                tth_strbuf_printf(&b, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"9\">", x + 2, y + 10);
                if (cut)
                    tth_strbuf_printf(&b, "…");
                if (show)
                    svg_text(&b, show);
                tth_strbuf_printf(&b, "%s%s</text>", show && size ? " " : "", size ? size : "");
            }
        }
        tth_strbuf_printf(&b, "</g>\n");
    }

    /* the lower bound */
    double ylb = TOP + PLOT_H - (double)plan->lower_bound_bytes * ys;
    tth_strbuf_printf(&b, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#c00\" "
               "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n"
               "<text x=\"%d\" y=\"%.2f\" fill=\"#c00\" text-anchor=\"end\">lower bound %s</text>\n",
               LEFT, ylb, LEFT + PLOT_W, ylb, LEFT + PLOT_W, ylb - 4, lb);
    tth_strbuf_printf(&b, "</svg>\n");
    return tth_strbuf_finish(&b); /* NULL after an allocation failed */
}
