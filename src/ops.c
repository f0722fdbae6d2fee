/* ops.c: elementwise ops with broadcasting, reductions, softmax, copies and device moves,
 * in-place ops.  Each differentiable op records a node whose backward sits beside it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------------- checks and promotion */

int dp_check_same_device(int n, dp_tensor *const *ts)
{
    for (int i = 1; i < n; i++) {
        if (ts[i] && !dp_device_eq(ts[i]->device, ts[0]->device)) {
            char a[32], b[32];
            return dp_error("expected all tensors to be on the same device, but found at least two devices, %s and %s",
                            dp_device_str(ts[0]->device, a), dp_device_str(ts[i]->device, b));
        }
    }
    return 0;
}

static int dtype_rank(dp_dtype d) { return d == DP_BOOL ? 0 : d == DP_INT64 ? 1 : d == DP_FLOAT32 ? 2 : 3; }
static int dtype_category(dp_dtype d) { return d == DP_BOOL ? 0 : d == DP_INT64 ? 1 : 2; }

dp_dtype dp_promote(dp_dtype a, dp_dtype b) { return dtype_rank(a) >= dtype_rank(b) ? a : b; }

/* PyTorch's rule: a 0-dim operand only decides the dtype when it is of a higher category. */
static dp_dtype promote_tensors(const dp_tensor *a, const dp_tensor *b)
{
    if ((a->ndim == 0) != (b->ndim == 0)) {
        const dp_tensor *dim = a->ndim ? a : b, *zero = a->ndim ? b : a;
        if (dtype_category(zero->dtype) <= dtype_category(dim->dtype)) return dim->dtype;
        return zero->dtype == DP_FLOAT64 && dim->dtype != DP_FLOAT32 ? DP_FLOAT32 : (dtype_category(zero->dtype) == 2 ? DP_FLOAT32 : zero->dtype);
    }
    return dp_promote(a->dtype, b->dtype);
}

int dp_broadcast_shape(int na, const int64_t *sa, int nb, const int64_t *sb, int *nout, int64_t *sout)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t x = ia >= 0 ? sa[ia] : 1, y = ib >= 0 ? sb[ib] : 1;
        if (x != y && x != 1 && y != 1) {
            char a[128], b[128];
            return dp_error("The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton "
                            "dimension %d (shapes %s and %s)", (long long)x, (long long)y, i + 1,
                            dp_shape_str(na, sa, a, sizeof a), dp_shape_str(nb, sb, b, sizeof b));
        }
        sout[i] = x == 1 ? y : x;
    }
    *nout = n;
    return 0;
}

/* A view descriptor of t broadcast to (ndim, sizes): stride 0 where t has size 1 or no dim. */
static dp_view broadcast_view(const dp_tensor *t, int ndim, const int64_t *sizes)
{
    dp_view v = dp_view_of(t);
    v.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        int src = d - (ndim - t->ndim);
        v.sizes[d] = sizes[d];
        v.strides[d] = src >= 0 && t->sizes[src] == sizes[d] ? t->strides[src] : 0;
    }
    return v;
}

void dp_bump_version(dp_tensor *t) { t->storage->version++; }

int dp_check_inplace(dp_tensor *t, const char *op)
{
    if (!dp_grad_enabled() || !t->requires_grad) return 0;
    if (!t->grad_fn)
        return dp_error("a leaf tensor that requires grad is being used in an in-place operation (%s); "
                        "wrap it in torch.no_grad or use the out-of-place form", op);
    return dp_error("in-place operation %s on a tensor that requires grad is not supported; use the "
                    "out-of-place form", op);
}

/* Runs fn with grad mode off (backward passes and internal helpers). */
#define NO_GRAD(expr) ({ bool was_ = dp_grad_enabled(); dp_set_grad_enabled(false); __typeof__(expr) r_ = (expr); dp_set_grad_enabled(was_); r_; })

/* ---------------------------------------------------------------- copies and device moves */

static int copy_raw(dp_tensor *dst, dp_tensor *src, bool non_blocking);

int dp_copy_raw(dp_tensor *dst, dp_tensor *src) { return copy_raw(dst, src, false); }

/* non_blocking: a host-to-GPU copy whose source is pinned memory returns once queued. */
static int copy_raw(dp_tensor *dst, dp_tensor *src, bool non_blocking)
{
    if (dp_numel(dst) == 0) return 0;
    if (dp_device_eq(dst->device, src->device)) {
        dp_view o = dp_view_of(dst), i = broadcast_view(src, dst->ndim, dst->sizes);
        int rc = dp_backend_for(dst->device)->copy(&o, &i);
        if (!rc) dp_bump_version(dst);
        return rc;
    }
    /* across devices: a contiguous copy of src in dst's dtype, moved as bytes */
    dp_tensor *tmp = NULL, *stage = NULL;
    int rc = -1;
    if (src->dtype == dst->dtype && dp_is_contiguous(src) && dp_same_shape(src, dst)) { tmp = src; dp_tensor_retain(src); }
    else {
        tmp = dp_empty(dst->ndim, dst->sizes, dst->dtype, src->device);
        if (!tmp || dp_copy_raw(tmp, src)) goto done;
    }
    stage = dp_is_contiguous(dst) ? dst : dp_empty(dst->ndim, dst->sizes, dst->dtype, dst->device);
    if (!stage) goto done;
    if (stage == dst) dp_tensor_retain(dst);
    size_t bytes = (size_t)dp_numel(dst) * dp_dtype_size(dst->dtype);
    const dp_backend *sb = dp_backend_for(src->device), *db = dp_backend_for(dst->device);
    if (!sb || !db) goto done;
    if (src->device.type == DP_DEVICE_CPU && dst->device.type == DP_DEVICE_CPU) rc = db->copy_d2d(dst->device, dp_data(stage), src->device, dp_data(tmp), bytes);
    else if (src->device.type == DP_DEVICE_CPU)
        rc = db->copy_h2d(dst->device, dp_data(stage), dp_data(tmp), bytes,
                          non_blocking && stage == dst && dp_storage_is_pinned(tmp->storage));
    else if (dst->device.type == DP_DEVICE_CPU) rc = sb->copy_d2h(src->device, dp_data(stage), dp_data(tmp), bytes);
    else rc = db->copy_d2d(dst->device, dp_data(stage), src->device, dp_data(tmp), bytes);
    if (!rc) dp_count_copied(bytes);
    if (!rc && stage != dst) rc = dp_copy_raw(dst, stage);
    if (!rc) dp_bump_version(dst);
done:
    dp_tensor_release(tmp);
    dp_tensor_release(stage);
    return rc;
}

