/* cpu_conv.c: the CPU backend's convolution kernels (backend.h's conv_forward,
 * conv_backward_input, conv_backward_weight) as im2col / col2im and matrix products.
 *
 * Two arrangements, chosen by the size of one image's product:
 * - small (at most 262144 multiply-adds, which OpenBLAS runs on the calling thread): the
 *   images are split across the worker pool, each with its columns in cache and its output
 *   written in place; a product with a short inner dimension (the first layer of an image
 *   network: 1 channel x 9 taps) is our own loop, not OpenBLAS.
 * - large: the batch is cut into chunks of about 4 MB of buffers; in a chunk the columns of
 *   its images sit side by side ([C_in/groups * taps, images * positions]) so that each
 *   group takes one GEMM per chunk on OpenBLAS's threads, and the output side is copied
 *   between [N, C, positions] and [C, images * positions] around it (with the bias).
 *   Larger chunks were slower (the columns leave the caches between im2col, the GEMM and
 *   col2im), and one GEMM per image on OpenBLAS's threads was up to 2x slower on the MNIST
 *   network's second layer (64 x 576 x 288 per image).
 * The im2col, col2im and copies are split across the worker pool by image. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

#define CHUNK_ELEMS ((int64_t)1 << 20)   /* buffer elements per chunk of the batch (4 MB of float32) */
#define SHORT_K 32                       /* C_in/groups * taps up to which the products are our own */

typedef struct {
    int64_t cig, cog;          /* channels per group: image side, output side */
    int64_t pin, pout, k;      /* elements per channel of the image and the output; kernel taps */
} conv_dims;

static conv_dims dims_of(const dp_conv_geom *g)
{
    conv_dims d = { g->in_channels / g->groups, g->out_channels / g->groups, 1, 1, 1 };
    for (int s = 0; s < 3; s++) {
        d.pin *= g->in[s];
        d.pout *= g->out[s];
        d.k *= g->kernel[s];
    }
    return d;
}

/* The outputs o in [0, n) whose input position o * s + off lies in [0, size): [*lo, *hi). */
static void valid_range(int64_t n, int64_t s, int64_t off, int64_t size, int64_t *lo, int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;                /* first o with o*s + off >= 0 */
    int64_t b = size - off <= 0 ? 0 : (size - off + s - 1) / s;   /* first o with o*s + off >= size */
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
    if (*hi < *lo) *hi = *lo;
}

/* im2col of one image: col[(c, kd, kh, kw) * ld + (od, oh, ow)] = x[c, od*s - p + kd*d, ...],
 * or 0 in the padding.  col2im: the adjoint, x[...] += col[...] (x zeroed by the caller). */
