/* dist_comm.h: what the files of torch.distributed share (not installed, not for the
 * binding): the process group's state, the collective interface each backend fills in,
 * and the MPI transport that creates the group and bootstraps NCCL.
 *
 *   dist.c          the process group: init/destroy, argument checks, the collectives
 *   dist_mpi.c      MPI: start-up and exit, the group's communicator, the mpi backend
 *   dist_nccl.c     NCCL through libdplua_cuda.so (kernels/comm.h): the nccl backend
 *   dist_reducer.c  DistributedDataParallel's gradient reducer
 *
 * A backend moves the bytes of contiguous buffers; the group above it checks tensors, makes
 * them contiguous, copies results back and bumps versions.  Backend calls are made with
 * dp_group.lock held (MPI runs in MPI_THREAD_SERIALIZED). */
#ifndef DP_DIST_COMM_H
#define DP_DIST_COMM_H

#include <pthread.h>

#include "dist.h"

#define DP_DIST_MAX_DEVICES 64

/* One collective interface per backend, as dp_backend is one device interface per device
 * type.  `where` describes the call for messages ("all_reduce('sum') of float32 [4]").
 * Every function returns 0, or -1 with dp_error() set. */
typedef struct dp_dist_comm {
    const char *name;
    /* In place on n elements of data. */
    int (*all_reduce)(void *data, int64_t n, dp_dtype dt, dp_device dev, dp_dist_op op, const char *where);
    int (*broadcast)(void *data, int64_t n, dp_dtype dt, dp_device dev, int src, const char *where);
    /* recv holds world_size * n elements: rank r's send lands at recv + r * n. */
    int (*all_gather)(const void *send, void *recv, int64_t n, dp_dtype dt, dp_device dev, const char *where);
    /* The reducer's bucket: starts averaging n elements in place and returns at once.  *work
     * is handed to progress and wait; *divide_by is what the caller still divides the
     * result by (the world size where the backend only sums). */
    int (*average_start)(void *data, int64_t n, dp_dtype dt, dp_device dev, void **work, int64_t *divide_by);
    /* Lets started work progress while backward goes on (NULL: it progresses by itself). */
    void (*progress)(void *work);
    /* Waits for started work and frees it. */
    int (*wait)(void *work, dp_device dev, const char *where);
    /* Frees what the backend made for the group (called by destroy). */
    void (*group_free)(void);
} dp_dist_comm;

extern const dp_dist_comm dp_dist_mpi_comm;
extern const dp_dist_comm dp_dist_nccl_comm;

/* The process group: one per process. */
typedef struct {
    bool initialized;          /* a process group exists */
    int backend;               /* dp_dist_backend, -1 when none */
    const dp_dist_comm *comm;  /* its collectives */
    int rank, world_size, local_rank;
    uint64_t generation;       /* bumped by every init: reducers of a destroyed group notice */
    char broken[512];          /* set when a collective of this group failed for good */
    pthread_mutex_t lock;      /* serialises MPI and NCCL calls */
} dp_dist_group;

extern dp_dist_group dp_group;

/* The standard message for a call before init_process_group; returns -1. */
int dp_dist_not_initialized(const char *what);
/* The elements [offset, offset + numel(sizes)) of a flat contiguous tensor, shaped as sizes
 * (a new reference). */
dp_tensor *dp_dist_flat_view(dp_tensor *flat, int64_t offset, int ndim, const int64_t *sizes);
/* Records that the group cannot be used any more (a rank left it); the message is raised
 * by destroy_process_group and printed at exit. */
void dp_dist_mark_broken(const char *msg);

/* Loads the NCCL entry points of the CUDA backend library (dist_nccl.c); false when any
 * is missing. */
bool dp_dist_nccl_load(void);

/* ---- the MPI transport (dist_mpi.c); without MPI these fail with a message */
/* Starts MPI when nobody has, and makes the group's communicator: fills rank, world size
 * and local rank of dp_group. */
int dp_dist_mpi_group_create(void);
/* Frees the group's communicator and tells the other ranks how many collectives this one
 * took part in. */
void dp_dist_mpi_group_free(void);
int dp_dist_mpi_barrier(const char *where);
/* Copies rank root's n bytes into every rank's buf. */
int dp_dist_mpi_bcast_bytes(void *buf, size_t n, int root, const char *where);
int dp_dist_mpi_all_gather_bytes(const void *data, size_t n, char **out, size_t *lens);
/* Checks that every rank makes the same call (`what`: the collective, its dtype, shape and
 * op or root): fails on every rank alike, naming each rank's call, when they differ. */
int dp_dist_mpi_check_same(const char *who, const char *what);

#endif
