/* without_statx [--eperm] COMMAND [ARGS...]: runs COMMAND where the statx
 * system call fails with ENOSYS, as on a kernel before 4.11 or under a
 * seccomp profile that predates statx (with --eperm: EPERM, as container
 * engines' profiles refuse calls they do not know); the compatibility
 * library's fallback for kernels without unique mount ids is then what
 * answers (docs/compat.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int eperm = argc > 1 && strcmp(argv[1], "--eperm") == 0;
    argv += eperm;
    argc -= eperm;
    if (argc < 2) {
        fprintf(stderr, "usage: without_statx [--eperm] COMMAND [ARGS...]\n");
        return 2;
    }
    /* Only the native architecture's numbers matter to the test. */
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_statx, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (eperm ? EPERM : ENOSYS)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("without_statx: seccomp");
        return 125;
    }
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}
