/* The native fast path (fastpath.h): answers qualifying FUSE requests
 * without the GIL, byte for byte as the Python path would
 * (ipufs/driver/driver.py, ipufs/fuse/session.py), or hands them to
 * Python. It only answers what Python would answer the same way, with no
 * effect beyond what Python's answer has (a response popped); any doubt (a
 * size, direction or flag the Python path would refuse, a file opened
 * read-only for an ioctl that needs writing, the response ring being
 * changed) sends the request to Python.
 *
 * Consistency. Writers (Python) are serialised by the daemon's lock.
 * Readers take no lock:
 * - an open file's slot is {fh, info}: the writer clears info, stores fh,
 *   then info; a reader loads fh, info, and fh again, and trusts info only
 *   when both fh loads name its file and info is marked valid;
 * - a mailbox's RESPONSE_HEAD and RESPONSE_TAIL are adjacent words read
 *   as one 64-bit load, inside the ICU's change sequence (a seqlock, odd
 *   while the ring is being changed; ipufs/model/icu.py): an odd or moved
 *   sequence sends the request to Python rather than wait;
 * - a response is popped only by whoever claimed that sequence (even to
 *   odd, atomically): here with one try (taken: Python's request), in the
 *   model with ipufs_fast_claim, which waits the few loads and stores a
 *   pop here takes.
 * The fast path answers only on x86, where it is tested (its readers and
 * the model's plain word stores inside a claim were reasoned about with
 * x86's total store order in mind); elsewhere it answers nothing. */
#include <sched.h>
#include "fastpath.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#define IPUFS_FAST_ORDERED 1
#else
#define IPUFS_FAST_ORDERED 0
#endif

/* linux/fuse.h */
#define FUSE_IOCTL 39
struct fuse_in_header {
    uint32_t len, opcode;
    uint64_t unique, nodeid;
    uint32_t uid, gid, pid;
    uint16_t total_extlen, padding;
};
struct fuse_ioctl_in {
    uint64_t fh;
    uint32_t flags, cmd;
    uint64_t arg;
    uint32_t in_size, out_size;
};
struct fuse_out_header {
    uint32_t len;
    int32_t error;
    uint64_t unique;
};
struct fuse_ioctl_out {
    int32_t result;
    uint32_t flags, in_iovs, out_iovs;
};

/* Open files: slot fh % FILE_SLOTS. A second open file whose handle falls
 * on a taken slot is not known here (its requests go to Python). */
#define FILE_SLOTS 4096
#define INFO_VALID (1ull << 63)
#define INFO_WRITABLE (1ull << 32)

struct file_slot {
    uint64_t fh;
    uint64_t info; /* INFO_VALID | INFO_WRITABLE? | ipu */
};

struct fast_ioctl {
    uint8_t kind;
    uint8_t needs_write;
};

struct fast_ipu {
    uint32_t *words; /* the mailbox, NULL: none */
    size_t count; /* its words */
    uint32_t *sequence; /* the ICU's change sequence */
    int64_t last_ns; /* activity time of the last request answered here */
} __attribute__((aligned(64)));

/* Requests answered, counted per answering thread: one counter shared by
 * the ring threads of different CPUs had its cache line move between them
 * on every answer. A thread takes the next slot the first time it answers
 * (slots are reused round-robin past COUNTERS threads: still exact, only
 * shared then); reading sums them. */
#define COUNTERS 64

struct fast_counter {
    uint64_t answered;
} __attribute__((aligned(64)));

static unsigned next_counter;
static __thread int own_counter = -1;

struct ipufs_fast {
    uint32_t hold;
    uint32_t type;
    uint32_t rings[4]; /* request ring, slots, response ring, slots */
    uint32_t slot_size;
    uint32_t head_word;
    uint32_t status_word, status_responses;
    int ipus;
    struct fast_ioctl ioctls[256];
    struct fast_ipu *ipu;
    struct file_slot files[FILE_SLOTS];
    struct fast_counter counters[COUNTERS];
};