/* Identity backward: the engine moves the gradient to the input's device and dtype. */
static int identity_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor_retain(g);
    gin[0] = g;
    return 0;
}

static dp_tensor *record1(dp_tensor *out, dp_tensor *in, const char *name, dp_backward_fn fn)
{
    if (out && dp_needs_grad(1, &in)) {
        dp_node *node = dp_node_new(name, fn, 1, &in);
        if (!node) { dp_tensor_release(out); return NULL; }
        dp_attach(out, node);
    }
    return out;
}

dp_tensor *dp_clone(dp_tensor *t)
{
    dp_tensor *out = dp_empty(t->ndim, t->sizes, t->dtype, t->device);
    if (out && dp_copy_raw(out, t)) { dp_tensor_release(out); return NULL; }
    return record1(out, t, "CloneBackward", identity_backward);
}

dp_tensor *dp_contiguous(dp_tensor *t)
{
    if (dp_is_contiguous(t)) { dp_tensor_retain(t); return t; }
    return dp_clone(t);
}

dp_tensor *dp_to(dp_tensor *t, dp_device dev, dp_dtype dt, bool non_blocking)
{
    if (dp_device_eq(dev, t->device) && dt == t->dtype) { dp_tensor_retain(t); return t; }
    if (dp_device_check(dev)) return NULL;
    if (t->requires_grad && dp_grad_enabled() && !dp_dtype_is_float(dt)) {
        /* a conversion to an integer dtype is not differentiable: the result is a plain tensor */
        dp_tensor *d = dp_detach(t), *r = d ? dp_to(d, dev, dt, non_blocking) : NULL;
        dp_tensor_release(d);
        return r;
    }
    dp_tensor *out = dp_empty(t->ndim, t->sizes, dt, dev);
    if (out && copy_raw(out, t, non_blocking)) { dp_tensor_release(out); return NULL; }
    return record1(out, t, "ToCopyBackward", identity_backward);
}

dp_tensor *dp_to_reuse(dp_tensor *t, dp_tensor *dst, bool copy)
{
    if (!dp_same_shape(t, dst) || t->dtype != dst->dtype) {
        char a[128], b[128];
        dp_error("to_reuse: the destination has shape %s %s, the source %s %s", dp_shape_str(dst->ndim, dst->sizes, a, sizeof a),
                 dp_dtype_name(dst->dtype), dp_shape_str(t->ndim, t->sizes, b, sizeof b), dp_dtype_name(t->dtype));
        return NULL;
    }
    if (copy && dp_copy_raw(dst, t)) return NULL;
    return record1(dp_alias(dst), t, "BroadcastBackward", identity_backward);
}

static int cat_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    int dim = (int)n->ip[0];
    int64_t off = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        int64_t len = n->in[i].sizes[dim];
        if (n->in[i].fn || n->in[i].leaf) {
            gin[i] = dp_narrow(g, dim, off, len);
            if (!gin[i]) return -1;
        }
        off += len;
    }
    return 0;
}

dp_tensor *dp_cat(int n, dp_tensor *const *ts, int dim)
{
    if (n < 1) { dp_error("cat: expected a non-empty list of tensors"); return NULL; }
    if (dp_check_same_device(n, ts)) return NULL;
    const dp_tensor *ref = ts[0];
    for (int i = 0; i < n; i++) if (ts[i]->ndim > 0) { ref = ts[i]; break; }
    if (dim < 0 || dim >= ref->ndim) {
        dp_error("cat: dimension %d is out of range for tensors with %d dimensions", dim + 1, ref->ndim);
        return NULL;
    }
    dp_dtype dt = ts[0]->dtype;
    int64_t sizes[DP_MAX_DIMS];
    memcpy(sizes, ref->sizes, sizeof sizes);
    sizes[dim] = 0;
    for (int i = 0; i < n; i++) {
        const dp_tensor *t = ts[i];
        dt = dp_promote(dt, t->dtype);
        bool ok = t->ndim == ref->ndim;
        for (int d = 0; ok && d < t->ndim; d++) if (d != dim && t->sizes[d] != ref->sizes[d]) ok = false;
        if (!ok) {
            char a[128], b[128];
            dp_error("cat: sizes of tensors must match except in dimension %d: tensor 1 has shape %s but tensor %d has shape %s",
                     dim + 1, dp_shape_str(ref->ndim, ref->sizes, a, sizeof a), i + 1, dp_shape_str(t->ndim, t->sizes, b, sizeof b));
            return NULL;
        }
        sizes[dim] += t->sizes[dim];
    }
    dp_tensor *out = dp_empty(ref->ndim, sizes, dt, ts[0]->device);
    if (!out) return NULL;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        dp_tensor *part = NO_GRAD(dp_narrow(out, dim, off, ts[i]->sizes[dim]));
        int rc = part ? dp_copy_raw(part, ts[i]) : -1;
        dp_tensor_release(part);
        if (rc) { dp_tensor_release(out); return NULL; }
        off += ts[i]->sizes[dim];
    }
    if (dp_needs_grad(n, ts)) {
        dp_node *node = dp_node_new("CatBackward", cat_backward, n, ts);
        if (!node) { dp_tensor_release(out); return NULL; }
        node->ip[0] = dim;
        dp_attach(out, node);
    }
    return out;
}

dp_tensor *dp_stack(int n, dp_tensor *const *ts, int dim)
{
    if (n < 1) { dp_error("stack: expected a non-empty list of tensors"); return NULL; }
    for (int i = 1; i < n; i++) {
        if (!dp_same_shape(ts[i], ts[0])) {
            char a[128], b[128];
            dp_error("stack expects each tensor to be equal size, but got %s at entry 1 and %s at entry %d",
                     dp_shape_str(ts[0]->ndim, ts[0]->sizes, a, sizeof a), dp_shape_str(ts[i]->ndim, ts[i]->sizes, b, sizeof b), i + 1);
            return NULL;
        }
    }
    if (dim < 0 || dim > ts[0]->ndim) {
        dp_error("stack: dimension %d is out of range (expected 1 to %d)", dim + 1, ts[0]->ndim + 1);
        return NULL;
    }
    dp_tensor **u = calloc((size_t)n, sizeof *u);
    if (!u) { dp_error("out of memory"); return NULL; }
    dp_tensor *out = NULL;
    int i;
    for (i = 0; i < n; i++) if (!(u[i] = dp_unsqueeze(ts[i], dim))) break;
    if (i == n) out = dp_cat(n, u, dim);
    for (int k = 0; k < n; k++) dp_tensor_release(u[k]);
    free(u);
    return out;
}

