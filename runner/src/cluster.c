/* Redis Cluster: the facade behind a redis-cluster:// connection. See
 * cluster.h and docs/operations.md, "Redis Cluster".
 *
 * What the caller appends is kept as a FIFO of logical commands, each the
 * formatted bytes of one command, routed when flushed to the node of its
 * keys' slot (a command of no key: see route()). A logical command goes
 * out as one or more parts: one for most; one per node for a stream read
 * whose streams live on several nodes (its reply is one merged reply),
 * and for WAIT (one per node written to). Each node numbers what it was
 * sent (seq); the replies come back in the caller's order, read from each
 * reply's node, a reply read ahead of its turn held by its node. The
 * formatted bytes are kept until the reply is read, so that a MOVED, ASK
 * or TRYAGAIN (Redis ran nothing) is resent transparently. A node that
 * cannot be reached fails only what went to it (node_down). */
#include "cluster.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "contract.h"
#include "jr.h"
#include "partition.h" /* jr_crc16 */
#include "log.h"

/* The reply of a command for a node that is down (see node_down). */
#define NODE_DOWN_PREFIX "CLUSTERDOWN node "
#define NODE_DOWN_SEP " unreachable: "

int jr_redis_node_down(const char *err) {
    const char *p = err ? strstr(err, NODE_DOWN_PREFIX) : NULL;
    return p && strstr(p, NODE_DOWN_SEP);
}

/* ---- slots (pure) --------------------------------------------------------- */

int jr_cluster_key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open) {
        const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
        if (close && close > open + 1) return jr_crc16(open + 1, (size_t)(close - open - 1)) & (JR_CLUSTER_SLOTS - 1);
    }
    return jr_crc16(key, len) & (JR_CLUSTER_SLOTS - 1);
}

/* ---- the nodes this process learnt (a dead seed does not stop a reconnect) */

static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static char **known;
static size_t nknown, known_cap;

static void known_add(const char *host, int port) {
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", host, port);
    pthread_mutex_lock(&known_lock);
    size_t i = 0;
    while (i < nknown && strcmp(known[i], addr)) i++;
    if (i == nknown) {
        if (nknown == known_cap) {
            size_t cap = known_cap ? known_cap * 2 : 16;
            char **v = realloc(known, cap * sizeof *v);
            if (v) known = v, known_cap = cap;
        }
        char *c = nknown < known_cap ? strdup(addr) : NULL;
        if (c) known[nknown++] = c; /* out of memory: only this node is not remembered */
    }
    pthread_mutex_unlock(&known_lock);
}

/* ---- the facade's state ---------------------------------------------------- */

typedef struct held {
    uint64_t seq;
    redisReply *rep;
} held_t;

/* A connection to a node: the first (0) takes every command; the others
 * only the further parts of a blocking stream read (one slot each: Redis
 * refuses a read of streams of several slots, even on one node). */
typedef struct conn {
    jr_redis_t *r;  /* NULL until needed */
    long long id;   /* its CLIENT ID */
    int have_id;
    uint64_t next_seq, read_seq; /* seq of the next command sent / reply read from the socket */
    held_t *held;   /* replies read ahead of their turn */
    size_t nheld, heldcap;
    int out;        /* appended, not flushed */
} conn_t;

typedef struct node {
    char host[256];
    int port;
    char addr[300]; /* "host:port", in messages */
    conn_t *c;      /* its connections (c[0] first) */
    size_t nc;
    jr_redis_t *side; /* for CLIENT UNBLOCK of a blocking read; opened on first need */
    int written;    /* a keyed command was sent on c[0] since its last WAIT */
    int64_t down_until; /* mono us: unreachable, not tried again before then (0: up) */
    char why[JR_ERRLEN]; /* why it is down, in its parts' error replies */
} node_t;

typedef struct part {
    int node, conn;      /* the node and which of its connections */
    uint64_t seq;
    int asking;          /* an ASKING went before it: its reply (asking_seq) is dropped */
    uint64_t asking_seq;
    char *buf;           /* its bytes: the command's own, or owned (own) for a split read */
    size_t len;
    int own;
    int extra;           /* the home node's wait of a blocking read: its reply is dropped */
    int done;
    redisReply *rep;     /* its reply once done (NULL: counts as nil) */
    int unblocked;       /* CLIENT UNBLOCK ended it */
    int64_t unblock_at;  /* the next CLIENT UNBLOCK try, mono us */
    int down;            /* done by node_down: rep is its CLUSTERDOWN ... unreachable error */
} part_t;

enum { K_PLAIN, K_READ, K_WAIT, K_MULTI };

typedef struct cmd {
    char *buf;
    size_t len;
    int kind, slot, block; /* slot -1: no key */
    int sent;
    part_t *parts;
    size_t nparts;
    int64_t retry_until;   /* TRYAGAIN, CLUSTERDOWN, LOADING: resent until then (0: not yet) */
    int redirects;         /* MOVED and ASK followed so far (at most REDIRECTS_MAX) */
    int ask_pause;         /* a part of a split read was asked elsewhere (ASK): pause before returning */
    char *refused;         /* never sent: its reply is this error (keys in several slots) */
    int end_early;         /* a blocking read to end now (reap_idle): every part unblocked */
} cmd_t;

struct jr_cluster {
    node_t *nodes;
    size_t nnodes, nodecap;
    int slot[JR_CLUSTER_SLOTS]; /* node index, -1 = not known */
    int home_slot;              /* the slot of JR_REGISTRY_KEY */
    cmd_t *q;                   /* the FIFO [qhead, qn) */
    size_t qhead, qn, qcap;
    int refresh_due;
    int64_t refresh_at;         /* mono us: not before then (a node down: the map is read again shortly) */
    int epfd;                   /* every node connection's socket, and timerfd: jr_redis_fd */
    int timerfd;                /* readable when a down node may be tried again (ends a blocking read) */
    /* what a node connect needs (copies; node_open) */
    jr_redis_opts_t o;
    char *user, *password, *pw_from, *url;
    char *ca_file, *ca_dir, *cert_file, *key_file, *server_name;
    int tls;
    struct pollfd *pfd;         /* wait_parts' poll set, one per part (pfdcap) */
    size_t pfdcap;
    const char **av;            /* the arguments of the command being routed */
    size_t *al, acap;
    unsigned rnd;
    int64_t open_deadline;      /* mono us: jrc_open's end (0 after it); node_open's connects stop there */
};

static char *dup_or_null(const char *s, int *bad) {
    if (!s) return NULL;
    char *c = strdup(s);
    if (!c) *bad = 1;
    return c;
}

/* Connect to host:port as every node of this cluster is (user, password,
 * TLS, the facade's timeouts and role). During jrc_open the connect (and
 * every command on r until the caller sets r->timeout_us back to the
 * facade's) waits only until open_deadline: the whole open takes at most
 * the connect timeout, however many nodes it tries. NULL with err set. */
static jr_redis_t *node_open(jr_redis_t *f, const char *host, int port, char *err, size_t errlen) {
    struct jr_cluster *cl = f->cl;
    int64_t left = cl->open_deadline ? cl->open_deadline - jr_mono_us() : f->timeout_us;
    if (left <= 0) {
        snprintf(err, errlen, "not tried: the connect timeout (%lld ms) passed", (long long)(f->timeout_us / 1000));
        return NULL;
    }
    jr_redis_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    memcpy(r->role, f->role, sizeof r->role);
    snprintf(r->primary, sizeof r->primary, "%s:%d", host, port); /* named in messages (r->master stays empty) */
    r->timeout_us = left < f->timeout_us ? left : f->timeout_us;
    r->wait_replicas = f->wait_replicas;
    r->wait_timeout_ms = f->wait_timeout_ms;
    jr_redis_url_t u = {.is_tls = cl->tls, .host = (char *)host, .port = port, .user = cl->user};
    char shown[900];
    snprintf(shown, sizeof shown, "%s (node %s:%d)", cl->url, host, port);
    if (jri_node_connect(r, &u, shown, &cl->o, cl->password, cl->pw_from, err, errlen)) {
        jr_redis_free(r);
        return NULL;
    }
    return r;
}

