/* partition.c: the slot function (against the Redis Cluster spec), the
 * partition names (each partition's slot in its range, for every count),
 * the partition hash, and the id forms of partitioned queues (reserved by
 * contract.c, parsed back). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "jr.h"
#include "partition.h"

/* The Redis Cluster specification's CRC16 check value, and slots that
 * CLUSTER KEYSLOT gives. */
Test(partition, crc16_and_slots_are_redis_clusters) {
    cr_assert_eq(jr_crc16("123456789", 9), 0x31C3);
    cr_assert_eq(jr_slot_of_tag("123456789", 9), 0x31C3 & 16383);
    cr_assert_eq(jr_slot_of_tag("foo", 3), 12182);
    cr_assert_eq(jr_slot_of_tag("somekey", 7), 11058);
    cr_assert_eq(jr_slot_of_tag("", 0), 0);
}

/* Every count 1..1024: every partition's slot lies in its range, the names
 * are distinct and deterministic; the names are internal queue names
 * (accepted in keys, refused as a user's queue name). */
static void check_names(const char *q, unsigned n) {
    static uint32_t j[JR_PARTITIONS_MAX], again[JR_PARTITIONS_MAX];
    cr_assert_eq(jr_partition_numbers(q, n, j), 0, "%s over %u", q, n);
    cr_assert_eq(jr_partition_numbers(q, n, again), 0);
    cr_assert(!memcmp(j, again, n * sizeof *j), "deterministic");
    for (unsigned i = 0; i < n; i++) {
        char name[JR_INTERNAL_QUEUE_MAX + 1];
        cr_assert_eq(jr_partition_name(name, sizeof name, q, j[i]), 0);
        unsigned slot = jr_slot_of_tag(name, strlen(name));
        cr_assert_eq((uint64_t)slot * n / JR_SLOTS, i, "%s: slot %u not in range %u of %u", name, slot, i, n);
        cr_assert_lt(slot, 16384);
        if (i) cr_assert_neq(j[i], j[i - 1]);
        cr_assert_null(jr_contract_key_queue(name, strlen(name)), "%s", name);
        cr_assert_not_null(jr_contract_queue_name(name, strlen(name)), "%s", name);
        size_t qlen;
        uint32_t back;
        cr_assert(jr_partition_split(name, strlen(name), &qlen, &back));
        cr_assert_eq(qlen, strlen(q));
        cr_assert_eq(back, j[i]);
        if (n == 1) cr_assert_eq(j[i], 0, "the first J in the whole range");
    }
}

Test(partition, every_count_puts_each_partition_in_its_slot_range, .timeout = 60) {
    for (unsigned n = 1; n <= JR_PARTITIONS_MAX; n++) check_names("orders", n);
    cr_assert_eq(jr_partition_numbers("orders", 0, (uint32_t[1]){0}), JR_EINVAL);
    static uint32_t j[JR_PARTITIONS_MAX + 1];
    cr_assert_eq(jr_partition_numbers("orders", JR_PARTITIONS_MAX + 1, j), JR_EINVAL);
}

/* The longest queue name: every partition name and every key of it fits. */
Test(partition, the_longest_queue_name_fits_every_key) {
    char q[JR_QUEUE_MAX + 1];
    memset(q, 'q', JR_QUEUE_MAX);
    q[JR_QUEUE_MAX] = '\0';
    check_names(q, JR_PARTITIONS_MAX);
    char name[JR_INTERNAL_QUEUE_MAX + 1];
    cr_assert_eq(jr_partition_name(name, sizeof name, q, JR_PARTITION_J_MAX), 0);
    cr_assert_eq(strlen(name), JR_INTERNAL_QUEUE_MAX);
    jr_qkeys_t k;
    cr_assert_eq(jr_qkeys(&k, name), 0);
    cr_assert(jr_queue_key_is(k.wheel_n, name, JR_QK_WHEEL_N));
    cr_assert_eq(strlen(k.cancelled), strlen("jr:{}:cancelled") + JR_INTERNAL_QUEUE_MAX);
    char uniq[JR_UNIQ_KEY_MAX];
    char id[158];
    memset(id, 'i', sizeof id);
    cr_assert_eq(jr_uniq_key(uniq, sizeof uniq, name, id, sizeof id), 0);
    /* one more byte is refused, never cut into another queue's key */
    char over[JR_INTERNAL_QUEUE_MAX + 2];
    memset(over, 'q', sizeof over - 1);
    over[sizeof over - 1] = '\0';
    cr_assert_eq(jr_qkeys(&k, over), JR_EINVAL);
    cr_assert_str_empty(k.ready);
    cr_assert_eq(jr_partition_name(name, sizeof name, q, JR_PARTITION_J_MAX + 1), JR_EINVAL);
}

Test(partition, internal_names_in_keys) {
    cr_assert_null(jr_contract_key_queue("orders#0", 8));
    cr_assert_null(jr_contract_key_queue("orders#1234567", 14));
    cr_assert_null(jr_contract_key_queue("orders", 6));
    cr_assert_not_null(jr_contract_key_queue("orders#12345678", 15)); /* 8 digits */
    cr_assert_not_null(jr_contract_key_queue("orders#", 7));
    cr_assert_not_null(jr_contract_key_queue("#5", 2));
    cr_assert_not_null(jr_contract_key_queue("a#b#5", 5));
    cr_assert_not_null(jr_contract_key_queue("or ders#5", 9));
    cr_assert_not_null(jr_contract_queue_name("orders#0", 8), "users may not name a partition");
}

