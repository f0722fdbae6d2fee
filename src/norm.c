/* norm.c: layer normalization as one op.  The forward normalizes each row of the trailing
 * dims and saves the row's mean and 1/std; the backward reads them back and has the device
 * compute the gradients of x, weight and bias in one kernel call, instead of the dozen ops
 * (and their saved temporaries) that the composition of mean, var and rsqrt records.
 * GroupNorm is this op on a [N, groups, -1] view (lua/nn/functional_layers.lua). */
#include <string.h>

#include "internal.h"

/* ip[0], ip[1]: weight and bias were given; ip[2], ip[3]: rows and cols.
 * Saved: 0 = x (contiguous), 1 = mean, 2 = rstd, 3 = weight (contiguous). */
static int layer_norm_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    bool has_w = n->ip[0], has_b = n->ip[1];
    int64_t rows = n->ip[2], cols = n->ip[3];
    dp_tensor *x = dp_saved(n, 0), *mean = dp_saved(n, 1), *rstd = dp_saved(n, 2);
    dp_tensor *w = has_w ? dp_saved(n, 3) : NULL;
    if (!x || !mean || !rstd || (has_w && !w)) return -1;
    bool want_x = DP_NEEDS_INPUT(n, 0), want_w = has_w && DP_NEEDS_INPUT(n, 1), want_b = has_b && DP_NEEDS_INPUT(n, 2);
    dp_tensor *gx = NULL, *gw = NULL, *gb = NULL, *gc = NULL;
    bool empty = rows == 0 || cols == 0;
    /* an empty input: no kernel; the parameters' gradients are zero sums */
    if (want_x) gx = dp_empty(x->ndim, x->sizes, g->dtype, g->device);
    if (want_w) gw = empty ? dp_zeros(n->in[1].ndim, n->in[1].sizes, g->dtype, g->device)
                           : dp_empty(n->in[1].ndim, n->in[1].sizes, g->dtype, g->device);
    if (want_b) gb = empty ? dp_zeros(n->in[2].ndim, n->in[2].sizes, g->dtype, g->device)
                           : dp_empty(n->in[2].ndim, n->in[2].sizes, g->dtype, g->device);
    int rc = (want_x && !gx) || (want_w && !gw) || (want_b && !gb) ? -1 : 0;
    if (!rc && !empty) {
        gc = dp_contiguous(g);
        if (!gc) rc = -1;
    }
    if (!rc && !empty) {
        dp_view gxv = gx ? dp_view_of(gx) : (dp_view){ 0 }, gwv = gw ? dp_view_of(gw) : (dp_view){ 0 };
        dp_view gbv = gb ? dp_view_of(gb) : (dp_view){ 0 }, wv = w ? dp_view_of(w) : (dp_view){ 0 };
        dp_view gv = dp_view_of(gc), xv = dp_view_of(x), mv = dp_view_of(mean), rv = dp_view_of(rstd);
        rc = dp_backend_for(g->device)->layer_norm_backward(gx ? &gxv : NULL, gw ? &gwv : NULL, gb ? &gbv : NULL,
                                                            &gv, &xv, &mv, &rv, w ? &wv : NULL, rows, cols);
    }
    dp_tensor_release(gc);
    if (rc) {
        dp_tensor_release(gx);
        dp_tensor_release(gw);
        dp_tensor_release(gb);
        return -1;
    }
    gin[0] = gx;
    gin[1] = gw;
    gin[2] = gb;
    return 0;
}

/* The parameter's shape must be the normalized shape (the last norm_ndim dims of x). */
static int check_param(const char *what, dp_tensor *p, dp_tensor *x, int norm_ndim)
{
    char a[128], b[128];
    const int64_t *want = x->sizes + (x->ndim - norm_ndim);
    bool ok = p->ndim == norm_ndim && memcmp(p->sizes, want, sizeof(int64_t) * (size_t)norm_ndim) == 0;
    if (!ok)
        return dp_error("layer_norm: %s has shape %s but the normalized shape is %s", what,
                        dp_shape_str(p->ndim, p->sizes, a, sizeof a), dp_shape_str(norm_ndim, want, b, sizeof b));
    if (p->dtype != x->dtype)
        return dp_error("layer_norm: %s is %s but the input is %s (they must have one dtype)", what,
                        dp_dtype_name(p->dtype), dp_dtype_name(x->dtype));
    return 0;
}

dp_tensor *dp_layer_norm(dp_tensor *x, int norm_ndim, dp_tensor *weight, dp_tensor *bias, double eps)
{
    dp_tensor *all[3] = { x, weight, bias };
    if (dp_check_same_device(3, all)) return NULL;
    if (dp_need_float(x->dtype, "layer_norm")) return NULL;
    if (norm_ndim < 0 || norm_ndim > x->ndim) {
        dp_error("layer_norm: cannot normalize over the last %d dims of a %d-dimensional input", norm_ndim, x->ndim);
        return NULL;
    }
    if ((weight && check_param("weight", weight, x, norm_ndim)) || (bias && check_param("bias", bias, x, norm_ndim)))
        return NULL;
    int64_t cols = 1, rows = 1;
    for (int d = 0; d < x->ndim; d++) *(d < x->ndim - norm_ndim ? &rows : &cols) *= x->sizes[d];
    dp_tensor *xc = dp_contiguous(x), *wc = weight ? dp_contiguous(weight) : NULL;
    dp_tensor *bc = bias ? dp_contiguous(bias) : NULL;
    dp_tensor *out = dp_empty(x->ndim, x->sizes, x->dtype, x->device);
    dp_tensor *mean = dp_empty(1, &rows, x->dtype, x->device), *rstd = dp_empty(1, &rows, x->dtype, x->device);
    if (!xc || (weight && !wc) || (bias && !bc) || !out || !mean || !rstd) goto fail;
    if (rows && cols) {
        dp_view ov = dp_view_of(out), mv = dp_view_of(mean), rv = dp_view_of(rstd), xv = dp_view_of(xc);
        dp_view wv = wc ? dp_view_of(wc) : (dp_view){ 0 }, bv = bc ? dp_view_of(bc) : (dp_view){ 0 };
        if (dp_backend_for(x->device)->layer_norm(&ov, &mv, &rv, &xv, wc ? &wv : NULL, bc ? &bv : NULL, rows, cols, eps))
            goto fail;
    }
    if (dp_needs_grad(3, all)) {
        dp_node *node = dp_node_new("NativeLayerNormBackward0", layer_norm_backward, 3, all);
        if (!node) goto fail;
        node->ip[0] = weight != NULL;
        node->ip[1] = bias != NULL;
        node->ip[2] = rows;
        node->ip[3] = cols;
        dp_node_save(node, 0, xc);
        dp_node_save(node, 1, mean);
        dp_node_save(node, 2, rstd);
        if (wc) dp_node_save(node, 3, wc);
        dp_attach(out, node);
    }
    dp_tensor_release(xc);
    dp_tensor_release(wc);
    dp_tensor_release(bc);
    dp_tensor_release(mean);
    dp_tensor_release(rstd);
    return out;
fail:
    dp_tensor_release(xc);
    dp_tensor_release(wc);
    dp_tensor_release(bc);
    dp_tensor_release(out);
    dp_tensor_release(mean);
    dp_tensor_release(rstd);
    return NULL;
}
