/* conv.cu: convolution on the GPU as im2col + cuBLAS (through dp_cuda_gemm), the base path
 * that runs everywhere (the emulation included).  The batch is cut into chunks whose
 * column buffers fit a scratch budget; in a chunk, each group's product is one batched
 * GEMM (forward, input gradient) or one GEMM over the chunk's columns side by side (weight
 * gradient).  col2im gathers (each input element sums the taps that read it), so no
 * atomics and the result is deterministic.  With DPLUA_CUDNN=1, cuDNN is tried first
 * (conv_cudnn.cu). */
#include "common.cuh"

#define COL_BUDGET ((int64_t)1 << 26)   /* elements of scratch per chunk */

namespace {

struct conv_dims {
    int64_t cig, cog, pin, pout, k;
};

conv_dims dims_of(const dp_conv_geom &g)
{
    conv_dims d = { g.in_channels / g.groups, g.out_channels / g.groups, 1, 1, 1 };
    for (int s = 0; s < 3; s++) {
        d.pin *= g.in[s];
        d.pout *= g.out[s];
        d.k *= g.kernel[s];
    }
    return d;
}

/* col[b * sb + row * sr + p] for the nb images at x (image stride xs), cig channels:
 * row = (c, kd, kh, kw), p = (od, oh, ow); zero where the tap falls in the padding. */
template <typename T>
__global__ void im2col_kernel(dp_conv_geom g, int64_t nb, int64_t cig, const T *x, int64_t xs, T *col, int64_t sb,
                              int64_t sr)
{
    int64_t P = g.out[0] * g.out[1] * g.out[2], K = g.kernel[0] * g.kernel[1] * g.kernel[2];
    int64_t total = nb * cig * K * P;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i % P, row = (i / P) % (cig * K), b = i / (P * cig * K);
        int64_t ow = p % g.out[2], oh = (p / g.out[2]) % g.out[1], od = p / (g.out[2] * g.out[1]);
        int64_t kw = row % g.kernel[2], kh = (row / g.kernel[2]) % g.kernel[1];
        int64_t kd = (row / (g.kernel[2] * g.kernel[1])) % g.kernel[0], c = row / K;
        int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
        int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
        int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dilation[2];
        bool in = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2];
        col[b * sb + row * sr + p] = in ? x[b * xs + ((c * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw] : (T)0;
    }
}

/* The one output position o of a tap whose input position is i, or -1. */
__device__ __forceinline__ int64_t out_of(int64_t i, int64_t pad, int64_t k, int64_t dil, int64_t stride, int64_t n)
{
    int64_t t = i + pad - k * dil;
    if (t < 0 || t % stride) return -1;
    t /= stride;
    return t < n ? t : -1;
}

/* x[b, c, id, ih, iw] = the sum of the columns (layout [b][row][p]) that read it. */
template <typename T>
__global__ void col2im_kernel(dp_conv_geom g, int64_t nb, int64_t cig, const T *col, T *x, int64_t xs)
{
    int64_t P = g.out[0] * g.out[1] * g.out[2], K = g.kernel[0] * g.kernel[1] * g.kernel[2];
    int64_t pin = g.in[0] * g.in[1] * g.in[2], total = nb * cig * pin;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t iw = i % g.in[2], ih = (i / g.in[2]) % g.in[1], id = (i / (g.in[2] * g.in[1])) % g.in[0];
        int64_t c = (i / pin) % cig, b = i / (pin * cig);
        const T *cb = col + (b * cig + c) * K * P;
        T acc = 0;
        for (int64_t kd = 0; kd < g.kernel[0]; kd++) {
            int64_t od = out_of(id, g.pad[0], kd, g.dilation[0], g.stride[0], g.out[0]);
            if (od < 0) continue;
            for (int64_t kh = 0; kh < g.kernel[1]; kh++) {
                int64_t oh = out_of(ih, g.pad[1], kh, g.dilation[1], g.stride[1], g.out[1]);
                if (oh < 0) continue;
                for (int64_t kw = 0; kw < g.kernel[2]; kw++) {
                    int64_t ow = out_of(iw, g.pad[2], kw, g.dilation[2], g.stride[2], g.out[2]);
                    if (ow < 0) continue;
                    acc += cb[((kd * g.kernel[1] + kh) * g.kernel[2] + kw) * P + (od * g.out[1] + oh) * g.out[2] + ow];
                }
            }
        }
        x[b * xs + c * pin + id * g.in[1] * g.in[2] + ih * g.in[2] + iw] = acc;
    }
}

/* out[n, c, p] = b[c] */
template <typename T>
__global__ void bias_fill_kernel(T *out, const T *bias, int64_t channels, int64_t P, int64_t total)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = bias[(i / P) % channels];
}

