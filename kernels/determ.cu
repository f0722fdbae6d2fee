/* determ.cu: the deterministic path of the kernels that otherwise accumulate with atomics
 * (index_add, scatter_offsets, scatter_add_rows, max pooling's backward), taken while
 * torch.use_deterministic_algorithms is on.  The caller's kernel writes, for each source
 * element i (numbered in the order the CPU kernel visits them), the element offset of its
 * destination keys[i] (-1: skipped) and of its value soffs[i].  The pairs (keys[i], i) are
 * sorted, and one thread per run of equal keys folds the run's values into its destination
 * in source order, starting from what the destination holds: the CPU's sum, bit for bit,
 * whatever order the blocks run in.
 *
 * The sort is a bitonic network over the pairs padded to a power of two: log2(n)^2 / 2
 * launches of n / 2 compare-exchanges, no atomics and no shared memory, so it is the same
 * on every schedule; the keys are distinct pairs, so stability comes for free. */
#include "common.cuh"

namespace {

__global__ void det_init_kernel(int64_t n, int64_t n2, int64_t *keys, int64_t *pos)
{
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n2; t += (int64_t)gridDim.x * blockDim.x) {
        pos[t] = t;
        if (t >= n || keys[t] < 0) keys[t] = INT64_MAX;   /* padding and skipped sources sort last */
    }
}

/* one step (k, j) of the bitonic network: pair t with t ^ j, ascending where t & k is 0 */
__global__ void det_bitonic_kernel(int64_t n2, int64_t j, int64_t k, int64_t *keys, int64_t *pos)
{
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n2; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t l = t ^ j;
        if (l <= t) continue;
        int64_t kt = keys[t], kl = keys[l], pt = pos[t], pl = pos[l];
        bool after = kt > kl || (kt == kl && pt > pl);
        if (after == ((t & k) == 0)) {
            keys[t] = kl; keys[l] = kt;
            pos[t] = pl; pos[l] = pt;
        }
    }
}

/* what the CPU's scatter does with one more value (cpu_index.c): max and min let NaN win */
template <typename T> __device__ __forceinline__ T det_fold(T a, T v, int mode)
{
    switch (mode) {
    case DP_SCATTER_COPY: return v;
    case DP_SCATTER_ADD: return a + v;
    case DP_SCATTER_MUL: return a * v;
    case DP_SCATTER_MAX: return (v > a || v != v) ? v : a;
    default: return (v < a || v != v) ? v : a;
    }
}
/* bool: add and max are "or", mul and min "and" */
template <> __device__ __forceinline__ bool det_fold<bool>(bool a, bool v, int mode)
{
    if (mode == DP_SCATTER_COPY) return v;
    return mode == DP_SCATTER_ADD || mode == DP_SCATTER_MAX ? (a || v) : (a && v);
}

template <typename T>
__global__ void det_reduce_kernel(int64_t n, const int64_t *keys, const int64_t *pos, const int64_t *soffs, T *dest,
                                  const T *src, int mode)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (int64_t)gridDim.x * blockDim.x) {
        int64_t k = keys[p];
        if (k == INT64_MAX || (p > 0 && keys[p - 1] == k)) continue;   /* not the start of a run */
        T acc = dest[k];
        for (int64_t q = p; q < n && keys[q] == k; q++) acc = det_fold<T>(acc, src[soffs[pos[q]]], mode);
        dest[k] = acc;
    }
}

struct DP_HIDDEN det_reduce_launch {
    cudaStream_t s;
    const dp_det_scratch *d;
    void *dest;
    const void *src;
    int mode;
    template <typename T> int run() const
    {
        det_reduce_kernel<T><<<dp_grid_for(d->n, DP_THREADS), DP_THREADS, 0, s>>>(d->n, d->keys, d->pos, d->soffs,
                                                                                 (T *)dest, (const T *)src, mode);
        CUDA_CHECK_LAUNCH("deterministic scatter");
        return 0;
    }
};

}  // namespace

extern "C" int dp_cuda_det_begin(int dev, int64_t n, dp_det_scratch *d)
{
    int64_t n2 = 1;
    while (n2 < n) n2 *= 2;
    d->n = n;
    d->n2 = n2;
    d->dev = dev;
    d->keys = (int64_t *)dp_cuda_scratch_alloc(dev, (size_t)(2 * n2 + n) * sizeof(int64_t));
    if (!d->keys) return -1;
    d->pos = d->keys + n2;
    d->soffs = d->pos + n2;
    return 0;
}

/* the caller's keys kernel was the last launch: its status, then the sort and the fold */
static int det_sort_and_fold(dp_det_scratch *d, int dtype, int mode, void *dest, const void *src)
{
    CUDA_CHECK_LAUNCH("the sources of a deterministic scatter");
    CUDA_STREAM_OF((dp_device{ DP_DEVICE_CUDA, d->dev }), s);
    unsigned g = dp_grid_for(d->n2, DP_THREADS);
    det_init_kernel<<<g, DP_THREADS, 0, s>>>(d->n, d->n2, d->keys, d->pos);
    CUDA_CHECK_LAUNCH("deterministic scatter (init)");
    for (int64_t k = 2; k <= d->n2; k *= 2)
        for (int64_t j = k / 2; j > 0; j /= 2) {
            det_bitonic_kernel<<<g, DP_THREADS, 0, s>>>(d->n2, j, k, d->keys, d->pos);
            CUDA_CHECK_LAUNCH("deterministic scatter (sort)");
        }
    det_reduce_launch f = { s, d, dest, src, mode };
    return DP_DISPATCH_OUT(dtype, f);
}

extern "C" int dp_cuda_det_scatter(dp_det_scratch *d, int dtype, int mode, void *dest, const void *src)
{
    int rc = det_sort_and_fold(d, dtype, mode, dest, src);
    dp_cuda_scratch_free(d->dev, d->keys);   /* reused in stream order */
    d->keys = NULL;
    return rc;
}
