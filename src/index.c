/* index.c: PyTorch's advanced indexing (t[idx], t[mask], t[{i1, i2}]), index_put, gather,
 * scatter and nonzero.  The indices are turned into element offsets and the backend
 * gathers or scatters through them (gather_offsets, scatter_offsets).  The offsets cover
 * only the broadcast index shape: the dims that are not indexed are walked by strides.
 * On the CPU (and for indices on another device) the indices are read to the host once,
 * checked there (a bad index is an error before any kernel runs) and broadcast.  On a
 * device with index_offsets (CUDA) they stay there: its kernel computes the offsets and
 * checks the indices, and a bad one is reported at the next synchronisation, as PyTorch's
 * device-side asserts, instead of stalling the stream on every call.  A bool mask is the
 * exception: the number of its true elements is the result's size, so it is read to the
 * host (one synchronisation, as PyTorch's nonzero).
 *
 * Index values count from `base` (0 for the engine's callers, 1 from Lua); negative values
 * count from the end in both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Where the result's dims come from: a dim of the indexed tensor, or (vdim -1) one of the
 * broadcast index shape, in order. */
typedef struct {
    int ndim;
    int64_t sizes[DP_MAX_DIMS];
    int vdim[DP_MAX_DIMS];
} layout;

/* The indices of one t[indices], checked, 0-based, broadcast to one shape. */
typedef struct {
    layout out;
    int nidx;                          /* indexed dims of t */
    int dims[DP_MAX_DIMS];             /* which, in order */
    int64_t *vals[DP_MAX_DIMS];        /* their indices, bnumel each (host) */
    int bnd;                           /* the broadcast index shape */
    int64_t bsizes[DP_MAX_DIMS];
    int64_t bnumel;
    /* on a device with index_offsets, instead of vals: each indexed dim's index tensor (as
     * given, counted from ibase; NULL: the coordinate along dim coord of the index shape) */
    bool on_device;
    dp_tensor *ix[DP_MAX_DIMS];
    int ibase[DP_MAX_DIMS];
    int coord[DP_MAX_DIMS];
} plan;

static void plan_free(plan *p)
{
    for (int k = 0; k < p->nidx; k++) {
        free(p->vals[k]);
        dp_tensor_release(p->ix[k]);
    }
    p->nidx = 0;
}

/* Whether t's indices (NULL ones aside) are checked and turned into offsets on t's device. */
static bool offsets_on_device(dp_tensor *t, int n, dp_tensor *const *indices)
{
    if (t->device.type == DP_DEVICE_CPU) return false;
    const dp_backend *be = dp_backend_for(t->device);
    if (!be || !be->index_offsets) return false;
    for (int k = 0; k < n; k++)
        if (indices[k] && !dp_device_eq(indices[k]->device, t->device)) return false;
    return true;
}

static int64_t *alloc_i64(int64_t n)
{
    if (dp_check_count(n, sizeof(int64_t), "indices")) return NULL;
    int64_t *h = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!h) dp_error("out of memory");
    return h;
}

static int range_error(int64_t v, int dim, int64_t size, int base)
{
    return dp_error("index %lld is out of range for dimension %d with size %lld%s", (long long)v, dim + 1,
                    (long long)size, base == 1 ? " (dplua counts from 1)" : "");
}

/* gather's and scatter's message for an index out of range: they take no negative ones */
#define NONNEG_RANGE_MSG(base) ((base) == 1 \
    ? "%s: index %lld is out of range for dimension %d with size %lld (dplua counts from 1; %s takes no negative indices)" \
    : "%s: index %lld is out of range for dimension %d with size %lld (%s takes no negative indices)")

/* An int64 index tensor for dim `dim` of size `size`, on the host, 0-based and checked.
 * Negative values count from the end, unless nonneg_op names an op that takes none
 * (gather, scatter: as in PyTorch, whose advanced indexing takes them and those don't). */
static int64_t *read_index(dp_tensor *ix, int dim, int64_t size, int base, const char *nonneg_op)
{
    int64_t n = dp_numel(ix);
    int64_t *h = alloc_i64(n);
    if (!h) return NULL;
    if (dp_to_host(ix, h, DP_INT64, n)) { free(h); return NULL; }
    for (int64_t i = 0; i < n; i++) {
        int64_t v = h[i], z = v < 0 && !nonneg_op ? v + size : v - base;
        if (z < 0 || z >= size) {
            if (nonneg_op) dp_error(NONNEG_RANGE_MSG(base), nonneg_op, (long long)v, dim + 1, (long long)size, nonneg_op);
            else range_error(v, dim, size, base);
            free(h);
            return NULL;
        }
        h[i] = z;
    }
    return h;
}

/* The coordinates of the true elements of a bool tensor: m = mask->ndim arrays of *count
 * values each (0-based), in row-major order. */
static int mask_coords(dp_tensor *mask, int64_t **coords, int64_t *count)
{
    int m = mask->ndim;
    int64_t n = dp_numel(mask);
    bool *h = malloc((size_t)(n ? n : 1));
    if (!h) return dp_error("out of memory");
    if (dp_to_host(mask, h, DP_BOOL, n)) { free(h); return -1; }
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += h[i];
    int k;
    for (k = 0; k < m; k++) if (!(coords[k] = alloc_i64(c))) break;
    if (k < m) { while (k--) free(coords[k]); free(h); return -1; }
    int64_t j = 0, pos[DP_MAX_DIMS] = { 0 };
    for (int64_t i = 0; i < n; i++) {
        if (h[i]) { for (k = 0; k < m; k++) coords[k][j] = pos[k]; j++; }
        for (int d = m - 1; d >= 0; d--) {   /* the next coordinate */
            if (++pos[d] < mask->sizes[d]) break;
            pos[d] = 0;
        }
    }
    free(h);
    *count = c;
    return 0;
}

