/* rnn_cell.cu: the fused LSTM and GRU steps (src/rnn_cell.c).  One thread per (batch row,
 * hidden unit), grid-stride; each reads its unit's gates and writes its unit's results, so
 * nothing is shared and the results do not depend on timing.  The activations are the op
 * table's formulas (sigmoid = 1 / (1 + exp(-x)), tanh) in the tensor's dtype, as the CPU
 * kernels (src/cpu_rnn_cell.c) compute them; the forwards keep them for the backwards. */
#include "common.cuh"

template <typename T> __device__ __forceinline__ T rc_sigmoid(T x) { return (T)1 / ((T)1 + exp(-x)); }

/* gates [B, 4H] (i, f, g, o), c_prev [B, H] -> hc [2, B, H] (h, then c) and, when act is not
 * NULL, act [B, 5H] (sigmoid i, sigmoid f, tanh g, sigmoid o, tanh c) */
template <typename T>
static __global__ void lstm_cell_kernel(int64_t B, int64_t H, const T *gates, const T *cp, T *hc, T *act)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < B * H; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = e / H, u = e % H;
        const T *g = gates + b * 4 * H;
        T i = rc_sigmoid(g[u]), f = rc_sigmoid(g[H + u]), gt = tanh(g[2 * H + u]), o = rc_sigmoid(g[3 * H + u]);
        T c = f * cp[e] + i * gt, tc = tanh(c);
        hc[B * H + e] = c;
        hc[e] = o * tc;
        if (act) {
            T *a = act + b * 5 * H;
            a[u] = i, a[H + u] = f, a[2 * H + u] = gt, a[3 * H + u] = o, a[4 * H + u] = tc;
        }
    }
}

template <typename T>
static __global__ void lstm_cell_backward_kernel(int64_t B, int64_t H, const T *act, const T *cp, const T *ghc,
                                                 T *gg, T *gcp)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < B * H; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = e / H, u = e % H;
        const T *a = act + b * 5 * H;
        T i = a[u], f = a[H + u], gt = a[2 * H + u], o = a[3 * H + u], tc = a[4 * H + u];
        T dh = ghc[e], dct = ghc[B * H + e] + dh * o * ((T)1 - tc * tc);   /* dL/dc through c and h */
        if (gg) {
            T *d = gg + b * 4 * H;
            d[u] = dct * gt * i * ((T)1 - i);
            d[H + u] = dct * cp[e] * f * ((T)1 - f);
            d[2 * H + u] = dct * i * ((T)1 - gt * gt);
            d[3 * H + u] = dh * tc * o * ((T)1 - o);
        }
        if (gcp) gcp[e] = dct * f;
    }
}

/* gi, gh [B, 3H] (r, z, n), h_prev [B, H] -> h [B, H] and, when act is not NULL, act [B, 4H]
 * (r, z, n, h_n) */
template <typename T>
static __global__ void gru_cell_kernel(int64_t B, int64_t H, const T *gi, const T *gh, const T *hp, T *h, T *act)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < B * H; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = e / H, u = e % H;
        const T *xi = gi + b * 3 * H, *xh = gh + b * 3 * H;
        T r = rc_sigmoid(xi[u] + xh[u]), z = rc_sigmoid(xi[H + u] + xh[H + u]);
        T n = tanh(xi[2 * H + u] + r * xh[2 * H + u]);
        h[e] = n + z * (hp[e] - n);
        if (act) {
            T *a = act + b * 4 * H;
            a[u] = r, a[H + u] = z, a[2 * H + u] = n, a[3 * H + u] = xh[2 * H + u];
        }
    }
}

template <typename T>
static __global__ void gru_cell_backward_kernel(int64_t B, int64_t H, const T *act, const T *hp, const T *gout,
                                                T *ggi, T *ggh, T *ghp)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < B * H; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = e / H, u = e % H;
        const T *a = act + b * 4 * H;
        T r = a[u], z = a[H + u], n = a[2 * H + u], hn = a[3 * H + u];
        T dh = gout[e];
        T dn = dh * ((T)1 - z) * ((T)1 - n * n);   /* through n's tanh */
        T dz = dh * (hp[e] - n) * z * ((T)1 - z);
        T dr = dn * hn * r * ((T)1 - r);
        if (ggi) {
            T *d = ggi + b * 3 * H;
            d[u] = dr, d[H + u] = dz, d[2 * H + u] = dn;
        }
        if (ggh) {
            T *d = ggh + b * 3 * H;
            d[u] = dr, d[H + u] = dz, d[2 * H + u] = dn * r;
        }
        if (ghp) ghp[e] = dh * z;
    }
}

#define RC_DATA(T, v) ((v) ? (T *)(v)->data : (T *)NULL)

