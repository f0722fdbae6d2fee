/* dist.h: torch.distributed's engine side.  One process group per process: MPI carries
 * CPU tensors, NCCL (bootstrapped over MPI, reached through the CUDA backend library)
 * carries CUDA tensors.  Collectives work in place on the tensors they are given.  The
 * reducer is DistributedDataParallel's gradient averaging: parameters go into buckets in
 * reverse order, the engine's grad-ready hook fills them during backward, a full bucket is
 * all-reduced while the rest of backward runs, and the last one writes averaged gradients
 * back before backward returns.
 *
 * Every function returns 0 (or a value) on success and -1 with dp_error() on failure. */
#ifndef DP_DIST_H
#define DP_DIST_H

#include "dp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DP_DIST_MPI = 0, DP_DIST_NCCL = 1 } dp_dist_backend;
/* PyTorch's ReduceOp; the bitwise ones take integer and bool tensors, over MPI only (NCCL
   has none), as PyTorch's backends */
typedef enum {
    DP_DIST_SUM = 0, DP_DIST_AVG, DP_DIST_MAX, DP_DIST_MIN, DP_DIST_PRODUCT, DP_DIST_BAND, DP_DIST_BOR, DP_DIST_BXOR
} dp_dist_op;

/* The MPI backend was compiled in. */
bool dp_dist_has_mpi(void);
/* The CUDA backend library is loadable and exports the NCCL collectives. */
bool dp_dist_has_nccl(void);

/* Creates the process group (initialising MPI if nobody has).  Fails when one exists. */
int dp_dist_init(dp_dist_backend backend);
bool dp_dist_is_initialized(void);
int dp_dist_rank(void);          /* 0-based; -1 when not initialised */
int dp_dist_world_size(void);
int dp_dist_local_rank(void);    /* rank among the processes of this host */
int dp_dist_backend_of(void);    /* dp_dist_backend, -1 when not initialised */
const char *dp_dist_backend_name(int backend);
/* Frees the group; a new one may be created afterwards.  MPI itself is finalised at exit. */
int dp_dist_destroy(void);

/* Collectives: every rank calls them in the same order with tensors of the same shape and
 * dtype (the mpi backend takes CPU and CUDA tensors, the latter staged through pinned host
 * memory; nccl takes CUDA tensors). */
int dp_dist_all_reduce(dp_tensor *t, dp_dist_op op);
int dp_dist_broadcast(dp_tensor *t, int src);
/* outs: world_size tensors shaped like t; outs[r] receives rank r's t. */
int dp_dist_all_gather(dp_tensor *const *outs, int n_outs, dp_tensor *t);
int dp_dist_barrier(void);
/* A new tensor holding the sum of t over the ranks, differentiable: its backward sums the
 * gradient over the ranks (vision_dist.c; nn.SyncBatchNorm's statistics). */
dp_tensor *dp_dist_all_reduce_sum_autograd(dp_tensor *t);
/* Gathers a byte string from every rank: *out (malloc'd, caller frees) holds them one after
 * another, lens[r] (world_size entries, caller-provided) their lengths. */
int dp_dist_all_gather_bytes(const void *data, size_t n, char **out, size_t *lens);

/* ---- DistributedDataParallel's reducer */
typedef struct dp_reducer dp_reducer;

typedef struct {
    int64_t passes;          /* backward passes whose gradients were averaged */
    int64_t allreduces;      /* bucket all-reduces started */
    int64_t early;           /* of those, started while other gradients were still pending */
    int64_t bytes;           /* bytes all-reduced */
} dp_reducer_stats;

/* params: n leaves requiring grad, all on one device of the group's backend (retained);
 * names (may be NULL) are used in messages.  bucket_cap_bytes > 0. */
dp_reducer *dp_reducer_new(int n, dp_tensor *const *params, const char *const *names,
                           size_t bucket_cap_bytes);
/* Removes the hooks and frees the buckets.  NULL is fine. */
void dp_reducer_free(dp_reducer *r);
/* Called before each forward: sync says whether the backward of this forward averages
 * gradients (false inside no_sync).  Fails when the previous backward left buckets
 * unreduced (parameters that got no gradient) or a reduction failed. */
int dp_reducer_prepare(dp_reducer *r, bool sync);
int dp_reducer_bucket_count(const dp_reducer *r);
/* The parameter indices (0-based, into params) of bucket b; returns their count and
 * writes at most max of them. */
int dp_reducer_bucket(const dp_reducer *r, int b, int *idx, int max);
void dp_reducer_get_stats(const dp_reducer *r, dp_reducer_stats *out);

/* ---- debugging the CUDA side of the reducer (the specs' view of it) */
/* How many times the calling thread has waited for a CUDA device (0 without CUDA). */
int64_t dp_dist_cuda_host_syncs(void);
/* Queues work on t's device's side stream (behind the compute stream) and marks t's block as
 * used by it (record_stream), as the reducer does with its buckets.  t must own its block
 * (a fresh CUDA tensor). */
int dp_dist_debug_side_stream_use(dp_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