/* src (a dense array of shape nd/sizes) broadcast to the plan's index shape */
static int64_t *broadcast_host(const int64_t *src, int nd, const int64_t *sizes, const plan *p)
{
    int64_t st[DP_MAX_DIMS] = { 0 }, c[DP_MAX_DIMS] = { 0 }, s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        st[d + p->bnd - nd] = sizes[d] == 1 ? 0 : s;
        s *= sizes[d];
    }
    int64_t *dst = alloc_i64(p->bnumel);
    if (!dst) return NULL;
    int64_t pos = 0;
    for (int64_t j = 0; j < p->bnumel; j++) {
        dst[j] = src[pos];
        for (int d = p->bnd - 1; d >= 0; d--) {
            pos += st[d];
            if (++c[d] < p->bsizes[d]) break;
            pos -= st[d] * c[d];
            c[d] = 0;
        }
    }
    return dst;
}

static char *shape_of(const dp_tensor *t, char *buf, size_t n) { return dp_shape_str(t->ndim, t->sizes, buf, n); }

/* The result's layout: PyTorch puts the index shape where the indexed dims were when they
 * are adjacent, else first. */
static int plan_layout(plan *p, const dp_tensor *t)
{
    bool adjacent = true;
    for (int k = 1; k < p->nidx; k++) adjacent = adjacent && p->dims[k] == p->dims[k - 1] + 1;
    int nd = t->ndim - p->nidx + p->bnd;
    if (nd > DP_MAX_DIMS) return dp_error("indexing: the result would have %d dimensions (at most %d)", nd, DP_MAX_DIMS);
    bool indexed[DP_MAX_DIMS] = { false };
    for (int k = 0; k < p->nidx; k++) indexed[p->dims[k]] = true;
    layout *o = &p->out;
    o->ndim = 0;
    int first = adjacent ? p->dims[0] : 0;
    for (int d = 0; d < first; d++) { o->vdim[o->ndim] = d; o->sizes[o->ndim++] = t->sizes[d]; }
    for (int d = 0; d < p->bnd; d++) { o->vdim[o->ndim] = -1; o->sizes[o->ndim++] = p->bsizes[d]; }
    for (int d = first; d < t->ndim; d++)
        if (!indexed[d]) { o->vdim[o->ndim] = d; o->sizes[o->ndim++] = t->sizes[d]; }
    return 0;
}

/* A mask's m coordinate arrays (count each) on dev as the m rows of one tensor: one copy. */
static int mask_to_device(int64_t *const *coords, int m, int64_t count, dp_device dev, dp_tensor **rows)
{
    int64_t sizes[2] = { m, count };
    int64_t *h = alloc_i64(m * count);
    if (!h) return -1;
    for (int q = 0; q < m; q++) memcpy(h + q * count, coords[q], sizeof(int64_t) * (size_t)count);
    dp_tensor *all = dp_from_host(h, DP_INT64, 2, sizes, DP_INT64, dev);
    free(h);
    if (!all) return -1;
    int q;
    for (q = 0; q < m; q++) if (!(rows[q] = dp_select(all, 0, q))) break;
    dp_tensor_release(all);
    return q < m ? -1 : 0;
}

/* Reads indices[0..n) (NULL: the whole dim; int64; bool masks covering mask->ndim dims). */
static int plan_build(plan *p, dp_tensor *t, int n, dp_tensor *const *indices, int base)
{
    memset(p, 0, sizeof *p);
    int64_t *raw[DP_MAX_DIMS];
    dp_tensor *rawt[DP_MAX_DIMS] = { NULL };   /* on the device: the index tensors */
    int rnd[DP_MAX_DIMS];
    int64_t rsz[DP_MAX_DIMS][DP_MAX_DIMS];
    int d = 0, k, nraw = 0, rc = -1;
    char a[128], b[128];
    p->on_device = offsets_on_device(t, n, indices);
    for (k = 0; k < n; k++) {
        dp_tensor *ix = indices[k];
        if (!ix) { d++; continue; }
        if (ix->dtype == DP_BOOL) {
            int m = ix->ndim;
            if (m == 0) { dp_error("indexing with a 0-dimensional bool tensor is not supported"); goto done; }
            bool match = d + m <= t->ndim;
            for (int q = 0; q < m && match; q++) match = ix->sizes[q] == t->sizes[d + q];
            if (!match) {
                dp_error("the shape of the mask %s at index %d does not match the shape of the indexed tensor %s at index %d",
                         shape_of(ix, a, sizeof a), k + 1, shape_of(t, b, sizeof b), d + 1);
                goto done;
            }
            int64_t count;
            if (mask_coords(ix, raw + nraw, &count)) goto done;
            for (int q = 0; q < m; q++) {
                rnd[nraw + q] = 1;
                rsz[nraw + q][0] = count;
                p->dims[nraw + q] = d + q;
                p->ibase[nraw + q] = 0;
            }
            nraw += m;
            d += m;
            /* on the device: the coordinates go there in one copy, [m, count], a row per dim
             * (they are in range: the check passes) */
            if (p->on_device && mask_to_device(raw + nraw - m, m, count, t->device, rawt + nraw - m)) goto done;
        } else if (ix->dtype == DP_INT64) {
            if (d >= t->ndim) { dp_error("too many indices for a tensor of dimension %d", t->ndim); goto done; }
            p->ibase[nraw] = base;
            if (p->on_device) { raw[nraw] = NULL; rawt[nraw] = (dp_tensor_retain(ix), ix); }
            else if (!(raw[nraw] = read_index(ix, d, t->sizes[d], base, NULL))) goto done;
            rnd[nraw] = ix->ndim;
            memcpy(rsz[nraw], ix->sizes, sizeof rsz[nraw]);
            p->dims[nraw++] = d++;
        } else {
            dp_error("tensors used as indices must be int64 or bool tensors, got %s", dp_dtype_name(ix->dtype));
            goto done;
        }
    }
    if (d > t->ndim) { dp_error("too many indices for a tensor of dimension %d", t->ndim); goto done; }
    if (nraw == 0) { dp_error("indexing: no index tensor given"); goto done; }
    p->bnd = rnd[0];
    memcpy(p->bsizes, rsz[0], sizeof p->bsizes);
    for (k = 1; k < nraw; k++) {
        int nd;
        int64_t sz[DP_MAX_DIMS];
        if (dp_broadcast_shape(p->bnd, p->bsizes, rnd[k], rsz[k], &nd, sz)) {
            dp_error("shape mismatch: indexing tensors could not be broadcast together with shapes %s, %s",
                     dp_shape_str(p->bnd, p->bsizes, a, sizeof a), dp_shape_str(rnd[k], rsz[k], b, sizeof b));
            goto done;
        }
        p->bnd = nd;
        memcpy(p->bsizes, sz, sizeof sz);
    }
    if ((p->bnumel = dp_shape_numel(p->bnd, p->bsizes, sizeof(int64_t))) < 0) goto done;
    for (k = 0; k < nraw; k++, p->nidx++) {
        if (p->on_device) { p->ix[k] = rawt[k]; rawt[k] = NULL; continue; }   /* broadcast by strides there */
        if (!(p->vals[k] = broadcast_host(raw[k], rnd[k], rsz[k], p))) goto done;
    }
    rc = plan_layout(p, t);
done:
    for (k = 0; k < nraw; k++) { free(raw[k]); dp_tensor_release(rawt[k]); }
    if (rc) plan_free(p);
    return rc;
}