static int index_select_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *idx = dp_saved(n, 0);
    if (!idx) return -1;
    dp_tensor *z = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device);
    if (!z) return -1;
    dp_tensor *gc = dp_contiguous(g);
    dp_view zv = dp_view_of(z), iv = dp_view_of(idx), gv = gc ? dp_view_of(gc) : zv;
    int rc = gc ? dp_backend_for(z->device)->index_add(&zv, (int)n->ip[0], &iv, &gv) : -1;
    dp_tensor_release(gc);
    if (rc) { dp_tensor_release(z); return -1; }
    gin[0] = z;
    return 0;
}

dp_tensor *dp_index_select(dp_tensor *t, int dim, dp_tensor *index)
{
    if (t->ndim == 0) { dp_error("index_select: the tensor is 0-dimensional"); return NULL; }
    if (dim < 0 || dim >= t->ndim) { dp_error("index_select: dimension %d is out of range (the tensor has %d dimensions)", dim + 1, t->ndim); return NULL; }
    if (index->dtype != DP_INT64 || index->ndim > 1) {
        dp_error("index_select: the index must be a 1-D int64 tensor, got %dD %s", index->ndim, dp_dtype_name(index->dtype));
        return NULL;
    }
    int64_t n = dp_numel(index), len = t->sizes[dim];
    int64_t *host = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!host) { dp_error("out of memory"); return NULL; }
    if (dp_to_host(index, host, DP_INT64, n)) { free(host); return NULL; }
    for (int64_t i = 0; i < n; i++) {
        if (host[i] < 0 || host[i] >= len) {
            dp_error("index_select: index %lld at position %lld is out of range for dimension %d with size %lld",
                     (long long)host[i] + 1, (long long)i + 1, dim + 1, (long long)len);
            free(host);
            return NULL;
        }
    }
    dp_tensor *idx = dp_from_host(host, DP_INT64, 1, &n, DP_INT64, t->device);
    free(host);
    if (!idx) return NULL;
    int64_t sizes[DP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    sizes[dim] = n;
    dp_tensor *out = dp_empty(t->ndim, sizes, t->dtype, t->device);
    if (out && n) {
        dp_view o = dp_view_of(out), i = dp_view_of(t), x = dp_view_of(idx);
        if (dp_backend_for(t->device)->index_select(&o, &i, dim, &x)) { dp_tensor_release(out); out = NULL; }
    }
    if (out && dp_needs_grad(1, &t)) {
        dp_node *node = dp_node_new("IndexSelectBackward", index_select_backward, 1, &t);
        if (!node) { dp_tensor_release(out); dp_tensor_release(idx); return NULL; }
        node->ip[0] = dim;
        dp_node_save(node, 0, idx);
        dp_attach(out, node);
    }
    dp_tensor_release(idx);
    return out;
}

/* ---------------------------------------------------------------- elementwise */

static bool is_comparison(dp_binary_op op) { return op >= DP_EQ && op <= DP_GE; }

static dp_tensor *sum_to_input(dp_tensor *g, const dp_edge *e)
{
    return dp_sum_to(g, e->ndim, e->sizes);
}

/* the two inputs' gradients from ga, gb (NULL where not needed) */
static int finish2(dp_node *n, dp_tensor *ga, dp_tensor *gb, dp_tensor **gin)
{
    int rc = 0;
    if (ga) { gin[0] = sum_to_input(ga, &n->in[0]); if (!gin[0]) rc = -1; }
    if (gb) { gin[1] = sum_to_input(gb, &n->in[1]); if (!gin[1]) rc = -1; }
    dp_tensor_release(ga);
    dp_tensor_release(gb);
    return rc;
}

#define NEEDS(n, i) ((n)->in[i].fn || (n)->in[i].leaf)

static int binary_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *a = dp_saved(n, 0), *b = dp_saved(n, 1), *ga = NULL, *gb = NULL;
    if (!a || !b) return -1;
    bool na = NEEDS(n, 0), nb = NEEDS(n, 1);
    switch ((dp_binary_op)n->ip[0]) {
    case DP_ADD:
        if (na) { ga = g; dp_tensor_retain(g); }
        if (nb) { gb = g; dp_tensor_retain(g); }
        break;
    case DP_SUB:
        if (na) { ga = g; dp_tensor_retain(g); }
        if (nb) gb = dp_unary(DP_NEG, g, 0, 0);
        break;
    case DP_MUL:
        if (na) ga = dp_binary(DP_MUL, g, b);
        if (nb) gb = dp_binary(DP_MUL, g, a);
        break;
    case DP_DIV:
        if (na) ga = dp_binary(DP_DIV, g, b);
        if (nb) {   /* -g * a / b^2 */
            dp_tensor *t1 = dp_binary(DP_MUL, g, a), *t2 = dp_binary(DP_MUL, b, b);
            dp_tensor *t3 = t1 && t2 ? dp_binary(DP_DIV, t1, t2) : NULL;
            gb = t3 ? dp_unary(DP_NEG, t3, 0, 0) : NULL;
            dp_tensor_release(t1); dp_tensor_release(t2); dp_tensor_release(t3);
        }
        break;
    case DP_POW: {
        if (na) {   /* g * b * a^(b-1) */
            dp_tensor *bm1 = dp_binary_scalar(DP_SUB, b, 1, false);
            dp_tensor *p = bm1 ? dp_binary(DP_POW, a, bm1) : NULL, *t = p ? dp_binary(DP_MUL, p, b) : NULL;
            ga = t ? dp_binary(DP_MUL, g, t) : NULL;
            dp_tensor_release(bm1); dp_tensor_release(p); dp_tensor_release(t);
        }
        if (nb) {   /* g * a^b * log(a), with log(a) read as 0 where a == 0 */
            dp_tensor *p = dp_binary(DP_POW, a, b), *z = dp_binary_scalar(DP_EQ, a, 0, false);
            dp_tensor *zf = z ? dp_to(z, a->device, a->dtype, false) : NULL;
            dp_tensor *a1 = zf ? dp_binary(DP_ADD, a, zf) : NULL, *l = a1 ? dp_unary(DP_LOG, a1, 0, 0) : NULL;
            dp_tensor *t = p && l ? dp_binary(DP_MUL, p, l) : NULL;
            gb = t ? dp_binary(DP_MUL, g, t) : NULL;
            dp_tensor_release(p); dp_tensor_release(z); dp_tensor_release(zf);
            dp_tensor_release(a1); dp_tensor_release(l); dp_tensor_release(t);
        }
        break;
    }
    default:
        return dp_error("%s is not differentiable", n->name);
    }
    if ((na && !ga) || (nb && !gb)) { dp_tensor_release(ga); dp_tensor_release(gb); return -1; }
    return finish2(n, ga, gb, gin);
}

