/* backend.h: the device interface.  One dp_backend per device type (CPU, CUDA); the ops in
 * ops.c do shape logic, broadcasting, allocation, device checks and autograd, then call
 * these kernels.  Nothing above this interface asks which backend it has.
 *
 * Kernels take dp_view descriptors: the data pointer already points at element 0 and the
 * strides (in elements) describe the layout; a stride of 0 is a broadcast dimension.
 * Every kernel returns 0 or -1 with dp_error() set.  Kernels run on the device's stream
 * and may return before the work is done; synchronize() waits for it.
 */
#ifndef DP_BACKEND_H
#define DP_BACKEND_H

#include "dp.h"

typedef struct {
    void *data;                 /* element 0 of the view */
    int dtype;                  /* dp_dtype */
    int ndim;
    int64_t sizes[DP_MAX_DIMS];
    int64_t strides[DP_MAX_DIMS];
    dp_device device;
} dp_view;

/* The terms of advanced indexing's element offsets (dp_backend.index_offsets): term k adds
 * stride[k] times either the index idx[k] (int64, viewed over the offsets' shape: broadcast
 * strides), counted from base[k] with negative values from the end and checked against
 * size[k], or (idx[k].data NULL) the coordinate along the offsets' dim coord[k].  msg[k] is
 * the printf format for a bad index, taking its value and position (two long longs). */
#define DP_BAD_OFFSET INT64_MIN
typedef struct {
    int n;
    int base[DP_MAX_DIMS];
    dp_view idx[DP_MAX_DIMS];
    int coord[DP_MAX_DIMS];
    int64_t size[DP_MAX_DIMS];
    int64_t stride[DP_MAX_DIMS];
    const char *msg[DP_MAX_DIMS];
} dp_index_terms;

typedef enum { DP_RNG_UNIFORM = 0, DP_RNG_NORMAL, DP_RNG_RANDINT, DP_RNG_BERNOULLI_MASK } dp_rng_dist;

/* vision: one 2-D pooling over contiguous [planes, ih, iw] -> [planes, oh, ow]; the windows
 * are vision_window.h's (max: kernel, stride, padding, dilation; avg: no dilation;
 * adaptive: from the sizes alone) */
typedef enum { DP_POOL_MAX = 0, DP_POOL_AVG } dp_pool_kind;
typedef struct {
    int kind;                   /* dp_pool_kind */
    bool adaptive;
    bool count_include_pad;     /* avg */
    int64_t divisor;            /* avg: divisor_override, 0 when absent */
    int64_t planes, ih, iw, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} dp_pool2d_params;
/* The shape of one convolution, as the conv kernels take it: nd spatial dims (unused dims
 * have size 1, kernel 1, stride 1, pad 0, dilation 1), pad counted before each dim (the
 * output sizes say how much padding follows). */
typedef struct {
    int nd;
    int64_t batch, in_channels, out_channels, groups;
    int64_t in[3], out[3], kernel[3], stride[3], pad[3], dilation[3];
} dp_conv_geom;
/* how scatter_offsets combines a value with what is there (bool: add and max are "or",
 * mul and min "and") */
typedef enum { DP_SCATTER_COPY = 0, DP_SCATTER_ADD, DP_SCATTER_MUL, DP_SCATTER_MAX, DP_SCATTER_MIN } dp_scatter_mode;
/* attention: the shape and options of one scaled dot-product attention.  batch is the
 * product of the leading dims; the mask (bool: true takes part, or float of the inputs'
 * dtype: added to the scores) is element (b, i, j) at mask + i * mask_sl + j * mask_ss +
 * the offset of b, whose digits in mask_bsizes (the inputs' leading dims, last fastest)
 * are weighted by mask_bstrides (0 on broadcast dims).  Dropout keeps element (b, i, j)
 * when the uniform of element (b * L + i) * S + j of a dropout mask drawn from (seed,
 * offset) is >= dropout_p (dp_sdpa_keep). */
