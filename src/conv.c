/* conv.c: N-d convolution and transposed convolution (1 to 3 spatial dims) with groups,
 * stride, dilation and padding that may differ on the two sides of a dim, and their
 * backward.  The shape logic and the checks (PyTorch's messages, Lua's numbering) live
 * here; the work is three backend kernels (backend.h): forward, the gradient of the
 * input and the gradient of the weight.  A transposed convolution is the input gradient
 * of the convolution that goes the other way, so the same three kernels serve it with
 * the roles of the input and the output swapped. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* "(3 x 3)" of the n values at v */
static char *tuple_str(int n, const int64_t *v, char *buf, size_t len)
{
    size_t at = 0;
    at += (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < n && at < len; i++) at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? " x " : "", (long long)v[i]);
    if (at < len) snprintf(buf + at, len - at, ")");
    return buf;
}

/* The geometry of a convolution from its image side I [N, C_in, *in] and output side
 * O [N, C_out, *out] (both batched); the nd spatial dims go to the last of the 3 slots. */
static dp_conv_geom geom_of(const dp_tensor *I, const dp_tensor *O, const dp_tensor *w, int nd, int64_t groups,
                            const int64_t *stride, const int64_t *pad, const int64_t *dilation)
{
    dp_conv_geom g = { .nd = nd, .batch = I->sizes[0], .in_channels = I->sizes[1], .out_channels = O->sizes[1],
                       .groups = groups };
    for (int s = 0; s < 3; s++) {
        int d = s - (3 - nd);          /* the spatial dim in this slot, or < 0 */
        g.in[s] = d < 0 ? 1 : I->sizes[2 + d];
        g.out[s] = d < 0 ? 1 : O->sizes[2 + d];
        g.kernel[s] = d < 0 ? 1 : w->sizes[2 + d];
        g.stride[s] = d < 0 ? 1 : stride[d];
        g.pad[s] = d < 0 ? 0 : pad[d];
        g.dilation[s] = d < 0 ? 1 : dilation[d];
    }
    return g;
}

/* The node keeps nd, groups, transposed, stride and dilation in ip[], the leading padding
 * in p[]: everything else follows from the saved tensors' and the gradient's shapes. */
static void node_params(const dp_node *n, int *nd, int64_t *groups, bool *transposed, int64_t *stride,
                        int64_t *pad, int64_t *dilation)
{
    *nd = (int)n->ip[0];
    *groups = n->ip[1];
    *transposed = n->ip[2] != 0;
    for (int d = 0; d < *nd; d++) {
        stride[d] = n->ip[3 + d];
        dilation[d] = n->ip[6 + d];
        pad[d] = (int64_t)n->p[d];
    }
}

static dp_tensor *empty_like_shape(int ndim, const int64_t *sizes, const dp_tensor *like)
{
    return dp_empty(ndim, sizes, like->dtype, like->device);
}

/* The bias gradient: g [N, C, *spatial] summed over everything but C. */
static dp_tensor *bias_grad(dp_tensor *g)
{
    int64_t nc = g->sizes[0] * g->sizes[1], sz[3] = { g->sizes[0], g->sizes[1], nc ? dp_numel(g) / nc : 0 };
    if (nc == 0) return dp_zeros(1, &g->sizes[1], g->dtype, g->device);
    dp_tensor *g3 = dp_reshape(g, 3, sz), *s2 = g3 ? dp_reduce(DP_SUM, g3, 2, false, NULL) : NULL;
    dp_tensor *out = s2 ? dp_reduce(DP_SUM, s2, 0, false, NULL) : NULL;
    dp_tensor_release(g3);
    dp_tensor_release(s2);
    return out;
}

