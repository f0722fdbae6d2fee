/* loader.c: batch assembly for torch.data (see loader.h).
 *
 * A tensor-backed dataset is batched with one call per batch: the rows named by the
 * batch's indices are copied (memcpy of contiguous rows) into a freshly allocated batch
 * tensor.  With workers, batches live in a ring of window = num_workers * prefetch
 * slots: the caller's thread allocates a slot's tensors and marks it pending, a worker
 * claims the pending slots in batch order and fills them, and the caller takes them in
 * batch order.  Batch b always lives in slot b % window, so the order of batches never
 * depends on which worker was fastest.
 */
#include "loader.h"
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Batches at least this large are copied by several threads on the caller's thread. */
#define PARALLEL_COPY_BYTES (1 << 20)

enum { SLOT_EMPTY = 0, SLOT_PENDING, SLOT_BUSY, SLOT_READY, SLOT_FAILED };

typedef struct {
    int64_t batch;
    int state;
    dp_tensor **out;        /* one per source tensor */
    char err[512];
} slot;

struct dp_loader {
    int n;
    dp_tensor **src;        /* contiguous */
    int64_t *row_bytes;
    int64_t rows;           /* size of every source along dim 0 */
    bool on_cpu;

    int nworkers, window;
    pthread_t *threads;
    int nthreads;
    pthread_mutex_t mu;
    pthread_cond_t work;    /* a slot became pending, or shutdown */
    pthread_cond_t done;    /* a slot became ready or failed, or a worker went idle */
    bool shutdown;

    /* the epoch */
    int64_t *idx, nidx, bs, nbatches;
    int64_t next_claim, next_take;
    int busy;
    slot *slots;
};

static int64_t batch_rows(const dp_loader *ld, int64_t b)
{
    int64_t left = ld->nidx - b * ld->bs;
    return left < ld->bs ? left : ld->bs;
}

static void release_out(const dp_loader *ld, dp_tensor **out)
{
    for (int k = 0; k < ld->n; k++) {
        dp_tensor_release(out[k]);
        out[k] = NULL;
    }
}

static int alloc_batch(const dp_loader *ld, int64_t b, dp_tensor **out)
{
    for (int k = 0; k < ld->n; k++) {
        dp_tensor *s = ld->src[k];
        int64_t sizes[DP_MAX_DIMS];
        memcpy(sizes, s->sizes, sizeof sizes);
        sizes[0] = batch_rows(ld, b);
        out[k] = dp_empty(s->ndim, sizes, s->dtype, s->device);
        if (!out[k]) { release_out(ld, out); return -1; }
    }
    return 0;
}

/* Checks batch b's indices; on a bad one writes the message into err. */
static int check_indices(const dp_loader *ld, int64_t b, char *err, size_t errn)
{
    const int64_t *idx = ld->idx + b * ld->bs;
    int64_t n = batch_rows(ld, b);
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= ld->rows) {
            snprintf(err, errn, "index %ld is out of range for a dataset of %ld items (batch %ld, item %ld of the batch)",
                     (long)idx[i] + 1, (long)ld->rows, (long)b + 1, (long)i + 1);
            return -1;
        }
    return 0;
}

/* Asks for a whole row ahead of its copy: rows are scattered, so the hardware prefetcher
 * (which follows one stream) would otherwise wait on memory at the start of each row. */
static inline void prefetch_row(const char *p, int64_t rb)
{
    for (int64_t off = 0; off < rb; off += 64) __builtin_prefetch(p + off, 0, 0);
}

#define PREFETCH_AHEAD 2

typedef struct { char *dst; const char *src; const int64_t *idx; int64_t rb; } copy_job;

static void copy_range(void *c, int64_t lo, int64_t hi, int part)
{
    const copy_job *j = c;
    for (int64_t i = lo; i < hi && i < lo + PREFETCH_AHEAD; i++) prefetch_row(j->src + j->idx[i] * j->rb, j->rb);
    for (int64_t i = lo; i < hi; i++) {
        if (i + PREFETCH_AHEAD < hi) prefetch_row(j->src + j->idx[i + PREFETCH_AHEAD] * j->rb, j->rb);
        memcpy(j->dst + i * j->rb, j->src + j->idx[i] * j->rb, (size_t)j->rb);
    }
}

