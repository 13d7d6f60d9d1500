/* The native loop's passes over an IPU's tiles, and the lanes that share
 * them out: a part of executor.c, included at its end (it runs run_tile),
 * kept apart as one concept.
 *
 * A pass (Execution.run's) serves each tile that can take a turn, from the
 * cursor on, up to its share of the budget. Between settles tiles touch
 * only their own memory and state, so a pass may run its tiles on several
 * threads at once, each a lane (executor_pool.c): the lanes take chunks of
 * the pass's tiles in turn, and each tile runs until its share is taken,
 * or until the next turn is Python's (a word to decode, an instruction the
 * loop lacks, a full log): there it stops, as it is. What each tile did is
 * recorded: the turns it took, why it stopped, where its events and stores
 * lie in its lane's logs. Then the pass goes over its tiles again, in
 * order, on the caller's thread: each tile's events and stores are copied
 * into the loop's own logs, and a tile that stopped goes on from there as
 * the sequential pass would, handing Python its turns; once Python has
 * decoded a word, the tiles still to be gone over that stopped at a word
 * now known go on on the lanes again (run_again). So what Python sees
 * (events, stores, turns it takes, decoded words it is asked for) comes in
 * the order of the sequential pass, whatever the threads did when: the
 * results never depend on thread timing. docs/executor-speed.md. */
#ifndef IPUFS_EXECUTOR_LANES_H
#define IPUFS_EXECUTOR_LANES_H

#include "executor_pool.h"

/* A stretch of a tile's turns on a lane: where its events and stores lie
 * in that lane's logs. */
struct segment {
    uint32_t events_from, events_to, dirty_from, dirty_to;
    int32_t lane;
};

/* The rounds a tile may take on the lanes in one pass: the first, then one
 * after each word it stopped at was decoded. */
enum { SEGMENTS = 6 };

/* What a tile did on the lanes in the pass under way: its first round's
 * segment, and the later ones' in struct lanes' `later` (made on first use). */
struct record {
    int64_t taken;     /* turns */
    uint64_t miss;     /* IPUFS_X_MISS: the word */
    int32_t rc;        /* IPUFS_X_DONE, _STOP, _PYTHON, _MISS, _FULL, or NOT_RUN */
    int32_t segments;  /* its rounds */
    int32_t copied;    /* of them, taken into the main lane's logs */
    struct segment first;
};

enum { NOT_RUN = -1 };

/* A lane's code slots, and the cache generation they were filled under. */
struct code {
    struct slot *table;
    uint64_t generation;
    int filled;
};

struct lanes {
    uint32_t tiles, words;  /* words: code slots per lane, one per 4 bytes of region 0 */
    int count;              /* lanes it may use */
    uint32_t events, dirty; /* each lane's logs' capacity */
    struct lane main;       /* the sequential path's: struct ipufs_x's logs, lane 0's code slots */
    struct lane lane[IPUFS_X_MAX_LANES] __attribute__((aligned(64)));
    struct code code[IPUFS_X_MAX_LANES];
    uint32_t *candidates;   /* [tiles]: the tiles of the pass under way */
    struct record *records; /* [tiles]: what each did on the lanes */
    int32_t *todo;          /* [tiles]: the records a round runs */
    struct segment *later;  /* [tiles][SEGMENTS - 1]: the records' segments after the first, or NULL */
    /* the parallel part of the pass under way */
    struct ipufs_x *x;
    int32_t m, first, lanes;
    int32_t todos;          /* of todo */
    int again;              /* a round after the first: tiles go on from where they stopped */
    uint64_t tried[2];      /* the cache's size and generation when a round after the first was last sought */
    int64_t share;
    int32_t next __attribute__((aligned(64)));  /* the next chunk, taken atomically */
};

void *ipufs_x_lanes_new(uint32_t tiles, uint32_t region1, int lanes, uint32_t events, uint32_t dirty)
{
    struct lanes *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->tiles = tiles;
    l->words = region1 / 4;
    l->count = lanes < 1 ? 1 : lanes > IPUFS_X_MAX_LANES ? IPUFS_X_MAX_LANES : lanes;
    l->events = events;
    l->dirty = dirty;
    l->candidates = calloc(tiles ? tiles : 1, sizeof *l->candidates);
    l->records = calloc(tiles ? tiles : 1, sizeof *l->records);
    l->todo = calloc(tiles ? tiles : 1, sizeof *l->todo);
    if (!l->candidates || !l->records || !l->todo) {
        free(l->candidates);
        free(l->records);
        free(l->todo);
        free(l);
        return NULL;
    }
    return l;
}

