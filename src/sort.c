/* sort.c: sorting and scanning along a dimension: sort, topk, kthvalue, median, mode,
 * and the inclusive scans (cumsum, cumprod, cummax, cummin, logcumsumexp), with their
 * backward.  The kernels work on contiguous rows (backend.h: sort_rows, scan_rows,
 * scatter_add_rows), so every op here moves its dimension last, makes the tensor
 * contiguous, runs the kernel and moves the dimension back.  The gradient of values picked
 * from the input (sorted, the top k, a median) is scattered back to where they came from. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "internal.h"

/* ---------------------------------------------------------------- layout */

/* t with dim swapped with the last dim, contiguous: rows of t->sizes[dim] elements */
static dp_tensor *to_rows(dp_tensor *t, int dim)
{
    dp_tensor *tr = dp_transpose(t, dim, t->ndim - 1);
    dp_tensor *c = tr ? dp_contiguous(tr) : NULL;
    dp_tensor_release(tr);
    return c;
}

/* the inverse of to_rows, contiguous again */
static dp_tensor *from_rows(dp_tensor *r, int dim)
{
    return to_rows(r, dim);
}

static int64_t rows_of(const dp_tensor *r)
{
    int64_t n = r->ndim ? r->sizes[r->ndim - 1] : 1;
    return n ? dp_numel(r) / n : 0;
}

static void *data_of(dp_tensor *t) { return dp_view_of(t).data; }

static int check_dim(const char *who, const dp_tensor *t, int dim)
{
    int nd = t->ndim ? t->ndim : 1;
    if (dim < 0 || dim >= nd)
        return dp_error("%s: dimension %d is out of range for a tensor with %d dimension%s (dplua counts dims from 1)",
                        who, dim + 1, t->ndim, t->ndim == 1 ? "" : "s");
    return 0;
}

/* A 0-dim tensor is worked on as one element of one dimension. */
static dp_tensor *at_least_1d(dp_tensor *t)
{
    if (t->ndim) return dp_alias(t);
    int64_t one = 1;
    return dp_reshape(t, 1, &one);
}

static dp_tensor *like_input(dp_tensor *r, const dp_tensor *t)
{
    if (!r || t->ndim) return r;
    dp_tensor *s = dp_reshape(r, 0, NULL);
    dp_tensor_release(r);
    return s;
}

/* ---------------------------------------------------------------- scatter-back */

/* zeros of (ndim, sizes) with src added at idx along dim (src and idx share a shape that
 * differs from sizes only along dim) */
static dp_tensor *scatter_back(dp_tensor *src, dp_tensor *idx, int dim, int ndim, const int64_t *sizes)
{
    if (ndim == 0) return dp_contiguous(src);
    dp_tensor *s = to_rows(src, dim), *ix = s ? to_rows(idx, dim) : NULL, *out = NULL, *res = NULL;
    int64_t osz[DP_MAX_DIMS];
    memcpy(osz, sizes, sizeof(int64_t) * (size_t)ndim);
    osz[dim] = sizes[ndim - 1];
    osz[ndim - 1] = sizes[dim];
    if (ix) out = dp_zeros(ndim, osz, src->dtype, src->device);
    if (out && dp_numel(s)) {
        int64_t n_src = s->sizes[ndim - 1];
        if (dp_backend_for(src->device)->scatter_add_rows(src->device, src->dtype, rows_of(s), n_src, sizes[dim],
                                                          data_of(s), data_of(ix), data_of(out)))
            goto done;
    }
    if (out) res = from_rows(out, dim);
done:
    dp_tensor_release(s); dp_tensor_release(ix); dp_tensor_release(out);
    return res;
}

/* Backward of picked values: ip[0] the dim, ip[1] whether the dim was squeezed away;
 * saved[0] the 0-based indices with the dim kept. */
static int pick_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *idx = dp_saved(n, 0);
    if (!idx) return -1;
    int dim = (int)n->ip[0];
    dp_tensor *g2 = n->ip[1] ? dp_unsqueeze(g, dim) : dp_alias(g);
    if (!g2) return -1;
    gin[0] = NO_GRAD(scatter_back(g2, idx, dim, n->in[0].ndim, n->in[0].sizes));
    dp_tensor_release(g2);
    return gin[0] ? 0 : -1;
}

