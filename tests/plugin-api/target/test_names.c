/* Edit distance and "did you mean": nearest names, stable order, never a dump. */
#include <criterion/criterion.h>
#include <string.h>
#include <tth/target.h>

Test(names, edit_distance)
{
    cr_assert_eq(tth_edit_distance("", ""), 0);
    cr_assert_eq(tth_edit_distance("abc", ""), 3);
    cr_assert_eq(tth_edit_distance("", "abc"), 3);
    cr_assert_eq(tth_edit_distance("llvm", "llvm"), 0);
    cr_assert_eq(tth_edit_distance("lvm", "llvm"), 1);
    cr_assert_eq(tth_edit_distance("kitten", "sitting"), 3);
    cr_assert_eq(tth_edit_distance("cortex-m5", "cortex-m55"), 1);
    cr_assert_eq(tth_edit_distance("flaw", "lawn"), 2);
    /* longer than the on-stack row */
    char a[200], b[200];
    memset(a, 'a', 150);
    a[150] = '\0';
    memset(b, 'a', 150);
    b[150] = '\0';
    b[75] = 'b';
    cr_assert_eq(tth_edit_distance(a, b), 1);
}

Test(names, nearest_sorted_by_distance_then_name)
{
    const char *cands[] = {"cortex-m7", "cortex-m55", "cortex-m33", "cortex-m4", "cortex-a72", "cortex-m85"};
    char buf[256];
    size_t k = tth_nearest_names("cortex-m5", cands, 6, 3, buf, sizeof buf);
    cr_assert_eq(k, 3);
    /* m55 at 1; then m4, m7 at 1 (substitution): alphabetical among equals */
    cr_assert_str_eq(buf, "'cortex-m4', 'cortex-m55', 'cortex-m7'");
}

Test(names, order_does_not_depend_on_candidate_order)
{
    const char *a[] = {"mattr", "mcpu", "march", "mabi"};
    const char *b[] = {"mabi", "march", "mcpu", "mattr"};
    char x[128], y[128];
    tth_nearest_names("marc", a, 4, 3, x, sizeof x);
    tth_nearest_names("marc", b, 4, 3, y, sizeof y);
    cr_assert_str_eq(x, y);
    cr_assert_str_eq(x, "'march', 'mabi'");
}

Test(names, threshold_is_a_third_of_the_word_at_least_two)
{
    const char *cands[] = {"llvm", "ethos-n", "cmsis-nn"};
    char buf[128];
    cr_assert_eq(tth_nearest_names("xyzzy", cands, 3, 3, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "");
    cr_assert_eq(tth_nearest_names("lv", cands, 3, 3, buf, sizeof buf), 1); /* distance 2 */
    cr_assert_str_eq(buf, "'llvm'");
    cr_assert_eq(tth_nearest_names("cmsisnn", cands, 3, 3, buf, sizeof buf), 1);
    cr_assert_str_eq(buf, "'cmsis-nn'");
}

Test(names, never_more_than_max_and_no_duplicates_or_self)
{
    const char *cands[] = {"ab", "ac", "ad", "ae", "af", "ab", "aa"};
    char buf[128];
    cr_assert_eq(tth_nearest_names("aa", cands, 7, 3, buf, sizeof buf), 3);
    cr_assert_str_eq(buf, "'ab', 'ac', 'ad'");
    cr_assert_eq(tth_nearest_names("aa", cands, 7, 10, buf, sizeof buf), 5);
    cr_assert_str_eq(buf, "'ab', 'ac', 'ad', 'ae', 'af'");
}

Test(names, small_buffer_keeps_whole_names)
{
    const char *cands[] = {"alpha1", "alpha2", "alpha3"};
    char buf[20];
    size_t k = tth_nearest_names("alpha", cands, 3, 3, buf, sizeof buf);
    cr_assert_eq(k, 2);
    cr_assert_str_eq(buf, "'alpha1', 'alpha2'");
}
