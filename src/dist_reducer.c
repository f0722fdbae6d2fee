/* dist_reducer.c: DistributedDataParallel's gradient reducer (see dist.h).  Parameters go
 * into buckets in reverse order, the engine's grad-ready hook copies each gradient into its
 * bucket during backward, a full bucket's average is started through the group's
 * collective interface while the rest of backward runs, and the last gradient waits for
 * them all and writes the averages back into .grad before backward returns.
 *
 * CUDA models.  The thread running backward never waits for the device.  With nccl, a
 * bucket's all-reduce is queued on NCCL's stream behind an event of the compute stream
 * (dist_nccl.c), and the write-back waits on the compute stream for NCCL's.  With mpi, a
 * communication thread owns each bucket's host side: on the device's side stream it waits
 * for the bucket's event, copies the bucket into pinned host memory, waits for that copy,
 * all-reduces it over MPI and queues the copy back; the last gradient's hook waits for the
 * thread to be done with every bucket (a wait for MPI, not for the device) and makes the
 * compute stream wait for the side stream.  The bucket buffers are marked as used by the
 * other stream (record_stream), so that freeing them after a failure cannot hand them to
 * new tensors while that stream still works on them. */
#include "dist_comm.h"
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dp_reducer_slot {
    dp_reducer *r;
    dp_tensor *param;
    char *name;
    int bucket;
    int64_t offset;            /* elements into the bucket's buffer */
    int64_t numel;
    bool ready;                /* its gradient is in the bucket for this pass */
} dp_reducer_slot;

typedef struct {
    dp_tensor *buffer;         /* flat and contiguous: the gradients of its parameters */
    int64_t numel;
    dp_dtype dtype;
    int *params;               /* slot indices */
    int n_params;
    int pending;               /* parameters not ready in this pass */
    bool launched;
    void *host;                /* mpi on CUDA: the pinned host copy the collective runs on */
    void *ready;               /* mpi on CUDA: event of the compute stream, its gradients are in */
    void *work;                /* the backend's started average, until it is waited for */
} dp_bucket;

struct dp_reducer {
    int n;
    dp_reducer_slot *slots;
    int n_buckets;
    dp_bucket *buckets;
    dp_device device;
    int backend;
    const dp_dist_comm *comm;  /* the group's collectives */
    int64_t divide_by;         /* what the backend's averages still need dividing by */
    uint64_t generation;       /* of the group it reduces over */
    int next_launch;           /* buckets start in order: the first one not started */
    int n_ready;
    bool armed;                /* this pass averages (false under no_sync) */
    bool failed;
    char err[512];
    dp_reducer_stats stats;
    pthread_mutex_t lock;
    struct {                   /* mpi on CUDA: the communication thread */
        bool started, stop;
        pthread_t thread;
        pthread_mutex_t mu;
        pthread_cond_t cv;     /* a bucket was queued or done, or stop */
        int queued, done;      /* buckets of this pass handed to it, and finished by it */
        bool failed;
        char err[512];
        void *stream;          /* the device's side stream */
    } worker;
};

static bool staged(const dp_reducer *r) { return r->buckets && r->n_buckets > 0 && r->buckets[0].host; }

static void reducer_fail(dp_reducer *r, const char *msg) {
    if (r->failed) return;
    r->failed = true;
    snprintf(r->err, sizeof r->err, "nn.DistributedDataParallel: %s", msg);
}

static void reducer_reset(dp_reducer *r) {
    for (int i = 0; i < r->n; i++) r->slots[i].ready = false;
    for (int b = 0; b < r->n_buckets; b++) {
        r->buckets[b].pending = r->buckets[b].n_params;
        r->buckets[b].launched = false;
        r->buckets[b].work = NULL;
    }
    r->next_launch = 0;
    r->n_ready = 0;
}

static void worker_stop(dp_reducer *r);

void dp_reducer_free(dp_reducer *r) {
    if (!r) return;
    worker_stop(r);
    for (int i = 0; i < r->n; i++) {
        dp_reducer_slot *s = &r->slots[i];
        if (s->param) {
            if (s->param->grad_ready_ctx == s) dp_set_grad_ready_hook(s->param, NULL, NULL);
            dp_tensor_release(s->param);
        }
        free(s->name);
    }
    for (int b = 0; b < r->n_buckets; b++) {
        dp_tensor_release(r->buckets[b].buffer);
        dp_pinned_free(r->buckets[b].host);
        free(r->buckets[b].params);
    }
    free(r->slots);
    free(r->buckets);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->worker.mu);
    pthread_cond_destroy(&r->worker.cv);
    free(r);
}

