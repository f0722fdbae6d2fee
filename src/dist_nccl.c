/* dist_nccl.c: the nccl backend of torch.distributed, for CUDA tensors.  NCCL is reached
 * through the functions that the CUDA backend library exports (kernels/comm.cu, declared
 * in kernels/comm.h), found with dp_backend_symbol.  One communicator and one stream per
 * local CUDA device, made at the first collective on it with a unique id that rank 0
 * makes and broadcasts over MPI.  Every function here is called with dp_group.lock held. */
#include "dist_comm.h"
#include "backend.h"

#include "../kernels/comm.h"

#include <stdio.h>
#include <string.h>

static struct {
    dp_nccl_get_unique_id_fn *get_unique_id;
    dp_nccl_comm_init_fn *comm_init;
    dp_nccl_comm_destroy_fn *comm_destroy;
    dp_nccl_all_reduce_fn *all_reduce;
    dp_nccl_broadcast_fn *broadcast;
    dp_nccl_all_gather_fn *all_gather;
    dp_nccl_stream_sync_fn *stream_sync;
} nccl;

static void *nccl_comm[DP_DIST_MAX_DEVICES];    /* per local CUDA device, made on first use */
static void *nccl_stream[DP_DIST_MAX_DEVICES];

#define NCCL_LOAD(name) (nccl.name = (dp_nccl_##name##_fn *)dp_backend_symbol(DP_DEVICE_CUDA, "dp_nccl_" #name))

bool dp_dist_nccl_load(void) {
    NCCL_LOAD(get_unique_id);
    NCCL_LOAD(comm_init);
    NCCL_LOAD(comm_destroy);
    NCCL_LOAD(all_reduce);
    NCCL_LOAD(broadcast);
    NCCL_LOAD(all_gather);
    NCCL_LOAD(stream_sync);
    return nccl.get_unique_id && nccl.comm_init && nccl.comm_destroy && nccl.all_reduce &&
           nccl.broadcast && nccl.all_gather && nccl.stream_sync;
}

bool dp_dist_has_nccl(void) { return dp_dist_nccl_load(); }

/* The group's communicator for CUDA device dev, made on first use: every rank makes its
 * own at the same collective call, with rank 0's unique id. */
static int comm_for(int dev, void **comm, void **stream) {
    if (!nccl_comm[dev]) {
        struct { int ok; char id[DP_NCCL_ID_BYTES]; char err[200]; } msg;
        memset(&msg, 0, sizeof msg);
        if (dp_group.rank == 0) {
            msg.ok = nccl.get_unique_id(msg.id, sizeof msg.id) == 0;
            if (!msg.ok) snprintf(msg.err, sizeof msg.err, "%s", dp_last_error());
        }
        if (dp_dist_mpi_bcast_bytes(&msg, sizeof msg, 0, "the broadcast of the NCCL unique id") != 0) return -1;
        if (!msg.ok) return dp_error("torch.distributed: ncclGetUniqueId failed on rank 0: %s", msg.err);
        if (nccl.comm_init(dev, dp_group.world_size, msg.id, sizeof msg.id, dp_group.rank, &nccl_comm[dev],
                           &nccl_stream[dev]) != 0) {
            nccl_comm[dev] = nccl_stream[dev] = NULL;
            return dp_error("torch.distributed: NCCL communicator for cuda:%d (rank %d of %d): %s",
                            dev, dp_group.rank, dp_group.world_size, dp_last_error());
        }
    }
    *comm = nccl_comm[dev];
    *stream = nccl_stream[dev];
    return 0;
}

/* The communicator of dev, once the engine's work queued on dev is done (a collective
 * runs on its own stream and must see what the engine wrote). */
static int ready(int dev, void **comm, void **stream) {
    if (comm_for(dev, comm, stream) != 0) return -1;
    return dp_device_synchronize(DP_DEVICE_CUDA, dev);
}

/* Waits for a collective queued on stream, so the data is ready for whatever comes next. */
static int finish(int rc, void *stream, int dev) {
    if (rc == 0) rc = nccl.stream_sync(stream, dev);
    return rc == 0 ? 0 : dp_error("torch.distributed: NCCL: %s", dp_last_error());
}

static int nccl_all_reduce(void *data, int64_t n, dp_dtype dt, dp_device dev, dp_dist_op op, const char *where) {
    void *comm, *stream;
    if (ready(dev.index, &comm, &stream) != 0) return -1;
    return finish(nccl.all_reduce(comm, stream, dev.index, data, n, dt, op), stream, dev.index);
}

static int nccl_broadcast(void *data, int64_t n, dp_dtype dt, dp_device dev, int src, const char *where) {
    void *comm, *stream;
    if (ready(dev.index, &comm, &stream) != 0) return -1;
    return finish(nccl.broadcast(comm, stream, dev.index, data, n, dt, src), stream, dev.index);
}

static int nccl_all_gather(const void *send, void *recv, int64_t n, dp_dtype dt, dp_device dev, const char *where) {
    void *comm, *stream;
    if (ready(dev.index, &comm, &stream) != 0) return -1;
    return finish(nccl.all_gather(comm, stream, dev.index, send, recv, n, dt), stream, dev.index);
}

/* NCCL averages by itself; the work is the queue of the device's stream. */
static int nccl_average_start(void *data, int64_t n, dp_dtype dt, dp_device dev, void **work, int64_t *divide_by) {
    void *comm, *stream;
    *work = NULL;
    *divide_by = 1;
    if (ready(dev.index, &comm, &stream) != 0) return -1;
    if (nccl.all_reduce(comm, stream, dev.index, data, n, dt, DP_DIST_AVG) != 0)
        return dp_error("NCCL all-reduce: %s", dp_last_error());
    return 0;
}

static int nccl_wait(void *work, dp_device dev, const char *where) {
    void *stream = nccl_stream[dev.index];
    if (stream && nccl.stream_sync(stream, dev.index) != 0) return dp_error("NCCL: %s", dp_last_error());
    return 0;
}

/* Syncs and frees the communicators. */
static void nccl_group_free(void) {
    for (int d = 0; d < DP_DIST_MAX_DEVICES; d++) {
        if (nccl_comm[d]) {
            nccl.comm_destroy(nccl_comm[d], nccl_stream[d], d);
            nccl_comm[d] = nccl_stream[d] = NULL;
        }
    }
}

const dp_dist_comm dp_dist_nccl_comm = {
    /* .name          = */ "nccl",
    /* .all_reduce    = */ nccl_all_reduce,
    /* .broadcast     = */ nccl_broadcast,
    /* .all_gather    = */ nccl_all_gather,
    /* .average_start = */ nccl_average_start,
    /* .progress      = */ NULL,
    /* .wait          = */ nccl_wait,
    /* .group_free    = */ nccl_group_free,
};
