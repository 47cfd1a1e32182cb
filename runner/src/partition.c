/* Partitioned queues: the names, the hash and the id forms; see partition.h. */
#include "partition.h"

#include <stdio.h>
#include <string.h>

#include "jr.h"
#include "jr_limits.h"

_Static_assert(JR_INTERNAL_QUEUE_MAX >= JR_QUEUE_MAX + 8, "room for \"#\" and 7 digits of J");

uint16_t jr_crc16(const char *s, size_t n) {
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)((unsigned char)s[i] << 8);
        for (int b = 0; b < 8; b++) crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

unsigned jr_slot_of_tag(const char *tag, size_t n) { return jr_crc16(tag, n) & (JR_SLOTS - 1); }

/* One pass over J = 0, 1, ...: each slot range takes the first J that lands
 * in it, which is the smallest such J (coupon collecting: about n ln n
 * draws, ~7,800 for n = 1024). */
int jr_partition_numbers(const char *q, unsigned n, uint32_t *j) {
    size_t qlen = strlen(q);
    if (n < 1 || n > JR_PARTITIONS_MAX || qlen > JR_QUEUE_MAX) return JR_EINVAL;
    char buf[JR_INTERNAL_QUEUE_MAX + 1];
    memcpy(buf, q, qlen);
    buf[qlen] = '#';
    unsigned left = n;
    for (unsigned i = 0; i < n; i++) j[i] = UINT32_MAX;
    for (uint32_t J = 0; left && J <= JR_PARTITION_J_MAX; J++) {
        int d = snprintf(buf + qlen + 1, sizeof buf - qlen - 1, "%u", (unsigned)J);
        unsigned range = (unsigned)((uint64_t)jr_slot_of_tag(buf, qlen + 1 + (size_t)d) * n / JR_SLOTS);
        if (j[range] == UINT32_MAX) j[range] = J, left--;
    }
    return left ? JR_EINVAL : 0;
}

int jr_partition_name(char *buf, size_t len, const char *q, uint32_t j) {
    size_t qlen = strlen(q);
    if (qlen > JR_QUEUE_MAX || j > JR_PARTITION_J_MAX) {
        if (len) buf[0] = '\0';
        return JR_EINVAL;
    }
    int w = snprintf(buf, len, "%s#%u", q, (unsigned)j);
    if (w < 0 || (size_t)w >= len) {
        if (len) buf[0] = '\0';
        return JR_EINVAL;
    }
    return 0;
}

int jr_partition_split(const char *name, size_t n, size_t *qlen, uint32_t *j) {
    size_t d = 0;
    while (d < n && d < 8 && name[n - 1 - d] >= '0' && name[n - 1 - d] <= '9') d++;
    if (d == 0 || d > 7 || d + 1 >= n || name[n - 1 - d] != '#') return 0;
    uint32_t v = 0;
    for (size_t k = n - d; k < n; k++) v = v * 10 + (uint32_t)(name[k] - '0');
    *qlen = n - d - 1;
    *j = v;
    return 1;
}

uint32_t jr_partition_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

unsigned jr_partition_of(const char *s, size_t n, unsigned parts) {
    return parts > 1 ? jr_partition_hash(s, n) % parts : 0;
}

int jr_partition_id(char *buf, size_t len, const char *gen, unsigned i) {
    int w = snprintf(buf, len, "%s~%u", gen, i);
    if (w < 0 || (size_t)w >= len || (size_t)w > JR_JOB_ID_MAX) {
        if (len) buf[0] = '\0';
        return JR_EINVAL;
    }
    return 0;
}

int jr_partition_id_parse(const char *id, size_t n, size_t *gen_len, unsigned *i) {
    size_t d = 0;
    while (d < n && d < 5 && id[n - 1 - d] >= '0' && id[n - 1 - d] <= '9') d++;
    if (d == 0 || d > 4 || d + 1 >= n || id[n - 1 - d] != '~') return 0;
    size_t g = n - d - 1;
    if (!jr_contract_id_reserved(id, g) || memchr(id, '~', g)) return 0;
    unsigned v = 0;
    for (size_t k = n - d; k < n; k++) v = v * 10 + (unsigned)(id[k] - '0');
    if (v >= JR_PARTITIONS_MAX) return 0;
    *gen_len = g;
    *i = v;
    return 1;
}
