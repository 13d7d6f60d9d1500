/* FUSE over io_uring (uring.h; ipufs/fuse/uring.py; docs/serving.md,
 * "FUSE over io_uring").
 *
 * The kernel keeps one queue per possible CPU and puts a request on the
 * queue of the CPU its caller runs on. Each queue here has a ring of its
 * own (SQE128, single issuer, task work run when the thread asks for
 * completions) and one thread pinned to that CPU. The thread registers
 * `depth` entries (FUSE_IO_URING_CMD_REGISTER: a header buffer and a
 * payload buffer each); a completion of an entry is a request in its
 * buffers. What the thread does not answer itself is handed to the
 * Python reader through a queue, in order; the reply comes back from any
 * thread through the ring's commit list and its eventfd, and the ring
 * thread sends it with the fetch of the entry's next request
 * (FUSE_IO_URING_CMD_COMMIT_AND_FETCH). Only the ring thread submits to
 * its ring, so completions are always delivered to the thread that waits
 * for them.
 *
 * Raw system calls, no liburing: the subset needed is small (setup, two
 * mmaps, enter), and the build gains no dependency. The system headers
 * know io_uring but are older than FUSE over io_uring, whose structures
 * (include/uapi/linux/fuse.h, 7.42) are declared here. */
#define _GNU_SOURCE
#include "uring.h"
#include "fastpath.h"

#include <errno.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* --- the kernel's structures (uapi fuse.h 7.42) ------------------------- */

struct ipufs_fuse_in_header {
    uint32_t len;
    uint32_t opcode;
    uint64_t unique;
    uint64_t nodeid;
    uint32_t uid, gid, pid;
    uint16_t total_extlen, padding;
};

struct ipufs_fuse_out_header {
    uint32_t len;
    int32_t error;
    uint64_t unique;
};

#define IPUFS_URING_IN_OUT_HEADER_SZ 128
#define IPUFS_URING_OP_IN_OUT_SZ 128

struct ipufs_uring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id; /* the request's unique: names it in the commit */
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};

/* iov[0] of an entry: the in (or out) header, the opcode's own header
 * (the request's first argument), then the sizes. iov[1] is the payload:
 * the request's other arguments, or every argument of the reply. */
struct ipufs_uring_req_header {
    char in_out[IPUFS_URING_IN_OUT_HEADER_SZ];
    char op_in[IPUFS_URING_OP_IN_OUT_SZ];
    struct ipufs_uring_ent_in_out ring_ent_in_out;
};

/* The 80-byte command area of a 128-byte SQE. */
struct ipufs_uring_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

enum { IPUFS_URING_CMD_REGISTER = 1, IPUFS_URING_CMD_COMMIT_AND_FETCH = 2 };

_Static_assert(sizeof(struct ipufs_fuse_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct ipufs_uring_req_header) == 288, "fuse_uring_req_header");
_Static_assert(sizeof(struct ipufs_uring_cmd_req) == 24, "fuse_uring_cmd_req");

#define SQE_SIZE 128                 /* IORING_SETUP_SQE128 */
#define SQE_CMD_OFFSET 48            /* offsetof(struct io_uring_sqe, cmd) */
#define EVENT_DATA UINT64_MAX        /* user_data of the eventfd read */
#define FAIRNESS 8                   /* handed requests in a row before /dev/fuse is tried first */
#define SCRATCH 8192                 /* requests larger than this go to Python without asking the fast path */

#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

/* --- state -------------------------------------------------------------- */

/* Entries and rings are cache-line aligned: each is written by its own
 * ring thread, and one sharing a line with another CPU's would move
 * between them on every request. */
struct ipufs_uring_entry {
    struct ipufs_uring_req_header *headers;
    char *payload;
    struct iovec iov[2];
    uint64_t commit_id;
    int qid;
} __attribute__((aligned(64)));