static const char *const binary_names[DP_NBINARY] = {
    "AddBackward", "SubBackward", "MulBackward", "DivBackward", "PowBackward",
};

static dp_tensor *record_binary(dp_tensor *out, dp_binary_op op, dp_tensor *a, dp_tensor *b)
{
    if (out && op <= DP_POW && dp_needs_grad(2, (dp_tensor *const[]){ a, b })) {
        dp_node *node = dp_node_new(binary_names[op], binary_backward, 2, (dp_tensor *const[]){ a, b });
        if (!node) { dp_tensor_release(out); return NULL; }
        node->ip[0] = op;
        dp_node_save(node, 0, a);
        dp_node_save(node, 1, b);
        dp_attach(out, node);
    }
    return out;
}

dp_tensor *dp_binary(dp_binary_op op, dp_tensor *a, dp_tensor *b)
{
    dp_tensor *ac = NULL, *bc = NULL, *out = NULL;
    if ((unsigned)op >= DP_NBINARY) { dp_error("invalid binary op %d", (int)op); return NULL; }
    /* the common case first: same shape, dtype and device, no conversion needed */
    if (a->dtype == b->dtype && dp_dtype_is_float(a->dtype) && dp_device_eq(a->device, b->device) && dp_same_shape(a, b)) {
        out = dp_empty(a->ndim, a->sizes, is_comparison(op) ? DP_BOOL : a->dtype, a->device);
        if (out && dp_numel(out)) {
            dp_view o = dp_view_of(out), va = dp_view_of(a), vb = dp_view_of(b);
            if (dp_backend_for(a->device)->binary(op, &o, &va, &vb)) { dp_tensor_release(out); return NULL; }
        }
        return record_binary(out, op, a, b);
    }
    /* a 0-dim CPU tensor may join a tensor on any device, as in PyTorch */
    dp_tensor *moved = NULL;
    if (!dp_device_eq(a->device, b->device)) {
        if (b->ndim == 0 && b->device.type == DP_DEVICE_CPU && b->device.index == 0) b = moved = dp_to(b, a->device, b->dtype, false);
        else if (a->ndim == 0 && a->device.type == DP_DEVICE_CPU && a->device.index == 0) a = moved = dp_to(a, b->device, a->dtype, false);
        else { dp_check_same_device(2, (dp_tensor *const[]){ a, b }); return NULL; }
        if (!moved) return NULL;
    }
    int nd;
    int64_t sizes[DP_MAX_DIMS];
    if (dp_broadcast_shape(a->ndim, a->sizes, b->ndim, b->sizes, &nd, sizes)) goto done;
    dp_dtype ct = promote_tensors(a, b);
    if (ct == DP_BOOL && op == DP_SUB) {
        dp_error("subtraction, the '-' operator, with two bool tensors is not supported; use the '~' or "
                 "logical_xor() operator instead");
        goto done;
    }
    /* bool + bool is a logical or, bool * bool a logical and, as in PyTorch */
    if (ct == DP_BOOL && !is_comparison(op) && op != DP_ADD && op != DP_MUL && op != DP_MAXIMUM && op != DP_MINIMUM) ct = DP_INT64;
    if ((op == DP_DIV) && !dp_dtype_is_float(ct)) ct = DP_FLOAT32;
    dp_dtype ot = is_comparison(op) ? DP_BOOL : ct;
    ac = dp_to(a, a->device, ct, false);
    bc = ac ? dp_to(b, b->device, ct, false) : NULL;
    if (!bc) goto done;
    out = dp_empty(nd, sizes, ot, a->device);
    if (!out) goto done;
    if (dp_numel(out)) {
        dp_view o = dp_view_of(out), va = broadcast_view(ac, nd, sizes), vb = broadcast_view(bc, nd, sizes);
        if (dp_backend_for(a->device)->binary(op, &o, &va, &vb)) { dp_tensor_release(out); out = NULL; goto done; }
    }
    out = record_binary(out, op, ac, bc);
done:
    dp_tensor_release(ac);
    dp_tensor_release(bc);
    dp_tensor_release(moved);
    return out;
}

static int scalar_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    double s = n->p[0];
    bool rev = n->ip[1];
    switch ((dp_binary_op)n->ip[0]) {
    case DP_ADD: dp_tensor_retain(g); gin[0] = g; return 0;
    case DP_SUB: if (!rev) { dp_tensor_retain(g); gin[0] = g; return 0; }
                 gin[0] = dp_unary(DP_NEG, g, 0, 0); break;
    case DP_MUL: gin[0] = dp_binary_scalar(DP_MUL, g, s, false); break;
    case DP_DIV:
        if (!rev) gin[0] = dp_binary_scalar(DP_DIV, g, s, false);
        else {   /* d(s/x) = -s/x^2 */
            dp_tensor *x = dp_saved(n, 0);
            if (!x) return -1;
            dp_tensor *x2 = dp_binary(DP_MUL, x, x), *q = x2 ? dp_binary(DP_DIV, g, x2) : NULL;
            gin[0] = q ? dp_binary_scalar(DP_MUL, q, -s, false) : NULL;
            dp_tensor_release(x2); dp_tensor_release(q);
        }
        break;
    case DP_POW: {
        dp_tensor *x = dp_saved(n, 0);
        if (!x) return -1;
        if (!rev) {   /* s * x^(s-1) */
            dp_tensor *p = s == 2 ? (dp_tensor_retain(x), x) : dp_binary_scalar(DP_POW, x, s - 1, false);
            dp_tensor *t = p ? dp_binary(DP_MUL, g, p) : NULL;
            gin[0] = t ? dp_binary_scalar(DP_MUL, t, s, false) : NULL;
            dp_tensor_release(p); dp_tensor_release(t);
        } else {      /* s^x * log(s) */
            dp_tensor *p = dp_binary_scalar(DP_POW, x, s, true), *t = p ? dp_binary(DP_MUL, g, p) : NULL;
            gin[0] = t ? dp_binary_scalar(DP_MUL, t, log(s), false) : NULL;
            dp_tensor_release(p); dp_tensor_release(t);
        }
        break;
    }
    default: return dp_error("%s is not differentiable", n->name);
    }
    return gin[0] ? 0 : -1;
}

