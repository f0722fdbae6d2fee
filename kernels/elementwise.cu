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

/* ---------------------------------------------------------------- the op table's formulas */

template <typename T> struct is_float_type { static const bool value = false; };
template <> struct is_float_type<float> { static const bool value = true; };
template <> struct is_float_type<double> { static const bool value = true; };

/* One case per row of ops.def, the row's formula compiled for the compute type T.  Rows
 * whose RULE is FLOAT only ever run on floating types (the engine converts integer inputs),
 * so they are not instantiated for integers. */
#define ROW_FLOAT_ONLY_FLOAT true
#define ROW_FLOAT_ONLY_KEEP false
#define ROW_FLOAT_ONLY_SAME false
#define ROW_FLOAT_ONLY_FLOATONLY true
#define ROW_FLOAT_ONLY_NOBOOL false
template <typename T> __device__ __forceinline__ T unary_op(int op, T x, double p0, double p1)
{
    switch (op) {
#define DP_UNARY_OP(NAME, lua, BIND, node, RULE, SAVE, formula) \
    case DP_##NAME: \
        if constexpr (ROW_FLOAT_ONLY_##RULE && !is_float_type<T>::value) return x; \
        else return (T)(formula);
#include "../src/ops.def"
    default: return x;   /* dp_cuda_unary checked the op */
    }
}

#define ROW_IS_CMP_ARITH false
#define ROW_IS_CMP_FLOAT false
#define ROW_IS_CMP_FLOATONLY false
#define ROW_IS_CMP_CMP true
#define ROW_FLOAT_ONLY_ARITH false
#define ROW_FLOAT_ONLY_CMP false
template <typename T> __device__ __forceinline__ T binary_op(int op, T x, T y)
{
    switch (op) {
#define DP_BINARY_OP(NAME, lua, BIND, node, KIND, BOOLS, SAVE, formula) \
    case DP_##NAME: \
        if constexpr (ROW_IS_CMP_##KIND || (ROW_FLOAT_ONLY_##KIND && !is_float_type<T>::value)) return x; \
        else return (T)(formula);
#include "../src/ops.def"
    default: return x;   /* dp_cuda_binary checked the op */
    }
}

template <typename T> __device__ __forceinline__ bool compare_op(int op, T x, T y)
{
    switch (op) {
#define DP_BINARY_OP(NAME, lua, BIND, node, KIND, BOOLS, SAVE, formula) \
    case DP_##NAME: \
        if constexpr (ROW_IS_CMP_##KIND) return (formula); \
        else return false;
#include "../src/ops.def"
    default: return false;
    }
}

static bool is_compare(int op)
{
    switch (op) {
#define DP_BINARY_OP(NAME, lua, BIND, node, KIND, BOOLS, SAVE, formula) case DP_##NAME: return ROW_IS_CMP_##KIND;
#include "../src/ops.def"
    default: return false;
    }
}

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
                                    double p0, double p1)
{
    GRID_STRIDE(i, n) {
        int64_t off[2] = { i, i };
        if (!CONTIG) oc.get(i, off);
        C x = dp_load<C>(in, idt, off[1]);
        out[off[0]] = dp_cvt<O>(unary_op<C>(op, x, p0, p1));
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

template <typename O, bool CONTIG>
static __global__ void where_kernel(dp_offsets<4> oc, int64_t n, O *out, const bool *cond, const O *a, const O *b)
{
    GRID_STRIDE(i, n) {
        int64_t off[4] = { i, i, i, i };
        if (!CONTIG) oc.get(i, off);
        out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
    }
}

/* ---------------------------------------------------------------- launchers */

/* A double converted to an element type as the engine's CPU side does (bool: nonzero). */
template <typename T> static T host_cvt(double v) { return (T)v; }
template <> bool host_cvt<bool>(double v) { return v != 0.0; }
template <> int64_t host_cvt<int64_t>(double v) { return dp_float_to_int64(v); }
template <> dp_f16 host_cvt<dp_f16>(double v) { return dp_f16{ dp_float_to_f16((float)v) }; }
template <> dp_bf16 host_cvt<dp_bf16>(double v) { return dp_bf16{ dp_float_to_bf16((float)v) }; }

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
    return DP_DISPATCH_STORE(out->dtype, f);
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
    return DP_DISPATCH_STORE(out->dtype, f);
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
        unsigned g = dp_grid_for(n, DP_THREADS);
        if (contig) unary_kernel<C, O, true><<<g, DP_THREADS, 0, s>>>(op, oc, n, (O *)out->data, in->data, in->dtype, p0, p1);
        else unary_kernel<C, O, false><<<g, DP_THREADS, 0, s>>>(op, oc, n, (O *)out->data, in->data, in->dtype, p0, p1);
        CUDA_CHECK_LAUNCH("unary");
        return 0;
    }
};

extern "C" int dp_cuda_unary(dp_unary_op op, const dp_view *out, const dp_view *in, double p0, double p1)
{
    if ((unsigned)op >= DP_NUNARY) return dp_cuda_error("CUDA unary: unknown op %d", op);
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

extern "C" int dp_cuda_binary(dp_binary_op op, const dp_view *out, const dp_view *a, const dp_view *b)
{
    if ((unsigned)op >= DP_NBINARY) return dp_cuda_error("CUDA binary: unknown op %d", op);
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
    C c = host_cvt<C>(sv);
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

extern "C" int dp_cuda_binary_scalar(dp_binary_op op, const dp_view *out, const dp_view *a, double s, bool reverse)
{
    if ((unsigned)op >= DP_NBINARY) return dp_cuda_error("CUDA binary_scalar: unknown op %d", op);
    scalar_launch f = { op, out, a, s, reverse };
    return DP_DISPATCH_OUT(out->dtype, f);
}

struct DP_HIDDEN where_launch {
    const dp_view *out, *cond, *a, *b;
    template <typename O> int run() const
    {
        const dp_view *vs[4] = { out, cond, a, b };
        dp_offsets<4> oc;
        bool contig;
        int64_t n = dp_make_offsets<4>(&oc, vs, &contig);
        if (n == 0) return 0;
        CUDA_STREAM_OF(out->device, s);
        unsigned g = dp_grid_for(n, DP_THREADS);
        const bool *c = (const bool *)cond->data;
        if (contig) where_kernel<O, true><<<g, DP_THREADS, 0, s>>>(oc, n, (O *)out->data, c, (const O *)a->data, (const O *)b->data);
        else where_kernel<O, false><<<g, DP_THREADS, 0, s>>>(oc, n, (O *)out->data, c, (const O *)a->data, (const O *)b->data);
        CUDA_CHECK_LAUNCH("where");
        return 0;
    }
};

extern "C" int dp_cuda_where(const dp_view *out, const dp_view *cond, const dp_view *a, const dp_view *b)
{
    if (cond->dtype != DP_BOOL || a->dtype != out->dtype || b->dtype != out->dtype)
        return dp_cuda_error("CUDA where: dtypes %d, %d, %d into %d", cond->dtype, a->dtype, b->dtype, out->dtype);
    where_launch f = { out, cond, a, b };
    return DP_DISPATCH_OUT(out->dtype, f);
}