static int conv_backward(dp_node *n, dp_tensor *grad, dp_tensor **gin)
{
    int nd;
    int64_t groups, stride[3], pad[3], dilation[3];
    bool transposed;
    node_params(n, &nd, &groups, &transposed, stride, pad, dilation);
    dp_tensor *x = dp_saved(n, 0), *w = dp_saved(n, 1);
    if (!x || !w) return -1;
    /* the gradient of an unbatched output gets its batch dim back */
    dp_tensor *gb = n->in[0].ndim != x->ndim ? dp_unsqueeze(grad, 0) : (dp_tensor_retain(grad), grad);
    dp_tensor *g = gb ? dp_contiguous(gb) : NULL;
    dp_tensor_release(gb);
    if (!g) return -1;
    /* the image side I and the output side O of the underlying convolution */
    dp_tensor *I = transposed ? g : x, *O = transposed ? x : g;
    dp_conv_geom geom = geom_of(I, O, w, nd, groups, stride, pad, dilation);
    bool empty = dp_numel(I) == 0 || dp_numel(O) == 0;
    int rc = 0;
    if (DP_NEEDS_INPUT(n, 0)) {
        /* conv: gx = adjoint(gO); transposed: gx = conv(gy) */
        dp_tensor *gx = empty ? dp_zeros(x->ndim, x->sizes, x->dtype, x->device) : empty_like_shape(x->ndim, x->sizes, x);
        if (!gx) rc = -1;
        else if (!empty && dp_half_conv(g->device, transposed ? DP_CONV_FORWARD : DP_CONV_BACKWARD_INPUT, g->dtype, &geom,
                                        dp_data(gx), dp_data(g), dp_data(w), NULL))
            rc = -1;
        if (!rc && n->in[0].ndim != x->ndim) {     /* unbatched input */
            dp_tensor *s = dp_squeeze(gx, 0);
            dp_tensor_release(gx);
            gx = s;
            if (!gx) rc = -1;
        }
        if (rc) dp_tensor_release(gx);
        else gin[0] = gx;
    }
    if (!rc && DP_NEEDS_INPUT(n, 1)) {
        dp_tensor *gw = empty ? dp_zeros(w->ndim, w->sizes, w->dtype, w->device) : empty_like_shape(w->ndim, w->sizes, w);
        if (!gw || (!empty && dp_half_conv(g->device, DP_CONV_BACKWARD_WEIGHT, g->dtype, &geom, dp_data(gw), dp_data(O), dp_data(I), NULL))) {
            dp_tensor_release(gw);
            rc = -1;
        } else gin[1] = gw;
    }
    if (!rc && n->n_inputs > 2 && DP_NEEDS_INPUT(n, 2)) {
        gin[2] = bias_grad(g);
        if (!gin[2]) rc = -1;
    }
    dp_tensor_release(g);
    return rc;
}

