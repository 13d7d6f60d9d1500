/* The tile executor's hot loop: turns, round-robin contexts and the
 * instructions whose semantic rule names a native form (the `native` column
 * of the semantic tables in ipufs/model/executor/). It does exactly what the Python path does
 * for those, on the same arrays, and hands every other turn back: system
 * instructions with side effects outside these arrays, the floating point
 * it does not take, and any instruction that would fault (a misaligned
 * access, a bad PC, a shift past 31, an enabled floating-point exception),
 * which Python then executes and turns into the exception with its cause
 * and address. The rules and their sources: docs/execution.md. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "executor.h"

/* The forms: how operands are used. X(enum, name as the tables spell it). */
#define FORMS(X) \
    X(PYTHON, "python") \
    X(MRR, "mrr") X(MRI, "mri") X(MIR, "mir") X(MR, "mr") \
    X(ARR, "arr") X(ARI, "ari") X(ANOT, "anot") X(PRR, "prr") X(PNOT, "pnot") \
    X(SETZIM, "setzim") X(SETZIA, "setzia") X(ATOM, "atom") \
    X(LDMR, "ldmr") X(LDMI, "ldmi") X(LDMSR, "ldmsr") X(LDMSI, "ldmsi") \
    X(LDAR, "ldar") X(LDAI, "ldai") X(LDASR, "ldasr") X(LDASI, "ldasi") \
    X(STMI, "stmi") X(STMSI, "stmsi") X(STMX, "stmx") \
    X(STAR, "star") X(STAI, "stai") X(STASR, "stasr") X(STASI, "stasi") \
    X(BRI, "bri") X(BR, "br") X(BRZ, "brz") X(BRNZ, "brnz") X(BRNEG, "brneg") X(BRPOS, "brpos") \
    X(BRNZDEC, "brnzdec") X(CALL, "call") X(DELAY, "delay") X(SYNC, "sync") \
    X(DELAYPIC, "delaypic") X(DELAYXPIC, "delayxpic") X(SEND, "send") X(SENDOFF, "sendoff") X(SENDPIC, "sendpic") \
    X(RPTM, "rptm") X(RPTI, "rpti") X(RUN, "run") X(RUNALL, "runall") X(EXIT, "exit") \
    X(GET, "get") X(PUT, "put") X(UGET, "uget") X(UPUT, "uput") \
    X(F32, "f32") X(F32V2, "f32v2") X(F32V2B, "f32v2b") \
    X(F16V2, "f16v2") X(F16V2L, "f16v2l") X(F16V2U, "f16v2u") X(F16V4, "f16v4") X(F16V4L, "f16v4l") \
    X(F16V4U, "f16v4u")

/* The kinds: which operation a form applies, or which access it makes. */
#define KINDS(X) \
    X(NONE, "") \
    X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(MAX, "max") X(MIN, "min") \
    X(AND, "and") X(ANDC, "andc") X(OR, "or") X(XOR, "xor") X(XNOR, "xnor") \
    X(CMPEQ, "cmpeq") X(CMPNE, "cmpne") X(CMPSLT, "cmpslt") X(CMPULT, "cmpult") \
    X(SHL, "shl") X(SHR, "shr") X(SHRS, "shrs") \
    X(ABS, "abs") X(CLZ, "clz") X(CMS, "cms") X(POPC, "popc") X(BITREV8, "bitrev8") \
    X(S8, "s8") X(Z8, "z8") X(S16, "s16") X(Z16, "z16") X(W32, "w32") \
    X(A32, "a32") X(A64, "a64") X(A128, "a128") X(B16, "b16") \
    X(Z, "z") X(NZ, "nz") X(NEG, "neg") X(POS, "pos") \
    X(CMPLT, "cmplt") X(CMPLE, "cmple") X(CMPGT, "cmpgt") X(CMPGE, "cmpge")

/* What get/put/uget/uput of a CSR does (csr.py's table names one per index). */
#define CSR_OPS(X) \
    X(PYTHON, "python") X(PLAIN, "plain") X(ZERO, "zero") X(PC, "pc") X(SSR, "ssr") X(WSR, "wsr") \
    X(TILE, "tile") X(CTXT_STS, "ctxt_sts") X(SCOUNT_L, "scount_l") X(SCOUNT_U, "scount_u") \
    X(COUNT_L, "count_l") X(COUNT_U, "count_u") X(WORKER_BASE, "worker_base") \
    X(REPEAT_COUNT, "repeat_count") X(REPEAT_FIRST, "repeat_first") X(REPEAT_END, "repeat_end")

#define ENUM_F(e, s) F_##e,
#define ENUM_K(e, s) K_##e,
#define ENUM_C(e, s) C_##e,
#define NAME(e, s) s,
enum { FORMS(ENUM_F) F_COUNT };
enum { KINDS(ENUM_K) K_COUNT };
enum { CSR_OPS(ENUM_C) C_COUNT };

#include "executor_fp.h"  /* the f32 and f16 lanes, on the K_ names */

static const char *const form_names[] = { FORMS(NAME) };
static const char *const kind_names[] = { KINDS(NAME) };
static const char *const csr_op_names[] = { CSR_OPS(NAME) };

int ipufs_x_form_count(void) { return F_COUNT; }
const char *ipufs_x_form_name(int form) { return form >= 0 && form < F_COUNT ? form_names[form] : NULL; }
int ipufs_x_kind_count(void) { return K_COUNT; }
const char *ipufs_x_kind_name(int kind) { return kind >= 0 && kind < K_COUNT ? kind_names[kind] : NULL; }
int ipufs_x_csr_op_count(void) { return C_COUNT; }
const char *ipufs_x_csr_op_name(int op) { return op >= 0 && op < C_COUNT ? csr_op_names[op] : NULL; }

#include "executor_cache.h"  /* the decode cache and the code slots, on the F_ names */
#include "executor_exchange.h"  /* the exchange between the tiles */

/* ---- semantics ------------------------------------------------------------- */

enum { OK = -1, OK_PAIR = -2 };

/* The integer operations (alu.py); 0 when the result is not public (a shift
 * by more than 31: Python raises the fault). */
static inline int alu(int kind, uint32_t x, uint32_t y, uint32_t *out)
{
    switch (kind) {
    case K_ADD: *out = x + y; return 1;
    case K_SUB: *out = x - y; return 1;
    case K_MUL: *out = x * y; return 1;  /* the low 32 bits of the signed product */
    case K_MAX: *out = (int32_t)x > (int32_t)y ? x : y; return 1;
    case K_MIN: *out = (int32_t)x < (int32_t)y ? x : y; return 1;
    case K_AND: *out = x & y; return 1;
    case K_ANDC: *out = x & ~y; return 1;
    case K_OR: *out = x | y; return 1;
    case K_XOR: *out = x ^ y; return 1;
    case K_XNOR: *out = ~(x ^ y); return 1;
    case K_CMPEQ: *out = x == y; return 1;
    case K_CMPNE: *out = x != y; return 1;
    case K_CMPSLT: *out = (int32_t)x < (int32_t)y; return 1;
    case K_CMPULT: *out = x < y; return 1;
    case K_SHL: if (y > 31) return 0; *out = x << y; return 1;
    case K_SHR: if (y > 31) return 0; *out = x >> y; return 1;
    case K_SHRS: if (y > 31) return 0; *out = (uint32_t)((int32_t)x >> y); return 1;
    case K_ABS: *out = x == 0x80000000u ? 0 : (int32_t)x < 0 ? 0u - x : x; return 1;  /* abs(-2**31) = 0: J */
    case K_CLZ: *out = x ? (uint32_t)__builtin_clz(x) : 32; return 1;
    case K_CMS: {
        uint32_t z = (x & 0x80000000u ? ~x : x) & 0x7FFFFFFFu;
        *out = 31 - (z ? 32 - (uint32_t)__builtin_clz(z) : 0);
        return 1;
    }
    case K_POPC: *out = (uint32_t)__builtin_popcount(x); return 1;
    case K_BITREV8: {
        uint32_t v = x;
        v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
        v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
        v = ((v >> 4) & 0x0F0F0F0Fu) | ((v & 0x0F0F0F0Fu) << 4);
        *out = v;
        return 1;
    }
    default: return 0;
    }
}

