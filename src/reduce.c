/* reduce.c: reductions (sum, mean, max, min, argmax, argmin over everything or one
 * dimension) and their backward, the broadcasting backward dp_sum_to, softmax and
 * log_softmax, and whole-tensor comparisons (allclose, equal). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
     * between the tied extreme elements (without dim; NaN ties NaN), as PyTorch does.  The
     * other elements get 0 whatever the gradient is (masked, not multiplied). */
    dp_tensor *x = dp_saved(n, 0), *r = dp_saved(n, 1), *mask = NULL, *val = NULL;
    if (!x || !r) { dp_tensor_release(e); return -1; }
    if (dim < 0) {
        dp_tensor *eq = dp_binary(DP_EQ, x, r), *xn = dp_binary(DP_NE, x, x), *rn = dp_binary(DP_NE, r, r);
        dp_tensor *nans = xn && rn ? dp_binary(DP_MUL, xn, rn) : NULL;   /* bool * bool: and */
        mask = eq && nans ? dp_binary(DP_ADD, eq, nans) : NULL;          /* bool + bool: or */
        dp_tensor *cnt = mask ? dp_reduce(DP_SUM, mask, -1, false, NULL) : NULL;
        val = cnt ? dp_binary(DP_DIV, e, cnt) : NULL;
        dp_tensor_release(eq); dp_tensor_release(xn); dp_tensor_release(rn); dp_tensor_release(nans); dp_tensor_release(cnt);
    } else {
        /* one-hot of the indices along dim: arange(len) == index */
        int64_t len = n->in[0].sizes[dim];
        dp_tensor *ar = dp_arange(0, (double)len, 1, DP_INT64, x->device);
        int64_t shape[DP_MAX_DIMS];
        for (int d = 0; d < n->in[0].ndim; d++) shape[d] = d == dim ? len : 1;
        dp_tensor *arv = ar ? dp_view_sizes(ar, n->in[0].ndim, shape) : NULL;
        dp_tensor *idx = n->ip[2] ? (dp_tensor_retain(r), r) : dp_unsqueeze(r, dim);
        mask = arv && idx ? dp_binary(DP_EQ, arv, idx) : NULL;
        val = e;
        dp_tensor_retain(e);
        dp_tensor_release(ar); dp_tensor_release(arv); dp_tensor_release(idx);
    }
    dp_tensor *zero = val ? dp_zeros(0, NULL, val->dtype, val->device) : NULL;
    gin[0] = mask && zero ? dp_where(mask, val, zero) : NULL;
    dp_tensor_release(zero); dp_tensor_release(mask); dp_tensor_release(val); dp_tensor_release(e);
    return gin[0] ? 0 : -1;
}

dp_tensor *dp_reduce(dp_reduce_op op, dp_tensor *t, int dim, bool keepdim, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if ((unsigned)op >= DP_NREDUCE) { dp_error("invalid reduction %d", (int)op); return NULL; }
    const dp_op_info *row = dp_op_find(DP_OP_REDUCE, op);
    if (op == DP_MEAN && !dp_dtype_is_float(t->dtype)) {
        dp_error("mean(): could not infer output dtype. Input dtype must be a floating point dtype, got %s", dp_dtype_name(t->dtype));
        return NULL;
    }
    if (dim >= 0 && (t->ndim == 0 ? dim > 0 : dim >= t->ndim)) {
        dp_error("%s: dimension %d is out of range (the tensor has %d dimension%s)", row->name, dim + 1, t->ndim, t->ndim == 1 ? "" : "s");
        return NULL;
    }
    bool extreme = op != DP_SUM && op != DP_MEAN;
    int64_t len = dim < 0 ? dp_numel(t) : (t->ndim ? t->sizes[dim] : 1);
    if (extreme && len == 0) {
        dp_error("%s(): expected a non-empty tensor%s", row->name, dim >= 0 ? " along the reduced dimension" : "");
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
        if (len == 0) { if (dp_backend_for(t->device)->fill(&ov, op == DP_MEAN ? NAN : 0)) goto fail; }   /* the mean of nothing is NaN */
        else {
            dp_view iv = dp_view_of(src);
            if (dp_backend_for(t->device)->reduce(op, &ov, idx ? &xv : NULL, &iv, rdim)) goto fail;
        }
    }
    const char *node_name = dim < 0 || t->ndim == 0 ? row->node : row->node_dim;
    if (node_name && dp_needs_grad(1, &t)) {
        dp_node *node = dp_node_new(node_name, reduce_backward, 1, &t);
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
        dp_node *node = dp_node_new(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", softmax_backward, 1, &x);
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
