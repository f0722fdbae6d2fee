/* random.c: the global random stream (Philox4x32-10: a seed and a counter, see philox.h)
 * and the draws made from it: rand, randn, randint, uniform_, normal_, randperm. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "philox.h"

/* ---------------------------------------------------------------- random numbers */

#define DEFAULT_SEED 67280421310721ULL   /* PyTorch's default CPU seed */
static atomic_uint_least64_t g_seed = DEFAULT_SEED;
static atomic_uint_least64_t g_offset;

/* A thread may have a stream of its own (a DataLoader worker, as PyTorch's worker
 * processes each have theirs): its torch.manual_seed then leaves the global one alone. */
static _Thread_local struct { bool on; uint64_t seed, offset; } t_stream;

void dp_rng_thread_stream(bool on, uint64_t seed)
{
    t_stream.on = on;
    t_stream.seed = seed;
    t_stream.offset = 0;
}

void dp_manual_seed(uint64_t seed)
{
    if (t_stream.on) { t_stream.seed = seed; t_stream.offset = 0; return; }
    atomic_store(&g_seed, seed);
    atomic_store(&g_offset, 0);
}

uint64_t dp_initial_seed(void) { return t_stream.on ? t_stream.seed : atomic_load(&g_seed); }

uint64_t dp_rng_reserve(uint64_t n)
{
    if (t_stream.on) { uint64_t off = t_stream.offset; t_stream.offset += n; return off; }
    return atomic_fetch_add(&g_offset, n);
}

uint64_t dp_rng_counters(int dist, dp_dtype dt, int64_t n)
{
    return n > 0 ? dp_rng_calls(dist, dt == DP_FLOAT64, (uint64_t)n) : 0;
}

/* t filled from the stream (seed, off): element i (row-major) from the Philox call with
 * counter off + i / per (philox.h) */
static int fill_stream(dp_tensor *t, dp_rng_dist dist, double a, double b, uint64_t seed, uint64_t off)
{
    if (!dp_numel(t)) return 0;
    dp_tensor *dst = dp_is_contiguous(t) ? t : dp_empty(t->ndim, t->sizes, t->dtype, t->device);
    if (!dst) return -1;
    dp_view v = dp_view_of(dst);
    int rc = dp_backend_for(t->device)->random(dist, &v, seed, off, a, b);
    if (!rc && dst != t) rc = dp_copy_raw(t, dst);
    if (dst != t) dp_tensor_release(dst);
    if (!rc) dp_bump_version(t);
    return rc;
}

static int fill_random(dp_tensor *t, dp_rng_dist dist, double a, double b)
{
    int64_t n = dp_numel(t);
    if (!n) return 0;
    uint64_t seed = dp_initial_seed(), off = dp_rng_reserve(dp_rng_counters(dist, t->dtype, n));
    return fill_stream(t, dist, a, b, seed, off);
}

int dp_random_fill_(dp_tensor *t, int dist, double a, double b, uint64_t seed, uint64_t offset)
{
    if (dp_check_inplace(t, "random")) return -1;
    if (dist != DP_RNG_UNIFORM && dist != DP_RNG_NORMAL && dist != DP_RNG_RANDINT)
        return dp_error("random: unknown distribution %d", dist);
    if (dist != DP_RNG_RANDINT && dp_need_float(t->dtype, dist == DP_RNG_UNIFORM ? "uniform_" : "normal_")) return -1;
    if (dist == DP_RNG_UNIFORM && !(a <= b)) return dp_error("uniform_: expects a <= b, got a=%g and b=%g", a, b);
    if (dist == DP_RNG_NORMAL && !(b >= 0)) return dp_error("normal_: expects std >= 0, got %g", b);
    if (dist == DP_RNG_RANDINT) {
        if (!(b > a)) return dp_error("random_: expects 'from' to be less than 'to', but got from=%.17g >= to=%.17g", a, b);
        if (t->dtype == DP_BOOL && (a < 0 || b > 2)) return dp_error("random_: a bool tensor takes values in [0, 2), got [%.17g, %.17g)", a, b);
    }
    return fill_stream(t, (dp_rng_dist)dist, a, b, seed, offset);
}

dp_tensor *dp_random_new(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev, dp_rng_dist dist, double a, double b)
{
    dp_tensor *t = dp_empty(ndim, sizes, dt, dev);
    if (t && fill_random(t, dist, a, b)) { dp_tensor_release(t); return NULL; }
    return t;
}

int dp_need_float(dp_dtype dt, const char *op)
{
    return dp_dtype_is_float(dt) ? 0 : dp_error("%s: expected a floating point dtype, got %s", op, dp_dtype_name(dt));
}

dp_tensor *dp_rand(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev)
{
    if (dp_need_float(dt, "rand")) return NULL;
    return dp_random_new(ndim, sizes, dt, dev, DP_RNG_UNIFORM, 0, 1);
}

dp_tensor *dp_randn(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev)
{
    if (dp_need_float(dt, "randn")) return NULL;
    return dp_random_new(ndim, sizes, dt, dev, DP_RNG_NORMAL, 0, 1);
}

dp_tensor *dp_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev)
{
    if (high <= low) { dp_error("randint: high (%lld) must be greater than low (%lld)", (long long)high, (long long)low); return NULL; }
    return dp_random_new(ndim, sizes, dt, dev, DP_RNG_RANDINT, (double)low, (double)high);
}

int dp_uniform_(dp_tensor *t, double a, double b)
{
    if (dp_check_inplace(t, "uniform_") || dp_need_float(t->dtype, "uniform_")) return -1;
    if (a > b) return dp_error("uniform_: expects a <= b, got a=%g and b=%g", a, b);
    return fill_random(t, DP_RNG_UNIFORM, a, b);
}

int dp_normal_(dp_tensor *t, double mean, double std)
{
    if (dp_check_inplace(t, "normal_") || dp_need_float(t->dtype, "normal_")) return -1;
    if (std < 0) return dp_error("normal_: expects std >= 0, got %g", std);
    return fill_random(t, DP_RNG_NORMAL, mean, std);
}

dp_tensor *dp_randperm(int64_t n, bool use_generator, uint64_t seed, uint64_t offset)
{
    if (n < 0) { dp_error("randperm: n must be non-negative, got %lld", (long long)n); return NULL; }
    if (!use_generator) { seed = dp_initial_seed(); offset = dp_rng_reserve(dp_rng_counters(DP_RNG_RANDINT, DP_INT64, n)); }
    dp_tensor *t = dp_empty(1, &n, DP_INT64, dp_cpu());
    if (!t) return NULL;
    int64_t *p = dp_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = i;
    /* Fisher-Yates: position i draws an integer from 64 bits, two positions per Philox call
     * (the call with counter offset + i / 2, as randint's element i) */
    uint32_t r[4];
    for (int64_t i = n - 1; i > 0; i--) {
        if (i == n - 1 || i % 2 == 1) dp_philox4x32(seed, offset + (uint64_t)(i / 2), r);
        int h = (int)(i % 2) * 2;
        int64_t j = dp_rng_int(r[h], r[h + 1], 0, i + 1), tmp = p[i];
        p[i] = p[j];
        p[j] = tmp;
    }
    return t;
}