static int record_pick(const char *name, dp_tensor *t, dp_tensor *out, dp_tensor *idx_kept, int dim, bool squeezed)
{
    dp_node *node = dp_node_new(name, pick_backward, 1, &t);
    if (!node) return -1;
    node->ip[0] = dim;
    node->ip[1] = squeezed;
    dp_node_save(node, 0, idx_kept);
    dp_attach(out, node);
    return 0;
}

/* The values v and indices ix of a sort along dim of t (or of a slice of it) handed out:
 * back to 0-dim for a 0-dim t, the node recorded on what the caller gets. */
static dp_tensor *finish_pick(const char *name, dp_tensor *t, dp_tensor *v, dp_tensor *ix, int dim, dp_tensor **indices)
{
    dp_tensor *vo = NO_GRAD(like_input(v, t)), *io = vo ? NO_GRAD(like_input(ix, t)) : (dp_tensor_release(ix), NULL);
    if (vo && dp_needs_grad(1, &t) && record_pick(name, t, vo, io, dim, false)) {
        dp_tensor_release(vo); vo = NULL;
    }
    if (!vo) { dp_tensor_release(io); io = NULL; }
    if (indices) *indices = io; else dp_tensor_release(io);
    return vo;
}

/* ---------------------------------------------------------------- sort */

/* the first k sorted values and their indices along dim of a tensor with at least one
 * dimension (k < 0: all), no autograd */
static dp_tensor *sort_raw(dp_tensor *t, int dim, bool descending, int64_t k, dp_tensor **indices)
{
    *indices = NULL;
    dp_tensor *x = to_rows(t, dim), *v = NULL, *ix = NULL;
    if (!x) return NULL;
    int64_t n = x->sizes[x->ndim - 1], sz[DP_MAX_DIMS];
    memcpy(sz, x->sizes, sizeof sz);
    sz[x->ndim - 1] = k = k < 0 ? n : k;
    v = dp_empty(x->ndim, sz, x->dtype, x->device);
    ix = v ? dp_empty(x->ndim, sz, DP_INT64, x->device) : NULL;
    if (ix && dp_numel(v) &&
        dp_backend_for(x->device)->sort_rows(x->device, x->dtype, rows_of(x), n, k, data_of(x), data_of(v),
                                             data_of(ix), descending)) {
        dp_tensor_release(ix);
        ix = NULL;
    }
    dp_tensor *vo = ix ? from_rows(v, dim) : NULL, *io = vo ? from_rows(ix, dim) : NULL;
    dp_tensor_release(x); dp_tensor_release(v); dp_tensor_release(ix);
    if (!io) { dp_tensor_release(vo); return NULL; }
    *indices = io;
    return vo;
}

dp_tensor *dp_sort(dp_tensor *t, int dim, bool descending, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if (check_dim("sort", t, dim)) return NULL;
    dp_tensor *x = NO_GRAD(at_least_1d(t)), *ix = NULL;
    dp_tensor *v = x ? NO_GRAD(sort_raw(x, dim, descending, -1, &ix)) : NULL;
    dp_tensor_release(x);
    return finish_pick("SortBackward0", t, v, ix, dim, indices);
}

/* position `at` of the sorted values along dim (kept as size 1), contiguous */
static dp_tensor *sorted_at(dp_tensor *t, int dim, bool descending, int64_t at, dp_tensor **indices)
{
    dp_tensor *ix = NULL, *v = sort_raw(t, dim, descending, at + 1, &ix);
    dp_tensor *vn = v ? dp_narrow(v, dim, at, 1) : NULL, *in = vn ? dp_narrow(ix, dim, at, 1) : NULL;
    dp_tensor *vc = in ? dp_contiguous(vn) : NULL, *ic = vc ? dp_contiguous(in) : NULL;
    dp_tensor_release(v); dp_tensor_release(ix); dp_tensor_release(vn); dp_tensor_release(in);
    if (!ic) { dp_tensor_release(vc); *indices = NULL; return NULL; }
    *indices = ic;
    return vc;
}

