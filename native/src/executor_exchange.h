/* The exchange between one IPU's tiles: a part of executor.c, included
 * before the loop, kept apart as one concept. The native loop and the
 * Python path (exchange.py, through ipufs_xx_*) both run it, so that the
 * exchange has one implementation.
 *
 * Each tile counts exchange events from its release of the last sync
 * (IPUFS_X_EVENTS: only the exchange instructions advance it, delay
 * included). A send logs the words it puts on the fabric at its events; a
 * receiver keeps its multiplexer's values and its pointer writes with the
 * events they take effect at. A receiver is resolved before each
 * instruction its tile issues, up to its own count: the fabric's timing
 * (time[s][r], direction[s][r], latency[r], from ipufs/model/fabric.py)
 * says which sender's word reached its multiplexer at each of its events;
 * the word is stored at its arrival + the latency, at $INCOMING_BASE +
 * $INCOMING_DELTA, which then steps by 4. A word a tile sends at its event
 * e is stored at least 18 events later in the receiver's count, so a
 * receiver needs only words its senders have sent, or will once they
 * catch up: until they do, it stands still (IPUFS_X_WAIT_EXCHANGE). A
 * sender that waits at a sync, or stopped, has sent all it will this
 * phase. When every member reaches the next sync (ipufs_xx_end_phase),
 * every receiver is resolved in full and the counts start again. The
 * result does not depend on how the tiles are sliced.
 *
 * What a tile touches here is other tiles' logs, so the loop runs the
 * exchange on the caller's thread only: a lane hands such a turn over
 * (IPUFS_X_SERIAL). docs/exchange.md, "How ipufs resolves a phase". */
#ifndef IPUFS_EXECUTOR_EXCHANGE_H
#define IPUFS_EXECUTOR_EXCHANGE_H

enum {
    XC_INCOMING_MUX = 0xA0, XC_INCOMING_MUXPAIR = 0xA1, XC_INCOMING_DELTA = 0xA2, XC_INCOMING_FORMAT = 0xA3,
    XC_INCOMING_BASE = 0xA4, XC_INCOMING_SINIT = 0xA5, XC_OUTGOING_BASE = 0xA7, XC_OUTGOING_DELTA = 0xA8,
};
#define X_NEVER (-((int64_t)1 << 40))
#define X_FETCH_AHEAD 64u  /* how far ahead of its PC the supervisor fetches */
#define X_HOST 0x600u      /* the host endpoints' base */
#define X_NEUTRAL 0x640u   /* the multiplexer's neutral value */
enum { X_POINTER = 0, X_FORMAT = 1 };

/* A growable array of `type` in `name`, `name##_n` used, `name##_c` held. */
#define XVEC(type, name) type *name; uint32_t name##_n, name##_c

/* Room for one more in vector `v` of structure `s`: 0 when memory lacks. */
#define XGROW(s, v) ((s)->v##_n < (s)->v##_c || xgrow((void **)&(s)->v, &(s)->v##_c, sizeof *(s)->v))

static int xgrow(void **items, uint32_t *capacity, size_t size)
{
    uint32_t c = *capacity ? 2 * *capacity : 8;
    void *p = realloc(*items, (size_t)c * size);
    if (!p)
        return 0;
    *items = p;
    *capacity = c;
    return 1;
}

struct xrun { int64_t first; uint32_t count, offset, sctl; };          /* words[offset..] sent from event first */
struct xread { int64_t first, last; uint64_t elements; };              /* what a send read, at which events */
struct xmux { int64_t event; uint32_t value; };
struct xpending { int64_t event; uint32_t kind, value; };
struct xcode { int64_t last; uint32_t pc; };  /* an exchange instruction of the receiver, by its last event */

struct xsender {
    XVEC(struct xrun, runs);
    XVEC(uint32_t, words);
    XVEC(struct xread, reads);
    XVEC(uint32_t, host);  /* words sent while its multiplexer held a host endpoint, since its last sync 0 */
    uint32_t sctl;     /* the sctl of the stream a sendoff or sendpic continues */
    uint32_t logged;   /* it sent this phase */
};

struct xreceiver {
    XVEC(struct xmux, muxes);
    XVEC(struct xpending, pending);
    uint32_t head;     /* the first pending write not made yet */
    XVEC(struct xcode, code);
    int64_t done;      /* arrivals up to here are resolved */
    int64_t sender, event, prior;  /* while it stands still: the sender and event it waits for, its wait before */
    int32_t waiting;
    struct ipufs_xx_fault error;  /* a receive error, kept until Python raises it (kind 0: none) */
};

