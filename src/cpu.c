/* cpu.c: the CPU backend: a caching host allocator, strided iteration, copies with dtype
 * conversion, softmax, OpenBLAS GEMMs, indexing, random draws, losses and optimizer
 * updates, and the backend struct.  The op table's kernels are in cpu_ops.c. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>

#include "cpu.h"
#include "philox.h"
#include "rnn_cell.h"

/* ---------------------------------------------------------------- caching allocator
 * Large blocks are kept after free and handed out again, so a loop that makes and drops
 * big tensors does not fault in fresh pages every time.  Sizes are rounded (to 4 KiB, and
 * to 1/8 of their power of two above 4 MiB) and a cached block serves any request it
 * exceeds by at most a quarter (best fit).  At most CACHE_MAX_BYTES are kept; the oldest
 * blocks go back to the system first. */

#define CACHE_MIN (64 << 10)
#define CACHE_MAX_BYTES ((size_t)256 << 20)
#define CACHE_SLOTS 64

typedef struct { void *ptr; size_t size; uint64_t age; } cached_block;
static cached_block g_cache[CACHE_SLOTS];
static size_t g_cached_bytes;
static uint64_t g_cache_clock;
static pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t round_size(size_t n)
{
    if (n < CACHE_MIN) return n;
    if (n <= ((size_t)4 << 20)) return (n + 4095) & ~(size_t)4095;
    size_t p = (size_t)1 << (63 - __builtin_clzll((unsigned long long)n));   /* n's power of two */
    size_t step = p / 8;
    return (n + step - 1) / step * step;
}

static void *cpu_alloc(dp_device dev, size_t nbytes)
{
    size_t size = round_size(nbytes);
    if (size >= CACHE_MIN) {
        pthread_mutex_lock(&g_cache_lock);
        int best = -1;
        for (int i = 0; i < CACHE_SLOTS; i++) {
            size_t have = g_cache[i].size;
            if (g_cache[i].ptr && have >= size && have - size <= size / 4 && (best < 0 || have < g_cache[best].size)) best = i;
        }
        if (best >= 0) {
            void *p = g_cache[best].ptr;
            g_cache[best].ptr = NULL;
            g_cached_bytes -= g_cache[best].size;
            pthread_mutex_unlock(&g_cache_lock);
            return p;
        }
        pthread_mutex_unlock(&g_cache_lock);
    }
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 64)) p = NULL;
    if (!p) dp_error("out of memory: tried to allocate %.1f MiB on the host", (double)nbytes / 1048576.0);
    return p;
}

static void cpu_free(dp_device dev, void *ptr, size_t nbytes)
{
    size_t size = round_size(nbytes);
    if (size < CACHE_MIN || size > CACHE_MAX_BYTES / 2) { free(ptr); return; }
    void *evicted[CACHE_SLOTS];
    int nev = 0;
    pthread_mutex_lock(&g_cache_lock);
    /* make room: the oldest blocks leave first */
    while (g_cached_bytes + size > CACHE_MAX_BYTES) {
        int old = -1;
        for (int i = 0; i < CACHE_SLOTS; i++)
            if (g_cache[i].ptr && (old < 0 || g_cache[i].age < g_cache[old].age)) old = i;
        if (old < 0) break;
        evicted[nev++] = g_cache[old].ptr;
        g_cached_bytes -= g_cache[old].size;
        g_cache[old].ptr = NULL;
    }
    int slot = -1;
    for (int i = 0; i < CACHE_SLOTS && slot < 0; i++) if (!g_cache[i].ptr) slot = i;
    if (slot < 0) {   /* every slot taken: replace the oldest */
        slot = 0;
        for (int i = 1; i < CACHE_SLOTS; i++) if (g_cache[i].age < g_cache[slot].age) slot = i;
        evicted[nev++] = g_cache[slot].ptr;
        g_cached_bytes -= g_cache[slot].size;
    }
    g_cache[slot] = (cached_block){ ptr, size, ++g_cache_clock };
    g_cached_bytes += size;
    pthread_mutex_unlock(&g_cache_lock);
    for (int i = 0; i < nev; i++) free(evicted[i]);
}

static void cpu_empty_cache(void)
{
    pthread_mutex_lock(&g_cache_lock);
    for (int i = 0; i < CACHE_SLOTS; i++) { free(g_cache[i].ptr); g_cache[i].ptr = NULL; }
    g_cached_bytes = 0;
    pthread_mutex_unlock(&g_cache_lock);
    dp_cpu_conv_release_buffers();
}

