/* The JSON form: text, the nested "attrs" object, files; schema errors with their messages. */
#include "common.h"
#include <unistd.h>

TestSuite(json, .init = load_plugins, .fini = unload_plugins);

static void same(const char *a, const char *b)
{
    json_t *x = ok(a), *y = ok(b);
    char *sx = tth_target_to_json_text(x), *sy = tth_target_to_json_text(y);
    cr_assert(json_equal(x, y), "'%s' != '%s':\n %s\n %s", a, b, sx, sy);
    free(sx);
    free(sy);
    json_decref(x);
    json_decref(y);
}

Test(json, object_text_equals_string_form)
{
    same("{\"kind\":\"llvm\",\"mtriple\":\"aarch64-linux-gnu\",\"mattr\":[\"+neon\"]}",
         "llvm -mtriple=aarch64-linux-gnu -mattr=+neon");
    same("  {\"kind\": \"c\", \"mcpu\": \"cortex-m4\"}", "c -mcpu=cortex-m4");
}

Test(json, seeds_attrs_object_and_string_lists)
{
    same("{\"kind\":\"c\",\"attrs\":{\"mcpu\":\"cortex-m4\",\"mattr\":\"+nodsp\"}}", "c -mcpu=cortex-m4 -mattr=+nodsp");
    same("{\"kind\":\"llvm\",\"mtriple\":\"aarch64-linux-gnu\",\"mattr\":\"+neon,+v8.2a\"}",
         "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+v8.2a");
    same("{\"kind\":\"llvm\",\"mtriple\":\"aarch64-linux-gnu\",\"mattr\":\"+neon, +v8.2a\"}",
         "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+v8.2a");
}

Test(json, features_are_derived_not_read)
{
    same("{\"kind\":\"c\",\"mcpu\":\"cortex-m4\",\"features\":{\"has_mve\":true}}", "c -mcpu=cortex-m4");
}

Test(json, composite_members_as_objects_or_strings)
{
    same("{\"kind\":\"composite\",\"targets\":[\"cmsis-nn -mcpu=cortex-m4\",{\"kind\":\"c\",\"mcpu\":\"cortex-m4\"}]}",
         "cmsis-nn,c -mcpu=cortex-m4");
}

Test(json, from_json_borrows_its_input)
{
    json_t *in = json_pack("{s:s, s:s}", "kind", "c", "mcpu", "cortex-m7");
    tth_diag d;
    json_t *t = tth_target_from_json(reg, NULL, in, &d);
    cr_assert_not_null(t, "%s", d.message);
    cr_assert_eq(json_object_size(in), 2);
    cr_assert_eq(in->refcount, 1);
    cr_assert_str_eq(keys_of(t), "arm_cpu,cpu");
    json_decref(t);
    json_decref(in);
    json_t *five = json_integer(5);
    t = tth_target_from_json(reg, NULL, five, &d);
    cr_assert_null(t);
    cr_assert_eq(d.code, TTH_ETYPE);
    cr_assert_str_eq(d.message, "a target is a JSON object or a target string, not 5");
    json_decref(five);
    cr_assert_null(tth_target_from_json(NULL, NULL, in, &d));
    cr_assert_eq(d.code, TTH_EINVAL);
    cr_assert_null(tth_target_parse(reg, NULL, NULL, &d));
    cr_assert_eq(d.code, TTH_EINVAL);
}

Test(json, syntax_error)
{
    tth_diag d;
    cr_assert_null(tth_target_parse(reg, NULL, "{\"kind\": ", &d));
    cr_assert_eq(d.code, TTH_EPARSE);
    cr_assert(strncmp(d.message, "target JSON is not valid: ", 26) == 0, "%s", d.message);
    cr_assert(strncmp(d.location, "line 1, column ", 15) == 0, "%s", d.location);
}