struct ipufs_xx {
    uint32_t tiles, sources;      /* tiles; multiplexer values that name one (physical tiles) */
    const int16_t *time;          /* [tiles][tiles] by logical tile */
    const uint8_t *direction;     /* [tiles][tiles]: the sctl bit that reaches */
    const int64_t *latency;       /* [tiles] */
    const int64_t *logical;       /* [sources]: physical -> logical */
    uint32_t first, end;          /* tile memory's addresses */
    struct xsender *senders;
    struct xreceiver *receivers;
    uint8_t *receiving;           /* [tiles]: a receiver is resolved before each issue */
    uint8_t *ahead;               /* [tiles]: ran on the threads in the pass under way, not yet gone over */
    int64_t *before;              /* [tiles]: for those, what reached() gave before the pass */
    uint32_t log_stores;          /* keep `stores` (Python wants them: dirty pages, parity marks) */
    uint32_t waiting;             /* receivers standing still */
    uint32_t busy;                /* tiles sent or set a receiver up this phase */
    XVEC(uint32_t, stores);       /* (tile, SRAM offset, bytes) of each store, for Python (dirty pages, parity) */
};

static inline struct ipufs_xx *xx_of(const struct ipufs_x *x) { return (struct ipufs_xx *)x->exchange; }

static inline uint32_t element(uint32_t address)
{
    return address < 0x80000u ? address >> 14 : 0x20 + ((address - 0x80000u) >> 15);
}

static inline uint64_t element_bit(uint32_t address)
{
    uint32_t e = element(address);
    return e < 64 ? (uint64_t)1 << e : 0;
}

/* The elements of [address, end) (elements rise with the address). */
static inline uint64_t elements_of(uint32_t address, uint32_t end)
{
    uint64_t mask = 0;
    for (uint32_t e = element(address), last = element(end - 4); e <= last && e < 64; e++)
        mask |= (uint64_t)1 << e;
    return mask;
}

static inline int64_t *supervisor_of(const struct ipufs_x *x, uint32_t tile)
{
    return x->contexts + (uint64_t)tile * x->count * IPUFS_X_CONTEXT_FIELDS;
}

static inline uint32_t *xcsrs(const struct ipufs_x *x, uint32_t tile)
{
    return x->csrs + (uint64_t)tile * x->count * IPUFS_X_CSRS;
}

static inline int64_t *events_of(const struct ipufs_x *x, uint32_t tile)
{
    return x->tiles + (uint64_t)tile * IPUFS_X_TILE_FIELDS + IPUFS_X_EVENTS;
}

/* Whether a multiplexer value is a host endpoint: what the tile sends then are host packets (ours). */
static inline int is_host(uint32_t value)
{
    value &= 0x1FFFu;
    return X_HOST <= value && value < X_NEUTRAL;
}

/* The logical tile a multiplexer value selects, or -1 (the neutral value, a host endpoint). */
static inline int64_t source_of(const struct ipufs_xx *xx, uint32_t value)
{
    return value < xx->sources ? xx->logical[value] : -1;
}

static inline int fail(struct ipufs_xx_fault *fault, int kind, uint32_t address, uint32_t value, int64_t event,
                       uint32_t pc)
{
    *fault = (struct ipufs_xx_fault){ .kind = kind, .address = address, .value = value, .event = event, .pc = pc };
    return kind;
}

/* ---- the receivers ---------------------------------------------------------- */

static struct xreceiver *receiver(struct ipufs_x *x, uint32_t tile)
{
    struct ipufs_xx *xx = xx_of(x);
    struct xreceiver *rx = &xx->receivers[tile];
    if (!xx->receiving[tile]) {
        rx->muxes_n = rx->pending_n = rx->head = rx->code_n = 0;
        if (!XGROW(rx, muxes))
            return NULL;
        rx->muxes[rx->muxes_n++] = (struct xmux){ X_NEVER, xcsrs(x, tile)[XC_INCOMING_MUX] };
        rx->done = X_NEVER;
        rx->waiting = 0;
        xx->receiving[tile] = 1;
        xx->busy = 1;
    }
    return rx;
}

/* `tile` no longer stands still for a sender. */
static void release(struct ipufs_x *x, uint32_t tile)
{
    struct ipufs_xx *xx = xx_of(x);
    struct xreceiver *rx = &xx->receivers[tile];
    if (!rx->waiting)
        return;
    rx->waiting = 0;
    xx->waiting--;
    int64_t *s = supervisor_of(x, tile);
    if (s[IPUFS_X_WAIT] == IPUFS_X_WAIT_EXCHANGE)
        s[IPUFS_X_WAIT] = rx->prior;
}

static void drop(struct ipufs_x *x, uint32_t tile)
{
    release(x, tile);
    xx_of(x)->receiving[tile] = 0;
}

/* How far `tile`'s sends are logged; -1: it sends no more this phase.
 * A tile that ran ahead on the threads shows what it showed before the
 * pass, as in the sequential pass (ipufs_xx_ahead). */
