/* softmax_loss.cu: softmax and log_softmax along a dim (forward and backward) and the
 * negative log-likelihood loss (forward and backward).  The arithmetic is in double, as in
 * the CPU backend, so float32 results agree to rounding.  NaN in a lane makes the whole
 * lane NaN, as on the CPU.
 *
 * Softmax lanes of up to 1024 elements (class scores) get 2 to 32 threads of a warp each
 * (a power of two), several lanes per block, with the elements kept in registers between
 * the passes and the max and sum combined by shuffles (PyTorch's persistent softmax);
 * longer lanes get a block each. */
#include "common.cuh"

/* The lanes of up to three views of one shape along dim: outer runs over the lanes, with
 * the lane's first element offset per view; step[k] is view k's stride along dim. */
struct DP_HIDDEN lanes {
    dp_offsets<3> outer;
    int64_t n_lanes, len;
    int64_t step[3];
};

static void make_lanes(lanes *l, const dp_view *const v[3], int nv, int dim)
{
    const dp_view *v0 = v[0];
    l->outer.ndim = 0;
    l->n_lanes = 1;
    l->len = v0->sizes[dim];
    for (int k = 0; k < 3; k++) l->step[k] = k < nv ? v[k]->strides[dim] : 0;
    for (int d = 0; d < v0->ndim; d++) {
        if (d == dim) continue;
        int j = l->outer.ndim++;
        l->outer.sizes[j] = v0->sizes[d];
        for (int k = 0; k < 3; k++) l->outer.strides[k][j] = k < nv ? v[k]->strides[d] : 0;
        l->n_lanes *= v0->sizes[d];
    }
    if (l->outer.ndim == 0) {
        l->outer.ndim = 1;
        l->outer.sizes[0] = 1;
        for (int k = 0; k < 3; k++) l->outer.strides[k][0] = 0;
    }
    dp_offsets_set_dividers(&l->outer);
}

static unsigned lane_threads(int64_t len)
{
    int64_t t = (len + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > DP_THREADS ? DP_THREADS : t);
}

static unsigned lane_grid(int64_t n) { return (unsigned)(n < (1 << 20) ? (n < 1 ? 1 : n) : (1 << 20)); }

/* Lanes of up to 1024 elements on part of a warp: blockDim.x threads (a power of two, 2 to 32)
 * per lane, blockDim.y lanes per block, each thread holding N elements (thread t has
 * elements t, t + blockDim.x, ...: a warp's loads are consecutive when step is 1). */
#define WARP_LANES_MAX 1024
#define WARP_BLOCK 128   /* threads per block of the warp kernels */

/* Sum (MAX false) or maximum (NaN wins) over groups of `width` lanes, in every lane of the
 * group: the butterfly gives every lane the same bits. */
template <bool MAX> __device__ __forceinline__ double group_reduce(double v, int width)
{
    for (int o = width / 2; o > 0; o >>= 1) {
        double w = __shfl_xor_sync(0xffffffffu, v, o, width);
        v = MAX ? ((w > v || w != w) ? w : v) : v + w;
    }
    return v;
}

/* views: 0 = in, 1 = out */
template <typename T, int N>
static __global__ void softmax_warp_kernel(bool log_, lanes l, const T *in, T *out)
{
    int w = blockDim.x;
    /* the loop is uniform over the block: every thread reaches the shuffles */
    for (int64_t j0 = (int64_t)blockIdx.x * blockDim.y; j0 < l.n_lanes; j0 += (int64_t)gridDim.x * blockDim.y) {
        int64_t j = j0 + threadIdx.y, off[3] = { 0, 0, 0 };
        int n = 0;   /* how many of its N elements this thread has */
        if (j < l.n_lanes) {
            l.outer.get(j, off);
            int64_t left = l.len - threadIdx.x;
            n = left <= 0 ? 0 : (int)((left + w - 1) / w);
        }
        T v[N];
        double m = -INFINITY;
#pragma unroll
        for (int k = 0; k < N; k++) {
            v[k] = k < n ? in[off[0] + (threadIdx.x + (int64_t)k * w) * l.step[0]] : (T)0;
            double x = (double)v[k];
            if (k < n && (x > m || x != x)) m = x;
        }
        m = group_reduce<true>(m, w);
        double sum = 0;
#pragma unroll
        for (int k = 0; k < N; k++)
            if (k < n) sum += exp((double)v[k] - m);
        sum = group_reduce<false>(sum, w);
        double lse = m + log(sum);
#pragma unroll
        for (int k = 0; k < N; k++) {
            if (k < n) {
                double x = (double)v[k];
                out[off[1] + (threadIdx.x + (int64_t)k * w) * l.step[1]] = (T)(log_ ? x - lse : exp(x - m) / sum);
            }
        }
    }
}

