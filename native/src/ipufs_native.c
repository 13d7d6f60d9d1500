/* ipufs native helpers: thin wrappers over system calls Python lacks.
 * Each returns -errno on failure so that Python can raise OSError once,
 * in ipufs/native.py, without reading a thread-local errno across cffi. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "fastpath.h"
#include "thread_slice.h"
#include "uring.h"

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
static pid_t ipufs_self_pid = -1;
static uid_t ipufs_self_uid;

static void ipufs_forget_self(void) { ipufs_self_pid = -1; }

static int ipufs_pidfd_send_value(int pidfd, int sig, int value)
{
    /* The sender's ids, asked once (two system calls fewer on the way from
     * a device event to its signal), and asked again in a forked child. */
    if (ipufs_self_pid < 0) {
        static int registered;
        if (!registered) {
            pthread_atfork(NULL, NULL, ipufs_forget_self);
            registered = 1;
        }
        ipufs_self_uid = getuid();
        ipufs_self_pid = getpid();
    }
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = sig;
    info.si_code = SI_QUEUE;
    info.si_pid = ipufs_self_pid;
    info.si_uid = ipufs_self_uid;
    info.si_value.sival_int = value;
    if (syscall(SYS_pidfd_send_signal, pidfd, sig, &info, 0) != 0)
        return -errno;
    return 0;
}

/* unshare(2), for `ipufs run`'s private mount (and user) namespace. */
static int ipufs_unshare(int flags)
{
    return unshare(flags) == 0 ? 0 : -errno;
}

/* `ipufs run` adopts what its command leaves running, to end it too. */
static int ipufs_become_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? 0 : -errno;
}

/* Run in a child between fork and exec (`ipufs run`): die with signal
 * ``deathsig`` when the parent dies, and, when ``keep_sys_admin``, keep
 * CAP_SYS_ADMIN (of the user namespace the process is in) across exec as
 * an ambient capability, so that a daemon started as an unprivileged user
 * inside its own user namespace may still mount FUSE there. */
static int ipufs_child_setup(int deathsig, int keep_sys_admin)
{
    if (deathsig && prctl(PR_SET_PDEATHSIG, deathsig) != 0)
        return -errno;
    if (!keep_sys_admin)
        return 0;
    struct __user_cap_header_struct head = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &head, data) != 0)
        return -errno;
    data[CAP_SYS_ADMIN / 32].inheritable |= 1u << (CAP_SYS_ADMIN % 32);
    if (syscall(SYS_capset, &head, data) != 0)
        return -errno;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0) != 0)
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

/* The register watcher's detector (ipufs/driver/register_watcher.py). A store
 * through a shared mapping reaches no daemon code, so the words a client
 * may store to are compared with what the model last put there:
 * words[index[i]] must equal expect[i], *bell (the mailbox DOORBELL word)
 * must be 0, and span[0..span_count) must equal span_expect (a block of
 * registers too large to list word by word: the per-tile TDI registers).
 * The model may update expect[] while this reads it: a torn read is a
 * spurious wake-up, which the callers tolerate. */
struct ipufs_watch {
    const uint32_t *words;
    const uint32_t *index;
    const uint32_t *expect;
    size_t count;
    const uint32_t *bell;
    const uint32_t *span;
    const uint32_t *span_expect;
    size_t span_count;
    size_t span_cursor;
};

/* The FUSE reader compares this many words of a span per try, from where
 * its last try stopped, so that a try stays short (a whole ipu1 block is
 * 80 KiB, many times the 1 KiB of a try); the watcher's thread compares
 * the whole span. */
#define IPUFS_SPAN_PER_TRY 256

