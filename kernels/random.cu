/* random.cu: uniform, normal, randint and dropout-mask draws.  Thread k makes the Philox
 * call with counter offset + k through dp_rng_values of src/philox.h, the very function the
 * CPU backend calls, and stores the per elements it gives (k * per ...), so both devices
 * draw the same values. */
#include "common.cuh"
#include "../src/philox.h"

template <typename O, bool CONTIG>
static __global__ void random_kernel(int dist, bool f64, dp_offsets<1> oc, int64_t n, O *out, uint64_t seed,
                                     uint64_t offset, double a, double b)
{
    int per = dp_rng_per_call(dist, f64);
    int64_t calls = (int64_t)dp_rng_calls(dist, f64, (uint64_t)n);
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < calls; k += (int64_t)gridDim.x * blockDim.x) {
        double v[4];
        dp_rng_values(dist, f64, seed, offset + (uint64_t)k, a, b, v);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int64_t i = k * per + j;
            if (j >= per || i >= n) break;
            int64_t off[1] = { i };
            if (!CONTIG) oc.get(i, off);
            out[off[0]] = dp_cvt<O>(v[j]);
        }
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
        unsigned g = dp_grid_for((int64_t)dp_rng_calls(dist, f64, (uint64_t)n), DP_THREADS);
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
