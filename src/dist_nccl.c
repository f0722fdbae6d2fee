/* dist_nccl.c: the nccl backend of torch.distributed, for CUDA tensors.  NCCL is reached
 * through the functions that the CUDA backend library exports (kernels/comm.cu, declared
 * in kernels/comm.h), found with dp_backend_symbol.  One communicator and one stream per
 * local CUDA device, made at the first collective on it with a unique id that rank 0
 * makes and broadcasts over MPI.  Every function here is called with dp_group.lock held.
 *
 * Streams.  A collective waits on NCCL's stream for an event of the device's compute stream
 * (what the engine wrote before it), and the compute stream waits for an event of NCCL's
 * stream after it: the host never waits, and work queued later sees the result.
 *
 * One GPU per rank.  NCCL cannot put two ranks on one physical GPU (ncclCommInitRank fails
 * with "Duplicate GPU detected"), which is where ranks sharing a GPU under
 * DPLUA_CUDA_VIRTUAL, or several ranks on cuda:0, end up.  Before the communicator is made,
 * the ranks exchange the host name and PCI bus id of their GPU over MPI and every rank raises
 * the same error naming the fix (backend 'mpi', which stages through host memory). */
#include "dist_comm.h"
#include "backend.h"

#include "../kernels/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    dp_nccl_get_unique_id_fn *get_unique_id;
    dp_nccl_comm_init_fn *comm_init;
    dp_nccl_comm_destroy_fn *comm_destroy;
    dp_nccl_all_reduce_fn *all_reduce;
    dp_nccl_broadcast_fn *broadcast;
    dp_nccl_all_gather_fn *all_gather;
    dp_nccl_stream_sync_fn *stream_sync;
    dp_nccl_bus_id_fn *bus_id;
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
    NCCL_LOAD(bus_id);
    return nccl.get_unique_id && nccl.comm_init && nccl.comm_destroy && nccl.all_reduce &&
           nccl.broadcast && nccl.all_gather && nccl.stream_sync && nccl.bus_id;
}

bool dp_dist_has_nccl(void) { return dp_dist_nccl_load(); }

/* Fails on every rank alike when two ranks would put their communicators on one GPU: each
 * rank's "host PCI-bus-id" is gathered over MPI (a rank whose GPU cannot say sends an empty
 * one, and is never matched). */
static int check_one_gpu_per_rank(int dev) {
    char mine[320] = "", bus[64] = "", host[256] = "";
    if (nccl.bus_id(dev, bus, sizeof bus) != 0) bus[0] = '\0';
    if (gethostname(host, sizeof host) != 0) host[0] = '\0';
    host[sizeof host - 1] = '\0';
    if (bus[0]) snprintf(mine, sizeof mine, "%s %s", host, bus);
    int w = dp_group.world_size;
    size_t *lens = malloc(sizeof(size_t) * (size_t)w);
    char *all = NULL;
    if (!lens) return dp_error("torch.distributed: out of memory");
    if (dp_dist_mpi_all_gather_bytes(mine, strlen(mine), &all, lens) != 0) { free(lens); return -1; }
    int rc = 0;
    size_t off_a = 0;
    for (int a = 0; a < w && rc == 0; off_a += lens[a], a++) {
        size_t off_b = off_a + lens[a];
        for (int b = a + 1; b < w && rc == 0; off_b += lens[b], b++) {
            if (lens[a] == 0 || lens[a] != lens[b] || memcmp(all + off_a, all + off_b, lens[a]) != 0) continue;
            const char *id = memchr(all + off_a, ' ', lens[a]);
            int id_len = id ? (int)(all + off_a + lens[a] - id - 1) : 0;
            rc = dp_error("torch.distributed: backend 'nccl' cannot put two ranks on one GPU (ranks %d and %d "
                          "both on GPU %.*s, rank %d as cuda:%d); use backend = 'mpi', which takes CUDA tensors "
                          "through host memory and lets ranks share a GPU, or give each rank its own GPU "
                          "(e.g. cuda:<local rank>)", a, b, id_len, id ? id + 1 : "", dp_group.rank, dev);
        }
    }
    free(all);
    free(lens);
    return rc;
}

/* The group's communicator for CUDA device dev, made on first use: every rank makes its
 * own at the same collective call, with rank 0's unique id. */
static int comm_for(int dev, void **comm, void **stream) {
    if (!nccl_comm[dev]) {
        if (check_one_gpu_per_rank(dev) != 0) return -1;
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

/* Makes stream `waiter` (NULL: dev's compute stream) wait for the work queued so far on
 * `other`, through an event; the host does not wait. */
static int join(int dev, void *waiter, void *other) {
    const dp_backend *be = dp_backend_for((dp_device){ DP_DEVICE_CUDA, dev });
    void *e = NULL;
    int rc = be ? be->event_record(dev, other, &e) : -1;
    if (rc == 0) rc = be->stream_wait_event(dev, waiter, e);
    if (e) be->event_release(dev, e);
    return rc;
}

/* The communicator of dev, with its stream queued behind what the engine queued so far on
 * dev (a collective runs on its own stream and must see what the engine wrote). */
static int ready(int dev, void **comm, void **stream) {
    if (comm_for(dev, comm, stream) != 0) return -1;
    return join(dev, *stream, NULL);
}

/* The compute stream's later work waits for the collective queued on stream. */
static int finish(int rc, void *stream, int dev) {
    if (rc == 0) rc = join(dev, NULL, stream);
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
    /* the bucket stays out of the allocator's reach while NCCL's stream may use it, even
     * when the reducer is freed after a failure */
    if (dp_backend_for(dev)->record_stream(dev.index, data, stream) != 0) return -1;
    if (nccl.all_reduce(comm, stream, dev.index, data, n, dt, DP_DIST_AVG) != 0)
        return dp_error("NCCL all-reduce: %s", dp_last_error());
    return 0;
}

/* The compute stream waits for the all-reduces queued so far; the host does not. */
static int nccl_wait(void *work, dp_device dev, const char *where) {
    void *stream = nccl_stream[dev.index];
    if (stream && join(dev.index, NULL, stream) != 0) return dp_error("NCCL: %s", dp_last_error());
    return 0;
}

/* Syncs and frees the communicators.  Their streams stay (as PyTorch's pool streams do):
 * the blocks NCCL used are marked with record_stream and name the stream until they are
 * freed, which may be after the group is gone (a DDP bucket freed later), when the
 * allocator records an event on it. */
static void nccl_group_free(void) {
    for (int d = 0; d < DP_DIST_MAX_DEVICES; d++) {
        if (nccl_comm[d]) {
            nccl.stream_sync(nccl_stream[d], d);
            nccl.comm_destroy(nccl_comm[d], NULL, d);
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
