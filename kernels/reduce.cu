/* reduce.cu: sum, mean, max, min, argmax, argmin along one dim or over everything, with
 * int64 indices.  Floats accumulate in double (as the CPU backend does), integers and bools
 * in int64.  Max and min follow the CPU: the first NaN wins, otherwise the first of equal
 * extremes; argmax/argmin write the index to out (and to idx when given).
 *
 * The work is laid out after CUDA practice (PyTorch's Reduce.cuh), by where the reduced
 * elements lie in memory:
 * - rows (the reduced dim is the input's fastest one, e.g. x:sum(2) of [N, C]): short rows
 *   (<= 128 elements, or <= 4096 when there are many of them) get 2 to 32 threads of a
 *   warp each (a power of two), several rows per block, combined with shuffles; long rows
 *   get a block each, and when there are few outputs each row is split over several
 *   blocks whose partial results a second pass combines;
 * - columns (the outputs are the fastest, e.g. x:sum(1) of [N, C], a bias gradient):
 *   threadIdx.x runs over consecutive outputs, so a warp's loads are consecutive addresses;
 *   threadIdx.y splits the reduced dim inside a block (a tree in shared memory combines the
 *   slices), and when there are few outputs blockIdx.y splits it over blocks as well, with
 *   a second pass over the partials.
 * Every partial result has its own slot and the second pass combines them in a fixed
 * order, so results never depend on the order blocks run in (no atomics). */
#include <limits.h>

#include "common.cuh"

#define NONE INT64_MAX    /* index of an empty partial result */

/* Launch shapes.  TARGET_BLOCKS is about one wave of 256-thread blocks on a large GPU
 * (132 SMs x 8); the reduced dim is split over blocks only while the grid is smaller. */
#define TARGET_BLOCKS 1024
#define ROW_LANES_MAX 128      /* rows up to this long: lanes of a warp per row */
#define ROW_WARP_MAX 4096      /* ... and up to this long when there are many rows */
#define ROW_WARP_OUTPUTS 8192  /* "many rows": enough warps to fill the GPU */
#define BLOCK_MIN_PER_SPLIT 4096   /* elements a block of a split row reduces at least */
#define COL_MIN_PER_THREAD 32  /* elements a thread of a split column reduces at least */

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

__device__ __forceinline__ bool is_sum(int op) { return op == DP_SUM || op == DP_MEAN; }

template <typename A> __device__ __forceinline__ rpair<A> combine(int op, rpair<A> a, rpair<A> b)
{
    if (is_sum(op)) {
        rpair<A> r = { a.v + b.v, 0 };
        return r;
    }
    if (op == DP_MAX || op == DP_ARGMAX) return pick<A, true>(a, b);
    return pick<A, false>(a, b);
}

template <typename A> __device__ __forceinline__ rpair<A> identity(int op)
{
    rpair<A> r = { (A)0, is_sum(op) ? 0 : NONE };
    return r;
}

/* ---------------------------------------------------------------- sources and results */

/* The elements reduced into output j: `base` places output j (from its offsets off[3] in
 * the geometry), `at` yields its r-th element (0 <= r < len). */
template <typename A> struct DP_HIDDEN in_src {   /* the input tensor */
    dp_offsets<1> inner;
    int64_t len;
    int dt;
    __device__ __forceinline__ int64_t base(int64_t j, const int64_t off[3]) const { return off[0]; }
    __device__ __forceinline__ rpair<A> at(const void *p, int64_t base, int64_t r) const
    {
        int64_t o[1];
        inner.get(r, o);
        rpair<A> x = { dp_load<A>(p, dt, base + o[0]), r };
        return x;
    }
};

template <typename A> struct DP_HIDDEN part_src {   /* partial results of a first pass */
    int64_t len, s_out, s_part;   /* partial k of output j is at j * s_out + k * s_part */
    __device__ __forceinline__ int64_t base(int64_t j, const int64_t off[3]) const { return j * s_out; }
    __device__ __forceinline__ rpair<A> at(const void *p, int64_t base, int64_t r) const
    {
        return ((const rpair<A> *)p)[base + r * s_part];
    }
};