/* The checks of PyTorch's convolution, with its messages. */
static int check_args(const dp_tensor *x, const dp_tensor *w, const dp_tensor *b, const dp_conv_opts *o, bool batched)
{
    char s1[128], s2[128];
    int nd = o->nd;
    const char *name = o->name ? o->name : "conv";
    if (x->ndim != nd + 1 && x->ndim != nd + 2)
        return dp_error("%s: expected %dD (unbatched) or %dD (batched) input, but got input of size: %s", name, nd + 1, nd + 2,
                        dp_shape_str(x->ndim, x->sizes, s1, sizeof s1));
    if (w->ndim != nd + 2)
        return dp_error("%s: expected a %dD weight, but got weight of size: %s", name, nd + 2,
                        dp_shape_str(w->ndim, w->sizes, s1, sizeof s1));
    if (x->dtype != w->dtype || (b && b->dtype != w->dtype))
        return dp_error("%s: expected input, weight and bias of the same dtype, got %s, %s and %s", name, dp_dtype_name(x->dtype),
                        dp_dtype_name(w->dtype), b ? dp_dtype_name(b->dtype) : "none");
    if (!dp_dtype_is_float(x->dtype))
        return dp_error("%s: expected a float32, float64, float16 or bfloat16 input, got %s", name, dp_dtype_name(x->dtype));
    for (int d = 0; d < nd; d++) {
        if (o->stride[d] <= 0) return dp_error("%s: non-positive stride is not supported (stride %lld in dim %d)", name, (long long)o->stride[d], d + 1);
        if (o->pad_lo[d] < 0 || o->pad_hi[d] < 0) return dp_error("%s: negative padding is not supported", name);
        if (o->dilation[d] <= 0) return dp_error("%s: dilation should be greater than zero (dilation %lld in dim %d)", name, (long long)o->dilation[d], d + 1);
        if (o->output_padding[d] < 0) return dp_error("%s: negative output_padding is not supported", name);
    }
    if (o->groups <= 0) return dp_error("%s: non-positive groups is not supported (groups = %lld)", name, (long long)o->groups);
    for (int d = 0; d < w->ndim; d++)
        if (w->sizes[d] == 0 && d != 1)
            return dp_error("%s: weight of size %s has a dimension of size 0", name, dp_shape_str(w->ndim, w->sizes, s1, sizeof s1));
    int64_t cin = x->sizes[batched ? 1 : 0];
    if (w->sizes[0] % o->groups)
        return dp_error("Given groups=%lld, expected weight to be divisible by %lld at dimension 1, but got weight of size %s instead",
                        (long long)o->groups, (long long)o->groups, dp_shape_str(w->ndim, w->sizes, s1, sizeof s1));
    int64_t want = o->transposed ? w->sizes[0] : w->sizes[1] * o->groups;
    if (cin != want)
        return dp_error("Given %s=%lld, weight of size %s, expected input%s to have %lld channels, but got %lld channels instead",
                        o->transposed ? "transposed=1, groups" : "groups", (long long)o->groups,
                        dp_shape_str(w->ndim, w->sizes, s1, sizeof s1), dp_shape_str(x->ndim, x->sizes, s2, sizeof s2),
                        (long long)want, (long long)cin);
    int64_t cout = o->transposed ? w->sizes[1] * o->groups : w->sizes[0];
    if (b && (b->ndim != 1 || b->sizes[0] != cout))
        return dp_error("Given weight of size %s, expected bias to be 1-dimensional with %lld elements, but got bias of size %s instead",
                        dp_shape_str(w->ndim, w->sizes, s1, sizeof s1), (long long)cout, dp_shape_str(b->ndim, b->sizes, s2, sizeof s2));
    if (o->transposed) {
        for (int d = 0; d < nd; d++)
            if (o->output_padding[d] >= o->stride[d] && o->output_padding[d] >= o->dilation[d])
                return dp_error("%s: output padding must be smaller than either stride or dilation, but got output_padding %lld, "
                                "stride %lld and dilation %lld in dim %d", name, (long long)o->output_padding[d],
                                (long long)o->stride[d], (long long)o->dilation[d], d + 1);
    } else {
        int64_t padded[3], kern[3];
        bool small = false;
        for (int d = 0; d < nd; d++) {
            padded[d] = x->sizes[x->ndim - nd + d] + o->pad_lo[d] + o->pad_hi[d];
            kern[d] = o->dilation[d] * (w->sizes[2 + d] - 1) + 1;
            small |= padded[d] < kern[d];
        }
        if (small)
            return dp_error("%s: calculated padded input size per channel: %s. Kernel size: %s. Kernel size can't be greater "
                            "than actual input size", name, tuple_str(nd, padded, s1, sizeof s1), tuple_str(nd, kern, s2, sizeof s2));
    }
    return 0;
}

/* Adds b [C] to y [N, C, *spatial] in place. */
static int add_bias(dp_tensor *y, dp_tensor *b)
{
    dp_view yv = dp_view_of(y), bv = dp_view_of(b);
    bv.ndim = y->ndim;
    for (int d = 0; d < y->ndim; d++) { bv.sizes[d] = y->sizes[d]; bv.strides[d] = d == 1 ? b->strides[0] : 0; }
    return dp_backend_for(y->device)->binary(DP_ADD, &yv, &yv, &bv);
}