static void copy_rows(char *dst, const char *src, const int64_t *idx, int64_t n, int64_t rb, bool parallel)
{
    copy_job j = { dst, src, idx, rb };
    if (parallel && n * rb >= PARALLEL_COPY_BYTES) dp_parallel(n, (PARALLEL_COPY_BYTES / 2 + rb - 1) / rb, copy_range, &j);
    else copy_range(&j, 0, n, 0);
}

/* Fills batch b into out (already allocated, CPU sources); runs on any thread. */
static int fill_batch(const dp_loader *ld, int64_t b, dp_tensor **out, char *err, size_t errn, bool parallel)
{
    if (check_indices(ld, b, err, errn) != 0) return -1;
    const int64_t *idx = ld->idx + b * ld->bs;
    int64_t n = batch_rows(ld, b);
    for (int k = 0; k < ld->n; k++)
        copy_rows(dp_data(out[k]), dp_data(ld->src[k]), idx, n, ld->row_bytes[k], parallel);
    return 0;
}

static void *worker_main(void *arg)
{
    dp_loader *ld = arg;
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        while (!ld->shutdown &&
               !(ld->next_claim < ld->nbatches &&
                 ld->slots[ld->next_claim % ld->window].state == SLOT_PENDING &&
                 ld->slots[ld->next_claim % ld->window].batch == ld->next_claim))
            pthread_cond_wait(&ld->work, &ld->mu);
        if (ld->shutdown) break;
        int64_t b = ld->next_claim++;
        slot *s = &ld->slots[b % ld->window];
        s->state = SLOT_BUSY;
        ld->busy++;
        pthread_mutex_unlock(&ld->mu);

        char err[512] = "";
        int rc = fill_batch(ld, b, s->out, err, sizeof err, false);

        pthread_mutex_lock(&ld->mu);
        ld->busy--;
        if (rc != 0) {
            memcpy(s->err, err, sizeof s->err);
            s->state = SLOT_FAILED;
        } else {
            s->state = SLOT_READY;
        }
        pthread_cond_broadcast(&ld->done);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

/* Ends the epoch in progress: no more claims, waits for busy workers, drops every batch. */
static void abandon_epoch(dp_loader *ld)
{
    /* the workers read the epoch's counters under the lock: they are reset under it too */
    if (ld->nworkers > 0) {
        pthread_mutex_lock(&ld->mu);
        ld->nbatches = 0;
        while (ld->busy > 0) pthread_cond_wait(&ld->done, &ld->mu);
        for (int w = 0; w < ld->window; w++) {
            release_out(ld, ld->slots[w].out);
            ld->slots[w].state = SLOT_EMPTY;
            ld->slots[w].batch = -1;
        }
    }
    free(ld->idx);
    ld->idx = NULL;
    ld->nidx = ld->nbatches = ld->next_claim = ld->next_take = 0;
    if (ld->nworkers > 0) pthread_mutex_unlock(&ld->mu);
}

void dp_loader_free(dp_loader *ld)
{
    if (!ld) return;
    if (ld->nworkers > 0) {
        abandon_epoch(ld);
        pthread_mutex_lock(&ld->mu);
        ld->shutdown = true;
        pthread_cond_broadcast(&ld->work);
        pthread_mutex_unlock(&ld->mu);
        for (int w = 0; w < ld->nthreads; w++) pthread_join(ld->threads[w], NULL);
        pthread_mutex_destroy(&ld->mu);
        pthread_cond_destroy(&ld->work);
        pthread_cond_destroy(&ld->done);
    }
    free(ld->idx);
    if (ld->slots) {
        for (int w = 0; w < ld->window; w++) free(ld->slots[w].out);
        free(ld->slots);
    }
    for (int k = 0; k < ld->n; k++) dp_tensor_release(ld->src[k]);
    free(ld->src);
    free(ld->row_bytes);
    free(ld->threads);
    free(ld);
}

dp_loader *dp_loader_new(int n, dp_tensor *const *tensors, int num_workers, int prefetch)
{
    if (n < 1) { dp_error("a tensor loader needs at least one tensor"); return NULL; }
    if (num_workers < 0) { dp_error("num_workers must be >= 0 (got %d)", num_workers); return NULL; }
    if (prefetch < 1) { dp_error("prefetch must be >= 1 (got %d)", prefetch); return NULL; }
    if ((int64_t)num_workers * prefetch > 4096) {
        dp_error("num_workers * prefetch must be at most 4096 (got %d * %d)", num_workers, prefetch);
        return NULL;
    }
    dp_loader *ld = calloc(1, sizeof *ld);
    if (!ld) { dp_error("out of memory"); return NULL; }
    ld->src = calloc((size_t)n, sizeof *ld->src);
    ld->row_bytes = calloc((size_t)n, sizeof *ld->row_bytes);
    if (!ld->src || !ld->row_bytes) { free(ld->src); free(ld->row_bytes); free(ld); dp_error("out of memory"); return NULL; }
    ld->n = n;
    ld->on_cpu = true;
    for (int k = 0; k < n; k++) {
        dp_tensor *t = tensors[k];
        if (t->ndim < 1) {
            dp_error("tensor %d of the dataset is 0-dimensional; its first dimension indexes the items", k + 1);
            dp_loader_free(ld);
            return NULL;
        }
        if (k > 0 && t->sizes[0] != tensors[0]->sizes[0]) {
            dp_error("the dataset's tensors differ in their first dimension: tensor 1 has %ld items, tensor %d has %ld",
                     (long)tensors[0]->sizes[0], k + 1, (long)t->sizes[0]);
            dp_loader_free(ld);
            return NULL;
        }
        if (t->device.type != DP_DEVICE_CPU) ld->on_cpu = false;
        /* the loader reads raw rows, so it keeps a detached contiguous alias */
        dp_tensor *d = dp_detach(t);
        if (!d) { dp_loader_free(ld); return NULL; }
        ld->src[k] = dp_contiguous(d);
        dp_tensor_release(d);
        if (!ld->src[k]) { dp_loader_free(ld); return NULL; }
        int64_t rb = (int64_t)dp_dtype_size(t->dtype);
        for (int d2 = 1; d2 < t->ndim; d2++) rb *= t->sizes[d2];
        ld->row_bytes[k] = rb;
    }
    ld->rows = tensors[0]->sizes[0];
    ld->nworkers = ld->on_cpu ? num_workers : 0;
    if (ld->nworkers == 0) return ld;

    ld->window = ld->nworkers * prefetch;
    ld->slots = calloc((size_t)ld->window, sizeof *ld->slots);
    ld->threads = calloc((size_t)ld->nworkers, sizeof *ld->threads);
    if (!ld->slots || !ld->threads) { ld->nworkers = 0; dp_loader_free(ld); dp_error("out of memory"); return NULL; }
    for (int w = 0; w < ld->window; w++) {
        ld->slots[w].batch = -1;
        ld->slots[w].out = calloc((size_t)n, sizeof(dp_tensor *));
        if (!ld->slots[w].out) { ld->nworkers = 0; dp_loader_free(ld); dp_error("out of memory"); return NULL; }
    }
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->work, NULL);
    pthread_cond_init(&ld->done, NULL);
    for (int w = 0; w < ld->nworkers; w++) {
        int rc = pthread_create(&ld->threads[w], NULL, worker_main, ld);
        if (rc != 0) {
            dp_loader_free(ld);
            dp_error("cannot start loader worker thread %d of %d: %s", w + 1, num_workers, strerror(rc));
            return NULL;
        }
        ld->nthreads++;
    }
    return ld;
}

