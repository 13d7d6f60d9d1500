/* libipufs-compat.so: preloaded (LD_PRELOAD) into a program written for the
 * real Graphcore PCIe driver, it does on the client side what the kernel
 * will not carry to a FUSE server, the way umockdev's preload library does
 * for its emulated devices (docs/compat.md):
 *
 * - ioctls on ipufs nodes in the real driver's calling conventions (the
 *   reverse engineers' encodings, docs/abi.md) are
 *   reissued in forms FUSE's restricted ioctls carry: ATTACH with any
 *   argument (aspen-sdk passes NULL to _IOWR(0xED, 10, u64)), SET_IPU_ID
 *   and RESET whose argument is a value, as _IO; MAILBOX_WRITE_READ as
 *   _IOW, whose answer the driver writes into the buffer, as _IOWR;
 *   BUFFER_DETACH with the index by value (below 0x10000, where no
 *   pointer lies) as _IO; SET_SECONDARY_IPU_ID's pointer to a u32 with
 *   size 4 (the real runtime encodes 8). The other real forms (BUFFER_ATTACH,
 *   MAILBOX_WRITE_READ with pointers) the daemon serves as they are.
 * - mappings of config space act as MMIO: compat_mmio.c.
 * - stat, fstat, lstat, fstatat and statx report ipufs nodes as character
 *   devices: S_IFCHR, the same permission bits and owner, size 0 (a
 *   client maps a BAR as long as lseek to its end says), and rdev
 *   240:(4 N + kind), the number the daemon names in user.ipufs.rdev.
 * - absolute paths under /sys/bus/pci/devices are looked up in the mount's
 *   sysfs view (IPUFS_SYSFS, or the view of the mount /dev/ipu0 links to).
 *
 * Everything else takes the plain libc path: the checks are a few compares
 * before the real call, and nothing is asked of the daemon. Which files are
 * nodes is compat_nodes.c's to say, where a path lies compat_view.c's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "compat.h"

#define EXPORT __attribute__((visibility("default")))

#define IPU_TYPE 0xED
#define NR_ATTACH 10
#define NR_DETACH_BUFFER 12
#define NR_SET_IPU_ID 14
#define NR_MAILBOX_WRITE_READ 31
#define NR_RESET 45
#define NR_SET_SECONDARY_IPU_ID 47
#define LOWEST_POINTER 0x10000ul /* vm.mmap_min_addr's usual value: an argument below it is a value */
#define ICU_MESSAGE 20