/* views: 0 = grad_out, 1 = grad_in, 2 = y */
template <typename T, int N>
static __global__ void softmax_backward_warp_kernel(bool log_, lanes l, const T *gout, T *gin, const T *y)
{
    int w = blockDim.x;
    for (int64_t j0 = (int64_t)blockIdx.x * blockDim.y; j0 < l.n_lanes; j0 += (int64_t)gridDim.x * blockDim.y) {
        int64_t j = j0 + threadIdx.y, off[3] = { 0, 0, 0 };
        int n = 0;
        if (j < l.n_lanes) {
            l.outer.get(j, off);
            int64_t left = l.len - threadIdx.x;
            n = left <= 0 ? 0 : (int)((left + w - 1) / w);
        }
        T gv[N], yv[N];
        double acc = 0;
#pragma unroll
        for (int k = 0; k < N; k++) {
            int64_t r = threadIdx.x + (int64_t)k * w;
            gv[k] = k < n ? gout[off[0] + r * l.step[0]] : (T)0;
            yv[k] = k < n ? y[off[2] + r * l.step[2]] : (T)0;
            acc += log_ ? (double)gv[k] : (double)gv[k] * (double)yv[k];
        }
        acc = group_reduce<false>(acc, w);
#pragma unroll
        for (int k = 0; k < N; k++) {
            if (k < n) {
                double g = (double)gv[k], yy = (double)yv[k];
                gin[off[1] + (threadIdx.x + (int64_t)k * w) * l.step[1]] = (T)(log_ ? g - exp(yy) * acc : yy * (g - acc));
            }
        }
    }
}

/* The warp kernels' shape for lanes of len <= WARP_LANES_MAX elements: threads per lane
 * (x), lanes per block (y), elements per thread (*n). */
static dim3 warp_shape(int64_t len, int *n)
{
    int64_t p = 2;   /* at least one shuffle, so that the kernels synchronise alike in every launch */
    while (p < len) p <<= 1;
    unsigned w = (unsigned)(p < 32 ? p : 32);
    *n = (int)(p / w);
    return dim3(w, WARP_BLOCK / w);
}

static unsigned warp_grid(int64_t n_lanes, dim3 b) { return lane_grid((n_lanes + b.y - 1) / b.y); }

template <typename T> static void softmax_warp(bool log_, const lanes &l, const T *in, T *out, cudaStream_t s)
{
    int n;
    dim3 b = warp_shape(l.len, &n);
    unsigned g = warp_grid(l.n_lanes, b);
    switch (n) {
    case 1: softmax_warp_kernel<T, 1><<<g, b, 0, s>>>(log_, l, in, out); break;
    case 2: softmax_warp_kernel<T, 2><<<g, b, 0, s>>>(log_, l, in, out); break;
    case 4: softmax_warp_kernel<T, 4><<<g, b, 0, s>>>(log_, l, in, out); break;
    case 8: softmax_warp_kernel<T, 8><<<g, b, 0, s>>>(log_, l, in, out); break;
    case 16: softmax_warp_kernel<T, 16><<<g, b, 0, s>>>(log_, l, in, out); break;
    default: softmax_warp_kernel<T, 32><<<g, b, 0, s>>>(log_, l, in, out); break;
    }
}

