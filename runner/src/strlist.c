/* jr_strlist_t (declared in config.h): a growable list of owned strings.
 * Its own file so that the client library (libjobrunner.so), which uses it
 * through the Redis layer, does not pull in the config loader and libyaml. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "jr.h"

/* The capacity grows by doubling: n items occupy a power-of-two capacity
 * >= n, so appending n items costs O(n). */
int jr_strlist_push(jr_strlist_t *l, const char *s) {
    char *copy = strdup(s);
    char **v = NULL;
    if (copy) {
        size_t cap = l->n ? 2 * l->n : 1;
        if (!(l->n & (l->n - 1)) && cap <= SIZE_MAX / sizeof *v) v = realloc(l->v, cap * sizeof *v);
        else if (l->n & (l->n - 1)) v = l->v; /* not a power of two: there is room */
    }
    if (!v) {
        free(copy);
        return JR_ENOMEM;
    }
    l->v = v;
    l->v[l->n++] = copy;
    return 0;
}

void jr_strlist_free(jr_strlist_t *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}
