/* The values of tthd's options (daemon/server/options.c): sizes, seconds, and the remote cache's
 * address in every form docs/cache.md lists. Mistakes are covered through tthd itself in
 * tests/e2e/test_remote_cache.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "tthd.h"

static tthd_remote_config parsed(const char *url)
{
    tthd_remote_config c;
    char msg[512] = "";
    cr_assert_eq(tthd_remote_parse(url, &c, msg, sizeof msg), 0, "'%s' refused: %s", url, msg);
    return c;
}

Test(options, sizes_and_seconds)
{
    uint64_t u;
    double d;
    cr_assert_eq(tthd_parse_size("64K", &u), 0);
    cr_assert_eq(u, 65536);
    cr_assert_eq(tthd_parse_size("3G", &u), 0);
    cr_assert_eq(u, 3ull << 30);
    cr_assert_neq(tthd_parse_size("-1", &u), 0);
    cr_assert_neq(tthd_parse_size("12Q", &u), 0);
    cr_assert_neq(tthd_parse_size("99999999999999999999G", &u), 0);
    cr_assert_eq(tthd_parse_seconds("0.25", &d), 0);
    cr_assert_float_eq(d, 0.25, 1e-12);
    cr_assert_neq(tthd_parse_seconds("nan", &d), 0);
    cr_assert_neq(tthd_parse_seconds("-3", &d), 0);
}

Test(options, tcp_addresses)
{
    tthd_remote_config c = parsed("redis://cache.internal");
    cr_assert_str_eq(c.host, "cache.internal");
    cr_assert_eq(c.port, 6379);
    cr_assert_eq(c.db, 0);
    cr_assert_null(c.unix_path);
    cr_assert_null(c.password);
    cr_assert_eq(c.ttl, 7 * 86400);
    cr_assert_eq(c.max_bytes, 256u << 20);
    cr_assert_str_eq(c.shown, "redis://cache.internal:6379/0");
    tthd_remote_config_free(&c);

    c = parsed("redis://ci:p%40ss%3Aw@10.0.0.5:6380/3?ttl=60&max_bytes=8M&timeout=0.5&retry=5");
    cr_assert_str_eq(c.host, "10.0.0.5");
    cr_assert_eq(c.port, 6380);
    cr_assert_eq(c.db, 3);
    cr_assert_str_eq(c.user, "ci");
    cr_assert_str_eq(c.password, "p@ss:w");
    cr_assert_eq(c.ttl, 60);
    cr_assert_eq(c.max_bytes, 8u << 20);
    cr_assert_float_eq(c.timeout, 0.5, 1e-12);
    cr_assert_float_eq(c.retry, 5, 1e-12);
    cr_assert_null(strstr(c.shown, "p@ss"), "the password is never shown: %s", c.shown);
    cr_assert_str_eq(c.shown, "redis://ci:***@10.0.0.5:6380/3");
    tthd_remote_config_free(&c);

    c = parsed("redis://:secret@[::1]:7000");
    cr_assert_str_eq(c.host, "::1");
    cr_assert_eq(c.port, 7000);
    cr_assert_null(c.user);
    cr_assert_str_eq(c.password, "secret");
    cr_assert_str_eq(c.shown, "redis://:***@[::1]:7000/0");
    tthd_remote_config_free(&c);
}

Test(options, unix_addresses)
{
    tthd_remote_config c = parsed("unix:///run/redis/redis-server.sock?db=2&password=x%26y");
    cr_assert_str_eq(c.unix_path, "/run/redis/redis-server.sock");
    cr_assert_null(c.host);
    cr_assert_eq(c.db, 2);
    cr_assert_str_eq(c.password, "x&y");
    cr_assert_str_eq(c.shown, "unix:///run/redis/redis-server.sock?db=2");
    tthd_remote_config_free(&c);

    c = parsed("/tmp/r.sock");
    cr_assert_str_eq(c.unix_path, "/tmp/r.sock");
    tthd_remote_config_free(&c);
}

Test(options, mistakes_name_the_part)
{
    static const struct {
        const char *url, *says;
    } bad[] = {
        {"redis://h?tll=5", "did you mean 'ttl'"},
        {"redis://h?ttl=0", "ttl '0'"},
        {"redis://h:0", "port '0'"},
        {"redis://h:12ab", "port '12ab'"},
        {"redis://[::1", "IPv6"},
        {"redis://", "no host name"},
        {"redis://h/2x", "database '2x'"},
        {"unix://", "absolute path"},
        {"redis://h?retry", "has no value"},
        {"redis://a:%4@h", "escaped"},
        {"memcached://h", "not a Redis address"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tthd_remote_config c;
        char msg[512] = "";
        cr_assert_neq(tthd_remote_parse(bad[i].url, &c, msg, sizeof msg), 0, "'%s' accepted", bad[i].url);
        cr_assert(strstr(msg, bad[i].says), "'%s': message '%s' does not say '%s'", bad[i].url, msg, bad[i].says);
        cr_assert_null(c.shown);
    }
}
