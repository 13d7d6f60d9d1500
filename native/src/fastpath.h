/* The native fast path (docs/serving.md, "The fast path"): FUSE
 * requests whose answer depends only on model state the daemon keeps in
 * shared memory, and whose serving has no effect that needs Python, are
 * answered here, without the GIL, by whichever native thread read them
 * (the /dev/fuse reader's spin, an io_uring ring thread). Everything else
 * is handed to Python unchanged.
 *
 * Python (ipufs/driver/fast_path.py) publishes what the answers need and
 * keeps it current: which ioctls qualify and how each is answered (a
 * column of the ABI table), the open files (file handle -> IPU, opened
 * for writing), each IPU's mailbox words, and a hold word that sends
 * every request to Python while anything the Python path does around a
 * request is active (tracing, access counting, page-cache mode, the
 * setting off). Writers are serialised by the daemon's lock; readers take
 * no lock. */
#ifndef IPUFS_FASTPATH_H
#define IPUFS_FASTPATH_H

#include <stddef.h>
#include <stdint.h>

struct ipufs_fast;   /* what Python publishes: node table, mailbox pointers, flags */

/* If `request` (a whole FUSE request, fuse_in_header first, `length`
   bytes) is on the fast path and nothing needs Python now, write the
   whole reply (fuse_out_header first) into `reply` and return its
   length (> 0); return 0 to hand the request to Python unchanged.
   Thread-safe, never takes the GIL, never blocks. */
long ipufs_fast_answer(struct ipufs_fast *fast, const void *request, size_t length,
                       void *reply, size_t capacity);

/* How a qualifying ioctl is answered (the ABI table's `fast` column). */
enum ipufs_fast_kind {
    IPUFS_FAST_NONE = 0,
    /* MAILBOX_READ_ONLY: the u64 count of responses waiting; the message
       form takes the next response off the ring, or EAGAIN when none
       waits. */
    IPUFS_FAST_MAILBOX_READ = 1,
    /* MAILBOX_GET_OFFSETS: the ring offsets and slot counts published. */
    IPUFS_FAST_MAILBOX_OFFSETS = 2,
};

/* --- publishing (Python's side, under the daemon's lock) ---------------- */

/* A fast path for `ipus` IPUs, held (answering nothing) until released by
   ipufs_fast_hold(fast, 0). NULL when out of memory. */
struct ipufs_fast *ipufs_fast_new(int ipus);
void ipufs_fast_free(struct ipufs_fast *fast);

/* Nonzero: every request goes to Python (the bits are Python's). */
void ipufs_fast_hold(struct ipufs_fast *fast, uint32_t hold);

/* The driver's ioctl type byte, and for ioctl number `nr` its kind and
   whether it needs a file opened for writing (EBADF otherwise). */
void ipufs_fast_ioctl_type(struct ipufs_fast *fast, unsigned type);
void ipufs_fast_ioctl(struct ipufs_fast *fast, unsigned nr, int kind, int needs_write);

/* The mailbox rings: request ring offset and slots, response ring offset
   and slots (MAILBOX_GET_OFFSETS), a slot's size; the index of the
   RESPONSE_HEAD word, RESPONSE_TAIL being the next (both read as one
   64-bit load), and of the STATUS word with its responses-waiting bit. */
void ipufs_fast_rings(struct ipufs_fast *fast, uint32_t request_ring, uint32_t request_slots,
                      uint32_t response_ring, uint32_t response_slots, uint32_t slot_size,
                      uint32_t head_word, uint32_t status_word, uint32_t status_responses);

/* IPU `ipu`'s mailbox words (NULL: none; its requests go to Python) and
   the ICU's change sequence: odd while someone changes the response ring
   (a seqlock readers read inside, and a claim writers take atomically:
   ipufs_fast_claim; ipufs/model/icu.py). After ipufs_fast_rings. */
void ipufs_fast_mailbox(struct ipufs_fast *fast, int ipu, uint32_t *words, size_t count,
                        uint32_t *sequence);

/* Claim a change sequence (even to odd, atomically; waits, yielding, while
   another holds it, which the fast path does for a few loads and stores),
   and release it (odd to even). The model claims through these while a
   fast path may pop responses. */
void ipufs_fast_claim(uint32_t *sequence);
void ipufs_fast_release(uint32_t *sequence);

/* File handle `fh` is open on IPU `ipu` (`writable`: not O_RDONLY).
   Returns 1 when the fast path knows it, 0 when its slot is taken by
   another open file (that file's requests then go to Python). */
int ipufs_fast_opened(struct ipufs_fast *fast, uint64_t fh, int ipu, int writable);
/* File handle `fh` is released. */
void ipufs_fast_released(struct ipufs_fast *fast, uint64_t fh);

/* --- what the fast path did (read by Python) ----------------------------- */

/* Requests answered here, since the start. */
uint64_t ipufs_fast_answered(struct ipufs_fast *fast);
/* CLOCK_MONOTONIC time, in ns, of the last request answered here for IPU
   `ipu` (0: none): its activity time (ipufs/driver/activity.py). */
int64_t ipufs_fast_last_ns(struct ipufs_fast *fast, int ipu);

#endif
