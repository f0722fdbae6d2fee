/* softmax_loss.cu: softmax and log_softmax along a dim (forward and backward) and the
 * negative log-likelihood loss (forward and backward).  One block per lane of the softmax
 * dim; the arithmetic is in double, as in the CPU backend, so float32 results agree to
 * rounding.  NaN in a lane makes the whole lane NaN, as on the CPU. */
#include "common.cuh"

/* The lanes of up to three views of one shape along dim: outer runs over the lanes, with
 * the lane's first element offset per view; step[k] is view k's stride along dim. */
struct DP_HIDDEN lanes {
    dp_offsets<3> outer;
    int64_t n_lanes, len;
    int64_t step[3];
};

static void make_lanes(lanes *l, const dp_view *const v[3], int nv, int dim)
{
    const dp_view *v0 = v[0];
    l->outer.ndim = 0;
    l->n_lanes = 1;
    l->len = v0->sizes[dim];
    for (int k = 0; k < 3; k++) l->step[k] = k < nv ? v[k]->strides[dim] : 0;
    for (int d = 0; d < v0->ndim; d++) {
        if (d == dim) continue;
        int j = l->outer.ndim++;
        l->outer.sizes[j] = v0->sizes[d];
        for (int k = 0; k < 3; k++) l->outer.strides[k][j] = k < nv ? v[k]->strides[d] : 0;
        l->n_lanes *= v0->sizes[d];
    }
    if (l->outer.ndim == 0) {
        l->outer.ndim = 1;
        l->outer.sizes[0] = 1;
        for (int k = 0; k < 3; k++) l->outer.strides[k][0] = 0;
    }
    dp_offsets_set_dividers(&l->outer);
}

static unsigned lane_threads(int64_t len)
{
    int64_t t = (len + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > DP_THREADS ? DP_THREADS : t);
}

static unsigned lane_grid(int64_t n) { return (unsigned)(n < (1 << 20) ? (n < 1 ? 1 : n) : (1 << 20)); }

/* views: 0 = in, 1 = out */
template <typename T>
static __global__ void softmax_kernel(bool log_, lanes l, const T *in, T *out)
{
    __shared__ double sh[32];
    for (int64_t j = blockIdx.x; j < l.n_lanes; j += gridDim.x) {
        int64_t off[3];
        l.outer.get(j, off);
        const T *x = in + off[0];
        T *y = out + off[1];
        double m = -INFINITY;
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) {
            double v = (double)x[r * l.step[0]];
            if (v > m || v != v) m = v;
        }
        m = dp_block_max(m, sh);
        double sum = 0;
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) sum += exp((double)x[r * l.step[0]] - m);
        sum = dp_block_sum(sum, sh);
        double lse = m + log(sum);
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) {
            double v = (double)x[r * l.step[0]];
            y[r * l.step[1]] = (T)(log_ ? v - lse : exp(v - m) / sum);
        }
        __syncthreads();
    }
}

/* views: 0 = grad_out, 1 = grad_in, 2 = y */
template <typename T>
static __global__ void softmax_backward_kernel(bool log_, lanes l, const T *gout, T *gin, const T *y)
{
    __shared__ double sh[32];
    for (int64_t j = blockIdx.x; j < l.n_lanes; j += gridDim.x) {
        int64_t off[3];
        l.outer.get(j, off);
        const T *g = gout + off[0], *yy = y + off[2];
        T *gi = gin + off[1];
        double acc = 0;
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) {
            double gv = (double)g[r * l.step[0]];
            acc += log_ ? gv : gv * (double)yy[r * l.step[2]];
        }
        acc = dp_block_sum(acc, sh);
        for (int64_t r = threadIdx.x; r < l.len; r += blockDim.x) {
            double gv = (double)g[r * l.step[0]], yv = (double)yy[r * l.step[2]];
            gi[r * l.step[1]] = (T)(log_ ? gv - exp(yv) * acc : yv * (gv - acc));
        }
        __syncthreads();
    }
}

static int float_only(const char *what, int dtype)
{
    return dp_cuda_error("%s on CUDA needs a float32 or float64 tensor, not %s", what, dp_cuda_dtype_name(dtype));
}

