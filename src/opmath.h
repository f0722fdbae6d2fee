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
#endif

#ifdef __cplusplus
#ifdef __CUDACC__
#define DP_OPMATH_FN __host__ __device__ __forceinline__
#else
#define DP_OPMATH_FN static inline
#endif
/* rounding: integers are already whole */
template <typename T> DP_OPMATH_FN T m_floor(T x) { return x; }
template <typename T> DP_OPMATH_FN T m_ceil(T x) { return x; }
template <typename T> DP_OPMATH_FN T m_round(T x) { return x; }
template <typename T> DP_OPMATH_FN T m_trunc(T x) { return x; }
DP_OPMATH_FN float m_floor(float x) { return floorf(x); }
DP_OPMATH_FN double m_floor(double x) { return floor(x); }
DP_OPMATH_FN float m_ceil(float x) { return ceilf(x); }
DP_OPMATH_FN double m_ceil(double x) { return ceil(x); }
DP_OPMATH_FN float m_round(float x) { return rintf(x); }
DP_OPMATH_FN double m_round(double x) { return rint(x); }
DP_OPMATH_FN float m_trunc(float x) { return truncf(x); }
DP_OPMATH_FN double m_trunc(double x) { return trunc(x); }
template <typename T> DP_OPMATH_FN T m_abs(T x) { return x < 0 ? -x : x; }
DP_OPMATH_FN float m_abs(float x) { return fabsf(x); }
DP_OPMATH_FN double m_abs(double x) { return fabs(x); }
template <typename T> DP_OPMATH_FN T m_div(T x, T y) { return x / y; }
DP_OPMATH_FN float m_pow(float x, float y) { return powf(x, y); }
DP_OPMATH_FN double m_pow(double x, double y) { return pow(x, y); }
#else
#include <stdbool.h>
#include <tgmath.h>
#define DP_OPMATH_FN static inline __attribute__((unused))
#define m_abs(x) _Generic((x), float: fabsf, double: fabs, default: dp_iabs)(x)
#define m_div(x, y) _Generic((x), float: (x) / (y), double: (x) / (y), default: dp_idiv((x), (y)))
#define m_pow(x, y) _Generic((x), float: powf, double: pow, default: dp_ipow)((x), (y))
#define m_floor(x) _Generic((x), float: floorf(x), double: floor(x), default: (x))
#define m_ceil(x) _Generic((x), float: ceilf(x), double: ceil(x), default: (x))
#define m_round(x) _Generic((x), float: rintf(x), double: rint(x), default: (x))
#define m_trunc(x) _Generic((x), float: truncf(x), double: trunc(x), default: (x))
#define m_fmod(x, y) _Generic((x), float: fmodf, double: fmod, default: dp_ifmod)((x), (y))
#define m_remainder(x, y) _Generic((x), float: dp_fremf, double: dp_frem, default: dp_irem)((x), (y))
#endif

/* A float as int64: NaN and values out of range give INT64_MIN, as x86's conversion does
 * (and so PyTorch on the CPU), on every backend, instead of undefined behaviour. */
DP_OPMATH_FN int64_t dp_float_to_int64(double v)
{
    return v == v && v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v : INT64_MIN;
}

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
/* fmod and Python's remainder (the result takes the divisor's sign); integers by zero give 0 */
DP_OPMATH_FN int64_t dp_ifmod(int64_t x, int64_t y) { return y ? x % y : 0; }
DP_OPMATH_FN int64_t dp_irem(int64_t x, int64_t y)
{
    int64_t r = y ? x % y : 0;
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}
DP_OPMATH_FN float dp_fremf(float x, float y)
{
    float r = fmodf(x, y);
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}
DP_OPMATH_FN double dp_frem(double x, double y)
{
    double r = fmod(x, y);
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}
/* the inverse of erf on [-1, 1] (NaN outside, +-inf at +-1): Giles' single precision
 * approximation ("Approximating the erfinv function", 2010) refined by two Newton steps on
 * erf, which bring it to double precision */
DP_OPMATH_FN double dp_erfinv(double y)
{
    if (!(y >= -1 && y <= 1)) return NAN;
    if (y == 1 || y == -1) return y * INFINITY;
    double w = -log((1 - y) * (1 + y)), p;
    if (w < 5) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w; p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3;
        p = -0.000200214257;
        p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w; p = 2.83297682 + p * w;
    }
    double x = p * y;
    for (int i = 0; i < 2; i++) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
    return x;
}