static inline void set(uint32_t *file, uint32_t reg, uint32_t value)
{
    if (reg != 15)  /* $m15 and $a15 read 0 and ignore writes */
        file[reg] = value;
}

/* Where a branch form goes from `next`, the address after it (control.py);
 * brnzdec counts its register down. */
static inline uint32_t branch(int form, const uint32_t *o, uint32_t *m, uint32_t next)
{
    switch (form) {
    case F_BRI: return o[0];
    case F_BR: return m[o[0]];
    case F_BRZ: return m[o[0]] == 0 ? o[1] : next;
    case F_BRNZ: return m[o[0]] != 0 ? o[1] : next;
    case F_BRNEG: return (int32_t)m[o[0]] < 0 ? o[1] : next;
    case F_BRPOS: return (int32_t)m[o[0]] > 0 ? o[1] : next;
    default:  /* F_BRNZDEC */
        if (m[o[0]] == 0)
            return next;
        set(m, o[0], m[o[0]] - 1);
        return o[1];
    }
}

/* What offset_of gives an address where there is no memory. */
#define NO_MEMORY 0xFFFFFFFFu

/* A tile address's byte in the tile's SRAM (TileMemory.offset), or
 * NO_MEMORY. */
static inline uint32_t offset_of(const struct ipufs_x *x, uint32_t address)
{
    if (x->bounded) {
        uint32_t o = address - x->memory_base;  /* below the base: wraps past sram */
        return o < x->sram ? o : NO_MEMORY;
    }
    uint32_t o = address & 0x1FFFFFu & (x->window - 1);
    return o >= x->sram ? o - x->sram : o;
}

static inline int width_of(int kind)
{
    switch (kind) {
    case K_S8: case K_Z8: return 1;
    case K_S16: case K_Z16: case K_B16: return 2;
    case K_A64: return 8;
    case K_A128: return 16;
    default: return 4;
    }
}

/* Memory for an access, or NULL when Python must make it (it faults). */
static inline uint8_t *reach(const struct ipufs_x *x, uint8_t *sram, uint32_t address, int width, int kind)
{
    if (address & (uint32_t)(width - 1))
        return NULL;
    uint32_t o = offset_of(x, address);
    if (o == NO_MEMORY || (kind == K_A128 && o < x->region1))  /* no memory; ld128: region 1 only */
        return NULL;
    return sram + o;
}

static inline uint64_t read_le(const uint8_t *p, int width)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)(width > 8 ? 8 : width));  /* little-endian host */
    return v;
}

/* A load into $m (ld32, lds/ldz 8 and 16). */
static inline int load_m(const struct ipufs_x *x, uint8_t *sram, int kind, uint32_t address, uint32_t *value)
{
    int width = width_of(kind);
    uint8_t *p = reach(x, sram, address, width, kind);
    if (!p)
        return 0;
    uint32_t v = (uint32_t)read_le(p, width);
    if (kind == K_S8)
        v = (uint32_t)(int32_t)(int8_t)v;
    else if (kind == K_S16)
        v = (uint32_t)(int32_t)(int16_t)v;
    *value = v;
    return 1;
}

/* A load into $a: the words it writes (ldb16: the half in both halves). */
static inline int load_a(const struct ipufs_x *x, uint8_t *sram, int kind, uint32_t address, uint32_t words[4], int *n)
{
    int width = width_of(kind);
    uint8_t *p = reach(x, sram, address, width, kind);
    if (!p)
        return 0;
    if (kind == K_B16) {
        uint32_t h = (uint32_t)read_le(p, 2);
        words[0] = h | h << 16;
        *n = 1;
        return 1;
    }
    *n = width / 4;
    memcpy(words, p, (size_t)width);
    return 1;
}

/* What one thread of the loop writes as it runs tiles: the logs Python
 * drains, what it counts, and its code slots (executor_cache.h). The
 * sequential path's lane logs into the arrays of struct ipufs_x; each of a
 * parallel pass's lanes into buffers of its own, copied there in the
 * tiles' order afterwards (docs/executor-speed.md, "Every core"). */
struct lane {
    uint32_t *events;         /* (kind, tile, context, PC, value) per program event */
    uint32_t event_count, event_capacity;
    uint32_t *dirty;          /* (BAR offset, length) pairs of stores, for page-cache mode */
    uint32_t dirty_count, dirty_capacity;
    uint8_t *memory;          /* what the offsets count from */
    int64_t retired;          /* instructions retired */
    uint32_t changed;         /* a sync or an exit: _settle reads what it changed */
    uint64_t miss;            /* IPUFS_X_MISS: the word to decode */
    int64_t offer;            /* turns between its offers of the CPU (0: never): x->offer */
    int64_t since_yield;      /* turns since the CPU was last offered */
    int serial;               /* the caller's thread (the sequential path): it may run the exchange */
    int64_t grace;            /* turns still to take once `stop` is seen; -1: not seen */
    struct slot *slots;       /* its code slots (NULL: none) */
};

/* Record a store for the page-cache mode's copies; 0 when the log is full. */
static inline int logged(struct lane *lane, uint8_t *p, int width)
{
    if (!lane->dirty_capacity)
        return 1;
    if (lane->dirty_count >= lane->dirty_capacity)
        return 0;
    lane->dirty[2 * lane->dirty_count] = (uint32_t)(p - lane->memory);
    lane->dirty[2 * lane->dirty_count + 1] = (uint32_t)width;
    lane->dirty_count++;
    return 1;
}

/* The turn under way: which context of which tile, and its tile's state. */
struct turn {
    uint32_t tile, ctx, count;  /* count: contexts per tile */
    uint32_t *m;        /* the context's $m */
    int64_t *f;         /* the context's fields */
    int64_t *t;         /* the tile's counters */
    int64_t *fields;    /* the tile's contexts' fields */
    uint32_t *registers, *csrs;  /* the tile's contexts' registers and CSRs */
    uint8_t *sram;
    int64_t turns;      /* the tile's turn count before this turn (t[IPUFS_X_TURNS] is written back later) */
    int reready;        /* a context started, stopped, waits or stalls: which can run must be looked at again */
};

