/* Hosts (explicit, default, composite) and keys (defaults, user keys, device, parser keys). */
#include "common.h"

TestSuite(host, .init = load_plugins, .fini = unload_plugins);

Test(host, kinds_that_need_a_host_get_the_default_one)
{
    json_t *llvm = ok("llvm");
    json_t *t = ok("ethos-n");
    cr_assert(json_equal(json_object_get(t, "host"), llvm), "the default host is plain llvm");
    cr_assert_str_eq(str(json_object_get(t, "host"), "mtriple"), tth_host_triple());
    json_decref(t);
    json_decref(llvm);
    /* a Cortex-M has no operating system to load llvm's shared object: its host is c for the
     * same CPU (and mattr) */
    json_t *c4 = ok("c -mcpu=cortex-m4");
    t = ok("cmsis-nn -mcpu=cortex-m4");
    cr_assert(json_equal(json_object_get(t, "host"), c4), "the host of cmsis-nn on a Cortex-M4 is c for it");
    json_decref(t);
    json_decref(c4);
    t = ok("cmsis-nn -mcpu=cortex-m55 -mattr=+nomve");
    cr_assert_str_eq(str(json_object_get(t, "host"), "mcpu"), "cortex-m55");
    cr_assert_not(tth_target_has_feature(json_object_get(t, "host"), "has_mve"), "the host keeps the mattr");
    json_decref(t);
}

Test(host, kinds_that_can_be_hosts_have_none_by_default)
{
    json_t *t = ok("llvm");
    cr_assert_null(json_object_get(t, "host"));
    json_decref(t);
    t = ok("c -mcpu=cortex-m7");
    cr_assert_null(json_object_get(t, "host"));
    json_decref(t);
    t = ok("llvm -mtriple=aarch64-linux-gnu -host=c");
    cr_assert_str_eq(str(json_object_get(t, "host"), "kind"), "c");
    json_decref(t);
}

Test(host, explicit_host_as_string_or_json)
{
    json_t *a = ok("cmsis-nn -mcpu=cortex-m4 -host='c -mcpu=cortex-m4'");
    json_t *b = ok("{\"kind\":\"cmsis-nn\",\"mcpu\":\"cortex-m4\",\"host\":{\"kind\":\"c\",\"mcpu\":\"cortex-m4\"}}");
    json_t *c = ok("{\"kind\":\"cmsis-nn\",\"mcpu\":\"cortex-m4\",\"host\":\"c -mcpu=cortex-m4\"}");
    cr_assert(json_equal(a, b));
    cr_assert(json_equal(a, c));
    json_t *h = json_object_get(a, "host");
    cr_assert_str_eq(str(h, "kind"), "c");
    cr_assert(tth_target_has_feature(h, "has_dsp"), "the host went through its own parser");
    char *s = tth_target_to_string(a);
    cr_assert_not_null(strstr(s, " -host='c "), "%s", s);
    free(s);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    a = ok("ethos-n -host=arm/cortex-m55");
    cr_assert_str_eq(str(json_object_get(a, "host"), "tag"), "arm/cortex-m55");
    json_decref(a);
}

Test(host, host_errors)
{
    fails("ethos-n -host=cmsis-nn", TTH_EINVAL, "host: kind 'cmsis-nn' cannot be a host", "cmsis-nn",
          "use a kind that can be a host: 'c', 'llvm'");
    fails("ethos-n -host='llvm -host=c'", TTH_EINVAL, "host: a host target cannot have a host of its own", NULL, NULL);
    fails("ethos-n -host='lvm'", TTH_EUNKNOWN, "host: unknown target kind or tag 'lvm'", "lvm", "did you mean 'llvm'?");
    fails("ethos-n -host='llvm -mcpu=nope -mtriple=aarch64-linux-gnu'", TTH_EUNKNOWN,
          "host: unknown CPU 'nope' for triple 'aarch64-linux-gnu'", NULL, NULL);
}

Test(host, composite_host)
{
    /* the last member runs the driving code when it can be a host */
    json_t *t = ok("ethos-n,cmsis-nn,c -mcpu=cortex-m55");
    json_t *members = json_object_get(t, "targets");
    cr_assert(json_equal(json_object_get(t, "host"), json_array_get(members, 2)));
    cr_assert_null(json_object_get(json_array_get(members, 0), "host"), "members have no host of their own");
    json_decref(t);
    /* else the default host */
    json_t *llvm = ok("llvm");
    t = ok("ethos-n,cmsis-nn -mcpu=cortex-m55");
    cr_assert(json_equal(json_object_get(t, "host"), llvm));
    json_decref(t);
    json_decref(llvm);
    /* an explicit one wins */
    t = ok("cmsis-nn,c -mcpu=cortex-m4 -host='llvm -mtriple=aarch64-linux-gnu'");
    cr_assert_str_eq(str(json_object_get(t, "host"), "kind"), "llvm");
    json_decref(t);
    /* no member needs a host: none */
    t = ok("c,llvm");
    cr_assert_null(json_object_get(t, "host"));
    json_decref(t);
}

Test(host, no_llvm_plugin_no_default_host)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/plugins/tth-cmsisnn.so", getenv("TTH_BUILD_ROOT"));
    tth_registry *r = tth_registry_new();
    tth_diag d;
    cr_assert_eq(tth_registry_load_file(r, path, &d), 0, "%s", d.message);
    json_t *t = tth_target_parse(r, NULL, "cmsis-nn -mcpu=cortex-m4", &d);
    cr_assert_null(t);
    cr_assert_eq(d.code, TTH_EUNKNOWN);
    cr_assert_str_eq(d.message, "kind 'cmsis-nn' needs a host and none was given; the default host is an 'llvm' "
                                "target, but no plugin provides kind 'llvm'");
    cr_assert_str_eq(d.hint, "give a host: -host='c -mcpu=...', or install the llvm-cpu plugin");
    tth_registry_free(r);
}

Test(host, host_triple_is_llvms)
{
    const char *t = tth_host_triple();
    cr_assert(strlen(t) > 3);
    cr_assert_neq(strcmp(t, "unknown-unknown-unknown"), 0);
    cr_assert(strlen(tth_host_cpu_name()) > 0);
}

Test(host, keys_rules)
{
    struct {
        const char *text, *keys;
    } k[] = {
        {"c", "cpu"},                                                   /* default keys */
        {"c -keys=mine", "mine"},                                       /* the user's replace the defaults */
        {"{\"kind\":\"c\",\"keys\":[]}", "cpu"},                        /* none given: defaults */
        {"c -device=arm_cpu", "cpu,arm_cpu"},                           /* device appended */
        {"c -keys=cpu,cpu,x", "cpu,x"},                                 /* deduplicated */
        {"llvm -mtriple=aarch64-linux-gnu", "arm_cpu,cpu"},             /* parser keys first */
        {"llvm -mtriple=aarch64-linux-gnu -keys=mine", "arm_cpu,mine"}, /* ... before the user's */
        {"llvm -mtriple=aarch64-linux-gnu -keys=cpu,arm_cpu", "arm_cpu,cpu"},
        {"cmsis-nn -mcpu=cortex-m4 -device=dsp", "arm_cpu,cpu,dsp"},
        {"ethos-n -keys=npu", "npu"},
        {"ethos-n -device=npu", "ethos-n,npu"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        json_t *t = ok(k[i].text);
        cr_assert_str_eq(keys_of(t), k[i].keys, "%s", k[i].text);
        assert_round_trip(t, k[i].text);
        json_decref(t);
    }
}
