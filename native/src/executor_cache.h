/* The native loop's decode cache: a part of executor.c, included after its
 * FORMS (the F_ names), kept apart as one concept.
 *
 * Two levels. The cache proper, one per IPU, maps a word (or a bundle's
 * two) to what the loop does with it (form, kind and operands per half,
 * who may run it), as Python's decoder and the semantic rules' `native`
 * column said when the loop first met it (ipufs_x_learn). It holds at most
 * `limit` entries: when a new one would pass that, it starts again empty
 * (code that keeps writing new words, which would otherwise grow it without
 * bound, then costs a decode by Python per new word, as it did before).
 * Below it, each lane of the loop has a code slot per 4-byte address of
 * region 0 (struct slot): the entry of the word last fetched there, with
 * that word. A fetch compares the word in memory with the slot's: equal,
 * the slot's entry is the word's, and nothing is looked up. So a store
 * into code, by anyone (a tile, the TDI, a host's pwrite or a store into
 * its mapping, which the daemon never sees), makes the next fetch there
 * miss the slot and look the new word up: nothing needs telling. Slots
 * point into the cache; whenever its entries move or go (it grows, starts
 * again, or is cleared at a reset) its generation changes, and a lane
 * whose slots were filled under another generation clears them before it
 * runs. docs/executor-speed.md, "The decode cache". */
#ifndef IPUFS_EXECUTOR_CACHE_H
#define IPUFS_EXECUTOR_CACHE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct half {
    uint8_t form, kind;
    uint32_t o[4];  /* operand values as the decoder gives them, modulo 2**32 */
};

struct entry {
    uint64_t key;  /* the word; a bundle's first word in the low half */
    uint8_t used, who, pair;
    uint8_t fast;  /* FAST_*: what a context alone in its tile does with it in its own loop */
    struct half h[2];  /* main, aux */
};

/* The instructions a context that is alone in its tile runs in the loop
 * of its own (executor.c, run_alone), each its form and kind in one: the
 * integer operations on $m (register, immediate second or first
 * operand), setzi, the branches, ld32 and st32 with an immediate offset.
 * Anything else (FAST_NONE) goes through issue() as any turn does. */
#define FAST_ALU(X) X(ADD) X(SUB) X(MUL) X(MAX) X(MIN) X(AND) X(ANDC) X(OR) X(XOR) X(XNOR) \
    X(CMPEQ) X(CMPNE) X(CMPSLT) X(CMPULT) X(SHL) X(SHR) X(SHRS)
#define FAST_RR(K) FAST_RR_##K,
#define FAST_RI(K) FAST_RI_##K,
#define FAST_IR(K) FAST_IR_##K,
#define FAST_KIND(K) K_##K,
enum {
    FAST_NONE,
    FAST_ALU(FAST_RR) FAST_ALU(FAST_RI) FAST_ALU(FAST_IR)
    FAST_SETZI, FAST_BRI, FAST_BR, FAST_BRZ, FAST_BRNZ, FAST_BRNEG, FAST_BRPOS, FAST_BRNZDEC, FAST_LD32, FAST_ST32
};
static const uint8_t fast_kinds[] = { FAST_ALU(FAST_KIND) };
enum { FAST_KINDS = sizeof fast_kinds };

/* The FAST_* of an entry. */
static uint8_t fast_of(const struct entry *e)
{
    const struct half *h = &e->h[0];
    if (e->pair)
        return FAST_NONE;
    int kind = -1;
    for (int i = 0; i < FAST_KINDS; i++)
        if (fast_kinds[i] == h->kind)
            kind = i;
    int shift = h->kind == K_SHL || h->kind == K_SHR || h->kind == K_SHRS;
    int writes = h->o[0] != 15;  /* $m15 ignores writes: issue()'s set() sees to it */
    switch (h->form) {
    case F_MRR: return kind >= 0 && writes ? (uint8_t)(FAST_RR_ADD + kind) : FAST_NONE;
    case F_MRI: return kind >= 0 && writes && (!shift || h->o[2] <= 31) ? (uint8_t)(FAST_RI_ADD + kind) : FAST_NONE;
    case F_MIR: return kind >= 0 && writes ? (uint8_t)(FAST_IR_ADD + kind) : FAST_NONE;
    case F_SETZIM: return writes ? FAST_SETZI : FAST_NONE;
    case F_BRI: return FAST_BRI;
    case F_BR: return FAST_BR;
    case F_BRZ: return FAST_BRZ;
    case F_BRNZ: return FAST_BRNZ;
    case F_BRNEG: return FAST_BRNEG;
    case F_BRPOS: return FAST_BRPOS;
    case F_BRNZDEC: return FAST_BRNZDEC;
    case F_LDMI: return h->kind == K_W32 && writes ? FAST_LD32 : FAST_NONE;
    case F_STMI: return FAST_ST32;
    default: return FAST_NONE;
    }
}

