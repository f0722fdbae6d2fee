/* elementwise.cu: fill, copy with dtype conversion, unary, binary and tensor-scalar ops on
 * strided views (stride 0 = broadcast), every dtype.  One grid-stride kernel per family,
 * templated on the compute type C and the output element type O; inputs of any dtype are
 * converted on load.  When every operand collapses to one contiguous run the offsets are
 * the element index itself.
 *
 * Semantics are the CPU backend's (src/cpu.c), which are PyTorch's: binary ops compute in
 * the dtype of their first operand (the engine converts operands to the compute dtype);
 * bools compute as integers and store "nonzero", so + is or, * is and, - is xor;
 * integer division by zero gives 0; maximum/minimum and relu propagate NaN; clamp treats
 * a NaN bound as absent; sign(NaN) is 0; comparisons with NaN are false except ne. */
#include "common.cuh"

/* ---------------------------------------------------------------- math per compute type */

__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double m_abs(double x) { return fabs(x); }
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }

/* integers: transcendental functions through double, the rest exact */
__device__ __forceinline__ int64_t m_exp(int64_t x) { return (int64_t)exp((double)x); }
__device__ __forceinline__ int64_t m_log(int64_t x) { return (int64_t)log((double)x); }
__device__ __forceinline__ int64_t m_sqrt(int64_t x) { return (int64_t)sqrt((double)x); }
__device__ __forceinline__ int64_t m_tanh(int64_t x) { return (int64_t)tanh((double)x); }
__device__ __forceinline__ int64_t m_abs(int64_t x) { return x < 0 ? -x : x; }
__device__ __forceinline__ int64_t m_pow(int64_t x, int64_t y)
{
    if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    int64_t r = 1;
    while (y) {
        if (y & 1) r *= x;
        x *= x;
        y >>= 1;
    }
    return r;
}

template <typename C> __device__ __forceinline__ bool m_isnan(C x) { return x != x; }

template <typename C> __device__ __forceinline__ C m_sigmoid(C x) { return (C)1 / ((C)1 + m_exp(-x)); }
__device__ __forceinline__ int64_t m_sigmoid(int64_t x) { return (int64_t)(1.0 / (1.0 + exp(-(double)x))); }

template <typename C> __device__ __forceinline__ C m_div(C a, C b) { return a / b; }
__device__ __forceinline__ int64_t m_div(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }

template <typename C> __device__ __forceinline__ C unary_op(int op, C x, C lo, C hi, bool has_lo, bool has_hi)
{
    switch (op) {
    case DP_NEG: return -x;
    case DP_EXP: return m_exp(x);
    case DP_LOG: return m_log(x);
    case DP_SQRT: return m_sqrt(x);
    case DP_ABS: return m_abs(x);
    case DP_RELU: return m_isnan(x) ? x : (x > (C)0 ? x : (C)0);
    case DP_SIGMOID: return m_sigmoid(x);
    case DP_TANH: return m_tanh(x);
    case DP_CLAMP:
        if (m_isnan(x)) return x;
        if (has_lo && x < lo) x = lo;
        if (has_hi && x > hi) x = hi;
        return x;
    case DP_SIGN: return (C)((x > (C)0) - (x < (C)0));
    case DP_RELU_MASK: return x > (C)0 ? (C)1 : (C)0;
    default: return x;
    }
}

template <typename C> __device__ __forceinline__ C binary_op(int op, C a, C b)
{
    switch (op) {
    case DP_ADD: return a + b;
    case DP_SUB: return a - b;
    case DP_MUL: return a * b;
    case DP_DIV: return m_div(a, b);
    case DP_POW: return m_pow(a, b);
    case DP_MAXIMUM: return m_isnan(a) ? a : m_isnan(b) ? b : (a > b ? a : b);
    case DP_MINIMUM: return m_isnan(a) ? a : m_isnan(b) ? b : (a < b ? a : b);
    default: return a;
    }
}