/* The index of the node host:port, added (not connected) if new; -1 when
 * out of memory. */
static int node_find(struct jr_cluster *cl, const char *host, int port) {
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i].port == port && !strcmp(cl->nodes[i].host, host)) return (int)i;
    if (cl->nnodes == cl->nodecap) {
        size_t cap = cl->nodecap ? cl->nodecap * 2 : 8;
        node_t *v = realloc(cl->nodes, cap * sizeof *v);
        if (!v) return -1;
        cl->nodes = v, cl->nodecap = cap;
    }
    node_t *n = &cl->nodes[cl->nnodes];
    memset(n, 0, sizeof *n);
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
    snprintf(n->addr, sizeof n->addr, "%s:%d", host, port);
    known_add(host, port);
    return (int)cl->nnodes++;
}

#define DOWN 2                 /* node_down's return: the node is unreachable, its parts are answered */
#define DOWN_RETRY_US 500000   /* a node down is tried again, and the map read again, after this */

/* Arm the facade's timer for us from now (0: disarm, and empty it). */
static void timer_set(struct jr_cluster *cl, int64_t us) {
    if (cl->timerfd < 0) return;
    struct itimerspec t = {.it_value = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000}};
    if (us > 0 && t.it_value.tv_sec == 0 && t.it_value.tv_nsec == 0) t.it_value.tv_nsec = 1;
    timerfd_settime(cl->timerfd, 0, &t, NULL);
}

/* Part p counts as answered: done, and when node_down answered it, once
 * its node may be tried again (a blocking read is not ended at once by a
 * part of a dead node: it would be sent again at once, and fail again). */
static int part_counts(const struct jr_cluster *cl, const part_t *p, int64_t now) {
    return p->done && (!p->down || now >= cl->nodes[p->node].down_until);
}

/* Node i is unreachable (why; NULL: it was found so already and is not
 * tried again yet). With why: its connections are closed (their replies
 * outstanding lost: Redis may or may not have run those commands, as with
 * any broken connection), it is not tried again for DOWN_RETRY_US, and the
 * slot map is read again then (a failover names another primary). Every
 * part in the FIFO for node i not done is done with the error reply
 * `CLUSTERDOWN node HOST:PORT unreachable: why`; the facade stays usable
 * for the other nodes. Returns DOWN, or JR_ENOMEM (f broken). */
static int node_down(jr_redis_t *f, int i, const char *why) {
    struct jr_cluster *cl = f->cl;
    node_t *n = &cl->nodes[i];
    int64_t now = jr_mono_us();
    if (why) {
        snprintf(n->why, sizeof n->why, "%s", why); /* before the connection holding the text is freed */
        for (size_t k = 0; k < n->nc; k++) {
            conn_t *c = &n->c[k];
            jr_redis_free(c->r); /* closed: out of the epoll set */
            for (size_t h = 0; h < c->nheld; h++) freeReplyObject(c->held[h].rep);
            c->r = NULL, c->nheld = 0, c->have_id = 0, c->out = 0, c->next_seq = c->read_seq = 0;
        }
        jr_redis_free(n->side);
        n->side = NULL;
        n->written = 0;
        n->down_until = now + DOWN_RETRY_US;
        cl->refresh_due = 1, cl->refresh_at = n->down_until;
    }
    char text[JR_ERRLEN + 350];
    snprintf(text, sizeof text, NODE_DOWN_PREFIX "%s" NODE_DOWN_SEP "%s", n->addr, n->why);
    int blocked = 0;
    for (size_t q = cl->qhead; q < cl->qn; q++) {
        cmd_t *c = &cl->q[q];
        for (size_t k = 0; k < c->nparts; k++) {
            part_t *p = &c->parts[k];
            if (p->done || p->node != i) continue;
            redisReply *e = calloc(1, sizeof *e);
            char *str = strdup(text);
            if (!e || !str) {
                free(e), free(str);
                return jri_fail(f, JR_ENOMEM, "out of memory");
            }
            e->type = REDIS_REPLY_ERROR, e->str = str, e->len = strlen(str);
            p->rep = e, p->done = 1, p->down = 1, p->asking = 0;
            blocked |= c->block && c->nparts > 1;
        }
    }
    if (blocked) timer_set(cl, n->down_until > now ? n->down_until - now : 0); /* wakes the read then */
    return DOWN;
}

/* Connection k of node i, made if there is none yet (its socket added to
 * the facade's epoll set, its CLIENT ID read). 0; DOWN when node i is
 * unreachable (node_down: not tried again before its down_until); or an
 * error (f broken). */
static int conn_use(jr_redis_t *f, int i, int k) {
    node_t *n = &f->cl->nodes[i];
    if ((size_t)k >= n->nc) {
        conn_t *v = realloc(n->c, (size_t)(k + 1) * sizeof *v);
        if (!v) return jri_fail(f, JR_ENOMEM, "out of memory");
        memset(v + n->nc, 0, ((size_t)k + 1 - n->nc) * sizeof *v);
        n->c = v, n->nc = (size_t)k + 1;
    }
    conn_t *c = &n->c[k];
    if (c->r) return jr_redis_ok(c->r) ? 0 : node_down(f, i, jr_redis_errstr(c->r));
    if (n->down_until > jr_mono_us()) return node_down(f, i, NULL);
    char err[JR_ERRLEN];
    if (!(c->r = node_open(f, n->host, n->port, err, sizeof err))) return node_down(f, i, err);
    c->next_seq = c->read_seq = 0;
    redisReply *rep;
    int rc = jri_exec(c->r, &rep, "CLIENT", "ID", NULL);
    c->r->timeout_us = f->timeout_us;
    if (rc == 0) {
        c->have_id = rep->type == REDIS_REPLY_INTEGER;
        c->id = rep->integer;
        freeReplyObject(rep);
    } else if (rc != JR_EREDIS) {
        return node_down(f, i, jr_redis_errstr(c->r));
    }
    n->down_until = 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (f->cl->epfd >= 0) epoll_ctl(f->cl->epfd, EPOLL_CTL_ADD, jr_redis_fd(c->r), &ev);
    return 0;
}
static int node_use(jr_redis_t *f, int i) { return conn_use(f, i, 0); }

/* Read CLUSTER SLOTS over r (asked at `host`, named for a node of no
 * host) into the slot map, adding the nodes it names. 0, or -1 with why. */
static int read_slots(struct jr_cluster *cl, jr_redis_t *r, const char *host, char *why, size_t len) {
    redisReply *rep;
    int rc = jri_exec(r, &rep, "CLUSTER", "SLOTS", NULL);
    if (rc) {
        snprintf(why, len, "CLUSTER SLOTS: %s", jr_redis_errstr(r));
        return -1;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements == 0) {
        snprintf(why, len, "CLUSTER SLOTS: no slot is served (is the cluster made?)");
        freeReplyObject(rep);
        return -1;
    }
    for (int s = 0; s < JR_CLUSTER_SLOTS; s++) cl->slot[s] = -1;
    for (size_t i = 0; i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER)
            continue;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        int primary = -1;
        for (size_t k = 2; k < e->elements; k++) {
            redisReply *a = e->element[k];
            if (a->type != REDIS_REPLY_ARRAY || a->elements < 2 || a->element[1]->type != REDIS_REPLY_INTEGER) continue;
            const char *h = a->element[0]->type == REDIS_REPLY_STRING && a->element[0]->len && strcmp(a->element[0]->str, "?")
                                ? a->element[0]->str
                                : host;
            if (k == 2) primary = node_find(cl, h, (int)a->element[1]->integer);
            else known_add(h, (int)a->element[1]->integer); /* a replica: asked if the seeds are gone */
        }
        if (primary < 0) {
            freeReplyObject(rep);
            snprintf(why, len, "out of memory");
            return -1;
        }
        for (long long s = lo < 0 ? 0 : lo; s <= hi && s < JR_CLUSTER_SLOTS; s++) cl->slot[s] = primary;
    }
    freeReplyObject(rep);
    return 0;
}