dp_tensor *dp_binary_scalar(dp_binary_op op, dp_tensor *a, double s, bool reverse)
{
    if ((unsigned)op >= DP_NBINARY) { dp_error("invalid binary op %d", (int)op); return NULL; }
    dp_dtype ct = a->dtype;
    bool s_int = s == floor(s) && fabs(s) < 9.2e18;
    if (!dp_dtype_is_float(ct) && !s_int) ct = DP_FLOAT32;
    if (ct == DP_BOOL && !is_comparison(op)) ct = DP_INT64;
    if (op == DP_DIV && !dp_dtype_is_float(ct)) ct = DP_FLOAT32;
    if (op == DP_POW && ct == DP_INT64 && !reverse && s < 0) {
        dp_error("integers to negative integer powers are not allowed");
        return NULL;
    }
    dp_dtype ot = is_comparison(op) ? DP_BOOL : ct;
    dp_tensor *ac = dp_to(a, a->device, ct, false);
    if (!ac) return NULL;
    dp_tensor *out = dp_empty(a->ndim, a->sizes, ot, a->device);
    if (out && dp_numel(out)) {
        dp_view o = dp_view_of(out), v = dp_view_of(ac);
        if (dp_backend_for(a->device)->binary_scalar(op, &o, &v, s, reverse)) { dp_tensor_release(out); out = NULL; }
    }
    if (out && op <= DP_POW && dp_needs_grad(1, &ac)) {
        dp_node *node = dp_node_new(binary_names[op], scalar_backward, 1, &ac);
        if (!node) { dp_tensor_release(out); dp_tensor_release(ac); return NULL; }
        node->ip[0] = op;
        node->ip[1] = reverse;
        node->p[0] = s;
        if (op == DP_POW || (op == DP_DIV && reverse)) dp_node_save(node, 0, ac);
        dp_attach(out, node);
    }
    dp_tensor_release(ac);
    return out;
}

static const char *const unary_names[DP_NUNARY] = {
    "NegBackward", "ExpBackward", "LogBackward", "SqrtBackward", "AbsBackward", "ReluBackward",
    "SigmoidBackward", "TanhBackward", "ClampBackward", "SignBackward", "ReluBackward",
};

/* (x >= lo) & (x <= hi) as x's dtype; NaN bounds are open */
static dp_tensor *clamp_mask(dp_tensor *x, double lo, double hi)
{
    dp_tensor *m = dp_ones(x->ndim, x->sizes, x->dtype, x->device);
    for (int k = 0; m && k < 2; k++) {
        double bound = k ? hi : lo;
        if (bound != bound) continue;
        dp_tensor *c = dp_binary_scalar(k ? DP_LE : DP_GE, x, bound, false);
        dp_tensor *cf = c ? dp_to(c, x->device, x->dtype, false) : NULL;
        dp_tensor *nm = cf ? dp_binary(DP_MUL, m, cf) : NULL;
        dp_tensor_release(c); dp_tensor_release(cf); dp_tensor_release(m);
        m = nm;
    }
    return m;
}

static int unary_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *x = dp_saved(n, 0), *y = dp_saved(n, 1), *t = NULL, *u = NULL;
    if ((n->saved[0] && !x) || (n->saved[1] && !y)) return -1;
    switch ((dp_unary_op)n->ip[0]) {
    case DP_NEG: gin[0] = dp_unary(DP_NEG, g, 0, 0); break;
    case DP_EXP: gin[0] = dp_binary(DP_MUL, g, y); break;
    case DP_LOG: gin[0] = dp_binary(DP_DIV, g, x); break;
    case DP_SQRT: t = dp_binary_scalar(DP_MUL, y, 2, false); gin[0] = t ? dp_binary(DP_DIV, g, t) : NULL; break;
    case DP_ABS: t = dp_unary(DP_SIGN, x, 0, 0); gin[0] = t ? dp_binary(DP_MUL, g, t) : NULL; break;
    case DP_RELU: t = dp_unary(DP_RELU_MASK, y, 0, 0); gin[0] = t ? dp_binary(DP_MUL, g, t) : NULL; break;
    case DP_SIGMOID:   /* g * y * (1 - y) */
        t = dp_binary_scalar(DP_SUB, y, 1, true);
        u = t ? dp_binary(DP_MUL, y, t) : NULL;
        gin[0] = u ? dp_binary(DP_MUL, g, u) : NULL;
        break;
    case DP_TANH:      /* g * (1 - y^2) */
        t = dp_binary(DP_MUL, y, y);
        u = t ? dp_binary_scalar(DP_SUB, t, 1, true) : NULL;
        gin[0] = u ? dp_binary(DP_MUL, g, u) : NULL;
        break;
    case DP_CLAMP: t = clamp_mask(x, n->p[0], n->p[1]); gin[0] = t ? dp_binary(DP_MUL, g, t) : NULL; break;
    default: return dp_error("%s is not differentiable", n->name);
    }
    dp_tensor_release(t);
    dp_tensor_release(u);
    return gin[0] ? 0 : -1;
}

