/* cpu_ops.c: the CPU kernels of the op table (ops.def): elementwise unary and binary ops,
 * instantiated per element type from cpu_ops_generic.h, and the reductions. */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "opmath.h"

/* ---------------------------------------------------------------- elementwise */

#define T float
#define SUFFIX f32
#include "cpu_ops_generic.h"
#undef T
#undef SUFFIX
#define T double
#define SUFFIX f64
#include "cpu_ops_generic.h"
#undef T
#undef SUFFIX
#define T int64_t
#define SUFFIX i64
#include "cpu_ops_generic.h"
#undef T
#undef SUFFIX
/* bool operands compute as bool (the engine makes unary ops on bools compute as int64):
 * x * y is a logical and there */
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
#define T bool
#define SUFFIX b8
#define CPU_NO_UNARY
#include "cpu_ops_generic.h"
#undef CPU_NO_UNARY
#undef T
#undef SUFFIX

static inner_fn const unary_fns[DP_NDTYPES] = { unary_f32, unary_f64, unary_i64, NULL };
static inner_fn const binary_fns[DP_NDTYPES] = { binary_f32, binary_f64, binary_i64, binary_b8 };

int cpu_unary(dp_unary_op op, const dp_view *out, const dp_view *in, double p0, double p1)
{
    if ((unsigned)op >= DP_NUNARY || (unsigned)in->dtype >= DP_NDTYPES || !unary_fns[in->dtype])
        return dp_error("cpu: unary op %d is not defined for dtype %s", (int)op, dp_dtype_name(in->dtype));
    const dp_view *v[2] = { out, in };
    iter_t it;
    iter_init(&it, 2, v);
    ew_ctx c = { .op = op, .p0 = p0, .p1 = p1 };
    iter_run(&it, unary_fns[in->dtype], &c);
    return 0;
}

/* The element count when every view is contiguous in the same layout (one flat run that
 * needs no iterator), else -1. */
static int64_t flat_run(int nv, const dp_view *const *v)
{
    int64_t n = 1;
    for (int d = v[0]->ndim - 1; d >= 0; d--) {
        for (int k = 0; k < nv; k++)
            if (v[k]->sizes[d] != v[0]->sizes[d] || (v[k]->strides[d] != n && v[0]->sizes[d] != 1)) return -1;
        n *= v[0]->sizes[d];
    }
    return n;
}

int cpu_binary(dp_binary_op op, const dp_view *out, const dp_view *a, const dp_view *b)
{
    if ((unsigned)op >= DP_NBINARY || (unsigned)a->dtype >= DP_NDTYPES)
        return dp_error("cpu: binary op %d is not defined for dtype %s", (int)op, dp_dtype_name(a->dtype));
    const dp_view *v[3] = { out, a, b };
    int64_t n = flat_run(3, v);
    if (n >= 0 && n < GRAIN) {   /* small contiguous operands: the loop itself, on this thread */
        static const int64_t unit[3] = { 1, 1, 1 };
        char *p[3] = { out->data, a->data, b->data };
        ew_ctx c = { .op = op };
        binary_fns[a->dtype](&c, n, p, unit);
        return 0;
    }
    iter_t it;
    iter_init(&it, 3, v);
    ew_ctx c = { .op = op };
    iter_run(&it, binary_fns[a->dtype], &c);
    return 0;
}

/* a op s (or s op a): the scalar is a broadcast operand of the compute dtype */
int cpu_binary_scalar(dp_binary_op op, const dp_view *out, const dp_view *a, double s, bool reverse)
{
    cpu_scalar cell;
    dp_view sc = cpu_scalar_view(a, s, &cell);
    return reverse ? cpu_binary(op, out, &sc, a) : cpu_binary(op, out, a, &sc);
}

/* ---------------------------------------------------------------- where */

/* where only moves elements, so one function per element size serves every dtype */
#define WHERE_FN(NAME, T)                                                                  \
    static void NAME(void *c, int64_t n, char **p, const int64_t *s)                       \
    {                                                                                      \
        T *o = (T *)p[0];                                                                  \
        const bool *m = (const bool *)p[1];                                                \
        const T *a = (const T *)p[2], *b = (const T *)p[3];                                \
        for (int64_t i = 0; i < n; i++) o[i * s[0]] = m[i * s[1]] ? a[i * s[2]] : b[i * s[3]]; \
    }
WHERE_FN(where_1, uint8_t)
WHERE_FN(where_4, uint32_t)
WHERE_FN(where_8, uint64_t)

int cpu_where(const dp_view *out, const dp_view *cond, const dp_view *a, const dp_view *b)
{
    size_t es = dp_dtype_size(out->dtype);
    inner_fn fn = es == 1 ? where_1 : es == 4 ? where_4 : es == 8 ? where_8 : NULL;
    if (!fn || cond->dtype != DP_BOOL || a->dtype != out->dtype || b->dtype != out->dtype)
        return dp_error("cpu: where on dtypes %s, %s, %s into %s", dp_dtype_name(cond->dtype), dp_dtype_name(a->dtype),
                        dp_dtype_name(b->dtype), dp_dtype_name(out->dtype));
    const dp_view *v[4] = { out, cond, a, b };
    iter_t it;
    iter_init(&it, 4, v);
    iter_run(&it, fn, NULL);
    return 0;
}