/* Room in the event log for n more events. */
static inline int room(const struct lane *lane, uint32_t n)
{
    return lane->event_count + n <= lane->event_capacity;
}

static inline void log_event(struct lane *lane, uint32_t kind, const struct turn *w, uint32_t ctx, uint32_t pc,
                             uint32_t value)
{
    uint32_t *e = lane->events + 5 * lane->event_count++;
    e[0] = kind;
    e[1] = w->tile;
    e[2] = ctx;
    e[3] = pc;
    e[4] = value;
}

/* A context stops (Context.stop): inactive, waiting for nothing, no rpt. */
static inline void stop(int64_t *f)
{
    f[IPUFS_X_STATUS] = 0;
    f[IPUFS_X_WAIT] = IPUFS_X_WAIT_NONE;
    f[IPUFS_X_DELAY] = 0;
    f[IPUFS_X_REPEAT] = f[IPUFS_X_REPEAT_FIRST] = f[IPUFS_X_REPEAT_END] = f[IPUFS_X_REPEAT_LEFT] = 0;
}

/* Worker n starts at `entry` (Execution.launch): $VERTEX_BASE and $m13 the
 * vertex base, $m12 the supervisor's $WORKERn_BASE, $FP_CTL := $FP_ICTL,
 * $FP_STS := 0. */
static inline void launch(struct lane *lane, const struct turn *w, uint32_t n, uint32_t entry, uint32_t vbase)
{
    int64_t *f = w->fields + n * IPUFS_X_CONTEXT_FIELDS;
    uint32_t *csrs = w->csrs + n * IPUFS_X_CSRS, *m = w->registers + n * IPUFS_X_REGISTERS;
    stop(f);
    f[IPUFS_X_PC] = entry;
    f[IPUFS_X_STATUS] = IPUFS_X_ACTIVE;
    f[IPUFS_X_EXIT] = -1;
    csrs[0x02] = vbase;
    csrs[IPUFS_X_UPPER + 2] = w->csrs[0x20];
    csrs[IPUFS_X_UPPER + 0] = 0;
    m[13] = vbase;
    m[12] = w->csrs[0x20 + n];
    log_event(lane, IPUFS_X_EVENT_START, w, n, entry, 0);
}

/* The value `get` (or `uget`) reads for `op`; 0 when Python must read it. */
static inline int csr_read(const struct turn *w, int op, uint32_t slot, uint32_t *value)
{
    const int64_t *f = w->f, *t = w->t;
    int64_t count = w->turns + 1;  /* Python counts the turn before it runs the instruction */
    const int64_t *repeat = f + IPUFS_X_REPEAT;
    uint32_t v = 0;
    switch (op) {
    case C_PLAIN: v = w->csrs[w->ctx * IPUFS_X_CSRS + slot]; break;
    case C_ZERO: v = 0; break;
    case C_PC: v = (uint32_t)f[IPUFS_X_PC]; break;
    case C_SSR: v = (w->csrs[0x01] & ~1u) | (uint32_t)t[IPUFS_X_LINK]; break;
    case C_WSR: v = (w->csrs[w->ctx * IPUFS_X_CSRS + 0x01] & ~7u) | (w->ctx - 1); break;
    case C_TILE: v = w->tile; break;
    case C_CTXT_STS:  /* 2 bits per context */
        for (uint32_t c = 0; c < w->count; c++)
            v |= (uint32_t)w->fields[c * IPUFS_X_CONTEXT_FIELDS + IPUFS_X_STATUS] << 2 * c;
        break;
    case C_SCOUNT_L: v = (uint32_t)(count + t[IPUFS_X_COUNT_OFFSET]); break;
    case C_SCOUNT_U: v = (uint32_t)((count + t[IPUFS_X_COUNT_OFFSET]) >> 32); break;
    case C_COUNT_L: v = (uint32_t)count; break;
    case C_COUNT_U: v = (uint32_t)(count >> 32); break;
    case C_WORKER_BASE: v = w->csrs[0x21 + w->ctx - 1]; break;
    case C_REPEAT_COUNT: v = repeat[0] ? (uint32_t)(repeat[3] + 1) : 0; break;
    case C_REPEAT_FIRST: v = repeat[0] ? (uint32_t)repeat[1] : 0; break;
    case C_REPEAT_END: v = repeat[0] ? (uint32_t)repeat[2] : 0; break;
    default: return 0;
    }
    *value = v;
    return 1;
}

/* One instruction (or half of a bundle) of the turn `w` on $a `a` and the
 * upper CSRs `u` (a bundle's aux half: copies); `pc` holds the address
 * after it and becomes where the context goes on. OK, or why Python must
 * take the turn: nothing has changed then. */