/* The offsets computed and checked on the device (a bad index: reported at the next
 * synchronisation).  sizes: the indexed tensor's. */
static dp_tensor *device_offsets(const plan *p, const int64_t *sizes, const int64_t *strides, dp_device dev)
{
    dp_tensor *o = dp_empty(p->bnd, p->bsizes, DP_INT64, dev);
    if (!o || p->bnumel == 0) return o;
    dp_index_terms terms;
    memset(&terms, 0, sizeof terms);
    char msgs[DP_MAX_DIMS][160];
    terms.n = p->nidx;
    for (int k = 0; k < p->nidx; k++) {
        int d = p->dims[k];
        terms.size[k] = sizes[d];
        terms.stride[k] = strides[d];
        terms.coord[k] = p->coord[k];
        terms.base[k] = p->ibase[k];
        if (!p->ix[k]) continue;
        terms.idx[k] = dp_broadcast_view(p->ix[k], p->bnd, p->bsizes);
        snprintf(msgs[k], sizeof msgs[k], "index %%lld is out of range for dimension %d with size %lld%s", d + 1,
                 (long long)sizes[d], p->ibase[k] == 1 ? " (dplua counts from 1)" : "");
        terms.msg[k] = msgs[k];
    }
    dp_view ov = dp_view_of(o);
    if (dp_backend_for(dev)->index_offsets(&ov, &terms)) { dp_tensor_release(o); return NULL; }
    return o;
}

/* The element offsets of the indexed part for a tensor with these sizes and strides, on dev. */
static dp_tensor *plan_offsets(const plan *p, const int64_t *sizes, const int64_t *strides, dp_device dev)
{
    if (p->on_device) return device_offsets(p, sizes, strides, dev);
    int64_t *h = alloc_i64(p->bnumel);
    if (!h) return NULL;
    for (int64_t j = 0; j < p->bnumel; j++) {
        int64_t s = 0;
        for (int k = 0; k < p->nidx; k++) s += p->vals[k][j] * strides[p->dims[k]];
        h[j] = s;
    }
    dp_tensor *o = dp_from_host(h, DP_INT64, p->bnd, p->bsizes, DP_INT64, dev);
    free(h);
    return o;
}

/* The view of a tensor (data, strides of its own dims) walked over the result's shape. */
static dp_view base_view(const layout *l, const dp_tensor *t, const int64_t *strides)
{
    dp_view v = dp_view_of(t);
    v.ndim = l->ndim;
    for (int r = 0; r < l->ndim; r++) {
        v.sizes[r] = l->sizes[r];
        v.strides[r] = l->vdim[r] >= 0 ? strides[l->vdim[r]] : 0;
    }
    return v;
}

static dp_view offs_view(const layout *l, const dp_tensor *offs)
{
    dp_view v = dp_view_of(offs);
    v.ndim = l->ndim;
    for (int r = 0, k = 0; r < l->ndim; r++) {
        v.sizes[r] = l->sizes[r];
        v.strides[r] = l->vdim[r] >= 0 ? 0 : offs->strides[k++];
    }
    return v;
}

static int64_t layout_numel(const layout *l)
{
    int64_t n = 1;
    for (int r = 0; r < l->ndim; r++) n *= l->sizes[r];
    return n;
}

/* The layout kept in a node: vdim in ip[0..ndim), ndim in ip[DP_MAX_DIMS]; the sizes come
 * back from the indexed tensor's (input 0) sizes and the saved offsets' shape. */
static void layout_save(dp_node *n, const layout *l)
{
    for (int r = 0; r < l->ndim; r++) n->ip[r] = l->vdim[r];
    n->ip[DP_MAX_DIMS] = l->ndim;
}

static layout layout_load(const dp_node *n, const dp_tensor *offs)
{
    layout l;
    l.ndim = (int)n->ip[DP_MAX_DIMS];
    for (int r = 0, k = 0; r < l.ndim; r++) {
        l.vdim[r] = (int)n->ip[r];
        l.sizes[r] = l.vdim[r] >= 0 ? n->in[0].sizes[l.vdim[r]] : offs->sizes[k++];
    }
    return l;
}

/* ---------------------------------------------------------------- reading */

