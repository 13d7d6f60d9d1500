/* Which files are ipufs nodes, for the compatibility library
 * (ipufs_compat.c): the per-mount answer of docs/compat.md, which follows
 * the daemon's numbering of its nodes (ipufs/driver/nodes.py). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "compat.h"

/* A node is a regular file with an inode number in the nodes' range on a
 * FUSE superblock (anonymous device number, major 0) of an fuse.ipufs
 * mount. The device number alone says nothing lasting: the kernel hands a
 * departed mount's number to the next anonymous superblock (a tmpfs, an
 * overlay). So the answer is kept per mount, under the mount's unique id
 * (statx STATX_MNT_ID_UNIQUE, Linux 6.8+; never reused while the system
 * runs), and read once per mount from /proc/self/mountinfo. Only files
 * that pass the cheap checks cost that extra statx; it is asked with
 * AT_STATX_DONT_SYNC, so FUSE answers from the kernel's cache without a
 * round trip to the daemon. A stat by path that already asked for the
 * unique id (ipufs_compat.c, after such a file) is judged from its own
 * answer (is_node_statx).
 *
 * On kernels without unique mount ids (or where statx is filtered), the
 * filesystem's magic (fstatfs) tells FUSE from the rest, and a FUSE
 * device number's answer is kept as before: there, only a FUSE mount of
 * another kind that takes a departed ipufs mount's number (or the
 * reverse) is misjudged (docs/compat.md). */
#define FUSE_SUPER_MAGIC 0x65735546
/* ipufs/daemon/config.py MAX_IPUS: no node has a number from here on. */
#define MAX_IPUS 4096
#define NODES_END_INO (FIRST_NODE_INO + 4ull * MAX_IPUS)

/* The kernel's statx layout: glibc's struct statx (2.36) has no name for
 * stx_mnt_id, the first 8 bytes after stx_dev_minor. */
static uint64_t mnt_id_of(const struct statx *stx)
{
    uint64_t id;
    memcpy(&id, (const char *)stx + offsetof(struct statx, stx_dev_minor) + sizeof stx->stx_dev_minor, sizeof id);
    return id;
}

static int read_mountinfo_says_ipufs(unsigned minor)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char want[24];
    snprintf(want, sizeof want, " 0:%u ", minor);
    char buf[8192];
    size_t have = 0;
    int found = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *end;
        while ((end = strchr(line, '\n')) != NULL) {
            *end = '\0';
            char *dev = strstr(line, want);
            char *sep = strstr(line, " - ");
            if (dev && sep && dev < sep && strncmp(sep + 3, "fuse.ipufs ", 11) == 0)
                found = 1;
            line = end + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (have == sizeof buf - 1)
            have = 0; /* a line longer than the buffer: no mount of ours */
    }
    close(fd);
    return found;
}

/* Small tables without locks: a slot holds key << 1 | is_ipufs, where the
 * key is a unique mount id, or (fallback) a FUSE device's minor + 1. */
#define SLOTS 64
static _Atomic uint64_t by_mount[SLOTS];
static _Atomic uint64_t by_fuse_minor[SLOTS];

static int remembered(_Atomic uint64_t *table, uint64_t key, unsigned minor)
{
    _Atomic uint64_t *slot = &table[key % SLOTS];
    uint64_t seen = atomic_load_explicit(slot, memory_order_relaxed);
    if ((seen & ~1ull) == key << 1)
        return (int)(seen & 1);
    int ipufs = read_mountinfo_says_ipufs(minor);
    atomic_store_explicit(slot, key << 1 | (uint64_t)ipufs, memory_order_relaxed);
    return ipufs;
}

/* Fallback: whether the file (dirfd, path, flags) lies on a FUSE
 * filesystem, asked of the same file again. */
static int on_fuse(int dirfd, const char *path, int flags)
{
    struct statfs sf;
    int r;
    if (path[0] == '\0' && (flags & AT_EMPTY_PATH)) {
        r = (int)syscall(SYS_fstatfs, dirfd, &sf);
    } else {
        int fd = (int)syscall(SYS_openat, dirfd, path,
                              O_PATH | O_CLOEXEC | ((flags & AT_SYMLINK_NOFOLLOW) ? O_NOFOLLOW : 0));
        if (fd < 0)
            return 0;
        r = (int)syscall(SYS_fstatfs, fd, &sf);
        close(fd);
    }
    return r == 0 && sf.f_type == FUSE_SUPER_MAGIC;
}

/* The slow part of is_node_at: whether the mount the file is on is ipufs. */
static int ask_mount(int dirfd, const char *path, int flags, dev_t dev, ino_t ino)
{
    int same = flags & (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT);
    struct statx stx;
    if (syscall(SYS_statx, dirfd, path, same | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO | STATX_MNT_ID_UNIQUE,
                &stx) == 0
        && (stx.stx_mask & STATX_MNT_ID_UNIQUE)) {
        if (stx.stx_ino != ino || makedev(stx.stx_dev_major, stx.stx_dev_minor) != dev)
            return 0; /* another file by now: say nothing */
        return remembered(by_mount, mnt_id_of(&stx), minor(dev));
    }
    if (!on_fuse(dirfd, path, flags))
        return 0;
    return remembered(by_fuse_minor, (uint64_t)minor(dev) + 1, minor(dev));
}

int may_be_node(dev_t dev, mode_t mode, ino_t ino)
{
    return S_ISREG(mode) && ino >= FIRST_NODE_INO && ino < NODES_END_INO && major(dev) == 0;
}

int is_node_statx(const struct statx *stx)
{
    dev_t dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
    if (!may_be_node(dev, stx->stx_mode, stx->stx_ino))
        return 0;
    int saved = errno;
    int node = remembered(by_mount, mnt_id_of(stx), minor(dev));
    errno = saved;
    return node;
}

/* Whether the file a stat call of (dirfd, path, flags) described as
 * (dev, mode, ino) is an ipufs node. The caller's errno stays as it was. */
int is_node_at(int dirfd, const char *path, int flags, dev_t dev, mode_t mode, ino_t ino)
{
    if (!may_be_node(dev, mode, ino) || !path)
        return 0;
    int saved = errno;
    int node = ask_mount(dirfd, path, flags, dev, ino);
    errno = saved;
    return node;
}
