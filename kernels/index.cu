/* index.cu: index_select (gather along a dim) and index_add (its backward: scatter-add
 * along a dim, with atomics since indices may repeat; under
 * torch.use_deterministic_algorithms determ.cu's sorted path, as for the advanced indexing
 * scatters).  Indices are int64 and 0-based; the
 * engine range-checks them on the device (index_check.cu) and reports a bad one at the
 * next synchronisation, so these kernels skip indices outside [0, limit) rather than read
 * or write out of bounds.  The element index along dim comes from a third synthetic
 * operand whose only stride is 1 at dim. */
#include <string.h>

#include "common.cuh"

/* offsets over `shape` (a view of the iterated shape): 0 = that view, 1 = other (dim's
 * stride zeroed), 2 = the coordinate along dim */
static int64_t index_offsets(dp_offsets<3> *o, bool *contig, const dp_view *shape, const dp_view *other, int dim)
{
    dp_view other0 = *other, coord = *shape;
    other0.strides[dim] = 0;
    for (int d = 0; d < coord.ndim; d++) coord.strides[d] = d == dim ? 1 : 0;
    const dp_view *vs[3] = { shape, &other0, &coord };
    return dp_make_offsets<3>(o, vs, contig);
}

template <typename T>
static __global__ void index_select_kernel(dp_offsets<3> oc, int64_t n, T *out, const T *in, int64_t in_dim_stride,
                                           const int64_t *idx, int64_t idx_stride, int64_t limit)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        oc.get(i, off);
        int64_t v = idx[off[2] * idx_stride];
        out[off[0]] = v >= 0 && v < limit ? in[off[1] + v * in_dim_stride] : (T)0;
    }
}

__device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int64_t *p, int64_t v)
{
    atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
/* bool + is "or": every writer writes the same 1 */
__device__ __forceinline__ void atomic_add(bool *p, bool v)
{
    if (v) *(volatile bool *)p = true;
}

template <typename T>
static __global__ void index_add_kernel(dp_offsets<3> oc, int64_t n, const T *src, T *gin, int64_t gin_dim_stride,
                                        const int64_t *idx, int64_t idx_stride, int64_t limit)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        oc.get(i, off);
        int64_t v = idx[off[2] * idx_stride];
        if (v >= 0 && v < limit) atomic_add(gin + off[1] + v * gin_dim_stride, src[off[0]]);
    }
}

/* the deterministic path's sources (determ.cu): where each source element goes, if anywhere */
static __global__ void index_add_keys_kernel(dp_offsets<3> oc, int64_t n, int64_t *keys, int64_t *soffs,
                                             int64_t gin_dim_stride, const int64_t *idx, int64_t idx_stride,
                                             int64_t limit)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        oc.get(i, off);
        int64_t v = idx[off[2] * idx_stride];
        keys[i] = v >= 0 && v < limit ? off[1] + v * gin_dim_stride : -1;
        soffs[i] = off[0];
    }
}

/* float sums depend on the order of the atomics; integer ones do not */
static bool det_path(int dtype) { return (dtype == DP_FLOAT32 || dtype == DP_FLOAT64) && dp_cuda_deterministic(); }

static int check_args(const char *what, const dp_view *a, const dp_view *b, int dim, const dp_view *idx)
{
    if (a->dtype != b->dtype) return dp_cuda_error("CUDA %s: dtypes differ", what);
    if (dim < 0 || dim >= a->ndim || a->ndim != b->ndim) return dp_cuda_error("CUDA %s: bad dim %d", what, dim);
    if (idx->dtype != DP_INT64 || idx->ndim > 1) return dp_cuda_error("CUDA %s: index must be a 1-D int64 tensor", what);
    return 0;
}

/* index_select (add false: out[i] = in[idx[i]] along dim) or index_add (add true:
 * gin[idx[i]] += src[i]): the iterated view is out or src, the indexed one in or gin */