dp_tensor *dp_topk(dp_tensor *t, int64_t k, int dim, bool largest, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if (check_dim("topk", t, dim)) return NULL;
    int64_t n = t->ndim ? t->sizes[dim] : 1;
    if (k < 0 || k > n) {
        dp_error("topk: k (%lld) is out of range for dimension %d of size %lld (k must be between 0 and %lld)",
                 (long long)k, dim + 1, (long long)n, (long long)n);
        return NULL;
    }
    dp_tensor *x = NO_GRAD(at_least_1d(t)), *ix = NULL;
    dp_tensor *v = x ? NO_GRAD(sort_raw(x, dim, largest, k, &ix)) : NULL;
    dp_tensor_release(x);
    return finish_pick("TopkBackward0", t, v, ix, dim, indices);
}

/* The element at a per-row position pos (int64, dim kept as size 1) of the sorted rows:
 * a one-hot mask along dim picks it, and a reduction over the masked row reads it out (the
 * maximum over -inf elsewhere for floats, so that -0 and NaN come out as they are; the sum
 * over zeros elsewhere for integers). */
static dp_tensor *pick_at(dp_tensor *sorted, dp_tensor *pos, int dim)
{
    int64_t n = sorted->sizes[dim];
    int64_t shape[DP_MAX_DIMS];
    for (int d = 0; d < sorted->ndim; d++) shape[d] = d == dim ? n : 1;
    bool fl = dp_dtype_is_float(sorted->dtype);
    dp_tensor *ar = dp_arange(0, (double)n, 1, DP_INT64, sorted->device);
    dp_tensor *arv = ar ? dp_view_sizes(ar, sorted->ndim, shape) : NULL;
    dp_tensor *mask = arv ? dp_binary(DP_EQ, arv, pos) : NULL;
    dp_tensor *fill = mask ? dp_full(0, NULL, fl ? -INFINITY : 0, sorted->dtype, sorted->device) : NULL;
    dp_tensor *w = fill ? dp_where(mask, sorted, fill) : NULL;
    dp_tensor *r = w ? dp_reduce(fl ? DP_MAX : DP_SUM, w, dim, true, NULL) : NULL;
    dp_tensor_release(ar); dp_tensor_release(arv); dp_tensor_release(mask); dp_tensor_release(fill);
    dp_tensor_release(w);
    return r;
}

/* Values and indices with dim kept (size 1) handed out as keepdim says, the node recorded
 * on what the caller gets (it saves the kept indices). */
static dp_tensor *finish_reduced(const char *name, dp_tensor *t, dp_tensor *v, dp_tensor *ix, int dim, bool keepdim,
                                 dp_tensor **indices)
{
    dp_tensor *vo = NULL, *io = NULL;
    bool squeeze = !keepdim || !t->ndim;
    if (v && ix) {
        vo = squeeze ? NO_GRAD(dp_squeeze(v, dim)) : dp_alias(v);
        io = vo ? (squeeze ? NO_GRAD(dp_squeeze(ix, dim)) : dp_alias(ix)) : NULL;
    }
    if (io && dp_needs_grad(1, &t) && record_pick(name, t, vo, ix, dim, squeeze && t->ndim)) {
        dp_tensor_release(io); io = NULL;
    }
    if (!io) { dp_tensor_release(vo); vo = NULL; }
    dp_tensor_release(v); dp_tensor_release(ix);
    if (indices) *indices = io; else dp_tensor_release(io);
    return vo;
}

/* kthvalue and median along dim: the value at position pos (per row) of the ascending
 * sort, with its index; pos is a number (k - 1) or, for the median, per row */
static dp_tensor *pick_sorted(const char *node_name, dp_tensor *t, int dim, bool keepdim, dp_tensor *pos,
                              int64_t k0, dp_tensor **indices)
{
    dp_tensor *x = NO_GRAD(at_least_1d(t)), *ix = NULL, *v = NULL;
    bool was = dp_grad_enabled();
    dp_set_grad_enabled(false);
    if (x && !pos) v = sorted_at(x, dim, false, k0, &ix);
    else if (x) {
        dp_tensor *sv = sort_raw(x, dim, false, -1, &ix), *si = ix;
        v = sv ? pick_at(sv, pos, dim) : NULL;
        ix = v ? pick_at(si, pos, dim) : NULL;
        if (!ix) { dp_tensor_release(v); v = NULL; }
        dp_tensor_release(sv); dp_tensor_release(si);
    }
    dp_set_grad_enabled(was);
    dp_tensor_release(x);
    return finish_reduced(node_name, t, v, ix, dim, keepdim, indices);
}