static inline int execute(const struct ipufs_x *x, struct lane *lane, const struct half *h, struct turn *w,
                          uint32_t *a, uint32_t *u, uint32_t *pc)
{
    uint32_t *m = w->m;
    int64_t *f = w->f;
    uint8_t *sram = w->sram;
    const uint32_t *o = h->o;
    uint32_t v = 0, address, next = *pc;
    uint32_t words[4];
    int n, width;
    uint8_t *p;
    switch (h->form) {
    case F_MRR: if (!alu(h->kind, m[o[1]], m[o[2]], &v)) return IPUFS_X_PYTHON; set(m, o[0], v); break;
    case F_MRI: if (!alu(h->kind, m[o[1]], o[2], &v)) return IPUFS_X_PYTHON; set(m, o[0], v); break;
    case F_MIR: if (!alu(h->kind, o[1], m[o[2]], &v)) return IPUFS_X_PYTHON; set(m, o[0], v); break;
    case F_MR: if (!alu(h->kind, m[o[1]], 0, &v)) return IPUFS_X_PYTHON; set(m, o[0], v); break;
    case F_ARR: if (!alu(h->kind, a[o[1]], a[o[2]], &v)) return IPUFS_X_PYTHON; set(a, o[0], v); break;
    case F_ARI: if (!alu(h->kind, a[o[1]], o[2], &v)) return IPUFS_X_PYTHON; set(a, o[0], v); break;
    case F_ANOT: set(a, o[0], ~a[o[1]]); break;
    case F_PRR: {
        uint32_t lo, hi;
        if (!alu(h->kind, a[o[1]], a[o[2]], &lo) || !alu(h->kind, a[o[1] + 1], a[o[2] + 1], &hi))
            return IPUFS_X_PYTHON;
        set(a, o[0], lo);
        set(a, o[0] + 1, hi);
        break;
    }
    case F_PNOT: {
        uint32_t lo = ~a[o[1]], hi = ~a[o[1] + 1];
        set(a, o[0], lo);
        set(a, o[0] + 1, hi);
        break;
    }
    case F_SETZIM: set(m, o[0], o[1]); break;
    case F_SETZIA: set(a, o[0], o[1]); break;
    case F_ATOM: set(m, o[0], a[o[1]]); break;
    case F_LDMR: case F_LDMI:
        width = width_of(h->kind);
        address = m[o[1]] + m[o[2]] + (h->form == F_LDMR ? m[o[3]] : o[3]) * (uint32_t)width;
        if (!load_m(x, sram, h->kind, address, &v))
            return IPUFS_X_PYTHON;
        set(m, o[0], v);
        break;
    case F_LDMSR: case F_LDMSI:
        width = width_of(h->kind);
        if (!load_m(x, sram, h->kind, m[o[1]] + m[o[2]], &v))
            return IPUFS_X_PYTHON;
        set(m, o[2], m[o[2]] + (h->form == F_LDMSR ? m[o[3]] : o[3]) * (uint32_t)width);
        set(m, o[0], v);
        break;
    case F_LDAR: case F_LDAI:
        width = width_of(h->kind);
        address = m[o[1]] + m[o[2]] + (h->form == F_LDAR ? m[o[3]] : o[3]) * (uint32_t)width;
        if (!load_a(x, sram, h->kind, address, words, &n))
            return IPUFS_X_PYTHON;
        for (int i = 0; i < n; i++)
            set(a, o[0] + (uint32_t)i, words[i]);
        break;
    case F_LDASR: case F_LDASI:
        width = width_of(h->kind);
        if (!load_a(x, sram, h->kind, m[o[1]] + m[o[2]], words, &n))
            return IPUFS_X_PYTHON;
        set(m, o[2], m[o[2]] + (h->form == F_LDASR ? m[o[3]] : o[3]) * (uint32_t)width);
        for (int i = 0; i < n; i++)
            set(a, o[0] + (uint32_t)i, words[i]);
        break;
    case F_STMI: case F_STMSI: case F_STMX:
        address = h->form == F_STMI ? m[o[1]] + m[o[2]] + o[3] * 4
                : h->form == F_STMSI ? m[o[1]] + m[o[2]] : m[o[1]] + m[o[2]] * 4;
        if (!(p = reach(x, sram, address, 4, K_W32)))
            return IPUFS_X_PYTHON;
        if (!logged(lane, p, 4))
            return IPUFS_X_FULL;
        memcpy(p, &m[o[0]], 4);
        if (h->form == F_STMSI)
            set(m, o[2], m[o[2]] + o[3] * 4);
        break;
    case F_STAR: case F_STAI: case F_STASR: case F_STASI:
        width = width_of(h->kind);
        address = m[o[1]] + m[o[2]];
        if (h->form == F_STAR)
            address += m[o[3]] * (uint32_t)width;
        else if (h->form == F_STAI)
            address += o[3] * (uint32_t)width;
        if (!(p = reach(x, sram, address, width, h->kind)))
            return IPUFS_X_PYTHON;
        if (!logged(lane, p, width))
            return IPUFS_X_FULL;
        words[0] = a[o[0]];
        words[1] = a[(o[0] + 1) & 15];  /* st64: an even pair */
        memcpy(p, words, (size_t)width);
        if (h->form == F_STASR)
            set(m, o[2], m[o[2]] + m[o[3]] * (uint32_t)width);
        else if (h->form == F_STASI)
            set(m, o[2], m[o[2]] + o[3] * (uint32_t)width);
        break;
    case F_BRI: case F_BR: case F_BRZ: case F_BRNZ: case F_BRNEG: case F_BRPOS: case F_BRNZDEC:
        next = branch(h->form, o, m, next);
        break;
    case F_CALL:
        set(m, o[0], next);
        next = o[1] & 0x1FFFFFu;  /* the field's bit 19 is ignored */
        break;
    case F_DELAY:  /* an exchange instruction: o[0] + 1 events (executor_exchange.h) */
        if (x->exchange) {  /* a tile that receives runs on the caller's thread only (run_tile) */
            struct ipufs_xx_fault fault;
            if (ipufs_xx_issue((struct ipufs_x *)x, w->tile, w->ctx, IPUFS_XX_DELAY, o, (uint32_t)f[IPUFS_X_PC],
                               &fault))
                return IPUFS_X_PYTHON;
        } else {
            f[IPUFS_X_DELAY] = o[0];
            if (!w->ctx)
                w->t[IPUFS_X_EVENTS] += (int64_t)o[0] + 1;
        }
        w->reready = 1;
        break;
    case F_DELAYPIC: case F_DELAYXPIC: case F_SEND: case F_SENDOFF: case F_SENDPIC: {
        static const int ops[] = { [F_DELAYPIC] = IPUFS_XX_DELAYPIC, [F_DELAYXPIC] = IPUFS_XX_DELAYXPIC,
                                   [F_SEND] = IPUFS_XX_SEND, [F_SENDOFF] = IPUFS_XX_SENDOFF,
                                   [F_SENDPIC] = IPUFS_XX_SENDPIC };
        struct ipufs_xx_fault fault;
        if (!lane->serial)
            return IPUFS_X_SERIAL;
        if (!x->exchange || ipufs_xx_issue((struct ipufs_x *)x, w->tile, w->ctx, ops[h->form], o,
                                           (uint32_t)f[IPUFS_X_PC], &fault))
            return IPUFS_X_PYTHON;  /* nothing changed: Python raises the fault */
        w->reready = 1;
        break;
    }
    case F_RPTM: case F_RPTI: {  /* control.py _rpt */
        uint32_t count = h->form == F_RPTM ? m[o[0]] & 0xFFF : o[0];
        int64_t first = next, end = first + 8 * ((int64_t)o[1] + 1);
        if ((first & 7) || end > 0xFFFFFFFF)  /* a misaligned body faults */
            return IPUFS_X_PYTHON;
        if (count == 0) {
            next = (uint32_t)end;
            break;
        }
        if (f[IPUFS_X_REPEAT])  /* an rpt in an rpt body faults */
            return IPUFS_X_PYTHON;
        f[IPUFS_X_REPEAT] = 1;
        f[IPUFS_X_REPEAT_FIRST] = first;
        f[IPUFS_X_REPEAT_END] = end;
        f[IPUFS_X_REPEAT_LEFT] = count - 1;
        break;
    }
    case F_RUN: case F_RUNALL: {  /* system.py _run, _runall */
        uint32_t entry = m[o[0]], vbase = m[o[1]] + (h->form == F_RUN ? o[2] * 4 + x->memory_base : 0);
        if (((entry | vbase) & 3) || offset_of(x, entry) >= x->region1)  /* faults (NO_MEMORY too) */
            return IPUFS_X_PYTHON;
        if (!room(lane, w->count - 1))
            return IPUFS_X_FULL;
        if (h->form == F_RUN) {  /* the lowest-numbered inactive worker; none: a fault */
            uint32_t n = 1;
            while (n < w->count && w->fields[n * IPUFS_X_CONTEXT_FIELDS + IPUFS_X_STATUS] != 0)
                n++;
            if (n == w->count)
                return IPUFS_X_PYTHON;
            launch(lane, w, n, entry, vbase);
        } else {  /* every worker; one not inactive: a fault ($SSR.RAERR) */
            for (uint32_t n = 1; n < w->count; n++)
                if (w->fields[n * IPUFS_X_CONTEXT_FIELDS + IPUFS_X_STATUS] != 0)
                    return IPUFS_X_PYTHON;
            for (uint32_t n = 1; n < w->count; n++)
                launch(lane, w, n, entry, vbase + (n - 1) * o[2] * 4);
        }
        w->reready = 1;
        break;
    }
    case F_EXIT: {  /* system.py _exit: the Boolean is ANDed into $SSR.LC */
        uint32_t r = m[o[0]];
        int64_t status = h->kind == K_Z ? r == 0 : h->kind == K_NZ ? r != 0
                       : h->kind == K_NEG ? (int32_t)r < 0 : (int32_t)r > 0;
        if (!room(lane, 1))
            return IPUFS_X_FULL;
        f[IPUFS_X_EXIT] = status;
        w->t[IPUFS_X_LINK] &= status;
        stop(f);
        log_event(lane, IPUFS_X_EVENT_EXIT, w, w->ctx, (uint32_t)f[IPUFS_X_PC], (uint32_t)status);
        lane->changed = 1;
        w->reready = 1;
        break;
    }
    case F_GET: case F_UGET: {  /* csr.py read, read_upper */
        int get = h->form == F_GET;
        uint32_t index = o[1] & 0xFF;
        int op = x->csr_ops[((w->ctx ? IPUFS_X_ACCESSES : 0) + (get ? IPUFS_X_GET : IPUFS_X_UGET)) * 256 + index];
        if (!csr_read(w, op, get ? index : IPUFS_X_UPPER + index, &v))
            return IPUFS_X_PYTHON;
        set(get ? m : a, o[0], v);
        break;
    }
    case F_PUT: case F_UPUT: {  /* csr.py write, write_upper: registers that only hold what is written */
        int put = h->form == F_PUT;
        uint32_t index = o[0] & 0xFF;
        if (x->csr_ops[((w->ctx ? IPUFS_X_ACCESSES : 0) + (put ? IPUFS_X_PUT : IPUFS_X_UPUT)) * 256 + index] != C_PLAIN)
            return IPUFS_X_PYTHON;
        w->csrs[w->ctx * IPUFS_X_CSRS + (put ? index : IPUFS_X_UPPER + index)] = put ? m[o[1]] : a[o[1]];
        break;
    }
    case F_F32: case F_F32V2: case F_F32V2B: {  /* fp.py _vector: lane by lane, written at the end */
        int lanes = h->form == F_F32 ? 1 : 2;
        uint32_t flags = 0, out[2];
        for (int i = 0; i < lanes; i++)
            if (!fp_lane(&FP32, h->kind, a[o[1] + (h->form == F_F32V2B ? 0 : (uint32_t)i)], a[o[2] + (uint32_t)i],
                         u[2], &flags, &out[i]))
                return IPUFS_X_PYTHON;
        if (flags & u[2] & FP_ENABLES)  /* an enabled flag: the exception is Python's to raise */
            return IPUFS_X_PYTHON;
        u[0] |= flags;
        for (int i = 0; i < lanes; i++)
            set(a, o[0] + (uint32_t)i, out[i]);
        break;
    }
    case F_F16V2: case F_F16V2L: case F_F16V2U: case F_F16V4: case F_F16V4L: case F_F16V4U: {
        /* the same on halves: lanes low half, low register first; :BL/:BU
         * give every lane the first source's lower/upper half */
        int f = h->form, lanes = f == F_F16V4 || f == F_F16V4L || f == F_F16V4U ? 4 : 2;
        int lower = f == F_F16V2L || f == F_F16V4L, upper = f == F_F16V2U || f == F_F16V4U;
        uint32_t flags = 0, out[4];
        for (int i = 0; i < lanes; i++) {
            uint32_t x = lower ? a[o[1]] : upper ? a[o[1]] >> 16 : a[o[1] + (uint32_t)i / 2] >> (16 * (i % 2));
            uint32_t y = a[o[2] + (uint32_t)i / 2] >> (16 * (i % 2));
            if (!fp_lane(&FP16, h->kind, x & 0xFFFF, y & 0xFFFF, u[2], &flags, &out[i]))
                return IPUFS_X_PYTHON;
        }
        if (flags & u[2] & FP_ENABLES)
            return IPUFS_X_PYTHON;
        u[0] |= flags;
        for (int i = 0; i < lanes; i += 2)
            set(a, o[0] + (uint32_t)i / 2, out[i] | out[i + 1] << 16);
        break;
    }
    default: return IPUFS_X_PYTHON;
    }
    *pc = next;
    return OK;
}

