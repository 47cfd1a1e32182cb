/* Priorities: how a worker shares its fetches among its queues (issue 8
 * §3). Pure functions, no I/O: the worker keeps the state, these compute. */
#ifndef JR_PRIO_H
#define JR_PRIO_H

#include <stddef.h>
#include <stdint.h>

/* Split `budget` entries over the n queues with on[q] (weights NULL = all
 * 1) into counts[] (counts[q] = 0 where !on[q]; they sum to budget when any
 * queue is on). credit[] (n values, start at 0) is carried from call to
 * call, in units of 1/(sum of the weights on): each queue's credit grows by
 * budget x weight, it gets the whole entries its credit holds, and the
 * units left over go to the largest credits (credit left from calls with
 * other queues on that adds up past the budget is given back from the
 * smallest). Over many calls with the same queues on, each queue's total is
 * within one entry of its exact share, however small each budget. */
void jr_prio_split(const int64_t *weights, int64_t *credit, size_t n, const unsigned char *on, size_t budget,
                   int64_t *counts);

/* The order to start m fetched entries in: queue[i] (< n) is entry i's
 * queue, the entries of each queue adjacent and in their order. Weighted
 * (strict = 0): the queues that still have entries take turns by smooth
 * weighted round robin, so the jobs of one fetch start in the proportions of
 * the weights too; strict: queue by queue, lowest index first. Entries of
 * one queue keep their order. perm[k] = the index of the k-th entry to
 * start. scratch: 3 x n int64_t. */
void jr_prio_order(const int64_t *weights, size_t n, int strict, const uint32_t *queue, size_t m, size_t *perm,
                   int64_t *scratch);

#endif
