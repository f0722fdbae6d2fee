/* cpu.h: what the CPU backend's files share (cpu.c: memory, copies, GEMM and the other
 * kernels; cpu_ops.c: the op table's kernels): the thread grain, the multiversioned hot
 * kernels, strided iteration over up to three operands, and element loads and stores. */
#ifndef DP_CPU_H
#define DP_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "half.h"
#include "internal.h"
#include "opmath.h"

#define GRAIN 131072   /* elements per thread below which a kernel stays on one thread */

/* Hot kernels are compiled twice, for AVX2 and for the x86-64 baseline, and the loader
 * picks one for the processor it runs on (GCC function multiversioning).  Not under the
 * sanitizers: their runtimes run before the resolvers can. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

/* ---------------------------------------------------------------- strided iteration
 * Up to three operands of one shape; dimensions are collapsed where every operand is
 * contiguous across them, then the last dimension is the inner loop. */

#define ITER_MAX_OPS 4   /* out and up to three inputs (where: cond, a, b) */

typedef struct {
    int ndim, nops;
    int64_t sizes[DP_MAX_DIMS];
    int64_t strides[ITER_MAX_OPS][DP_MAX_DIMS];   /* in elements */
    char *base[ITER_MAX_OPS];
    int esize[ITER_MAX_OPS];
} iter_t;

typedef void (*inner_fn)(void *ctx, int64_t n, char **p, const int64_t *s);

void iter_init(iter_t *it, int nops, const dp_view *const *v);
/* Runs fn over every inner run of it, split across threads; nothing when it is empty. */
void iter_run(iter_t *it, inner_fn fn, void *ctx);

typedef struct { int op; double p0, p1, s; bool rev; } ew_ctx;

#define LOOP2(TO, TA, EXPR) do {                                                     \
        TO *o = (TO *)p[0]; const TA *a = (const TA *)p[1];                          \
        int64_t so = s[0], sa = s[1];                                                \
        if (so == 1 && sa == 1) { for (int64_t i = 0; i < n; i++) { TA x = a[i]; o[i] = (TO)(EXPR); } } \
        else { for (int64_t i = 0; i < n; i++) { TA x = a[i * sa]; o[i * so] = (TO)(EXPR); } } \
    } while (0)

#define LOOP3(TO, T, EXPR) do {                                                      \
        TO *o = (TO *)p[0]; const T *a = (const T *)p[1], *b = (const T *)p[2];      \
        int64_t so = s[0], sa = s[1], sb = s[2];                                     \
        if (so == 1 && sa == 1 && sb == 1) { for (int64_t i = 0; i < n; i++) { T x = a[i], y = b[i]; o[i] = (TO)(EXPR); } } \
        else if (so == 1 && sa == 1 && sb == 0) { T y = b[0]; for (int64_t i = 0; i < n; i++) { T x = a[i]; o[i] = (TO)(EXPR); } } \
        else if (so == 1 && sa == 0 && sb == 1) { T x = a[0]; for (int64_t i = 0; i < n; i++) { T y = b[i]; o[i] = (TO)(EXPR); } } \
        else { for (int64_t i = 0; i < n; i++) { T x = a[i * sa], y = b[i * sb]; o[i * so] = (TO)(EXPR); } } \
    } while (0)


static inline double load_d(const char *p, int dt)
{
    switch (dt) {
    case DP_FLOAT32: return *(const float *)p;
    case DP_FLOAT64: return *(const double *)p;
    case DP_INT64: return (double)*(const int64_t *)p;
    case DP_FLOAT16: return dp_f16_to_float(*(const uint16_t *)p);
    case DP_BFLOAT16: return dp_bf16_to_float(*(const uint16_t *)p);
    default: return *(const bool *)p;
    }
}

static inline void store_d(char *p, int dt, double v)
{
    switch (dt) {
    case DP_FLOAT32: *(float *)p = (float)v; break;
    case DP_FLOAT64: *(double *)p = v; break;
    case DP_INT64: *(int64_t *)p = (int64_t)v; break;
    case DP_FLOAT16: *(uint16_t *)p = dp_float_to_f16((float)v); break;
    case DP_BFLOAT16: *(uint16_t *)p = dp_float_to_bf16((float)v); break;
    default: *(bool *)p = v != 0; break;
    }
}

/* One value of like's dtype, seen through a view of like's shape with every stride 0: the
 * scalar operand of fill and of tensor-scalar ops.  *cell holds the value. */