static int gather_raw(dp_tensor *out, const layout *l, dp_tensor *src, const int64_t *strides, dp_tensor *offs)
{
    if (layout_numel(l) == 0) return 0;
    dp_view o = dp_view_of(out), b = base_view(l, src, strides), x = offs_view(l, offs);
    return dp_backend_for(src->device)->gather_offsets(&o, &b, &x);
}

/* backward of a gather: the gradient added into zeros at the same places */
static int take_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *offs = dp_saved(n, 0);
    if (!offs) return -1;
    layout l = layout_load(n, offs);
    dp_tensor *z = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device);
    if (!z) return -1;
    int rc = 0;
    if (layout_numel(&l)) {
        dp_view b = base_view(&l, z, z->strides), x = offs_view(&l, offs), s = dp_view_of(g);
        rc = dp_backend_for(z->device)->scatter_offsets(&b, &x, &s, DP_SCATTER_ADD);
    }
    if (rc) { dp_tensor_release(z); return -1; }
    gin[0] = z;
    return 0;
}

/* t gathered through a plan, recorded as `name` */
static dp_tensor *take_plan(dp_tensor *t, const plan *p, const char *name)
{
    dp_tensor *offs = plan_offsets(p, t->sizes, t->strides, t->device);
    if (!offs) return NULL;
    dp_tensor *out = dp_empty(p->out.ndim, p->out.sizes, t->dtype, t->device);
    if (out && gather_raw(out, &p->out, t, t->strides, offs)) { dp_tensor_release(out); out = NULL; }
    if (out && dp_needs_grad(1, &t)) {
        /* backward scatters into a fresh contiguous tensor: offsets for that layout */
        int64_t cs[DP_MAX_DIMS];
        dp_contiguous_strides(t->ndim, t->sizes, cs);
        dp_tensor *lin = dp_is_contiguous(t) ? (dp_tensor_retain(offs), offs) : plan_offsets(p, t->sizes, cs, t->device);
        dp_node *node = lin ? dp_node_new(name, take_backward, 1, &t) : NULL;
        if (!node) { dp_tensor_release(lin); dp_tensor_release(out); dp_tensor_release(offs); return NULL; }
        layout_save(node, &p->out);
        dp_node_save(node, 0, lin);
        dp_tensor_release(lin);
        dp_attach(out, node);
    }
    dp_tensor_release(offs);
    return out;
}

dp_tensor *dp_index(dp_tensor *t, int n, dp_tensor *const *indices, int base)
{
    plan p;
    if (plan_build(&p, t, n, indices, base)) return NULL;
    dp_tensor *out = take_plan(t, &p, "IndexBackward0");
    plan_free(&p);
    return out;
}

/* ---------------------------------------------------------------- writing */

/* values as t's dtype on t's device, checked to broadcast to the result's shape */
static dp_tensor *prep_values(dp_tensor *t, const layout *l, dp_tensor *values, const char *op)
{
    char a[128], b[128];
    if (values->ndim != 0 && !dp_device_eq(values->device, t->device)) {
        dp_tensor *ts[2] = { t, values };
        if (dp_check_same_device(2, ts)) return NULL;
    }
    bool ok = values->ndim <= l->ndim;
    for (int d = 0; d < values->ndim && ok; d++) {
        int64_t s = values->sizes[d], r = l->sizes[d + l->ndim - values->ndim];
        ok = s == r || s == 1;
    }
    if (!ok) {
        dp_error("%s: shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape %s", op,
                 shape_of(values, a, sizeof a), dp_shape_str(l->ndim, l->sizes, b, sizeof b));
        return NULL;
    }
    return dp_to(values, t->device, t->dtype, false);
}

static int scatter_raw(dp_tensor *dst, const layout *l, const int64_t *strides, dp_tensor *offs, dp_tensor *v, int mode)
{
    if (layout_numel(l) == 0) return 0;
    dp_view b = base_view(l, dst, strides), x = offs_view(l, offs), s = dp_broadcast_view(v, l->ndim, l->sizes);
    return dp_backend_for(dst->device)->scatter_offsets(&b, &x, &s, mode);
}

/* backward of an out-of-place put: the gradient of t is g with the written places zeroed
 * (or g itself when adding); that of the values is g gathered there */
static int put_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *offs = dp_saved(n, 0);
    if (!offs) return -1;
    layout l = layout_load(n, offs);
    bool add = n->ip[DP_MAX_DIMS + 1];
    dp_tensor *gc = dp_contiguous(g);   /* the offsets are for a contiguous layout */
    if (!gc) return -1;
    int rc = 0;
    if (DP_NEEDS_INPUT(n, 0)) {
        if (add) { dp_tensor_retain(g); gin[0] = g; }
        else {
            dp_tensor *c = dp_empty(g->ndim, g->sizes, g->dtype, g->device), *zero = dp_zeros(0, NULL, g->dtype, g->device);
            rc = c && zero ? dp_copy_raw(c, gc) : -1;
            if (!rc) rc = scatter_raw(c, &l, c->strides, offs, zero, DP_SCATTER_COPY);
            dp_tensor_release(zero);
            if (rc) dp_tensor_release(c);
            else gin[0] = c;
        }
    }
    if (!rc && DP_NEEDS_INPUT(n, 1)) {
        dp_tensor *r = dp_empty(l.ndim, l.sizes, g->dtype, g->device);
        rc = r ? gather_raw(r, &l, gc, gc->strides, offs) : -1;
        if (!rc) rc = (gin[1] = dp_sum_to(r, n->in[1].ndim, n->in[1].sizes)) ? 0 : -1;
        dp_tensor_release(r);
    }
    dp_tensor_release(gc);
    return rc;
}

