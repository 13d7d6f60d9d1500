/* FUSE over io_uring (ipufs/fuse/uring.py): one ring per CPU, each served
 * by a native thread pinned to that CPU, which hands every request it does
 * not answer itself to the Python reader, in order. Functions return
 * -errno on failure, as the rest of the native layer does. */
#ifndef IPUFS_URING_H
#define IPUFS_URING_H

#include <stddef.h>
#include <stdint.h>

struct ipufs_uring;
struct ipufs_fast;

/* Tags of requests that came through a ring: this bit set, the entry's
 * index below it. Requests read from /dev/fuse are tagged with its fd. */
#define IPUFS_URING_TAG (1ULL << 32)

/* Rings for the connection of /dev/fuse description `fd`: `queues` of them
 * (the kernel's number of possible CPUs), `depth` entries each, each entry
 * with a payload buffer of `payload` bytes; the ring threads answer what
 * `fast` answers (fastpath.h; NULL: nothing). Nothing runs yet. NULL with
 * *error set when out of memory. */
struct ipufs_uring *ipufs_uring_new(int fd, int queues, int depth, size_t payload, struct ipufs_fast *fast,
                                    int *error);

/* Start one thread per ring, pinned to its CPU, each registering its
 * entries (FUSE_IO_URING_CMD_REGISTER). Only after INIT is answered with
 * FUSE_OVER_IO_URING. While Python holds a ring's requests, its thread
 * waits awake for the replies for up to `spin_ns` before it sleeps. 0 once
 * every entry is registered, or the first error (the threads are stopped
 * then). */
int ipufs_uring_start(struct ipufs_uring *u, long spin_ns);

/* What the reader does while it spins (ipufs_native.c fills it for the
 * register watches): `*awake` is set while it is awake, so that the
 * register watcher's thread sleeps instead of polling on the reader's CPU,
 * and cleared with `asleep` before it sleeps; between tries `scan(arg)`
 * nonzero ends the wait with IPUFS_URING_WATCHED. */
struct ipufs_uring_spin {
    int (*scan)(void *arg);
    void *arg;
    uint32_t *awake;
    void (*asleep)(uint32_t *awake);
};

#define IPUFS_URING_WATCHED (-100002L)

/* The next request for Python: a request a ring handed over (tag
 * IPUFS_URING_TAG | entry), or else one read from /dev/fuse (tag: fd).
 * Waits without the GIL, trying for `spin_ns` before sleeping, doing what
 * `spin` says meanwhile (NULL: nothing). The request's length,
 * IPUFS_URING_WATCHED, or -errno (-ENODEV: the connection has ended). */
long ipufs_uring_receive(struct ipufs_uring *u, void *buffer, size_t length, long spin_ns, uint64_t *tag,
                         const struct ipufs_uring_spin *spin);

/* Commit `reply` (fuse_out_header first) to the entry of `tag`, from any
 * thread: its ring thread sends it with the fetch of its next request.
 * 1, or 0 when nobody waits for it (the rings are stopped), or -EINVAL. */
int ipufs_uring_reply(struct ipufs_uring *u, uint64_t tag, const void *reply, size_t length);

/* Requests answered by the ring threads themselves, and handed to Python. */
uint64_t ipufs_uring_answered(struct ipufs_uring *u);
uint64_t ipufs_uring_handed(struct ipufs_uring *u);

/* Stop and join the ring threads and close their rings (idempotent). */
void ipufs_uring_stop(struct ipufs_uring *u);
/* Stop, then free everything (the /dev/fuse fd stays the caller's). */
void ipufs_uring_free(struct ipufs_uring *u);

#endif
