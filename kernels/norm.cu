/* norm.cu: layer normalization (src/norm.c), forward and backward, on contiguous rows.
 * One block per row: the row's mean and then its squared deviations are block sums in
 * double (two passes, as the CPU kernel), so float32 results agree with the CPU to
 * rounding.  The backward's row kernel writes grad_x from two more block sums; the
 * gradients of weight and bias are column sums over the rows, one thread per column and
 * chunk of rows (consecutive threads read consecutive columns of a row, so the reads
 * coalesce), the chunks then added in order, so the result does not depend on timing. */
#include "common.cuh"

static unsigned row_threads(int64_t cols)
{
    int64_t t = (cols + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > DP_THREADS ? DP_THREADS : t);
}

static unsigned row_grid(int64_t rows) { return (unsigned)(rows < (1 << 20) ? (rows < 1 ? 1 : rows) : (1 << 20)); }

template <typename T>
static __global__ void layer_norm_kernel(int64_t rows, int64_t n, double eps, const T *x, const T *w, const T *b,
                                         T *y, T *mean, T *rstd)
{
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        double s = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += (double)xr[i];
        double m = dp_block_sum(s, sh) / (double)n;
        double v = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            double d = (double)xr[i] - m;
            v += d * d;
        }
        double rs = 1 / sqrt(dp_block_sum(v, sh) / (double)n + eps);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            double h = ((double)xr[i] - m) * rs;
            if (w) h *= (double)w[i];
            if (b) h += (double)b[i];
            yr[i] = (T)h;
        }
        if (threadIdx.x == 0) {
            mean[r] = (T)m;
            rstd[r] = (T)rs;
        }
        __syncthreads();
    }
}

/* gx = rstd * (gy w - mean(gy w) - xhat * mean(gy w xhat)) */
template <typename T>
static __global__ void layer_norm_backward_kernel(int64_t rows, int64_t n, const T *gy, const T *x, const T *mean,
                                                  const T *rstd, const T *w, T *gx)
{
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * n, *gr = gy + r * n;
        double m = (double)mean[r], rs = (double)rstd[r];
        double a = 0, c = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            double g = w ? (double)gr[i] * (double)w[i] : (double)gr[i];
            a += g;
            c += g * (((double)xr[i] - m) * rs);
        }
        a = dp_block_sum(a, sh) / (double)n;
        c = dp_block_sum(c, sh) / (double)n;
        T *gxr = gx + r * n;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            double g = w ? (double)gr[i] * (double)w[i] : (double)gr[i];
            gxr[i] = (T)(rs * (g - a - ((double)xr[i] - m) * rs * c));
        }
        __syncthreads();
    }
}

/* gw[i] = sum_r gy[r, i] * xhat[r, i], gb[i] = sum_r gy[r, i], in two steps so that a tall
 * batch keeps the GPU busy: each block row (blockIdx.y) sums a chunk of ROW_CHUNK rows into
 * partial[chunk][0 | 1][i] (doubles), then one thread per column adds the chunks in order. */
#define ROW_CHUNK 64

template <typename T>
static __global__ void layer_norm_params_partial_kernel(int64_t rows, int64_t n, int64_t nchunks, const T *gy,
                                                        const T *x, const T *mean, const T *rstd, double *partial)
{
    for (int64_t c = blockIdx.y; c < nchunks; c += gridDim.y) {
        int64_t r0 = c * ROW_CHUNK, r1 = r0 + ROW_CHUNK < rows ? r0 + ROW_CHUNK : rows;
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
            double sw = 0, sb = 0;
            for (int64_t r = r0; r < r1; r++) {
                double g = (double)gy[r * n + i];
                sw += g * (((double)x[r * n + i] - (double)mean[r]) * (double)rstd[r]);
                sb += g;
            }
            partial[(c * 2) * n + i] = sw;
            partial[(c * 2 + 1) * n + i] = sb;
        }
    }
}

template <typename T>
static __global__ void layer_norm_params_finish_kernel(int64_t n, int64_t nchunks, const double *partial, T *gw, T *gb)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        double sw = 0, sb = 0;
        for (int64_t c = 0; c < nchunks; c++) {
            sw += partial[(c * 2) * n + i];
            sb += partial[(c * 2 + 1) * n + i];
        }
        if (gw) gw[i] = (T)sw;
        if (gb) gb[i] = (T)sb;
    }
}