static dp_tensor *put_plan(dp_tensor *t, const plan *p, dp_tensor *values, bool add, const char *op, const char *name)
{
    dp_tensor *v = prep_values(t, &p->out, values, op);
    if (!v) return NULL;
    dp_tensor *out = NO_GRAD(dp_clone(t)), *offs = out ? plan_offsets(p, out->sizes, out->strides, t->device) : NULL;
    if (out && (!offs || scatter_raw(out, &p->out, out->strides, offs, v, add ? DP_SCATTER_ADD : DP_SCATTER_COPY))) {
        dp_tensor_release(out);
        out = NULL;
    }
    dp_tensor *ins[2] = { t, v };
    if (out && dp_needs_grad(2, ins)) {
        dp_node *node = dp_node_new(name, put_backward, 2, ins);
        if (!node) { dp_tensor_release(out); out = NULL; }
        else {
            layout_save(node, &p->out);
            node->ip[DP_MAX_DIMS + 1] = add;
            dp_node_save(node, 0, offs);
            dp_attach(out, node);
        }
    }
    dp_tensor_release(offs);
    dp_tensor_release(v);
    return out;
}

/* ---------------------------------------------------------------- recorded writes */

/* The view of x (t's shape) that region r of t takes, without autograd: t's region in any
 * layout of t's elements (t itself, its old value, a gradient). */
static dp_tensor *region_of(dp_tensor *x, const dp_region *r)
{
    int nd = 0;
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS], offset = x->offset;
    for (int d = 0; d < r->ndim; d++) {
        offset += r->start[d] * x->strides[d];
        if (!r->keep[d]) continue;
        sizes[nd] = r->count[d];
        strides[nd++] = r->step[d] * x->strides[d];
    }
    return dp_make_view(x, nd, sizes, strides, offset);
}

static bool region_is_whole(const dp_tensor *t, const dp_region *r)
{
    for (int d = 0; d < r->ndim; d++)
        if (!r->keep[d] || r->start[d] != 0 || r->step[d] != 1 || r->count[d] != t->sizes[d]) return false;
    return true;
}

dp_tensor *dp_region_view(dp_tensor *t, const dp_region *r)
{
    if (r->ndim != t->ndim)
        return dp_error("a region of %d dimensions does not fit a tensor of %d dimensions", r->ndim, t->ndim), NULL;
    dp_tensor *v = t;
    dp_tensor_retain(t);
    for (int d = 0, cur = 0; d < r->ndim && v; d++) {
        dp_tensor *next;
        if (!r->keep[d]) next = dp_select(v, cur, r->start[d]);
        else if (r->start[d] == 0 && r->step[d] == 1 && r->count[d] == t->sizes[d]) { cur++; continue; }
        else next = dp_slice(v, cur++, r->start[d], r->count[d], r->step[d]);
        dp_tensor_release(v);
        v = next;
    }
    return v;
}

/* backward of a write into a region (PyTorch's CopySlices): the old value takes the gradient
 * with the region zeroed, what was written the region's gradient */
static int copy_slices_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    const dp_region *r = n->user;
    if (DP_NEEDS_INPUT(n, 1)) {
        dp_tensor *part = region_of(g, r);
        gin[1] = part ? dp_contiguous(part) : NULL;
        dp_tensor_release(part);
        if (!gin[1]) return -1;
    }
    if (DP_NEEDS_INPUT(n, 0)) {
        dp_tensor *c = dp_clone(g), *part = c ? region_of(c, r) : NULL, *zero = dp_zeros(0, NULL, g->dtype, g->device);
        int rc = part && zero ? dp_copy_raw(part, zero) : -1;
        dp_tensor_release(part);
        dp_tensor_release(zero);
        if (rc) { dp_tensor_release(c); return -1; }
        gin[0] = c;
    }
    return 0;
}

/* old with region r replaced by part (the region's shape, old's dtype), recorded as
 * CopySlices */
static dp_tensor *copy_slices(dp_tensor *old, const dp_region *r, dp_tensor *part)
{
    dp_tensor *out = NO_GRAD(dp_clone(old)), *dst = out ? region_of(out, r) : NULL;
    int rc = dst ? dp_copy_raw(dst, part) : -1;
    dp_tensor_release(dst);
    if (rc) { dp_tensor_release(out); return NULL; }
    dp_tensor *ins[2] = { old, part };
    if (dp_needs_grad(2, ins)) {
        dp_region *saved = malloc(sizeof *saved);
        dp_node *node = saved ? dp_node_new("CopySlices", copy_slices_backward, 2, ins) : NULL;
        if (!node) {
            if (!saved) dp_error("out of memory");
            free(saved);
            dp_tensor_release(out);
            return NULL;
        }
        *saved = *r;
        node->user = saved;
        node->user_free = free;
        dp_attach(out, node);
    }
    return out;
}

/* The old value of t for a recorded write (dp_inplace_old).  Refused besides when t shares its
 * memory with another tensor: a view of it, or a tensor it is a view of, whose history
 * (PyTorch's records the write on the base) would not learn of the write. */
static dp_tensor *write_old(dp_tensor *t, const char *op, bool *swap)
{
    dp_tensor *old = dp_inplace_old(t, op, swap);
    if (old && !*swap && __atomic_load_n(&t->storage->refcount, __ATOMIC_ACQUIRE) > 1) {   /* old is a clone */
        dp_tensor_release(old);
        dp_error("%s: the tensor written requires grad after the write, and shares its memory with another tensor "
                 "(a view of it, or the tensor it is a view of) whose history would not learn of the write; write "
                 "through the base tensor's key (base[{i, ...}] = v), or clone() it first", op);
        return NULL;
    }
    return old;
}

/* Every in-place index write ends here (index_put_, t[key] = v, scatter_, scatter_add_,
 * and index_copy_, index_fill_, index_add_, masked_scatter_ made of them): dst is t or the
 * view of t's region r (NULL: all of t), and the caller's reference to it is taken (a
 * recorded write must know who else holds t's memory).  Values that share memory with dst
 * are refused or read from a private copy (dp_index_write_source).  A write autograd must
 * see runs out of place on t's old value, as PyTorch's IndexPutBackward0 (ScatterBackward0,
 * ...) or, into a region, CopySlices around it, and t adopts the result. */
