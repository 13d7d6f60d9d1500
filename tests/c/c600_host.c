/* Drives /dev/ipu0 of an ipu21 as a runtime that drives a real C600 does
 * (osmarks/ipu-stack, crates/ipu-driver/src/lib.rs; the digest of what it
 * does is docs/compat.md's source list): the ioctls in the forms it calls
 * them, every config access a volatile 32-bit load or store through its
 * MAP_SHARED mapping of 0x80000 bytes, the tile debug interface by
 * physical tile with exactly the injected words it uses. Run under
 * `ipufs run --profile ipu21` (the compatibility library makes the
 * mapping MMIO). Prints a line per step; exits 0 when every check holds.
 *
 * Usage: c600-host IMAGE TILE ENTRY COUNTER WORD...
 *   IMAGE a configuration image (IPUCFG1), TILE a physical tile, WORD...
 *   a supervisor program for ENTRY that keeps adding 1 to the u32 at
 *   COUNTER. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../native/include/ipufs/ipu.h"

/* The request numbers as the runtime builds them (dir << 30 | size << 16 | 0xED << 8 | nr). */
#define REQ(dir, nr, size) ((unsigned long)(dir) << 30 | (unsigned long)(size) << 16 | IPU_IOCTL_TYPE << 8 | (nr))
#define BAR_SIZE 0x80000u
#define TDI_BASE 0x30000u
#define GET_M0_PC 0x41000000u
#define GET_M0_DATA 0x41000070u
#define GET_M1_DATA 0x41010070u
#define LD32_M0_M1 0x01F01000u
#define ST32_M0_M1 0x4F10F000u
#define PUT_DATA(n) (0x43008070u | (uint32_t)(n) << 20)
#define BRI(target) (0x40800000u | (target) >> 2)
#define WORKER 1

static volatile uint32_t *bar;
static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            printf("FAIL: ");                                                  \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        }                                                                      \
    } while (0)

