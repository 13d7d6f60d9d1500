/* A client of the real Graphcore PCIe driver, written only from what is
 * public about how the one open-source client calls it (aspen-sdk, as
 * shared/reference/ipu-facts.md retells it): nothing of ipufs is included.
 *
 *   real-client [--mailbox OP] [--reset N] [--signals COUNT] [--timeout MS] [--keep-going 1]
 *
 * It lists /sys/bus/pci/devices/ *\/file_name to find /dev/ipuN, checks that
 * each is a character device, opens and maps the whole of ipuN and ipuN_ex,
 * attaches with ATTACH(NULL) and sets the IPU id N + 100 (SET_IPU_ID by
 * value), then optionally exchanges one ICU message with MAILBOX_WRITE_READ
 * as _IOW on a buffer of u64 (the answer comes back in the buffer), resets
 * one IPU with RESET by value, and reports COUNT real-time signals 44..49
 * with their si_int. Every step prints one line; a failing step prints
 * "error STEP: strerror" and exits 1 (with --keep-going, goes on). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* The driver's ioctls as aspen-sdk declares them with nix's macros. */
#define IPU 0xED
#define ATTACH _IOWR(IPU, 10, uint64_t)
#define SET_IPU_ID _IOC(_IOC_READ | _IOC_WRITE, IPU, 14, 0) /* ioctl_readwrite!(.., ()) */
#define RESET _IOW(IPU, 45, int)                             /* ioctl_write_int! */
#define MAILBOX_WRITE_READ(bytes) _IOC(_IOC_WRITE, IPU, 31, (bytes)) /* ioctl_write_buf! */
#define FIRST_SIGNAL 44
#define LAST_SIGNAL 49
#define MAX_IPUS 64

static int keep_going;

/* Report a failed step; true when the client should stop. */
static int fail(const char *step)
{
    printf("error %s: %s\n", step, strerror(errno));
    return !keep_going;
}

static int read_file_name(const char *entry, long *id)
{
    char path[512], text[32];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/file_name", entry);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    /* aspen-sdk parses the whole content as a number. */
    char *end;
    errno = 0;
    *id = strtol(text, &end, 10);
    if (n == 0 || *end != '\0' || errno) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

static int compare(const void *a, const void *b)
{
    return (int)(*(const long *)a - *(const long *)b);
}

int main(int argc, char **argv)
{
    long mailbox_op = -1, reset_ipu = -1, want_signals = 0, timeout_ms = 5000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mailbox"))
            mailbox_op = strtol(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--reset"))
            reset_ipu = strtol(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--signals"))
            want_signals = strtol(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--timeout"))
            timeout_ms = strtol(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--keep-going"))
            keep_going = (int)strtol(argv[i + 1], NULL, 0);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* Discovery, as aspen-sdk's list_devices: one entry without file_name
     * fails the whole listing. */
    DIR *dir = opendir("/sys/bus/pci/devices");
    if (!dir) {
        fail("opendir /sys/bus/pci/devices");
        return 1;
    }
    long ids[MAX_IPUS];
    int count = 0;
    struct dirent *d;
    while ((d = readdir(dir)) != NULL) {
        if (d->d_name[0] == '.')
            continue;
        if (count == MAX_IPUS || read_file_name(d->d_name, &ids[count]) != 0) {
            closedir(dir);
            printf("error file_name of %s: %s\n", d->d_name, strerror(errno));
            return 1;
        }
        count++;
    }
    closedir(dir);
    qsort(ids, (size_t)count, sizeof ids[0], compare);
    printf("found %d:", count);
    for (int i = 0; i < count; i++)
        printf(" %ld", ids[i]);
    printf("\n");

    /* Signals first, so that none raised after ATTACH is lost. */
    sigset_t set;
    sigemptyset(&set);
    for (int s = FIRST_SIGNAL; s <= LAST_SIGNAL; s++)
        sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, NULL);

    int config[MAX_IPUS];
    for (int i = 0; i < count; i++) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/dev/ipu%ld", ids[i]);
        if (stat(path, &st) != 0 && fail("stat"))
            return 1;
        if (!S_ISCHR(st.st_mode)) {
            printf("error stat: %s is not a character device\n", path);
            if (!keep_going)
                return 1;
        }
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            fail("open ipuN");
            return 1;
        }
        snprintf(path, sizeof path, "/dev/ipu%ld_ex", ids[i]);
        int ex = open(path, O_RDWR | O_CLOEXEC);
        if (ex < 0) {
            fail("open ipuN_ex");
            return 1;
        }
        struct stat cs, es;
        if (fstat(fd, &cs) != 0 || fstat(ex, &es) != 0) {
            fail("fstat");
            return 1;
        }
        if ((!S_ISCHR(cs.st_mode) || !S_ISCHR(es.st_mode) || cs.st_rdev == es.st_rdev) && !keep_going) {
            printf("error fstat: not two distinct character devices\n");
            return 1;
        }
        /* Map the whole of each, as libipu_user and aspen-sdk do; a
         * character device's stat says size 0, so its end tells the size. */
        off_t csize = lseek(fd, 0, SEEK_END), esize = lseek(ex, 0, SEEK_END);
        void *cmap = csize <= 0 ? MAP_FAILED : mmap(NULL, (size_t)csize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        void *emap = esize <= 0 ? MAP_FAILED : mmap(NULL, (size_t)esize, PROT_READ | PROT_WRITE, MAP_SHARED, ex, 0);
        if (cmap == MAP_FAILED || emap == MAP_FAILED) {
            fail("mmap");
            return 1;
        }
        printf("ipu%ld chr %u:%u size %lld mapped %lld %lld\n", ids[i], major(cs.st_rdev), minor(cs.st_rdev),
               (long long)cs.st_size, (long long)csize, (long long)esize);
        if (ioctl(fd, ATTACH, NULL) != 0) {
            if (fail("ATTACH"))
                return 1;
        } else if (ioctl(fd, SET_IPU_ID, (unsigned long)(ids[i] + 100)) != 0) {
            if (fail("SET_IPU_ID"))
                return 1;
        } else {
            printf("attached ipu%ld id %ld\n", ids[i], ids[i] + 100);
        }
        config[i] = fd;
    }

    if (mailbox_op >= 0 && count > 0) {
        /* ipu-facts: a message is 5 x u32, word 0 = version << 28 | op << 16 | 0x20c. */
        uint64_t buffer[3] = {0};
        uint32_t *words = (uint32_t *)buffer;
        words[0] = (uint32_t)mailbox_op << 16 | 0x20c;
        if (ioctl(config[0], MAILBOX_WRITE_READ(sizeof buffer), buffer) != 0 && fail("MAILBOX_WRITE_READ"))
            return 1;
        printf("mailbox 0x%08x 0x%08x 0x%08x 0x%08x 0x%08x\n", words[0], words[1], words[2], words[3], words[4]);
    }

    if (reset_ipu >= 0) {
        for (int i = 0; i < count; i++)
            if (ids[i] == reset_ipu) {
                if (ioctl(config[i], RESET, 0) != 0) {
                    if (fail("RESET"))
                        return 1;
                } else {
                    printf("reset ipu%ld\n", reset_ipu);
                }
            }
    }

    printf("ready\n");
    struct timespec limit = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    for (long got = 0; got < want_signals; got++) {
        siginfo_t info;
        int s = sigtimedwait(&set, &info, &limit);
        if (s < 0) {
            fail("waiting for signals");
            return 1;
        }
        printf("signal %d si_int %d si_code %d\n", s, info.si_int, info.si_code);
    }
    return 0;
}