static int put_in_place(dp_tensor *t, const dp_region *r, dp_tensor *dst, const plan *p, dp_tensor *values, bool add,
                        const char *op, const char *name)
{
    int rc = -1;
    dp_tensor *own = NULL, *v = NULL, *offs = NULL;
    for (int d = 0; d < dst->ndim && dp_numel(dst) > 0; d++)
        if (dst->strides[d] == 0 && dst->sizes[d] > 1) {
            dp_error("unsupported operation: more than one element of the written-to tensor refers to a single "
                     "memory location (%s on an expanded view). Please clone() the tensor before performing the "
                     "operation.", op);
            goto done;
        }
    if (!(own = dp_index_write_source(dst, values, op, add ? "source" : "values"))) goto done;
    if (dp_inplace_tracked(t, own)) {
        dp_tensor_release(dst);
        dst = NULL;
        bool swap;
        dp_tensor *old = write_old(t, op, &swap);
        if (!old) goto done;
        dp_tensor *part = r ? dp_region_view(old, r) : (dp_tensor_retain(old), old);
        dp_tensor *put = part ? put_plan(part, p, own, add, op, name) : NULL;
        dp_tensor *res = put && r ? copy_slices(old, r, put) : put;
        if (res != put) dp_tensor_release(put);
        dp_tensor_release(part);
        dp_tensor_release(old);
        rc = dp_inplace_adopt(t, res, swap);
        goto done;
    }
    if (!(v = prep_values(dst, &p->out, own, op))) goto done;
    offs = plan_offsets(p, dst->sizes, dst->strides, dst->device);
    rc = offs ? scatter_raw(dst, &p->out, dst->strides, offs, v, add ? DP_SCATTER_ADD : DP_SCATTER_COPY) : -1;
    if (!rc) dp_bump_version(dst);
done:
    dp_tensor_release(offs);
    dp_tensor_release(v);
    dp_tensor_release(own);
    dp_tensor_release(dst);
    return rc;
}

/* t[indices] = values on dst, t or the view of its region r (the reference to dst is taken) */
static int index_put_into(dp_tensor *t, const dp_region *r, dp_tensor *dst, int n, dp_tensor *const *indices,
                          dp_tensor *values, bool accumulate, int base)
{
    /* An index in t's memory is refused, as in PyTorch; t[mask] = one value is PyTorch's
     * masked_fill_, which reads the mask first (b[b] = false). */
    bool fill = n == 1 && indices[0] && indices[0]->dtype == DP_BOOL && dp_numel(values) == 1;
    for (int k = 0; k < n && !fill; k++)
        if (indices[k] && dp_check_index_overlap(dst, indices[k], "index_put_")) { dp_tensor_release(dst); return -1; }
    plan p;
    if (plan_build(&p, dst, n, indices, base)) { dp_tensor_release(dst); return -1; }
    int rc = put_in_place(t, r, dst, &p, values, accumulate, "index_put_", "IndexPutBackward0");
    plan_free(&p);
    return rc;
}

int dp_region_write_(dp_tensor *t, const dp_region *r, int n, dp_tensor *const *indices, dp_tensor *values,
                     bool accumulate, int base)
{
    if (!t->grad_fn && dp_check_inplace(t, n ? "index_put_" : "copy_")) return -1;   /* a leaf */
    dp_tensor *dst = NO_GRAD(dp_region_view(t, r));
    if (!dst) return -1;
    bool whole = region_is_whole(t, r);
    if (n) return index_put_into(t, whole ? NULL : r, dst, n, indices, values, accumulate, base);
    if (!dp_inplace_tracked(t, values)) {
        int rc = dp_copy_(dst, values);
        dp_tensor_release(dst);
        return rc;
    }
    /* copy_'s checks on dst, then CopySlices around the values, as dst's shape and t's dtype */
    char a[128], b[128];
    int nd, rc = -1;
    int64_t sizes[DP_MAX_DIMS];
    for (int d = 0; d < dst->ndim && dp_numel(dst) > 0; d++)
        if (dst->strides[d] == 0 && dst->sizes[d] > 1) {
            dp_error("unsupported operation: more than one element of the written-to tensor refers to a single "
                     "memory location (copy_ on an expanded view). Please clone() the tensor before performing the "
                     "operation.");
            goto fail;
        }
    if (dp_check_write_overlap(dst, values, "copy_") || dp_broadcast_shape(dst->ndim, dst->sizes, values->ndim, values->sizes, &nd, sizes))
        goto fail;
    if (nd != dst->ndim || memcmp(sizes, dst->sizes, sizeof(int64_t) * (size_t)nd)) {
        dp_error("copy_: the source of shape %s cannot be broadcast to the destination's shape %s",
                 shape_of(values, a, sizeof a), shape_of(dst, b, sizeof b));
        goto fail;
    }
    dp_tensor_release(dst);
    bool swap;
    dp_tensor *old = write_old(t, "copy_", &swap);
    if (!old) return -1;
    dp_tensor *conv = dp_to(values, t->device, t->dtype, false), *part = conv ? dp_expand(conv, nd, sizes) : NULL;
    dp_tensor *res = part ? copy_slices(old, r, part) : NULL;
    dp_tensor_release(part);
    dp_tensor_release(conv);
    dp_tensor_release(old);
    return dp_inplace_adopt(t, res, swap);
fail:
    dp_tensor_release(dst);
    return rc;
}