static void reducer_hook(void *ctx, dp_tensor *leaf);

/* ------------------------------------------------------------------ the communication thread */

static const dp_device host_device = { DP_DEVICE_CPU, 0 };

static void bucket_where(const dp_reducer *r, int b, char *buf, size_t n) {
    snprintf(buf, n, "the gradient all-reduce of bucket %d of %d in backward pass %lld "
             "(nn.DistributedDataParallel)", b + 1, r->n_buckets, (long long)r->stats.passes + 1);
}

/* One bucket's host side, on the communication thread: device -> pinned memory on the side
 * stream once the compute stream has the gradients in, the MPI average, and the copy back
 * queued on the side stream. */
static int worker_bucket(dp_reducer *r, int i) {
    dp_bucket *b = &r->buckets[i];
    const dp_backend *be = dp_backend_for(r->device);
    int dev = r->device.index;
    size_t bytes = (size_t)b->numel * dp_dtype_size(b->dtype);
    void *copied = NULL, *work = NULL;
    int rc = be->stream_wait_event(dev, r->worker.stream, b->ready);
    be->event_release(dev, b->ready);
    b->ready = NULL;
    if (rc == 0) rc = be->copy_async(dev, r->worker.stream, b->host, dp_data(b->buffer), bytes, false);
    if (rc == 0) rc = be->event_record(dev, r->worker.stream, &copied);
    if (rc == 0) rc = be->event_synchronize(dev, copied);
    if (copied) be->event_release(dev, copied);
    if (rc != 0) return -1;
    char where[160];
    bucket_where(r, i, where, sizeof where);
    pthread_mutex_lock(&dp_group.lock);
    rc = r->comm->average_start(b->host, b->numel, b->dtype, host_device, &work, &r->divide_by);
    if (rc == 0) rc = r->comm->wait(work, host_device, where);
    pthread_mutex_unlock(&dp_group.lock);
    if (rc == 0) rc = be->copy_async(dev, r->worker.stream, dp_data(b->buffer), b->host, bytes, true);
    return rc;
}

static void *worker_main(void *arg) {
    dp_reducer *r = arg;
    pthread_mutex_lock(&r->worker.mu);
    for (;;) {
        while (!r->worker.stop && r->worker.done == r->worker.queued) pthread_cond_wait(&r->worker.cv, &r->worker.mu);
        if (r->worker.done == r->worker.queued) break;   /* stop, and nothing left */
        int i = r->worker.done;
        bool skip = r->worker.failed;   /* after a failure the pass is lost: only free the events */
        pthread_mutex_unlock(&r->worker.mu);
        int rc = 0;
        if (skip) {
            dp_backend_for(r->device)->event_release(r->device.index, r->buckets[i].ready);
            r->buckets[i].ready = NULL;
        } else {
            rc = worker_bucket(r, i);
        }
        pthread_mutex_lock(&r->worker.mu);
        if (rc != 0 && !r->worker.failed) {
            r->worker.failed = true;
            snprintf(r->worker.err, sizeof r->worker.err, "%s", dp_last_error());
        }
        r->worker.done++;
        pthread_cond_broadcast(&r->worker.cv);
    }
    pthread_mutex_unlock(&r->worker.mu);
    return NULL;
}

static int worker_start(dp_reducer *r) {
    const dp_backend *be = dp_backend_for(r->device);
    if (!be || !be->side_stream || !be->event_record || !be->copy_async)
        return dp_error("nn.DistributedDataParallel: the backend of %s cannot stage buckets for mpi",
                        be ? be->name : "this device");
    r->worker.stream = be->side_stream(r->device.index);
    if (!r->worker.stream) return -1;
    for (int b = 0; b < r->n_buckets; b++)
        if (be->record_stream(r->device.index, dp_data(r->buckets[b].buffer), r->worker.stream) != 0) return -1;
    if (pthread_create(&r->worker.thread, NULL, worker_main, r) != 0)
        return dp_error("nn.DistributedDataParallel: cannot start the communication thread");
    r->worker.started = true;
    return 0;
}

