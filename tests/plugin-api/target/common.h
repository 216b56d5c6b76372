/* Helpers shared by the target tests: the four real plugins from $TTH_BUILD_ROOT/plugins, and
 * checks that a target parses, or fails with an exact code, message, location and hint. */
#ifndef TTH_TEST_TARGET_COMMON_H
#define TTH_TEST_TARGET_COMMON_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tth/target.h>

static __attribute__((unused)) tth_registry *reg;

static __attribute__((unused)) void load_plugins(void)
{
    char dir[1024];
    const char *root = getenv("TTH_BUILD_ROOT");
    cr_assert_not_null(root, "TTH_BUILD_ROOT is not set");
    snprintf(dir, sizeof dir, "%s/plugins", root);
    reg = tth_registry_new();
    tth_diag d;
    tth_diag_clear(&d);
    int n = tth_registry_load_dir(reg, dir, &d);
    cr_assert_geq(n, 4, "loading %s: %s", dir, d.message);
    cr_assert_not_null(tth_registry_find_kind(reg, "llvm"));
    cr_assert_not_null(tth_registry_find_kind(reg, "c"));
    cr_assert_not_null(tth_registry_find_kind(reg, "cmsis-nn"));
    cr_assert_not_null(tth_registry_find_kind(reg, "ethos-n"));
}

static __attribute__((unused)) void unload_plugins(void)
{
    tth_registry_free(reg);
    reg = NULL;
}

/* Parse text, which must succeed; the caller decrefs. */
static __attribute__((unused)) json_t *ok(const char *text)
{
    tth_diag d;
    json_t *t = tth_target_parse(reg, NULL, text, &d);
    cr_assert_not_null(t, "'%s' failed: %s (at %s; hint %s)", text, d.message, d.location, d.hint);
    return t;
}

/* Parse text, which must fail with code; message, location and hint (when not NULL) must be
 * exactly these. */
static __attribute__((unused)) void fails(const char *text, int code, const char *message, const char *location, const char *hint)
{
    tth_diag d;
    json_t *t = tth_target_parse(reg, NULL, text, &d);
    if (t) {
        char *s = tth_target_to_json_text(t);
        json_decref(t);
        cr_assert_fail("'%s' parsed as %s, expected an error", text, s);
    }
    cr_assert_eq(d.code, code, "'%s': code %s, expected %s (%s)", text, tth_error_name(d.code),
                 tth_error_name(code), d.message);
    if (message)
        cr_assert(strcmp(d.message, message) == 0, "'%s' message:\n got: %s\nwant: %s", text, d.message, message);
    if (location)
        cr_assert(strcmp(d.location, location) == 0, "'%s' location:\n got: %s\nwant: %s", text, d.location, location);
    if (hint)
        cr_assert(strcmp(d.hint, hint) == 0, "'%s' hint:\n got: %s\nwant: %s", text, d.hint, hint);
}

/* The string value of field key of t ("" when absent). */
static __attribute__((unused)) const char *str(const json_t *t, const char *key)
{
    const char *s = json_string_value(json_object_get(t, key));
    return s ? s : "";
}

/* The keys of t joined by ',' into a static buffer. */
static __attribute__((unused)) const char *keys_of(const json_t *t)
{
    static char buf[256];
    buf[0] = '\0';
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(t, "keys"), i, k) {
        if (i)
            strcat(buf, ",");
        strcat(buf, json_string_value(k));
    }
    return buf;
}

/* text parses, with the fields `fields` when not NULL ("name=value ...": a string field equal to
 * value, or an integer one), the keys `keys` (joined by ',') when not NULL and the features
 * `feats` when not NULL ("+name" it has, "-name" it has not, separated by spaces). */
static __attribute__((unused)) void parses_as(const char *text, const char *fields, const char *keys, const char *feats)
{
    json_t *t = ok(text);
    for (const char *f = fields; f && *f;) {
        char name[64], value[128];
        size_t n = strcspn(f, "="), v = strcspn(f + n + 1, " ");
        snprintf(name, sizeof name, "%.*s", (int)n, f);
        snprintf(value, sizeof value, "%.*s", (int)v, f + n + 1);
        const json_t *got = json_object_get(t, name);
        if (json_is_integer(got))
            cr_assert_eq(json_integer_value(got), atoll(value), "'%s': %s", text, name);
        else
            cr_assert_str_eq(str(t, name), value, "'%s': %s", text, name);
        f += n + 1 + v + strspn(f + n + 1 + v, " ");
    }
    if (keys)
        cr_assert_str_eq(keys_of(t), keys, "'%s'", text);
    for (const char *f = feats; f && *f;) {
        char name[64];
        size_t n = strcspn(f + 1, " ");
        snprintf(name, sizeof name, "%.*s", (int)n, f + 1);
        cr_assert_eq(tth_target_has_feature(t, name), *f == '+', "'%s': %s", text, f);
        f += 1 + n + strspn(f + 1 + n, " ");
    }
    json_decref(t);
}

/* parse(to_string(t)) == t and from_json(t) == t. */
static __attribute__((unused)) void assert_round_trip(const json_t *t, const char *what)
{
    char *s = tth_target_to_string(t);
    cr_assert_not_null(s);
    tth_diag d;
    json_t *back = tth_target_parse(reg, NULL, s, &d);
    cr_assert_not_null(back, "%s: re-parsing '%s' failed: %s", what, s, d.message);
    char *a = tth_target_to_json_text(t), *b = tth_target_to_json_text(back);
    cr_assert(json_equal((json_t *)t, back), "%s: string round trip differs:\n %s\n %s\n via %s", what, a, b, s);
    json_t *back2 = tth_target_from_json(reg, NULL, t, &d);
    cr_assert_not_null(back2, "%s: from_json failed: %s", what, d.message);
    char *c = tth_target_to_json_text(back2);
    cr_assert(json_equal((json_t *)t, back2), "%s: JSON round trip differs:\n %s\n %s", what, a, c);
    cr_assert_eq(tth_target_hash(t), tth_target_hash(back));
    free(a);
    free(b);
    free(c);
    free(s);
    json_decref(back);
    json_decref(back2);
}

#endif