static inline int64_t reached(const struct ipufs_x *x, uint32_t tile)
{
    const struct ipufs_xx *xx = xx_of(x);
    if (xx->ahead[tile])
        return xx->before[tile];
    const int64_t *s = supervisor_of(x, tile);
    int64_t wait = s[IPUFS_X_WAIT];
    if (s[IPUFS_X_STATUS] != IPUFS_X_ACTIVE || wait == IPUFS_X_WAIT_INTERNAL || wait == IPUFS_X_WAIT_EXTERNAL
        || wait == IPUFS_X_WAIT_ANS)
        return -1;
    return *events_of(x, tile);
}

/* The receive errors of storing n words at `address` from event `when` on
 * (one event each): a bad address; then, word by word, a clash with the
 * fetch of the instruction running then, or with the tile's own send
 * reading that element. 0, or the fault's kind. */
static int check(const struct ipufs_xx *xx, const struct xreceiver *rx, const struct xsender *own, uint32_t address,
                 uint32_t n, int64_t when, uint32_t pc, struct ipufs_xx_fault *fault)
{
    uint64_t end = (uint64_t)address + 4 * (uint64_t)n;
    if ((address & 3) || address < xx->first || end > xx->end)
        return fail(fault, IPUFS_XX_RECEIVE_ADDRESS, address, n, when, pc);
    uint64_t touched = elements_of(address, (uint32_t)end), fetched = element_bit(pc) | element_bit(pc + X_FETCH_AHEAD);
    uint64_t read = 0;
    for (uint32_t i = 0; i < rx->code_n; i++)
        fetched |= element_bit(rx->code[i].pc) | element_bit(rx->code[i].pc + X_FETCH_AHEAD);
    if (own)
        for (uint32_t i = 0; i < own->reads_n; i++)
            read |= own->reads[i].elements;
    if (!(touched & (fetched | read)))
        return 0;  /* the common case: no element in common at any event */
    uint32_t c = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t at = address + 4 * k;
        int64_t w = when + k;
        uint64_t bit = element_bit(at);
        while (c < rx->code_n && rx->code[c].last < w)
            c++;
        uint32_t fetching = c < rx->code_n ? rx->code[c].pc : pc;
        if (bit & (element_bit(fetching) | element_bit(fetching + X_FETCH_AHEAD)))
            return fail(fault, IPUFS_XX_RECEIVE_FETCH, at, fetching, w, pc);
        for (uint32_t i = 0; own && i < own->reads_n; i++)
            if (own->reads[i].first <= w && w <= own->reads[i].last && (own->reads[i].elements & bit))
                return fail(fault, IPUFS_XX_RECEIVE_READ, at, 0, w, pc);
    }
    return 0;
}

/* n words stored at the receiver's pointer from event `when` (which then steps by 4). */
static int store(struct ipufs_x *x, uint32_t r, struct xreceiver *rx, const uint32_t *words, uint32_t n, int64_t when,
                 uint32_t pc)
{
    struct ipufs_xx *xx = xx_of(x);
    uint32_t *csrs = xcsrs(x, r);
    uint32_t address = csrs[XC_INCOMING_BASE] + csrs[XC_INCOMING_DELTA];
    const struct xsender *own = xx->senders[r].logged ? &xx->senders[r] : NULL;
    if (check(xx, rx, own, address, n, when, pc, &rx->error))
        return 0;
    if (xx->log_stores && xx->stores_n + 3 > xx->stores_c
        && !xgrow((void **)&xx->stores, &xx->stores_c, sizeof *xx->stores))
        return fail(&rx->error, IPUFS_XX_NO_MEMORY, 0, 0, when, pc), 0;
    uint32_t offset = address - xx->first;
    memcpy(x->memory + (uint64_t)r * x->window + offset, words, 4 * (size_t)n);
    csrs[XC_INCOMING_DELTA] += 4 * n;
    if (!xx->log_stores)
        return 1;
    xx->stores[xx->stores_n++] = r;
    xx->stores[xx->stores_n++] = offset;
    xx->stores[xx->stores_n++] = 4 * n;
    return 1;
}

/* The pointer and format writes due before a store at event `when`. */
static void writes_before(struct ipufs_x *x, uint32_t r, struct xreceiver *rx, int64_t when)
{
    uint32_t *csrs = xcsrs(x, r);
    while (rx->head < rx->pending_n && rx->pending[rx->head].event <= when) {
        const struct xpending *p = &rx->pending[rx->head++];
        if (p->kind == X_POINTER)
            csrs[XC_INCOMING_DELTA] = p->value << 2;
        else
            csrs[XC_INCOMING_FORMAT] = p->value;
    }
}

/* A run of n words arriving one per event, stored from event `when` on:
 * split where a pointer write falls. 0 on a receive error. */
