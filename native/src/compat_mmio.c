/* Exact MMIO through mappings of config space, for the compatibility
 * library (docs/compat.md, "Registers through a mapping"). A real card
 * acts on each store to a register as it happens, and a load right after
 * it sees its effect; a FUSE mapping is plain memory that the daemon only
 * polls. So when a program maps a config node (ipuN) shared and writable,
 * the pages that hold registers with side effects (the daemon names them
 * in the node's user.ipufs.mmio attribute) are taken away from it: no
 * write access (PROT_READ: loads stay plain memory, which the daemon keeps
 * up to date before it answers, where BARs are served by passthrough), or
 * no access at all (PROT_NONE: where they are served through the page
 * cache, whose copy may lag). Each access that faults there is decoded
 * (compat_decode.c), done synchronously as a pread or pwrite of the node
 * at the register's offset, and the program goes on after the
 * instruction. Every other page of the mapping stays the daemon's memory.
 *
 * SIGSEGV stays ours once installed: a handler the program installs
 * later with sigaction or signal is kept and called for every fault that
 * is not ours, as is the one in place before ours; and since the kernel
 * kills a thread that faults with SIGSEGV blocked, sigprocmask and
 * pthread_sigmask leave it unblocked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <ucontext.h>
#include <unistd.h>

#include "compat.h"
#include "compat_decode.h"

#define EXPORT __attribute__((visibility("default")))
#define MMIO_XATTR "user.ipufs.mmio"
#define MAX_SPANS 16
#define MAX_TRAPS 256
#define FD_FLOOR 900 /* where the library's own descriptors go (above a program's usual ones) */

/* One run of trapped pages: [lo, hi) of the address space, at file
 * offset ``offset`` of the node that ``fd`` (the library's own dup) is
 * open on; ``prot`` what the program asked for those pages. Published by
 * storing ``live`` last; the handler only reads. */
struct trap {
    _Atomic int live;
    uintptr_t lo, hi;
    off_t offset;
    int fd;
    int prot;
    int loads; /* loads fault here too (PROT_NONE) */
};

static struct trap traps[MAX_TRAPS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int any_trap;
static _Atomic int installed;
static struct sigaction chained; /* the program's SIGSEGV disposition */

#define REAL(type, name, args)                                                 \
    static type(*get_##name(void)) args                                        \
    {                                                                          \
        static type(*f) args;                                                  \
        type(*g) args = __atomic_load_n(&f, __ATOMIC_RELAXED);                 \
        if (!g) {                                                              \
            g = (type(*) args)dlsym(RTLD_NEXT, #name);                         \
            __atomic_store_n(&f, g, __ATOMIC_RELAXED);                         \
        }                                                                      \
        return g;                                                              \
    }

REAL(void *, mmap, (void *, size_t, int, int, int, off_t))
REAL(void *, mmap64, (void *, size_t, int, int, int, off64_t))
REAL(int, munmap, (void *, size_t))
REAL(int, mprotect, (void *, size_t, int))
REAL(int, sigaction, (int, const struct sigaction *, struct sigaction *))
REAL(sighandler_t, signal, (int, sighandler_t))
REAL(int, sigprocmask, (int, const sigset_t *, sigset_t *))
REAL(int, pthread_sigmask, (int, const sigset_t *, sigset_t *))

/* --- doing an access ------------------------------------------------------ */
static struct trap *trap_at(uintptr_t a)
{
    if (!atomic_load_explicit(&any_trap, memory_order_acquire))
        return NULL;
    for (int i = 0; i < MAX_TRAPS; i++) {
        struct trap *t = &traps[i];
        if (atomic_load_explicit(&t->live, memory_order_acquire) && a >= t->lo && a < t->hi)
            return t;
    }
    return NULL;
}

static int transfer(int write, int fd, void *buf, size_t n, off_t at)
{
    for (;;) {
        long r = syscall(write ? SYS_pwrite64 : SYS_pread64, fd, buf, n, at);
        if (r >= 0 || errno != EINTR)
            return r == (long)n ? 0 : -1;
    }
}

static void say(const char *text)
{
    size_t n = strlen(text);
    while (n) {
        ssize_t w = write(2, text, n);
        if (w <= 0)
            return;
        text += w;
        n -= (size_t)w;
    }
}

static void hex(char *out, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[17];
    int n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v);
    *out++ = '0';
    *out++ = 'x';
    while (n)
        *out++ = tmp[--n];
    *out = '\0';
}

/* Do the access the instruction at the fault makes; 1 when done (the
 * context then resumes after it), 0 when the fault is not ours. A load
 * that fails reads all ones, as a bus error reads on PCIe; a store that
 * fails (the device refused it: registers.md) is dropped. */
static int emulate(struct trap *t, uintptr_t addr, ucontext_t *uc)
{
    struct mmio_access acc;
    if (!mmio_decode(uc, &acc)) {
        char line[160], at[24], pc[24];
        hex(at, (uint64_t)(t->offset + (off_t)(addr - t->lo)));
        hex(pc, mmio_pc(uc));
        snprintf(line, sizeof line, "ipufs: cannot emulate the instruction at %s, an access to config offset %s "
                 "(docs/compat.md lists the forms)\n", pc, at);
        say(line);
        return 0;
    }
    if ((acc.kind == MMIO_STORE && !(t->prot & PROT_WRITE)) || (acc.kind != MMIO_STORE && !(t->prot & PROT_READ)))
        return 0; /* the program's own protection: its fault */
    off_t at = t->offset + (off_t)(addr - t->lo);
    uint64_t value = 0;
    if (acc.kind != MMIO_STORE && transfer(0, t->fd, &value, acc.width, at) != 0)
        value = ~0ull;
    if (mmio_complete(uc, &acc, &value) && transfer(1, t->fd, &value, acc.width, at) != 0) {
        /* refused: dropped, as a card drops a store it does not take */
    }
    return 1;
}

static void chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction next = chained;
    if (next.sa_flags & SA_SIGINFO) {
        next.sa_sigaction(sig, si, uc);
    } else if (next.sa_handler == SIG_DFL || next.sa_handler == SIG_IGN) {
        /* the default: the fault happens again without us, and kills */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        get_sigaction()(sig, &dfl, NULL);
        atomic_store(&installed, 0);
    } else {
        next.sa_handler(sig);
    }
}

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    int saved = errno;
    uintptr_t addr = (uintptr_t)si->si_addr;
    struct trap *t = si->si_code == SEGV_ACCERR ? trap_at(addr) : NULL;
    if (t && emulate(t, addr, (ucontext_t *)ctx)) {
        errno = saved;
        return;
    }
    errno = saved;
    chain(sig, si, ctx);
}