typedef enum { DP_SDPA_MASK_NONE = 0, DP_SDPA_MASK_BOOL, DP_SDPA_MASK_FLOAT } dp_sdpa_mask_kind;
typedef struct {
    int64_t batch, L, S, E, Ev;
    double scale;
    bool causal;                /* key j > query i is masked (top-left aligned) */
    int mask_kind;              /* dp_sdpa_mask_kind */
    const void *mask;
    int mask_nb;                /* leading dims of the mask's batch offset */
    int64_t mask_bsizes[DP_MAX_DIMS], mask_bstrides[DP_MAX_DIMS];
    int64_t mask_sl, mask_ss;
    double dropout_p;
    uint64_t seed, offset;
} dp_sdpa_params;

typedef struct dp_backend {
    const char *name;

    /* memory: alloc returns NULL with dp_error() set on failure */
    void *(*alloc)(dp_device dev, size_t nbytes);
    void (*free)(dp_device dev, void *ptr, size_t nbytes);
    /* host <-> device, and device <-> device of this backend (peer where possible).
     * When non_blocking is true the copy may still be running on return (host memory must
     * then stay valid: pinned memory from alloc_host). */
    int (*copy_h2d)(dp_device dev, void *dst, const void *src, size_t nbytes, bool non_blocking);
    int (*copy_d2h)(dp_device dev, void *dst, const void *src, size_t nbytes);
    int (*copy_d2d)(dp_device dst_dev, void *dst, dp_device src_dev, const void *src, size_t nbytes);
    int (*synchronize)(dp_device dev);

    /* kernels: all views live on this backend's devices; out has the full result shape,
     * inputs are already broadcast to it (stride 0) unless said otherwise.  The op kernels
     * are expanded from ops.def; an op a backend does not know returns an error. */
    int (*fill)(const dp_view *out, double value);
    /* strided copy with dtype conversion; in has out's shape */
    int (*copy)(const dp_view *out, const dp_view *in);
    int (*unary)(dp_unary_op op, const dp_view *out, const dp_view *in, double p0, double p1);
    /* out's dtype is the result dtype (bool for comparisons); a and b have the compute dtype */
    int (*binary)(dp_binary_op op, const dp_view *out, const dp_view *a, const dp_view *b);
    int (*binary_scalar)(dp_binary_op op, const dp_view *out, const dp_view *a, double s, bool reverse);
    /* out = cond ? a : b elementwise; cond is bool, a and b have out's dtype (all broadcast) */
    int (*where)(const dp_view *out, const dp_view *cond, const dp_view *a, const dp_view *b);
    /* reduce `in` along dim (dim < 0: all) into out (out has in's shape with dim removed,
     * or a 0-dim view).  For max/min/argmax/argmin, idx (int64, may be NULL) receives the
     * 0-based index along dim. */
    int (*reduce)(dp_reduce_op op, const dp_view *out, const dp_view *idx, const dp_view *in, int dim);
    /* log ? log_softmax : softmax along dim; out and in same shape */
    int (*softmax)(bool log, const dp_view *out, const dp_view *in, int dim);
    /* backward of (log_)softmax: grad_in from grad_out and the forward output y */
    int (*softmax_backward)(bool log, const dp_view *grad_in, const dp_view *grad_out, const dp_view *y, int dim);
    /* C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major, with leading dims (elements);
     * batched when batch > 1 with element strides between matrices (0 = shared). */
    int (*gemm)(int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                double alpha, const void *a, int64_t lda, int64_t stride_a,
                const void *b, int64_t ldb, int64_t stride_b,
                double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);
    /* out[i,...] = in[idx[i],...] along dim (idx int64 0-based, already range-checked) */
    int (*index_select)(const dp_view *out, const dp_view *in, int dim, const dp_view *idx);
    /* grad_in[idx[i],...] += grad_out[i,...] along dim (grad_in zero-filled by the caller) */
    int (*index_add)(const dp_view *grad_in, int dim, const dp_view *idx, const dp_view *src);
    /* random draw, element i from Philox(seed, offset + i / per) (dp_rng_values of
     * philox.h): uniform in [a, b), normal(a, b), randint in [a, b), bernoulli mask
     * (1/(1-a) with probability 1-a, else 0) */
    int (*random)(int dist /* dp_rng_dist */, const dp_view *out, uint64_t seed, uint64_t offset,
                  double a, double b);
    /* NLL: input [N,C] (log-probs), target int64 [N] 0-based (already range-checked by the
     * caller), out 0-dim (the sum over N) or [N] when per_item. */
    int (*nll_loss)(const dp_view *out, const dp_view *input, const dp_view *target, bool per_item);
    int (*nll_loss_backward)(const dp_view *grad_in, const dp_view *grad_out, const dp_view *target,
                             bool per_item, double scale);
    /* optimizer updates on contiguous tensors of n elements (float32 or float64) */
    int (*sgd_step)(int dtype, int64_t n, void *param, const void *grad, void *buf, const dp_sgd_opts *o);
    int (*adam_step)(int dtype, int64_t n, void *param, const void *grad, void *m, void *v,
                     const dp_adam_opts *o);

    /* device-wide services; may be NULL on the CPU */
    void *(*alloc_host)(size_t nbytes);          /* pinned host memory */
    void (*free_host)(void *ptr);
    size_t (*memory_allocated)(int index);
    size_t (*max_memory_allocated)(int index);
    void (*empty_cache)(void);
    void (*set_tf32)(bool allow);

    /* vision (pooling): out [planes, oh, ow] from in [planes, ih, iw], all contiguous of
     * dtype; max pooling writes the 0-based flat index (h * iw + w) of each maximum into
     * idx (int64, same shape as out).  The backward adds grad_out into grad_in (zeroed by
     * the caller): max through idx, avg spread over each window. */
    int (*pool2d)(const dp_pool2d_params *p, int dtype, dp_device dev, void *out, int64_t *idx, const void *in);
    int (*pool2d_backward)(const dp_pool2d_params *p, int dtype, dp_device dev, void *grad_in,
                           const void *grad_out, const int64_t *idx);
    /* sort and scan (sort.c): `rows` contiguous rows of n elements each, worked along the
     * rows; indices are int64 and 0-based.  sort_rows: the first k (1 <= k <= n) of each row
     * in a stable sort, NaN the largest value, into rows of k values and indices.
     * scan_rows: the inclusive scan `op` (dp_scan_op) from the first element, or from the
     * last when reverse; indices (cummax, cummin) receive where each running extreme was.
     * scatter_add_rows: out[r][idx[r][j]] += src[r][j] for j < n_src (out has n_out
     * columns, zero-filled by the caller; the indices are already in range). */
    int (*sort_rows)(dp_device dev, int dtype, int64_t rows, int64_t n, int64_t k, const void *in, void *values,
                     int64_t *indices, bool descending);
    int (*scan_rows)(dp_device dev, int op, int dtype, int64_t rows, int64_t n, const void *in, void *out,
                     int64_t *indices, bool reverse);
    int (*scatter_add_rows)(dp_device dev, int dtype, int64_t rows, int64_t n_src, int64_t n_out,
                            const void *src, const int64_t *idx, void *out);
    /* convolution (conv.c): contiguous tensors of one dtype (float32 or float64), shapes in g.
     * I is the image side [N, C_in, *in], O the output side [N, C_out, *out], w
     * [C_out, C_in/groups, *kernel].  forward: O = conv(I, w) + b (b may be NULL);
     * backward_input: gI = conv's adjoint applied to gO (also the transposed convolution);
     * backward_weight: gw = the gradient of w from gO and I (overwritten, not accumulated). */
    int (*conv_forward)(int dtype, const dp_conv_geom *g, void *out, const void *in, const void *w, const void *b);
    int (*conv_backward_input)(int dtype, const dp_conv_geom *g, void *grad_in, const void *grad_out, const void *w);
    int (*conv_backward_weight)(int dtype, const dp_conv_geom *g, void *grad_w, const void *grad_out, const void *in);
    /* ---- layers: normalization (cpu_norm.c, kernels/norm.cu).  Rows of cols elements:
     * x and out [rows, cols], mean and rstd [rows], weight and bias [cols] or NULL; all
     * contiguous and of one float dtype.  Forward writes mean and 1/sqrt(var + eps) for the
     * backward, which writes grad_x [rows, cols] and the column sums grad_weight and
     * grad_bias [cols]; a NULL gradient is not wanted. */
    int (*layer_norm)(const dp_view *out, const dp_view *mean, const dp_view *rstd, const dp_view *x,
                      const dp_view *weight, const dp_view *bias, int64_t rows, int64_t cols, double eps);
    int (*layer_norm_backward)(const dp_view *grad_x, const dp_view *grad_weight, const dp_view *grad_bias,
                               const dp_view *grad_out, const dp_view *x, const dp_view *mean,
                               const dp_view *rstd, const dp_view *weight, int64_t rows, int64_t cols);
    /* ---- optim: Adadelta's update of n contiguous elements (optim.c), as sgd_step */
    int (*adadelta_step)(int dtype, int64_t n, void *param, const void *grad, void *square_avg, void *acc_delta,
                         const dp_adadelta_opts *o);
    /* ---- advanced indexing (index.c): the engine reads the indices on the host, checks
     * them and turns them into element offsets.  out (or src), base and offs share one
     * shape; base's strides walk the dims that are not indexed (0 on the indexed ones) and
     * offs (int64, in elements) adds the indexed part. */
    /* out[i] = base[i + offs[i]]; out and base have one dtype */
    int (*gather_offsets)(const dp_view *out, const dp_view *base, const dp_view *offs);
    /* base[i + offs[i]] = src[i], or combined with it as mode (dp_scatter_mode) says; offsets
     * may repeat (COPY then writes one of the values); src has base's dtype */
    int (*scatter_offsets)(const dp_view *base, const dp_view *offs, const dp_view *src, int mode);
    /* ---- float16 / bfloat16 (half.c): fill and copy store them; every other kernel gets
     * float32 stand-ins from the engine, except these native ones (NULL: none).
     * gemm_half: gemm's contract for dtype float16 or bfloat16, accumulating in float32. */
    int (*gemm_half)(int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                     double alpha, const void *a, int64_t lda, int64_t stride_a,
                     const void *b, int64_t ldb, int64_t stride_b,
                     double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);
    /* ---- attention: scaled dot-product attention (attention.c, cpu_attention.c,
     * kernels/attention.cu), FlashAttention-2 style: q [batch, L, E], k [batch, S, E],
     * v [batch, S, Ev], out [batch, L, Ev] and the rows' logsumexp lse [batch, L], all
     * contiguous and of one float dtype; the L x S scores are never stored.  The mask is
     * read with broadcast strides (dp_sdpa_params).  The backward recomputes the
     * probabilities from q, k and lse and writes gq, gk, gv (NULL: not wanted). */
    int (*sdpa_forward)(const dp_sdpa_params *p, const dp_view *out, const dp_view *lse, const dp_view *q,
                        const dp_view *k, const dp_view *v);
    int (*sdpa_backward)(const dp_sdpa_params *p, const dp_view *gq, const dp_view *gk, const dp_view *gv,
                         const dp_view *gout, const dp_view *q, const dp_view *k, const dp_view *v,
                         const dp_view *out, const dp_view *lse);
    /* ---- distributed (dist_reducer.c, dist_nccl.c; kernels/backend.cu): a second stream and
     * events, so that collectives overlap the device's own stream without the host waiting.
     * index is the (virtual) CUDA device; a NULL stream is the device's own.  NULL on the CPU. */
    /* The device's side stream (made on first use, kept until exit), or NULL with dp_error(). */
    void *(*side_stream)(int index);
    /* An event from the device's pool, recorded on stream now; give it back with event_release
     * (which may come before the event completes). */
    int (*event_record)(int index, void *stream, void **event);
    /* stream's later work waits for the event; the host does not. */
    int (*stream_wait_event)(int index, void *stream, void *event);
    /* The host waits for the event (a host synchronisation). */
    int (*event_synchronize)(int index, void *event);
    void (*event_release)(int index, void *event);
    /* A copy queued on stream: into device memory from pinned host memory (to_device), or out
     * of device memory into pinned host memory. */
    int (*copy_async)(int index, void *stream, void *dst, const void *src, size_t nbytes, bool to_device);
    /* PyTorch's record_stream: once freed, the block holding ptr is not reused before the work
     * queued on stream up to the free is done. */
    int (*record_stream)(int index, void *ptr, void *stream);
    /* How many times the calling thread waited for the device (stream, event and device
     * synchronisations, blocking copies): a debug counter. */
    int64_t (*host_syncs)(void);
    /* ---- device-side index checks (CUDA; NULL on the CPU, where the engine checks the
     * indices itself): queues a check that every value of idx (int64, 1-D) lies in
     * [0, limit), with no copy to the host.  The first bad one is reported by the device's
     * next synchronisation (synchronize, copy_d2h, a blocking copy_h2d) as the error msg, a
     * printf format taking the bad value + 1 and its position + 1 (two long longs);
     * CUDA_LAUNCH_BLOCKING=1 reports it here.  The kernels that use idx skip bad values. */
    int (*check_indices)(const dp_view *idx, int64_t limit, const char *msg);
    /* ---- recurrent cells (rnn_cell.c, cpu_rnn_cell.c, kernels/rnn_cell.cu): one LSTM or GRU
     * step's gate arithmetic, elementwise over [batch, H]; all views contiguous and of one
     * float dtype (float32 or float64).  The forwards also write the activations the
     * backwards need into act (NULL: no backward), so the backwards compute no exp or tanh;
     * a NULL gradient is not wanted.
     * lstm_cell: gates [batch, 4H] (i, f, g, o before activation), c_prev [batch, H] ->
     * hc [2, batch, H] (h, then c) and act [batch, 5H] (sigmoid i, sigmoid f, tanh g,
     * sigmoid o, tanh c); its backward takes ghc [2, batch, H] and writes ggates [batch, 4H]
     * and gc_prev [batch, H].
     * gru_cell: gi, gh [batch, 3H] (r, z, n), h_prev [batch, H] -> h [batch, H] and act
     * [batch, 4H] (r, z, n, h_n); its backward takes gout [batch, H] and writes ggi, ggh
     * [batch, 3H] and gh_prev [batch, H]. */
    int (*lstm_cell)(const dp_view *hc, const dp_view *act, const dp_view *gates, const dp_view *c_prev,
                     int64_t batch, int64_t hidden);
    int (*lstm_cell_backward)(const dp_view *ggates, const dp_view *gc_prev, const dp_view *ghc, const dp_view *act,
                              const dp_view *c_prev, int64_t batch, int64_t hidden);
    int (*gru_cell)(const dp_view *h, const dp_view *act, const dp_view *gi, const dp_view *gh, const dp_view *h_prev,
                    int64_t batch, int64_t hidden);
    int (*gru_cell_backward)(const dp_view *ggi, const dp_view *ggh, const dp_view *gh_prev, const dp_view *gout,
                             const dp_view *act, const dp_view *h_prev, int64_t batch, int64_t hidden);
    /* ---- advanced indexing's offsets on the device (index.c; kernels/index_offsets.cu; NULL
     * on the CPU, where index.c computes them on the host): out (int64, contiguous) gets, per
     * element, the sum over the terms of an index times its stride, with no copy of the
     * indices to the host.  Each index is range-checked there as check_indices does (a bad
     * one gets the offset DP_BAD_OFFSET, which gather_offsets and scatter_offsets skip, and is
     * reported at the next synchronisation with its term's msg). */
    int (*index_offsets)(const dp_view *out, const dp_index_terms *terms);
} dp_backend;