/* Allocates slot b % window for batch b and hands it to the workers; on failure the slot
 * carries the error to the caller when it reaches batch b. */
static void offer_slot(dp_loader *ld, int64_t b)
{
    slot *s = &ld->slots[b % ld->window];
    int rc = alloc_batch(ld, b, s->out);
    pthread_mutex_lock(&ld->mu);
    s->batch = b;
    if (rc != 0) {
        snprintf(s->err, sizeof s->err, "cannot allocate batch %ld: %s", (long)b + 1, dp_last_error());
        s->state = SLOT_FAILED;
    } else {
        s->state = SLOT_PENDING;
        pthread_cond_broadcast(&ld->work);
    }
    pthread_mutex_unlock(&ld->mu);
}

int dp_loader_start(dp_loader *ld, const int64_t *indices, int64_t nidx, int64_t batch_size, bool drop_last)
{
    if (batch_size < 1) return dp_error("batch_size must be a positive integer (got %ld)", (long)batch_size);
    if (nidx < 0) return dp_error("negative number of indices (%ld)", (long)nidx);
    if (dp_check_count(nidx, sizeof(int64_t), "DataLoader indices")) return -1;
    abandon_epoch(ld);
    int64_t *copy = malloc((size_t)(nidx > 0 ? nidx : 1) * sizeof *copy);
    if (!copy) return dp_error("out of memory copying %ld indices", (long)nidx);
    if (nidx > 0) memcpy(copy, indices, (size_t)nidx * sizeof *copy);
    /* ceil without nidx + batch_size - 1, which overflows for a batch_size near 2^63 */
    int64_t nb = nidx / batch_size + (!drop_last && nidx % batch_size != 0);
    if (ld->nworkers > 0) pthread_mutex_lock(&ld->mu);
    ld->idx = copy;
    ld->nidx = nidx;
    ld->bs = batch_size;
    ld->nbatches = nb;
    ld->next_claim = ld->next_take = 0;
    if (ld->nworkers > 0) pthread_mutex_unlock(&ld->mu);
    if (ld->nworkers > 0)
        for (int64_t b = 0; b < nb && b < ld->window; b++) offer_slot(ld, b);
    return 0;
}