/* Give back every lane's code slots (a reset: they come again on use). */
void ipufs_x_lanes_clear(void *lanes)
{
    struct lanes *l = lanes;
    for (int i = 0; i < IPUFS_X_MAX_LANES; i++) {
        free(l->code[i].table);
        l->code[i] = (struct code){ NULL, 0, 0 };
    }
}

void ipufs_x_lanes_free(void *lanes)
{
    struct lanes *l = lanes;
    if (!l)
        return;
    ipufs_x_lanes_clear(l);
    for (int i = 0; i < IPUFS_X_MAX_LANES; i++) {
        free(l->lane[i].events);
        free(l->lane[i].dirty);
    }
    free(l->candidates);
    free(l->records);
    free(l->todo);
    free(l->later);
    free(l);
}

/* The memory the lanes hold: logs and code slots. */
int64_t ipufs_x_lanes_bytes(const void *lanes)
{
    const struct lanes *l = lanes;
    int64_t bytes = (int64_t)sizeof *l
                    + (int64_t)l->tiles * (int64_t)(sizeof *l->candidates + sizeof *l->records + sizeof *l->todo);
    if (l->later)
        bytes += (int64_t)l->tiles * (SEGMENTS - 1) * (int64_t)sizeof *l->later;
    for (int i = 0; i < IPUFS_X_MAX_LANES; i++) {
        if (l->code[i].table)
            bytes += (int64_t)l->words * (int64_t)sizeof(struct slot);
        if (l->lane[i].events)
            bytes += 4 * (5 * (int64_t)l->events + 2 * (int64_t)l->dirty);
    }
    return bytes;
}

/* Segment k of record j. */
static inline struct segment *segment_of(struct lanes *l, int32_t j, int32_t k)
{
    return k ? &l->later[(int64_t)j * (SEGMENTS - 1) + k - 1] : &l->records[j].first;
}

/* Lane i's code slots, valid for the cache as it is now (NULL: none to be had). */
static struct slot *code_slots(struct lanes *l, int i, const struct cache *cache)
{
    struct code *c = &l->code[i];
    if (!c->table) {
        c->table = calloc(l->words ? l->words : 1, sizeof *c->table);
        c->generation = cache->generation;
        c->filled = 0;
    } else if (c->generation != cache->generation) {  /* the entries they point at moved or went */
        if (c->filled)
            memset(c->table, 0, (size_t)l->words * sizeof *c->table);
        c->generation = cache->generation;
    }
    c->filled = c->table != NULL;
    return c->table;
}

/* Lane i for a parallel pass: its logs (none: it may not run). */
static int lane_ready(struct lanes *l, int i, const struct ipufs_x *x, const struct cache *cache)
{
    struct lane *lane = &l->lane[i];
    if (!lane->events) {
        lane->events = malloc((size_t)l->events * 5 * sizeof *lane->events);
        lane->dirty = malloc((size_t)l->dirty * 2 * sizeof *lane->dirty);
        if (!lane->events || !lane->dirty) {
            free(lane->events);
            free(lane->dirty);
            lane->events = lane->dirty = NULL;
            return 0;
        }
    }
    lane->event_capacity = l->events < x->event_capacity ? l->events : x->event_capacity;
    lane->dirty_capacity = !x->dirty_capacity ? 0 : l->dirty < x->dirty_capacity ? l->dirty : x->dirty_capacity;
    lane->memory = x->memory;
    lane->serial = 0;
    lane->offer = x->offer;
    lane->event_count = lane->dirty_count = 0;
    lane->retired = 0;
    lane->changed = 0;
    lane->slots = code_slots(l, i, cache);
    return 1;
}

/* The next chunk of the round under way, [*from, return value): a share
 * of what is left over twice the lanes, so that the lanes run out at
 * about the same time (the last chunks are single tiles). */