/* The backend registry (registry.c): the backend serving a device, or NULL with dp_error()
 * set (e.g. CUDA not available).  Backends register themselves for a device type; the CPU
 * backend is registered from the start, a backend library when it is loaded (lib: its
 * handle, for dp_backend_symbol). */
const dp_backend *dp_backend_for(dp_device dev);
int dp_backend_register(dp_device_type type, const dp_backend *b, int device_count, void *lib);
extern const dp_backend dp_cpu_backend;

/* half.c: the table that serves float16/bfloat16 operands of inner's kernels through
 * float32 (the registry hands out this one), and the device-less kernels' calls. */
const dp_backend *dp_half_backend(dp_device_type type, const dp_backend *inner);
int dp_half_gemm(dp_device dev, int dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                 const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                 double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);
typedef enum { DP_CONV_FORWARD = 0, DP_CONV_BACKWARD_INPUT, DP_CONV_BACKWARD_WEIGHT } dp_half_conv_kind;
/* forward: (out, image, weight, bias); backward_input: (grad image, grad output, weight);
 * backward_weight: (grad weight, grad output, image) */
int dp_half_conv(dp_device dev, dp_half_conv_kind kind, int dtype, const dp_conv_geom *g, void *out, const void *x,
                 const void *y, const void *bias);