/* CLUSTER SLOTS again, over a node connection with no reply outstanding
 * (called only when the FIFO holds nothing sent). A failure leaves the map
 * as it was: MOVED keeps correcting it. */
static void refresh(jr_redis_t *f) {
    struct jr_cluster *cl = f->cl;
    cl->refresh_due = 0;
    for (size_t i = 0; i < cl->nnodes; i++) {
        node_t *n = &cl->nodes[i];
        conn_t *c = n->nc ? &n->c[0] : NULL;
        if (!c || !c->r || !jr_redis_ok(c->r) || c->read_seq != c->next_seq || c->nheld) continue;
        int saved[JR_CLUSTER_SLOTS];
        memcpy(saved, cl->slot, sizeof saved);
        char why[JR_ERRLEN];
        jr_redis_t *r = c->r; /* read_slots may move cl->nodes (a new node) */
        char host[256];
        snprintf(host, sizeof host, "%s", n->host);
        if (read_slots(cl, r, host, why, sizeof why) == 0) return;
        memcpy(cl->slot, saved, sizeof saved);
        if (!jr_redis_ok(r)) return; /* the next command on it fails, and the caller reconnects */
    }
}

int jrc_open(jr_redis_t *r, const jr_redis_url_t *u, const char *url, const jr_redis_opts_t *o,
             const char *password, const char *pw_from, char *err, size_t errlen) {
    struct jr_cluster *cl = calloc(1, sizeof *cl);
    if (!cl) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->cl = cl;
    cl->epfd = epoll_create1(EPOLL_CLOEXEC);
    cl->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    struct epoll_event tev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    int bad = cl->epfd < 0 || cl->timerfd < 0 || epoll_ctl(cl->epfd, EPOLL_CTL_ADD, cl->timerfd, &tev);
    cl->o = *o;
    cl->user = dup_or_null(u->user, &bad), cl->password = dup_or_null(password, &bad);
    cl->pw_from = dup_or_null(pw_from, &bad), cl->url = dup_or_null(url, &bad);
    cl->o.tls.ca_file = cl->ca_file = dup_or_null(o->tls.ca_file, &bad);
    cl->o.tls.ca_dir = cl->ca_dir = dup_or_null(o->tls.ca_dir, &bad);
    cl->o.tls.cert_file = cl->cert_file = dup_or_null(o->tls.cert_file, &bad);
    cl->o.tls.key_file = cl->key_file = dup_or_null(o->tls.key_file, &bad);
    cl->o.tls.server_name = cl->server_name = dup_or_null(o->tls.server_name, &bad);
    cl->o.url = NULL, cl->o.role = NULL, cl->o.password = NULL, cl->o.password_file = NULL;
    cl->o.sentinel_password = NULL;
    cl->tls = u->is_tls;
    cl->rnd = (unsigned)getpid() ^ (unsigned)jr_mono_us();
    cl->home_slot = jr_cluster_key_slot(JR_REGISTRY_KEY, strlen(JR_REGISTRY_KEY));
    if (bad) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* The seeds, then the nodes learnt earlier in this process. */
    size_t ntry = u->nseeds;
    pthread_mutex_lock(&known_lock);
    size_t nk = nknown;
    char **tries = calloc(u->nseeds + nk, sizeof *tries);
    for (size_t i = 0; tries && i < nk; i++) tries[u->nseeds + i] = strdup(known[i]);
    pthread_mutex_unlock(&known_lock);
    if (!tries) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ntry += nk;
    cl->open_deadline = jr_mono_us() + r->timeout_us;
    size_t used = (size_t)snprintf(err, errlen, "cannot reach Redis Cluster %s:", url);
    int found = 0;
    for (size_t t = 0; t < ntry && !found; t++) {
        char host[256], why[JR_ERRLEN];
        int port;
        if (t < u->nseeds) {
            snprintf(host, sizeof host, "%s", u->seeds[t].host);
            port = u->seeds[t].port;
        } else {
            const char *a = tries[t], *c = a ? strrchr(a, ':') : NULL;
            if (!c) continue;
            int dup = 0;
            snprintf(host, sizeof host, "%.*s", (int)(c - a), a);
            port = atoi(c + 1);
            for (size_t s = 0; s < u->nseeds; s++) dup |= u->seeds[s].port == port && !strcmp(u->seeds[s].host, host);
            if (dup) continue;
        }
        jr_redis_t *n = node_open(r, host, port, why, sizeof why);
        if (n && read_slots(cl, n, host, why, sizeof why) == 0) {
            found = 1;
            jr_redis_free(n); /* its node (if it is a primary) is connected again when needed */
            break;
        }
        jr_redis_free(n);
        if (used < errlen) used += (size_t)snprintf(err + used, errlen - used, " %s:%d: %s;", host, port, why);
    }
    for (size_t i = 0; i < ntry; i++) free(tries[i]);
    free(tries);
    if (!found) return -1;
    /* The home node now: a password, TLS or ACL problem shows at connect. */
    int home = cl->slot[cl->home_slot];
    if (home < 0) {
        snprintf(err, errlen, "Redis Cluster %s: no node serves slot %d (of %s)", url, cl->home_slot, JR_REGISTRY_KEY);
        return -1;
    }
    int rc = node_use(r, home);
    cl->open_deadline = 0;
    if (rc == DOWN) {
        snprintf(err, errlen, "%s", cl->nodes[home].why);
        return -1;
    }
    if (rc) {
        snprintf(err, errlen, "%s", r->err);
        return -1;
    }
    return 0;
}

static void cmd_free(cmd_t *c) {
    for (size_t i = 0; i < c->nparts; i++) {
        if (c->parts[i].own) free(c->parts[i].buf);
        if (c->parts[i].rep) freeReplyObject(c->parts[i].rep);
    }
    free(c->parts);
    free(c->buf);
    free(c->refused);
    memset(c, 0, sizeof *c);
}

void jrc_free(struct jr_cluster *cl) {
    if (!cl) return;
    for (size_t i = cl->qhead; i < cl->qn; i++) cmd_free(&cl->q[i]);
    free(cl->q);
    for (size_t i = 0; i < cl->nnodes; i++) {
        node_t *n = &cl->nodes[i];
        for (size_t k = 0; k < n->nc; k++) {
            jr_redis_free(n->c[k].r);
            for (size_t h = 0; h < n->c[k].nheld; h++) freeReplyObject(n->c[k].held[h].rep);
            free(n->c[k].held);
        }
        free(n->c);
        jr_redis_free(n->side);
    }
    free(cl->nodes);
    if (cl->epfd >= 0) close(cl->epfd);
    if (cl->timerfd >= 0) close(cl->timerfd);
    if (cl->password) explicit_bzero(cl->password, strlen(cl->password));
    free(cl->user), free(cl->password), free(cl->pw_from), free(cl->url);
    free(cl->ca_file), free(cl->ca_dir), free(cl->cert_file), free(cl->key_file), free(cl->server_name);
    free(cl->av), free(cl->al), free(cl->pfd);
    free(cl);
}

/* ---- appending: split the formatted bytes into commands, classify ---------- */

/* The arguments of the RESP command at buf (len bytes) into cl->av/al;
 * *used its length. -1 if it is not one whole command. */
