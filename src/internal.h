/* internal.h: what the engine's own files share: the autograd node, recording helpers,
 * allocation bookkeeping.  Not installed. */
#ifndef DP_INTERNAL_H
#define DP_INTERNAL_H

#include "backend.h"

#define DP_MAX_SAVED 8

/* One input edge of a node: where the gradient for that input goes. */
typedef struct {
    dp_node *fn;          /* the input's grad_fn, or NULL */
    dp_tensor *leaf;      /* the input itself when it is a leaf that requires grad */
    int ndim;             /* the input's shape, dtype and device */
    int64_t sizes[DP_MAX_DIMS];
    dp_dtype dtype;
    dp_device device;
} dp_edge;

typedef int (*dp_backward_fn)(dp_node *n, dp_tensor *grad, dp_tensor **grad_inputs);

struct dp_node {
    int refcount;
    const char *name;
    dp_backward_fn backward;
    dp_tensor *saved[DP_MAX_SAVED];
    uint64_t saved_version[DP_MAX_SAVED];
    double p[4];                 /* op parameters */
    int64_t ip[DP_MAX_DIMS + 2]; /* integer parameters (dims, permutations) */
    bool freed;                  /* saved tensors released after backward */
    /* backward-pass bookkeeping */
    int64_t deps;
    dp_tensor *grad_acc;
    dp_node *next_in_order;
    int visit;
    int n_inputs;
    /* t:retain_grad() on the tensor this node made: the gradient backward brings to it */
    bool retains_grad;
    dp_tensor *retained_grad;
    /* a custom node's (autograd_custom.c): what its backward calls, released with the node */
    void *user;
    void (*user_free)(void *user);
    dp_edge in[];                /* n_inputs edges */
};

/* Tensors were made already (CPU device count is then fixed). */
bool dp_tensors_made(void);
void dp_run_oom_hook(void);

/* Recording: whether an op with these inputs records itself. */
bool dp_needs_grad(int n, dp_tensor *const *inputs);
/* A node for an op with n inputs; attach it to out with dp_attach. */
dp_node *dp_node_new(const char *name, dp_backward_fn fn, int n, dp_tensor *const *inputs);
void dp_node_save(dp_node *node, int slot, dp_tensor *t);
/* Makes out a non-leaf output of node (takes the node's reference). */
void dp_attach(dp_tensor *out, dp_node *node);
/* Saved tensor, checked against in-place modification since it was saved. */
dp_tensor *dp_saved(dp_node *n, int slot);

/* Checks that all tensors are on one device (the message of SPEC section 2). */
int dp_check_same_device(int n, dp_tensor *const *ts);
/* Sums g down to the given shape (the backward of broadcasting). New reference. */
dp_tensor *dp_sum_to(dp_tensor *g, int ndim, const int64_t *sizes);
/* Tensor with the given layout sharing t's storage (no autograd link); strides NULL: contiguous. */
dp_tensor *dp_make_view(dp_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset);
/* Fills strides for a contiguous layout; returns numel. */
int64_t dp_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
/* The element count of a dense tensor of this shape with elem_size bytes per element, or -1
 * with the message set when a size is negative or the count or the byte count would not fit
 * (int64_t, size_t, PTRDIFF_MAX).  Every shape a tensor or a view is made with passes through
 * it, so that dp_numel and the byte counts of existing tensors never overflow. */
int64_t dp_shape_numel(int ndim, const int64_t *sizes, size_t elem_size);
/* The same for n elements of elem_size bytes (a host buffer, a permutation, a sampler). */
int dp_check_count(int64_t n, size_t elem_size, const char *what);
/* Bumps the storage version after an in-place write. */
void dp_bump_version(dp_tensor *t);
/* Refuses in-place writes on tensors autograd depends on. */
int dp_check_inplace(dp_tensor *t, const char *op);
/* In-place ops that autograd must see (elementwise.c's arithmetic, index.c's writes): grad
 * mode is on and self or the operand (may be NULL) requires grad.  As PyTorch rebases self's
 * history, such an op runs out of place on self's old value (dp_inplace_old: an alias of
 * self, or a clone when anything else holds self or its memory, with self's history; NULL
 * with the message set for a leaf that requires grad, or a tensor sharing its memory with a
 * view autograd recorded, whose history would not learn of the write), and self adopts the
 * result r (dp_inplace_adopt, which takes r's reference): its storage when *swap said so,
 * else its values copied in (the version bump then stops any backward that saved the old
 * value, as in PyTorch), and its node. */