dp_tensor *dp_unary(dp_unary_op op, dp_tensor *a, double p0, double p1)
{
    if ((unsigned)op >= DP_NUNARY) { dp_error("invalid unary op %d", (int)op); return NULL; }
    bool float_only = op == DP_EXP || op == DP_LOG || op == DP_SQRT || op == DP_SIGMOID || op == DP_TANH;
    dp_dtype ct = a->dtype;
    if (float_only && !dp_dtype_is_float(ct)) ct = DP_FLOAT32;
    if (ct == DP_BOOL && op != DP_RELU_MASK) {
        if (op == DP_NEG) { dp_error("negation, the '-' operator, on a bool tensor is not supported"); return NULL; }
        ct = DP_INT64;
    }
    dp_tensor *ac = dp_to(a, a->device, ct, false);
    if (!ac) return NULL;
    dp_tensor *out = dp_empty(a->ndim, a->sizes, ct, a->device);
    if (out && dp_numel(out)) {
        dp_view o = dp_view_of(out), v = dp_view_of(ac);
        if (dp_backend_for(a->device)->unary(op, &o, &v, p0, p1)) { dp_tensor_release(out); out = NULL; }
    }
    if (out && op < DP_SIGN && dp_needs_grad(1, &ac)) {
        dp_node *node = dp_node_new(unary_names[op], unary_backward, 1, &ac);
        if (!node) { dp_tensor_release(out); dp_tensor_release(ac); return NULL; }
        node->ip[0] = op;
        node->p[0] = p0;
        node->p[1] = p1;
        if (op == DP_LOG || op == DP_ABS || op == DP_CLAMP) dp_node_save(node, 0, ac);
        if (op == DP_EXP || op == DP_SQRT || op == DP_RELU || op == DP_SIGMOID || op == DP_TANH) dp_node_save(node, 1, out);
        dp_attach(out, node);
    }
    dp_tensor_release(ac);
    return out;
}

/* ---------------------------------------------------------------- in-place */

static int inplace_check(dp_tensor *self, const char *op)
{
    return dp_check_inplace(self, op);
}

int dp_binary_(dp_binary_op op, dp_tensor *self, dp_tensor *other)
{
    if (inplace_check(self, "binary")) return -1;
    if (other->ndim > 0 || other->device.type != DP_DEVICE_CPU) {
        if (dp_check_same_device(2, (dp_tensor *const[]){ self, other })) return -1;
    }
    int nd;
    int64_t sizes[DP_MAX_DIMS];
    if (dp_broadcast_shape(self->ndim, self->sizes, other->ndim, other->sizes, &nd, sizes)) return -1;
    if (nd != self->ndim || memcmp(sizes, self->sizes, sizeof(int64_t) * (size_t)nd)) {
        char a[128], b[128];
        return dp_error("output with shape %s doesn't match the broadcast shape %s", dp_shape_str(self->ndim, self->sizes, a, sizeof a),
                        dp_shape_str(nd, sizes, b, sizeof b));
    }
    if (!dp_dtype_is_float(self->dtype) && (dp_dtype_is_float(other->dtype) || op == DP_DIV))
        return dp_error("result type %s can't be cast to the desired output type %s",
                        dp_dtype_name(op == DP_DIV ? DP_FLOAT32 : other->dtype), dp_dtype_name(self->dtype));
    dp_tensor *oc = NO_GRAD(dp_to(other, self->device, self->dtype, false));
    if (!oc) return -1;
    dp_view o = dp_view_of(self), vb = broadcast_view(oc, nd, sizes);
    int rc = dp_backend_for(self->device)->binary(op, &o, &o, &vb);
    dp_tensor_release(oc);
    if (!rc) dp_bump_version(self);
    return rc;
}

int dp_binary_scalar_(dp_binary_op op, dp_tensor *self, double s)
{
    if (inplace_check(self, "binary")) return -1;
    if (!dp_dtype_is_float(self->dtype) && (op == DP_DIV || s != floor(s)))
        return dp_error("result type float32 can't be cast to the desired output type %s", dp_dtype_name(self->dtype));
    dp_view o = dp_view_of(self);
    int rc = dp_numel(self) ? dp_backend_for(self->device)->binary_scalar(op, &o, &o, s, false) : 0;
    if (!rc) dp_bump_version(self);
    return rc;
}

int dp_unary_(dp_unary_op op, dp_tensor *self, double p0, double p1)
{
    if (inplace_check(self, "unary")) return -1;
    dp_view o = dp_view_of(self);
    int rc = dp_numel(self) ? dp_backend_for(self->device)->unary(op, &o, &o, p0, p1) : 0;
    if (!rc) dp_bump_version(self);
    return rc;
}

int dp_fill_(dp_tensor *self, double value)
{
    if (inplace_check(self, "fill_")) return -1;
    dp_view o = dp_view_of(self);
    int rc = dp_numel(self) ? dp_backend_for(self->device)->fill(&o, value) : 0;
    if (!rc) dp_bump_version(self);
    return rc;
}

int dp_copy_(dp_tensor *self, dp_tensor *src)
{
    if (inplace_check(self, "copy_")) return -1;
    int nd;
    int64_t sizes[DP_MAX_DIMS];
    if (dp_broadcast_shape(self->ndim, self->sizes, src->ndim, src->sizes, &nd, sizes)) return -1;
    if (nd != self->ndim || memcmp(sizes, self->sizes, sizeof(int64_t) * (size_t)nd)) {
        char a[128], b[128];
        return dp_error("copy_: the source of shape %s cannot be broadcast to the destination's shape %s",
                        dp_shape_str(src->ndim, src->sizes, a, sizeof a), dp_shape_str(self->ndim, self->sizes, b, sizeof b));
    }
    if (dp_same_shape(self, src)) return dp_copy_raw(self, src);
    dp_tensor *e = NO_GRAD(dp_expand(src, self->ndim, self->sizes));
    int rc = e ? dp_copy_raw(self, e) : -1;
    dp_tensor_release(e);
    return rc;
}

int dp_axpy_(dp_tensor *self, double alpha, dp_tensor *other)
{
    if (alpha == 1.0) return NO_GRAD(dp_binary_(DP_ADD, self, other));
    dp_tensor *t = NO_GRAD(dp_binary_scalar(DP_MUL, other, alpha, false));
    int rc = t ? NO_GRAD(dp_binary_(DP_ADD, self, t)) : -1;
    dp_tensor_release(t);
    return rc;
}

/* ---------------------------------------------------------------- reductions */

dp_tensor *dp_sum_to(dp_tensor *g, int ndim, const int64_t *sizes)
{
    if (g->ndim == ndim && !memcmp(g->sizes, sizes, sizeof(int64_t) * (size_t)ndim)) { dp_tensor_retain(g); return g; }
    dp_tensor *cur = g;
    dp_tensor_retain(cur);
    while (cur && cur->ndim > ndim) {
        dp_tensor *r = dp_reduce(DP_SUM, cur, 0, false, NULL);
        dp_tensor_release(cur);
        cur = r;
    }
    for (int d = 0; cur && d < ndim; d++) {
        if (sizes[d] == 1 && cur->sizes[d] != 1) {
            dp_tensor *r = dp_reduce(DP_SUM, cur, d, true, NULL);
            dp_tensor_release(cur);
            cur = r;
        }
    }
    return cur;
}

