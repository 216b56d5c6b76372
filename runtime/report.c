/* report.c: the compile report, one self-contained HTML page (docs/profiling.md, "The report
 * page"). tthd writes it into an artifact compiled with options.explain (explain/report.html,
 * from explain/report.json); `tthctl report` writes it again from an artifact, with a profile's
 * times merged into the per-layer table, and `tthctl compile --explain` beside the artifact, with
 * that compile's stage timings.
 *
 * The page is this file's fixed text around the report's data: the data as JSON in a
 * <script type="application/json"> element, the memory plan's SVG inline, and a script that draws
 * the tables (sorted by a click on a column, filtered by the search field) and the partition
 * graph (one box per call of the entry, in rows by depth, coloured by kind) from the data. It
 * loads nothing: no network, no other file. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tth/strbuf.h"
#include "tthrt_report.h"
#include "tthrt_tar.h"

/* text inside a <script> element: "</" would end it, so every "<" is written as \u003c (the
 * JSON reads the same) */
static void put_script_json(tth_strbuf *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '<')
            tth_strbuf_puts(b, "\\u003c");
        else
            tth_strbuf_putc(b, *p);
    }
}

static const char *const HEAD =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width\">\n"
    "<title>tth report</title>\n<style>\n"
    "body{font-family:sans-serif;font-size:13px;margin:16px;color:#123}\n"
    "h1{font-size:20px;margin:0 0 6px 0}h2{font-size:15px;margin:18px 0 6px 0}\n"
    "table{border-collapse:collapse}th,td{border:1px solid #ccd;padding:2px 6px;text-align:left;"
    "vertical-align:top}\n"
    "th{background:#eef}td.num,th.num{text-align:right}\n"
    "td.why{min-width:260px}table.sortable th{cursor:pointer}table.sortable th:hover{background:#dde}\n"
    ".note{color:#567}#search{margin:4px 0;width:320px}\n"
    ".scroll{overflow:auto;max-height:640px;border:1px solid #ccd}\n"
    ".kind{display:inline-block;width:10px;height:10px;margin-right:4px;border:1px solid #234}\n"
    "</style></head><body>\n"
    "<h1 id=\"title\"></h1><div id=\"subtitle\" class=\"note\"></div>\n"
    "<h2>Summary</h2><table id=\"summary\"><tbody></tbody></table>\n"
    "<div id=\"stages-part\"><h2>Compile stages</h2><div id=\"stages-note\" class=\"note\"></div>"
    "<table id=\"stages\" class=\"sortable\"><thead></thead><tbody></tbody></table></div>\n"
    "<h2>Operators per kind</h2><table id=\"kinds\" class=\"sortable\"><thead></thead><tbody></tbody></table>\n"
    "<h2>Layers</h2><input id=\"search\" type=\"search\" placeholder=\"search the layers (name, node, "
    "operator, strategy)\">\n"
    "<div class=\"scroll\"><table id=\"layers\" class=\"sortable\"><thead></thead><tbody></tbody></table></div>\n"
    "<div id=\"refusals-part\"><h2>Refusals</h2><table id=\"refusals\" class=\"sortable\"><thead></thead>"
    "<tbody></tbody></table></div>\n"
    "<h2>Files</h2><table id=\"files\" class=\"sortable\"><thead></thead><tbody></tbody></table>\n"
    "<h2>Partition graph</h2><div class=\"note\">One box per call of the entry, in rows by depth "
    "(a box's row is one more than its deepest input's), coloured by the kind that runs it; hover "
    "a box for its function, nodes and strategy.</div>\n"
    "<div id=\"legend\"></div><div class=\"scroll\" id=\"graph\"></div>\n"
    "<h2>Memory plan</h2><div class=\"scroll\" id=\"memory\">";