dp_tensor *dp_kthvalue(dp_tensor *t, int64_t k, int dim, bool keepdim, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if (check_dim("kthvalue", t, dim)) return NULL;
    int64_t n = t->ndim ? t->sizes[dim] : 1;
    if (k < 1 || k > n) {
        dp_error("kthvalue: k (%lld) is out of range for dimension %d of size %lld (k counts from 1)",
                 (long long)k, dim + 1, (long long)n);
        return NULL;
    }
    return pick_sorted("KthvalueBackward0", t, dim, keepdim, NULL, k - 1, indices);
}

/* Backward of the median of everything: shared evenly between the elements equal to it
 * (NaN equal to NaN), as PyTorch's evenly_distribute_backward. */
static int median_all_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *x = dp_saved(n, 0), *r = dp_saved(n, 1);
    if (!x || !r) return -1;
    dp_tensor *eq = dp_binary(DP_EQ, x, r), *xn = dp_binary(DP_NE, x, x), *rn = dp_binary(DP_NE, r, r);
    dp_tensor *nans = xn && rn ? dp_binary(DP_MUL, xn, rn) : NULL;
    dp_tensor *mask = eq && nans ? dp_binary(DP_ADD, eq, nans) : NULL;
    dp_tensor *cnt = mask ? dp_reduce(DP_SUM, mask, -1, false, NULL) : NULL;
    dp_tensor *val = cnt ? dp_binary(DP_DIV, g, cnt) : NULL;
    dp_tensor *zero = val ? dp_zeros(0, NULL, val->dtype, val->device) : NULL;
    gin[0] = zero ? dp_where(mask, val, zero) : NULL;
    dp_tensor_release(eq); dp_tensor_release(xn); dp_tensor_release(rn); dp_tensor_release(nans);
    dp_tensor_release(mask); dp_tensor_release(cnt); dp_tensor_release(val); dp_tensor_release(zero);
    return gin[0] ? 0 : -1;
}

dp_tensor *dp_median(dp_tensor *t, int dim, bool keepdim, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if (t->dtype == DP_BOOL) { dp_error("median: bool tensors are not supported, as in PyTorch"); return NULL; }
    if (dim < 0) {
        if (dp_numel(t) == 0) { dp_error("median() input tensor cannot be empty"); return NULL; }
        int64_t n = dp_numel(t);
        dp_tensor *c = NO_GRAD(dp_contiguous(t)), *flat = c ? NO_GRAD(dp_reshape(c, 1, &n)) : NULL;
        dp_tensor *m = flat ? NO_GRAD(dp_median(flat, 0, false, NULL)) : NULL;
        dp_tensor_release(c); dp_tensor_release(flat);
        if (m && dp_needs_grad(1, &t)) {
            dp_node *node = dp_node_new("MedianBackward0", median_all_backward, 1, &t);
            if (!node) { dp_tensor_release(m); return NULL; }
            dp_node_save(node, 0, t);
            dp_node_save(node, 1, m);
            dp_attach(m, node);
        }
        return m;
    }
    if (check_dim("median", t, dim)) return NULL;
    int64_t n = t->ndim ? t->sizes[dim] : 1;
    if (n == 0) { dp_error("median: expected a non-empty dimension %d", dim + 1); return NULL; }
    /* the lower median's position, or the first NaN's (the NaNs sort last, in order) */
    bool was = dp_grad_enabled();
    dp_set_grad_enabled(false);
    dp_tensor *x = at_least_1d(t);
    dp_tensor *isnan = x ? dp_binary(DP_NE, x, x) : NULL;
    dp_tensor *cnt = isnan ? dp_reduce(DP_SUM, isnan, dim, true, NULL) : NULL;
    dp_tensor *has = cnt ? dp_binary_scalar(DP_GT, cnt, 0, false) : NULL;
    dp_tensor *first = has ? dp_binary_scalar(DP_SUB, cnt, (double)n, true) : NULL;
    dp_tensor *mid = first ? dp_full(0, NULL, (double)((n - 1) / 2), DP_INT64, t->device) : NULL;
    dp_tensor *pos = mid ? dp_where(has, first, mid) : NULL;
    dp_set_grad_enabled(was);
    dp_tensor *r = pos ? pick_sorted("MedianBackward1", t, dim, keepdim, pos, 0, indices) : NULL;
    dp_tensor_release(x); dp_tensor_release(isnan); dp_tensor_release(cnt); dp_tensor_release(has);
    dp_tensor_release(first); dp_tensor_release(mid); dp_tensor_release(pos);
    return r;
}

