/* The string form: every lexical rule and every error message. */
#include "common.h"

TestSuite(string, .init = load_plugins, .fini = unload_plugins);

Test(string, key_equals_value_and_key_space_value)
{
    json_t *a = ok("c -mcpu=cortex-m4 -workspace-byte-alignment=8");
    json_t *b = ok("c -mcpu cortex-m4 -workspace-byte-alignment 8");
    cr_assert(json_equal(a, b));
    cr_assert_str_eq(str(a, "mcpu"), "cortex-m4");
    cr_assert_eq(json_integer_value(json_object_get(a, "workspace-byte-alignment")), 8);
    json_decref(a);
    json_decref(b);
}

Test(string, bare_flag_is_true_and_does_not_take_the_next_token)
{
    json_t *a = ok("llvm -fast-math -opt-level 2");
    cr_assert(json_is_true(json_object_get(a, "fast-math")));
    cr_assert_eq(json_integer_value(json_object_get(a, "opt-level")), 2);
    json_decref(a);
    a = ok("llvm -fast-math=false");
    cr_assert(json_is_false(json_object_get(a, "fast-math")));
    json_decref(a);
    a = ok("llvm -fast-math=1");
    cr_assert(json_is_true(json_object_get(a, "fast-math")));
    json_decref(a);
}

Test(string, arrays_split_on_commas)
{
    json_t *a = ok("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+v8.2a");
    json_t *m = json_object_get(a, "mattr");
    cr_assert_eq(json_array_size(m), 2);
    cr_assert_str_eq(json_string_value(json_array_get(m, 0)), "+neon");
    cr_assert_str_eq(json_string_value(json_array_get(m, 1)), "+v8.2a");
    json_decref(a);
}

Test(string, single_quotes_group_text)
{
    json_t *a = ok("c -model='my model' -libs='a,b',c -device='x y'");
    cr_assert_str_eq(str(a, "model"), "my model");
    json_t *libs = json_object_get(a, "libs");
    cr_assert_eq(json_array_size(libs), 2);
    cr_assert_str_eq(json_string_value(json_array_get(libs, 0)), "a,b");
    cr_assert_str_eq(json_string_value(json_array_get(libs, 1)), "c");
    cr_assert_str_eq(keys_of(a), "cpu,x y");
    json_decref(a);
    a = ok("c -model 'two words'");
    cr_assert_str_eq(str(a, "model"), "two words");
    json_decref(a);
    a = ok("c -model '-starts-with-a-dash' -mcpu cortex-m4");
    cr_assert_str_eq(str(a, "model"), "-starts-with-a-dash", "a quoted value may start with '-'");
    cr_assert_str_eq(str(a, "mcpu"), "cortex-m4");
    json_decref(a);
    a = ok("c -model='it\\'s' -libs=pre'fix 'post");
    cr_assert_str_eq(str(a, "model"), "it's");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(a, "libs"), 0)), "prefix post");
    json_decref(a);
}

Test(string, export_quotes_what_needs_it)
{
    json_t *a = ok("c -model='it\\'s a \\\\ b' -libs='a,b',c");
    char *s = tth_target_to_string(a);
    cr_assert_str_eq(s, "c -constants-byte-alignment=16 -keys=cpu -libs='a,b',c -model='it\\'s a \\\\ b' "
                        "-workspace-byte-alignment=16");
    assert_round_trip(a, "quoted");
    free(s);
    json_decref(a);
}

Test(string, repeated_key)
{
    fails("llvm -mcpu=a -mcpu=b", TTH_EDUPLICATE, "attribute 'mcpu' is given twice", "-mcpu=b",
          "keep one of '-mcpu=a' and '-mcpu=b'");
    fails("c -mcpu cortex-m4 -mcpu=cortex-m7", TTH_EDUPLICATE, "attribute 'mcpu' is given twice",
          "-mcpu=cortex-m7", NULL);
}

Test(string, empty_value)
{
    fails("llvm -mcpu=", TTH_EINVAL, "empty value for attribute 'mcpu'", "-mcpu=",
          "give a value (-mcpu=VALUE) or leave the attribute out");
    fails("llvm -mcpu=''", TTH_EINVAL, "empty value for attribute 'mcpu'", "-mcpu=''", NULL);
    fails("llvm -mattr=", TTH_EINVAL, "empty value for attribute 'mattr'", "-mattr=",
          "give a value (-mattr=a,b) or leave the attribute out");
    fails("llvm -mattr=+neon,,+sve", TTH_EINVAL, "empty element in attribute 'mattr'", "-mattr=+neon,,+sve", NULL);
}