extern "C" int dp_cuda_softmax(bool log, const dp_view *out, const dp_view *in, int dim)
{
    if (in->dtype != out->dtype) return dp_cuda_error("CUDA softmax: input and output dtypes differ");
    if (dim < 0 || dim >= in->ndim) {
        if (in->ndim != 0) return dp_cuda_error("CUDA softmax: dim %d out of range", dim);
    }
    lanes l;
    const dp_view *v[3] = { in, out, NULL };
    if (in->ndim == 0) {   /* a 0-dim tensor is one lane of one element */
        l.outer.ndim = 1; l.outer.sizes[0] = 1;
        for (int k = 0; k < 3; k++) l.outer.strides[k][0] = 0;
        l.n_lanes = 1; l.len = 1; l.step[0] = l.step[1] = l.step[2] = 0;
    } else {
        make_lanes(&l, v, 2, dim);
    }
    if (l.n_lanes == 0 || l.len == 0) return 0;
    CUDA_STREAM_OF(out->device, s);
    unsigned t = lane_threads(l.len), g = lane_grid(l.n_lanes);
    if (in->dtype == DP_FLOAT32) softmax_kernel<float><<<g, t, 0, s>>>(log, l, (const float *)in->data, (float *)out->data);
    else if (in->dtype == DP_FLOAT64) softmax_kernel<double><<<g, t, 0, s>>>(log, l, (const double *)in->data, (double *)out->data);
    else return float_only(log ? "log_softmax" : "softmax", in->dtype);
    CUDA_CHECK_LAUNCH("softmax");
    return 0;
}

extern "C" int dp_cuda_softmax_backward(bool log, const dp_view *grad_in, const dp_view *grad_out, const dp_view *y, int dim)
{
    if (grad_in->dtype != grad_out->dtype || y->dtype != grad_out->dtype)
        return dp_cuda_error("CUDA softmax backward: dtypes differ");
    lanes l;
    const dp_view *v[3] = { grad_out, grad_in, y };
    if (grad_out->ndim == 0) {
        l.outer.ndim = 1; l.outer.sizes[0] = 1;
        for (int k = 0; k < 3; k++) l.outer.strides[k][0] = 0;
        l.n_lanes = 1; l.len = 1; l.step[0] = l.step[1] = l.step[2] = 0;
    } else {
        if (dim < 0 || dim >= grad_out->ndim) return dp_cuda_error("CUDA softmax backward: dim %d out of range", dim);
        make_lanes(&l, v, 3, dim);
    }
    if (l.n_lanes == 0 || l.len == 0) return 0;
    CUDA_STREAM_OF(grad_in->device, s);
    unsigned t = lane_threads(l.len), g = lane_grid(l.n_lanes);
    if (grad_out->dtype == DP_FLOAT32)
        softmax_backward_kernel<float><<<g, t, 0, s>>>(log, l, (const float *)grad_out->data, (float *)grad_in->data,
                                                       (const float *)y->data);
    else if (grad_out->dtype == DP_FLOAT64)
        softmax_backward_kernel<double><<<g, t, 0, s>>>(log, l, (const double *)grad_out->data, (double *)grad_in->data,
                                                        (const double *)y->data);
    else return float_only("softmax backward", grad_out->dtype);
    CUDA_CHECK_LAUNCH("softmax_backward");
    return 0;
}

/* ---------------------------------------------------------------- NLL loss */

/* c: the number of classes; a target outside [0, c) counts as 0 (the engine's device-side
 * check reports it at the next synchronisation) */
struct DP_HIDDEN nll_geom {
    int64_t n, s_in0, s_in1, s_t, s_out, c;
};

template <typename T> __device__ __forceinline__ double nll_term(const nll_geom &g, const T *in, const int64_t *target, int64_t i)
{
    int64_t t = target[i * g.s_t];
    return t >= 0 && t < g.c ? -(double)in[i * g.s_in0 + t * g.s_in1] : 0.0;
}

template <typename T>
static __global__ void nll_per_item_kernel(nll_geom g, const T *in, const int64_t *target, T *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (int64_t)gridDim.x * blockDim.x)
        out[i * g.s_out] = (T)nll_term(g, in, target, i);
}

/* one block: the sum over N in double */
template <typename T>
static __global__ void nll_sum_kernel(nll_geom g, const T *in, const int64_t *target, T *out)
{
    __shared__ double sh[32];
    double acc = 0;
    for (int64_t i = threadIdx.x; i < g.n; i += blockDim.x) acc += nll_term(g, in, target, i);
    acc = dp_block_sum(acc, sh);
    if (threadIdx.x == 0) out[0] = (T)acc;
}