static volatile uint32_t *tdi(uint32_t p, uint32_t r)
{
    return bar + (TDI_BASE + p * 0x40u + r * 4u) / 4u;
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static unsigned state(uint32_t p, unsigned c)
{
    return (*tdi(p, IPU_TDI_REG_CTXT_STS) >> (2 * c)) & 3;
}

/* One injected instruction: STATUS_CLEAR, OWNER, INSTRUCTION, then STATUS
 * polled with no sleep until BUSY clears (ipufs retires injections at its
 * executor's pace, so the budget is seconds, not the card's 100 ms). */
static int execute(uint32_t p, unsigned c, uint32_t word)
{
    *tdi(p, IPU_TDI_REG_TDI_CLR) = 6;
    *tdi(p, IPU_TDI_REG_DBG_IOWNER) = c;
    *tdi(p, IPU_TDI_REG_DBG_IEXEC) = word;
    long long deadline = now_ms() + 5000;
    uint32_t status;
    while ((status = *tdi(p, IPU_TDI_REG_TDI_STS)) & IPU_TDI_STS_BUSY)
        if (now_ms() > deadline)
            return -ETIMEDOUT;
    return status & 7 ? -(int)status : 0;
}

static uint32_t read_m(uint32_t p, unsigned c, unsigned n)
{
    CHECK(execute(p, c, PUT_DATA(n)) == 0, "put $DBG_DATA, $m%u", n);
    return *tdi(p, IPU_TDI_REG_DBG_DATA);
}

static void restore(uint32_t p, unsigned c, uint32_t m0, uint32_t m1)
{
    *tdi(p, IPU_TDI_REG_DBG_DATA) = m1;
    CHECK(execute(p, c, GET_M1_DATA) == 0, "restore $m1");
    *tdi(p, IPU_TDI_REG_DBG_DATA) = m0;
    CHECK(execute(p, c, GET_M0_DATA) == 0, "restore $m0");
}

static int wait_excepted(uint32_t p, unsigned c)
{
    long long deadline = now_ms() + 5000;
    while (state(p, c) < 2)
        if (now_ms() > deadline)
            return 0;
    return 1;
}

/* The runtime's stop / operate / resume wrapper around `op`. */
struct op {
    uint32_t address, value, out;
    int write;
};

static void tile_word(uint32_t p, unsigned c, int inactive_ok, struct op *op)
{
    uint32_t bit = 1u << c, r0 = *tdi(p, IPU_TDI_REG_DBG_RBRK);
    unsigned s = state(p, c);
    int already = s >= 2 || (inactive_ok && s == 0);
    if (!already) {
        *tdi(p, IPU_TDI_REG_DBG_RBRK) = r0 | bit;
        CHECK(wait_excepted(p, c), "tile %u context %u did not stop", p, c);
    }
    uint32_t m0 = read_m(p, c, 0), m1 = read_m(p, c, 1);
    *tdi(p, IPU_TDI_REG_DBG_DATA) = op->address;
    CHECK(execute(p, c, GET_M1_DATA) == 0, "get $m1, $DBG_DATA");
    if (op->write) {
        *tdi(p, IPU_TDI_REG_DBG_DATA) = op->value;
        CHECK(execute(p, c, GET_M0_DATA) == 0, "get $m0, $DBG_DATA");
        CHECK(execute(p, c, ST32_M0_M1) == 0, "st32");
    } else {
        CHECK(execute(p, c, LD32_M0_M1) == 0, "ld32");
        op->out = read_m(p, c, 0);
    }
    restore(p, c, m0, m1);
    if (!already) {
        *tdi(p, IPU_TDI_REG_DBG_RBRK) = r0;
        if (!(r0 & bit))
            *tdi(p, IPU_TDI_REG_DBG_ECLR) = bit;
    }
}

static uint32_t read_word(uint32_t p, uint32_t address)
{
    struct op op = {address, 0, 0, 0};
    tile_word(p, WORKER, 1, &op);
    return op.out;
}

static void write_word(uint32_t p, uint32_t address, uint32_t value)
{
    struct op op = {address, value, 0, 1};
    tile_word(p, WORKER, 0, &op); /* an inactive worker is stopped first, as the runtime's write does */
}

static int call(int fd, unsigned long request, unsigned long arg, const char *name)
{
    int r = ioctl(fd, request, arg);
    printf("%s %s\n", name, r == 0 ? "ok" : strerror(errno));
    CHECK(r == 0, "%s", name);
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: c600-host IMAGE TILE ENTRY COUNTER WORD...\n");
        return 2;
    }
    uint32_t p = (uint32_t)strtoul(argv[2], NULL, 0), entry = (uint32_t)strtoul(argv[3], NULL, 0);
    uint32_t counter = (uint32_t)strtoul(argv[4], NULL, 0);

    /* Runtime::open blocks every signal first (it polls, and never
     * handles 44..49); SIGSEGV stays deliverable under the library. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    /* Device::open */
    int fd = open("/dev/ipu0", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        perror("open /dev/ipu0");
        return 2;
    }
    bar = mmap(NULL, BAR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (bar == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    call(fd, REQ(3, 10, 8), 0, "USER_ATTACH");
    call(fd, REQ(3, 14, 8), 0, "SET_IPU_ID");
    /* Device::initialize */
    call(fd, REQ(0, 34, 0), 0, "STOP_MONITORING");
    uint32_t sent[5] = {0x4078020e, 0, 0, 0, 0}, received[5] = {0};
    struct { const uint32_t (*sent)[5]; uint32_t (*received)[5]; } mailbox = {&sent, &received};
    call(fd, REQ(3, 31, 8), (unsigned long)&mailbox, "MAILBOX_WRITE_READ");
    printf("icu answer 0x%08x\n", received[0]);
    CHECK((received[0] & 0xFFFF0000u) == 0x40780000u, "unexpected ICU reset response 0x%x", received[0]);
    call(fd, REQ(0, 35, 0), 0, "START_MONITORING");
    call(fd, REQ(0, 36, 0), 0, "ACCUMULATE_ERRORS");
    call(fd, REQ(1, 45, 4), 0, "RESET_DEVICE");
    uint32_t secondary = 0;
    call(fd, REQ(1, 47, 8), (unsigned long)&secondary, "SET_SECONDARY_IPU_ID");
    call(fd, REQ(0, 44, 0), 0, "SET_HEXOPT_IDENTITY_TABLE");
    /* A host-exchange session's buffers: detach all, attach by index, detach by value. */
    static uint8_t page[4096] __attribute__((aligned(4096)));
    struct { uint32_t index, size; uint64_t address; } buffer = {1, sizeof page, (uint64_t)(uintptr_t)page};
    call(fd, REQ(0, 18, 0), 0, "BUFFER_DETACH_ALL");
    call(fd, REQ(3, 11, 8), (unsigned long)&buffer, "BUFFER_ATTACH");
    call(fd, REQ(3, 12, 8), 1, "BUFFER_DETACH");

    /* Device::replay_configuration */
    FILE *f = fopen(argv[1], "rb");
    static uint8_t image[1 << 16];
    size_t n = f ? fread(image, 1, sizeof image, f) : 0;
    uint32_t count;
    memcpy(&count, image + 8, 4);
    if (n < 12 || memcmp(image, "IPUCFG1", 8) != 0 || n != 12 + 8 * (size_t)count) {
        fprintf(stderr, "bad configuration image\n");
        return 2;
    }
    for (uint32_t k = 0; k < count; k++) {
        uint32_t off, value;
        memcpy(&off, image + 12 + 8 * k, 4);
        memcpy(&value, image + 16 + 8 * k, 4);
        if (off != IPU_REG_HSP_GS1_CONTROL && off != IPU_REG_HSP_GS2_CONTROL)
            bar[off / 4] = value;
    }
    bar[IPU_REG_HSP_GS1_CONTROL / 4] = 0;
    CHECK((bar[IPU_REG_HSP_GS1_CONTROL / 4] & 0xFFFF) == 0, "HSP_GS1 did not clear");
    bar[IPU_REG_HSP_GS2_CONTROL / 4] = 0;
    CHECK((bar[IPU_REG_HSP_GS2_CONTROL / 4] & 0xFFFF) == 0, "HSP_GS2 did not clear");
    printf("replayed %u writes, CCSR 0x%x, RUN_BREAK 0x%x\n", count, bar[IPU_REG_CCSR / 4],
           *tdi(p, IPU_TDI_REG_DBG_RBRK));

    /* Tile words through an inactive worker. */
    for (int k = 5; k < argc; k++)
        write_word(p, entry + 4u * (uint32_t)(k - 5), (uint32_t)strtoul(argv[k], NULL, 0));
    write_word(p, counter, 0);
    uint32_t first = read_word(p, entry), last = read_word(p, entry + 4u * (uint32_t)(argc - 6));
    CHECK(first == (uint32_t)strtoul(argv[5], NULL, 0) && last == (uint32_t)strtoul(argv[argc - 1], NULL, 0),
          "program read back 0x%x .. 0x%x", first, last);
    printf("worker %u after the writes: state %u\n", WORKER, state(p, WORKER));

    /* Start the supervisor with an injected branch. */
    uint32_t r0 = *tdi(p, IPU_TDI_REG_DBG_RBRK);
    *tdi(p, IPU_TDI_REG_DBG_RBRK) = r0 | 1;
    CHECK(wait_excepted(p, 0), "the supervisor did not stop");
    CHECK(execute(p, 0, BRI(entry)) == 0, "bri");
    *tdi(p, IPU_TDI_REG_DBG_RBRK) = r0;
    *tdi(p, IPU_TDI_REG_DBG_ECLR) = 1;
    long long deadline = now_ms() + 5000;
    while (read_word(p, counter) < 100 && now_ms() < deadline)
        ;
    uint32_t ran = read_word(p, counter);
    printf("started: state %u, counter %s\n", state(p, 0), ran >= 100 ? "moving" : "still");
    CHECK(state(p, 0) == 1 && ran >= 100, "the supervisor does not run (state %u, counter %u)", state(p, 0), ran);

    /* Stop it with RUN_BREAK while it runs, read its PC. */
    *tdi(p, IPU_TDI_REG_DBG_RBRK) = r0 | 1;
    CHECK(wait_excepted(p, 0), "RUN_BREAK did not stop the supervisor");
    uint32_t m0 = read_m(p, 0, 0);
    CHECK(execute(p, 0, GET_M0_PC) == 0, "get $m0, $PC");
    uint32_t pc = read_m(p, 0, 0);
    *tdi(p, IPU_TDI_REG_DBG_DATA) = m0;
    CHECK(execute(p, 0, GET_M0_DATA) == 0, "restore $m0");
    uint32_t held = read_word(p, counter), still = read_word(p, counter);
    printf("stopped: state %u, pc %s, counter %s\n", state(p, 0),
           pc >= entry && pc < entry + 4u * (uint32_t)(argc - 5) ? "in the program" : "elsewhere",
           held == still ? "held" : "moving");
    CHECK(pc >= entry && pc < entry + 4u * (uint32_t)(argc - 5) && held == still, "pc 0x%x, counter %u then %u",
          pc, held, still);

    /* Resume it with EXCEPTION_CLEAR: it goes on from there. */
    *tdi(p, IPU_TDI_REG_DBG_RBRK) = r0;
    *tdi(p, IPU_TDI_REG_DBG_ECLR) = 1;
    deadline = now_ms() + 5000;
    while (read_word(p, counter) < still + 100 && now_ms() < deadline)
        ;
    uint32_t after = read_word(p, counter);
    printf("resumed: state %u, counter %s\n", state(p, 0), after >= still + 100 ? "moving" : "still");
    CHECK(state(p, 0) == 1 && after >= still + 100, "not resumed: state %u, counter %u", state(p, 0), after);
    printf("exceptions %u (cause of the first %u)\n", bar[IPU_REG_EXC_COUNT / 4], bar[IPU_REG_EXC_CAUSE / 4]);
    printf("%s\n", failures ? "failed" : "done");
    return failures != 0;
}
