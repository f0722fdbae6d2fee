/* cpu_vision.c: the CPU backend's pooling kernels.  Planes [ih, iw] are independent, so
 * the work is split over planes; inside a plane every output reads its window directly
 * (the windows are vision_window.h's, as on CUDA).  Sums run in double. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"
#include "vision_window.h"

typedef struct {
    const dp_pool2d_params *p;
    void *out;
    int64_t *idx;
    const void *in;
    bool failed[64];   /* per part: a window table could not be allocated */
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

/* The windows of one output row (along h) and of every output column (along w), the same
 * for every plane: computed once per range of planes. */
typedef struct {
    int64_t *w0, *w1, *wcount;   /* per output column */
} col_windows;

static int col_windows_init(col_windows *c, const dp_pool2d_params *p)
{
    c->w0 = malloc(sizeof(int64_t) * 3 * (size_t)p->ow);
    if (!c->w0) return -1;
    c->w1 = c->w0 + p->ow;
    c->wcount = c->w1 + p->ow;
    for (int64_t ow = 0; ow < p->ow; ow++) {
        int64_t h0, h1, dh, dw, count;
        window(p, 0, ow, &h0, &h1, &c->w0[ow], &c->w1[ow], &dh, &dw, &count);
        c->wcount[ow] = c->w1[ow] - c->w0[ow];
        if (!p->adaptive && p->kind == DP_POOL_AVG) {   /* the padded width, for count_include_pad */
            int64_t a, b, len;
            dp_avg_window(ow, p->iw, p->kw, p->sw, p->pw, &a, &b, &len);
            c->wcount[ow] = p->count_include_pad ? len : b - a;
        }
    }
    return 0;
}

/* the divisor of the average over rows [h0, h1) (hlen: counting the padding) and column ow */
static inline double avg_count(const dp_pool2d_params *p, const col_windows *c, int64_t h0, int64_t h1, int64_t hlen,
                               int64_t ow)
{
    if (p->adaptive) return (double)((h1 - h0) * c->wcount[ow]);
    if (p->divisor) return (double)p->divisor;
    return (double)((p->count_include_pad ? hlen : h1 - h0) * c->wcount[ow]);
}

static inline void row_window(const dp_pool2d_params *p, int64_t oh, int64_t *h0, int64_t *h1, int64_t *hlen)
{
    if (p->adaptive) { dp_adaptive_window(oh, p->ih, p->oh, h0, h1); *hlen = *h1 - *h0; }
    else if (p->kind == DP_POOL_MAX) { dp_max_window(oh, p->ih, p->kh, p->sh, p->ph, p->dh, h0, h1); *hlen = 0; }
    else dp_avg_window(oh, p->ih, p->kh, p->sh, p->ph, h0, h1, hlen);
}

