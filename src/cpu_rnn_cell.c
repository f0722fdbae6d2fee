/* cpu_rnn_cell.c: the CPU kernels of the fused LSTM and GRU steps (rnn_cell.c).  Tasks are
 * batch rows; each row's H units are independent, so no thread writes where another does.
 * The activations are the op table's formulas (sigmoid = 1 / (1 + exp(-x)), tanh) in the
 * tensor's dtype, so a step gives what the composition of those ops gives; the forward
 * keeps them for the backward, which then is plain arithmetic. */
#include <tgmath.h>

#include "cpu.h"
#include "rnn_cell.h"

typedef struct {
    const void *gates, *c_prev, *ghc, *gi, *gh, *h_prev, *gout, *act_in;
    void *hc, *act, *ggates, *gc_prev, *ggi, *ggh, *gh_prev;
    int64_t batch, H;
} cell_job;

/* act rows: LSTM sigmoid i, sigmoid f, tanh g, sigmoid o, tanh c (5H); GRU r, z, n, h_n (4H) */
#define DEFINE_CELL_KERNELS(T, SFX)                                                                         \
    static inline T sigmoid##SFX(T x) { return (T)1 / ((T)1 + exp(-x)); }                                 \
                                                                                                             \
    static void lstm_range##SFX(void *ctx, int64_t lo, int64_t hi, int part)                                \
    {                                                                                                        \
        const cell_job *j = ctx;                                                                             \
        int64_t H = j->H;                                                                                    \
        for (int64_t b = lo; b < hi; b++) {                                                                  \
            const T *g = (const T *)j->gates + b * 4 * H, *cp = (const T *)j->c_prev + b * H;               \
            T *h = (T *)j->hc + b * H, *c = (T *)j->hc + (j->batch + b) * H;                                 \
            T *a = j->act ? (T *)j->act + b * 5 * H : NULL;                                                  \
            for (int64_t u = 0; u < H; u++) {                                                                \
                T i = sigmoid##SFX(g[u]), f = sigmoid##SFX(g[H + u]), gg = tanh(g[2 * H + u]);               \
                T o = sigmoid##SFX(g[3 * H + u]);                                                            \
                T cn = f * cp[u] + i * gg, tc = tanh(cn);                                                    \
                c[u] = cn;                                                                                   \
                h[u] = o * tc;                                                                               \
                if (a) a[u] = i, a[H + u] = f, a[2 * H + u] = gg, a[3 * H + u] = o, a[4 * H + u] = tc;       \
            }                                                                                                \
        }                                                                                                    \
    }                                                                                                        \
                                                                                                             \
    static void lstm_backward_range##SFX(void *ctx, int64_t lo, int64_t hi, int part)                       \
    {                                                                                                        \
        const cell_job *j = ctx;                                                                             \
        int64_t H = j->H;                                                                                    \
        for (int64_t b = lo; b < hi; b++) {                                                                  \
            const T *a = (const T *)j->act_in + b * 5 * H, *cp = (const T *)j->c_prev + b * H;              \
            const T *dh = (const T *)j->ghc + b * H, *dc = (const T *)j->ghc + (j->batch + b) * H;          \
            T *dg = j->ggates ? (T *)j->ggates + b * 4 * H : NULL;                                          \
            T *dcp = j->gc_prev ? (T *)j->gc_prev + b * H : NULL;                                           \
            for (int64_t u = 0; u < H; u++) {                                                                \
                T i = a[u], f = a[H + u], gg = a[2 * H + u], o = a[3 * H + u], tc = a[4 * H + u];            \
                T dct = dc[u] + dh[u] * o * ((T)1 - tc * tc);   /* dL/dc through c and h */                 \
                if (dg) {                                                                                    \
                    dg[u] = dct * gg * i * ((T)1 - i);                                                       \
                    dg[H + u] = dct * cp[u] * f * ((T)1 - f);                                                \
                    dg[2 * H + u] = dct * i * ((T)1 - gg * gg);                                              \
                    dg[3 * H + u] = dh[u] * tc * o * ((T)1 - o);                                             \
                }                                                                                            \
                if (dcp) dcp[u] = dct * f;                                                                   \
            }                                                                                                \
        }                                                                                                    \
    }                                                                                                        \
                                                                                                             \
    static void gru_range##SFX(void *ctx, int64_t lo, int64_t hi, int part)                                 \
    {                                                                                                        \
        const cell_job *j = ctx;                                                                             \
        int64_t H = j->H;                                                                                    \
        for (int64_t b = lo; b < hi; b++) {                                                                  \
            const T *gi = (const T *)j->gi + b * 3 * H, *gh = (const T *)j->gh + b * 3 * H;                 \
            const T *hp = (const T *)j->h_prev + b * H;                                                      \
            T *h = (T *)j->hc + b * H, *a = j->act ? (T *)j->act + b * 4 * H : NULL;                         \
            for (int64_t u = 0; u < H; u++) {                                                                \
                T r = sigmoid##SFX(gi[u] + gh[u]), z = sigmoid##SFX(gi[H + u] + gh[H + u]);                  \
                T n = tanh(gi[2 * H + u] + r * gh[2 * H + u]);                                               \
                h[u] = n + z * (hp[u] - n);                                                                  \
                if (a) a[u] = r, a[H + u] = z, a[2 * H + u] = n, a[3 * H + u] = gh[2 * H + u];               \
            }                                                                                                \
        }                                                                                                    \
    }                                                                                                        \
                                                                                                             \
    static void gru_backward_range##SFX(void *ctx, int64_t lo, int64_t hi, int part)                        \
    {                                                                                                        \
        const cell_job *j = ctx;                                                                             \
        int64_t H = j->H;                                                                                    \
        for (int64_t b = lo; b < hi; b++) {                                                                  \
            const T *a = (const T *)j->act_in + b * 4 * H;                                                  \
            const T *hp = (const T *)j->h_prev + b * H, *dh = (const T *)j->gout + b * H;                   \
            T *dgi = j->ggi ? (T *)j->ggi + b * 3 * H : NULL, *dgh = j->ggh ? (T *)j->ggh + b * 3 * H : NULL; \
            T *dhp = j->gh_prev ? (T *)j->gh_prev + b * H : NULL;                                           \
            for (int64_t u = 0; u < H; u++) {                                                                \
                T r = a[u], z = a[H + u], n = a[2 * H + u], hn = a[3 * H + u];                               \
                T dn = dh[u] * ((T)1 - z) * ((T)1 - n * n);   /* through n's tanh */                        \
                T dz = dh[u] * (hp[u] - n) * z * ((T)1 - z);                                                 \
                T dr = dn * hn * r * ((T)1 - r);                                                             \
                if (dgi) dgi[u] = dr, dgi[H + u] = dz, dgi[2 * H + u] = dn;                                  \
                if (dgh) dgh[u] = dr, dgh[H + u] = dz, dgh[2 * H + u] = dn * r;                              \
                if (dhp) dhp[u] = dh[u] * z;                                                                 \
            }                                                                                                \
        }                                                                                                    \
    }

