/* common.cuh: what every CUDA kernel file shares: error checks that turn into a status,
 * dtype loads and conversions, strided offset calculators with dimension collapsing, and
 * the launch geometry.  Only nvcc sees this file; the launchers it serves are declared in
 * cuda.h. */
#ifndef DP_KERNELS_COMMON_CUH
#define DP_KERNELS_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

#include "cuda.h"
#include "divider.h"
#include "../src/opmath.h"
#include "../src/half.h"

/* Types of this library stay out of its exported symbols (with them, the template
 * instantiations over them). */
#define DP_HIDDEN __attribute__((visibility("hidden")))

/* ---------------------------------------------------------------- errors */

/* What follows the message of an error that a kernel fault leaves behind: it is reported
 * by a later call than the one that failed, and the CUDA context stays unusable. */
static inline const char *dp_cuda_fault_note(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress: case cudaErrorAssert: case cudaErrorIllegalInstruction:
    case cudaErrorLaunchFailure:
        return "; a CUDA kernel failed (reported at a later call; CUDA_LAUNCH_BLOCKING=1 reports it at the "
               "kernel) and this process cannot use that GPU any more";
    default: return "";
    }
}

/* Evaluates a cudaError_t expression; on failure sets the message (with file and line)
 * and returns -1 from the enclosing function. */
#define CUDA_CHECK(expr)                                                                   \
    do {                                                                                   \
        cudaError_t err_ = (expr);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            (void)cudaGetLastError();                                                      \
            return dp_cuda_error("CUDA error at %s:%d: %s (%s)%s", __FILE__, __LINE__,   \
                                 cudaGetErrorString(err_), #expr, dp_cuda_fault_note(err_)); \
        }                                                                                  \
    } while (0)

/* After every kernel launch: a bad configuration or an earlier asynchronous fault. */
#define CUDA_CHECK_LAUNCH(name)                                                            \
    do {                                                                                   \
        cudaError_t err_ = cudaGetLastError();                                             \
        if (err_ != cudaSuccess)                                                           \
            return dp_cuda_error("CUDA error launching %s at %s:%d: %s%s", (name), __FILE__, \
                                 __LINE__, cudaGetErrorString(err_), dp_cuda_fault_note(err_)); \
    } while (0)

/* Selects the physical GPU of a (virtual) device on this thread and yields its stream;
 * returns -1 from the enclosing function when that fails. */
#define CUDA_STREAM_OF(dev, var)                                                           \
    cudaStream_t var;                                                                      \
    do {                                                                                   \
        if (dp_cuda_enter((dev).index, (void **)&var)) return -1;                         \
    } while (0)

/* ---------------------------------------------------------------- launch geometry */

#define DP_THREADS 256

static inline unsigned int dp_grid_for(int64_t n, int threads)
{
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks < 1) blocks = 1;
    /* grid-stride loops cover the rest; 132 SMs x 32 resident blocks is plenty */
    if (blocks > 65536) blocks = 65536;
    return (unsigned int)blocks;
}

/* ---------------------------------------------------------------- dtypes */

/* (the engine's dp_dtype_name is not linked into this library) */
static inline const char *dp_cuda_dtype_name(int dt)
{
    static const char *const names[] = { "float32", "float64", "int64", "bool", "float16", "bfloat16" };
    return dt >= 0 && dt < DP_NDTYPES ? names[dt] : "unknown";
}

/* Conversion to an element type: bool is "nonzero" (NaN is true, as in PyTorch). */
template <typename O, typename C> __device__ __forceinline__ O dp_cvt(C v) { return (O)v; }
template <> __device__ __forceinline__ bool dp_cvt<bool, float>(float v) { return v != 0.0f; }
template <> __device__ __forceinline__ bool dp_cvt<bool, double>(double v) { return v != 0.0; }
template <> __device__ __forceinline__ bool dp_cvt<bool, int64_t>(int64_t v) { return v != 0; }
/* floats to int64 as on the CPU: NaN and out of range give INT64_MIN (src/opmath.h) */
template <> __device__ __forceinline__ int64_t dp_cvt<int64_t, float>(float v) { return dp_float_to_int64(v); }
template <> __device__ __forceinline__ int64_t dp_cvt<int64_t, double>(double v) { return dp_float_to_int64(v); }
/* float16 and bfloat16 elements (the copy and fill kernels store them; the other kernels
 * see them converted to float32 by the engine, src/half.c): through float32, as PyTorch */
struct dp_f16 { uint16_t bits; };
struct dp_bf16 { uint16_t bits; };
#define DP_HALF_CVT(H, FROM_F)                                                                                 \
    template <> __device__ __forceinline__ H dp_cvt<H, float>(float v) { return H{ FROM_F(v) }; }               \
    template <> __device__ __forceinline__ H dp_cvt<H, double>(double v) { return H{ FROM_F((float)v) }; }      \
    template <> __device__ __forceinline__ H dp_cvt<H, int64_t>(int64_t v) { return H{ FROM_F((float)v) }; }
