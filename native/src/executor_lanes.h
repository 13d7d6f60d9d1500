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
 * the sequential pass would, handing Python its turns. So what Python sees
 * (events, stores, turns it takes, decoded words it is asked for) comes in
 * the order of the sequential pass, whatever the threads did when: the
 * results never depend on thread timing. docs/executor-speed.md. */
#ifndef IPUFS_EXECUTOR_LANES_H
#define IPUFS_EXECUTOR_LANES_H

#include "executor_pool.h"

/* What a tile did on its lane in the pass under way. */
struct record {
    int64_t taken;     /* turns */
    uint64_t miss;     /* IPUFS_X_MISS: the word */
    uint32_t events_from, events_to, dirty_from, dirty_to;  /* in its lane's logs */
    int32_t rc;        /* IPUFS_X_DONE, _STOP, _PYTHON, _MISS, _FULL, or NOT_RUN */
    int32_t lane;
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
    struct record *records; /* [tiles]: what each did on its lane */
    /* the parallel part of the pass under way */
    struct ipufs_x *x;
    int32_t m, first, chunk;
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
    if (!l->candidates || !l->records) {
        free(l->candidates);
        free(l->records);
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
    free(l);
}

/* The memory the lanes hold: logs and code slots. */
int64_t ipufs_x_lanes_bytes(const void *lanes)
{
    const struct lanes *l = lanes;
    int64_t bytes = (int64_t)sizeof *l + (int64_t)l->tiles * (int64_t)(sizeof *l->candidates + sizeof *l->records);
    for (int i = 0; i < IPUFS_X_MAX_LANES; i++) {
        if (l->code[i].table)
            bytes += (int64_t)l->words * (int64_t)sizeof(struct slot);
        if (l->lane[i].events)
            bytes += 4 * (5 * (int64_t)l->events + 2 * (int64_t)l->dirty);
    }
    return bytes;
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
    lane->event_count = lane->dirty_count = 0;
    lane->retired = 0;
    lane->changed = 0;
    lane->slots = code_slots(l, i, cache);
    return 1;
}

/* The tiles of the pass under way on lane `index`, chunk by chunk. */
static void run_lane(void *arg, int index)
{
    struct lanes *l = arg;
    struct ipufs_x *x = l->x;
    struct lane *lane = &l->lane[index];
    int stopping = !arrive(x);
    for (;;) {
        int32_t i = __atomic_fetch_add(&l->next, l->chunk, __ATOMIC_RELAXED);
        if (i >= l->m)
            break;
        int32_t end = i + l->chunk < l->m ? i + l->chunk : l->m;
        for (int32_t j = i; j < end; j++) {
            struct record *r = &l->records[j];
            r->lane = index;
            if (stopping) {
                r->rc = NOT_RUN;
                continue;
            }
            int32_t at = l->first + j;
            r->events_from = lane->event_count;
            r->dirty_from = lane->dirty_count;
            r->taken = 0;
            do
                r->rc = run_tile(x, x->cache, lane, l->candidates[at < l->m ? at : at - l->m], l->share, &r->taken);
            while (r->rc == IPUFS_X_HOLD && held(x));
            if (r->rc == IPUFS_X_HOLD)  /* the hold ends the call */
                r->rc = IPUFS_X_STOP;
            r->miss = lane->miss;
            r->events_to = lane->event_count;
            r->dirty_to = lane->dirty_count;
            stopping = r->rc == IPUFS_X_STOP;
        }
    }
    depart(x);
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
    l->chunk = m / (8 * lanes) > 0 ? m / (8 * lanes) : 1;
    l->next = 0;
    for (int i = 0; i < lanes; i++)
        l->lane[i].grace = l->main.grace;
    depart(x);  /* the lanes count themselves, this thread's included */
    int ran = ipufs_x_pool_run(lanes, run_lane, l) == 0;
    if (!arrive(x) || !ran)
        return 0;  /* an abort shows in x->hold */
    x->spread++;
    for (int i = 0; i < lanes; i++) {
        l->main.retired += l->lane[i].retired;
        l->main.changed |= l->lane[i].changed;
    }
    return 1;
}

/* A tile's record taken in: its events and stores copied into the main
 * lane's logs; 0 when they lack room (Python drains them first). */
static int replay(struct lanes *l, const struct record *r)
{
    struct lane *from = &l->lane[r->lane], *to = &l->main;
    uint32_t events = r->events_to - r->events_from, dirty = r->dirty_to - r->dirty_from;
    if (to->event_count + events > to->event_capacity || to->dirty_count + dirty > to->dirty_capacity)
        return 0;
    memcpy(to->events + 5 * to->event_count, from->events + 5 * r->events_from, 5 * sizeof(uint32_t) * events);
    memcpy(to->dirty + 2 * to->dirty_count, from->dirty + 2 * r->dirty_from, 2 * sizeof(uint32_t) * dirty);
    to->event_count += events;
    to->dirty_count += dirty;
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
                             && pass->share * m <= budget - pass->done && pass->share * m >= x->parallel
                             && run_lanes(l, x, m, pass->first, pass->share);
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
            if (pass->parallel && !pass->replayed) {
                const struct record *r = &l->records[pass->index];
                if (r->rc == NOT_RUN) {  /* its lane stopped first: it is served first next time */
                    if (pass->held < 0)
                        pass->held = tile;
                    pass->index++;
                    continue;
                }
                if (!replay(l, r))
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
