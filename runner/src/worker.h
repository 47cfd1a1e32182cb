/* `jobrunner worker`: runs jobs from queues through plugin handlers. */
#ifndef JR_WORKER_H
#define JR_WORKER_H

#include "config.h"
#include "plugin.h"

/* Run until SIGTERM/SIGINT, consuming cfg->worker_queues (or "default")
 * with the handlers in `reg` (the first signal lets running jobs finish
 * within worker.grace, a second stops at once). Returns the process exit
 * status: 0 after a stop by signal, 1 (with a message logged) when it could
 * not start or ran out of memory (anywhere: the loop, the lease keeper
 * thread, the hand-back at a stop; unfinished jobs stay pending). */
int jr_worker_run(const jr_config_t *cfg, const jr_registry_t *reg);

#endif
