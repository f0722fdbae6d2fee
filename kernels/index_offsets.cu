/* index_offsets.cu: advanced indexing's element offsets (dp_backend.index_offsets), computed
 * from the index tensors on the device: t[idx], index_put, gather, scatter would otherwise
 * copy the indices to the host to check them and build the offsets, a stream stall on every
 * call.  Each index term is range-checked as check_indices does (index_check.cu): the first
 * bad position goes into the term's slot, reported at the next synchronisation; a bad
 * element's offset is DP_BAD_OFFSET, which gather_offsets and scatter_offsets skip. */
#include <stdint.h>
#include <string.h>

#include "common.cuh"

/* dp_index_terms as the kernels take it: the offsets' shape, and per term its index (data,
 * strides over that shape) or coordinate, size, stride and check slot */
struct DP_HIDDEN offsets_terms {
    int ndim, n;
    int base[DP_MAX_DIMS];
    int64_t sizes[DP_MAX_DIMS];
    const int64_t *data[DP_MAX_DIMS];
    int64_t strides[DP_MAX_DIMS][DP_MAX_DIMS];
    int coord[DP_MAX_DIMS];
    int64_t size[DP_MAX_DIMS], stride[DP_MAX_DIMS];
    int64_t *slot[DP_MAX_DIMS];

    /* element i's coordinates in the offsets' shape */
    __device__ void coords(int64_t i, int64_t c[DP_MAX_DIMS]) const
    {
        for (int d = ndim - 1; d >= 0; d--) {
            c[d] = i % sizes[d];
            i /= sizes[d];
        }
    }
    __device__ int64_t value(int k, const int64_t c[DP_MAX_DIMS]) const
    {
        int64_t p = 0;
        for (int d = 0; d < ndim; d++) p += c[d] * strides[k][d];
        return data[k][p];
    }
};

/* no bad position yet: the largest, so that atomicMin keeps the first bad one */
static __global__ void offsets_init_kernel(offsets_terms t)
{
    int k = threadIdx.x;
    if (k < t.n && t.slot[k]) {
        t.slot[k][0] = INT64_MAX;
        t.slot[k][1] = 0;
    }
}

static __global__ void offsets_kernel(offsets_terms t, int64_t numel, int64_t *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[DP_MAX_DIMS];
        t.coords(i, c);
        int64_t off = 0;
        bool bad = false;
        for (int k = 0; k < t.n; k++) {
            if (!t.data[k]) {
                off += c[t.coord[k]] * t.stride[k];
                continue;
            }
            int64_t v = t.value(k, c), z = v < 0 ? v + t.size[k] : v - t.base[k];
            if (z < 0 || z >= t.size[k]) {
                atomicMin((long long *)t.slot[k], (long long)i);
                bad = true;
            } else {
                off += z * t.stride[k];
            }
        }
        out[i] = bad ? DP_BAD_OFFSET : off;
    }
}

/* the slots as index_check.cu reads them: position or -1, and the value as written - 1 */
static __global__ void offsets_finish_kernel(offsets_terms t)
{
    int k = threadIdx.x;
    if (k >= t.n || !t.slot[k]) return;
    int64_t p = t.slot[k][0];
    if (p == INT64_MAX) {
        t.slot[k][0] = -1;
        return;
    }
    int64_t c[DP_MAX_DIMS];
    t.coords(p, c);
    t.slot[k][1] = t.value(k, c) - 1;
}

struct DP_HIDDEN offsets_launch_ctx {
    offsets_terms t;
    int64_t numel;
    int64_t *out;
    dp_device device;
};

static int launch_offsets(int64_t *slots, void *arg)
{
    offsets_launch_ctx *x = (offsets_launch_ctx *)arg;
    for (int k = 0, s = 0; k < x->t.n; k++) x->t.slot[k] = x->t.data[k] ? slots + 2 * s++ : NULL;
    CUDA_STREAM_OF(x->device, s);
    offsets_init_kernel<<<1, 32, 0, s>>>(x->t);
    CUDA_CHECK_LAUNCH("index_offsets");
    offsets_kernel<<<dp_grid_for(x->numel, DP_THREADS), DP_THREADS, 0, s>>>(x->t, x->numel, x->out);
    CUDA_CHECK_LAUNCH("index_offsets");
    offsets_finish_kernel<<<1, 32, 0, s>>>(x->t);
    CUDA_CHECK_LAUNCH("index_offsets");
    return 0;
}

extern "C" int dp_cuda_index_offsets(const dp_view *out, const dp_index_terms *terms)
{
    if (out->dtype != DP_INT64) return dp_cuda_error("CUDA index_offsets: the offsets must be int64");
    if (terms->n < 1 || terms->n > DP_MAX_DIMS) return dp_cuda_error("CUDA index_offsets: %d terms", terms->n);
    offsets_launch_ctx x;
    memset(&x, 0, sizeof x);
    x.t.ndim = out->ndim;
    x.t.n = terms->n;
    x.numel = 1;
    for (int d = 0; d < out->ndim; d++) {
        x.t.sizes[d] = out->sizes[d];
        x.numel *= out->sizes[d];
    }
    int64_t st = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        if (out->strides[d] != st && out->sizes[d] > 1) return dp_cuda_error("CUDA index_offsets: the offsets must be contiguous");
        st *= out->sizes[d];
    }
    const char *msgs[DP_MAX_DIMS];
    int nchecks = 0;
    for (int k = 0; k < terms->n; k++) {
        const dp_view *v = &terms->idx[k];
        x.t.size[k] = terms->size[k];
        x.t.stride[k] = terms->stride[k];
        x.t.coord[k] = terms->coord[k];
        x.t.base[k] = terms->base[k];
        if (!v->data) {
            if (terms->coord[k] < 0 || terms->coord[k] >= out->ndim)
                return dp_cuda_error("CUDA index_offsets: coordinate %d of %d dims", terms->coord[k], out->ndim);
            continue;
        }
        if (v->dtype != DP_INT64 || v->ndim != out->ndim || v->device.index != out->device.index)
            return dp_cuda_error("CUDA index_offsets: index %d must be an int64 view over the offsets' shape on their device", k);
        x.t.data[k] = (const int64_t *)v->data;
        for (int d = 0; d < out->ndim; d++) x.t.strides[k][d] = v->strides[d];
        msgs[nchecks++] = terms->msg[k];
    }
    if (x.numel == 0) return 0;
    x.out = (int64_t *)out->data;
    x.device = out->device;
    return dp_cuda_checked_launch(out->device.index, nchecks, msgs, launch_offsets, &x);
}