/* g (reduced shape) broadcast back to the input's shape */
static dp_tensor *expand_back(dp_node *n, dp_tensor *g)
{
    int dim = (int)n->ip[1];
    bool keep = n->ip[2];
    dp_tensor *u = (dim >= 0 && !keep) ? dp_unsqueeze(g, dim) : dp_alias(g);
    if (!u) return NULL;
    if (dim < 0) {   /* whole-tensor reduction: g is 0-dim */
        dp_tensor *r = dp_reshape(u, 0, NULL);
        dp_tensor_release(u);
        u = r;
        if (!u) return NULL;
    }
    dp_tensor *e = dp_expand(u, n->in[0].ndim, n->in[0].sizes);
    dp_tensor_release(u);
    return e;
}

static int reduce_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_reduce_op op = (dp_reduce_op)n->ip[0];
    int dim = (int)n->ip[1];
    dp_tensor *e = expand_back(n, g);
    if (!e) return -1;
    if (op == DP_SUM) { gin[0] = dp_contiguous(e); dp_tensor_release(e); return gin[0] ? 0 : -1; }
    if (op == DP_MEAN) {
        int64_t count = 1;
        if (dim < 0) for (int d = 0; d < n->in[0].ndim; d++) count *= n->in[0].sizes[d];
        else count = n->in[0].sizes[dim];
        gin[0] = dp_binary_scalar(DP_DIV, e, (double)count, false);
        dp_tensor_release(e);
        return gin[0] ? 0 : -1;
    }
    /* max / min: the gradient goes to the chosen element (with dim), or is shared evenly
     * between the tied extreme elements (without dim), as PyTorch does */
    dp_tensor *x = dp_saved(n, 0), *r = dp_saved(n, 1), *mask = NULL, *mf = NULL, *sel = NULL;
    if (!x || !r) { dp_tensor_release(e); return -1; }
    if (dim < 0) {
        mask = dp_binary(DP_EQ, x, r);
        mf = mask ? dp_to(mask, x->device, x->dtype, false) : NULL;
        dp_tensor *cnt = mf ? dp_reduce(DP_SUM, mf, -1, false, NULL) : NULL;
        dp_tensor *share = cnt ? dp_binary(DP_DIV, mf, cnt) : NULL;
        gin[0] = share ? dp_binary(DP_MUL, e, share) : NULL;
        dp_tensor_release(cnt); dp_tensor_release(share);
    } else {
        /* one-hot of the indices along dim: arange(len) == index */
        int64_t len = n->in[0].sizes[dim];
        dp_tensor *ar = dp_arange(0, (double)len, 1, DP_INT64, x->device);
        int64_t shape[DP_MAX_DIMS];
        for (int d = 0; d < n->in[0].ndim; d++) shape[d] = d == dim ? len : 1;
        dp_tensor *arv = ar ? dp_view_sizes(ar, n->in[0].ndim, shape) : NULL;
        dp_tensor *idx = n->ip[2] ? (dp_tensor_retain(r), r) : dp_unsqueeze(r, dim);
        mask = arv && idx ? dp_binary(DP_EQ, arv, idx) : NULL;
        mf = mask ? dp_to(mask, x->device, x->dtype, false) : NULL;
        gin[0] = mf ? dp_binary(DP_MUL, e, mf) : NULL;
        dp_tensor_release(ar); dp_tensor_release(arv); dp_tensor_release(idx);
    }
    dp_tensor_release(mask); dp_tensor_release(mf); dp_tensor_release(sel); dp_tensor_release(e);
    return gin[0] ? 0 : -1;
}

static const char *const reduce_names[DP_NREDUCE] = {
    "SumBackward", "MeanBackward", "MaxBackward", "MinBackward", "ArgmaxBackward", "ArgminBackward",
};

dp_tensor *dp_reduce(dp_reduce_op op, dp_tensor *t, int dim, bool keepdim, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if ((unsigned)op >= DP_NREDUCE) { dp_error("invalid reduction %d", (int)op); return NULL; }
    static const char *const names[] = { "sum", "mean", "max", "min", "argmax", "argmin" };
    if (op == DP_MEAN && !dp_dtype_is_float(t->dtype)) {
        dp_error("mean(): could not infer output dtype. Input dtype must be a floating point dtype, got %s", dp_dtype_name(t->dtype));
        return NULL;
    }
    if (dim >= 0 && (t->ndim == 0 ? dim > 0 : dim >= t->ndim)) {
        dp_error("%s: dimension %d is out of range (the tensor has %d dimension%s)", names[op], dim + 1, t->ndim, t->ndim == 1 ? "" : "s");
        return NULL;
    }
    bool extreme = op != DP_SUM && op != DP_MEAN;
    int64_t len = dim < 0 ? dp_numel(t) : (t->ndim ? t->sizes[dim] : 1);
    if (extreme && len == 0) {
        dp_error("%s(): expected a non-empty tensor%s", names[op], dim >= 0 ? " along the reduced dimension" : "");
        return NULL;
    }
    dp_dtype ot = op == DP_ARGMAX || op == DP_ARGMIN ? DP_INT64 :
                  (op == DP_SUM && !dp_dtype_is_float(t->dtype)) ? DP_INT64 : t->dtype;
    /* the input as a tensor with the reduced dimension explicit */
    dp_tensor *src, *out = NULL, *idx = NULL;
    int rdim;
    int64_t osizes[DP_MAX_DIMS];
    int ond = 0;
    if (dim < 0 || t->ndim == 0) {
        dp_tensor *c = NO_GRAD(dp_contiguous(t));
        int64_t n = dp_numel(t);
        src = c ? NO_GRAD(dp_reshape(c, 1, &n)) : NULL;
        dp_tensor_release(c);
        rdim = 0;
        if (keepdim && dim >= 0) { ond = t->ndim; for (int d = 0; d < ond; d++) osizes[d] = 1; }
    } else {
        src = dp_alias(t);
        rdim = dim;
        for (int d = 0; d < t->ndim; d++) {
            if (d != dim) osizes[ond++] = t->sizes[d];
            else if (keepdim) osizes[ond++] = 1;
        }
    }
    if (!src) return NULL;
    out = dp_empty(ond, osizes, ot, t->device);
    if (out && (op == DP_MAX || op == DP_MIN) && dim >= 0) idx = dp_empty(ond, osizes, DP_INT64, t->device);
    if (!out || ((op == DP_MAX || op == DP_MIN) && dim >= 0 && !idx)) goto fail;
    if (dp_numel(out)) {
        /* view out (and idx) without the reduced dimension for the kernel */
        dp_view ov = dp_view_of(out), xv;
        if (keepdim && ond > 0 && ond == src->ndim) {
            int k = 0;
            for (int d = 0; d < ond; d++) if (d != rdim) { ov.sizes[k] = out->sizes[d]; ov.strides[k++] = out->strides[d]; }
            ov.ndim = k;
        } else if (src->ndim == 1) ov.ndim = 0;
        if (idx) { xv = dp_view_of(idx); xv.ndim = ov.ndim; memcpy(xv.sizes, ov.sizes, sizeof ov.sizes);
                   dp_contiguous_strides(xv.ndim, xv.sizes, xv.strides); }
        if (len == 0) { if (dp_backend_for(t->device)->fill(&ov, 0)) goto fail; }
        else {
            dp_view iv = dp_view_of(src);
            if (dp_backend_for(t->device)->reduce(op, &ov, idx ? &xv : NULL, &iv, rdim)) goto fail;
        }
    }
    if (op <= DP_MIN && dp_needs_grad(1, &t)) {
        dp_node *node = dp_node_new(reduce_names[op], reduce_backward, 1, &t);
        if (!node) goto fail;
        node->ip[0] = op;
        node->ip[1] = dim < 0 || t->ndim == 0 ? -1 : dim;
        node->ip[2] = keepdim;
        if (op == DP_MAX || op == DP_MIN) {
            dp_node_save(node, 0, t);
            dp_node_save(node, 1, dim >= 0 && t->ndim ? idx : out);
        }
        dp_attach(out, node);
    }
    dp_tensor_release(src);
    if (indices) *indices = idx; else dp_tensor_release(idx);
    return out;
fail:
    dp_tensor_release(src);
    dp_tensor_release(out);
    dp_tensor_release(idx);
    return NULL;
}

