/* ipufs/start.h: starting tile code and reading what it did, as a host
 * does it through the tile debug interface (docs/execution.md, "The host's
 * sequence"; docs/debugging.md): DBG_IOWNER picks the context (the
 * supervisor: the IPU's syncs wait for the tile from then on), DBG_RBRK
 * (the C600's RUN_BREAK) stops it, `bri ENTRY` written to DBG_IEXEC gives
 * it a PC once the injection retires (TDI_STS.BUSY clears), DBG_ECLR
 * (EXCEPTION_CLEAR) starts it there; DBG_DATA carries a value out.
 * Included by ipufs/ipu.h, whose constants it uses; ipufs_register_() is
 * load.h's. */
#ifndef IPUFS_START_H
#define IPUFS_START_H

#ifndef IPUFS_IPU_H
#error "include ipufs/ipu.h, which includes this file"
#endif

#include <time.h>

/* How long ipufs_tdi_retired() polls a busy injection, and how often. */
#define IPUFS_RETIRE_TIMEOUT_NS 10000000000LL
#define IPUFS_RETIRE_POLL_NS 200000L

/* Store n (at most 2) adjacent u32 registers from `offset` in one pwrite. */
static inline int ipufs_store_words_(int config_fd, unsigned offset, const uint32_t *values, size_t n)
{
    unsigned char b[8];
    n = n < 2 ? n : 2;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            b[4 * i + k] = (unsigned char)(values[i] >> 8 * k);
    ssize_t done = pwrite(config_fd, b, 4 * n, offset);
    return done == (ssize_t)(4 * n) ? 0 : done < 0 ? -errno : -EIO;
}

static inline int ipufs_store_(int config_fd, unsigned offset, uint32_t value)
{
    return ipufs_store_words_(config_fd, offset, &value, 1);
}

/* One TDI register command on `tile` (IPU_TDI_READ_REG or IPU_TDI_WRITE_REG):
 * the TDI_RESULT (IPU_TDI_RESULT_*, >= 0), or -errno; *value in/out. The
 * aperture's fields and its answer are adjacent words (docs/registers.md):
 * TDI_TILE and TDI_REG go in one pwrite, TDI_DATA_LO and _HI in another,
 * and DATA_LO, DATA_HI and TDI_RESULT come back in one pread. */
static inline int ipufs_tdi_register(int config_fd, uint32_t command, uint32_t tile, uint32_t reg,
                                     uint32_t *value)
{
    const uint32_t target[2] = {tile, reg}, data[2] = {*value, 0};
    unsigned char answer[12];
    int err;
    if ((err = ipufs_store_words_(config_fd, IPU_REG_TDI_TILE, target, 2)) ||
        (command == IPU_TDI_WRITE_REG && (err = ipufs_store_words_(config_fd, IPU_REG_TDI_DATA_LO, data, 2))) ||
        (err = ipufs_store_(config_fd, IPU_REG_CMD_TDI, command)))
        return err;
    ssize_t n = pread(config_fd, answer, sizeof answer, IPU_REG_TDI_DATA_LO);
    if (n != (ssize_t)sizeof answer)
        return n < 0 ? -errno : -EIO;
    uint32_t result = ipufs_le32_(answer + 8);
    if (command == IPU_TDI_READ_REG && result == IPU_TDI_RESULT_OK)
        *value = ipufs_le32_(answer);
    return (int)result;
}

