/* tile_host: an unmodified C host program running tile code, using only
 * ipufs/ipu.h (through tile_kit.h, the start this directory's tile hosts
 * share). Usage:
 *   tile_host DIR IPU KERNEL.elf NTILES
 * Writes each tile's slice of data (a count, 10 + t, then t*1000 + 17*i)
 * at 0x60000 through the exchange BAR, loads the kernel onto tiles
 * 0..NTILES-1, starts them through the TDI, waits for signal 46 (the
 * tiles synced with the host), then prints "signal N" and, per tile,
 * "tile T sum S dbg D": the word at 0x60190 and DBG_DATA. */
#include <poll.h>

#include "tile_kit.h"

#define DATA 0x60000u

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: %s DIR IPU KERNEL.elf NTILES\n", argv[0]); return 2; }
    struct tile_kit k;
    if (tile_kit_open(&k, argv[1], argv[2], argv[3]))
        return 1;
    int sfd = k.signals, config = k.config, exchange = k.exchange;
    unsigned char *image = k.image;
    if (ioctl(config, IPU_IOCTL_SET_IPU_ID, (unsigned long)strtoul(argv[2], NULL, 0)) != 0) {
        perror("SET_IPU_ID");
        return 1;
    }
    uint32_t window, base, first, ntiles = (uint32_t)strtoul(argv[4], NULL, 0);
    int err;
    if ((err = ipufs_register_(config, IPU_REG_TILE_WINDOW, &window)) ||
        (err = ipufs_register_(config, IPU_REG_TILE_MEM_BASE, &base)) ||
        (err = ipufs_register_(config, IPU_REG_TILE_EXCHANGE_BASE, &first)))
        return fail("registers", err);
    uint32_t *tiles = calloc(ntiles, sizeof *tiles);
    for (uint32_t t = 0; t < ntiles; t++) {
        uint32_t words[64];
        uint32_t n = 10 + t % 40;
        words[0] = n;
        for (uint32_t i = 0; i < n; i++)
            words[1 + i] = t * 1000u + 17u * i;
        if (pwrite(exchange, words, (n + 1) * 4, (off_t)first + (off_t)t * window + DATA - base) != (ssize_t)((n + 1) * 4))
            return fail("pwrite data", -1);
        tiles[t] = t;
    }
    if ((err = ipufs_load_elf(config, exchange, image, k.size, tiles, ntiles)))
        return fail("ipufs_load_elf", err);
    uint32_t entry = ipufs_le32_(image + 24);
    if ((err = ipufs_start(config, entry, tiles, ntiles, 0)))
        return fail("ipufs_start", err);
    struct pollfd p = {.fd = sfd, .events = POLLIN};
    if (poll(&p, 1, 60000) != 1)
        return fail("no signal within 60 s", -1);
    struct signalfd_siginfo info;
    if (read(sfd, &info, sizeof info) != sizeof info)
        return fail("read signalfd", -1);
    printf("signal %u\n", info.ssi_signo);
    for (uint32_t t = 0; t < ntiles; t++) {
        unsigned char b[4];
        uint32_t dbg = 0;
        if (pread(exchange, b, 4, (off_t)first + (off_t)t * window + DATA + 400 - base) != 4)
            return fail("pread result", -1);
        if ((err = ipufs_debug_data(config, t, &dbg)))
            return fail("ipufs_debug_data", err);
        printf("tile %u sum %u dbg %u\n", t, ipufs_le32_(b), dbg);
    }
    free(tiles);
    free(image);
    return 0;
}
