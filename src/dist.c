/* dist.c: the process group of torch.distributed (see dist.h): creating and destroying it,
 * the queries, and the collectives' common part: argument checks, a check that every rank
 * makes the same call, contiguous staging, copying results back, and for CUDA tensors on the
 * mpi backend, staging through pinned host memory.  The bytes are moved by
 * the group's backend through the collective interface of dist_comm.h (dist_mpi.c for CPU
 * tensors, dist_nccl.c for CUDA tensors); the group itself is always made over MPI, which
 * also bootstraps NCCL.  All distributed state lives in one struct, dp_group. */
#include "dist_comm.h"
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dp_dist_group dp_group = { .backend = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

const char *dp_dist_backend_name(int backend) {
    return backend == DP_DIST_MPI ? "mpi" : backend == DP_DIST_NCCL ? "nccl" : "none";
}

bool dp_dist_is_initialized(void) { return dp_group.initialized; }

int dp_dist_not_initialized(const char *what) {
    return dp_error("torch.distributed.%s: the default process group is not initialized "
                    "(call torch.distributed.init_process_group first)", what);
}

int dp_dist_rank(void) { return dp_group.initialized ? dp_group.rank : dp_dist_not_initialized("get_rank"); }
int dp_dist_world_size(void) {
    return dp_group.initialized ? dp_group.world_size : dp_dist_not_initialized("get_world_size");
}
int dp_dist_local_rank(void) {
    return dp_group.initialized ? dp_group.local_rank : dp_dist_not_initialized("get_local_rank");
}
int dp_dist_backend_of(void) { return dp_group.initialized ? dp_group.backend : -1; }

void dp_dist_mark_broken(const char *msg) {
    if (!dp_group.broken[0]) snprintf(dp_group.broken, sizeof dp_group.broken, "%s", msg);
}

int dp_dist_init(dp_dist_backend backend) {
    if (backend != DP_DIST_MPI && backend != DP_DIST_NCCL)
        return dp_error("torch.distributed.init_process_group: unknown backend %d", (int)backend);
    if (dp_group.initialized)
        return dp_error("torch.distributed.init_process_group: the default process group is already "
                        "initialized (backend '%s'); call destroy_process_group first",
                        dp_dist_backend_name(dp_group.backend));
    if (backend == DP_DIST_NCCL) {
        if (!dp_dist_nccl_load())
            return dp_error("torch.distributed.init_process_group: backend 'nccl' needs the CUDA "
                            "backend, which is missing (libdplua_cuda.so with NCCL was not built "
                            "or cannot be loaded)");
        if (dp_device_count(DP_DEVICE_CUDA) <= 0)
            return dp_error("torch.distributed.init_process_group: backend 'nccl' needs a CUDA "
                            "device, but CUDA is not available");
    }
    if (!dp_dist_has_mpi())
        return dp_error("torch.distributed.init_process_group: this build has no MPI backend%s "
                        "(rebuild with MPI: install mpicc and run make)",
                        backend == DP_DIST_NCCL ? " (nccl is bootstrapped over MPI)" : "");
    pthread_mutex_lock(&dp_group.lock);
    int rc = dp_dist_mpi_group_create();
    if (rc == 0) {
        dp_group.backend = backend;
        dp_group.comm = backend == DP_DIST_NCCL ? &dp_dist_nccl_comm : &dp_dist_mpi_comm;
        dp_group.generation++;
        dp_group.broken[0] = '\0';
        dp_group.initialized = true;
    }
    pthread_mutex_unlock(&dp_group.lock);
    return rc;
}

int dp_dist_destroy(void) {
    if (!dp_group.initialized) return dp_dist_not_initialized("destroy_process_group");
    pthread_mutex_lock(&dp_group.lock);
    if (dp_group.comm->group_free) dp_group.comm->group_free();
    dp_dist_mpi_group_free();
    dp_group.initialized = false;
    dp_group.backend = -1;
    dp_group.comm = NULL;
    pthread_mutex_unlock(&dp_group.lock);
    /* A failure inside backward (the reducer's hooks cannot raise) surfaces here at the
     * latest, instead of the job ending as if every step had been averaged. */
    if (dp_group.broken[0])
        return dp_error("torch.distributed.destroy_process_group: a collective of this group failed: %s",
                        dp_group.broken);
    return 0;
}

/* ------------------------------------------------------------------ collectives */

static int check_tensor(const char *what, dp_tensor *t) {
    if (!dp_group.initialized) return dp_dist_not_initialized(what);
    if (!t) return dp_error("torch.distributed.%s: expected a tensor", what);
    if (dp_dtype_is_half(t->dtype))   /* the MPI and NCCL calls have no 2-byte float types wired yet */
        return dp_error("torch.distributed.%s: %s tensors are not supported yet; convert with :float()", what,
                        dp_dtype_name(t->dtype));
    char dev[32];
    if (dp_group.backend == DP_DIST_NCCL && t->device.type != DP_DEVICE_CUDA)
        return dp_error("torch.distributed.%s: the nccl backend takes CUDA tensors, but the tensor "
                        "is on %s (use init_process_group{backend='mpi'} for CPU tensors)",
                        what, dp_device_str(t->device, dev));
    if (t->device.type == DP_DEVICE_CUDA && t->device.index >= DP_DIST_MAX_DEVICES)
        return dp_error("torch.distributed.%s: CUDA device index %d is out of range", what, t->device.index);
    return 0;
}

/* Appends s to [p, end) (end reserves room for the terminator). */
static char *put_str(char *p, char *end, const char *s) {
    while (*s && p < end) *p++ = *s++;
    return p;
}

static char *put_int(char *p, char *end, int64_t v) {
    char digits[24];
    int n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do digits[n++] = (char)('0' + u % 10); while (u /= 10);
    if (v < 0 && p < end) *p++ = '-';
    while (n > 0 && p < end) *p++ = digits[--n];
    return p;
}

/* "all_reduce('sum') of float32 [4]": the call as the other ranks must make it too.  Every
 * collective formats it (it is hashed to check that the ranks agree), so it is written by
 * hand: snprintf alone took a third of a small all_reduce's time. */
static const char *describe(char *buf, size_t n, const char *call, const char *arg, dp_tensor *t) {
    char *p = buf, *end = buf + n - 1;
    p = put_str(p, end, call);
    p = put_str(p, end, "(");
    p = put_str(p, end, arg);
    p = put_str(p, end, ") of ");
    p = put_str(p, end, dp_dtype_name(t->dtype));
    p = put_str(p, end, " [");
    for (int d = 0; d < t->ndim; d++) {
        if (d) p = put_str(p, end, ", ");
        p = put_int(p, end, t->sizes[d]);
    }
    p = put_str(p, end, "]");
    *p = '\0';
    return buf;
}

/* A contiguous tensor with t's values: t itself (retained) when it already is. */
static dp_tensor *contiguous_of(dp_tensor *t) {
    if (dp_is_contiguous(t)) { dp_tensor_retain(t); return t; }
    dp_tensor *c = dp_empty(t->ndim, t->sizes, t->dtype, t->device);
    if (c && dp_copy_raw(c, t) != 0) { dp_tensor_release(c); return NULL; }
    return c;
}

/* The elements [offset, offset + numel(sizes)) of a flat contiguous tensor, shaped as sizes. */
dp_tensor *dp_dist_flat_view(dp_tensor *flat, int64_t offset, int ndim, const int64_t *sizes) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= sizes[i];
    dp_tensor *part = dp_narrow(flat, 0, offset, n);
    if (!part) return NULL;
    dp_tensor *v = dp_view_sizes(part, ndim, sizes);
    dp_tensor_release(part);
    return v;
}

