/* Starts every tile of an ipu21's /dev/ipu0 the way a real host's code
 * drives a C600's tile debug interface: every config access a volatile
 * 32-bit load or store through a MAP_SHARED mapping of the config BAR,
 * back to back, with no sleep and no pread/pwrite (docs/compat.md,
 * "Registers through a mapping"). Each supervisor gets `bri 0x4c000`
 * injected (the program at 0x4c000 loops on itself): RUN_BREAK stops it,
 * STATUS_CLEAR, OWNER, INSTRUCTION, a poll of STATUS until BUSY clears,
 * RUN_BREAK cleared, EXCEPTION_CLEAR resumes it. Prints how many
 * supervisors then run ("started N of M"), and with --probe what a load
 * right after each store saw (BUSY, the excepted state).
 *
 * Usage: mmio-start [--tiles N] [--probe] */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../native/include/ipufs/ipu.h"

#define BAR_SIZE 0x80000u
#define ENTRY 0x4c000u
#define BRI(target) (0x40800000u | (target) >> 2)
#define STATUS_ERRORS (IPU_TDI_STS_CNQ | IPU_TDI_STS_INV | IPU_TDI_STS_DBLE)

static volatile uint32_t *bar;

static volatile uint32_t *tdi(uint32_t tile, uint32_t reg)
{
    return bar + (IPUFS_IPU21_TILE_TDI_BASE + tile * 0x40u + reg * 4u) / 4u;
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
    uint32_t tiles = 1472;
    int probe = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tiles") && i + 1 < argc)
            tiles = (uint32_t)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--probe"))
            probe = 1;
    }
    int fd = open("/dev/ipu0", O_RDWR | O_CLOEXEC), ex = open("/dev/ipu0_ex", O_RDWR | O_CLOEXEC);
    if (fd < 0 || ex < 0) {
        perror("open");
        return 1;
    }
    /* The program, into every tile's memory through the exchange BAR,
     * before the config BAR is mapped (the layout read by pread). */
    uint32_t loop = BRI(ENTRY), base, window, mem, count;
    if (ipufs_register_(fd, IPU_REG_TILE_EXCHANGE_BASE, &base) || ipufs_register_(fd, IPU_REG_TILE_WINDOW, &window)
        || ipufs_register_(fd, IPU_REG_TILE_MEM_BASE, &mem) || ipufs_register_(fd, IPU_REG_TILE_COUNT, &count)) {
        perror("pread ipu0");
        return 1;
    }
    for (uint32_t t = 0; t < count; t++)
        if (pwrite(ex, &loop, 4, (off_t)base + (off_t)t * window + (ENTRY - mem)) != 4) {
            perror("pwrite ipu0_ex");
            return 1;
        }
    bar = mmap(NULL, BAR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (bar == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    long long start = now_ns();
    unsigned busy_seen = 0, stopped_seen = 0, failed = 0;
    for (uint32_t p = 0; p < tiles; p++) {
        long long deadline = now_ns() + 2000000000LL;
        *tdi(p, IPU_TDI_REG_DBG_RBRK) = 1;
        stopped_seen += probe && (*tdi(p, IPU_TDI_REG_CTXT_STS) & 3) >= 2;
        while ((*tdi(p, IPU_TDI_REG_CTXT_STS) & 3) < 2 && now_ns() < deadline)
            ;
        *tdi(p, IPU_TDI_REG_TDI_CLR) = 6;
        *tdi(p, IPU_TDI_REG_DBG_IOWNER) = 0;
        *tdi(p, IPU_TDI_REG_DBG_IEXEC) = BRI(ENTRY);
        uint32_t status = *tdi(p, IPU_TDI_REG_TDI_STS);
        busy_seen += (status & IPU_TDI_STS_BUSY) != 0;
        while ((status & IPU_TDI_STS_BUSY) && now_ns() < deadline)
            status = *tdi(p, IPU_TDI_REG_TDI_STS);
        failed += (status & (STATUS_ERRORS | IPU_TDI_STS_BUSY)) != 0;
        *tdi(p, IPU_TDI_REG_DBG_RBRK) = 0;
        *tdi(p, IPU_TDI_REG_DBG_ECLR) = 1;
    }
    long long took = now_ns() - start;
    unsigned running = 0;
    for (uint32_t p = 0; p < tiles; p++) {
        long long deadline = now_ns() + 2000000000LL;
        while ((*tdi(p, IPU_TDI_REG_CTXT_STS) & 3) != 1 && now_ns() < deadline)
            ;
        running += (*tdi(p, IPU_TDI_REG_CTXT_STS) & 3) == 1;
    }
    if (probe)
        printf("busy right after INSTRUCTION %u of %u, excepted right after RUN_BREAK %u of %u\n", busy_seen, tiles,
               stopped_seen, tiles);
    printf("failed %u\n", failed);
    printf("started %u of %u in %lld us\n", running, tiles, took / 1000);
    return running == tiles ? 0 : 1;
}