template <typename T> static const T *cptr(const dp_view *v) { return v ? (const T *)v->data : nullptr; }
template <typename T> static T *mptr(const dp_view *v) { return v ? (T *)v->data : nullptr; }

template <typename T>
static int layer_norm_launch(const dp_view *out, const dp_view *mean, const dp_view *rstd, const dp_view *x,
                             const dp_view *weight, const dp_view *bias, int64_t rows, int64_t cols, double eps)
{
    CUDA_STREAM_OF(out->device, s);
    layer_norm_kernel<T><<<row_grid(rows), row_threads(cols), 0, s>>>(
        rows, cols, eps, cptr<T>(x), cptr<T>(weight), cptr<T>(bias), mptr<T>(out), mptr<T>(mean), mptr<T>(rstd));
    CUDA_CHECK_LAUNCH("layer_norm");
    return 0;
}

template <typename T>
static int layer_norm_backward_launch(const dp_view *gx, const dp_view *gw, const dp_view *gb, const dp_view *gy,
                                      const dp_view *x, const dp_view *mean, const dp_view *rstd,
                                      const dp_view *weight, int64_t rows, int64_t cols)
{
    CUDA_STREAM_OF(gy->device, s);
    if (gx) {
        layer_norm_backward_kernel<T><<<row_grid(rows), row_threads(cols), 0, s>>>(
            rows, cols, cptr<T>(gy), cptr<T>(x), cptr<T>(mean), cptr<T>(rstd), cptr<T>(weight), mptr<T>(gx));
        CUDA_CHECK_LAUNCH("layer_norm_backward");
    }
    if (!gw && !gb) return 0;
    int64_t nchunks = (rows + ROW_CHUNK - 1) / ROW_CHUNK;
    double *partial = (double *)dp_cuda_scratch_alloc(gy->device.index, (size_t)nchunks * 2 * (size_t)cols * sizeof(double));
    if (!partial) return -1;
    dim3 grid(dp_grid_for(cols, DP_THREADS), (unsigned)(nchunks < 65535 ? nchunks : 65535));
    layer_norm_params_partial_kernel<T><<<grid, DP_THREADS, 0, s>>>(
        rows, cols, nchunks, cptr<T>(gy), cptr<T>(x), cptr<T>(mean), cptr<T>(rstd), partial);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) {
        layer_norm_params_finish_kernel<T><<<dp_grid_for(cols, DP_THREADS), DP_THREADS, 0, s>>>(
            cols, nchunks, partial, mptr<T>(gw), mptr<T>(gb));
        err = cudaGetLastError();
    }
    dp_cuda_scratch_free(gy->device.index, partial);   /* reused in stream order */
    if (err != cudaSuccess)
        return dp_cuda_error("CUDA error launching layer_norm_backward (weight and bias): %s", cudaGetErrorString(err));
    return 0;
}

extern "C" int dp_cuda_layer_norm(const dp_view *out, const dp_view *mean, const dp_view *rstd, const dp_view *x,
                                  const dp_view *weight, const dp_view *bias, int64_t rows, int64_t cols, double eps)
{
    if (rows == 0 || cols == 0) return 0;
    if (x->dtype == DP_FLOAT32) return layer_norm_launch<float>(out, mean, rstd, x, weight, bias, rows, cols, eps);
    if (x->dtype == DP_FLOAT64) return layer_norm_launch<double>(out, mean, rstd, x, weight, bias, rows, cols, eps);
    return dp_cuda_error("layer_norm on CUDA needs a float32 or float64 tensor, not %s", dp_cuda_dtype_name(x->dtype));
}

extern "C" int dp_cuda_layer_norm_backward(const dp_view *gx, const dp_view *gw, const dp_view *gb, const dp_view *gy,
                                           const dp_view *x, const dp_view *mean, const dp_view *rstd,
                                           const dp_view *weight, int64_t rows, int64_t cols)
{
    if (rows == 0 || cols == 0) return 0;
    if (x->dtype == DP_FLOAT32)
        return layer_norm_backward_launch<float>(gx, gw, gb, gy, x, mean, rstd, weight, rows, cols);
    if (x->dtype == DP_FLOAT64)
        return layer_norm_backward_launch<double>(gx, gw, gb, gy, x, mean, rstd, weight, rows, cols);
    return dp_cuda_error("layer_norm backward on CUDA needs a float32 or float64 tensor, not %s",
                         dp_cuda_dtype_name(x->dtype));
}