template <typename C> __device__ __forceinline__ bool compare_op(int op, C a, C b)
{
    switch (op) {
    case DP_EQ: return a == b;
    case DP_NE: return a != b;
    case DP_LT: return a < b;
    case DP_LE: return a <= b;
    case DP_GT: return a > b;
    default: return a >= b;   /* DP_GE */
    }
}

static inline bool is_compare(int op) { return op >= DP_EQ && op <= DP_GE; }

/* compute type of an output element type */
template <typename O> struct compute_of { typedef O type; };
template <> struct compute_of<bool> { typedef int64_t type; };

/* ---------------------------------------------------------------- kernels */

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <typename O, bool CONTIG>
static __global__ void fill_kernel(dp_offsets<1> oc, int64_t n, O *out, O value)
{
    GRID_STRIDE(i, n) {
        int64_t off[1] = { i };
        if (!CONTIG) oc.get(i, off);
        out[off[0]] = value;
    }
}

template <typename O, bool CONTIG>
static __global__ void copy_kernel(dp_offsets<2> oc, int64_t n, O *out, const void *in, int idt)
{
    GRID_STRIDE(i, n) {
        int64_t off[2] = { i, i };
        if (!CONTIG) oc.get(i, off);
        out[off[0]] = dp_load<O>(in, idt, off[1]);
    }
}

template <typename C, typename O, bool CONTIG>
static __global__ void unary_kernel(int op, dp_offsets<2> oc, int64_t n, O *out, const void *in, int idt,
                                    C lo, C hi, bool has_lo, bool has_hi)
{
    GRID_STRIDE(i, n) {
        int64_t off[2] = { i, i };
        if (!CONTIG) oc.get(i, off);
        C x = dp_load<C>(in, idt, off[1]);
        out[off[0]] = dp_cvt<O>(unary_op<C>(op, x, lo, hi, has_lo, has_hi));
    }
}

template <typename C, typename O, bool CONTIG, bool CMP>
static __global__ void binary_kernel(int op, dp_offsets<3> oc, int64_t n, O *out, const void *a, int adt,
                                     const void *b, int bdt)
{
    GRID_STRIDE(i, n) {
        int64_t off[3] = { i, i, i };
        if (!CONTIG) oc.get(i, off);
        C x = dp_load<C>(a, adt, off[1]), y = dp_load<C>(b, bdt, off[2]);
        if (CMP) out[off[0]] = dp_cvt<O>((int64_t)compare_op<C>(op, x, y));
        else out[off[0]] = dp_cvt<O>(binary_op<C>(op, x, y));
    }
}

template <typename C, typename O, bool CONTIG, bool CMP>
static __global__ void scalar_kernel(int op, dp_offsets<2> oc, int64_t n, O *out, const void *a, int adt,
                                     C s, bool reverse)
{
    GRID_STRIDE(i, n) {
        int64_t off[2] = { i, i };
        if (!CONTIG) oc.get(i, off);
        C x = dp_load<C>(a, adt, off[1]);
        C l = reverse ? s : x, r = reverse ? x : s;
        if (CMP) out[off[0]] = dp_cvt<O>((int64_t)compare_op<C>(op, l, r));
        else out[off[0]] = dp_cvt<O>(binary_op<C>(op, l, r));
    }
}

/* ---------------------------------------------------------------- launchers */

/* A double converted to an element type as the engine's CPU side does (bool: nonzero). */
template <typename T> static T host_cvt(double v) { return (T)v; }
template <> bool host_cvt<bool>(double v) { return v != 0.0; }

struct DP_HIDDEN fill_launch {
    const dp_view *out;
    double value;
    template <typename O> int run() const
    {
        const dp_view *vs[1] = { out };
        dp_offsets<1> oc;
        bool contig;
        int64_t n = dp_make_offsets<1>(&oc, vs, &contig);
        if (n == 0) return 0;
        CUDA_STREAM_OF(out->device, s);
        O v = host_cvt<O>(value);
        if (contig) fill_kernel<O, true><<<dp_grid_for(n, DP_THREADS), DP_THREADS, 0, s>>>(oc, n, (O *)out->data, v);
        else fill_kernel<O, false><<<dp_grid_for(n, DP_THREADS), DP_THREADS, 0, s>>>(oc, n, (O *)out->data, v);
        CUDA_CHECK_LAUNCH("fill");
        return 0;
    }
};

