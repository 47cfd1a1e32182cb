/* Common definitions for the jobrunner program and library (internal). */
#ifndef JR_H
#define JR_H

#include <stddef.h>
#include <stdint.h>

/* Error codes: every int function returns 0 or one of these (negative). */
#define JR_ERRNO_MAP(X)                                 \
    X(NOMEM, "out of memory")                           \
    X(INVAL, "invalid value")                           \
    X(IO, "input/output error")                         \
    X(REDIS, "Redis error")                             \
    X(PROTO, "unexpected reply from Redis")             \
    X(PLUGIN, "plugin refused")                         \
    X(TIMEOUT, "timed out")                             \
    X(INTR, "interrupted")                              \
    X(REPLICAS, "not confirmed by enough replicas")

enum {
    JR_EOK = 0,
#define JR__ERR_ENUM(name, msg) JR__E_##name,
    JR_ERRNO_MAP(JR__ERR_ENUM)
#undef JR__ERR_ENUM
};
#define JR__ERR_DEF(name, msg) JR_E##name = -JR__E_##name,
enum { JR_ERRNO_MAP(JR__ERR_DEF) };
#undef JR__ERR_DEF

/* Human-readable text for a JR_E* code. Never NULL. */
const char *jr_strerror(int err);

/* Size of the error-message buffers callers pass to functions that can fail
 * for reasons worth telling the user (file, line, key, ...). */
#define JR_ERRLEN 512

/* JOBRUNNER_PLUGIN_<PLUGIN>_<KEY>: a plugin setting (api->setting), read
 * when the plugin asks; it overrides plugin_settings.<plugin>.<key>. */
#define JR_PLUGIN_ENV_PREFIX "JOBRUNNER_PLUGIN_"

#define JR_DEFAULT_QUEUE "default"
#define JR_DEFAULT_REDIS_URL "redis://127.0.0.1:6379"
/* Where `cmake --install` puts plugins; a worker with no plugin configured
 * loads every plugin found there. Set by the build. */
#ifndef JR_JOBS_DIR
#define JR_JOBS_DIR "/usr/local/lib/jobrunner/jobs"
#endif

#endif