/* whether two sorted elements belong to one run of mode: floats compare as numbers (-0
 * equals 0, a NaN equals nothing, as PyTorch's kernel compares), integers and bools bit
 * for bit */
static bool mode_same(int dtype, const char *a, const char *b, int64_t es)
{
    switch (dtype) {
    case DP_FLOAT32: return *(const float *)a == *(const float *)b;
    case DP_FLOAT64: return *(const double *)a == *(const double *)b;
    case DP_FLOAT16: return dp_f16_to_float(*(const uint16_t *)a) == dp_f16_to_float(*(const uint16_t *)b);
    case DP_BFLOAT16: return dp_bf16_to_float(*(const uint16_t *)a) == dp_bf16_to_float(*(const uint16_t *)b);
    default: return !memcmp(a, b, (size_t)es);
    }
}

/* mode: on the host (rows sorted ascending, NaNs last; the longest run wins, the first such
 * run on ties, i.e. the smallest value; its index is the run's last occurrence, as
 * PyTorch's CPU kernel gives, and the value the element there, so that of -0 and 0 the one
 * at that index comes back).  A NaN is a run of its own: the mode is NaN only when every
 * element is.  (PyTorch 1.13 sorts NaNs with a comparison that is no ordering, and can
 * return NaN for {NaN, 1, NaN, 1, 2}; the mode there is 1.) */
static int mode_rows(int dtype, int64_t rows, int64_t n, const void *x, void *val, int64_t *idx)
{
    int64_t es = (int64_t)dp_dtype_size(dtype);
    if (dp_check_count(rows * n, sizeof(int64_t) + (size_t)es, "mode")) return -1;
    char *sv = malloc((size_t)(rows * n * es) + 1);
    int64_t *si = malloc(sizeof(int64_t) * (size_t)(rows * n) + 1);
    int rc = -1;
    if (!sv || !si) { dp_error("mode: out of memory"); goto done; }
    if (dp_backend_for(dp_cpu())->sort_rows(dp_cpu(), dtype, rows, n, n, x, sv, si, false)) goto done;
    for (int64_t r = 0; r < rows; r++) {
        const char *v = sv + r * n * es;
        const int64_t *ix = si + r * n;
        int64_t best = 0, best_len = 0, best_at = 0;
        for (int64_t i = 0; i < n;) {
            int64_t j = i + 1, last = ix[i], last_pos = i;
            while (j < n && mode_same(dtype, v + j * es, v + i * es, es)) {
                if (ix[j] > last) { last = ix[j]; last_pos = j; }
                j++;
            }
            if (j - i > best_len) { best_len = j - i; best = last_pos; best_at = last; }
            i = j;
        }
        memcpy((char *)val + r * es, v + best * es, (size_t)es);
        idx[r] = best_at;
    }
    rc = 0;
done:
    free(sv); free(si);
    return rc;
}