/* out[n, c, p] += b[c] */
template <typename T>
__global__ void bias_add_kernel(T *out, const T *bias, int64_t channels, int64_t P, int64_t total)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        out[i] += bias[(i / P) % channels];
}

template <typename T>
int add_bias(const dp_conv_geom &g, T *out, const T *bias)
{
    int dev = dp_cuda_device_of(out);
    if (dev < 0) return -1;
    CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
    conv_dims d = dims_of(g);
    int64_t total = g.batch * g.out_channels * d.pout;
    bias_add_kernel<T><<<dp_grid_for(total, DP_THREADS), DP_THREADS, 0, s>>>(out, bias, g.out_channels, d.pout, total);
    CUDA_CHECK_LAUNCH("conv bias");
    return 0;
}

/* dst[c][b][p] = src[b * ss + c * P + p]: a chunk's output gradient with its images side by
 * side, for the weight gradient's single GEMM. */
template <typename T>
__global__ void gather_rows_kernel(T *dst, const T *src, int64_t nb, int64_t ch, int64_t P, int64_t ss)
{
    int64_t total = nb * ch * P;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i % P, b = (i / P) % nb, c = i / (P * nb);
        dst[i] = src[b * ss + c * P + p];
    }
}

/* Images per chunk so that `per_image` elements of scratch each stay within the budget. */
int64_t chunk_of(int64_t batch, int64_t per_image)
{
    int64_t nb = per_image > 0 ? COL_BUDGET / per_image : batch;
    if (nb < 1) nb = 1;
    return nb < batch ? nb : batch;
}

template <typename T>
int forward(const dp_conv_geom &g, T *out, const T *in, const T *w, const T *bias)
{
    int dev = dp_cuda_device_of(out);
    if (dev < 0) return -1;
    CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
    conv_dims d = dims_of(g);
    int dt = sizeof(T) == 4 ? DP_FLOAT32 : DP_FLOAT64;
    int64_t ck = d.cig * d.k, total = g.batch * g.out_channels * d.pout;
    if (bias) {
        bias_fill_kernel<T><<<dp_grid_for(total, DP_THREADS), DP_THREADS, 0, s>>>(out, bias, g.out_channels, d.pout, total);
        CUDA_CHECK_LAUNCH("conv bias");
    }
    int64_t nb = chunk_of(g.batch, ck * d.pout);
    T *col = (T *)dp_cuda_scratch_alloc(dev, (size_t)(nb * ck * d.pout) * sizeof(T));
    if (!col) return -1;
    int rc = 0;
    for (int64_t n0 = 0; n0 < g.batch && !rc; n0 += nb) {
        int64_t m = g.batch - n0 < nb ? g.batch - n0 : nb;
        for (int64_t gi = 0; gi < g.groups && !rc; gi++) {
            im2col_kernel<T><<<dp_grid_for(m * ck * d.pout, DP_THREADS), DP_THREADS, 0, s>>>(
                g, m, d.cig, in + (n0 * g.in_channels + gi * d.cig) * d.pin, g.in_channels * d.pin, col, ck * d.pout, d.pout);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) { rc = dp_cuda_error("CUDA error launching conv im2col: %s", cudaGetErrorString(e)); break; }
            rc = dp_cuda_gemm(dt, false, false, d.cog, d.pout, ck, 1.0, w + gi * d.cog * ck, ck, 0, col, d.pout, ck * d.pout,
                              bias ? 1.0 : 0.0, out + (n0 * g.out_channels + gi * d.cog) * d.pout, d.pout, g.out_channels * d.pout, m);
        }
    }
    dp_cuda_scratch_free(dev, col);
    return rc;
}

template <typename T>
int backward_input(const dp_conv_geom &g, T *grad_in, const T *grad_out, const T *w)
{
    int dev = dp_cuda_device_of(grad_in);
    if (dev < 0) return -1;
    CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
    conv_dims d = dims_of(g);
    int dt = sizeof(T) == 4 ? DP_FLOAT32 : DP_FLOAT64;
    int64_t ck = d.cig * d.k;
    int64_t nb = chunk_of(g.batch, ck * d.pout);
    T *col = (T *)dp_cuda_scratch_alloc(dev, (size_t)(nb * ck * d.pout) * sizeof(T));
    if (!col) return -1;
    int rc = 0;
    for (int64_t n0 = 0; n0 < g.batch && !rc; n0 += nb) {
        int64_t m = g.batch - n0 < nb ? g.batch - n0 : nb;
        for (int64_t gi = 0; gi < g.groups && !rc; gi++) {
            rc = dp_cuda_gemm(dt, true, false, ck, d.pout, d.cog, 1.0, w + gi * d.cog * ck, ck, 0,
                              grad_out + (n0 * g.out_channels + gi * d.cog) * d.pout, d.pout, g.out_channels * d.pout, 0.0, col,
                              d.pout, ck * d.pout, m);
            if (rc) break;
            col2im_kernel<T><<<dp_grid_for(m * d.cig * d.pin, DP_THREADS), DP_THREADS, 0, s>>>(
                g, m, d.cig, col, grad_in + (n0 * g.in_channels + gi * d.cig) * d.pin, g.in_channels * d.pin);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) rc = dp_cuda_error("CUDA error launching conv col2im: %s", cudaGetErrorString(e));
        }
    }
    dp_cuda_scratch_free(dev, col);
    return rc;
}

