/* cpu_index.c: the CPU kernels of advanced indexing: a gather and a scatter (copy, add, multiply, max or min)
 * through element offsets the engine computed (index.c).  The gather runs on the thread
 * pool; the scatter runs on one thread, since offsets may repeat. */
#include <string.h>

#include "cpu.h"

typedef struct { int esize; } gather_ctx;

#define GATHER_LOOP(T)                                                          \
    for (int64_t i = 0; i < n; i++)                                             \
        ((T *)p[0])[i * s[0]] = ((const T *)p[1])[i * s[1] + off[i * s[2]]];

/* p[0] out, p[1] base (strided over the dims that are not indexed), p[2] the offsets */
static void gather_inner(void *c, int64_t n, char **p, const int64_t *s)
{
    int es = ((const gather_ctx *)c)->esize;
    const int64_t *off = (const int64_t *)p[2];
    if (s[0] == 1 && s[1] == 1 && s[2] == 0) {   /* a run of one indexed row: one copy */
        memcpy(p[0], p[1] + off[0] * es, (size_t)(n * es));
        return;
    }
    switch (es) {
    case 8: GATHER_LOOP(uint64_t) break;
    case 4: GATHER_LOOP(uint32_t) break;
    default: GATHER_LOOP(uint8_t) break;
    }
}

int dp_cpu_gather_offsets(const dp_view *out, const dp_view *base, const dp_view *offs)
{
    if (out->dtype != base->dtype || offs->dtype != DP_INT64)
        return dp_error("gather_offsets: dtypes differ");
    const dp_view *v[3] = { out, base, offs };
    iter_t it;
    iter_init(&it, 3, v);
    gather_ctx c = { (int)dp_dtype_size(out->dtype) };
    iter_run(&it, gather_inner, &c);
    return 0;
}

#define SCATTER_LOOP(T, STORE)                                                  \
    for (int64_t i = 0; i < n; i++) {                                           \
        T *d = (T *)b + (i * sb + off[i * sx]);                                 \
        T v = ((const T *)src)[i * ss];                                         \
        STORE;                                                                  \
    }

/* max and min propagate NaN, as PyTorch's amax and amin */
#define SCATTER_MODES(T)                                                        \
    switch (mode) {                                                             \
    case DP_SCATTER_COPY: SCATTER_LOOP(T, *d = v) break;                        \
    case DP_SCATTER_ADD: SCATTER_LOOP(T, *d += v) break;                        \
    case DP_SCATTER_MUL: SCATTER_LOOP(T, *d *= v) break;                        \
    case DP_SCATTER_MAX: SCATTER_LOOP(T, if (v > *d || v != v) *d = v) break;   \
    default: SCATTER_LOOP(T, if (v < *d || v != v) *d = v) break;               \
    }

/* one inner run: b the base, off the offsets, src the values, with their strides */
static void scatter_run(int dt, int mode, int64_t n, char *b, int64_t sb, const int64_t *off, int64_t sx,
                        const char *src, int64_t ss)
{
    switch (dt) {
    case DP_FLOAT32: SCATTER_MODES(float) break;
    case DP_FLOAT64: SCATTER_MODES(double) break;
    case DP_INT64: SCATTER_MODES(int64_t) break;
    default:   /* bool: add and max are "or", mul and min "and" */
        if (mode == DP_SCATTER_COPY) { SCATTER_LOOP(bool, *d = v) }
        else if (mode == DP_SCATTER_ADD || mode == DP_SCATTER_MAX) { SCATTER_LOOP(bool, *d = *d || v) }
        else { SCATTER_LOOP(bool, *d = *d && v) }
        break;
    }
}

int dp_cpu_scatter_offsets(const dp_view *base, const dp_view *offs, const dp_view *src, int mode)
{
    if (src->dtype != base->dtype || offs->dtype != DP_INT64)
        return dp_error("scatter_offsets: dtypes differ");
    const dp_view *v[3] = { src, base, offs };
    iter_t it;
    iter_init(&it, 3, v);
    for (int d = 0; d < it.ndim; d++)
        if (it.sizes[d] == 0) return 0;
    int nd = it.ndim;
    int64_t inner = it.sizes[nd - 1], outer = 1;
    for (int d = 0; d < nd - 1; d++) outer *= it.sizes[d];
    for (int64_t o = 0; o < outer; o++) {   /* in order, on this thread: later writes win */
        char *p[3];
        int64_t rem = o;
        for (int k = 0; k < 3; k++) p[k] = it.base[k];
        for (int d = nd - 2; d >= 0; d--) {
            int64_t i = rem % it.sizes[d];
            rem /= it.sizes[d];
            for (int k = 0; k < 3; k++) p[k] += i * it.strides[k][d] * it.esize[k];
        }
        scatter_run(base->dtype, mode, inner, p[1], it.strides[1][nd - 1], (const int64_t *)p[2],
                    it.strides[2][nd - 1], p[0], it.strides[0][nd - 1]);
    }
    return 0;
}
