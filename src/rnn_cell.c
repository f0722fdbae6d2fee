/* rnn_cell.c: one LSTM or GRU time step's gate arithmetic as one op with one autograd node,
 * instead of the ten or so elementwise ops (chunk, sigmoid, tanh, mul, add) and their
 * graph nodes that the composition records per step.  The forward kernels write the
 * activations the backward needs into one buffer the node saves (with c_prev or h_prev),
 * so the backward kernels are plain arithmetic.
 * The LSTM's two results h and c are the two halves of one [2, batch, H] tensor, so one
 * node with one output serves both (their views route the gradients back into it). */
#include <string.h>

#include "internal.h"
#include "rnn_cell.h"

/* Checks one input: 2-D [batch, cols] of the first input's dtype. */
static int check_2d(const char *who, const char *what, dp_tensor *t, dp_tensor *first, int64_t batch, int64_t cols)
{
    char a[128];
    if (t->dtype != first->dtype)
        return dp_error("%s: %s must have the dtype of the first input (%s), got %s", who, what,
                        dp_dtype_name(first->dtype), dp_dtype_name(t->dtype));
    if (t->ndim != 2 || t->sizes[0] != batch || t->sizes[1] != cols)
        return dp_error("%s: expected %s of shape [%lld, %lld], got %s", who, what, (long long)batch,
                        (long long)cols, dp_shape_str(t->ndim, t->sizes, a, sizeof a));
    return 0;
}

/* The first input: float32 or float64, 2-D, with a column count that is a multiple of gates; sets *H. */
static int check_gates(const char *who, const char *what, dp_tensor *t, int gates, int64_t *H)
{
    char a[128];
    if (t->dtype != DP_FLOAT32 && t->dtype != DP_FLOAT64)   /* the layers convert float16, bfloat16 */
        return dp_error("%s: expected %s of dtype float32 or float64, got %s", who, what, dp_dtype_name(t->dtype));
    if (t->ndim != 2 || t->sizes[1] % gates)
        return dp_error("%s: expected %s of shape [batch, %d * hidden_size], got %s", who, what, gates,
                        dp_shape_str(t->ndim, t->sizes, a, sizeof a));
    *H = t->sizes[1] / gates;
    return 0;
}

static void release_all(int n, dp_tensor **ts)
{
    for (int i = 0; i < n; i++) dp_tensor_release(ts[i]);
}

/* ---------------------------------------------------------------- LSTM */

/* Node: saved 0 act [B, 5H] (lstm_cell's activations), 1 c_prev (contiguous). */
static int lstm_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *act = dp_saved(n, 0), *cp = dp_saved(n, 1);
    if (!act || !cp) return -1;
    int64_t B = cp->sizes[0], H = cp->sizes[1], gsz[2] = { B, 4 * H };
    dp_tensor *gg = DP_NEEDS_INPUT(n, 0) ? dp_empty(2, gsz, g->dtype, g->device) : NULL;
    dp_tensor *gc = DP_NEEDS_INPUT(n, 1) ? dp_empty(2, cp->sizes, g->dtype, g->device) : NULL;
    dp_tensor *gcont = dp_contiguous(g);
    dp_tensor *all[3] = { gg, gc, gcont };
    if ((DP_NEEDS_INPUT(n, 0) && !gg) || (DP_NEEDS_INPUT(n, 1) && !gc) || !gcont) goto fail;
    if (B * H > 0) {
        dp_view ggv = gg ? dp_view_of(gg) : (dp_view){ 0 }, gcv = gc ? dp_view_of(gc) : (dp_view){ 0 };
        dp_view gv = dp_view_of(gcont), av = dp_view_of(act), cv = dp_view_of(cp);
        if (dp_backend_for(g->device)->lstm_cell_backward(gg ? &ggv : NULL, gc ? &gcv : NULL, &gv, &av, &cv, B, H))
            goto fail;
    }
    dp_tensor_release(gcont);
    gin[0] = gg;
    gin[1] = gc;
    return 0;
fail:
    release_all(3, all);
    return -1;
}

