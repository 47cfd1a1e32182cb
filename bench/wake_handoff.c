/* bench/wake_handoff.c: what one hand-off to a blocked process costs on this
 * machine (the worker -> runner step of process isolation). The parent hands
 * a timestamp to a child blocked in read, every 2 ms, N times; the child
 * records now - timestamp and answers with one byte. MODE 0: the timestamp
 * goes down a socketpair (as exec.c sends a job); 1: it is written to shared
 * memory and an eventfd wakes the child. After the write the parent works
 * WORK_US before it blocks for the answer (a worker that goes on first).
 *
 *   cc -O2 -Wall -Wextra -o /tmp/wake_handoff bench/wake_handoff.c
 *   /tmp/wake_handoff MODE N WORK_US    -> p50/p90/p99 wake-up latency in us
 * Not built by CMake (a measurement of the kernel, not of jobrunner). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    int64_t x = *(int64_t *)a, y = *(int64_t *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: wake_handoff MODE N WORK_US\n");
        return 2;
    }
    int mode = atoi(argv[1]), n = atoi(argv[2]), work = atoi(argv[3]);
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    int efd = eventfd(0, 0);
    int64_t *shm = mmap(NULL, 8 * (n + 2), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t p = fork();
    if (!p) {
        for (int i = 0; i < n; i++) {
            int64_t t;
            if (mode == 0) {
                if (read(sv[1], &t, 8) != 8)
                    _exit(1);
            } else {
                uint64_t v;
                if (read(efd, &v, 8) != 8)
                    _exit(1);
                t = shm[n + 1];
            }
            shm[i] = now_ns() - t;
            char b = 'x';
            if (write(sv[1], &b, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    for (int i = 0; i < n; i++) {
        usleep(2000);
        int64_t t = now_ns();
        if (mode == 0) {
            if (write(sv[0], &t, 8) != 8)
                return 1;
        } else {
            shm[n + 1] = t;
            uint64_t one = 1;
            if (write(efd, &one, 8) != 8)
                return 1;
        }
        int64_t e = now_ns() + work * 1000LL;
        while (now_ns() < e) {
        }
        char b;
        if (read(sv[0], &b, 1) != 1)
            return 1;
    }
    waitpid(p, NULL, 0);
    qsort(shm, n, 8, cmp);
    printf("mode=%s work_us=%d p50_us=%.1f p90_us=%.1f p99_us=%.1f\n", mode ? "eventfd" : "socket", work,
           shm[n / 2] / 1e3, shm[n * 9 / 10] / 1e3, shm[n * 99 / 100] / 1e3);
    return 0;
}
