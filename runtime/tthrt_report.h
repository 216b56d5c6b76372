/* tthrt_report.h: the compile report page (report.c; docs/profiling.md, "The report page"). */
#ifndef TTHRT_REPORT_H
#define TTHRT_REPORT_H

#include <jansson.h>

#include <tth/diag.h>

/* The page (malloc'd; NULL on OOM) for the report data `data` (explain/report.json: model,
 * target, kinds, calls, memory, refusals, files, and profile when one was merged) and the memory
 * plan's SVG (explain/memory.svg; NULL when the artifact has none). */
char *tthrt_report_html(const json_t *data, const char *memory_svg);

/* The page of an artifact compiled with --explain (its explain/report.json and memory.svg), with
 * `profile` (the output of `tthctl run --profile --json` or `scripts/run-cortexm --profile
 * --json`, or NULL) merged into the per-layer table, and `timings` (a compile answer's "timings",
 * or NULL) shown as the compile's stages. 0 and *html (malloc'd), or a negative code with diag: no
 * such file, not a tar, no report data (compiled without --explain), a profile of another
 * artifact. */
int tthrt_report_from_artifact(const char *path, const json_t *profile, const json_t *timings, char **html,
                               tth_diag *diag);

#endif
