/* optim.cu: SGD, Adam/AdamW and Adadelta parameter updates (PyTorch 1.13's single-tensor rules), one
 * fused kernel per parameter.  The arithmetic is the CPU backend's, operation for
 * operation, with explicit round-to-nearest intrinsics so nvcc does not fuse a multiply
 * and an add: both devices then produce the same bits. */
#include "common.cuh"

__device__ __forceinline__ float add_(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float mul_(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float div_(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float sqrt_(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_(double a) { return __dsqrt_rn(a); }

template <typename T>
static __global__ void sgd_kernel(int64_t n, T *p, const T *g, T *m, T lr, T wd, T mom, T damp, bool first,
                                  bool nesterov)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T d = g[i];
        if (wd != 0) d = add_(d, mul_(wd, p[i]));
        if (m) {
            T mi = first ? d : add_(mul_(mom, m[i]), mul_(damp, d));
            m[i] = mi;
            d = nesterov ? add_(d, mul_(mom, mi)) : mi;
        }
        p[i] = sub_(p[i], mul_(lr, d));
    }
}

template <typename T>
static __global__ void adam_kernel(int64_t n, T *p, const T *g, T *m, T *v, T b1, T b2, T one_b1, T one_b2, T wd,
                                   T eps, T step_size, T bc2_sqrt, T decay, bool decoupled)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T gi = g[i], pi = p[i];
        if (decoupled) pi = mul_(pi, decay);
        else if (wd != 0) gi = add_(gi, mul_(wd, pi));
        T mi = add_(mul_(m[i], b1), mul_(gi, one_b1));
        T vi = add_(mul_(v[i], b2), mul_(mul_(gi, gi), one_b2));
        m[i] = mi;
        v[i] = vi;
        T denom = add_(div_(sqrt_(vi), bc2_sqrt), eps);
        p[i] = sub_(pi, mul_(step_size, div_(mi, denom)));
    }
}

template <typename T>
static int sgd_launch(int dev, int64_t n, void *param, const void *grad, void *buf, const dp_sgd_opts *o)
{
    CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
    sgd_kernel<T><<<dp_grid_for(n, DP_THREADS), DP_THREADS, 0, s>>>(
        n, (T *)param, (const T *)grad, (T *)buf, (T)o->lr, (T)o->weight_decay, (T)o->momentum,
        (T)(1 - o->dampening), o->first_step, o->nesterov);
    CUDA_CHECK_LAUNCH("sgd_step");
    return 0;
}

extern "C" int dp_cuda_sgd_step(int dtype, int64_t n, void *param, const void *grad, void *buf, const dp_sgd_opts *o)
{
    if (n <= 0) return 0;
    int dev = dp_cuda_device_of(param);
    if (dev < 0) return -1;
    if (dtype == DP_FLOAT32) return sgd_launch<float>(dev, n, param, grad, buf, o);
    if (dtype == DP_FLOAT64) return sgd_launch<double>(dev, n, param, grad, buf, o);
    return dp_cuda_error("SGD needs float32 or float64 parameters, not %s", dp_cuda_dtype_name(dtype));
}

template <typename T>
static int adam_launch(int dev, int64_t n, void *param, const void *grad, void *m, void *v, const dp_adam_opts *o)
{
    CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
    T b1 = (T)o->beta1, b2 = (T)o->beta2;
    double bc1 = 1 - pow(o->beta1, (double)o->step), bc2 = 1 - pow(o->beta2, (double)o->step);
    adam_kernel<T><<<dp_grid_for(n, DP_THREADS), DP_THREADS, 0, s>>>(
        n, (T *)param, (const T *)grad, (T *)m, (T *)v, b1, b2, (T)(1 - b1), (T)(1 - b2), (T)o->weight_decay,
        (T)o->eps, (T)(o->lr / bc1), (T)sqrt(bc2), (T)(1 - o->lr * o->weight_decay), o->decoupled);
    CUDA_CHECK_LAUNCH("adam_step");
    return 0;
}

extern "C" int dp_cuda_adam_step(int dtype, int64_t n, void *param, const void *grad, void *m, void *v,
                                 const dp_adam_opts *o)
{
    if (n <= 0) return 0;
    int dev = dp_cuda_device_of(param);
    if (dev < 0) return -1;
    if (dtype == DP_FLOAT32) return adam_launch<float>(dev, n, param, grad, m, v, o);
    if (dtype == DP_FLOAT64) return adam_launch<double>(dev, n, param, grad, m, v, o);
    return dp_cuda_error("Adam needs float32 or float64 parameters, not %s", dp_cuda_dtype_name(dtype));
}

template <typename T>
static __global__ void adadelta_kernel(int64_t n, T *p, const T *g, T *sq, T *acc, T rho, T one_rho, T eps, T wd,
                                       T neg_lr, bool maximize)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T gi = maximize ? -g[i] : g[i];
        if (wd != 0) gi = add_(gi, mul_(wd, p[i]));
        T si = add_(mul_(sq[i], rho), mul_(mul_(one_rho, gi), gi));
        sq[i] = si;
        T delta = mul_(div_(sqrt_(add_(acc[i], eps)), sqrt_(add_(si, eps))), gi);
        acc[i] = add_(mul_(acc[i], rho), mul_(mul_(one_rho, delta), delta));
        p[i] = add_(p[i], mul_(neg_lr, delta));
    }
}

template <typename T>
static int adadelta_launch(int dev, int64_t n, void *param, const void *grad, void *sq, void *acc,
                           const dp_adadelta_opts *o)
{
    CUDA_STREAM_OF(((dp_device){ DP_DEVICE_CUDA, dev }), s);
    adadelta_kernel<T><<<dp_grid_for(n, DP_THREADS), DP_THREADS, 0, s>>>(
        n, (T *)param, (const T *)grad, (T *)sq, (T *)acc, (T)o->rho, (T)(1 - o->rho), (T)o->eps,
        (T)o->weight_decay, (T)-o->lr, o->maximize);
    CUDA_CHECK_LAUNCH("adadelta_step");
    return 0;
}

extern "C" int dp_cuda_adadelta_step(int dtype, int64_t n, void *param, const void *grad, void *sq, void *acc,
                                     const dp_adadelta_opts *o)
{
    if (n <= 0) return 0;
    int dev = dp_cuda_device_of(param);
    if (dev < 0) return -1;
    if (dtype == DP_FLOAT32) return adadelta_launch<float>(dev, n, param, grad, sq, acc, o);
    if (dtype == DP_FLOAT64) return adadelta_launch<double>(dev, n, param, grad, sq, acc, o);
    return dp_cuda_error("Adadelta needs float32 or float64 parameters, not %s", dp_cuda_dtype_name(dtype));
}
