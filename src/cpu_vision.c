/* cpu_vision.c: the CPU backend's pooling kernels.  Planes [ih, iw] are independent, so
 * the work is split over planes; inside a plane every output reads its window directly
 * (the windows are vision_window.h's, as on CUDA).  Sums run in double. */
#include <math.h>

#include "cpu.h"
#include "vision_window.h"

typedef struct {
    const dp_pool2d_params *p;
    void *out;
    int64_t *idx;
    const void *in;
} pool_job;

/* the window of output (oh, ow) in one plane: rows [h0, h1) by dh, columns [w0, w1) by dw;
 * *count is the average's divisor */
static inline void window(const dp_pool2d_params *p, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                          int64_t *w1, int64_t *dh, int64_t *dw, int64_t *count)
{
    *dh = *dw = 1;
    *count = 1;
    if (p->adaptive) {
        dp_adaptive_window(oh, p->ih, p->oh, h0, h1);
        dp_adaptive_window(ow, p->iw, p->ow, w0, w1);
        *count = (*h1 - *h0) * (*w1 - *w0);
    } else if (p->kind == DP_POOL_MAX) {
        dp_max_window(oh, p->ih, p->kh, p->sh, p->ph, p->dh, h0, h1);
        dp_max_window(ow, p->iw, p->kw, p->sw, p->pw, p->dw, w0, w1);
        *dh = p->dh;
        *dw = p->dw;
    } else {
        int64_t lh, lw;
        dp_avg_window(oh, p->ih, p->kh, p->sh, p->ph, h0, h1, &lh);
        dp_avg_window(ow, p->iw, p->kw, p->sw, p->pw, w0, w1, &lw);
        *count = p->divisor ? p->divisor : p->count_include_pad ? lh * lw : (*h1 - *h0) * (*w1 - *w0);
    }
}

#define POOL_RANGES(T, SUFFIX)                                                                   \
    static void pool_fwd_##SUFFIX(void *ctx, int64_t lo, int64_t hi, int part)                   \
    {                                                                                            \
        const pool_job *j = ctx;                                                                 \
        const dp_pool2d_params *p = j->p;                                                        \
        int64_t isz = p->ih * p->iw, osz = p->oh * p->ow;                                        \
        for (int64_t c = lo; c < hi; c++) {                                                      \
            const T *x = (const T *)j->in + c * isz;                                             \
            T *y = (T *)j->out + c * osz;                                                        \
            int64_t *ix = j->idx ? j->idx + c * osz : NULL;                                      \
            for (int64_t oh = 0; oh < p->oh; oh++)                                               \
                for (int64_t ow = 0; ow < p->ow; ow++) {                                         \
                    int64_t h0, h1, w0, w1, dh, dw, count;                                       \
                    window(p, oh, ow, &h0, &h1, &w0, &w1, &dh, &dw, &count);                     \
                    int64_t o = oh * p->ow + ow;                                                 \
                    if (p->kind == DP_POOL_MAX) {                                                \
                        T m = -INFINITY;                                                         \
                        int64_t at = h0 * p->iw + w0;                                            \
                        for (int64_t h = h0; h < h1; h += dh)                                    \
                            for (int64_t w = w0; w < w1; w += dw) {                              \
                                T v = x[h * p->iw + w];                                          \
                                if (v > m || v != v) { m = v; at = h * p->iw + w; }              \
                            }                                                                    \
                        y[o] = m;                                                                \
                        ix[o] = at;                                                              \
                    } else {                                                                     \
                        double s = 0;                                                            \
                        for (int64_t h = h0; h < h1; h++)                                        \
                            for (int64_t w = w0; w < w1; w++) s += x[h * p->iw + w];             \
                        y[o] = (T)(s / (double)count);                                           \
                    }                                                                            \
                }                                                                                \
        }                                                                                        \
    }                                                                                            \
    static void pool_bwd_##SUFFIX(void *ctx, int64_t lo, int64_t hi, int part)                   \
    {                                                                                            \
        const pool_job *j = ctx;                                                                 \
        const dp_pool2d_params *p = j->p;                                                        \
        int64_t isz = p->ih * p->iw, osz = p->oh * p->ow;                                        \
        for (int64_t c = lo; c < hi; c++) {                                                      \
            T *gx = (T *)j->out + c * isz;                                                       \
            const T *gy = (const T *)j->in + c * osz;                                            \
            if (p->kind == DP_POOL_MAX) {                                                        \
                const int64_t *ix = j->idx + c * osz;                                            \
                for (int64_t o = 0; o < osz; o++) gx[ix[o]] += gy[o];                            \
                continue;                                                                        \
            }                                                                                    \
            for (int64_t oh = 0; oh < p->oh; oh++)                                               \
                for (int64_t ow = 0; ow < p->ow; ow++) {                                         \
                    int64_t h0, h1, w0, w1, dh, dw, count;                                       \
                    window(p, oh, ow, &h0, &h1, &w0, &w1, &dh, &dw, &count);                     \
                    T g = (T)((double)gy[oh * p->ow + ow] / (double)count);                      \
                    for (int64_t h = h0; h < h1; h++)                                            \
                        for (int64_t w = w0; w < w1; w++) gx[h * p->iw + w] += g;                \
                }                                                                                \
        }                                                                                        \
    }

POOL_RANGES(float, f32)
POOL_RANGES(double, f64)

/* planes per thread: enough that a thread gets about GRAIN elements of input */
static int64_t plane_grain(const dp_pool2d_params *p)
{
    int64_t per = p->ih * p->iw + p->oh * p->ow;
    return per >= GRAIN ? 1 : GRAIN / per;
}

int dp_cpu_pool2d(const dp_pool2d_params *p, int dtype, dp_device dev, void *out, int64_t *idx, const void *in)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64) return dp_error("pool2d: CPU kernel for %s missing", dp_dtype_name(dtype));
    if (p->kind == DP_POOL_MAX && !idx) return dp_error("pool2d: max pooling needs an index buffer");
    pool_job j = { p, out, idx, in };
    dp_parallel(p->planes, plane_grain(p), dtype == DP_FLOAT32 ? pool_fwd_f32 : pool_fwd_f64, &j);
    return 0;
}

int dp_cpu_pool2d_backward(const dp_pool2d_params *p, int dtype, dp_device dev, void *grad_in, const void *grad_out,
                           const int64_t *idx)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64) return dp_error("pool2d: CPU kernel for %s missing", dp_dtype_name(dtype));
    if (p->kind == DP_POOL_MAX && !idx) return dp_error("pool2d backward: max pooling needs its indices");
    pool_job j = { p, grad_in, (int64_t *)idx, grad_out };
    dp_parallel(p->planes, plane_grain(p), dtype == DP_FLOAT32 ? pool_bwd_f32 : pool_bwd_f64, &j);
    return 0;
}
