/* multinomial.c: torch.multinomial, drawn on the host from a Philox stream (the weights are
 * read once; the draws are a binary search per sample, or one key per category). */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "philox.h"

/* The float64 uniforms of a stream, element e as in a float64 torch.rand from it: two per
 * Philox call (philox.h); the last call is kept, since the draws go through e in order. */
typedef struct { uint64_t seed, offset, call; double v[4]; } uniforms;

static double uniform(uniforms *u, uint64_t e)
{
    if (e / 2 != u->call) {
        u->call = e / 2;
        dp_rng_values(DP_RNG_UNIFORM, 1, u->seed, u->offset + u->call, 0, 1, u->v);
    }
    return u->v[e % 2];
}

typedef struct { double key; int64_t idx; } keyed;

static int by_key_desc(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* with replacement: n draws by inverting the row's cumulative weights */
static void draw_with(const double *w, int64_t C, int64_t n, uniforms *u, uint64_t e0, double *cdf, int64_t *out)
{
    double total = 0;
    int64_t last = 0;
    for (int64_t c = 0; c < C; c++) {
        total += w[c];
        cdf[c] = total;
        if (w[c] > 0) last = c;
    }
    for (int64_t j = 0; j < n; j++) {
        double x = uniform(u, e0 + (uint64_t)j) * total;
        int64_t lo = 0, hi = C;   /* the first c with cdf[c] > u */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] > x) hi = mid; else lo = mid + 1;
        }
        out[j] = lo < C ? lo : last;   /* u rounded up to total: the last category with weight */
    }
}

/* without replacement: the n largest keys log(u) / w (Efraimidis and Spirakis), which is
 * drawing one category at a time in proportion to the weights left */
static void draw_without(const double *w, int64_t C, int64_t n, uniforms *u, uint64_t e0, keyed *k, int64_t *out)
{
    int64_t m = 0;
    for (int64_t c = 0; c < C; c++) {
        if (!(w[c] > 0)) continue;
        double x = 1.0 - uniform(u, e0 + (uint64_t)c);   /* (0, 1] */
        k[m].key = log(x) / w[c];
        k[m].idx = c;
        m++;
    }
    qsort(k, (size_t)m, sizeof *k, by_key_desc);
    for (int64_t j = 0; j < n; j++) out[j] = k[j].idx;
}

dp_tensor *dp_multinomial(dp_tensor *probs, int64_t n, bool replacement, uint64_t seed, uint64_t offset)
{
    if (probs->ndim != 1 && probs->ndim != 2) { dp_error("multinomial: prob_dist must be 1 or 2 dim, got %d dims", probs->ndim); return NULL; }
    if (!dp_dtype_is_float(probs->dtype)) { dp_error("multinomial: only supports floating-point dtypes for input, got %s", dp_dtype_name(probs->dtype)); return NULL; }
    int64_t R = probs->ndim == 2 ? probs->sizes[0] : 1, C = probs->sizes[probs->ndim - 1];
    if (n <= 0) { dp_error("multinomial: cannot sample n_sample <= 0 samples (got %lld)", (long long)n); return NULL; }
    if (C == 0) { dp_error("multinomial: the probability rows are empty (0 categories)"); return NULL; }
    if (C > (1 << 24)) { dp_error("multinomial: number of categories cannot exceed 2^24, got %lld", (long long)C); return NULL; }
    if (!replacement && n > C) {
        dp_error("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement (%lld > %lld)",
                 (long long)n, (long long)C);
        return NULL;
    }
    if (dp_check_count(R * n, sizeof(int64_t), "multinomial")) return NULL;
    bool was = dp_grad_enabled();
    dp_set_grad_enabled(false);
    dp_tensor *host = dp_to(probs, dp_cpu(), DP_FLOAT64, false), *hc = host ? dp_contiguous(host) : NULL;
    dp_set_grad_enabled(was);
    dp_tensor_release(host);
    if (!hc) return NULL;
    int64_t osizes[2] = { R, n };
    dp_tensor *out = dp_empty(probs->ndim, probs->ndim == 2 ? osizes : &n, DP_INT64, dp_cpu());
    void *scratch = out ? malloc((size_t)C * (replacement ? sizeof(double) : sizeof(keyed))) : NULL;
    const double *w = dp_data(hc);
    int64_t *o = out ? dp_data(out) : NULL;
    int rc = out && scratch ? 0 : (out ? dp_error("out of memory") : -1);
    uniforms u = { seed, offset, UINT64_MAX, { 0 } };
    for (int64_t r = 0; r < R && !rc; r++) {
        const double *row = w + r * C;
        double total = 0;
        int64_t positive = 0;
        for (int64_t c = 0; c < C; c++) {
            if (!(row[c] >= 0) || isinf(row[c])) { rc = dp_error("multinomial: probability tensor contains either inf, nan or element < 0 (row %lld, category %lld: %g)", (long long)r + 1, (long long)c + 1, row[c]); break; }
            total += row[c];
            positive += row[c] > 0;
        }
        if (rc) break;
        if (!(total > 0)) { rc = dp_error("multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row %lld", (long long)r + 1); break; }
        if (!replacement && positive < n) {
            rc = dp_error("multinomial: invalid multinomial distribution (with replacement=False, not enough non-negative category to sample): "
                          "row %lld has %lld categories with a positive weight, %lld samples asked", (long long)r + 1, (long long)positive, (long long)n);
            break;
        }
        if (replacement) draw_with(row, C, n, &u, (uint64_t)(r * n), scratch, o + r * n);
        else draw_without(row, C, n, &u, (uint64_t)(r * C), scratch, o + r * n);
    }
    free(scratch);
    dp_tensor_release(hc);
    if (rc) { dp_tensor_release(out); return NULL; }
    if (dp_device_eq(probs->device, dp_cpu())) return out;
    dp_tensor *moved = dp_to(out, probs->device, DP_INT64, false);
    dp_tensor_release(out);
    return moved;
}