dp_tensor *dp_mode(dp_tensor *t, int dim, bool keepdim, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if (check_dim("mode", t, dim)) return NULL;
    int64_t n = t->ndim ? t->sizes[dim] : 1;
    if (n == 0) { dp_error("mode: expected a non-empty dimension %d", dim + 1); return NULL; }
    bool was = dp_grad_enabled();
    dp_set_grad_enabled(false);
    dp_tensor *x = at_least_1d(t), *h = x ? dp_to(x, dp_cpu(), x->dtype, false) : NULL;
    dp_tensor *rws = h ? to_rows(h, dim) : NULL, *v = NULL, *ix = NULL;
    if (rws) {
        int64_t sz[DP_MAX_DIMS];
        memcpy(sz, rws->sizes, sizeof sz);
        sz[rws->ndim - 1] = 1;
        v = dp_empty(rws->ndim, sz, rws->dtype, rws->device);
        ix = v ? dp_empty(rws->ndim, sz, DP_INT64, rws->device) : NULL;
        if (ix && dp_numel(v) && mode_rows(rws->dtype, rows_of(rws), n, data_of(rws), data_of(v), data_of(ix))) {
            dp_tensor_release(ix); ix = NULL;
        }
    }
    dp_tensor *vb = ix ? from_rows(v, dim) : NULL, *ib = vb ? from_rows(ix, dim) : NULL;
    dp_tensor *vd = ib ? dp_to(vb, t->device, t->dtype, false) : NULL, *id = vd ? dp_to(ib, t->device, DP_INT64, false) : NULL;
    dp_set_grad_enabled(was);
    dp_tensor_release(x); dp_tensor_release(h); dp_tensor_release(rws); dp_tensor_release(v); dp_tensor_release(ix);
    dp_tensor_release(vb); dp_tensor_release(ib);
    return finish_reduced("ModeBackward0", t, vd, id, dim, keepdim, indices);
}

/* ---------------------------------------------------------------- scans */

static const char *const scan_names[DP_NSCAN] = { "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp" };
static const char *const scan_nodes[DP_NSCAN] = { "CumsumBackward0", "CumprodBackward0", "CummaxBackward0",
                                                  "CumminBackward0", "LogcumsumexpBackward0" };

/* the scan of x (at least 1-D, the output dtype already), no autograd */
static dp_tensor *scan_raw(dp_scan_op op, dp_tensor *x, int dim, bool reverse, dp_tensor **indices)
{
    bool want_idx = op == DP_CUMMAX || op == DP_CUMMIN;
    dp_tensor *r = to_rows(x, dim), *out = NULL, *ix = NULL, *res = NULL, *ires = NULL;
    if (!r) return NULL;
    out = dp_empty(r->ndim, r->sizes, r->dtype, r->device);
    if (out && want_idx) ix = dp_empty(r->ndim, r->sizes, DP_INT64, r->device);
    if (!out || (want_idx && !ix)) goto done;
    if (dp_numel(r) && dp_backend_for(r->device)->scan_rows(r->device, op, r->dtype, rows_of(r), r->sizes[r->ndim - 1],
                                                            data_of(r), data_of(out), ix ? data_of(ix) : NULL, reverse))
        goto done;
    res = from_rows(out, dim);
    if (res && ix) {
        ires = from_rows(ix, dim);
        if (!ires) { dp_tensor_release(res); res = NULL; }
    }
done:
    dp_tensor_release(r); dp_tensor_release(out); dp_tensor_release(ix);
    if (indices) *indices = ires; else dp_tensor_release(ires);
    return res;
}

/* Releases the n tensors of ts (NULL entries are fine). */
static void release_all(dp_tensor **ts, int n) { for (int i = 0; i < n; i++) dp_tensor_release(ts[i]); }

/* cumprod's gradient as PyTorch's cumprod_backward computes it (one element along dim:
 * g itself).  Before the first zero z1 of a row, rcumsum(g * y) / x, the sum taken over
 * the positions before z1 only; at z1, the product of x before it times the sum over the
 * row of g * q, where g is kept on [z1, z2) (z2 the second zero) and q is the cumprod of x
 * kept on (z1, z2), 1 elsewhere; after z1, 0.  The positions left out are left out, not
 * multiplied by 0, so that a NaN or inf there does not reach the others (x = {0, NaN, 2}
 * with g = {1, 0, 0} gives {NaN, 0, 0}, as PyTorch). */
