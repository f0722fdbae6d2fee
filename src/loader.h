/* loader.h: batch assembly for torch.data: gathering rows of tensor datasets into batches
 * (on the caller's thread, or on background worker threads that run ahead of it) and
 * stacking the items of a batch.
 */
#ifndef DP_LOADER_H
#define DP_LOADER_H

#include "dp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_loader dp_loader;

/* A loader over n tensors (each with at least one dimension and the same size along it):
 * batch b of an epoch holds rows indices[b*bs .. (b+1)*bs) of every tensor.  With
 * num_workers > 0 (CPU tensors only) that many threads assemble up to prefetch batches
 * each ahead of the caller; they run no Lua and allocate nothing (the caller's thread
 * allocates every batch), so they never touch the interpreter. */
dp_loader *dp_loader_new(int n, dp_tensor *const *tensors, int num_workers, int prefetch);
/* Starts an epoch (abandoning any epoch in progress) over nidx 0-based row indices in
 * batches of batch_size, the last one partial unless drop_last.  Indices are checked
 * as their batch is assembled, so a bad one fails at that batch. */
int dp_loader_start(dp_loader *ld, const int64_t *indices, int64_t nidx, int64_t batch_size,
                    bool drop_last);
/* The next batch of the epoch: returns 1 and stores one new reference per tensor in
 * out[0..n), 0 when the epoch is over, -1 on failure (a bad index names its batch). */
int dp_loader_next(dp_loader *ld, dp_tensor **out);
int64_t dp_loader_num_batches(const dp_loader *ld);
int dp_loader_num_workers(const dp_loader *ld);
int dp_loader_num_tensors(const dp_loader *ld);
/* Stops and joins the workers, releases everything.  NULL is fine. */
void dp_loader_free(dp_loader *ld);

/* Stacks n tensors of one shape, dtype and device along a new first dimension (the
 * default collate).  ids[i] (may be NULL) names item i in errors, e.g. the dataset index
 * whose item had a different shape. */
dp_tensor *dp_stack_items(int64_t n, dp_tensor *const *items, const int64_t *ids);

#ifdef __cplusplus
}
#endif
#endif
