/* comm.cu: NCCL collectives for torch.distributed's nccl backend, exported with plain C
 * names so that the engine (src/dist.c) finds them with dp_cuda_symbol.  Each call works on
 * one communicator and its stream; counts are ELEMENTS, never bytes.  Failures return -1
 * with a message in err (this library does not reach the engine's error state, since it may
 * be loaded where the engine's symbols are not visible). */
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"

/* dplua's device index -> the GPU it runs on (they differ under DPLUA_CUDA_VIRTUAL) */
static int physical(int device)
{
    int p = dp_cuda_physical_device(device);
    return p >= 0 ? p : device;
}

/* dtype and op numbers as in src/dp.h (dp_dtype) and src/dist.h (dp_dist_op). */
enum { F32 = 0, F64 = 1, I64 = 2, BOOL8 = 3 };
enum { OP_SUM = 0, OP_AVG = 1, OP_MAX = 2, OP_MIN = 3 };

#define CUDA_CHECK(call)                                                                    \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            snprintf(err, errlen, "%s:%d: %s: %s", __FILE__, __LINE__, #call,               \
                     cudaGetErrorString(e_));                                               \
            return -1;                                                                      \
        }                                                                                   \
    } while (0)

#define NCCL_CHECK(call)                                                                    \
    do {                                                                                    \
        ncclResult_t r_ = (call);                                                           \
        if (r_ != ncclSuccess) {                                                            \
            snprintf(err, errlen, "%s:%d: %s: %s", __FILE__, __LINE__, #call,               \
                     ncclGetErrorString(r_));                                               \
            return -1;                                                                      \
        }                                                                                   \
    } while (0)

static int nccl_type(int dtype, ncclDataType_t *out, char *err, size_t errlen) {
    switch (dtype) {
    case F32: *out = ncclFloat32; return 0;
    case F64: *out = ncclFloat64; return 0;
    case I64: *out = ncclInt64; return 0;
    case BOOL8: *out = ncclUint8; return 0;
    default: snprintf(err, errlen, "no NCCL type for dtype %d", dtype); return -1;
    }
}

static int nccl_op(int op, int dtype, ncclRedOp_t *out, char *err, size_t errlen) {
    if (dtype == BOOL8) {   /* bools: sum and max are "or", min is "and" */
        if (op == OP_AVG) { snprintf(err, errlen, "op 'avg' is not defined for bool tensors"); return -1; }
        *out = op == OP_MIN ? ncclMin : ncclMax;
        return 0;
    }
    switch (op) {
    case OP_SUM: *out = ncclSum; return 0;
    case OP_AVG: *out = ncclAvg; return 0;   /* integers: truncated, as NCCL does */
    case OP_MAX: *out = ncclMax; return 0;
    case OP_MIN: *out = ncclMin; return 0;
    default: snprintf(err, errlen, "unknown reduction op %d", op); return -1;
    }
}

extern "C" {

int dp_nccl_get_unique_id(void *id, size_t idlen, char *err, size_t errlen) {
    if (idlen < sizeof(ncclUniqueId)) {
        snprintf(err, errlen, "unique id buffer of %zu bytes is smaller than NCCL's %zu", idlen,
                 sizeof(ncclUniqueId));
        return -1;
    }
    ncclUniqueId uid;
    NCCL_CHECK(ncclGetUniqueId(&uid));
    memcpy(id, &uid, sizeof uid);
    return 0;
}

/* A communicator for this rank on CUDA device `device`, and a stream for its collectives. */
int dp_nccl_comm_init(int device, int nranks, const void *id, size_t idlen, int rank,
                      void **comm, void **stream, char *err, size_t errlen) {
    if (idlen < sizeof(ncclUniqueId)) {
        snprintf(err, errlen, "unique id of %zu bytes is smaller than NCCL's %zu", idlen,
                 sizeof(ncclUniqueId));
        return -1;
    }
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    CUDA_CHECK(cudaSetDevice(physical(device)));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ncclComm_t c;
    ncclResult_t r = ncclCommInitRank(&c, nranks, uid, rank);
    if (r != ncclSuccess) {
        cudaStreamDestroy(s);
        snprintf(err, errlen, "ncclCommInitRank(rank %d of %d on cuda:%d): %s", rank, nranks, device,
                 ncclGetErrorString(r));
        return -1;
    }
    *comm = c;
    *stream = s;
    return 0;
}

int dp_nccl_comm_destroy(void *comm, void *stream, int device, char *err, size_t errlen) {
    CUDA_CHECK(cudaSetDevice(physical(device)));
    if (stream) CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    if (comm) NCCL_CHECK(ncclCommDestroy((ncclComm_t)comm));
    if (stream) CUDA_CHECK(cudaStreamDestroy((cudaStream_t)stream));
    return 0;
}

/* In place: data holds count elements on `device`. */
int dp_nccl_all_reduce(void *comm, void *stream, int device, void *data, int64_t count, int dtype,
                       int op, char *err, size_t errlen) {
    ncclDataType_t t;
    ncclRedOp_t o;
    if (nccl_type(dtype, &t, err, errlen) != 0 || nccl_op(op, dtype, &o, err, errlen) != 0) return -1;
    CUDA_CHECK(cudaSetDevice(physical(device)));
    NCCL_CHECK(ncclAllReduce(data, data, (size_t)count, t, o, (ncclComm_t)comm, (cudaStream_t)stream));
    return 0;
}

/* In place: root's data is copied into every rank's. */
int dp_nccl_broadcast(void *comm, void *stream, int device, void *data, int64_t count, int dtype,
                      int root, char *err, size_t errlen) {
    ncclDataType_t t;
    if (nccl_type(dtype, &t, err, errlen) != 0) return -1;
    CUDA_CHECK(cudaSetDevice(physical(device)));
    NCCL_CHECK(ncclBroadcast(data, data, (size_t)count, t, root, (ncclComm_t)comm, (cudaStream_t)stream));
    return 0;
}

/* recv holds nranks * count elements: rank r's send lands at recv + r * count. */
int dp_nccl_all_gather(void *comm, void *stream, int device, const void *send, void *recv,
                       int64_t count, int dtype, char *err, size_t errlen) {
    ncclDataType_t t;
    if (nccl_type(dtype, &t, err, errlen) != 0) return -1;
    CUDA_CHECK(cudaSetDevice(physical(device)));
    NCCL_CHECK(ncclAllGather(send, recv, (size_t)count, t, (ncclComm_t)comm, (cudaStream_t)stream));
    return 0;
}

int dp_nccl_stream_sync(void *stream, int device, char *err, size_t errlen) {
    CUDA_CHECK(cudaSetDevice(physical(device)));
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

}  /* extern "C" */
