/* LD_PRELOAD shim for tests: malloc(JRT_FAIL_MALLOC_SIZE) fails (ENOMEM) on
 * its JRT_FAIL_MALLOC_NTH call (default 1); every other allocation goes to
 * glibc. getenv and atol do not allocate, so reading them here is safe. */

#include <errno.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t n);

static long want_size = -2, want_nth, seen;

__attribute__((visibility("default"))) void *malloc(size_t n) {
    if (want_size == -2) {
        const char *s = getenv("JRT_FAIL_MALLOC_SIZE"), *k = getenv("JRT_FAIL_MALLOC_NTH");
        want_nth = k ? atol(k) : 1;
        want_size = s ? atol(s) : -1;
    }
    if ((long)n == want_size && __atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST) == want_nth) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_malloc(n);
}