struct ipufs_ring {
    struct ipufs_uring *u;
    int qid;
    int fd;                          /* the io_uring; -1 until set up */
    int event_fd;                    /* replies waiting in `commits` */
    uint64_t event_value;
    pthread_t thread;
    int started;
    /* The rings, as mapped. */
    void *ring_mem;
    size_t ring_size;
    char *sqes;
    size_t sqes_size;
    unsigned *sq_head, *sq_tail, *sq_array, sq_mask;
    unsigned *cq_head, *cq_tail, cq_mask;
    struct io_uring_cqe *cqes;
    unsigned pending;                /* SQEs written, not yet submitted */
    /* Replies to commit, from any thread (under lock). */
    pthread_mutex_t lock;
    uint32_t *commits;
    unsigned ncommits;
    int stopping;
    int spinning;                    /* the thread looks at `commits` itself: no need to wake it */
    unsigned handed;                 /* entries with Python (the thread's own count) */
    char *scratch;                   /* the ring thread's request and reply copies, SCRATCH each */
    /* Requests this thread answered, and handed to Python: its own
       counters (written by it alone), summed when read. */
    uint64_t answered_count, handed_count;
} __attribute__((aligned(64)));

struct ipufs_uring {
    int fd;                          /* /dev/fuse, non-blocking */
    struct ipufs_fast *fast;         /* NULL: every request goes to Python */
    long spin_ns;                    /* how long a ring thread waits awake for Python's reply */
    int queues, depth;
    size_t payload;
    struct ipufs_uring_entry *entries;
    struct ipufs_ring *rings;
    void *headers_mem, *payload_mem;
    size_t headers_size, payload_size;
    /* The Python reader's queue: entries handed over, in order. */
    pthread_mutex_t lock;
    pthread_cond_t changed;          /* ring threads reporting their start */
    uint32_t *handed;
    unsigned head, count;
    int sleeping;                    /* the reader sleeps in poll: wake it */
    int event_fd;
    unsigned streak;                 /* handed requests returned in a row */
    int reported, start_error;
    int closing, receiving;          /* ipufs_uring_free waits for receive to leave */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One try of a spin: give the CPU to whatever else waits for it there (a
 * ring thread with a reply to send, the Python reader with a request to
 * answer, the client) and come back at once when nothing does. A spin of
 * pauses would hold the CPU until the scheduler preempts it: where the
 * reader shares a CPU with a ring thread (a daemon left to the scheduler,
 * woken where the ring thread ran), each waited for the other's spin. */
static void relax(void)
{
    sched_yield();
}

static void wake(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n;  /* a full counter already wakes */
}

/* One more on a counter of this ring thread's own (no locked add: no
 * other thread writes it; readers may see it a request late). */
static void count(uint64_t *counter)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* --- one ring ----------------------------------------------------------- */

static int ring_setup(struct ipufs_ring *r)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int fd = (int)syscall(SYS_io_uring_setup, (unsigned)(2 * r->u->depth + 2), &p);
    if (fd < 0)
        return -errno;
    r->fd = fd;
    if (!(p.features & IORING_FEAT_SINGLE_MMAP))
        return -EOPNOTSUPP;  /* every kernel with FUSE over io_uring has it */
    size_t sq = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    r->ring_size = sq > cq ? sq : cq;
    r->ring_mem = mmap(NULL, r->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                       IORING_OFF_SQ_RING);
    if (r->ring_mem == MAP_FAILED) {
        r->ring_mem = NULL;
        return -errno;
    }
    r->sqes_size = (size_t)p.sq_entries * SQE_SIZE;
    r->sqes = mmap(NULL, r->sqes_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED) {
        r->sqes = NULL;
        return -errno;
    }
    char *m = r->ring_mem;
    r->sq_head = (unsigned *)(m + p.sq_off.head);
    r->sq_tail = (unsigned *)(m + p.sq_off.tail);
    r->sq_array = (unsigned *)(m + p.sq_off.array);
    r->sq_mask = *(unsigned *)(m + p.sq_off.ring_mask);
    r->cq_head = (unsigned *)(m + p.cq_off.head);
    r->cq_tail = (unsigned *)(m + p.cq_off.tail);
    r->cq_mask = *(unsigned *)(m + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(m + p.cq_off.cqes);
    return 0;
}

static void ring_unmap(struct ipufs_ring *r)
{
    if (r->sqes)
        munmap(r->sqes, r->sqes_size);
    if (r->ring_mem)
        munmap(r->ring_mem, r->ring_size);
    if (r->fd >= 0)
        close(r->fd);
    r->sqes = NULL;
    r->ring_mem = NULL;
    r->fd = -1;
}

/* The next SQE, zeroed; the ring never has more outstanding than it has
 * room for (depth entries and one eventfd read). */
static struct io_uring_sqe *ring_sqe(struct ipufs_ring *r)
{
    unsigned tail = *r->sq_tail;
    unsigned slot = tail & r->sq_mask;
    struct io_uring_sqe *sqe = (struct io_uring_sqe *)(r->sqes + (size_t)slot * SQE_SIZE);
    memset(sqe, 0, SQE_SIZE);
    r->sq_array[slot] = slot;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
    r->pending++;
    return sqe;
}

static void ring_cmd(struct ipufs_ring *r, uint32_t index, unsigned op)
{
    struct ipufs_uring_entry *e = &r->u->entries[index];
    struct io_uring_sqe *sqe = ring_sqe(r);
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = r->u->fd;
    sqe->cmd_op = op;
    sqe->user_data = index;
    if (op == IPUFS_URING_CMD_REGISTER) {
        sqe->addr = (uint64_t)(uintptr_t)e->iov;
        sqe->len = 2;
    }
    struct ipufs_uring_cmd_req *req = (struct ipufs_uring_cmd_req *)((char *)sqe + SQE_CMD_OFFSET);
    req->qid = (uint16_t)r->qid;
    req->commit_id = op == IPUFS_URING_CMD_COMMIT_AND_FETCH ? e->commit_id : 0;
}

static void ring_event_read(struct ipufs_ring *r)
{
    struct io_uring_sqe *sqe = ring_sqe(r);
    sqe->opcode = IORING_OP_READ;
    sqe->fd = r->event_fd;
    sqe->addr = (uint64_t)(uintptr_t)&r->event_value;
    sqe->len = sizeof r->event_value;
    sqe->user_data = EVENT_DATA;
}

/* Submit what is pending; with `wait`, also wait for one completion (and
 * run the task work that delivers them). */
static int ring_enter(struct ipufs_ring *r, int wait)
{
    for (;;) {
        long n = syscall(SYS_io_uring_enter, r->fd, r->pending, wait ? 1 : 0, IORING_ENTER_GETEVENTS,
                         NULL, 0);
        if (n >= 0) {
            r->pending -= (unsigned)n < r->pending ? (unsigned)n : r->pending;
            return 0;
        }
        if (errno != EINTR && errno != EAGAIN && errno != EBUSY)
            return -errno;
        if (errno != EINTR)
            return 0;  /* completions to reap first */
    }
}

/* --- requests ----------------------------------------------------------- */

/* The request in entry `e` as one message (in header, the opcode's
 * header, the payload) into `out`: its length, or -EIO when the entry
 * holds no well-formed request or `out` is too small. */
static long entry_request(const struct ipufs_uring_entry *e, char *out, size_t capacity)
{
    const struct ipufs_fuse_in_header *in = (const void *)e->headers->in_out;
    size_t payload = e->headers->ring_ent_in_out.payload_sz;
    size_t len = in->len;
    if (len < sizeof *in || len - sizeof *in < payload || len > capacity)
        return -EIO;
    size_t op = len - sizeof *in - payload;
    if (op > IPUFS_URING_OP_IN_OUT_SZ)
        return -EIO;
    memcpy(out, in, sizeof *in);
    memcpy(out + sizeof *in, e->headers->op_in, op);
    memcpy(out + sizeof *in + op, e->payload, payload);
    return (long)len;
}

/* Put reply `msg` into entry `e` (header, payload and its size); -EINVAL
 * when it does not fit. */
static int entry_reply(struct ipufs_uring *u, struct ipufs_uring_entry *e, const void *msg, size_t length)
{
    if (length < sizeof(struct ipufs_fuse_out_header) || length - sizeof(struct ipufs_fuse_out_header) > u->payload)
        return -EINVAL;
    size_t body = length - sizeof(struct ipufs_fuse_out_header);
    memcpy(e->headers->in_out, msg, sizeof(struct ipufs_fuse_out_header));
    memcpy(e->payload, (const char *)msg + sizeof(struct ipufs_fuse_out_header), body);
    e->headers->ring_ent_in_out.payload_sz = (uint32_t)body;
    return 0;
}

/* An error reply to the request in entry `e`. */
static void entry_fail(struct ipufs_uring *u, struct ipufs_uring_entry *e, int error)
{
    struct ipufs_fuse_out_header out = { sizeof out, -error, e->commit_id };
    entry_reply(u, e, &out, sizeof out);
}

/* A request arrived in entry `index` of ring `r`: answer it here (and
 * commit) or hand it to the Python reader. */
static void ring_request(struct ipufs_ring *r, uint32_t index)
{
    struct ipufs_uring *u = r->u;
    struct ipufs_uring_entry *e = &u->entries[index];
    e->commit_id = e->headers->ring_ent_in_out.commit_id;
    if (u->fast && r->scratch) {
        /* The fast path wants the request whole, as /dev/fuse gives it. */
        long n = entry_request(e, r->scratch, SCRATCH);
        if (n > 0) {
            long answer = ipufs_fast_answer(u->fast, r->scratch, (size_t)n, r->scratch + SCRATCH, SCRATCH);
            if (answer > 0 && entry_reply(u, e, r->scratch + SCRATCH, (size_t)answer) == 0) {
                count(&r->answered_count);
                ring_cmd(r, index, IPUFS_URING_CMD_COMMIT_AND_FETCH);
                return;
            }
        }
    }
    pthread_mutex_lock(&u->lock);
    unsigned capacity = (unsigned)(u->queues * u->depth);
    u->handed[(u->head + u->count) % capacity] = index;
    u->count++;
    int sleeping = u->sleeping;
    u->sleeping = 0;
    pthread_mutex_unlock(&u->lock);
    r->handed++;
    count(&r->handed_count);
    if (sleeping)
        wake(u->event_fd);
}

/* Send the replies Python committed since the last time. */
static void ring_commits(struct ipufs_ring *r)
{
    uint32_t local[r->u->depth];
    pthread_mutex_lock(&r->lock);
    unsigned n = r->ncommits;
    memcpy(local, r->commits, n * sizeof *local);
    r->ncommits = 0;
    pthread_mutex_unlock(&r->lock);
    r->handed -= n < r->handed ? n : r->handed;
    for (unsigned i = 0; i < n; i++)
        ring_cmd(r, local[i], IPUFS_URING_CMD_COMMIT_AND_FETCH);
}

/* While Python holds requests of this ring, wait awake for its replies for
 * up to spin_ns before sleeping in the kernel: a reply then costs no
 * wake-up of this thread (the eventfd is written only while it sleeps).
 * New requests for this ring wait meanwhile; they are seen at the next
 * io_uring_enter. Each try yields the CPU (relax): the Python reader may
 * share it. Returns whether replies came. */
static int ring_spin(struct ipufs_ring *r)
{
    long spin_ns = r->u->spin_ns;
    if (spin_ns <= 0 || !r->handed)
        return 0;
    pthread_mutex_lock(&r->lock);
    r->spinning = 1;
    pthread_mutex_unlock(&r->lock);
    int64_t deadline = now_ns() + spin_ns;
    while (!__atomic_load_n(&r->ncommits, __ATOMIC_RELAXED) && now_ns() < deadline)
        relax();
    pthread_mutex_lock(&r->lock);
    r->spinning = 0;
    int came = r->ncommits > 0;
    pthread_mutex_unlock(&r->lock);
    if (came)
        ring_commits(r);
    return came;
}

static void ring_report(struct ipufs_ring *r, int error)
{
    struct ipufs_uring *u = r->u;
    pthread_mutex_lock(&u->lock);
    if (error && !u->start_error)
        u->start_error = error;
    u->reported++;
    pthread_cond_broadcast(&u->changed);
    pthread_mutex_unlock(&u->lock);
}

/* After submitting the registrations: the first that failed, if any
 * (completions are only looked at; the loop reaps them). */
static int ring_registered(struct ipufs_ring *r)
{
    int error = ring_enter(r, 0);
    if (error)
        return error;
    unsigned tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
    for (unsigned head = *r->cq_head; head != tail; head++) {
        struct io_uring_cqe *cqe = &r->cqes[head & r->cq_mask];
        if (cqe->user_data != EVENT_DATA && cqe->res < 0)
            return cqe->res;
    }
    return 0;
}

static void *ring_main(void *arg)
{
    struct ipufs_ring *r = arg;
    struct ipufs_uring *u = r->u;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);  /* signals are the Python threads' */
    cpu_set_t cpu;
    CPU_ZERO(&cpu);
    CPU_SET(r->qid, &cpu);
    pthread_setaffinity_np(pthread_self(), sizeof cpu, &cpu);  /* an offline CPU: run anywhere */
    char name[16];
    snprintf(name, sizeof name, "ipufs-ring-%d", r->qid);
    pthread_setname_np(pthread_self(), name);
    int error = ring_setup(r);
    if (!error) {
        for (int i = 0; i < u->depth; i++)
            ring_cmd(r, (uint32_t)(r->qid * u->depth + i), IPUFS_URING_CMD_REGISTER);
        ring_event_read(r);
        error = ring_registered(r);
    }
    ring_report(r, error);
    if (error)
        return NULL;
    for (;;) {
        int stop = 0;
        unsigned head = *r->cq_head;
        unsigned tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
        for (; head != tail; head++) {
            struct io_uring_cqe *cqe = &r->cqes[head & r->cq_mask];
            uint64_t data = cqe->user_data;
            int res = cqe->res;
            if (data == EVENT_DATA) {
                pthread_mutex_lock(&r->lock);
                stop = r->stopping;
                pthread_mutex_unlock(&r->lock);
                ring_commits(r);
                ring_event_read(r);
            } else if (res >= 0) {
                ring_request(r, (uint32_t)data);
            }
            /* res < 0: the entry is gone (connection ended, -ENOTCONN;
               cancelled, -ECANCELED); the kernel ended its request. */
        }
        __atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
        if (stop)
            break;
        /* Commits go out in a call of their own, not with the wait: one
           call doing both (a system call less per request) lowered the
           8-client rate (137,000 against 150,000 ioctls/s, median of 5
           alternating rounds) and raised server CPU per request. */
        if (r->pending && ring_enter(r, 0) < 0)
            break;
        if (ring_spin(r))
            continue;  /* the commits are submitted with the next enter */
        if (ring_enter(r, 1) < 0)
            break;
    }
    return NULL;
}