/* writes grad_in at each row's target (the caller zero-fills grad_in) */
template <typename T>
static __global__ void nll_backward_kernel(nll_geom g, T *gin, const T *gout, int64_t s_gout, const int64_t *target,
                                           bool per_item, double scale)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (int64_t)gridDim.x * blockDim.x) {
        double gv = (double)gout[per_item ? i * s_gout : 0];
        int64_t t = target[i * g.s_t];
        if (t >= 0 && t < g.c) gin[i * g.s_in0 + t * g.s_in1] = (T)(-gv * scale);
    }
}

static int nll_check(const dp_view *input, const dp_view *target)
{
    if (input->ndim != 2) return dp_cuda_error("CUDA nll_loss: input must be [N, C], got %d dims", input->ndim);
    if (target->ndim != 1 || target->dtype != DP_INT64 || target->sizes[0] != input->sizes[0])
        return dp_cuda_error("CUDA nll_loss: target must be int64 [N]");
    if (input->dtype != DP_FLOAT32 && input->dtype != DP_FLOAT64) return float_only("nll_loss", input->dtype);
    return 0;
}

extern "C" int dp_cuda_nll_loss(const dp_view *out, const dp_view *input, const dp_view *target, bool per_item)
{
    if (nll_check(input, target)) return -1;
    if (out->dtype != input->dtype) return dp_cuda_error("CUDA nll_loss: output dtype differs from input");
    nll_geom g = { input->sizes[0], input->strides[0], input->strides[1], target->strides[0],
                   per_item && out->ndim > 0 ? out->strides[0] : 0, input->sizes[1] };
    CUDA_STREAM_OF(out->device, s);
    if (per_item) {
        if (g.n == 0) return 0;
        unsigned grid = dp_grid_for(g.n, DP_THREADS);
        if (input->dtype == DP_FLOAT32)
            nll_per_item_kernel<float><<<grid, DP_THREADS, 0, s>>>(g, (const float *)input->data, (const int64_t *)target->data, (float *)out->data);
        else
            nll_per_item_kernel<double><<<grid, DP_THREADS, 0, s>>>(g, (const double *)input->data, (const int64_t *)target->data, (double *)out->data);
    } else {
        if (input->dtype == DP_FLOAT32)
            nll_sum_kernel<float><<<1, DP_THREADS, 0, s>>>(g, (const float *)input->data, (const int64_t *)target->data, (float *)out->data);
        else
            nll_sum_kernel<double><<<1, DP_THREADS, 0, s>>>(g, (const double *)input->data, (const int64_t *)target->data, (double *)out->data);
    }
    CUDA_CHECK_LAUNCH("nll_loss");
    return 0;
}

extern "C" int dp_cuda_nll_loss_backward(const dp_view *grad_in, const dp_view *grad_out, const dp_view *target,
                                         bool per_item, double scale)
{
    if (nll_check(grad_in, target)) return -1;
    if (grad_out->dtype != grad_in->dtype) return dp_cuda_error("CUDA nll_loss backward: dtypes differ");
    nll_geom g = { grad_in->sizes[0], grad_in->strides[0], grad_in->strides[1], target->strides[0], 0, grad_in->sizes[1] };
    if (g.n == 0) return 0;
    int64_t s_gout = per_item && grad_out->ndim > 0 ? grad_out->strides[0] : 0;
    CUDA_STREAM_OF(grad_in->device, s);
    unsigned grid = dp_grid_for(g.n, DP_THREADS);
    if (grad_in->dtype == DP_FLOAT32)
        nll_backward_kernel<float><<<grid, DP_THREADS, 0, s>>>(g, (float *)grad_in->data, (const float *)grad_out->data,
                                                               s_gout, (const int64_t *)target->data, per_item, scale);
    else
        nll_backward_kernel<double><<<grid, DP_THREADS, 0, s>>>(g, (double *)grad_in->data, (const double *)grad_out->data,
                                                                s_gout, (const int64_t *)target->data, per_item, scale);
    CUDA_CHECK_LAUNCH("nll_loss_backward");
    return 0;
}