int64_t dp_loader_num_batches(const dp_loader *ld) { return ld->nbatches; }
int dp_loader_num_workers(const dp_loader *ld) { return ld->nworkers; }
int dp_loader_num_tensors(const dp_loader *ld) { return ld->n; }

/* The caller's-thread path: CPU sources are gathered by memcpy, others by index_select. */
static int next_sync(dp_loader *ld, int64_t b, dp_tensor **out)
{
    char err[512];
    if (check_indices(ld, b, err, sizeof err) != 0) return dp_error("%s", err);
    if (ld->on_cpu) {
        if (alloc_batch(ld, b, out) != 0) return -1;
        fill_batch(ld, b, out, err, sizeof err, true);
        return 1;
    }
    int64_t n = batch_rows(ld, b);
    for (int k = 0; k < ld->n; k++) {
        dp_tensor *src = ld->src[k];
        dp_tensor *idx = dp_from_host(ld->idx + b * ld->bs, DP_INT64, 1, &n, DP_INT64, src->device);
        out[k] = idx ? dp_index_select(src, 0, idx) : NULL;
        dp_tensor_release(idx);
        if (!out[k]) { release_out(ld, out); return -1; }
    }
    return 1;
}

int dp_loader_next(dp_loader *ld, dp_tensor **out)
{
    for (int k = 0; k < ld->n; k++) out[k] = NULL;
    if (ld->next_take >= ld->nbatches) return 0;
    int64_t b = ld->next_take;
    if (ld->nworkers == 0) {
        ld->next_take++;
        return next_sync(ld, b, out);
    }
    slot *s = &ld->slots[b % ld->window];
    pthread_mutex_lock(&ld->mu);
    while (!(s->batch == b && (s->state == SLOT_READY || s->state == SLOT_FAILED)))
        pthread_cond_wait(&ld->done, &ld->mu);
    bool failed = s->state == SLOT_FAILED;
    char err[512];
    if (failed) memcpy(err, s->err, sizeof err);
    for (int k = 0; k < ld->n; k++) { out[k] = s->out[k]; s->out[k] = NULL; }
    s->state = SLOT_EMPTY;
    ld->next_take++;
    pthread_mutex_unlock(&ld->mu);
    if (b + ld->window < ld->nbatches) offer_slot(ld, b + ld->window);
    if (failed) {
        release_out(ld, out);
        return dp_error("%s", err);
    }
    return 1;
}

