/* standalone_build.c: see standalone_build.h. */
#include "standalone_build.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tthrt.h"

static void upper(char *dst, const char *src, size_t cap)
{
    size_t k = 0;
    for (; src[k] && k < cap - 1; k++)
        dst[k] = (char)(src[k] >= 'a' && src[k] <= 'z' ? src[k] - 32 : src[k]);
    dst[k] = 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* metadata.files' sources, objects and blobs against the regular files under codegen/ (headers
 * excepted: their directories are include paths) */
static void check_files_listed(const char *dir, const json_t *files)
{
    char cmd[2048], listing[1100];
    snprintf(listing, sizeof listing, "%s/codegen.txt", dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && find codegen -type f ! -path '*/include/*' | LC_ALL=C sort > codegen.txt",
             dir);
    cr_assert_eq(test_run(cmd), 0);
    size_t n;
    char *text = (char *)test_read_file(listing, &n);
    cr_assert_not_null(text);
    const char *listed[256];
    size_t nl = 0;
    static const char *const keys[] = {"sources", "objects", "blobs"};
    for (size_t k = 0; k < 3; k++) {
        const json_t *arr = json_object_get(files, keys[k]);
        cr_assert(json_is_array(arr), "metadata.files.%s is missing", keys[k]);
        for (size_t i = 0; i < json_array_size(arr) && nl < 256; i++)
            listed[nl++] = json_string_value(json_array_get(arr, i));
    }
    qsort(listed, nl, sizeof listed[0], cmp_str);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    size_t i = 0;
    for (; line; line = strtok_r(NULL, "\n", &save), i++) {
        cr_assert_lt(i, nl, "codegen/ holds %s, which metadata.files does not list", line);
        cr_assert_str_eq(listed[i], line, "metadata.files lists %s where codegen/ holds %s", listed[i], line);
    }
    cr_assert_eq(i, nl, "metadata.files lists %s, which codegen/ does not hold", i < nl ? listed[i] : "");
    free(text);
}

/* main.c: reads in<i>.bin into every input, runs, writes out<i>.bin */
static void write_main(const char *dir, const char *model, const json_t *ins, const json_t *outs)
{
    char path[1100], M[128], up[128];
    upper(M, model, sizeof M);
    snprintf(path, sizeof path, "%s/main.c", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "#include <stdio.h>\n#include <stdlib.h>\n#include \"tth_%s.h\"\n"
               "static unsigned char ws[TTH_%s_WORKSPACE_SIZE + 1]"
               " __attribute__((aligned(TTH_%s_WORKSPACE_ALIGNMENT)));\n"
               "static void *load(const char *p, size_t n) {\n"
               "    void *b = malloc(n); FILE *f = fopen(p, \"rb\");\n"
               "    if (!b || !f || fread(b, 1, n, f) != n) exit(2);\n"
               "    fclose(f); return b;\n}\n"
               "static void save(const char *p, const void *b, size_t n) {\n"
               "    FILE *f = fopen(p, \"wb\");\n"
               "    if (!f || fwrite(b, 1, n, f) != n) exit(3);\n"
               "    fclose(f);\n}\n"
               "int main(void) {\n    struct tth_%s_inputs in;\n    struct tth_%s_outputs out;\n",
            model, M, M, model, model);
    /* constants bound at run time (docs/artifact.md): the README's way, unless the CMake build
     * linked the parameters file in, where the first run binds it */
    fprintf(f, "#if defined(TTH_%s_PARAMETERS_FILE) && !defined(TTH_%s_PARAMETERS_EMBEDDED)\n"
               "    {\n        FILE *pf = fopen(TTH_%s_PARAMETERS_FILE, \"rb\");\n"
               "        if (!pf || fseek(pf, 0, SEEK_END) != 0) return 4;\n"
               "        size_t n = (size_t)ftell(pf);\n        rewind(pf);\n"
               "        unsigned char *raw = malloc(n + 64), *p = raw + (64 - (size_t)raw %% 64) %% 64;\n"
               "        if (!raw || fread(p, 1, n, pf) != n) return 4;\n        fclose(pf);\n"
               "        if (tth_%s_bind_parameters(p, n) != 0) return 5;\n    }\n#endif\n",
            M, M, M, model);
    for (size_t i = 0; i < json_array_size(ins); i++) {
        const char *cn = json_string_value(json_object_get(json_array_get(ins, i), "c_name"));
        upper(up, cn, sizeof up);
        fprintf(f, "    in.%s = load(\"in%zu.bin\", TTH_%s_%s_SIZE);\n", cn, i, M, up);
    }
    for (size_t i = 0; i < json_array_size(outs); i++) {
        const char *cn = json_string_value(json_object_get(json_array_get(outs, i), "c_name"));
        upper(up, cn, sizeof up);
        fprintf(f, "    out.%s = malloc(TTH_%s_%s_SIZE);\n", cn, M, up);
    }
    fprintf(f, "    if (tth_%s_run(&in, &out, ws) != 0) return 1;\n", model);
    for (size_t i = 0; i < json_array_size(outs); i++) {
        const char *cn = json_string_value(json_object_get(json_array_get(outs, i), "c_name"));
        upper(up, cn, sizeof up);
        fprintf(f, "    save(\"out%zu.bin\", out.%s, TTH_%s_%s_SIZE);\n", i, cn, M, up);
    }
    fprintf(f, "    return 0;\n}\n");
    fclose(f);
}