/* ---- staging: the mpi backend moves host bytes, so a CUDA tensor's values go through
 * pinned host memory (as gloo stages them for PyTorch): copied out before the collective
 * and back after it.  The pinned cache hands the same block out again for the next call
 * of that size. */

static bool staged(const dp_tensor *t) {
    return dp_group.backend == DP_DIST_MPI && t->device.type != DP_DEVICE_CPU;
}

/* A pinned host copy of contiguous c's bytes (with copy_in), or uninitialised. */
static void *stage_out(dp_tensor *c, size_t bytes, bool copy_in) {
    void *host = dp_pinned_alloc(bytes);
    if (!host) return NULL;
    if (copy_in && dp_backend_for(c->device)->copy_d2h(c->device, host, dp_data(c), bytes) != 0) {
        dp_pinned_free(host);
        return NULL;
    }
    return host;
}

/* Copies the host bytes back into contiguous c and frees them (rc: the collective's). */
static int stage_back(int rc, dp_tensor *c, void *host, size_t bytes) {
    if (rc == 0) rc = dp_backend_for(c->device)->copy_h2d(c->device, dp_data(c), host, bytes, false);
    dp_pinned_free(host);
    return rc;
}

static const dp_device host_device = { DP_DEVICE_CPU, 0 };

/* all_reduce (reduce: arg is the op) or broadcast (arg is the source rank) of t in place:
 * the ranks' agreement check, then the collective on a contiguous copy of t, written back */
