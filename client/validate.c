/* validate.c: `tthctl validate ARTIFACT MODEL`: run an artifact and a reference compile of its
 * model on the same inputs and compare their outputs (docs/tthctl.md, "validate").
 *
 * The reference is MODEL compiled by tthd for the target `c` with options.reference: every
 * operator by its generic lowering (no strategy: no register-tiled, Winograd or blocked-layout
 * kernel, no blocked layout, no parallel loop), with the artifact's input shapes. It shares the
 * importer and the graph passes with the artifact, not the kernels, which is where target-specific
 * code goes wrong. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tth/diag.h>
#include <tth/ir_common.h>
#include <tthrt.h>

#include "tth_config.h"
#include "tthctl.h"

#define MAX_IO 256

/* splitmix64: the random inputs of a seed are the same on every machine */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
    return ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
}

/* a standard normal value (Box-Muller) */
static double normal(uint64_t *s)
{
    double u = uniform01(s), v = uniform01(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Fill a with random values: normal for float32/float64, 0..9 for integers, 0/1 for bool.
 * Returns 0, or -1 for a dtype without a random form (float16, bfloat16: give them with --input). */
static int fill_random(tthrt_array *a, uint64_t *s)
{
    int64_t n = tthctl_numel(a);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = next_u64(s) % 10;
        switch (a->dtype) {
        case TTH_F32: ((float *)a->data)[i] = (float)normal(s); break;
        case TTH_F64: ((double *)a->data)[i] = normal(s); break;
        case TTH_I8: ((int8_t *)a->data)[i] = (int8_t)k; break;
        case TTH_I16: ((int16_t *)a->data)[i] = (int16_t)k; break;
        case TTH_I32: ((int32_t *)a->data)[i] = (int32_t)k; break;
        case TTH_I64: ((int64_t *)a->data)[i] = (int64_t)k; break;
        case TTH_U8: ((uint8_t *)a->data)[i] = (uint8_t)k; break;
        case TTH_U16: ((uint16_t *)a->data)[i] = (uint16_t)k; break;
        case TTH_U32: ((uint32_t *)a->data)[i] = (uint32_t)k; break;
        case TTH_U64: ((uint64_t *)a->data)[i] = k; break;
        case TTH_BOOL: ((uint8_t *)a->data)[i] = (uint8_t)(k & 1); break;
        default: return -1;
        }
    }
    return 0;
}

static int parse_seed(const char *s, uint64_t *out, tthctl_error *err)
{
    *out = 0;
    if (!s)
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-') {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--seed '%s' is not a non-negative integer", s);
        return -TTHCTL_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

static int parse_tolerance(const char *s, double *out, tthctl_error *err)
{
    *out = 1e-3;
    if (!s)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0) || !isfinite(v)) {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--tolerance '%s' is not a number >= 0", s);
        tthctl_hint(err, "for example --tolerance 1e-3: a thousandth of the output's largest magnitude");
        return -TTHCTL_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

/* The comparison of one output with the reference's. */
typedef struct cmp_row {
    double max_abs, max_rel, scale;
    int64_t worst;            /* the element of the largest absolute difference */
    int64_t nan_mismatch;     /* elements NaN on one side only */
    int64_t argmax, ref_argmax; /* -1 when not a one-row output */
    int ok;
    char why[256];
} cmp_row;

static void compare(const tthrt_array *got, const tthrt_array *ref, double tol, cmp_row *r)
{
    memset(r, 0, sizeof *r);
    r->argmax = r->ref_argmax = -1;
    int64_t n = tthctl_numel(ref);
    for (int64_t i = 0; i < n; i++) {
        double b = fabs(tthctl_element(ref, i));
        if (isfinite(b) && b > r->scale)
            r->scale = b;
    }
    int is_float = tth_dtype_is_float(ref->dtype);
    for (int64_t i = 0; i < n; i++) {
        double a = tthctl_element(got, i), b = tthctl_element(ref, i);
        if (isnan(a) != isnan(b) || (isinf(b) && a != b) || (isinf(a) && a != b)) {
            r->nan_mismatch++;
            continue;
        }
        if (isnan(a) || isinf(a))
            continue;
        double d = fabs(a - b);
        if (d > r->max_abs) {
            r->max_abs = d;
            r->worst = i;
        }
        double rel = d / fmax(fabs(b), 1e-30);
        if (d > 0 && rel > r->max_rel)
            r->max_rel = rel;
    }
    if (tthctl_one_row(ref)) {
        r->argmax = tthctl_argmax(got);
        r->ref_argmax = tthctl_argmax(ref);
    }
    double allowed = is_float ? tol * r->scale : 0;
    r->ok = r->nan_mismatch == 0 && r->max_abs <= allowed;
    if (r->nan_mismatch)
        snprintf(r->why, sizeof r->why, "%lld element(s) NaN or infinite on one side only",
                 (long long)r->nan_mismatch);
    else if (!r->ok)
        snprintf(r->why, sizeof r->why, "element %lld: %.9g, the reference %.9g (allowed difference %.3g)",
                 (long long)r->worst, tthctl_element(got, r->worst), tthctl_element(ref, r->worst), allowed);
}

/* "NAME=D0,D1,..." for --input-shape, from an input of the artifact */
static char *shape_arg(const tthrt_tensor_info *in)
{
    size_t cap = strlen(in->name) + 24 * (size_t)(in->rank + 1) + 2;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t k = (size_t)snprintf(s, cap, "%s=", in->name);
    for (int32_t d = 0; d < in->rank; d++)
        k += (size_t)snprintf(s + k, cap - k, "%s%lld", d ? "," : "", (long long)in->shape[d]);
    return s;
}

/* Compile the reference into dir/reference.tar: target c, options.reference, the artifact's
 * input shapes, the user's --bind. */
static int compile_reference(const tthctl_args *a, const tthrt_model *m, const char *tar, tthctl_error *err)
{
    size_t nin = m ? tthrt_model_input_count(m) : 0; /* on a board: the model's own shapes */
    const char *shapes[MAX_IO];
    char *owned[MAX_IO];
    size_t ns = 0;
    int rc = 0;
    for (size_t i = 0; i < nin && i < MAX_IO; i++) {
        const tthrt_tensor_info *in = tthrt_model_input(m, i);
        if (in->rank == 0)
            continue;
        if (!(owned[ns] = shape_arg(in))) {
            rc = tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
            goto out;
        }
        shapes[ns] = owned[ns];
        ns++;
    }
    tthctl_args r = *a;
    r.target = "c";
    r.output = tar;
    r.name = "validate_reference"; /* its own symbols beside the artifact's in this process */
    r.quiet = 1;
    r.json = 0;
    r.explain = r.profile = r.timings = r.no_cache = r.stream = 0;
    r.dump_ir = NULL;
    r.shared = 1;
    r.reference = 1;
    r.shapes = shapes;
    r.n_shapes = ns;
    r.pos = a->pos + 1;
    r.n_pos = 1;
    /* compile prints its result on stdout: validate prints its own */
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *null = saved >= 0 ? fopen("/dev/null", "w") : NULL;
    if (null)
        dup2(fileno(null), STDOUT_FILENO);
    rc = tthctl_cmd_compile(&r, err);
    fflush(stdout);
    if (null) {
        dup2(saved, STDOUT_FILENO);
        fclose(null);
    }
    if (saved >= 0)
        close(saved);
    if (rc < 0 && !strstr(err->message, "reference"))
        snprintf(err->message + strlen(err->message), sizeof err->message - strlen(err->message),
                 " (compiling the reference: '%s' for target c)", a->pos[1]);
out:
    for (size_t i = 0; i < ns; i++)
        free(owned[i]);
    return rc;
}

/* Input `in`'s values: its --input file, else random from *state. 0 with *arr (and *file, or NULL
 * for random), or a negative exit code with err. */
static int input_values(const tthrt_tensor_info *in, const tthctl_args *a, uint64_t *state, tthrt_array *arr,
                        const char **file, tthctl_error *err, const char *ctx)
{
    tth_diag d;
    tth_diag_clear(&d);
    *file = NULL;
    for (size_t k = 0; k < a->n_inputs; k++) {
        const char *eq = strchr(a->inputs[k], '=');
        if (eq && (size_t)(eq - a->inputs[k]) == strlen(in->name) && !strncmp(a->inputs[k], in->name, strlen(in->name)))
            *file = eq + 1;
    }
    if (*file)
        return tthrt_array_load(*file, arr, &d) < 0 ? tthctl_from_diag(err, &d, ctx) : 0;
    if (tthrt_array_init(arr, in->dtype, in->rank, in->shape, &d) < 0)
        return tthctl_from_diag(err, &d, ctx);
    if (fill_random(arr, state) < 0) {
        tthrt_array_clear(arr);
        char loc[300];
        snprintf(loc, sizeof loc, "input '%s'", in->name);
        tthctl_fail(err, TTHCTL_EXIT_USAGE, loc, "validate makes no random %s values", tth_dtype_name(in->dtype));
        tthctl_hint(err, "give the input: --input %s=FILE.npy (or .pb)", in->name);
        return -TTHCTL_EXIT_USAGE;
    }
    return 0;
}

static int bind_inputs(tthrt_model *m, tthrt_model *ref, const tthctl_args *a, uint64_t seed, json_t *jin,
                       tthctl_error *err, const char *ctx)
{
    tth_diag d;
    tth_diag_clear(&d);
    uint64_t state = seed;
    for (size_t i = 0; i < tthrt_model_input_count(m); i++) {
        const tthrt_tensor_info *in = tthrt_model_input(m, i);
        const char *file;
        tthrt_array arr = {0};
        int rc = input_values(in, a, &state, &arr, &file, err, ctx);
        if (rc < 0)
            return rc;
        if (tthrt_model_bind(m, in->name, &arr, &d) < 0) {
            tthrt_array_clear(&arr);
            return tthctl_from_diag(err, &d, ctx);
        }
        if (tthrt_model_find_input(ref, in->name) < 0) {
            tthrt_array_clear(&arr);
            char loc[300];
            snprintf(loc, sizeof loc, "input '%s'", in->name);
            tthctl_fail(err, TTHCTL_EXIT_FAILED, loc, "the artifact takes input '%s' but the model '%s' has no such input",
                        in->name, a->pos[1]);
            tthctl_hint(err, "give the ONNX model the artifact was compiled from");
            return -TTHCTL_EXIT_FAILED;
        }
        if (tthrt_model_bind(ref, in->name, &arr, &d) < 0) {
            tthrt_array_clear(&arr);
            return tthctl_from_diag(err, &d, "the reference");
        }
        json_array_append_new(jin, json_pack("{s:s, s:s}", "name", in->name, "from", file ? file : "random"));
        tthrt_array_clear(&arr);
    }
    for (size_t i = 0; i < tthrt_model_input_count(ref); i++) {
        const char *name = tthrt_model_input(ref, i)->name;
        if (tthrt_model_find_input(m, name) < 0) {
            char loc[300];
            snprintf(loc, sizeof loc, "input '%s'", name);
            tthctl_fail(err, TTHCTL_EXIT_USAGE, loc, "the model takes input '%s', which the artifact does not (it was bound at compile time)",
                        name);
            tthctl_hint(err, "give the same value to validate: --bind %s=FILE, as to 'tthctl compile'", name);
            return -TTHCTL_EXIT_USAGE;
        }
    }
    return 0;
}

/* One output of the artifact against the reference's output of the same name: a row of jout. */
static int compare_one(const char *name, const tthrt_array *got, const tthrt_model *ref, double tol, json_t *jout,
                       int *bad, tthctl_error *err)
{
    tth_diag d;
    tth_diag_clear(&d);
    char loc[300];
    snprintf(loc, sizeof loc, "output '%s'", name);
    int k = tthrt_model_find_output(ref, name);
    tthrt_array want;
    if (k < 0) {
        tthctl_fail(err, TTHCTL_EXIT_FAILED, loc, "the reference has no output '%s'", name);
        tthctl_hint(err, "give the ONNX model the artifact was compiled from");
        return -TTHCTL_EXIT_FAILED;
    }
    if (tthrt_model_output_array(ref, (size_t)k, &want, &d) < 0)
        return tthctl_from_diag(err, &d, "the reference");
    if (got->dtype != want.dtype || got->rank != want.rank ||
        memcmp(got->shape, want.shape, sizeof(int64_t) * (size_t)got->rank) != 0) {
        tthctl_fail(err, TTHCTL_EXIT_FAILED, loc, "the artifact gives %s of rank %d, the reference %s of rank %d",
                    tth_dtype_name(got->dtype), (int)got->rank, tth_dtype_name(want.dtype), (int)want.rank);
        if (got->rank == want.rank)
            tthctl_hint(err, "their shapes differ; give the ONNX model the artifact was compiled from");
        return -TTHCTL_EXIT_FAILED;
    }
    cmp_row r;
    compare(got, &want, tol, &r);
    *bad += !r.ok;
    json_t *row = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:I, s:b}", "name", name, "dtype",
                            tth_dtype_name(got->dtype), "shape", tthctl_shape_json(got), "max_abs_diff",
                            tthctl_value_json(r.max_abs), "max_rel_diff", tthctl_value_json(r.max_rel),
                            "reference_max_abs", tthctl_value_json(r.scale), "nan_mismatch",
                            (json_int_t)r.nan_mismatch, "ok", r.ok);
    if (row && r.argmax >= 0) {
        json_object_set_new(row, "argmax", json_integer(r.argmax));
        json_object_set_new(row, "reference_argmax", json_integer(r.ref_argmax));
    }
    if (row && !r.ok)
        json_object_set_new(row, "why", json_string(r.why));
    json_array_append_new(jout, row);
    return 0;
}