/* Lets the thread finish what it was given, then joins it; the compute stream then waits
 * for the side stream, so the staging buffers are freed behind the last copy. */
static void worker_stop(dp_reducer *r) {
    if (!r->worker.started) return;
    pthread_mutex_lock(&r->worker.mu);
    r->worker.stop = true;
    pthread_cond_broadcast(&r->worker.cv);
    pthread_mutex_unlock(&r->worker.mu);
    pthread_join(r->worker.thread, NULL);
    r->worker.started = false;
    const dp_backend *be = dp_backend_for(r->device);
    void *e = NULL;
    if (be->event_record(r->device.index, r->worker.stream, &e) == 0) {
        if (be->stream_wait_event(r->device.index, NULL, e) != 0) be->synchronize(r->device);
        be->event_release(r->device.index, e);
    } else {
        be->synchronize(r->device);
    }
}

/* The hook of the last gradient: waits until the thread has done every bucket, then the
 * compute stream waits for the side stream's copies back. */
static int worker_finish(dp_reducer *r) {
    pthread_mutex_lock(&r->worker.mu);
    while (r->worker.done < r->worker.queued) pthread_cond_wait(&r->worker.cv, &r->worker.mu);
    bool failed = r->worker.failed;
    r->worker.queued = r->worker.done = 0;
    r->worker.failed = false;
    pthread_mutex_unlock(&r->worker.mu);
    if (failed) return dp_error("%s", r->worker.err);
    const dp_backend *be = dp_backend_for(r->device);
    void *e = NULL;
    int rc = be->event_record(r->device.index, r->worker.stream, &e);
    if (rc == 0) rc = be->stream_wait_event(r->device.index, NULL, e);
    if (e) be->event_release(r->device.index, e);
    return rc;
}

#define REQUIRE(cond, ...) do { if (!(cond)) { dp_error(__VA_ARGS__); goto fail; } } while (0)