dp_tensor *dp_conv(dp_tensor *x, dp_tensor *w, dp_tensor *b, const dp_conv_opts *o)
{
    if (o->nd < 1 || o->nd > 3) { dp_error("conv: %d spatial dims are not supported (1 to 3 are)", o->nd); return NULL; }
    if (dp_check_same_device(3, (dp_tensor *const[]){ x, w, b })) return NULL;
    bool batched = x->ndim == o->nd + 2;
    if (check_args(x, w, b, o, batched)) return NULL;
    int nd = o->nd;
    const char *name = o->name ? o->name : "conv";
    dp_tensor *xb = NULL, *wc = NULL, *y = NULL, *out = NULL;
    /* the batched, contiguous input and a contiguous weight, off the graph */
    xb = NO_GRAD(batched ? dp_contiguous(x) : dp_unsqueeze(x, 0));
    if (xb && !dp_is_contiguous(xb)) { dp_tensor *c = NO_GRAD(dp_contiguous(xb)); dp_tensor_release(xb); xb = c; }
    wc = xb ? NO_GRAD(dp_contiguous(w)) : NULL;
    if (!wc) goto done;
    int64_t ysz[5] = { xb->sizes[0], o->transposed ? w->sizes[1] * o->groups : w->sizes[0] };
    for (int d = 0; d < nd; d++) {
        int64_t in = xb->sizes[2 + d], k = w->sizes[2 + d], span = o->dilation[d] * (k - 1);
        int64_t pads = o->pad_lo[d] + o->pad_hi[d];
        ysz[2 + d] = o->transposed ? (in - 1) * o->stride[d] - pads + span + o->output_padding[d] + 1
                                   : (in + pads - span - 1) / o->stride[d] + 1;
    }
    if (o->transposed) {
        bool bad = false;
        for (int d = 0; d < nd; d++) bad |= ysz[2 + d] <= 0;
        if (bad) {
            char s1[64], s2[64];
            dp_error("%s: given input size per channel: %s. Calculated output size per channel: %s. Output size is too small", name,
                     tuple_str(nd, xb->sizes + 2, s1, sizeof s1), tuple_str(nd, ysz + 2, s2, sizeof s2));
            goto done;
        }
    }
    y = dp_empty(nd + 2, ysz, x->dtype, x->device);
    if (!y) goto done;
    dp_tensor *I = o->transposed ? y : xb, *O = o->transposed ? xb : y;
    dp_conv_geom geom = geom_of(I, O, wc, nd, o->groups, o->stride, o->pad_lo, o->dilation);
    int rc = 0;
    if (dp_numel(y) == 0) rc = 0;
    else if (dp_numel(xb) == 0 || w->sizes[1] == 0) {     /* no input channels: the bias alone */
        rc = dp_fill_(y, 0);
        if (!rc && b) rc = add_bias(y, b);
    }
    else if (o->transposed) {
        rc = dp_half_conv(x->device, DP_CONV_BACKWARD_INPUT, x->dtype, &geom, dp_data(y), dp_data(xb), dp_data(wc), NULL);
        if (!rc && b) rc = add_bias(y, b);
    } else {
        dp_tensor *bc = b ? NO_GRAD(dp_contiguous(b)) : NULL;
        rc = b && !bc ? -1 : dp_half_conv(x->device, DP_CONV_FORWARD, x->dtype, &geom, dp_data(y), dp_data(xb), dp_data(wc),
                                                 bc ? dp_data(bc) : NULL);
        dp_tensor_release(bc);
    }
    if (rc) goto done;
    out = batched ? dp_alias(y) : dp_squeeze(y, 0);
    dp_tensor *ins[3] = { x, w, b };
    if (out && dp_needs_grad(3, ins)) {
        dp_node *node = dp_node_new("ConvolutionBackward0", conv_backward, b ? 3 : 2, ins);
        if (!node) { dp_tensor_release(out); out = NULL; goto done; }
        node->ip[0] = nd;
        node->ip[1] = o->groups;
        node->ip[2] = o->transposed;
        for (int d = 0; d < nd; d++) {
            node->ip[3 + d] = o->stride[d];
            node->ip[6 + d] = o->dilation[d];
            node->p[d] = (double)o->pad_lo[d];
        }
        dp_node_save(node, 0, xb);
        dp_node_save(node, 1, wc);
        dp_attach(out, node);
    }
done:
    dp_tensor_release(xb);
    dp_tensor_release(wc);
    dp_tensor_release(y);
    return out;
}
