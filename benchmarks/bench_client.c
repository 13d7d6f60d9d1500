/* bench_client: timing measurements against ipufs device nodes (and their
 * baselines), printing one number per line (nanoseconds or MiB/s) so that
 * benchmarks/run.py can take medians and tails.
 *
 *   bench_client doorbell-mapped DIR IPU N   store CMD_SYNC through the mapping -> signal 46
 *   bench_client doorbell-pwrite DIR IPU N   pwrite CMD_SYNC -> signal 46
 *   bench_client doorbell-ioctl DIR IPU N    MAILBOX_WRITE_ONLY -> signal 45 (ICU doorbell)
 *   bench_client ioctl DIR IPU N             SET_IPU_ID round trip
 *   bench_client ioctl-count DIR IPU N       MAILBOX_READ_ONLY round trip, its count form (8 bytes): the
 *                                           request ioctl-rate makes
 *   bench_client event-latency DIR IPU N     attach; for N signals, the time from the daemon's stamp in
 *                                           SCRATCH (CLOCK_MONOTONIC, low 32 bits) to sigtimedwait's return
 *   bench_client ioctl-rate DIR IPU SECONDS  MAILBOX_READ_ONLY (8 bytes) as fast as it goes: prints the count
 *   bench_client sigqueue-floor N [GAP_US [CPU]]
 *                                           sigqueue to another process -> its sigtimedwait, each send
 *                                           GAP_US after the last answer (default 0: back to back), the
 *                                           sender moved to CPU (the receiver stays where it started)
 *   bench_client copy PATH BYTES N           memcpy into a MAP_SHARED mapping of PATH (MiB/s)
 *   bench_client copy-memfd BYTES N          the same into a plain memfd mapping (MiB/s)
 *   bench_client pio PATH BYTES N            pwrite+pread of BYTES at offset 0 of PATH (MiB/s)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipufs/ipu.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) { perror(what); exit(1); }

static void *map_file(int fd, size_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) die("fstat");
    *size = (size_t)st.st_size;
    void *p = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) die("mmap");
    return p;
}

static int wait_signal(int sig)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    struct timespec timeout = { 5, 0 };
    siginfo_t info;
    int got = sigtimedwait(&set, &info, &timeout);
    if (got != sig) { fprintf(stderr, "no signal %d: %s\n", sig, strerror(errno)); exit(1); }
    return info.si_int;
}

static int open_node(const char *dir, int ipu, const char *suffix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ipu%d%s", dir, ipu, suffix);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) die(path);
    return fd;
}

static void block_driver_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    for (int s = PCIE_IPU_EXCEPTION_SIG; s <= PCIE_HSPGS2E1_SIG; s++) sigaddset(&set, s);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) die("sigprocmask");
}

static int doorbell(const char *mode, const char *dir, int ipu, int n)
{
    block_driver_signals();
    int fd = open_node(dir, ipu, "");
    size_t size;
    volatile uint32_t *regs = map_file(fd, &size);
    if (ioctl(fd, IPU_IOCTL_ATTACH, NULL) != 0) die("ATTACH");
    if (ioctl(fd, IPU_IOCTL_SET_IPU_ID, (long)7) != 0) die("SET_IPU_ID");
    uint32_t zone = IPU_SYNC_ZONE_GS1;
    uint32_t request[5] = { IPU_ICU_OP_WORD(0, IPU_ICU_READ_CLOCK), 0, 0, 0, 0 };
    uint32_t answer[5];
    for (int i = 0; i < n + 5; i++) {
        uint64_t t0 = now_ns();
        if (!strcmp(mode, "doorbell-mapped")) {
            regs[IPU_REG_CMD_SYNC / 4] = zone;
            wait_signal(PCIE_HSPGS1E0_SIG);
        } else if (!strcmp(mode, "doorbell-pwrite")) {
            if (pwrite(fd, &zone, 4, IPU_REG_CMD_SYNC) != 4) die("pwrite");
            wait_signal(PCIE_HSPGS1E0_SIG);
        } else {
            if (ioctl(fd, IPU_IOCTL_MAILBOX_WRITE_ONLY, request) != 0) die("MAILBOX_WRITE_ONLY");
            wait_signal(PCIE_ICU_DR_SIG);
            if (ioctl(fd, IPU_IOCTL_MAILBOX_READ_ONLY, answer) != 0) die("MAILBOX_READ_ONLY");
        }
        uint64_t t1 = now_ns();
        if (i >= 5) printf("%llu\n", (unsigned long long)(t1 - t0));
    }
    return 0;
}

/* MAILBOX_READ_ONLY with an 8-byte argument: the count of responses waiting. */
#define MAILBOX_COUNT _IOC(_IOC_READ, IPU_IOCTL_TYPE, 29, 8)

static int ioctl_rtt(const char *dir, int ipu, int n, int count_form)
{
    int fd = open_node(dir, ipu, "");
    if (ioctl(fd, IPU_IOCTL_ATTACH, NULL) != 0) die("ATTACH");
    uint64_t waiting;
    for (int i = 0; i < n + 100; i++) {
        uint64_t t0 = now_ns();
        if (count_form) {
            if (ioctl(fd, MAILBOX_COUNT, &waiting) != 0) die("MAILBOX_READ_ONLY");
        } else if (ioctl(fd, IPU_IOCTL_SET_IPU_ID, (long)i) != 0) {
            die("SET_IPU_ID");
        }
        uint64_t t1 = now_ns();
        if (i >= 100) printf("%llu\n", (unsigned long long)(t1 - t0));
    }
    return 0;
}

