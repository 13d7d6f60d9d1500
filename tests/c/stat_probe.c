/* Prints what each stat call of libc says of PATH, one line per call:
 *   CALL MODE_TYPE RDEV_MAJOR:RDEV_MINOR SIZE
 * (stat, lstat, fstat, fstatat, statx), so that a test can compare them
 * with and without the compatibility library preloaded. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char *type(mode_t mode)
{
    return S_ISCHR(mode) ? "chr" : S_ISREG(mode) ? "reg" : S_ISDIR(mode) ? "dir" : S_ISLNK(mode) ? "lnk" : "other";
}

static void show(const char *call, int r, const struct stat *st)
{
    if (r != 0)
        printf("%s error\n", call);
    else
        printf("%s %s %u:%u %lld 0%o\n", call, type(st->st_mode), major(st->st_rdev), minor(st->st_rdev),
               (long long)st->st_size, st->st_mode & 07777);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    struct stat st;
    show("stat", stat(argv[1], &st), &st);
    show("lstat", lstat(argv[1], &st), &st);
    show("fstatat", fstatat(AT_FDCWD, argv[1], &st, 0), &st);
    int fd = open(argv[1], O_RDONLY);
    show("fstat", fd < 0 ? -1 : fstat(fd, &st), &st);
    struct statx stx;
    if (statx(AT_FDCWD, argv[1], 0, STATX_BASIC_STATS, &stx) != 0) {
        printf("statx error\n");
    } else {
        printf("statx %s %u:%u %lld 0%o\n", type(stx.stx_mode), stx.stx_rdev_major, stx.stx_rdev_minor,
               (long long)stx.stx_size, stx.stx_mode & 07777);
    }
    return 0;
}
