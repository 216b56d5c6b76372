/* The plugin registry: loading, refusals with reasons, trust checks, describe. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <tth/registry.h>

static char tmpdir[256];

static const char *test_plugins_dir(void)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/tests/fixtures", getenv("TTH_BUILD_ROOT"));
    return buf;
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    cr_assert_not_null(in, "cannot open %s", from);
    FILE *out = fopen(to, "wb");
    cr_assert_not_null(out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
    chmod(to, 0755);
}

static void put_plugin(const char *name, const char *as)
{
    char from[1024], to[1024];
    snprintf(from, sizeof from, "%s/%s.so", test_plugins_dir(), name);
    snprintf(to, sizeof to, "%s/%s", tmpdir, as);
    copy_file(from, to);
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tth-reg-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    chmod(tmpdir, 0755);
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static const tth_plugin_error *error_for(const tth_registry *r, const char *file)
{
    for (size_t i = 0; i < tth_registry_error_count(r); i++) {
        const tth_plugin_error *e = tth_registry_error(r, i);
        if (strstr(e->path, file))
            return e;
    }
    return NULL;
}

TestSuite(registry, .init = setup, .fini = teardown);

Test(registry, loads_good_plugin_and_reads_descriptor)
{
    put_plugin("tp_basic", "a.so");
    tth_registry *r = tth_registry_new();
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_registry_load_dir(r, tmpdir, &d), 1, "%s", d.message);
    const tth_plugin *p = tth_registry_find_kind(r, "test-basic");
    cr_assert_not_null(p);
    cr_assert_str_eq(p->desc->plugin_name, "tp-basic");
    cr_assert_not_null(strstr(p->identity, "tp-basic@0.0.1#"));
    /* the identity's hash is the file's XXH64 (tth_file_xxh64) */
    char path[1024], want[64];
    uint64_t h = 0;
    snprintf(path, sizeof path, "%s/a.so", tmpdir);
    cr_assert_eq(tth_file_xxh64(path, &h), 0);
    snprintf(want, sizeof want, "tp-basic@0.0.1#%016llx", (unsigned long long)h);
    cr_assert_str_eq(p->identity, want);
    cr_assert_null(p->target_parser);
    cr_assert_null(tth_registry_find_kind(r, "nope"));
    tth_registry_free(r);
}

/* tth_file_xxh64: equal bytes hash alike, other bytes otherwise (the XXH64 of "abc" with seed 0
 * is 0x44bc2cf5ad770999), and a missing file is -1 */
Test(registry, file_xxh64_hashes_the_bytes)
{
    char a[1024], b[1024], c[1024];
    snprintf(a, sizeof a, "%s/x1", tmpdir);
    snprintf(b, sizeof b, "%s/x2", tmpdir);
    snprintf(c, sizeof c, "%s/missing", tmpdir);
    FILE *f = fopen(a, "wb");
    cr_assert(f && fputs("abc", f) >= 0 && fclose(f) == 0);
    f = fopen(b, "wb");
    cr_assert(f && fputs("abd", f) >= 0 && fclose(f) == 0);
    uint64_t ha = 0, hb = 0, hc = 0;
    cr_assert_eq(tth_file_xxh64(a, &ha), 0);
    cr_assert_eq(tth_file_xxh64(b, &hb), 0);
    cr_assert_eq(ha, 0x44bc2cf5ad770999ull, "XXH64(\"abc\") = %016llx", (unsigned long long)ha);
    cr_assert_neq(ha, hb);
    cr_assert_eq(tth_file_xxh64(c, &hc), -1);
}

Test(registry, one_bad_plugin_does_not_stop_others)
{
    put_plugin("tp_basic", "a.so");
    put_plugin("tp_dup", "b.so");
    put_plugin("tp_abi", "c.so");
    put_plugin("tp_nodesc", "d.so");
    char junk[512];
    snprintf(junk, sizeof junk, "%s/e.so", tmpdir);
    FILE *f = fopen(junk, "w");
    fputs("not an ELF file", f);
    fclose(f);
    tth_registry *r = tth_registry_new();
    tth_diag d;
    cr_assert_eq(tth_registry_load_dir(r, tmpdir, &d), 1);
    cr_assert_eq(tth_registry_count(r), 1);
    cr_assert_eq(tth_registry_error_count(r), 4);

    const tth_plugin_error *e = error_for(r, "b.so");
    cr_assert_not_null(e);
    cr_assert_eq(e->diag.code, TTH_EDUPLICATE);
    cr_assert_not_null(strstr(e->diag.message, "kind 'test-basic' is already provided by"));

    e = error_for(r, "c.so");
    cr_assert_eq(e->diag.code, TTH_EABI);
    char want[128];
    snprintf(want, sizeof want, "plugin ABI 99.%d is not supported by this tth (ABI %d.%d)", TTH_ABI_MINOR,
             TTH_ABI_MAJOR, TTH_ABI_MINOR);
    cr_assert_not_null(strstr(e->diag.message, want), "%s", e->diag.message);
    cr_assert_not_null(strstr(e->diag.hint, "pkg-config tth-plugin"));

    e = error_for(r, "d.so");
    cr_assert_eq(e->diag.code, TTH_EABI);
    cr_assert_not_null(strstr(e->diag.message, "exports no 'tth_descriptor' symbol"));

    e = error_for(r, "e.so");
    cr_assert_eq(e->diag.code, TTH_EPLUGIN);
    cr_assert_not_null(strstr(e->diag.message, "not a shared object: the file has no ELF header"), "%s", e->diag.message);
    tth_registry_free(r);
}