int dp_region_fill_(dp_tensor *t, const dp_region *r, double value)
{
    if (dp_inplace_tracked(t, NULL)) {
        dp_tensor *v = dp_full(0, NULL, value, t->dtype, t->device);
        int rc = v ? dp_region_write_(t, r, 0, NULL, v, false, 0) : -1;
        dp_tensor_release(v);
        return rc;
    }
    dp_tensor *dst = dp_region_view(t, r);
    int rc = dst ? dp_fill_(dst, value) : -1;
    dp_tensor_release(dst);
    return rc;
}

int dp_index_put_(dp_tensor *t, int n, dp_tensor *const *indices, dp_tensor *values, bool accumulate, int base)
{
    if (!t->grad_fn && dp_check_inplace(t, "index_put_")) return -1;   /* a leaf */
    dp_tensor_retain(t);
    return index_put_into(t, NULL, t, n, indices, values, accumulate, base);
}

dp_tensor *dp_index_put(dp_tensor *t, int n, dp_tensor *const *indices, dp_tensor *values, bool accumulate, int base)
{
    plan p;
    if (plan_build(&p, t, n, indices, base)) return NULL;
    dp_tensor *out = put_plan(t, &p, values, accumulate, "index_put", "IndexPutBackward0");
    plan_free(&p);
    return out;
}

/* ---------------------------------------------------------------- gather, scatter */

/* The plan of t.gather(dim, index) (and of scatter's writes): every dim of t is indexed,
 * by index's values along dim and by the coordinate elsewhere; the result has index's
 * shape.  `other` (scatter's src, may be NULL) must be at least as large as index. */
static int plan_gather(plan *p, dp_tensor *t, int dim, dp_tensor *index, dp_tensor *other, int base, const char *op)
{
    memset(p, 0, sizeof *p);
    char a[128], b[128], c[128];
    if (dim < 0 || dim >= (t->ndim ? t->ndim : 1))
        return dp_error("%s: dimension %d is out of range (the tensor has %d dimensions)", op, dim + 1, t->ndim);
    if (index->dtype != DP_INT64) return dp_error("%s: the index must be an int64 tensor, got %s", op, dp_dtype_name(index->dtype));
    if (t->ndim == 0 || index->ndim != t->ndim)
        return dp_error("%s: the index (%dD) must have as many dimensions as the tensor (%dD)%s", op, index->ndim,
                        t->ndim, t->ndim == 0 ? ", and 0-d tensors are not supported" : "");
    bool ok = true;
    for (int d = 0; d < t->ndim; d++) {
        if (d != dim && index->sizes[d] > t->sizes[d]) ok = false;
        if (other && other->ndim && (other->ndim != t->ndim || index->sizes[d] > other->sizes[d])) ok = false;
    }
    if (!ok) {
        if (other && other->ndim)
            return dp_error("%s: expected index %s to be no larger than self %s apart from dimension %d and no larger than src %s",
                            op, shape_of(index, a, sizeof a), shape_of(t, b, sizeof b), dim + 1, shape_of(other, c, sizeof c));
        return dp_error("%s: expected index %s to be no larger than self %s apart from dimension %d", op,
                        shape_of(index, a, sizeof a), shape_of(t, b, sizeof b), dim + 1);
    }
    p->bnd = index->ndim;
    memcpy(p->bsizes, index->sizes, sizeof p->bsizes);
    p->bnumel = dp_numel(index);
    p->out.ndim = index->ndim;
    for (int d = 0; d < index->ndim; d++) { p->out.sizes[d] = index->sizes[d]; p->out.vdim[d] = -1; }
    if ((p->on_device = offsets_on_device(t, 1, &index))) {   /* index at dim, coordinates elsewhere */
        /* the offsets' kernel counts negative values from the end: refused first, there */
        char msg[240];
        snprintf(msg, sizeof msg, base == 1
                 ? "%s: index %%lld is out of range for dimension %d with size %lld (at position %%lld; dplua counts "
                   "from 1; %s takes no negative indices)"
                 : "%s: index %%lld (counted from 1) is out of range for dimension %d with size %lld (at position %%lld; "
                   "%s takes no negative indices)", op, dim + 1, (long long)t->sizes[dim], op);
        if (dp_check_index_values(index, base, t->sizes[dim], msg)) return -1;
        for (int d = 0; d < t->ndim; d++, p->nidx++) {
            p->dims[d] = d;
            p->coord[d] = d;
            p->ibase[d] = base;
        }
        p->ix[dim] = (dp_tensor_retain(index), index);
        return 0;
    }
    int64_t *iv = read_index(index, dim, t->sizes[dim], base, op);
    if (!iv) return -1;
    for (int d = 0; d < t->ndim; d++, p->nidx++) {
        p->dims[d] = d;
        if (d == dim) { p->vals[d] = iv; continue; }
        if (!(p->vals[d] = alloc_i64(p->bnumel))) { p->nidx++; if (d < dim) free(iv); plan_free(p); return -1; }
    }
    /* the coordinates along the other dims */
    int64_t pos[DP_MAX_DIMS] = { 0 };
    for (int64_t j = 0; j < p->bnumel; j++) {
        for (int d = 0; d < t->ndim; d++) if (d != dim) p->vals[d][j] = pos[d];
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++pos[d] < p->bsizes[d]) break;
            pos[d] = 0;
        }
    }
    return 0;
}

dp_tensor *dp_gather_index(dp_tensor *t, int dim, dp_tensor *index, int base)
{
    plan p;
    if (plan_gather(&p, t, dim, index, NULL, base, "gather")) return NULL;
    dp_tensor *out = take_plan(t, &p, "GatherBackward0");
    plan_free(&p);
    return out;
}

/* src cut down to index's shape (a differentiable view); a 0-dim src stays as it is */
static dp_tensor *src_for(dp_tensor *src, dp_tensor *index)
{
    dp_tensor_retain(src);
    for (int d = 0; d < src->ndim && src; d++) {
        if (src->sizes[d] == index->sizes[d]) continue;
        dp_tensor *n = dp_narrow(src, d, 0, index->sizes[d]);
        dp_tensor_release(src);
        src = n;
    }
    return src;
}