/* out<i>.bin in run_dir against the case's output_<i>.pb */
static void compare_outputs(const char *run_dir, const char *case_dir, size_t nout, const char *how)
{
    tth_diag d;
    for (size_t i = 0; i < nout; i++) {
        char pb[1024], bin[1024];
        snprintf(pb, sizeof pb, "%s/test_data_set_0/output_%zu.pb", case_dir, i);
        snprintf(bin, sizeof bin, "%s/out%zu.bin", run_dir, i);
        tthrt_array want, got;
        cr_assert_eq(tthrt_pb_read(pb, &want, &d), 0, "%s", d.message);
        cr_assert_eq(tthrt_array_init(&got, want.dtype, want.rank, want.shape, &d), 0);
        size_t n;
        unsigned char *raw = test_read_file(bin, &n);
        cr_assert_not_null(raw, "%s: no output %zu", how, i);
        cr_assert_eq(n, got.nbytes, "%s: output %zu has %zu bytes, want %zu", how, i, n, got.nbytes);
        memcpy(got.data, raw, n);
        free(raw);
        char why[256];
        cr_assert_eq(tthrt_array_compare(&got, &want, 1e-4, 1e-4, why, sizeof why), 1, "%s: output %zu: %s",
                     how, i, why);
        tthrt_array_clear(&want);
        tthrt_array_clear(&got);
    }
}

void standalone_build_check(const unsigned char *artifact, size_t len, const json_t *metadata,
                            const char *case_dir, const char *model)
{
    char dir[512], path[1024], cmd[8192];
    tth_diag d;
    test_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/art", dir);
    snprintf(cmd, sizeof cmd, "mkdir '%s'", path);
    cr_assert_eq(test_run(cmd), 0);
    snprintf(path, sizeof path, "%s/art/a.tar", dir);
    cr_assert_eq(test_write_file(path, artifact, len), 0);
    snprintf(cmd, sizeof cmd, "cd '%s/art' && tar xf a.tar && rm a.tar", dir);
    cr_assert_eq(test_run(cmd), 0, "cannot extract the artifact");
    snprintf(path, sizeof path, "%s/art", dir);
    const json_t *files = json_object_get(metadata, "files");
    check_files_listed(path, files);

    /* the inputs as raw bytes, beside where each program runs */
    const json_t *ins = json_object_get(metadata, "inputs"), *outs = json_object_get(metadata, "outputs");
    for (size_t i = 0; i < json_array_size(ins); i++) {
        char pb[1024], bin[1024];
        snprintf(pb, sizeof pb, "%s/test_data_set_0/input_%zu.pb", case_dir, i);
        tthrt_array a;
        cr_assert_eq(tthrt_pb_read(pb, &a, &d), 0, "%s", d.message);
        snprintf(bin, sizeof bin, "%s/art/in%zu.bin", dir, i);
        cr_assert_eq(test_write_file(bin, a.data, a.nbytes), 0);
        snprintf(bin, sizeof bin, "%s/in%zu.bin", dir, i);
        cr_assert_eq(test_write_file(bin, a.data, a.nbytes), 0);
        tthrt_array_clear(&a);
    }
    write_main(path, model, ins, outs);

    /* 1. one cc command, as README.txt gives it */
    size_t at = (size_t)snprintf(cmd, sizeof cmd, "cd '%s/art' && cc -std=c99 -O2 -Wall -Werror -Iinclude main.c", dir);
    int threads = 0;
    static const char *const keys[] = {"sources", "objects"};
    for (size_t k = 0; k < 2; k++) {
        const json_t *arr = json_object_get(files, keys[k]);
        for (size_t i = 0; i < json_array_size(arr) && at < sizeof cmd; i++) {
            const char *p = json_string_value(json_array_get(arr, i));
            at += (size_t)snprintf(cmd + at, sizeof cmd - at, " %s", p);
            threads |= strstr(p, "_parallel.c") != NULL;
        }
    }
    snprintf(cmd + at, sizeof cmd - at, " -lm%s -o main > cc.log 2>&1 && ./main", threads ? " -pthread" : "");
    cr_assert_eq(test_run(cmd), 0, "the README's cc build or its run failed (in %s/art, cc.log)", dir);
    snprintf(cmd, sizeof cmd, "grep -q -- '%s' '%s/art/README.txt'", threads ? "-lm -pthread" : "-lm", dir);
    cr_assert_eq(test_run(cmd), 0, "README.txt does not give the libraries the build needs");
    compare_outputs(path, case_dir, json_array_size(outs), "cc build");

    /* 2. the artifact's CMakeLists.txt, add_subdirectory()'d beside a main */
    if (test_have("cmake")) {
        snprintf(path, sizeof path, "%s/CMakeLists.txt", dir);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fprintf(f, "cmake_minimum_required(VERSION 3.13)\nproject(use_%s C)\nadd_subdirectory(art)\n"
                   "add_executable(main art/main.c)\ntarget_link_libraries(main tth_%s)\n", model, model);
        fclose(f);
        snprintf(cmd, sizeof cmd, "cd '%s' && cmake -S . -B cm > cmake.log 2>&1 && cmake --build cm >> cmake.log 2>&1"
                 " && ./cm/main", dir);
        cr_assert_eq(test_run(cmd), 0, "the CMakeLists.txt build or its run failed (see %s/cmake.log)", dir);
        compare_outputs(dir, case_dir, json_array_size(outs), "CMake build");
    }
    test_rmtree(dir);
}
