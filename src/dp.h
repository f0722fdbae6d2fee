/* dp.h: the dplua engine's C API: devices, storage, strided tensors, ops, autograd.
 *
 * Conventions (every function below keeps them):
 *   - A function that returns dp_tensor* returns a NEW reference (the caller releases it
 *     with dp_tensor_release) or NULL on failure.  A function that returns int returns 0 on
 *     success and -1 on failure.  On failure dp_last_error() says what was wrong.
 *   - Tensor arguments are borrowed: the callee retains what it keeps.
 *   - Dimensions in this API are 0-based; the Lua binding converts from 1-based.
 *   - Nothing here exits, aborts, longjmps or prints.
 * The engine never includes lua.h.
 */
#ifndef DP_H
#define DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DP_MAX_DIMS 8

/* ---------------------------------------------------------------- errors */

/* Sets the thread-local error message (printf-style) and returns -1. */
int dp_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The thread-local message of the last failure ("" if none). */
const char *dp_last_error(void);
void dp_clear_error(void);

/* ---------------------------------------------------------------- dtypes */

/* float16 and bfloat16 are stored as 2 bytes and computed in float32 (half.c) */
typedef enum { DP_FLOAT32 = 0, DP_FLOAT64, DP_INT64, DP_BOOL, DP_FLOAT16, DP_BFLOAT16, DP_NDTYPES } dp_dtype;

size_t dp_dtype_size(dp_dtype dt);
const char *dp_dtype_name(dp_dtype dt);          /* "float32", ... */
int dp_dtype_parse(const char *name, dp_dtype *out); /* also accepts "float", "double", "long", "half" */
bool dp_dtype_is_float(dp_dtype dt);
bool dp_dtype_is_half(dp_dtype dt);              /* float16 or bfloat16 */
/* PyTorch's default dtype (torch.set_default_dtype; float32 until set, process-wide): the
 * dtype of the floating result of integer or bool operands (true division, sqrt, an integer
 * tensor with a float number).  Setting a dtype that is not floating fails (-1, message set). */
int dp_set_default_dtype(dp_dtype dt);
dp_dtype dp_default_dtype(void);

/* ---------------------------------------------------------------- devices */

typedef enum { DP_DEVICE_CPU = 0, DP_DEVICE_CUDA = 1, DP_NDEVICE_TYPES } dp_device_type;

typedef struct {
    int type;  /* dp_device_type */
    int index; /* 0-based */
} dp_device;

static inline dp_device dp_cpu(void) { dp_device d = { DP_DEVICE_CPU, 0 }; return d; }
static inline bool dp_device_eq(dp_device a, dp_device b) { return a.type == b.type && a.index == b.index; }

/* "cpu", "cpu:1", "cuda", "cuda:0" -> device (syntax only; see dp_device_check). */
int dp_device_parse(const char *s, dp_device *out);
/* The CUDA device that a bare "cuda" names (torch.cuda.set_device; 0 until set), per thread
 * as PyTorch's current device. */
void dp_cuda_set_current(int index);
int dp_cuda_current(void);
/* Writes "cpu", "cpu:1", "cuda:0" into buf (at least 32 bytes); returns buf. */
char *dp_device_str(dp_device d, char *buf);
/* 0 if the device exists and is usable, else -1 with "CUDA is not available ..." or
 * "cuda:7 does not exist (1 CUDA device)" style messages. */
int dp_device_check(dp_device d);

int dp_cpu_device_count(void);
/* Only before the first tensor is made; -1 with a message afterwards or for n < 1. */
int dp_cpu_set_device_count(int n);
/* -1 with a message when DPLUA_CPU_DEVICES is set to something other than 1..1024 (the
 * count then falls back to 1); the binding raises it when torch is loaded. */
int dp_cpu_device_env_check(void);

/* Devices of any type, through the backend registry (registry.c). */
bool dp_device_type_built(dp_device_type type);      /* its backend was compiled in (it may not load) */
int dp_device_count(dp_device_type type);            /* 0: no driver, no device or no backend */
int dp_device_synchronize(dp_device_type type, int index);   /* index < 0: every device of the type */
size_t dp_memory_allocated(dp_device dev);           /* bytes in tensors on dev (0 where not counted) */
size_t dp_max_memory_allocated(dp_device dev);
void dp_empty_cache(dp_device_type type);            /* returns cached blocks to the system */
void dp_set_allow_tf32(bool allow);                  /* TF32 matrix products where a backend has them */

