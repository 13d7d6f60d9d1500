/* stat_fields PATH...: every field each stat call of libc reports of each
 * PATH, one line per call (or the errno it failed with), and errno after a
 * call that succeeded (set to 4321 before it), so that a test can compare
 * the answers with and without the compatibility library preloaded. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHOW(call, expr, st)                                                                                   \
    do {                                                                                                       \
        errno = 4321;                                                                                          \
        if ((expr) != 0)                                                                                       \
            printf("%s errno %d\n", call, errno);                                                             \
        else                                                                                                   \
            printf("%s dev %llu ino %llu nlink %llu mode 0%o uid %u gid %u rdev %llu size %lld blksize %lld "  \
                   "blocks %lld atime %lld.%09ld mtime %lld.%09ld ctime %lld.%09ld errno %d\n",               \
                   call, (unsigned long long)(st).st_dev, (unsigned long long)(st).st_ino,                      \
                   (unsigned long long)(st).st_nlink, (unsigned)(st).st_mode, (unsigned)(st).st_uid,           \
                   (unsigned)(st).st_gid, (unsigned long long)(st).st_rdev, (long long)(st).st_size,           \
                   (long long)(st).st_blksize, (long long)(st).st_blocks, (long long)(st).st_atim.tv_sec,      \
                   (st).st_atim.tv_nsec, (long long)(st).st_mtim.tv_sec, (st).st_mtim.tv_nsec,                  \
                   (long long)(st).st_ctim.tv_sec, (st).st_ctim.tv_nsec, errno);                               \
    } while (0)

int main(int argc, char **argv)
{
    struct stat st;
    struct stat64 st64;
    struct stat *volatile nowhere = NULL; /* what a careless caller passes */
    for (int i = 1; i < argc; i++) {
        const char *path = argv[i];
        printf("%s\n", path);
        memset(&st, 0xA5, sizeof st);
        SHOW("stat", stat(path, &st), st);
        SHOW("lstat", lstat(path, &st), st);
        SHOW("stat64", stat64(path, &st64), st64);
        SHOW("lstat64", lstat64(path, &st64), st64);
        SHOW("fstatat", fstatat(AT_FDCWD, path, &st, 0), st);
        SHOW("fstatat nofollow", fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW), st);
        SHOW("fstatat64 no_automount", fstatat64(AT_FDCWD, path, &st64, AT_NO_AUTOMOUNT), st64);
        SHOW("fstatat unknown flag", fstatat(AT_FDCWD, path, &st, 0x40000000), st);
        SHOW("fstatat statx flag", fstatat(AT_FDCWD, path, &st, AT_STATX_DONT_SYNC), st);
        SHOW("stat no buffer", stat(path, nowhere), st);
        int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            SHOW("fstatat empty path", fstatat(fd, "", &st, AT_EMPTY_PATH), st);
            SHOW("fstatat empty path, no flag", fstatat(fd, "", &st, 0), st);
            SHOW("fstatat relative", fstatat(fd, ".", &st, 0), st);
            SHOW("fstat", fstat(fd, &st), st);
            close(fd);
        }
    }
    SHOW("fstatat bad fd", fstatat(-7, "x", &st, 0), st);
    SHOW("fstatat empty path, cwd", fstatat(AT_FDCWD, "", &st, AT_EMPTY_PATH), st);
    return 0;
}
