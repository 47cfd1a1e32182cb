/* `jobrunner dev`: the demo. Starts a private redis-server when no Redis is
 * configured, a scheduler and two workers (this program, re-executed), and
 * plays the shop scenario: orders are placed, each with an order_autoclose
 * job due a few seconds later; some are paid in between; the unpaid ones get
 * closed. */
#ifndef JR_DEV_H
#define JR_DEV_H

#include "config.h"

/* `self` is the path of this program; `plugins` the plugin directory;
 * `orders` how many orders to place; `config_path` (or NULL) the file the
 * scheduler and workers get with -c. Returns the exit status: 0 when every
 * order ended paid or closed, else 1. */
int jr_dev_run(const jr_config_t *cfg, const char *self, const char *plugins, int orders,
               const char *config_path);

#endif
