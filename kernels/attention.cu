/* attention.cu: scaled dot-product attention (src/attention.c), FlashAttention-2 style.
 * Forward: one block per (batch entry, query tile), one thread per query row holding its
 * scaled query and output accumulator in registers; the keys and values come through
 * shared memory a tile at a time, and each row keeps a running max and sum (the online
 * softmax), rescaling its accumulator only when the max grows.  It writes the output and
 * the row's logsumexp; the L x S scores never reach memory.
 * Backward: D = rowsum(dO * O) per row; grad q in a pass shaped as the forward (a thread
 * per query row, key tiles through shared memory); grad k and v in a pass with a thread
 * per key row and the query tiles (q, dO, logsumexp, D) through shared memory.  The
 * probabilities are recomputed from the logsumexp; no atomics, so results do not depend
 * on timing.  Head dims up to 128: the row registers are sized by a template bound EMAX
 * (32, 64 or 128) and the tiles shrink as EMAX and the element size grow, so the static
 * shared memory stays at 32 KiB. */
#include "common.cuh"
#include "../src/attention.h"

#define SDPA_MAX_HEAD 128

__device__ __forceinline__ float sd_exp(float x) { return expf(x); }
__device__ __forceinline__ double sd_exp(double x) { return exp(x); }
__device__ __forceinline__ float sd_log(float x) { return logf(x); }
__device__ __forceinline__ double sd_log(double x) { return log(x); }

/* rows per tile: 16 KiB of T per [rows, EMAX] matrix, at most 64 */
template <typename T, int EMAX> struct sdpa_tile {
    static const int rows = 16384 / (EMAX * (int)sizeof(T)) < 64 ? 16384 / (EMAX * (int)sizeof(T)) : 64;
};

/* The score of query i and key j after the mask: -inf where masked. */
template <typename T>
__device__ __forceinline__ T sdpa_masked(const dp_sdpa_params &p, int64_t moff, int64_t i, int64_t j, T s)
{
    if (p.causal && j > i) return -INFINITY;
    if (p.mask_kind == DP_SDPA_MASK_FLOAT) return s + ((const T *)p.mask)[moff + i * p.mask_sl + j * p.mask_ss];
    if (p.mask_kind == DP_SDPA_MASK_BOOL && !((const bool *)p.mask)[moff + i * p.mask_sl + j * p.mask_ss])
        return -INFINITY;
    return s;
}

template <typename T>
__device__ __forceinline__ T sdpa_drop(const dp_sdpa_params &p, T keep_scale, int64_t b, int64_t i, int64_t j)
{
    uint64_t idx = ((uint64_t)b * (uint64_t)p.L + (uint64_t)i) * (uint64_t)p.S + (uint64_t)j;
    return dp_sdpa_keep(p.seed, p.offset, idx, p.dropout_p) ? keep_scale : (T)0;
}

/* rows [j0, j0 + n) of a [rows, cols] matrix into sh[r * LD + c] */
template <typename T, int LD>
__device__ __forceinline__ void sdpa_load_rows(const T *x, int64_t cols, int64_t j0, int n, T *sh)
{
    for (int64_t t = threadIdx.x; t < n * cols; t += blockDim.x) {
        int64_t r = t / cols, c = t % cols;
        sh[r * LD + c] = x[(j0 + r) * cols + c];
    }
}

