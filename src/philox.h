/* philox.h: the random-number mapping shared by the CPU backend and the CUDA kernels, so
 * that the same seed gives the same values element for element on both.
 * A draw uses Philox4x32-10 with key (seed); each call gives four 32-bit words, and all of
 * them are used: element i of a draw with per elements per call (dp_rng_per_call) comes
 * from the call with counter offset + i / per. */
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

/* uniform in [0, 1): 24 bits of one word (float32), 53 bits of two (float64) */
DP_HD float dp_rng_u24(uint32_t r) { return (float)(r >> 8) * (1.0f / 16777216.0f); }
DP_HD double dp_rng_u53(uint32_t hi, uint32_t lo)
{
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}
/* Box-Muller: two standard normal values from u1 in (0, 1] and u2 in [0, 1) */
DP_HD void dp_rng_box_muller(double u1, double u2, double z[2])
{
    double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586 * u2;
    z[0] = r * cos(t);
    z[1] = r * sin(t);
}
/* an integer in [low, high) from 64 bits */
DP_HD int64_t dp_rng_int(uint32_t hi, uint32_t lo, int64_t low, int64_t high)
{
    uint64_t span = (uint64_t)(high - low);
    return low + (int64_t)((((uint64_t)hi << 32) | lo) % span);
}

/* How many elements of a draw one Philox call (four 32-bit words) gives: a float32 uniform
 * or a dropout draw takes a word, a float64 uniform or an integer two; normals come in
 * Box-Muller pairs, from two words in float32 and from four in float64. */
DP_HD int dp_rng_per_call(int dist, int is_f64)
{
    return dist == 2 || ((dist == 0 || dist == 1) && is_f64) ? 2 : 4;
}

/* Philox calls (counters) a draw of n elements takes. */
DP_HD uint64_t dp_rng_calls(int dist, int is_f64, uint64_t n)
{
    uint64_t per = (uint64_t)dp_rng_per_call(dist, is_f64);
    return n / per + (n % per != 0);
}

/* Elements k*per .. k*per + per - 1 of a draw (per = dp_rng_per_call, returned), from the
 * Philox call with counter offset + k, into v (dist: 0 uniform [a, b), 1 normal(mean a,
 * std b), 2 integer in [a, b), 3 dropout mask: 1/(1-a) with probability 1-a, else 0),
 * computed in double and then converted to the output dtype by the caller. */
DP_HD int dp_rng_values(int dist, int is_f64, uint64_t seed, uint64_t counter, double a, double b, double v[4])
{
    uint32_t r[4];
    dp_philox4x32(seed, counter, r);
    switch (dist) {
    case 0:
        if (is_f64) {
            v[0] = DP_RNG_MULADD(b - a, dp_rng_u53(r[0], r[1]), a);
            v[1] = DP_RNG_MULADD(b - a, dp_rng_u53(r[2], r[3]), a);
            return 2;
        }
        for (int j = 0; j < 4; j++) v[j] = DP_RNG_MULADD(b - a, (double)dp_rng_u24(r[j]), a);
        return 4;
    case 1:
        if (is_f64) {   /* u1 = (53 bits + 1) / 2^53 in (0, 1] */
            double u1 = ((double)((((uint64_t)r[0] << 32) | r[1]) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
            dp_rng_box_muller(u1, dp_rng_u53(r[2], r[3]), v);
            for (int j = 0; j < 2; j++) v[j] = DP_RNG_MULADD(b, v[j], a);
            return 2;
        }
        for (int j = 0; j < 4; j += 2)   /* (word + 1) / 2^32 in (0, 1], word / 2^32 */
            dp_rng_box_muller(((double)r[j] + 1.0) * (1.0 / 4294967296.0), (double)r[j + 1] * (1.0 / 4294967296.0), v + j);
        for (int j = 0; j < 4; j++) v[j] = DP_RNG_MULADD(b, v[j], a);
        return 4;
    case 2:
        v[0] = (double)dp_rng_int(r[0], r[1], (int64_t)a, (int64_t)b);
        v[1] = (double)dp_rng_int(r[2], r[3], (int64_t)a, (int64_t)b);
        return 2;
    default:
        for (int j = 0; j < 4; j++) v[j] = (double)dp_rng_u24(r[j]) >= a ? 1.0 / (1.0 - a) : 0.0;
        return 4;
    }
}

#endif