/* Deterministic algorithms (determ.c), PyTorch's torch.use_deterministic_algorithms: with the
 * mode on, the ops that would accumulate with atomics take deterministic kernels, and an op
 * with none fails in dp_alert_not_deterministic (-1, message set) or, with warn_only, warns
 * on stderr and returns 0.  cudnn_deterministic and cudnn_benchmark are
 * torch.backends.cudnn's flags; cuDNN picks deterministic algorithms under either mode. */
void dp_use_deterministic_algorithms(bool mode, bool warn_only);
bool dp_deterministic_algorithms(void);
bool dp_deterministic_algorithms_warn_only(void);
int dp_alert_not_deterministic(const char *caller);
void dp_set_cudnn_deterministic(bool on);
bool dp_cudnn_deterministic(void);
void dp_set_cudnn_benchmark(bool on);
bool dp_cudnn_benchmark(void);
bool dp_cudnn_wants_deterministic(void);

/* Called (on the allocating thread) when a device allocation fails, before the cache is
 * emptied and the allocation retried once: the Lua binding runs the collector here. */
void dp_set_oom_hook(void (*fn)(void *ctx), void *ctx);
/* Clears this thread's hook if ctx is the one it was set with (a closing Lua state). */
void dp_clear_oom_hook(void *ctx);

/* Threads one CPU op may use (OpenMP and OpenBLAS). */
void dp_set_num_threads(int n);
int dp_get_num_threads(void);

/* ---------------------------------------------------------------- storage */

typedef struct dp_storage {
    int refcount;              /* atomic */
    void *data;
    size_t nbytes;
    dp_device device;
    uint64_t version;          /* bumped by every in-place write (autograd checks it) */
    bool graph_views;          /* a view of it was recorded by autograd (in-place ops then refuse) */
    void (*deleter)(void *ctx, void *data);  /* NULL: the device allocator owns data */
    void *deleter_ctx;
} dp_storage;

dp_storage *dp_storage_new(dp_device dev, size_t nbytes);
/* Page-locked host memory from the CUDA backend (dev is a CPU device); an error when CUDA
 * is not available.  Copies from it to a GPU can run asynchronously (non_blocking). */
dp_storage *dp_storage_new_pinned(dp_device dev, size_t nbytes);
bool dp_storage_is_pinned(const dp_storage *s);
void dp_storage_retain(dp_storage *s);
void dp_storage_release(dp_storage *s);

/* Bytes of tensor storage alive on the host (all CPU devices) and on CUDA devices:
 * the Lua binding feeds these to the collector. */
size_t dp_host_bytes_in_use(void);
size_t dp_total_bytes_allocated_ever(void); /* monotonic, all devices */

/* ---------------------------------------------------------------- tensors */

typedef struct dp_node dp_node;
typedef struct dp_tensor dp_tensor;

/* Called when a leaf's .grad is final for the current backward pass. */
typedef void (*dp_grad_ready_fn)(void *ctx, dp_tensor *leaf);

struct dp_tensor {
    int refcount;              /* atomic */
    dp_dtype dtype;
    int ndim;
    int64_t sizes[DP_MAX_DIMS];
    int64_t strides[DP_MAX_DIMS];  /* in elements */
    int64_t offset;                /* in elements, into storage */
    dp_storage *storage;
    dp_device device;              /* == storage->device */

    /* autograd */
    bool requires_grad;
    dp_tensor *grad;               /* NULL until a backward reaches this leaf */
    dp_node *grad_fn;              /* NULL for leaves */
    dp_tensor *view_base;          /* for views of tensors that require grad */
    dp_grad_ready_fn grad_ready;   /* optional hook, leaves only */
    void *grad_ready_ctx;
    int64_t grad_ready_pending;    /* engine bookkeeping during backward */
};

void dp_tensor_retain(dp_tensor *t);
void dp_tensor_release(dp_tensor *t);   /* NULL is fine */

int64_t dp_numel(const dp_tensor *t);
bool dp_is_contiguous(const dp_tensor *t);
/* Pointer to element 0 of the view (storage data + offset).  Host-readable only on CPU. */
void *dp_data(const dp_tensor *t);
bool dp_same_shape(const dp_tensor *a, const dp_tensor *b);
/* Writes "[30, 5]" into buf; returns buf. */
char *dp_shape_str(int ndim, const int64_t *sizes, char *buf, size_t n);

