/* cpu_conv.c: the CPU backend's convolution kernels (backend.h's conv_forward,
 * conv_backward_input, conv_backward_weight): im2col / col2im of one image and group, and
 * OpenBLAS's GEMM on the columns.  A 1x1 convolution without stride or padding uses the
 * image itself as its columns.
 *
 * The images of a batch run one after the other, each GEMM on OpenBLAS's threads.  That
 * was the fastest of the arrangements measured on the MNIST network's layers (see
 * bench/conv.lua): one GEMM over the whole batch's columns needs a transposing copy of
 * the output and a column buffer of the whole batch (42 MB for the second layer), and the
 * images split across the worker pool serialise on OpenBLAS's own lock. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

typedef struct {
    int64_t cig, cog;          /* channels per group: image side, output side */
    int64_t pin, pout, k;      /* elements per channel of the image and the output; kernel taps */
    bool direct;               /* 1x1, stride 1, no padding: the image is its own column matrix */
} conv_dims;

static conv_dims dims_of(const dp_conv_geom *g)
{
    conv_dims d = { g->in_channels / g->groups, g->out_channels / g->groups, 1, 1, 1, true };
    for (int s = 0; s < 3; s++) {
        d.pin *= g->in[s];
        d.pout *= g->out[s];
        d.k *= g->kernel[s];
        d.direct &= g->kernel[s] == 1 && g->stride[s] == 1 && g->pad[s] == 0 && g->in[s] == g->out[s];
    }
    return d;
}

/* The outputs o in [0, n) whose input position o * s + off lies in [0, size): [*lo, *hi). */
static void valid_range(int64_t n, int64_t s, int64_t off, int64_t size, int64_t *lo, int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;           /* first o with o*s + off >= 0 */
    int64_t b = size - off <= 0 ? 0 : (size - off + s - 1) / s;   /* first o with o*s + off >= size */
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
    if (*hi < *lo) *hi = *lo;
}

/* im2col: col[(c, kd, kh, kw), (od, oh, ow)] = x[c, od*s - p + kd*d, ...] or 0 outside;
 * col2im: the adjoint, x[...] += col[...] (x zeroed by the caller). */
#define CONV_COL(T, SUF)                                                                               \
    static void im2col_##SUF(const dp_conv_geom *g, int64_t nc, const T *x, T *col)                    \
    {                                                                                                  \
        int64_t P = g->out[0] * g->out[1] * g->out[2];                                                 \
        for (int64_t c = 0; c < nc; c++)                                                               \
            for (int64_t kd = 0; kd < g->kernel[0]; kd++)                                              \
                for (int64_t kh = 0; kh < g->kernel[1]; kh++)                                          \
                    for (int64_t kw = 0; kw < g->kernel[2]; kw++) {                                    \
                        T *row = col + (((c * g->kernel[0] + kd) * g->kernel[1] + kh) * g->kernel[2] + kw) * P; \
                        int64_t offw = kw * g->dilation[2] - g->pad[2], lo, hi;                         \
                        valid_range(g->out[2], g->stride[2], offw, g->in[2], &lo, &hi);                \
                        for (int64_t od = 0; od < g->out[0]; od++) {                                   \
                            int64_t id = od * g->stride[0] - g->pad[0] + kd * g->dilation[0];          \
                            for (int64_t oh = 0; oh < g->out[1]; oh++) {                               \
                                int64_t ih = oh * g->stride[1] - g->pad[1] + kh * g->dilation[1];      \
                                T *r = row + (od * g->out[1] + oh) * g->out[2];                        \
                                if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {            \
                                    memset(r, 0, sizeof(T) * (size_t)g->out[2]);                       \
                                    continue;                                                          \
                                }                                                                      \
                                const T *xr = x + ((c * g->in[0] + id) * g->in[1] + ih) * g->in[2] + offw; \
                                for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                         \
                                if (g->stride[2] == 1) memcpy(r + lo, xr + lo, sizeof(T) * (size_t)(hi - lo)); \
                                else for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->stride[2]]; \
                                for (int64_t ow = hi; ow < g->out[2]; ow++) r[ow] = 0;                 \
                            }                                                                          \
                        }                                                                              \
                    }                                                                                  \
    }                                                                                                  \
    static void col2im_##SUF(const dp_conv_geom *g, int64_t nc, const T *col, T *x)                    \
    {                                                                                                  \
        int64_t P = g->out[0] * g->out[1] * g->out[2];                                                 \
        for (int64_t c = 0; c < nc; c++)                                                               \
            for (int64_t kd = 0; kd < g->kernel[0]; kd++)                                              \
                for (int64_t kh = 0; kh < g->kernel[1]; kh++)                                          \
                    for (int64_t kw = 0; kw < g->kernel[2]; kw++) {                                    \
                        const T *row = col + (((c * g->kernel[0] + kd) * g->kernel[1] + kh) * g->kernel[2] + kw) * P; \
                        int64_t offw = kw * g->dilation[2] - g->pad[2], lo, hi;                         \
                        valid_range(g->out[2], g->stride[2], offw, g->in[2], &lo, &hi);                \
                        for (int64_t od = 0; od < g->out[0]; od++) {                                   \
                            int64_t id = od * g->stride[0] - g->pad[0] + kd * g->dilation[0];          \
                            if (id < 0 || id >= g->in[0]) continue;                                    \
                            for (int64_t oh = 0; oh < g->out[1]; oh++) {                               \
                                int64_t ih = oh * g->stride[1] - g->pad[1] + kh * g->dilation[1];      \
                                if (ih < 0 || ih >= g->in[1]) continue;                                \
                                const T *r = row + (od * g->out[1] + oh) * g->out[2];                  \
                                T *xr = x + ((c * g->in[0] + id) * g->in[1] + ih) * g->in[2] + offw;   \
                                for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->stride[2]] += r[ow];   \
                            }                                                                          \
                        }                                                                              \
                    }                                                                                  \
    }