template <typename T>
static void softmax_backward_warp(bool log_, const lanes &l, const T *gout, T *gin, const T *y, cudaStream_t s)
{
    int n;
    dim3 b = warp_shape(l.len, &n);
    unsigned g = warp_grid(l.n_lanes, b);
    switch (n) {
    case 1: softmax_backward_warp_kernel<T, 1><<<g, b, 0, s>>>(log_, l, gout, gin, y); break;
    case 2: softmax_backward_warp_kernel<T, 2><<<g, b, 0, s>>>(log_, l, gout, gin, y); break;
    case 4: softmax_backward_warp_kernel<T, 4><<<g, b, 0, s>>>(log_, l, gout, gin, y); break;
    case 8: softmax_backward_warp_kernel<T, 8><<<g, b, 0, s>>>(log_, l, gout, gin, y); break;
    case 16: softmax_backward_warp_kernel<T, 16><<<g, b, 0, s>>>(log_, l, gout, gin, y); break;
    default: softmax_backward_warp_kernel<T, 32><<<g, b, 0, s>>>(log_, l, gout, gin, y); break;
    }
}

/* views: 0 = in, 1 = out */
template <typename T>
static __global__ void softmax_kernel(bool log_, lanes l, const T *in, T *out)
{
    __shared__ double sh[32];
    for (int64_t j = blockIdx.x; j < l.n_lanes; j += gridDim.x) {
        int64_t off[3];
        l.outer.get(j, off);
        const T *x = in + off[0];
        T *y = out + off[1];
        double m = -INFINITY;
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) {
            double v = (double)x[r * l.step[0]];
            if (v > m || v != v) m = v;
        }
        m = dp_block_max(m, sh);
        double sum = 0;
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) sum += exp((double)x[r * l.step[0]] - m);
        sum = dp_block_sum(sum, sh);
        double lse = m + log(sum);
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) {
            double v = (double)x[r * l.step[0]];
            y[r * l.step[1]] = (T)(log_ ? v - lse : exp(v - m) / sum);
        }
        __syncthreads();
    }
}

/* views: 0 = grad_out, 1 = grad_in, 2 = y */
template <typename T>
static __global__ void softmax_backward_kernel(bool log_, lanes l, const T *gout, T *gin, const T *y)
{
    __shared__ double sh[32];
    for (int64_t j = blockIdx.x; j < l.n_lanes; j += gridDim.x) {
        int64_t off[3];
        l.outer.get(j, off);
        const T *g = gout + off[0], *yy = y + off[2];
        T *gi = gin + off[1];
        double acc = 0;
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) {
            double gv = (double)g[r * l.step[0]];
            acc += log_ ? gv : gv * (double)yy[r * l.step[2]];
        }
        acc = dp_block_sum(acc, sh);
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) {
            double gv = (double)g[r * l.step[0]], yv = (double)yy[r * l.step[2]];
            gi[r * l.step[1]] = (T)(log_ ? gv - exp(yv) * acc : yv * (gv - acc));
        }
        __syncthreads();
    }
}

static int float_only(const char *what, int dtype)
{
    return dp_cuda_error("%s on CUDA needs a float32 or float64 tensor, not %s", what, dp_cuda_dtype_name(dtype));
}

extern "C" int dp_cuda_softmax(bool log, const dp_view *out, const dp_view *in, int dim)
{
    if (in->dtype != out->dtype) return dp_cuda_error("CUDA softmax: input and output dtypes differ");
    if (dim < 0 || dim >= in->ndim) {
        if (in->ndim != 0) return dp_cuda_error("CUDA softmax: dim %d out of range", dim);
    }
    lanes l;
    const dp_view *v[3] = { in, out, NULL };
    if (in->ndim == 0) {   /* a 0-dim tensor is one lane of one element */
        l.outer.ndim = 1; l.outer.sizes[0] = 1;
        for (int k = 0; k < 3; k++) l.outer.strides[k][0] = 0;
        l.n_lanes = 1; l.len = 1; l.step[0] = l.step[1] = l.step[2] = 0;
    } else {
        make_lanes(&l, v, 2, dim);
    }
    if (l.n_lanes == 0 || l.len == 0) return 0;
    CUDA_STREAM_OF(out->device, s);
    unsigned t = lane_threads(l.len), g = lane_grid(l.n_lanes);
    if (in->dtype != DP_FLOAT32 && in->dtype != DP_FLOAT64) return float_only(log ? "log_softmax" : "softmax", in->dtype);
    if (l.len <= WARP_LANES_MAX) {
        if (in->dtype == DP_FLOAT32) softmax_warp<float>(log, l, (const float *)in->data, (float *)out->data, s);
        else softmax_warp<double>(log, l, (const double *)in->data, (double *)out->data, s);
    } else if (in->dtype == DP_FLOAT32) softmax_kernel<float><<<g, t, 0, s>>>(log, l, (const float *)in->data, (float *)out->data);
    else softmax_kernel<double><<<g, t, 0, s>>>(log, l, (const double *)in->data, (double *)out->data);
    CUDA_CHECK_LAUNCH("softmax");
    return 0;
}

