/* The executor's worker threads (executor_pool.c): one pool per process,
 * which runs one function on every lane at once and returns when all are
 * done. The caller is lane 0; lanes 1.. are the pool's threads. One caller
 * at a time: another caller meanwhile is told no and runs alone. A child
 * process forked after the threads started has none of them, and is told
 * no too. docs/executor-speed.md. */
#ifndef IPUFS_EXECUTOR_POOL_H
#define IPUFS_EXECUTOR_POOL_H

typedef void ipufs_x_lane_fn(void *arg, int lane);

/* Threads for `lanes` lanes in all (the caller's included), each with a
 * fair-scheduler slice of `slice_ns` (thread_slice.c; 0: the default); 0 on
 * success. A pool that exists keeps its size and slices. */
int ipufs_x_pool_start(int lanes, long slice_ns);
/* The lanes a call of ipufs_x_pool_run may use now: 1 without a pool. */
int ipufs_x_pool_lanes(void);
/* fn(arg, lane) on every lane of `lanes` (at most ipufs_x_pool_lanes()), the
 * caller's included, returning when every one has returned; 0, or -1 when
 * the pool is someone else's now (nothing ran). */
int ipufs_x_pool_run(int lanes, ipufs_x_lane_fn *fn, void *arg);

#endif
