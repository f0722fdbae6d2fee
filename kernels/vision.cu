/* vision.cu: the pooling kernels (max, average, adaptive; forward and backward) over
 * contiguous planes [planes, ih, iw].  One thread per output element; the backward adds
 * into grad_in with atomics, since windows overlap when the stride is below the kernel
 * (under torch.use_deterministic_algorithms: a gather, or determ.cu's sorted path).
 * The windows are vision_window.h's, the same text as the CPU kernels. */
#include "common.cuh"
#include "../src/vision_window.h"

__device__ __forceinline__ void pool_atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void pool_atomic_add(double *p, double v) { atomicAdd(p, v); }

/* the window of output o (flat within its plane) and the average's divisor */
__device__ __forceinline__ void pool_window(const dp_pool2d_params &p, int64_t o, int64_t *h0, int64_t *h1,
                                            int64_t *w0, int64_t *w1, int64_t *count)
{
    int64_t oh = o / p.ow, ow = o % p.ow;
    *count = 1;
    if (p.adaptive) {
        dp_adaptive_window(oh, p.ih, p.oh, h0, h1);
        dp_adaptive_window(ow, p.iw, p.ow, w0, w1);
        *count = (*h1 - *h0) * (*w1 - *w0);
    } else if (p.kind == DP_POOL_MAX) {
        dp_max_window(oh, p.ih, p.kh, p.sh, p.ph, p.dh, h0, h1);
        dp_max_window(ow, p.iw, p.kw, p.sw, p.pw, p.dw, w0, w1);
    } else {
        int64_t lh, lw;
        dp_avg_window(oh, p.ih, p.kh, p.sh, p.ph, h0, h1, &lh);
        dp_avg_window(ow, p.iw, p.kw, p.sw, p.pw, w0, w1, &lw);
        *count = p.divisor ? p.divisor : p.count_include_pad ? lh * lw : (*h1 - *h0) * (*w1 - *w0);
    }
}

template <typename T>
static __global__ void pool_fwd_kernel(dp_pool2d_params p, int64_t n, T *out, int64_t *idx, const T *in)
{
    int64_t osz = p.oh * p.ow, isz = p.ih * p.iw;
    int64_t dh = p.adaptive ? 1 : p.dh, dw = p.adaptive ? 1 : p.dw;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i / osz, o = i % osz, h0, h1, w0, w1, count;
        pool_window(p, o, &h0, &h1, &w0, &w1, &count);
        const T *x = in + c * isz;
        if (p.kind == DP_POOL_MAX) {
            T m = (T)-INFINITY;
            int64_t at = h0 * p.iw + w0;
            for (int64_t h = h0; h < h1; h += dh)
                for (int64_t w = w0; w < w1; w += dw) {
                    T v = x[h * p.iw + w];
                    if (v > m || v != v) { m = v; at = h * p.iw + w; }
                }
            out[i] = m;
            idx[i] = at;
        } else {
            double s = 0;
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++) s += (double)x[h * p.iw + w];
            out[i] = (T)(s / (double)count);
        }
    }
}

template <typename T>
static __global__ void pool_bwd_kernel(dp_pool2d_params p, int64_t n, T *gin, const T *gout, const int64_t *idx)
{
    int64_t osz = p.oh * p.ow, isz = p.ih * p.iw;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i / osz, o = i % osz;
        T *gx = gin + c * isz;
        if (p.kind == DP_POOL_MAX) {
            pool_atomic_add(gx + idx[i], gout[i]);
            continue;
        }
        int64_t h0, h1, w0, w1, count;
        pool_window(p, o, &h0, &h1, &w0, &w1, &count);
        T g = (T)((double)gout[i] / (double)count);
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) pool_atomic_add(gx + h * p.iw + w, g);
    }
}

/* ---- the deterministic backward (torch.use_deterministic_algorithms) */

/* the outputs [*lo, *hi) along one dim whose windows may cover input row x (a superset:
 * the caller checks each window) */
__device__ __forceinline__ void avg_cover(const dp_pool2d_params &p, bool rows, int64_t x, int64_t *lo, int64_t *hi)
{
    int64_t in = rows ? p.ih : p.iw, out = rows ? p.oh : p.ow;
    int64_t a, b;
    if (p.adaptive) {
        a = x * out / in - 1;
        b = (x + 1) * out / in + 2;
    } else {
        int64_t k = rows ? p.kh : p.kw, s = rows ? p.sh : p.sw, pad = rows ? p.ph : p.pw;
        a = (x + pad - k) / s;
        b = (x + pad) / s + 1;
    }
    *lo = a < 0 ? 0 : a;
    *hi = b > out ? out : b;
}

/* average pooling: one thread per input element gathers the outputs whose windows cover it,
 * in output order (the CPU's), so the sum is the CPU's on every schedule */