Test(string, token_without_dash)
{
    fails("llvm -fast-math cortex-a72", TTH_EPARSE, "unexpected 'cortex-a72': attributes start with '-'",
          "cortex-a72", "quote values that contain spaces: -key='a b'");
    fails("c -model my model", TTH_EPARSE, "unexpected 'model': attributes start with '-'", "model", NULL);
}

Test(string, option_needs_a_value)
{
    fails("llvm -mcpu", TTH_EINVAL, "attribute 'mcpu' needs a value", "-mcpu", "write -mcpu=VALUE");
    fails("llvm -mcpu -opt-level=2", TTH_EINVAL, "attribute 'mcpu' needs a value", "-mcpu", NULL);
}

Test(string, unterminated_quote)
{
    fails("c -model='abc", TTH_EPARSE, "unterminated quote", "'abc",
          "close the quote: -key='a b'; write \\' for a quote inside one");
}

Test(string, empty_target)
{
    fails("", TTH_EINVAL, "empty target", NULL, "give a kind or a tag, e.g. 'llvm -mtriple=aarch64-linux-gnu'");
    fails("   ", TTH_EINVAL, "empty target", NULL, NULL);
}

Test(string, must_start_with_kind_or_tag)
{
    fails("-mcpu=x", TTH_EPARSE, "a target starts with a kind or a tag, not '-mcpu=x'", "-mcpu=x",
          "put the kind first: 'llvm -mcpu=x'");
    fails("'llvm'", TTH_EPARSE, "''llvm'' is not a kind or a tag name", "'llvm'", NULL);
}

Test(string, bad_attribute_name)
{
    fails("llvm -MCPU=x", TTH_EPARSE, "bad attribute name in '-MCPU=x'", "-MCPU=x",
          "attribute names use a-z, 0-9, '-', '_' and '.', as in -mcpu=cortex-a72");
    fails("llvm --mcpu=x", TTH_EPARSE, "bad attribute name in '--mcpu=x'", NULL, NULL);
}

Test(string, unknown_kind_suggests_nearest)
{
    fails("lvm", TTH_EUNKNOWN, "unknown target kind or tag 'lvm'", "lvm", "did you mean 'llvm'?");
    fails("cmsisnn -mcpu=cortex-m4", TTH_EUNKNOWN, "unknown target kind or tag 'cmsisnn'", "cmsisnn",
          "did you mean 'cmsis-nn'?");
    fails("ethos-u", TTH_EUNKNOWN, "unknown target kind or tag 'ethos-u'", "ethos-u", "did you mean 'ethos-n'?");
    fails("quantum", TTH_EUNKNOWN, "unknown target kind or tag 'quantum'", "quantum",
          "'tthctl targets' lists the kinds, 'tthctl tags' the tags");
}

Test(string, unknown_attribute_suggests_nearest)
{
    fails("llvm -mcpux=x", TTH_EUNKNOWN, "unknown attribute 'mcpux' for kind 'llvm'", "-mcpux=x",
          "did you mean 'mcpu'?");
    fails("llvm -opt_level=2", TTH_EUNKNOWN, "unknown attribute 'opt_level' for kind 'llvm'", "-opt_level=2",
          "did you mean 'opt-level'?");
    fails("c -m=1", TTH_EUNKNOWN, "unknown attribute 'm' for kind 'c'", "-m=1",
          "'tthctl targets' lists the attributes of each kind");
    fails("ethos-n -topps=2", TTH_EUNKNOWN, "unknown attribute 'topps' for kind 'ethos-n'", "-topps=2",
          "did you mean 'tops'?");
}

Test(string, wrong_type)
{
    fails("llvm -num-cores=four", TTH_ETYPE, "attribute 'num-cores' of kind 'llvm' takes an integer, not 'four'",
          "-num-cores=four", NULL);
    fails("llvm -num-cores=4x", TTH_ETYPE, "attribute 'num-cores' of kind 'llvm' takes an integer, not '4x'", NULL, NULL);
    fails("llvm -num-cores=99999999999999999999", TTH_ETYPE,
          "attribute 'num-cores' of kind 'llvm' takes an integer, not '99999999999999999999'", NULL, NULL);
    fails("llvm -fast-math=yes", TTH_ETYPE, "attribute 'fast-math' of kind 'llvm' takes true or false, not 'yes'",
          "-fast-math=yes", NULL);
}

