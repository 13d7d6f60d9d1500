/* The tile executor's native loop (executor.c): declarations shared by the
 * C source and the cffi definitions of native/build_native.py, which reads
 * this file as it is (so: no preprocessor lines here).
 *
 * The state it works on is the model's own, in place: numpy arrays that
 * ipufs/model/executor/state.py reads and writes too (registers, each
 * context's PC, status, wait, delay; each tile's turn, turn count and
 * instruction count) and the exchange BAR holding the tiles' SRAM. What an
 * instruction is, and which native form executes it, comes from the model's
 * tables: the decoder fills the decode cache (ipufs_x_learn) from the
 * semantic rules' `native` column. Anything else returns to Python, which
 * executes that turn and calls again. docs/executor-speed.md. */

enum {
    /* per context, IPUFS_X_CONTEXT_FIELDS int64 each */
    IPUFS_X_PC = 0,
    IPUFS_X_STATUS = 1,  /* CTXT_STS: 0 inactive, 1 active, 2 excepted */
    IPUFS_X_WAIT = 2,    /* 0: none; else what an active context waits for */
    IPUFS_X_DELAY = 3,   /* turns still to stall */
    IPUFS_X_REPEAT = 4,  /* 1 while an rpt loop runs */
    IPUFS_X_REPEAT_FIRST = 5,  /* its body's first bundle */
    IPUFS_X_REPEAT_END = 6,    /* the address after the body */
    IPUFS_X_REPEAT_LEFT = 7,   /* iterations still to start after the current one */
    IPUFS_X_EXIT = 8,    /* the Boolean the worker's exit handed over; -1: none */
    IPUFS_X_BREAK = 9,   /* 1 while a breakpoint applies to the context (Python's turns) */
    IPUFS_X_WAIT_ZONE = 10,  /* the zone of the external sync it waits at */
    IPUFS_X_CONTEXT_FIELDS = 16,
    /* per tile, IPUFS_X_TILE_FIELDS int64 each */
    IPUFS_X_TURN = 0,          /* the context whose turn comes next */
    IPUFS_X_TURNS = 1,         /* turns taken */
    IPUFS_X_INSTRUCTIONS = 2,  /* instructions retired */
    IPUFS_X_LINK = 3,          /* $SSR.LC: the Boolean the workers' exits hand over */
    IPUFS_X_COUNT_OFFSET = 4,  /* what puts to $SCOUNT_L/U moved the clock by */
    IPUFS_X_EVENTS = 5,        /* exchange events the supervisor took since its last sync (delay...) */
    IPUFS_X_TILE_FIELDS = 8,
    IPUFS_X_REGISTERS = 32,    /* $m0..$m15, then $a0..$a15 */
    /* per context, IPUFS_X_CSRS uint32 each: lower-space CSR i at i
     * ($SSR/$WSR's held bits at 1), upper-space CSR j at IPUFS_X_UPPER + j */
    IPUFS_X_CSRS = 256,
    IPUFS_X_UPPER = 0xC0,
    /* the CSR accesses the table passed in `csr_ops` describes */
    IPUFS_X_GET = 0, IPUFS_X_PUT = 1, IPUFS_X_UGET = 2, IPUFS_X_UPUT = 3, IPUFS_X_ACCESSES = 4,
    /* the program events the loop logs for the trace */
    IPUFS_X_EVENT_SYNC = 0, IPUFS_X_EVENT_START = 1, IPUFS_X_EVENT_EXIT = 2,
    IPUFS_X_ACTIVE = 1,
    IPUFS_X_WAIT_NONE = 0,
    IPUFS_X_WAIT_WORKERS = 1,
    IPUFS_X_WAIT_INTERNAL = 2,
    IPUFS_X_WAIT_EXTERNAL = 3,
    IPUFS_X_WAIT_EXCHANGE = 4,  /* for a word another tile has yet to send (Python settles it) */
    IPUFS_X_WAIT_ANS = 5,       /* sync 1: for the syncs `sans` armed to pass */
    /* what ipufs_x_scan counts */
    IPUFS_X_RUNNABLE = 0,   /* contexts that can take a turn (a local sync whose workers ended included) */
    IPUFS_X_MEMBERS = 1,    /* active supervisors of tiles that stay running */
    IPUFS_X_INTERNAL = 2,   /* of them, waiting in sync 3 */
    IPUFS_X_EXTERNAL = 3,   /* of them, waiting in an external sync */
    IPUFS_X_COUNTS = 4,
    /* turns between the offers of the CPU of a loop that shares one CPU with a FUSE reader (ipufs_x.offer) */
    IPUFS_X_YIELD_TURNS = 1024,
    /* turns between the looks at `stop`; what a visit to a tile counts as */
    IPUFS_X_CHECK_TURNS = 256,
    /* looks at a hold before a thread sleeps until it changes (with more than one CPU) */
    IPUFS_X_HOLD_SPINS = 2000,
    IPUFS_X_TILE_TURNS = 16,
    IPUFS_X_HANDBACK_TURNS = 512,  /* what a return to Python counts as */
    /* threads a pass may spread its tiles over, at most */
    IPUFS_X_MAX_LANES = 64,
    /* who may run a decoded instruction */
    IPUFS_X_SUPERVISOR = 1,
    IPUFS_X_WORKER = 2,
    IPUFS_X_BODY = 4,    /* a bundle that may be in an rpt body (no control or system half) */
    /* what ipufs_x_run returns */
    IPUFS_X_DONE = 0,    /* the budget is spent, a pass took no turn, or _settle is due */
    IPUFS_X_PYTHON = 1,  /* the next turn of order[index] is Python's */
    IPUFS_X_MISS = 2,    /* the word in `miss` is not in the decode cache */
    IPUFS_X_FULL = 3,    /* the dirty log or the event log is full */
    IPUFS_X_STOP = 4,    /* (inside the loop) the run is to end: `stop` was seen long enough */
    IPUFS_X_HOLD = 5,    /* (inside the loop) another thread holds the loop: wait, then go on or end */
    IPUFS_X_ABORT = 6,   /* a hold ended the call: what the model is now does not allow it to go on */
    IPUFS_X_SERIAL = 7,  /* (a lane's) the next turn is the exchange's: the caller's thread takes it */
    /* the exchange instructions (ipufs_xx_issue's op: exchange_ops.py) */
    IPUFS_XX_DELAY = 0, IPUFS_XX_DELAYPIC = 1, IPUFS_XX_DELAYXPIC = 2, IPUFS_XX_SEND = 3, IPUFS_XX_SENDOFF = 4,
    IPUFS_XX_SENDPIC = 5, IPUFS_XX_SENDPICP = 6,
    /* what ipufs_xx_ready says of a receiver */
    IPUFS_XX_RESOLVED = 0, IPUFS_XX_BLOCKED = 1, IPUFS_XX_FAILED = 2,
    /* the exchange's faults (struct ipufs_xx_fault's kind; exchange.py words them) */
    IPUFS_XX_NOT_PUBLIC = 1,       /* this IPU's fabric timing is not known */
    IPUFS_XX_PAIRED_SEND = 2,      /* not modelled: 64-bit sends (value: sctl) */
    IPUFS_XX_PAIRED_RECEIVE = 3,   /* not modelled: 64-bit receives */
    IPUFS_XX_FORMAT = 4,           /* not modelled: incoming format `value` */
    IPUFS_XX_MUX_VALUE = 5,        /* a multiplexer value naming nothing (ERERR CONF) */
    IPUFS_XX_SEND_ADDRESS = 6,     /* a send of `value` words from `address`: no memory there */
    IPUFS_XX_SEND_FETCH = 7,       /* a send from `value` reads the element its code is fetched from */
    IPUFS_XX_RECEIVE_ADDRESS = 8,  /* a store of `value` words at `address`: no memory there */
    IPUFS_XX_RECEIVE_FETCH = 9,    /* a store at `address` (`event`) clashes with the fetch of the code at `value` */
    IPUFS_XX_RECEIVE_READ = 10,    /* a store at `address` (`event`) clashes with the tile's own send's read */
    IPUFS_XX_NO_MEMORY = 11        /* the exchange's logs could not grow */
};