/* Writes the result of output j into out (and idx), at its offsets off[1] (and off[2]). */
template <typename A, typename O> struct DP_HIDDEN out_dst {
    int64_t n_red;
    __device__ __forceinline__ void put(int op, void *p, int64_t *idx, int64_t j, const int64_t off[3], int64_t part,
                                        rpair<A> r) const
    {
        O *out = (O *)p;
        switch (op) {
        case DP_SUM: out[off[1]] = dp_cvt<O>(r.v); break;
        case DP_MEAN: out[off[1]] = dp_cvt<O>((double)r.v / (double)n_red); break;
        case DP_MAX: case DP_MIN:
            out[off[1]] = dp_cvt<O>(r.v);
            if (idx) idx[off[2]] = r.i;
            break;
        default:   /* argmax, argmin */
            out[off[1]] = dp_cvt<O>(r.i);
            if (idx) idx[off[2]] = r.i;
            break;
        }
    }
};

/* Stores partial `part` of output j (the layout part_src reads back). */
template <typename A> struct DP_HIDDEN part_dst {
    int64_t s_out, s_part;
    __device__ __forceinline__ void put(int op, void *p, int64_t *idx, int64_t j, const int64_t off[3], int64_t part,
                                        rpair<A> r) const
    {
        ((rpair<A> *)p)[j * s_out + part * s_part] = r;
    }
};

/* ---------------------------------------------------------------- combining threads */

/* Combines the partials of `width` consecutive lanes (a power of two up to 32; every lane
 * of the warp calls it); the result is valid in the first lane of each group.  Sums move
 * no index. */
template <typename A> __device__ __forceinline__ rpair<A> warp_combine(int op, rpair<A> v, int width)
{
    bool sum = is_sum(op);
    for (int o = width / 2; o > 0; o >>= 1) {
        rpair<A> w;
        w.v = __shfl_down_sync(0xffffffffu, v.v, o, width);
        w.i = sum ? 0 : __shfl_down_sync(0xffffffffu, v.i, o, width);
        v = combine<A>(op, v, w);
    }
    return v;
}

/* Block-wide combine of one partial per thread (a 1-D block of whole warps): shuffles in
 * each warp, then the first warp over the warps' results; valid in thread 0. */
