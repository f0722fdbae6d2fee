/* opmath.h: the scalar helpers that the op table's formulas (ops.def) are written with.
 * The CPU kernels are C and the CUDA kernels C++, so each helper has one spelling per
 * language side by side here, with one meaning: the formulas themselves are compiled from
 * the same text on both sides.  Standard functions (exp, log, tanh, ...) need no helper: C's
 * <tgmath.h> and CUDA's overloads both pick the float version for a float argument.
 * A formula sees its operands x (and y) of the compute type T, and the op's parameters p0,
 * p1 as doubles. */
#ifndef DP_OPMATH_H
#define DP_OPMATH_H

#include <stdint.h>

/* maximum / minimum that propagate NaN from either side */
#define m_fmax(x, y) ((x) > (y) || (x) != (x) ? (x) : (y))
#define m_fmin(x, y) ((x) < (y) || (x) != (x) ? (x) : (y))
/* min(max(x, lo), hi); a NaN bound is absent; a NaN x stays NaN */
#define m_clamp(x, lo, hi) m_clamp_hi(m_clamp_lo((x), (lo)), (hi))
#define m_clamp_lo(x, lo) ((lo) == (lo) && (x) < (lo) ? (T)(lo) : (x))
#define m_clamp_hi(x, hi) ((hi) == (hi) && (x) > (hi) ? (T)(hi) : (x))

#ifdef __cplusplus
#include <math.h>
#ifdef __CUDACC__
#define DP_OPMATH_FN __host__ __device__ __forceinline__
#else
#define DP_OPMATH_FN static inline
#endif
template <typename T> DP_OPMATH_FN T m_abs(T x) { return x < 0 ? -x : x; }
DP_OPMATH_FN float m_abs(float x) { return fabsf(x); }
DP_OPMATH_FN double m_abs(double x) { return fabs(x); }
template <typename T> DP_OPMATH_FN T m_div(T x, T y) { return x / y; }
DP_OPMATH_FN int64_t m_div(int64_t x, int64_t y) { return y ? x / y : 0; }
DP_OPMATH_FN float m_pow(float x, float y) { return powf(x, y); }
DP_OPMATH_FN double m_pow(double x, double y) { return pow(x, y); }
#else
#include <stdbool.h>
#include <tgmath.h>
#define DP_OPMATH_FN static inline __attribute__((unused))
#define m_abs(x) _Generic((x), float: fabsf, double: fabs, default: dp_iabs)(x)
#define m_div(x, y) _Generic((x), float: (x) / (y), double: (x) / (y), default: dp_idiv((x), (y)))
#define m_pow(x, y) _Generic((x), float: powf, double: pow, default: dp_ipow)((x), (y))
#endif

/* integers: division by zero gives 0 (PyTorch raises; the engine never divides integers:
 * true division promotes to float); powers by squaring, negative exponents as PyTorch */
DP_OPMATH_FN int64_t dp_iabs(int64_t x) { return x < 0 ? -x : x; }
DP_OPMATH_FN int64_t dp_idiv(int64_t x, int64_t y) { return y ? x / y : 0; }
DP_OPMATH_FN int64_t dp_ipow(int64_t x, int64_t y)
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
#ifdef __cplusplus
DP_OPMATH_FN int64_t m_pow(int64_t x, int64_t y) { return dp_ipow(x, y); }
#endif

#endif