static void install(void)
{
    if (atomic_load(&installed))
        return;
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_segv;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
    sigemptyset(&ours.sa_mask);
    if (get_sigaction()(SIGSEGV, &ours, &chained) == 0)
        atomic_store(&installed, 1);
}

/* --- which pages ------------------------------------------------------------ */
/* The spans of the user.ipufs.mmio attribute: "loads=direct|trapped",
 * then "START-END" byte ranges in hex. Returns their count (0: none). */
static int spans_of(int fd, int *loads, uint64_t span[][2])
{
    char text[512];
    int saved = errno;
    ssize_t n = fgetxattr(fd, MMIO_XATTR, text, sizeof text - 1);
    errno = saved;
    if (n <= 0)
        return 0;
    text[n] = '\0';
    *loads = strstr(text, "loads=trapped") != NULL;
    int count = 0;
    for (char *p = strchr(text, ' '); p && count < MAX_SPANS; p = strchr(p + 1, ' ')) {
        unsigned long long lo, hi;
        if (sscanf(p + 1, "%llx-%llx", &lo, &hi) == 2 && lo < hi) {
            span[count][0] = lo;
            span[count][1] = hi;
            count++;
        }
    }
    return count;
}

static int is_config_node(int fd)
{
    struct stat st; /* the kernel's answer, not the library's own fstat */
    int saved = errno;
    int node = syscall(SYS_fstat, fd, &st) == 0 && (st.st_ino - FIRST_NODE_INO) % 4 == 0
               && is_node_at(fd, "", AT_EMPTY_PATH, st.st_dev, st.st_mode, st.st_ino);
    errno = saved;
    return node;
}

/* Forget the traps in [lo, hi) (an unmap, or a mapping put over them),
 * keeping what lies outside; a descriptor no trap uses is closed. Under
 * the lock. */
static void forget(uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < MAX_TRAPS; i++) {
        struct trap *t = &traps[i];
        if (!atomic_load(&t->live) || t->hi <= lo || t->lo >= hi)
            continue;
        struct trap keep = *t;
        atomic_store(&t->live, 0);
        struct trap *free_slot = t;
        if (keep.lo < lo) { /* the part before stays in this slot */
            t->hi = lo;
            atomic_store(&t->live, 1);
            free_slot = NULL;
        }
        for (int j = 0; j < MAX_TRAPS && !free_slot; j++)
            if (!atomic_load(&traps[j].live))
                free_slot = &traps[j];
        if (keep.hi > hi && free_slot) { /* the part after */
            free_slot->lo = hi;
            free_slot->hi = keep.hi;
            free_slot->offset = keep.offset + (off_t)(hi - keep.lo);
            free_slot->fd = keep.fd;
            free_slot->prot = keep.prot;
            free_slot->loads = keep.loads;
            atomic_store(&free_slot->live, 1);
        }
        int used = 0;
        for (int j = 0; j < MAX_TRAPS; j++)
            used |= atomic_load(&traps[j].live) && traps[j].fd == keep.fd;
        if (!used)
            close(keep.fd);
    }
}

