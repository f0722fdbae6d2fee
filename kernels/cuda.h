/* cuda.h: the plain-C launchers of libdplua_cuda.so, one group per .cu file in kernels/.
 * backend.cu puts them into the dp_backend struct that the engine calls; nothing else
 * calls a kernel.  Launchers return 0, or -1 with the message set (dp_cuda_error).
 * All of them run asynchronously on the stream of the device their views live on.
 *
 * DP_CUDA_API marks what the library exports (looked up with dlsym by the engine);
 * everything else stays inside the library. */
#ifndef DP_KERNELS_CUDA_H
#define DP_KERNELS_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../src/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DP_CUDA_API __attribute__((visibility("default")))
#define DP_CUDA_INTERNAL __attribute__((visibility("hidden")))

/* ---- exported (see src/backend.h) */
DP_CUDA_API const dp_backend *dp_cuda_backend_init(const dp_backend_host *host, int *device_count, char *err,
                                                   size_t errlen);
/* For other CUDA code in this library and beside it (NCCL collectives): the stream of a
 * device as a cudaStream_t, after making its physical GPU current on this thread; NULL with
 * the message set on failure. */
DP_CUDA_API void *dp_cuda_stream(int index);
/* The physical GPU ordinal behind a (virtual) device, or -1. */
DP_CUDA_API int dp_cuda_physical_device(int index);

/* ---- backend.cu: devices, streams, errors */
/* Sets the message (printf-style) through the engine's dp_error; returns -1. */
DP_CUDA_INTERNAL int dp_cuda_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Makes device index's GPU current on this thread and stores its stream in *stream. */
DP_CUDA_INTERNAL int dp_cuda_enter(int index, void **stream);
/* The cuBLAS handle of a device (bound to its stream, created on first use) with the
 * device's cuBLAS lock held; dp_cuda_cublas_release drops the lock.  NULL on failure
 * (nothing held). */
DP_CUDA_INTERNAL void *dp_cuda_cublas_acquire(int index);
DP_CUDA_INTERNAL void dp_cuda_cublas_release(int index);
DP_CUDA_INTERNAL bool dp_cuda_tf32(void);
/* torch.use_deterministic_algorithms is on (the engine's flag): the kernels that would
 * accumulate with atomics take their deterministic paths (determ.cu) */
DP_CUDA_INTERNAL bool dp_cuda_deterministic(void);
/* cuDNN must pick deterministic algorithms (torch.backends.cudnn.deterministic, or the above) */
DP_CUDA_INTERNAL bool dp_cuda_cudnn_deterministic(void);
/* The (virtual) device whose allocation holds ptr (an interior pointer is fine), or -1
 * with the message set: for the launchers that receive raw pointers (gemm, optimizers). */
DP_CUDA_INTERNAL int dp_cuda_device_of(const void *ptr);
/* Temporary device memory from the caching allocator (stream-ordered reuse). */
DP_CUDA_INTERNAL void *dp_cuda_scratch_alloc(int index, size_t nbytes);
DP_CUDA_INTERNAL void dp_cuda_scratch_free(int index, void *ptr);

/* ---- elementwise.cu */
DP_CUDA_INTERNAL int dp_cuda_fill(const dp_view *out, double value);
DP_CUDA_INTERNAL int dp_cuda_copy(const dp_view *out, const dp_view *in);
DP_CUDA_INTERNAL int dp_cuda_unary(dp_unary_op op, const dp_view *out, const dp_view *in, double p0, double p1);
DP_CUDA_INTERNAL int dp_cuda_binary(dp_binary_op op, const dp_view *out, const dp_view *a, const dp_view *b);
DP_CUDA_INTERNAL int dp_cuda_where(const dp_view *out, const dp_view *cond, const dp_view *a, const dp_view *b);
DP_CUDA_INTERNAL int dp_cuda_binary_scalar(dp_binary_op op, const dp_view *out, const dp_view *a, double s, bool reverse);

/* ---- reduce.cu */
DP_CUDA_INTERNAL int dp_cuda_reduce(dp_reduce_op op, const dp_view *out, const dp_view *idx, const dp_view *in, int dim);

