/* ipufs native helpers: thin wrappers over system calls Python lacks.
 * Each returns -errno on failure so that Python can raise OSError once,
 * in ipufs/native.py, without reading a thread-local errno across cffi. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static int ipufs_mount(const char *source, const char *target, const char *fstype,
                       unsigned long flags, const char *data)
{
    return mount(source, target, fstype, flags, data) == 0 ? 0 : -errno;
}

static int ipufs_umount(const char *target, int flags)
{
    return umount2(target, flags) == 0 ? 0 : -errno;
}

/* Queue a real-time signal carrying an int, as sigqueue(3) does, but aimed
 * through a pidfd so that a recycled pid can never receive it. The kernel
 * only accepts a caller-made siginfo with si_code SI_QUEUE when the target
 * is the caller's own thread group or the code is negative; SI_QUEUE is -1. */
static int ipufs_pidfd_send_value(int pidfd, int sig, int value)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = sig;
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value.sival_int = value;
    if (syscall(SYS_pidfd_send_signal, pidfd, sig, &info, 0) != 0)
        return -errno;
    return 0;
}

static long ipufs_vm_read(int pid, unsigned long remote, void *local, size_t len)
{
    struct iovec l = { local, len };
    struct iovec r = { (void *)remote, len };
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    return n < 0 ? -errno : (long)n;
}

static long ipufs_vm_write(int pid, unsigned long remote, const void *local, size_t len)
{
    struct iovec l = { (void *)local, len };
    struct iovec r = { (void *)remote, len };
    ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
    return n < 0 ? -errno : (long)n;
}

/* A signalfd for the signals first..last, which must already be blocked. */
static int ipufs_signalfd(int first, int last)
{
    sigset_t set;
    sigemptyset(&set);
    for (int sig = first; sig <= last; sig++)
        sigaddset(&set, sig);
    int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}