struct DP_HIDDEN index_launch {
    bool add;
    const dp_view *iterated, *indexed, *idx;
    int dim;
    template <typename T> int run() const
    {
        dp_offsets<3> oc;
        bool contig;
        int64_t n = index_offsets(&oc, &contig, iterated, indexed, dim);
        if (n == 0) return 0;
        CUDA_STREAM_OF(iterated->device, s);
        unsigned g = dp_grid_for(n, DP_THREADS);
        const int64_t *ix = (const int64_t *)idx->data;
        int64_t xs = idx->ndim ? idx->strides[0] : 0, ds = indexed->strides[dim], lim = indexed->sizes[dim];
        if (add && det_path(indexed->dtype)) {
            dp_det_scratch d;
            if (dp_cuda_det_begin(iterated->device.index, n, &d)) return -1;
            index_add_keys_kernel<<<g, DP_THREADS, 0, s>>>(oc, n, d.keys, d.soffs, ds, ix, xs, lim);
            return dp_cuda_det_scatter(&d, indexed->dtype, DP_SCATTER_ADD, indexed->data, iterated->data);
        }
        if (add) index_add_kernel<T><<<g, DP_THREADS, 0, s>>>(oc, n, (const T *)iterated->data, (T *)indexed->data, ds, ix, xs, lim);
        else index_select_kernel<T><<<g, DP_THREADS, 0, s>>>(oc, n, (T *)iterated->data, (const T *)indexed->data, ds, ix, xs, lim);
        CUDA_CHECK_LAUNCH(add ? "index_add" : "index_select");
        return 0;
    }
};

extern "C" int dp_cuda_index_select(const dp_view *out, const dp_view *in, int dim, const dp_view *idx)
{
    if (check_args("index_select", out, in, dim, idx)) return -1;
    index_launch f = { false, out, in, idx, dim };
    return DP_DISPATCH_OUT(out->dtype, f);
}

extern "C" int dp_cuda_index_add(const dp_view *grad_in, int dim, const dp_view *idx, const dp_view *src)
{
    if (check_args("index_add", grad_in, src, dim, idx)) return -1;
    index_launch f = { true, src, grad_in, idx, dim };
    return DP_DISPATCH_OUT(grad_in->dtype, f);
}

/* ---------------------------------------------------------------- advanced indexing
 * By element offsets the engine computed (src/index.c, on the device: index_offsets.cu):
 * out, base and offs share one shape; base's strides walk the dims that are not indexed,
 * offs adds the rest.  A DP_BAD_OFFSET (a bad index, reported at the next synchronisation)
 * reads 0 and writes nothing. */

template <typename T>
static __global__ void gather_offsets_kernel(dp_offsets<3> oc, int64_t n, T *out, const T *base, const int64_t *offs)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        oc.get(i, off);
        int64_t o = offs[off[2]];
        out[off[0]] = o != DP_BAD_OFFSET ? base[off[1] + o] : (T)0;
    }
}

/* a * v, max, min (NaN wins, as PyTorch's amax and amin) */
template <typename T> __device__ __forceinline__ T combine(T a, T v, int mode)
{
    if (mode == DP_SCATTER_MUL) return a * v;
    if (mode == DP_SCATTER_MAX) return (v > a || v != v) ? v : a;
    return (v < a || v != v) ? v : a;
}

/* *p = combine(*p, v) atomically, through compare-and-swap on U (T's size) */
template <typename T, typename U> __device__ void atomic_combine_cas(T *p, T v, int mode)
{
    U *u = (U *)p, old = *(volatile U *)u, assumed;
    do {
        assumed = old;
        T a, r;
        memcpy(&a, &assumed, sizeof a);
        r = combine(a, v, mode);
        U ru;
        memcpy(&ru, &r, sizeof ru);
        old = atomicCAS(u, assumed, ru);
    } while (assumed != old);
}