/* ---- creation */
dp_tensor *dp_empty(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev);
dp_tensor *dp_full(int ndim, const int64_t *sizes, double value, dp_dtype dt, dp_device dev);
dp_tensor *dp_zeros(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev);
dp_tensor *dp_ones(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev);
/* Copies n = prod(sizes) host values of dtype src_dt (converted to dt). */
dp_tensor *dp_from_host(const void *src, dp_dtype src_dt, int ndim, const int64_t *sizes,
                        dp_dtype dt, dp_device dev);
dp_tensor *dp_arange(double start, double stop, double step, dp_dtype dt, dp_device dev);
dp_tensor *dp_eye(int64_t n, int64_t m, dp_dtype dt, dp_device dev);

/* ---- random numbers: Philox4x32-10, counter based, so a CUDA kernel reproduces the CPU
 * draw element for element.  Each Philox call (counter) gives 2 or 4 elements of a draw:
 * element i uses counter (offset + i / per); every draw advances the global offset by the
 * counters it used (dp_rng_counters). */
void dp_manual_seed(uint64_t seed);
uint64_t dp_initial_seed(void);
/* Reserves n counters of the global stream and returns the first. */
uint64_t dp_rng_reserve(uint64_t n);
/* The counters a draw of n elements of dtype dt takes: dist 0 uniform and 1 normal (4 per
 * counter, 2 in float64), 2 integers (2 per counter; randperm's n positions too), 3 dropout
 * masks (4 per counter); multinomial's uniforms are (0, n, float64)'s. */
uint64_t dp_rng_counters(int dist, dp_dtype dt, int64_t n);
/* on: this thread draws from a stream of its own, starting at (seed, 0), which its
 * dp_manual_seed sets from then on; off: back to the global stream. */
void dp_rng_thread_stream(bool on, uint64_t seed);
dp_tensor *dp_rand(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev);
dp_tensor *dp_randn(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev);
dp_tensor *dp_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev);
int dp_uniform_(dp_tensor *t, double a, double b);
int dp_normal_(dp_tensor *t, double mean, double std);
/* A random permutation of 0..n-1 (int64, CPU), drawn from (seed, offset) when
 * use_generator is true, else from the global stream. */
dp_tensor *dp_randperm(int64_t n, bool use_generator, uint64_t seed, uint64_t offset);
/* t filled in place from the stream (seed, offset), element i (row-major) from counter
 * offset + i / per: dist 0 uniform [a, b) (float dtypes), 1 normal(mean a, std b) (float),
 * 2 integers in [a, b) (any dtype).  A generator's draws; the caller advances its offset
 * by dp_rng_counters(dist, t's dtype, numel). */
int dp_random_fill_(dp_tensor *t, int dist, double a, double b, uint64_t seed, uint64_t offset);
/* torch.multinomial: n category indices (0-based, int64) per row of probs ([C] or [R, C],
 * non-negative weights), drawn with or without replacement from the stream (seed, offset),
 * from R * (replacement ? n : C) float64 uniforms (as rand's: dp_rng_counters(0,
 * DP_FLOAT64, that many)).  Runs on the host; the result is on probs' device. */
dp_tensor *dp_multinomial(dp_tensor *probs, int64_t n, bool replacement, uint64_t seed, uint64_t offset);
/* The exact mapping from (seed, counter) to values is in philox.h. */

/* ---- views (share storage; differentiable) */
dp_tensor *dp_select(dp_tensor *t, int dim, int64_t index);          /* index 0-based, >= 0 */
dp_tensor *dp_narrow(dp_tensor *t, int dim, int64_t start, int64_t length);
dp_tensor *dp_slice(dp_tensor *t, int dim, int64_t start, int64_t length, int64_t step);   /* every step-th */
/* The diagonal of the planes (d1, d2) (0-based), shifted by offset, as the last dim of a view. */
dp_tensor *dp_diagonal(dp_tensor *t, int64_t offset, int d1, int d2);
/* The windows of `size` elements every `step` along dim, as a new last dim of a view (PyTorch's
 * Tensor.unfold). */