#define CONV_COL(T, SUF)                                                                                 \
    static void im2col_##SUF(const dp_conv_geom *g, int64_t nc, const T *x, T *col, int64_t ld)          \
    {                                                                                                    \
        for (int64_t c = 0; c < nc; c++)                                                                 \
            for (int64_t kd = 0; kd < g->kernel[0]; kd++)                                                \
                for (int64_t kh = 0; kh < g->kernel[1]; kh++)                                            \
                    for (int64_t kw = 0; kw < g->kernel[2]; kw++) {                                      \
                        T *row = col + (((c * g->kernel[0] + kd) * g->kernel[1] + kh) * g->kernel[2] + kw) * ld; \
                        int64_t offw = kw * g->dilation[2] - g->pad[2], lo, hi;                           \
                        valid_range(g->out[2], g->stride[2], offw, g->in[2], &lo, &hi);                  \
                        for (int64_t od = 0; od < g->out[0]; od++) {                                     \
                            int64_t id = od * g->stride[0] - g->pad[0] + kd * g->dilation[0];            \
                            for (int64_t oh = 0; oh < g->out[1]; oh++) {                                 \
                                int64_t ih = oh * g->stride[1] - g->pad[1] + kh * g->dilation[1];        \
                                T *r = row + (od * g->out[1] + oh) * g->out[2];                          \
                                if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {              \
                                    memset(r, 0, sizeof(T) * (size_t)g->out[2]);                         \
                                    continue;                                                            \
                                }                                                                        \
                                const T *xr = x + ((c * g->in[0] + id) * g->in[1] + ih) * g->in[2] + offw; \
                                for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                           \
                                if (g->stride[2] == 1) memcpy(r + lo, xr + lo, sizeof(T) * (size_t)(hi - lo)); \
                                else for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->stride[2]]; \
                                for (int64_t ow = hi; ow < g->out[2]; ow++) r[ow] = 0;                   \
                            }                                                                            \
                        }                                                                                \
                    }                                                                                    \
    }                                                                                                    \
    static void col2im_##SUF(const dp_conv_geom *g, int64_t nc, const T *col, int64_t ld, T *x)          \
    {                                                                                                    \
        for (int64_t c = 0; c < nc; c++)                                                                 \
            for (int64_t kd = 0; kd < g->kernel[0]; kd++)                                                \
                for (int64_t kh = 0; kh < g->kernel[1]; kh++)                                            \
                    for (int64_t kw = 0; kw < g->kernel[2]; kw++) {                                      \
                        const T *row = col + (((c * g->kernel[0] + kd) * g->kernel[1] + kh) * g->kernel[2] + kw) * ld; \
                        int64_t offw = kw * g->dilation[2] - g->pad[2], lo, hi;                           \
                        valid_range(g->out[2], g->stride[2], offw, g->in[2], &lo, &hi);                  \
                        for (int64_t od = 0; od < g->out[0]; od++) {                                     \
                            int64_t id = od * g->stride[0] - g->pad[0] + kd * g->dilation[0];            \
                            if (id < 0 || id >= g->in[0]) continue;                                      \
                            for (int64_t oh = 0; oh < g->out[1]; oh++) {                                 \
                                int64_t ih = oh * g->stride[1] - g->pad[1] + kh * g->dilation[1];        \
                                if (ih < 0 || ih >= g->in[1]) continue;                                  \
                                const T *r = row + (od * g->out[1] + oh) * g->out[2];                    \
                                T *xr = x + ((c * g->in[0] + id) * g->in[1] + ih) * g->in[2] + offw;     \
                                for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->stride[2]] += r[ow];     \
                            }                                                                            \
                        }                                                                                \
                    }                                                                                    \
    }
CONV_COL(float, f32)
CONV_COL(double, f64)

/* Products with a short inner dimension, where OpenBLAS's packing costs more than the
 * arithmetic.
 * nn: C[m, n] = (acc ? C : 0) + A[m, k] B[k, n], rows of B scaled and added (vectorised over n);
 * nt: C[m, n] += A[m, p] B[n, p]^T, dot products over the long p with eight partial sums
 * (so that the loop vectorises in IEEE order). */
#define SHORT_PRODUCTS(T, SUF)                                                                            \
    HOT static void short_nn_##SUF(int64_t m, int64_t n, int64_t k, const T *a, const T *b, int64_t ldb,  \
                                   bool acc, T *c, int64_t ldc)                                           \
    {                                                                                                     \
        for (int64_t i = 0; i < m; i++) {                                                                 \
            T *cr = c + i * ldc;                                                                          \
            if (!acc) memset(cr, 0, sizeof(T) * (size_t)n);                                               \
            for (int64_t l = 0; l < k; l++) {                                                             \
                T av = a[i * k + l];                                                                      \
                const T *br = b + l * ldb;                                                                \
                for (int64_t j = 0; j < n; j++) cr[j] += av * br[j];                                      \
            }                                                                                             \
        }                                                                                                 \
    }                                                                                                     \
    HOT static void short_nt_##SUF(int64_t m, int64_t n, int64_t p, const T *a, int64_t lda, const T *b,  \
                                   int64_t ldb, T *c, int64_t ldc)                                        \
    {                                                                                                     \
        for (int64_t i = 0; i < m; i++)                                                                   \
            for (int64_t j = 0; j < n; j++) {                                                             \
                const T *ar = a + i * lda, *br = b + j * ldb;                                             \
                T s[8] = { 0 }, t = 0;                                                                    \
                int64_t q = 0;                                                                            \
                for (; q + 8 <= p; q += 8)                                                                \
                    for (int u = 0; u < 8; u++) s[u] += ar[q + u] * br[q + u];                            \
                for (; q < p; q++) t += ar[q] * br[q];                                                    \
                c[i * ldc + j] += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;  \
            }                                                                                             \
    }
SHORT_PRODUCTS(float, f32)
SHORT_PRODUCTS(double, f64)

