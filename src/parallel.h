/* parallel.h: the engine's data-parallel primitives: scatter a batch over devices,
 * broadcast parameters to them in few large transfers, gather outputs, sum gradients.
 *
 * Each primitive is built from differentiable dp.h ops (narrow, view, cat, to, to_reuse,
 * add), so autograd carries gradients back: the backward pass of a scatter is a gather,
 * of a broadcast a reduce-add, and the other way round.  Dimensions are 0-based.
 * Results follow dp.h's conventions: new references in out arrays, 0 or -1 with
 * dp_last_error() set; on failure nothing is left in out.
 */
#ifndef DP_PARALLEL_H
#define DP_PARALLEL_H

#include "dp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The chunk sizes a batch of n splits into over ndev devices: chunks of ceil(n / ndev),
 * the last one smaller, so fewer than ndev chunks when n is small (10 over 3 is 4, 4, 2;
 * 10 over 8 is five chunks of 2).  Writes at most ndev sizes; returns their count, or -1
 * for n < 1 or ndev < 1. */
int dp_scatter_sizes(int64_t n, int ndev, int64_t *sizes);

/* Splits t along dim into dp_scatter_sizes chunks and copies chunk i to devs[i] (a chunk
 * already on its device is a view, not a copy).  out must hold ndev entries; *nout receives
 * the number of chunks. */
int dp_scatter(dp_tensor *t, int dim, int ndev, const dp_device *devs, dp_tensor **out, int *nout);

/* Copies n tensors (all on one device) to each of ndev devices: out[d * n + i] is ts[i] on
 * devs[d].  Tensors of one dtype travel as one flat buffer per device (one copy each), and
 * the results are views into it.  On the tensors' own device out holds ts[i] itself.
 *
 * reuse (may be NULL): the tensors a previous call returned for the same list, laid out as
 * out.  Their memory is reused: out[d * n + i] then aliases reuse[d * n + i] (linked to
 * ts[i] by autograd as a copy would be), and values are copied only for the tensors with
 * changed[i] set, in one transfer per dtype when every tensor of that dtype changed. */
int dp_broadcast_coalesced(int n, dp_tensor *const *ts, int ndev, const dp_device *devs,
                           dp_tensor *const *reuse, const bool *changed, dp_tensor **out);

/* Concatenates n tensors (on any devices) along dim on device dev.  Their shapes must agree
 * except along dim. */
dp_tensor *dp_gather(int n, dp_tensor *const *ts, dp_device dev, int dim);

/* Sums ndev lists of n tensors: ts[d * n + i] is tensor i of list d (same shape and dtype
 * as in every other list).  out[i] is on dev; one transfer per dtype and source device. */
int dp_reduce_add_coalesced(int ndev, int n, dp_tensor *const *ts, dp_device dev, dp_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
