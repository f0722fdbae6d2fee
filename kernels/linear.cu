/* linear.cu: matrix products.  Row-major C[M,N] = alpha * op(A) @ op(B) + beta * C through
 * cuBLAS without transposing copies: a row-major matrix is the column-major transpose, so
 * cuBLAS computes C^T = op(B)^T op(A)^T with the operands swapped.  Batches use the
 * strided-batched call (stride 0 shares a matrix).  float32 runs in plain FP32
 * (CUBLAS_COMPUTE_32F) unless TF32 was allowed with set_tf32(true); float64 in FP64.
 * int64 products (which cuBLAS lacks) use a plain kernel with the CPU backend's rule. */
#include <cublas_v2.h>

#include "common.cuh"

/* A column-major matrix of rows x cols ignores its leading dimension when it has at most
 * one column; cuBLAS still wants ld >= rows. */
static int64_t fix_ld(int64_t ld, int64_t rows, int64_t cols)
{
    if (cols <= 1 && ld < rows) return rows < 1 ? 1 : rows;
    return ld < 1 ? 1 : ld;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= 2147483647; }

static __global__ void gemm_i64_kernel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t alpha,
                                       const int64_t *A, int64_t lda, int64_t sa, const int64_t *B, int64_t ldb,
                                       int64_t sb, int64_t beta, bool use_beta, int64_t *C, int64_t ldc, int64_t sc,
                                       int64_t batch)
{
    int64_t total = batch * m * n;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t bi = t / (m * n), rem = t % (m * n), r = rem / n, q = rem % n;
        const int64_t *a = A + bi * sa, *b = B + bi * sb;
        int64_t *c = C + bi * sc;
        int64_t acc = 0;
        for (int64_t p = 0; p < k; p++) acc += (ta ? a[p * lda + r] : a[r * lda + p]) * (tb ? b[q * ldb + p] : b[p * ldb + q]);
        c[r * ldc + q] = alpha * acc + (use_beta ? beta * c[r * ldc + q] : 0);
    }
}

/* k == 0: C = beta * C (zero when beta is 0, whatever C held) */
template <typename T>
static __global__ void scale_c_kernel(int64_t m, int64_t n, T beta, T *C, int64_t ldc, int64_t sc, int64_t batch)
{
    int64_t total = batch * m * n;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t bi = t / (m * n), rem = t % (m * n), r = rem / n, q = rem % n;
        T *c = C + bi * sc + r * ldc + q;
        *c = beta == (T)0 ? (T)0 : beta * *c;
    }
}

template <typename T>
static int scale_c(int dev, int64_t m, int64_t n, double beta, void *c, int64_t ldc, int64_t sc, int64_t batch)
{
    CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
    scale_c_kernel<T><<<dp_grid_for(batch * m * n, DP_THREADS), DP_THREADS, 0, s>>>(m, n, (T)beta, (T *)c, ldc, sc, batch);
    CUDA_CHECK_LAUNCH("gemm (k = 0)");
    return 0;
}

static const char *cublas_msg(cublasStatus_t st) { return cublasGetStatusString(st); }

extern "C" int dp_cuda_gemm(int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            double alpha, const void *a, int64_t lda, int64_t stride_a,
                            const void *b, int64_t ldb, int64_t stride_b,
                            double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (m == 0 || n == 0 || batch == 0) return 0;
    int dev = dp_cuda_device_of(c);
    if (dev < 0) return -1;
    if (k == 0) {
        if (dtype == DP_FLOAT32) return scale_c<float>(dev, m, n, beta, c, ldc, stride_c, batch);
        if (dtype == DP_FLOAT64) return scale_c<double>(dev, m, n, beta, c, ldc, stride_c, batch);
        if (dtype == DP_INT64) return scale_c<int64_t>(dev, m, n, beta, c, ldc, stride_c, batch);
    }
    if (dtype == DP_INT64) {
        CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
        gemm_i64_kernel<<<dp_grid_for(batch * m * n, DP_THREADS), DP_THREADS, 0, s>>>(
            trans_a, trans_b, m, n, k, (int64_t)alpha, (const int64_t *)a, lda, stride_a, (const int64_t *)b, ldb,
            stride_b, (int64_t)beta, beta != 0, (int64_t *)c, ldc, stride_c, batch);
        CUDA_CHECK_LAUNCH("gemm_i64");
        return 0;
    }
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64)
        return dp_cuda_error("matrix products are not supported for dtype %s", dp_cuda_dtype_name(dtype));
    if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(lda) || !fits_int(ldb) || !fits_int(ldc) ||
        !fits_int(batch))
        return dp_cuda_error("CUDA gemm: sizes beyond 2^31 (m=%lld n=%lld k=%lld)", (long long)m, (long long)n, (long long)k);

    /* the swapped column-major problem: C^T[n, m] = op(B)^T[n, k] @ op(A)^T[k, m] */
    cublasOperation_t opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int64_t ldb_ = fix_ld(ldb, trans_b ? k : n, trans_b ? n : k);
    int64_t lda_ = fix_ld(lda, trans_a ? m : k, trans_a ? k : m);
    int64_t ldc_ = fix_ld(ldc, n, m);

    cublasHandle_t h = (cublasHandle_t)dp_cuda_cublas_acquire(dev);
    if (!h) return -1;
    cublasStatus_t st;
    if (dtype == DP_FLOAT32) {
        float al = (float)alpha, be = (float)beta;
        cublasComputeType_t ct = dp_cuda_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        if (batch == 1)
            st = cublasGemmEx(h, opb, opa, (int)n, (int)m, (int)k, &al, b, CUDA_R_32F, (int)ldb_, a, CUDA_R_32F,
                              (int)lda_, &be, c, CUDA_R_32F, (int)ldc_, ct, CUBLAS_GEMM_DEFAULT);
        else
            st = cublasGemmStridedBatchedEx(h, opb, opa, (int)n, (int)m, (int)k, &al, b, CUDA_R_32F, (int)ldb_,
                                            stride_b, a, CUDA_R_32F, (int)lda_, stride_a, &be, c, CUDA_R_32F,
                                            (int)ldc_, stride_c, (int)batch, ct, CUBLAS_GEMM_DEFAULT);
    } else {
        if (batch == 1)
            st = cublasDgemm(h, opb, opa, (int)n, (int)m, (int)k, &alpha, (const double *)b, (int)ldb_,
                             (const double *)a, (int)lda_, &beta, (double *)c, (int)ldc_);
        else
            st = cublasDgemmStridedBatched(h, opb, opa, (int)n, (int)m, (int)k, &alpha, (const double *)b, (int)ldb_,
                                           stride_b, (const double *)a, (int)lda_, stride_a, &beta, (double *)c,
                                           (int)ldc_, stride_c, (int)batch);
    }
    dp_cuda_cublas_release(dev);
    if (st != CUBLAS_STATUS_SUCCESS)
        return dp_cuda_error("cuBLAS gemm failed on cuda:%d: %s (m=%lld n=%lld k=%lld lda=%lld ldb=%lld ldc=%lld batch=%lld)",
                             dev, cublas_msg(st), (long long)m, (long long)n, (long long)k, (long long)lda,
                             (long long)ldb, (long long)ldc, (long long)batch);
    CUDA_CHECK_LAUNCH("gemm");
    return 0;
}