static int deliver(struct ipufs_x *x, uint32_t r, struct xreceiver *rx, const uint32_t *words, uint32_t n,
                   int64_t when, uint32_t pc)
{
    while (n) {
        writes_before(x, r, rx, when);
        uint32_t k = n;
        if (rx->head < rx->pending_n && rx->pending[rx->head].event < when + n)
            k = (uint32_t)(rx->pending[rx->head].event - when);
        if (!store(x, r, rx, words, k, when, pc))
            return 0;
        words += k;
        n -= k;
        when += k;
    }
    return 1;
}

enum { RESOLVED = IPUFS_XX_RESOLVED, BLOCKED = IPUFS_XX_BLOCKED, FAILED = IPUFS_XX_FAILED };

/* Store what receiver r receives up to its event `upto`: the arrivals up
 * to `upto` minus its latency, with `every` (the phase ends) whatever its
 * senders reached. BLOCKED (rx->sender, rx->event: the sender it needs
 * and the event) when a needed word's sender has not reached that event
 * yet (what is before it is stored), FAILED (rx->error) on a receive
 * error; `pc`: the supervisor's, for the fetch clash. */
static int resolve(struct ipufs_x *x, uint32_t r, int64_t upto, int every, uint32_t pc)
{
    struct ipufs_xx *xx = xx_of(x);
    struct xreceiver *rx = &xx->receivers[r];
    if (rx->error.kind)
        return FAILED;
    int64_t latency = xx->latency[r], last = upto - latency;
    if (last <= rx->done && !(rx->head < rx->pending_n && rx->pending[rx->head].event <= upto))
        return RESOLVED;  /* nothing new is due */
    int blocked = 0;
    uint32_t i = 0;
    while (i + 1 < rx->muxes_n && rx->muxes[i + 1].event <= rx->done)
        i++;  /* the value the multiplexer held at the first arrival to resolve */
    for (; i < rx->muxes_n; i++) {
        int64_t a0 = rx->muxes[i].event > rx->done + 1 ? rx->muxes[i].event : rx->done + 1;
        int64_t a1 = i + 1 < rx->muxes_n && rx->muxes[i + 1].event < last + 1 ? rx->muxes[i + 1].event : last + 1;
        int64_t s = source_of(xx, rx->muxes[i].value);
        if (a0 >= a1 || s < 0)
            continue;
        int64_t delay = xx->time[(uint64_t)s * xx->tiles + r];
        int64_t far = every ? -1 : reached(x, (uint32_t)s);
        if (far >= 0 && far < a1 - 1 - delay) {
            a1 = a0 > far + delay + 1 ? a0 : far + delay + 1;
            blocked = 1;
            rx->sender = s;
            rx->event = a1 - delay;
        }
        uint32_t bit = xx->direction[(uint64_t)s * xx->tiles + r];
        const struct xsender *tx = &xx->senders[s];
        for (uint32_t j = 0; tx->logged && j < tx->runs_n; j++) {
            const struct xrun *run = &tx->runs[j];
            int64_t lo = run->first > a0 - delay ? run->first : a0 - delay;
            int64_t hi = run->first + run->count < a1 - delay ? run->first + run->count : a1 - delay;
            if (lo < hi && (run->sctl & bit)
                && !deliver(x, r, rx, tx->words + run->offset + (lo - run->first), (uint32_t)(hi - lo),
                            lo + delay + latency, pc))
                return FAILED;
        }
        if (blocked) {
            last = a1 - 1;
            break;
        }
    }
    writes_before(x, r, rx, last + latency);
    rx->done = last;
    return blocked ? BLOCKED : RESOLVED;
}

/* Let `r` go back to resolving nothing once nothing can arrive. */
static void quiet(struct ipufs_x *x, uint32_t r)
{
    struct ipufs_xx *xx = xx_of(x);
    struct xreceiver *rx = &xx->receivers[r];
    if (rx->head == rx->pending_n && source_of(xx, rx->muxes[rx->muxes_n - 1].value) < 0
        && rx->done >= rx->muxes[rx->muxes_n - 1].event - 1)
        drop(x, r);
}

/* ---- what the exchange instructions do ------------------------------------ */

/* The multiplexer := value from `event` (its checks made). */
static int set_mux(struct ipufs_x *x, uint32_t tile, uint32_t value, int64_t event)
{
    struct ipufs_xx *xx = xx_of(x);
    uint32_t *csrs = xcsrs(x, tile);
    if (!is_host(value))  /* host packets no sync 0 took are dropped (ours) */
        xx->senders[tile].host_n = 0;
    if (!xx->receiving[tile] && source_of(xx, value) < 0) {  /* nothing arrives: no receiver to follow */
        csrs[XC_INCOMING_MUX] = value;
        return 1;
    }
    struct xreceiver *rx = receiver(x, tile);
    if (!rx || !XGROW(rx, muxes))
        return 0;
    rx->muxes[rx->muxes_n++] = (struct xmux){ event, value };
    csrs[XC_INCOMING_MUX] = value;
    return 1;
}

