/* redis_server.c: see redis_server.h. */
#include "redis_server.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

void redis_launch(redis *r)
{
    fflush(NULL);
    r->pid = fork();
    cr_assert(r->pid >= 0);
    if (r->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, passed or failed */
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        char log[256];
        snprintf(log, sizeof log, "%s/redis.log", r->dir);
        execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", r->sock, "--unixsocketperm", "700",
               "--save", "", "--appendonly", "no", "--dir", r->dir, "--logfile", log, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        redisContext *c = redisConnectUnix(r->sock);
        int ok = c && !c->err;
        redisFree(c);
        if (ok)
            return;
        int status;
        if (waitpid(r->pid, &status, WNOHANG) == r->pid)
            cr_assert_fail("redis-server did not start (status %d; installed by scripts/setup?)", status);
        usleep(25000);
    }
    cr_assert_fail("redis-server did not listen on %s", r->sock);
}

/* A redis-server in a new temporary directory; the daemons' address has a short retry time. */
void redis_start(redis *r, const char *params)
{
    /* mkdtemp(3) replaces the six X of this template with a unique name */
    snprintf(r->dir, sizeof r->dir, "%s", "/tmp/tth-redis-XXXXXX");
    cr_assert_not_null(mkdtemp(r->dir));
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    snprintf(r->url, sizeof r->url, "unix://%s?%s", r->sock, params);
    redis_launch(r);
}

void redis_kill(redis *r, int sig)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, sig);
    if (sig == SIGKILL || sig == SIGTERM) {
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
        unlink(r->sock);
    }
}

void redis_stop(redis *r)
{
    redis_kill(r, SIGKILL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
    cr_assert_eq(system(cmd), 0);
}