static int resp_parse(struct jr_cluster *cl, const char *buf, size_t len, size_t *used, size_t *argc) {
    const char *p = buf, *end = buf + len;
    if (p >= end || *p != '*') return -1;
    char *e;
    long n = strtol(p + 1, &e, 10);
    if (n < 1 || e + 2 > end || e[0] != '\r') return -1;
    p = e + 2;
    if ((size_t)n > cl->acap) {
        const char **av = realloc(cl->av, (size_t)n * sizeof *av);
        if (!av) return -1;
        cl->av = av;
        size_t *al = realloc(cl->al, (size_t)n * sizeof *al);
        if (!al) return -1;
        cl->al = al, cl->acap = (size_t)n;
    }
    for (long i = 0; i < n; i++) {
        if (p >= end || *p != '$') return -1;
        long l = strtol(p + 1, &e, 10);
        if (l < 0 || e + 2 > end) return -1;
        p = e + 2;
        if ((size_t)(end - p) < (size_t)l + 2) return -1;
        cl->av[i] = p, cl->al[i] = (size_t)l;
        p += l + 2;
    }
    *used = (size_t)(p - buf);
    *argc = (size_t)n;
    return 0;
}

static int arg_is(const struct jr_cluster *cl, size_t i, const char *word) {
    return cl->al[i] == strlen(word) && !strncasecmp(cl->av[i], word, cl->al[i]);
}

/* The index of STREAMS in the arguments of an XREAD/XREADGROUP, 0 if none. */
static size_t streams_at(const struct jr_cluster *cl, size_t argc) {
    for (size_t i = 1; i < argc; i++)
        if (arg_is(cl, i, "STREAMS")) return i;
    return 0;
}

/* Classify the command in cl->av: its kind, the slot of its keys (-1 for
 * none) and whether it blocks. Keys in several slots (other than a stream
 * read's): c->refused is the error its reply will be (it is never sent),
 * so that the caller's pipeline stays in step and the connection usable;
 * 0, or JR_ENOMEM. */
static int classify(jr_redis_t *f, size_t argc, cmd_t *c) {
    struct jr_cluster *cl = f->cl;
    size_t k0 = 0, nk = 0;
    c->kind = K_PLAIN, c->slot = -1;
    if (arg_is(cl, 0, "FCALL") || arg_is(cl, 0, "FCALL_RO") || arg_is(cl, 0, "EVAL") || arg_is(cl, 0, "EVALSHA")) {
        long n = argc > 2 ? strtol(cl->av[2], NULL, 10) : 0;
        k0 = 3, nk = n > 0 && (size_t)n <= argc - 3 ? (size_t)n : 0;
    } else if (arg_is(cl, 0, "XREAD") || arg_is(cl, 0, "XREADGROUP")) {
        size_t s = streams_at(cl, argc);
        c->kind = K_READ;
        for (size_t i = 1; i < s; i++) c->block |= arg_is(cl, i, "BLOCK");
        k0 = s + 1, nk = s ? (argc - s - 1) / 2 : 0;
        if (nk) c->slot = jr_cluster_key_slot(cl->av[k0], cl->al[k0]);
        return 0; /* its streams may be on several nodes: split when routed */
    } else if (arg_is(cl, 0, "WAIT")) {
        c->kind = K_WAIT;
        return 0;
    } else if (arg_is(cl, 0, "MULTI")) {
        c->kind = K_MULTI;
        return 0;
    } else if (arg_is(cl, 0, "XINFO") || arg_is(cl, 0, "XGROUP") || arg_is(cl, 0, "OBJECT") ||
               arg_is(cl, 0, "MEMORY")) {
        k0 = 2, nk = argc > 2;
    } else if (arg_is(cl, 0, "TIME") || arg_is(cl, 0, "EXEC") || arg_is(cl, 0, "DISCARD") ||
               arg_is(cl, 0, "UNWATCH") || arg_is(cl, 0, "PING") || arg_is(cl, 0, "INFO") ||
               arg_is(cl, 0, "CONFIG") || arg_is(cl, 0, "CLIENT") || arg_is(cl, 0, "FUNCTION") ||
               arg_is(cl, 0, "ROLE") || arg_is(cl, 0, "CLUSTER") || arg_is(cl, 0, "SCRIPT") ||
               arg_is(cl, 0, "DBSIZE") || arg_is(cl, 0, "ECHO")) {
        return 0;
    } else {
        k0 = 1, nk = argc > 1;
    }
    size_t slots = 0;
    for (size_t i = k0; i < k0 + nk; i++) {
        int s = jr_cluster_key_slot(cl->av[i], cl->al[i]);
        if (c->slot != s) slots++;
        if (c->slot < 0) c->slot = s;
        else if (s != c->slot) {
            int seen = 0;
            for (size_t j = k0; j < i && !seen; j++) seen = jr_cluster_key_slot(cl->av[j], cl->al[j]) == s;
            slots -= seen;
        }
    }
    if (slots > 1) {
        char msg[200];
        snprintf(msg, sizeof msg, "internal: %.*s with keys in %zu slots cannot be sent to a Redis Cluster",
                 (int)(cl->al[0] < 40 ? cl->al[0] : 40), cl->av[0], slots);
        if (!(c->refused = strdup(msg))) return jri_fail(f, JR_ENOMEM, "out of memory");
        c->slot = -1;
    }
    return 0;
}

int jrc_append(jr_redis_t *f, const char *buf, size_t len) {
    struct jr_cluster *cl = f->cl;
    if (f->broken) return jri_fail(f, JR_EIO, "Redis connection is broken");
    while (len > 0) {
        size_t used, argc;
        if (resp_parse(cl, buf, len, &used, &argc)) return jri_fail(f, JR_EINVAL, "internal: a malformed command");
        if (cl->qhead == cl->qn) cl->qhead = cl->qn = 0;
        if (cl->qn == cl->qcap) {
            if (cl->qhead > 0) {
                memmove(cl->q, cl->q + cl->qhead, (cl->qn - cl->qhead) * sizeof *cl->q);
                cl->qn -= cl->qhead, cl->qhead = 0;
            } else {
                size_t cap = cl->qcap ? cl->qcap * 2 : 16;
                cmd_t *v = realloc(cl->q, cap * sizeof *v);
                if (!v) return jri_fail(f, JR_ENOMEM, "out of memory");
                cl->q = v, cl->qcap = cap;
            }
        }
        cmd_t c = {0};
        int rc = classify(f, argc, &c);
        if (rc) return rc;
        if (!(c.buf = malloc(used))) return jri_fail(f, JR_ENOMEM, "out of memory");
        memcpy(c.buf, buf, used);
        c.len = used;
        cl->q[cl->qn++] = c;
        buf += used, len -= used;
    }
    return 0;
}

/* ---- routing and sending --------------------------------------------------- */

/* The node of a slot: the map's, else the home node's (a MOVED corrects it). */
static int node_of_slot(const struct jr_cluster *cl, int slot) {
    int n = slot >= 0 ? cl->slot[slot] : -1;
    return n >= 0 ? n : cl->slot[cl->home_slot] >= 0 ? cl->slot[cl->home_slot] : 0;
}

/* Append bytes to connection k of node i (seq into *seq). 0, DOWN
 * (node_down: the parts for node i are answered), or an error. */
static int node_send(jr_redis_t *f, int i, int k, const char *buf, size_t len, uint64_t *seq) {
    int rc = conn_use(f, i, k);
    if (rc) return rc;
    conn_t *c = &f->cl->nodes[i].c[k];
    if ((rc = jri_append_formatted(c->r, buf, len))) return node_down(f, i, jr_redis_errstr(c->r));
    *seq = c->next_seq++;
    c->out = 1;
    return 0;
}