DP_HALF_CVT(dp_f16, dp_float_to_f16)
DP_HALF_CVT(dp_bf16, dp_float_to_bf16)

/* Element `off` (in elements) of a buffer of runtime dtype dt, converted to C.  The switch
 * is uniform across a warp, so it costs a predicted branch, not divergence. */
template <typename C> __device__ __forceinline__ C dp_load(const void *p, int dt, int64_t off)
{
    switch (dt) {
    case DP_FLOAT32: return dp_cvt<C, float>(((const float *)p)[off]);
    case DP_FLOAT64: return dp_cvt<C, double>(((const double *)p)[off]);
    case DP_INT64: return dp_cvt<C, int64_t>(((const int64_t *)p)[off]);
    case DP_FLOAT16: return dp_cvt<C, float>(dp_f16_to_float(((const uint16_t *)p)[off]));
    case DP_BFLOAT16: return dp_cvt<C, float>(dp_bf16_to_float(((const uint16_t *)p)[off]));
    default: return dp_cvt<C, int64_t>((int64_t)(((const uint8_t *)p)[off] != 0));
    }
}

/* Calls F::template run<O>() for the element type O of dtype dt. */
#define DP_DISPATCH_OUT(dt, F)                                                             \
    ((dt) == DP_FLOAT32 ? F.template run<float>()                                          \
     : (dt) == DP_FLOAT64 ? F.template run<double>()                                       \
     : (dt) == DP_INT64   ? F.template run<int64_t>()                                      \
     : (dt) == DP_BOOL    ? F.template run<bool>()                                         \
                          : dp_cuda_error("unsupported dtype %d", (int)(dt)))
/* The same for the kernels that only store elements (copy, fill), float16 and bfloat16 too. */
#define DP_DISPATCH_STORE(dt, F)                                                           \
    ((dt) == DP_FLOAT16 ? F.template run<dp_f16>()                                         \
     : (dt) == DP_BFLOAT16 ? F.template run<dp_bf16>()                                     \
                           : DP_DISPATCH_OUT(dt, F))

/* ---------------------------------------------------------------- strided offsets */

/* Offsets of N operands that share one logical shape (row-major element order).  A linear
 * index becomes coordinates by one division per dim: with fewer than 2^31 elements
 * (dp_offsets_set_dividers, which every builder below calls), a 32-bit multiply-high by a
 * divider computed on the host; beyond, or in offsets built by hand without that call, the
 * 64-bit division. */
template <int N> struct DP_HIDDEN dp_offsets {
    int ndim;
    bool narrow = false;   /* indices fit in 32 bits and div[] is set */
    int64_t sizes[DP_MAX_DIMS];
    int64_t strides[N][DP_MAX_DIMS];
    dp_divider div[DP_MAX_DIMS];

    __device__ __forceinline__ void get(int64_t i, int64_t off[N]) const
    {
        if (ndim == 1) {
#pragma unroll
            for (int k = 0; k < N; k++) off[k] = i * strides[k][0];
            return;
        }
#pragma unroll
        for (int k = 0; k < N; k++) off[k] = 0;
        if (narrow) {
            uint32_t r = (uint32_t)i;
            for (int d = ndim - 1; d >= 0; d--) {
                uint32_t q = div[d].div(r);
                int64_t c = (int64_t)(r - q * div[d].d);
                r = q;
#pragma unroll
                for (int k = 0; k < N; k++) off[k] += c * strides[k][d];
            }
            return;
        }
        for (int d = ndim - 1; d >= 0; d--) {
            int64_t s = sizes[d];
            int64_t c = i % s;
            i /= s;
#pragma unroll
            for (int k = 0; k < N; k++) off[k] += c * strides[k][d];
        }
    }
};

/* Sets o's dividers when its indices (0 .. product of its sizes - 1) fit in 32 bits; an
 * empty shape keeps the 64-bit path (no kernel runs over it). */
template <int N> static void dp_offsets_set_dividers(dp_offsets<N> *o)
{
    int64_t numel = 1;
    for (int d = 0; d < o->ndim; d++) {
        if (o->sizes[d] <= 0 || o->sizes[d] > INT32_MAX) { o->narrow = false; return; }
        numel *= o->sizes[d];
        if (numel > INT32_MAX) { o->narrow = false; return; }
    }
    for (int d = 0; d < o->ndim; d++) o->div[d] = dp_divider_of((uint32_t)o->sizes[d]);
    o->narrow = true;
}

/* Builds offsets for N views of the same shape (that of views[0]), dropping size-1 dims and
 * merging dims that are contiguous in every operand; *contiguous is set when the result
 * is one dim of stride 1 for every operand.  Returns numel. */
