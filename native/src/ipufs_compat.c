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
 * before the real call, and nothing is asked of the daemon. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#define IPU_TYPE 0xED
#define NR_ATTACH 10
#define NR_SET_IPU_ID 14
#define NR_MAILBOX_WRITE_READ 31
#define NR_RESET 45
#define ICU_MESSAGE 20

/* What the daemon promises (ipufs/driver/nodes.py): a regular file of an
 * ipufs mount whose inode number is below 2**32 (where the sysfs view's
 * start) is the node 2 + 4 N + kind; N is below MAX_IPUS (further down). */
#define FIRST_NODE_INO 2ull
#define CHAR_MAJOR 240

static const char SYSFS[] = "/sys/bus/pci/devices";
#define SYSFS_LEN (sizeof SYSFS - 1)

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

/* --- which files are ipufs nodes ------------------------------------------
 * A node is a regular file with an inode number in the nodes' range on a
 * FUSE superblock (anonymous device number, major 0) of an fuse.ipufs
 * mount. The device number alone says nothing lasting: the kernel hands a
 * departed mount's number to the next anonymous superblock (a tmpfs, an
 * overlay). So the answer is kept per mount, under the mount's unique id
 * (statx STATX_MNT_ID_UNIQUE, Linux 6.8+; never reused while the system
 * runs), and read once per mount from /proc/self/mountinfo. Only files
 * that pass the cheap checks cost that extra statx; it is asked with
 * AT_STATX_DONT_SYNC, so FUSE answers from the kernel's cache without a
 * round trip to the daemon.
 *
 * On kernels without unique mount ids (or where statx is filtered), the
 * filesystem's magic (fstatfs) tells FUSE from the rest, and a FUSE
 * device number's answer is kept as before: there, only a FUSE mount of
 * another kind that takes a departed ipufs mount's number (or the
 * reverse) is misjudged (docs/compat.md). */
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
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

/* Whether the file a stat call of (dirfd, path, flags) described as
 * (dev, mode, ino) is an ipufs node. The caller's errno stays as it was. */
static int is_node_at(int dirfd, const char *path, int flags, dev_t dev, mode_t mode, ino_t ino)
{
    if (!S_ISREG(mode) || ino < FIRST_NODE_INO || ino >= NODES_END_INO || major(dev) != 0 || !path)
        return 0;
    int saved = errno;
    int node = ask_mount(dirfd, path, flags, dev, ino);
    errno = saved;
    return node;
}

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

/* --- the sysfs view ------------------------------------------------------- */
static char view[PATH_MAX]; /* empty: nothing to redirect */
static size_t view_len;

__attribute__((constructor)) static void find_view(void)
{
    const char *env = getenv("IPUFS_SYSFS");
    char link[PATH_MAX];
    if (env && *env) {
        snprintf(view, sizeof view, "%s", env);
    } else {
        /* The mount the daemon linked /dev/ipu0 to. */
        ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, "/dev/ipu0", link, sizeof link - 1);
        if (n <= 0 || link[0] != '/')
            return;
        link[n] = '\0';
        *strrchr(link, '/') = '\0';
        if (strlen(link) + SYSFS_LEN >= sizeof view)
            return;
        strcpy(view, link);
        strcat(view, SYSFS);
        struct stat st;
        if (syscall(SYS_newfstatat, AT_FDCWD, view, &st, 0) != 0 || !S_ISDIR(st.st_mode)) {
            view[0] = '\0';
            return;
        }
    }
    view_len = strlen(view);
    while (view_len > 1 && view[view_len - 1] == '/')
        view[--view_len] = '\0';
    if (strcmp(view, SYSFS) == 0) /* already bound there (ipufs run, containers) */
        view_len = 0;
    if (view_len == 0)
        view[0] = '\0';
}

/* Takes the next component of a path at *p: 1 for a name (*name, *n),
 * -1 for "..", 0 for "." or an empty one; *p moves past it. */
static int next_component(const char **p, const char **name, size_t *n)
{
    while (**p == '/')
        (*p)++;
    *name = *p;
    *p = strchrnul(*p, '/');
    *n = (size_t)(*p - *name);
    if (*n == 2 && (*name)[0] == '.' && (*name)[1] == '.')
        return -1;
    return !(*n == 0 || (*n == 1 && (*name)[0] == '.'));
}

/* Whether the ".." of ``rest`` (what follows /sys/bus/pci/devices) climb
 * above /sys/bus/pci/devices, taken lexically. */
static int climbs_out(const char *rest)
{
    long depth = 0;
    const char *name;
    size_t n;
    while (*rest)
        if ((depth += next_component(&rest, &name, &n)) < 0)
            return 1;
    return 0;
}

/* ``path`` with "//", "." and ".." taken lexically, into ``out``; 0 when
 * it does not fit. */
static size_t lexical(const char *path, char *out)
{
    size_t len = 0, n;
    const char *name;
    while (*path) {
        int kind = next_component(&path, &name, &n);
        if (kind < 0) {
            while (len > 0 && out[len - 1] != '/')
                len--;
            if (len > 0)
                len--;
        } else if (kind > 0) {
            if (len + 1 + n >= PATH_MAX)
                return 0;
            out[len++] = '/';
            memcpy(out + len, name, n);
            len += n;
        }
    }
    if (len == 0)
        out[len++] = '/';
    out[len] = '\0';
    return len;
}

/* ``path`` itself, or its place in the view when it lies under
 * /sys/bus/pci/devices (written into ``buf``). A path whose ".." climb
 * out of /sys/bus/pci/devices is taken lexically, and redirected only if
 * it ends up under it again: /sys/bus/pci/devices/../../../class is the
 * host's /sys/class. Below that, the view's own entries resolve ".."
 * (where they are links, as sysfs's are). */
static const char *in_view(const char *path, char *buf)
{
    if (!view_len || !path || path[0] != '/' || path[1] != 's' || strncmp(path, SYSFS, SYSFS_LEN) != 0)
        return path;
    const char *rest = path + SYSFS_LEN;
    if (*rest != '\0' && *rest != '/')
        return path;
    size_t rest_len;
    if (climbs_out(rest)) {
        size_t len = lexical(path, buf);
        if (len < SYSFS_LEN || memcmp(buf, SYSFS, SYSFS_LEN) != 0
            || (buf[SYSFS_LEN] != '\0' && buf[SYSFS_LEN] != '/'))
            return path; /* outside the view: the host's */
        rest_len = len - SYSFS_LEN;
        if (view_len + rest_len >= PATH_MAX)
            return path;
        memmove(buf + view_len, buf + SYSFS_LEN, rest_len + 1);
    } else {
        rest_len = strlen(rest);
        if (view_len + rest_len >= PATH_MAX)
            return path;
        memcpy(buf + view_len, rest, rest_len + 1);
    }
    memcpy(buf, view, view_len);
    return buf;
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
    const char *shown = real;
    if (strncmp(real, view, view_len) == 0 && (real[view_len] == '\0' || real[view_len] == '/')
        && SYSFS_LEN + strlen(real + view_len) < PATH_MAX) {
        memcpy(buf, SYSFS, SYSFS_LEN);
        strcpy(buf + SYSFS_LEN, real + view_len);
        shown = buf;
    }
    if (!resolved)
        return strdup(shown);
    strcpy(resolved, shown);
    return resolved;
}
