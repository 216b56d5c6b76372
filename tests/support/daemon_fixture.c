/* daemon_fixture.c: see daemon_fixture.h. */
#include "daemon_fixture.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* getenv(var)/rel into buf */
static const char *root_path(const char *var, const char *rel, char *buf, size_t len)
{
    const char *root = getenv(var);
    cr_assert_not_null(root, "%s is not set (run through meson test)", var);
    snprintf(buf, len, "%s/%s", root, rel);
    return buf;
}

const char *test_build_path(const char *rel, char *buf, size_t len)
{
    return root_path("TTH_BUILD_ROOT", rel, buf, len);
}

const char *test_source_path(const char *rel, char *buf, size_t len)
{
    return root_path("TTH_SOURCE_ROOT", rel, buf, len);
}

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    cr_assert(in >= 0, "cannot open %s: %s", from, strerror(errno));
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    cr_assert(out >= 0, "cannot create %s: %s", to, strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        cr_assert_eq(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
    chmod(to, 0755);
}

void test_put_plugin(const char *dir, const char *name, const char *as)
{
    char rel[256], from[1024], to[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/%s.so", name);
    test_build_path(rel, from, sizeof from);
    snprintf(to, sizeof to, "%s/%s%s", dir, as ? as : name, as ? "" : ".so");
    /* the plugins path skips names that start with a dot */
    char part[1100];
    snprintf(part, sizeof part, "%s/.%s%s.part", dir, as ? as : name, as ? "" : ".so");
    copy_file(from, part);
    cr_assert_eq(rename(part, to), 0, "cannot rename %s to %s", part, to);
}