static int part_send(jr_redis_t *f, part_t *p, int asking) {
    static const char ask[] = "*1\r\n$6\r\nASKING\r\n";
    int rc;
    p->asking = asking;
    if (asking && (rc = node_send(f, p->node, p->conn, ask, sizeof ask - 1, &p->asking_seq))) return rc;
    return node_send(f, p->node, p->conn, p->buf, p->len, &p->seq);
}

static part_t *parts_new(jr_redis_t *f, cmd_t *c, size_t n) {
    if (!(c->parts = calloc(n, sizeof *c->parts))) jri_fail(f, JR_ENOMEM, "out of memory");
    return c->parts;
}

/* Split stream read c into one part per slot of its streams (same
 * options, that slot's streams and ids: Redis refuses a read of several
 * slots' streams, even on one node). The parts of a blocking read each
 * take a connection of their node of their own (the first part on a node
 * its first connection, the next ones further connections: a blocking
 * command holds its connection); those of a read that does not block all
 * go on the first. A blocking read with no part on the home node gets a
 * wait there (XREAD BLOCK t STREAMS JR_RESUMED_KEY $), so that one CLIENT
 * UNBLOCK of the home connection (pause, resume, stop) ends the whole read. */
static int route_read(jr_redis_t *f, cmd_t *c) {
    struct jr_cluster *cl = f->cl;
    size_t used, argc;
    if (resp_parse(cl, c->buf, c->len, &used, &argc)) return jri_fail(f, JR_EINVAL, "internal: a malformed command");
    size_t s = streams_at(cl, argc), nk = s ? (argc - s - 1) / 2 : 0;
    int home = node_of_slot(cl, cl->home_slot);
    int *of = calloc(nk ? nk : 1, sizeof *of), *slots = calloc(nk + 1, sizeof *slots);
    const char **av = malloc((s + 1 + 2 * nk + 6) * sizeof *av);
    size_t *al = malloc((s + 1 + 2 * nk + 6) * sizeof *al);
    size_t ns = 0;
    int rc = 0, has_home = 0;
    if (!of || !slots || !av || !al) {
        rc = jri_fail(f, JR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nk; i++) {
        of[i] = jr_cluster_key_slot(cl->av[s + 1 + i], cl->al[s + 1 + i]);
        size_t j = 0;
        while (j < ns && slots[j] != of[i]) j++;
        if (j == ns) slots[ns++] = of[i];
        has_home |= node_of_slot(cl, of[i]) == home;
    }
    int extra = c->block && !has_home;
    if (ns <= 1 && !extra) { /* one slot: the command as it is */
        part_t *p = parts_new(f, c, 1);
        if (!p) {
            rc = JR_ENOMEM;
            goto out;
        }
        c->nparts = 1;
        p->node = ns ? node_of_slot(cl, slots[0]) : home, p->buf = c->buf, p->len = c->len;
        goto out;
    }
    if (!parts_new(f, c, ns + (size_t)extra)) {
        rc = JR_ENOMEM;
        goto out;
    }
    for (size_t j = 0; j < ns; j++) {
        size_t a = 0;
        for (size_t i = 0; i <= s; i++) av[a] = cl->av[i], al[a++] = cl->al[i];
        for (size_t i = 0; i < nk; i++)
            if (of[i] == slots[j]) av[a] = cl->av[s + 1 + i], al[a++] = cl->al[s + 1 + i];
        for (size_t i = 0; i < nk; i++)
            if (of[i] == slots[j]) av[a] = cl->av[s + 1 + nk + i], al[a++] = cl->al[s + 1 + nk + i];
        part_t *p = &c->parts[c->nparts++];
        p->node = node_of_slot(cl, slots[j]), p->own = 1;
        for (size_t k = 0; c->block && k + 1 < c->nparts; k++) p->conn += c->parts[k].node == p->node;
        int n = redisFormatCommandArgv(&p->buf, (int)a, av, al);
        if (n < 0) {
            rc = jri_fail(f, JR_ENOMEM, "out of memory");
            goto out;
        }
        p->len = (size_t)n;
    }
    if (extra) {
        size_t bi = 0; /* the BLOCK argument's value */
        for (size_t i = 1; i + 1 < s && !bi; i++)
            if (arg_is(cl, i, "BLOCK")) bi = i + 1;
        char t[24];
        snprintf(t, sizeof t, "%.*s", (int)(bi && cl->al[bi] < 20 ? cl->al[bi] : 1), bi ? cl->av[bi] : "0");
        const char *w[] = {"XREAD", "BLOCK", t, "STREAMS", JR_RESUMED_KEY, "$"};
        part_t *p = &c->parts[c->nparts++];
        p->node = home, p->own = 1, p->extra = 1;
        int n = redisFormatCommandArgv(&p->buf, 6, w, NULL);
        if (n < 0) {
            rc = jri_fail(f, JR_ENOMEM, "out of memory");
            goto out;
        }
        p->len = (size_t)n;
    }
out:
    free(of), free(slots), free(av), free(al);
    return rc;
}

/* Route command i of the FIFO (not sent yet) into its parts:
 * - a command with keys: the node of their slot;
 * - a stream read: route_read;
 * - WAIT: one per node written to since its last WAIT (none: the home node);
 * - MULTI: the node of the next command with keys appended (none yet: as
 *   any other command without keys);
 * - any other command without keys: the node of the previous command with
 *   keys still in the FIFO, else the home node (the primary of the slot of
 *   JR_REGISTRY_KEY). */
static int route(jr_redis_t *f, size_t i) {
    struct jr_cluster *cl = f->cl;
    cmd_t *c = &cl->q[i];
    if (c->kind == K_READ) return route_read(f, c);
    if (c->kind == K_WAIT) {
        size_t n = 0;
        for (size_t k = 0; k < cl->nnodes; k++) n += cl->nodes[k].written;
        if (!parts_new(f, c, n ? n : 1)) return JR_ENOMEM;
        for (size_t k = 0; k < cl->nnodes; k++)
            if (cl->nodes[k].written) {
                cl->nodes[k].written = 0;
                c->parts[c->nparts++] = (part_t){.node = (int)k, .buf = c->buf, .len = c->len};
            }
        if (!c->nparts) c->parts[c->nparts++] = (part_t){.node = node_of_slot(cl, cl->home_slot), .buf = c->buf, .len = c->len};
        return 0;
    }
    int node = -1;
    if (c->slot >= 0) node = node_of_slot(cl, c->slot);
    for (size_t k = i + 1; node < 0 && c->kind == K_MULTI && k < cl->qn; k++)
        if (cl->q[k].slot >= 0) node = node_of_slot(cl, cl->q[k].slot);
    for (size_t k = i; node < 0 && k-- > cl->qhead;)
        if (cl->q[k].slot >= 0 && cl->q[k].nparts) node = cl->q[k].parts[0].node;
    if (node < 0) node = node_of_slot(cl, cl->home_slot);
    if (!parts_new(f, c, 1)) return JR_ENOMEM;
    c->parts[0] = (part_t){.node = node, .buf = c->buf, .len = c->len};
    c->nparts = 1;
    return 0;
}

int jrc_flush(jr_redis_t *f) {
    struct jr_cluster *cl = f->cl;
    if (f->broken) return jri_fail(f, JR_EIO, "Redis connection is broken");
    if (cl->refresh_due && (cl->qhead == cl->qn || !cl->q[cl->qhead].sent) && jr_mono_us() >= cl->refresh_at)
        refresh(f);
    int rc;
    for (size_t i = cl->qhead; i < cl->qn; i++) {
        cmd_t *c = &cl->q[i];
        if (c->sent) continue;
        if (c->refused) { /* answered here (merge) */
            c->sent = 1;
            continue;
        }
        if ((rc = route(f, i))) return rc;
        for (size_t k = 0; k < c->nparts; k++) {
            if (c->parts[k].done) continue; /* its node found down meanwhile */
            if ((rc = part_send(f, &c->parts[k], 0)) == DOWN) continue;
            if (rc) return rc;
            if (c->kind == K_PLAIN && c->slot >= 0) cl->nodes[c->parts[k].node].written = 1;
        }
        c->sent = 1;
    }
    for (size_t k = 0; k < cl->nnodes; k++)
        for (size_t j = 0; j < cl->nodes[k].nc; j++) {
            conn_t *n = &cl->nodes[k].c[j];
            if (!n->out) continue;
            n->out = 0;
            if ((rc = jr_redis_flush(n->r)) && (rc = node_down(f, (int)k, jr_redis_errstr(n->r))) < 0) return rc;
        }
    return 0;
}

/* ---- reading --------------------------------------------------------------- */

#define NOWAIT (-2)

/* Take node i's reply of seq into *rep: held, or read from its socket
 * (holding the replies before it), waiting up to wait_us (-1 = forever;
 * NOWAIT: only what can be read now, a reply begun being read to its end
 * within the command timeout).
 * 1 taken, 0 not there yet, DOWN (node i unreachable: node_down answered
 * its parts), or an error (f broken). */
static int node_take(jr_redis_t *f, int i, int k, uint64_t seq, redisReply **rep, int64_t wait_us) {
    conn_t *n = &f->cl->nodes[i].c[k];
    for (;;) {
        for (size_t h = 0; h < n->nheld; h++)
            if (n->held[h].seq == seq) {
                *rep = n->held[h].rep;
                n->held[h] = n->held[--n->nheld];
                return 1;
            }
        if (n->read_seq > seq)
            return jri_fail(f, JR_EPROTO, "internal: reply %llu of %s lost", (unsigned long long)seq,
                            f->cl->nodes[i].addr);
        if (!n->r || !jr_redis_ok(n->r)) return node_down(f, i, n->r ? jr_redis_errstr(n->r) : "not connected");
        if (wait_us == NOWAIT && !jr_redis_has_reply(n->r)) {
            int w = jr_redis_wait(n->r, 0, -1);
            if (w < 0) return node_down(f, i, jr_redis_errstr(n->r));
            if (w != JR_WAIT_READY) return 0;
        }
        redisReply *r;
        int rc = jri_recv_reply(n->r, &r, wait_us == NOWAIT ? f->timeout_us : wait_us);
        if (rc) return node_down(f, i, jr_redis_errstr(n->r));
        if (n->read_seq == seq) {
            n->read_seq++;
            *rep = r;
            return 1;
        }
        if (n->nheld == n->heldcap) {
            size_t cap = n->heldcap ? n->heldcap * 2 : 8;
            held_t *v = realloc(n->held, cap * sizeof *v);
            if (!v) {
                freeReplyObject(r);
                return jri_fail(f, JR_ENOMEM, "out of memory");
            }
            n->held = v, n->heldcap = cap;
        }
        n->held[n->nheld++] = (held_t){n->read_seq++, r};
    }
}

static int starts(const redisReply *r, const char *w) {
    return r->type == REDIS_REPLY_ERROR && !strncmp(r->str, w, strlen(w)) && (r->str[strlen(w)] == ' ' || !r->str[strlen(w)]);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The node of "MOVED slot host:port" / "ASK slot host:port": its index
 * (added if new) and the slot into *slot; -1 if the text is not that. */
static int redirect_node(struct jr_cluster *cl, const char *text, int *slot) {
    const char *sp = strchr(text, ' ');
    if (!sp) return -1;
    char *e;
    long s = strtol(sp + 1, &e, 10);
    if (*e != ' ' || s < 0 || s >= JR_CLUSTER_SLOTS) return -1;
    const char *addr = e + 1, *colon = strrchr(addr, ':');
    if (!colon) return -1;
    char host[256];
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr < 255 ? colon - addr : 255), addr);
    if (!host[0]) return -1;
    *slot = (int)s;
    return node_find(cl, host, atoi(colon + 1));
}