struct cache {
    struct entry *slots;
    uint32_t mask;        /* capacity - 1, a power of two */
    uint32_t used;
    uint32_t limit;       /* entries at most */
    uint64_t generation;  /* changes whenever entries move or go */
};

/* A lane's code slot of one 4-byte address of region 0. */
struct slot {
    uint64_t key;             /* the word (or two) `e` was found for */
    const struct entry *e;    /* NULL: none yet */
};

enum { CACHE_FIRST = 1024 };  /* slots of a new or cleared cache */

void *ipufs_x_cache_new(uint32_t limit)
{
    struct cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->slots = calloc(CACHE_FIRST, sizeof *c->slots);
    if (!c->slots) {
        free(c);
        return NULL;
    }
    c->mask = CACHE_FIRST - 1;
    c->limit = limit < 1 ? 1 : limit;
    c->generation = 1;
    return c;
}

void ipufs_x_cache_free(void *cache)
{
    struct cache *c = cache;
    if (c) {
        free(c->slots);
        free(c);
    }
}

/* Forget every entry: the cache shrinks back to its first size. */
int ipufs_x_cache_clear(void *cache)
{
    struct cache *c = cache;
    struct entry *fresh = calloc(CACHE_FIRST, sizeof *fresh);
    if (!fresh)
        return -1;
    free(c->slots);
    c->slots = fresh;
    c->mask = CACHE_FIRST - 1;
    c->used = 0;
    c->generation++;
    return 0;
}

/* The entries it holds; `bytes`: the memory they take. */
int64_t ipufs_x_cache_size(const void *cache, int64_t *bytes)
{
    const struct cache *c = cache;
    *bytes = (int64_t)sizeof *c + ((int64_t)c->mask + 1) * (int64_t)sizeof(struct entry);
    return c->used;
}

static inline uint32_t slot_of(uint64_t key, uint32_t mask)
{
    return (uint32_t)((key ^ key >> 29) * 0x9E3779B97F4A7C15ull >> 40) & mask;
}

static inline const struct entry *lookup(const struct cache *c, uint64_t key)
{
    for (uint32_t i = slot_of(key, c->mask);; i = (i + 1) & c->mask) {
        const struct entry *e = &c->slots[i];
        if (!e->used)
            return NULL;
        if (e->key == key)
            return e;
    }
}

static void place(struct cache *c, const struct entry *e)
{
    uint32_t i = slot_of(e->key, c->mask);
    while (c->slots[i].used && c->slots[i].key != e->key)
        i = (i + 1) & c->mask;
    if (!c->slots[i].used)
        c->used++;
    c->slots[i] = *e;
}

/* The aux half of a bundle runs first, on copies of $a and the upper
 * CSRs (issue()): only forms that write nothing else may be there. */
static int aux_form(int form)
{
    switch (form) {
    case F_ARR: case F_ARI: case F_PRR: case F_ANOT: case F_PNOT: case F_SETZIA:
    case F_F32: case F_F32V2: case F_F32V2B:
    case F_F16V2: case F_F16V2L: case F_F16V2U: case F_F16V4: case F_F16V4L: case F_F16V4U:
        return 1;
    default:
        return 0;
    }
}

int ipufs_x_learn(void *cache, uint64_t key, int who, const int32_t *forms, const uint32_t *operands)
{
    struct cache *c = cache;
    int pair = key >> 32 != 0;
    for (int i = 0; i <= pair; i++)
        if (forms[2 * i] < 0 || forms[2 * i] >= F_COUNT || forms[2 * i + 1] < 0 || forms[2 * i + 1] >= K_COUNT)
            return -1;
    if (c->used >= c->limit && !lookup(c, key) && ipufs_x_cache_clear(c) < 0)
        return -1;
    if (2 * (c->used + 1) > c->mask + 1) {  /* keep it at most half full */
        struct cache bigger = *c;
        bigger.slots = calloc(2 * ((size_t)c->mask + 1), sizeof(struct entry));
        bigger.mask = 2 * c->mask + 1;
        bigger.used = 0;
        bigger.generation = c->generation + 1;
        if (!bigger.slots)
            return -1;
        for (uint32_t i = 0; i <= c->mask; i++)
            if (c->slots[i].used)
                place(&bigger, &c->slots[i]);
        free(c->slots);
        *c = bigger;
    }
    struct entry e = { .key = key, .used = 1, .who = (uint8_t)who, .pair = (uint8_t)pair };
    for (int i = 0; i <= pair; i++) {
        e.h[i].form = (uint8_t)forms[2 * i];
        e.h[i].kind = (uint8_t)forms[2 * i + 1];
        memcpy(e.h[i].o, operands + 4 * i, sizeof e.h[i].o);
    }
    if (pair && (e.h[0].form == F_PYTHON || !aux_form(e.h[1].form)))
        e.h[0].form = F_PYTHON;
    e.fast = fast_of(&e);
    place(c, &e);
    return 0;
}

#endif