dp_reducer *dp_reducer_new(int n, dp_tensor *const *params, const char *const *names,
                           size_t bucket_cap_bytes) {
    if (!dp_group.initialized) { dp_dist_not_initialized("DistributedDataParallel"); return NULL; }
    if (n < 0 || bucket_cap_bytes == 0) {
        dp_error("nn.DistributedDataParallel: bad reducer arguments (%d parameters, bucket cap %zu bytes)",
                 n, bucket_cap_bytes);
        return NULL;
    }
    dp_reducer *r = calloc(1, sizeof *r);
    if (!r) { dp_error("nn.DistributedDataParallel: out of memory"); return NULL; }
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->worker.mu, NULL);
    pthread_cond_init(&r->worker.cv, NULL);
    r->n = n;
    r->backend = dp_group.backend;
    r->comm = dp_group.comm;
    r->divide_by = 1;
    r->generation = dp_group.generation;
    r->armed = true;
    r->slots = calloc((size_t)(n ? n : 1), sizeof *r->slots);
    r->buckets = calloc((size_t)(n ? n : 1), sizeof *r->buckets);
    if (!r->slots || !r->buckets) { dp_error("nn.DistributedDataParallel: out of memory"); goto fail; }
    char d1[32], d2[32];
    for (int i = 0; i < n; i++) {
        dp_tensor *p = params[i];
        const char *name = names && names[i] ? names[i] : NULL;
        char fallback[32];
        if (!name) { snprintf(fallback, sizeof fallback, "parameter %d", i + 1); name = fallback; }
        r->slots[i].r = r;
        r->slots[i].name = strdup(name);
        if (!r->slots[i].name) { dp_error("nn.DistributedDataParallel: out of memory"); goto fail; }
        REQUIRE(p != NULL, "nn.DistributedDataParallel: %s is not a tensor", name);
        REQUIRE(p->grad_fn == NULL && p->requires_grad,
                 "nn.DistributedDataParallel: %s must be a leaf tensor that requires grad", name);
        REQUIRE(dp_dtype_is_float(p->dtype) && !dp_dtype_is_half(p->dtype),
                 "nn.DistributedDataParallel: %s has dtype %s; parameters must be float32 or float64",
                 name, dp_dtype_name(p->dtype));
        if (i == 0) r->device = p->device;
        REQUIRE(dp_device_eq(p->device, r->device),
                 "nn.DistributedDataParallel: parameters must all be on one device, found %s (%s) and %s (%s)",
                 dp_device_str(r->device, d1), r->slots[0].name, dp_device_str(p->device, d2), name);
        REQUIRE(dp_group.backend != DP_DIST_NCCL || p->device.type == DP_DEVICE_CUDA,
                 "nn.DistributedDataParallel: the nccl backend takes CUDA tensors, but %s is on %s "
                 "(move the model to its GPU first, or use backend='mpi')", name, dp_device_str(p->device, d1));
        dp_tensor_retain(p);
        r->slots[i].param = p;
        r->slots[i].numel = dp_numel(p);
    }
    /* Buckets in reverse parameter order, the order in which backward produces gradients.
     * The first one is kept small (1 MiB at most, as PyTorch does) so that communication
     * starts early in backward even for models smaller than one full bucket. */
    const size_t first_cap = bucket_cap_bytes < ((size_t)1 << 20) ? bucket_cap_bytes : ((size_t)1 << 20);
    dp_bucket *cur = NULL;
    size_t cur_bytes = 0;
    for (int i = n - 1; i >= 0; i--) {
        dp_reducer_slot *s = &r->slots[i];
        size_t bytes = (size_t)s->numel * dp_dtype_size(s->param->dtype);
        size_t cap = r->n_buckets <= 1 ? first_cap : bucket_cap_bytes;
        if (!cur || cur->dtype != s->param->dtype || (cur->n_params > 0 && cur_bytes + bytes > cap) ||
            cur->numel + s->numel > INT_MAX) {
            cur = &r->buckets[r->n_buckets++];
            cur->dtype = s->param->dtype;
            cur->params = calloc((size_t)(i + 1), sizeof(int));
            if (!cur->params) { dp_error("nn.DistributedDataParallel: out of memory"); goto fail; }
            cur_bytes = 0;
        }
        s->bucket = (int)(cur - r->buckets);
        s->offset = cur->numel;
        cur->numel += s->numel;
        cur->params[cur->n_params++] = i;
        cur_bytes += bytes;
    }
    for (int b = 0; b < r->n_buckets; b++) {
        int64_t sz = r->buckets[b].numel;
        r->buckets[b].buffer = dp_zeros(1, &sz, r->buckets[b].dtype, r->device);
        if (!r->buckets[b].buffer) goto fail;
        /* mpi moves host bytes: one pinned staging buffer per bucket, reused every pass */
        if (r->backend == DP_DIST_MPI && r->device.type != DP_DEVICE_CPU &&
            !(r->buckets[b].host = dp_pinned_alloc((size_t)sz * dp_dtype_size(r->buckets[b].dtype))))
            goto fail;
    }
    if (staged(r) && worker_start(r) != 0) goto fail;
    reducer_reset(r);
    for (int i = 0; i < n; i++) dp_set_grad_ready_hook(r->slots[i].param, reducer_hook, &r->slots[i]);
    return r;
fail:
    dp_reducer_free(r);
    return NULL;
}

/* Starts bucket b's average (caller holds r->lock). */
static int bucket_launch(dp_reducer *r, dp_bucket *b) {
    int rc;
    if (staged(r)) {
        /* an event behind the gradients' copies in, and the bucket goes to the thread */
        rc = dp_backend_for(r->device)->event_record(r->device.index, NULL, &b->ready);
        if (rc == 0) {
            pthread_mutex_lock(&r->worker.mu);
            r->worker.queued++;
            pthread_cond_broadcast(&r->worker.cv);
            pthread_mutex_unlock(&r->worker.mu);
        }
    } else {
        pthread_mutex_lock(&dp_group.lock);
        rc = r->comm->average_start(dp_data(b->buffer), b->numel, b->dtype, r->device, &b->work, &r->divide_by);
        pthread_mutex_unlock(&dp_group.lock);
    }
    if (rc == 0) {
        b->launched = true;
        r->stats.allreduces++;
        r->stats.bytes += b->numel * (int64_t)dp_dtype_size(b->dtype);
        if (r->n_ready < r->n) r->stats.early++;
    }
    return rc;
}

/* Lets started averages progress while backward goes on (MPI progresses only inside its
 * calls). */
