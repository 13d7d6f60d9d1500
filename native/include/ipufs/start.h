/* ipufs/start.h: starting tile code and reading what it did, as a host
 * does it through the tile debug interface (docs/execution.md, "The host's
 * sequence"): DBG_IOWNER picks the context, `bri ENTRY` written to
 * DBG_IEXEC starts it, DBG_DATA carries a value out. Included by
 * ipufs/ipu.h, whose constants it uses; ipufs_register_() is load.h's. */
#ifndef IPUFS_START_H
#define IPUFS_START_H

#ifndef IPUFS_IPU_H
#error "include ipufs/ipu.h, which includes this file"
#endif

static inline int ipufs_store_(int config_fd, unsigned offset, uint32_t value)
{
    unsigned char b[4] = {(unsigned char)value, (unsigned char)(value >> 8), (unsigned char)(value >> 16),
                          (unsigned char)(value >> 24)};
    ssize_t n = pwrite(config_fd, b, 4, offset);
    return n == 4 ? 0 : n < 0 ? -errno : -EIO;
}

/* One TDI register command on `tile` (IPU_TDI_READ_REG or IPU_TDI_WRITE_REG):
 * the TDI_RESULT (IPU_TDI_RESULT_*, >= 0), or -errno; *value in/out. */
static inline int ipufs_tdi_register(int config_fd, uint32_t command, uint32_t tile, uint32_t reg,
                                     uint32_t *value)
{
    uint32_t result = 0;
    int err;
    if ((err = ipufs_store_(config_fd, IPU_REG_TDI_TILE, tile)) ||
        (err = ipufs_store_(config_fd, IPU_REG_TDI_REG, reg)) ||
        (command == IPU_TDI_WRITE_REG && ((err = ipufs_store_(config_fd, IPU_REG_TDI_DATA_LO, *value)) ||
                                          (err = ipufs_store_(config_fd, IPU_REG_TDI_DATA_HI, 0)))) ||
        (err = ipufs_store_(config_fd, IPU_REG_CMD_TDI, command)) ||
        (err = ipufs_register_(config_fd, IPU_REG_TDI_RESULT, &result)))
        return err;
    if (command == IPU_TDI_READ_REG && result == IPU_TDI_RESULT_OK &&
        (err = ipufs_register_(config_fd, IPU_REG_TDI_DATA_LO, value)))
        return err;
    return (int)result;
}

/* Start `context` (0: the supervisor) of tiles[0..ntiles) at `entry` (a
 * 4-byte aligned tile address): 0, or -errno naming the first refusal
 * (ipufs_tdi_errno_() of ipu.h):
 *   -EINVAL  entry not 4-byte aligned or past 21 bits, or context past 6;
 *   -ERANGE  a tile past TILE_COUNT;
 *   -EBUSY   the context is active (TDI_RESULT NOT_QUIESCENT);
 *   -ENOTSUP the word cannot be injected (TDI_RESULT UNSUPPORTED);
 *   -EIO     any other TDI refusal (an error flag of TDI_STS still set:
 *            clear it with TDI_CLR);
 * or pread/pwrite's errno. Tiles before the refused one have started. */
static inline int ipufs_start(int config_fd, uint32_t entry, const uint32_t *tiles, size_t ntiles,
                              uint32_t context)
{
    if (entry % 4 || entry >= 1u << 21)
        return -EINVAL;
    for (size_t i = 0; i < ntiles; i++) {
        uint32_t owner = context, word = IPUFS_BRI_WORD | entry >> 2;
        int r = ipufs_tdi_register(config_fd, IPU_TDI_WRITE_REG, tiles[i], IPU_TDI_REG_DBG_IOWNER, &owner);
        if (r == IPU_TDI_RESULT_OK)
            r = ipufs_tdi_register(config_fd, IPU_TDI_WRITE_REG, tiles[i], IPU_TDI_REG_DBG_IEXEC, &word);
        if ((r = ipufs_tdi_errno_(r)) != 0)
            return r;
    }
    return 0;
}

/* DBG_DATA of `tile` (what its code last stored with `put $DBG_DATA, $mN`):
 * 0 and *value, or -errno. */
static inline int ipufs_debug_data(int config_fd, uint32_t tile, uint32_t *value)
{
    return ipufs_tdi_errno_(ipufs_tdi_register(config_fd, IPU_TDI_READ_REG, tile, IPU_TDI_REG_DBG_DATA, value));
}

#endif /* IPUFS_START_H */
