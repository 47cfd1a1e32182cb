/* Partitioned queues (docs/operations.md "Partitioned queues",
 * docs/redis-contract.md "Partitions"): a queue Q of N > 1 partitions keeps
 * its jobs in N internal queues Q#J, one per partition i = 0..N-1, each with
 * its own hash tag {Q#J} and so its own slot of a Redis Cluster. J is chosen
 * so that partition i's slot lies in the i-th of N equal ranges of the
 * 16384 slots: the partitions sit evenly over the primaries of any cluster
 * whose slots are split in contiguous ranges.
 *
 * A job goes to partition hash(key) mod N when its producer gives a key,
 * else hash(id) mod N for an explicit id, else the producer spreads the jobs.
 * A job with no id in partition i is shown as "<generated id>~<i>", so that
 * its partition follows from its id (a lookup is one call, never a scan).
 *
 * Pure: no I/O, no global state. */
#ifndef JR_PARTITION_H
#define JR_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "contract.h"

#define JR_SLOTS 16384           /* hash slots of a Redis Cluster */
#define JR_PARTITIONS_MAX 1024   /* most partitions of one queue */
#define JR_PARTITION_J_MAX 9999999 /* largest J of a partition name: 7 digits */
/* Long-lived processes (workers, schedulers, the client library) read a
 * queue's count again when theirs is older than this. */
#define JR_PARTITIONS_REREAD_MS 10000

/* CRC16-XMODEM (polynomial 0x1021, initial value 0) of n bytes: Redis
 * Cluster's key hash (CRC16("123456789") = 0x31C3). */
uint16_t jr_crc16(const char *s, size_t n);

/* The cluster slot of a key whose hash tag is tag[0..n): CRC16 mod 16384. */
unsigned jr_slot_of_tag(const char *tag, size_t n);

/* The numbers J of the n partitions (1..JR_PARTITIONS_MAX) of queue q (a
 * valid queue name): j[i] is the smallest J such that the slot of "q#J"
 * lies in range i, [ceil(i*16384/n), ceil((i+1)*16384/n)), that is
 * slot*n/16384 == i. Deterministic. Returns 0, or JR_EINVAL for an n out of
 * range, a q too long, or (never seen: it would take ~10^7 unlucky draws)
 * a range not reached by J <= JR_PARTITION_J_MAX. */
int jr_partition_numbers(const char *q, unsigned n, uint32_t *j);

/* Write the internal queue name "q#J" into buf (JR_INTERNAL_QUEUE_MAX + 1
 * bytes at least). Returns 0, or JR_EINVAL (buf "") if q is longer than
 * JR_QUEUE_MAX or J > JR_PARTITION_J_MAX. */
int jr_partition_name(char *buf, size_t len, const char *q, uint32_t j);

/* If name[0..n) is an internal partition name "<queue>#<digits>", store the
 * queue's length in *qlen and J in *j and return 1; else 0 (a plain queue
 * name, or anything else). Checks only the "#<1-7 digits>" tail. */
int jr_partition_split(const char *name, size_t n, size_t *qlen, uint32_t *j);

/* The partition hash of keys and ids: 32-bit FNV-1a of the n bytes. */
uint32_t jr_partition_hash(const char *s, size_t n);

/* The partition (0..parts-1) of a job with key or id s[0..n): hash mod parts. */
unsigned jr_partition_of(const char *s, size_t n, unsigned parts);

/* The id a user sees of a job with the generated id gen (a stream entry id
 * or "d<ms>-<seq>") in partition i: "gen~i", written into buf. Returns 0, or
 * JR_EINVAL (buf "") when it does not fit. */
int jr_partition_id(char *buf, size_t len, const char *gen, unsigned i);

/* If id[0..n) is "<generated id>~<digits>" (jr_contract_id_reserved's forms
 * with a partition), store the length of the generated part in *gen_len and
 * the partition in *i and return 1; else 0. */
int jr_partition_id_parse(const char *id, size_t n, size_t *gen_len, unsigned *i);

#endif