extern "C" int dp_cuda_fill(const dp_view *out, double value)
{
    fill_launch f = { out, value };
    return DP_DISPATCH_OUT(out->dtype, f);
}

struct DP_HIDDEN copy_launch {
    const dp_view *out, *in;
    template <typename O> int run() const
    {
        const dp_view *vs[2] = { out, in };
        dp_offsets<2> oc;
        bool contig;
        int64_t n = dp_make_offsets<2>(&oc, vs, &contig);
        if (n == 0) return 0;
        CUDA_STREAM_OF(out->device, s);
        if (contig && in->dtype == out->dtype) {
            CUDA_CHECK(cudaMemcpyAsync(out->data, in->data, (size_t)n * sizeof(O), cudaMemcpyDeviceToDevice, s));
            return 0;
        }
        if (contig) copy_kernel<O, true><<<dp_grid_for(n, DP_THREADS), DP_THREADS, 0, s>>>(oc, n, (O *)out->data, in->data, in->dtype);
        else copy_kernel<O, false><<<dp_grid_for(n, DP_THREADS), DP_THREADS, 0, s>>>(oc, n, (O *)out->data, in->data, in->dtype);
        CUDA_CHECK_LAUNCH("copy");
        return 0;
    }
};

extern "C" int dp_cuda_copy(const dp_view *out, const dp_view *in)
{
    if (in->device.index != out->device.index)
        return dp_cuda_error("CUDA copy kernel: views on cuda:%d and cuda:%d (the engine copies between devices)",
                             out->device.index, in->device.index);
    copy_launch f = { out, in };
    return DP_DISPATCH_OUT(out->dtype, f);
}

struct DP_HIDDEN unary_launch {
    int op;
    const dp_view *out, *in;
    double p0, p1;
    template <typename O> int run() const
    {
        typedef typename compute_of<O>::type C;
        const dp_view *vs[2] = { out, in };
        dp_offsets<2> oc;
        bool contig;
        int64_t n = dp_make_offsets<2>(&oc, vs, &contig);
        if (n == 0) return 0;
        CUDA_STREAM_OF(out->device, s);
        bool has_lo = op == DP_CLAMP && !isnan(p0), has_hi = op == DP_CLAMP && !isnan(p1);
        C lo = has_lo ? (C)p0 : (C)0, hi = has_hi ? (C)p1 : (C)0;
        unsigned g = dp_grid_for(n, DP_THREADS);
        if (contig) unary_kernel<C, O, true><<<g, DP_THREADS, 0, s>>>(op, oc, n, (O *)out->data, in->data, in->dtype, lo, hi, has_lo, has_hi);
        else unary_kernel<C, O, false><<<g, DP_THREADS, 0, s>>>(op, oc, n, (O *)out->data, in->data, in->dtype, lo, hi, has_lo, has_hi);
        CUDA_CHECK_LAUNCH("unary");
        return 0;
    }
};

extern "C" int dp_cuda_unary(int op, const dp_view *out, const dp_view *in, double p0, double p1)
{
    if (op < 0 || op >= DP_NUNARY) return dp_cuda_error("CUDA unary: unknown op %d", op);
    unary_launch f = { op, out, in, p0, p1 };
    return DP_DISPATCH_OUT(out->dtype, f);
}

