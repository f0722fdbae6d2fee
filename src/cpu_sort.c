/* cpu_sort.c: the CPU kernels of sort.c: a stable per-row merge sort (NaN the largest
 * value), the inclusive scans (cumsum, cumprod, cummax, cummin, logcumsumexp) and the
 * row-wise scatter-add that takes the gradient of sorted or picked values back to where
 * they came from.  Rows are contiguous; the rows are shared among the worker threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "cpu.h"

#define GRAIN_ELEMS 16384

/* a row count such that each part has about GRAIN_ELEMS elements */
static int64_t row_grain(int64_t n) { return n >= GRAIN_ELEMS ? 1 : GRAIN_ELEMS / (n ? n : 1); }

/* ---------------------------------------------------------------- sort */

/* BEFORE(a, b): a sorts strictly before b.  NaN is larger than every number. */
#define ASC_BEFORE(a, b) ((a) == (a) && ((b) != (b) || (a) < (b)))
#define DESC_BEFORE(a, b) ((b) == (b) && ((a) != (a) || (a) > (b)))
/* Element i of x sorts before element j: by value, then by position.  The order is total,
 * and a sort by it is the stable sort by value. */
#define KEY_BEFORE(BEFORE, x, i, j) (BEFORE((x)[i], (x)[j]) || (!BEFORE((x)[j], (x)[i]) && (i) < (j)))

#define RUN 16

/* NAME_sort: the index array ix (n entries) sorted by the key: insertion sort of runs of
 * RUN, then merges between ix and tmp.  NAME_select: ix rearranged so that its first k
 * entries are the k first by the key (in some order): quickselect. */
#define ROW_SORT(NAME, T, BEFORE)                                                            \
    static void NAME##_sort(const T *x, int64_t *ix, int64_t *tmp, int64_t n)                 \
    {                                                                                        \
        for (int64_t lo = 0; lo < n; lo += RUN) {                                            \
            int64_t hi = lo + RUN < n ? lo + RUN : n;                                        \
            for (int64_t i = lo + 1; i < hi; i++) {                                          \
                int64_t v = ix[i], j = i;                                                    \
                while (j > lo && KEY_BEFORE(BEFORE, x, v, ix[j - 1])) { ix[j] = ix[j - 1]; j--; } \
                ix[j] = v;                                                                   \
            }                                                                                \
        }                                                                                    \
        int64_t *src = ix, *dst = tmp;                                                       \
        for (int64_t w = RUN; w < n; w *= 2) {                                               \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                                      \
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n; \
                int64_t i = lo, j = mid, k = lo;                                             \
                while (i < mid && j < hi) dst[k++] = KEY_BEFORE(BEFORE, x, src[j], src[i]) ? src[j++] : src[i++]; \
                while (i < mid) dst[k++] = src[i++];                                         \
                while (j < hi) dst[k++] = src[j++];                                          \
            }                                                                                \
            int64_t *t = src; src = dst; dst = t;                                            \
        }                                                                                    \
        if (src != ix) memcpy(ix, src, sizeof(int64_t) * (size_t)n);                         \
    }                                                                                        \
    static void NAME##_select(const T *x, int64_t *ix, int64_t n, int64_t k)                 \
    {                                                                                        \
        int64_t lo = 0, hi = n - 1, want = k - 1;                                            \
        while (lo < hi) {                                                                    \
            int64_t p = ix[lo + (hi - lo) / 2], i = lo, j = hi;                              \
            while (i <= j) {                                                                 \
                while (KEY_BEFORE(BEFORE, x, ix[i], p)) i++;                                 \
                while (KEY_BEFORE(BEFORE, x, p, ix[j])) j--;                                 \
                if (i <= j) { int64_t t = ix[i]; ix[i] = ix[j]; ix[j] = t; i++; j--; }       \
            }                                                                                \
            if (want <= j) hi = j;                                                           \
            else if (want >= i) lo = i;                                                      \
            else break;                                                                      \
        }                                                                                    \
    }
