/* load_client: one of many processes hammering an IPU. It waits its turn to
 * attach (EBUSY while another process holds the IPU), then per iteration:
 * an ioctl, an ICU request by ioctl, a store through the config mapping,
 * and a GS1 sync by pwrite whose signal it waits for. It prints
 *   done ioctls=N icu=N syncs=N signals=N errors=N
 * and exits 0 only when nothing unexpected happened. */
#define _GNU_SOURCE
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
#include <time.h>
#include <unistd.h>

#include "ipufs/ipu.h"

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: %s DIR IPU ITERATIONS ID\n", argv[0]); return 2; }
    const char *dir = argv[1];
    int ipu = atoi(argv[2]), iterations = atoi(argv[3]), id = atoi(argv[4]);
    sigset_t set;
    sigemptyset(&set);
    for (int s = PCIE_IPU_EXCEPTION_SIG; s <= PCIE_HSPGS2E1_SIG; s++) sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, NULL);

    char path[4096];
    snprintf(path, sizeof path, "%s/ipu%d", dir, ipu);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) { perror(path); return 1; }
    size_t size = (size_t)lseek(fd, 0, SEEK_END);  /* stat says 0 where the node is a character device */
    volatile uint32_t *regs = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (regs == MAP_FAILED) { perror("mmap"); return 1; }

    long errors = 0, ioctls = 0, icu = 0, syncs = 0, signals = 0;
    struct timespec pause = { 0, 1000000 };
    for (int tries = 0; ioctl(fd, IPU_IOCTL_ATTACH, NULL) != 0; tries++) {
        if (errno != EBUSY || tries > 60000) { perror("ATTACH"); return 1; }
        nanosleep(&pause, NULL);
    }
    if (ioctl(fd, IPU_IOCTL_SET_IPU_ID, (long)id) != 0) errors++;
    for (int i = 0; i < iterations; i++) {
        if (ioctl(fd, IPU_IOCTL_SET_IPU_ID, (long)id) == 0) ioctls++; else errors++;
        uint32_t message[5] = { IPU_ICU_OP_WORD(0, IPU_ICU_READ_CLOCK), 0, 0, 0, 0 };
        if (ioctl(fd, IPU_IOCTL_MAILBOX_WRITE_READ, message) == 0 && message[1] > 0) icu++; else errors++;
        regs[IPU_REG_SCRATCH / 4] = (uint32_t)(id * 100000 + i);
        uint32_t zone = IPU_SYNC_ZONE_GS1;
        if (pwrite(fd, &zone, 4, IPU_REG_CMD_SYNC) == 4) syncs++; else errors++;
        struct timespec timeout = { 5, 0 };
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &timeout);
        if (sig == PCIE_HSPGS1E0_SIG && info.si_int == id) signals++; else errors++;
    }
    printf("done ioctls=%ld icu=%ld syncs=%ld signals=%ld errors=%ld\n", ioctls, icu, syncs, signals, errors);
    munmap((void *)regs, size);
    close(fd);  /* the last close detaches: the next process may attach */
    return errors ? 1 : 0;
}
