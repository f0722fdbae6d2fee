/* comm.cu: NCCL collectives for torch.distributed's nccl backend (src/dist_nccl.c), with
 * the plain C names and types declared in comm.h.  Each call works on one communicator and
 * its stream; counts are ELEMENTS, never bytes.  Failures return -1 with the engine's
 * message set, as every launcher of this library does (CUDA_CHECK, NCCL_CHECK). */
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdint.h>
#include <string.h>

#include "common.cuh"
#include "comm.h"

/* What NCCL said about its last failure (ncclGetLastError, from NCCL 2.13): its result
 * string alone says only "invalid usage". */
static const char *nccl_detail(void)
{
#if NCCL_MAJOR > 2 || (NCCL_MAJOR == 2 && NCCL_MINOR >= 13)
    const char *s = ncclGetLastError(NULL);
    return s ? s : "";
#else
    return "";
#endif
}

/* Evaluates an ncclResult_t expression; on failure sets the message (with file and line)
 * and returns -1 from the enclosing function. */
#define NCCL_CHECK(expr)                                                                   \
    do {                                                                                   \
        ncclResult_t r_ = (expr);                                                          \
        if (r_ != ncclSuccess)                                                             \
            return dp_cuda_error("NCCL error at %s:%d: %s (%s)%s%s", __FILE__, __LINE__,  \
                                 ncclGetErrorString(r_), #expr, *nccl_detail() ? ": " : "", \
                                 nccl_detail());                                           \
    } while (0)

/* dplua's device index -> the GPU it runs on (they differ under DPLUA_CUDA_VIRTUAL) */
static int physical(int device)
{
    int p = dp_cuda_physical_device(device);
    return p >= 0 ? p : device;
}

static int nccl_type(dp_dtype dtype, ncclDataType_t *out)
{
    switch (dtype) {
    case DP_FLOAT32: *out = ncclFloat32; return 0;
    case DP_FLOAT64: *out = ncclFloat64; return 0;
    case DP_INT64: *out = ncclInt64; return 0;
    case DP_BOOL: *out = ncclUint8; return 0;
    default: return dp_cuda_error("NCCL: no NCCL type for dtype %d", (int)dtype);
    }
}

static int nccl_op(dp_dist_op op, dp_dtype dtype, ncclRedOp_t *out)
{
    if (dtype == DP_BOOL) {   /* bools: sum and max are "or", min and product are "and" */
        if (op == DP_DIST_AVG) return dp_cuda_error("NCCL: op 'avg' is not defined for bool tensors");
        if (op == DP_DIST_SUM || op == DP_DIST_MAX || op == DP_DIST_MIN || op == DP_DIST_PRODUCT) {
            *out = op == DP_DIST_MIN || op == DP_DIST_PRODUCT ? ncclMin : ncclMax;
            return 0;
        }
    }
    switch (op) {
    case DP_DIST_SUM: *out = ncclSum; return 0;
    case DP_DIST_PRODUCT: *out = ncclProd; return 0;
    case DP_DIST_AVG: *out = ncclAvg; return 0;   /* integers: truncated, as NCCL does */
    case DP_DIST_MAX: *out = ncclMax; return 0;
    case DP_DIST_MIN: *out = ncclMin; return 0;
    default: return dp_cuda_error("NCCL: unknown reduction op %d", (int)op);
    }
}

extern "C" {

int dp_nccl_get_unique_id(void *id, size_t idlen)
{
    if (idlen < sizeof(ncclUniqueId))
        return dp_cuda_error("NCCL: unique id buffer of %zu bytes is smaller than NCCL's %zu", idlen,
                             sizeof(ncclUniqueId));
    ncclUniqueId uid;
    NCCL_CHECK(ncclGetUniqueId(&uid));
    memcpy(id, &uid, sizeof uid);
    return 0;
}

int dp_nccl_comm_init(int device, int nranks, const void *id, size_t idlen, int rank,
                      void **comm, void **stream)
{
    if (idlen < sizeof(ncclUniqueId))
        return dp_cuda_error("NCCL: unique id of %zu bytes is smaller than NCCL's %zu", idlen,
                             sizeof(ncclUniqueId));
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    CUDA_CHECK(cudaSetDevice(physical(device)));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ncclComm_t c;
    ncclResult_t r = ncclCommInitRank(&c, nranks, uid, rank);
    if (r != ncclSuccess) {
        cudaStreamDestroy(s);
        return dp_cuda_error("ncclCommInitRank(rank %d of %d on cuda:%d): %s%s%s", rank, nranks, device,
                             ncclGetErrorString(r), *nccl_detail() ? ": " : "", nccl_detail());
    }
    *comm = c;
    *stream = s;
    return 0;
}

int dp_nccl_comm_destroy(void *comm, void *stream, int device)
{
    CUDA_CHECK(cudaSetDevice(physical(device)));
    if (stream) CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    if (comm) NCCL_CHECK(ncclCommDestroy((ncclComm_t)comm));
    if (stream) CUDA_CHECK(cudaStreamDestroy((cudaStream_t)stream));
    return 0;
}

int dp_nccl_all_reduce(void *comm, void *stream, int device, void *data, int64_t count, dp_dtype dtype,
                       dp_dist_op op)
{
    ncclDataType_t t;
    ncclRedOp_t o;
    if (nccl_type(dtype, &t) != 0 || nccl_op(op, dtype, &o) != 0) return -1;
    CUDA_CHECK(cudaSetDevice(physical(device)));
    NCCL_CHECK(ncclAllReduce(data, data, (size_t)count, t, o, (ncclComm_t)comm, (cudaStream_t)stream));
    return 0;
}

int dp_nccl_broadcast(void *comm, void *stream, int device, void *data, int64_t count, dp_dtype dtype,
                      int root)
{
    ncclDataType_t t;
    if (nccl_type(dtype, &t) != 0) return -1;
    CUDA_CHECK(cudaSetDevice(physical(device)));
    NCCL_CHECK(ncclBroadcast(data, data, (size_t)count, t, root, (ncclComm_t)comm, (cudaStream_t)stream));
    return 0;
}

int dp_nccl_all_gather(void *comm, void *stream, int device, const void *send, void *recv,
                       int64_t count, dp_dtype dtype)
{
    ncclDataType_t t;
    if (nccl_type(dtype, &t) != 0) return -1;
    CUDA_CHECK(cudaSetDevice(physical(device)));
    NCCL_CHECK(ncclAllGather(send, recv, (size_t)count, t, (ncclComm_t)comm, (cudaStream_t)stream));
    return 0;
}

int dp_nccl_bus_id(int device, char *buf, size_t len)
{
    CUDA_CHECK(cudaDeviceGetPCIBusId(buf, (int)len, physical(device)));
    return 0;
}

int dp_nccl_stream_sync(void *stream, int device)
{
    CUDA_CHECK(cudaSetDevice(physical(device)));
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

}  /* extern "C" */