static int ipufs_span_differs(struct ipufs_watch *w, size_t limit)
{
    size_t count = w->span_count;
    if (limit >= count)
        return memcmp(w->span, w->span_expect, count * sizeof(uint32_t)) != 0;
    size_t at = __atomic_load_n(&w->span_cursor, __ATOMIC_RELAXED) % count;
    size_t n = count - at < limit ? count - at : limit;
    __atomic_store_n(&w->span_cursor, (at + n) % count, __ATOMIC_RELAXED);
    return memcmp(w->span + at, w->span_expect + at, n * sizeof(uint32_t)) != 0;
}

static int ipufs_watch_differs(struct ipufs_watch *w, size_t span_limit)
{
    if (__atomic_load_n(w->bell, __ATOMIC_RELAXED) != 0)
        return 1;
    for (size_t i = 0; i < w->count; i++)
        if (__atomic_load_n(&w->words[w->index[i]], __ATOMIC_RELAXED)
            != __atomic_load_n(&w->expect[i], __ATOMIC_RELAXED))
            return 1;
    return w->span_count > 0 && ipufs_span_differs(w, span_limit);
}

/* Marks ready[w] for each watch that differs; returns how many. */
static int ipufs_watch_scan(struct ipufs_watch *watches, int n, unsigned char *ready, size_t span_limit)
{
    int found = 0;
    for (int w = 0; w < n; w++) {
        ready[w] = (unsigned char)ipufs_watch_differs(&watches[w], span_limit);
        found += ready[w];
    }
    return found;
}

static int64_t ipufs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec ipufs_timespec(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    return ts;
}

/* The watcher thread's wait: scan every period_ns until some watch differs
 * (returns how many, ready[] marked) or timeout_ns pass (returns 0). While
 * *awake is set, the FUSE reader is awake and scans the watches itself
 * between its reads (ipufs_spin_read), so this sleeps on that word (a
 * futex) instead of polling: a wake-up of this thread on the reader's CPU
 * would delay the request being answered. Runs without the GIL (cffi
 * releases it). Sets the calling thread's timer slack to 1 us. */