/* The entry of the word(s) at `pc` for context turn `w`, through the
 * lane's code slot of that address; NULL, and why (IPUFS_X_PYTHON: a bad
 * PC, or code Python must fetch; IPUFS_X_MISS: a word the cache lacks, in
 * lane->miss). */
static inline const struct entry *fetch(const struct ipufs_x *x, const struct cache *cache, struct lane *lane,
                                        struct slot *slots, const uint8_t *sram, uint32_t pc, int *why)
{
    *why = IPUFS_X_PYTHON;
    if ((pc & 3) || pc > 0xFFFFFFF0u)  /* misaligned (a fault); near 2**32, Python's unwrapped next PC */
        return NULL;
    uint32_t at = offset_of(x, pc);
    if (at >= x->region1)  /* code is fetched from region 0 only (NO_MEMORY too) */
        return NULL;
    uint32_t word;
    memcpy(&word, sram + at, 4);
    uint64_t key = word;
    if (word & 0x80000000u) {  /* a bundle: 8-byte aligned; then its second word is in region 0 too */
        if (at & 7)
            return NULL;
        memcpy(&key, sram + at, 8);  /* the first word in the low half: a little-endian host */
    }
    struct slot *s = slots ? &slots[at >> 2] : NULL;
    if (s && s->key == key && s->e)
        return s->e;
    const struct entry *e = lookup(cache, key);
    if (!e) {
        lane->miss = key;
        *why = IPUFS_X_MISS;
        return NULL;
    }
    if (s) {
        s->key = key;
        s->e = e;
    }
    return e;
}

/* One turn of context w->ctx of tile w->tile, at `*pc` (its PC): OK (and
 * `*pc` the PC it goes on at), or why Python must take it. Nothing changes
 * unless OK. */