static int32_t next_chunk(struct lanes *l, int32_t *from)
{
    int32_t i = __atomic_load_n(&l->next, __ATOMIC_RELAXED);
    for (;;) {
        if (i >= l->todos)
            return *from = i;
        int32_t n = (l->todos - i) / (2 * l->lanes);
        int32_t end = i + (n > 0 ? n : 1) < l->todos ? i + (n > 0 ? n : 1) : l->todos;
        if (__atomic_compare_exchange_n(&l->next, &i, end, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            *from = i;
            return end;
        }
    }
}

/* The tiles of the round under way on lane `index`, chunk by chunk. A
 * tile a first round does not run is NOT_RUN; one a later round does not
 * run stays as it stopped. */
static void run_lane(void *arg, int index)
{
    struct lanes *l = arg;
    struct ipufs_x *x = l->x;
    struct lane *lane = &l->lane[index];
    int stopping = !arrive(x);
    for (;;) {
        int32_t i, end = next_chunk(l, &i);
        if (i >= end)
            break;
        for (int32_t k = i; k < end; k++) {
            int32_t j = l->todo[k];
            struct record *r = &l->records[j];
            if (!l->again) {
                r->taken = 0;
                r->segments = r->copied = 0;
            }
            if (stopping) {
                if (!l->again)
                    r->rc = NOT_RUN;
                continue;
            }
            int32_t at = l->first + j;
            struct segment *s = segment_of(l, j, r->segments++);
            s->lane = index;
            s->events_from = lane->event_count;
            s->dirty_from = lane->dirty_count;
            uint32_t tile = l->candidates[at < l->m ? at : at - l->m];
            do
                r->rc = run_tile(x, x->cache, lane, tile, l->share, &r->taken);
            while (r->rc == IPUFS_X_HOLD && held(x));
            if (r->rc == IPUFS_X_HOLD)  /* the hold ends the call */
                r->rc = IPUFS_X_STOP;
            r->miss = lane->miss;
            s->events_to = lane->event_count;
            s->dirty_to = lane->dirty_count;
            stopping = r->rc == IPUFS_X_STOP;
        }
    }
    depart(x);
}

/* The round in l->todo on the lanes; 0 when it did not run (the pool is
 * busy). An abort shows in x->hold. */
static int run_round(struct lanes *l, struct ipufs_x *x)
{
    l->next = 0;
    for (int i = 0; i < l->lanes; i++) {
        l->lane[i].grace = l->main.grace;
        l->lane[i].retired = 0;
        l->lane[i].changed = 0;
    }
    depart(x);  /* the lanes count themselves, this thread's included */
    int ran = ipufs_x_pool_run(l->lanes, run_lane, l) == 0;
    if (!arrive(x) || !ran)
        return 0;
    for (int i = 0; i < l->lanes; i++) {
        l->main.retired += l->lane[i].retired;
        l->main.changed |= l->lane[i].changed;
    }
    return 1;
}

/* The pass's tiles (m of them from `first`, `share` turns each) on the
 * lanes; 0 when it did not run (the pool is busy, or lanes lack memory). */
static int run_lanes(struct lanes *l, struct ipufs_x *x, int32_t m, int32_t first, int64_t share)
{
    int lanes = ipufs_x_pool_lanes();
    if (lanes > l->count)
        lanes = l->count;
    if (lanes > m)
        lanes = m;
    for (int i = 0; i < lanes; i++)
        if (!lane_ready(l, i, x, x->cache))
            return 0;
    l->x = x;
    l->m = m;
    l->first = first;
    l->share = share;
    l->lanes = lanes;
    l->again = 0;
    l->todos = m;
    for (int32_t j = 0; j < m; j++)
        l->todo[j] = j;
    const struct cache *cache = x->cache;
    l->tried[0] = cache->used;
    l->tried[1] = cache->generation;
    if (!run_round(l, x))
        return 0;
    x->spread++;
    return 1;
}

/* Once Python has decoded words that tiles of the pass stopped at on the
 * lanes (each tile of a program meets its new words at once), the tiles
 * from `index` on that stopped at a word now known go on from there on
 * the lanes, as far as their share, rather than one after another on this
 * thread; their turns go in their records as further segments. What the
 * sequential pass does is unchanged: it would have found those words
 * decoded too. Sought once each time the cache has grown. */
static void run_again(struct lanes *l, struct ipufs_x *x, int32_t index)
{
    const struct cache *cache = x->cache;
    if (l->tried[0] == cache->used && l->tried[1] == cache->generation)
        return;
    l->tried[0] = cache->used;
    l->tried[1] = cache->generation;
    int32_t count = 0;
    int64_t turns = 0;
    for (int32_t j = index; j < l->m; j++) {
        struct record *r = &l->records[j];
        if (r->rc == IPUFS_X_MISS && r->segments < SEGMENTS && r->taken < l->share && lookup(cache, r->miss)) {
            l->todo[count++] = j;
            turns += l->share - r->taken;
        }
    }
    if (count < 2 || turns < x->parallel)
        return;
    if (!l->later && !(l->later = malloc((size_t)l->tiles * (SEGMENTS - 1) * sizeof *l->later)))
        return;
    for (int i = 0; i < l->lanes; i++)
        l->lane[i].slots = code_slots(l, i, cache);  /* entries may have moved as the cache grew */
    l->todos = count;
    l->again = 1;
    run_round(l, x);
}

/* A tile's record taken in: its events and stores copied into the main
 * lane's logs, segment by segment (each fits logs drained: a lane's are no
 * larger); 0 when they lack room (Python drains them first). */
static int replay(struct lanes *l, int32_t j)
{
    struct lane *to = &l->main;
    struct record *r = &l->records[j];
    for (; r->copied < r->segments; r->copied++) {
        const struct segment *s = segment_of(l, j, r->copied);
        const struct lane *from = &l->lane[s->lane];
        uint32_t events = s->events_to - s->events_from, dirty = s->dirty_to - s->dirty_from;
        if (to->event_count + events > to->event_capacity || to->dirty_count + dirty > to->dirty_capacity)
            return 0;
        memcpy(to->events + 5 * to->event_count, from->events + 5 * s->events_from, 5 * sizeof(uint32_t) * events);
        memcpy(to->dirty + 2 * to->dirty_count, from->dirty + 2 * s->dirty_from, 2 * sizeof(uint32_t) * dirty);
        to->event_count += events;
        to->dirty_count += dirty;
    }
    return 1;
}

/* The main lane takes struct ipufs_x's logs and counts in, and gives them
 * back (ipufs_x_run's way in and out). */
static void enter(struct lanes *l, struct ipufs_x *x, const struct ipufs_x_pass *pass)
{
    struct lane *main = &l->main;
    main->events = x->events;
    main->event_count = x->event_count;
    main->event_capacity = x->event_capacity;
    main->dirty = x->dirty;
    main->dirty_count = x->dirty_count;
    main->dirty_capacity = x->dirty_capacity;
    main->memory = x->memory;
    main->serial = 1;
    main->offer = x->offer;
    main->retired = x->retired;
    main->changed = x->changed;
    if (pass->fresh)  /* a new Execution.run: a stop flag set now is seen afresh */
        main->grace = -1;
    else  /* back from Python, which took a turn, decoded a word or drained the logs */
        stop_due(x, main, IPUFS_X_HANDBACK_TURNS);
    main->slots = code_slots(l, 0, x->cache);
}

static int leave(struct lanes *l, struct ipufs_x *x, int rc)
{
    struct lane *main = &l->main;
    x->event_count = main->event_count;
    x->dirty_count = main->dirty_count;
    x->retired = main->retired;
    x->changed = main->changed;
    x->miss = main->miss;
    return rc;
}

/* Passes over the running tiles `order` (sorted) as Execution.run makes
 * them: each over the tiles that would take a turn (ipufs_x_runnable),
 * from the first at or after the cursor, wrapping, each tile up to its
 * share of what is left of `budget`, `slice` at most. A pass whose tiles
 * get at least x->parallel turns in all, and cannot run past the budget,
 * runs on the lanes first. */
static int run_passes(struct ipufs_x *x, const uint32_t *order, int32_t n, int64_t slice, int64_t budget,
                      struct ipufs_x_pass *pass)
{
    struct lanes *l = x->lanes;
    const struct cache *cache = x->cache;
    struct lane *main = &l->main;
    while (pass->done < budget) {
        int32_t m = pass->count;
        if (!pass->underway) {
            ipufs_xx_release(x);  /* receivers whose senders caught up go on */
            m = pass->count = ipufs_x_runnable(x, order, n, l->candidates);
            int32_t lo = 0, hi = m;  /* the first tile at or after the cursor */
            while (lo < hi) {
                int32_t mid = lo + (hi - lo) / 2;
                if ((int64_t)l->candidates[mid] < pass->cursor)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            int64_t even = m ? (budget - pass->done) / m : 0;
            pass->first = lo < m ? lo : 0;
            pass->share = even < slice ? even : slice;
            if (pass->share < 16)
                pass->share = 16;
            pass->index = 0;
            pass->base = pass->partial = 0;
            pass->underway = 1;
            pass->replayed = 0;
            pass->held = -1;
            pass->parallel = x->parallel > 0 && m > 1 && l->count > 1 && ipufs_x_pool_lanes() > 1
                             && pass->share * m <= budget - pass->done && pass->share * m >= x->parallel;
            if (pass->parallel) {
                xx_ahead(x, l->candidates, m);  /* what each shows the exchange waits for its turn */
                pass->parallel = run_lanes(l, x, m, pass->first, pass->share);
            }
            if (__atomic_load_n(&x->hold, __ATOMIC_SEQ_CST) == HOLD_ABORT)
                return IPUFS_X_ABORT;
        }
        int64_t limit = budget - pass->done;
        while (pass->index < m) {
            int32_t at = pass->first + pass->index;
            uint32_t tile = l->candidates[at < m ? at : at - m];
            int64_t allowance = limit - pass->base < pass->share ? limit - pass->base : pass->share;
            int finished = 0;
            pass->tile = tile;
            xx_gone_over(x, tile);
            if (pass->parallel && !pass->replayed) {
                struct record *r = &l->records[pass->index];
                if (r->rc == IPUFS_X_MISS) {
                    run_again(l, x, pass->index);
                    if (__atomic_load_n(&x->hold, __ATOMIC_SEQ_CST) == HOLD_ABORT)
                        return IPUFS_X_ABORT;
                }
                if (r->rc == NOT_RUN) {  /* its lane stopped first: it is served first next time */
                    if (pass->held < 0)
                        pass->held = tile;
                    pass->index++;
                    continue;
                }
                if (!replay(l, pass->index))
                    return IPUFS_X_FULL;
                pass->replayed = 1;
                pass->partial = r->taken;
                if (r->rc == IPUFS_X_STOP)
                    pass->stopped = 1;
                finished = r->rc == IPUFS_X_DONE || pass->stopped;
                if (!finished && r->rc == IPUFS_X_MISS && !lookup(cache, r->miss)) {  /* else decoded since */
                    main->miss = r->miss;
                    return IPUFS_X_MISS;
                }
                if (!finished && r->rc == IPUFS_X_PYTHON)
                    return IPUFS_X_PYTHON;
            }
            if (!finished) {
                int rc;
                while ((rc = run_tile(x, cache, main, tile, allowance, &pass->partial)) == IPUFS_X_HOLD)
                    if (!held(x))
                        return IPUFS_X_ABORT;
                if (rc == IPUFS_X_STOP)
                    pass->stopped = 1;
                else if (rc != IPUFS_X_DONE)
                    return rc;
            }
            pass->cursor = (int64_t)tile + (pass->stopped && !pass->partial ? 0 : 1);  /* none taken: first next time */
            pass->base += pass->partial;
            pass->partial = 0;
            pass->replayed = 0;
            pass->index++;
            if ((pass->stopped && !pass->parallel) || pass->base >= limit)
                break;
        }
        pass->underway = 0;
        for (int32_t i = 0; i < m; i++)  /* a pass that ended early: none runs ahead now */
            xx_gone_over(x, l->candidates[i]);
        pass->done += pass->base;
        pass->last = pass->base;
        if (pass->held >= 0)
            pass->cursor = pass->held;
        if (main->changed) {  /* a context waits or stopped: _settle reads that */
            pass->settle = 1;
            main->changed = 0;
        }
        if (pass->settle || pass->handed || !pass->base || pass->stopped)
            break;
    }
    return IPUFS_X_DONE;
}

int ipufs_x_run(struct ipufs_x *x, const uint32_t *order, int32_t n, int64_t slice, int64_t budget,
                struct ipufs_x_pass *pass)
{
    struct lanes *l = x->lanes;
    enter(l, x, pass);
    pass->fresh = 0;
    int rc = arrive(x) ? run_passes(x, order, n, slice, budget, pass) : IPUFS_X_ABORT;
    depart(x);
    return leave(l, x, rc);
}

#endif