dp_tensor *dp_unfold(dp_tensor *t, int dim, int64_t size, int64_t step);
dp_tensor *dp_view_sizes(dp_tensor *t, int ndim, const int64_t *sizes);    /* one -1 allowed */
dp_tensor *dp_reshape(dp_tensor *t, int ndim, const int64_t *sizes); /* view if possible */
dp_tensor *dp_transpose(dp_tensor *t, int d0, int d1);
dp_tensor *dp_permute(dp_tensor *t, const int *perm);                /* t->ndim entries */
dp_tensor *dp_unsqueeze(dp_tensor *t, int dim);
dp_tensor *dp_squeeze(dp_tensor *t, int dim);                        /* dim < 0: all size-1 dims */
dp_tensor *dp_expand(dp_tensor *t, int ndim, const int64_t *sizes);  /* -1 keeps a size */
dp_tensor *dp_flatten(dp_tensor *t, int start, int end);
dp_tensor *dp_detach(dp_tensor *t);                                  /* shares storage, no grad */
/* An alias of t (same storage, sizes, strides) as a new tensor object, no autograd link. */
dp_tensor *dp_alias(dp_tensor *t);

/* ---- copies (differentiable) */
dp_tensor *dp_contiguous(dp_tensor *t);   /* returns t retained when already contiguous */
dp_tensor *dp_clone(dp_tensor *t);
/* Returns t retained when nothing changes. */
dp_tensor *dp_to(dp_tensor *t, dp_device dev, dp_dtype dt, bool non_blocking);
/* A copy of a CPU tensor in pinned memory (t itself when it is pinned already). */
dp_tensor *dp_pin_memory(dp_tensor *t);
bool dp_is_pinned(const dp_tensor *t);
dp_tensor *dp_cat(int n, dp_tensor *const *ts, int dim);
dp_tensor *dp_stack(int n, dp_tensor *const *ts, int dim);
dp_tensor *dp_index_select(dp_tensor *t, int dim, dp_tensor *index);  /* index: int64 1-D, 0-based */
/* Whether index_select and nll_loss on dev check their indices on the device (CUDA: the
 * first bad one is reported at the next synchronisation) rather than on the host. */
bool dp_device_checks_indices(dp_device dev);
/* Checks that every value of t (int64, any shape) lies in [base, base + limit), on t's
 * device where it checks indices (the first bad one reported at the next synchronisation),
 * else at once.  msg is the error, a printf format taking the value counted from 1 (value -
 * base + 1) and its position in t's elements counted from 1 (two long longs). */
int dp_check_index_values(dp_tensor *t, int64_t base, int64_t limit, const char *msg);

/* ---- advanced indexing (index.c).  Index values count from `base` (0, or 1 for the Lua
 * binding); negative ones count from the end; every index is checked before anything is
 * written.  indices[0..n) (NULL: the whole dim) are int64 tensors of any shape, which
 * broadcast together, or bool masks, each covering mask->ndim dims (PyTorch's t[indices]).
 * The out-of-place forms are differentiable; autograd records the in-place ones as
 * dp_region_write_ says (IndexPutBackward0, ScatterBackward0, ScatterAddBackward0). */
dp_tensor *dp_index(dp_tensor *t, int n, dp_tensor *const *indices, int base);
/* t[indices] = values (+= when accumulate; values broadcast to the selection) */
int dp_index_put_(dp_tensor *t, int n, dp_tensor *const *indices, dp_tensor *values, bool accumulate, int base);
dp_tensor *dp_index_put(dp_tensor *t, int n, dp_tensor *const *indices, dp_tensor *values, bool accumulate, int base);
/* A region of a tensor made of numbers and ranges (Lua's t[{2, {1, 3}}], PyTorch's
 * t[1, 0:3]): per dim of the tensor, count elements from start, every step-th, or with keep
 * false the one element at start, the dim dropped. */
typedef struct {
    int ndim;
    int64_t start[DP_MAX_DIMS], count[DP_MAX_DIMS], step[DP_MAX_DIMS];
    bool keep[DP_MAX_DIMS];
} dp_region;
/* The region as a view of t, recorded by autograd as its selects and slices. */
dp_tensor *dp_region_view(dp_tensor *t, const dp_region *r);
/* t[region] = values, or with n index tensors t[region][indices] = values as dp_index_put_
 * takes them; values broadcast to what they fill.  With grad mode on and t or values
 * requiring grad, t records the write as PyTorch does: CopySlices (IndexPutBackward0 when
 * the region is all of t and indices are given).  Refused then, besides a leaf that requires
 * grad and a tensor with views autograd recorded, when t shares its memory with another
 * tensor (a view of it, or the one it views): that one's history would miss the write. */