extern "C" int dp_cuda_softmax_backward(bool log, const dp_view *grad_in, const dp_view *grad_out, const dp_view *y, int dim)
{
    if (grad_in->dtype != grad_out->dtype || y->dtype != grad_out->dtype)
        return dp_cuda_error("CUDA softmax backward: dtypes differ");
    lanes l;
    const dp_view *v[3] = { grad_out, grad_in, y };
    if (grad_out->ndim == 0) {
        l.outer.ndim = 1; l.outer.sizes[0] = 1;
        for (int k = 0; k < 3; k++) l.outer.strides[k][0] = 0;
        l.n_lanes = 1; l.len = 1; l.step[0] = l.step[1] = l.step[2] = 0;
    } else {
        if (dim < 0 || dim >= grad_out->ndim) return dp_cuda_error("CUDA softmax backward: dim %d out of range", dim);
        make_lanes(&l, v, 3, dim);
    }
    if (l.n_lanes == 0 || l.len == 0) return 0;
    CUDA_STREAM_OF(grad_in->device, s);
    unsigned t = lane_threads(l.len), g = lane_grid(l.n_lanes);
    if (grad_out->dtype != DP_FLOAT32 && grad_out->dtype != DP_FLOAT64) return float_only("softmax backward", grad_out->dtype);
    if (l.len <= WARP_LANES_MAX) {
        if (grad_out->dtype == DP_FLOAT32)
            softmax_backward_warp<float>(log, l, (const float *)grad_out->data, (float *)grad_in->data, (const float *)y->data, s);
        else
            softmax_backward_warp<double>(log, l, (const double *)grad_out->data, (double *)grad_in->data,
                                          (const double *)y->data, s);
    } else if (grad_out->dtype == DP_FLOAT32)
        softmax_backward_kernel<float><<<g, t, 0, s>>>(log, l, (const float *)grad_out->data, (float *)grad_in->data,
                                                       (const float *)y->data);
    else
        softmax_backward_kernel<double><<<g, t, 0, s>>>(log, l, (const double *)grad_out->data, (double *)grad_in->data,
                                                        (const double *)y->data);
    CUDA_CHECK_LAUNCH("softmax_backward");
    return 0;
}

/* ---------------------------------------------------------------- NLL loss */

/* c: the number of classes; a target outside [0, c) counts as 0 (the engine's device-side
 * check reports it at the next synchronisation) */
struct DP_HIDDEN nll_geom {
    int64_t n, s_in0, s_in1, s_t, s_out, c;
};

template <typename T> __device__ __forceinline__ double nll_term(const nll_geom &g, const T *in, const int64_t *target, int64_t i)
{
    int64_t t = target[i * g.s_t];
    return t >= 0 && t < g.c ? -(double)in[i * g.s_in0 + t * g.s_in1] : 0.0;
}

template <typename T>
static __global__ void nll_per_item_kernel(nll_geom g, const T *in, const int64_t *target, T *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (int64_t)gridDim.x * blockDim.x)
        out[i * g.s_out] = (T)nll_term(g, in, target, i);
}

/* one block: the sum over N in double */
template <typename T>
static __global__ void nll_sum_kernel(nll_geom g, const T *in, const int64_t *target, T *out)
{
    __shared__ double sh[32];
    double acc = 0;
    for (int64_t i = threadIdx.x; i < g.n; i += blockDim.x) acc += nll_term(g, in, target, i);
    acc = dp_block_sum(acc, sh);
    if (threadIdx.x == 0) out[0] = (T)acc;
}