/* forward: block = BQ threads, one per query row of the tile */
template <typename T, int EMAX, int BQ>
static __global__ void __launch_bounds__(BQ) sdpa_forward_kernel(dp_sdpa_params p, T keep_scale, int64_t tiles,
                                                                  const T *q, const T *k, const T *v, T *out, T *lse)
{
    const int BK = sdpa_tile<T, EMAX>::rows;
    __shared__ T ks[BK * EMAX], vs[BK * EMAX];
    const int64_t E = p.E, Ev = p.Ev;
    for (int64_t task = blockIdx.x; task < p.batch * tiles; task += gridDim.x) {
        int64_t b = task / tiles, i0 = task % tiles * BQ, i = i0 + threadIdx.x;
        bool live = i < p.L;
        int64_t moff = p.mask_kind ? dp_sdpa_mask_offset(&p, b) : 0;
        int64_t jend = p.causal && i0 + BQ < p.S ? i0 + BQ : p.S;
        T qr[EMAX], acc[EMAX], m = -INFINITY, l = 0;
#pragma unroll
        for (int e = 0; e < EMAX; e++) {
            qr[e] = live && e < E ? q[(b * p.L + i) * E + e] * (T)p.scale : (T)0;
            acc[e] = 0;
        }
        for (int64_t j0 = 0; j0 < jend; j0 += BK) {
            int nk = (int)(jend - j0 < BK ? jend - j0 : BK);
            __syncthreads();   /* the previous tile is read */
            sdpa_load_rows<T, EMAX>(k + b * p.S * E, E, j0, nk, ks);
            sdpa_load_rows<T, EMAX>(v + b * p.S * Ev, Ev, j0, nk, vs);
            __syncthreads();
            if (!live) continue;
            for (int jj = 0; jj < nk; jj++) {
                T s = 0;
#pragma unroll
                for (int e = 0; e < EMAX; e++)
                    if (e < E) s += qr[e] * ks[jj * EMAX + e];
                s = sdpa_masked<T>(p, moff, i, j0 + jj, s);
                if (s == -INFINITY) continue;
                if (s > m) {   /* a new max: rescale what was summed */
                    T c = sd_exp(m - s);
                    l *= c;
#pragma unroll
                    for (int e = 0; e < EMAX; e++) acc[e] *= c;
                    m = s;
                }
                T pr = sd_exp(s - m);
                l += pr;
                if (p.dropout_p > 0) pr *= sdpa_drop<T>(p, keep_scale, b, i, j0 + jj);
#pragma unroll
                for (int e = 0; e < EMAX; e++)
                    if (e < Ev) acc[e] += pr * vs[jj * EMAX + e];
            }
        }
        if (live) {
            /* every key masked: 0/0 = NaN and lse -inf, as softmax gives */
#pragma unroll
            for (int e = 0; e < EMAX; e++)
                if (e < Ev) out[(b * p.L + i) * Ev + e] = acc[e] / l;
            lse[b * p.L + i] = m + sd_log(l);
        }
    }
}

/* D[r] = sum_e gout[r][e] * out[r][e] */
template <typename T>
static __global__ void sdpa_delta_kernel(int64_t rows, int64_t Ev, const T *gout, const T *out, T *D)
{
    for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        T d = 0;
        for (int64_t e = 0; e < Ev; e++) d += gout[r * Ev + e] * out[r * Ev + e];
        D[r] = d;
    }
}

/* grad q: block = BQ threads, one per query row; dq = scale * sum_j dS_ij k_j */
template <typename T, int EMAX, int BQ>
static __global__ void __launch_bounds__(BQ) sdpa_dq_kernel(dp_sdpa_params p, T keep_scale, int64_t tiles,
                                                             const T *q, const T *k, const T *v, const T *gout,
                                                             const T *lse, const T *D, T *gq)
{
    const int BK = sdpa_tile<T, EMAX>::rows;
    __shared__ T ks[BK * EMAX], vs[BK * EMAX];
    const int64_t E = p.E, Ev = p.Ev;
    for (int64_t task = blockIdx.x; task < p.batch * tiles; task += gridDim.x) {
        int64_t b = task / tiles, i0 = task % tiles * BQ, i = i0 + threadIdx.x;
        bool live = i < p.L;
        int64_t moff = p.mask_kind ? dp_sdpa_mask_offset(&p, b) : 0;
        int64_t jend = p.causal && i0 + BQ < p.S ? i0 + BQ : p.S;
        T qr[EMAX], gr[EMAX], acc[EMAX];
#pragma unroll
        for (int e = 0; e < EMAX; e++) {
            qr[e] = live && e < E ? q[(b * p.L + i) * E + e] * (T)p.scale : (T)0;
            gr[e] = live && e < Ev ? gout[(b * p.L + i) * Ev + e] : (T)0;
            acc[e] = 0;
        }
        T lr = live ? lse[b * p.L + i] : (T)0, dr = live ? D[b * p.L + i] : (T)0;
        for (int64_t j0 = 0; j0 < jend; j0 += BK) {
            int nk = (int)(jend - j0 < BK ? jend - j0 : BK);
            __syncthreads();
            sdpa_load_rows<T, EMAX>(k + b * p.S * E, E, j0, nk, ks);
            sdpa_load_rows<T, EMAX>(v + b * p.S * Ev, Ev, j0, nk, vs);
            __syncthreads();
            if (!live) continue;
            for (int jj = 0; jj < nk; jj++) {
                T s = 0, dp = 0;
#pragma unroll
                for (int e = 0; e < EMAX; e++) {
                    if (e < E) s += qr[e] * ks[jj * EMAX + e];
                    if (e < Ev) dp += gr[e] * vs[jj * EMAX + e];
                }
                T pr = sd_exp(sdpa_masked<T>(p, moff, i, j0 + jj, s) - lr);
                if (p.dropout_p > 0) dp *= sdpa_drop<T>(p, keep_scale, b, i, j0 + jj);
                T ds = pr * (dp - dr);
                if (ds == 0) continue;
#pragma unroll
                for (int e = 0; e < EMAX; e++)
                    if (e < E) acc[e] += ds * ks[jj * EMAX + e];
            }
        }
        if (live) {
#pragma unroll
            for (int e = 0; e < EMAX; e++)
                if (e < E) gq[(b * p.L + i) * E + e] = acc[e] * (T)p.scale;
        }
    }
}