int dp_region_write_(dp_tensor *t, const dp_region *r, int n, dp_tensor *const *indices, dp_tensor *values,
                     bool accumulate, int base);
/* t[region] = value, recorded as dp_region_write_ says */
int dp_region_fill_(dp_tensor *t, const dp_region *r, double value);
/* out[i][j] = t[i][index[i][j]] along dim (index has t's number of dims) */
dp_tensor *dp_gather_index(dp_tensor *t, int dim, dp_tensor *index, int base);
/* t[i][index[i][j]] = src[i][j] (+= when add); src may be 0-dim (a value) */
dp_tensor *dp_scatter_index(dp_tensor *t, int dim, dp_tensor *index, dp_tensor *src, bool add, int base);
int dp_scatter_index_(dp_tensor *t, int dim, dp_tensor *index, dp_tensor *src, bool add, int base);
/* scatter_reduce for reduce "prod", "amax" or "amin", not differentiable (lua/torch/indexing.lua
 * adds their gradient, and makes "sum" and "mean" of scatter_add) */
dp_tensor *dp_scatter_reduce(dp_tensor *t, int dim, dp_tensor *index, dp_tensor *src, const char *reduce,
                             bool include_self, int base);
/* the coordinates of t's nonzero elements: int64 [count, t->ndim], counted from base */
dp_tensor *dp_nonzero(dp_tensor *t, int base);
/* DataParallel's cached replicas: a new tensor aliasing dst (same shape as t, on dst's
 * device) that autograd treats as to(t, dst->device): its gradient flows back to t.  t's
 * values are copied into dst first only when copy is true. */
dp_tensor *dp_to_reuse(dp_tensor *t, dp_tensor *dst, bool copy);
/* Bytes copied between distinct devices so far (to(), copy_, to_reuse): a counter that
 * specs and benchmarks read. */
uint64_t dp_bytes_copied_between_devices(void);

/* ---- elementwise ops (differentiable, broadcasting).  The ops and their facts are the
 * rows of ops.def; dp_op_info says what a row says. */
typedef enum {
#define DP_BINARY_OP(NAME, ...) DP_##NAME,
#include "ops.def"
    DP_NBINARY
} dp_binary_op;

typedef enum {
#define DP_UNARY_OP(NAME, ...) DP_##NAME,
#include "ops.def"
    DP_NUNARY
} dp_unary_op;

typedef enum {
#define DP_REDUCE_OP(NAME, ...) DP_##NAME,
#include "ops.def"
    DP_NREDUCE
} dp_reduce_op;

typedef enum { DP_OP_UNARY = 0, DP_OP_BINARY, DP_OP_REDUCE } dp_op_family;

/* One row of the op table, as data: what the Lua binding registers and the op sweep runs. */
typedef struct {
    dp_op_family family;
    int op;                 /* dp_unary_op, dp_binary_op or dp_reduce_op */
    const char *name;       /* the Lua name */
    const char *bind;       /* "auto", "own" or "none" */
    const char *node;       /* autograd node (over every element, for reductions); NULL: none */
    const char *node_dim;   /* reductions: the node along a dimension */
    const char *rule;       /* dtype rule, as the row spells it ("FLOAT", "ARITH", "SUM", ...) */
    const char *bools;      /* binary ops: what bool operands do ("KEEP", "INT", "NONE") */
    const char *save;       /* what backward reads ("NONE", "IN", "OUT", "BOTH") */
} dp_op_info;

/* The rows, in table order; *n receives their count. */
const dp_op_info *dp_op_table(int *n);
/* The row of an op, or NULL for a value outside its enum. */
const dp_op_info *dp_op_find(dp_op_family family, int op);

dp_tensor *dp_binary(dp_binary_op op, dp_tensor *a, dp_tensor *b);
/* a op s, or s op a when reverse. */
dp_tensor *dp_binary_scalar(dp_binary_op op, dp_tensor *a, double s, bool reverse);
dp_tensor *dp_unary(dp_unary_op op, dp_tensor *a, double p0, double p1);
/* cond ? a : b elementwise (cond bool; the three broadcast; a and b promote as a binary op;
 * a 0-dim CPU tensor joins any device); differentiable in a and b. */