template <typename A> __device__ rpair<A> block_combine(int op, rpair<A> v)
{
    __shared__ A sv[32];
    __shared__ int64_t si[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_combine<A>(op, v, 32);
    if (lane == 0) {
        sv[warp] = v.v;
        si[warp] = v.i;
    }
    __syncthreads();
    if (warp == 0) {
        rpair<A> w = identity<A>(op);
        if (lane < nwarps) {
            w.v = sv[lane];
            w.i = si[lane];
        }
        v = warp_combine<A>(op, w, 32);
    }
    __syncthreads();   /* sv is free for the caller's next output */
    return v;
}

/* ---------------------------------------------------------------- kernels */

/* Rows: blockDim.x lanes (a power of two, 2 to 32: at least one shuffle, so that the kernel
 * synchronises alike in every launch) per output, blockDim.y outputs per block. */
template <typename A, typename S, typename D>
static __global__ void reduce_rows_kernel(int op, dp_reduce_geom g, S src, const void *in, D dst, void *out,
                                          int64_t *idx)
{
    int64_t per_block = blockDim.y;
    /* the loop is uniform over the block: every lane reaches the shuffles */
    for (int64_t j0 = (int64_t)blockIdx.x * per_block; j0 < g.n_out; j0 += (int64_t)gridDim.x * per_block) {
        int64_t j = j0 + threadIdx.y, off[3] = { 0, 0, 0 };
        rpair<A> r = identity<A>(op);
        if (j < g.n_out) {
            g.outer.get(j, off);
            int64_t base = src.base(j, off);
            for (int64_t k = threadIdx.x; k < src.len; k += blockDim.x) r = combine<A>(op, r, src.at(in, base, k));
        }
        r = warp_combine<A>(op, r, blockDim.x);
        if (j < g.n_out && threadIdx.x == 0) dst.put(op, out, idx, j, off, 0, r);
    }
}

/* Long rows: block b reduces split (b % splits) of output (b / splits). */
template <typename A, typename S, typename D>
static __global__ void reduce_block_kernel(int op, dp_reduce_geom g, S src, const void *in, D dst, void *out,
                                           int64_t *idx, int splits)
{
    int64_t nblocks = g.n_out * splits, chunk = (src.len + splits - 1) / splits;
    for (int64_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
        int64_t j = b / splits, part = b % splits, off[3];
        g.outer.get(j, off);
        int64_t base = src.base(j, off), r1 = (part + 1) * chunk < src.len ? (part + 1) * chunk : src.len;
        rpair<A> r = identity<A>(op);
        for (int64_t k = part * chunk + threadIdx.x; k < r1; k += blockDim.x) r = combine<A>(op, r, src.at(in, base, k));
        r = block_combine<A>(op, r);
        if (threadIdx.x == 0) dst.put(op, out, idx, j, off, part, r);
    }
}

/* Columns: threadIdx.x runs over consecutive outputs; threadIdx.y (a power of two) and
 * blockIdx.y split the reduced dim; split blockIdx.y writes partial blockIdx.y. */
template <typename A, typename S, typename D>
static __global__ void reduce_cols_kernel(int op, dp_reduce_geom g, S src, const void *in, D dst, void *out,
                                          int64_t *idx)
{
    __shared__ A sv[DP_THREADS];
    __shared__ int64_t si[DP_THREADS];
    int64_t chunk = (src.len + gridDim.y - 1) / gridDim.y, r0 = (int64_t)blockIdx.y * chunk;
    int64_t r1 = r0 + chunk < src.len ? r0 + chunk : src.len;
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    for (int64_t j0 = (int64_t)blockIdx.x * blockDim.x; j0 < g.n_out; j0 += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = j0 + threadIdx.x, off[3] = { 0, 0, 0 };
        rpair<A> r = identity<A>(op);
        if (j < g.n_out) {
            g.outer.get(j, off);
            int64_t base = src.base(j, off);
            for (int64_t k = r0 + threadIdx.y; k < r1; k += blockDim.y) r = combine<A>(op, r, src.at(in, base, k));
        }
        /* (also when blockDim.y is 1: a kernel synchronises alike in every launch) */
        sv[t] = r.v;
        si[t] = r.i;
        __syncthreads();
        for (unsigned s = blockDim.y / 2; s > 0; s >>= 1) {
            if (threadIdx.y < s) {
                rpair<A> a = { sv[t], si[t] }, b = { sv[t + s * blockDim.x], si[t + s * blockDim.x] };
                rpair<A> c = combine<A>(op, a, b);
                sv[t] = c.v;
                si[t] = c.i;
            }
            __syncthreads();
        }
        r.v = sv[threadIdx.x];
        r.i = si[threadIdx.x];
        __syncthreads();   /* read before the next outputs overwrite it */
        if (j < g.n_out && threadIdx.y == 0) dst.put(op, out, idx, j, off, blockIdx.y, r);
    }
}

/* ---------------------------------------------------------------- launch shapes */

static int64_t pow2_at_least(int64_t n)
{
    int64_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

static int64_t pow2_at_most(int64_t n)
{
    int64_t p = 1;
    while (p * 2 <= n) p <<= 1;
    return p;
}

static unsigned grid_cap(int64_t n) { return (unsigned)(n < 1 ? 1 : n < 65536 ? n : 65536); }

/* The input stride of the outputs' fastest dim (the last of size > 1), 0 when none. */
static int64_t fastest_out_stride(const dp_offsets<3> &o)
{
    for (int d = o.ndim - 1; d >= 0; d--)
        if (o.sizes[d] > 1) return o.strides[0][d];
    return 0;
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* The column kernel's block: outputs along x (up to a warp while the reduced dim is worth
 * splitting), the reduced dim along y (a thread reduces >= 16 elements), 256 threads. */
static dim3 cols_block(int64_t n_out, int64_t n_red)
{
    int64_t bx = pow2_at_least(n_out) < 32 ? pow2_at_least(n_out) : 32;
    int64_t by = pow2_at_most(n_red / 16 > 0 ? n_red / 16 : 1);
    if (by > DP_THREADS / bx) by = DP_THREADS / bx;
    while (bx * by < DP_THREADS && bx < pow2_at_least(n_out)) bx *= 2;
    return dim3((unsigned)bx, (unsigned)by);
}

/* ---------------------------------------------------------------- launcher */

template <typename A>
struct DP_HIDDEN reduce_launch {
    int op;
    const dp_view *out, *idx, *in;
    const dp_reduce_geom *geom;

    /* Combines the partials (partial k of output j at j * s_out + k * s_part) into out. */
    template <typename O> void finish(cudaStream_t s, const dp_reduce_geom &g, const rpair<A> *partial,
                                      int64_t splits, int64_t s_out, int64_t s_part) const
    {
        part_src<A> src = { splits, s_out, s_part };
        out_dst<A, O> dst = { g.n_red };
        int64_t *x = idx ? (int64_t *)idx->data : NULL;
        if (s_part == 1) {   /* a row of partials per output: a warp each */
            unsigned lanes = (unsigned)(splits < 32 ? pow2_at_least(splits) : 32), rows = DP_THREADS / lanes;
            reduce_rows_kernel<A, part_src<A>, out_dst<A, O>><<<grid_cap((g.n_out + rows - 1) / rows), dim3(lanes, rows), 0, s>>>(op, g, src, partial, dst, out->data, x);
        } else {
            dim3 b = cols_block(g.n_out, splits);
            reduce_cols_kernel<A, part_src<A>, out_dst<A, O>><<<grid_cap((g.n_out + b.x - 1) / b.x), b, 0, s>>>(op, g, src, partial, dst, out->data, x);
        }
    }

    template <typename O> int run() const
    {
        CUDA_STREAM_OF(out->device, s);
        const dp_reduce_geom &g = *geom;
        in_src<A> src = { g.inner, g.n_red, in->dtype };
        out_dst<A, O> dst = { g.n_red };
        int64_t *x = idx ? (int64_t *)idx->data : NULL;
        int64_t s_red = g.inner.strides[0][g.inner.ndim - 1], s_out = fastest_out_stride(g.outer);
        bool cols = g.n_out > 1 && g.inner.ndim == 1 && abs64(s_out) < abs64(s_red);
        rpair<A> *partial = NULL;
        int64_t splits = 1;
        if (cols) {
            dim3 b = cols_block(g.n_out, g.n_red);
            int64_t gx = (g.n_out + b.x - 1) / b.x;
            if (gx < TARGET_BLOCKS) {
                int64_t want = (TARGET_BLOCKS + gx - 1) / gx, most = g.n_red / ((int64_t)b.y * COL_MIN_PER_THREAD);
                splits = want < most ? want : most;
                if (splits > 65535) splits = 65535;
                if (splits < 1) splits = 1;
            }
            if (splits == 1) {
                reduce_cols_kernel<A, in_src<A>, out_dst<A, O>><<<grid_cap(gx), b, 0, s>>>(op, g, src, in->data, dst, out->data, x);
                CUDA_CHECK_LAUNCH("reduce");
                return 0;
            }
            partial = (rpair<A> *)dp_cuda_scratch_alloc(out->device.index, (size_t)(g.n_out * splits) * sizeof(rpair<A>));
            if (!partial) return -1;
            part_dst<A> pd = { 1, g.n_out };
            reduce_cols_kernel<A, in_src<A>, part_dst<A>><<<dim3(grid_cap(gx), (unsigned)splits), b, 0, s>>>(op, g, src, in->data, pd, partial, NULL);
            cudaError_t err = cudaGetLastError();
            if (err == cudaSuccess) {
                finish<O>(s, g, partial, splits, 1, g.n_out);
                err = cudaGetLastError();
            }
            dp_cuda_scratch_free(out->device.index, partial);   /* reused in stream order */
            if (err != cudaSuccess) return dp_cuda_error("CUDA error launching reduce: %s", cudaGetErrorString(err));
            return 0;
        }
        if (g.n_red <= ROW_LANES_MAX || (g.n_red <= ROW_WARP_MAX && g.n_out >= ROW_WARP_OUTPUTS)) {
            unsigned lanes = (unsigned)(g.n_red < 2 ? 2 : g.n_red < 32 ? pow2_at_least(g.n_red) : 32), rows = DP_THREADS / lanes;
            reduce_rows_kernel<A, in_src<A>, out_dst<A, O>><<<grid_cap((g.n_out + rows - 1) / rows), dim3(lanes, rows), 0, s>>>(op, g, src, in->data, dst, out->data, x);
            CUDA_CHECK_LAUNCH("reduce");
            return 0;
        }
        if (g.n_out < TARGET_BLOCKS) {
            int64_t want = (TARGET_BLOCKS + g.n_out - 1) / g.n_out, most = (g.n_red + BLOCK_MIN_PER_SPLIT - 1) / BLOCK_MIN_PER_SPLIT;
            splits = want < most ? want : most;
        }
        if (splits == 1) {
            reduce_block_kernel<A, in_src<A>, out_dst<A, O>><<<grid_cap(g.n_out), DP_THREADS, 0, s>>>(op, g, src, in->data, dst, out->data, x, 1);
            CUDA_CHECK_LAUNCH("reduce");
            return 0;
        }
        partial = (rpair<A> *)dp_cuda_scratch_alloc(out->device.index, (size_t)(g.n_out * splits) * sizeof(rpair<A>));
        if (!partial) return -1;
        part_dst<A> pd = { splits, 1 };
        reduce_block_kernel<A, in_src<A>, part_dst<A>><<<grid_cap(g.n_out * splits), DP_THREADS, 0, s>>>(op, g, src, in->data, pd, partial, NULL, (int)splits);
        cudaError_t err = cudaGetLastError();
        if (err == cudaSuccess) {
            finish<O>(s, g, partial, splits, splits, 1);
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
