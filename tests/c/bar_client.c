/* bar_client: maps the whole of one ipufs node, as libipu_user maps ipuN
 * and ipuN_ex, and serves a line protocol on stdin for tests:
 *   w OFFSET HEX   store bytes through the mapping, msync them  -> "ok"
 *   r OFFSET LEN   load bytes through the mapping               -> hex
 *   q              unmap and exit
 * On start it prints "size N" (N from fstat). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s NODE\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDWR);
    if (fd < 0) { perror("open"); return 1; }
    off_t end = lseek(fd, 0, SEEK_END);  /* stat says 0 where the node is a character device */
    if (end < 0) { perror("lseek"); return 1; }
    size_t size = (size_t)end;
    unsigned char *bar = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (bar == MAP_FAILED) { perror("mmap"); return 1; }
    printf("size %zu\n", size);
    fflush(stdout);

    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        unsigned long off, len;
        char hex[8192];
        if (sscanf(line, "w %lu %8191s", &off, hex) == 2) {
            size_t n = strlen(hex) / 2;
            for (size_t i = 0; i < n; i++) {
                unsigned int b;
                sscanf(hex + 2 * i, "%2x", &b);
                bar[off + i] = (unsigned char)b;
            }
            long page = sysconf(_SC_PAGESIZE);
            unsigned long start = off & ~(unsigned long)(page - 1);
            if (msync(bar + start, off + n - start, MS_SYNC) != 0) { perror("msync"); return 1; }
            printf("ok\n");
        } else if (sscanf(line, "r %lu %lu", &off, &len) == 2) {
            for (unsigned long i = 0; i < len; i++)
                printf("%02x", bar[off + i]);
            printf("\n");
        } else if (line[0] == 'q') {
            break;
        } else {
            printf("error\n");
        }
        fflush(stdout);
    }
    munmap(bar, size);
    close(fd);
    return 0;
}