static void gemm(int dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                 const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (dtype == DP_FLOAT32)
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* ---------------------------------------------------------------- per-image work on the pool */

typedef enum { JOB_IM2COL, JOB_COL2IM, JOB_GATHER, JOB_SCATTER } job_kind;

/* One step over the images [n0, n0 + m) of a chunk for group gi.  The chunk's buffers are
 * [rows, m * P] with image b's block at column b * P: col has C_in/groups * taps rows,
 * rows (the output side) C_out/groups. */
typedef struct {
    job_kind kind;
    int dtype;
    const dp_conv_geom *g;
    conv_dims d;
    int64_t n0, m, gi;
    void *image;               /* the image side tensor [N, C_in, *in] */
    void *output;              /* the output side tensor [N, C_out, *out] */
    const void *bias;          /* JOB_SCATTER: added to the output, or NULL */
    void *col, *rows;
    bool kept;                 /* col is the kept buffer (buffer_get) */
} conv_job;

static void run_job(void *ctx, int64_t lo, int64_t hi, int part)
{
    const conv_job *j = ctx;
    const dp_conv_geom *g = j->g;
    size_t es = dp_dtype_size(j->dtype);
    int64_t P = j->d.pout, ld = j->m * P;
    for (int64_t b = lo; b < hi; b++) {
        int64_t n = j->n0 + b;
        char *x = (char *)j->image + (size_t)((n * g->in_channels + j->gi * j->d.cig) * j->d.pin) * es;
        char *y = (char *)j->output + (size_t)((n * g->out_channels + j->gi * j->d.cog) * P) * es;
        char *col = (char *)j->col + (size_t)(b * P) * es, *rows = (char *)j->rows + (size_t)(b * P) * es;
        switch (j->kind) {
        case JOB_IM2COL:
            if (j->dtype == DP_FLOAT32) im2col_f32(g, j->d.cig, (const float *)x, (float *)col, ld);
            else im2col_f64(g, j->d.cig, (const double *)x, (double *)col, ld);
            break;
        case JOB_COL2IM:
            memset(x, 0, (size_t)(j->d.cig * j->d.pin) * es);
            if (j->dtype == DP_FLOAT32) col2im_f32(g, j->d.cig, (const float *)col, ld, (float *)x);
            else col2im_f64(g, j->d.cig, (const double *)col, ld, (double *)x);
            break;
        case JOB_GATHER:           /* rows[c][b * P + p] = y[c][p] */
            for (int64_t c = 0; c < j->d.cog; c++) memcpy(rows + (size_t)(c * ld) * es, y + (size_t)(c * P) * es, (size_t)P * es);
            break;
        case JOB_SCATTER:          /* y[c][p] = rows[c][b * P + p] (+ bias[c]) */
            for (int64_t c = 0; c < j->d.cog; c++) {
                const char *src = rows + (size_t)(c * ld) * es;
                char *dst = y + (size_t)(c * P) * es;
                int64_t bc = j->gi * j->d.cog + c;
                if (!j->bias) memcpy(dst, src, (size_t)P * es);
                else if (j->dtype == DP_FLOAT32)
                    for (int64_t p = 0; p < P; p++) ((float *)dst)[p] = ((const float *)src)[p] + ((const float *)j->bias)[bc];
                else
                    for (int64_t p = 0; p < P; p++) ((double *)dst)[p] = ((const double *)src)[p] + ((const double *)j->bias)[bc];
            }
            break;
        }
    }
    (void)part;
}

static void run(conv_job *j, job_kind kind)
{
    j->kind = kind;
    int64_t per_image = (kind == JOB_IM2COL || kind == JOB_COL2IM ? j->d.cig * j->d.k : j->d.cog) * j->d.pout;
    int64_t grain = per_image > 0 ? GRAIN / per_image : 1;
    dp_parallel(j->m, grain > 0 ? grain : 1, run_job, j);
}

/* The buffers are kept from one call to the next: a fresh 10-30 MB block is mapped anew by
 * malloc every time, and faulting its pages in cost as much as the first layer's GEMM.  A
 * call that finds the kept block in use (another thread) allocates its own. */
static pthread_mutex_t g_keep_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_keep;
static size_t g_keep_size;

static void *buffer_get(size_t n, bool *kept)
{
    *kept = pthread_mutex_trylock(&g_keep_lock) == 0;
    if (!*kept) return malloc(n);
    if (g_keep_size < n) {
        free(g_keep);
        g_keep = malloc(n);
        g_keep_size = g_keep ? n : 0;
    }
    if (!g_keep) { pthread_mutex_unlock(&g_keep_lock); *kept = false; }
    return g_keep;
}

static void buffer_put(void *p, bool kept)
{
    if (kept) pthread_mutex_unlock(&g_keep_lock);
    else free(p);
}

void dp_cpu_conv_release_buffers(void)
{
    pthread_mutex_lock(&g_keep_lock);
    free(g_keep);
    g_keep = NULL;
    g_keep_size = 0;
    pthread_mutex_unlock(&g_keep_lock);
}

/* The chunk size and its buffers (col, then rows), or -1 with the message set. */
static int chunk_setup(conv_job *j, int dtype, const dp_conv_geom *g, int64_t *nb)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64)
        return dp_error("conv: the CPU kernels take float32 or float64, not %s", dp_dtype_name(dtype));
    memset(j, 0, sizeof *j);
    j->dtype = dtype;
    j->g = g;
    j->d = dims_of(g);
    int64_t ck = j->d.cig * j->d.k, per_image = (ck + j->d.cog) * j->d.pout;
    *nb = per_image > 0 ? CHUNK_ELEMS / per_image : g->batch;
    if (*nb < 1) *nb = 1;
    if (*nb > g->batch) *nb = g->batch;
    int64_t big = 2147483647;
    if (ck > big || j->d.cog > big || *nb * j->d.pout > big)
        return dp_error("conv: a convolution with %lld x %lld columns per image is too large for a GEMM", (long long)ck,
                        (long long)j->d.pout);
    size_t n = (size_t)(*nb * per_image) * dp_dtype_size(dtype);
    j->col = buffer_get(n ? n : 1, &j->kept);
    if (!j->col) return dp_error("conv: out of memory for %zu bytes of column buffers", n);
    j->rows = (char *)j->col + (size_t)(*nb * ck * j->d.pout) * dp_dtype_size(dtype);
    return 0;
}

