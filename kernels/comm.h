/* comm.h: the NCCL collectives that libdplua_cuda.so exports for torch.distributed's nccl
 * backend.  kernels/comm.cu defines them; the engine (src/dist_nccl.c) finds them with
 * dp_cuda_symbol and casts what it gets to the pointer types below.  Both sides see the
 * same function types, so a change on one side that the other misses fails to compile.
 *
 * Counts are ELEMENTS, never bytes; dtype is a dp_dtype (src/dp.h), op a dp_dist_op
 * (src/dist.h).  Each call works on one communicator and its stream, on the (virtual) CUDA
 * device `device`, and returns 0, or -1 with the engine's message set (dp_cuda_error). */
#ifndef DP_KERNELS_COMM_H
#define DP_KERNELS_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "../src/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes the engine reserves for ncclUniqueId when it broadcasts one (NCCL's is 128). */
#define DP_NCCL_ID_BYTES 128

/* Fills id (idlen bytes) with a new ncclUniqueId (made on rank 0, broadcast over MPI). */
typedef int dp_nccl_get_unique_id_fn(void *id, size_t idlen);
/* A communicator for this rank on `device`, and a non-blocking stream for its collectives. */
typedef int dp_nccl_comm_init_fn(int device, int nranks, const void *id, size_t idlen, int rank,
                                 void **comm, void **stream);
/* Waits for the stream, then frees the communicator and the stream. */
typedef int dp_nccl_comm_destroy_fn(void *comm, void *stream, int device);
/* In place: data holds count elements. */
typedef int dp_nccl_all_reduce_fn(void *comm, void *stream, int device, void *data, int64_t count,
                                  dp_dtype dtype, dp_dist_op op);
/* In place: root's data is copied into every rank's. */
typedef int dp_nccl_broadcast_fn(void *comm, void *stream, int device, void *data, int64_t count,
                                 dp_dtype dtype, int root);
/* recv holds nranks * count elements: rank r's send lands at recv + r * count. */
typedef int dp_nccl_all_gather_fn(void *comm, void *stream, int device, const void *send, void *recv,
                                  int64_t count, dp_dtype dtype);
/* Waits for everything queued on the stream. */
typedef int dp_nccl_stream_sync_fn(void *stream, int device);
/* The PCI bus id of the GPU under `device` (several virtual devices share one). */
typedef int dp_nccl_bus_id_fn(int device, char *buf, size_t len);

/* What comm.cu defines (and exports, also from a library built with hidden visibility, as
 * the emulation's is; the engine does not link against them). */
#define DP_NCCL_API __attribute__((visibility("default")))
DP_NCCL_API dp_nccl_get_unique_id_fn dp_nccl_get_unique_id;
DP_NCCL_API dp_nccl_comm_init_fn dp_nccl_comm_init;
DP_NCCL_API dp_nccl_comm_destroy_fn dp_nccl_comm_destroy;
DP_NCCL_API dp_nccl_all_reduce_fn dp_nccl_all_reduce;
DP_NCCL_API dp_nccl_broadcast_fn dp_nccl_broadcast;
DP_NCCL_API dp_nccl_all_gather_fn dp_nccl_all_gather;
DP_NCCL_API dp_nccl_stream_sync_fn dp_nccl_stream_sync;
DP_NCCL_API dp_nccl_bus_id_fn dp_nccl_bus_id;

#ifdef __cplusplus
}
#endif
#endif