static int event_latency(const char *dir, int ipu, int n)
{
    block_driver_signals();
    int fd = open_node(dir, ipu, "");
    size_t size;
    volatile uint32_t *regs = map_file(fd, &size);
    if (ioctl(fd, IPU_IOCTL_ATTACH, NULL) != 0) die("ATTACH");
    printf("ready\n");
    fflush(stdout);
    sigset_t set;
    sigemptyset(&set);
    for (int s = PCIE_IPU_EXCEPTION_SIG; s <= PCIE_HSPGS2E1_SIG; s++) sigaddset(&set, s);
    for (int i = 0; i < n; i++) {
        struct timespec timeout = { 10, 0 };
        siginfo_t info;
        if (sigtimedwait(&set, &info, &timeout) < 0) die("sigtimedwait");
        uint32_t now = (uint32_t)now_ns();
        printf("%u\n", now - regs[IPU_REG_SCRATCH / 4]);
        fflush(stdout);
    }
    return 0;
}

static int ioctl_rate(const char *dir, int ipu, double seconds)
{
    int fd = open_node(dir, ipu, "");
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9), count = 0, waiting;
    while (now_ns() < end) {
        for (int i = 0; i < 64; i++, count++)
            if (ioctl(fd, MAILBOX_COUNT, &waiting) != 0) die("MAILBOX_READ_ONLY");
    }
    printf("%llu\n", (unsigned long long)count);
    return 0;
}

static int sigqueue_floor(int n, int gap_us, int sender_cpu)
{
    block_driver_signals();
    volatile uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < n + 5; i++) {
            wait_signal(PCIE_HSPGS1E0_SIG);
            uint64_t t1 = now_ns();
            if (i >= 5) printf("%llu\n", (unsigned long long)(t1 - shared[0]));
            fflush(stdout);
            union sigval v = { .sival_int = 0 };
            sigqueue(getppid(), PCIE_HSPGS1E1_SIG, v);
        }
        _exit(0);
    }
    if (sender_cpu >= 0) {
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        CPU_SET(sender_cpu, &cpus);
        if (sched_setaffinity(0, sizeof cpus, &cpus) != 0) die("sched_setaffinity");
    }
    for (int i = 0; i < n + 5; i++) {
        union sigval v = { .sival_int = 7 };
        if (gap_us) usleep((useconds_t)gap_us);
        shared[0] = now_ns();
        if (sigqueue(child, PCIE_HSPGS1E0_SIG, v) != 0) die("sigqueue");
        wait_signal(PCIE_HSPGS1E1_SIG);
    }
    waitpid(child, NULL, 0);
    return 0;
}

static void copy_into(unsigned char *dst, size_t bytes, int n)
{
    unsigned char *src = malloc(bytes);
    memset(src, 0x5a, bytes);
    memcpy(dst, src, bytes);  /* fault the pages in first */
    for (int i = 0; i < n; i++) {
        src[0] = (unsigned char)i;
        uint64_t t0 = now_ns();
        memcpy(dst, src, bytes);
        uint64_t t1 = now_ns();
        printf("%.1f\n", (double)bytes / (1 << 20) / ((double)(t1 - t0) / 1e9));
    }
    free(src);
}

static int pio(const char *path, size_t bytes, int n)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) die(path);
    unsigned char *buf = malloc(bytes);
    memset(buf, 0x33, bytes);
    for (int i = 0; i < n + 3; i++) {
        uint64_t t0 = now_ns();
        if (pwrite(fd, buf, bytes, 0) != (ssize_t)bytes) die("pwrite");
        if (pread(fd, buf, bytes, 0) != (ssize_t)bytes) die("pread");
        uint64_t t1 = now_ns();
        if (i >= 3) printf("%.1f\n", 2.0 * (double)bytes / (1 << 20) / ((double)(t1 - t0) / 1e9));
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: see the comment at the top of bench_client.c\n"); return 2; }
    const char *mode = argv[1];
    if (!strncmp(mode, "doorbell-", 9) && argc == 5) return doorbell(mode, argv[2], atoi(argv[3]), atoi(argv[4]));
    if (!strcmp(mode, "ioctl") && argc == 5) return ioctl_rtt(argv[2], atoi(argv[3]), atoi(argv[4]), 0);
    if (!strcmp(mode, "ioctl-count") && argc == 5) return ioctl_rtt(argv[2], atoi(argv[3]), atoi(argv[4]), 1);
    if (!strcmp(mode, "event-latency") && argc == 5) return event_latency(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (!strcmp(mode, "ioctl-rate") && argc == 5) return ioctl_rate(argv[2], atoi(argv[3]), atof(argv[4]));
    if (!strcmp(mode, "sigqueue-floor")) return sigqueue_floor(atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 0,
                                                               argc > 4 ? atoi(argv[4]) : -1);
    if (!strcmp(mode, "copy") && argc == 5) {
        int fd = open(argv[2], O_RDWR | O_CLOEXEC);
        if (fd < 0) die(argv[2]);
        size_t size;
        unsigned char *p = map_file(fd, &size);
        size_t bytes = strtoull(argv[3], NULL, 0);
        if (bytes > size) { fprintf(stderr, "%zu bytes do not fit in %zu\n", bytes, size); return 1; }
        copy_into(p, bytes, atoi(argv[4]));
        return 0;
    }
    if (!strcmp(mode, "copy-memfd") && argc == 4) {
        size_t bytes = strtoull(argv[2], NULL, 0);
        int fd = memfd_create("bench", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) die("memfd");
        size_t size;
        copy_into(map_file(fd, &size), bytes, atoi(argv[3]));
        return 0;
    }
    if (!strcmp(mode, "pio") && argc == 5) return pio(argv[2], strtoull(argv[3], NULL, 0), atoi(argv[4]));
    fprintf(stderr, "bad arguments\n");
    return 2;
}