static void buckets_progress(dp_reducer *r) {
    if (!r->comm->progress || staged(r)) return;
    pthread_mutex_lock(&dp_group.lock);
    for (int b = 0; b < r->next_launch; b++)
        if (r->buckets[b].work) r->comm->progress(r->buckets[b].work);
    pthread_mutex_unlock(&dp_group.lock);
}

/* Copies a parameter's gradient into its place in the bucket buffer. */
static int slot_copy_in(dp_reducer *r, dp_reducer_slot *s, dp_tensor *grad) {
    dp_bucket *b = &r->buckets[s->bucket];
    size_t es = dp_dtype_size(b->dtype);
    char *dst = (char *)dp_data(b->buffer) + s->offset * (int64_t)es;
    if (!grad) {
        if (b->buffer->device.type == DP_DEVICE_CPU) { memset(dst, 0, (size_t)s->numel * es); return 0; }
    } else if (dp_numel(grad) != s->numel || !dp_same_shape(grad, s->param)) {
        char s1[128], s2[128];
        return dp_error("the gradient of %s has shape %s, but the parameter has shape %s", s->name,
                        dp_shape_str(grad->ndim, grad->sizes, s1, sizeof s1),
                        dp_shape_str(s->param->ndim, s->param->sizes, s2, sizeof s2));
    } else if (grad->device.type == DP_DEVICE_CPU && b->buffer->device.type == DP_DEVICE_CPU &&
               grad->dtype == b->dtype && dp_is_contiguous(grad)) {
        memcpy(dst, dp_data(grad), (size_t)s->numel * es);
        return 0;
    }
    dp_tensor *v = dp_dist_flat_view(b->buffer, s->offset, s->param->ndim, s->param->sizes);
    if (!v) return -1;
    int rc = grad ? dp_copy_raw(v, grad) : dp_fill_(v, 0);
    dp_tensor_release(v);
    return rc;
}

/* Writes the averaged gradient of a slot back into param.grad: in place when nothing else
 * can see the old gradient tensor, else as a new tensor. */
static int slot_copy_out(dp_reducer *r, dp_reducer_slot *s, int64_t divide_by) {
    dp_bucket *b = &r->buckets[s->bucket];
    dp_tensor *p = s->param, *old = p->grad, *dst;
    size_t es = dp_dtype_size(b->dtype);
    bool in_place = old && __atomic_load_n(&old->refcount, __ATOMIC_ACQUIRE) == 1 &&
                    __atomic_load_n(&old->storage->refcount, __ATOMIC_ACQUIRE) == 1 &&
                    old->dtype == b->dtype && dp_device_eq(old->device, b->buffer->device) &&
                    dp_is_contiguous(old) && dp_same_shape(old, p);
    if (in_place) {
        dst = old;
        dp_tensor_retain(dst);
    } else {
        dst = dp_empty(p->ndim, p->sizes, b->dtype, b->buffer->device);
        if (!dst) return -1;
    }
    int rc = 0;
    const char *src = (const char *)dp_data(b->buffer) + s->offset * (int64_t)es;
    if (dst->device.type == DP_DEVICE_CPU && (b->dtype == DP_FLOAT32 || b->dtype == DP_FLOAT64)) {
        if (b->dtype == DP_FLOAT32) {
            const float *in = (const float *)src;
            float *out = dp_data(dst), by = (float)divide_by;
            for (int64_t i = 0; i < s->numel; i++) out[i] = in[i] / by;
        } else {
            const double *in = (const double *)src;
            double *out = dp_data(dst), by = (double)divide_by;
            for (int64_t i = 0; i < s->numel; i++) out[i] = in[i] / by;
        }
    } else {
        dp_tensor *v = dp_dist_flat_view(b->buffer, s->offset, p->ndim, p->sizes);
        rc = v ? dp_copy_raw(dst, v) : -1;
        dp_tensor_release(v);
        if (rc == 0 && divide_by != 1) rc = dp_binary_scalar_(DP_DIV, dst, (double)divide_by);
    }
    if (rc == 0) {
        if (in_place) dp_bump_version(dst);
        else dp_set_grad(p, dst);
    }
    dp_tensor_release(dst);
    return rc;
}