/* after the memory plan's SVG: the data, then the script */
static const char *const SCRIPT =
    "<script>\n"
    "'use strict';\n"
    "const D = JSON.parse(document.getElementById('tth-data').textContent);\n"
    "function el(tag, text, cls) { const e = document.createElement(tag);"
    " if (text !== undefined && text !== null) e.textContent = String(text); if (cls) e.className = cls; return e; }\n"
    "function bytes(n) { if (n === undefined || n === null) return ''; const u = ['bytes', 'KiB', 'MiB', 'GiB'];"
    " let i = 0; let v = Number(n); while (v >= 1024 && i < 3) { v /= 1024; i++; }"
    " return i ? v.toFixed(1) + ' ' + u[i] : v + ' bytes'; }\n"
    "function num(n) { return n === undefined || n === null ? '' : Number(n).toLocaleString('en-US'); }\n"
    "function shapes(list) { return (list || []).map(t => '[' + (t.shape || []).join(',') + ']').join(' '); }\n"
    "function head(table, cols) { const tr = el('tr'); cols.forEach(c => { const th = el('th', c.t, c.num ? 'num' : '');"
    " if (c.num) th.dataset.num = '1'; tr.appendChild(th); }); table.tHead.appendChild(tr); }\n"
    "function row(table, cells, cols) { const tr = el('tr'); cells.forEach((v, i) => {"
    " const td = el('td', cols[i].f ? cols[i].f(v) : v, cols[i].num ? 'num' : cols[i].cls || ''); td.dataset.v = v === undefined || v === null ? '' : v;"
    " tr.appendChild(td); }); table.tBodies[0].appendChild(tr); return tr; }\n"
    "function sortable(table) { Array.from(table.tHead.rows[0].cells).forEach((th, i) => {"
    " th.addEventListener('click', () => { const asc = th.dataset.dir !== 'asc'; th.dataset.dir = asc ? 'asc' : 'desc';"
    " const rows = Array.from(table.tBodies[0].rows); const n = th.dataset.num === '1';"
    " rows.sort((a, b) => { const x = a.cells[i].dataset.v, y = b.cells[i].dataset.v;"
    " const r = n ? (Number(x) || 0) - (Number(y) || 0) : x.localeCompare(y); return asc ? r : -r; });"
    " rows.forEach(r => table.tBodies[0].appendChild(r)); }); }); }\n"
    "const PALETTE = ['#6a9fd4', '#f0a04b', '#7fbf7f', '#d47f9f', '#b49ad4', '#d4c46a', '#6ad4c8'];\n"
    "const kinds = D.kinds && D.kinds.length ? D.kinds : [];\n"
    "function colour(k) { const i = kinds.indexOf(k); return PALETTE[(i < 0 ? kinds.length : i) % PALETTE.length]; }\n"
    "document.getElementById('title').textContent = 'tth report: ' + D.model;\n"
    "const ins = D.profile && D.profile.unit === 'instructions';\n"
    "document.getElementById('subtitle').textContent = 'target ' + D.target + (ins ? '; with the profile from the '"
    " + D.profile.board + ' board (whole entry ' + num(D.profile.whole_instructions) + ' instructions under QEMU)'"
    " : D.profile ? '; with the profile of ' + D.profile.runs + ' runs (whole run '"
    " + D.profile.whole_median_ms.toFixed(3) + ' ms, median)' : '');\n"
    "const calls = D.calls || [];\n"
    "const macs = calls.reduce((s, c) => s + (c.macs || 0), 0);\n"
    "const m = D.memory || {}; const plan = m.plan || {};\n"
    "const files = D.files || [];\n"
    "const code = files.filter(f => /\\.(so|o|c|h)$/.test(f.path)).reduce((s, f) => s + f.bytes, 0);\n"
    "const summary = [['model', D.model], ['target', D.target], ['kinds', kinds.join(', ')],"
    " ['calls of the entry', num(calls.length)], ['multiply-adds', num(macs)],"
    " ['parameters', bytes(m.constants_bytes) + (m.derived_bytes ? ' (+ ' + bytes(m.derived_bytes)"
    " + ' computed from them when the model is bound)' : '')], ['workspace', bytes(m.workspace_bytes)"
    " + (plan.lower_bound_bytes ? ' (lower bound ' + bytes(plan.lower_bound_bytes) + ', '"
    " + (m.workspace_bytes / plan.lower_bound_bytes).toFixed(3) + 'x; ' + (plan.algorithm || '') + ')' : '')],"
    " ['inputs and outputs', bytes(m.io_bytes)], ['code (sources, objects, libraries)', bytes(code)],"
    " ['compile stages', D.timings ? 'below: this compile, ' + Number(D.timings.total || 0).toFixed(3) + ' s in all'"
    " : 'not kept in the artifact, which is the same bytes on every compile: the page tthctl compile --explain writes"
    " beside it has them']];\n"
    "if (ins) summary.push(['profile', 'board ' + D.profile.board + ', whole entry ' + num(D.profile.whole_instructions)"
    " + ' instructions, calls ' + num(D.profile.calls_instructions)]);\n"
    "else if (D.profile) summary.push(['profile', num(D.profile.runs) + ' runs, whole run ' + D.profile.whole_median_ms.toFixed(3)"
    " + ' ms (median), calls ' + D.profile.calls_median_sum_ms.toFixed(3) + ' ms']);\n"
    "const st = document.getElementById('summary');\n"
    "summary.forEach(r => { const tr = el('tr'); tr.appendChild(el('th', r[0])); tr.appendChild(el('td', r[1])); st.tBodies[0].appendChild(tr); });\n"
    "const perKind = {};\n"
    "calls.forEach(c => { const k = c.kind || '?'; perKind[k] = perKind[k] || {calls: 0, ops: {}, macs: 0};"
    " perKind[k].calls++; perKind[k].macs += c.macs || 0; (c.ops || [c.op]).forEach(o => { perKind[k].ops[o] = (perKind[k].ops[o] || 0) + 1; }); });\n"
    "const kt = document.getElementById('kinds');\n"
    "const kc = [{t: 'kind'}, {t: 'calls', num: 1}, {t: 'multiply-adds', num: 1, f: num}, {t: 'operators'}];\n"
    "head(kt, kc);\n"
    "Object.keys(perKind).forEach(k => { const p = perKind[k]; row(kt, [k, p.calls, p.macs,"
    " Object.keys(p.ops).sort().map(o => o + ' ' + p.ops[o]).join(', ')], kc); });\n"
    "const lc = [{t: '#', num: 1}, {t: 'function'}, {t: 'ONNX nodes'}, {t: 'ONNX tensors'}, {t: 'kind'}, {t: 'operators'},"
    " {t: 'strategy'}, {t: 'why this strategy', cls: 'why'}, {t: 'inputs'}, {t: 'outputs'}, {t: 'multiply-adds', num: 1, f: num},"
    " {t: 'parameter bytes', num: 1, f: bytes}, {t: 'activation bytes', num: 1, f: bytes}];\n"
    "if (D.profile) lc.push(ins ? {t: 'instructions', num: 1, f: v => v === '' ? '' : num(v)}"
    " : {t: 'median us', num: 1, f: v => v === '' ? '' : Number(v).toFixed(1)},"
    " {t: 'share', num: 1, f: v => v === '' ? '' : (100 * v).toFixed(1) + ' %'},"
    " ins ? {t: 'MACs per instruction', num: 1, f: v => v === '' ? '' : Number(v).toFixed(3)}"
    " : {t: 'GFLOP/s', num: 1, f: v => v === '' ? '' : Number(v).toFixed(1)});\n"
    "const lt = document.getElementById('layers');\n"
    "head(lt, lc);\n"
    "calls.forEach(c => { const act = (c.outputs || []).reduce((s, t) => s + (t.bytes || 0), 0);"
    " const cells = [c.index, c.function, (c.nodes || []).join(', '), (c.tensors || []).join(', '), c.kind, (c.ops || []).join(' '),"
    " (c.strategies || []).join(', '), (c.strategy_why || []).map(w => w.replace(/^[^:]*: /, '').replace(/[a-z0-9_.]+\\//g, '')).join('; '),"
    " shapes(c.inputs), shapes(c.outputs), c.macs || 0, c.param_bytes || 0, act];"
    " if (ins) cells.push(c.instructions === undefined ? '' : c.instructions, c.share === undefined ? '' : c.share,"
    " c.instructions ? (c.macs || 0) / c.instructions : '');"
    " else if (D.profile) cells.push(c.median_us === undefined ? '' : c.median_us, c.share === undefined ? '' : c.share,"
    " c.gflops === undefined ? '' : c.gflops);"
    " row(lt, cells, lc); });\n"
    "document.getElementById('search').addEventListener('input', e => { const q = e.target.value.toLowerCase();"
    " Array.from(lt.tBodies[0].rows).forEach(r => { r.style.display = r.textContent.toLowerCase().includes(q) ? '' : 'none'; }); });\n"
    "const refusals = D.refusals || [];\n"
    "const rt = document.getElementById('refusals');\n"
    "const rc = [{t: 'node'}, {t: 'operator'}, {t: 'kind'}, {t: 'reason'}];\n"
    "head(rt, rc);\n"
    "refusals.forEach(r => row(rt, [r.node, r.op, r.kind, r.reason], rc));\n"
    "if (!refusals.length) document.getElementById('refusals-part').style.display = 'none';\n"
    "const T = D.timings;\n"
    "if (T) { const sc = [{t: 'stage or hook'}, {t: 'seconds', num: 1, f: v => Number(v).toFixed(4)},"
    " {t: 'share', num: 1, f: v => (100 * v).toFixed(1) + ' %'}, {t: 'plugin, calls'}];"
    " const tt = document.getElementById('stages'); head(tt, sc); const total = Number(T.total) || 0;"
    " (T.stages || []).forEach(x => row(tt, ['stage ' + x.stage, x.seconds, total ? x.seconds / total : 0, ''], sc));"
    " (T.hooks || []).forEach(x => row(tt, ['hook ' + x.hook, x.seconds, total ? x.seconds / total : 0,"
    " x.plugin + ', ' + x.calls], sc));"
    " document.getElementById('stages-note').textContent = 'this compile: ' + total.toFixed(3) + ' s in all, cache '"
    " + (T.cache || '?') + ', cache lookup ' + Number(T.cacheLookup || 0).toFixed(4) + ' s'"
    " + (T.workerPeakRss ? ', the worker\\'s peak memory ' + bytes(T.workerPeakRss) : '')"
    " + ((T.stages || []).length ? '' : ' (served from the cache: no stage ran)'); }\n"
    "else document.getElementById('stages-part').style.display = 'none';\n"
    "const ft = document.getElementById('files');\n"
    "const fc = [{t: 'file'}, {t: 'bytes', num: 1, f: bytes}];\n"
    "head(ft, fc);\n"
    "files.forEach(f => row(ft, [f.path, f.bytes], fc));\n"
    "[kt, lt, rt, ft].forEach(sortable);\n"
    "/* the partition graph: a call's inputs are the outputs of earlier calls with the same buffer name */\n"
    "/* or with bytes in the same place: a slice [part, whole, offset, bytes] (a concatenation or a view done in place,\n"
    "   which has no call) is read after the whole's own producer and the producers of the slices it overlaps */\n"
    "const direct = {}; calls.forEach((c, i) => (c.outputs || []).forEach(t => { (direct[t.name] = direct[t.name] || []).push(i); }));\n"
    "const slices = D.slices || [], sliceOf = {}; slices.forEach(s => { sliceOf[s[0]] = s; });\n"
    "function producersOf(name) { const s = sliceOf[name], whole = s ? s[1] : name, lo = s ? s[2] : 0,"
    " hi = s ? s[2] + s[3] : Infinity, out = (direct[name] || []).concat(direct[whole] || []);"
    " slices.forEach(q => { if (q[1] === whole && q[0] !== name && q[2] < hi && q[2] + q[3] > lo) out.push(...(direct[q[0]] || [])); });"
    " return [...new Set(out)]; }\n"
    "const producers = {}; calls.forEach(c => (c.inputs || []).forEach(t => { producers[t.name] = producersOf(t.name); }));\n"
    "const depth = [], edges = [];\n"
    "calls.forEach((c, i) => { let d = 0; (c.inputs || []).forEach(t => (producers[t.name] || []).forEach(p => {"
    " if (p < i) { edges.push([p, i]); d = Math.max(d, depth[p] + 1); } })); depth.push(d); });\n"
    "const rowsOf = []; depth.forEach((d, i) => { (rowsOf[d] = rowsOf[d] || []).push(i); });\n"
    "const BW = 150, BH = 30, GX = 16, GY = 22, pos = [];\n"
    "let width = 0; rowsOf.forEach((r, d) => { r.forEach((i, k) => { pos[i] = [8 + k * (BW + GX), 8 + d * (BH + GY)]; });"
    " width = Math.max(width, 16 + r.length * (BW + GX)); });\n"
    "const height = 16 + rowsOf.length * (BH + GY);\n"
    "const NS = 'http://www.w3.org/2000/svg';\n"
    "function sv(tag, attrs) { const e = document.createElementNS(NS, tag); Object.keys(attrs).forEach(a => e.setAttribute(a, attrs[a])); return e; }\n"
    "const svg = sv('svg', {width: width, height: height, viewBox: '0 0 ' + width + ' ' + height, 'font-size': 10, 'font-family': 'sans-serif'});\n"
    "edges.forEach(e => { const a = pos[e[0]], b = pos[e[1]];"
    " svg.appendChild(sv('line', {x1: a[0] + BW / 2, y1: a[1] + BH, x2: b[0] + BW / 2, y2: b[1], stroke: '#89a', 'stroke-width': 0.8})); });\n"
    "calls.forEach((c, i) => { const g = sv('g', {}); const p = pos[i];"
    " g.appendChild(sv('rect', {x: p[0], y: p[1], width: BW, height: BH, rx: 4, fill: colour(c.kind), stroke: '#234', 'stroke-width': 0.6}));"
    " const t = sv('text', {x: p[0] + 4, y: p[1] + 12}); t.textContent = '#' + c.index + ' ' + (c.ops || [c.op]).join(' ').slice(0, 24); g.appendChild(t);"
    " const t2 = sv('text', {x: p[0] + 4, y: p[1] + 25}); t2.textContent = ((c.nodes || [])[0] || c.function).slice(-26); g.appendChild(t2);"
    " const ti = sv('title', {}); ti.textContent = c.function + ' (' + c.kind + ')\\nnodes: ' + (c.nodes || []).join(', ')"
    " + '\\nstrategy: ' + ((c.strategies || []).join(', ') || 'generic') + '\\noutputs: ' + shapes(c.outputs); g.appendChild(ti);"
    " svg.appendChild(g); });\n"
    "document.getElementById('graph').appendChild(svg);\n"
    "const legend = document.getElementById('legend');\n"
    "Object.keys(perKind).forEach(k => { const s = el('span', null, 'kind'); s.style.background = colour(k);"
    " legend.appendChild(s); legend.appendChild(el('span', k + '   ')); });\n"
    "document.body.dataset.ready = '1';\n"
    "</script>\n</body></html>\n";

