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
 *   _IOW, whose answer the driver writes into the buffer, as _IOWR.
 * - stat, fstat, lstat, fstatat and statx report ipufs nodes as character
 *   devices: S_IFCHR, the same permission bits, owner and size, and
 *   rdev 240:(4 N + kind), the number the daemon names in user.ipufs.rdev.
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
#define NR_SET_IPU_ID 14
#define NR_MAILBOX_WRITE_READ 31
#define NR_RESET 45
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
 * character device; (dirfd, path, flags) name that file again. */
static void as_chr(int dirfd, const char *path, int flags, struct stat *st)
{
    if (is_node_at(dirfd, path, flags, st->st_dev, st->st_mode, st->st_ino)) {
        st->st_mode = S_IFCHR | (st->st_mode & 07777);
        st->st_rdev = makedev(CHAR_MAJOR, st->st_ino - FIRST_NODE_INO);
    }
}

static void as_chr64(int dirfd, const char *path, int flags, struct stat64 *st)
{
    if (is_node_at(dirfd, path, flags, st->st_dev, st->st_mode, st->st_ino)) {
        st->st_mode = S_IFCHR | (st->st_mode & 07777);
        st->st_rdev = makedev(CHAR_MAJOR, st->st_ino - FIRST_NODE_INO);
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
        if (carried != request && on_ipufs_node(fd)) {
            if (nr == NR_ATTACH)
                arg = NULL; /* the real driver ignores it */
            request = carried;
        }
    }
    return get_ioctl()(fd, request, arg);
}

/* --- stat ----------------------------------------------------------------- */
#define STAT_PATH(name, st_type, fix, flags)                                   \
    EXPORT int name(const char *path, st_type *st)                             \
    {                                                                          \
        char buf[PATH_MAX];                                                    \
        const char *where = in_view(path, buf);                                \
        int r = get_##name()(where, st);                                       \
        if (r == 0)                                                            \
            fix(AT_FDCWD, where, flags, st);                                   \
        return r;                                                              \
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
    int r = get_fstatat()(dirfd, where, st, flags);
    if (r == 0)
        as_chr(dirfd, where, flags, st);
    return r;
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
    char buf[PATH_MAX];
    const char *where = in_view(path, buf);
    int r = get_fstatat64()(dirfd, where, st, flags);
    if (r == 0)
        as_chr64(dirfd, where, flags, st);
    return r;
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