/* An exchange fault: what it is, and what its message names. */
struct ipufs_xx_fault {
    int32_t kind;
    uint32_t address, value, pc;
    int64_t event;
};

struct ipufs_x {
    uint32_t *registers;  /* [tiles][contexts][32] */
    uint32_t *csrs;       /* [tiles][contexts][IPUFS_X_CSRS] */
    int64_t *contexts;    /* [tiles][contexts][IPUFS_X_CONTEXT_FIELDS] */
    int64_t *tiles;       /* [tiles][IPUFS_X_TILE_FIELDS] */
    uint8_t *memory;      /* the exchange BAR: tile t's SRAM at t * window */
    uint32_t window;      /* a power of two, at most 2 MiB, below 2 * sram */
    uint32_t sram;
    uint32_t count;       /* contexts per tile */
    uint32_t dirty_capacity;  /* 0: stores are not logged */
    uint32_t *dirty;      /* (BAR offset, length) pairs of stores */
    uint32_t dirty_count;
    uint32_t zone_local;      /* sync 2 and 3: what the sync instruction's zone field holds for them */
    uint32_t zone_internal;
    uint32_t zones_external;  /* bit z set: zone z is a sync with the host (GS1, GS2 and their kinds) */
    uint32_t memory_base;     /* the tile address of SRAM's first byte (run's vertex base adds it) */
    uint32_t region1;         /* the SRAM offset where region 1 starts: code is fetched below it */
    uint32_t bounded;         /* 1: only [memory_base, + sram) is memory (GC200); 0: addresses alias (GC2) */
    const uint8_t *csr_ops;   /* [supervisor, worker][IPUFS_X_ACCESSES][256]: what get/put/uget/uput
                               * of each index does (ipufs_x_csr_op_name), from csr.py */
    uint32_t event_capacity;
    uint32_t *events;     /* (kind, tile, context, PC, value) of each program event, for the trace */
    uint32_t event_count;
    uint32_t changed;     /* a sync or an exit since the last pass ended: _settle reads what it changed */
    uint64_t miss;        /* IPUFS_X_MISS: the word to decode (a bundle's two: the first in the low half) */
    int64_t retired;      /* instructions retired, added up across calls */
    void *cache;          /* ipufs_x_cache_new(): the decode cache */
    void *lanes;          /* ipufs_x_lanes_new(): the threads' logs and code slots, the pass's tiles */
    const volatile uint8_t *stop;  /* nonzero: a request waits for the daemon lock: the call ends `grace`
                                    * turns later (NULL: never) */
    int64_t grace;        /* turns a call still takes once it sees `stop` set */
    int64_t parallel;     /* a pass that gives its tiles at least this many turns in all spreads them over
                           * the lanes (0: never) */
    int64_t spread;       /* passes that did, ever */
    int64_t offer;        /* turns between each thread's offers of its CPU (sched_yield; 0: never) */
    uint32_t hold;        /* ipufs_x_hold/_resume: 0 run, 1 wait, 2 end (atomic) */
    int32_t active;       /* threads running tiles now (atomic) */
    int32_t paused;       /* of them, waiting for a hold to end (atomic) */
    int64_t spin;         /* looks at a hold (or at its acks) before a thread sleeps until it changes */
    int64_t due;          /* a hold waits for the tiles until then (CLOCK_MONOTONIC ns; 0: not) */
    uint32_t acks;        /* counts the threads that stopped for a hold or left (a futex) */
    void *exchange;       /* ipufs_xx_new(): the exchange between the tiles (NULL: its timing is not public) */
};

