/* The executor's worker threads: see executor_pool.h. A round: the caller
 * publishes the function, bumps the round number and wakes the threads;
 * each runs it on its lane and counts itself done; the caller runs lane 0
 * meanwhile, then waits for the count. The threads sleep on a condition
 * variable between rounds: a round is a pass over an IPU's tiles, long
 * enough (docs/executor-speed.md) that a wake-up's cost does not show. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "executor_pool.h"
#include "thread_slice.h"

struct pool {
    pthread_mutex_t mutex;
    pthread_cond_t wake, done;
    pthread_mutex_t owner;  /* held by the caller of a round */
    int lanes;              /* the caller's and the threads' */
    long slice_ns;          /* the threads' slice (0: the default) */
    pid_t pid;              /* the process the threads run in */
    uint64_t round;
    int lanes_now;          /* lanes of the round under way */
    int pending;            /* threads of the round not yet done */
    ipufs_x_lane_fn *fn;
    void *arg;
};

static struct pool pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
                            PTHREAD_MUTEX_INITIALIZER, 1, 0, 0, 0, 0, 0, NULL, NULL };
static pthread_mutex_t starting = PTHREAD_MUTEX_INITIALIZER;

static void *thread_main(void *data)
{
    int lane = (int)(intptr_t)data;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.mutex);
    if (pool.slice_ns > 0)
        ipufs_thread_slice(pool.slice_ns);  /* a kernel without per-thread slices keeps its default */
    for (;;) {
        while (pool.round == seen)
            pthread_cond_wait(&pool.wake, &pool.mutex);
        seen = pool.round;
        if (lane >= pool.lanes_now)
            continue;  /* not in this round */
        ipufs_x_lane_fn *fn = pool.fn;
        void *arg = pool.arg;
        pthread_mutex_unlock(&pool.mutex);
        fn(arg, lane);
        pthread_mutex_lock(&pool.mutex);
        if (--pool.pending == 0)
            pthread_cond_signal(&pool.done);
    }
    return NULL;
}

int ipufs_x_pool_start(int lanes, long slice_ns)
{
    int rc = 0;
    pthread_mutex_lock(&starting);
    if (pool.pid == 0 && lanes > 1) {
        pthread_mutex_lock(&pool.mutex);
        pool.slice_ns = slice_ns;  /* read by each thread as it starts */
        pthread_mutex_unlock(&pool.mutex);
        sigset_t all, before;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &before);  /* the threads take no signal: the process's threads do */
        int started = 1;
        for (; started < lanes; started++) {
            pthread_t id;
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setstacksize(&attr, 256 << 10);
            int failed = pthread_create(&id, &attr, thread_main, (void *)(intptr_t)started);
            pthread_attr_destroy(&attr);
            if (failed)
                break;
            pthread_detach(id);
        }
        pthread_sigmask(SIG_SETMASK, &before, NULL);
        pthread_mutex_lock(&pool.mutex);
        pool.lanes = started;
        pool.pid = getpid();
        pthread_mutex_unlock(&pool.mutex);
        rc = started == lanes ? 0 : -1;
    }
    pthread_mutex_unlock(&starting);
    return rc;
}

int ipufs_x_pool_lanes(void)
{
    return pool.pid == getpid() ? pool.lanes : 1;
}

int ipufs_x_pool_run(int lanes, ipufs_x_lane_fn *fn, void *arg)
{
    if (lanes < 1 || lanes > ipufs_x_pool_lanes() || pthread_mutex_trylock(&pool.owner))
        return -1;
    pthread_mutex_lock(&pool.mutex);
    pool.fn = fn;
    pool.arg = arg;
    pool.lanes_now = lanes;
    pool.pending = lanes - 1;
    pool.round++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mutex);
    fn(arg, 0);
    pthread_mutex_lock(&pool.mutex);
    while (pool.pending)
        pthread_cond_wait(&pool.done, &pool.mutex);
    pthread_mutex_unlock(&pool.mutex);
    pthread_mutex_unlock(&pool.owner);
    return 0;
}
