/* dist.c: the process group (MPI for CPU tensors, NCCL for CUDA tensors), its collectives,
 * and DistributedDataParallel's gradient reducer.  See dist.h.
 *
 * All distributed state lives in one struct, `g`.  MPI is started here when the program
 * has not started it (MPI_THREAD_SERIALIZED: every MPI call below holds g.lock), and is
 * finalised by an exit handler: after a clean exit of every rank it finalises; after a
 * failing exit (non-zero status) it leaves without finalising, so that mpirun stops the
 * other ranks at once instead of letting them wait for this one forever.
 *
 * NCCL is reached through functions that the CUDA backend library (kernels/comm.cu)
 * exports; the unique id is made on rank 0 and broadcast over MPI. */
#include "dist.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef DP_HAVE_MPI
#include <mpi.h>
#endif

/* From backend.h: a symbol of the CUDA backend library, NULL when it is not loadable. */
void *dp_cuda_symbol(const char *name);

#define DP_DIST_MAX_DEVICES 64
#define NCCL_ID_BYTES 128

/* ------------------------------------------------------------------ NCCL, through comm.cu */

typedef struct {
    int (*get_unique_id)(void *id, size_t idlen, char *err, size_t errlen);
    int (*comm_init)(int device, int nranks, const void *id, size_t idlen, int rank,
                     void **comm, void **stream, char *err, size_t errlen);
    int (*comm_destroy)(void *comm, void *stream, int device, char *err, size_t errlen);
    int (*all_reduce)(void *comm, void *stream, int device, void *data, int64_t count,
                      int dtype, int op, char *err, size_t errlen);
    int (*broadcast)(void *comm, void *stream, int device, void *data, int64_t count,
                     int dtype, int root, char *err, size_t errlen);
    int (*all_gather)(void *comm, void *stream, int device, const void *send, void *recv,
                      int64_t count, int dtype, char *err, size_t errlen);
    int (*stream_sync)(void *stream, int device, char *err, size_t errlen);
} nccl_api;

static bool nccl_load(nccl_api *api) {
    api->get_unique_id = (int (*)(void *, size_t, char *, size_t))dp_cuda_symbol("dp_nccl_get_unique_id");
    api->comm_init = (int (*)(int, int, const void *, size_t, int, void **, void **, char *, size_t))
        dp_cuda_symbol("dp_nccl_comm_init");
    api->comm_destroy = (int (*)(void *, void *, int, char *, size_t))dp_cuda_symbol("dp_nccl_comm_destroy");
    api->all_reduce = (int (*)(void *, void *, int, void *, int64_t, int, int, char *, size_t))
        dp_cuda_symbol("dp_nccl_all_reduce");
    api->broadcast = (int (*)(void *, void *, int, void *, int64_t, int, int, char *, size_t))
        dp_cuda_symbol("dp_nccl_broadcast");
    api->all_gather = (int (*)(void *, void *, int, const void *, void *, int64_t, int, char *, size_t))
        dp_cuda_symbol("dp_nccl_all_gather");
    api->stream_sync = (int (*)(void *, int, char *, size_t))dp_cuda_symbol("dp_nccl_stream_sync");
    return api->get_unique_id && api->comm_init && api->comm_destroy && api->all_reduce &&
           api->broadcast && api->all_gather && api->stream_sync;
}

/* ------------------------------------------------------------------ tensor helpers */

/* A copy that autograd does not see (collectives write into parameters too). */
static int raw_copy(dp_tensor *dst, dp_tensor *src) {
    bool was = dp_grad_enabled();
    dp_set_grad_enabled(false);
    int rc = dp_copy_(dst, src);
    dp_set_grad_enabled(was);
    return rc;
}

static void bump_version(dp_tensor *t) { __atomic_add_fetch(&t->storage->version, 1, __ATOMIC_RELAXED); }

/* The elements [offset, offset + numel(sizes)) of a flat contiguous tensor, shaped as sizes. */
static dp_tensor *flat_view(dp_tensor *flat, int64_t offset, int ndim, const int64_t *sizes) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= sizes[i];
    dp_tensor *part = dp_narrow(flat, 0, offset, n);
    if (!part) return NULL;
    dp_tensor *v = dp_view_sizes(part, ndim, sizes);
    dp_tensor_release(part);
    return v;
}