/* tth_registry_set_load_observer: called with each file before it is loaded, in file-name order,
 * then with NULL; a file it refuses is not loaded (its constructor never runs) and is recorded
 * with the observer's diagnostic (tth-worker leaves out a plugin whose loading crashed one). */
typedef struct seen_files {
    char names[8][64];
    int n, ended;
} seen_files;

static int observe(void *ctx, const char *path, tth_diag *d)
{
    seen_files *s = ctx;
    if (!path) {
        s->ended++;
        return 0;
    }
    cr_assert_eq(s->ended, 0, "a file after the end");
    const char *base = strrchr(path, '/');
    snprintf(s->names[s->n < 8 ? s->n : 7], 64, "%s", base ? base + 1 : path);
    s->n++;
    if (strcmp(base ? base + 1 : path, "b.so") == 0)
        return tth_diag_set(d, TTH_EPLUGIN, path, "left out by the observer"), 1;
    return 0;
}

Test(registry, load_observer_sees_each_file_and_can_refuse_one)
{
    put_plugin("tp_basic", "a.so");
    put_plugin("tp_crash_load", "b.so"); /* its constructor would crash this process */
    put_plugin("tp_hot", "c.so");
    tth_registry *r = tth_registry_new();
    seen_files s = {0};
    tth_registry_set_load_observer(r, observe, &s);
    tth_diag d;
    cr_assert_eq(tth_registry_load_dir(r, tmpdir, &d), 2, "%s", d.message);
    cr_assert_eq(s.n, 3);
    cr_assert_str_eq(s.names[0], "a.so");
    cr_assert_str_eq(s.names[1], "b.so");
    cr_assert_str_eq(s.names[2], "c.so");
    cr_assert_eq(s.ended, 1);
    cr_assert_eq(tth_registry_count(r), 2);
    const tth_plugin_error *e = error_for(r, "b.so");
    cr_assert_not_null(e);
    cr_assert_eq(e->diag.code, TTH_EPLUGIN);
    cr_assert_str_eq(e->diag.message, "left out by the observer");
    tth_registry_free(r);
}

Test(registry, refuses_world_writable_file)
{
    put_plugin("tp_basic", "a.so");
    char path[512];
    snprintf(path, sizeof path, "%s/a.so", tmpdir);
    chmod(path, 0777);
    tth_registry *r = tth_registry_new();
    tth_diag d;
    cr_assert_eq(tth_registry_load_dir(r, tmpdir, &d), 0);
    const tth_plugin_error *e = error_for(r, "a.so");
    cr_assert_not_null(e);
    cr_assert_eq(e->diag.code, TTH_EPERM);
    cr_assert_not_null(strstr(e->diag.message, "writable by other users"));
    cr_assert_not_null(strstr(e->diag.hint, "chmod go-w"));
    tth_registry_free(r);
}

/* A plugin reached through a symlink is judged by the real directory it lives in: one others can
 * write is refused although the link sits in a trusted directory. */
Test(registry, refuses_symlink_into_a_writable_directory)
{
    char other[512], target[600], link[600], from[1100];
    snprintf(other, sizeof other, "%s-open", tmpdir);
    cr_assert_eq(mkdir(other, 0755), 0);
    snprintf(from, sizeof from, "%s/tp_basic.so", test_plugins_dir());
    snprintf(target, sizeof target, "%s/real.so", other);
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 0644 '%s'", from, target, target);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(chmod(other, 0777), 0);
    snprintf(link, sizeof link, "%s/a.so", tmpdir);
    cr_assert_eq(symlink(target, link), 0);
    tth_registry *r = tth_registry_new();
    tth_diag d;
    cr_assert_eq(tth_registry_load_dir(r, tmpdir, &d), 0);
    const tth_plugin_error *e = error_for(r, "a.so");
    cr_assert_not_null(e, "a plugin living in a world-writable directory was loaded through a symlink");
    cr_assert_eq(e->diag.code, TTH_EPERM);
    cr_assert_not_null(strstr(e->diag.message, "writable by other users"), "%s", e->diag.message);
    tth_registry_free(r);
    /* the same file in a directory only its owner writes loads */
    cr_assert_eq(chmod(other, 0755), 0);
    r = tth_registry_new();
    cr_assert_eq(tth_registry_load_dir(r, tmpdir, &d), 1, "%s", d.message);
    tth_registry_free(r);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", other);
    cr_assert_eq(system(cmd), 0);
}

