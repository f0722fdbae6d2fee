// divider_test.cpp: kernels/divider.h against the division operator.  Every divisor in
// [1, 65536] with the numerators near each of its multiples below 2^17, the numerators
// 0..4096 and near 2^31 - 1; then divisors near the powers of two and near 2^31 - 1, and
// random divisors, each with numerators near 2^31 - 1, near their own multiples and at
// random.  Prints "N passed, N failed" (one check per group of divisors) and exits
// non-zero on a mismatch.
#include <stdint.h>
#include <stdio.h>

#include "divider.h"

static const uint32_t TOP = 2147483647u;   // 2^31 - 1, the largest numerator and divisor
static long long bad, tried;   // divisors that failed, numerators tried

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32()
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

// n / d and the remainder as the kernels compute it (r - q * d) against the operators
static bool one(const dp_divider &v, uint32_t n)
{
    tried++;
    uint32_t q = v.div(n), r = n - q * v.d;
    if (q == n / v.d && r == n % v.d) return true;
    fprintf(stderr, "divider %u: %u / d gives %u (remainder %u), expected %u (%u)\n", v.d, n, q, r, n / v.d, n % v.d);
    return false;
}

// numerators lo..hi (clamped to [0, TOP])
static bool span(const dp_divider &v, int64_t lo, int64_t hi)
{
    if (lo < 0) lo = 0;
    if (hi > TOP) hi = TOP;
    for (int64_t n = lo; n <= hi; n++)
        if (!one(v, (uint32_t)n)) return false;
    return true;
}

static void check_divisor(uint32_t d, bool multiples)
{
    dp_divider v = dp_divider_of(d);
    bool ok = span(v, 0, 4096) && span(v, TOP - 4096, TOP);
    // around every multiple k d below 2^17 (all divisors up to 65536), or a few hundred
    // multiples spread over [0, 2^31) (large divisors)
    if (multiples) {
        for (uint64_t m = d; ok && m < (1u << 17); m += d) ok = span(v, (int64_t)m - 2, (int64_t)m + 1);
    } else {
        uint64_t last = TOP / d;
        for (uint64_t k = 1; ok && k <= last; k += last / 256 + 1) ok = span(v, (int64_t)(k * d) - 2, (int64_t)(k * d) + 1);
        ok = ok && span(v, (int64_t)(last * d) - 2, (int64_t)(last * d) + 1);
    }
    for (int i = 0; ok && i < 1000; i++) ok = one(v, next_u32() & TOP);
    if (!ok) bad++;
}

static int passed, failed;
static void group(const char *what, long long bad_before)
{
    if (bad == bad_before) passed++; else failed++;
    printf("%s %s\n", bad == bad_before ? "PASS" : "FAIL", what);
}

int main()
{
    long long b = bad;
    for (uint32_t d = 1; d <= 65536; d++) check_divisor(d, true);
    group("every divisor in [1, 65536]", b);
    b = bad;
    for (int p = 17; p <= 31; p++)
        for (int64_t d = ((int64_t)1 << p) - 3; d <= ((int64_t)1 << p) + 3; d++)
            if (d >= 1 && d <= TOP) check_divisor((uint32_t)d, false);
    group("divisors around 2^17 .. 2^31", b);
    b = bad;
    for (uint32_t d = TOP - 64; d <= TOP; d++) check_divisor(d, false);
    group("divisors in [2^31 - 65, 2^31 - 1]", b);
    b = bad;
    for (int i = 0; i < 20000; i++) {
        uint32_t d = next_u32() & TOP;
        check_divisor(d ? d : 1, false);
    }
    group("20000 random divisors below 2^31", b);
    printf("divider: %lld numerators tried\n%d passed, %d failed\n", tried, passed, failed);
    return failed ? 1 : 0;
}
