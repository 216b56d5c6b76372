/* redis_server.h: a private redis-server for tests of the remote cache (docs/cache.md), on a
 * unix socket in a temporary directory, killed with the test process whatever happens. */
#ifndef TTH_TEST_REDIS_SERVER_H
#define TTH_TEST_REDIS_SERVER_H

#include <sys/types.h>

typedef struct redis {
    char dir[128];
    char sock[192];
    char url[256];   /* the address for tthd: unix://SOCK?PARAMS */
    pid_t pid;
} redis;

/* A redis-server in a new temporary directory; params go after '?' in url (e.g. "retry=1"). */
void redis_start(redis *r, const char *params);
/* Start it again on the same socket (after redis_kill with SIGKILL). */
void redis_launch(redis *r);
/* Send sig; SIGKILL and SIGTERM also wait for it and remove its socket. */
void redis_kill(redis *r, int sig);
/* Kill it and remove its directory. */
void redis_stop(redis *r);

#endif