char *tthrt_report_html(const json_t *data, const char *memory_svg)
{
    tth_strbuf b = {0};
    char *json = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
    if (!json)
        return NULL;
    tth_strbuf_puts(&b, HEAD);
    if (memory_svg && *memory_svg) {
        /* inline: from the <svg element on (no XML declaration inside HTML) */
        const char *s = strstr(memory_svg, "<svg");
        tth_strbuf_puts(&b, s ? s : "");
    } else {
        tth_strbuf_puts(&b, "<p class=\"note\">The artifact has no memory plan picture (compiled without --explain).</p>");
    }
    tth_strbuf_puts(&b, "</div>\n<script type=\"application/json\" id=\"tth-data\">");
    put_script_json(&b, json);
    tth_strbuf_puts(&b, "</script>\n");
    tth_strbuf_puts(&b, SCRIPT);
    free(json);
    return tth_strbuf_finish(&b);
}

/* Merge `tthctl run --profile --json`'s "profile" (or `scripts/run-cortexm --profile --json`'s)
 * into the report data: each call's median_us, min_us, share and gflops (or instructions) by index, the calls checked against the data's (the same functions in
 * the same order), and the run's figures as "profile". */
static int merge_profile(json_t *data, const json_t *prof, tth_diag *diag)
{
    const json_t *p = json_object_get(prof, "profile");
    if (!p)
        p = prof; /* the "profile" object itself */
    const json_t *pcalls = json_object_get(p, "calls");
    json_t *calls = json_object_get(data, "calls");
    if (!json_is_array(pcalls))
        return tth_diag_set(diag, TTH_EINVAL, "profile", "no \"calls\" in the profile: give the output of 'tthctl run "
                            "ARTIFACT --profile --json'");
    size_t i;
    const json_t *pc;
    json_array_foreach(pcalls, i, pc) {
        json_int_t k = json_integer_value(json_object_get(pc, "index"));
        json_t *c = k >= 0 ? json_array_get(calls, (size_t)k) : NULL;
        const char *pf = json_string_value(json_object_get(pc, "function"));
        const char *cf = json_string_value(json_object_get(c, "function"));
        if (!c || !pf || !cf || strcmp(pf, cf) != 0) {
            int rc = tth_diag_set(diag, TTH_EINVAL, "profile", "the profile's call %lld is '%s', the artifact's '%s': "
                                  "the profile is of another artifact", (long long)k, pf ? pf : "?", cf ? cf : "none");
            tth_diag_hint(diag, "profile this artifact: tthctl run ARTIFACT --profile --json > PROFILE.json "
                                "(compiled with --profile as well as --explain)");
            return rc;
        }
        static const char *const keys[] = {"median_us", "min_us", "share", "gflops", "instructions"};
        for (size_t q = 0; q < sizeof keys / sizeof keys[0]; q++)
            if (json_object_get(pc, keys[q]))
                json_object_set(c, keys[q], json_object_get(pc, keys[q]));
    }
    /* a time profile (tthctl run --profile), or instructions from a board (scripts/run-cortexm --profile) */
    const char *unit = json_string_value(json_object_get(p, "unit"));
    json_t *run = unit && strcmp(unit, "instructions") == 0
                      ? json_pack("{s:s, s:O*, s:O*, s:O*}", "unit", unit, "board", json_object_get(p, "board"),
                                  "whole_instructions", json_object_get(p, "whole_instructions"),
                                  "calls_instructions", json_object_get(p, "calls_instructions"))
                      : json_pack("{s:O*, s:O*, s:O*}", "runs", json_object_get(p, "runs"), "whole_median_ms",
                                  json_object_get(p, "whole_median_ms"), "calls_median_sum_ms",
                                  json_object_get(p, "calls_median_sum_ms"));
    if (!run || json_object_set_new(data, "profile", run) != 0)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    return 0;
}