/* digamma, trigamma and the Hurwitz zeta function as PyTorch's CPU kernels compute them
 * (Cephes' series), for the digamma and polygamma rows */
DP_OPMATH_FN double dp_digamma(double x)
{
    const double PI = 3.14159265358979323846, PSI_10 = 2.25175258906672110764;
    if (x == 0) return copysign(INFINITY, -x);
    double result = 0;
    if (x < 0) {
        if (x == trunc(x)) return NAN;
        double r = x - trunc(x);   /* the fraction, as modf */
        return dp_digamma(1 - x) - PI / tan(PI * r);
    }
    while (x < 10) { result -= 1 / x; x += 1; }
    if (x == 10) return result + PSI_10;
    double y = 0;
    if (x < 1.0e17) {
        double z = 1 / (x * x);
        y = 8.33333333333333333333E-2;
        y = y * z - 2.10927960927960927961E-2; y = y * z + 7.57575757575757575758E-3;
        y = y * z - 4.16666666666666666667E-3; y = y * z + 3.96825396825396825397E-3;
        y = y * z - 8.33333333333333333333E-3; y = y * z + 8.33333333333333333333E-2;
        y *= z;
    }
    return result + log(x) - 0.5 / x - y;
}

DP_OPMATH_FN double dp_trigamma(double x)
{
    const double PI = 3.14159265358979323846;
    double sign = 1, result = 0;
    if (x < 0.5) {
        sign = -1;
        double s = sin(PI * x);
        result -= PI * PI / (s * s);
        x = 1 - x;
    }
    for (int i = 0; i < 6; i++) { result += 1 / (x * x); x += 1; }
    double ixx = 1 / (x * x);
    result += (1 + 1 / (2 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x;
    return sign * result;
}

DP_OPMATH_FN double dp_zeta(double x, double q)
{
    const double MACHEP = 1.11022302462515654042E-16;
    const double A[12] = { 12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
                           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
                           1.8152105401943546773e17, -7.1661652561756670113e18 };
    if (x == 1) return INFINITY;
    if (x < 1) return NAN;
    if (q <= 0) {
        if (q == floor(q)) return INFINITY;
        if (x != floor(x)) return NAN;
    }
    double s = pow(q, -x), a = q, b = 0;
    int i = 0;
    while (i < 9 || a <= 9) {
        i++;
        a += 1;
        b = pow(a, -x);
        s += b;
        if (fabs(b / s) < MACHEP) return s;
    }
    double w = a;
    s += b * w / (x - 1);
    s -= 0.5 * b;
    a = 1;
    double k = 0;
    for (i = 0; i < 12; i++) {
        a *= x + k;
        b /= w;
        double t = a * b / A[i];
        s = s + t;
        if (fabs(t / s) < MACHEP) return s;
        k += 1;
        a *= x + k;
        b /= w;
        k += 1;
    }
    return s;
}

/* the n-th derivative of digamma (n >= 0 an integer) */
DP_OPMATH_FN double dp_polygamma(double n, double x)
{
    if (n == 0) return dp_digamma(x);
    if (n == 1) return dp_trigamma(x);
    return (fmod(n, 2.0) != 0 ? 1.0 : -1.0) * exp(lgamma(n + 1.0)) * dp_zeta(n + 1, x);
}

#ifdef __cplusplus
DP_OPMATH_FN int64_t m_div(int64_t x, int64_t y) { return dp_idiv(x, y); }
DP_OPMATH_FN int64_t m_pow(int64_t x, int64_t y) { return dp_ipow(x, y); }
DP_OPMATH_FN float m_fmod(float x, float y) { return fmodf(x, y); }
DP_OPMATH_FN double m_fmod(double x, double y) { return fmod(x, y); }
DP_OPMATH_FN int64_t m_fmod(int64_t x, int64_t y) { return dp_ifmod(x, y); }
DP_OPMATH_FN float m_remainder(float x, float y) { return dp_fremf(x, y); }
DP_OPMATH_FN double m_remainder(double x, double y) { return dp_frem(x, y); }
DP_OPMATH_FN int64_t m_remainder(int64_t x, int64_t y) { return dp_irem(x, y); }
#endif

#endif