/* What ipufs_x_run has done of one Execution.run call: the turns taken
 * (done) and taken by the last pass it finished (last); the tile after the
 * last one served (cursor); within the pass under way, the tile it serves
 * (order[(first + index) % n]) and the turns taken by the tiles before it
 * (base) and by it (partial). `settle` and `handed` (the turns Python took
 * for it, which Python counts) make it return after a pass, for
 * Execution._settle; a pass without them changed nothing _settle reads,
 * and the next one follows at once. */
struct ipufs_x_pass {
    int64_t done;
    int64_t last;
    int64_t cursor;
    int32_t underway;
    int32_t first;
    int32_t index;
    int64_t share;
    int64_t base;
    int64_t partial;
    int32_t settle;
    int64_t handed;
    int32_t stopped;      /* the call ended early: `stop` was set */
    int64_t tile;         /* the tile in hand when the call returns IPUFS_X_PYTHON or IPUFS_X_MISS */
    int32_t count;        /* the tiles of the pass under way */
    int32_t parallel;     /* it ran on the lanes first: what each tile did there is taken in in order */
    int32_t replayed;     /* the tile in hand's record is taken in */
    int32_t fresh;        /* set for a new Execution.run: the stop flag is looked at afresh */
    int64_t held;         /* a tile the stopped pass did not reach (-1: none): served first next time */
};

