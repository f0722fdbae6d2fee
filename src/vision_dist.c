/* vision_dist.c: the differentiable all-reduce that nn.SyncBatchNorm's statistics go
 * through.  The forward sums t over the ranks of the process group; the backward sums the
 * incoming gradient over the ranks, so each rank's input gets the gradient of the sum of
 * every rank's loss.  Every rank must run the backward, in the same order (as under
 * DistributedDataParallel, whose bucket averages interleave with it in that order). */
#include "dist.h"
#include "internal.h"

static int all_reduce_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *s = NO_GRAD(dp_clone(g));
    if (!s) return -1;
    if (dp_dist_all_reduce(s, DP_DIST_SUM)) {
        dp_tensor_release(s);
        return -1;
    }
    gin[0] = s;
    return 0;
}

dp_tensor *dp_dist_all_reduce_sum_autograd(dp_tensor *t)
{
    dp_tensor *out = NO_GRAD(dp_clone(t));
    if (!out) return NULL;
    if (dp_dist_all_reduce(out, DP_DIST_SUM)) {
        dp_tensor_release(out);
        return NULL;
    }
    if (dp_needs_grad(1, &t)) {
        dp_node *node = dp_node_new("AllReduceBackward", all_reduce_backward, 1, &t);
        if (!node) {
            dp_tensor_release(out);
            return NULL;
        }
        dp_attach(out, node);
    }
    return out;
}