/* writes grad_in at each row's target (the caller zero-fills grad_in) */
template <typename T>
static __global__ void nll_backward_kernel(nll_geom g, T *gin, const T *gout, int64_t s_gout, const int64_t *target,
                                           bool per_item, double scale)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (int64_t)gridDim.x * blockDim.x) {
        double gv = (double)gout[per_item ? i * s_gout : 0];
        int64_t t = target[i * g.s_t];
        if (t >= 0 && t < g.c) gin[i * g.s_in0 + t * g.s_in1] = (T)(-gv * scale);
    }
}

static int nll_check(const dp_view *input, const dp_view *target)
{
    if (input->ndim != 2) return dp_cuda_error("CUDA nll_loss: input must be [N, C], got %d dims", input->ndim);
    if (target->ndim != 1 || target->dtype != DP_INT64 || target->sizes[0] != input->sizes[0])
        return dp_cuda_error("CUDA nll_loss: target must be int64 [N]");
    if (input->dtype != DP_FLOAT32 && input->dtype != DP_FLOAT64) return float_only("nll_loss", input->dtype);
    return 0;
}

extern "C" int dp_cuda_nll_loss(const dp_view *out, const dp_view *input, const dp_view *target, bool per_item)
{
    if (nll_check(input, target)) return -1;
    if (out->dtype != input->dtype) return dp_cuda_error("CUDA nll_loss: output dtype differs from input");
    nll_geom g = { input->sizes[0], input->strides[0], input->strides[1], target->strides[0],
                   per_item && out->ndim > 0 ? out->strides[0] : 0, input->sizes[1] };
    CUDA_STREAM_OF(out->device, s);
    if (per_item) {
        if (g.n == 0) return 0;
        unsigned grid = dp_grid_for(g.n, DP_THREADS);
        if (input->dtype == DP_FLOAT32)
            nll_per_item_kernel<float><<<grid, DP_THREADS, 0, s>>>(g, (const float *)input->data, (const int64_t *)target->data, (float *)out->data);
        else
            nll_per_item_kernel<double><<<grid, DP_THREADS, 0, s>>>(g, (const double *)input->data, (const int64_t *)target->data, (double *)out->data);
    } else {
        if (input->dtype == DP_FLOAT32)
            nll_sum_kernel<float><<<1, DP_THREADS, 0, s>>>(g, (const float *)input->data, (const int64_t *)target->data, (float *)out->data);
        else
            nll_sum_kernel<double><<<1, DP_THREADS, 0, s>>>(g, (const double *)input->data, (const int64_t *)target->data, (double *)out->data);
    }
    CUDA_CHECK_LAUNCH("nll_loss");
    return 0;
}

extern "C" int dp_cuda_nll_loss_backward(const dp_view *grad_in, const dp_view *grad_out, const dp_view *target,
                                         bool per_item, double scale)
{
    if (nll_check(grad_in, target)) return -1;
    if (grad_out->dtype != grad_in->dtype) return dp_cuda_error("CUDA nll_loss backward: dtypes differ");
    nll_geom g = { grad_in->sizes[0], grad_in->strides[0], grad_in->strides[1], target->strides[0], 0, grad_in->sizes[1] };
    if (g.n == 0) return 0;
    int64_t s_gout = per_item && grad_out->ndim > 0 ? grad_out->strides[0] : 0;
    CUDA_STREAM_OF(grad_in->device, s);
    unsigned grid = dp_grid_for(g.n, DP_THREADS);
    if (grad_in->dtype == DP_FLOAT32)
        nll_backward_kernel<float><<<grid, DP_THREADS, 0, s>>>(g, (float *)grad_in->data, (const float *)grad_out->data,
                                                               s_gout, (const int64_t *)target->data, per_item, scale);
    else
        nll_backward_kernel<double><<<grid, DP_THREADS, 0, s>>>(g, (double *)grad_in->data, (const double *)grad_out->data,
                                                                s_gout, (const int64_t *)target->data, per_item, scale);
    CUDA_CHECK_LAUNCH("nll_loss_backward");
    return 0;
}
