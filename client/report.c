/* report.c: `tthctl report ARTIFACT [PROFILE.json] [-o OUT]`: the compile report page of an
 * artifact compiled with --explain, with a profile's times merged into its per-layer table
 * (runtime/report.c; docs/profiling.md, "The report page"). No daemon is involved. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tthrt_report.h>

#include "tthctl.h"

int tthctl_report_write(const char *artifact, const json_t *profile, const json_t *timings, const char *out,
                        tth_diag *d)
{
    char *html = NULL;
    int rc = tthrt_report_from_artifact(artifact, profile, timings, &html, d);
    if (rc < 0)
        return rc;
    FILE *f = fopen(out, "wb");
    size_t len = strlen(html);
    int ok = f && fwrite(html, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = 0;
    free(html);
    if (!ok)
        return tth_diag_set(d, TTH_EIO, out, "cannot write the report '%s': %s", out, strerror(errno));
    return 0;
}

int tthctl_cmd_report(const tthctl_args *a, tthctl_error *err)
{
    const char *path = a->pos[0];
    char ctx[PATH_MAX + 16], out[PATH_MAX];
    snprintf(ctx, sizeof ctx, "artifact '%s'", path);
    if (a->output) {
        snprintf(out, sizeof out, "%s", a->output);
    } else {
        /* NAME.tar -> NAME.report.html beside it */
        size_t n = strlen(path);
        if (n > 4 && strcmp(path + n - 4, ".tar") == 0)
            n -= 4;
        snprintf(out, sizeof out, "%.*s.report.html", (int)(n < PATH_MAX - 13 ? n : PATH_MAX - 13), path);
    }
    json_t *profile = NULL;
    if (a->n_pos > 1) {
        json_error_t je;
        profile = json_load_file(a->pos[1], 0, &je);
        if (!profile) {
            char loc[PATH_MAX + 16];
            snprintf(loc, sizeof loc, "file '%s'", a->pos[1]);
            tthctl_fail(err, errno == ENOENT ? TTHCTL_EXIT_IO : TTHCTL_EXIT_FAILED, loc, "not a profile: %s (line %d)", je.text,
                        je.line);
            tthctl_hint(err, "give the output of 'tthctl run ARTIFACT --profile --json'");
            return -err->exit;
        }
    }
    tth_diag d;
    tth_diag_clear(&d);
    int rc = tthctl_report_write(path, profile, NULL, out, &d);
    json_decref(profile);
    if (rc < 0)
        return tthctl_from_diag(err, &d, d.code == TTH_EIO ? NULL : ctx);
    if (a->json) {
        json_t *j = json_pack("{s:s, s:s, s:b}", "artifact", path, "report", out, "profile", a->n_pos > 1);
        tthctl_json_print(j);
        json_decref(j);
    } else if (!a->quiet) {
        printf("wrote %s\n", out);
    }
    return 0;
}