/* All buckets are started: waits for them and writes the averages back. */
static int reducer_finish(dp_reducer *r) {
    int rc = 0;
    if (staged(r)) {
        rc = worker_finish(r);
    } else {
        pthread_mutex_lock(&dp_group.lock);
        for (int b = 0; b < r->n_buckets && rc == 0; b++) {
            char where[160];
            bucket_where(r, b, where, sizeof where);
            rc = r->comm->wait(r->buckets[b].work, r->device, where);
            if (rc == 0) r->buckets[b].work = NULL;
        }
        pthread_mutex_unlock(&dp_group.lock);
    }
    for (int i = 0; i < r->n && rc == 0; i++) rc = slot_copy_out(r, &r->slots[i], r->divide_by);
    if (rc == 0) r->stats.passes++;
    return rc;
}

static void reducer_hook(void *ctx, dp_tensor *leaf) {
    dp_reducer_slot *s = ctx;
    dp_reducer *r = s->r;
    char msg[400];
    pthread_mutex_lock(&r->lock);
    if (!r->armed || r->failed) goto out;
    if (!dp_group.initialized || dp_group.generation != r->generation) {
        reducer_fail(r, "the process group was destroyed while the model was still in use");
        goto out;
    }
    if (s->ready) {
        snprintf(msg, sizeof msg, "parameter %s received its gradient twice in one backward pass "
                 "(a parameter may take part in one reduction per backward)", s->name);
        reducer_fail(r, msg);
        goto out;
    }
    if (slot_copy_in(r, s, leaf->grad) != 0) {
        snprintf(msg, sizeof msg, "%s", dp_last_error());
        reducer_fail(r, msg);
        goto out;
    }
    s->ready = true;
    r->n_ready++;
    dp_bucket *b = &r->buckets[s->bucket];
    b->pending--;
    /* Buckets start in order, so that every rank issues the same collectives in the same
     * sequence whatever order its gradients come in. */
    while (r->next_launch < r->n_buckets && r->buckets[r->next_launch].pending == 0) {
        if (bucket_launch(r, &r->buckets[r->next_launch]) != 0) {
            snprintf(msg, sizeof msg, "%s", dp_last_error());
            reducer_fail(r, msg);
            goto out;
        }
        r->next_launch++;
    }
    if (r->n_ready == r->n) {
        if (reducer_finish(r) != 0) {
            snprintf(msg, sizeof msg, "%s", dp_last_error());
            reducer_fail(r, msg);
            goto out;
        }
        reducer_reset(r);
    } else {
        buckets_progress(r);
    }
out:
    pthread_mutex_unlock(&r->lock);
}

int dp_reducer_prepare(dp_reducer *r, bool sync) {
    int rc = 0;
    pthread_mutex_lock(&r->lock);
    if (!r->failed && r->n_ready > 0) {
        char names[300] = "";
        int shown = 0, missing = 0;
        for (int i = 0; i < r->n; i++) {
            if (r->slots[i].ready) continue;
            missing++;
            if (shown < 5) {
                size_t len = strlen(names);
                snprintf(names + len, sizeof names - len, "%s%s", shown ? ", " : "", r->slots[i].name);
                shown++;
            }
        }
        char msg[480];
        snprintf(msg, sizeof msg, "expected the previous backward pass to reduce every parameter's "
                 "gradient before a new forward, but %d parameter%s got no gradient (%s%s); every "
                 "parameter must take part in computing the loss", missing, missing == 1 ? "" : "s",
                 names, missing > shown ? ", ..." : "");
        reducer_fail(r, msg);
    }
    if (!r->failed && (!dp_group.initialized || dp_group.generation != r->generation))
        reducer_fail(r, "the process group was destroyed while the model was still in use");
    if (r->failed) rc = dp_error("%s", r->err);
    else r->armed = sync;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int dp_reducer_bucket_count(const dp_reducer *r) { return r->n_buckets; }

int dp_reducer_bucket(const dp_reducer *r, int b, int *idx, int max) {
    if (b < 0 || b >= r->n_buckets) return dp_error("reducer: no bucket %d", b);
    const dp_bucket *k = &r->buckets[b];
    for (int i = 0; i < k->n_params && i < max; i++) idx[i] = k->params[i];
    return k->n_params;
}

void dp_reducer_get_stats(const dp_reducer *r, dp_reducer_stats *out) { *out = r->stats; }