static inline int issue(const struct ipufs_x *x, const struct cache *cache, struct lane *lane, struct slot *slots,
                        struct turn *w, uint32_t *at)
{
    int64_t *f = w->f;
    uint32_t pc = *at;
    if (f[IPUFS_X_BREAK])  /* a breakpoint applies */
        return IPUFS_X_PYTHON;
    int why;
    const struct entry *e = fetch(x, cache, lane, slots, w->sram, pc, &why);
    if (!e)
        return why;
    uint32_t ctx = w->ctx;
    if (e->h[0].form == F_PYTHON || !(e->who & (ctx ? IPUFS_X_WORKER : IPUFS_X_SUPERVISOR)))
        return IPUFS_X_PYTHON;
    int64_t repeat = f[IPUFS_X_REPEAT];
    if (repeat && f[IPUFS_X_REPEAT_FIRST] <= pc && pc < f[IPUFS_X_REPEAT_END] && !(e->who & IPUFS_X_BODY))
        return IPUFS_X_PYTHON;  /* a solo, control or system instruction in an rpt body faults */
    uint32_t *a = w->m + 16, *u = w->csrs + ctx * IPUFS_X_CSRS + IPUFS_X_UPPER;
    uint32_t next = pc + (e->pair ? 8 : 4);
    int rc;
    if (e->h[0].form == F_SYNC) {  /* LOCAL, INTERNAL and the host's: the context waits; Python settles it */
        uint32_t zone = e->h[0].o[0];
        int64_t wait = zone == x->zone_local ? IPUFS_X_WAIT_WORKERS
                     : zone == x->zone_internal ? IPUFS_X_WAIT_INTERNAL
                     : zone < 32 && (x->zones_external >> zone & 1) ? IPUFS_X_WAIT_EXTERNAL : -1;
        if (wait < 0 || e->pair)
            return IPUFS_X_PYTHON;
        if (!room(lane, 1))
            return IPUFS_X_FULL;
        log_event(lane, IPUFS_X_EVENT_SYNC, w, ctx, pc, zone);
        f[IPUFS_X_WAIT] = wait;
        if (wait == IPUFS_X_WAIT_EXTERNAL)  /* as system.py's rule: the zone of an external sync only */
            f[IPUFS_X_WAIT_ZONE] = zone;
        f[IPUFS_X_PC] = next;
        *at = next;
        lane->changed = 1;
        w->reready = 1;
        return OK;
    }
    if (!e->pair) {
        if ((rc = execute(x, lane, &e->h[0], w, a, u, &next)) != OK)
            return rc;
    } else {
        /* Both halves read the registers as they were before the bundle,
         * and what the main half writes to $a stays (Execution._issue).
         * The aux half (aux_form: it writes only $a and the upper CSRs)
         * runs first, on copies, so that either half may hand the turn
         * back before anything has changed. */
        uint32_t aux_a[16], aux_u[16], before[16], upper[16], ignored = next;
        memcpy(aux_a, a, sizeof aux_a);
        memcpy(aux_u, u, sizeof aux_u);
        if ((rc = execute(x, lane, &e->h[1], w, aux_a, aux_u, &ignored)) != OK)
            return rc;
        memcpy(before, a, sizeof before);
        memcpy(upper, u, sizeof upper);
        if ((rc = execute(x, lane, &e->h[0], w, a, u, &next)) != OK)
            return rc;
        for (int i = 0; i < 16; i++) {
            if (a[i] == before[i])
                a[i] = aux_a[i];
            if (aux_u[i] != upper[i])
                u[i] = aux_u[i];
        }
    }
    if (f[IPUFS_X_REPEAT] && next == f[IPUFS_X_REPEAT_END] && f[IPUFS_X_REPEAT_FIRST] <= pc) {
        if (f[IPUFS_X_REPEAT_LEFT]) {  /* the body again */
            f[IPUFS_X_REPEAT_LEFT]--;
            next = (uint32_t)f[IPUFS_X_REPEAT_FIRST];
        } else {
            f[IPUFS_X_REPEAT] = f[IPUFS_X_REPEAT_FIRST] = f[IPUFS_X_REPEAT_END] = 0;
        }
    }
    f[IPUFS_X_PC] = next;
    *at = next;
    return e->pair ? OK_PAIR : OK;
}

#define CASE_RR(K) case FAST_RR_##K: if (!alu(K_##K, m[o[1]], m[o[2]], &v)) goto general; m[o[0]] = v; break;
#define CASE_RI(K) case FAST_RI_##K: if (!alu(K_##K, m[o[1]], o[2], &v)) goto general; m[o[0]] = v; break;
#define CASE_IR(K) case FAST_IR_##K: if (!alu(K_##K, o[1], m[o[2]], &v)) goto general; m[o[0]] = v; break;

/* The turns of w->ctx, the only context of its tile that can run, from
 * turn *k until `end` or until what can run may have changed (w->reready):
 * OK, or why the next turn is Python's. The words whose entry has a FAST_*
 * form run here, with the PC and the counts in registers; any other turn
 * goes through issue(). The tile's turn count comes back in w->turns, the
 * instructions retired in *retired. */
static inline int run_alone(const struct ipufs_x *x, const struct cache *cache, struct lane *lane,
                            struct slot *slots, struct turn *w, int64_t *k, int64_t end, int64_t *retired)
{
    uint32_t *m = w->m;
    int64_t *f = w->f;
    const uint8_t *sram = w->sram;
    uint8_t *store = w->sram;
    uint32_t pc = (uint32_t)f[IPUFS_X_PC], who = w->ctx ? IPUFS_X_WORKER : IPUFS_X_SUPERVISOR;
    uint32_t region1 = x->region1;
    int64_t turn = *k, turns = w->turns, done = *retired;
    int fast = slots && !lane->dirty_capacity && !f[IPUFS_X_BREAK], rc = OK;
    while (turn < end) {
        uint32_t at = offset_of(x, pc), word, v, address, next = pc + 4;
        const struct entry *e;
        if (!fast || (pc & 3) || at >= region1)
            goto general;
        memcpy(&word, sram + at, 4);
        e = slots[at >> 2].e;
        if (word & 0x80000000u || slots[at >> 2].key != word || !e || !(e->who & who) || f[IPUFS_X_REPEAT])
            goto general;
        const uint32_t *o = e->h[0].o;
        switch (e->fast) {
        FAST_ALU(CASE_RR)
        FAST_ALU(CASE_RI)
        FAST_ALU(CASE_IR)
        case FAST_SETZI: m[o[0]] = o[1]; break;
        case FAST_BRI: next = branch(F_BRI, o, m, next); break;
        case FAST_BR: next = branch(F_BR, o, m, next); break;
        case FAST_BRZ: next = branch(F_BRZ, o, m, next); break;
        case FAST_BRNZ: next = branch(F_BRNZ, o, m, next); break;
        case FAST_BRNEG: next = branch(F_BRNEG, o, m, next); break;
        case FAST_BRPOS: next = branch(F_BRPOS, o, m, next); break;
        case FAST_BRNZDEC: next = branch(F_BRNZDEC, o, m, next); break;
        case FAST_LD32:
            address = m[o[1]] + m[o[2]] + o[3] * 4;
            if ((address & 3) || (at = offset_of(x, address)) == NO_MEMORY)
                goto general;
            memcpy(&m[o[0]], sram + at, 4);
            break;
        case FAST_ST32:
            address = m[o[1]] + m[o[2]] + o[3] * 4;
            if ((address & 3) || (at = offset_of(x, address)) == NO_MEMORY)
                goto general;
            memcpy(store + at, &m[o[0]], 4);
            break;
        default:
            goto general;
        }
        pc = next;
        turn++;
        turns++;
        done++;
        continue;
    general:
        f[IPUFS_X_PC] = pc;
        w->turns = turns;
        rc = issue(x, cache, lane, slots, w, &pc);
        if (rc >= 0)
            break;
        done += rc == OK ? 1 : 2;  /* a bundle counts two */
        rc = OK;
        turn++;
        turns++;
        if (w->reready)
            break;
    }
    f[IPUFS_X_PC] = pc;
    w->turns = turns;
    *k = turn;
    *retired = done;
    return rc;
}

/* sync 2 (LOCAL) releases the supervisor once no worker is active. */
static inline int release_local(int64_t *fields, uint32_t count)
{
    if (fields[IPUFS_X_WAIT] != IPUFS_X_WAIT_WORKERS)
        return 0;
    for (uint32_t w = 1; w < count; w++)
        if (fields[w * IPUFS_X_CONTEXT_FIELDS + IPUFS_X_STATUS] == IPUFS_X_ACTIVE)
            return 0;
    fields[IPUFS_X_WAIT] = IPUFS_X_WAIT_NONE;
    return 1;
}

