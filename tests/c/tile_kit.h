/* tile_kit.h: the start the C tile hosts of these tests share (tile_host.c,
 * tile_debugger.c), using only ipufs/ipu.h: signals 44..49 blocked and read
 * from a signalfd, DIR/ipuN and DIR/ipuN_ex opened read-write, the kernel's
 * ELF file read whole, the IPU attached. */
#ifndef TILE_KIT_H
#define TILE_KIT_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipufs/ipu.h"

static int fail(const char *what, int err)
{
    fprintf(stderr, "%s: %d\n", what, err);
    return 1;
}

/* DIR/ipuN and DIR/ipuN_ex (suffix "_ex"), read-write. */
static int open_node(const char *dir, const char *ipu, const char *suffix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ipu%s%s", dir, ipu, suffix);
    return open(path, O_RDWR | O_CLOEXEC);
}

struct tile_kit {
    int signals, config, exchange;
    unsigned char *image;
    size_t size;
};

/* Everything above for IPU `ipu` under `dir` and the ELF file `path`: 0, or
 * 1 after a message on stderr. */
static int tile_kit_open(struct tile_kit *k, const char *dir, const char *ipu, const char *path)
{
    sigset_t set;
    sigemptyset(&set);
    for (int s = PCIE_IPU_EXCEPTION_SIG; s <= PCIE_HSPGS2E1_SIG; s++)
        sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, NULL);
    k->signals = signalfd(-1, &set, SFD_CLOEXEC);
    k->config = open_node(dir, ipu, "");
    k->exchange = open_node(dir, ipu, "_ex");
    int file = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (k->signals < 0 || k->config < 0 || k->exchange < 0 || file < 0 || fstat(file, &st) != 0) {
        perror("open");
        return 1;
    }
    k->size = (size_t)st.st_size;
    k->image = malloc(k->size);
    if (k->image == NULL || read(file, k->image, k->size) != st.st_size) { perror("read"); return 1; }
    close(file);
    if (ioctl(k->config, IPU_IOCTL_ATTACH, NULL) != 0) { perror("ATTACH"); return 1; }
    return 0;
}

#endif /* TILE_KIT_H */
