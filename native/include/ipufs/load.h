/* ipufs/load.h: ipufs_load_elf(), loading tile code (an elf32-colossus
 * image's PT_LOAD segments) into tiles' memory through their exchange BAR
 * windows, with the checks of ipufs/client/loader.py (docs/isa.md,
 * "Loading"). Included by ipufs/ipu.h, whose constants it uses. */
#ifndef IPUFS_LOAD_H
#define IPUFS_LOAD_H

#ifndef IPUFS_IPU_H
#error "include ipufs/ipu.h, which includes this file"
#endif

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static inline uint32_t ipufs_le32_(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline int ipufs_register_(int config_fd, unsigned offset, uint32_t *value)
{
    unsigned char b[4];
    ssize_t n = pread(config_fd, b, 4, offset);
    if (n != 4)
        return n < 0 ? -errno : -EIO;
    *value = ipufs_le32_(b);
    return 0;
}

/* Load the image (its `size` bytes at `image`) into tiles[0..ntiles) of the
 * IPU whose ipuN and ipuN_ex are open (read-write) as config_fd and
 * exchange_fd; tiles NULL means every tile. Every segment is checked before
 * anything is written: 0, or -errno and nothing written:
 *   -ENOEXEC  not an elf32-colossus image, or truncated;
 *   -EXDEV    built for another architecture (e_flags) than this IPU's;
 *   -EFAULT   a segment outside populated tile memory
 *             (TILE_MEM_BASE .. + SRAM_PER_TILE);
 *   -EINVAL   code (PF_X) outside region 0 (TILE_MEM_BASE ..
 *             TILE_CODE_END), or not 4-byte aligned;
 *   -ERANGE   a tile number past TILE_COUNT;
 * or pread/pwrite's errno. */
static inline int ipufs_load_elf(int config_fd, int exchange_fd, const void *image, size_t size,
                                 const uint32_t *tiles, size_t ntiles)
{
    static const unsigned char zeros[4096];
    const unsigned char *e = (const unsigned char *)image;
    uint32_t arch, count, sram, base, window, first, code_end;
    int err;
    if ((err = ipufs_register_(config_fd, IPU_REG_ARCH, &arch)) ||
        (err = ipufs_register_(config_fd, IPU_REG_TILE_COUNT, &count)) ||
        (err = ipufs_register_(config_fd, IPU_REG_SRAM_PER_TILE, &sram)) ||
        (err = ipufs_register_(config_fd, IPU_REG_TILE_MEM_BASE, &base)) ||
        (err = ipufs_register_(config_fd, IPU_REG_TILE_WINDOW, &window)) ||
        (err = ipufs_register_(config_fd, IPU_REG_TILE_EXCHANGE_BASE, &first)) ||
        (err = ipufs_register_(config_fd, IPU_REG_TILE_CODE_END, &code_end)))
        return err;
    if (size < 52 || memcmp(e, "ELF", 6) != 0 ||
        (e[18] | e[19] << 8) != IPUFS_EM_GRAPHCORE_IPU)
        return -ENOEXEC;
    uint32_t flags = ipufs_le32_(e + 36) & IPUFS_EF_GRAPHCORE_ARCH_MASK;
    uint32_t want = arch == IPU_ARCH_IPU1 ? IPUFS_EF_GRAPHCORE_ARCH_IPU1
                  : arch == IPU_ARCH_IPU2 ? IPUFS_EF_GRAPHCORE_ARCH_IPU2
                  : arch == IPU_ARCH_IPU21 ? IPUFS_EF_GRAPHCORE_ARCH_IPU21 : 0u;
    if (flags != 0 && flags != want)
        return -EXDEV;
    uint32_t phoff = ipufs_le32_(e + 28);
    unsigned phentsize = e[42] | e[43] << 8, phnum = e[44] | e[45] << 8;
    if (phnum != 0 && (phentsize < 32 || phoff > size || (size - phoff) / phentsize < phnum))
        return -ENOEXEC;
    for (size_t t = 0; tiles != NULL && t < ntiles; t++)
        if (tiles[t] >= count)
            return -ERANGE;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < phnum; i++) {
            const unsigned char *ph = e + phoff + (size_t)i * phentsize;
            if (ipufs_le32_(ph) != 1) /* PT_LOAD */
                continue;
            uint32_t off = ipufs_le32_(ph + 4), vaddr = ipufs_le32_(ph + 8);
            uint32_t filesz = ipufs_le32_(ph + 16), memsz = ipufs_le32_(ph + 20), pflags = ipufs_le32_(ph + 24);
            if (memsz < filesz)
                memsz = filesz;
            if (pass == 0) {
                if (off > size || filesz > size - off)
                    return -ENOEXEC;
                if (vaddr < base || vaddr - base > sram || memsz > sram - (vaddr - base))
                    return -EFAULT;
                if ((pflags & 1) && (vaddr + memsz > code_end || vaddr % 4 != 0))
                    return -EINVAL;
                continue;
            }
            size_t n = tiles != NULL ? ntiles : count;
            for (size_t t = 0; t < n; t++) {
                off_t at = (off_t)first + (off_t)(tiles != NULL ? tiles[t] : t) * window + (vaddr - base);
                for (uint32_t done = 0; done < memsz;) {
                    const void *from = done < filesz ? (const void *)(e + off + done) : (const void *)zeros;
                    size_t len = done < filesz ? filesz - done : memsz - done;
                    if (done >= filesz && len > sizeof zeros)
                        len = sizeof zeros;
                    ssize_t w = pwrite(exchange_fd, from, len, at + done);
                    if (w <= 0)
                        return w < 0 ? -errno : -EIO;
                    done += (uint32_t)w;
                }
            }
        }
    }
    return 0;
}

#endif /* IPUFS_LOAD_H */