/* 32-bit FNV-1a, its published test values. */
Test(partition, the_hash_is_fnv1a) {
    cr_assert_eq(jr_partition_hash("", 0), 0x811c9dc5u);
    cr_assert_eq(jr_partition_hash("a", 1), 0xe40c292cu);
    cr_assert_eq(jr_partition_hash("foobar", 6), 0xbf9cf968u);
    cr_assert_eq(jr_partition_of("foobar", 6, 8), 0xbf9cf968u % 8);
    cr_assert_eq(jr_partition_of("foobar", 6, 1), 0);
    /* spread: 80,000 keys over 8 partitions, each within 10 % of 1/8 */
    unsigned count[8] = {0};
    for (int i = 0; i < 80000; i++) {
        char k[32];
        int len = snprintf(k, sizeof k, "customer-%d", i);
        count[jr_partition_of(k, (size_t)len, 8)]++;
    }
    for (int i = 0; i < 8; i++) cr_assert(count[i] > 9000 && count[i] < 11000, "partition %d: %u", i, count[i]);
}

Test(partition, id_forms) {
    char id[JR_ID_MAX];
    cr_assert_eq(jr_partition_id(id, sizeof id, "1764581403250-0", 7), 0);
    cr_assert_str_eq(id, "1764581403250-0~7");
    size_t g;
    unsigned i;
    cr_assert(jr_partition_id_parse(id, strlen(id), &g, &i));
    cr_assert_eq(g, strlen("1764581403250-0"));
    cr_assert_eq(i, 7);
    cr_assert(jr_partition_id_parse("d1764581403250-3~1023", 21, &g, &i));
    cr_assert_eq(i, 1023);
    cr_assert_eq(g, 16);
    cr_assert(!jr_partition_id_parse("d1764581403250-3~1024", 21, &g, &i), "no partition 1024");
    cr_assert(!jr_partition_id_parse("order-5~3", 9, &g, &i), "an explicit id is not generated");
    cr_assert(!jr_partition_id_parse("5-5~", 4, &g, &i));
    cr_assert(!jr_partition_id_parse("5-5", 3, &g, &i));
    cr_assert(!jr_partition_id_parse("5-5~1~2", 7, &g, &i));
    /* reserved: a producer cannot give one */
    const char *reserved[] = {"5-5~0", "d5-5~12", "d5~3", "1764581403250-0~7"};
    for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++) {
        cr_assert(jr_contract_id_reserved(reserved[k], strlen(reserved[k])), "%s", reserved[k]);
        const char *why = jr_contract_job_id(reserved[k], strlen(reserved[k]));
        cr_assert(why && strstr(why, "reserved form"), "%s", reserved[k]);
        cr_assert_null(jr_contract_stored_id(reserved[k], strlen(reserved[k])));
    }
    const char *free_ids[] = {"order~5", "5-5~", "5-5~x", "~5", "5-5~1~2", "5~5"};
    for (size_t k = 0; k < sizeof free_ids / sizeof *free_ids; k++)
        cr_assert(!jr_contract_id_reserved(free_ids[k], strlen(free_ids[k])), "%s", free_ids[k]);
}

/* Over the slot ranges redis-cli --cluster create gives P primaries
 * (contiguous, the first ones one slot larger): N a multiple of P spreads
 * N/P per primary (9 over 3, 12 over 4), another N at most one more or
 * less where a range straddles two primaries (8 over 3: "orders" gets 2
 * or 3 each). DESIGN.md's trap: the plain tags {orders#0}..{orders#7} put
 * 4 on one. */
static void per_primary(const char *q, unsigned n, unsigned p, unsigned *count) {
    uint32_t j[JR_PARTITIONS_MAX];
    cr_assert_eq(jr_partition_numbers(q, n, j), 0);
    for (unsigned k = 0; k < p; k++) count[k] = 0;
    for (unsigned i = 0; i < n; i++) {
        char name[JR_INTERNAL_QUEUE_MAX + 1];
        jr_partition_name(name, sizeof name, q, j[i]);
        unsigned slot = jr_slot_of_tag(name, strlen(name)), k = 0, lo = 0;
        for (; k < p; k++) { /* primary k: slots [lo, lo + size) */
            unsigned size = JR_SLOTS / p + (k < JR_SLOTS % p);
            if (slot < lo + size) break;
            lo += size;
        }
        count[k]++;
    }
}

Test(partition, partitions_spread_over_contiguous_primaries) {
    unsigned c[8];
    per_primary("orders", 8, 3, c);
    cr_expect(c[0] >= 2 && c[0] <= 3 && c[1] >= 2 && c[1] <= 3 && c[2] >= 2 && c[2] <= 3 && c[0] + c[1] + c[2] == 8,
              "8 over 3: %u/%u/%u", c[0], c[1], c[2]);
    per_primary("orders", 9, 3, c);
    cr_expect(c[0] == 3 && c[1] == 3 && c[2] == 3, "9 over 3: %u/%u/%u", c[0], c[1], c[2]);
    per_primary("emails", 12, 4, c);
    cr_expect(c[0] == 3 && c[1] == 3 && c[2] == 3 && c[3] == 3, "12 over 4: %u/%u/%u/%u", c[0], c[1], c[2], c[3]);
    /* the trap: the plain tags orders#0..orders#7 */
    unsigned plain[3] = {0};
    for (int i = 0; i < 8; i++) {
        char t[16];
        int len = snprintf(t, sizeof t, "orders#%d", i);
        unsigned s = jr_slot_of_tag(t, (size_t)len);
        plain[s < 5461 ? 0 : s < 10923 ? 1 : 2]++;
    }
    cr_log_info("plain tags over 3 primaries: %u/%u/%u", plain[0], plain[1], plain[2]);
}