#define POOL_RANGES(T, SUFFIX)                                                                   \
    static void pool_fwd_##SUFFIX(void *ctx, int64_t lo, int64_t hi, int part)                   \
    {                                                                                            \
        pool_job *j = ctx;                                                                       \
        const dp_pool2d_params *p = j->p;                                                        \
        int64_t isz = p->ih * p->iw, osz = p->oh * p->ow, iw = p->iw;                            \
        int64_t dh = p->adaptive ? 1 : p->dh, dw = p->adaptive ? 1 : p->dw;                      \
        col_windows cw;                                                                          \
        if (col_windows_init(&cw, p)) { j->failed[part] = true; return; }                        \
        for (int64_t c = lo; c < hi; c++) {                                                      \
            const T *x = (const T *)j->in + c * isz;                                             \
            T *y = (T *)j->out + c * osz;                                                        \
            int64_t *ix = j->idx ? j->idx + c * osz : NULL;                                      \
            for (int64_t oh = 0; oh < p->oh; oh++) {                                             \
                int64_t h0, h1, hlen;                                                            \
                row_window(p, oh, &h0, &h1, &hlen);                                              \
                T *yr = y + oh * p->ow;                                                          \
                if (p->kind == DP_POOL_MAX) {                                                    \
                    int64_t *ir = ix + oh * p->ow;                                               \
                    for (int64_t ow = 0; ow < p->ow; ow++) {                                     \
                        int64_t w0 = cw.w0[ow], w1 = cw.w1[ow];                                  \
                        T m = -INFINITY;                                                         \
                        int64_t at = h0 * iw + w0;                                               \
                        for (int64_t h = h0; h < h1; h += dh) {                                  \
                            const T *xr = x + h * iw;                                            \
                            for (int64_t w = w0; w < w1; w += dw) {                              \
                                T v = xr[w];   /* selects, not a branch: random data */       \
                                int take = (v > m) | (v != v);                                   \
                                m = take ? v : m;                                                \
                                at = take ? h * iw + w : at;                                     \
                            }                                                                    \
                        }                                                                        \
                        yr[ow] = m;                                                              \
                        ir[ow] = at;                                                             \
                    }                                                                            \
                } else {                                                                         \
                    for (int64_t ow = 0; ow < p->ow; ow++) {                                     \
                        int64_t w0 = cw.w0[ow], w1 = cw.w1[ow];                                  \
                        double s = 0;                                                            \
                        for (int64_t h = h0; h < h1; h++)                                        \
                            for (int64_t w = w0; w < w1; w++) s += x[h * iw + w];                \
                        yr[ow] = (T)(s / avg_count(p, &cw, h0, h1, hlen, ow));                   \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        free(cw.w0);                                                                             \
    }                                                                                            \
    static void pool_bwd_##SUFFIX(void *ctx, int64_t lo, int64_t hi, int part)                   \
    {                                                                                            \
        pool_job *j = ctx;                                                                       \
        const dp_pool2d_params *p = j->p;                                                        \
        int64_t isz = p->ih * p->iw, osz = p->oh * p->ow, iw = p->iw;                            \
        if (p->kind == DP_POOL_MAX) {                                                            \
            for (int64_t c = lo; c < hi; c++) {                                                  \
                T *gx = (T *)j->out + c * isz;                                                   \
                const T *gy = (const T *)j->in + c * osz;                                        \
                const int64_t *ix = j->idx + c * osz;                                            \
                for (int64_t o = 0; o < osz; o++) gx[ix[o]] += gy[o];                            \
            }                                                                                    \
            return;                                                                              \
        }                                                                                        \
        col_windows cw;                                                                          \
        if (col_windows_init(&cw, p)) { j->failed[part] = true; return; }                        \
        for (int64_t c = lo; c < hi; c++) {                                                      \
            T *gx = (T *)j->out + c * isz;                                                       \
            const T *gy = (const T *)j->in + c * osz;                                            \
            for (int64_t oh = 0; oh < p->oh; oh++) {                                             \
                int64_t h0, h1, hlen;                                                            \
                row_window(p, oh, &h0, &h1, &hlen);                                              \
                for (int64_t ow = 0; ow < p->ow; ow++) {                                         \
                    int64_t w0 = cw.w0[ow], w1 = cw.w1[ow];                                      \
                    T g = (T)((double)gy[oh * p->ow + ow] / avg_count(p, &cw, h0, h1, hlen, ow)); \
                    for (int64_t h = h0; h < h1; h++)                                            \
                        for (int64_t w = w0; w < w1; w++) gx[h * iw + w] += g;                   \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        free(cw.w0);                                                                             \
    }

POOL_RANGES(float, f32)
POOL_RANGES(double, f64)

/* planes per thread: enough that a thread gets about GRAIN elements of input */
static int64_t plane_grain(const dp_pool2d_params *p)
{
    int64_t per = p->ih * p->iw + p->oh * p->ow;
    return per >= GRAIN ? 1 : GRAIN / per;
}

static int failed(const pool_job *j)
{
    for (int i = 0; i < 64; i++)
        if (j->failed[i]) return dp_error("pool2d: out of memory for the window table");
    return 0;
}

int dp_cpu_pool2d(const dp_pool2d_params *p, int dtype, dp_device dev, void *out, int64_t *idx, const void *in)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64) return dp_error("pool2d: CPU kernel for %s missing", dp_dtype_name(dtype));
    if (p->kind == DP_POOL_MAX && !idx) return dp_error("pool2d: max pooling needs an index buffer");
    pool_job j = { p, out, idx, in, { false } };
    dp_parallel(p->planes, plane_grain(p), dtype == DP_FLOAT32 ? pool_fwd_f32 : pool_fwd_f64, &j);
    return failed(&j);
}

int dp_cpu_pool2d_backward(const dp_pool2d_params *p, int dtype, dp_device dev, void *grad_in, const void *grad_out,
                           const int64_t *idx)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64) return dp_error("pool2d: CPU kernel for %s missing", dp_dtype_name(dtype));
    if (p->kind == DP_POOL_MAX && !idx) return dp_error("pool2d backward: max pooling needs its indices");
    pool_job j = { p, grad_in, (int64_t *)idx, grad_out, { false } };
    dp_parallel(p->planes, plane_grain(p), dtype == DP_FLOAT32 ? pool_bwd_f32 : pool_bwd_f64, &j);
    return failed(&j);
}