__device__ __forceinline__ void atomic_combine(float *p, float v, int mode) { atomic_combine_cas<float, unsigned int>(p, v, mode); }
__device__ __forceinline__ void atomic_combine(double *p, double v, int mode)
{
    atomic_combine_cas<double, unsigned long long>(p, v, mode);
}
__device__ __forceinline__ void atomic_combine(int64_t *p, int64_t v, int mode)
{
    atomic_combine_cas<int64_t, unsigned long long>(p, v, mode);
}
/* bool: max is "or", mul and min are "and"; every writer writes the same value */
__device__ __forceinline__ void atomic_combine(bool *p, bool v, int mode)
{
    if (mode == DP_SCATTER_MAX ? v : !v) *(volatile bool *)p = v;
}

template <typename T>
static __global__ void scatter_offsets_kernel(dp_offsets<3> oc, int64_t n, T *base, const int64_t *offs, const T *src,
                                              int mode)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        oc.get(i, off);
        int64_t o = offs[off[2]];
        if (o == DP_BAD_OFFSET) continue;   /* a bad index, reported at the next synchronisation */
        T *d = base + off[1] + o;
        if (mode == DP_SCATTER_COPY) *d = src[off[0]];
        else if (mode == DP_SCATTER_ADD) atomic_add(d, src[off[0]]);
        else atomic_combine(d, src[off[0]], mode);
    }
}

static __global__ void scatter_offsets_keys_kernel(dp_offsets<3> oc, int64_t n, int64_t *keys, int64_t *soffs,
                                                   const int64_t *offs)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        oc.get(i, off);
        keys[i] = off[1] + offs[off[2]];
        soffs[i] = off[0];
    }
}

/* gather (scatter false: iterated = out) or scatter (iterated = src) */
struct DP_HIDDEN offsets_launch {
    bool scatter;
    int mode;
    const dp_view *iterated, *base, *offs;
    template <typename T> int run() const
    {
        dp_offsets<3> oc;
        bool contig;
        const dp_view *vs[3] = { iterated, base, offs };
        int64_t n = dp_make_offsets<3>(&oc, vs, &contig);
        if (n == 0) return 0;
        CUDA_STREAM_OF(iterated->device, s);
        unsigned g = dp_grid_for(n, DP_THREADS);
        const int64_t *ox = (const int64_t *)offs->data;
        /* a copy to a repeated offset keeps the last value, as on the CPU */
        if (scatter && (mode == DP_SCATTER_COPY ? dp_cuda_deterministic() : det_path(base->dtype))) {
            dp_det_scratch d;
            if (dp_cuda_det_begin(iterated->device.index, n, &d)) return -1;
            scatter_offsets_keys_kernel<<<g, DP_THREADS, 0, s>>>(oc, n, d.keys, d.soffs, ox);
            return dp_cuda_det_scatter(&d, base->dtype, mode, base->data, iterated->data);
        }
        if (scatter)
            scatter_offsets_kernel<T><<<g, DP_THREADS, 0, s>>>(oc, n, (T *)base->data, ox, (const T *)iterated->data, mode);
        else
            gather_offsets_kernel<T><<<g, DP_THREADS, 0, s>>>(oc, n, (T *)iterated->data, (const T *)base->data, ox);
        CUDA_CHECK_LAUNCH(scatter ? "scatter_offsets" : "gather_offsets");
        return 0;
    }
};

extern "C" int dp_cuda_gather_offsets(const dp_view *out, const dp_view *base, const dp_view *offs)
{
    if (out->dtype != base->dtype || offs->dtype != DP_INT64) return dp_cuda_error("CUDA gather_offsets: dtypes differ");
    offsets_launch f = { false, DP_SCATTER_COPY, out, base, offs };
    return DP_DISPATCH_OUT(out->dtype, f);
}

extern "C" int dp_cuda_scatter_offsets(const dp_view *base, const dp_view *offs, const dp_view *src, int mode)
{
    if (src->dtype != base->dtype || offs->dtype != DP_INT64) return dp_cuda_error("CUDA scatter_offsets: dtypes differ");
    offsets_launch f = { true, mode, src, base, offs };
    return DP_DISPATCH_OUT(src->dtype, f);
}