dp_tensor *dp_where(dp_tensor *cond, dp_tensor *a, dp_tensor *b);

/* Result dtype of a binary op between dtypes (PyTorch promotion, no int/bool division). */
dp_dtype dp_promote(dp_dtype a, dp_dtype b);
/* Broadcast shape of a and b, or -1 with "The size of tensor a (4) must match the size
 * of tensor b (5) at non-singleton dimension 1". */
int dp_broadcast_shape(int na, const int64_t *sa, int nb, const int64_t *sb, int *nout, int64_t *sout);

/* ---- in-place (not differentiable: refused on tensors that require grad while grad mode is on) */
int dp_binary_(dp_binary_op op, dp_tensor *self, dp_tensor *other);   /* other broadcast to self */
int dp_binary_scalar_(dp_binary_op op, dp_tensor *self, double s);
int dp_unary_(dp_unary_op op, dp_tensor *self, double p0, double p1);
int dp_fill_(dp_tensor *self, double value);
int dp_copy_(dp_tensor *self, dp_tensor *src);   /* broadcast, any device/dtype */
/* self += alpha * other (same shape), used by optimizers and gradient accumulation. */
int dp_axpy_(dp_tensor *self, double alpha, dp_tensor *other);

/* ---- reductions (differentiable).  dim < 0: over every element. */
/* For DP_MAX/DP_MIN with dim >= 0, *indices (if not NULL) receives the int64 indices (0-based). */
dp_tensor *dp_reduce(dp_reduce_op op, dp_tensor *t, int dim, bool keepdim, dp_tensor **indices);

dp_tensor *dp_softmax(dp_tensor *t, int dim);
dp_tensor *dp_log_softmax(dp_tensor *t, int dim);

/* ---- matrix products (differentiable; OpenBLAS / cuBLAS) */
dp_tensor *dp_matmul(dp_tensor *a, dp_tensor *b);     /* 1-D, 2-D and batched, as torch.matmul */
dp_tensor *dp_mm(dp_tensor *a, dp_tensor *b);         /* 2-D only */
/* beta * c + alpha * (a @ b) */
dp_tensor *dp_addmm(dp_tensor *c, dp_tensor *a, dp_tensor *b, double beta, double alpha);
/* x @ w^T + b (b may be NULL); x is [..., in], w is [out, in]. */
dp_tensor *dp_linear(dp_tensor *x, dp_tensor *w, dp_tensor *b);

/* ---- nn functions (differentiable) */
typedef enum { DP_REDUCTION_NONE = 0, DP_REDUCTION_MEAN, DP_REDUCTION_SUM } dp_reduction;
dp_tensor *dp_mse_loss(dp_tensor *input, dp_tensor *target, dp_reduction red);
/* input [N, C] log-probabilities, target int64 [N] 0-based classes. */
dp_tensor *dp_nll_loss(dp_tensor *input, dp_tensor *target, dp_reduction red);
dp_tensor *dp_cross_entropy(dp_tensor *input, dp_tensor *target, dp_reduction red);
dp_tensor *dp_dropout(dp_tensor *x, double p, bool training);
/* Layer normalization over the last norm_ndim dims of x (float): (x - mean) / sqrt(var + eps)
 * * weight + bias, the variance biased; weight and bias (either may be NULL) have the
 * normalized shape.  Differentiable in x, weight and bias (norm.c). */
dp_tensor *dp_layer_norm(dp_tensor *x, int norm_ndim, dp_tensor *weight, dp_tensor *bias, double eps);

/* ---- vision: 2-D pooling of [C, H, W] or [N, C, H, W] (vision.c).  Sizes are {h, w}.
 * Max pooling with indices returns in *indices the 0-based flat index h * W + w of each
 * maximum within its plane (int64, the output's shape). */
