/* attention.h: scaled dot-product attention as one op (attention.c), and the dropout draw
 * its CPU and CUDA kernels share (cpu_attention.c, kernels/attention.cu). */
#ifndef DP_ATTENTION_H
#define DP_ATTENTION_H

#include "backend.h"
#include "philox.h"

#ifndef __cplusplus

/* softmax(q k^T * scale + mask) v for q [..., L, E], k [..., S, E], v [..., S, Ev] with one
 * set of leading dims; mask (or NULL) is bool (true takes part) or of q's dtype (added),
 * broadcastable to [..., L, S]; causal masks key j > query i (not with a mask); scale <= 0
 * means 1/sqrt(E); dropout_p drops probabilities (scaled by 1/(1-p)) with a draw that the
 * backward repeats.  Differentiable in q, k and v; never stores the L x S matrix. */
dp_tensor *dp_sdpa(dp_tensor *q, dp_tensor *k, dp_tensor *v, dp_tensor *mask, bool causal, double dropout_p,
                   double scale);
#endif

/* The mask's offset of batch entry b: b's digits in the leading dims times their strides. */
DP_HD int64_t dp_sdpa_mask_offset(const dp_sdpa_params *p, int64_t b)
{
    int64_t off = 0;
    for (int d = p->mask_nb - 1; d >= 0; d--) {
        int64_t n = p->mask_bsizes[d];
        off += (b % n) * p->mask_bstrides[d];
        b /= n;
    }
    return off;
}

/* Whether dropout keeps element (b, i, j) of the probabilities: index = (b * L + i) * S + j
 * (the same uniform as element index of dropout's mask, dp_rng_values: word index % 4 of
 * the call with counter offset + index / 4). */
DP_HD int dp_sdpa_keep(uint64_t seed, uint64_t offset, uint64_t index, double p)
{
    uint32_t r[4];
    dp_philox4x32(seed, offset + index / 4, r);
    return (double)dp_rng_u24(r[index % 4]) >= p;
}

#endif
