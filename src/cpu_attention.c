/* cpu_attention.c: the CPU kernels of scaled dot-product attention (attention.c), blocked
 * as FlashAttention-2: the worker threads take (batch entry, tile) tasks; a query tile of
 * BQ rows meets the keys BK at a time, the scores tile kept in a BQ x BK buffer with an
 * online softmax (running max and sum per row), so memory is O(tile) per thread and
 * O(L) per batch entry (the logsumexp) whatever L and S are.  The backward recomputes the
 * probabilities from the logsumexp: in one pass per batch entry (over its key tiles, grad q
 * accumulated by the one task that owns it) when the batch entries spread evenly over the
 * threads, else in two passes, one over query tiles for grad q and one over key tiles for
 * grad k and v.  No thread writes where another does, so the result does not depend on
 * timing.  The tile products are plain loops vectorized along the keys
 * (no GEMM calls: the tiles are too small for them to pay). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "cpu.h"

#define BQ 64   /* queries per tile */
#define BK 64   /* keys per tile */

/* Without trapping math GCC turns the comparisons of vexpf and of the row maxima into
 * vector selects; nothing here reads the floating-point exception flags. */
#pragma GCC optimize("no-trapping-math")

#define DO_PRAGMA(x) _Pragma(#x)
#define SIMD_SUM(s) DO_PRAGMA(omp simd reduction(+:s))
#define SIMD_MAX(s) DO_PRAGMA(omp simd reduction(max:s))

/* exp for float32 tiles, branch-free so the loops vectorize (libm's expf is a call per
 * element): Cephes' range reduction and polynomial, within 1 ulp of exp over the float
 * range; 0 below -87 (and for -inf), NaN for NaN. */
static inline float vexpf(float x)
{
    float xc = x > -87.0f ? (x < 88.0f ? x : 88.0f) : -87.0f;   /* NaN too: fn stays in range */
    float fn = xc * 1.44269504088896341f + 12582912.0f;   /* round to nearest via 1.5 * 2^23 */
    fn -= 12582912.0f;
    float r = xc - fn * 0.693359375f + fn * 2.12194440e-4f;
    float y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r +
               1.6666665459e-1f) * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)fn + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : x != x ? x : y * scale;
}

typedef struct {
    const dp_sdpa_params *p;
    const void *q, *k, *v, *gout;
    void *out, *lse, *delta, *gq, *gk, *gv;
    int64_t tiles, ktiles;     /* query tiles and key tiles per batch entry */
    double keep_scale;         /* 1/(1-p), 0 when p = 1 */
    char *failed;              /* per part: a scratch allocation failed */
} sdpa_job;

#define T float
#define SFX _f32
#define EXP vexpf
#define LOG logf
#include "cpu_attention_generic.h"
#undef T
#undef SFX
#undef EXP
#undef LOG

#define T double
#define SFX _f64
#define EXP exp
#define LOG log
#include "cpu_attention_generic.h"
#undef T
#undef SFX
#undef EXP
#undef LOG

static int run(int64_t n, dp_range_fn fn, sdpa_job *j)
{
    int parts = dp_pool_threads();
    if (parts < 1) parts = 1;
    char failed[parts];
    memset(failed, 0, sizeof failed);
    j->failed = failed;
    dp_parallel(n, 1, fn, j);
    for (int i = 0; i < parts; i++)
        if (failed[i]) return dp_error("scaled_dot_product_attention: out of memory for the tile buffers");
    return 0;
}

static sdpa_job job_of(const dp_sdpa_params *p)
{
    return (sdpa_job){ .p = p, .tiles = (p->L + BQ - 1) / BQ, .ktiles = (p->S + BK - 1) / BK,
                       .keep_scale = p->dropout_p < 1 ? 1 / (1 - p->dropout_p) : 0 };
}

static int check_dtype(int dt, const char *what)
{
    if (dt == DP_FLOAT32 || dt == DP_FLOAT64) return 0;
    return dp_error("scaled_dot_product_attention%s: expected float32 or float64 inputs, got %s", what,
                    dp_dtype_name(dt));
}

int cpu_sdpa_forward(const dp_sdpa_params *p, const dp_view *out, const dp_view *lse, const dp_view *q,
                     const dp_view *k, const dp_view *v)
{
    if (check_dtype(q->dtype, "")) return -1;
    sdpa_job j = job_of(p);
    j.q = q->data, j.k = k->data, j.v = v->data, j.out = out->data, j.lse = lse->data;
    return run(p->batch * j.tiles, q->dtype == DP_FLOAT32 ? forward_range_f32 : forward_range_f64, &j);
}

int cpu_sdpa_backward(const dp_sdpa_params *p, const dp_view *gq, const dp_view *gk, const dp_view *gv,
                      const dp_view *gout, const dp_view *q, const dp_view *k, const dp_view *v, const dp_view *out,
                      const dp_view *lse)
{
    int dt = q->dtype;
    if (check_dtype(dt, " backward")) return -1;
    if (dp_check_count(p->batch * p->L, dp_dtype_size(dt), "scaled_dot_product_attention backward")) return -1;
    void *delta = malloc((size_t)(p->batch * p->L) * dp_dtype_size(dt));
    if (!delta) return dp_error("out of memory");
    sdpa_job j = job_of(p);
    j.q = q->data, j.k = k->data, j.v = v->data, j.gout = gout->data, j.out = out->data, j.lse = lse->data;
    j.delta = delta, j.gq = gq ? gq->data : NULL, j.gk = gk ? gk->data : NULL, j.gv = gv ? gv->data : NULL;
    bool f32 = dt == DP_FLOAT32;
    dp_parallel(p->batch * p->L, GRAIN / (p->Ev + 1) + 1, f32 ? delta_range_f32 : delta_range_f64, &j);
    int rc = 0, threads = dp_pool_threads() > 0 ? dp_pool_threads() : 1;
    if (p->batch % threads == 0 || p->batch >= 4 * threads) {
        /* one pass per batch entry: the probabilities are computed once */
        rc = run(p->batch, f32 ? bwd_range_f32 : bwd_range_f64, &j);
    } else {
        /* few batch entries: tasks per tile, grad q and grad k, v in passes of their own */
        if (gq) rc = run(p->batch * j.tiles, f32 ? dq_range_f32 : dq_range_f64, &j);
        if (!rc && (gk || gv)) rc = run(p->batch * j.ktiles, f32 ? dkv_range_f32 : dkv_range_f64, &j);
    }
    free(delta);
    return rc;
}
