/* Diagnostics: filling, prefixing, rendering, and the error-code table. */
#include <criterion/criterion.h>
#include <string.h>
#include <tth/diag.h>

Test(diag, set_returns_code_and_fills_fields)
{
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(d.code, TTH_OK);
    int rc = tth_diag_set(&d, TTH_EUNKNOWN, "target 'lvm'", "unknown target kind '%s'", "lvm");
    tth_diag_hint(&d, "did you mean '%s'?", "llvm");
    cr_assert_eq(rc, TTH_EUNKNOWN);
    cr_assert_eq(d.code, TTH_EUNKNOWN);
    cr_assert_eq(d.severity, TTH_SEV_ERROR);
    cr_assert_str_eq(d.message, "unknown target kind 'lvm'");
    cr_assert_str_eq(d.location, "target 'lvm'");
    cr_assert_str_eq(d.hint, "did you mean 'llvm'?");
}

Test(diag, null_diag_only_returns_code)
{
    cr_assert_eq(tth_diag_set(NULL, TTH_EIO, NULL, "x"), TTH_EIO);
    tth_diag_hint(NULL, "ignored");
    tth_diag_prefix(NULL, "ignored");
}

Test(diag, prefix_keeps_code_and_hint)
{
    tth_diag d;
    tth_diag_set(&d, TTH_EABI, "a.so", "ABI 2.0 is not supported");
    tth_diag_hint(&d, "rebuild");
    tth_diag_prefix(&d, "loading '%s'", "a.so");
    cr_assert_str_eq(d.message, "loading 'a.so': ABI 2.0 is not supported");
    cr_assert_eq(d.code, TTH_EABI);
    cr_assert_str_eq(d.hint, "rebuild");
}

Test(diag, long_message_is_truncated_not_overflowed)
{
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tth_diag d;
    tth_diag_set(&d, TTH_EINVAL, big, "%s", big);
    cr_assert_eq(strlen(d.message), TTH_DIAG_MESSAGE_MAX - 1);
    cr_assert_eq(strlen(d.location), TTH_DIAG_LOCATION_MAX - 1);
}

Test(diag, format_renders_all_parts)
{
    tth_diag d;
    tth_diag_set(&d, TTH_EUNKNOWN, "-mcpu=cortex-m99", "unknown CPU 'cortex-m99'");
    tth_diag_hint(&d, "did you mean 'cortex-m33'?");
    char buf[1024];
    size_t n = tth_diag_format(&d, buf, sizeof buf);
    cr_assert_eq(n, strlen(buf));
    cr_assert_str_eq(buf, "error: unknown CPU 'cortex-m99'\n  at: -mcpu=cortex-m99\n  hint: did you mean 'cortex-m33'?");
    char small[8];
    n = tth_diag_format(&d, small, sizeof small);
    cr_assert_eq(n, 7);
    cr_assert_str_eq(small, "error: ");
}

Test(diag, error_table_names_and_texts)
{
    cr_assert_str_eq(tth_error_name(TTH_EABI), "EABI");
    cr_assert_str_eq(tth_strerror(TTH_EABI), "plugin ABI mismatch");
    cr_assert_str_eq(tth_strerror(TTH_OK), "ok");
    cr_assert_str_eq(tth_strerror(-999), "unknown error");
    cr_assert_str_eq(tth_error_name(-999), "EUNKNOWNCODE");
}
