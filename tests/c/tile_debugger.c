/* tile_debugger: a C debugger's round trip, using only ipufs/ipu.h (through
 * tile_kit.h). Usage:
 *   tile_debugger DIR IPU KERNEL.elf ADDRESS
 * Loads the kernel onto tile 0, sets an instruction breakpoint at ADDRESS
 * on its supervisor (ipufs_write_csr), starts it, waits for signal 44 and
 * prints "signal 44", then "cause C address A etype E brk_id B pc P m4 M"
 * (EXC_CAUSE, EXC_ADDRESS, the ETYPE of $SSR, $DBG_BRK_ID, $PC and $m4 of
 * the stopped supervisor), clears the exception, resumes it at its PC,
 * waits for the next signal and prints "signal N dbg D" (DBG_DATA). */
#include <poll.h>

#include "tile_kit.h"

static int next_signal(int sfd, uint32_t *signo)
{
    struct pollfd p = {.fd = sfd, .events = POLLIN};
    struct signalfd_siginfo info;
    if (poll(&p, 1, 20000) != 1 || read(sfd, &info, sizeof info) != sizeof info)
        return -1;
    *signo = info.ssi_signo;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: %s DIR IPU KERNEL.elf ADDRESS\n", argv[0]); return 2; }
    struct tile_kit k;
    if (tile_kit_open(&k, argv[1], argv[2], argv[3]))
        return 1;
    int sfd = k.signals, config = k.config;
    const uint32_t tile = 0, here = (uint32_t)strtoul(argv[4], NULL, 0);
    int err;
    if ((err = ipufs_load_elf(config, k.exchange, k.image, k.size, &tile, 1)))
        return fail("ipufs_load_elf", err);
    if ((err = ipufs_write_csr(config, tile, 0, IPUFS_CSR_DBG_IBRK0_PC, here, 14)) ||
        (err = ipufs_write_csr(config, tile, 0, IPUFS_CSR_DBG_IBRK0_CTL, IPUFS_IBRK_ENS, 14)))
        return fail("ipufs_write_csr", err);
    if ((err = ipufs_start(config, ipufs_le32_(k.image + 24), &tile, 1, 0)))
        return fail("ipufs_start", err);
    uint32_t signo, cause, address, ssr, brk_id, pc, m4, dbg;
    if (next_signal(sfd, &signo))
        return fail("no signal within 20 s", -1);
    printf("signal %u\n", signo);
    if ((err = ipufs_register_(config, IPU_REG_EXC_CAUSE, &cause)) ||
        (err = ipufs_register_(config, IPU_REG_EXC_ADDRESS, &address)) ||
        (err = ipufs_read_csr(config, tile, 0, IPUFS_CSR_SSR, &ssr, 14)) ||
        (err = ipufs_read_csr(config, tile, 0, IPUFS_CSR_DBG_BRK_ID, &brk_id, 14)) ||
        (err = ipufs_read_csr(config, tile, 0, IPUFS_CSR_PC, &pc, 14)) ||
        (err = ipufs_read_m(config, tile, 0, 4, &m4)))
        return fail("inspect", err);
    printf("cause %u address 0x%x etype %u brk_id %u pc 0x%x m4 %u\n", cause, address, ssr >> 4 & 0xF, brk_id, pc, m4);
    if ((err = ipufs_store_(config, IPU_REG_CMD_EXC_CLEAR, 1)) || (err = ipufs_resume(config, tile, 0)))
        return fail("resume", err);
    if (next_signal(sfd, &signo))
        return fail("no signal within 20 s after the resume", -1);
    if ((err = ipufs_debug_data(config, tile, &dbg)))
        return fail("ipufs_debug_data", err);
    printf("signal %u dbg %u\n", signo, dbg);
    free(k.image);
    return 0;
}