/* ------------------------------------------------------------------ the process group */

typedef struct {
    bool initialized;          /* a process group exists */
    int backend;               /* dp_dist_backend, -1 when none */
    int rank, world_size, local_rank;
    uint64_t generation;       /* bumped by every init: reducers of a destroyed group notice */
#ifdef DP_HAVE_MPI
    bool mpi_started;          /* this library called MPI_Init_thread (and finalises at exit) */
    bool exit_hook;            /* the exit handler is registered */
    bool ever_destroyed;       /* destroy_process_group ran: exit waits for the others unbounded */
    MPI_Comm comm;             /* the group's communicator: a duplicate of MPI_COMM_WORLD */
    MPI_Comm exit_comm;        /* used only by the exit handshake */
#endif
    nccl_api nccl;
    void *nccl_comm[DP_DIST_MAX_DEVICES];    /* per local CUDA device, made on first use */
    void *nccl_stream[DP_DIST_MAX_DEVICES];
    pthread_mutex_t lock;      /* serialises MPI and NCCL calls */
} dp_dist_state;

static dp_dist_state g = { .backend = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

const char *dp_dist_backend_name(int backend) {
    return backend == DP_DIST_MPI ? "mpi" : backend == DP_DIST_NCCL ? "nccl" : "none";
}

bool dp_dist_has_mpi(void) {
#ifdef DP_HAVE_MPI
    return true;
#else
    return false;
#endif
}

bool dp_dist_has_nccl(void) {
    nccl_api api;
    return nccl_load(&api);
}

bool dp_dist_is_initialized(void) { return g.initialized; }

static int not_initialized(const char *what) {
    return dp_error("torch.distributed.%s: the default process group is not initialized "
                    "(call torch.distributed.init_process_group first)", what);
}

int dp_dist_rank(void) { return g.initialized ? g.rank : not_initialized("get_rank"); }
int dp_dist_world_size(void) { return g.initialized ? g.world_size : not_initialized("get_world_size"); }
int dp_dist_local_rank(void) { return g.initialized ? g.local_rank : not_initialized("get_local_rank"); }
int dp_dist_backend_of(void) { return g.initialized ? g.backend : -1; }

#ifdef DP_HAVE_MPI

static int mpi_fail(const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    return dp_error("torch.distributed: %s failed: %s", what, msg);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds a rank that exits cleanly while still in a process group waits for the others to
 * exit too before it gives up on them (and leaves without finalising, which makes mpirun
 * stop the job): bounds how long a rank that quit early can keep the others waiting. */
static double exit_timeout(void) {
    const char *s = getenv("DPLUA_DIST_EXIT_TIMEOUT");
    double t = s ? atof(s) : 0;
    return t > 0 ? t : 10.0;
}

/* Every rank meets here at exit; MPI_Finalize is safe only when all of them did. */
static bool exit_handshake(double timeout) {
    MPI_Request req;
    if (MPI_Ibarrier(g.exit_comm, &req) != MPI_SUCCESS) return false;
    double deadline = now_seconds() + timeout;
    for (;;) {
        int done = 0;
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
        if (done) return true;
        if (timeout > 0 && now_seconds() > deadline) return false;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

static void dist_at_exit(int status, void *arg) {
    (void)arg;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || !g.mpi_started) return;
    if (status != 0) return;   /* failing: leave unfinalised so that mpirun stops the job */
    pthread_mutex_lock(&g.lock);
    bool clean = exit_handshake(g.initialized || !g.ever_destroyed ? exit_timeout() : 0);
    if (clean) {
        if (g.initialized) MPI_Comm_free(&g.comm);
        MPI_Comm_free(&g.exit_comm);
        g.initialized = false;
        MPI_Finalize();
    } else {
        fprintf(stderr, "torch.distributed: rank %d exits while other ranks are still running; "
                        "the job is stopped\n", g.rank);
    }
    pthread_mutex_unlock(&g.lock);
}

/* When this library was loaded with RTLD_LOCAL (stock lua5.4 loading torch.so), Open MPI's
 * plugins cannot see libmpi's symbols: load it again globally.  Also keeps this library
 * loaded until exit, since the exit handler lives in it. */
static void pin_libraries(void) {
    Dl_info info;
    if (dladdr((void *)&MPI_Init_thread, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (dladdr((void *)&dp_dist_init, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

static int env_int(const char *const *names, int *out) {
    for (int i = 0; names[i]; i++) {
        const char *s = getenv(names[i]);
        if (s && *s) {
            char *end;
            long v = strtol(s, &end, 10);
            if (*end == '\0' && v >= 0 && v < INT_MAX) { *out = (int)v; return 0; }
        }
    }
    return -1;
}

static int mpi_start(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return dp_error("torch.distributed.init_process_group: MPI was already finalized in this process");
    if (!inited) {
        pin_libraries();
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Init_thread", rc);
        g.mpi_started = true;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int r = MPI_Comm_dup(MPI_COMM_WORLD, &g.exit_comm);
        if (r != MPI_SUCCESS) return mpi_fail("MPI_Comm_dup", r);
        if (!g.exit_hook) { on_exit(dist_at_exit, NULL); g.exit_hook = true; }
    }
    return 0;
}

static int mpi_group_create(void) {
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Comm_dup", rc);
    MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Comm_size(g.comm, &g.world_size);
    static const char *const local_vars[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                              "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                              "PMI_LOCAL_RANK", NULL };
    if (env_int(local_vars, &g.local_rank) != 0) {
        MPI_Comm node;
        rc = MPI_Comm_split_type(g.comm, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &node);
        if (rc != MPI_SUCCESS) { MPI_Comm_free(&g.comm); return mpi_fail("MPI_Comm_split_type", rc); }
        MPI_Comm_rank(node, &g.local_rank);
        MPI_Comm_free(&node);
    }
    return 0;
}

static MPI_Datatype mpi_type(dp_dtype dt) {
    switch (dt) {
    case DP_FLOAT32: return MPI_FLOAT;
    case DP_FLOAT64: return MPI_DOUBLE;
    case DP_INT64: return MPI_INT64_T;
    default: return MPI_C_BOOL;
    }
}

static MPI_Op mpi_op(dp_dist_op op, dp_dtype dt) {
    if (dt == DP_BOOL) return op == DP_DIST_MIN ? MPI_LAND : MPI_LOR;
    return op == DP_DIST_MAX ? MPI_MAX : op == DP_DIST_MIN ? MPI_MIN : MPI_SUM;
}

#endif /* DP_HAVE_MPI */

int dp_dist_init(dp_dist_backend backend) {
    if (backend != DP_DIST_MPI && backend != DP_DIST_NCCL)
        return dp_error("torch.distributed.init_process_group: unknown backend %d", (int)backend);
    if (g.initialized)
        return dp_error("torch.distributed.init_process_group: the default process group is already "
                        "initialized (backend '%s'); call destroy_process_group first",
                        dp_dist_backend_name(g.backend));
    if (backend == DP_DIST_NCCL) {
        if (!nccl_load(&g.nccl))
            return dp_error("torch.distributed.init_process_group: backend 'nccl' needs the CUDA "
                            "backend, which is missing (libdplua_cuda.so with NCCL was not built "
                            "or cannot be loaded)");
        if (dp_cuda_device_count() <= 0)
            return dp_error("torch.distributed.init_process_group: backend 'nccl' needs a CUDA "
                            "device, but CUDA is not available");
    }
#ifndef DP_HAVE_MPI
    return dp_error("torch.distributed.init_process_group: this build has no MPI backend%s "
                    "(rebuild with MPI: install mpicc and run make)",
                    backend == DP_DIST_NCCL ? " (nccl is bootstrapped over MPI)" : "");
#else
    pthread_mutex_lock(&g.lock);
    int rc = mpi_start();
    if (rc == 0) rc = mpi_group_create();
    if (rc == 0) {
        g.backend = backend;
        g.generation++;
        g.initialized = true;
    }
    pthread_mutex_unlock(&g.lock);
    return rc;
#endif
}

#ifdef DP_HAVE_MPI
/* Syncs and frees the NCCL communicators (caller holds g.lock). */
static void nccl_free_all(void) {
    for (int d = 0; d < DP_DIST_MAX_DEVICES; d++) {
        if (g.nccl_comm[d]) {
            char err[256];
            g.nccl.comm_destroy(g.nccl_comm[d], g.nccl_stream[d], d, err, sizeof err);
            g.nccl_comm[d] = g.nccl_stream[d] = NULL;
        }
    }
}
#endif

int dp_dist_destroy(void) {
    if (!g.initialized) return not_initialized("destroy_process_group");
#ifdef DP_HAVE_MPI
    pthread_mutex_lock(&g.lock);
    nccl_free_all();
    MPI_Comm_free(&g.comm);
    g.initialized = false;
    g.ever_destroyed = true;
    g.backend = -1;
    pthread_mutex_unlock(&g.lock);
#endif
    return 0;
}

/* ------------------------------------------------------------------ collectives */

static int check_tensor(const char *what, dp_tensor *t) {
    if (!g.initialized) return not_initialized(what);
    if (!t) return dp_error("torch.distributed.%s: expected a tensor", what);
    char dev[32];
    if (g.backend == DP_DIST_MPI && t->device.type != DP_DEVICE_CPU)
        return dp_error("torch.distributed.%s: the mpi backend takes CPU tensors, but the tensor is "
                        "on %s (use init_process_group{backend='nccl'} for CUDA tensors)",
                        what, dp_device_str(t->device, dev));
    if (g.backend == DP_DIST_NCCL && t->device.type != DP_DEVICE_CUDA)
        return dp_error("torch.distributed.%s: the nccl backend takes CUDA tensors, but the tensor "
                        "is on %s (use init_process_group{backend='mpi'} for CPU tensors)",
                        what, dp_device_str(t->device, dev));
    if (t->device.type == DP_DEVICE_CUDA && t->device.index >= DP_DIST_MAX_DEVICES)
        return dp_error("torch.distributed.%s: CUDA device index %d is out of range", what, t->device.index);
    return 0;
}

/* The group's NCCL communicator for CUDA device dev, made on first use: every rank makes
 * its own at the same collective call, with rank 0's unique id (caller holds g.lock). */
static int nccl_comm_for(int dev, void **comm, void **stream) {
    if (!g.nccl_comm[dev]) {
#ifdef DP_HAVE_MPI
        struct { int ok; char id[NCCL_ID_BYTES]; char err[200]; } msg;
        memset(&msg, 0, sizeof msg);
        if (g.rank == 0) msg.ok = g.nccl.get_unique_id(msg.id, NCCL_ID_BYTES, msg.err, sizeof msg.err) == 0;
        int rc = MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, g.comm);
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Bcast of the NCCL unique id", rc);
        if (!msg.ok) return dp_error("torch.distributed: ncclGetUniqueId failed on rank 0: %s", msg.err);
        char err[256];
        if (g.nccl.comm_init(dev, g.world_size, msg.id, NCCL_ID_BYTES, g.rank, &g.nccl_comm[dev],
                             &g.nccl_stream[dev], err, sizeof err) != 0) {
            g.nccl_comm[dev] = g.nccl_stream[dev] = NULL;
            return dp_error("torch.distributed: NCCL communicator for cuda:%d (rank %d of %d): %s",
                            dev, g.rank, g.world_size, err);
        }
#else
        return dp_error("torch.distributed: this build has no MPI backend to bootstrap NCCL");
#endif
    }
    *comm = g.nccl_comm[dev];
    *stream = g.nccl_stream[dev];
    return 0;
}

/* Runs a NCCL call on contiguous data after the engine's work on the device is done, and
 * waits for it, so the tensor is ready for whatever comes next (caller holds g.lock). */
#define NCCL_RUN(dev, call_args_fn)                                                   \
    do {                                                                              \
        void *comm_ = NULL, *stream_ = NULL;                                                        \
        char err_[256];                                                               \
        if (nccl_comm_for(dev, &comm_, &stream_) != 0) goto fail;                     \
        if (dp_cuda_synchronize(dev) != 0) goto fail;                                 \
        if (call_args_fn != 0 ||                                                      \
            g.nccl.stream_sync(stream_, dev, err_, sizeof err_) != 0) {               \
            dp_error("torch.distributed: NCCL: %s", err_);                            \
            goto fail;                                                                \
        }                                                                             \
    } while (0)

/* A contiguous tensor with t's values: t itself (retained) when it already is. */
static dp_tensor *contiguous_of(dp_tensor *t) {
    if (dp_is_contiguous(t)) { dp_tensor_retain(t); return t; }
    dp_tensor *c = dp_empty(t->ndim, t->sizes, t->dtype, t->device);
    if (c && raw_copy(c, t) != 0) { dp_tensor_release(c); return NULL; }
    return c;
}

#ifdef DP_HAVE_MPI
static void divide_in_place(void *data, dp_dtype dt, int64_t n, int64_t by) {
    if (dt == DP_FLOAT32) {
        float *p = data;
        for (int64_t i = 0; i < n; i++) p[i] /= (float)by;
    } else if (dt == DP_FLOAT64) {
        double *p = data;
        for (int64_t i = 0; i < n; i++) p[i] /= (double)by;
    } else if (dt == DP_INT64) {
        int64_t *p = data;   /* truncated, as NCCL's average of integers */
        for (int64_t i = 0; i < n; i++) p[i] /= by;
    }
}
#endif

int dp_dist_all_reduce(dp_tensor *t, dp_dist_op op) {
    if (check_tensor("all_reduce", t) != 0) return -1;
    if ((unsigned)op > DP_DIST_MIN) return dp_error("torch.distributed.all_reduce: unknown op %d", (int)op);
    if (t->dtype == DP_BOOL && op == DP_DIST_AVG)
        return dp_error("torch.distributed.all_reduce: op 'avg' is not defined for bool tensors");
    int64_t n = dp_numel(t);
    if (n == 0) return 0;
    dp_tensor *c = contiguous_of(t);
    if (!c) return -1;
    int rc = -1;
    pthread_mutex_lock(&g.lock);
    if (c->device.type == DP_DEVICE_CUDA) {
        NCCL_RUN(c->device.index, g.nccl.all_reduce(comm_, stream_, c->device.index, dp_data(c), n,
                                                    (int)c->dtype, (int)op, err_, sizeof err_));
    } else {
#ifdef DP_HAVE_MPI
        char *p = dp_data(c);
        size_t es = dp_dtype_size(c->dtype);
        for (int64_t done = 0; done < n;) {
            int count = (int)(n - done < INT_MAX ? n - done : INT_MAX);
            int r = MPI_Allreduce(MPI_IN_PLACE, p + done * es, count, mpi_type(c->dtype),
                                  mpi_op(op, c->dtype), g.comm);
            if (r != MPI_SUCCESS) { mpi_fail("MPI_Allreduce", r); goto fail; }
            done += count;
        }
        if (op == DP_DIST_AVG) divide_in_place(p, c->dtype, n, g.world_size);
#endif
    }
    rc = 0;
fail:
    pthread_mutex_unlock(&g.lock);
    if (rc == 0 && c != t) rc = raw_copy(t, c);
    if (rc == 0) bump_version(t);
    dp_tensor_release(c);
    return rc;
}

int dp_dist_broadcast(dp_tensor *t, int src) {
    if (check_tensor("broadcast", t) != 0) return -1;
    if (src < 0 || src >= g.world_size)
        return dp_error("torch.distributed.broadcast: src %d is not a rank of the group "
                        "(ranks are 0 to %d)", src, g.world_size - 1);
    int64_t n = dp_numel(t);
    if (n == 0) return 0;
    dp_tensor *c = contiguous_of(t);
    if (!c) return -1;
    int rc = -1;
    pthread_mutex_lock(&g.lock);
    if (c->device.type == DP_DEVICE_CUDA) {
        NCCL_RUN(c->device.index, g.nccl.broadcast(comm_, stream_, c->device.index, dp_data(c), n,
                                                   (int)c->dtype, src, err_, sizeof err_));
    } else {
#ifdef DP_HAVE_MPI
        char *p = dp_data(c);
        size_t es = dp_dtype_size(c->dtype);
        for (int64_t done = 0; done < n;) {
            int count = (int)(n - done < INT_MAX ? n - done : INT_MAX);
            int r = MPI_Bcast(p + done * es, count, mpi_type(c->dtype), src, g.comm);
            if (r != MPI_SUCCESS) { mpi_fail("MPI_Bcast", r); goto fail; }
            done += count;
        }
#endif
    }
    rc = 0;
fail:
    pthread_mutex_unlock(&g.lock);
    if (rc == 0 && c != t) rc = raw_copy(t, c);
    if (rc == 0) bump_version(t);
    dp_tensor_release(c);
    return rc;
}

int dp_dist_all_gather(dp_tensor *const *outs, int n_outs, dp_tensor *t) {
    if (check_tensor("all_gather", t) != 0) return -1;
    if (n_outs != g.world_size)
        return dp_error("torch.distributed.all_gather: expected a list of %d tensors (the world "
                        "size), got %d", g.world_size, n_outs);
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
    if (n == 0) return 0;
    if (n > INT_MAX)
        return dp_error("torch.distributed.all_gather: %lld elements is more than one call can gather (%d)",
                        (long long)n, INT_MAX);
    dp_tensor *c = contiguous_of(t);
    if (!c) return -1;
    int64_t all_n = (int64_t)n_outs * n;
    dp_tensor *all = dp_empty(1, &all_n, t->dtype, t->device);
    if (!all) { dp_tensor_release(c); return -1; }
    int rc = -1;
    pthread_mutex_lock(&g.lock);
    if (c->device.type == DP_DEVICE_CUDA) {
        NCCL_RUN(c->device.index, g.nccl.all_gather(comm_, stream_, c->device.index, dp_data(c), dp_data(all),
                                                    n, (int)c->dtype, err_, sizeof err_));
    } else {
#ifdef DP_HAVE_MPI
        int r = MPI_Allgather(dp_data(c), (int)n, mpi_type(c->dtype), dp_data(all), (int)n,
                              mpi_type(c->dtype), g.comm);
        if (r != MPI_SUCCESS) { mpi_fail("MPI_Allgather", r); goto fail; }
#endif
    }
    rc = 0;
fail:
    pthread_mutex_unlock(&g.lock);
    for (int r = 0; rc == 0 && r < n_outs; r++) {
        dp_tensor *v = flat_view(all, (int64_t)r * n, t->ndim, t->sizes);
        rc = v ? raw_copy(outs[r], v) : -1;
        dp_tensor_release(v);
        if (rc == 0) bump_version(outs[r]);
    }
    dp_tensor_release(all);
    dp_tensor_release(c);
    return rc;
}

int dp_dist_barrier(void) {
    if (!g.initialized) return not_initialized("barrier");
    int rc = 0;
#ifdef DP_HAVE_MPI
    pthread_mutex_lock(&g.lock);
    int r = MPI_Barrier(g.comm);
    if (r != MPI_SUCCESS) rc = mpi_fail("MPI_Barrier", r);
    pthread_mutex_unlock(&g.lock);
#endif
    return rc;
}

int dp_dist_all_gather_bytes(const void *data, size_t n, char **out, size_t *lens) {
    *out = NULL;
    if (!g.initialized) return not_initialized("all_gather");
#ifdef DP_HAVE_MPI
    int w = g.world_size;
    int64_t mine = (int64_t)n;
    int64_t *all = malloc(sizeof(int64_t) * (size_t)w);
    int *counts = malloc(sizeof(int) * (size_t)w), *displs = malloc(sizeof(int) * (size_t)w);
    int rc = -1;
    pthread_mutex_lock(&g.lock);
    if (!all || !counts || !displs) { dp_error("torch.distributed: out of memory"); goto done; }
    int r = MPI_Allgather(&mine, 1, MPI_INT64_T, all, 1, MPI_INT64_T, g.comm);
    if (r != MPI_SUCCESS) { mpi_fail("MPI_Allgather", r); goto done; }
    int64_t total = 0;
    for (int i = 0; i < w; i++) {
        displs[i] = (int)total;
        counts[i] = (int)all[i];
        lens[i] = (size_t)all[i];
        total += all[i];
    }
    if (total > INT_MAX) { dp_error("torch.distributed: gathered strings too long (%lld bytes)", (long long)total); goto done; }
    *out = malloc((size_t)total + 1);
    if (!*out) { dp_error("torch.distributed: out of memory"); goto done; }
    r = MPI_Allgatherv(data, (int)n, MPI_BYTE, *out, counts, displs, MPI_BYTE, g.comm);
    if (r != MPI_SUCCESS) { mpi_fail("MPI_Allgatherv", r); free(*out); *out = NULL; goto done; }
    rc = 0;
done:
    pthread_mutex_unlock(&g.lock);
    free(all); free(counts); free(displs);
    return rc;
#else
    (void)data; (void)n; (void)lens;
    return dp_error("torch.distributed: this build has no MPI backend");
#endif
}

/* ------------------------------------------------------------------ the DDP reducer */

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
#ifdef DP_HAVE_MPI
    MPI_Request req;
#endif
} dp_bucket;

struct dp_reducer {
    int n;
    dp_reducer_slot *slots;
    int n_buckets;
    dp_bucket *buckets;
    dp_device device;
    int backend;
    uint64_t generation;       /* of the group it reduces over */
    int next_launch;           /* buckets start in order: the first one not started */
    int n_ready;
    bool armed;                /* this pass averages (false under no_sync) */
    bool failed;
    char err[512];
    dp_reducer_stats stats;
    pthread_mutex_t lock;
};

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
#ifdef DP_HAVE_MPI
        r->buckets[b].req = MPI_REQUEST_NULL;
#endif
    }
    r->next_launch = 0;
    r->n_ready = 0;
}

void dp_reducer_free(dp_reducer *r) {
    if (!r) return;
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
        free(r->buckets[b].params);
    }
    free(r->slots);
    free(r->buckets);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static void reducer_hook(void *ctx, dp_tensor *leaf);

#define REQUIRE(cond, ...) do { if (!(cond)) { dp_error(__VA_ARGS__); goto fail; } } while (0)

dp_reducer *dp_reducer_new(int n, dp_tensor *const *params, const char *const *names,
                           size_t bucket_cap_bytes) {
    if (!g.initialized) { not_initialized("DistributedDataParallel"); return NULL; }
    if (n < 0 || bucket_cap_bytes == 0) {
        dp_error("nn.DistributedDataParallel: bad reducer arguments (%d parameters, bucket cap %zu bytes)",
                 n, bucket_cap_bytes);
        return NULL;
    }
    dp_reducer *r = calloc(1, sizeof *r);
    if (!r) { dp_error("nn.DistributedDataParallel: out of memory"); return NULL; }
    pthread_mutex_init(&r->lock, NULL);
    r->n = n;
    r->backend = g.backend;
    r->generation = g.generation;
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
        REQUIRE(dp_dtype_is_float(p->dtype),
                 "nn.DistributedDataParallel: %s has dtype %s; parameters must be float32 or float64",
                 name, dp_dtype_name(p->dtype));
        if (i == 0) r->device = p->device;
        REQUIRE(dp_device_eq(p->device, r->device),
                 "nn.DistributedDataParallel: parameters must all be on one device, found %s (%s) and %s (%s)",
                 dp_device_str(r->device, d1), r->slots[0].name, dp_device_str(p->device, d2), name);
        REQUIRE(g.backend != DP_DIST_MPI || p->device.type == DP_DEVICE_CPU,
                 "nn.DistributedDataParallel: the mpi backend takes CPU tensors, but %s is on %s "
                 "(use init_process_group{backend='nccl'} for CUDA models)", name, dp_device_str(p->device, d1));
        REQUIRE(g.backend != DP_DIST_NCCL || p->device.type == DP_DEVICE_CUDA,
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
    }
    reducer_reset(r);
    for (int i = 0; i < n; i++) dp_set_grad_ready_hook(r->slots[i].param, reducer_hook, &r->slots[i]);
    return r;
fail:
    dp_reducer_free(r);
    return NULL;
}

/* Starts bucket b's all-reduce (caller holds r->lock). */
static int bucket_launch(dp_reducer *r, dp_bucket *b) {
    int rc = 0;
    pthread_mutex_lock(&g.lock);
    if (r->backend == DP_DIST_NCCL) {
        int dev = r->device.index;
        void *comm = NULL, *stream = NULL;
        char err[256];
        if (nccl_comm_for(dev, &comm, &stream) != 0 || dp_cuda_synchronize(dev) != 0) rc = -1;
        else if (g.nccl.all_reduce(comm, stream, dev, dp_data(b->buffer), b->numel, (int)b->dtype,
                                   DP_DIST_AVG, err, sizeof err) != 0)
            rc = dp_error("NCCL all-reduce: %s", err);
    } else {
#ifdef DP_HAVE_MPI
        int e = MPI_Iallreduce(MPI_IN_PLACE, dp_data(b->buffer), (int)b->numel, mpi_type(b->dtype),
                               MPI_SUM, g.comm, &b->req);
        if (e != MPI_SUCCESS) rc = mpi_fail("MPI_Iallreduce", e);
#endif
    }
    pthread_mutex_unlock(&g.lock);
    if (rc == 0) {
        b->launched = true;
        r->stats.allreduces++;
        r->stats.bytes += b->numel * (int64_t)dp_dtype_size(b->dtype);
        if (r->n_ready < r->n) r->stats.early++;
    }
    return rc;
}

/* Lets started MPI all-reduces progress while backward goes on. */
static void buckets_progress(dp_reducer *r) {
#ifdef DP_HAVE_MPI
    if (r->backend != DP_DIST_MPI) return;
    pthread_mutex_lock(&g.lock);
    for (int b = 0; b < r->next_launch; b++) {
        int done = 0;
        if (r->buckets[b].req != MPI_REQUEST_NULL) MPI_Test(&r->buckets[b].req, &done, MPI_STATUS_IGNORE);
    }
    pthread_mutex_unlock(&g.lock);
#else
    (void)r;
#endif
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
    dp_tensor *v = flat_view(b->buffer, s->offset, s->param->ndim, s->param->sizes);
    if (!v) return -1;
    int rc = grad ? raw_copy(v, grad) : dp_fill_(v, 0);
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
        dp_tensor *v = flat_view(b->buffer, s->offset, p->ndim, p->sizes);
        rc = v ? raw_copy(dst, v) : -1;
        dp_tensor_release(v);
        if (rc == 0 && divide_by != 1) rc = dp_binary_scalar_(DP_DIV, dst, (double)divide_by);
    }
    if (rc == 0) {
        if (in_place) bump_version(dst);
        else dp_set_grad(p, dst);
    }
    dp_tensor_release(dst);
    return rc;
}

/* All buckets are started: waits for them and writes the averages back. */
static int reducer_finish(dp_reducer *r) {
    int64_t divide_by = 1;
    pthread_mutex_lock(&g.lock);
    int rc = 0;
    if (r->backend == DP_DIST_NCCL) {
        char err[256];
        int dev = r->device.index;
        if (g.nccl_stream[dev] && g.nccl.stream_sync(g.nccl_stream[dev], dev, err, sizeof err) != 0)
            rc = dp_error("NCCL: %s", err);
    } else {
#ifdef DP_HAVE_MPI
        divide_by = g.world_size;
        for (int b = 0; b < r->n_buckets && rc == 0; b++) {
            int e = MPI_Wait(&r->buckets[b].req, MPI_STATUS_IGNORE);
            if (e != MPI_SUCCESS) rc = mpi_fail("MPI_Wait", e);
        }
#endif
    }
    pthread_mutex_unlock(&g.lock);
    for (int i = 0; i < r->n && rc == 0; i++) rc = slot_copy_out(r, &r->slots[i], divide_by);
    if (rc == 0) r->stats.passes++;
    return rc;
}

static void reducer_hook(void *ctx, dp_tensor *leaf) {
    dp_reducer_slot *s = ctx;
    dp_reducer *r = s->r;
    char msg[400];
    pthread_mutex_lock(&r->lock);
    if (!r->armed || r->failed) goto out;
    if (!g.initialized || g.generation != r->generation) {
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
    if (!r->failed && (!g.initialized || g.generation != r->generation))
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