/* ---------------------------------------------------------------- small products: per image on the pool
 * OpenBLAS runs a GEMM of at most 262144 multiply-adds on the calling thread (its
 * SMP_THRESHOLD_MIN times GEMM_MULTITHREAD_THRESHOLD), so one image's small products run
 * side by side on the pool's workers without contending for OpenBLAS's threads, each with
 * its columns in cache and its output written in place.  The MNIST network's first layer
 * (32 x 676 x 9 per image) is one. */
#define SMALL_GEMM 262144.0

typedef enum { IMG_FORWARD, IMG_INPUT_GRAD, IMG_WEIGHT_GRAD } image_kind;

typedef struct {
    image_kind kind;
    int dtype;
    const dp_conv_geom *g;
    conv_dims d;
    void *image, *output, *weight;   /* [N, C_in, *in], [N, C_out, *out], [C_out, C_in/groups, *kernel] */
    const void *bias;
    char *scratch;                   /* per part: columns, then (weight gradient) a partial sum */
    size_t part_bytes;
} image_job;

/* y[c, p] = bias[c0 + c] for c < nc, p < P */
static void fill_bias(int dtype, void *y, const void *bias, int64_t c0, int64_t nc, int64_t P)
{
    for (int64_t c = 0; c < nc; c++)
        if (dtype == DP_FLOAT32) {
            float v = ((const float *)bias)[c0 + c], *r = (float *)y + c * P;
            for (int64_t p = 0; p < P; p++) r[p] = v;
        } else {
            double v = ((const double *)bias)[c0 + c], *r = (double *)y + c * P;
            for (int64_t p = 0; p < P; p++) r[p] = v;
        }
}