static int cpu_copy_bytes(dp_device dev, void *dst, const void *src, size_t n, bool nb) { memcpy(dst, src, n); return 0; }
static int cpu_copy_d2h(dp_device dev, void *dst, const void *src, size_t n) { memcpy(dst, src, n); return 0; }
static int cpu_copy_d2d(dp_device dd, void *dst, dp_device sd, const void *src, size_t n) { memcpy(dst, src, n); return 0; }
static int cpu_sync(dp_device dev) { return 0; }

/* ---------------------------------------------------------------- strided iteration */

void iter_init(iter_t *it, int nops, const dp_view *const *v)
{
    it->nops = nops;
    int nd = 0;
    for (int d = 0; d < v[0]->ndim; d++) {
        if (v[0]->sizes[d] == 1) continue;
        it->sizes[nd] = v[0]->sizes[d];
        for (int k = 0; k < nops; k++) it->strides[k][nd] = v[k]->strides[d];
        nd++;
    }
    /* merge dim d-1 into d when every operand steps contiguously across them */
    int out = 0;
    for (int d = 0; d < nd; d++) {
        if (out > 0) {
            bool merge = true;
            for (int k = 0; k < nops; k++)
                if (it->strides[k][out - 1] != it->strides[k][d] * it->sizes[d]) { merge = false; break; }
            if (merge) {
                it->sizes[out - 1] *= it->sizes[d];
                for (int k = 0; k < nops; k++) it->strides[k][out - 1] = it->strides[k][d];
                continue;
            }
        }
        it->sizes[out] = it->sizes[d];
        for (int k = 0; k < nops; k++) it->strides[k][out] = it->strides[k][d];
        out++;
    }
    if (out == 0) { it->sizes[0] = 1; for (int k = 0; k < nops; k++) it->strides[k][0] = 1; out = 1; }
    it->ndim = out;
    for (int k = 0; k < nops; k++) { it->base[k] = v[k]->data; it->esize[k] = (int)dp_dtype_size(v[k]->dtype); }
}

/* the inner run of outer index o */
static inline void iter_outer(const iter_t *it, inner_fn fn, void *ctx, int64_t o, int64_t inner, const int64_t *s)
{
    char *p[ITER_MAX_OPS];
    int64_t rem = o;
    for (int k = 0; k < it->nops; k++) p[k] = it->base[k];
    for (int d = it->ndim - 2; d >= 0; d--) {
        int64_t i = rem % it->sizes[d];
        rem /= it->sizes[d];
        for (int k = 0; k < it->nops; k++) p[k] += i * it->strides[k][d] * it->esize[k];
    }
    fn(ctx, inner, p, s);
}

typedef struct { const iter_t *it; inner_fn fn; void *ctx; int64_t inner; const int64_t *s; } iter_job;

/* one long run split across threads: [lo, hi) of the inner dimension */
static void iter_inner_range(void *c, int64_t lo, int64_t hi, int part)
{
    const iter_job *j = c;
    char *p[ITER_MAX_OPS];
    for (int k = 0; k < j->it->nops; k++) p[k] = j->it->base[k] + lo * j->s[k] * j->it->esize[k];
    j->fn(j->ctx, hi - lo, p, j->s);
}

static void iter_outer_range(void *c, int64_t lo, int64_t hi, int part)
{
    const iter_job *j = c;
    for (int64_t o = lo; o < hi; o++) iter_outer(j->it, j->fn, j->ctx, o, j->inner, j->s);
}

void iter_run(iter_t *it, inner_fn fn, void *ctx)
{
    int nd = it->ndim, nops = it->nops;
    for (int d = 0; d < nd; d++)
        if (it->sizes[d] == 0) return;   /* a 0-sized dimension: nothing to do */
    int64_t inner = it->sizes[nd - 1], outer = 1;
    for (int d = 0; d < nd - 1; d++) outer *= it->sizes[d];
    int64_t s[ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) s[k] = it->strides[k][nd - 1];
    iter_job j = { it, fn, ctx, inner, s };
    if (outer == 1) dp_parallel(inner, GRAIN, iter_inner_range, &j);
    else dp_parallel(outer, GRAIN / inner + (GRAIN % inner != 0), iter_outer_range, &j);   /* ceil, no overflow */
}