/* After a mapping of ``fd`` at ``p``: trap its register pages. */
static void trap_mapping(uintptr_t p, size_t len, int prot, int fd, off_t off)
{
    uint64_t span[MAX_SPANS][2];
    int loads = 0, n = spans_of(fd, &loads, span);
    if (n == 0 || !(prot & PROT_WRITE))
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    int dup = -1;
    for (int s = 0; s < n; s++) {
        uint64_t lo = span[s][0] & ~(uint64_t)(page - 1), hi = (span[s][1] + page - 1) & ~(uint64_t)(page - 1);
        uint64_t from = lo > (uint64_t)off ? lo : (uint64_t)off;
        uint64_t to = hi < (uint64_t)off + len ? hi : (uint64_t)off + len;
        if (from >= to)
            continue;
        if (dup < 0 && (dup = fcntl(fd, F_DUPFD_CLOEXEC, FD_FLOOR)) < 0 && (dup = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
            return;
        struct trap *t = NULL;
        for (int i = 0; i < MAX_TRAPS && !t; i++)
            if (!atomic_load(&traps[i].live))
                t = &traps[i];
        if (!t)
            break; /* no room: the rest stays plain memory */
        t->lo = p + (uintptr_t)(from - (uint64_t)off);
        t->hi = p + (uintptr_t)(to - (uint64_t)off);
        t->offset = (off_t)from;
        t->fd = dup;
        t->prot = prot;
        t->loads = loads;
        install();
        if (get_mprotect()((void *)t->lo, t->hi - t->lo, loads ? PROT_NONE : (prot & PROT_READ)) != 0)
            continue;
        atomic_store_explicit(&t->live, 1, memory_order_release);
        atomic_store_explicit(&any_trap, 1, memory_order_release);
    }
    if (dup >= 0) {
        int used = 0;
        for (int j = 0; j < MAX_TRAPS; j++)
            used |= atomic_load(&traps[j].live) && traps[j].fd == dup;
        if (!used)
            close(dup);
    }
}

static void *mapped(void *p, size_t len, int prot, int flags, int fd, off_t off)
{
    if (p == MAP_FAILED)
        return p;
    int saved = errno;
    pthread_mutex_lock(&lock);
    if (atomic_load(&any_trap))
        forget((uintptr_t)p, (uintptr_t)p + len);
    if (fd >= 0 && (flags & MAP_TYPE) != MAP_PRIVATE && is_config_node(fd))
        trap_mapping((uintptr_t)p, len, prot, fd, off);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mapped(get_mmap()(addr, len, prot, flags, fd, off), len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return mapped(get_mmap64()(addr, len, prot, flags, fd, off), len, prot, flags, fd, (off_t)off);
}

EXPORT int munmap(void *addr, size_t len)
{
    int r = get_munmap()(addr, len);
    if (r == 0 && atomic_load(&any_trap)) {
        pthread_mutex_lock(&lock);
        forget((uintptr_t)addr, (uintptr_t)addr + len);
        pthread_mutex_unlock(&lock);
    }
    return r;
}

/* The program's protection is recorded; the trapped pages keep theirs. */
EXPORT int mprotect(void *addr, size_t len, int prot)
{
    int r = get_mprotect()(addr, len, prot);
    if (r != 0 || !atomic_load(&any_trap))
        return r;
    pthread_mutex_lock(&lock);
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    for (int i = 0; i < MAX_TRAPS; i++) {
        struct trap *t = &traps[i];
        if (!atomic_load(&t->live) || t->hi <= lo || t->lo >= hi)
            continue;
        t->prot = prot; /* for the whole run: a program protects a mapping whole */
        uintptr_t from = t->lo > lo ? t->lo : lo, to = t->hi < hi ? t->hi : hi;
        get_mprotect()((void *)from, to - from, t->loads ? PROT_NONE : (prot & PROT_READ));
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* --- keeping SIGSEGV ------------------------------------------------------------ */
EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (sig != SIGSEGV || !atomic_load(&installed))
        return get_sigaction()(sig, act, old);
    struct sigaction before = chained;
    if (act)
        chained = *act;
    if (old)
        *old = before;
    return 0;
}

EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    if (sig != SIGSEGV || !atomic_load(&installed))
        return get_signal()(sig, handler);
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)(void *)old.sa_sigaction : old.sa_handler;
}

static const sigset_t *without_segv(int how, const sigset_t *set, sigset_t *copy)
{
    if (!set || how == SIG_UNBLOCK || !sigismember(set, SIGSEGV))
        return set;
    *copy = *set;
    sigdelset(copy, SIGSEGV);
    return copy;
}

EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    sigset_t copy;
    return get_sigprocmask()(how, without_segv(how, set, &copy), old);
}

EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    sigset_t copy;
    return get_pthread_sigmask()(how, without_segv(how, set, &copy), old);
}