/* Whether the tile stands still: its supervisor waits at an internal sync,
 * for the syncs `sans` armed, or for another tile's exchange word. */
static inline int still(const int64_t *fields)
{
    int64_t wait = fields[IPUFS_X_WAIT];
    return fields[IPUFS_X_STATUS] == IPUFS_X_ACTIVE
        && (wait == IPUFS_X_WAIT_INTERNAL || wait == IPUFS_X_WAIT_EXCHANGE || wait == IPUFS_X_WAIT_ANS);
}

/* The contexts that can take a turn (TileState.next_runnable's test), as
 * bits: none while the tile stands still. */
static inline uint32_t runnable(const int64_t *fields, uint32_t count)
{
    uint32_t ready = 0;
    if (still(fields))
        return 0;
    for (uint32_t c = 0; c < count; c++) {
        const int64_t *f = fields + c * IPUFS_X_CONTEXT_FIELDS;
        if (f[IPUFS_X_STATUS] == IPUFS_X_ACTIVE && f[IPUFS_X_WAIT] == IPUFS_X_WAIT_NONE)
            ready |= 1u << c;
    }
    return ready;
}

/* Whether a tile would take a turn now: a context can run, or its
 * supervisor's local sync ends (release_local) as it is visited. */
static inline int takes_turns(const int64_t *fields, uint32_t count)
{
    if (runnable(fields, count))
        return 1;
    if (fields[IPUFS_X_WAIT] != IPUFS_X_WAIT_WORKERS)
        return 0;
    for (uint32_t w = 1; w < count; w++)
        if (fields[w * IPUFS_X_CONTEXT_FIELDS + IPUFS_X_STATUS] == IPUFS_X_ACTIVE)
            return 0;
    return 1;
}

int32_t ipufs_x_runnable(const struct ipufs_x *x, const uint32_t *order, int32_t n, uint32_t *out)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (takes_turns(x->contexts + (uint64_t)order[i] * x->count * IPUFS_X_CONTEXT_FIELDS, x->count))
            out[m++] = order[i];
    return m;
}

/* A run that took `turns` more turns in this lane: whether it is to end
 * now (`stop` has been set for x->grace of the lane's turns); every
 * lane->offer turns it offers its CPU. */
static int stop_due(const struct ipufs_x *x, struct lane *lane, int64_t turns)
{
    if (lane->offer) {
        lane->since_yield += turns;
        if (lane->since_yield >= lane->offer) {
            lane->since_yield = 0;
            /* The daemon's thread runs this on the CPU its FUSE reader may
               need: a woken reader would otherwise wait for the scheduler to
               preempt this loop (milliseconds). */
            sched_yield();
        }
    }
    if (!x->stop)
        return 0;
    if (lane->grace < 0) {
        if (!*x->stop)
            return 0;
        lane->grace = x->grace;
    }
    lane->grace -= turns;
    return lane->grace <= 0;
}

/* ---- holds: another thread takes the daemon lock while the loop runs ---- */

/* While the daemon lends its lock to the loop (native.py, Loop.run), the
 * thread that takes it holds the loop first (ipufs_x_hold): every thread
 * running tiles stops at its next look (a tile's end, or every
 * IPUFS_X_CHECK_TURNS turns) once the tiles' due is over (x->due, a
 * CLOCK_MONOTONIC time; 0: none), with everything written back to the
 * arrays, and waits until ipufs_x_resume lets it go on, or makes it end
 * (IPUFS_X_ABORT). `active` counts the threads running tiles, `paused`
 * those of them that stopped; a thread counts itself active and then looks
 * at `hold`, while the holder sets `hold` and then reads `active`: either
 * sees the other. Each side looks x->spin times before it sleeps on a
 * futex (`acks` for the holder, `hold` for the loop): a hold lasts about a
 * request, tens of microseconds, about what a wake-up from sleep costs;
 * with one CPU, x->spin is 0 (the other side needs the CPU). */
enum { HOLD_NONE = 0, HOLD_WAIT = 1, HOLD_ABORT = 2 };

static void futex(uint32_t *word, int op, uint32_t value)
{
    syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, value, NULL, NULL, 0);
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Whether a hold asks the calling thread, running tiles, to stop now. */
static inline int hold_due(const struct ipufs_x *x)
{
    if (!__atomic_load_n(&x->hold, __ATOMIC_RELAXED))
        return 0;
    int64_t due = __atomic_load_n(&x->due, __ATOMIC_RELAXED);
    return !due || now_ns() >= due;
}

/* Something the holder waits for happened: a thread stopped or left. */
static void acked(struct ipufs_x *x)
{
    __atomic_add_fetch(&x->acks, 1, __ATOMIC_SEQ_CST);
    futex(&x->acks, FUTEX_WAKE, INT32_MAX);
}

/* The calling thread stopped for a hold, waits for its end: 1 go on, 0 end. */
static int held(struct ipufs_x *x)
{
    uint32_t h;
    __atomic_add_fetch(&x->paused, 1, __ATOMIC_SEQ_CST);
    acked(x);
    for (int64_t spins = 0; (h = __atomic_load_n(&x->hold, __ATOMIC_SEQ_CST)) == HOLD_WAIT; spins++) {
        if (spins < x->spin)
            __builtin_ia32_pause();
        else
            futex(&x->hold, FUTEX_WAIT, HOLD_WAIT);
    }
    __atomic_sub_fetch(&x->paused, 1, __ATOMIC_SEQ_CST);
    return h != HOLD_ABORT;
}

/* The calling thread starts running tiles: 1, or 0 when a hold ends it. */
static int arrive(struct ipufs_x *x)
{
    __atomic_add_fetch(&x->active, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&x->hold, __ATOMIC_SEQ_CST) == HOLD_NONE)
        return 1;
    return held(x);
}

static void depart(struct ipufs_x *x)
{
    __atomic_sub_fetch(&x->active, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&x->hold, __ATOMIC_SEQ_CST) != HOLD_NONE)
        acked(x);
}

void ipufs_x_hold(struct ipufs_x *x, int64_t after_ns)
{
    __atomic_store_n(&x->due, after_ns > 0 ? now_ns() + after_ns : 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&x->hold, HOLD_WAIT, __ATOMIC_SEQ_CST);
    for (int64_t spins = 0;; spins++) {
        uint32_t seen = __atomic_load_n(&x->acks, __ATOMIC_SEQ_CST);
        int32_t active = __atomic_load_n(&x->active, __ATOMIC_SEQ_CST);
        if (!active || __atomic_load_n(&x->paused, __ATOMIC_SEQ_CST) >= active)
            return;
        if (spins < x->spin)
            __builtin_ia32_pause();
        else
            futex(&x->acks, FUTEX_WAIT, seen);
    }
}

void ipufs_x_resume(struct ipufs_x *x, int end)
{
    __atomic_store_n(&x->hold, end ? HOLD_ABORT : HOLD_NONE, __ATOMIC_SEQ_CST);
    futex(&x->hold, FUTEX_WAKE, INT32_MAX);
}