ROW_SORT(asc_f32, float, ASC_BEFORE)
ROW_SORT(desc_f32, float, DESC_BEFORE)
ROW_SORT(asc_f64, double, ASC_BEFORE)
ROW_SORT(desc_f64, double, DESC_BEFORE)
ROW_SORT(asc_i64, int64_t, ASC_BEFORE)
ROW_SORT(desc_i64, int64_t, DESC_BEFORE)
ROW_SORT(asc_b, uint8_t, ASC_BEFORE)
ROW_SORT(desc_b, uint8_t, DESC_BEFORE)

typedef struct {
    int dtype;
    int64_t n, k;
    const void *in;
    void *values;
    int64_t *indices;
    bool descending;
    int64_t *scratch;   /* 2 n per thread part */
} sort_job;

/* the first k of a row: the whole row sorted, or (k much smaller than n) the k first
 * selected, then sorted */
#define SORT_ROW(NAME, T)                                                                    \
    do {                                                                                     \
        if (k < n / 8) { NAME##_select((const T *)x, ix, n, k); NAME##_sort((const T *)x, ix, tmp, k); } \
        else NAME##_sort((const T *)x, ix, tmp, n);                                          \
    } while (0)

static void sort_range(void *c, int64_t lo, int64_t hi, int part)
{
    const sort_job *j = c;
    int64_t n = j->n, k = j->k, es = (int64_t)dp_dtype_size(j->dtype);
    int64_t *ix = j->scratch + (int64_t)part * 2 * n, *tmp = ix + n;
    bool d = j->descending;
    for (int64_t r = lo; r < hi; r++) {
        const char *x = (const char *)j->in + r * n * es;
        for (int64_t i = 0; i < n; i++) ix[i] = i;
        switch (j->dtype) {
        case DP_FLOAT32: if (d) SORT_ROW(desc_f32, float); else SORT_ROW(asc_f32, float); break;
        case DP_FLOAT64: if (d) SORT_ROW(desc_f64, double); else SORT_ROW(asc_f64, double); break;
        case DP_INT64: if (d) SORT_ROW(desc_i64, int64_t); else SORT_ROW(asc_i64, int64_t); break;
        default: if (d) SORT_ROW(desc_b, uint8_t); else SORT_ROW(asc_b, uint8_t); break;
        }
        char *v = (char *)j->values + r * k * es;
        int64_t *oi = j->indices + r * k;
        for (int64_t i = 0; i < k; i++) {
            memcpy(v + i * es, x + ix[i] * es, (size_t)es);
            oi[i] = ix[i];
        }
    }
}

int dp_cpu_sort_rows(dp_device dev, int dtype, int64_t rows, int64_t n, int64_t k, const void *in, void *values,
                     int64_t *indices, bool descending)
{
    if (k == 0 || rows == 0) return 0;
    int parts = dp_pool_threads() > 0 ? dp_pool_threads() : 1;
    if (dp_check_count(2 * n * parts, sizeof(int64_t), "sort")) return -1;
    int64_t *scratch = malloc(sizeof(int64_t) * (size_t)(2 * n * parts));
    if (!scratch) return dp_error("sort: out of memory");
    sort_job j = { dtype, n, k, in, values, indices, descending, scratch };
    dp_parallel(rows, row_grain(n), sort_range, &j);
    free(scratch);
    return 0;
}

/* ---------------------------------------------------------------- scans */

/* log(exp(a) + exp(b)) as PyTorch's _log_add_exp_helper: two equal infinities stay */
static double log_add_exp(double a, double b)
{
    double mn = a < b ? a : b, mx = a < b ? b : a;
    return (mn != mx || isfinite(mn)) ? mx + log1p(exp(mn - mx)) : a;
}

/* One row: x and out with element stride `step` (1, or -1 for a reverse scan starting at
 * the last element).  cummax/cummin take a new extreme on ties (the later index) and on
 * every NaN, as PyTorch's cummax_cummin_helper does. */
#define SCAN_ROW(NAME, T)                                                                     \
    static void NAME(int op, const T *x, T *out, int64_t *ix, int64_t n, bool reverse)        \
    {                                                                                         \
        int64_t i0 = reverse ? n - 1 : 0, step = reverse ? -1 : 1;                            \
        T acc = x[i0];                                                                        \
        int64_t at = i0;                                                                      \
        for (int64_t k = 0, i = i0; k < n; k++, i += step) {                                  \
            T v = x[i];                                                                       \
            switch (op) {                                                                     \
            case DP_CUMSUM: acc = k ? acc + v : v; break;                                     \
            case DP_CUMPROD: acc = k ? acc * v : v; break;                                    \
            case DP_CUMMAX: if (v != v || (acc == acc && v >= acc)) { acc = v; at = i; } break; \
            case DP_CUMMIN: if (v != v || (acc == acc && v <= acc)) { acc = v; at = i; } break; \
            default: acc = k ? (T)log_add_exp((double)v, (double)acc) : v; break;               \
            }                                                                                 \
            out[i] = acc;                                                                     \
            if (ix) ix[i] = at;                                                               \
        }                                                                                     \
    }
SCAN_ROW(scan_f32, float)
SCAN_ROW(scan_f64, double)
SCAN_ROW(scan_i64, int64_t)
SCAN_ROW(scan_b, uint8_t)

typedef struct {
    int op, dtype;
    int64_t n;
    const void *in;
    void *out;
    int64_t *indices;
    bool reverse;
} scan_job;

static void scan_range(void *c, int64_t lo, int64_t hi, int part)
{
    const scan_job *j = c;
    int64_t n = j->n, es = (int64_t)dp_dtype_size(j->dtype);
    for (int64_t r = lo; r < hi; r++) {
        const void *x = (const char *)j->in + r * n * es;
        void *o = (char *)j->out + r * n * es;
        int64_t *ix = j->indices ? j->indices + r * n : NULL;
        switch (j->dtype) {
        case DP_FLOAT32: scan_f32(j->op, x, o, ix, n, j->reverse); break;
        case DP_FLOAT64: scan_f64(j->op, x, o, ix, n, j->reverse); break;
        case DP_INT64: scan_i64(j->op, x, o, ix, n, j->reverse); break;
        default: scan_b(j->op, x, o, ix, n, j->reverse); break;
        }
    }
}

int dp_cpu_scan_rows(dp_device dev, int op, int dtype, int64_t rows, int64_t n, const void *in, void *out,
                     int64_t *indices, bool reverse)
{
    if (n == 0) return 0;
    scan_job j = { op, dtype, n, in, out, indices, reverse };
    dp_parallel(rows, row_grain(n), scan_range, &j);
    return 0;
}

/* ---------------------------------------------------------------- scatter-add */

#define SCATTER_ROWS(NAME, T)                                                               \
    static void NAME(int64_t lo, int64_t hi, int64_t n_src, int64_t n_out, const T *src,     \
                     const int64_t *idx, T *out)                                             \
    {                                                                                       \
        for (int64_t r = lo; r < hi; r++)                                                   \
            for (int64_t j = 0; j < n_src; j++) out[r * n_out + idx[r * n_src + j]] += src[r * n_src + j]; \
    }
SCATTER_ROWS(scatter_f32, float)
SCATTER_ROWS(scatter_f64, double)
SCATTER_ROWS(scatter_i64, int64_t)

typedef struct {
    int dtype;
    int64_t n_src, n_out;
    const void *src;
    const int64_t *idx;
    void *out;
} scatter_job;

static void scatter_range(void *c, int64_t lo, int64_t hi, int part)
{
    const scatter_job *j = c;
    switch (j->dtype) {
    case DP_FLOAT32: scatter_f32(lo, hi, j->n_src, j->n_out, j->src, j->idx, j->out); break;
    case DP_FLOAT64: scatter_f64(lo, hi, j->n_src, j->n_out, j->src, j->idx, j->out); break;
    default: scatter_i64(lo, hi, j->n_src, j->n_out, j->src, j->idx, j->out); break;
    }
}

int dp_cpu_scatter_add_rows(dp_device dev, int dtype, int64_t rows, int64_t n_src, int64_t n_out,
                            const void *src, const int64_t *idx, void *out)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64 && dtype != DP_INT64)
        return dp_error("scatter_add_rows: unsupported dtype %s", dp_dtype_name(dtype));
    scatter_job j = { dtype, n_src, n_out, src, idx, out };
    dp_parallel(rows, row_grain(n_src), scatter_range, &j);
    return 0;
}
