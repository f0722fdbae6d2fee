/* divider.h: division by a divisor that is fixed for a whole launch, as a 32-bit multiply-high,
 * an add and a shift (Granlund and Montgomery's magic numbers, as PyTorch's IntDivider).
 * The host computes the magic number once per divisor; a kernel then splits a linear index
 * into coordinates without the 64-bit division, which a GPU runs as a long subroutine.
 * Exact for every divisor in [1, 2^31 - 1] and every numerator in [0, 2^31 - 1]
 * (spec/cudaemu/divider_test.cpp checks it).  Plain C++ with nothing of CUDA but __umulhi,
 * so that test compiles this very code on the host. */
#ifndef DP_KERNELS_DIVIDER_H
#define DP_KERNELS_DIVIDER_H

#include <stdint.h>

#ifdef __CUDACC__
#define DP_DIV_HD __host__ __device__ __forceinline__
#else
#define DP_DIV_HD inline
#endif

struct dp_divider {
    uint32_t d;       /* the divisor */
    uint32_t mul;     /* the magic number: 2^32 (2^shift - d) / d + 1, always below 2^32 */
    uint32_t shift;   /* ceil(log2 d) */

    /* n / d for n < 2^31: with t = mulhi(n, mul) <= n, t + n cannot wrap around */
    DP_DIV_HD uint32_t div(uint32_t n) const
    {
#ifdef __CUDA_ARCH__
        uint32_t t = __umulhi(n, mul);
#else
        uint32_t t = (uint32_t)(((uint64_t)n * mul) >> 32);
#endif
        return (t + n) >> shift;
    }
};

/* The divider of d, 1 <= d <= 2^31 - 1 (a size of a tensor with fewer than 2^31 elements).
 * 2^(shift - 1) < d <= 2^shift makes 2^shift - d < d, so mul fits in 32 bits. */
static inline dp_divider dp_divider_of(uint32_t d)
{
    uint32_t shift = 0;
    while (((uint64_t)1 << shift) < d) shift++;
    uint64_t magic = ((((uint64_t)1 << shift) - d) << 32) / d + 1;
    dp_divider v = { d, (uint32_t)magic, shift };
    return v;
}

#endif