/* Turns of one tile until `allowance` (Execution._run_tile), from
 * `*partial` taken: IPUFS_X_DONE, IPUFS_X_STOP (the run is to end: the
 * tile took `*partial`), or why the next turn is Python's. A context that
 * is the only one that can run takes its turns in a loop of its own until
 * something changes which can run. The tile's counters are kept in
 * locals and written back on the way out. A context stops being runnable
 * by waiting (a sync) or stopping (an exit); workers become runnable
 * through run and runall, the supervisor again through release_local. */
static int run_tile(struct ipufs_x *x, const struct cache *cache, struct lane *lane, uint32_t tile,
                    int64_t allowance, int64_t *partial)
{
    uint32_t count = x->count;
    int64_t *t = x->tiles + (uint64_t)tile * IPUFS_X_TILE_FIELDS;
    int64_t *fields = x->contexts + (uint64_t)tile * count * IPUFS_X_CONTEXT_FIELDS;
    uint32_t *registers = x->registers + (uint64_t)tile * count * IPUFS_X_REGISTERS;
    struct slot *slots = lane->slots;
    struct turn w = { .tile = tile, .count = count, .t = t, .fields = fields, .registers = registers,
                      .csrs = x->csrs + (uint64_t)tile * count * IPUFS_X_CSRS,
                      .sram = x->memory + (uint64_t)tile * x->window, .turns = t[IPUFS_X_TURNS] };
    int64_t k = *partial, counted = k, retired = 0;
    if (stop_due(x, lane, 0))
        return IPUFS_X_STOP;
    if (hold_due(x))
        return IPUFS_X_HOLD;
    uint32_t turn = (uint32_t)t[IPUFS_X_TURN];
    uint32_t ready = runnable(fields, count);
    int rc = IPUFS_X_DONE;
    while (k < allowance) {
        if (k - counted >= IPUFS_X_CHECK_TURNS) {
            int due = stop_due(x, lane, k - counted);
            counted = k;
            if (due) {
                rc = IPUFS_X_STOP;
                break;
            }
            if (hold_due(x)) {
                rc = IPUFS_X_HOLD;
                break;
            }
        }
        if (!ready) {
            if (release_local(fields, count)) {
                ready = runnable(fields, count);
                continue;
            }
            break;
        }
        int alone = !(ready & (ready - 1));
        uint32_t later = ready & (~0u << turn);  /* the next at or after the turn, cyclic */
        uint32_t c = (uint32_t)__builtin_ctz(later ? later : ready);
        int64_t *f = fields + c * IPUFS_X_CONTEXT_FIELDS;
        uint32_t after = c + 1 < count ? c + 1 : 0;
        int64_t end = counted + IPUFS_X_CHECK_TURNS < allowance ? counted + IPUFS_X_CHECK_TURNS : allowance;
        if (f[IPUFS_X_DELAY]) {  /* a stalled turn; alone, its stalls up to the next check at once */
            int64_t d = alone && end - k < f[IPUFS_X_DELAY] ? end - k : alone ? f[IPUFS_X_DELAY] : 1;
            f[IPUFS_X_DELAY] -= d;
            w.turns += d;
            k += d;
            turn = after;
            continue;
        }
        if (x->exchange && xx_of(x)->receiving[tile]) {  /* resolved before each issue */
            int r = lane->serial ? ipufs_xx_ready(x, tile) : -1;
            if (r < 0 || r == IPUFS_XX_FAILED) {  /* a lane hands it over; Python raises the error */
                rc = r < 0 ? IPUFS_X_SERIAL : IPUFS_X_PYTHON;
                goto out;
            }
            if (r == IPUFS_XX_BLOCKED) {  /* the tile stands still */
                ready = 0;
                continue;
            }
        }
        w.ctx = c;
        w.m = registers + c * IPUFS_X_REGISTERS;
        w.f = f;
        w.reready = 0;
        if (alone) {
            int64_t before = k;
            int r = run_alone(x, cache, lane, slots, &w, &k, end, &retired);
            if (k > before)
                turn = after;
            if (r >= 0) {
                rc = r;
                goto out;
            }
        } else {
            uint32_t pc = (uint32_t)f[IPUFS_X_PC];
            int r = issue(x, cache, lane, slots, &w, &pc);
            if (r >= 0) {
                rc = r;
                goto out;
            }
            retired += r == OK ? 1 : 2;  /* a bundle counts two */
            w.turns++;
            k++;
            turn = after;
        }
        if (w.reready)  /* workers started, a context stopped, waits or stalls */
            ready = runnable(fields, count);
    }
    if (rc == IPUFS_X_DONE && stop_due(x, lane, k - counted + IPUFS_X_TILE_TURNS))
        rc = IPUFS_X_STOP;
out:
    t[IPUFS_X_TURN] = turn;
    t[IPUFS_X_TURNS] = w.turns;
    t[IPUFS_X_INSTRUCTIONS] += retired;
    lane->retired += retired;
    *partial = k;
    return rc;
}

/* What Execution._settle and busy() read of the running tiles `order`
 * (counts[IPUFS_X_COUNTS]); the tiles with no active context go to
 * `stopped`, and their number is returned. */
int32_t ipufs_x_scan(const struct ipufs_x *x, const uint32_t *order, int32_t n, uint32_t *stopped,
                     int64_t *counts)
{
    int32_t gone = 0;
    memset(counts, 0, IPUFS_X_COUNTS * sizeof *counts);
    for (int32_t i = 0; i < n; i++) {
        const int64_t *fields = x->contexts + (uint64_t)order[i] * x->count * IPUFS_X_CONTEXT_FIELDS;
        int active = 0, workers = 0;
        int standing = still(fields);
        for (uint32_t c = 0; c < x->count; c++) {
            const int64_t *f = fields + c * IPUFS_X_CONTEXT_FIELDS;
            if (f[IPUFS_X_STATUS] == IPUFS_X_ACTIVE) {
                active = 1;
                workers += c > 0;
                counts[IPUFS_X_RUNNABLE] += f[IPUFS_X_WAIT] == IPUFS_X_WAIT_NONE && !standing;
            }
        }
        /* A supervisor at a local sync whose workers have all ended goes on
           the next time its tile is visited: it counts as runnable. */
        if (!workers && fields[IPUFS_X_STATUS] == IPUFS_X_ACTIVE && fields[IPUFS_X_WAIT] == IPUFS_X_WAIT_WORKERS)
            counts[IPUFS_X_RUNNABLE]++;
        if (!active) {
            stopped[gone++] = order[i];
        } else if (fields[IPUFS_X_STATUS] == IPUFS_X_ACTIVE) {
            counts[IPUFS_X_MEMBERS]++;
            counts[IPUFS_X_INTERNAL] += fields[IPUFS_X_WAIT] == IPUFS_X_WAIT_INTERNAL;
            counts[IPUFS_X_EXTERNAL] += fields[IPUFS_X_WAIT] == IPUFS_X_WAIT_EXTERNAL;
        }
    }
    return gone;
}

#include "executor_lanes.h"  /* the lanes, and the passes that spread tiles over them */