/* --- the Python reader's side ------------------------------------------- */

/* calloc for the cache-line aligned arrays (free() frees it). */
static void *aligned_calloc(size_t n, size_t size)
{
    void *p = aligned_alloc(64, n * size);  /* sizes are multiples of 64 */
    if (p)
        memset(p, 0, n * size);
    return p;
}

struct ipufs_uring *ipufs_uring_new(int fd, int queues, int depth, size_t payload, struct ipufs_fast *fast,
                                    int *error)
{
    struct ipufs_uring *u = calloc(1, sizeof *u);
    int n = queues * depth;
    if (!u || queues <= 0 || depth <= 0 || n > 65535) {
        free(u);
        *error = u ? -EINVAL : -ENOMEM;
        return NULL;
    }
    u->fd = fd;
    u->fast = fast;
    u->queues = queues;
    u->depth = depth;
    u->payload = payload;
    u->event_fd = -1;
    pthread_mutex_init(&u->lock, NULL);
    pthread_cond_init(&u->changed, NULL);
    u->entries = aligned_calloc((size_t)n, sizeof *u->entries);
    u->rings = aligned_calloc((size_t)queues, sizeof *u->rings);
    u->handed = calloc((size_t)n, sizeof *u->handed);
    u->headers_size = (size_t)n * sizeof(struct ipufs_uring_req_header);
    u->payload_size = (size_t)n * payload;
    u->headers_mem = mmap(NULL, u->headers_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* Each payload buffer is as large as the largest request; only the
       pages a request touches are ever backed. */
    u->payload_mem = mmap(NULL, u->payload_size, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    for (int q = 0; u->rings && q < queues; q++) {
        struct ipufs_ring *r = &u->rings[q];
        r->u = u;
        r->qid = q;
        r->fd = -1;
        r->event_fd = -1;
        pthread_mutex_init(&r->lock, NULL);
    }
    u->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!u->entries || !u->rings || !u->handed || u->headers_mem == MAP_FAILED || u->payload_mem == MAP_FAILED
        || u->event_fd < 0) {
        *error = u->event_fd < 0 ? -errno : -ENOMEM;
        if (u->headers_mem == MAP_FAILED)
            u->headers_mem = NULL;
        if (u->payload_mem == MAP_FAILED)
            u->payload_mem = NULL;
        ipufs_uring_free(u);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        struct ipufs_uring_entry *e = &u->entries[i];
        e->headers = (struct ipufs_uring_req_header *)u->headers_mem + i;
        e->payload = (char *)u->payload_mem + (size_t)i * payload;
        e->iov[0].iov_base = e->headers;
        e->iov[0].iov_len = sizeof *e->headers;
        e->iov[1].iov_base = e->payload;
        e->iov[1].iov_len = payload;
        e->qid = i / depth;
    }
    return u;
}

int ipufs_uring_start(struct ipufs_uring *u, long spin_ns)
{
    u->spin_ns = spin_ns;
    int error = 0;
    int started = 0;
    for (int q = 0; q < u->queues && !error; q++) {
        struct ipufs_ring *r = &u->rings[q];
        r->commits = calloc((size_t)u->depth, sizeof *r->commits);
        r->scratch = u->fast ? malloc(2 * SCRATCH) : NULL;
        r->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (!r->commits || (u->fast && !r->scratch) || r->event_fd < 0) {
            error = r->event_fd < 0 ? -errno : -ENOMEM;
            break;
        }
        error = -pthread_create(&r->thread, NULL, ring_main, r);
        if (!error) {
            r->started = 1;
            started++;
        }
    }
    pthread_mutex_lock(&u->lock);
    while (u->reported < started)
        pthread_cond_wait(&u->changed, &u->lock);
    if (!error)
        error = u->start_error;
    pthread_mutex_unlock(&u->lock);
    if (error)
        ipufs_uring_stop(u);
    return error;
}

static long handed_request(struct ipufs_uring *u, uint32_t index, void *buffer, size_t length, uint64_t *tag)
{
    struct ipufs_uring_entry *e = &u->entries[index];
    long n = entry_request(e, buffer, length);
    if (n < 0) {
        /* Nothing the session could decode: answer it here. */
        entry_fail(u, e, EIO);
        ipufs_uring_reply(u, IPUFS_URING_TAG | index, NULL, 0);
        return 0;
    }
    *tag = IPUFS_URING_TAG | index;
    return n;
}

static long uring_receive(struct ipufs_uring *u, void *buffer, size_t length, long spin_ns, uint64_t *tag,
                          const struct ipufs_uring_spin *spin)
{
    int64_t deadline = 0;
    if (spin && spin_ns > 0)
        __atomic_store_n(spin->awake, 1, __ATOMIC_RELEASE);  /* until it sleeps: the watcher thread sleeps */
    for (;;) {
        if (__atomic_load_n(&u->closing, __ATOMIC_ACQUIRE))
            return -ENODEV;
        if (u->streak < FAIRNESS) {
            pthread_mutex_lock(&u->lock);
            if (u->count) {
                uint32_t index = u->handed[u->head];
                u->head = (u->head + 1) % (unsigned)(u->queues * u->depth);
                u->count--;
                pthread_mutex_unlock(&u->lock);
                u->streak++;
                long n = handed_request(u, index, buffer, length, tag);
                if (n > 0)
                    return n;
                continue;
            }
            pthread_mutex_unlock(&u->lock);
        }
        u->streak = 0;
        ssize_t got = read(u->fd, buffer, length);
        if (got >= 0) {
            *tag = (uint64_t)u->fd;
            return (long)got;
        }
        if (errno == EINTR || errno == ENOENT)
            continue;
        if (errno != EAGAIN)
            return -errno;
        if (spin_ns > 0) {
            int64_t now = now_ns();
            if (!deadline)
                deadline = now + spin_ns;
            if (now < deadline) {
                while (!__atomic_load_n(&u->count, __ATOMIC_RELAXED) && now_ns() < deadline) {
                    if (spin && spin->scan(spin->arg))
                        return IPUFS_URING_WATCHED;  /* awake stays set while Python acts on it */
                    relax();
                }
                continue;
            }
        }
        pthread_mutex_lock(&u->lock);
        int empty = u->count == 0;
        u->sleeping = empty;
        pthread_mutex_unlock(&u->lock);
        if (!empty)
            continue;
        if (spin)
            spin->asleep(spin->awake);  /* the watcher thread polls while this sleeps */
        struct pollfd fds[2] = { { u->fd, POLLIN, 0 }, { u->event_fd, POLLIN, 0 } };
        poll(fds, 2, -1);
        pthread_mutex_lock(&u->lock);
        u->sleeping = 0;
        pthread_mutex_unlock(&u->lock);
        if (spin && spin_ns > 0)
            __atomic_store_n(spin->awake, 1, __ATOMIC_RELEASE);
        uint64_t value;
        if (read(u->event_fd, &value, sizeof value) < 0 && errno != EAGAIN)
            return -errno;
        deadline = 0;
    }
}

long ipufs_uring_receive(struct ipufs_uring *u, void *buffer, size_t length, long spin_ns, uint64_t *tag,
                         const struct ipufs_uring_spin *spin)
{
    __atomic_add_fetch(&u->receiving, 1, __ATOMIC_ACQ_REL);
    long n = uring_receive(u, buffer, length, spin_ns, tag, spin);
    if (spin && n < 0 && n != IPUFS_URING_WATCHED)
        spin->asleep(spin->awake);
    __atomic_sub_fetch(&u->receiving, 1, __ATOMIC_ACQ_REL);
    return n;
}

int ipufs_uring_reply(struct ipufs_uring *u, uint64_t tag, const void *reply, size_t length)
{
    uint64_t index = tag & ~IPUFS_URING_TAG;
    if (!(tag & IPUFS_URING_TAG) || index >= (uint64_t)(u->queues * u->depth))
        return -EINVAL;
    struct ipufs_uring_entry *e = &u->entries[index];
    if (reply) {  /* NULL: already in the entry */
        int error = entry_reply(u, e, reply, length);
        if (error)
            return error;
    }
    struct ipufs_ring *r = &u->rings[e->qid];
    pthread_mutex_lock(&r->lock);
    int alive = r->started && !r->stopping;
    if (alive)
        r->commits[r->ncommits++] = (uint32_t)index;
    int spinning = r->spinning;
    pthread_mutex_unlock(&r->lock);
    if (alive && !spinning)
        wake(r->event_fd);
    /* Called on the ring thread's own CPU (a reader the scheduler placed
       there): let it send the reply now, rather than after whatever this
       thread does next (Python's return and next receive, 4-5 us). */
    if (alive && sched_getcpu() == r->qid)
        sched_yield();
    return alive;
}

static uint64_t rings_sum(struct ipufs_uring *u, size_t offset)
{
    uint64_t sum = 0;
    for (int q = 0; q < u->queues; q++)
        sum += __atomic_load_n((uint64_t *)((char *)&u->rings[q] + offset), __ATOMIC_RELAXED);
    return sum;
}

uint64_t ipufs_uring_answered(struct ipufs_uring *u)
{
    return rings_sum(u, offsetof(struct ipufs_ring, answered_count));
}

uint64_t ipufs_uring_handed(struct ipufs_uring *u)
{
    return rings_sum(u, offsetof(struct ipufs_ring, handed_count));
}

void ipufs_uring_stop(struct ipufs_uring *u)
{
    for (int q = 0; q < u->queues; q++) {
        struct ipufs_ring *r = &u->rings[q];
        if (r->started) {
            pthread_mutex_lock(&r->lock);
            r->stopping = 1;
            pthread_mutex_unlock(&r->lock);
            wake(r->event_fd);
            pthread_join(r->thread, NULL);
            r->started = 0;
        }
        /* Closing the ring cancels the commands still waiting for a
           request; the kernel ends what they held. */
        ring_unmap(r);
        if (r->event_fd >= 0)
            close(r->event_fd);
        r->event_fd = -1;
    }
}

void ipufs_uring_free(struct ipufs_uring *u)
{
    if (!u)
        return;
    /* A reader still waiting in receive leaves first (-ENODEV). */
    __atomic_store_n(&u->closing, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&u->receiving, __ATOMIC_ACQUIRE)) {
        wake(u->event_fd);
        struct timespec pause = { 0, 1000000 };
        nanosleep(&pause, NULL);
    }
    if (u->rings) {
        ipufs_uring_stop(u);
        for (int q = 0; q < u->queues; q++) {
            free(u->rings[q].commits);
            free(u->rings[q].scratch);
        }
    }
    if (u->headers_mem)
        munmap(u->headers_mem, u->headers_size);
    if (u->payload_mem)
        munmap(u->payload_mem, u->payload_size);
    if (u->event_fd >= 0)
        close(u->event_fd);
    free(u->entries);
    free(u->rings);
    free(u->handed);
    free(u);
}
