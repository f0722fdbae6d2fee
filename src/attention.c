/* attention.c: scaled dot-product attention as one op, FlashAttention-2 style.  The forward
 * walks tiles of queries against tiles of keys with an online softmax and saves only the
 * output and each row's logsumexp; the backward recomputes the probabilities tile by tile
 * from q, k and the logsumexp.  So memory is O(L + S) per head instead of the L x S
 * attention matrix (and its softmax and dropout copies) that the composition of matmul,
 * softmax and dropout keeps for backward.  Dropout is a counter-based draw keyed by a seed
 * and offset taken at forward time, so the backward repeats it without a stored mask. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "internal.h"

/* Node: ip[0] causal, ip[1] mask kind, ip[2] seed, ip[3] offset (as int64 bits);
 * p[0] scale, p[1] dropout_p.  Saved: 0 q, 1 k, 2 v (contiguous), 3 out, 4 lse, 5 mask
 * (expanded view, when there is one). */

static int64_t prod(const int64_t *s, int n)
{
    int64_t r = 1;
    for (int d = 0; d < n; d++) r *= s[d];
    return r;
}

/* The kernels' parameters from the contiguous q, k, v and the expanded mask view. */
static dp_sdpa_params params_of(dp_tensor *q, dp_tensor *k, dp_tensor *v, dp_tensor *mask, bool causal,
                                double scale, double dropout_p, uint64_t seed, uint64_t offset)
{
    int nb = q->ndim - 2;
    dp_sdpa_params p = { .batch = prod(q->sizes, nb), .L = q->sizes[nb], .S = k->sizes[nb], .E = q->sizes[nb + 1],
                         .Ev = v->sizes[nb + 1], .scale = scale, .causal = causal, .dropout_p = dropout_p,
                         .seed = seed, .offset = offset };
    if (mask) {
        dp_view mv = dp_view_of(mask);
        p.mask_kind = mask->dtype == DP_BOOL ? DP_SDPA_MASK_BOOL : DP_SDPA_MASK_FLOAT;
        p.mask = mv.data;
        p.mask_nb = nb;
        for (int d = 0; d < nb; d++) {
            p.mask_bsizes[d] = mask->sizes[d];
            p.mask_bstrides[d] = mask->strides[d];
        }
        p.mask_sl = mask->strides[nb];
        p.mask_ss = mask->strides[nb + 1];
    }
    return p;
}

/* Whether the kernels have work: empty batches, rows, keys or values give zeros. */
static bool has_work(const dp_sdpa_params *p) { return p->batch && p->L && p->S && p->Ev; }

static int sdpa_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *q = dp_saved(n, 0), *k = dp_saved(n, 1), *v = dp_saved(n, 2), *out = dp_saved(n, 3);
    dp_tensor *lse = dp_saved(n, 4), *mask = n->ip[1] ? dp_saved(n, 5) : NULL;
    if (!q || !k || !v || !out || !lse || (n->ip[1] && !mask)) return -1;
    dp_sdpa_params p = params_of(q, k, v, mask, n->ip[0], n->p[0], n->p[1], (uint64_t)n->ip[2], (uint64_t)n->ip[3]);
    dp_tensor *ins[3] = { q, k, v }, *gs[3] = { NULL, NULL, NULL };
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        if (!DP_NEEDS_INPUT(n, i)) continue;
        gs[i] = has_work(&p) ? dp_empty(ins[i]->ndim, ins[i]->sizes, g->dtype, g->device)
                             : dp_zeros(ins[i]->ndim, ins[i]->sizes, g->dtype, g->device);
        if (!gs[i]) rc = -1;
    }
    dp_tensor *gc = NULL;
    if (!rc && has_work(&p) && (gs[0] || gs[1] || gs[2])) {
        gc = dp_contiguous(g);
        if (!gc) rc = -1;
        dp_view gv[3], gov = gc ? dp_view_of(gc) : (dp_view){ 0 };
        for (int i = 0; i < 3; i++) gv[i] = gs[i] ? dp_view_of(gs[i]) : (dp_view){ 0 };
        dp_view qv = dp_view_of(q), kv = dp_view_of(k), vv = dp_view_of(v), ov = dp_view_of(out), lv = dp_view_of(lse);
        if (!rc)
            rc = dp_backend_for(g->device)->sdpa_backward(&p, gs[0] ? &gv[0] : NULL, gs[1] ? &gv[1] : NULL,
                                                          gs[2] ? &gv[2] : NULL, &gov, &qv, &kv, &vv, &ov, &lv);
    }
    dp_tensor_release(gc);
    if (rc) {
        for (int i = 0; i < 3; i++) dp_tensor_release(gs[i]);
        return -1;
    }
    for (int i = 0; i < 3; i++) gin[i] = gs[i];
    return 0;
}