struct ipufs_fast *ipufs_fast_new(int ipus)
{
    if (ipus < 0)
        return NULL;
    struct ipufs_fast *fast = aligned_alloc(64, (sizeof *fast + 63) / 64 * 64);
    if (fast == NULL)
        return NULL;
    memset(fast, 0, sizeof *fast);
    fast->hold = 1;
    fast->ipus = ipus;
    fast->ipu = aligned_alloc(64, sizeof(struct fast_ipu) * (size_t)(ipus ? ipus : 1));
    if (fast->ipu == NULL) {
        free(fast);
        return NULL;
    }
    memset(fast->ipu, 0, sizeof(struct fast_ipu) * (size_t)(ipus ? ipus : 1));
    return fast;
}

void ipufs_fast_free(struct ipufs_fast *fast)
{
    if (fast != NULL) {
        free(fast->ipu);
        free(fast);
    }
}

void ipufs_fast_hold(struct ipufs_fast *fast, uint32_t hold)
{
    __atomic_store_n(&fast->hold, hold, __ATOMIC_SEQ_CST);
}

void ipufs_fast_ioctl_type(struct ipufs_fast *fast, unsigned type)
{
    __atomic_store_n(&fast->type, type & 0xFF, __ATOMIC_RELEASE);
}

void ipufs_fast_ioctl(struct ipufs_fast *fast, unsigned nr, int kind, int needs_write)
{
    if (nr > 255)
        return;
    /* Set once, before the hold is released: plain stores. */
    fast->ioctls[nr].needs_write = (uint8_t)(needs_write != 0);
    __atomic_store_n(&fast->ioctls[nr].kind, (uint8_t)kind, __ATOMIC_RELEASE);
}

void ipufs_fast_rings(struct ipufs_fast *fast, uint32_t request_ring, uint32_t request_slots,
                      uint32_t response_ring, uint32_t response_slots, uint32_t slot_size,
                      uint32_t head_word, uint32_t status_word, uint32_t status_responses)
{
    /* Set once, before any mailbox is published. */
    fast->rings[0] = request_ring;
    fast->rings[1] = request_slots;
    fast->rings[2] = response_ring;
    fast->rings[3] = response_slots;
    fast->slot_size = slot_size;
    fast->status_word = status_word;
    fast->status_responses = status_responses;
    __atomic_store_n(&fast->head_word, head_word, __ATOMIC_RELEASE);
}

void ipufs_fast_mailbox(struct ipufs_fast *fast, int ipu, uint32_t *words, size_t count,
                        uint32_t *sequence)
{
    if (ipu < 0 || ipu >= fast->ipus)
        return;
    uint32_t head = fast->head_word;
    /* The two words must be readable as one aligned 64-bit load, and the
       status word and every response slot must lie inside. */
    size_t ring_end = ((size_t)fast->rings[2] + (size_t)fast->rings[3] * fast->slot_size) / 4;
    if (words != NULL && (head % 2 || (size_t)head + 2 > count || ((uintptr_t)words % 8) || sequence == NULL
                          || fast->status_word >= count || ring_end > count || fast->rings[3] == 0
                          || fast->slot_size < 20 || fast->rings[2] % 4 || fast->slot_size % 4))
        words = NULL;
    struct fast_ipu *state = &fast->ipu[ipu];
    __atomic_store_n(&state->words, NULL, __ATOMIC_SEQ_CST);
    __atomic_store_n(&state->count, count, __ATOMIC_SEQ_CST);
    __atomic_store_n(&state->sequence, sequence, __ATOMIC_SEQ_CST);
    __atomic_store_n(&state->words, words, __ATOMIC_SEQ_CST);
}