int dp_lstm_cell(dp_tensor *gates, dp_tensor *c_prev, dp_tensor **h, dp_tensor **c)
{
    const char *who = "lstm_cell";
    dp_tensor *in[2] = { gates, c_prev };
    int64_t H = 0;
    *h = *c = NULL;
    if (dp_check_same_device(2, in) || check_gates(who, "gates", gates, 4, &H) ||
        check_2d(who, "c_prev", c_prev, gates, gates->sizes[0], H))
        return -1;
    int64_t B = gates->sizes[0], osz[3] = { 2, B, H }, asz[2] = { B, 5 * H };
    bool grad = dp_needs_grad(2, in);
    dp_tensor *gc = dp_contiguous(gates), *cc = dp_contiguous(c_prev);
    dp_tensor *hc = dp_empty(3, osz, gates->dtype, gates->device);
    dp_tensor *act = grad ? dp_empty(2, asz, gates->dtype, gates->device) : NULL;
    dp_tensor *all[4] = { gc, cc, hc, act };
    if (!gc || !cc || !hc || (grad && !act)) goto fail;
    if (B * H > 0) {
        dp_view hv = dp_view_of(hc), av = act ? dp_view_of(act) : (dp_view){ 0 }, gv = dp_view_of(gc),
                cv = dp_view_of(cc);
        if (dp_backend_for(gates->device)->lstm_cell(&hv, act ? &av : NULL, &gv, &cv, B, H)) goto fail;
    }
    if (grad) {
        dp_node *node = dp_node_new("LSTMCellBackward", lstm_backward, 2, in);
        if (!node) goto fail;
        dp_node_save(node, 0, act);
        dp_node_save(node, 1, cc);
        dp_attach(hc, node);
    }
    *h = dp_select(hc, 0, 0);
    *c = dp_select(hc, 0, 1);
    if (!*h || !*c) {
        dp_tensor_release(*h);
        dp_tensor_release(*c);
        *h = *c = NULL;
        goto fail;
    }
    release_all(4, all);
    return 0;
fail:
    release_all(4, all);
    return -1;
}

/* ---------------------------------------------------------------- GRU */

/* Node: saved 0 act [B, 4H] (gru_cell's activations), 1 h_prev (contiguous). */
static int gru_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *act = dp_saved(n, 0), *hp = dp_saved(n, 1);
    if (!act || !hp) return -1;
    int64_t B = hp->sizes[0], H = hp->sizes[1], gsz[2] = { B, 3 * H };
    dp_tensor *gs[3] = { NULL, NULL, NULL };
    for (int i = 0; i < 3; i++)
        if (DP_NEEDS_INPUT(n, i) && !(gs[i] = dp_empty(2, i < 2 ? gsz : hp->sizes, g->dtype, g->device))) goto fail;
    dp_tensor *gcont = dp_contiguous(g);
    if (!gcont) goto fail;
    if (B * H > 0) {
        dp_view v[3], gv = dp_view_of(gcont), av = dp_view_of(act), pv = dp_view_of(hp);
        for (int i = 0; i < 3; i++) v[i] = gs[i] ? dp_view_of(gs[i]) : (dp_view){ 0 };
        if (dp_backend_for(g->device)->gru_cell_backward(gs[0] ? &v[0] : NULL, gs[1] ? &v[1] : NULL,
                                                         gs[2] ? &v[2] : NULL, &gv, &av, &pv, B, H)) {
            dp_tensor_release(gcont);
            goto fail;
        }
    }
    dp_tensor_release(gcont);
    for (int i = 0; i < 3; i++) gin[i] = gs[i];
    return 0;
fail:
    release_all(3, gs);
    return -1;
}

dp_tensor *dp_gru_cell(dp_tensor *gi, dp_tensor *gh, dp_tensor *h_prev)
{
    const char *who = "gru_cell";
    dp_tensor *in[3] = { gi, gh, h_prev };
    int64_t H = 0;
    if (dp_check_same_device(3, in) || check_gates(who, "gi", gi, 3, &H) ||
        check_2d(who, "gh", gh, gi, gi->sizes[0], 3 * H) || check_2d(who, "h_prev", h_prev, gi, gi->sizes[0], H))
        return NULL;
    int64_t B = gi->sizes[0], osz[2] = { B, H }, asz[2] = { B, 4 * H };
    bool grad = dp_needs_grad(3, in);
    dp_tensor *ic = dp_contiguous(gi), *hc = dp_contiguous(gh), *pc = dp_contiguous(h_prev);
    dp_tensor *act = grad ? dp_empty(2, asz, gi->dtype, gi->device) : NULL;
    dp_tensor *out = dp_empty(2, osz, gi->dtype, gi->device);
    dp_tensor *all[4] = { ic, hc, pc, act };
    if (!ic || !hc || !pc || (grad && !act) || !out) goto fail;
    if (B * H > 0) {
        dp_view ov = dp_view_of(out), av = act ? dp_view_of(act) : (dp_view){ 0 }, iv = dp_view_of(ic),
                hv = dp_view_of(hc), pv = dp_view_of(pc);
        if (dp_backend_for(gi->device)->gru_cell(&ov, act ? &av : NULL, &iv, &hv, &pv, B, H)) goto fail;
    }
    if (grad) {
        dp_node *node = dp_node_new("GRUCellBackward", gru_backward, 3, in);
        if (!node) goto fail;
        dp_node_save(node, 0, act);
        dp_node_save(node, 1, pc);
        dp_attach(out, node);
    }
    release_all(4, all);
    return out;
fail:
    release_all(4, all);
    dp_tensor_release(out);
    return NULL;
}
