/* daemon_fixture.h: what the tests that start a real tthd share across folders (tests/e2e,
 * tests/client): files of the build tree and the test plugins put where a daemon loads them. */
#ifndef TTH_TEST_DAEMON_FIXTURE_H
#define TTH_TEST_DAEMON_FIXTURE_H

#include <stddef.h>

/* $TTH_BUILD_ROOT/rel into buf (asserts the variable is set: run through meson test). */
const char *test_build_path(const char *rel, char *buf, size_t len);
/* $TTH_SOURCE_ROOT/rel into buf (likewise). */
const char *test_source_path(const char *rel, char *buf, size_t len);
/* Copy the test plugin tests/fixtures/NAME.so of the build tree into dir as `as` (NULL: NAME.so),
 * written aside and renamed into place, so a daemon watching dir never loads half a file. */
void test_put_plugin(const char *dir, const char *name, const char *as);

#endif