static int add_pending(struct ipufs_x *x, uint32_t tile, uint32_t kind, uint32_t value, int64_t event)
{
    struct xreceiver *rx = receiver(x, tile);
    if (!rx || !XGROW(rx, pending))
        return 0;
    rx->pending[rx->pending_n++] = (struct xpending){ event, kind, value };
    return 1;
}

/* An XPIC write's checks: the multiplexer (paired 0) or the paired one. */
static int check_xpic(const struct ipufs_xx *xx, uint32_t paired, uint32_t value, uint32_t pc,
                      struct ipufs_xx_fault *fault)
{
    value &= 0x1FFF;
    if (paired)
        return value < xx->tiles ? fail(fault, IPUFS_XX_PAIRED_RECEIVE, pc, value, 0, pc) : 0;
    if (!(value < xx->tiles || (X_HOST <= value && value <= X_NEUTRAL)))
        return fail(fault, IPUFS_XX_MUX_VALUE, pc, value, 0, pc);
    return 0;
}

static int check_pic(uint32_t select, uint32_t value, uint32_t pc, struct ipufs_xx_fault *fault)
{
    return select == X_FORMAT && value ? fail(fault, IPUFS_XX_FORMAT, pc, value, 0, pc) : 0;
}

/* A send's checks: `count` words from item `item` of the outgoing base. */
static int check_send(const struct ipufs_x *x, uint32_t tile, uint32_t item, uint32_t count, uint32_t sctl,
                      uint32_t pc, struct ipufs_xx_fault *fault)
{
    const struct ipufs_xx *xx = xx_of(x);
    if (sctl & 4)
        return fail(fault, IPUFS_XX_PAIRED_SEND, pc, sctl, 0, pc);
    if (!(sctl & 3) || !count)
        return 0;
    uint32_t address = xcsrs(x, tile)[XC_OUTGOING_BASE] + 4 * item;
    uint64_t end = (uint64_t)address + 4 * (uint64_t)count;
    if (address < xx->first || end > xx->end)
        return fail(fault, IPUFS_XX_SEND_ADDRESS, address, count, 0, pc);
    if (elements_of(address, (uint32_t)end) & (element_bit(pc) | element_bit(pc + X_FETCH_AHEAD)))
        return fail(fault, IPUFS_XX_SEND_FETCH, pc, address, 0, pc);
    return 0;
}

/* A send (its checks made): `count` words from item `item`, from the event after the tile's count. */
static int transmit(struct ipufs_x *x, uint32_t tile, uint32_t item, uint32_t count, uint32_t sctl)
{
    struct ipufs_xx *xx = xx_of(x);
    struct xsender *tx = &xx->senders[tile];
    uint32_t *csrs = xcsrs(x, tile);
    csrs[XC_OUTGOING_DELTA] = item + count;
    if (!tx->logged) {
        tx->runs_n = tx->words_n = tx->reads_n = 0;
        tx->logged = 1;
        xx->busy = 1;
    }
    tx->sctl = sctl;
    if (!(sctl & 3) || !count)
        return 1;
    uint32_t address = csrs[XC_OUTGOING_BASE] + 4 * item;
    while (tx->words_n + count > tx->words_c)
        if (!xgrow((void **)&tx->words, &tx->words_c, sizeof *tx->words))
            return 0;
    if (!XGROW(tx, runs) || !XGROW(tx, reads))
        return 0;
    int64_t first = *events_of(x, tile) + 1;
    const uint8_t *source = x->memory + (uint64_t)tile * x->window + (address - xx->first);
    memcpy(tx->words + tx->words_n, source, 4 * (size_t)count);
    if (is_host(csrs[XC_INCOMING_MUX])) {  /* host packets, for its next sync 0 (ipufs_xx_host) */
        while (tx->host_n + count > tx->host_c)
            if (!xgrow((void **)&tx->host, &tx->host_c, sizeof *tx->host))
                return 0;
        memcpy(tx->host + tx->host_n, source, 4 * (size_t)count);
        tx->host_n += count;
    }
    tx->runs[tx->runs_n++] = (struct xrun){ first, count, tx->words_n, sctl };
    tx->reads[tx->reads_n++] = (struct xread){ first, first + count - 1, elements_of(address, address + 4 * count) };
    tx->words_n += count;
    return 1;
}