Test(string, kind_and_features_cannot_be_set)
{
    fails("llvm -kind=c", TTH_EINVAL, "'-kind' cannot be set as an attribute", "-kind=c",
          "the kind is the first word of the target: 'llvm -mcpu=...'");
    fails("llvm -features=x", TTH_EINVAL, "'features' are derived by the kind's parser and cannot be set",
          "-features=x", "set mcpu, mattr or mtriple instead");
}

Test(string, composite_attributes_go_to_the_kinds_that_declare_them)
{
    json_t *t = ok("ethos-n,cmsis-nn,c -mcpu=cortex-m55 -tops=4 -workspace-byte-alignment=8");
    cr_assert_str_eq(str(t, "kind"), "composite");
    json_t *m = json_object_get(t, "targets");
    cr_assert_eq(json_array_size(m), 3);
    json_t *e = json_array_get(m, 0), *n = json_array_get(m, 1), *c = json_array_get(m, 2);
    cr_assert_str_eq(str(e, "kind"), "ethos-n");
    cr_assert_eq(json_integer_value(json_object_get(e, "tops")), 4);
    cr_assert_null(json_object_get(e, "mcpu"));
    cr_assert_str_eq(str(n, "mcpu"), "cortex-m55");
    cr_assert_null(json_object_get(n, "workspace-byte-alignment"));
    cr_assert_str_eq(str(c, "mcpu"), "cortex-m55");
    cr_assert_eq(json_integer_value(json_object_get(c, "workspace-byte-alignment")), 8);
    /* common attributes go to every member */
    json_decref(t);
    t = ok("cmsis-nn,c -mcpu=cortex-m4 -model=kws");
    cr_assert_str_eq(str(json_array_get(json_object_get(t, "targets"), 0), "model"), "kws");
    cr_assert_str_eq(str(json_array_get(json_object_get(t, "targets"), 1), "model"), "kws");
    json_decref(t);
}

Test(string, composite_errors)
{
    fails("cmsis-nn,c -foo=1", TTH_EUNKNOWN, "attribute 'foo' is not declared by any of 'cmsis-nn', 'c'", "-foo=1",
          "'tthctl targets' lists the attributes of each kind");
    fails("ethos-n,c -topps=1", TTH_EUNKNOWN, "attribute 'topps' is not declared by any of 'ethos-n', 'c'", "-topps=1",
          "did you mean 'tops'?");
    fails("cmsis-nn,,c", TTH_EPARSE, "empty name in the composite 'cmsis-nn,,c'", "cmsis-nn,,c",
          "list kinds or tags separated by single commas: 'ethos-n,cmsis-nn,c'");
    fails("c,c", TTH_EDUPLICATE, "kind 'c' is listed twice in 'c,c'", "c,c", "list each kind once");
    fails("cmsis-nn,cc", TTH_EUNKNOWN, "unknown target kind or tag 'cc'", "cc", "did you mean 'c'?");
    fails("cmsis-nn,c -tag=arm/cortex-m4", TTH_EINVAL, "a composite target has no tag", "-tag=arm/cortex-m4",
          "name the tag as a member instead: 'ethos-n,arm/cortex-m55'");
    fails("composite -mcpu=x", TTH_EUNKNOWN, "a 'composite' target takes only -targets and -host, not '-mcpu'",
          "-mcpu=x", "give attributes to the members: -targets='cmsis-nn -mcpu=cortex-m55','c'");
    fails("composite -targets=llvm", TTH_EINVAL, "a composite target needs a list of at least two \"targets\"",
          "targets", "list them: 'ethos-n,cmsis-nn,c', or use the one target by itself");
    fails("composite", TTH_EINVAL, "a composite target needs a list of at least two \"targets\"", NULL, NULL);
}

Test(string, composite_word_form_equals_short_form)
{
    json_t *a = ok("cmsis-nn,c -mcpu=cortex-m7");
    json_t *b = ok("composite -targets='cmsis-nn -mcpu=cortex-m7','c -mcpu=cortex-m7'");
    cr_assert(json_equal(a, b));
    json_decref(a);
    json_decref(b);
}

Test(string, tag_given_twice)
{
    fails("raspberry-pi/5 -tag=aws/c6g", TTH_EDUPLICATE,
          "the tag is given twice: as the first word 'raspberry-pi/5' and as '-tag=aws/c6g'", "-tag=aws/c6g", NULL);
}