DEFINE_CELL_KERNELS(float, _f32)
DEFINE_CELL_KERNELS(double, _f64)

static int check_dtype(int dt, const char *who)
{
    if (dt == DP_FLOAT32 || dt == DP_FLOAT64) return 0;
    return dp_error("%s: expected float32 or float64 tensors, got %s", who, dp_dtype_name(dt));
}

/* rows of H units, each a few exp and tanh: about 32 elements' work per unit */
static void run(int64_t batch, int64_t H, dp_range_fn fn, cell_job *j)
{
    dp_parallel(batch, GRAIN / (32 * H + 1) + 1, fn, j);
}

#define DATA(v) ((v) ? (v)->data : NULL)

int cpu_lstm_cell(const dp_view *hc, const dp_view *act, const dp_view *gates, const dp_view *c_prev, int64_t batch,
                  int64_t hidden)
{
    if (check_dtype(gates->dtype, "lstm_cell")) return -1;
    cell_job j = { .gates = gates->data, .c_prev = c_prev->data, .hc = hc->data, .act = DATA(act), .batch = batch,
                   .H = hidden };
    run(batch, hidden, gates->dtype == DP_FLOAT32 ? lstm_range_f32 : lstm_range_f64, &j);
    return 0;
}

int cpu_lstm_cell_backward(const dp_view *ggates, const dp_view *gc_prev, const dp_view *ghc, const dp_view *act,
                           const dp_view *c_prev, int64_t batch, int64_t hidden)
{
    if (check_dtype(act->dtype, "lstm_cell backward")) return -1;
    cell_job j = { .act_in = act->data, .c_prev = c_prev->data, .ghc = ghc->data, .ggates = DATA(ggates),
                   .gc_prev = DATA(gc_prev), .batch = batch, .H = hidden };
    run(batch, hidden, act->dtype == DP_FLOAT32 ? lstm_backward_range_f32 : lstm_backward_range_f64, &j);
    return 0;
}

int cpu_gru_cell(const dp_view *h, const dp_view *act, const dp_view *gi, const dp_view *gh, const dp_view *h_prev,
                 int64_t batch, int64_t hidden)
{
    if (check_dtype(gi->dtype, "gru_cell")) return -1;
    cell_job j = { .gi = gi->data, .gh = gh->data, .h_prev = h_prev->data, .hc = h->data, .act = DATA(act),
                   .batch = batch, .H = hidden };
    run(batch, hidden, gi->dtype == DP_FLOAT32 ? gru_range_f32 : gru_range_f64, &j);
    return 0;
}

int cpu_gru_cell_backward(const dp_view *ggi, const dp_view *ggh, const dp_view *gh_prev, const dp_view *gout,
                          const dp_view *act, const dp_view *h_prev, int64_t batch, int64_t hidden)
{
    if (check_dtype(act->dtype, "gru_cell backward")) return -1;
    cell_job j = { .act_in = act->data, .h_prev = h_prev->data, .gout = gout->data, .ggi = DATA(ggi),
                   .ggh = DATA(ggh), .gh_prev = DATA(gh_prev), .batch = batch, .H = hidden };
    run(batch, hidden, act->dtype == DP_FLOAT32 ? gru_backward_range_f32 : gru_backward_range_f64, &j);
    return 0;
}
