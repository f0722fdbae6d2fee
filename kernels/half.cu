/* half.cu: float16 and bfloat16 matrix products through cublasGemmEx with float32
 * accumulation (CUBLAS_COMPUTE_32F: tensor cores where the GPU has them), the backend's
 * gemm_half.  Row-major as linear.cu's gemm: cuBLAS computes C^T = op(B)^T op(A)^T.  The
 * other kernels see these dtypes as float32 (src/half.c); copy and fill store them
 * (elementwise.cu). */
#include <cublas_v2.h>

#include "common.cuh"

static int64_t fix_ld(int64_t ld, int64_t rows, int64_t cols)
{
    if (cols <= 1 && ld < rows) return rows < 1 ? 1 : rows;
    return ld < 1 ? 1 : ld;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= 2147483647; }

extern "C" DP_CUDA_INTERNAL int dp_cuda_gemm_half(int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                 double alpha, const void *a, int64_t lda, int64_t stride_a,
                                 const void *b, int64_t ldb, int64_t stride_b,
                                 double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (m == 0 || n == 0 || batch == 0) return 0;
    if (dtype != DP_FLOAT16 && dtype != DP_BFLOAT16)
        return dp_cuda_error("CUDA gemm_half: dtype %s is not float16 or bfloat16", dp_cuda_dtype_name(dtype));
    if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(lda) || !fits_int(ldb) || !fits_int(ldc) ||
        !fits_int(batch))
        return dp_cuda_error("CUDA gemm: sizes beyond 2^31 (m=%lld n=%lld k=%lld)", (long long)m, (long long)n, (long long)k);
    int dev = dp_cuda_device_of(c);
    if (dev < 0) return -1;
    cudaDataType_t t = dtype == DP_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasOperation_t opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int64_t ldb_ = fix_ld(ldb, trans_b ? k : n, trans_b ? n : k);
    int64_t lda_ = fix_ld(lda, trans_a ? m : k, trans_a ? k : m);
    int64_t ldc_ = fix_ld(ldc, n, m);
    float al = (float)alpha, be = (float)beta;
    cublasHandle_t h = (cublasHandle_t)dp_cuda_cublas_acquire(dev);
    if (!h) return -1;
    cublasStatus_t st;
    if (batch == 1)
        st = cublasGemmEx(h, opb, opa, (int)n, (int)m, (int)k, &al, b, t, (int)ldb_, a, t, (int)lda_, &be, c, t,
                          (int)ldc_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
        st = cublasGemmStridedBatchedEx(h, opb, opa, (int)n, (int)m, (int)k, &al, b, t, (int)ldb_, stride_b, a, t,
                                        (int)lda_, stride_a, &be, c, t, (int)ldc_, stride_c, (int)batch,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    dp_cuda_cublas_release(dev);
    if (st != CUBLAS_STATUS_SUCCESS)
        return dp_cuda_error("cuBLAS %s gemm failed on cuda:%d: %s (m=%lld n=%lld k=%lld lda=%lld ldb=%lld ldc=%lld batch=%lld)",
                             dp_cuda_dtype_name(dtype), dev, cublasGetStatusString(st), (long long)m, (long long)n,
                             (long long)k, (long long)lda, (long long)ldb, (long long)ldc, (long long)batch);
    CUDA_CHECK_LAUNCH("gemm_half");
    return 0;
}