Test(json, field_errors)
{
    fails("{\"mcpu\":\"x\"}", TTH_EINVAL, "a target needs a \"kind\" (or a \"tag\")", NULL,
          "add \"kind\": \"llvm\", for example");
    fails("{\"id\":\"llvm\"}", TTH_EINVAL, "a target needs a \"kind\" (or a \"tag\")", NULL,
          "the kind is given as \"kind\", not \"id\"");
    fails("{\"kind\":5}", TTH_ETYPE, "\"kind\" must be a string, not 5", "kind", NULL);
    fails("{\"tag\":[1]}", TTH_ETYPE, "\"tag\" must be a string, not [1]", "tag", NULL);
    fails("{\"kind\":\"lvm\"}", TTH_EUNKNOWN, "unknown target kind 'lvm'", "lvm", "did you mean 'llvm'?");
    fails("{\"kind\":\"llvm\",\"mcpux\":\"a\"}", TTH_EUNKNOWN, "unknown attribute 'mcpux' for kind 'llvm'",
          "\"mcpux\": \"a\"", "did you mean 'mcpu'?");
    fails("{\"kind\":\"llvm\",\"id\":\"llvm\"}", TTH_EUNKNOWN, "unknown attribute 'id' for kind 'llvm'", NULL,
          "the kind is given as \"kind\", not \"id\"");
    fails("{\"kind\":\"llvm\",\"target_host\":{\"kind\":\"llvm\"}}", TTH_EUNKNOWN,
          "unknown attribute 'target_host' for kind 'llvm'", NULL, "the host is given as \"host\", not \"target_host\"");
    fails("{\"kind\":\"c\",\"attrs\":5}", TTH_ETYPE, "\"attrs\" must be an object, not 5", "attrs", NULL);
    fails("{\"kind\":\"c\",\"mcpu\":\"cortex-m4\",\"attrs\":{\"mcpu\":\"cortex-m7\"}}", TTH_EDUPLICATE,
          "attribute 'mcpu' is given both in \"attrs\" and at the top level", "mcpu", "keep one of the two");
}

Test(json, wrong_types)
{
    fails("{\"kind\":\"llvm\",\"num-cores\":\"4\"}", TTH_ETYPE,
          "attribute 'num-cores' of kind 'llvm' takes an integer, not \"4\"", "\"num-cores\": \"4\"", NULL);
    fails("{\"kind\":\"llvm\",\"num-cores\":4.5}", TTH_ETYPE,
          "attribute 'num-cores' of kind 'llvm' takes an integer, not 4.5", NULL, NULL);
    fails("{\"kind\":\"llvm\",\"mattr\":[1]}", TTH_ETYPE,
          "attribute 'mattr' of kind 'llvm' takes a list of strings, not [1]", "\"mattr\": [1]", NULL);
    fails("{\"kind\":\"llvm\",\"mattr\":{}}", TTH_ETYPE,
          "attribute 'mattr' of kind 'llvm' takes a list of strings, not {}", NULL, NULL);
    fails("{\"kind\":\"llvm\",\"fast-math\":1}", TTH_ETYPE,
          "attribute 'fast-math' of kind 'llvm' takes true or false, not 1", NULL, NULL);
    fails("{\"kind\":\"llvm\",\"mcpu\":true}", TTH_ETYPE, "attribute 'mcpu' of kind 'llvm' takes a string, not true",
          NULL, NULL);
    fails("{\"kind\":\"ethos-n\",\"host\":5}", TTH_ETYPE, "attribute 'host' of kind 'ethos-n' takes a target, not 5",
          NULL, NULL);
    fails("{\"kind\":\"llvm\",\"mcpu\":\"\"}", TTH_EINVAL, "empty value for attribute 'mcpu'", "\"mcpu\": \"\"",
          "give a value or leave the attribute out");
    fails("{\"kind\":\"llvm\",\"mattr\":[\"+neon\",\"\"]}", TTH_EINVAL, "empty value for attribute 'mattr'", NULL, NULL);
    fails("{\"kind\":\"llvm\",\"mattr\":\"+neon,\"}", TTH_EINVAL, "empty value for attribute 'mattr'", NULL, NULL);
}