void ipufs_fast_claim(uint32_t *sequence)
{
    for (;;) {
        uint32_t seen = __atomic_load_n(sequence, __ATOMIC_RELAXED);
        if (!(seen & 1) && __atomic_compare_exchange_n(sequence, &seen, seen + 1, 0, __ATOMIC_ACQUIRE,
                                                       __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

void ipufs_fast_release(uint32_t *sequence)
{
    __atomic_add_fetch(sequence, 1, __ATOMIC_RELEASE);
}

int ipufs_fast_opened(struct ipufs_fast *fast, uint64_t fh, int ipu, int writable)
{
    if (ipu < 0 || ipu >= fast->ipus || fh == 0)
        return 0;
    struct file_slot *slot = &fast->files[fh % FILE_SLOTS];
    if (__atomic_load_n(&slot->info, __ATOMIC_ACQUIRE) & INFO_VALID)
        return slot->fh == fh;
    __atomic_store_n(&slot->info, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&slot->fh, fh, __ATOMIC_SEQ_CST);
    __atomic_store_n(&slot->info, INFO_VALID | (writable ? INFO_WRITABLE : 0) | (uint32_t)ipu, __ATOMIC_SEQ_CST);
    return 1;
}

void ipufs_fast_released(struct ipufs_fast *fast, uint64_t fh)
{
    struct file_slot *slot = &fast->files[fh % FILE_SLOTS];
    if (__atomic_load_n(&slot->fh, __ATOMIC_ACQUIRE) == fh)
        __atomic_store_n(&slot->info, 0, __ATOMIC_SEQ_CST);
}

uint64_t ipufs_fast_answered(struct ipufs_fast *fast)
{
    uint64_t sum = 0;
    for (int i = 0; i < COUNTERS; i++)
        sum += __atomic_load_n(&fast->counters[i].answered, __ATOMIC_RELAXED);
    return sum;
}

/* This thread's counter (the same slot in every ipufs_fast). */
static uint64_t *answered_counter(struct ipufs_fast *fast)
{
    if (own_counter < 0)
        own_counter = (int)(__atomic_fetch_add(&next_counter, 1, __ATOMIC_RELAXED) % COUNTERS);
    return &fast->counters[own_counter].answered;
}

int64_t ipufs_fast_last_ns(struct ipufs_fast *fast, int ipu)
{
    if (ipu < 0 || ipu >= fast->ipus)
        return 0;
    return __atomic_load_n(&fast->ipu[ipu].last_ns, __ATOMIC_RELAXED);
}

/* --- answering ------------------------------------------------------------ */

/* The open file `fh`'s info (0: not known here). */
static uint64_t file_info(struct ipufs_fast *fast, uint64_t fh)
{
    struct file_slot *slot = &fast->files[fh % FILE_SLOTS];
    if (__atomic_load_n(&slot->fh, __ATOMIC_ACQUIRE) != fh)
        return 0;
    uint64_t info = __atomic_load_n(&slot->info, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&slot->fh, __ATOMIC_ACQUIRE) != fh || !(info & INFO_VALID))
        return 0;
    return info;
}

/* Responses waiting in IPU `ipu`'s response ring, read consistently;
   -1 when it cannot be read now (no mailbox, a change under way). */
static int64_t responses_waiting(struct ipufs_fast *fast, int ipu)
{
    struct fast_ipu *state = &fast->ipu[ipu];
    const uint32_t *words = __atomic_load_n(&state->words, __ATOMIC_ACQUIRE);
    if (words == NULL)
        return -1;
    const uint32_t *sequence = __atomic_load_n(&state->sequence, __ATOMIC_ACQUIRE);
    uint32_t before = __atomic_load_n(sequence, __ATOMIC_ACQUIRE);
    if (before & 1)
        return -1;
    uint64_t pair = __atomic_load_n((const uint64_t *)(words + fast->head_word), __ATOMIC_ACQUIRE);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(sequence, __ATOMIC_RELAXED) != before)
        return -1;
    uint32_t head = (uint32_t)pair, tail = (uint32_t)(pair >> 32);
    return (uint32_t)(head - tail);
}

/* Take the next response off IPU `ipu`'s response ring into `message`,
   as the model's Icu.pop_response does (RESPONSE_TAIL advanced, STATUS's
   responses bit refreshed): 1 when taken, 0 when none waits, -1 when the
   ring is being changed (its sequence claimed). */
static int pop_response(struct ipufs_fast *fast, int ipu, uint32_t message[5])
{
    struct fast_ipu *state = &fast->ipu[ipu];
    uint32_t *words = __atomic_load_n(&state->words, __ATOMIC_ACQUIRE);
    if (words == NULL)
        return -1;
    uint32_t *sequence = __atomic_load_n(&state->sequence, __ATOMIC_ACQUIRE);
    uint32_t seen = __atomic_load_n(sequence, __ATOMIC_RELAXED);
    if ((seen & 1) || !__atomic_compare_exchange_n(sequence, &seen, seen + 1, 0, __ATOMIC_ACQUIRE,
                                                   __ATOMIC_RELAXED))
        return -1;
    uint32_t *head = words + fast->head_word, *tail = head + 1, *status = words + fast->status_word;
    uint32_t taken = __atomic_load_n(tail, __ATOMIC_RELAXED);
    uint32_t waiting = __atomic_load_n(head, __ATOMIC_RELAXED) - taken;
    if (waiting) {
        const uint32_t *slot = words + (fast->rings[2] + (taken % fast->rings[3]) * fast->slot_size) / 4;
        for (int i = 0; i < 5; i++)
            message[i] = __atomic_load_n(&slot[i], __ATOMIC_RELAXED);
        __atomic_store_n(tail, taken + 1, __ATOMIC_RELAXED);
        uint32_t was = __atomic_load_n(status, __ATOMIC_RELAXED);
        uint32_t now = (was & ~fast->status_responses) | (waiting > 1 ? fast->status_responses : 0);
        if (now != was)
            __atomic_store_n(status, now, __ATOMIC_RELAXED);
    }
    __atomic_store_n(sequence, seen + 2, __ATOMIC_RELEASE);
    return waiting != 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The reply: an errno alone, or fuse_ioctl_out and `n` bytes of `data`. */
static long reply_error(uint64_t unique, int error, void *reply, size_t capacity)
{
    struct fuse_out_header out = { sizeof out, -error, unique };
    if (capacity < sizeof out)
        return 0;
    memcpy(reply, &out, sizeof out);
    return (long)sizeof out;
}

#define REPLY_HEADERS (sizeof(struct fuse_out_header) + sizeof(struct fuse_ioctl_out))

static long reply_ioctl(uint64_t unique, const void *data, size_t n, void *reply, size_t capacity)
{
    struct fuse_out_header out = { 0, 0, unique };
    struct fuse_ioctl_out result = { 0, 0, 0, 0 };
    size_t total = sizeof out + sizeof result + n;
    if (capacity < total)
        return 0;
    out.len = (uint32_t)total;
    memcpy(reply, &out, sizeof out);
    memcpy((char *)reply + sizeof out, &result, sizeof result);
    memcpy((char *)reply + sizeof out + sizeof result, data, n);
    return (long)total;
}

/* The _IOC fields of an ioctl command (asm-generic/ioctl.h). */
#define IOC_NR(cmd) ((cmd) & 0xFF)
#define IOC_TYPE(cmd) (((cmd) >> 8) & 0xFF)
#define IOC_SIZE(cmd) (((cmd) >> 16) & 0x3FFF)
#define IOC_DIR(cmd) (((cmd) >> 30) & 3)
#define IOC_WRITE 1 /* caller -> driver: the kernel carries _IOC_SIZE bytes in */
#define IOC_READ 2 /* driver -> caller: the kernel copies the answer back */

static long answer_ioctl(struct ipufs_fast *fast, const struct fuse_in_header *in,
                         const struct fuse_ioctl_in *arg, size_t carried, void *reply, size_t capacity)
{
    uint32_t cmd = arg->cmd;
    if (arg->flags != 0 || IOC_TYPE(cmd) != __atomic_load_n(&fast->type, __ATOMIC_ACQUIRE))
        return 0;
    struct fast_ioctl row;
    row.kind = __atomic_load_n(&fast->ioctls[IOC_NR(cmd)].kind, __ATOMIC_ACQUIRE);
    row.needs_write = fast->ioctls[IOC_NR(cmd)].needs_write;
    if (row.kind == IPUFS_FAST_NONE)
        return 0;
    uint64_t info = file_info(fast, arg->fh);
    if (!info || (row.needs_write && !(info & INFO_WRITABLE)))
        return 0;
    int ipu = (int)(uint32_t)info;
    uint32_t size = IOC_SIZE(cmd), dir = IOC_DIR(cmd);
    /* What the kernel carried in must be the whole argument (else EINVAL). */
    if (carried != ((dir & IOC_WRITE) ? size : 0))
        return 0;
    long n = 0;
    switch (row.kind) {
    case IPUFS_FAST_MAILBOX_READ: {
        int64_t waiting = responses_waiting(fast, ipu);
        if (waiting < 0)
            return 0;
        if (size == 8 && (dir & IOC_READ)) {
            uint64_t count = (uint64_t)waiting;
            n = reply_ioctl(in->unique, &count, arg->out_size < 8 ? arg->out_size : 8, reply, capacity);
        } else if (size >= 20 && waiting == 0) {
            n = reply_error(in->unique, EAGAIN, reply, capacity);
        } else if (size >= 20 && (dir & IOC_READ) && capacity >= REPLY_HEADERS + 20) {
            /* (room for the reply known before a response is taken) */
            uint32_t message[5];
            size_t length = arg->out_size < sizeof message ? arg->out_size : sizeof message;
            int popped = pop_response(fast, ipu, message);
            if (popped > 0)
                n = reply_ioctl(in->unique, message, length, reply, capacity);
            else if (popped == 0)
                n = reply_error(in->unique, EAGAIN, reply, capacity);
        }
        break; /* an answer into the caller's memory, a bad size, a ring being changed: Python */
    }
    case IPUFS_FAST_MAILBOX_OFFSETS:
        if (size >= 8 && (dir & IOC_READ)) {
            uint32_t answer[4];
            size_t length = size < 16 ? 8 : 16;
            if (length == 8) {
                answer[0] = fast->rings[0];
                answer[1] = fast->rings[2];
            } else {
                memcpy(answer, fast->rings, sizeof answer);
            }
            n = reply_ioctl(in->unique, answer, arg->out_size < length ? arg->out_size : length, reply, capacity);
        }
        break;
    default:
        break;
    }
    if (n > 0) {
        /* The IPU saw a request: its activity time, stored at most once
           per 100 us (the register watcher's pace needs no finer). */
        int64_t now = now_ns();
        int64_t *last = &fast->ipu[ipu].last_ns;
        if (now - __atomic_load_n(last, __ATOMIC_RELAXED) > 100000)
            __atomic_store_n(last, now, __ATOMIC_RELAXED);
    }
    return n;
}

long ipufs_fast_answer(struct ipufs_fast *fast, const void *request, size_t length,
                       void *reply, size_t capacity)
{
    if (!IPUFS_FAST_ORDERED || fast == NULL || __atomic_load_n(&fast->hold, __ATOMIC_ACQUIRE))
        return 0;
    struct fuse_in_header in;
    if (length < sizeof in)
        return 0;
    memcpy(&in, request, sizeof in);
    if (in.len != length || in.opcode != FUSE_IOCTL)
        return 0;
    size_t end = length - (size_t)in.total_extlen * 8;
    if ((size_t)in.total_extlen * 8 > length || end < sizeof in + sizeof(struct fuse_ioctl_in))
        return 0;
    struct fuse_ioctl_in arg;
    memcpy(&arg, (const char *)request + sizeof in, sizeof arg);
    size_t carried = end - sizeof in - sizeof arg;
    if (carried != arg.in_size)
        return 0;
    long n = answer_ioctl(fast, &in, &arg, carried, reply, capacity);
    if (n > 0)
        __atomic_add_fetch(answered_counter(fast), 1, __ATOMIC_RELAXED);
    return n;
}
