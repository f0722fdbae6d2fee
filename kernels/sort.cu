/* sort.cu: the sort and scan kernels of src/sort.c on contiguous rows: a stable sort that
 * places each element at its rank in its row when the rank is among the first k (one thread
 * per element, a pass over the row each: simple and correct, quadratic in the row length),
 * the inclusive scans (one thread
 * per row) and the row-wise scatter-add of the gradient of picked values (atomics, since a
 * column may be picked more than once; determ.cu's sorted path under
 * torch.use_deterministic_algorithms). */
#include "common.cuh"

/* a sorts strictly before b; NaN is the largest value */
template <typename T> __device__ __forceinline__ bool sort_before(T a, T b, bool descending)
{
    return descending ? (b == b && (a != a || a > b)) : (a == a && (b != b || a < b));
}

template <typename T>
static __global__ void sort_rank_kernel(int64_t total, int64_t n, int64_t k, const T *in, T *values, int64_t *indices,
                                        bool descending)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e / n, i = e % n;
        const T *x = in + r * n;
        T v = x[i];
        int64_t rank = 0;
        for (int64_t j = 0; j < n; j++) {
            T w = x[j];
            /* before v in a stable sort: strictly before, or tied and earlier */
            if (sort_before(w, v, descending) || (j < i && !sort_before(v, w, descending))) rank++;
        }
        if (rank < k) {
            values[r * k + rank] = v;
            indices[r * k + rank] = i;
        }
    }
}

/* log(exp(a) + exp(b)) as PyTorch's _log_add_exp_helper: two equal infinities stay */
__device__ __forceinline__ double log_add_exp(double a, double b)
{
    double mn = a < b ? a : b, mx = a < b ? b : a;
    return (mn != mx || isfinite(mn)) ? mx + log1p(exp(mn - mx)) : a;
}

/* one row per thread; cummax/cummin take a new extreme on ties (the later index) and on
 * every NaN, as PyTorch's cummax_cummin_helper */
template <typename T>
static __global__ void scan_kernel(int op, int64_t rows, int64_t n, const T *in, T *out, int64_t *indices, bool reverse)
{
    for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const T *x = in + r * n;
        T *o = out + r * n;
        int64_t *ix = indices ? indices + r * n : NULL;
        int64_t i0 = reverse ? n - 1 : 0, step = reverse ? -1 : 1, at = i0;
        T acc = x[i0];
        for (int64_t k = 0, i = i0; k < n; k++, i += step) {
            T v = x[i];
            switch (op) {
            case DP_CUMSUM: acc = k ? (T)(acc + v) : v; break;
            case DP_CUMPROD: acc = k ? (T)(acc * v) : v; break;
            case DP_CUMMAX: if (v != v || (acc == acc && v >= acc)) { acc = v; at = i; } break;
            case DP_CUMMIN: if (v != v || (acc == acc && v <= acc)) { acc = v; at = i; } break;
            default: acc = k ? (T)log_add_exp((double)v, (double)acc) : v; break;
            }
            o[i] = acc;
            if (ix) ix[i] = at;
        }
    }
}

__device__ __forceinline__ void scatter_atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void scatter_atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void scatter_atomic_add(int64_t *p, int64_t v)
{
    atomicAdd((unsigned long long *)p, (unsigned long long)v);
}

template <typename T>
static __global__ void scatter_rows_kernel(int64_t total, int64_t n_src, int64_t n_out, const T *src, const int64_t *idx,
                                           T *out)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e / n_src;
        scatter_atomic_add(out + r * n_out + idx[e], src[e]);
    }
}

/* the deterministic path's sources (determ.cu): element e of row r goes to column idx[e] */
static __global__ void scatter_rows_keys_kernel(int64_t total, int64_t n_src, int64_t n_out, const int64_t *idx,
                                                int64_t *keys, int64_t *soffs)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        keys[e] = e / n_src * n_out + idx[e];
        soffs[e] = e;
    }
}

struct DP_HIDDEN sort_launch {
    dp_device dev;
    int64_t rows, n, k;
    const void *in;
    void *values;
    int64_t *indices;
    bool descending;
    template <typename T> int run() const
    {
        int64_t total = rows * n;
        if (total == 0 || k == 0) return 0;
        CUDA_STREAM_OF(dev, s);
        sort_rank_kernel<T><<<dp_grid_for(total, DP_THREADS), DP_THREADS, 0, s>>>(
            total, n, k, (const T *)in, (T *)values, indices, descending);
        CUDA_CHECK_LAUNCH("sort");
        return 0;
    }
};

struct DP_HIDDEN scan_launch {
    dp_device dev;
    int op;
    int64_t rows, n;
    const void *in;
    void *out;
    int64_t *indices;
    bool reverse;
    template <typename T> int run() const
    {
        if (rows == 0 || n == 0) return 0;
        CUDA_STREAM_OF(dev, s);
        scan_kernel<T><<<dp_grid_for(rows, DP_THREADS), DP_THREADS, 0, s>>>(op, rows, n, (const T *)in, (T *)out,
                                                                              indices, reverse);
        CUDA_CHECK_LAUNCH("scan");
        return 0;
    }
};

extern "C" int dp_cuda_sort_rows(dp_device dev, int dtype, int64_t rows, int64_t n, int64_t k, const void *in,
                                 void *values, int64_t *indices, bool descending)
{
    sort_launch f = { dev, rows, n, k, in, values, indices, descending };
    return DP_DISPATCH_OUT(dtype, f);
}

extern "C" int dp_cuda_scan_rows(dp_device dev, int op, int dtype, int64_t rows, int64_t n, const void *in, void *out,
                                 int64_t *indices, bool reverse)
{
    scan_launch f = { dev, op, rows, n, in, out, indices, reverse };
    return DP_DISPATCH_OUT(dtype, f);
}

extern "C" int dp_cuda_scatter_add_rows(dp_device dev, int dtype, int64_t rows, int64_t n_src, int64_t n_out,
                                        const void *src, const int64_t *idx, void *out)
{
    int64_t total = rows * n_src;
    if (total == 0) return 0;
    CUDA_STREAM_OF(dev, s);
    unsigned g = dp_grid_for(total, DP_THREADS);
    if ((dtype == DP_FLOAT32 || dtype == DP_FLOAT64) && dp_cuda_deterministic()) {
        dp_det_scratch d;
        if (dp_cuda_det_begin(dev.index, total, &d)) return -1;
        scatter_rows_keys_kernel<<<g, DP_THREADS, 0, s>>>(total, n_src, n_out, idx, d.keys, d.soffs);
        return dp_cuda_det_scatter(&d, dtype, DP_SCATTER_ADD, out, src);
    }
    switch (dtype) {
    case DP_FLOAT32: scatter_rows_kernel<float><<<g, DP_THREADS, 0, s>>>(total, n_src, n_out, (const float *)src, idx, (float *)out); break;
    case DP_FLOAT64: scatter_rows_kernel<double><<<g, DP_THREADS, 0, s>>>(total, n_src, n_out, (const double *)src, idx, (double *)out); break;
    case DP_INT64: scatter_rows_kernel<int64_t><<<g, DP_THREADS, 0, s>>>(total, n_src, n_out, (const int64_t *)src, idx, (int64_t *)out); break;
    default: return dp_cuda_error("CUDA scatter_add_rows: unsupported dtype %s", dp_cuda_dtype_name(dtype));
    }
    CUDA_CHECK_LAUNCH("scatter_add_rows");
    return 0;
}
