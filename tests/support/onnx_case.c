/* onnx_case.c: see onnx_case.h. */
#include "onnx_case.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "compile.h"
#include "file_io.h"
#include "tthrt.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static tth_case_status set(tth_case_result *res, tth_case_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tth_case_status set(tth_case_result *res, tth_case_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->detail, sizeof res->detail, fmt, ap);
    va_end(ap);
    res->status = st;
    return st;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* A C identifier for the model from the directory's last component. */
static void model_name(const char *dir, char *buf, size_t len)
{
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    snprintf(buf, len, "m_%s", base);
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
}

/* The name of the TensorProto in `path` ("" when it has none or cannot be read). */
static void pb_name(const char *path, char *buf, size_t len)
{
    tthrt_array a = {0};
    tth_diag d;
    buf[0] = 0;
    if (tthrt_pb_read(path, &a, &d) == 0 && a.name)
        snprintf(buf, len, "%s", a.name);
    tthrt_array_clear(&a);
}

/* Some of ONNX's test data gives an input another shape than the model declares (CastLike's
 * `like`, read for its element type only, is [1] where the model says [3, 4]). When the data
 * set's tensor has the input's element type (uint16 bits for bfloat16) but another shape, the
 * input is bound to zeros of its declared shape; the outputs are still compared, so the case
 * passes only if they do not depend on that input. 0 when bound. */
static int bind_zeros_for_misshapen(tthrt_model *m, size_t i, const char *path)
{
    const tthrt_tensor_info *in = tthrt_model_input(m, i);
    tthrt_array a = {0}, z = {0};
    tth_diag d;
    int rc = tthrt_pb_read(path, &a, &d);
    if (rc == 0) {
        tth_dtype given = a.dtype == TTH_U16 && in->dtype == TTH_BF16 ? TTH_BF16 : a.dtype;
        rc = given != in->dtype ? -1 : tthrt_array_init(&z, in->dtype, in->rank, in->shape, &d);
    }
    if (rc == 0)
        rc = tthrt_model_bind(m, in->name, &z, &d);
    tthrt_array_clear(&a);
    tthrt_array_clear(&z);
    return rc;
}

/* Binds the data set's inputs to the model's, in order, skipping those fixed at compile time
 * (`bound`, by the TensorProto's name), then runs and compares. */
static int run_data_set(tthrt_model *m, const char *ds, const json_t *bound, tth_case_result *res)
{
    char path[4200], why[512];
    tth_diag d;
    tth_diag_clear(&d);
    size_t nin = tthrt_model_input_count(m);
    for (size_t i = 0, k = 0; i < nin; i++, k++) {
        char nm[256];
        for (;; k++) {
            snprintf(path, sizeof path, "%s/input_%zu.pb", ds, k);
            if (!file_exists(path))
                return set(res, TTH_CASE_FAIL, "%s: the model has %zu inputs; no input_%zu.pb", ds, nin, k);
            pb_name(path, nm, sizeof nm);
            if (!bound || !json_object_get(bound, nm))
                break;
        }
        if (tthrt_model_bind_file(m, tthrt_model_input(m, i)->name, path, &d) != 0 &&
            bind_zeros_for_misshapen(m, i, path) != 0)
            return set(res, TTH_CASE_FAIL, "binding %s: %s", path, d.message);
    }
    double t0 = now_ms();
    if (tthrt_model_run(m, 1, NULL, &d) != 0)
        return set(res, TTH_CASE_FAIL, "run: %s", d.message);
    res->run_ms += now_ms() - t0;
    for (size_t j = 0; j < tthrt_model_output_count(m); j++) {
        snprintf(path, sizeof path, "%s/output_%zu.pb", ds, j);
        tthrt_array want, got;
        if (tthrt_pb_read(path, &want, &d) != 0)
            return set(res, TTH_CASE_FAIL, "expected output: %s", d.message);
        tthrt_model_output_array(m, j, &got, &d);
        /* ONNX's test data stores a bfloat16 tensor as uint16 (its bits; NumPy has no bfloat16) */
        if (got.dtype == TTH_BF16 && want.dtype == TTH_U16)
            want.dtype = TTH_BF16;
        double atol, rtol;
        tthrt_default_tolerance(want.dtype, &atol, &rtol);
        int c = tthrt_array_compare(&got, &want, atol, rtol, why, sizeof why);
        tthrt_array_clear(&want);
        if (c != 1)
            return set(res, TTH_CASE_FAIL, "output %zu '%s' (%s): %s", j,
                       tthrt_model_output(m, j)->name, ds, why);
    }
    return 0;
}

