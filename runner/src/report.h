/* Report once: a problem with one Redis key (garbage written by hand, a key
 * of another type) is logged when it is first seen and again only when its
 * message changes, and its end is logged once when it clears. So a bad key
 * met on every turn of a loop costs one line, not one per turn.
 * Not thread-safe (each process keeps one table, used by its loop). */
#ifndef JR_REPORT_H
#define JR_REPORT_H

#include "log.h"

/* Log `what` with <field>=<name> (e.g. "key", "jr:{q}:stats"; "schedule",
 * "nightly") and error=<msg> at level, unless the same problem (`what`) of
 * the same field and name was last reported with the same msg (say which
 * Redis key is wrong in msg or name). Returns 1 if it logged. Out of
 * memory: logs every time (never silent). */
int jr_report_once(jr_log_level_t level, const char *what, const char *field, const char *name, const char *msg);
/* It is fine again: if problem `reported` (the `what` given to
 * jr_report_once) was reported for <field>=<name>, log `what` with it once
 * (at INFO) and forget it. */
void jr_report_clear(const char *reported, const char *what, const char *field, const char *name);

#endif