/* ---------------------------------------------------------------- reductions */

/* Sums of contiguous data: vector lanes accumulate in double (still faster than memory
 * delivers floats), blocks of 4096 keep the threads' shares even. */
#define SUM_BLOCK 4096

/* 16 independent lanes keep the adders busy instead of waiting on one chain */
#define SUM_LANES(T) do {                                                   \
        double lane[16] = { 0 };                                            \
        int64_t i = 0;                                                      \
        for (; i + 16 <= n; i += 16)                                        \
            for (int k = 0; k < 16; k++) lane[k] += (double)x[i + k];       \
        double acc = 0;                                                     \
        for (int k = 0; k < 16; k++) acc += lane[k];                        \
        for (; i < n; i++) acc += (double)x[i];                             \
        return acc;                                                         \
    } while (0)

/* floats: 256-element pieces summed in 16 float lanes (each lane adds 16 values, so the
 * rounding stays near 1e-6 relative), the pieces added in double */
HOT static double sum_block_f32(const float *x, int64_t n)
{
    double acc = 0;
    int64_t i = 0;
    for (; i + 256 <= n; i += 256) {
        float lane[16] = { 0 };
        for (int64_t j = 0; j < 256; j += 16)
            for (int k = 0; k < 16; k++) lane[k] += x[i + j + k];
        double piece = 0;
        for (int k = 0; k < 16; k++) piece += lane[k];
        acc += piece;
    }
    for (; i < n; i++) acc += x[i];
    return acc;
}
HOT static double sum_block_f64(const double *x, int64_t n) { SUM_LANES(double); }

typedef struct { const void *x; bool f64; double part[64]; } sum_job;

static void sum_range(void *c, int64_t lo, int64_t hi, int part)
{
    sum_job *j = c;
    double acc = 0;
    for (int64_t b = lo; b < hi; b += SUM_BLOCK) {
        int64_t len = hi - b < SUM_BLOCK ? hi - b : SUM_BLOCK;
        acc += j->f64 ? sum_block_f64((const double *)j->x + b, len) : sum_block_f32((const float *)j->x + b, len);
    }
    j->part[part] = acc;
}

/* the parts are added in order, so a sum is the same from run to run */
static double sum_contig(const void *x, int64_t n, bool f64)
{
    sum_job j = { .x = x, .f64 = f64 };
    int parts = dp_pool_threads() < 64 ? dp_pool_threads() : 64;
    for (int i = 0; i < parts; i++) j.part[i] = 0;
    dp_parallel(n, 4 * GRAIN, sum_range, &j);
    double acc = 0;
    for (int i = 0; i < parts; i++) acc += j.part[i];
    return acc;
}

static double sum_f32(const float *x, int64_t n) { return sum_contig(x, n, false); }
static double sum_f64(const double *x, int64_t n) { return sum_contig(x, n, true); }

typedef struct {
    int op;
    const dp_view *out, *idx, *in;
    int64_t len, stride;
    int es, oes, nd;
    bool is_sum;
    int64_t sizes[DP_MAX_DIMS], istr[DP_MAX_DIMS], ostr[DP_MAX_DIMS], xstr[DP_MAX_DIMS];
} reduce_job;

/* reduces lanes [lo, hi) of the other dimensions */
static void reduce_lanes(void *c, int64_t lo, int64_t hi, int part)
{
    const reduce_job *jb = c;
    int op = jb->op, nd = jb->nd, es = jb->es, oes = jb->oes;
    const dp_view *out = jb->out, *idx = jb->idx, *in = jb->in;
    int64_t len = jb->len, stride = jb->stride;
    bool is_sum = jb->is_sum;
    const int64_t *sizes = jb->sizes, *istr = jb->istr, *ostr = jb->ostr, *xstr = jb->xstr;
    for (int64_t o = lo; o < hi; o++) {
        const char *ip = in->data;
        char *op_ = out->data, *xp = idx ? idx->data : NULL;
        int64_t rem = o;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t i = rem % sizes[d];
            rem /= sizes[d];
            ip += i * istr[d] * es;
            op_ += i * ostr[d] * oes;
            if (xp) xp += i * xstr[d] * 8;
        }
        if (is_sum) {
            double acc = 0;
            if (in->dtype == DP_FLOAT32 && stride == 1) acc = sum_f32((const float *)ip, len);
            else if (in->dtype == DP_INT64) {
                int64_t ia = 0;
                for (int64_t r = 0; r < len; r++) ia += *(const int64_t *)(ip + r * stride * es);
                if (op == DP_SUM && out->dtype == DP_INT64) { *(int64_t *)op_ = ia; continue; }
                acc = (double)ia;
            } else for (int64_t r = 0; r < len; r++) acc += load_d(ip + r * stride * es, in->dtype);
            store_d(op_, out->dtype, op == DP_MEAN ? acc / (double)len : acc);
        } else {
            bool want_max = op == DP_MAX || op == DP_ARGMAX;
            int64_t best_i = 0;
            if (in->dtype == DP_INT64) {
                int64_t best = *(const int64_t *)ip;
                for (int64_t r = 1; r < len; r++) {
                    int64_t x = *(const int64_t *)(ip + r * stride * es);
                    if (want_max ? x > best : x < best) { best = x; best_i = r; }
                }
                if (op == DP_ARGMAX || op == DP_ARGMIN) *(int64_t *)op_ = best_i;
                else *(int64_t *)op_ = best;
            } else {
                double best = load_d(ip, in->dtype);
                for (int64_t r = 1; r < len && best == best; r++) {
                    double x = load_d(ip + r * stride * es, in->dtype);
                    if (x != x || (want_max ? x > best : x < best)) { best = x; best_i = r; }
                }
                if (op == DP_ARGMAX || op == DP_ARGMIN) *(int64_t *)op_ = best_i;
                else store_d(op_, out->dtype, best);
            }
            if (xp) *(int64_t *)xp = best_i;
        }
    }
}

