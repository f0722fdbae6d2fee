/* pool.c: the engine's worker threads for large CPU kernels.  Workers sleep on a condition
 * variable between jobs (after a short spin), so they never compete for the cores with
 * OpenBLAS's threads or the caller; small work runs inline and never touches the pool.
 * One job runs at a time: a second thread that finds the pool busy, or a kernel started
 * from inside a job, runs its work inline. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

#define MAX_THREADS 64
#define SPIN 20000

typedef struct {
    pthread_mutex_t lock;        /* held by the caller for the whole job */
    pthread_mutex_t wake_lock;
    pthread_cond_t wake, done;
    atomic_uint_fast64_t generation;
    atomic_int pending;          /* workers still running the current job */
    int nworkers;                /* started so far */
    /* the current job */
    dp_range_fn fn;
    void *ctx;
    int64_t n;
    int parts;
} pool_t;

static pool_t g_pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER, .wake_lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER,
};
static atomic_int g_threads;     /* 0: not decided yet */
static _Thread_local bool g_in_job;

int dp_pool_threads(void)
{
    int n = atomic_load(&g_threads);
    if (n == 0) {
        const char *env = getenv("DPLUA_NUM_THREADS");
        if (!env) env = getenv("OMP_NUM_THREADS");
        n = env ? atoi(env) : (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1) n = 1;
        if (n > MAX_THREADS) n = MAX_THREADS;
        atomic_store(&g_threads, n);
    }
    return n;
}

void dp_pool_set_threads(int n)
{
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    atomic_store(&g_threads, n);
}

static void run_part(pool_t *p, int part)
{
    int64_t lo = p->n * part / p->parts, hi = p->n * (part + 1) / p->parts;
    if (hi > lo) p->fn(p->ctx, lo, hi, part);
}

static void *worker(void *arg)
{
    /* the argument packs the part this worker runs (the caller runs part 0) and the
     * generation current when it was started */
    int id = (int)((uintptr_t)arg & 0xff);
    pool_t *p = &g_pool;
    uint64_t seen = (uint64_t)((uintptr_t)arg >> 8);
    g_in_job = true;               /* kernels started from here run inline */
    for (;;) {
        uint64_t gen;
        int spins = 0;
        while ((gen = atomic_load(&p->generation)) == seen && spins < SPIN) spins++;
        if (gen == seen) {
            pthread_mutex_lock(&p->wake_lock);
            while ((gen = atomic_load(&p->generation)) == seen) pthread_cond_wait(&p->wake, &p->wake_lock);
            pthread_mutex_unlock(&p->wake_lock);
        }
        seen = gen;
        if (id < p->parts) run_part(p, id);
        if (atomic_fetch_sub(&p->pending, 1) == 1) {
            pthread_mutex_lock(&p->wake_lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->wake_lock);
        }
    }
    return NULL;
}

void dp_parallel(int64_t n, int64_t grain, dp_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    int threads = dp_pool_threads();
    int64_t parts = grain > 0 ? n / grain : n;
    if (parts > threads) parts = threads;
    if (parts <= 1 || g_in_job || pthread_mutex_trylock(&g_pool.lock) != 0) {
        fn(ctx, 0, n, 0);
        return;
    }
    pool_t *p = &g_pool;
    while (p->nworkers < threads - 1) {          /* start workers on first need */
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        uintptr_t arg = (uintptr_t)(p->nworkers + 1) | ((uintptr_t)atomic_load(&p->generation) << 8);
        int rc = pthread_create(&t, &attr, worker, (void *)arg);
        pthread_attr_destroy(&attr);
        if (rc) break;
        p->nworkers++;
    }
    if (parts > p->nworkers + 1) parts = p->nworkers + 1;
    if (parts <= 1) { pthread_mutex_unlock(&p->lock); fn(ctx, 0, n, 0); return; }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->parts = (int)parts;
    atomic_store(&p->pending, p->nworkers);
    pthread_mutex_lock(&p->wake_lock);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->wake_lock);
    g_in_job = true;
    run_part(p, 0);
    g_in_job = false;
    int spins = 0;
    while (atomic_load(&p->pending) > 0 && spins < SPIN) spins++;
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->wake_lock);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->wake_lock);
        pthread_mutex_unlock(&p->wake_lock);
    }
    pthread_mutex_unlock(&p->lock);
}