/* copy with conversion: one inner function per (out, in) dtype pair; float16 and
 * bfloat16 (stored as uint16_t) convert through float32, as in PyTorch (half.h) */
typedef uint16_t f16_t;
typedef uint16_t bf16_t;
#define CONV_FN(NAME, TO, TI, EXPR) \
    static void NAME(void *c, int64_t n, char **p, const int64_t *s) { LOOP2(TO, TI, EXPR); }
#define CONV_ROW(TO, N, CONVB)                                         \
    CONV_FN(cv_##N##_f32, TO, float, x) CONV_FN(cv_##N##_f64, TO, double, x) \
    CONV_FN(cv_##N##_i64, TO, int64_t, x) CONV_FN(cv_##N##_b, TO, bool, x) \
    CONV_FN(cv_##N##_h, TO, f16_t, dp_f16_to_float(x)) CONV_FN(cv_##N##_bh, TO, bf16_t, dp_bf16_to_float(x))
CONV_ROW(float, f32, 0)
CONV_ROW(double, f64, 0)
CONV_FN(cv_i64_f32, int64_t, float, dp_float_to_int64(x)) CONV_FN(cv_i64_f64, int64_t, double, dp_float_to_int64(x))
CONV_FN(cv_i64_i64, int64_t, int64_t, x) CONV_FN(cv_i64_b, int64_t, bool, x)
CONV_FN(cv_i64_h, int64_t, f16_t, dp_float_to_int64(dp_f16_to_float(x)))
CONV_FN(cv_i64_bh, int64_t, bf16_t, dp_float_to_int64(dp_bf16_to_float(x)))
CONV_FN(cv_b_f32, bool, float, x != 0)
CONV_FN(cv_b_f64, bool, double, x != 0)
CONV_FN(cv_b_i64, bool, int64_t, x != 0)
CONV_FN(cv_b_b, bool, bool, x)
CONV_FN(cv_b_h, bool, f16_t, (x & 0x7fff) != 0)
CONV_FN(cv_b_bh, bool, bf16_t, (x & 0x7fff) != 0)
/* into a 2-byte float: from float32 directly, from the others through float32 */
#define CONV_HALF_ROW(N, TO, FROM_F, ONE)                                                        \
    CONV_FN(cv_##N##_f32, TO, float, FROM_F(x)) CONV_FN(cv_##N##_f64, TO, double, FROM_F((float)x)) \
    CONV_FN(cv_##N##_i64, TO, int64_t, FROM_F((float)x)) CONV_FN(cv_##N##_b, TO, bool, x ? ONE : 0)
CONV_HALF_ROW(h, f16_t, dp_float_to_f16, 0x3c00)
CONV_HALF_ROW(bh, bf16_t, dp_float_to_bf16, 0x3f80)
CONV_FN(cv_h_h, f16_t, f16_t, x) CONV_FN(cv_h_bh, f16_t, bf16_t, dp_float_to_f16(dp_bf16_to_float(x)))
CONV_FN(cv_bh_bh, bf16_t, bf16_t, x) CONV_FN(cv_bh_h, bf16_t, f16_t, dp_float_to_bf16(dp_f16_to_float(x)))
static inner_fn const conv_fns[DP_NDTYPES][DP_NDTYPES] = {
    { cv_f32_f32, cv_f32_f64, cv_f32_i64, cv_f32_b, cv_f32_h, cv_f32_bh },
    { cv_f64_f32, cv_f64_f64, cv_f64_i64, cv_f64_b, cv_f64_h, cv_f64_bh },
    { cv_i64_f32, cv_i64_f64, cv_i64_i64, cv_i64_b, cv_i64_h, cv_i64_bh },
    { cv_b_f32, cv_b_f64, cv_b_i64, cv_b_b, cv_b_h, cv_b_bh },
    { cv_h_f32, cv_h_f64, cv_h_i64, cv_h_b, cv_h_h, cv_h_bh },
    { cv_bh_f32, cv_bh_f64, cv_bh_i64, cv_bh_b, cv_bh_h, cv_bh_bh },
};

static int cpu_copy(const dp_view *out, const dp_view *in)
{
    const dp_view *v[2] = { out, in };
    iter_t it;
    iter_init(&it, 2, v);
    if (it.ndim == 1 && it.strides[0][0] == 1 && it.strides[1][0] == 1 && out->dtype == in->dtype) {
        size_t bytes = (size_t)it.sizes[0] * dp_dtype_size(out->dtype);
        if (bytes < ((size_t)1 << 20)) { memmove(out->data, in->data, bytes); return 0; }
    }
    iter_run(&it, conv_fns[out->dtype][in->dtype], NULL);
    return 0;
}

static int cpu_fill(const dp_view *out, double value)
{
    cpu_scalar cell;
    dp_view sc = cpu_scalar_view(out, value, &cell);
    return cpu_copy(out, &sc);
}

/* ---------------------------------------------------------------- softmax */

/* Runs the body for each 1-D lane of v along dim (the other dims as the outer loop). */
#define FOR_LANES(V, DIM, ...) do {                                                      \
        int64_t outer_ = 1;                                                               \
        for (int d_ = 0; d_ < (V)->ndim; d_++) if (d_ != (DIM)) outer_ *= (V)->sizes[d_]; \
        for (int64_t o_ = 0; o_ < outer_; o_++) {                                         \
            int64_t rem_ = o_, lane_off = 0, lane_off2 = 0, lane_off3 = 0;                \
            for (int d_ = (V)->ndim - 1; d_ >= 0; d_--) {                                 \
                if (d_ == (DIM)) continue;                                                \
                int64_t i_ = rem_ % (V)->sizes[d_]; rem_ /= (V)->sizes[d_];               \
                lane_off += i_ * s1[d_]; lane_off2 += i_ * s2[d_]; lane_off3 += i_ * s3[d_]; \
            }                                                                             \
            __VA_ARGS__                                                                   \
        }                                                                                 \
    } while (0)

static int cpu_softmax(bool is_log, const dp_view *out, const dp_view *in, int dim)
{
    const int64_t *s1 = in->strides, *s2 = out->strides, *s3 = out->strides;
    int64_t len = in->sizes[dim], si = in->strides[dim], so = out->strides[dim];
    int dt = in->dtype, es = (int)dp_dtype_size(dt);
    FOR_LANES(in, dim, {
        (void)lane_off3;
        const char *x = (const char *)in->data + lane_off * es;
        char *y = (char *)out->data + lane_off2 * es;
        double m = -INFINITY, sum = 0;
        for (int64_t r = 0; r < len; r++) { double v = load_d(x + r * si * es, dt); if (v > m || v != v) m = v; }
        for (int64_t r = 0; r < len; r++) sum += exp(load_d(x + r * si * es, dt) - m);
        double lse = m + log(sum);
        for (int64_t r = 0; r < len; r++) {
            double v = load_d(x + r * si * es, dt);
            store_d(y + r * so * es, dt, is_log ? v - lse : exp(v - m) / sum);
        }
    });
    return 0;
}

static int cpu_softmax_backward(bool is_log, const dp_view *gin, const dp_view *gout, const dp_view *y, int dim)
{
    const int64_t *s1 = gout->strides, *s2 = gin->strides, *s3 = y->strides;
    int64_t len = gout->sizes[dim], sg = gout->strides[dim], sgi = gin->strides[dim], sy = y->strides[dim];
    int dt = gout->dtype, es = (int)dp_dtype_size(dt);
    FOR_LANES(gout, dim, {
        const char *g = (const char *)gout->data + lane_off * es;
        char *gi = (char *)gin->data + lane_off2 * es;
        const char *yy = (const char *)y->data + lane_off3 * es;
        double acc = 0;
        for (int64_t r = 0; r < len; r++) {
            double gv = load_d(g + r * sg * es, dt);
            acc += is_log ? gv : gv * load_d(yy + r * sy * es, dt);
        }
        for (int64_t r = 0; r < len; r++) {
            double gv = load_d(g + r * sg * es, dt), yv = load_d(yy + r * sy * es, dt);
            store_d(gi + r * sgi * es, dt, is_log ? gv - exp(yv) * acc : yv * (gv - acc));
        }
    });
    return 0;
}

/* ---------------------------------------------------------------- GEMM */

static int cpu_gemm(int dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                    double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    for (int64_t i = 0; i < batch; i++) {
        if (dtype == DP_FLOAT32) {
            cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, (float)alpha, (const float *)a + i * stride_a,
                        (int)lda, (const float *)b + i * stride_b, (int)ldb, (float)beta, (float *)c + i * stride_c, (int)ldc);
        } else if (dtype == DP_FLOAT64) {
            cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, alpha, (const double *)a + i * stride_a,
                        (int)lda, (const double *)b + i * stride_b, (int)ldb, beta, (double *)c + i * stride_c, (int)ldc);
        } else if (dtype == DP_INT64) {
            const int64_t *A = (const int64_t *)a + i * stride_a, *B = (const int64_t *)b + i * stride_b;
            int64_t *C = (int64_t *)c + i * stride_c;
            for (int64_t r = 0; r < m; r++)
                for (int64_t q = 0; q < n; q++) {
                    int64_t acc = 0;
                    for (int64_t p = 0; p < k; p++)
                        acc += (ta ? A[p * lda + r] : A[r * lda + p]) * (tb ? B[q * ldb + p] : B[p * ldb + q]);
                    C[r * ldc + q] = (int64_t)alpha * acc + (beta != 0 ? (int64_t)beta * C[r * ldc + q] : 0);
                }
        } else return dp_error("matrix products are not supported for dtype %s", dp_dtype_name(dtype));
    }
    return 0;
}

/* ---------------------------------------------------------------- indexing */

static dp_view lane(const dp_view *v, int dim, int64_t i)
{
    dp_view s = *v;
    s.data = (char *)v->data + i * v->strides[dim] * (int64_t)dp_dtype_size(v->dtype);
    s.sizes[dim] = 1;
    return s;
}

static int cpu_index_select(const dp_view *out, const dp_view *in, int dim, const dp_view *idx)
{
    const int64_t *ix = idx->data;
    for (int64_t i = 0; i < out->sizes[dim]; i++) {
        dp_view o = lane(out, dim, i), s = lane(in, dim, ix[i * idx->strides[0]]);
        cpu_copy(&o, &s);
    }
    return 0;
}

static int cpu_index_add(const dp_view *gin, int dim, const dp_view *idx, const dp_view *src)
{
    const int64_t *ix = idx->data;
    for (int64_t i = 0; i < src->sizes[dim]; i++) {
        dp_view g = lane(gin, dim, ix[i * idx->strides[0]]), s = lane(src, dim, i);
        cpu_binary(DP_ADD, &g, &g, &s);
    }
    return 0;
}

/* ---------------------------------------------------------------- random */

typedef struct { int dist; const dp_view *out; int64_t n; uint64_t seed, offset; double a, b; } random_job;

/* Philox calls lo..hi-1: call k gives elements k * per ... (philox.h, as the CUDA kernel) */
static void random_range(void *c, int64_t lo, int64_t hi, int part)
{
    const random_job *j = c;
    int dt = j->out->dtype, es = (int)dp_dtype_size(dt);
    bool f64 = dt == DP_FLOAT64;
    for (int64_t k = lo; k < hi; k++) {   /* out is contiguous (ops.c makes it so) */
        double v[4];
        int per = dp_rng_values(j->dist, f64, j->seed, j->offset + (uint64_t)k, j->a, j->b, v);
        for (int e = 0; e < per && k * per + e < j->n; e++) store_d((char *)j->out->data + (k * per + e) * es, dt, v[e]);
    }
}

static int cpu_random(int dist, const dp_view *out, uint64_t seed, uint64_t offset, double a, double b)
{
    int64_t n = 1;
    for (int d = 0; d < out->ndim; d++) n *= out->sizes[d];
    random_job j = { dist, out, n, seed, offset, a, b };
    dp_parallel((int64_t)dp_rng_calls(dist, out->dtype == DP_FLOAT64, (uint64_t)n), GRAIN / 64, random_range, &j);
    return 0;
}

/* ---------------------------------------------------------------- losses */

static int cpu_nll_loss(const dp_view *out, const dp_view *input, const dp_view *target, bool per_item)
{
    int64_t N = input->sizes[0];
    int dt = input->dtype, es = (int)dp_dtype_size(dt);
    const int64_t *t = target->data;
    double acc = 0;
    for (int64_t i = 0; i < N; i++) {
        double v = -load_d((const char *)input->data + (i * input->strides[0] + t[i * target->strides[0]] * input->strides[1]) * es, dt);
        if (per_item) store_d((char *)out->data + i * out->strides[0] * es, dt, v);
        else acc += v;
    }
    if (!per_item) store_d(out->data, dt, acc);
    return 0;
}

static int cpu_nll_loss_backward(const dp_view *gin, const dp_view *gout, const dp_view *target, bool per_item, double scale)
{
    int64_t N = gin->sizes[0];
    int dt = gin->dtype, es = (int)dp_dtype_size(dt);
    const int64_t *t = target->data;
    for (int64_t i = 0; i < N; i++) {
        double g = load_d((const char *)gout->data + (per_item ? i * gout->strides[0] * es : 0), dt);
        store_d((char *)gin->data + (i * gin->strides[0] + t[i * target->strides[0]] * gin->strides[1]) * es, dt, -g * scale);
    }
    return 0;
}

/* ---------------------------------------------------------------- optimizers (PyTorch 1.13 rules) */

typedef struct { void *param, *m, *v; const void *grad; const void *opts; } optim_job;

#define SGD_RANGE(NAME, T)                                                                       \
    static void NAME(void *c, int64_t lo, int64_t hi, int part)                                  \
    {                                                                                            \
        const optim_job *j = c;                                                                  \
        const dp_sgd_opts *o = j->opts;                                                          \
        T *p = j->param; const T *g = j->grad; T *m = j->m;                                      \
        T lr = (T)o->lr, wd = (T)o->weight_decay, mom = (T)o->momentum, damp = (T)(1 - o->dampening); \
        for (int64_t i = lo; i < hi; i++) {                                                      \
            T d = g[i];                                                                          \
            if (wd != 0) d = d + wd * p[i];                                                      \
            if (m) {                                                                             \
                m[i] = o->first_step ? d : mom * m[i] + damp * d;                                \
                d = o->nesterov ? d + mom * m[i] : m[i];                                         \
            }                                                                                    \
            p[i] = p[i] - lr * d;                                                                \
        }                                                                                        \
    }
HOT SGD_RANGE(sgd_f32, float)
HOT SGD_RANGE(sgd_f64, double)

static int cpu_sgd_step(int dtype, int64_t n, void *param, const void *grad, void *buf, const dp_sgd_opts *o)
{
    optim_job j = { param, buf, NULL, grad, o };
    dp_parallel(n, GRAIN, dtype == DP_FLOAT32 ? sgd_f32 : sgd_f64, &j);
    return 0;
}

/* PyTorch 1.13's Adam/AdamW, operation by operation in the parameter's precision */
#define ADAM_RANGE(NAME, T, SQRT)                                                                \
    static void NAME(void *c, int64_t lo, int64_t hi, int part)                                  \
    {                                                                                            \
        const optim_job *j = c;                                                                  \
        const dp_adam_opts *o = j->opts;                                                         \
        T *p = j->param; const T *g = j->grad; T *m = j->m; T *v = j->v;                         \
        T b1 = (T)o->beta1, b2 = (T)o->beta2, wd = (T)o->weight_decay, eps = (T)o->eps;          \
        double bc1 = 1 - pow(o->beta1, (double)o->step), bc2 = 1 - pow(o->beta2, (double)o->step); \
        T step_size = (T)(o->lr / bc1), bc2_sqrt = (T)sqrt(bc2), decay = (T)(1 - o->lr * o->weight_decay); \
        for (int64_t i = lo; i < hi; i++) {                                                      \
            T gi = g[i];                                                                         \
            if (o->decoupled) p[i] = p[i] * decay;                                               \
            else if (wd != 0) gi = gi + wd * p[i];                                               \
            m[i] = m[i] * b1 + gi * (T)(1 - b1);                                                 \
            v[i] = v[i] * b2 + gi * gi * (T)(1 - b2);                                            \
            T denom = SQRT(v[i]) / bc2_sqrt + eps;                                               \
            p[i] = p[i] - step_size * (m[i] / denom);                                            \
        }                                                                                        \
    }
HOT ADAM_RANGE(adam_f32, float, sqrtf)
HOT ADAM_RANGE(adam_f64, double, sqrt)

static int cpu_adam_step(int dtype, int64_t n, void *param, const void *grad, void *m, void *v, const dp_adam_opts *o)
{
    optim_job j = { param, m, v, grad, o };
    dp_parallel(n, GRAIN, dtype == DP_FLOAT32 ? adam_f32 : adam_f64, &j);
    return 0;
}

/* PyTorch 1.13's Adadelta, in its order: v = v*rho + (1-rho)*g*g; delta = sqrt(u+eps) /
 * sqrt(v+eps) * g; u = u*rho + (1-rho)*delta*delta; p = p - lr*delta (m holds v, v holds u) */
#define ADADELTA_RANGE(NAME, T, SQRT)                                                            \
    static void NAME(void *c, int64_t lo, int64_t hi, int part)                                  \
    {                                                                                            \
        const optim_job *j = c;                                                                  \
        const dp_adadelta_opts *o = j->opts;                                                     \
        T *p = j->param; const T *g = j->grad; T *sq = j->m; T *acc = j->v;                      \
        T rho = (T)o->rho, one_rho = (T)(1 - o->rho), eps = (T)o->eps, wd = (T)o->weight_decay;  \
        T neg_lr = (T)-o->lr;                                                                    \
        for (int64_t i = lo; i < hi; i++) {                                                      \
            T gi = o->maximize ? -g[i] : g[i];                                                   \
            if (wd != 0) gi = gi + wd * p[i];                                                    \
            T si = sq[i] * rho + one_rho * gi * gi;                                              \
            sq[i] = si;                                                                          \
            T delta = SQRT(acc[i] + eps) / SQRT(si + eps) * gi;                                  \
            acc[i] = acc[i] * rho + one_rho * delta * delta;                                     \
            p[i] = p[i] + neg_lr * delta;                                                        \
        }                                                                                        \
    }
HOT ADADELTA_RANGE(adadelta_f32, float, sqrtf)
HOT ADADELTA_RANGE(adadelta_f64, double, sqrt)

static int cpu_adadelta_step(int dtype, int64_t n, void *param, const void *grad, void *sq, void *acc,
                             const dp_adadelta_opts *o)
{
    optim_job j = { param, sq, acc, grad, o };
    dp_parallel(n, GRAIN, dtype == DP_FLOAT32 ? adadelta_f32 : adadelta_f64, &j);
    return 0;
}

const dp_backend dp_cpu_backend = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_h2d = cpu_copy_bytes,
    .copy_d2h = cpu_copy_d2h,
    .copy_d2d = cpu_copy_d2d,
    .synchronize = cpu_sync,
    .fill = cpu_fill,
    .copy = cpu_copy,
    .unary = cpu_unary,
    .binary = cpu_binary,
    .binary_scalar = cpu_binary_scalar,
    .where = cpu_where,
    .reduce = cpu_reduce,
    .softmax = cpu_softmax,
    .softmax_backward = cpu_softmax_backward,
    .gemm = cpu_gemm,
    .index_select = cpu_index_select,
    .index_add = cpu_index_add,
    .random = cpu_random,
    .nll_loss = cpu_nll_loss,
    .nll_loss_backward = cpu_nll_loss_backward,
    .sgd_step = cpu_sgd_step,
    .adam_step = cpu_adam_step,
    .empty_cache = cpu_empty_cache,
    /* vision */
    .pool2d = dp_cpu_pool2d,
    .pool2d_backward = dp_cpu_pool2d_backward,
    .sort_rows = dp_cpu_sort_rows,
    .scan_rows = dp_cpu_scan_rows,
    .scatter_add_rows = dp_cpu_scatter_add_rows,
    /* convolution (cpu_conv.c) */
    .conv_forward = dp_cpu_conv_forward,
    .conv_backward_input = dp_cpu_conv_backward_input,
    .conv_backward_weight = dp_cpu_conv_backward_weight,
    /* layers: normalization */
    .layer_norm = cpu_layer_norm,
    .layer_norm_backward = cpu_layer_norm_backward,
    .adadelta_step = cpu_adadelta_step,
    .gather_offsets = dp_cpu_gather_offsets,
    .scatter_offsets = dp_cpu_scatter_offsets,
    /* attention (cpu_attention.c) */
    .sdpa_forward = cpu_sdpa_forward,
    .sdpa_backward = cpu_sdpa_backward,
    .check_indices = NULL,   /* the engine checks CPU indices as it reads them */
    .index_offsets = NULL,   /* index.c computes CPU offsets on the host */
    /* recurrent cells (cpu_rnn_cell.c) */
    .lstm_cell = cpu_lstm_cell,
    .lstm_cell_backward = cpu_lstm_cell_backward,
    .gru_cell = cpu_gru_cell,
    .gru_cell_backward = cpu_gru_cell_backward,
};
