/* elf_load: ipufs_load_elf() of ipu.h as a tool writer calls it. Usage:
 *   elf_load DIR IPU FILE [TILE...]     (no TILE: every tile)
 * prints "result N" (0, or -errno from ipufs_load_elf) and exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipufs/ipu.h"

int main(int argc, char **argv)
{
    if (argc < 4) { fprintf(stderr, "usage: %s DIR IPU FILE [TILE...]\n", argv[0]); return 2; }
    char path[4096];
    snprintf(path, sizeof path, "%s/ipu%s", argv[1], argv[2]);
    int config = open(path, O_RDWR | O_CLOEXEC);
    snprintf(path, sizeof path, "%s/ipu%s_ex", argv[1], argv[2]);
    int exchange = open(path, O_RDWR | O_CLOEXEC);
    int file = open(argv[3], O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (config < 0 || exchange < 0 || file < 0 || fstat(file, &st) != 0) { perror("open"); return 1; }
    unsigned char *image = malloc((size_t)st.st_size + 1);
    if (image == NULL || read(file, image, (size_t)st.st_size) != st.st_size) { perror("read"); return 1; }
    uint32_t tiles[64];
    size_t ntiles = 0;
    for (int i = 4; i < argc && ntiles < 64; i++)
        tiles[ntiles++] = (uint32_t)strtoul(argv[i], NULL, 0);
    int result = ipufs_load_elf(config, exchange, image, (size_t)st.st_size, ntiles ? tiles : NULL, ntiles);
    printf("result %d\n", result);
    free(image);
    return 0;
}
