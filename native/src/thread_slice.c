/* The fair scheduler's slice of the calling thread: sched_setattr's
 * sched_runtime, which Linux keeps per thread since 6.12. A thread that
 * wakes with a slice shorter than the running thread's preempts it at
 * once; one with a longer slice waits for the running one's to end. So the
 * daemon gives the threads that wake for a client (the FUSE reader, the
 * register watcher) the shortest slice and the threads that run tiles a
 * long one: whatever wakes takes a CPU from the tiles at once, and the
 * tiles never need to offer theirs (docs/executor-speed.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "thread_slice.h"

#ifndef SCHED_FLAG_RESET_ON_FORK
#define SCHED_FLAG_RESET_ON_FORK 0x01
#endif

/* struct sched_attr (sched_setattr(2)), which glibc does not declare */
struct sched_attributes {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
    uint32_t util_min, util_max;
};

/* Sets the calling thread's slice to `ns` (the kernel keeps it within 0.1
 * to 100 ms), keeping its policy and nice. Returns the slice the kernel now
 * keeps, in ns; 0 where it keeps none per thread (before 6.12 it shows
 * none) or the thread is not the fair scheduler's, nothing changed; or
 * -errno. */
long ipufs_thread_slice(long ns)
{
#ifndef SYS_sched_setattr  /* headers older than the call: no slice to set */
    (void)ns;
    return 0;
#else
    struct sched_attributes attr;
    memset(&attr, 0, sizeof attr);
    if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0)
        return -errno;
    if ((attr.policy != SCHED_OTHER && attr.policy != SCHED_BATCH) || attr.runtime == 0)
        return 0;
    attr.size = sizeof attr;
    attr.flags = SCHED_FLAG_RESET_ON_FORK;  /* threads it starts later keep the default */
    attr.runtime = (uint64_t)ns;
    if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0)
        return -errno;
    memset(&attr, 0, sizeof attr);
    if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0)
        return -errno;
    return (long)attr.runtime;
#endif
}