/* grad k and v: block = BK threads, one per key row; the query tiles of BK rows (q scaled,
 * dO, lse, D) come through shared memory.  dv_j = sum_i P'_ij dO_i, dk_j = sum_i dS_ij q_i. */
template <typename T, int EMAX, int BK>
static __global__ void __launch_bounds__(BK) sdpa_dkv_kernel(dp_sdpa_params p, T keep_scale, int64_t ktiles,
                                                              const T *q, const T *k, const T *v, const T *gout,
                                                              const T *lse, const T *D, T *gk, T *gv)
{
    const int BQ = BK;
    __shared__ T qs[BQ * EMAX], gs[BQ * EMAX], ls[BQ], ds[BQ];
    const int64_t E = p.E, Ev = p.Ev;
    for (int64_t task = blockIdx.x; task < p.batch * ktiles; task += gridDim.x) {
        int64_t b = task / ktiles, j0 = task % ktiles * BK, j = j0 + threadIdx.x;
        bool live = j < p.S;
        int64_t moff = p.mask_kind ? dp_sdpa_mask_offset(&p, b) : 0;
        T kr[EMAX], vr[EMAX], dk[EMAX], dv[EMAX];
#pragma unroll
        for (int e = 0; e < EMAX; e++) {
            kr[e] = live && e < E ? k[(b * p.S + j) * E + e] : (T)0;
            vr[e] = live && e < Ev ? v[(b * p.S + j) * Ev + e] : (T)0;
            dk[e] = dv[e] = 0;
        }
        /* causal: query i sees keys j <= i, so the queries before j0 see none of this tile */
        for (int64_t i0 = p.causal ? j0 : 0; i0 < p.L; i0 += BQ) {
            int nq = (int)(p.L - i0 < BQ ? p.L - i0 : BQ);
            __syncthreads();
            for (int64_t t = threadIdx.x; t < nq * E; t += blockDim.x)
                qs[t / E * EMAX + t % E] = q[(b * p.L + i0) * E + t] * (T)p.scale;
            sdpa_load_rows<T, EMAX>(gout + b * p.L * Ev, Ev, i0, nq, gs);
            for (int t = threadIdx.x; t < nq; t += blockDim.x) {
                ls[t] = lse[b * p.L + i0 + t];
                ds[t] = D[b * p.L + i0 + t];
            }
            __syncthreads();
            if (!live) continue;
            for (int ii = 0; ii < nq; ii++) {
                T s = 0, dp = 0;
#pragma unroll
                for (int e = 0; e < EMAX; e++) {
                    if (e < E) s += qs[ii * EMAX + e] * kr[e];
                    if (e < Ev) dp += gs[ii * EMAX + e] * vr[e];
                }
                T pr = sd_exp(sdpa_masked<T>(p, moff, i0 + ii, j, s) - ls[ii]), pd = pr;
                if (p.dropout_p > 0) {
                    T f = sdpa_drop<T>(p, keep_scale, b, i0 + ii, j);
                    pd *= f;
                    dp *= f;
                }
                T dsc = pr * (dp - ds[ii]);
#pragma unroll
                for (int e = 0; e < EMAX; e++) {
                    if (e < Ev) dv[e] += pd * gs[ii * EMAX + e];
                    if (e < E) dk[e] += dsc * qs[ii * EMAX + e];
                }
            }
        }
        if (live) {
#pragma unroll
            for (int e = 0; e < EMAX; e++) {
                if (gk && e < E) gk[(b * p.S + j) * E + e] = dk[e];
                if (gv && e < Ev) gv[(b * p.S + j) * Ev + e] = dv[e];
            }
        }
    }
}

static unsigned sdpa_grid(int64_t tasks) { return (unsigned)(tasks < 1 ? 1 : tasks < 65536 ? tasks : 65536); }

template <typename T, int EMAX>
static int sdpa_forward_launch(const dp_sdpa_params *p, T keep_scale, const dp_view *out, const dp_view *lse,
                               const dp_view *q, const dp_view *k, const dp_view *v)
{
    const int BQ = 64;
    CUDA_STREAM_OF(q->device, s);
    int64_t tiles = (p->L + BQ - 1) / BQ;
    sdpa_forward_kernel<T, EMAX, BQ><<<sdpa_grid(p->batch * tiles), BQ, 0, s>>>(
        *p, keep_scale, tiles, (const T *)q->data, (const T *)k->data, (const T *)v->data, (T *)out->data, (T *)lse->data);
    CUDA_CHECK_LAUNCH("scaled_dot_product_attention");
    return 0;
}

