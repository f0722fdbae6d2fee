/* cpu_norm.c: the CPU kernels of layer normalization (norm.c).  Rows are split across the
 * worker threads; each row's sums are taken in double, in two passes (mean, then the
 * squared deviations), so a float32 row with a large mean keeps its variance. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

typedef struct {
    const void *x, *w, *b, *gy, *mean_in, *rstd_in;
    void *y, *mean, *rstd, *gx;
    double *partial;   /* backward: per part, cols sums of gy * xhat then cols sums of gy */
    int64_t cols;
    double eps;
} ln_job;

/* The row sums as vector reductions (-fopenmp-simd): a plain `s += x[i]` in double is one
 * dependent add per element, which made the kernel four times slower than an elementwise op. */
#define DO_PRAGMA(x) _Pragma(#x)
#define SIMD_SUM(s) DO_PRAGMA(omp simd reduction(+:s))
#define SIMD_SUM2(a, b) DO_PRAGMA(omp simd reduction(+:a, b))

#define LN_FORWARD(NAME, T)                                                                    \
    static void NAME(void *ctx, int64_t lo, int64_t hi, int part)                              \
    {                                                                                          \
        const ln_job *j = ctx;                                                                 \
        const T *w = j->w, *b = j->b;                                                          \
        int64_t n = j->cols;                                                                   \
        for (int64_t r = lo; r < hi; r++) {                                                    \
            const T *x = (const T *)j->x + r * n;                                              \
            T *y = (T *)j->y + r * n;                                                          \
            double s = 0, v = 0;                                                               \
            SIMD_SUM(s)                                                                        \
            for (int64_t i = 0; i < n; i++) s += x[i];                                         \
            double m = s / (double)n;                                                          \
            SIMD_SUM(v)                                                                        \
            for (int64_t i = 0; i < n; i++) { double d = x[i] - m; v += d * d; }               \
            double rs = 1 / sqrt(v / (double)n + j->eps);                                      \
            for (int64_t i = 0; i < n; i++) {                                                  \
                double h = (x[i] - m) * rs;                                                    \
                if (w) h *= w[i];                                                              \
                if (b) h += b[i];                                                              \
                y[i] = (T)h;                                                                   \
            }                                                                                  \
            ((T *)j->mean)[r] = (T)m;                                                          \
            ((T *)j->rstd)[r] = (T)rs;                                                         \
        }                                                                                      \
    }
LN_FORWARD(ln_forward_f32, float)
LN_FORWARD(ln_forward_f64, double)

/* gx = rstd * (gy w - mean(gy w) - xhat * mean(gy w xhat)) per row; the column sums of
 * gy * xhat and gy (the gradients of weight and bias) go into this part's partial row. */
#define LN_BACKWARD(NAME, T)                                                                   \
    static void NAME(void *ctx, int64_t lo, int64_t hi, int part)                              \
    {                                                                                          \
        const ln_job *j = ctx;                                                                 \
        const T *w = j->w;                                                                     \
        int64_t n = j->cols;                                                                   \
        double *pw = j->partial ? j->partial + (size_t)part * 2 * (size_t)n : NULL;           \
        for (int64_t r = lo; r < hi; r++) {                                                    \
            const T *x = (const T *)j->x + r * n, *gy = (const T *)j->gy + r * n;              \
            double m = ((const T *)j->mean_in)[r], rs = ((const T *)j->rstd_in)[r];            \
            if (pw)                                                                            \
                for (int64_t i = 0; i < n; i++) {                                              \
                    pw[i] += gy[i] * ((x[i] - m) * rs);                                        \
                    pw[n + i] += gy[i];                                                        \
                }                                                                              \
            if (!j->gx) continue;                                                              \
            double a = 0, c = 0;                                                               \
            SIMD_SUM2(a, c)                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                  \
                double gw = w ? (double)gy[i] * w[i] : (double)gy[i];                          \
                a += gw;                                                                       \
                c += gw * ((x[i] - m) * rs);                                                   \
            }                                                                                  \
            a /= (double)n;                                                                    \
            c /= (double)n;                                                                    \
            T *gx = (T *)j->gx + r * n;                                                        \
            for (int64_t i = 0; i < n; i++) {                                                  \
                double gw = w ? (double)gy[i] * w[i] : (double)gy[i];                          \
                gx[i] = (T)(rs * (gw - a - (x[i] - m) * rs * c));                              \
            }                                                                                  \
        }                                                                                      \
    }
LN_BACKWARD(ln_backward_f32, float)
LN_BACKWARD(ln_backward_f64, double)

static int64_t row_grain(int64_t cols) { return cols >= GRAIN ? 1 : GRAIN / cols; }

int cpu_layer_norm(const dp_view *out, const dp_view *mean, const dp_view *rstd, const dp_view *x,
                   const dp_view *weight, const dp_view *bias, int64_t rows, int64_t cols, double eps)
{
    if (x->dtype != DP_FLOAT32 && x->dtype != DP_FLOAT64)
        return dp_error("layer_norm: expected a float32 or float64 input, got %s", dp_dtype_name(x->dtype));
    ln_job j = { .x = x->data, .w = weight ? weight->data : NULL, .b = bias ? bias->data : NULL,
                 .y = out->data, .mean = mean->data, .rstd = rstd->data, .cols = cols, .eps = eps };
    dp_parallel(rows, row_grain(cols), x->dtype == DP_FLOAT32 ? ln_forward_f32 : ln_forward_f64, &j);
    return 0;
}

int cpu_layer_norm_backward(const dp_view *gx, const dp_view *gw, const dp_view *gb, const dp_view *gy,
                            const dp_view *x, const dp_view *mean, const dp_view *rstd, const dp_view *weight,
                            int64_t rows, int64_t cols)
{
    int dt = x->dtype;
    if (dt != DP_FLOAT32 && dt != DP_FLOAT64)
        return dp_error("layer_norm backward: expected a float32 or float64 input, got %s", dp_dtype_name(dt));
    int parts = dp_pool_threads();
    if (parts < 1) parts = 1;
    double *partial = NULL;
    if (gw || gb) {
        if (dp_check_count((int64_t)parts * 2 * cols, sizeof(double), "layer_norm backward")) return -1;
        partial = calloc((size_t)parts * 2 * (size_t)cols, sizeof(double));
        if (!partial) return dp_error("out of memory");
    }
    ln_job j = { .x = x->data, .w = weight ? weight->data : NULL, .gy = gy->data, .mean_in = mean->data,
                 .rstd_in = rstd->data, .gx = gx ? gx->data : NULL, .partial = partial, .cols = cols };
    dp_parallel(rows, row_grain(cols), dt == DP_FLOAT32 ? ln_backward_f32 : ln_backward_f64, &j);
    /* the parts' sums, added in part order so the result does not depend on timing */
    for (int64_t i = 0; partial && i < cols; i++) {
        double sw = 0, sb = 0;
        for (int p = 0; p < parts; p++) {
            sw += partial[(size_t)p * 2 * (size_t)cols + (size_t)i];
            sb += partial[(size_t)p * 2 * (size_t)cols + (size_t)(cols + i)];
        }
        if (gw) store_d((char *)gw->data + i * (int64_t)dp_dtype_size(dt), dt, sw);
        if (gb) store_d((char *)gb->data + i * (int64_t)dp_dtype_size(dt), dt, sb);
    }
    free(partial);
    return 0;
}