/* Send what part p's connection was given. 0, DOWN or an error (f broken). */
static int jrc_flush_node(jr_redis_t *f, const part_t *p) {
    conn_t *n = &f->cl->nodes[p->node].c[p->conn];
    n->out = 0;
    int rc = jr_redis_flush(n->r);
    return rc ? node_down(f, p->node, jr_redis_errstr(n->r)) : 0;
}

/* Redirections one command follows at most: nodes that disagree on a
 * slot's owner (one gave it away, none took it) would send it back and
 * forth for ever; past this many, the last MOVED or ASK is its reply. */
#define REDIRECTS_MAX 16

/* A reply of part p of c: follow MOVED and ASK (resend, up to
 * REDIRECTS_MAX times; a part of a split read counts as nil instead:
 * Redis ran nothing, and the next read goes to the node now known), and
 * TRYAGAIN, CLUSTERDOWN and LOADING (resend after 50-100 ms, until the
 * command timeout; then Redis's error is the reply). 0 with p done, 1
 * resent, or an error. */
static int part_reply(jr_redis_t *f, cmd_t *c, part_t *p, redisReply *rep) {
    struct jr_cluster *cl = f->cl;
    int split = c->nparts > 1, slot = -1, n;
    int redirect = starts(rep, "MOVED") || starts(rep, "ASK");
    if (redirect && c->redirects >= REDIRECTS_MAX) {
        p->rep = rep, p->done = 1;
        return 0;
    }
    c->redirects += redirect;
    if (starts(rep, "MOVED") && (n = redirect_node(cl, rep->str, &slot)) >= 0) {
        cl->slot[slot] = n;
        cl->refresh_due = 1;
        freeReplyObject(rep);
        if (split) return p->done = 1, 0;
        p->node = n, p->conn = 0;
        int rc = part_send(f, p, 0);
        return rc ? rc : (rc = jrc_flush_node(f, p)) ? rc : 1;
    }
    if (starts(rep, "ASK") && (n = redirect_node(cl, rep->str, &slot)) >= 0) {
        freeReplyObject(rep);
        if (split) return c->ask_pause = 1, p->done = 1, 0;
        p->node = n, p->conn = 0;
        int rc = part_send(f, p, 1);
        return rc ? rc : (rc = jrc_flush_node(f, p)) ? rc : 1;
    }
    if (starts(rep, "TRYAGAIN") || starts(rep, "CLUSTERDOWN") || starts(rep, "LOADING")) {
        int64_t now = jr_mono_us();
        if (!c->retry_until) c->retry_until = now + f->timeout_us;
        if (now < c->retry_until) {
            freeReplyObject(rep);
            cl->rnd = cl->rnd * 1103515245u + 12345u;
            sleep_ms(50 + (int)((cl->rnd >> 16) % 51));
            if (!split && c->slot >= 0 && node_of_slot(cl, c->slot) != p->node)
                p->node = node_of_slot(cl, c->slot), p->conn = 0;
            int rc = part_send(f, p, 0);
            return rc ? rc : (rc = jrc_flush_node(f, p)) ? rc : 1;
        }
    }
    p->rep = rep, p->done = 1;
    return 0;
}

/* End part p of a blocking read (another part answered) with CLIENT
 * UNBLOCK of p's node connection, sent over a side connection to that node
 * (made on first need, kept). A 0 (it was not blocked yet: the read may
 * still be on its way, or answered already) is tried again 10 ms later
 * while p has not answered. A node whose CLIENT ID was refused: nothing
 * (p ends with its BLOCK period). 0 or an error. */