typedef struct {
    int kind;                     /* DP_POOL_MAX (0) or DP_POOL_AVG (1) */
    bool adaptive;                /* output_size gives the windows; the rest is ignored */
    int64_t output_size[2];
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool ceil_mode, count_include_pad;
    int64_t divisor_override;     /* 0: none; any other integer, negative too, as PyTorch */
} dp_pool2d_opts;
dp_tensor *dp_pool2d(dp_tensor *x, const dp_pool2d_opts *o, dp_tensor **indices);
/* ---- convolution (conv.c): N-d convolution and its transpose over nd = 1..3 spatial dims.
 * x [N, C_in, *spatial] (or unbatched [C_in, *spatial]), w [C_out, C_in/groups, *kernel]
 * ([C_in, C_out/groups, *kernel] when transposed), b [C_out] or NULL.  Padding may differ on
 * the two sides of a dim (pad_lo before, pad_hi after: PyTorch's padding='same' with an even
 * kernel); output_padding is for the transpose only. */
typedef struct {
    int nd;
    int64_t stride[3], pad_lo[3], pad_hi[3], dilation[3], output_padding[3];
    int64_t groups;
    bool transposed;
    const char *name;          /* for messages: "conv2d", "conv_transpose2d" ... */
} dp_conv_opts;
dp_tensor *dp_conv(dp_tensor *x, dp_tensor *w, dp_tensor *b, const dp_conv_opts *o);

/* ---- optimizer updates (in place, one call per parameter; PyTorch's update rules) */
typedef struct {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool first_step;    /* momentum buffer is initialised to the gradient */
} dp_sgd_opts;
int dp_sgd_step(dp_tensor *param, dp_tensor *grad, dp_tensor *momentum_buf, const dp_sgd_opts *o);

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled;     /* AdamW */
    int64_t step;       /* 1-based step number after increment */
} dp_adam_opts;
int dp_adam_step(dp_tensor *param, dp_tensor *grad, dp_tensor *exp_avg, dp_tensor *exp_avg_sq,
                 const dp_adam_opts *o);

typedef struct {
    double lr, rho, eps, weight_decay;
    bool maximize;
} dp_adadelta_opts;
int dp_adadelta_step(dp_tensor *param, dp_tensor *grad, dp_tensor *square_avg, dp_tensor *acc_delta,
                     const dp_adadelta_opts *o);

/* ---- comparisons of whole tensors */
/* true when same shape and |a-b| <= atol + rtol*|b| everywhere; -1 on error */
int dp_allclose(dp_tensor *a, dp_tensor *b, double rtol, double atol);
int dp_equal(dp_tensor *a, dp_tensor *b);

/* ---- reading values (waits for the device) */
/* Copies the tensor's elements, converted to double, in row-major order into out[n]. */
int dp_to_doubles(dp_tensor *t, double *out, int64_t n);
int dp_item(dp_tensor *t, double *out);
/* Copies the elements as dtype dt (row-major) to host memory out (n elements). */
int dp_to_host(dp_tensor *t, void *out, dp_dtype dt, int64_t n);

/* ---------------------------------------------------------------- autograd */

/* Grad mode belongs to a context: each Lua state of the binding has one, so that states
 * alternating on one thread, or a state moving to another thread, keep their own mode.
 * The engine reads the mode of the calling thread, which is the mode of the context last
 * entered on it.  Entering costs a comparison when that context is already current on the
 * thread, so a caller enters its context at every call into the engine. */
typedef struct dp_grad_context {
    bool enabled;
    uint64_t session;   /* which (context, thread) pairing last loaded the mode; 0: none */
} dp_grad_context;
#define DP_GRAD_CONTEXT_INIT { true, 0 }
void dp_grad_context_enter(dp_grad_context *c);
/* Sets the context's mode (current on this thread from now on, c having been entered). */
void dp_grad_context_set(dp_grad_context *c, bool on);
/* The calling thread's mode; dp_set_grad_enabled changes it for this thread only, without
 * touching any context (the engine's internal no-grad stretches, which restore it). */
bool dp_grad_enabled(void);
void dp_set_grad_enabled(bool on);

int dp_set_requires_grad(dp_tensor *t, bool on);   /* leaves only; float dtypes only */
/* torch.autograd.set_detect_anomaly: backward checks every gradient a node returns and
 * fails naming the node when one holds a NaN (process-wide, off by default: it costs a
 * host copy of each gradient). */
void dp_set_detect_anomaly(bool on);
bool dp_detect_anomaly(void);
/* Backward from root: grad may be NULL for a one-element root. */
int dp_backward(dp_tensor *root, dp_tensor *grad, bool retain_graph);
/* torch.autograd.grad: the gradients of root (times grad) with respect to the n inputs
 * (tensors that require grad, leaves or not) in out[] (new references; NULL for an input
 * the graph does not reach), leaving every .grad alone. */
