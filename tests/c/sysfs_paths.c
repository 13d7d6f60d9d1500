/* Prints what access(F_OK) and realpath of libc say of each PATH, one line
 * per call:
 *   access PATH 0|ERRNO-NAME
 *   realpath PATH RESOLVED|ERRNO-NAME
 * so that a test can check which paths the compatibility library sends
 * into a sysfs view and which it leaves to the host. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (access(argv[i], F_OK) == 0)
            printf("access %s 0\n", argv[i]);
        else
            printf("access %s %s\n", argv[i], strerrorname_np(errno));
        char resolved[PATH_MAX];
        if (realpath(argv[i], resolved))
            printf("realpath %s %s\n", argv[i], resolved);
        else
            printf("realpath %s %s\n", argv[i], strerrorname_np(errno));
    }
    return 0;
}