CONV_COL(float, f32)
CONV_COL(double, f64)

static void gemm(int dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                 const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (dtype == DP_FLOAT32)
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

static void im2col(int dtype, const dp_conv_geom *g, int64_t nc, const void *x, void *col)
{
    if (dtype == DP_FLOAT32) im2col_f32(g, nc, x, col);
    else im2col_f64(g, nc, x, col);
}

static void col2im(int dtype, const dp_conv_geom *g, int64_t nc, const void *col, void *x)
{
    if (dtype == DP_FLOAT32) col2im_f32(g, nc, col, x);
    else col2im_f64(g, nc, col, x);
}

static int check(int dtype, const dp_conv_geom *g)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64) return dp_error("conv: the CPU kernels take float32 or float64, not %s", dp_dtype_name(dtype));
    conv_dims d = dims_of(g);
    int64_t big = 2147483647;
    if (d.cig * d.k > big || d.pout > big || d.cog > big || d.pin > big)
        return dp_error("conv: a convolution of %lld x %lld columns is too large for one GEMM", (long long)(d.cig * d.k), (long long)d.pout);
    return 0;
}

/* A column buffer for one image and group, or NULL (direct convolutions need none). */
static void *col_buffer(int dtype, const conv_dims *d, bool *failed)
{
    *failed = false;
    if (d->direct) return NULL;
    size_t n = (size_t)(d->cig * d->k * d->pout) * dp_dtype_size(dtype);
    void *col = malloc(n ? n : 1);
    if (!col) { *failed = true; dp_error("conv: out of memory for a %zu-byte column buffer", n); }
    return col;
}

#define AT(p, off) ((char *)(p) + (size_t)(off) * es)

int dp_cpu_conv_forward(int dtype, const dp_conv_geom *g, void *out, const void *in, const void *w, const void *b)
{
    if (check(dtype, g)) return -1;
    conv_dims d = dims_of(g);
    size_t es = dp_dtype_size(dtype);
    bool failed;
    void *col = col_buffer(dtype, &d, &failed);
    if (failed) return -1;
    for (int64_t n = 0; n < g->batch; n++) {
        if (b)      /* the bias in every row first, then the GEMM accumulates onto it */
            for (int64_t c = 0; c < g->out_channels; c++) {
                char *row = AT(out, (n * g->out_channels + c) * d.pout);
                for (int64_t p = 0; p < d.pout; p++) memcpy(row + (size_t)p * es, AT(b, c), es);
            }
        for (int64_t gi = 0; gi < g->groups; gi++) {
            const void *x = AT(in, (n * g->in_channels + gi * d.cig) * d.pin);
            if (col) im2col(dtype, g, d.cig, x, col);
            gemm(dtype, false, false, d.cog, d.pout, d.cig * d.k, AT(w, gi * d.cog * d.cig * d.k), d.cig * d.k,
                 col ? col : x, d.pout, b ? 1.0 : 0.0, AT(out, (n * g->out_channels + gi * d.cog) * d.pout), d.pout);
        }
    }
    free(col);
    return 0;
}

int dp_cpu_conv_backward_input(int dtype, const dp_conv_geom *g, void *grad_in, const void *grad_out, const void *w)
{
    if (check(dtype, g)) return -1;
    conv_dims d = dims_of(g);
    size_t es = dp_dtype_size(dtype);
    bool failed;
    void *col = col_buffer(dtype, &d, &failed);
    if (failed) return -1;
    if (col) memset(grad_in, 0, (size_t)(g->batch * g->in_channels * d.pin) * es);
    for (int64_t n = 0; n < g->batch; n++)
        for (int64_t gi = 0; gi < g->groups; gi++) {
            void *x = AT(grad_in, (n * g->in_channels + gi * d.cig) * d.pin);
            gemm(dtype, true, false, d.cig * d.k, d.pout, d.cog, AT(w, gi * d.cog * d.cig * d.k), d.cig * d.k,
                 AT(grad_out, (n * g->out_channels + gi * d.cog) * d.pout), d.pout, 0.0, col ? col : x, d.pout);
            if (col) col2im(dtype, g, d.cig, col, x);
        }
    free(col);
    return 0;
}

int dp_cpu_conv_backward_weight(int dtype, const dp_conv_geom *g, void *grad_w, const void *grad_out, const void *in)
{
    if (check(dtype, g)) return -1;
    conv_dims d = dims_of(g);
    size_t es = dp_dtype_size(dtype);
    bool failed;
    void *col = col_buffer(dtype, &d, &failed);
    if (failed) return -1;
    for (int64_t n = 0; n < g->batch; n++)
        for (int64_t gi = 0; gi < g->groups; gi++) {
            const void *x = AT(in, (n * g->in_channels + gi * d.cig) * d.pin);
            if (col) im2col(dtype, g, d.cig, x, col);
            gemm(dtype, false, true, d.cog, d.cig * d.k, d.pout, AT(grad_out, (n * g->out_channels + gi * d.cog) * d.pout), d.pout,
                 col ? col : x, d.pout, n ? 1.0 : 0.0, AT(grad_w, gi * d.cog * d.cig * d.k), d.cig * d.k);
        }
    free(col);
    return 0;
}