template <typename T, int EMAX>
static int sdpa_backward_launch(const dp_sdpa_params *p, T keep_scale, const dp_view *gq, const dp_view *gk,
                                const dp_view *gv, const dp_view *gout, const dp_view *q, const dp_view *k,
                                const dp_view *v, const dp_view *out, const dp_view *lse)
{
    const int BQ = 64, BK = sdpa_tile<T, EMAX>::rows / 2;   /* the dkv pass holds four tiles */
    CUDA_STREAM_OF(q->device, s);
    int64_t rows = p->batch * p->L;
    T *D = (T *)dp_cuda_scratch_alloc(q->device.index, (size_t)rows * sizeof(T));
    if (!D) return -1;
    const T *qp = (const T *)q->data, *kp = (const T *)k->data, *vp = (const T *)v->data;
    const T *gp = (const T *)gout->data, *lp = (const T *)lse->data;
    sdpa_delta_kernel<T><<<dp_grid_for(rows, DP_THREADS), DP_THREADS, 0, s>>>(rows, p->Ev, gp, (const T *)out->data, D);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && gq) {
        int64_t tiles = (p->L + BQ - 1) / BQ;
        sdpa_dq_kernel<T, EMAX, BQ><<<sdpa_grid(p->batch * tiles), BQ, 0, s>>>(
            *p, keep_scale, tiles, qp, kp, vp, gp, lp, D, (T *)gq->data);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess && (gk || gv)) {
        int64_t ktiles = (p->S + BK - 1) / BK;
        sdpa_dkv_kernel<T, EMAX, BK><<<sdpa_grid(p->batch * ktiles), BK, 0, s>>>(
            *p, keep_scale, ktiles, qp, kp, vp, gp, lp, D, gk ? (T *)gk->data : nullptr, gv ? (T *)gv->data : nullptr);
        err = cudaGetLastError();
    }
    dp_cuda_scratch_free(q->device.index, D);   /* reused in stream order */
    if (err != cudaSuccess)
        return dp_cuda_error("CUDA error launching scaled_dot_product_attention backward: %s", cudaGetErrorString(err));
    return 0;
}

/* The EMAX bound for the head dims, or -1 with the message set. */
static int sdpa_emax(const dp_sdpa_params *p, int dtype)
{
    if (dtype != DP_FLOAT32 && dtype != DP_FLOAT64)
        return dp_cuda_error("scaled_dot_product_attention on CUDA needs float32 or float64 tensors, not %s",
                             dp_cuda_dtype_name(dtype));
    int64_t e = p->E > p->Ev ? p->E : p->Ev;
    if (e > SDPA_MAX_HEAD)
        return dp_cuda_error("scaled_dot_product_attention on CUDA supports head dims up to %d, got E = %lld and "
                             "Ev = %lld", SDPA_MAX_HEAD, (long long)p->E, (long long)p->Ev);
    return e <= 32 ? 32 : e <= 64 ? 64 : 128;
}

#define SDPA_DISPATCH(dtype, emax, CALL)                                                   \
    do {                                                                                   \
        double keep = p->dropout_p < 1 ? 1 / (1 - p->dropout_p) : 0;                       \
        if (dtype == DP_FLOAT32) {                                                         \
            typedef float T;                                                               \
            if (emax == 32) return CALL(32);                                               \
            if (emax == 64) return CALL(64);                                               \
            return CALL(128);                                                              \
        } else {                                                                           \
            typedef double T;                                                              \
            if (emax == 32) return CALL(32);                                               \
            if (emax == 64) return CALL(64);                                               \
            return CALL(128);                                                              \
        }                                                                                  \
    } while (0)

extern "C" int dp_cuda_sdpa_forward(const dp_sdpa_params *p, const dp_view *out, const dp_view *lse, const dp_view *q,
                                    const dp_view *k, const dp_view *v)
{
    int emax = sdpa_emax(p, q->dtype);
    if (emax < 0) return -1;
#define FWD(N) sdpa_forward_launch<T, N>(p, (T)keep, out, lse, q, k, v)
    SDPA_DISPATCH(q->dtype, emax, FWD);
#undef FWD
}

extern "C" int dp_cuda_sdpa_backward(const dp_sdpa_params *p, const dp_view *gq, const dp_view *gk, const dp_view *gv,
                                     const dp_view *gout, const dp_view *q, const dp_view *k, const dp_view *v,
                                     const dp_view *out, const dp_view *lse)
{
    int emax = sdpa_emax(p, q->dtype);
    if (emax < 0) return -1;
#define BWD(N) sdpa_backward_launch<T, N>(p, (T)keep, gq, gk, gv, gout, q, k, v, out, lse)
    SDPA_DISPATCH(q->dtype, emax, BWD);
#undef BWD
}