static int check_inputs(dp_tensor *q, dp_tensor *k, dp_tensor *v, dp_tensor *mask, bool causal, double dropout_p)
{
    char a[128], b[128], c[128];
    const char *who = "scaled_dot_product_attention";
    if (dp_need_float(q->dtype, who)) return -1;
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return dp_error("%s: query, key and value must have one dtype, got %s, %s and %s", who,
                        dp_dtype_name(q->dtype), dp_dtype_name(k->dtype), dp_dtype_name(v->dtype));
    int nd = q->ndim;
    if (nd < 2 || k->ndim != nd || v->ndim != nd ||
        memcmp(k->sizes, q->sizes, sizeof(int64_t) * (size_t)(nd - 2)) ||
        memcmp(v->sizes, q->sizes, sizeof(int64_t) * (size_t)(nd - 2)))
        return dp_error("%s: query, key and value must be [..., L, E], [..., S, E] and [..., S, Ev] with the same "
                        "leading dims, got shapes %s, %s and %s", who, dp_shape_str(q->ndim, q->sizes, a, sizeof a),
                        dp_shape_str(k->ndim, k->sizes, b, sizeof b), dp_shape_str(v->ndim, v->sizes, c, sizeof c));
    if (k->sizes[nd - 1] != q->sizes[nd - 1] || v->sizes[nd - 2] != k->sizes[nd - 2])
        return dp_error("%s: key must be [..., S, %lld] and value [..., S, Ev] with key's S, got shapes %s, %s and %s",
                        who, (long long)q->sizes[nd - 1], dp_shape_str(q->ndim, q->sizes, a, sizeof a),
                        dp_shape_str(k->ndim, k->sizes, b, sizeof b), dp_shape_str(v->ndim, v->sizes, c, sizeof c));
    if (!(dropout_p >= 0 && dropout_p <= 1))
        return dp_error("%s: dropout_p must be in [0, 1], got %g", who, dropout_p);
    if (!mask) return 0;
    if (causal) return dp_error("%s: give either attn_mask or is_causal=true, not both", who);
    if (mask->dtype != DP_BOOL && mask->dtype != q->dtype)
        return dp_error("%s: attn_mask must be bool or of the query's dtype %s, got %s", who, dp_dtype_name(q->dtype),
                        dp_dtype_name(mask->dtype));
    int64_t want[DP_MAX_DIMS];
    memcpy(want, q->sizes, sizeof(int64_t) * (size_t)nd);
    want[nd - 1] = k->sizes[nd - 2];
    bool ok = mask->ndim <= nd;
    for (int d = 0; ok && d < mask->ndim; d++) {
        int64_t m = mask->sizes[mask->ndim - 1 - d];
        ok = m == 1 || m == want[nd - 1 - d];
    }
    if (!ok)
        return dp_error("%s: attn_mask of shape %s does not broadcast to the scores' shape %s", who,
                        dp_shape_str(mask->ndim, mask->sizes, a, sizeof a), dp_shape_str(nd, want, b, sizeof b));
    return 0;
}

dp_tensor *dp_sdpa(dp_tensor *q, dp_tensor *k, dp_tensor *v, dp_tensor *mask, bool causal, double dropout_p,
                   double scale)
{
    dp_tensor *all[4] = { q, k, v, mask };
    if (dp_check_same_device(mask ? 4 : 3, all)) return NULL;
    if (check_inputs(q, k, v, mask, causal, dropout_p)) return NULL;
    int nd = q->ndim;
    if (!(scale > 0)) scale = 1 / sqrt((double)q->sizes[nd - 1]);
    int64_t osz[DP_MAX_DIMS], msz[DP_MAX_DIMS];
    memcpy(osz, q->sizes, sizeof osz);
    osz[nd - 1] = v->sizes[nd - 1];
    memcpy(msz, q->sizes, sizeof msz);
    msz[nd - 1] = k->sizes[nd - 2];
    dp_tensor *qc = dp_contiguous(q), *kc = dp_contiguous(k), *vc = dp_contiguous(v);
    dp_tensor *md = mask ? dp_detach(mask) : NULL, *me = md ? dp_expand(md, nd, msz) : NULL;
    dp_tensor *out = dp_empty(nd, osz, q->dtype, q->device), *lse = dp_empty(nd - 1, q->sizes, q->dtype, q->device);
    if (!qc || !kc || !vc || (mask && !me) || !out || !lse) goto fail;
    dp_sdpa_params p = params_of(qc, kc, vc, me, causal, scale, dropout_p, 0, 0);
    if (dropout_p > 0 && has_work(&p)) {
        p.seed = dp_initial_seed();
        p.offset = dp_rng_reserve(dp_rng_counters(DP_RNG_BERNOULLI_MASK, q->dtype, p.batch * p.L * p.S));
    }
    if (has_work(&p)) {
        dp_view ov = dp_view_of(out), lv = dp_view_of(lse), qv = dp_view_of(qc), kv = dp_view_of(kc), vv = dp_view_of(vc);
        if (dp_backend_for(q->device)->sdpa_forward(&p, &ov, &lv, &qv, &kv, &vv)) goto fail;
    } else if (dp_fill_(out, 0)) {
        goto fail;
    }
    if (dp_needs_grad(3, all)) {
        dp_node *node = dp_node_new("ScaledDotProductFlashAttentionBackward0", sdpa_backward, 3, all);
        if (!node) goto fail;
        node->ip[0] = causal;
        node->ip[1] = p.mask_kind;
        node->ip[2] = (int64_t)p.seed;
        node->ip[3] = (int64_t)p.offset;
        node->p[0] = scale;
        node->p[1] = dropout_p;
        dp_node_save(node, 0, qc);
        dp_node_save(node, 1, kc);
        dp_node_save(node, 2, vc);
        dp_tensor *oa = dp_alias(out);   /* no autograd link: the node does not own its output */
        if (!oa) { dp_node_release(node); goto fail; }
        dp_node_save(node, 3, oa);
        dp_tensor_release(oa);
        dp_node_save(node, 4, lse);
        if (me) dp_node_save(node, 5, me);
        dp_attach(out, node);
    }
    dp_tensor_release(qc);
    dp_tensor_release(kc);
    dp_tensor_release(vc);
    dp_tensor_release(md);
    dp_tensor_release(me);
    dp_tensor_release(lse);
    return out;
fail:
    dp_tensor_release(qc);
    dp_tensor_release(kc);
    dp_tensor_release(vc);
    dp_tensor_release(md);
    dp_tensor_release(me);
    dp_tensor_release(out);
    dp_tensor_release(lse);
    return NULL;
}
