/* half.h: float16 and bfloat16 <-> float32, bit for bit as PyTorch's (c10/util/Half.h and
 * BFloat16.h): round to nearest even, overflow to infinity, subnormals kept, NaN quiet (a
 * float16 NaN keeps its sign, a bfloat16 NaN is 0x7FC0).  Other types convert through
 * float32, as PyTorch's casts do (a double is rounded to float first).  Integer arithmetic
 * only, so the CPU, CUDA and the emulation agree whatever the float environment. */
#ifndef DP_HALF_H
#define DP_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__cplusplus) && defined(__CUDACC__)
#define DP_HALF_FN __host__ __device__ __forceinline__
#elif defined(__cplusplus)
#define DP_HALF_FN static inline
#else
#define DP_HALF_FN static inline __attribute__((unused))
#endif

DP_HALF_FN uint32_t dp_f32_bits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
DP_HALF_FN float dp_bits_f32(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

/* x >> shift rounded to nearest even (1 <= shift <= 31) */
DP_HALF_FN uint32_t dp_shift_rne(uint32_t x, int shift)
{
    uint32_t r = x >> shift, rem = x & ((1u << shift) - 1), half = 1u << (shift - 1);
    return r + (rem > half || (rem == half && (r & 1)));
}

DP_HALF_FN uint16_t dp_float_to_f16(float f)
{
    uint32_t x = dp_f32_bits(f), sign = (x >> 16) & 0x8000;
    x &= 0x7fffffff;
    if (x > 0x7f800000) return (uint16_t)(sign | 0x7e00);           /* NaN */
    if (x >= 0x477ff000) return (uint16_t)(sign | 0x7c00);          /* >= 65520 (the midpoint past 65504): inf */
    if (x >= 0x38800000) return (uint16_t)(sign | dp_shift_rne(x - 0x38000000, 13));   /* normal: rebias 127 -> 15 */
    if (x <= 0x33000000) return (uint16_t)sign;                     /* <= 2^-25: zero (2^-25 ties to even) */
    int e = (int)(x >> 23);                                          /* subnormal: units of 2^-24 */
    return (uint16_t)(sign | dp_shift_rne((x & 0x7fffff) | 0x800000, 126 - e));
}

DP_HALF_FN float dp_f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f) return dp_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) return dp_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return dp_bits_f32(sign);
    int e = -1;                                                      /* subnormal: normalise */
    do { mant <<= 1; e++; } while (!(mant & 0x400));
    return dp_bits_f32(sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13));
}

DP_HALF_FN uint16_t dp_float_to_bf16(float f)
{
    uint32_t x = dp_f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return 0x7fc0;
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

DP_HALF_FN float dp_bf16_to_float(uint16_t h) { return dp_bits_f32((uint32_t)h << 16); }

#endif