static dp_tensor *cumprod_grad(dp_tensor *g, dp_tensor *x, dp_tensor *y, int dim, bool reverse)
{
    if (dp_numel(x) <= 1 || (x->ndim && x->sizes[dim] == 1)) { dp_tensor_retain(g); return g; }
    enum { GY, Z, ZC, P0, Z1, FIRSTZ, NOTF, MID, ZERO, ONE, W0, RG0, FAST, XP, PRE, XQ, Q, GZ, GQ, S, AT, SLOW, NT };
    dp_tensor *v[NT] = { 0 };
    v[GY] = dp_binary(DP_MUL, g, y);
    v[Z] = v[GY] ? dp_binary_scalar(DP_EQ, x, 0, false) : NULL;
    v[ZC] = v[Z] ? NO_GRAD(dp_scan(DP_CUMSUM, v[Z], dim, reverse, NULL)) : NULL;
    v[P0] = v[ZC] ? dp_binary_scalar(DP_EQ, v[ZC], 0, false) : NULL;
    v[Z1] = v[P0] ? dp_binary_scalar(DP_EQ, v[ZC], 1, false) : NULL;
    v[FIRSTZ] = v[Z1] ? dp_binary(DP_MUL, v[Z1], v[Z]) : NULL;        /* bool * bool: and */
    v[NOTF] = v[FIRSTZ] ? dp_binary_scalar(DP_EQ, v[FIRSTZ], 0, false) : NULL;
    v[MID] = v[NOTF] ? dp_binary(DP_MUL, v[Z1], v[NOTF]) : NULL;      /* (z1, z2) */
    v[ZERO] = v[MID] ? dp_zeros(0, NULL, x->dtype, x->device) : NULL;
    v[ONE] = v[ZERO] ? dp_ones(0, NULL, x->dtype, x->device) : NULL;
    v[W0] = v[ONE] ? dp_where(v[P0], v[GY], v[ZERO]) : NULL;
    v[RG0] = v[W0] ? dp_scan(DP_CUMSUM, v[W0], dim, !reverse, NULL) : NULL;
    v[FAST] = v[RG0] ? dp_binary(DP_DIV, v[RG0], x) : NULL;
    v[XP] = v[FAST] ? dp_where(v[P0], x, v[ONE]) : NULL;
    v[PRE] = v[XP] ? dp_scan(DP_CUMPROD, v[XP], dim, reverse, NULL) : NULL;   /* at z1: prod of x before it */
    v[XQ] = v[PRE] ? dp_where(v[MID], x, v[ONE]) : NULL;
    v[Q] = v[XQ] ? dp_scan(DP_CUMPROD, v[XQ], dim, reverse, NULL) : NULL;
    v[GZ] = v[Q] ? dp_where(v[Z1], g, v[ZERO]) : NULL;
    v[GQ] = v[GZ] ? dp_binary(DP_MUL, v[GZ], v[Q]) : NULL;
    v[S] = v[GQ] ? dp_reduce(DP_SUM, v[GQ], dim, true, NULL) : NULL;
    v[AT] = v[S] ? dp_binary(DP_MUL, v[PRE], v[S]) : NULL;
    v[SLOW] = v[AT] ? dp_where(v[FIRSTZ], v[AT], v[ZERO]) : NULL;
    dp_tensor *r = v[SLOW] ? dp_where(v[P0], v[FAST], v[SLOW]) : NULL;
    release_all(v, NT);
    return r;
}

/* logcumsumexp's gradient: sum over j >= i of g[j] exp(x[i] - y[j]), the sum taken in the
 * log domain for the positive and the negative parts of g separately */
static dp_tensor *logcumsumexp_grad(dp_tensor *g, dp_tensor *x, dp_tensor *y, int dim, bool reverse)
{
    enum { LG, GN, LP, LN, SP, SN, EP, EN, NT };
    dp_tensor *v[NT] = { 0 };
    /* log|g| - y, with the parts of the other sign at -inf */
    v[LG] = dp_unary(DP_LOG, g, 0, 0);                       /* NaN where g < 0 */
    dp_tensor *ng = v[LG] ? dp_unary(DP_NEG, g, 0, 0) : NULL;
    v[GN] = ng ? dp_unary(DP_LOG, ng, 0, 0) : NULL;
    dp_tensor_release(ng);
    dp_tensor *ninf = v[GN] ? dp_full(0, NULL, -INFINITY, x->dtype, x->device) : NULL;
    dp_tensor *pos = ninf ? dp_binary_scalar(DP_GT, g, 0, false) : NULL, *neg = pos ? dp_binary_scalar(DP_LT, g, 0, false) : NULL;
    dp_tensor *lp = neg ? dp_where(pos, v[LG], ninf) : NULL, *ln = lp ? dp_where(neg, v[GN], ninf) : NULL;
    v[LP] = ln ? dp_binary(DP_SUB, lp, y) : NULL;
    v[LN] = v[LP] ? dp_binary(DP_SUB, ln, y) : NULL;
    dp_tensor_release(ninf); dp_tensor_release(pos); dp_tensor_release(neg); dp_tensor_release(lp); dp_tensor_release(ln);
    v[SP] = v[LN] ? dp_scan(DP_LOGCUMSUMEXP, v[LP], dim, !reverse, NULL) : NULL;
    v[SN] = v[SP] ? dp_scan(DP_LOGCUMSUMEXP, v[LN], dim, !reverse, NULL) : NULL;
    dp_tensor *ap = v[SN] ? dp_binary(DP_ADD, v[SP], x) : NULL, *an = ap ? dp_binary(DP_ADD, v[SN], x) : NULL;
    v[EP] = an ? dp_unary(DP_EXP, ap, 0, 0) : NULL;
    v[EN] = v[EP] ? dp_unary(DP_EXP, an, 0, 0) : NULL;
    dp_tensor_release(ap); dp_tensor_release(an);
    dp_tensor *r = v[EN] ? dp_binary(DP_SUB, v[EP], v[EN]) : NULL;
    release_all(v, NT);
    return r;
}

