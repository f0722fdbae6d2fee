/* philox.h: the random-number mapping shared by the CPU backend and the CUDA kernels, so
 * that the same seed gives the same values element for element on both.
 * Element i of a draw uses Philox4x32-10 with key (seed) and counter (offset + i). */
#ifndef DP_PHILOX_H
#define DP_PHILOX_H

#include <stdint.h>
#include <math.h>

#ifdef __CUDACC__
#define DP_HD __host__ __device__ __forceinline__
#else
#define DP_HD static inline
#endif

/* x * y + z rounded twice, as the CPU computes it: nvcc would contract it into one fused
 * multiply-add (rounded once), and the GPU's draws would differ in the last bit. */
#ifdef __CUDA_ARCH__
#define DP_RNG_MULADD(x, y, z) __dadd_rn(__dmul_rn((x), (y)), (z))
#else
#define DP_RNG_MULADD(x, y, z) ((x) * (y) + (z))
#endif

DP_HD void dp_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* uniform in [0, 1) */
DP_HD float dp_rng_u24(uint32_t r) { return (float)(r >> 8) * (1.0f / 16777216.0f); }
DP_HD double dp_rng_u53(uint32_t hi, uint32_t lo)
{
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}
/* a standard normal value (Box-Muller in double; float32 draws round the result) */
DP_HD double dp_rng_normal(const uint32_t r[4])
{
    double u1 = ((double)((((uint64_t)r[0] << 32) | r[1]) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = dp_rng_u53(r[2], r[3]);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
/* an integer in [low, high) */
DP_HD int64_t dp_rng_int(const uint32_t r[4], int64_t low, int64_t high)
{
    uint64_t span = (uint64_t)(high - low);
    return low + (int64_t)(((((uint64_t)r[0] << 32) | r[1])) % span);
}

/* The value of element i of a draw (dist: 0 uniform [a, b), 1 normal(mean a, std b),
 * 2 integer in [a, b), 3 dropout mask: 1/(1-a) with probability 1-a, else 0), computed in
 * double and then converted to the output dtype by the caller. */
DP_HD double dp_rng_value(int dist, int is_f64, uint64_t seed, uint64_t counter, double a, double b)
{
    uint32_t r[4];
    dp_philox4x32(seed, counter, r);
    switch (dist) {
    case 0: return DP_RNG_MULADD(b - a, is_f64 ? dp_rng_u53(r[0], r[1]) : (double)dp_rng_u24(r[0]), a);
    case 1: return DP_RNG_MULADD(b, dp_rng_normal(r), a);
    case 2: return (double)dp_rng_int(r, (int64_t)a, (int64_t)b);
    default: return (double)dp_rng_u24(r[0]) >= a ? 1.0 / (1.0 - a) : 0.0;
    }
}

#endif