/* The instruction takes n + 1 events (and as many turns). */
static int advance(struct ipufs_x *x, uint32_t tile, uint32_t ctx, uint32_t n, uint32_t pc)
{
    struct ipufs_xx *xx = xx_of(x);
    x->contexts[((uint64_t)tile * x->count + ctx) * IPUFS_X_CONTEXT_FIELDS + IPUFS_X_DELAY] = n;
    if (ctx)
        return 1;
    int64_t *events = events_of(x, tile);
    *events += (int64_t)n + 1;
    if (xx && xx->receiving[tile]) {
        struct xreceiver *rx = &xx->receivers[tile];
        if (!XGROW(rx, code))
            return 0;
        rx->code[rx->code_n++] = (struct xcode){ *events, pc };
    }
    return 1;
}

int ipufs_xx_issue(struct ipufs_x *x, uint32_t tile, uint32_t ctx, int op, const uint32_t *o, uint32_t pc,
                   struct ipufs_xx_fault *fault)
{
    struct ipufs_xx *xx = xx_of(x);
    fault->kind = 0;
    if (op != IPUFS_XX_DELAY && !xx)
        return fail(fault, IPUFS_XX_NOT_PUBLIC, pc, 0, 0, pc);
    uint32_t *csrs = xx ? xcsrs(x, tile) : NULL;
    int64_t now = *events_of(x, tile);
    uint32_t stream = csrs ? csrs[XC_OUTGOING_DELTA] : 0, sctl = xx ? xx->senders[tile].sctl : 0;
    if (xx && !xx->senders[tile].logged)
        sctl = 0;
    int rc = 0, ok = 1;
    switch (op) {
    case IPUFS_XX_DELAY:
        ok = advance(x, tile, ctx, o[0], pc);
        break;
    case IPUFS_XX_DELAYPIC:  /* PIC at its last event */
        if ((rc = check_pic(o[1], o[2], pc, fault)))
            return rc;
        ok = advance(x, tile, ctx, o[0], pc) && add_pending(x, tile, o[1] ? X_FORMAT : X_POINTER, o[2], now + o[0] + 1);
        break;
    case IPUFS_XX_DELAYXPIC:  /* XPIC at its last event */
        if ((rc = check_xpic(xx, o[1], o[2], pc, fault)))
            return rc;
        ok = advance(x, tile, ctx, o[0], pc) && (o[1] || set_mux(x, tile, o[2] & 0x1FFF, now + o[0] + 1));
        break;
    case IPUFS_XX_SEND:
        if ((rc = check_send(x, tile, o[1], o[0] + 1, o[2], pc, fault)))
            return rc;
        ok = transmit(x, tile, o[1], o[0] + 1, o[2]) && advance(x, tile, ctx, o[0], pc);
        break;
    case IPUFS_XX_SENDOFF:  /* continues the stream, skipping o[1] items */
        if ((rc = check_send(x, tile, stream + o[1], o[0] + 1, o[2], pc, fault)))
            return rc;
        ok = transmit(x, tile, stream + o[1], o[0] + 1, o[2]) && advance(x, tile, ctx, o[0], pc);
        break;
    case IPUFS_XX_SENDPIC:  /* its write at its first event; the stream's sctl */
        if ((rc = o[1] < 2 ? check_xpic(xx, o[1], o[2], pc, fault) : check_pic(o[1] - 2, o[2], pc, fault))
            || (rc = check_send(x, tile, stream, o[0] + 1, sctl, pc, fault)))
            return rc;
        ok = (o[1] == 1 || (o[1] == 0 ? set_mux(x, tile, o[2] & 0x1FFF, now + 1)
                                      : add_pending(x, tile, o[1] - 2, o[2], now + 1)))
             && transmit(x, tile, stream, o[0] + 1, sctl) && advance(x, tile, ctx, o[0], pc);
        break;
    case IPUFS_XX_SENDPICP: {  /* o: n, item, sctl, select, xpic, pic; both writes at its first event */
        if ((rc = check_xpic(xx, o[4] >> 13, o[4] & 0x1FFF, pc, fault)) || (rc = check_pic(o[3], o[5], pc, fault))
            || (o[2] && (rc = check_send(x, tile, o[1], o[0] + 1, o[2], pc, fault))))
            return rc;
        ok = ((o[4] >> 13) || set_mux(x, tile, o[4] & 0x1FFF, now + 1))
             && add_pending(x, tile, o[3] ? X_FORMAT : X_POINTER, o[5], now + 1)
             && (!o[2] || transmit(x, tile, o[1], o[0] + 1, o[2])) && advance(x, tile, ctx, o[0], pc);
        break;
    }
    default:
        return fail(fault, IPUFS_XX_NO_MEMORY, pc, 0, 0, pc);
    }
    return ok ? 0 : fail(fault, IPUFS_XX_NO_MEMORY, pc, 0, 0, pc);
}