static void image_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    const image_job *j = ctx;
    const dp_conv_geom *g = j->g;
    size_t es = dp_dtype_size(j->dtype);
    int64_t P = j->d.pout, ck = j->d.cig * j->d.k;
    char *col = j->scratch + (size_t)part * j->part_bytes, *partial = col + (size_t)(ck * P) * es;
    for (int64_t n = lo; n < hi; n++)
        for (int64_t gi = 0; gi < g->groups; gi++) {
            char *x = (char *)j->image + (size_t)((n * g->in_channels + gi * j->d.cig) * j->d.pin) * es;
            char *y = (char *)j->output + (size_t)((n * g->out_channels + gi * j->d.cog) * P) * es;
            char *w = (char *)j->weight + (size_t)(gi * j->d.cog * ck) * es;
            switch (j->kind) {
            case IMG_FORWARD:
                if (j->bias) fill_bias(j->dtype, y, j->bias, gi * j->d.cog, j->d.cog, P);
                if (j->dtype == DP_FLOAT32) im2col_f32(g, j->d.cig, (const float *)x, (float *)col, P);
                else im2col_f64(g, j->d.cig, (const double *)x, (double *)col, P);
                if (ck > SHORT_K) gemm(j->dtype, false, false, j->d.cog, P, ck, w, ck, col, P, j->bias ? 1.0 : 0.0, y, P);
                else if (j->dtype == DP_FLOAT32) short_nn_f32(j->d.cog, P, ck, (const float *)w, (const float *)col, P, j->bias, (float *)y, P);
                else short_nn_f64(j->d.cog, P, ck, (const double *)w, (const double *)col, P, j->bias, (double *)y, P);
                break;
            case IMG_INPUT_GRAD:
                gemm(j->dtype, true, false, ck, P, j->d.cog, w, ck, y, P, 0.0, col, P);
                memset(x, 0, (size_t)(j->d.cig * j->d.pin) * es);
                if (j->dtype == DP_FLOAT32) col2im_f32(g, j->d.cig, (const float *)col, P, (float *)x);
                else col2im_f64(g, j->d.cig, (const double *)col, P, (double *)x);
                break;
            case IMG_WEIGHT_GRAD:
                if (j->dtype == DP_FLOAT32) im2col_f32(g, j->d.cig, (const float *)x, (float *)col, P);
                else im2col_f64(g, j->d.cig, (const double *)x, (double *)col, P);
                if (ck > SHORT_K) gemm(j->dtype, false, true, j->d.cog, ck, P, y, P, col, P, 1.0, partial + (size_t)(gi * j->d.cog * ck) * es, ck);
                else if (j->dtype == DP_FLOAT32)
                    short_nt_f32(j->d.cog, ck, P, (const float *)y, P, (const float *)col, P, (float *)partial + gi * j->d.cog * ck, ck);
                else short_nt_f64(j->d.cog, ck, P, (const double *)y, P, (const double *)col, P, (double *)partial + gi * j->d.cog * ck, ck);
                break;
            }
        }
}

/* DPLUA_CONV_SMALL_GEMM overrides the limit (0: every convolution takes the chunked path),
 * so that the specs check both paths on the same small cases. */
static double g_small_limit;
static pthread_once_t g_small_once = PTHREAD_ONCE_INIT;

static void read_small_limit(void)
{
    const char *env = getenv("DPLUA_CONV_SMALL_GEMM");
    g_small_limit = env && *env ? atof(env) : SMALL_GEMM;
}

static bool small_products(const dp_conv_geom *g)
{
    pthread_once(&g_small_once, read_small_limit);
    conv_dims d = dims_of(g);
    return (double)d.cog * (double)d.pout * (double)(d.cig * d.k) <= g_small_limit;
}

/* The three kernels for small products; -1 with the message set on failure. */
static int per_image(image_kind kind, int dtype, const dp_conv_geom *g, void *image, void *output, void *weight,
                     const void *bias)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64)
        return dp_error("conv: the CPU kernels take float32 or float64, not %s", dp_dtype_name(dtype));
    size_t es = dp_dtype_size(dtype);
    image_job j = { kind, dtype, g, dims_of(g), image, output, weight, bias, NULL, 0 };
    int64_t ck = j.d.cig * j.d.k, wn = g->out_channels * ck;
    int parts = dp_pool_threads();
    j.part_bytes = (size_t)(ck * j.d.pout + (kind == IMG_WEIGHT_GRAD ? wn : 0)) * es;
    bool kept;
    j.scratch = buffer_get((size_t)parts * j.part_bytes, &kept);
    if (!j.scratch) return dp_error("conv: out of memory for %zu bytes of column buffers", (size_t)parts * j.part_bytes);
    if (kind == IMG_WEIGHT_GRAD)
        for (int p = 0; p < parts; p++) memset(j.scratch + (size_t)p * j.part_bytes + (size_t)(ck * j.d.pout) * es, 0, (size_t)wn * es);
    dp_parallel(g->batch, 1, image_range, &j);
    if (kind == IMG_WEIGHT_GRAD) {   /* the parts' partial sums */
        for (int64_t i = 0; i < wn; i++) {
            double acc = 0;
            for (int p = 0; p < parts; p++) {
                const char *src = j.scratch + (size_t)p * j.part_bytes + (size_t)(ck * j.d.pout + i) * es;
                acc += dtype == DP_FLOAT32 ? (double)*(const float *)src : *(const double *)src;
            }
            if (dtype == DP_FLOAT32) ((float *)weight)[i] = (float)acc;
            else ((double *)weight)[i] = acc;
        }
    }
    buffer_put(j.scratch, kept);
    return 0;
}