template <typename T>
static int lstm_launch(const dp_view *hc, const dp_view *act, const dp_view *gates, const dp_view *cp, int64_t B,
                       int64_t H)
{
    CUDA_STREAM_OF(gates->device, s);
    lstm_cell_kernel<T><<<dp_grid_for(B * H, DP_THREADS), DP_THREADS, 0, s>>>(
        B, H, (const T *)gates->data, (const T *)cp->data, (T *)hc->data, RC_DATA(T, act));
    CUDA_CHECK_LAUNCH("lstm_cell");
    return 0;
}

template <typename T>
static int lstm_backward_launch(const dp_view *gg, const dp_view *gcp, const dp_view *ghc, const dp_view *act,
                                const dp_view *cp, int64_t B, int64_t H)
{
    CUDA_STREAM_OF(act->device, s);
    lstm_cell_backward_kernel<T><<<dp_grid_for(B * H, DP_THREADS), DP_THREADS, 0, s>>>(
        B, H, (const T *)act->data, (const T *)cp->data, (const T *)ghc->data, RC_DATA(T, gg), RC_DATA(T, gcp));
    CUDA_CHECK_LAUNCH("lstm_cell backward");
    return 0;
}

template <typename T>
static int gru_launch(const dp_view *h, const dp_view *act, const dp_view *gi, const dp_view *gh, const dp_view *hp,
                      int64_t B, int64_t H)
{
    CUDA_STREAM_OF(gi->device, s);
    gru_cell_kernel<T><<<dp_grid_for(B * H, DP_THREADS), DP_THREADS, 0, s>>>(
        B, H, (const T *)gi->data, (const T *)gh->data, (const T *)hp->data, (T *)h->data, RC_DATA(T, act));
    CUDA_CHECK_LAUNCH("gru_cell");
    return 0;
}

template <typename T>
static int gru_backward_launch(const dp_view *ggi, const dp_view *ggh, const dp_view *ghp, const dp_view *gout,
                               const dp_view *act, const dp_view *hp, int64_t B, int64_t H)
{
    CUDA_STREAM_OF(act->device, s);
    gru_cell_backward_kernel<T><<<dp_grid_for(B * H, DP_THREADS), DP_THREADS, 0, s>>>(
        B, H, (const T *)act->data, (const T *)hp->data, (const T *)gout->data, RC_DATA(T, ggi), RC_DATA(T, ggh),
        RC_DATA(T, ghp));
    CUDA_CHECK_LAUNCH("gru_cell backward");
    return 0;
}

static int rc_bad_dtype(const char *who, int dt)
{
    return dp_cuda_error("%s on CUDA needs float32 or float64 tensors, not %s", who, dp_cuda_dtype_name(dt));
}

extern "C" int dp_cuda_lstm_cell(const dp_view *hc, const dp_view *act, const dp_view *gates, const dp_view *c_prev,
                                 int64_t batch, int64_t hidden)
{
    if (gates->dtype == DP_FLOAT32) return lstm_launch<float>(hc, act, gates, c_prev, batch, hidden);
    if (gates->dtype == DP_FLOAT64) return lstm_launch<double>(hc, act, gates, c_prev, batch, hidden);
    return rc_bad_dtype("lstm_cell", gates->dtype);
}

extern "C" int dp_cuda_lstm_cell_backward(const dp_view *ggates, const dp_view *gc_prev, const dp_view *ghc,
                                          const dp_view *act, const dp_view *c_prev, int64_t batch, int64_t hidden)
{
    if (act->dtype == DP_FLOAT32) return lstm_backward_launch<float>(ggates, gc_prev, ghc, act, c_prev, batch, hidden);
    if (act->dtype == DP_FLOAT64) return lstm_backward_launch<double>(ggates, gc_prev, ghc, act, c_prev, batch, hidden);
    return rc_bad_dtype("lstm_cell backward", act->dtype);
}

extern "C" int dp_cuda_gru_cell(const dp_view *h, const dp_view *act, const dp_view *gi, const dp_view *gh,
                                const dp_view *h_prev, int64_t batch, int64_t hidden)
{
    if (gi->dtype == DP_FLOAT32) return gru_launch<float>(h, act, gi, gh, h_prev, batch, hidden);
    if (gi->dtype == DP_FLOAT64) return gru_launch<double>(h, act, gi, gh, h_prev, batch, hidden);
    return rc_bad_dtype("gru_cell", gi->dtype);
}

extern "C" int dp_cuda_gru_cell_backward(const dp_view *ggi, const dp_view *ggh, const dp_view *gh_prev,
                                         const dp_view *gout, const dp_view *act, const dp_view *h_prev,
                                         int64_t batch, int64_t hidden)
{
    if (act->dtype == DP_FLOAT32)
        return gru_backward_launch<float>(ggi, ggh, gh_prev, gout, act, h_prev, batch, hidden);
    if (act->dtype == DP_FLOAT64)
        return gru_backward_launch<double>(ggi, ggh, gh_prev, gout, act, h_prev, batch, hidden);
    return rc_bad_dtype("gru_cell backward", act->dtype);
}
