/* reduce.cu: sum, mean, max, min, argmax, argmin along one dim or over everything, with
 * int64 indices.  Floats accumulate in double (as the CPU backend does), integers and bools
 * in int64.  Max and min follow the CPU: the first NaN wins, otherwise the first of equal
 * extremes; argmax/argmin write the index to out (and to idx when given).
 *
 * Three shapes of work: one thread per output when each output reduces few elements or
 * the reduced dim is strided across many outputs (consecutive threads then read
 * consecutive addresses); otherwise one block per output, split over several blocks with
 * a second pass when there are few outputs (a whole-tensor sum uses the whole GPU). */
#include <limits.h>

#include "common.cuh"

#define NONE INT64_MAX    /* index of an empty partial result */

template <typename A> struct DP_HIDDEN rpair {
    A v;
    int64_t i;
};

/* The better of two partial results of a max (MAX) or min reduction. */
template <typename A, bool MAX> __device__ __forceinline__ rpair<A> pick(rpair<A> a, rpair<A> b)
{
    if (a.i == NONE) return b;
    if (b.i == NONE) return a;
    bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn) {
        if (an && bn) return a.i <= b.i ? a : b;
        return an ? a : b;
    }
    if (MAX ? b.v > a.v : b.v < a.v) return b;
    if (b.v == a.v && b.i < a.i) return b;
    return a;
}

template <typename A> __device__ __forceinline__ rpair<A> combine(int op, rpair<A> a, rpair<A> b)
{
    if (op == DP_SUM || op == DP_MEAN) {
        rpair<A> r = { a.v + b.v, 0 };
        return r;
    }
    if (op == DP_MAX || op == DP_ARGMAX) return pick<A, true>(a, b);
    return pick<A, false>(a, b);
}

template <typename A> __device__ __forceinline__ rpair<A> identity(int op)
{
    rpair<A> r = { (A)0, (op == DP_SUM || op == DP_MEAN) ? 0 : NONE };
    return r;
}

/* Reduces elements [r0, r1) (step `step`) of the output whose `in` offset is base. */
template <typename A>
__device__ __forceinline__ rpair<A> reduce_range(int op, const dp_offsets<1> &inner, const void *in, int idt,
                                                 int64_t base, int64_t r0, int64_t r1, int64_t step)
{
    rpair<A> acc = identity<A>(op);
    for (int64_t r = r0; r < r1; r += step) {
        int64_t off[1];
        inner.get(r, off);
        rpair<A> x = { dp_load<A>(in, idt, base + off[0]), r };
        acc = combine<A>(op, acc, x);
    }
    return acc;
}

template <typename A, typename O>
__device__ __forceinline__ void write_result(int op, O *out, int64_t ooff, int64_t *idx, int64_t xoff,
                                             rpair<A> r, int64_t n_red)
{
    switch (op) {
    case DP_SUM: out[ooff] = dp_cvt<O>(r.v); break;
    case DP_MEAN: out[ooff] = dp_cvt<O>((double)r.v / (double)n_red); break;
    case DP_MAX: case DP_MIN:
        out[ooff] = dp_cvt<O>(r.v);
        if (idx) idx[xoff] = r.i;
        break;
    default:   /* argmax, argmin */
        out[ooff] = dp_cvt<O>(r.i);
        if (idx) idx[xoff] = r.i;
        break;
    }
}

/* Block-wide combine of one partial per thread; the result is valid in thread 0. */
template <typename A> __device__ rpair<A> block_combine(int op, rpair<A> v)
{
    __shared__ A sv[DP_THREADS];
    __shared__ int64_t si[DP_THREADS];
    sv[threadIdx.x] = v.v;
    si[threadIdx.x] = v.i;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            rpair<A> a = { sv[threadIdx.x], si[threadIdx.x] }, b = { sv[threadIdx.x + s], si[threadIdx.x + s] };
            rpair<A> c = combine<A>(op, a, b);
            sv[threadIdx.x] = c.v;
            si[threadIdx.x] = c.i;
        }
        __syncthreads();
    }
    rpair<A> r = { sv[0], si[0] };
    return r;
}

/* ---------------------------------------------------------------- kernels */

template <typename A, typename O>
static __global__ void reduce_thread_kernel(int op, dp_reduce_geom g, const void *in, int idt, O *out, int64_t *idx)
{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < g.n_out; j += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        g.outer.get(j, off);
        rpair<A> r = reduce_range<A>(op, g.inner, in, idt, off[0], 0, g.n_red, 1);
        write_result<A, O>(op, out, off[1], idx, off[2], r, g.n_red);
    }
}

/* Block b handles split (b % splits) of output (b / splits); with one split it writes the
 * result, else its partial. */
template <typename A, typename O>
static __global__ void reduce_block_kernel(int op, dp_reduce_geom g, const void *in, int idt, O *out, int64_t *idx,
                                           int splits, rpair<A> *partial)
{
    int64_t nblocks = g.n_out * splits;
    for (int64_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
        int64_t j = b / splits, part = b % splits;
        int64_t off[3];
        g.outer.get(j, off);
        int64_t chunk = (g.n_red + splits - 1) / splits;
        int64_t r0 = part * chunk, r1 = r0 + chunk < g.n_red ? r0 + chunk : g.n_red;
        rpair<A> r = reduce_range<A>(op, g.inner, in, idt, off[0], r0 + threadIdx.x, r1, blockDim.x);
        r = block_combine<A>(op, r);
        if (threadIdx.x == 0) {
            if (splits == 1) write_result<A, O>(op, out, off[1], idx, off[2], r, g.n_red);
            else partial[b] = r;
        }
        __syncthreads();
    }
}