Test(registry, refuses_group_writable_directory)
{
    put_plugin("tp_basic", "a.so");
    chmod(tmpdir, 0775);
    tth_registry *r = tth_registry_new();
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_registry_load_dir(r, tmpdir, &d), TTH_EPERM);
    cr_assert_not_null(strstr(d.message, "not trusted"));
    cr_assert_not_null(strstr(d.message, "writable by its group"));
    cr_assert_eq(tth_registry_count(r), 0);
    tth_registry_free(r);
}

Test(registry, refuses_file_owned_by_another_user)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to chown");
    put_plugin("tp_basic", "a.so");
    char path[512];
    snprintf(path, sizeof path, "%s/a.so", tmpdir);
    cr_assert_eq(chown(path, 12345, 12345), 0);
    tth_registry *r = tth_registry_new();
    tth_diag d;
    cr_assert_eq(tth_registry_load_dir(r, tmpdir, &d), 0);
    const tth_plugin_error *e = error_for(r, "a.so");
    cr_assert_eq(e->diag.code, TTH_EPERM);
    cr_assert_not_null(strstr(e->diag.message, "owned by uid 12345"));
    tth_registry_free(r);
}

Test(registry, missing_dir_is_an_error)
{
    tth_registry *r = tth_registry_new();
    tth_diag d;
    cr_assert_eq(tth_registry_load_dir(r, "/nonexistent/tth-plugins", &d), TTH_ENOENT);
    cr_assert_not_null(strstr(d.message, "/nonexistent/tth-plugins"));
    tth_registry_free(r);
}

static const tth_attr_schema bad_attr = {.size = sizeof(tth_attr_schema), .name = "keys",
                                         .type = TTH_ATTR_STRING};
static const tth_attr_schema *const bad_attrs[] = {&bad_attr, NULL};

Test(registry, descriptor_checks)
{
    tth_plugin_descriptor d = {.size = sizeof d, .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR,
                               .plugin_name = "p", .plugin_version = "1", .kind = "k"};
    tth_diag dg;
    cr_assert_eq(tth_descriptor_check(&d, "x", &dg), 0);
    d.abi_minor = TTH_ABI_MINOR + 1;
    cr_assert_eq(tth_descriptor_check(&d, "x", &dg), TTH_EABI);
    d.abi_minor = TTH_ABI_MINOR;
    d.size = 8;
    cr_assert_eq(tth_descriptor_check(&d, "x", &dg), TTH_EABI);
    d.size = sizeof d;
    d.kind = "Bad Kind";
    cr_assert_eq(tth_descriptor_check(&d, "x", &dg), TTH_EINVAL);
    d.kind = "composite";
    cr_assert_eq(tth_descriptor_check(&d, "x", &dg), TTH_EINVAL);
    d.kind = "k";
    d.attrs = bad_attrs;
    cr_assert_eq(tth_descriptor_check(&d, "x", &dg), TTH_EINVAL);
    cr_assert_not_null(strstr(dg.message, "every kind has already"));
}

Test(registry, describe_lists_plugins_kinds_and_errors)
{
    put_plugin("tp_basic", "a.so");
    put_plugin("tp_abi", "c.so");
    tth_registry *r = tth_registry_new();
    tth_diag d;
    tth_registry_load_dir(r, tmpdir, &d);
    json_t *j = tth_registry_describe(r);
    cr_assert_not_null(j);
    cr_assert_eq(json_array_size(json_object_get(j, "plugins")), 1);
    json_t *kind = json_array_get(json_object_get(j, "kinds"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(kind, "kind")), "test-basic");
    json_t *attr = json_array_get(json_object_get(kind, "attrs"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(attr, "type")), "int");
    cr_assert_eq(json_integer_value(json_object_get(attr, "default")), 2);
    json_t *err = json_array_get(json_object_get(j, "errors"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(err, "code")), "EABI");
    json_decref(j);
    tth_registry_free(r);
}