/* --- the real functions, found on first use ------------------------------ */
#define REAL(type, name, args)                                                 \
    static type(*real_##name) args;                                            \
    static type(*get_##name(void)) args                                        \
    {                                                                          \
        type(*f) args = __atomic_load_n(&real_##name, __ATOMIC_RELAXED);       \
        if (!f) {                                                              \
            f = (type(*) args)dlsym(RTLD_NEXT, #name);                         \
            __atomic_store_n(&real_##name, f, __ATOMIC_RELAXED);               \
        }                                                                      \
        return f;                                                              \
    }

REAL(int, ioctl, (int, unsigned long, ...))
REAL(int, stat, (const char *, struct stat *))
REAL(int, lstat, (const char *, struct stat *))
REAL(int, fstat, (int, struct stat *))
REAL(int, fstatat, (int, const char *, struct stat *, int))
REAL(int, stat64, (const char *, struct stat64 *))
REAL(int, lstat64, (const char *, struct stat64 *))
REAL(int, fstat64, (int, struct stat64 *))
REAL(int, fstatat64, (int, const char *, struct stat64 *, int))
REAL(int, __xstat, (int, const char *, struct stat *))
REAL(int, __lxstat, (int, const char *, struct stat *))
REAL(int, __fxstat, (int, int, struct stat *))
REAL(int, __fxstatat, (int, int, const char *, struct stat *, int))
REAL(int, __xstat64, (int, const char *, struct stat64 *))
REAL(int, __lxstat64, (int, const char *, struct stat64 *))
REAL(int, __fxstat64, (int, int, struct stat64 *))
REAL(int, __fxstatat64, (int, int, const char *, struct stat64 *, int))
REAL(int, statx, (int, const char *, int, unsigned int, struct statx *))
REAL(int, open, (const char *, int, ...))
REAL(int, open64, (const char *, int, ...))
REAL(int, openat, (int, const char *, int, ...))
REAL(int, openat64, (int, const char *, int, ...))
REAL(int, __open_2, (const char *, int))
REAL(int, __open64_2, (const char *, int))
REAL(int, __openat_2, (int, const char *, int))
REAL(int, __openat64_2, (int, const char *, int))
REAL(FILE *, fopen, (const char *, const char *))
REAL(FILE *, fopen64, (const char *, const char *))
REAL(DIR *, opendir, (const char *))
REAL(int, scandir, (const char *, struct dirent ***, int (*)(const struct dirent *),
                    int (*)(const struct dirent **, const struct dirent **)))
REAL(int, scandir64, (const char *, struct dirent64 ***, int (*)(const struct dirent64 *),
                      int (*)(const struct dirent64 **, const struct dirent64 **)))
REAL(int, access, (const char *, int))
REAL(int, faccessat, (int, const char *, int, int))
REAL(ssize_t, readlink, (const char *, char *, size_t))
REAL(ssize_t, readlinkat, (int, const char *, char *, size_t))
REAL(char *, realpath, (const char *, char *))

/* Where the file a stat call described is an ipufs node, it becomes a
 * character device, of size 0 as a real one (its blocks stay: what the
 * memory behind it holds); (dirfd, path, flags) name that file again. */
static void as_chr(int dirfd, const char *path, int flags, struct stat *st)
{
    if (is_node_at(dirfd, path, flags, st->st_dev, st->st_mode, st->st_ino)) {
        st->st_mode = S_IFCHR | (st->st_mode & 07777);
        st->st_rdev = makedev(CHAR_MAJOR, st->st_ino - FIRST_NODE_INO);
        st->st_size = 0;
    }
}

static void as_chr64(int dirfd, const char *path, int flags, struct stat64 *st)
{
    if (is_node_at(dirfd, path, flags, st->st_dev, st->st_mode, st->st_ino)) {
        st->st_mode = S_IFCHR | (st->st_mode & 07777);
        st->st_rdev = makedev(CHAR_MAJOR, st->st_ino - FIRST_NODE_INO);
        st->st_size = 0;
    }
}

static void as_chrx(int dirfd, const char *path, int flags, struct statx *stx)
{
    if ((stx->stx_mask & (STATX_TYPE | STATX_INO)) != (STATX_TYPE | STATX_INO))
        return;
    if (is_node_at(dirfd, path, flags, makedev(stx->stx_dev_major, stx->stx_dev_minor), stx->stx_mode,
                   stx->stx_ino)) {
        stx->stx_mode = (uint16_t)(S_IFCHR | (stx->stx_mode & 07777));
        stx->stx_rdev_major = CHAR_MAJOR;
        stx->stx_rdev_minor = (uint32_t)(stx->stx_ino - FIRST_NODE_INO);
        stx->stx_size = 0;
    }
}

/* --- ioctl ---------------------------------------------------------------- */
static int on_ipufs_node(int fd)
{
    struct stat st;
    return get_fstat()(fd, &st) == 0 && is_node_at(fd, "", AT_EMPTY_PATH, st.st_dev, st.st_mode, st.st_ino);
}

EXPORT int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (_IOC_TYPE(request) == IPU_TYPE) {
        unsigned nr = _IOC_NR(request), size = _IOC_SIZE(request), dir = _IOC_DIR(request);
        unsigned long carried = request;
        if ((nr == NR_ATTACH || nr == NR_SET_IPU_ID || nr == NR_RESET) && size != 0)
            carried = _IOC(_IOC_NONE, IPU_TYPE, nr, 0);
        else if (nr == NR_MAILBOX_WRITE_READ && dir == _IOC_WRITE && size >= ICU_MESSAGE)
            carried = _IOC(_IOC_READ | _IOC_WRITE, IPU_TYPE, nr, size);
        else if (nr == NR_DETACH_BUFFER && size != 0 && (unsigned long)arg < LOWEST_POINTER)
            carried = _IOC(_IOC_NONE, IPU_TYPE, nr, 0);
        else if (nr == NR_SET_SECONDARY_IPU_ID && size > 4 && dir == _IOC_WRITE)
            carried = _IOC(_IOC_WRITE, IPU_TYPE, nr, 4);
        if (carried != request && on_ipufs_node(fd)) {
            if (nr == NR_ATTACH)
                arg = NULL; /* the real driver ignores it */
            request = carried;
        }
    }
    return get_ioctl()(fd, request, arg);
}

/* --- stat ----------------------------------------------------------------- */
/* A stat by path of a file that may be a node (compat_nodes.c's cheap
 * checks pass: a regular file with a node's inode number on an anonymous
 * device) needs its mount too. After such a file, the next stat by path
 * is asked as one statx that also asks for the unique id of the file's
 * mount (the kernel's stat is itself a statx of the basic fields with
 * AT_NO_AUTOMOUNT, fs/stat.c vfs_fstatat, so the answers and errors are
 * the same), and the caller's struct stat filled from it as the kernel's
 * stat fills it: a run of such files costs one call each. Otherwise the
 * real call is made, as without the library, and a file that turns out
 * to need the check is asked again (is_node_at). What is remembered is
 * only which of the two calls to make first, never an answer, so it may
 * be shared by all threads and wrong at no cost but a call. Where statx
 * cannot serve (refused: ENOSYS, or EPERM from a seccomp profile; a
 * kernel without unique mount ids; flags stat does not take; no buffer),
 * the real call is made every time. */
#define STAT_FLAGS (AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH)
#define REAL_CALL (-2)
static _Atomic int no_single_statx;
static _Atomic int last_may_be_node;

static void remember_may_be_node(int may)
{
    if (atomic_load_explicit(&last_may_be_node, memory_order_relaxed) != may)
        atomic_store_explicit(&last_may_be_node, may, memory_order_relaxed);
}

/* Whether ``p`` is NULL, asked so that the compiler cannot answer it from
 * libc's nonnull declarations (a caller may pass NULL all the same, and
 * the kernel's answer is then EFAULT, which the real call gives). */
static int is_null(const void *p)
{
    __asm__("" : "+r"(p));
    return p == NULL;
}

/* 0 with ``stx`` filled, -1 with errno set (the call's answer), or
 * REAL_CALL: make the real call instead (errno as it was). */
static int stat_once(int dirfd, const char *path, int flags, struct statx *stx)
{
    if (!atomic_load_explicit(&last_may_be_node, memory_order_relaxed)
        || atomic_load_explicit(&no_single_statx, memory_order_relaxed) || is_null(path) || (flags & ~STAT_FLAGS))
        return REAL_CALL;
    int saved = errno;
    if (syscall(SYS_statx, dirfd, path, flags | AT_NO_AUTOMOUNT, STATX_BASIC_STATS | STATX_MNT_ID_UNIQUE, stx)
        == 0) {
        if (stx->stx_mask & STATX_MNT_ID_UNIQUE)
            return 0;
        atomic_store_explicit(&no_single_statx, 1, memory_order_relaxed); /* before Linux 6.8 */
        return REAL_CALL;
    }
    if (errno == ENOSYS
        || (errno == EPERM && syscall(SYS_statx, AT_FDCWD, "/", AT_NO_AUTOMOUNT, STATX_TYPE, stx) != 0)) {
        atomic_store_explicit(&no_single_statx, 1, memory_order_relaxed); /* statx itself refused */
        errno = saved;
        return REAL_CALL;
    }
    if (errno == EPERM) {
        errno = saved;
        return REAL_CALL; /* a file system's own EPERM: the real call says it too */
    }
    return -1;
}

/* ``st`` (a struct stat or stat64) as the kernel's stat fills it from the
 * same answer; an ipufs node as a character device. */
#define FROM_STATX(st, stx)                                                    \
    do {                                                                       \
        memset((st), 0, sizeof *(st));                                         \
        (st)->st_dev = makedev((stx)->stx_dev_major, (stx)->stx_dev_minor);    \
        (st)->st_ino = (stx)->stx_ino;                                         \
        (st)->st_nlink = (stx)->stx_nlink;                                     \
        (st)->st_mode = (stx)->stx_mode;                                       \
        (st)->st_uid = (stx)->stx_uid;                                         \
        (st)->st_gid = (stx)->stx_gid;                                         \
        (st)->st_rdev = makedev((stx)->stx_rdev_major, (stx)->stx_rdev_minor); \
        (st)->st_size = (__typeof__((st)->st_size))(stx)->stx_size;            \
        (st)->st_blksize = (__typeof__((st)->st_blksize))(stx)->stx_blksize;   \
        (st)->st_blocks = (__typeof__((st)->st_blocks))(stx)->stx_blocks;      \
        (st)->st_atim.tv_sec = (stx)->stx_atime.tv_sec;                        \
        (st)->st_atim.tv_nsec = (stx)->stx_atime.tv_nsec;                      \
        (st)->st_mtim.tv_sec = (stx)->stx_mtime.tv_sec;                        \
        (st)->st_mtim.tv_nsec = (stx)->stx_mtime.tv_nsec;                      \
        (st)->st_ctim.tv_sec = (stx)->stx_ctime.tv_sec;                        \
        (st)->st_ctim.tv_nsec = (stx)->stx_ctime.tv_nsec;                      \
        remember_may_be_node(may_be_node((st)->st_dev, (st)->st_mode, (st)->st_ino)); \
        if (is_node_statx(stx)) {                                              \
            (st)->st_mode = S_IFCHR | ((st)->st_mode & 07777);                 \
            (st)->st_rdev = makedev(CHAR_MAJOR, (st)->st_ino - FIRST_NODE_INO);\
            (st)->st_size = 0;                                                 \
        }                                                                      \
    } while (0)

/* fstatat (or stat64's) of (dirfd, path, flags) into ``st``: by one statx
 * after a file that may be a node, else by ``real`` then ``fix``. */
#define STAT_AT(st, dirfd, where, flags, real, fix)                            \
    do {                                                                       \
        struct statx stx_;                                                     \
        int once_ = is_null(st) ? REAL_CALL : stat_once((dirfd), (where), (flags), &stx_); \
        if (once_ != REAL_CALL) {                                              \
            if (once_ == 0)                                                    \
                FROM_STATX((st), &stx_);                                       \
            return once_;                                                      \
        }                                                                      \
        int r_ = (real);                                                       \
        if (r_ == 0) {                                                         \
            remember_may_be_node(may_be_node((st)->st_dev, (st)->st_mode, (st)->st_ino)); \
            fix((dirfd), (where), (flags), (st));                              \
        }                                                                      \
        return r_;                                                             \
    } while (0)

#define STAT_PATH(name, st_type, fix, flags)                                   \
    EXPORT int name(const char *path, st_type *st)                             \
    {                                                                          \
        char buf[PATH_MAX];                                                    \
        const char *where = in_view(path, buf);                                \
        STAT_AT(st, AT_FDCWD, where, flags, get_##name()(where, st), fix);     \
    }

STAT_PATH(stat, struct stat, as_chr, 0)
STAT_PATH(lstat, struct stat, as_chr, AT_SYMLINK_NOFOLLOW)
STAT_PATH(stat64, struct stat64, as_chr64, 0)
STAT_PATH(lstat64, struct stat64, as_chr64, AT_SYMLINK_NOFOLLOW)

EXPORT int fstat(int fd, struct stat *st)
{
    int r = get_fstat()(fd, st);
    if (r == 0)
        as_chr(fd, "", AT_EMPTY_PATH, st);
    return r;
}

EXPORT int fstat64(int fd, struct stat64 *st)
{
    int r = get_fstat64()(fd, st);
    if (r == 0)
        as_chr64(fd, "", AT_EMPTY_PATH, st);
    return r;
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    char buf[PATH_MAX];
    const char *where = in_view(path, buf);
    STAT_AT(st, dirfd, where, flags, get_fstatat()(dirfd, where, st, flags), as_chr);
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
    char buf[PATH_MAX];
    const char *where = in_view(path, buf);
    STAT_AT(st, dirfd, where, flags, get_fstatat64()(dirfd, where, st, flags), as_chr64);
}

/* The versioned entry points of programs built against glibc before 2.33. */
#define XSTAT_PATH(name, st_type, fix, flags)                                  \
    EXPORT int name(int ver, const char *path, st_type *st)                    \
    {                                                                          \
        char buf[PATH_MAX];                                                    \
        const char *where = in_view(path, buf);                                \
        int r = get_##name()(ver, where, st);                                  \
        if (r == 0)                                                            \
            fix(AT_FDCWD, where, flags, st);                                   \
        return r;                                                              \
    }

XSTAT_PATH(__xstat, struct stat, as_chr, 0)
XSTAT_PATH(__lxstat, struct stat, as_chr, AT_SYMLINK_NOFOLLOW)
XSTAT_PATH(__xstat64, struct stat64, as_chr64, 0)
XSTAT_PATH(__lxstat64, struct stat64, as_chr64, AT_SYMLINK_NOFOLLOW)

EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
    int r = get___fxstat()(ver, fd, st);
    if (r == 0)
        as_chr(fd, "", AT_EMPTY_PATH, st);
    return r;
}

EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
    int r = get___fxstat64()(ver, fd, st);
    if (r == 0)
        as_chr64(fd, "", AT_EMPTY_PATH, st);
    return r;
}

EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
    char buf[PATH_MAX];
    const char *where = in_view(path, buf);
    int r = get___fxstatat()(ver, dirfd, where, st, flags);
    if (r == 0)
        as_chr(dirfd, where, flags, st);
    return r;
}

EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
    char buf[PATH_MAX];
    const char *where = in_view(path, buf);
    int r = get___fxstatat64()(ver, dirfd, where, st, flags);
    if (r == 0)
        as_chr64(dirfd, where, flags, st);
    return r;
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *stx)
{
    char buf[PATH_MAX];
    const char *where = in_view(path, buf);
    int r = get_statx()(dirfd, where, flags, mask, stx);
    if (r == 0)
        as_chrx(dirfd, where, flags, stx);
    return r;
}

/* --- opening and listing paths ---------------------------------------------- */
static int needs_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

#define OPEN(name)                                                             \
    EXPORT int name(const char *path, int flags, ...)                          \
    {                                                                          \
        mode_t mode = 0;                                                       \
        if (needs_mode(flags)) {                                               \
            va_list ap;                                                        \
            va_start(ap, flags);                                               \
            mode = va_arg(ap, mode_t);                                         \
            va_end(ap);                                                        \
        }                                                                      \
        char buf[PATH_MAX];                                                    \
        return get_##name()(in_view(path, buf), flags, mode);                  \
    }

#define OPENAT(name)                                                           \
    EXPORT int name(int dirfd, const char *path, int flags, ...)               \
    {                                                                          \
        mode_t mode = 0;                                                       \
        if (needs_mode(flags)) {                                               \
            va_list ap;                                                        \
            va_start(ap, flags);                                               \
            mode = va_arg(ap, mode_t);                                         \
            va_end(ap);                                                        \
        }                                                                      \
        char buf[PATH_MAX];                                                    \
        return get_##name()(dirfd, in_view(path, buf), flags, mode);           \
    }

OPEN(open)
OPEN(open64)
OPENAT(openat)
OPENAT(openat64)

/* What _FORTIFY_SOURCE builds call instead of open and openat. */
EXPORT int __open_2(const char *path, int flags)
{
    char buf[PATH_MAX];
    return get___open_2()(in_view(path, buf), flags);
}

EXPORT int __open64_2(const char *path, int flags)
{
    char buf[PATH_MAX];
    return get___open64_2()(in_view(path, buf), flags);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    char buf[PATH_MAX];
    return get___openat_2()(dirfd, in_view(path, buf), flags);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    char buf[PATH_MAX];
    return get___openat64_2()(dirfd, in_view(path, buf), flags);
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
    char buf[PATH_MAX];
    return get_fopen()(in_view(path, buf), mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
    char buf[PATH_MAX];
    return get_fopen64()(in_view(path, buf), mode);
}

EXPORT DIR *opendir(const char *path)
{
    char buf[PATH_MAX];
    return get_opendir()(in_view(path, buf));
}

EXPORT int scandir(const char *path, struct dirent ***list, int (*filter)(const struct dirent *),
                   int (*compare)(const struct dirent **, const struct dirent **))
{
    char buf[PATH_MAX];
    return get_scandir()(in_view(path, buf), list, filter, compare);
}

EXPORT int scandir64(const char *path, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
                     int (*compare)(const struct dirent64 **, const struct dirent64 **))
{
    char buf[PATH_MAX];
    return get_scandir64()(in_view(path, buf), list, filter, compare);
}

EXPORT int access(const char *path, int how)
{
    char buf[PATH_MAX];
    return get_access()(in_view(path, buf), how);
}

EXPORT int faccessat(int dirfd, const char *path, int how, int flags)
{
    char buf[PATH_MAX];
    return get_faccessat()(dirfd, in_view(path, buf), how, flags);
}

EXPORT ssize_t readlink(const char *path, char *out, size_t size)
{
    char buf[PATH_MAX];
    return get_readlink()(in_view(path, buf), out, size);
}

EXPORT ssize_t readlinkat(int dirfd, const char *path, char *out, size_t size)
{
    char buf[PATH_MAX];
    return get_readlinkat()(dirfd, in_view(path, buf), out, size);
}

/* A path in the view resolves to itself under /sys/bus/pci/devices. */
EXPORT char *realpath(const char *path, char *resolved)
{
    char buf[PATH_MAX], real[PATH_MAX];
    const char *where = in_view(path, buf);
    if (where == path)
        return get_realpath()(path, resolved);
    if (!get_realpath()(where, real))
        return NULL;
    const char *shown = as_shown(real, buf);
    if (!resolved)
        return strdup(shown);
    strcpy(resolved, shown);
    return resolved;
}