template <typename A, typename O>
static __global__ void reduce_finish_kernel(int op, dp_reduce_geom g, O *out, int64_t *idx, int splits,
                                            const rpair<A> *partial)
{
    for (int64_t j = blockIdx.x; j < g.n_out; j += gridDim.x) {
        rpair<A> r = identity<A>(op);
        for (int k = threadIdx.x; k < splits; k += blockDim.x) r = combine<A>(op, r, partial[j * splits + k]);
        r = block_combine<A>(op, r);
        if (threadIdx.x == 0) {
            int64_t off[3];
            g.outer.get(j, off);
            write_result<A, O>(op, out, off[1], idx, off[2], r, g.n_red);
        }
        __syncthreads();
    }
}

/* ---------------------------------------------------------------- launcher */

template <typename A>
struct DP_HIDDEN reduce_launch {
    int op;
    const dp_view *out, *idx, *in;
    const dp_reduce_geom *g;
    template <typename O> int run() const
    {
        CUDA_STREAM_OF(out->device, s);
        O *o = (O *)out->data;
        int64_t *x = idx ? (int64_t *)idx->data : NULL;
        int64_t inner_stride = g->inner.strides[0][g->inner.ndim - 1];
        if (g->n_red <= 16 || (inner_stride != 1 && g->n_out >= 16384)) {
            reduce_thread_kernel<A, O><<<dp_grid_for(g->n_out, DP_THREADS), DP_THREADS, 0, s>>>(op, *g, in->data, in->dtype, o, x);
            CUDA_CHECK_LAUNCH("reduce");
            return 0;
        }
        int splits = 1;
        if (g->n_out <= 256) {
            int64_t want = (g->n_red + 16383) / 16384, cap = 4096 / g->n_out;
            if (want > cap) want = cap;
            if (want > 1) splits = (int)want;
        }
        int64_t nblocks = g->n_out * splits;
        unsigned grid = (unsigned)(nblocks < 65536 ? nblocks : 65536);
        if (splits == 1) {
            reduce_block_kernel<A, O><<<grid, DP_THREADS, 0, s>>>(op, *g, in->data, in->dtype, o, x, 1, NULL);
            CUDA_CHECK_LAUNCH("reduce");
            return 0;
        }
        rpair<A> *partial = (rpair<A> *)dp_cuda_scratch_alloc(out->device.index, (size_t)nblocks * sizeof(rpair<A>));
        if (!partial) return -1;
        reduce_block_kernel<A, O><<<grid, DP_THREADS, 0, s>>>(op, *g, in->data, in->dtype, o, x, splits, partial);
        cudaError_t err = cudaGetLastError();
        if (err == cudaSuccess) {
            unsigned g2 = (unsigned)(g->n_out < 65536 ? g->n_out : 65536);
            reduce_finish_kernel<A, O><<<g2, DP_THREADS, 0, s>>>(op, *g, o, x, splits, partial);
            err = cudaGetLastError();
        }
        dp_cuda_scratch_free(out->device.index, partial);   /* reused in stream order */
        if (err != cudaSuccess) return dp_cuda_error("CUDA error launching reduce: %s", cudaGetErrorString(err));
        return 0;
    }
};

extern "C" int dp_cuda_reduce(dp_reduce_op op, const dp_view *out, const dp_view *idx, const dp_view *in, int dim)
{
    switch (op) {
    case DP_SUM: case DP_MEAN: case DP_MAX: case DP_MIN: case DP_ARGMAX: case DP_ARGMIN: break;
    default: return dp_cuda_error("CUDA reduce: reduction %d has no kernel", (int)op);
    }
    if (dim >= in->ndim) return dp_cuda_error("CUDA reduce: dim %d out of range for %d dims", dim, in->ndim);
    if (idx && idx->dtype != DP_INT64) return dp_cuda_error("CUDA reduce: indices must be int64");
    dp_reduce_geom g;
    dp_make_reduce_geom(&g, out, idx, in, dim);
    if (g.n_out == 0) return 0;
    if (g.n_red == 0) {
        if (op == DP_SUM) return dp_cuda_fill(out, 0.0);
        if (op == DP_MEAN) return dp_cuda_fill(out, NAN);
        return dp_cuda_error("cannot compute %s over an empty dimension", op == DP_MAX ? "max" : op == DP_MIN ? "min"
                                                                          : op == DP_ARGMAX ? "argmax" : "argmin");
    }
    if (in->dtype == DP_FLOAT32 || in->dtype == DP_FLOAT64) {
        reduce_launch<double> f = { op, out, idx, in, &g };
        return DP_DISPATCH_OUT(out->dtype, f);
    }
    reduce_launch<int64_t> f = { op, out, idx, in, &g };
    return DP_DISPATCH_OUT(out->dtype, f);
}