static int ipufs_watch(struct ipufs_watch *watches, int n, unsigned char *ready,
                       long period_ns, long timeout_ns, uint32_t *awake)
{
    /* The default timer slack (50 us) would stretch a 100 us period by
     * half; this thread only watches, so it may ask for precise sleeps. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    int64_t deadline = ipufs_now_ns() + timeout_ns;
    for (;;) {
        int found = ipufs_watch_scan(watches, n, ready, SIZE_MAX);
        int64_t left = deadline - ipufs_now_ns();
        if (found || left <= 0)
            return found;
        if (__atomic_load_n(awake, __ATOMIC_ACQUIRE)) {
            struct timespec pause = ipufs_timespec(left);
            syscall(SYS_futex, awake, FUTEX_WAIT_PRIVATE, 1, &pause, NULL, 0);
        } else {
            struct timespec pause = ipufs_timespec(period_ns < left ? period_ns : left);
            nanosleep(&pause, NULL);
        }
    }
}

/* The reader is going to sleep: the watcher thread polls again. */
static void ipufs_asleep(uint32_t *awake)
{
    if (__atomic_exchange_n(awake, 0, __ATOMIC_RELEASE))
        syscall(SYS_futex, awake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#define IPUFS_SPIN_WATCHED (-100000L)
#define IPUFS_FAST_ANSWERED (-100001L)

/* Answer the request of `got` bytes in `buffer` on the fast path
   (fastpath.h), writing the reply to `fd` it came from. Returns 1 when
   answered (a reply the kernel no longer wants, ENOENT, counts as
   answered), 0 to hand the request to Python, -errno when the write
   failed otherwise (-ENODEV: the connection ended). */
static int ipufs_fast_serve(struct ipufs_fast *fast, int fd, const void *buffer, size_t got)
{
    char reply[256];
    long n = ipufs_fast_answer(fast, buffer, got, reply, sizeof reply);
    if (n <= 0)
        return 0;
    while (write(fd, reply, (size_t)n) < 0) {
        if (errno == ENOENT)
            return 1;
        if (errno != EINTR)
            return -errno;
    }
    return 1;
}

/* The FUSE reader's spin (ipufs/fuse/devfuse.py): read a request from the
 * non-blocking fd, trying again until spin_ns have passed. Runs without the
 * GIL and raises no exception per empty try, so a request that arrives
 * while spinning is picked up within a system call's time. A request the
 * fast path answers (`fast`, NULL: none) is answered here and the spin
 * goes on, from a new deadline. Between tries it scans the n watches, and
 * marks *awake so that the watcher thread sleeps meanwhile (ipufs_watch);
 * *awake stays set while the caller acts on what this returns, and is
 * cleared when the spin ends without one. Returns the length read,
 * IPUFS_SPIN_WATCHED when some watch differs (ready[] marked), or -errno
 * (-EAGAIN when the time ran out). */
static long ipufs_spin_read(int fd, void *buffer, size_t length, long spin_ns,
                            struct ipufs_watch *watches, int n, unsigned char *ready,
                            uint32_t *awake, struct ipufs_fast *fast)
{
    __atomic_store_n(awake, 1, __ATOMIC_RELEASE);
    int64_t deadline = ipufs_now_ns() + spin_ns;
    for (;;) {
        ssize_t got = read(fd, buffer, length);
        if (got >= 0) {
            int served = fast != NULL ? ipufs_fast_serve(fast, fd, buffer, (size_t)got) : 0;
            if (served == 0)
                return (long)got;
            if (served < 0) {
                ipufs_asleep(awake);
                return served;
            }
            deadline = ipufs_now_ns() + spin_ns;
            continue;
        }
        int error = errno;
        if (error == EAGAIN && n > 0 && ipufs_watch_scan(watches, n, ready, IPUFS_SPAN_PER_TRY))
            return IPUFS_SPIN_WATCHED;
        if (error != EAGAIN || ipufs_now_ns() >= deadline) {
            ipufs_asleep(awake);
            return -error;
        }
    }
}

/* The watches a FUSE-over-io_uring reader scans while it spins. */
struct ipufs_uring_watches {
    struct ipufs_watch *watches;
    int n;
    unsigned char *ready;
};

static int ipufs_uring_scan(void *arg)
{
    struct ipufs_uring_watches *w = arg;
    return w->n > 0 && ipufs_watch_scan(w->watches, w->n, w->ready, IPUFS_SPAN_PER_TRY);
}

/* ipufs_uring_receive (uring.h) for the reader that, like ipufs_spin_read,
 * scans the n watches while it spins and keeps *awake set meanwhile, so
 * that the watcher thread sleeps: IPUFS_URING_WATCHED when some watch
 * differs (ready[] marked). */
static long ipufs_uring_watch_receive(struct ipufs_uring *u, void *buffer, size_t length, long spin_ns,
                                      uint64_t *tag, struct ipufs_watch *watches, int n, unsigned char *ready,
                                      uint32_t *awake)
{
    struct ipufs_uring_watches w = { watches, n, ready };
    struct ipufs_uring_spin spin = { ipufs_uring_scan, &w, awake, ipufs_asleep };
    return ipufs_uring_receive(u, buffer, length, spin_ns, tag, &spin);
}

/* The reader's sleep: a blocking read of fd. A request the fast path
 * answers is answered here, and IPUFS_FAST_ANSWERED returned so that the
 * caller spins again (the next request of a client that asks again soon
 * is then found awake). Returns the length read for any other request,
 * or -errno. Runs without the GIL. */
static long ipufs_sleep_read(int fd, void *buffer, size_t length, struct ipufs_fast *fast)
{
    ssize_t got = read(fd, buffer, length);
    if (got < 0)
        return -errno;
    int served = fast != NULL ? ipufs_fast_serve(fast, fd, buffer, (size_t)got) : 0;
    if (served == 0)
        return (long)got;
    return served < 0 ? served : IPUFS_FAST_ANSWERED;
}
