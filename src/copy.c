/* copy.c: copies and device moves (clone, contiguous, to, the replicas' to_reuse), cat,
 * stack and index_select.  Moves between devices go through the backends' byte copies;
 * autograd sees them as identities whose gradient the engine moves back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int copy_raw(dp_tensor *dst, dp_tensor *src, bool non_blocking);

int dp_copy_raw(dp_tensor *dst, dp_tensor *src) { return copy_raw(dst, src, false); }

/* non_blocking: a host-to-GPU copy whose source is pinned memory returns once queued. */
static int copy_raw(dp_tensor *dst, dp_tensor *src, bool non_blocking)
{
    if (dp_numel(dst) == 0) return 0;
    if (dp_device_eq(dst->device, src->device)) {
        dp_view o = dp_view_of(dst), i = dp_broadcast_view(src, dst->ndim, dst->sizes);
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
    return record1(out, t, "CloneBackward0", identity_backward);
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
    return record1(out, t, "ToCopyBackward0", identity_backward);
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
        dp_node *node = dp_node_new("CatBackward0", cat_backward, n, ts);
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

bool dp_device_checks_indices(dp_device dev)
{
    const dp_backend *be = dev.type == DP_DEVICE_CPU ? NULL : dp_backend_for(dev);
    return be && be->check_indices;
}

int64_t *dp_indices_to_host(dp_tensor *index, int64_t n, int64_t limit, int64_t *bad)
{
    int64_t *host = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!host) { dp_error("out of memory"); return NULL; }
    if (dp_to_host(index, host, DP_INT64, n)) { free(host); return NULL; }
    *bad = -1;
    for (int64_t i = 0; i < n && *bad < 0; i++)
        if (host[i] < 0 || host[i] >= limit) *bad = i;
    return host;
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
    char msg[200];
    snprintf(msg, sizeof msg, "index_select: index %%lld (at position %%lld) is out of range for dimension %d with size %lld",
             dim + 1, (long long)len);
    const dp_backend *be = dp_backend_for(t->device);
    dp_tensor *idx;
    if (be && be->check_indices && index->device.type == t->device.type && index->device.index == t->device.index) {
        /* checked on the device, reported at its next synchronisation: no stall here */
        if (!(idx = dp_contiguous(index))) return NULL;
        dp_view x = dp_view_of(idx);
        if (be->check_indices(&x, len, msg)) { dp_tensor_release(idx); return NULL; }
    } else {
        int64_t bad;
        int64_t *host = dp_indices_to_host(index, n, len, &bad);
        if (!host) return NULL;
        if (bad >= 0) {
            dp_error(msg, (long long)host[bad] + 1, (long long)bad + 1);
            free(host);
            return NULL;
        }
        idx = dp_from_host(host, DP_INT64, 1, &n, DP_INT64, t->device);
        free(host);
        if (!idx) return NULL;
    }
    int64_t sizes[DP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    sizes[dim] = n;
    dp_tensor *out = dp_empty(t->ndim, sizes, t->dtype, t->device);
    if (out && n) {
        dp_view o = dp_view_of(out), i = dp_view_of(t), x = dp_view_of(idx);
        if (dp_backend_for(t->device)->index_select(&o, &i, dim, &x)) { dp_tensor_release(out); out = NULL; }
    }
    if (out && dp_needs_grad(1, &t)) {
        dp_node *node = dp_node_new("IndexSelectBackward0", index_select_backward, 1, &t);
        if (!node) { dp_tensor_release(out); dp_tensor_release(idx); return NULL; }
        node->ip[0] = dim;
        dp_node_save(node, 0, idx);
        dp_attach(out, node);
    }
    dp_tensor_release(idx);
    return out;
}