/* ---------------------------------------------------------------- softmax */

static int softmax_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *y = dp_saved(n, 0);
    if (!y) return -1;
    dp_tensor *out = dp_empty(g->ndim, g->sizes, g->dtype, g->device);
    if (!out) return -1;
    dp_view o = dp_view_of(out), gv = dp_view_of(g), yv = dp_view_of(y);
    if (dp_numel(out) && dp_backend_for(g->device)->softmax_backward(n->ip[1], &o, &gv, &yv, (int)n->ip[0])) {
        dp_tensor_release(out);
        return -1;
    }
    gin[0] = out;
    return 0;
}

static dp_tensor *softmax_impl(dp_tensor *t, int dim, bool log)
{
    if (t->ndim == 0) { int64_t one = 1; dp_tensor *r = dp_reshape(t, 1, &one), *s = r ? softmax_impl(r, 0, log) : NULL; dp_tensor_release(r);
                        dp_tensor *o = s ? dp_reshape(s, 0, NULL) : NULL; dp_tensor_release(s); return o; }
    if (dim < 0 || dim >= t->ndim) {
        dp_error("%s: dimension %d is out of range (the tensor has %d dimensions)", log ? "log_softmax" : "softmax", dim + 1, t->ndim);
        return NULL;
    }
    dp_dtype dt = dp_dtype_is_float(t->dtype) ? t->dtype : DP_FLOAT32;
    dp_tensor *x = dp_to(t, t->device, dt, false);
    if (!x) return NULL;
    dp_tensor *out = dp_empty(t->ndim, t->sizes, dt, t->device);
    if (out && dp_numel(out)) {
        dp_view o = dp_view_of(out), v = dp_view_of(x);
        if (dp_backend_for(t->device)->softmax(log, &o, &v, dim)) { dp_tensor_release(out); out = NULL; }
    }
    if (out && dp_needs_grad(1, &x)) {
        dp_node *node = dp_node_new(log ? "LogSoftmaxBackward" : "SoftmaxBackward", softmax_backward, 1, &x);
        if (!node) { dp_tensor_release(out); dp_tensor_release(x); return NULL; }
        node->ip[0] = dim;
        node->ip[1] = log;
        dp_node_save(node, 0, out);
        dp_attach(out, node);
    }
    dp_tensor_release(x);
    return out;
}

dp_tensor *dp_softmax(dp_tensor *t, int dim) { return softmax_impl(t, dim, false); }
dp_tensor *dp_log_softmax(dp_tensor *t, int dim) { return softmax_impl(t, dim, true); }

/* ---------------------------------------------------------------- whole-tensor comparisons */

int dp_allclose(dp_tensor *a, dp_tensor *b, double rtol, double atol)
{
    if (dp_check_same_device(2, (dp_tensor *const[]){ a, b })) return -1;
    int nd;
    int64_t sizes[DP_MAX_DIMS];
    if (dp_broadcast_shape(a->ndim, a->sizes, b->ndim, b->sizes, &nd, sizes)) return -1;
    dp_tensor *ea = NO_GRAD(dp_expand(a, nd, sizes)), *eb = NO_GRAD(dp_expand(b, nd, sizes));
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sizes[d];
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1)), *y = malloc(sizeof(double) * (size_t)(n ? n : 1));
    int rc = -1;
    if (ea && eb && x && y && !dp_to_doubles(ea, x, n) && !dp_to_doubles(eb, y, n)) {
        rc = 1;
        for (int64_t i = 0; i < n; i++) {
            if (x[i] == y[i]) continue;
            if (x[i] != x[i] || y[i] != y[i] || !(fabs(x[i] - y[i]) <= atol + rtol * fabs(y[i]))) { rc = 0; break; }
        }
    } else if (!x || !y) dp_error("out of memory");
    free(x); free(y);
    dp_tensor_release(ea); dp_tensor_release(eb);
    return rc;
}

int dp_equal(dp_tensor *a, dp_tensor *b)
{
    if (dp_check_same_device(2, (dp_tensor *const[]){ a, b })) return -1;
    if (!dp_same_shape(a, b)) return 0;
    return dp_allclose(a, b, 0, 0);
}