Test(json, composite_errors)
{
    fails("{\"kind\":\"composite\",\"targets\":[\"c\",\"cmsis-nn\"],\"mcpu\":\"x\"}", TTH_EUNKNOWN,
          "a composite target takes only \"targets\" and \"host\", not 'mcpu'", "mcpu",
          "give attributes to the members of \"targets\"");
    fails("{\"kind\":\"composite\",\"targets\":\"c\"}", TTH_EINVAL,
          "a composite target needs a list of at least two \"targets\"", NULL, NULL);
    fails("{\"kind\":\"composite\",\"targets\":[\"c\",{\"kind\":\"composite\",\"targets\":[\"c\",\"llvm\"]}]}",
          TTH_EINVAL, "composite member 2: a composite target cannot be nested in another", NULL, NULL);
    fails("{\"kind\":\"composite\",\"targets\":[\"cmsis-nn -host=c\",\"c\"]}", TTH_EINVAL,
          "composite member 1: a target inside a composite cannot have its own host", NULL,
          "give the host to the composite: 'a,b -host=...' or \"host\" next to \"targets\"");
    fails("{\"kind\":\"composite\",\"targets\":[\"c\",\"cmsis-nn\",\"c -mcpu=cortex-m4\"]}", TTH_EDUPLICATE,
          "kind 'c' is listed twice in the composite", NULL, "list each kind once");
    fails("{\"kind\":\"composite\",\"targets\":[\"c\",5]}", TTH_ETYPE,
          "composite member 2: a target is a JSON object or a target string, not 5", NULL, NULL);
    fails("{\"kind\":\"composite\",\"targets\":[\"c\",\"cmsis-nn\"],\"host\":\"ethos-n,c\"}", TTH_EINVAL,
          "host: a composite target cannot be a host", NULL, NULL);
}

static char tmp[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(json, files)
{
    snprintf(tmp, sizeof tmp, "/tmp/tth-target-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    char good[128], bad[128], plain[128], at[140];
    snprintf(good, sizeof good, "%s/m7.json", tmp);
    snprintf(bad, sizeof bad, "%s/bad.json", tmp);
    snprintf(plain, sizeof plain, "%s/target.txt", tmp);
    write_file(good, "{\"kind\": \"c\",\n \"mcpu\": \"cortex-m7\"}\n");
    write_file(bad, "{\"kind\": \"c\",\n \"mcpu\": }\n");
    write_file(plain, "{\"tag\": \"arm/cortex-m7\"}");
    json_t *a = ok(good);
    snprintf(at, sizeof at, "@%s", good);
    json_t *b = ok(at);
    json_t *c = ok("c -mcpu=cortex-m7");
    cr_assert(json_equal(a, b));
    cr_assert(json_equal(a, c));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    snprintf(at, sizeof at, "@%s", plain);
    a = ok(at);
    cr_assert_str_eq(str(a, "tag"), "arm/cortex-m7");
    json_decref(a);

    tth_diag d;
    cr_assert_null(tth_target_parse(reg, NULL, bad, &d));
    cr_assert_eq(d.code, TTH_EPARSE);
    char want[256];
    snprintf(want, sizeof want, "target file '%s' is not valid JSON: ", bad);
    cr_assert(strncmp(d.message, want, strlen(want)) == 0, "%s", d.message);
    snprintf(want, sizeof want, "%s:2:", bad);
    cr_assert(strncmp(d.location, want, strlen(want)) == 0, "%s", d.location);

    fails("/nonexistent/t.json", TTH_ENOENT, "cannot read target file '/nonexistent/t.json': No such file or directory",
          "/nonexistent/t.json", NULL);
    fails("@/nonexistent/t", TTH_ENOENT, "cannot read target file '/nonexistent/t': No such file or directory", NULL,
          NULL);
    unlink(good);
    unlink(bad);
    unlink(plain);
    rmdir(tmp);
}