static inline long long ipufs_now_ns_(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Wait until the injection into `tile` has retired (TDI_STS.BUSY clear):
 * 0; -EBUSY if it found its context active (TDI_STS.CNQ), -EIO if it left
 * another error flag (INV: it faulted on an excepted context); -ETIMEDOUT
 * if it stays busy for IPUFS_RETIRE_TIMEOUT_NS; or pread/pwrite's errno. */
static inline int ipufs_tdi_retired(int config_fd, uint32_t tile)
{
    long long deadline = ipufs_now_ns_() + IPUFS_RETIRE_TIMEOUT_NS;
    const struct timespec poll = {0, IPUFS_RETIRE_POLL_NS};
    for (;;) {
        uint32_t status = 0;
        int r = ipufs_tdi_register(config_fd, IPU_TDI_READ_REG, tile, IPU_TDI_REG_TDI_STS, &status);
        if ((r = ipufs_tdi_errno_(r)) != 0)
            return r;
        if (!(status & IPU_TDI_STS_BUSY))
            return status & IPU_TDI_STS_CNQ ? -EBUSY
                   : status & (IPU_TDI_STS_INV | IPU_TDI_STS_DBLE) ? -EIO : 0;
        if (ipufs_now_ns_() > deadline)
            return -ETIMEDOUT;
        nanosleep(&poll, NULL);
    }
}

/* One TDI register write on `tile`: 0 or -errno (ipufs_tdi_errno_()). */
static inline int ipufs_tdi_write_(int config_fd, uint32_t tile, uint32_t reg, uint32_t value)
{
    return ipufs_tdi_errno_(ipufs_tdi_register(config_fd, IPU_TDI_WRITE_REG, tile, reg, &value));
}

/* Start `context` (0: the supervisor) of tiles[0..ntiles) at `entry` (a
 * 4-byte aligned tile address), as Graphcore's TDI text and a real host's
 * code do: each is stopped with DBG_RBRK and given `bri ENTRY`; once every
 * injection has retired, DBG_RBRK is cleared and DBG_ECLR starts each.
 * Every tile is named (DBG_IOWNER) and stopped before any starts, so that
 * a sync of the first tiles waits for the last: 0, or -errno naming the
 * first refusal:
 *   -EINVAL  entry not 4-byte aligned or past 21 bits, or context past 6;
 *   -ERANGE  a tile past TILE_COUNT;
 *   -EBUSY   the context is active (TDI_RESULT NOT_QUIESCENT, or CNQ when
 *            the start retired);
 *   -EIO     any other TDI refusal (an error flag of TDI_STS still set:
 *            clear it with TDI_CLR);
 *   -ETIMEDOUT  a start stayed busy (ipufs_tdi_retired());
 * or pread/pwrite's errno. Tiles before the refused one may have started. */
static inline int ipufs_start(int config_fd, uint32_t entry, const uint32_t *tiles, size_t ntiles,
                              uint32_t context)
{
    if (entry % 4 || entry >= 1u << 21 || context > 6)
        return -EINVAL;
    int r;
    for (size_t i = 0; i < ntiles; i++)
        if ((r = ipufs_tdi_write_(config_fd, tiles[i], IPU_TDI_REG_DBG_IOWNER, context)) != 0)
            return r;
    for (size_t i = 0; i < ntiles; i++)
        if ((r = ipufs_tdi_write_(config_fd, tiles[i], IPU_TDI_REG_DBG_RBRK, 1u << context)) != 0 ||
            (r = ipufs_tdi_write_(config_fd, tiles[i], IPU_TDI_REG_DBG_IEXEC, IPUFS_BRI_WORD | entry >> 2)) != 0)
            return r;
    for (size_t i = 0; i < ntiles; i++)
        if ((r = ipufs_tdi_retired(config_fd, tiles[i])) != 0)
            return r;
    for (size_t i = 0; i < ntiles; i++)
        if ((r = ipufs_tdi_write_(config_fd, tiles[i], IPU_TDI_REG_DBG_RBRK, 0)) != 0 ||
            (r = ipufs_tdi_write_(config_fd, tiles[i], IPU_TDI_REG_DBG_ECLR, 1u << context)) != 0)
            return r;
    return 0;
}

/* DBG_DATA of `tile` (what its code last stored with `put $DBG_DATA, $mN`):
 * 0 and *value, or -errno. */
static inline int ipufs_debug_data(int config_fd, uint32_t tile, uint32_t *value)
{
    return ipufs_tdi_errno_(ipufs_tdi_register(config_fd, IPU_TDI_READ_REG, tile, IPU_TDI_REG_DBG_DATA, value));
}

/* Inject `word` into `context` of `tile` (which must be stopped: excepted,
 * or an inactive worker; stop another with DBG_RBRK) and wait for it to
 * retire: 0, or -errno as ipufs_start(). */
static inline int ipufs_inject_(int config_fd, uint32_t tile, uint32_t context, uint32_t word)
{
    int r = ipufs_tdi_register(config_fd, IPU_TDI_WRITE_REG, tile, IPU_TDI_REG_DBG_IOWNER, &context);
    if ((r = ipufs_tdi_errno_(r)) != 0 ||
        (r = ipufs_tdi_errno_(ipufs_tdi_register(config_fd, IPU_TDI_WRITE_REG, tile, IPU_TDI_REG_DBG_IEXEC,
                                                 &word))) != 0)
        return r;
    return ipufs_tdi_retired(config_fd, tile);
}

/* Stop `context` of `tile` for injections as a real host does: a running
 * context, or the inactive supervisor, is stopped with its DBG_RBRK bit
 * (and waited for until CTXT_STS shows it excepted); an excepted one, or an
 * inactive worker, is left as it is. *rbrk gets DBG_RBRK as it was, *held
 * whether it was stopped here (for ipufs_let_go_()): 0 or -errno. */
static inline int ipufs_hold_(int config_fd, uint32_t tile, uint32_t context, uint32_t *rbrk, int *held)
{
    uint32_t sts = 0;
    int r;
    *held = 0;
    if (context > 6)
        return -EINVAL;
    if ((r = ipufs_tdi_errno_(ipufs_tdi_register(config_fd, IPU_TDI_READ_REG, tile, IPU_TDI_REG_DBG_RBRK, rbrk))) ||
        (r = ipufs_tdi_errno_(ipufs_tdi_register(config_fd, IPU_TDI_READ_REG, tile, IPU_TDI_REG_CTXT_STS, &sts))))
        return r;
    uint32_t state = sts >> 2 * context & 3;
    if (state >= 2 || (state == 0 && context != 0))
        return 0;
    if ((r = ipufs_tdi_write_(config_fd, tile, IPU_TDI_REG_DBG_RBRK, *rbrk | 1u << context)) != 0)
        return r;
    *held = 1;
    long long deadline = ipufs_now_ns_() + IPUFS_RETIRE_TIMEOUT_NS;
    const struct timespec poll = {0, IPUFS_RETIRE_POLL_NS};
    for (;;) {
        if ((r = ipufs_tdi_errno_(ipufs_tdi_register(config_fd, IPU_TDI_READ_REG, tile, IPU_TDI_REG_CTXT_STS,
                                                     &sts))) != 0)
            return r;
        if ((sts >> 2 * context & 3) >= 2)
            return 0;
        if (ipufs_now_ns_() > deadline)
            return -ETIMEDOUT;
        nanosleep(&poll, NULL);
    }
}

/* Let go of a context ipufs_hold_() stopped: DBG_RBRK as it was, then
 * DBG_ECLR unless its bit was set before. `err` is the work's result: it is
 * returned unless it was 0 and letting go failed. */
static inline int ipufs_let_go_(int config_fd, uint32_t tile, uint32_t context, uint32_t rbrk, int held, int err)
{
    int r = 0;
    if (held && (r = ipufs_tdi_write_(config_fd, tile, IPU_TDI_REG_DBG_RBRK, rbrk)) == 0 && !(rbrk & 1u << context))
        r = ipufs_tdi_write_(config_fd, tile, IPU_TDI_REG_DBG_ECLR, 1u << context);
    return err != 0 ? err : r;
}

/* Breakpoints (docs/debugging.md, "Breakpoints"): a context's CSR `csr`
 * (IPUFS_CSR_*) set to `value` through DBG_DATA, by injecting
 * `get $m<scratch>, $DBG_DATA` then `put CSR, $m<scratch>` (the scratch
 * register is overwritten), the context stopped for it if it is not
 * (ipufs_hold_()): 0, or -errno as ipufs_start() (-EINVAL: csr or
 * scratch out of range). */
static inline int ipufs_write_csr(int config_fd, uint32_t tile, uint32_t context, uint32_t csr, uint32_t value,
                                  uint32_t scratch)
{
    uint32_t rbrk;
    int held, r;
    if (csr > 0xFF || scratch > 15)
        return -EINVAL;
    if ((r = ipufs_hold_(config_fd, tile, context, &rbrk, &held)) != 0)
        return r;
    r = ipufs_tdi_errno_(ipufs_tdi_register(config_fd, IPU_TDI_WRITE_REG, tile, IPU_TDI_REG_DBG_DATA, &value));
    if (r == 0)
        r = ipufs_inject_(config_fd, tile, context, IPUFS_GET_WORD | scratch << 16 | IPUFS_CSR_DBG_DATA);
    if (r == 0)
        r = ipufs_inject_(config_fd, tile, context, IPUFS_PUT_WORD | scratch << 20 | csr);
    return ipufs_let_go_(config_fd, tile, context, rbrk, held, r);
}

/* $m<reg> of a context into *value (`put $DBG_DATA, $mN` injected, then
 * DBG_DATA), the context stopped for it if it is not: 0 or -errno as
 * ipufs_start(). */
static inline int ipufs_read_m(int config_fd, uint32_t tile, uint32_t context, uint32_t reg, uint32_t *value)
{
    uint32_t rbrk;
    int held, r;
    if (reg > 15)
        return -EINVAL;
    if ((r = ipufs_hold_(config_fd, tile, context, &rbrk, &held)) != 0)
        return r;
    r = ipufs_inject_(config_fd, tile, context, IPUFS_PUT_DBG_DATA_WORD | reg << 20);
    if (r == 0)
        r = ipufs_debug_data(config_fd, tile, value);
    return ipufs_let_go_(config_fd, tile, context, rbrk, held, r);
}

/* A context's CSR `csr` (IPUFS_CSR_*; $PC: where it stopped) into *value,
 * through $m<scratch> (overwritten) and DBG_DATA, the context stopped for
 * it if it is not: 0 or -errno. */
static inline int ipufs_read_csr(int config_fd, uint32_t tile, uint32_t context, uint32_t csr, uint32_t *value,
                                 uint32_t scratch)
{
    uint32_t rbrk;
    int held, r;
    if (csr > 0xFF || scratch > 15)
        return -EINVAL;
    if ((r = ipufs_hold_(config_fd, tile, context, &rbrk, &held)) != 0)
        return r;
    r = ipufs_inject_(config_fd, tile, context, IPUFS_GET_WORD | scratch << 16 | csr);
    if (r == 0)
        r = ipufs_read_m(config_fd, tile, context, scratch, value);
    return ipufs_let_go_(config_fd, tile, context, rbrk, held, r);
}

/* Let `context` of `tile`, stopped at a break, go on where it stopped
 * (DBG_ECLR: its first instruction ignores instruction and data breaks).
 * 0, or -errno as ipufs_start(). */
static inline int ipufs_resume(int config_fd, uint32_t tile, uint32_t context)
{
    if (context > 6)
        return -EINVAL;
    return ipufs_tdi_write_(config_fd, tile, IPU_TDI_REG_DBG_ECLR, 1u << context);
}

#endif /* IPUFS_START_H */
