/* fuzz_target.c: libFuzzer target for the target parser (tth_target_parse).
 *
 * The registry holds the real plugins of this build, loaded once from the build's plugins
 * directory (TTH_PLUGINS_BUILD_DIR; the environment variable TTH_FUZZ_PLUGINS_DIR overrides it),
 * so every kind's schema and target_parser hook is exercised. Besides "no crash, no leak, no
 * undefined behaviour", each input that parses must round-trip (docs/targets.md: both forms
 * round-trip): parse(to_string(t)) succeeds and has the same canonical JSON text as t.
 *
 * Inputs that would make the parser read files ("@path", "*.json") are skipped: the fuzzer
 * must not wander the file system.
 *
 *   build: meson setup build-fuzz -Dfuzz=true (CC=clang); run: build-fuzz/tests/fuzz/fuzz_target */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tth/diag.h>
#include <tth/plugin.h>
#include <tth/registry.h>
#include <tth/target.h>

#include "tth_config.h"

static tth_registry *fuzz_registry;

static void fuzz_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

static int fuzz_cancelled(void *ctx)
{
    (void)ctx;
    return 0;
}

static const tth_host fuzz_host = {
    .size = sizeof(tth_host),
    .abi_major = TTH_ABI_MAJOR,
    .abi_minor = TTH_ABI_MINOR,
    .ctx = NULL,
    .log = fuzz_log,
    .cancelled = fuzz_cancelled,
    .scratch_dir = "/tmp",
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("TTH_FUZZ_PLUGINS_DIR");
    if (!dir || !*dir)
        dir = TTH_PLUGINS_BUILD_DIR;
    fuzz_registry = tth_registry_new();
    if (!fuzz_registry) {
        fprintf(stderr, "fuzz_target: out of memory\n");
        abort();
    }
    tth_diag d;
    tth_diag_clear(&d);
    int n = tth_registry_load_dir(fuzz_registry, dir, &d);
    if (n < 0) {
        /* without plugins only the generic syntax is fuzzed: say so loudly, but go on */
        char buf[1024];
        tth_diag_format(&d, buf, sizeof buf);
        fprintf(stderr, "fuzz_target: WARNING: no plugins from %s (build them: ninja -C <build>):\n%s\n", dir, buf);
        n = 0;
    }
    fprintf(stderr, "fuzz_target: %d plugins from %s, %zu refused\n", n, dir,
            tth_registry_error_count(fuzz_registry));
    return 0;
}

/* Would the parser open a file for this text? */
static int names_a_file(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    if (i < len && text[i] == '@')
        return 1;
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\n'))
        len--;
    return len >= 5 && memcmp(text + len - 5, ".json", 5) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (strlen(text) != size || names_a_file(text, size)) {
        free(text);
        return 0;
    }
    tth_diag d;
    tth_diag_clear(&d);
    json_t *t = tth_target_parse(fuzz_registry, &fuzz_host, text, &d);
    if (!t) {
        /* a refusal must say why */
        if (d.code >= 0 || d.message[0] == '\0') {
            fprintf(stderr, "fuzz_target: refused without a diagnostic (code %d): '%s'\n", d.code, text);
            abort();
        }
        free(text);
        return 0;
    }
    char *str = tth_target_to_string(t);
    char *canon = tth_target_to_json_text(t);
    if (!str || !canon) {
        fprintf(stderr, "fuzz_target: cannot export the parsed target of '%s'\n", text);
        abort();
    }
    tth_diag_clear(&d);
    json_t *again = tth_target_parse(fuzz_registry, &fuzz_host, str, &d);
    if (!again) {
        char buf[1024];
        tth_diag_format(&d, buf, sizeof buf);
        fprintf(stderr, "fuzz_target: '%s' parsed, but its string form '%s' does not:\n%s\n", text, str, buf);
        abort();
    }
    char *canon2 = tth_target_to_json_text(again);
    if (!canon2 || strcmp(canon, canon2) != 0) {
        fprintf(stderr, "fuzz_target: no round trip for '%s':\n  %s\n  %s\n", text, canon,
                canon2 ? canon2 : "(null)");
        abort();
    }
    free(canon2);
    json_decref(again);
    free(canon);
    free(str);
    json_decref(t);
    free(text);
    return 0;
}
