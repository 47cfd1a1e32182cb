/* `jobrunner scheduler`: promotes due jobs into their queue's stream. */
#ifndef JR_SCHEDULER_H
#define JR_SCHEDULER_H

#include "config.h"

/* Run until SIGTERM/SIGINT. Serves cfg->scheduler_queues, or every
 * registered queue (following new registrations) when that list is empty.
 * Returns the process exit status. */
int jr_scheduler_run(const jr_config_t *cfg);

#endif