int dp_grad(dp_tensor *root, dp_tensor *grad, bool retain_graph, int n, dp_tensor *const *inputs, dp_tensor **out);
/* dp_grad, and with create_graph the gradients are recorded (differentiable again); the
 * graph's saved tensors are kept, as with retain_graph. */
int dp_grad_graph(dp_tensor *root, dp_tensor *grad, bool retain_graph, bool create_graph, int n,
                  dp_tensor *const *inputs, dp_tensor **out);
/* A custom autograd node (torch.autograd.Function): makes out, a tensor without history,
 * the output of a node over the n inputs (NULL entries allowed) whose backward calls
 * fn(user, grad, n, grad_inputs), which fills grad_inputs[i] (new references, NULL for
 * none) and returns 0, or -1 with the message set.  When the node is freed, free_fn(user)
 * is called (on whatever thread releases it).  Records nothing and returns 0 when no input
 * needs a gradient or grad mode is off; 1 when out was attached; -1 on error.  name is
 * copied. */
typedef int (*dp_custom_backward_fn)(void *user, dp_tensor *grad, int n, dp_tensor **grad_inputs);
int dp_custom_attach(dp_tensor *out, const char *name, int n, dp_tensor *const *inputs,
                     dp_custom_backward_fn fn, void (*free_fn)(void *user), void *user);
/* "AddBackward0", ... for tostring and t.grad_fn */
const char *dp_node_name(const dp_node *n);
void dp_node_retain(dp_node *n);
void dp_node_release(dp_node *n);
/* Sets (or clears, with fn NULL) the hook called when the leaf's gradient is final. */
void dp_set_grad_ready_hook(dp_tensor *leaf, dp_grad_ready_fn fn, void *ctx);
/* PyTorch's `t.data = src`: t takes src's storage, layout, dtype and device and keeps its
 * identity, requires_grad and hooks; an existing .grad is converted to match. Leaves only. */
int dp_set_data(dp_tensor *t, dp_tensor *src);
/* t:retain_grad(): backward keeps the gradient that reaches the non-leaf t, which
 * dp_retained_grad returns (borrowed; NULL before a backward reaches it); a leaf keeps
 * its .grad anyway.  Fails when t does not require grad. */
int dp_retain_grad(dp_tensor *t);
bool dp_retains_grad(const dp_tensor *t);
dp_tensor *dp_retained_grad(const dp_tensor *t);
/* Replaces leaf->grad (retains g; g may be NULL). */
void dp_set_grad(dp_tensor *leaf, dp_tensor *g);

/* ---------------------------------------------------------------- sort and scan (sort.c)
 * dims are 0-based; indices come back as int64 0-based tensors (new references) through
 * *indices when it is not NULL; the values are differentiable (the gradient goes back to
 * the chosen elements).  NaN is the largest value, as in PyTorch. */
typedef enum { DP_CUMSUM = 0, DP_CUMPROD, DP_CUMMAX, DP_CUMMIN, DP_LOGCUMSUMEXP, DP_NSCAN } dp_scan_op;
/* stable sort along dim */
dp_tensor *dp_sort(dp_tensor *t, int dim, bool descending, dp_tensor **indices);
/* the k largest (or smallest) along dim, in order */
dp_tensor *dp_topk(dp_tensor *t, int64_t k, int dim, bool largest, dp_tensor **indices);
/* the k-th smallest (k from 1) along dim */
dp_tensor *dp_kthvalue(dp_tensor *t, int64_t k, int dim, bool keepdim, dp_tensor **indices);
/* the lower median along dim (a NaN in a row gives that NaN), or of everything (dim < 0,
 * no indices) */
dp_tensor *dp_median(dp_tensor *t, int dim, bool keepdim, dp_tensor **indices);
/* the most frequent value along dim (the smallest among equally frequent ones) */
dp_tensor *dp_mode(dp_tensor *t, int dim, bool keepdim, dp_tensor **indices);
/* inclusive scans along dim: cumsum and cumprod (integers and bool give int64), cummax and
 * cummin (with indices), logcumsumexp (floating point); reverse scans from the end */
dp_tensor *dp_scan(dp_scan_op op, dp_tensor *t, int dim, bool reverse, dp_tensor **indices);

#ifdef __cplusplus
}
#endif
#endif