static int in_place(const char *name, const char *where, dp_tensor *t, bool reduce, int arg) {
    int64_t n = dp_numel(t);
    if (!staged(t) && dp_is_contiguous(t)) {
        /* the common case, and the one whose per-call cost shows on small tensors: the
         * collective works on t's own memory, under one hold of the lock */
        pthread_mutex_lock(&dp_group.lock);
        int rc = dp_dist_mpi_check_same(name, where);
        if (rc == 0 && n > 0)
            rc = reduce ? dp_group.comm->all_reduce(dp_data(t), n, t->dtype, t->device, (dp_dist_op)arg, where)
                        : dp_group.comm->broadcast(dp_data(t), n, t->dtype, t->device, arg, where);
        pthread_mutex_unlock(&dp_group.lock);
        if (rc == 0 && n > 0) dp_bump_version(t);
        return rc;
    }
    pthread_mutex_lock(&dp_group.lock);
    int rc = dp_dist_mpi_check_same(name, where);
    pthread_mutex_unlock(&dp_group.lock);
    if (rc != 0 || n == 0) return rc;
    dp_tensor *c = contiguous_of(t);
    if (!c) return -1;
    size_t bytes = (size_t)n * dp_dtype_size(c->dtype);
    void *host = staged(c) ? stage_out(c, bytes, true) : NULL;
    if (staged(c) && !host) { dp_tensor_release(c); return -1; }
    void *data = host ? host : dp_data(c);
    dp_device dev = host ? host_device : c->device;
    pthread_mutex_lock(&dp_group.lock);
    rc = reduce ? dp_group.comm->all_reduce(data, n, c->dtype, dev, (dp_dist_op)arg, where)
                : dp_group.comm->broadcast(data, n, c->dtype, dev, arg, where);
    pthread_mutex_unlock(&dp_group.lock);
    if (host) rc = stage_back(rc, c, host, bytes);
    if (rc == 0 && c != t) rc = dp_copy_raw(t, c);
    else if (rc == 0) dp_bump_version(t);
    dp_tensor_release(c);
    return rc;
}

int dp_dist_all_reduce(dp_tensor *t, dp_dist_op op) {
    static const char *const op_names[] = { "'sum'", "'avg'", "'max'", "'min'", "'product'", "'band'", "'bor'",
                                            "'bxor'" };
    if (check_tensor("all_reduce", t) != 0) return -1;
    if ((unsigned)op > DP_DIST_BXOR) return dp_error("torch.distributed.all_reduce: unknown op %d", (int)op);
    if (t->dtype == DP_BOOL && op == DP_DIST_AVG)
        return dp_error("torch.distributed.all_reduce: op 'avg' is not defined for bool tensors");
    if (op >= DP_DIST_BAND) {
        if (dp_dtype_is_float(t->dtype))
            return dp_error("torch.distributed.all_reduce: op %s takes integer or bool tensors, got a %s tensor",
                            op_names[op], dp_dtype_name(t->dtype));
        if (dp_group.backend == DP_DIST_NCCL)
            return dp_error("torch.distributed.all_reduce: op %s is not available with the nccl backend "
                            "(NCCL has no bitwise reductions; use the mpi backend)", op_names[op]);
    }
    char where[200];
    describe(where, sizeof where, "all_reduce", op_names[op], t);
    return in_place("all_reduce", where, t, true, (int)op);
}

int dp_dist_broadcast(dp_tensor *t, int src) {
    if (check_tensor("broadcast", t) != 0) return -1;
    if (src < 0 || src >= dp_group.world_size)
        return dp_error("torch.distributed.broadcast: src %d is not a rank of the group "
                        "(ranks are 0 to %d)", src, dp_group.world_size - 1);
    char where[200], arg[32];
    *put_int(put_str(arg, arg + sizeof arg - 1, "src="), arg + sizeof arg - 1, src) = '\0';
    describe(where, sizeof where, "broadcast", arg, t);
    return in_place("broadcast", where, t, false, src);
}