/* ip[0] the op, ip[1] the dim, ip[2] reverse; saved: 0 the input, 1 the result (cumprod,
 * logcumsumexp) or the indices (cummax, cummin) */
static int scan_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_scan_op op = (dp_scan_op)n->ip[0];
    int dim = (int)n->ip[1];
    bool reverse = n->ip[2];
    if (op == DP_CUMSUM) {
        gin[0] = n->in[0].ndim ? dp_scan(DP_CUMSUM, g, dim, !reverse, NULL) : dp_alias(g);
        return gin[0] ? 0 : -1;
    }
    dp_tensor *a = dp_saved(n, 0), *b = dp_saved(n, 1);
    if (!a || !b) return -1;
    if (op == DP_CUMMAX || op == DP_CUMMIN) gin[0] = NO_GRAD(scatter_back(g, b, dim, n->in[0].ndim, n->in[0].sizes));
    else if (n->in[0].ndim == 0) gin[0] = dp_alias(g);   /* the scan of one element is itself */
    else if (op == DP_CUMPROD) gin[0] = cumprod_grad(g, a, b, dim, reverse);
    else gin[0] = logcumsumexp_grad(g, a, b, dim, reverse);
    return gin[0] ? 0 : -1;
}

dp_tensor *dp_scan(dp_scan_op op, dp_tensor *t, int dim, bool reverse, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if ((unsigned)op >= DP_NSCAN) { dp_error("invalid scan %d", (int)op); return NULL; }
    const char *who = scan_names[op];
    if (check_dim(who, t, dim)) return NULL;
    if (op == DP_LOGCUMSUMEXP && !dp_dtype_is_float(t->dtype)) {
        dp_error("logcumsumexp: expected a floating point tensor, got %s", dp_dtype_name(t->dtype));
        return NULL;
    }
    dp_dtype ot = (op == DP_CUMSUM || op == DP_CUMPROD) && !dp_dtype_is_float(t->dtype) ? DP_INT64 : t->dtype;
    bool was = dp_grad_enabled();
    dp_set_grad_enabled(false);
    dp_tensor *x1 = at_least_1d(t), *x = x1 ? dp_to(x1, t->device, ot, false) : NULL, *ix = NULL;
    dp_tensor *out = x ? scan_raw(op, x, dim, reverse, &ix) : NULL;
    dp_set_grad_enabled(was);
    dp_tensor_release(x1);
    dp_tensor_release(x);
    out = NO_GRAD(like_input(out, t));
    ix = out ? NO_GRAD(like_input(ix, t)) : (dp_tensor_release(ix), NULL);
    if (out && dp_needs_grad(1, &t)) {
        dp_node *node = dp_node_new(scan_nodes[op], scan_backward, 1, &t);
        if (!node) { dp_tensor_release(out); dp_tensor_release(ix); return NULL; }
        node->ip[0] = op;
        node->ip[1] = dim;
        node->ip[2] = reverse;
        if (op != DP_CUMSUM) {
            dp_node_save(node, 0, t);
            dp_node_save(node, 1, ix ? ix : out);
        }
        dp_attach(out, node);
    }
    if (indices) *indices = ix; else dp_tensor_release(ix);
    return out;
}