template <typename C, typename O, bool CMP>
static int launch_binary(int op, const dp_view *out, const dp_view *a, const dp_view *b)
{
    const dp_view *vs[3] = { out, a, b };
    dp_offsets<3> oc;
    bool contig;
    int64_t n = dp_make_offsets<3>(&oc, vs, &contig);
    if (n == 0) return 0;
    CUDA_STREAM_OF(out->device, s);
    unsigned g = dp_grid_for(n, DP_THREADS);
    if (contig) binary_kernel<C, O, true, CMP><<<g, DP_THREADS, 0, s>>>(op, oc, n, (O *)out->data, a->data, a->dtype, b->data, b->dtype);
    else binary_kernel<C, O, false, CMP><<<g, DP_THREADS, 0, s>>>(op, oc, n, (O *)out->data, a->data, a->dtype, b->data, b->dtype);
    CUDA_CHECK_LAUNCH("binary");
    return 0;
}

/* a and b arrive in the compute dtype (the engine converts them); the CPU backend computes
 * in a's dtype too, so that decides */
struct DP_HIDDEN binary_launch {
    int op;
    const dp_view *out, *a, *b;
    template <typename O> int run() const
    {
        bool cmp = is_compare(op);
        switch (a->dtype) {
        case DP_FLOAT64: return cmp ? launch_binary<double, O, true>(op, out, a, b) : launch_binary<double, O, false>(op, out, a, b);
        case DP_FLOAT32: return cmp ? launch_binary<float, O, true>(op, out, a, b) : launch_binary<float, O, false>(op, out, a, b);
        default: return cmp ? launch_binary<int64_t, O, true>(op, out, a, b) : launch_binary<int64_t, O, false>(op, out, a, b);
        }
    }
};

extern "C" int dp_cuda_binary(int op, const dp_view *out, const dp_view *a, const dp_view *b)
{
    if (op < 0 || op >= DP_NBINARY) return dp_cuda_error("CUDA binary: unknown op %d", op);
    binary_launch f = { op, out, a, b };
    return DP_DISPATCH_OUT(out->dtype, f);
}

template <typename C, typename O, bool CMP>
static int launch_scalar(int op, const dp_view *out, const dp_view *a, double sv, bool reverse)
{
    const dp_view *vs[2] = { out, a };
    dp_offsets<2> oc;
    bool contig;
    int64_t n = dp_make_offsets<2>(&oc, vs, &contig);
    if (n == 0) return 0;
    CUDA_STREAM_OF(out->device, s);
    unsigned g = dp_grid_for(n, DP_THREADS);
    C c = (C)sv;
    if (contig) scalar_kernel<C, O, true, CMP><<<g, DP_THREADS, 0, s>>>(op, oc, n, (O *)out->data, a->data, a->dtype, c, reverse);
    else scalar_kernel<C, O, false, CMP><<<g, DP_THREADS, 0, s>>>(op, oc, n, (O *)out->data, a->data, a->dtype, c, reverse);
    CUDA_CHECK_LAUNCH("binary_scalar");
    return 0;
}

/* The scalar takes a's dtype, as on the CPU (a bool scalar is "nonzero"). */
struct DP_HIDDEN scalar_launch {
    int op;
    const dp_view *out, *a;
    double s;
    bool reverse;
    template <typename O> int run() const
    {
        bool cmp = is_compare(op);
        double sv = a->dtype == DP_BOOL ? (double)(s != 0) : s;
        switch (a->dtype) {
        case DP_FLOAT64: return cmp ? launch_scalar<double, O, true>(op, out, a, sv, reverse) : launch_scalar<double, O, false>(op, out, a, sv, reverse);
        case DP_FLOAT32: return cmp ? launch_scalar<float, O, true>(op, out, a, sv, reverse) : launch_scalar<float, O, false>(op, out, a, sv, reverse);
        default: return cmp ? launch_scalar<int64_t, O, true>(op, out, a, sv, reverse) : launch_scalar<int64_t, O, false>(op, out, a, sv, reverse);
        }
    }
};

extern "C" int dp_cuda_binary_scalar(int op, const dp_view *out, const dp_view *a, double s, bool reverse)
{
    if (op < 0 || op >= DP_NBINARY) return dp_cuda_error("CUDA binary_scalar: unknown op %d", op);
    scalar_launch f = { op, out, a, s, reverse };
    return DP_DISPATCH_OUT(out->dtype, f);
}
