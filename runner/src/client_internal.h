/* What the jobrunner program uses of the client library beyond the public
 * <jobrunner/client.h>: a client around a connection it made itself (with
 * its redis.wait retries and library check), so the CLI's enqueue, cancel,
 * job show, stats, pause and resume run the library's code. Not exported
 * from libjobrunner.so. */
#ifndef JR_CLIENT_INTERNAL_H
#define JR_CLIENT_INTERNAL_H

#include <jobrunner/client.h>

#include "redis.h"
#include "redis_produce.h"

/* A client using r (connected, library loaded). It does not reconnect: after
 * a connection error its calls fail with JR_CLIENT_ECONNECT. Frees r in
 * jr_client_free. NULL when out of memory (r is then still the caller's). */
jr_client_t *jr_client_adopt(jr_redis_t *r);

/* The connection of c (NULL after a connection error), for what the
 * client API does not cover (the CLI's list of registered queues). */
jr_redis_t *jr_client_redis(jr_client_t *c);

/* Free c but hand its connection back (NULL if it was dropped). */
jr_redis_t *jr_client_release(jr_client_t *c);

/* jr_client_pause (on = 1) or jr_client_resume, also telling how many
 * workers were woken: *woken = that count, or -1 when waking failed, with
 * the reason in jr_client_errstr(c) although the call returned 0. */
int jr_client_set_paused(jr_client_t *c, const char *queue, int on, int *changed, int *woken);

#endif