int ipufs_xx_put(struct ipufs_x *x, uint32_t tile, uint32_t index, uint32_t value, uint32_t pc,
                 struct ipufs_xx_fault *fault)
{
    struct ipufs_xx *xx = xx_of(x);
    fault->kind = 0;
    if (!xx)
        return 0;
    int64_t next = *events_of(x, tile) + 1;
    int rc;
    switch (index) {
    case XC_INCOMING_MUX:
        if ((rc = check_xpic(xx, 0, value, pc, fault)))
            return -rc;
        return set_mux(x, tile, value & 0x1FFF, next) ? 1 : -fail(fault, IPUFS_XX_NO_MEMORY, pc, 0, 0, pc);
    case XC_INCOMING_MUXPAIR:
        if ((rc = check_xpic(xx, 1, value, pc, fault)))
            return -rc;
        xcsrs(x, tile)[index] = value;
        return 1;
    case XC_INCOMING_FORMAT:
        return value & 3 ? -fail(fault, IPUFS_XX_FORMAT, pc, value & 3, 0, pc) : 0;
    default:
        return 0;
    }
}

/* ---- what the loop and the scheduler ask ------------------------------------ */

uint8_t *ipufs_xx_receiving(void *exchange)
{
    return ((struct ipufs_xx *)exchange)->receiving;
}

int ipufs_xx_ready(struct ipufs_x *x, uint32_t tile)
{
    struct ipufs_xx *xx = xx_of(x);
    if (!xx || !xx->receiving[tile])
        return RESOLVED;
    int64_t *s = supervisor_of(x, tile);
    if (s[IPUFS_X_STATUS] != IPUFS_X_ACTIVE)  /* its count stands: what arrives lands when the phase ends */
        return RESOLVED;
    struct xreceiver *rx = &xx->receivers[tile];
    if (rx->waiting)
        return BLOCKED;
    int rc = resolve(x, tile, *events_of(x, tile), 0, (uint32_t)s[IPUFS_X_PC]);
    if (rc == BLOCKED) {
        rx->waiting = 1;
        rx->prior = s[IPUFS_X_WAIT];
        xx->waiting++;
        s[IPUFS_X_WAIT] = IPUFS_X_WAIT_EXCHANGE;
    } else if (rc == RESOLVED) {
        quiet(x, tile);
    }
    return rc;
}

/* A pass is about to run tiles `order` (m of them) on the threads: what
 * each shows its receivers stays what it was until the caller's thread
 * goes over it (xx_gone_over), so that a receiver earlier in the pass
 * never sees a sender further on than the sequential pass would. */
static void xx_ahead(struct ipufs_x *x, const uint32_t *order, int32_t m)
{
    struct ipufs_xx *xx = xx_of(x);
    if (!xx)
        return;
    memset(xx->ahead, 0, xx->tiles);  /* none left from a pass given up */
    for (int32_t i = 0; i < m; i++) {
        xx->before[order[i]] = reached(x, order[i]);
        xx->ahead[order[i]] = 1;
    }
}

static inline void xx_gone_over(struct ipufs_x *x, uint32_t tile)
{
    struct ipufs_xx *xx = xx_of(x);
    if (xx)
        xx->ahead[tile] = 0;
}

void ipufs_xx_log_stores(struct ipufs_x *x, int on)
{
    struct ipufs_xx *xx = xx_of(x);
    if (xx) {
        xx->log_stores = (uint32_t)on;
        if (!on)
            xx->stores_n = 0;
    }
}

int ipufs_xx_error(struct ipufs_x *x, uint32_t tile, struct ipufs_xx_fault *fault)
{
    struct ipufs_xx *xx = xx_of(x);
    if (!xx || !xx->receivers[tile].error.kind)
        return 0;
    *fault = xx->receivers[tile].error;
    xx->receivers[tile].error.kind = 0;
    drop(x, tile);
    return fault->kind;
}

int ipufs_xx_release(struct ipufs_x *x)
{
    struct ipufs_xx *xx = xx_of(x);
    int released = 0;
    if (!xx || !xx->waiting)
        return 0;
    for (uint32_t t = 0; t < xx->tiles && xx->waiting; t++) {
        struct xreceiver *rx = &xx->receivers[t];
        if (!rx->waiting)
            continue;
        int64_t far = reached(x, (uint32_t)rx->sender);
        if (far < 0 || far >= rx->event) {
            release(x, t);
            released++;
        }
    }
    return released;
}

