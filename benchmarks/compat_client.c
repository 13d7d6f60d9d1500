/* compat_client: what the compatibility library costs, printing one number
 * per line (nanoseconds) for benchmarks/run.py. Run it with and without
 * LD_PRELOAD=libipufs-compat.so.
 *
 *   compat_client attach DIR IPU N FORM   ATTACH then SET_IPU_ID, N times: FORM "real" issues them as the
 *                                         real driver's client does (_IOWR(0xED, 10, u64) with NULL, which
 *                                         needs the library), "ipu.h" as ipu.h defines them
 *   compat_client stat PATH N             stat(PATH): N batches of 100, the mean of each
 *   compat_client ioctl PATH N            ioctl(FIONREAD) on PATH: N batches of 100, the mean of each
 *   compat_client mmio DIR IPU N KIND     one access to SCRATCH, N times: KIND "store" or "load" through a
 *                                         shared mapping of ipuIPU (with the library, a store is trapped and
 *                                         done as a pwrite: docs/compat.md), "pwrite" by pwrite
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ipufs/ipu.h"

#define REAL_ATTACH _IOWR(0xED, 10, uint64_t)
#define BATCH 100

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) { perror(what); exit(1); }

int main(int argc, char **argv)
{
    if (argc >= 6 && !strcmp(argv[1], "attach")) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ipu%s", argv[2], argv[3]);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) die(path);
        int real = !strcmp(argv[5], "real");
        unsigned long attach = real ? REAL_ATTACH : IPU_IOCTL_ATTACH;
        for (int i = 0, n = atoi(argv[4]); i < n; i++) {
            uint64_t t0 = now_ns();
            if (ioctl(fd, attach, NULL) != 0) die("ATTACH");
            if (ioctl(fd, IPU_IOCTL_SET_IPU_ID, (unsigned long)i) != 0) die("SET_IPU_ID");
            printf("%llu\n", (unsigned long long)(now_ns() - t0));
        }
        return 0;
    }
    if (argc == 4 && (!strcmp(argv[1], "stat") || !strcmp(argv[1], "ioctl"))) {
        int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
        if (fd < 0) die(argv[2]);
        int use_stat = !strcmp(argv[1], "stat");
        for (int b = 0, n = atoi(argv[3]); b < n; b++) {
            uint64_t t0 = now_ns();
            for (int i = 0; i < BATCH; i++) {
                struct stat st;
                int pending;
                if (use_stat ? stat(argv[2], &st) : ioctl(fd, FIONREAD, &pending)) die(argv[1]);
            }
            printf("%.1f\n", (double)(now_ns() - t0) / BATCH);
        }
        return 0;
    }
    if (argc == 6 && !strcmp(argv[1], "mmio")) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ipu%s", argv[2], argv[3]);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) die(path);
        volatile uint32_t *bar = mmap(NULL, 0x4000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (bar == MAP_FAILED) die("mmap");
        volatile uint32_t *scratch = bar + IPU_REG_SCRATCH / 4;
        int kind = !strcmp(argv[5], "store") ? 0 : !strcmp(argv[5], "load") ? 1 : 2;
        uint32_t sink = 0;
        for (int i = 0, n = atoi(argv[4]); i < n; i++) {
            uint32_t v = (uint32_t)i;
            uint64_t t0 = now_ns();
            if (kind == 0)
                *scratch = v;
            else if (kind == 1)
                sink += *scratch;
            else if (pwrite(fd, &v, 4, IPU_REG_SCRATCH) != 4)
                die("pwrite");
            printf("%llu\n", (unsigned long long)(now_ns() - t0));
        }
        return sink == 0xFFFFFFFFu;
    }
    fprintf(stderr, "usage: see the comment at the top of compat_client.c\n");
    return 2;
}
