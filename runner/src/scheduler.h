/* `jobrunner scheduler`: promotes due jobs into their queue's stream. */
#ifndef JR_SCHEDULER_H
#define JR_SCHEDULER_H

#include "config.h"

/* Run until SIGTERM/SIGINT. Serves cfg->scheduler_queues, or every
 * registered queue (following new registrations) when that list is empty;
 * while Redis is unreachable it keeps retrying. Returns the process exit
 * status: 0 after a stop signal, 1 when it cannot start (out of memory,
 * metrics.listen cannot be served). */
int jr_scheduler_run(const jr_config_t *cfg);

#endif