/* ---- softmax_loss.cu */
DP_CUDA_INTERNAL int dp_cuda_softmax(bool log, const dp_view *out, const dp_view *in, int dim);
DP_CUDA_INTERNAL int dp_cuda_softmax_backward(bool log, const dp_view *grad_in, const dp_view *grad_out,
                                              const dp_view *y, int dim);
DP_CUDA_INTERNAL int dp_cuda_nll_loss(const dp_view *out, const dp_view *input, const dp_view *target, bool per_item);
DP_CUDA_INTERNAL int dp_cuda_nll_loss_backward(const dp_view *grad_in, const dp_view *grad_out,
                                               const dp_view *target, bool per_item, double scale);

/* ---- linear.cu */
DP_CUDA_INTERNAL int dp_cuda_gemm(int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                  double alpha, const void *a, int64_t lda, int64_t stride_a,
                                  const void *b, int64_t ldb, int64_t stride_b,
                                  double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);

/* ---- conv.cu */
DP_CUDA_INTERNAL int dp_cuda_conv_forward(int dtype, const dp_conv_geom *g, void *out, const void *in, const void *w,
                                          const void *b);
DP_CUDA_INTERNAL int dp_cuda_conv_backward_input(int dtype, const dp_conv_geom *g, void *grad_in, const void *grad_out,
                                                 const void *w);
DP_CUDA_INTERNAL int dp_cuda_conv_backward_weight(int dtype, const dp_conv_geom *g, void *grad_w, const void *grad_out,
                                                  const void *in);

/* ---- conv_cudnn.cu: 1 when cuDNN computed it (which: 0 forward, 1 input gradient, 2 weight
 * gradient; arguments in the order of the three launchers above; accumulate adds to a0),
 * 0 when the caller should run im2col (no cuDNN, not enabled, a shape it cannot express) */
DP_CUDA_INTERNAL int dp_cuda_cudnn_conv(int which, int dtype, const dp_conv_geom *g, void *a0, const void *a1,
                                        const void *a2, bool accumulate);

/* ---- index.cu */
DP_CUDA_INTERNAL int dp_cuda_index_select(const dp_view *out, const dp_view *in, int dim, const dp_view *idx);
DP_CUDA_INTERNAL int dp_cuda_index_add(const dp_view *grad_in, int dim, const dp_view *idx, const dp_view *src);
DP_CUDA_INTERNAL int dp_cuda_gather_offsets(const dp_view *out, const dp_view *base, const dp_view *offs);
DP_CUDA_INTERNAL int dp_cuda_scatter_offsets(const dp_view *base, const dp_view *offs, const dp_view *src, int mode);

/* ---- index_check.cu: device-side index checks (dp_backend.check_indices), reported by
 * dp_cuda_index_errors at the device's next synchronisation (after its stream has run) */
DP_CUDA_INTERNAL int dp_cuda_check_indices(const dp_view *idx, int64_t limit, const char *msg);
DP_CUDA_INTERNAL int dp_cuda_index_errors(int index);
/* n checks whose kernels launch(slots, ctx) queues, slot k reported with msgs[k] */
DP_CUDA_INTERNAL int dp_cuda_checked_launch(int index, int n, const char *const *msgs,
                                            int (*launch)(int64_t *slots, void *ctx), void *ctx);

/* ---- index_offsets.cu: advanced indexing's offsets computed and checked on the device */
DP_CUDA_INTERNAL int dp_cuda_index_offsets(const dp_view *out, const dp_index_terms *terms);

/* ---- random.cu */
DP_CUDA_INTERNAL int dp_cuda_random(int dist, const dp_view *out, uint64_t seed, uint64_t offset,
                                    double a, double b);

/* ---- optim.cu */
DP_CUDA_INTERNAL int dp_cuda_sgd_step(int dtype, int64_t n, void *param, const void *grad, void *buf,
                                      const dp_sgd_opts *o);
DP_CUDA_INTERNAL int dp_cuda_adadelta_step(int dtype, int64_t n, void *param, const void *grad, void *sq, void *acc,
                                           const dp_adadelta_opts *o);
DP_CUDA_INTERNAL int dp_cuda_adam_step(int dtype, int64_t n, void *param, const void *grad, void *m, void *v,
                                       const dp_adam_opts *o);