template <int N>
static int64_t dp_make_offsets(dp_offsets<N> *o, const dp_view *const views[N], bool *contiguous)
{
    const dp_view *v0 = views[0];
    int64_t numel = 1;
    int nd = 0;
    int64_t sz[DP_MAX_DIMS], st[N][DP_MAX_DIMS];
    for (int d = 0; d < v0->ndim; d++) {
        numel *= v0->sizes[d];
        if (v0->sizes[d] == 1) continue;
        sz[nd] = v0->sizes[d];
        for (int k = 0; k < N; k++) st[k][nd] = views[k]->strides[d];
        nd++;
    }
    /* merge each dim into the one outside it when the pair is one run in every operand */
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (m > 0) {
            bool merge = true;
            for (int k = 0; k < N; k++)
                if (o->strides[k][m - 1] != st[k][d] * sz[d]) { merge = false; break; }
            if (merge) {
                o->sizes[m - 1] *= sz[d];
                for (int k = 0; k < N; k++) o->strides[k][m - 1] = st[k][d];
                continue;
            }
        }
        o->sizes[m] = sz[d];
        for (int k = 0; k < N; k++) o->strides[k][m] = st[k][d];
        m++;
    }
    if (m == 0) {
        o->sizes[0] = 1;
        for (int k = 0; k < N; k++) o->strides[k][0] = 1;
        m = 1;
    }
    o->ndim = m;
    dp_offsets_set_dividers(o);
    bool c = (m == 1);
    for (int k = 0; c && k < N; k++) c = (o->strides[k][0] == 1);
    *contiguous = c;
    return numel;
}

/* The geometry of a reduction of `in` along dim (dim < 0: over everything).  outer runs
 * over the output elements with offsets 0 = in, 1 = out, 2 = idx (when given); inner
 * runs over the reduced elements of one output in row-major order (so a flat index over
 * them is the argmax of a whole-tensor reduction).  out and idx may have in's shape with
 * dim removed, or kept as size 1 (keepdim). */
struct DP_HIDDEN dp_reduce_geom {
    dp_offsets<3> outer;
    dp_offsets<1> inner;
    int64_t n_out, n_red;
};

static inline void dp_make_reduce_geom(dp_reduce_geom *g, const dp_view *out, const dp_view *idx,
                                       const dp_view *in, int dim)
{
    g->n_out = 1;
    g->n_red = 1;
    g->outer.ndim = 0;
    g->inner.ndim = 0;
    int od = 0;
    for (int d = 0; d < in->ndim; d++) {
        if (dim < 0 || d == dim) {
            int j = g->inner.ndim++;
            g->inner.sizes[j] = in->sizes[d];
            g->inner.strides[0][j] = in->strides[d];
            g->n_red *= in->sizes[d];
            if (out->ndim == in->ndim) od++;   /* keepdim: skip out's size-1 dim */
        } else {
            int j = g->outer.ndim++;
            g->outer.sizes[j] = in->sizes[d];
            g->outer.strides[0][j] = in->strides[d];
            g->outer.strides[1][j] = od < out->ndim ? out->strides[od] : 0;
            g->outer.strides[2][j] = idx && od < idx->ndim ? idx->strides[od] : 0;
            od++;
            g->n_out *= in->sizes[d];
        }
    }
    if (g->outer.ndim == 0) {
        g->outer.ndim = 1;
        g->outer.sizes[0] = 1;
        for (int k = 0; k < 3; k++) g->outer.strides[k][0] = 0;
    }
    if (g->inner.ndim == 0) {
        g->inner.ndim = 1;
        g->inner.sizes[0] = 1;
        g->inner.strides[0][0] = 0;
    }
    /* merge inner dims that are contiguous with each other (keeps the row-major order) */
    int m = 1;
    for (int d = 1; d < g->inner.ndim; d++) {
        if (g->inner.strides[0][m - 1] == g->inner.strides[0][d] * g->inner.sizes[d]) {
            g->inner.sizes[m - 1] *= g->inner.sizes[d];
            g->inner.strides[0][m - 1] = g->inner.strides[0][d];
        } else {
            g->inner.sizes[m] = g->inner.sizes[d];
            g->inner.strides[0][m] = g->inner.strides[0][d];
            m++;
        }
    }
    g->inner.ndim = m;
    dp_offsets_set_dividers(&g->outer);
    dp_offsets_set_dividers(&g->inner);
}

/* ---------------------------------------------------------------- block reductions */

template <typename T> __device__ __forceinline__ T dp_warp_sum(T v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

template <typename T> __device__ __forceinline__ T dp_warp_max(T v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        T w = __shfl_down_sync(0xffffffffu, v, o);
        v = (w > v || w != w) ? w : v;
    }
    return v;
}

/* Sum (MAX false) or maximum (MAX true; NaN wins) over the block, broadcast to all threads.
 * `shared` holds at least 32 values.  Every thread of the block must call it. */
template <bool MAX, typename T> __device__ T dp_block_reduce(T v, T *shared)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = MAX ? dp_warp_max(v) : dp_warp_sum(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? shared[lane] : (MAX ? shared[0] : (T)0);
        v = MAX ? dp_warp_max(v) : dp_warp_sum(v);
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    return shared[0];
}

template <typename T> __device__ T dp_block_sum(T v, T *shared) { return dp_block_reduce<false>(v, shared); }
template <typename T> __device__ T dp_block_max(T v, T *shared) { return dp_block_reduce<true>(v, shared); }

#endif