template <typename T>
int backward_weight(const dp_conv_geom &g, T *grad_w, const T *grad_out, const T *in)
{
    int dev = dp_cuda_device_of(grad_w);
    if (dev < 0) return -1;
    CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
    conv_dims d = dims_of(g);
    int dt = sizeof(T) == 4 ? DP_FLOAT32 : DP_FLOAT64;
    int64_t ck = d.cig * d.k;
    int64_t nb = chunk_of(g.batch, (ck + d.cog) * d.pout);
    T *col = (T *)dp_cuda_scratch_alloc(dev, (size_t)(nb * (ck + d.cog) * d.pout) * sizeof(T));
    if (!col) return -1;
    T *rows = col + nb * ck * d.pout;
    int rc = 0;
    for (int64_t n0 = 0; n0 < g.batch && !rc; n0 += nb) {
        int64_t m = g.batch - n0 < nb ? g.batch - n0 : nb;
        for (int64_t gi = 0; gi < g.groups && !rc; gi++) {
            /* columns [ck][m * P] and the output gradient [cog][m * P]: one GEMM sums the chunk */
            im2col_kernel<T><<<dp_grid_for(m * ck * d.pout, DP_THREADS), DP_THREADS, 0, s>>>(
                g, m, d.cig, in + (n0 * g.in_channels + gi * d.cig) * d.pin, g.in_channels * d.pin, col, d.pout, m * d.pout);
            gather_rows_kernel<T><<<dp_grid_for(m * d.cog * d.pout, DP_THREADS), DP_THREADS, 0, s>>>(
                rows, grad_out + (n0 * g.out_channels + gi * d.cog) * d.pout, m, d.cog, d.pout, g.out_channels * d.pout);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) { rc = dp_cuda_error("CUDA error launching conv im2col: %s", cudaGetErrorString(e)); break; }
            rc = dp_cuda_gemm(dt, false, true, d.cog, ck, m * d.pout, 1.0, rows, m * d.pout, 0, col, m * d.pout, 0,
                              n0 ? 1.0 : 0.0, grad_w + gi * d.cog * ck, ck, 0, 1);
        }
    }
    dp_cuda_scratch_free(dev, col);
    return rc;
}

int check(int dtype, const char *what)
{
    if (dtype == DP_FLOAT32 || dtype == DP_FLOAT64) return 0;
    return dp_cuda_error("%s: the CUDA kernels take float32 or float64, not %s", what, dp_cuda_dtype_name(dtype));
}

}  // namespace

extern "C" int dp_cuda_conv_forward(int dtype, const dp_conv_geom *g, void *out, const void *in, const void *w, const void *b)
{
    if (check(dtype, "conv")) return -1;
    if (dp_cuda_cudnn_conv(0, dtype, g, out, in, w, false)) {
        if (!b) return 0;
        return dtype == DP_FLOAT32 ? add_bias<float>(*g, (float *)out, (const float *)b)
                                   : add_bias<double>(*g, (double *)out, (const double *)b);
    }
    if (dtype == DP_FLOAT32) return forward<float>(*g, (float *)out, (const float *)in, (const float *)w, (const float *)b);
    return forward<double>(*g, (double *)out, (const double *)in, (const double *)w, (const double *)b);
}

extern "C" int dp_cuda_conv_backward_input(int dtype, const dp_conv_geom *g, void *grad_in, const void *grad_out, const void *w)
{
    if (check(dtype, "conv backward")) return -1;
    if (dp_cuda_cudnn_conv(1, dtype, g, grad_in, grad_out, w, false)) return 0;
    if (dtype == DP_FLOAT32) return backward_input<float>(*g, (float *)grad_in, (const float *)grad_out, (const float *)w);
    return backward_input<double>(*g, (double *)grad_in, (const double *)grad_out, (const double *)w);
}

extern "C" int dp_cuda_conv_backward_weight(int dtype, const dp_conv_geom *g, void *grad_w, const void *grad_out, const void *in)
{
    if (check(dtype, "conv backward")) return -1;
    if (dp_cuda_cudnn_conv(2, dtype, g, grad_w, grad_out, in, false)) return 0;
    if (dtype == DP_FLOAT32) return backward_weight<float>(*g, (float *)grad_w, (const float *)grad_out, (const float *)in);
    return backward_weight<double>(*g, (double *)grad_w, (const double *)grad_out, (const double *)in);
}
