/* nn.c: dropout and the losses (mse, nll, cross entropy). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------------- dropout */

dp_tensor *dp_dropout(dp_tensor *x, double p, bool training)
{
    if (!(p >= 0 && p <= 1)) { dp_error("dropout probability has to be between 0 and 1, but got %g", p); return NULL; }
    if (!training || p == 0) { dp_tensor_retain(x); return x; }
    if (dp_need_float(x->dtype, "dropout")) return NULL;
    if (p == 1) return dp_binary_scalar(DP_MUL, x, 0, false);
    dp_tensor *mask = dp_random_new(x->ndim, x->sizes, x->dtype, x->device, DP_RNG_BERNOULLI_MASK, p, 0);
    dp_tensor *out = mask ? dp_binary(DP_MUL, x, mask) : NULL;
    dp_tensor_release(mask);
    return out;
}

/* ---------------------------------------------------------------- losses */

static dp_tensor *reduce_loss(dp_tensor *per_item, dp_reduction red)
{
    if (red == DP_REDUCTION_NONE) { dp_tensor_retain(per_item); return per_item; }
    return dp_reduce(red == DP_REDUCTION_MEAN ? DP_MEAN : DP_SUM, per_item, -1, false, NULL);
}

dp_tensor *dp_mse_loss(dp_tensor *input, dp_tensor *target, dp_reduction red)
{
    char a[128], b[128];
    if (!dp_same_shape(input, target)) {
        dp_error("mse_loss: the input has shape %s but the target has shape %s (they must match)",
                 dp_shape_str(input->ndim, input->sizes, a, sizeof a), dp_shape_str(target->ndim, target->sizes, b, sizeof b));
        return NULL;
    }
    dp_tensor *d = dp_binary(DP_SUB, input, target), *sq = d ? dp_binary(DP_MUL, d, d) : NULL;
    dp_tensor *out = sq ? reduce_loss(sq, red) : NULL;
    dp_tensor_release(d);
    dp_tensor_release(sq);
    return out;
}

static int nll_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *target = dp_saved(n, 0);
    if (!target) return -1;
    dp_tensor *z = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device), *z2 = NULL;
    if (!z) return -1;
    z2 = z->ndim == 1 ? dp_unsqueeze(z, 0) : dp_alias(z);
    dp_tensor *gc = dp_contiguous(g);
    int rc = -1;
    if (z2 && gc) {
        dp_view zv = dp_view_of(z2), gv = dp_view_of(gc), tv = dp_view_of(target);
        rc = dp_backend_for(g->device)->nll_loss_backward(&zv, &gv, &tv, n->ip[0] == DP_REDUCTION_NONE, n->p[0]);
    }
    dp_tensor_release(z2);
    dp_tensor_release(gc);
    if (rc) { dp_tensor_release(z); return -1; }
    gin[0] = z;
    return 0;
}

dp_tensor *dp_nll_loss(dp_tensor *input, dp_tensor *target, dp_reduction red)
{
    char a[128], b[128];
    if (dp_check_same_device(2, (dp_tensor *const[]){ input, target })) return NULL;
    if (target->dtype != DP_INT64) { dp_error("nll_loss: the target must be an int64 tensor of class indices, got %s", dp_dtype_name(target->dtype)); return NULL; }
    bool single = input->ndim == 1;
    if (!(input->ndim == 2 || single) || (single ? target->ndim != 0 && !(target->ndim == 1 && target->sizes[0] == 1)
                                                 : target->ndim != 1 || target->sizes[0] != input->sizes[0])) {
        dp_error("nll_loss: expected input [N, C] with target [N] (or input [C] with one target), got input %s and target %s",
                 dp_shape_str(input->ndim, input->sizes, a, sizeof a), dp_shape_str(target->ndim, target->sizes, b, sizeof b));
        return NULL;
    }
    if (dp_need_float(input->dtype, "nll_loss")) return NULL;
    int64_t N = single ? 1 : input->sizes[0], C = input->sizes[input->ndim - 1];
    const dp_backend *be = dp_backend_for(input->device);
    bool on_device = be && be->check_indices;
    char msg[160];
    snprintf(msg, sizeof msg, "%starget %%lld at position %%lld is out of bounds: class indices must be between 1 and %lld%s",
             on_device ? "nll_loss: " : "", (long long)C, on_device ? " (dplua counts classes from 1)" : "");
    /* range-check the targets: on the host, or (CUDA) on the device, reported at the next
     * synchronisation, so that the stream does not stall on every loss */
    if (!on_device) {
        int64_t bad, *t = dp_indices_to_host(target, N, C, &bad);
        if (!t) return NULL;
        if (bad >= 0) dp_error(msg, (long long)t[bad] + 1, (long long)bad + 1);
        free(t);
        if (bad >= 0) return NULL;
    }
    int64_t one = 1;
    dp_tensor *tg = dp_reshape(target, 1, &one), *in2 = NULL, *out = NULL;
    if (!single) { dp_tensor_release(tg); tg = dp_contiguous(target); }
    in2 = single ? dp_unsqueeze(input, 0) : dp_alias(input);
    if (!tg || !in2) goto done;
    if (on_device) {
        dp_view tv = dp_view_of(tg);
        if (be->check_indices(&tv, C, msg)) goto done;
    }
    bool per_item = red == DP_REDUCTION_NONE;
    out = per_item && !single ? dp_empty(1, &N, input->dtype, input->device) : dp_empty(0, NULL, input->dtype, input->device);
    if (!out) goto done;
    dp_view ov = dp_view_of(out), iv = dp_view_of(in2), tv = dp_view_of(tg);
    if (per_item && single) { ov.ndim = 1; ov.sizes[0] = 1; ov.strides[0] = 1; }
    if (N == 0) dp_fill_(out, red == DP_REDUCTION_MEAN ? NAN : 0);
    else if (dp_backend_for(input->device)->nll_loss(&ov, &iv, &tv, per_item)) { dp_tensor_release(out); out = NULL; goto done; }
    if (red == DP_REDUCTION_MEAN && N > 0) {
        dp_view o2 = dp_view_of(out);
        if (dp_backend_for(input->device)->binary_scalar(DP_DIV, &o2, &o2, (double)N, false)) { dp_tensor_release(out); out = NULL; goto done; }
    }
    if (dp_needs_grad(1, &input)) {
        dp_node *node = dp_node_new("NllLossBackward0", nll_backward, 1, &input);
        if (!node) { dp_tensor_release(out); out = NULL; goto done; }
        node->ip[0] = red;
        node->p[0] = red == DP_REDUCTION_MEAN && N ? 1.0 / (double)N : 1.0;
        dp_node_save(node, 0, tg);
        dp_attach(out, node);
    }
done:
    dp_tensor_release(tg);
    dp_tensor_release(in2);
    return out;
}

dp_tensor *dp_cross_entropy(dp_tensor *input, dp_tensor *target, dp_reduction red)
{
    dp_tensor *ls = dp_log_softmax(input, input->ndim == 1 ? 0 : 1);
    dp_tensor *out = ls ? dp_nll_loss(ls, target, red) : NULL;
    dp_tensor_release(ls);
    return out;
}