typedef union { float f; double d; int64_t i; bool b; uint16_t h; } cpu_scalar;
static inline dp_view cpu_scalar_view(const dp_view *like, double v, cpu_scalar *cell)
{
    switch (like->dtype) {
    case DP_FLOAT32: cell->f = (float)v; break;
    case DP_FLOAT64: cell->d = v; break;
    case DP_INT64: cell->i = dp_float_to_int64(v); break;
    case DP_FLOAT16: cell->h = dp_float_to_f16((float)v); break;
    case DP_BFLOAT16: cell->h = dp_float_to_bf16((float)v); break;
    default: cell->b = v != 0; break;
    }
    dp_view sc = *like;
    sc.data = cell;
    for (int d = 0; d < sc.ndim; d++) sc.strides[d] = 0;
    return sc;
}

/* cpu_ops.c */
int cpu_unary(dp_unary_op op, const dp_view *out, const dp_view *in, double p0, double p1);
int cpu_binary(dp_binary_op op, const dp_view *out, const dp_view *a, const dp_view *b);
int cpu_binary_scalar(dp_binary_op op, const dp_view *out, const dp_view *a, double s, bool reverse);
int cpu_where(const dp_view *out, const dp_view *cond, const dp_view *a, const dp_view *b);
int cpu_reduce(dp_reduce_op op, const dp_view *out, const dp_view *idx, const dp_view *in, int dim);
/* advanced indexing by element offsets (cpu_index.c) */
int dp_cpu_gather_offsets(const dp_view *out, const dp_view *base, const dp_view *offs);
int dp_cpu_scatter_offsets(const dp_view *base, const dp_view *offs, const dp_view *src, int mode);

/* vision (cpu_vision.c): the pooling kernels of the dp_backend table */
int dp_cpu_pool2d(const dp_pool2d_params *p, int dtype, dp_device dev, void *out, int64_t *idx, const void *in);
int dp_cpu_pool2d_backward(const dp_pool2d_params *p, int dtype, dp_device dev, void *grad_in, const void *grad_out,
                           const int64_t *idx);
/* cpu_sort.c: the sort and scan kernels (backend.h says what they do) */
int dp_cpu_sort_rows(dp_device dev, int dtype, int64_t rows, int64_t n, int64_t k, const void *in, void *values,
                     int64_t *indices, bool descending);
int dp_cpu_scan_rows(dp_device dev, int op, int dtype, int64_t rows, int64_t n, const void *in, void *out,
                     int64_t *indices, bool reverse);
int dp_cpu_scatter_add_rows(dp_device dev, int dtype, int64_t rows, int64_t n_src, int64_t n_out,
                            const void *src, const int64_t *idx, void *out);
/* ---------------------------------------------------------------- convolution (cpu_conv.c) */
int dp_cpu_conv_forward(int dtype, const dp_conv_geom *g, void *out, const void *in, const void *w, const void *b);
int dp_cpu_conv_backward_input(int dtype, const dp_conv_geom *g, void *grad_in, const void *grad_out, const void *w);
int dp_cpu_conv_backward_weight(int dtype, const dp_conv_geom *g, void *grad_w, const void *grad_out, const void *in);
/* Frees the column buffers kept between calls (the backend's empty_cache). */
void dp_cpu_conv_release_buffers(void);
/* cpu_norm.c */
int cpu_layer_norm(const dp_view *out, const dp_view *mean, const dp_view *rstd, const dp_view *x,
                   const dp_view *weight, const dp_view *bias, int64_t rows, int64_t cols, double eps);
int cpu_layer_norm_backward(const dp_view *gx, const dp_view *gw, const dp_view *gb, const dp_view *gy,
                            const dp_view *x, const dp_view *mean, const dp_view *rstd, const dp_view *weight,
                            int64_t rows, int64_t cols);
/* cpu_attention.c */
int cpu_sdpa_forward(const dp_sdpa_params *p, const dp_view *out, const dp_view *lse, const dp_view *q,
                     const dp_view *k, const dp_view *v);
int cpu_sdpa_backward(const dp_sdpa_params *p, const dp_view *gq, const dp_view *gk, const dp_view *gv,
                      const dp_view *gout, const dp_view *q, const dp_view *k, const dp_view *v, const dp_view *out,
                      const dp_view *lse);

#endif