int32_t ipufs_xx_end_phase(struct ipufs_x *x, const uint32_t *tiles, int32_t n, uint32_t *failed)
{
    struct ipufs_xx *xx = xx_of(x);
    int32_t m = 0;
    if (xx && xx->busy) {
        for (uint32_t t = 0; t < xx->tiles; t++) {
            if (!xx->receiving[t])
                continue;
            release(x, t);
            if (resolve(x, t, (int64_t)1 << 40, 1, (uint32_t)supervisor_of(x, t)[IPUFS_X_PC]) == FAILED)
                failed[m++] = t;
            else
                quiet(x, t);
        }
        xx->busy = 0;
        for (uint32_t t = 0; t < xx->tiles; t++) {
            xx->senders[t].logged = 0;
            if (xx->receiving[t] && !xx->receivers[t].error.kind) {  /* still selecting a tile: it receives again */
                struct xreceiver *rx = &xx->receivers[t];
                rx->muxes[0] = (struct xmux){ X_NEVER, rx->muxes[rx->muxes_n - 1].value };
                rx->muxes_n = 1;
                rx->pending_n = rx->head = rx->code_n = 0;
                rx->done = X_NEVER;
                xx->busy = 1;
            }
        }
    }
    for (int32_t i = 0; i < n; i++) {
        uint32_t *csrs = xcsrs(x, tiles[i]);
        *events_of(x, tiles[i]) = 0;
        csrs[XC_INCOMING_DELTA] = csrs[XC_INCOMING_SINIT];
    }
    return m;
}

void ipufs_xx_start(struct ipufs_x *x, uint32_t tile)
{
    struct ipufs_xx *xx = xx_of(x);
    *events_of(x, tile) = 0;
    if (!xx)
        return;
    xx->senders[tile].logged = 0;
    xx->senders[tile].host_n = 0;
    drop(x, tile);
    xx->receivers[tile].error.kind = 0;
    if (source_of(xx, xcsrs(x, tile)[XC_INCOMING_MUX] & 0x1FFF) >= 0)
        receiver(x, tile);
}

void ipufs_xx_reset(struct ipufs_x *x)
{
    struct ipufs_xx *xx = xx_of(x);
    if (!xx)
        return;
    for (uint32_t t = 0; t < xx->tiles; t++) {
        xx->senders[t].logged = 0;
        xx->senders[t].host_n = 0;
        xx->receivers[t].waiting = 0;
        xx->receivers[t].error.kind = 0;
        xx->receiving[t] = 0;
        xx->ahead[t] = 0;
    }
    xx->waiting = xx->busy = 0;
    xx->stores_n = 0;
}

int32_t ipufs_xx_waiting(const struct ipufs_x *x)
{
    const struct ipufs_xx *xx = xx_of(x);
    return xx ? (int32_t)xx->waiting : 0;
}

int32_t ipufs_xx_stores(struct ipufs_x *x, uint32_t **stores)
{
    struct ipufs_xx *xx = xx_of(x);
    if (!xx)
        return 0;
    *stores = xx->stores;
    int32_t n = (int32_t)xx->stores_n / 3;
    xx->stores_n = 0;
    return n;
}

/* The host packets `tile` sent since its last sync 0 (its multiplexer a
 * host endpoint): their count, the words at *words until the next send;
 * they are taken (docs/exchange.md, "Host exchange"). */
int32_t ipufs_xx_host(struct ipufs_x *x, uint32_t tile, uint32_t **words)
{
    struct ipufs_xx *xx = xx_of(x);
    if (!xx)
        return 0;
    struct xsender *tx = &xx->senders[tile];
    *words = tx->host;
    int32_t n = (int32_t)tx->host_n;
    tx->host_n = 0;
    return n;
}

void *ipufs_xx_new(uint32_t tiles, uint32_t sources, const int16_t *time, const uint8_t *direction,
                   const int64_t *latency, const int64_t *logical, uint32_t first, uint32_t end)
{
    struct ipufs_xx *xx = calloc(1, sizeof *xx);
    if (!xx)
        return NULL;
    *xx = (struct ipufs_xx){ .tiles = tiles, .sources = sources, .time = time, .direction = direction,
                             .latency = latency, .logical = logical, .first = first, .end = end };
    xx->senders = calloc(tiles, sizeof *xx->senders);
    xx->receivers = calloc(tiles, sizeof *xx->receivers);
    xx->receiving = calloc(tiles, 1);
    xx->ahead = calloc(tiles, 1);
    xx->before = calloc(tiles, sizeof *xx->before);
    if (!xx->senders || !xx->receivers || !xx->receiving || !xx->ahead || !xx->before) {
        ipufs_xx_free(xx);
        return NULL;
    }
    return xx;
}

void ipufs_xx_free(void *exchange)
{
    struct ipufs_xx *xx = exchange;
    if (!xx)
        return;
    for (uint32_t t = 0; xx->senders && t < xx->tiles; t++) {
        free(xx->senders[t].runs);
        free(xx->senders[t].words);
        free(xx->senders[t].reads);
        free(xx->senders[t].host);
    }
    for (uint32_t t = 0; xx->receivers && t < xx->tiles; t++) {
        free(xx->receivers[t].muxes);
        free(xx->receivers[t].pending);
        free(xx->receivers[t].code);
    }
    free(xx->senders);
    free(xx->receivers);
    free(xx->receiving);
    free(xx->ahead);
    free(xx->before);
    free(xx->stores);
    free(xx);
}

#endif