template <typename T>
static __global__ void avg_pool_bwd_gather_kernel(dp_pool2d_params p, int64_t n, T *gin, const T *gout)
{
    int64_t osz = p.oh * p.ow, isz = p.ih * p.iw;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i / isz, h = i % isz / p.iw, w = i % p.iw, oh0, oh1, ow0, ow1;
        avg_cover(p, true, h, &oh0, &oh1);
        avg_cover(p, false, w, &ow0, &ow1);
        const T *gy = gout + c * osz;
        T acc = gin[i];
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++) {
                int64_t o = oh * p.ow + ow, h0, h1, w0, w1, count;
                pool_window(p, o, &h0, &h1, &w0, &w1, &count);
                if (h >= h0 && h < h1 && w >= w0 && w < w1) acc += (T)((double)gy[o] / (double)count);
            }
        gin[i] = acc;
    }
}

/* max pooling: the sorted path's sources (determ.cu), output i goes to its maximum's place */
static __global__ void max_pool_bwd_keys_kernel(dp_pool2d_params p, int64_t n, const int64_t *idx, int64_t *keys,
                                                int64_t *soffs)
{
    int64_t osz = p.oh * p.ow, isz = p.ih * p.iw;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        keys[i] = i / osz * isz + idx[i];
        soffs[i] = i;
    }
}

static int pool_backward_deterministic(const dp_pool2d_params *p, int dtype, dp_device dev, cudaStream_t s,
                                       void *grad_in, const void *grad_out, const int64_t *idx)
{
    if (p->kind != DP_POOL_MAX) {
        int64_t n = p->planes * p->ih * p->iw;
        unsigned g = dp_grid_for(n, DP_THREADS);
        if (dtype == DP_FLOAT32)
            avg_pool_bwd_gather_kernel<float><<<g, DP_THREADS, 0, s>>>(*p, n, (float *)grad_in, (const float *)grad_out);
        else avg_pool_bwd_gather_kernel<double><<<g, DP_THREADS, 0, s>>>(*p, n, (double *)grad_in, (const double *)grad_out);
        CUDA_CHECK_LAUNCH("pool2d backward");
        return 0;
    }
    int64_t n = p->planes * p->oh * p->ow;
    dp_det_scratch d;
    if (dp_cuda_det_begin(dev.index, n, &d)) return -1;
    max_pool_bwd_keys_kernel<<<dp_grid_for(n, DP_THREADS), DP_THREADS, 0, s>>>(*p, n, idx, d.keys, d.soffs);
    return dp_cuda_det_scatter(&d, dtype, DP_SCATTER_ADD, grad_in, grad_out);
}

static int pool_check(const char *what, const dp_pool2d_params *p, int dtype, const void *idx)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64)
        return dp_cuda_error("CUDA %s needs a float32 or float64 tensor, not %s", what, dp_cuda_dtype_name(dtype));
    if (p->kind == DP_POOL_MAX && !idx) return dp_cuda_error("CUDA %s: max pooling needs an index buffer", what);
    return 0;
}

extern "C" int dp_cuda_pool2d(const dp_pool2d_params *p, int dtype, dp_device dev, void *out, int64_t *idx,
                              const void *in)
{
    if (pool_check("pool2d", p, dtype, idx)) return -1;
    int64_t n = p->planes * p->oh * p->ow;
    if (n == 0) return 0;
    CUDA_STREAM_OF(dev, s);
    unsigned g = dp_grid_for(n, DP_THREADS);
    if (dtype == DP_FLOAT32) pool_fwd_kernel<float><<<g, DP_THREADS, 0, s>>>(*p, n, (float *)out, idx, (const float *)in);
    else pool_fwd_kernel<double><<<g, DP_THREADS, 0, s>>>(*p, n, (double *)out, idx, (const double *)in);
    CUDA_CHECK_LAUNCH("pool2d");
    return 0;
}

extern "C" int dp_cuda_pool2d_backward(const dp_pool2d_params *p, int dtype, dp_device dev, void *grad_in,
                                       const void *grad_out, const int64_t *idx)
{
    if (pool_check("pool2d backward", p, dtype, idx)) return -1;
    int64_t n = p->planes * p->oh * p->ow;
    if (n == 0) return 0;
    CUDA_STREAM_OF(dev, s);
    if (dp_cuda_deterministic()) return pool_backward_deterministic(p, dtype, dev, s, grad_in, grad_out, idx);
    unsigned g = dp_grid_for(n, DP_THREADS);
    if (dtype == DP_FLOAT32)
        pool_bwd_kernel<float><<<g, DP_THREADS, 0, s>>>(*p, n, (float *)grad_in, (const float *)grad_out, idx);
    else pool_bwd_kernel<double><<<g, DP_THREADS, 0, s>>>(*p, n, (double *)grad_in, (const double *)grad_out, idx);
    CUDA_CHECK_LAUNCH("pool2d backward");
    return 0;
}