dp_tensor *dp_stack_items(int64_t n, dp_tensor *const *items, const int64_t *ids)
{
    if (n < 1) { dp_error("cannot stack an empty list of tensors"); return NULL; }
    if (n > INT32_MAX) { dp_error("cannot stack %ld tensors", (long)n); return NULL; }
    const dp_tensor *a = items[0];
    bool fast = a->device.type == DP_DEVICE_CPU;
    bool grad = dp_grad_enabled();
    char s1[128], s2[128], d1[32], d2[32];
    for (int64_t i = 0; i < n; i++) {
        const dp_tensor *t = items[i];
        long id = ids ? (long)ids[i] : (long)i + 1, id0 = ids ? (long)ids[0] : 1;
        if (!dp_same_shape(t, a)) {
            dp_error("cannot stack the items of a batch: item %ld has shape %s but item %ld has shape %s",
                     id0, dp_shape_str(a->ndim, a->sizes, s1, sizeof s1), id,
                     dp_shape_str(t->ndim, t->sizes, s2, sizeof s2));
            return NULL;
        }
        if (t->dtype != a->dtype) {
            dp_error("cannot stack the items of a batch: item %ld has dtype %s but item %ld has dtype %s",
                     id0, dp_dtype_name(a->dtype), id, dp_dtype_name(t->dtype));
            return NULL;
        }
        if (!dp_device_eq(t->device, a->device)) {
            dp_error("cannot stack the items of a batch: item %ld is on %s but item %ld is on %s",
                     id0, dp_device_str(a->device, d1), id, dp_device_str(t->device, d2));
            return NULL;
        }
        if (grad && (t->requires_grad || t->grad_fn)) fast = false;
    }
    if (!fast) return dp_stack((int)n, items, 0);
    int64_t sizes[DP_MAX_DIMS + 1];
    if (a->ndim + 1 > DP_MAX_DIMS) {
        dp_error("cannot stack %d-dimensional items: tensors have at most %d dimensions", a->ndim, DP_MAX_DIMS);
        return NULL;
    }
    sizes[0] = n;
    memcpy(sizes + 1, a->sizes, (size_t)a->ndim * sizeof(int64_t));
    dp_tensor *out = dp_empty(a->ndim + 1, sizes, a->dtype, a->device);
    if (!out) return NULL;
    size_t rb = (size_t)dp_numel(a) * dp_dtype_size(a->dtype);
    char *dst = dp_data(out);
    for (int64_t i = 0; i < n && i < PREFETCH_AHEAD; i++)
        if (dp_is_contiguous(items[i])) prefetch_row(dp_data(items[i]), (int64_t)rb);
    for (int64_t i = 0; i < n; i++) {
        dp_tensor *t = items[i];
        if (i + PREFETCH_AHEAD < n && dp_is_contiguous(items[i + PREFETCH_AHEAD]))
            prefetch_row(dp_data(items[i + PREFETCH_AHEAD]), (int64_t)rb);
        if (dp_is_contiguous(t)) {
            if (rb) memcpy(dst + (size_t)i * rb, dp_data(t), rb);
        } else {
            dp_tensor *c = dp_contiguous(t);
            if (!c) { dp_tensor_release(out); return NULL; }
            if (rb) memcpy(dst + (size_t)i * rb, dp_data(c), rb);
            dp_tensor_release(c);
        }
    }
    return out;
}