/* the optimizer updates, float32 inside for float16/bfloat16 parameters (state included) */
int dp_half_sgd_step(dp_device dev, int dtype, int64_t n, void *param, const void *grad, void *buf, const dp_sgd_opts *o);
int dp_half_adam_step(dp_device dev, int dtype, int64_t n, void *param, const void *grad, void *m, void *v,
                      const dp_adam_opts *o);
int dp_half_adadelta_step(dp_device dev, int dtype, int64_t n, void *param, const void *grad, void *square_avg,
                          void *acc_delta, const dp_adadelta_opts *o);

/* A view descriptor of a tensor. */
dp_view dp_view_of(const dp_tensor *t);

/* What the engine hands a backend library when it initialises it: the library reports its
 * errors through these, so it never looks the engine up by symbol name. */
typedef struct {
    int (*error)(const char *fmt, ...);   /* dp_error */
    /* ---- deterministic algorithms (determ.c): the flags, read at each call */
    bool (*deterministic)(void);           /* dp_deterministic_algorithms */
    bool (*cudnn_deterministic)(void);     /* dp_cudnn_wants_deterministic */
    int (*alert_not_deterministic)(const char *caller);
} dp_backend_host;

/* The CUDA backend lives in libdplua_cuda.so (kernels/), loaded at run time on first use.
 * It exports dp_cuda_backend_init, of this type (kernels/cuda.h declares it so, and
 * compiles against this typedef), plus the functions below, looked up with dlsym. */
typedef const dp_backend *(*dp_cuda_init_fn)(const dp_backend_host *host, int *device_count, char *err, size_t errlen);
/* A symbol of the library a device type's backend came from (e.g. the NCCL collectives
 * libdplua_cuda.so exports), or NULL when there is no such library. */
void *dp_backend_symbol(dp_device_type type, const char *name);
/* Library search: $DPLUA_CUDA_LIB, then libdplua_cuda.so beside the library or binary that
 * holds the engine (and one and two folders up), then the dynamic loader's path. */

#endif