int cpu_reduce(dp_reduce_op op, const dp_view *out, const dp_view *idx, const dp_view *in, int dim)
{
    switch (op) {
    case DP_SUM: case DP_MEAN: case DP_MAX: case DP_MIN: case DP_ARGMAX: case DP_ARGMIN: break;
    default: return dp_error("cpu: reduction %d has no kernel", (int)op);
    }
    int64_t len = in->sizes[dim], stride = in->strides[dim];
    int es = (int)dp_dtype_size(in->dtype), oes = (int)dp_dtype_size(out->dtype);
    /* the other dimensions, in order: they index out (and idx) */
    int nd = 0;
    int64_t sizes[DP_MAX_DIMS], istr[DP_MAX_DIMS], ostr[DP_MAX_DIMS], xstr[DP_MAX_DIMS];
    for (int d = 0, k = 0; d < in->ndim; d++) {
        if (d == dim) continue;
        sizes[nd] = in->sizes[d];
        istr[nd] = in->strides[d];
        ostr[nd] = out->strides[k];
        xstr[nd] = idx ? idx->strides[k] : 0;
        nd++; k++;
    }
    int64_t outer = 1;
    for (int d = 0; d < nd; d++) outer *= sizes[d];
    bool is_sum = op == DP_SUM || op == DP_MEAN;

    /* whole-tensor sums of contiguous data: the vectorised path */
    if (is_sum && outer == 1 && stride == 1 && (in->dtype == DP_FLOAT32 || in->dtype == DP_FLOAT64)) {
        double acc = in->dtype == DP_FLOAT32 ? sum_f32(in->data, len) : sum_f64(in->data, len);
        store_d(out->data, out->dtype, op == DP_MEAN ? acc / (double)len : acc);
        return 0;
    }
    /* sums over a leading dimension of contiguous rows (bias gradients): add rows */
    if (is_sum && in->dtype == DP_FLOAT32 && out->dtype == DP_FLOAT32 && nd >= 1 && len > 1) {
        bool rows = true;
        int64_t inner = 1;
        for (int d = in->ndim - 1; d > dim; d--) { if (in->strides[d] != inner) rows = false; inner *= in->sizes[d]; }
        if (stride != inner) rows = false;
        int64_t ostep = 1;
        for (int d = out->ndim - 1; d >= 0 && rows; d--) { if (out->strides[d] != ostep) rows = false; ostep *= out->sizes[d]; }
        int64_t pre = 1;
        for (int d = 0; d < dim; d++) { if (in->strides[d] != inner * len * pre && in->sizes[d] != 1) rows = false; pre *= in->sizes[d]; }
        if (rows && inner > 1) {
            const float *x = in->data;
            float *o = out->data;
            double scale = op == DP_MEAN ? 1.0 / (double)len : 1.0;
            for (int64_t pi = 0; pi < pre; pi++) {
                double *acc = calloc((size_t)inner, sizeof(double));
                if (!acc) continue;
                for (int64_t r = 0; r < len; r++) {
                    const float *row = x + (pi * len + r) * inner;
                    #pragma omp simd
                    for (int64_t j = 0; j < inner; j++) acc[j] += row[j];
                }
                for (int64_t j = 0; j < inner; j++) o[pi * inner + j] = (float)(acc[j] * scale);
                free(acc);
            }
            return 0;
        }
    }
    reduce_job j = { .op = op, .out = out, .idx = idx, .in = in, .len = len, .stride = stride,
                     .es = es, .oes = oes, .nd = nd, .is_sum = is_sum };
    memcpy(j.sizes, sizes, sizeof sizes);
    memcpy(j.istr, istr, sizeof istr);
    memcpy(j.ostr, ostr, sizeof ostr);
    memcpy(j.xstr, xstr, sizeof xstr);
    dp_parallel(outer, len ? GRAIN / len + (GRAIN % len != 0) : GRAIN, reduce_lanes, &j);   /* ceil, no overflow */
    return 0;
}