static int part_unblock(jr_redis_t *f, part_t *p) {
    node_t *n = &f->cl->nodes[p->node];
    conn_t *c = &n->c[p->conn];
    int64_t now = jr_mono_us();
    if (p->unblocked || !c->have_id || now < p->unblock_at) return 0;
    if (n->side && !jr_redis_ok(n->side)) {
        jr_redis_free(n->side);
        n->side = NULL;
    }
    char err[JR_ERRLEN];
    if (!n->side && !(n->side = node_open(f, n->host, n->port, err, sizeof err)))
        return node_down(f, p->node, err) < 0 ? JR_ENOMEM : 0;
    char id[32];
    snprintf(id, sizeof id, "%lld", c->id);
    redisReply *rep;
    int rc = jri_exec(n->side, &rep, "CLIENT", "UNBLOCK", id, NULL);
    if (rc == JR_EREDIS) { /* refused (an ACL without it): the part ends with its period */
        p->unblocked = 1;
        return 0;
    }
    if (rc) return node_down(f, p->node, jr_redis_errstr(n->side)) < 0 ? JR_ENOMEM : 0;
    p->unblocked = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    p->unblock_at = now + 10000;
    freeReplyObject(rep);
    return 0;
}

/* The reply of a whole command, its parts all done, into *out:
 * - one part: its reply (a part with none, nil);
 * - WAIT: the fewest replicas any node confirmed (an error reply first);
 * - a split stream read: the streams of every part in one array (the home
 *   node's wait left out; UNBLOCKED, and a part of a node down, count as
 *   nil; all nil: nil), or the first error reply of a part (of a node down
 *   only when every part was). */
static int merge(jr_redis_t *f, cmd_t *c, redisReply **out) {
    redisReply *res = NULL;
    if (c->refused) {
        if (!(res = calloc(1, sizeof *res))) return jri_fail(f, JR_ENOMEM, "out of memory");
        res->type = REDIS_REPLY_ERROR, res->str = c->refused, res->len = strlen(c->refused);
        c->refused = NULL;
    } else if (c->nparts == 1 && c->parts[0].rep) {
        res = c->parts[0].rep, c->parts[0].rep = NULL;
    } else if (c->kind == K_WAIT) {
        size_t best = 0;
        for (size_t i = 0; i < c->nparts; i++) {
            redisReply *r = c->parts[i].rep, *b = c->parts[best].rep;
            if (r && (!b || r->type == REDIS_REPLY_ERROR ||
                      (b->type == REDIS_REPLY_INTEGER && r->type == REDIS_REPLY_INTEGER && r->integer < b->integer)))
                if (!b || b->type != REDIS_REPLY_ERROR) best = i;
        }
        res = c->parts[best].rep, c->parts[best].rep = NULL;
    } else {
        size_t n = 0, up = 0, first_down = c->nparts;
        for (size_t i = 0; i < c->nparts; i++)
            if (!c->parts[i].extra && !c->parts[i].down) up++;
            else if (!c->parts[i].extra && first_down == c->nparts) first_down = i;
        if (!up && first_down < c->nparts) res = c->parts[first_down].rep, c->parts[first_down].rep = NULL;
        for (size_t i = 0; i < c->nparts && !res; i++) {
            redisReply *r = c->parts[i].rep;
            if (!r || c->parts[i].extra || c->parts[i].down) continue;
            if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "UNBLOCKED", 9)) res = r, c->parts[i].rep = NULL;
            else if (r->type == REDIS_REPLY_ARRAY) n += r->elements;
        }
        if (!res && !(res = calloc(1, sizeof *res))) return jri_fail(f, JR_ENOMEM, "out of memory");
        if (res->type == 0 && n == 0) res->type = REDIS_REPLY_NIL;
        if (res->type == 0) {
            if (!(res->element = calloc(n, sizeof *res->element))) {
                free(res);
                return jri_fail(f, JR_ENOMEM, "out of memory");
            }
            res->type = REDIS_REPLY_ARRAY;
            for (size_t i = 0; i < c->nparts; i++) {
                redisReply *r = c->parts[i].rep;
                if (!r || c->parts[i].extra || r->type != REDIS_REPLY_ARRAY) continue;
                for (size_t e = 0; e < r->elements; e++) res->element[res->elements++] = r->element[e];
                r->elements = 0; /* moved: freed with res */
            }
        }
    }
    if (!res && !(res = calloc(1, sizeof *res))) return jri_fail(f, JR_ENOMEM, "out of memory");
    if (res->type == 0) res->type = REDIS_REPLY_NIL;
    *out = res;
    return 0;
}

/* Take what can be taken of c's parts now (wait NOWAIT; else wait up to
 * that long, -1 forever, for each in order), following redirections, and end the other parts of a
 * blocking read once one answered. 1 when every part is done, 0 not yet,
 * or an error. */
static int step(jr_redis_t *f, cmd_t *c, int64_t wait) {
    int any = 0, all = 1, rc;
    int64_t now = jr_mono_us();
    for (size_t i = 0; i < c->nparts; i++) {
        part_t *p = &c->parts[i];
        rc = 0;
        while (!p->done) {
            redisReply *rep;
            if (p->asking) {
                if ((rc = node_take(f, p->node, p->conn, p->asking_seq, &rep, wait)) == DOWN) continue;
                if (rc <= 0) break;
                freeReplyObject(rep); /* ASKING's +OK */
                p->asking = 0;
            }
            if ((rc = node_take(f, p->node, p->conn, p->seq, &rep, wait)) == DOWN) continue; /* p done */
            if (rc <= 0) break;
            if ((rc = part_reply(f, c, p, rep)) < 0) return rc;
        }
        if (rc < 0) return rc;
        any |= part_counts(f->cl, p, now);
        all &= p->done;
        if (!p->done && wait != NOWAIT) return 0; /* in order: the next one waits */
    }
    if (all) return 1;
    if (c->block && (any || c->end_early))
        for (size_t i = 0; i < c->nparts; i++)
            if (!c->parts[i].done && (rc = part_unblock(f, &c->parts[i]))) return rc;
    return 0;
}

/* Wait until a node of c's parts not done is readable, up to deadline
 * (mono us, -1 = none), at most until a part answered by node_down counts
 * (part_counts), and at most 10 ms when a CLIENT UNBLOCK is to be tried
 * again. JR_WAIT_READY or JR_WAIT_TIMEOUT. */
static int wait_parts(jr_redis_t *f, cmd_t *c, int64_t deadline) {
    struct jr_cluster *cl = f->cl;
    if (c->nparts > cl->pfdcap) { /* one per part: a read over any number of slots */
        struct pollfd *v = realloc(cl->pfd, c->nparts * sizeof *v);
        if (!v) return jri_fail(f, JR_ENOMEM, "out of memory");
        cl->pfd = v, cl->pfdcap = c->nparts;
    }
    struct pollfd *p = cl->pfd;
    nfds_t n = 0;
    int retry = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        if (c->parts[i].down) { /* until its node may be tried again (part_counts) */
            int64_t until = f->cl->nodes[c->parts[i].node].down_until;
            if (deadline < 0 || until < deadline) deadline = until;
        }
        if (c->parts[i].done) continue;
        conn_t *nd = &f->cl->nodes[c->parts[i].node].c[c->parts[i].conn];
        if (nd->r) p[n++] = (struct pollfd){.fd = jr_redis_fd(nd->r), .events = POLLIN};
        retry |= !c->parts[i].unblocked && c->parts[i].unblock_at;
    }
    int64_t left = deadline < 0 ? -1 : deadline - jr_mono_us();
    if (deadline >= 0 && left < 0) left = 0;
    int ms = left < 0 ? -1 : (int)((left + 999) / 1000);
    if (retry && (ms < 0 || ms > 10)) ms = 10;
    int k = poll(p, n, ms);
    if (k < 0 && errno != EINTR) return jri_fail(f, JR_EIO, "poll: %s", strerror(errno));
    return k > 0 ? JR_WAIT_READY : JR_WAIT_TIMEOUT;
}