int tthrt_report_from_artifact(const char *path, const json_t *profile, const json_t *timings, char **html,
                               tth_diag *diag)
{
    *html = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tth_diag_set(diag, errno == ENOENT ? TTH_ENOENT : TTH_EIO, path, "cannot open artifact '%s': %s", path,
                            strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return tth_diag_set(diag, TTH_EIO, path, "'%s' is not an artifact (not a non-empty regular file)", path);
    }
    size_t len = (size_t)st.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return tth_diag_set(diag, TTH_EIO, path, "cannot map '%s': %s", path, strerror(errno));
    tthrt__tar_file f;
    size_t off = 0;
    const char *why = NULL;
    json_t *data = NULL;
    char *svg = NULL;
    int r, rc = 0;
    while ((r = tthrt__tar_next(map, len, &off, &f, &why)) == 1) {
        const char *name = strncmp(f.path, "./", 2) == 0 ? f.path + 2 : f.path;
        if (strcmp(name, "explain/report.json") == 0) {
            json_error_t je;
            json_decref(data);
            if (!(data = json_loadb((const char *)f.data, f.size, 0, &je))) {
                rc = tth_diag_set(diag, TTH_EPARSE, "explain/report.json", "invalid JSON at line %d: %s", je.line, je.text);
                break;
            }
        } else if (strcmp(name, "explain/memory.svg") == 0) {
            free(svg);
            if ((svg = malloc(f.size + 1)) != NULL) {
                memcpy(svg, f.data, f.size);
                svg[f.size] = 0;
            }
        }
    }
    if (!rc && r < 0)
        rc = tth_diag_set(diag, TTH_EPARSE, path, "'%s' is not a valid artifact tar: %s", path, why ? why : "malformed");
    if (!rc && !data) {
        rc = tth_diag_set(diag, TTH_EINVAL, NULL, "the artifact has no report data (explain/report.json)");
        tth_diag_hint(diag, "compile it with --explain (and --profile to merge a profile's times)");
    }
    if (!rc && profile)
        rc = merge_profile(data, profile, diag);
    if (!rc && timings && json_object_set(data, "timings", (json_t *)timings) != 0)
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    if (!rc && !(*html = tthrt_report_html(data, svg)))
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    json_decref(data);
    free(svg);
    munmap(map, len);
    return rc;
}