void *ipufs_x_cache_new(uint32_t limit);
void ipufs_x_cache_free(void *cache);
int ipufs_x_cache_clear(void *cache);
int64_t ipufs_x_cache_size(const void *cache, int64_t *bytes);
int ipufs_x_learn(void *cache, uint64_t key, int who, const int32_t *forms, const uint32_t *operands);
void *ipufs_x_lanes_new(uint32_t tiles, uint32_t region1, int lanes, uint32_t events, uint32_t dirty);
void ipufs_x_lanes_free(void *lanes);
void ipufs_x_lanes_clear(void *lanes);
int64_t ipufs_x_lanes_bytes(const void *lanes);
int ipufs_x_pool_start(int lanes, long slice_ns);
int ipufs_x_pool_lanes(void);
int ipufs_x_form_count(void);
const char *ipufs_x_form_name(int form);
int ipufs_x_kind_count(void);
const char *ipufs_x_kind_name(int kind);
int ipufs_x_csr_op_count(void);
const char *ipufs_x_csr_op_name(int op);
int32_t ipufs_x_scan(const struct ipufs_x *x, const uint32_t *order, int32_t n, uint32_t *stopped,
                     int64_t *counts);
void ipufs_x_hold(struct ipufs_x *x, int64_t after_ns);
void ipufs_x_resume(struct ipufs_x *x, int end);
int32_t ipufs_x_runnable(const struct ipufs_x *x, const uint32_t *order, int32_t n, uint32_t *out);
int ipufs_x_run(struct ipufs_x *x, const uint32_t *order, int32_t n, int64_t slice, int64_t budget,
                struct ipufs_x_pass *pass);
/* the exchange (executor_exchange.h) */
void *ipufs_xx_new(uint32_t tiles, uint32_t sources, const int16_t *time, const uint8_t *direction,
                   const int64_t *latency, const int64_t *logical, uint32_t first, uint32_t end);
void ipufs_xx_free(void *exchange);
uint8_t *ipufs_xx_receiving(void *exchange);
int ipufs_xx_issue(struct ipufs_x *x, uint32_t tile, uint32_t ctx, int op, const uint32_t *o, uint32_t pc,
                   struct ipufs_xx_fault *fault);
int ipufs_xx_put(struct ipufs_x *x, uint32_t tile, uint32_t index, uint32_t value, uint32_t pc,
                 struct ipufs_xx_fault *fault);
int ipufs_xx_ready(struct ipufs_x *x, uint32_t tile);
int ipufs_xx_error(struct ipufs_x *x, uint32_t tile, struct ipufs_xx_fault *fault);
void ipufs_xx_log_stores(struct ipufs_x *x, int on);
int ipufs_xx_release(struct ipufs_x *x);
int32_t ipufs_xx_end_phase(struct ipufs_x *x, const uint32_t *tiles, int32_t n, uint32_t *failed);
void ipufs_xx_start(struct ipufs_x *x, uint32_t tile);
void ipufs_xx_reset(struct ipufs_x *x);
int32_t ipufs_xx_waiting(const struct ipufs_x *x);
int32_t ipufs_xx_stores(struct ipufs_x *x, uint32_t **stores);
int32_t ipufs_xx_host(struct ipufs_x *x, uint32_t tile, uint32_t **words);