dp_tensor *dp_scatter_index(dp_tensor *t, int dim, dp_tensor *index, dp_tensor *src, bool add, int base)
{
    const char *op = add ? "scatter_add" : "scatter";
    plan p;
    if (plan_gather(&p, t, dim, index, src, base, op)) return NULL;
    dp_tensor *v = src_for(src, index), *out = v ? put_plan(t, &p, v, add, op, add ? "ScatterAddBackward0" : "ScatterBackward0") : NULL;
    dp_tensor_release(v);
    plan_free(&p);
    return out;
}

int dp_scatter_index_(dp_tensor *t, int dim, dp_tensor *index, dp_tensor *src, bool add, int base)
{
    const char *op = add ? "scatter_add_" : "scatter_";
    if ((!t->grad_fn && dp_check_inplace(t, op)) || dp_check_index_overlap(t, index, op)) return -1;   /* a leaf */
    plan p;
    if (plan_gather(&p, t, dim, index, src, base, op)) return -1;
    dp_tensor *v = src_for(src, index);
    if (v) dp_tensor_retain(t);
    int rc = v ? put_in_place(t, NULL, t, &p, v, add, op, add ? "ScatterAddBackward0" : "ScatterBackward0") : -1;
    dp_tensor_release(v);
    plan_free(&p);
    return rc;
}

dp_tensor *dp_scatter_reduce(dp_tensor *t, int dim, dp_tensor *index, dp_tensor *src, const char *reduce,
                             bool include_self, int base)
{
    int mode = !strcmp(reduce, "prod") ? DP_SCATTER_MUL : !strcmp(reduce, "amax") ? DP_SCATTER_MAX
             : !strcmp(reduce, "amin") ? DP_SCATTER_MIN : -1;
    if (mode < 0) return dp_error("scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got '%s'", reduce), NULL;
    dp_tensor *ins[2] = { t, src };
    if (dp_needs_grad(2, ins))
        return dp_error("scatter_reduce: the engine's '%s' is not differentiable (torch.scatter_reduce is)", reduce), NULL;
    if (src->ndim != t->ndim)
        return dp_error("scatter_reduce: src (%dD) must have as many dimensions as the tensor (%dD)", src->ndim, t->ndim), NULL;
    plan p;
    if (plan_gather(&p, t, dim, index, src, base, "scatter_reduce")) return NULL;
    dp_tensor *cut = src_for(src, index), *v = cut ? prep_values(t, &p.out, cut, "scatter_reduce") : NULL;
    dp_tensor *out = v ? dp_clone(t) : NULL, *offs = out ? plan_offsets(&p, out->sizes, out->strides, t->device) : NULL;
    int rc = offs ? 0 : -1;
    if (!rc && !include_self) {   /* start from the identity (prod) or from one of the values (amax, amin) */
        dp_tensor *one = mode == DP_SCATTER_MUL ? dp_ones(0, NULL, t->dtype, t->device) : v;
        if (mode == DP_SCATTER_MUL && !one) rc = -1;
        if (!rc) rc = scatter_raw(out, &p.out, out->strides, offs, one, DP_SCATTER_COPY);
        if (one != v) dp_tensor_release(one);
    }
    if (!rc) rc = scatter_raw(out, &p.out, out->strides, offs, v, mode);
    if (rc) { dp_tensor_release(out); out = NULL; }
    dp_tensor_release(offs);
    dp_tensor_release(v);
    dp_tensor_release(cut);
    plan_free(&p);
    return out;
}

/* ---------------------------------------------------------------- value checks */

int dp_check_index_values(dp_tensor *t, int64_t base, int64_t limit, const char *msg)
{
    if (t->dtype != DP_INT64) return dp_error("check_index_values: expected an int64 tensor, got %s", dp_dtype_name(t->dtype));
    int64_t n = dp_numel(t);
    if (n == 0) return 0;
    const dp_backend *be = t->device.type == DP_DEVICE_CPU ? NULL : dp_backend_for(t->device);
    if (!be || !be->check_indices) {
        int64_t bad = -1, *h = alloc_i64(n);
        if (!h || dp_to_host(t, h, DP_INT64, n)) { free(h); return -1; }
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (h[i] < base || h[i] - base >= limit) bad = i;
        if (bad >= 0) dp_error(msg, (long long)(h[bad] - base + 1), (long long)bad + 1);
        free(h);
        return bad >= 0 ? -1 : 0;
    }
    /* on the device: t - base, flat, against [0, limit); its kernel reports value + 1 */
    dp_tensor *flat = dp_reshape(t, 1, &n), *z = flat ? dp_binary_scalar(DP_SUB, flat, (double)base, false) : NULL;
    int rc = -1;
    if (z) {
        dp_view v = dp_view_of(z);
        rc = be->check_indices(&v, limit, msg);
    }
    dp_tensor_release(z);
    dp_tensor_release(flat);
    return rc;
}

/* ---------------------------------------------------------------- nonzero */

dp_tensor *dp_nonzero(dp_tensor *t, int base)
{
    int64_t *coords[DP_MAX_DIMS], count;
    if (mask_coords(t, coords, &count)) return NULL;
    int64_t sizes[2] = { count, t->ndim }, n = count * t->ndim;
    int64_t *h = alloc_i64(n);
    for (int64_t i = 0; h && i < count; i++)
        for (int k = 0; k < t->ndim; k++) h[i * t->ndim + k] = coords[k][i] + base;
    for (int k = 0; k < t->ndim; k++) free(coords[k]);
    dp_tensor *out = h ? dp_from_host(h, DP_INT64, 2, sizes, DP_INT64, t->device) : NULL;
    free(h);
    return out;
}