/* A node connection with nothing outstanding that polls readable: the
 * node closed it (it died, or was restarted): node_down now, rather than
 * leaving jr_redis_fd readable for a caller that would then wait for a
 * reply that never comes; a blocking read outstanding is then ended early
 * (end_early: its parts unblocked, what they read returned). One
 * epoll_wait without waiting. 0 or JR_ENOMEM. */
static int reap_idle(jr_redis_t *f) {
    struct jr_cluster *cl = f->cl;
    struct epoll_event ev[16];
    int n = epoll_wait(cl->epfd, ev, 16, 0);
    for (int e = 0; e < n; e++) {
        uint32_t i = ev[e].data.u32;
        if (i >= cl->nnodes) continue; /* the timer */
        node_t *nd = &cl->nodes[i];
        for (size_t k = 0; k < nd->nc; k++) {
            conn_t *c = &nd->c[k];
            if (!c->r || c->read_seq != c->next_seq || c->nheld) continue;
            struct pollfd p = {.fd = jr_redis_fd(c->r), .events = POLLIN};
            if (poll(&p, 1, 0) <= 0) continue;
            if (node_down(f, (int)i, "the node closed an idle connection") < 0) return JR_ENOMEM;
            if (cl->qhead < cl->qn && cl->q[cl->qhead].sent && cl->q[cl->qhead].block) cl->q[cl->qhead].end_early = 1;
            break;
        }
    }
    return 0;
}

int jrc_recv(jr_redis_t *f, redisReply **out, int64_t timeout_us) {
    struct jr_cluster *cl = f->cl;
    *out = NULL;
    if (f->broken) return jri_fail(f, JR_EIO, "Redis connection is broken");
    if (cl->qhead == cl->qn) return jri_fail(f, JR_EPROTO, "internal: a reply read with no command sent");
    int rc;
    if ((rc = reap_idle(f))) return rc;
    cmd_t *c = &cl->q[cl->qhead];
    if (!c->sent && (rc = jrc_flush(f))) return rc;
    int64_t deadline = timeout_us < 0 ? -1 : jr_mono_us() + timeout_us;
    for (;;) {
        /* One part at a time in order (a blocking read: whichever answers). */
        if ((rc = step(f, c, NOWAIT)) < 0) return rc;
        if (rc == 1) break;
        if (!c->block) {
            int64_t left = deadline < 0 ? -1 : deadline - jr_mono_us();
            if ((rc = step(f, c, left < 0 && deadline >= 0 ? 0 : left)) < 0) return rc;
            if (rc == 1) break;
        }
        if (c->block) {
            if (deadline >= 0 && jr_mono_us() >= deadline) return jri_fail(f, JR_ETIMEOUT, "Redis did not answer in time");
            if ((rc = wait_parts(f, c, deadline)) < 0) return rc;
        }
    }
    if (c->ask_pause) sleep_ms(10); /* a slot migrating: the next read is asked elsewhere again */
    if (c->block) timer_set(cl, 0);
    rc = merge(f, c, out);
    cmd_free(c);
    cl->qhead++;
    return rc;
}

int jrc_has_reply(jr_redis_t *f) {
    struct jr_cluster *cl = f->cl;
    if (f->broken) return 0;
    if (reap_idle(f)) return 0;
    if (cl->qhead == cl->qn || !cl->q[cl->qhead].sent) return 0;
    cmd_t *c = &cl->q[cl->qhead];
    int64_t now = jr_mono_us();
    for (size_t i = 0; i < c->nparts; i++) {
        part_t *p = &c->parts[i];
        if (p->done) {
            if (c->block && part_counts(cl, p, now)) return 1;
            continue;
        }
        if (c->block && c->end_early) return 1;
        conn_t *n = &cl->nodes[p->node].c[p->conn];
        for (size_t h = 0; h < n->nheld; h++)
            if (n->held[h].seq == (p->asking ? p->asking_seq : p->seq)) return 1;
        if (n->r && jr_redis_has_reply(n->r)) return 1;
        if (!c->block) return 0;
    }
    return !c->block;
}

int jrc_fd(const jr_redis_t *f) { return f->cl->epfd; }

int jrc_wait(jr_redis_t *f, int64_t timeout_us, int extra_fd) {
    if (f->broken) return jri_fail(f, JR_EIO, "Redis connection is broken");
    if (jrc_has_reply(f)) return JR_WAIT_READY;
    struct pollfd p[2] = {{.fd = f->cl->epfd, .events = POLLIN}, {.fd = extra_fd, .events = POLLIN}};
    int ms = timeout_us < 0 ? -1 : (int)((timeout_us + 999) / 1000);
    int n = poll(p, extra_fd >= 0 ? 2 : 1, ms);
    if (n < 0 && errno == EINTR) return extra_fd >= 0 ? JR_WAIT_EXTRA : JR_WAIT_TIMEOUT;
    if (n < 0) return jri_fail(f, JR_EIO, "poll: %s", strerror(errno));
    if (n == 0) return JR_WAIT_TIMEOUT;
    if (extra_fd >= 0 && (p[1].revents & POLLIN)) return JR_WAIT_EXTRA;
    return JR_WAIT_READY;
}

/* The function library's lock and fence keys for node i into its
 * connection: jr:{lib}:... where that slot is served, else jr:{lib.K}:...
 * with the first K whose slot node i serves. */
static void lib_keys(struct jr_cluster *cl, int i, jr_redis_t *r) {
    char tag[32] = "lib";
    if (cl->slot[jr_cluster_key_slot("lib", 3)] != i)
        for (int k = 0; k < 1000000; k++) {
            snprintf(tag, sizeof tag, "lib.%d", k);
            if (cl->slot[jr_cluster_key_slot(tag, strlen(tag))] == i) break;
        }
    snprintf(r->lib_loading, sizeof r->lib_loading, "jr:{%s}:loading", tag);
    snprintf(r->lib_fence, sizeof r->lib_fence, "jr:{%s}:fence", tag);
}

int jrc_each_primary(jr_redis_t *f, int (*fn)(jr_redis_t *node, void *arg), void *arg) {
    struct jr_cluster *cl = f->cl;
    if (f->broken) return jri_fail(f, JR_EIO, "Redis connection is broken");
    if (cl->qhead != cl->qn) return jri_fail(f, JR_EPROTO, "internal: a node-wide call with replies outstanding");
    for (size_t i = 0; i < cl->nnodes; i++) {
        int serves = 0;
        for (int s = 0; s < JR_CLUSTER_SLOTS && !serves; s++) serves = cl->slot[s] == (int)i;
        if (!serves) continue;
        int rc = node_use(f, (int)i);
        node_t *n = &cl->nodes[i];
        if (rc == DOWN) {
            jr_log_kv(JR_LOG_WARN, "a Redis Cluster primary is unreachable: skipped; its queues wait for it (or its replica)",
                      "node", n->addr, "error", n->why, NULL);
            continue;
        }
        if (rc) return rc;
        jr_redis_t *nr = n->c[0].r;
        lib_keys(cl, (int)i, nr);
        rc = fn(nr, arg);
        if (nr->library_kept > f->library_kept) f->library_kept = nr->library_kept;
        if (rc && !jr_redis_ok(nr)) {
            if ((rc = node_down(f, (int)i, jr_redis_errstr(nr))) < 0) return rc;
            jr_log_kv(JR_LOG_WARN, "a Redis Cluster primary is unreachable: skipped; its queues wait for it (or its replica)",
                      "node", n->addr, "error", n->why, NULL);
            continue;
        }
        if (rc) return jri_fail(f, rc, "Redis Cluster node %s: %s", n->addr, jr_redis_errstr(nr));
    }
    return 0;
}