/* ---- vision.cu */
DP_CUDA_INTERNAL int dp_cuda_pool2d(const dp_pool2d_params *p, int dtype, dp_device dev, void *out, int64_t *idx,
                                    const void *in);
DP_CUDA_INTERNAL int dp_cuda_pool2d_backward(const dp_pool2d_params *p, int dtype, dp_device dev, void *grad_in,
                                             const void *grad_out, const int64_t *idx);
/* ---- sort.cu */
DP_CUDA_INTERNAL int dp_cuda_sort_rows(dp_device dev, int dtype, int64_t rows, int64_t n, int64_t k, const void *in,
                                       void *values, int64_t *indices, bool descending);
DP_CUDA_INTERNAL int dp_cuda_scan_rows(dp_device dev, int op, int dtype, int64_t rows, int64_t n, const void *in,
                                       void *out, int64_t *indices, bool reverse);
DP_CUDA_INTERNAL int dp_cuda_scatter_add_rows(dp_device dev, int dtype, int64_t rows, int64_t n_src, int64_t n_out,
                                              const void *src, const int64_t *idx, void *out);
/* ---- norm.cu (layers) */
DP_CUDA_INTERNAL int dp_cuda_layer_norm(const dp_view *out, const dp_view *mean, const dp_view *rstd, const dp_view *x,
                                        const dp_view *weight, const dp_view *bias, int64_t rows, int64_t cols,
                                        double eps);
DP_CUDA_INTERNAL int dp_cuda_layer_norm_backward(const dp_view *grad_x, const dp_view *grad_weight,
                                                 const dp_view *grad_bias, const dp_view *grad_out, const dp_view *x,
                                                 const dp_view *mean, const dp_view *rstd, const dp_view *weight,
                                                 int64_t rows, int64_t cols);

/* ---- attention.cu (see src/backend.h) */
DP_CUDA_INTERNAL int dp_cuda_sdpa_forward(const dp_sdpa_params *p, const dp_view *out, const dp_view *lse,
                                          const dp_view *q, const dp_view *k, const dp_view *v);
DP_CUDA_INTERNAL int dp_cuda_sdpa_backward(const dp_sdpa_params *p, const dp_view *gq, const dp_view *gk,
                                           const dp_view *gv, const dp_view *gout, const dp_view *q,
                                           const dp_view *k, const dp_view *v, const dp_view *out,
                                           const dp_view *lse);

/* ---- rnn_cell.cu (see src/backend.h) */
DP_CUDA_INTERNAL int dp_cuda_lstm_cell(const dp_view *hc, const dp_view *act, const dp_view *gates,
                                       const dp_view *c_prev, int64_t batch, int64_t hidden);
DP_CUDA_INTERNAL int dp_cuda_lstm_cell_backward(const dp_view *ggates, const dp_view *gc_prev, const dp_view *ghc,
                                                const dp_view *act, const dp_view *c_prev, int64_t batch,
                                                int64_t hidden);
DP_CUDA_INTERNAL int dp_cuda_gru_cell(const dp_view *h, const dp_view *act, const dp_view *gi, const dp_view *gh,
                                      const dp_view *h_prev, int64_t batch, int64_t hidden);
DP_CUDA_INTERNAL int dp_cuda_gru_cell_backward(const dp_view *ggi, const dp_view *ggh, const dp_view *gh_prev,
                                               const dp_view *gout, const dp_view *act, const dp_view *h_prev,
                                               int64_t batch, int64_t hidden);

/* ---- determ.cu: the deterministic scatter (see there).  begin allocates the scratch of n
 * sources; the caller's kernel fills keys[i] (destination element offset, -1 to skip) and
 * soffs[i] (value element offset) for i < n; scatter, called right after that launch,
 * checks it, folds the values into dest with mode (dp_scatter_mode) in source order and
 * frees the scratch. */
typedef struct {
    int dev;
    int64_t n, n2;
    int64_t *keys, *pos, *soffs;
} dp_det_scratch;
DP_CUDA_INTERNAL int dp_cuda_det_begin(int dev, int64_t n, dp_det_scratch *d);
DP_CUDA_INTERNAL int dp_cuda_det_scatter(dp_det_scratch *d, int dtype, int mode, void *dest, const void *src);

#ifdef __cplusplus
}
#endif
#endif
