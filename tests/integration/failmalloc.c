/* LD_PRELOAD shim for tests: malloc(JRT_FAIL_MALLOC_SIZE) fails (ENOMEM) on
 * its JRT_FAIL_MALLOC_NTH call (default 1), and realloc(p,
 * JRT_FAIL_REALLOC_SIZE) on its JRT_FAIL_REALLOC_NTH call (default 1), p
 * then left as it was; every other allocation goes to glibc. getenv and
 * atol do not allocate, so reading them here is safe. */

#include <errno.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_realloc(void *p, size_t n);

typedef struct rule {
    const char *size_var, *nth_var;
    long size, nth, seen; /* size -2: not read yet, -1: none */
} rule_t;

static rule_t on_malloc = {"JRT_FAIL_MALLOC_SIZE", "JRT_FAIL_MALLOC_NTH", -2, 0, 0};
static rule_t on_realloc = {"JRT_FAIL_REALLOC_SIZE", "JRT_FAIL_REALLOC_NTH", -2, 0, 0};

/* 1 if this allocation of n bytes is the one to fail. */
static int fails(rule_t *r, size_t n) {
    if (r->size == -2) {
        const char *s = getenv(r->size_var), *k = getenv(r->nth_var);
        r->nth = k ? atol(k) : 1;
        r->size = s ? atol(s) : -1;
    }
    return (long)n == r->size && __atomic_add_fetch(&r->seen, 1, __ATOMIC_SEQ_CST) == r->nth;
}

__attribute__((visibility("default"))) void *malloc(size_t n) {
    if (fails(&on_malloc, n)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_malloc(n);
}

__attribute__((visibility("default"))) void *realloc(void *p, size_t n) {
    if (fails(&on_realloc, n)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_realloc(p, n);
}