#define FOR_CHUNKS(j, nb)                                                                   \
    for ((j).n0 = 0; (j).n0 < (j).g->batch; (j).n0 += (nb))                                  \
        for ((j).m = (j).g->batch - (j).n0 < (nb) ? (j).g->batch - (j).n0 : (nb), (j).gi = 0; \
             (j).gi < (j).g->groups; (j).gi++)

int dp_cpu_conv_forward(int dtype, const dp_conv_geom *g, void *out, const void *in, const void *w, const void *b)
{
    if (small_products(g)) return per_image(IMG_FORWARD, dtype, g, (void *)in, out, (void *)w, b);
    conv_job j;
    int64_t nb;
    if (chunk_setup(&j, dtype, g, &nb)) return -1;
    size_t es = dp_dtype_size(dtype);
    int64_t ck = j.d.cig * j.d.k;
    j.image = (void *)in;
    j.output = out;
    j.bias = b;
    FOR_CHUNKS(j, nb) {
        run(&j, JOB_IM2COL);
        gemm(dtype, false, false, j.d.cog, j.m * j.d.pout, ck, (const char *)w + (size_t)(j.gi * j.d.cog * ck) * es, ck,
             j.col, j.m * j.d.pout, 0.0, j.rows, j.m * j.d.pout);
        run(&j, JOB_SCATTER);
    }
    buffer_put(j.col, j.kept);
    return 0;
}

int dp_cpu_conv_backward_input(int dtype, const dp_conv_geom *g, void *grad_in, const void *grad_out, const void *w)
{
    if (small_products(g)) return per_image(IMG_INPUT_GRAD, dtype, g, grad_in, (void *)grad_out, (void *)w, NULL);
    conv_job j;
    int64_t nb;
    if (chunk_setup(&j, dtype, g, &nb)) return -1;
    size_t es = dp_dtype_size(dtype);
    int64_t ck = j.d.cig * j.d.k;
    j.image = grad_in;
    j.output = (void *)grad_out;
    FOR_CHUNKS(j, nb) {
        run(&j, JOB_GATHER);
        gemm(dtype, true, false, ck, j.m * j.d.pout, j.d.cog, (const char *)w + (size_t)(j.gi * j.d.cog * ck) * es, ck,
             j.rows, j.m * j.d.pout, 0.0, j.col, j.m * j.d.pout);
        run(&j, JOB_COL2IM);
    }
    buffer_put(j.col, j.kept);
    return 0;
}

int dp_cpu_conv_backward_weight(int dtype, const dp_conv_geom *g, void *grad_w, const void *grad_out, const void *in)
{
    if (small_products(g)) return per_image(IMG_WEIGHT_GRAD, dtype, g, (void *)in, (void *)grad_out, grad_w, NULL);
    conv_job j;
    int64_t nb;
    if (chunk_setup(&j, dtype, g, &nb)) return -1;
    size_t es = dp_dtype_size(dtype);
    int64_t ck = j.d.cig * j.d.k;
    j.image = (void *)in;
    j.output = (void *)grad_out;
    FOR_CHUNKS(j, nb) {
        run(&j, JOB_IM2COL);
        run(&j, JOB_GATHER);
        gemm(dtype, false, true, j.d.cog, ck, j.m * j.d.pout, j.rows, j.m * j.d.pout, j.col, j.m * j.d.pout,
             j.n0 ? 1.0 : 0.0, (char *)grad_w + (size_t)(j.gi * j.d.cog * ck) * es, ck);
    }
    buffer_put(j.col, j.kept);
    return 0;
}