bool dp_inplace_tracked(const dp_tensor *self, const dp_tensor *other);
dp_tensor *dp_inplace_old(dp_tensor *self, const char *name, bool *swap);
int dp_inplace_adopt(dp_tensor *self, dp_tensor *r, bool swap);
/* Memory shared by a tensor written and one it reads (elementwise.c): PyTorch's overlap
 * status.  dp_check_write_overlap refuses a partial overlap (copy_, a += b);
 * dp_index_write_source gives the tensor an index write reads (src retained, a private
 * copy, or NULL with the message set when PyTorch refuses it); dp_check_index_overlap
 * refuses an index in the memory written. */
typedef enum { DP_OVERLAP_NO, DP_OVERLAP_FULL, DP_OVERLAP_PARTIAL, DP_OVERLAP_TOO_HARD } dp_overlap;
dp_overlap dp_overlap_of(const dp_tensor *a, const dp_tensor *b);
int dp_check_write_overlap(const dp_tensor *dst, const dp_tensor *src, const char *op);
dp_tensor *dp_index_write_source(const dp_tensor *dst, dp_tensor *src, const char *op, const char *what);
int dp_check_index_overlap(const dp_tensor *dst, const dp_tensor *index, const char *op);
/* Counts bytes moved between distinct devices. */
void dp_count_copied(uint64_t nbytes);
/* The first n int64 indices of index copied to the host (free() them), with *bad the
 * position of the first outside [0, limit), or -1; NULL with the message set on failure. */
int64_t *dp_indices_to_host(dp_tensor *index, int64_t n, int64_t limit, int64_t *bad);
/* A new tensor drawn from the global random stream (random.c): dist and a, b as the
 * backend's random kernel takes them. */
dp_tensor *dp_random_new(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev, dp_rng_dist dist, double a, double b);
/* 0, or -1 with "op: expected a floating point dtype, got int64" (random.c). */
int dp_need_float(dp_dtype dt, const char *op);
/* Raw strided copy src -> dst (same shape, any devices and dtypes), no autograd. */
int dp_copy_raw(dp_tensor *dst, dp_tensor *src);
/* Pinned host memory through the CUDA backend (registry.c); NULL with the message set. */
void *dp_pinned_alloc(size_t nbytes);
void dp_pinned_free(void *p);
/* Non-differentiable matrix product on 2-D or 3-D tensors (used by backward passes too). */
dp_tensor *dp_bmm_raw(dp_tensor *a, dp_tensor *b, bool ta, bool tb);

/* Worker threads for large CPU kernels: fn runs over [0, n) split into at most
 * dp_pool_threads() contiguous ranges of at least grain elements; part is the range's
 * number (0-based, in order).  Small n runs inline on the caller. */
typedef void (*dp_range_fn)(void *ctx, int64_t lo, int64_t hi, int part);
void dp_parallel(int64_t n, int64_t grain, dp_range_fn fn, void *ctx);
int dp_pool_threads(void);
void dp_pool_set_threads(int n);

/* Evaluates expr with grad mode off (backward passes and internal helpers). */
#define NO_GRAD(expr) ({ bool was_ = dp_grad_enabled(); dp_set_grad_enabled(false); __typeof__(expr) r_ = (expr); \
                         dp_set_grad_enabled(was_); r_; })
/* Whether input i of a node wants a gradient. */
#define DP_NEEDS_INPUT(n, i) ((n)->in[i].fn || (n)->in[i].leaf)

/* A view descriptor of t broadcast to (ndim, sizes): stride 0 where t has size 1 or no dim. */
dp_view dp_broadcast_view(const dp_tensor *t, int ndim, const int64_t *sizes);

/* The backward functions of the op table's elementwise ops (derivatives.c).  Their nodes
 * carry the op in ip[0], the parameters in p[], and save what the row's SAVE says. */
int dp_unary_backward(dp_node *n, dp_tensor *g, dp_tensor **gin);
int dp_binary_backward(dp_node *n, dp_tensor *g, dp_tensor **gin);
int dp_scalar_backward(dp_node *n, dp_tensor *g, dp_tensor **gin);
int dp_where_backward(dp_node *n, dp_tensor *g, dp_tensor **gin);   /* saves cond in slot 0 */

#endif