/* Write each file of the "codegen" dump (its "// ---- NAME" lines start one) into dir; 0, or -1. */
/* Each file of the "codegen" dump into dir: how many are C sources, or -1. */
static int write_dump_files(const char *dir, const char *c_text)
{
    int sources = 0;
    const char *p = strstr(c_text, "// ---- ");
    while (p) {
        const char *name = p + 8, *nl = strchr(name, '\n');
        if (!nl || nl - name >= 200 || memchr(name, '/', (size_t)(nl - name)))
            return -1;
        const char *next = strstr(nl + 1, "\n// ---- ");
        const char *end = next ? next + 1 : nl + 1 + strlen(nl + 1);
        char path[1400];
        snprintf(path, sizeof path, "%s/%.*s", dir, (int)(nl - name), name);
        FILE *f = fopen(path, "w");
        size_t n = (size_t)(end - (nl + 1));
        if (!f || fwrite(nl + 1, 1, n, f) != n || fclose(f) != 0)
            return -1;
        sources += nl - name > 2 && memcmp(nl - 2, ".c", 2) == 0;
        p = next ? next + 1 : NULL;
    }
    return sources;
}

/* Compile each C source of the "codegen" dump with warnings as errors (gcc, then clang if
 * present). */
static int check_c_warnings(const char *c_text, tth_case_result *res)
{
    const char *tmp = getenv("TMPDIR");
    char dir[1024], path[1100], cmd[4096];
    snprintf(dir, sizeof dir, "%s/tth-case-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return set(res, TTH_CASE_FAIL, "cannot create a temporary directory");
    int rc = 0, sources = write_dump_files(dir, c_text);
    if (sources < 0)
        rc = set(res, TTH_CASE_FAIL, "cannot write the codegen dump's files into %s", dir);
    static const char *const compilers[] = {"gcc", "clang"};
    /* a dump without C (an llvm artifact without a thread pool) has nothing to check */
    for (int i = 0; i < 2 && !rc && sources > 0; i++) {
        snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1 || exit 0; cd '%s' && %s -std=c99 "
                 "-O2 -Wall -Wextra -Werror -Wno-unused-parameter -c *.c > cc.log 2>&1",
                 compilers[i], dir, compilers[i]);
        if (system(cmd) != 0) {
            char log[600] = "";
            snprintf(path, sizeof path, "%s/cc.log", dir);
            FILE *lf = fopen(path, "r");
            if (lf) {
                size_t n = fread(log, 1, sizeof log - 1, lf);
                log[n] = 0;
                fclose(lf);
            }
            rc = set(res, TTH_CASE_FAIL, "%s warns on the generated C: %s", compilers[i], log);
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : (int)set(res, TTH_CASE_FAIL, "cannot remove %s", dir);
    return rc;
}

tth_case_status tth_case_run(const char *dir, const tth_registry *reg, const json_t *target,
                             tth_case_result *res)
{
    return tth_case_run_flags(dir, reg, target, 0, res);
}

/* After a compile refused a graph input that must be a constant ("input 'X' is not a constant"):
 * fix it at compile time with test_data_set_0's value (options.bind). The input the message names
 * when a data set file carries that name, else every integer or boolean input not bound yet
 * (shapes, axes, repeats, conditions), else every scalar input. Returns how many were added. */
static int add_binds(const char *dir, const char *message, json_t *bind)
{
    char role[256] = "";
    const char *p = strstr(message, "input '");
    if (p && strstr(p, "' is not a constant"))
        sscanf(p + 7, "%255[^']", role);
    if (!p || !strstr(p, "' is not a constant"))
        return 0;
    int added = 0;
    for (int pass = 0; pass < 3 && !added; pass++)
        for (int k = 0; k < 64; k++) {
            char path[2100];
            snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, k);
            if (!file_exists(path))
                break;
            tthrt_array a = {0};
            tth_diag d;
            if (tthrt_pb_read(path, &a, &d) != 0 || !a.name || json_object_get(bind, a.name)) {
                tthrt_array_clear(&a);
                continue;
            }
            /* the input named; else integer and boolean inputs (shapes, axes, conditions); else
             * scalars of any type (a padding value, a ratio) */
            int take = pass == 0 ? strcmp(a.name, role) == 0
                       : pass == 1 ? a.dtype == TTH_I64 || a.dtype == TTH_I32 || a.dtype == TTH_BOOL
                                   : a.rank == 0;
            char why[128];
            json_t *v = take ? tthrt_array_to_bind_json(&a, TTHRT_BIND_MAX_ELEMENTS, why, sizeof why) : NULL;
            if (v && json_object_set_new(bind, a.name, v) == 0)
                added++;
            tthrt_array_clear(&a);
        }
    return added;
}

tth_case_status tth_case_run_flags(const char *dir, const tth_registry *reg, const json_t *target,
                                   int flags, tth_case_result *res)
{
    memset(res, 0, sizeof *res);
    char path[2048], name[256];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    size_t len = 0;
    unsigned char *model = tth_file_read(path, &len);
    if (!model)
        return set(res, TTH_CASE_FAIL, "cannot read %s", path);
    model_name(dir, name, sizeof name);
    json_t *opts = json_pack("{s:b}", "build_shared", 1);
    if (flags & TTH_CASE_CHECK_C_WARNINGS)
        json_object_set_new(opts, "dump_ir", json_string("codegen"));
    tth_host host = {.size = sizeof host, .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR};
    tth_compile_request req = {.model = model, .model_len = len, .model_name = name,
                               .target = target, .options = opts, .registry = reg, .host = &host};
    tth_compile_result cr;
    tth_diag d;
    tth_diag_clear(&d);
    double t0 = now_ms();
    int rc = tth_compile(&req, &cr, &d);
    json_t *bind = json_object();
    while (rc == TTH_EUNSUPPORTED && (flags & TTH_CASE_BIND_INPUTS) && add_binds(dir, d.message, bind) > 0) {
        json_object_set(opts, "bind", bind);
        tth_diag_clear(&d);
        rc = tth_compile(&req, &cr, &d);
    }
    res->compile_ms = now_ms() - t0;
    free(model);
    json_decref(opts);
    if (json_object_size(bind)) {
        const char *k;
        json_t *v;
        json_object_foreach(bind, k, v)
            snprintf(res->bound + strlen(res->bound), sizeof res->bound - strlen(res->bound), "%s%s",
                     res->bound[0] ? "," : "", k);
    }
    if (rc != 0) {
        json_decref(bind);
        return set(res, rc == TTH_EUNSUPPORTED ? TTH_CASE_UNSUPPORTED : TTH_CASE_FAIL,
                   "compile: %s [%s]%s%s", d.message, d.location, d.hint[0] ? " hint: " : "", d.hint);
    }
    if (flags & TTH_CASE_CHECK_C_WARNINGS) {
        const char *c_text = json_string_value(json_object_get(cr.dumps, "codegen"));
        if (c_text && check_c_warnings(c_text, res) != 0) {
            tth_compile_result_free(&cr);
            json_decref(bind);
            return res->status;
        }
    }
    tthrt_model *m = NULL;
    rc = tthrt_model_open_memory(cr.artifact, cr.artifact_len, &m, &d);
    tth_compile_result_free(&cr);
    if (rc != 0) {
        json_decref(bind);
        return set(res, TTH_CASE_FAIL, "open: %s", d.message);
    }
    /* every test_data_set_N, in order */
    int sets = 0;
    for (int k = 0; k < 64; k++) {
        snprintf(path, sizeof path, "%s/test_data_set_%d", dir, k);
        if (!file_exists(path))
            break;
        sets++;
        if (run_data_set(m, path, bind, res) != 0) {
            tthrt_model_close(m);
            json_decref(bind);
            return res->status;
        }
        if (json_object_size(bind))
            break; /* compiled with data set 0's values of the bound inputs */
    }
    tthrt_model_close(m);
    json_decref(bind);
    if (sets == 0)
        return set(res, TTH_CASE_FAIL, "no test_data_set_0 in %s", dir);
    return set(res, TTH_CASE_PASS, "%d data set%s", sets, sets == 1 ? "" : "s");
}

tth_case_status tth_case_run_node(const char *test, const tth_registry *reg, const json_t *target, int flags,
                                  tth_case_result *res)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", TTH_CASE_NODE_DIR, test);
    return tth_case_run_flags(dir, reg, target, flags, res);
}
