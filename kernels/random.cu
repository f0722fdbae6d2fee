/* random.cu: uniform, normal, randint and dropout-mask draws.  Element i (in row-major
 * order) takes Philox4x32-10 counter (offset + i) through dp_rng_value of src/philox.h,
 * the very function the CPU backend calls, so both devices draw the same values. */
#include "common.cuh"
#include "../src/philox.h"

template <typename O, bool CONTIG>
static __global__ void random_kernel(int dist, bool f64, dp_offsets<1> oc, int64_t n, O *out, uint64_t seed,
                                     uint64_t offset, double a, double b)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[1] = { i };
        if (!CONTIG) oc.get(i, off);
        out[off[0]] = dp_cvt<O>(dp_rng_value(dist, f64, seed, offset + (uint64_t)i, a, b));
    }
}

struct DP_HIDDEN random_launch {
    int dist;
    const dp_view *out;
    uint64_t seed, offset;
    double a, b;
    template <typename O> int run() const
    {
        const dp_view *vs[1] = { out };
        dp_offsets<1> oc;
        bool contig;
        int64_t n = dp_make_offsets<1>(&oc, vs, &contig);
        if (n == 0) return 0;
        CUDA_STREAM_OF(out->device, s);
        bool f64 = out->dtype == DP_FLOAT64;
        unsigned g = dp_grid_for(n, DP_THREADS);
        if (contig) random_kernel<O, true><<<g, DP_THREADS, 0, s>>>(dist, f64, oc, n, (O *)out->data, seed, offset, a, b);
        else random_kernel<O, false><<<g, DP_THREADS, 0, s>>>(dist, f64, oc, n, (O *)out->data, seed, offset, a, b);
        CUDA_CHECK_LAUNCH("random");
        return 0;
    }
};

extern "C" int dp_cuda_random(int dist, const dp_view *out, uint64_t seed, uint64_t offset, double a, double b)
{
    if (dist < DP_RNG_UNIFORM || dist > DP_RNG_BERNOULLI_MASK) return dp_cuda_error("CUDA random: unknown distribution %d", dist);
    if (dist == DP_RNG_RANDINT && !(b > a)) return dp_cuda_error("randint: high (%g) must be greater than low (%g)", b, a);
    random_launch f = { dist, out, seed, offset, a, b };
    return DP_DISPATCH_OUT(out->dtype, f);
}