static int compare_outputs(const tthrt_model *m, const tthrt_model *ref, double tol, json_t *jout, int *bad,
                           tthctl_error *err, const char *ctx)
{
    tth_diag d;
    tth_diag_clear(&d);
    *bad = 0;
    for (size_t i = 0; i < tthrt_model_output_count(m); i++) {
        tthrt_array got;
        if (tthrt_model_output_array(m, i, &got, &d) < 0)
            return tthctl_from_diag(err, &d, ctx);
        int rc = compare_one(tthrt_model_output(m, i)->name, &got, ref, tol, jout, bad, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void print_text(const json_t *res, double tol);

/* The comparison printed (text or --json); 0, or the failure when bad outputs differ, its hint
 * beginning with why. */
static int report_result(const tthctl_args *a, json_t *res, double tol, int bad, const char *ctx, const char *why,
                         tthctl_error *err)
{
    json_object_set_new(res, "ok", json_boolean(bad == 0));
    if (a->json)
        tthctl_json_print(res);
    else
        print_text(res, tol);
    if (!bad)
        return 0;
    int rc = tthctl_fail(err, TTHCTL_EXIT_FAILED, ctx, "%d output(s) differ from the reference", bad);
    tthctl_hint(err, "%s: report it with the model and the target; --tolerance X allows larger differences", why);
    return rc;
}

/* ---- a Cortex-M artifact on an emulated board (docs/cortexm.md) ---- */

/* scripts/run-cortexm: $TTH_RUN_CORTEXM, else the one of the source tree tthctl was built from */
static const char *board_runner(void)
{
    const char *env = getenv("TTH_RUN_CORTEXM");
    return env && *env ? env : TTH_SOURCE_ROOT "/scripts/run-cortexm";
}

/* run-cortexm's file name of an output: characters other than letters, digits, '.', '_', '-'
 * become '_'; a name that is empty, "." or ".." is "output"; a name already taken gets _<k> */
static void board_stem(const char *name, size_t k, char (*taken)[256], char *out, size_t len)
{
    size_t n = 0;
    for (const char *c = name; *c && n + 1 < len; c++)
        out[n++] = (char)((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                                  *c == '.' || *c == '_' || *c == '-' ? *c : '_');
    out[n] = 0;
    if (!strcmp(out, "") || !strcmp(out, ".") || !strcmp(out, ".."))
        snprintf(out, len, "output");
    for (size_t j = 0; j < k; j++)
        if (!strcmp(taken[j], out)) {
            size_t m = strlen(out);
            snprintf(out + m, len - m, "_%zu", k);
            break;
        }
    snprintf(taken[k], sizeof taken[k], "%s", out);
}

/* The reference's inputs, each --input file or random from the seed, bound to it and written as
 * dir/input_<i>.npy; specs[i] is run-cortexm's NAME=FILE for it (malloc'd). */
static int board_inputs(tthrt_model *ref, const tthctl_args *a, uint64_t seed, json_t *jin, const char *dir,
                        char **specs, tthctl_error *err)
{
    tth_diag d;
    tth_diag_clear(&d);
    uint64_t state = seed;
    for (size_t i = 0; i < tthrt_model_input_count(ref); i++) {
        const tthrt_tensor_info *in = tthrt_model_input(ref, i);
        const char *file;
        tthrt_array arr = {0};
        char path[PATH_MAX], loc[300];
        snprintf(path, sizeof path, "%s/input_%zu.npy", dir, i);
        snprintf(loc, sizeof loc, "input '%s'", in->name);
        int rc = input_values(in, a, &state, &arr, &file, err, loc);
        if (rc < 0)
            return rc;
        rc = tthrt_model_bind(ref, in->name, &arr, &d);
        if (rc == 0)
            rc = tthrt_npy_write(path, &arr, &d);
        tthrt_array_clear(&arr);
        if (rc < 0)
            return tthctl_from_diag(err, &d, loc);
        size_t n = strlen(in->name) + strlen(path) + 2;
        if (!(specs[i] = malloc(n)))
            return tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
        snprintf(specs[i], n, "%s=%s", in->name, path);
        json_array_append_new(jin, json_pack("{s:s, s:s}", "name", in->name, "from", file ? file : "random"));
    }
    return 0;
}

/* scripts/run-cortexm ARTIFACT --board B --out OUT -q [board args] NAME=FILE...; its errors go
 * to our standard error as they are */
static int board_run(const tthctl_args *a, const char *out, char **specs, size_t n, tthctl_error *err)
{
    const char *runner = board_runner();
    char loc[PATH_MAX + 16];
    snprintf(loc, sizeof loc, "board '%s'", a->board);
    if (access(runner, X_OK) != 0) {
        tthctl_fail(err, TTHCTL_EXIT_FAILED, loc, "cannot run %s: %s", runner, strerror(errno));
        tthctl_hint(err, "validate --board runs tth's scripts/run-cortexm: set TTH_RUN_CORTEXM to its path");
        return -TTHCTL_EXIT_FAILED;
    }
    const char **argv = calloc(8 + a->n_board_args + n + 1, sizeof *argv);
    if (!argv)
        return tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
    size_t k = 0;
    argv[k++] = runner;
    argv[k++] = a->pos[0];
    argv[k++] = "--board";
    argv[k++] = a->board;
    argv[k++] = "--out";
    argv[k++] = out;
    argv[k++] = "-q";
    for (size_t i = 0; i < a->n_board_args; i++)
        argv[k++] = a->board_args[i];
    for (size_t i = 0; i < n; i++)
        argv[k++] = specs[i];
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        execv(runner, (char *const *)argv);
        fprintf(stderr, "tthctl: error: cannot run %s: %s\n", runner, strerror(errno));
        _exit(127);
    }
    free(argv);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return tthctl_fail(err, TTHCTL_EXIT_FAILED, loc, "cannot run %s: %s", runner, strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        tthctl_fail(err, TTHCTL_EXIT_FAILED, loc, "the artifact did not run on the board (%s exited %d; its "
                    "message is above)", runner, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        tthctl_hint(err, "a library the artifact needs goes in with --board-arg=--extra-src=FILE.c and "
                         "--board-arg=-IDIR (docs/cortexm.md)");
        return -TTHCTL_EXIT_FAILED;
    }
    return 0;
}

/* the board's outputs (OUT/<stem>.npy) against the reference's */
static int board_compare(const tthrt_model *ref, const char *out, double tol, json_t *jout, int *bad,
                         tthctl_error *err)
{
    tth_diag d;
    tth_diag_clear(&d);
    size_t n = tthrt_model_output_count(ref);
    char (*taken)[256] = calloc(n + 1, sizeof *taken);
    if (!taken)
        return tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
    int rc = 0;
    *bad = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *name = tthrt_model_output(ref, i)->name;
        char stem[256], path[PATH_MAX + 300], loc[300];
        board_stem(name, i, taken, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", out, stem);
        snprintf(loc, sizeof loc, "output '%s'", name);
        tthrt_array got = {0};
        if (tthrt_npy_read(path, &got, &d) < 0) {
            rc = tthctl_from_diag(err, &d, loc);
            tthctl_hint(err, "give the ONNX model the artifact was compiled from");
            break;
        }
        rc = compare_one(name, &got, ref, tol, jout, bad, err);
        tthrt_array_clear(&got);
    }
    free(taken);
    return rc;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* validate --board: the reference here, the artifact on the board through run-cortexm */
static int validate_on_board(const tthctl_args *a, uint64_t seed, double tol, tthctl_error *err)
{
    tth_diag d;
    tth_diag_clear(&d);
    tthrt_model *ref = NULL;
    json_t *res = NULL;
    char dir[] = "/tmp/tthctl-validate-XXXXXX", tar[sizeof dir + 32], out[sizeof dir + 32];
    char *specs[MAX_IO] = {0};
    int rc;
    if (!mkdtemp(dir))
        return tthctl_fail(err, TTHCTL_EXIT_IO, "directory '/tmp'", "cannot make a temporary directory: %s",
                           strerror(errno));
    snprintf(tar, sizeof tar, "%s/reference.tar", dir);
    snprintf(out, sizeof out, "%s/board", dir);
    if ((rc = compile_reference(a, NULL, tar, err)) < 0)
        goto done;
    if (tthrt_model_open(tar, &ref, &d) < 0) {
        rc = tthctl_from_diag(err, &d, "the reference");
        goto done;
    }
    if (tthrt_model_input_count(ref) > MAX_IO) {
        rc = tthctl_fail(err, TTHCTL_EXIT_FAILED, "the reference", "validate takes models of at most %d inputs", MAX_IO);
        goto done;
    }
    res = json_pack("{s:s, s:s, s:I, s:f, s:s, s:s, s:[], s:[]}", "artifact", a->pos[0], "model", a->pos[1], "seed",
                    (json_int_t)seed, "tolerance", tol, "reference_target", "c", "board", a->board, "inputs",
                    "outputs");
    if (!res) {
        rc = tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
        goto done;
    }
    if ((rc = board_inputs(ref, a, seed, json_object_get(res, "inputs"), dir, specs, err)) < 0)
        goto done;
    tthrt_timing t;
    if (tthrt_model_run(ref, 1, &t, &d) < 0) {
        rc = tthctl_from_diag(err, &d, "the reference");
        goto done;
    }
    if ((rc = board_run(a, out, specs, tthrt_model_input_count(ref), err)) < 0)
        goto done;
    int bad = 0;
    if ((rc = board_compare(ref, out, tol, json_object_get(res, "outputs"), &bad, err)) < 0)
        goto done;
    char ctx[PATH_MAX + 16];
    snprintf(ctx, sizeof ctx, "artifact '%s'", a->pos[0]);
    rc = report_result(a, res, tol, bad, ctx, "the artifact's code on the board computes other values than the "
                       "generic lowering on this machine", err);
done:
    for (size_t i = 0; i < MAX_IO; i++)
        free(specs[i]);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    json_decref(res);
    tthrt_model_close(ref);
    return rc;
}

static void print_text(const json_t *res, double tol)
{
    printf("validate %s%s%s against %s (reference: target c, generic lowering, on this machine), seed %lld\n",
           json_string_value(json_object_get(res, "artifact")), json_object_get(res, "board") ? " on board " : "",
           json_object_get(res, "board") ? json_string_value(json_object_get(res, "board")) : "",
           json_string_value(json_object_get(res, "model")), (long long)json_integer_value(json_object_get(res, "seed")));
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(res, "outputs"), i, o) {
        double ma = json_real_value(json_object_get(o, "max_abs_diff")), mr = json_real_value(json_object_get(o, "max_rel_diff"));
        double sc = json_real_value(json_object_get(o, "reference_max_abs"));
        printf("  %-24s %s  max abs diff %.3g (%.2g of its largest magnitude %.3g), max rel diff %.3g",
               json_string_value(json_object_get(o, "name")), json_is_true(json_object_get(o, "ok")) ? "ok     " : "DIFFERS",
               ma, sc > 0 ? ma / sc : 0.0, sc, mr);
        if (json_object_get(o, "argmax"))
            printf(", argmax %lld (reference %lld)", (long long)json_integer_value(json_object_get(o, "argmax")),
                   (long long)json_integer_value(json_object_get(o, "reference_argmax")));
        printf("\n");
        if (json_object_get(o, "why"))
            printf("    %s\n", json_string_value(json_object_get(o, "why")));
    }
    printf("tolerance: %.3g of each output's largest magnitude (integers and bool exactly)\n", tol);
}

int tthctl_cmd_validate(const tthctl_args *a, tthctl_error *err)
{
    const char *path = a->pos[0];
    char ctx[PATH_MAX + 16];
    snprintf(ctx, sizeof ctx, "artifact '%s'", path);
    uint64_t seed;
    double tol;
    int rc = parse_seed(a->seed, &seed, err);
    if (rc < 0 || (rc = parse_tolerance(a->tolerance, &tol, err)) < 0)
        return rc;
    if ((rc = tthctl_check_inputs(a, err)) < 0)
        return rc;
    if (a->board)
        return validate_on_board(a, seed, tol, err);
    if (a->n_board_args)
        return tthctl_fail(err, TTHCTL_EXIT_USAGE, "--board-arg", "--board-arg goes with --board BOARD");
    tth_diag d;
    tth_diag_clear(&d);
    tthrt_model *m = NULL, *ref = NULL;
    json_t *res = NULL;
    char dir[] = "/tmp/tthctl-validate-XXXXXX", tar[sizeof dir + 32] = "";
    int made = 0;
    if (tthrt_model_open(path, &m, &d) < 0)
        return tthctl_from_diag(err, &d, ctx);
    if (tthrt_model_input_count(m) > MAX_IO) {
        rc = tthctl_fail(err, TTHCTL_EXIT_FAILED, ctx, "validate takes models of at most %d inputs", MAX_IO);
        goto done;
    }
    if (!mkdtemp(dir)) {
        rc = tthctl_fail(err, TTHCTL_EXIT_IO, "directory '/tmp'", "cannot make a temporary directory: %s", strerror(errno));
        goto done;
    }
    made = 1;
    snprintf(tar, sizeof tar, "%s/reference.tar", dir);
    if ((rc = compile_reference(a, m, tar, err)) < 0)
        goto done;
    if (tthrt_model_open(tar, &ref, &d) < 0) {
        rc = tthctl_from_diag(err, &d, "the reference");
        goto done;
    }
    res = json_pack("{s:s, s:s, s:I, s:f, s:s, s:[], s:[]}", "artifact", path, "model", a->pos[1], "seed",
                    (json_int_t)seed, "tolerance", tol, "reference_target", "c", "inputs", "outputs");
    if (!res) {
        rc = tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
        goto done;
    }
    if ((rc = bind_inputs(m, ref, a, seed, json_object_get(res, "inputs"), err, ctx)) < 0)
        goto done;
    tthrt_timing t;
    if (tthrt_model_run(m, 1, &t, &d) < 0) {
        rc = tthctl_from_diag(err, &d, ctx);
        goto done;
    }
    if (tthrt_model_run(ref, 1, &t, &d) < 0) {
        rc = tthctl_from_diag(err, &d, "the reference");
        goto done;
    }
    int bad = 0;
    if ((rc = compare_outputs(m, ref, tol, json_object_get(res, "outputs"), &bad, err, ctx)) < 0)
        goto done;
    rc = report_result(a, res, tol, bad, ctx, "the artifact's kernels compute other values than the generic "
                       "lowering", err);
done:
    if (made) {
        unlink(tar);
        rmdir(dir);
    }
    json_decref(res);
    tthrt_model_close(ref);
    tthrt_model_close(m);
    return rc;
}
