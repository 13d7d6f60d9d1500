/* tile_registers: a C host driving one tile through the per-tile TDI
 * registers of a mapping of config space, using only ipufs/ipu.h. Usage:
 *   tile_registers DIR IPU TILE VALUE WORD...
 * Maps DIR/ipuN and DIR/ipuN_ex whole (and keeps them open). Stores VALUE at tile address 0x60000
 * of TILE through the exchange mapping (TILE_EXCHANGE_BASE + TILE *
 * TILE_WINDOW), then, through the config mapping, DBG_IOWNER = 1 (an
 * inactive worker, which takes injections as it is) and each
 * WORD (an instruction, not 0) into DBG_IEXEC; after each it waits for
 * DBG_IEXEC to read 0 again (the device took it: TDI_STS.BUSY), then for
 * TDI_STS.BUSY to clear (it retired; a DBG_IEXEC stored before that would
 * be refused with DBLE), and fails if TDI_STS shows an error flag. Then
 * reads DBG_DATA, which must hold VALUE, and prints "dbg 0x..." and
 * "ctxt_sts 0x...", and the errno of a pwrite to the register of the first
 * tile instance past TILE_COUNT: "beyond errno N". Exit status 1 and a
 * line on stderr on failure. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ipufs/ipu.h"

#define DATA 0x60000u

/* Maps DIR/ipuIPU<suffix> whole; its descriptor stays open in *fd (the
 * daemon watches the registers of IPUs whose config space is open). */
static volatile uint32_t *map_node(const char *dir, const char *ipu, const char *suffix, size_t *size, int *fd)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ipu%s%s", dir, ipu, suffix);
    *fd = open(path, O_RDWR | O_CLOEXEC);
    off_t end = *fd < 0 ? -1 : lseek(*fd, 0, SEEK_END);  /* stat says 0 where the node is a character device */
    if (end < 0)
        return NULL;
    void *map = mmap(NULL, (size_t)end, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    *size = (size_t)end;
    return map == MAP_FAILED ? NULL : (volatile uint32_t *)map;
}

/* Waits up to 5 s for the bits `mask` of the word at `at` to read `want`. */
static int wait_for(volatile uint32_t *at, uint32_t mask, uint32_t want)
{
    struct timespec pause = {0, 50000};
    for (int i = 0; i < 100000; i++) {
        if ((*at & mask) == want)
            return 0;
        nanosleep(&pause, NULL);
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s DIR IPU TILE VALUE WORD...\n", argv[0]);
        return 2;
    }
    size_t config_size, exchange_size;
    int fd, exchange_fd;
    volatile uint32_t *config = map_node(argv[1], argv[2], "", &config_size, &fd);
    volatile uint32_t *exchange = map_node(argv[1], argv[2], "_ex", &exchange_size, &exchange_fd);
    if (config == NULL || exchange == NULL) { perror("map"); return 1; }
    uint32_t tile = (uint32_t)strtoul(argv[3], NULL, 0), value = (uint32_t)strtoul(argv[4], NULL, 0);
    uint32_t tdi = config[IPU_REG_TILE_TDI_BASE / 4], first = config[IPU_REG_TILE_EXCHANGE_BASE / 4];
    uint32_t window = config[IPU_REG_TILE_WINDOW / 4], base = config[IPU_REG_TILE_MEM_BASE / 4];
    uint32_t count = config[IPU_REG_TILE_COUNT / 4];
    if (tdi == 0) { fprintf(stderr, "no per-tile TDI registers\n"); return 1; }
    size_t at = (size_t)first + (size_t)tile * window + DATA - base;
    if (at + 4 > exchange_size) { fprintf(stderr, "window past the BAR\n"); return 1; }
    exchange[at / 4] = value;
    volatile uint32_t *iexec = &config[IPU_TILE_TDI_REG(tdi, tile, IPU_TDI_REG_DBG_IEXEC) / 4];
    volatile uint32_t *sts = &config[IPU_TILE_TDI_REG(tdi, tile, IPU_TDI_REG_TDI_STS) / 4];
    config[IPU_TILE_TDI_REG(tdi, tile, IPU_TDI_REG_DBG_IOWNER) / 4] = 1;
    for (int i = 5; i < argc; i++) {
        *iexec = (uint32_t)strtoul(argv[i], NULL, 0);
        if (wait_for(iexec, ~0u, 0) != 0) { fprintf(stderr, "DBG_IEXEC never read 0\n"); return 1; }
        if (wait_for(sts, IPU_TDI_STS_BUSY, 0) != 0) { fprintf(stderr, "TDI_STS stayed BUSY\n"); return 1; }
        if (*sts & (IPU_TDI_STS_CNQ | IPU_TDI_STS_INV | IPU_TDI_STS_DBLE)) {
            fprintf(stderr, "%s refused: TDI_STS 0x%x\n", argv[i], *sts);
            return 1;
        }
    }
    volatile uint32_t *data = &config[IPU_TILE_TDI_REG(tdi, tile, IPU_TDI_REG_DBG_DATA) / 4];
    if (*data != value) {  /* the put retired: its value is there (published before BUSY cleared) */
        fprintf(stderr, "DBG_DATA reads 0x%08x, TDI_STS 0x%x\n", *data, *sts);
        return 1;
    }
    printf("dbg 0x%08x\n", *data);
    printf("ctxt_sts 0x%x\n", config[IPU_TILE_TDI_REG(tdi, tile, IPU_TDI_REG_CTXT_STS) / 4]);
    uint32_t owner = 0;
    ssize_t n = pwrite(fd, &owner, 4, IPU_TILE_TDI_REG(tdi, count, IPU_TDI_REG_DBG_IOWNER));
    printf("beyond errno %d\n", n < 0 ? errno : 0);
    close(fd);
    close(exchange_fd);
    return 0;
}