int dp_dist_all_gather(dp_tensor *const *outs, int n_outs, dp_tensor *t) {
    if (check_tensor("all_gather", t) != 0) return -1;
    if (n_outs != dp_group.world_size)
        return dp_error("torch.distributed.all_gather: expected a list of %d tensors (the world "
                        "size), got %d", dp_group.world_size, n_outs);
    char s1[128], s2[128], d1[32], d2[32];
    for (int r = 0; r < n_outs; r++) {
        dp_tensor *o = outs[r];
        if (!o) return dp_error("torch.distributed.all_gather: tensor_list[%d] is not a tensor", r + 1);
        if (!dp_same_shape(o, t) || o->dtype != t->dtype)
            return dp_error("torch.distributed.all_gather: tensor_list[%d] is %s %s but the input is %s %s",
                            r + 1, dp_dtype_name(o->dtype), dp_shape_str(o->ndim, o->sizes, s1, sizeof s1),
                            dp_dtype_name(t->dtype), dp_shape_str(t->ndim, t->sizes, s2, sizeof s2));
        if (!dp_device_eq(o->device, t->device))
            return dp_error("torch.distributed.all_gather: tensor_list[%d] is on %s but the input is on %s",
                            r + 1, dp_device_str(o->device, d1), dp_device_str(t->device, d2));
    }
    int64_t n = dp_numel(t);
    if (n > INT_MAX)
        return dp_error("torch.distributed.all_gather: %lld elements is more than one call can gather (%d)",
                        (long long)n, INT_MAX);
    char where[200];
    describe(where, sizeof where, "all_gather", "", t);
    pthread_mutex_lock(&dp_group.lock);
    int rc = dp_dist_mpi_check_same("all_gather", where);
    pthread_mutex_unlock(&dp_group.lock);
    if (rc != 0 || n == 0) return rc;
    dp_tensor *c = contiguous_of(t);
    if (!c) return -1;
    int64_t all_n = (int64_t)n_outs * n;
    dp_tensor *all = dp_empty(1, &all_n, t->dtype, t->device);
    if (!all) { dp_tensor_release(c); return -1; }
    size_t bytes = (size_t)n * dp_dtype_size(c->dtype);
    void *send = NULL, *recv = NULL;
    if (staged(c) && (!(send = stage_out(c, bytes, true)) || !(recv = stage_out(all, bytes * (size_t)n_outs, false)))) {
        dp_pinned_free(send);
        dp_tensor_release(all);
        dp_tensor_release(c);
        return -1;
    }
    pthread_mutex_lock(&dp_group.lock);
    rc = send ? dp_group.comm->all_gather(send, recv, n, c->dtype, host_device, where)
              : dp_group.comm->all_gather(dp_data(c), dp_data(all), n, c->dtype, c->device, where);
    pthread_mutex_unlock(&dp_group.lock);
    if (send) {
        dp_pinned_free(send);
        rc = stage_back(rc, all, recv, bytes * (size_t)n_outs);
    }
    for (int r = 0; rc == 0 && r < n_outs; r++) {
        dp_tensor *v = dp_dist_flat_view(all, (int64_t)r * n, t->ndim, t->sizes);
        rc = v ? dp_copy_raw(outs[r], v) : -1;
        dp_tensor_release(v);
    }
    dp_tensor_release(all);
    dp_tensor_release(c);
    return rc;
}

int dp_dist_barrier(void) {
    if (!dp_group.initialized) return dp_dist_not_initialized("barrier");
    pthread_mutex_lock(&dp_group.lock);
    int rc = dp_dist_mpi_check_same("barrier", "barrier()");
    if (rc == 0) rc = dp_dist_mpi_barrier("barrier()");
    pthread_mutex_unlock(&dp_group.lock);
    return rc;
}

/* ------------------------------------------------------------------ debugging */

int64_t dp_dist_cuda_host_syncs(void) {
    if (dp_device_count(DP_DEVICE_CUDA) <= 0) return 0;
    const dp_backend *b = dp_backend_for((dp_device){ DP_DEVICE_CUDA, 0 });
    return b && b->host_syncs ? b->host_syncs() : 0;
}

int dp_dist_debug_side_stream_use(dp_tensor *t) {
    char dev[32];
    if (!t || t->device.type != DP_DEVICE_CUDA)
        return dp_error("torch.distributed._side_stream_use: expected a CUDA tensor, got one on %s",
                        t ? dp_device_str(t->device, dev) : "nothing");
    const dp_backend *b = dp_backend_for(t->device);
    if (!b) return -1;
    int i = t->device.index;
    void *side = b->side_stream(i), *e = NULL;
    if (!side) return -1;
    int rc = b->event_record(i, NULL, &e);
    if (rc == 0) rc = b->stream_wait_event(i, side, e);
    if (e) b->event_release(i, e);
    if (rc == 0) rc = b->record_stream(i, dp_data(t), side);
    return rc;
}

int dp_dist_all_gather_bytes(const void *data, size_t n, char **out, size_t *lens) {
    *out = NULL;
    if (!dp_group.initialized) return dp_dist_not_initialized("all_gather");
    pthread_mutex_lock(&dp_group.lock);
    int rc = dp_dist_mpi_all_gather_bytes(data, n, out, lens);
    pthread_mutex_unlock(&dp_group.lock);
    return rc;
}
