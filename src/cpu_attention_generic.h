/* cpu_attention_generic.h: the CPU kernels of scaled dot-product attention for one float
 * type, included by cpu_attention.c with T (the element type, also the accumulation type:
 * float sums for float32 as the GEMMs do), SFX (the name suffix), EXP and LOG. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

/* The scaled q rows i0 .. i0+nq of batch entry b: qs[ii * E + e]. */
static void FN(load_q)(const sdpa_job *j, int64_t b, int64_t i0, int nq, T *qs)
{
    const dp_sdpa_params *p = j->p;
    const T *q = (const T *)j->q + (b * p->L + i0) * p->E;
    T sc = (T)p->scale;
    for (int64_t x = 0; x < nq * p->E; x++) qs[x] = q[x] * sc;
}

/* Rows j0 .. j0+nk of a [S, n] matrix of batch entry b, transposed: xt[e * BK + jj]. */
static void FN(load_t)(const T *base, int64_t n, int64_t b, int64_t S, int64_t j0, int nk, T *xt)
{
    const T *x = base + (b * S + j0) * n;
    for (int jj = 0; jj < nk; jj++)
        for (int64_t e = 0; e < n; e++) xt[e * BK + jj] = x[jj * n + e];
}

/* c[ii * BK + jj] = sum_e a[ii * n + e] * bt[e * BK + jj]: a tile product, vectorized
 * along the keys; four rows share each load of bt. */
HOT static void FN(tile_abt)(const T *a, const T *bt, int64_t n, int nq, int nk, T *c)
{
    int ii = 0;
    for (; ii + 4 <= nq; ii += 4) {
        T *c0 = c + ii * BK, *c1 = c0 + BK, *c2 = c1 + BK, *c3 = c2 + BK;
        const T *a0 = a + ii * n, *a1 = a0 + n, *a2 = a1 + n, *a3 = a2 + n;
        for (int jj = 0; jj < nk; jj++) c0[jj] = c1[jj] = c2[jj] = c3[jj] = 0;
        for (int64_t e = 0; e < n; e++) {
            const T *br = bt + e * BK;
            T x0 = a0[e], x1 = a1[e], x2 = a2[e], x3 = a3[e];
            for (int jj = 0; jj < nk; jj++) {
                T y = br[jj];
                c0[jj] += x0 * y;
                c1[jj] += x1 * y;
                c2[jj] += x2 * y;
                c3[jj] += x3 * y;
            }
        }
    }
    for (; ii < nq; ii++) {
        T *c0 = c + ii * BK;
        const T *a0 = a + ii * n;
        for (int jj = 0; jj < nk; jj++) c0[jj] = 0;
        for (int64_t e = 0; e < n; e++) {
            const T *br = bt + e * BK;
            T x0 = a0[e];
            for (int jj = 0; jj < nk; jj++) c0[jj] += x0 * br[jj];
        }
    }
}

/* c[r * n + e] += sum_x a(r, x) * b[x * n + e] for r < nr, x < nx: a tile product
 * vectorized along e, four rows of c sharing each load of b.  a(r, x) is a[r * BK + x]
 * (ta false) or a[x * BK + r] (ta true: the transposed tile). */
HOT static void FN(tile_ab)(const T *a, bool ta, const T *b, int64_t n, int nr, int nx, T *c)
{
    int64_t rs = ta ? 1 : BK, xs = ta ? BK : 1;
    int r = 0;
    for (; r + 4 <= nr; r += 4) {
        T *c0 = c + r * n, *c1 = c0 + n, *c2 = c1 + n, *c3 = c2 + n;
        for (int x = 0; x < nx; x++) {
            const T *ar = a + r * rs + x * xs, *br = b + x * n;
            T x0 = ar[0], x1 = ar[rs], x2 = ar[2 * rs], x3 = ar[3 * rs];
            if (x0 == 0 && x1 == 0 && x2 == 0 && x3 == 0) continue;   /* masked or dropped */
            for (int64_t e = 0; e < n; e++) {
                T y = br[e];
                c0[e] += x0 * y;
                c1[e] += x1 * y;
                c2[e] += x2 * y;
                c3[e] += x3 * y;
            }
        }
    }
    for (; r < nr; r++) {
        T *c0 = c + r * n;
        for (int x = 0; x < nx; x++) {
            T x0 = a[r * rs + x * xs];
            if (x0 == 0) continue;
            const T *br = b + x * n;
            for (int64_t e = 0; e < n; e++) c0[e] += x0 * br[e];
        }
    }
}

/* The scores tile of queries i0.. and keys j0.. of batch entry b (moff: its mask offset):
 * the products, the mask added (float) or applied (bool), causal keys after the query
 * set to -inf. */
static void FN(scores)(const sdpa_job *j, const T *qs, const T *kt, int64_t moff, int64_t i0, int nq, int64_t j0,
                       int nk, T *s)
{
    const dp_sdpa_params *p = j->p;
    FN(tile_abt)(qs, kt, p->E, nq, nk, s);
    for (int ii = 0; ii < nq; ii++) {
        T *sr = s + ii * BK;
        int64_t i = i0 + ii;
        if (p->mask_kind == DP_SDPA_MASK_FLOAT) {
            const T *m = (const T *)p->mask + moff + i * p->mask_sl + j0 * p->mask_ss;
            for (int jj = 0; jj < nk; jj++) sr[jj] += m[jj * p->mask_ss];
        } else if (p->mask_kind == DP_SDPA_MASK_BOOL) {
            const bool *m = (const bool *)p->mask + moff + i * p->mask_sl + j0 * p->mask_ss;
            for (int jj = 0; jj < nk; jj++)
                if (!m[jj * p->mask_ss]) sr[jj] = -INFINITY;
        }
        if (p->causal)
            for (int64_t jj = i + 1 - j0 < 0 ? 0 : i + 1 - j0; jj < nk; jj++) sr[jj] = -INFINITY;
    }
}

/* The dropout factor of element (b, i, j): 1/(1-p) kept, 0 dropped. */
static inline T FN(drop)(const sdpa_job *j, int64_t b, int64_t i, int64_t k)
{
    const dp_sdpa_params *p = j->p;
    uint64_t idx = ((uint64_t)b * (uint64_t)p->L + (uint64_t)i) * (uint64_t)p->S + (uint64_t)k;
    return dp_sdpa_keep(p->seed, p->offset, idx, p->dropout_p) ? (T)j->keep_scale : 0;
}

/* One key tile's step of the online softmax: each row's running max m and sum l take in
 * the tile's scores s, which become exp(s - m); the accumulator rows (n wide) are rescaled
 * to the new max.  A row whose keys are all masked so far gets zeros. */
HOT static void FN(online_softmax)(T *s, int nq, int nk, int64_t n, T *m, T *l, T *acc)
{
    for (int ii = 0; ii < nq; ii++) {
        T *sr = s + ii * BK, *ar = acc + ii * n;
        T mx = m[ii];
        SIMD_MAX(mx)
        for (int jj = 0; jj < nk; jj++) mx = sr[jj] > mx ? sr[jj] : mx;
        if (mx == -INFINITY) {
            for (int jj = 0; jj < nk; jj++) sr[jj] = 0;
            continue;
        }
        T c = EXP(m[ii] - mx), sum = 0;
        SIMD_SUM(sum)
        for (int jj = 0; jj < nk; jj++) {
            sr[jj] = EXP(sr[jj] - mx);
            sum += sr[jj];
        }
        l[ii] = l[ii] * c + sum;
        m[ii] = mx;
        if (c != 1)
            for (int64_t e = 0; e < n; e++) ar[e] *= c;
    }
}

/* forward: one task per (batch entry, query tile) */
static void FN(forward_range)(void *ctx, int64_t lo, int64_t hi, int part)
{
    const sdpa_job *j = ctx;
    const dp_sdpa_params *p = j->p;
    int64_t E = p->E, Ev = p->Ev;
    T *qs = malloc(sizeof(T) * (size_t)(BQ * E)), *kt = malloc(sizeof(T) * (size_t)(BK * E));
    T *s = malloc(sizeof(T) * BQ * BK), *acc = malloc(sizeof(T) * (size_t)(BQ * Ev));
    T m[BQ], l[BQ];
    if (!qs || !kt || !s || !acc) {
        j->failed[part] = 1;
        goto done;
    }
    for (int64_t task = lo; task < hi; task++) {
        int64_t b = task / j->tiles, i0 = task % j->tiles * BQ;
        int nq = (int)(p->L - i0 < BQ ? p->L - i0 : BQ);
        int64_t jend = p->causal && i0 + nq < p->S ? i0 + nq : p->S;
        int64_t moff = p->mask_kind ? dp_sdpa_mask_offset(p, b) : 0;
        const T *v = (const T *)j->v + b * p->S * Ev;
        FN(load_q)(j, b, i0, nq, qs);
        for (int ii = 0; ii < nq; ii++) { m[ii] = -INFINITY; l[ii] = 0; }
        for (int64_t x = 0; x < nq * Ev; x++) acc[x] = 0;
        for (int64_t j0 = 0; j0 < jend; j0 += BK) {
            int nk = (int)(jend - j0 < BK ? jend - j0 : BK);
            FN(load_t)(j->k, E, b, p->S, j0, nk, kt);
            FN(scores)(j, qs, kt, moff, i0, nq, j0, nk, s);
            FN(online_softmax)(s, nq, nk, Ev, m, l, acc);
            if (p->dropout_p > 0)
                for (int ii = 0; ii < nq; ii++)
                    for (int jj = 0; jj < nk; jj++) s[ii * BK + jj] *= FN(drop)(j, b, i0 + ii, j0 + jj);
            FN(tile_ab)(s, false, v + j0 * Ev, Ev, nq, nk, acc);
        }
        /* a row with every key masked: 0/0 = NaN and lse -inf, as softmax gives */
        T *out = (T *)j->out + (b * p->L + i0) * Ev, *lse = (T *)j->lse + b * p->L + i0;
        for (int ii = 0; ii < nq; ii++) {
            for (int64_t e = 0; e < Ev; e++) out[ii * Ev + e] = acc[ii * Ev + e] / l[ii];
            lse[ii] = m[ii] + LOG(l[ii]);
        }
    }
done:
    free(qs);
    free(kt);
    free(s);
    free(acc);
}

/* D[r] = sum_e gout[r][e] * out[r][e], one per query row */
static void FN(delta_range)(void *ctx, int64_t lo, int64_t hi, int part)
{
    const sdpa_job *j = ctx;
    int64_t Ev = j->p->Ev;
    for (int64_t r = lo; r < hi; r++) {
        const T *g = (const T *)j->gout + r * Ev, *o = (const T *)j->out + r * Ev;
        T d = 0;
        for (int64_t e = 0; e < Ev; e++) d += g[e] * o[e];
        ((T *)j->delta)[r] = d;
    }
}

/* The probabilities and score gradients of a tile: s (scores in) becomes dS = P (dP' - D)
 * and dp (dO v^T in) becomes P' = P * drop, where P = exp(s - lse), dP' = dp * drop. */
HOT static void FN(tile_grads_nodrop)(const T *lse, const T *D, int nq, int nk, T *s, T *dp)
{
    for (int ii = 0; ii < nq; ii++) {
        T *sr = s + ii * BK, *dr = dp + ii * BK, li = lse[ii], di = D[ii];
        for (int jj = 0; jj < nk; jj++) {
            T pr = EXP(sr[jj] - li);
            sr[jj] = pr * (dr[jj] - di);
            dr[jj] = pr;
        }
    }
}

static void FN(tile_grads)(const sdpa_job *j, int64_t b, int64_t i0, int nq, int64_t j0, int nk, T *s, T *dp)
{
    const dp_sdpa_params *p = j->p;
    const T *lse = (const T *)j->lse + b * p->L + i0, *D = (const T *)j->delta + b * p->L + i0;
    if (p->dropout_p == 0) {
        FN(tile_grads_nodrop)(lse, D, nq, nk, s, dp);
        return;
    }
    for (int ii = 0; ii < nq; ii++) {
        T *sr = s + ii * BK, *dr = dp + ii * BK;
        for (int jj = 0; jj < nk; jj++) {
            T pr = EXP(sr[jj] - lse[ii]), f = FN(drop)(j, b, i0 + ii, j0 + jj);
            sr[jj] = pr * (dr[jj] * f - D[ii]);
            dr[jj] = pr * f;
        }
    }
}

/* backward, grad q: one task per (batch entry, query tile), over the key tiles */
static void FN(dq_range)(void *ctx, int64_t lo, int64_t hi, int part)
{
    const sdpa_job *j = ctx;
    const dp_sdpa_params *p = j->p;
    int64_t E = p->E, Ev = p->Ev;
    T *qs = malloc(sizeof(T) * (size_t)(BQ * E)), *kt = malloc(sizeof(T) * (size_t)(BK * E));
    T *vt = malloc(sizeof(T) * (size_t)(BK * Ev)), *s = malloc(sizeof(T) * BQ * BK);
    T *dp = malloc(sizeof(T) * BQ * BK), *acc = malloc(sizeof(T) * (size_t)(BQ * E));
    if (!qs || !kt || !vt || !s || !dp || !acc) {
        j->failed[part] = 1;
        goto done;
    }
    for (int64_t task = lo; task < hi; task++) {
        int64_t b = task / j->tiles, i0 = task % j->tiles * BQ;
        int nq = (int)(p->L - i0 < BQ ? p->L - i0 : BQ);
        int64_t jend = p->causal && i0 + nq < p->S ? i0 + nq : p->S;
        int64_t moff = p->mask_kind ? dp_sdpa_mask_offset(p, b) : 0;
        const T *k = (const T *)j->k + b * p->S * E, *go = (const T *)j->gout + (b * p->L + i0) * Ev;
        FN(load_q)(j, b, i0, nq, qs);
        for (int64_t x = 0; x < nq * E; x++) acc[x] = 0;
        for (int64_t j0 = 0; j0 < jend; j0 += BK) {
            int nk = (int)(jend - j0 < BK ? jend - j0 : BK);
            FN(load_t)(j->k, E, b, p->S, j0, nk, kt);
            FN(load_t)(j->v, Ev, b, p->S, j0, nk, vt);
            FN(scores)(j, qs, kt, moff, i0, nq, j0, nk, s);
            FN(tile_abt)(go, vt, Ev, nq, nk, dp);
            FN(tile_grads)(j, b, i0, nq, j0, nk, s, dp);
            FN(tile_ab)(s, false, k + j0 * E, E, nq, nk, acc);
        }
        T *gq = (T *)j->gq + (b * p->L + i0) * E, sc = (T)p->scale;
        for (int64_t x = 0; x < nq * E; x++) gq[x] = acc[x] * sc;
    }
done:
    free(qs);
    free(kt);
    free(vt);
    free(s);
    free(dp);
    free(acc);
}

/* backward, grad k and v: one task per (batch entry, key tile), over the query tiles */
static void FN(dkv_range)(void *ctx, int64_t lo, int64_t hi, int part)
{
    const sdpa_job *j = ctx;
    const dp_sdpa_params *p = j->p;
    int64_t E = p->E, Ev = p->Ev;
    T *qs = malloc(sizeof(T) * (size_t)(BQ * E)), *kt = malloc(sizeof(T) * (size_t)(BK * E));
    T *vt = malloc(sizeof(T) * (size_t)(BK * Ev)), *s = malloc(sizeof(T) * BQ * BK);
    T *dp = malloc(sizeof(T) * BQ * BK), *dk = malloc(sizeof(T) * (size_t)(BK * E));
    T *dv = malloc(sizeof(T) * (size_t)(BK * Ev));
    if (!qs || !kt || !vt || !s || !dp || !dk || !dv) {
        j->failed[part] = 1;
        goto done;
    }
    for (int64_t task = lo; task < hi; task++) {
        int64_t b = task / j->ktiles, j0 = task % j->ktiles * BK;
        int nk = (int)(p->S - j0 < BK ? p->S - j0 : BK);
        int64_t moff = p->mask_kind ? dp_sdpa_mask_offset(p, b) : 0;
        FN(load_t)(j->k, E, b, p->S, j0, nk, kt);
        FN(load_t)(j->v, Ev, b, p->S, j0, nk, vt);
        for (int64_t x = 0; x < nk * E; x++) dk[x] = 0;
        for (int64_t x = 0; x < nk * Ev; x++) dv[x] = 0;
        /* causal: query i sees keys j <= i, so the queries before j0 see none of this tile */
        for (int64_t i0 = p->causal ? j0 : 0; i0 < p->L; i0 += BQ) {
            int nq = (int)(p->L - i0 < BQ ? p->L - i0 : BQ);
            const T *go = (const T *)j->gout + (b * p->L + i0) * Ev;
            FN(load_q)(j, b, i0, nq, qs);
            FN(scores)(j, qs, kt, moff, i0, nq, j0, nk, s);
            FN(tile_abt)(go, vt, Ev, nq, nk, dp);
            FN(tile_grads)(j, b, i0, nq, j0, nk, s, dp);
            FN(tile_ab)(dp, true, go, Ev, nk, nq, dv);
            FN(tile_ab)(s, true, qs, E, nk, nq, dk);
        }
        if (j->gk) memcpy((T *)j->gk + (b * p->S + j0) * E, dk, sizeof(T) * (size_t)(nk * E));
        if (j->gv) memcpy((T *)j->gv + (b * p->S + j0) * Ev, dv, sizeof(T) * (size_t)(nk * Ev));
    }
done:
    free(qs);
    free(kt);
    free(vt);
    free(s);
    free(dp);
    free(dk);
    free(dv);
}

/* backward in one pass: one task per batch entry, over its key tiles and, for each, the
 * query tiles that see it; grad q accumulates in gq, which only this task writes.  Used
 * when the batch entries spread evenly over the threads. */
static void FN(bwd_range)(void *ctx, int64_t lo, int64_t hi, int part)
{
    const sdpa_job *j = ctx;
    const dp_sdpa_params *p = j->p;
    int64_t E = p->E, Ev = p->Ev;
    T *qs = malloc(sizeof(T) * (size_t)(BQ * E)), *kt = malloc(sizeof(T) * (size_t)(BK * E));
    T *vt = malloc(sizeof(T) * (size_t)(BK * Ev)), *s = malloc(sizeof(T) * BQ * BK);
    T *dp = malloc(sizeof(T) * BQ * BK), *dk = malloc(sizeof(T) * (size_t)(BK * E));
    T *dv = malloc(sizeof(T) * (size_t)(BK * Ev)), *dq = malloc(sizeof(T) * (size_t)(p->L * E));
    if (!qs || !kt || !vt || !s || !dp || !dk || !dv || !dq) {
        j->failed[part] = 1;
        goto done;
    }
    for (int64_t b = lo; b < hi; b++) {
        int64_t moff = p->mask_kind ? dp_sdpa_mask_offset(p, b) : 0;
        const T *k = (const T *)j->k + b * p->S * E;
        for (int64_t x = 0; x < p->L * E; x++) dq[x] = 0;
        for (int64_t j0 = 0; j0 < p->S; j0 += BK) {
            int nk = (int)(p->S - j0 < BK ? p->S - j0 : BK);
            FN(load_t)(j->k, E, b, p->S, j0, nk, kt);
            FN(load_t)(j->v, Ev, b, p->S, j0, nk, vt);
            for (int64_t x = 0; x < nk * E; x++) dk[x] = 0;
            for (int64_t x = 0; x < nk * Ev; x++) dv[x] = 0;
            for (int64_t i0 = p->causal ? j0 : 0; i0 < p->L; i0 += BQ) {
                int nq = (int)(p->L - i0 < BQ ? p->L - i0 : BQ);
                const T *go = (const T *)j->gout + (b * p->L + i0) * Ev;
                FN(load_q)(j, b, i0, nq, qs);
                FN(scores)(j, qs, kt, moff, i0, nq, j0, nk, s);
                FN(tile_abt)(go, vt, Ev, nq, nk, dp);
                FN(tile_grads)(j, b, i0, nq, j0, nk, s, dp);
                FN(tile_ab)(dp, true, go, Ev, nk, nq, dv);
                FN(tile_ab)(s, true, qs, E, nk, nq, dk);
                FN(tile_ab)(s, false, k + j0 * E, E, nq, nk, dq + i0 * E);
            }
            if (j->gk) memcpy((T *)j->gk + (b * p->S + j0) * E, dk, sizeof(T) * (size_t)(nk * E));
            if (j->gv) memcpy((T *)j->gv + (b * p->S + j0) * Ev, dv, sizeof(T) * (size_t)(nk * Ev));
        }
        if (j->gq) {
            T *gq = (T *)j->gq + b * p->L * E, sc = (T)p->scale;
            for (int64_t x = 0; x < p->L * E; x++) gq[x] = dq[x] * sc;
        }
    }
done:
    free(qs);
    free(kt);
    free(vt);
    free(s);
    free(dp);
    free(dk);
    free(dv);
    free(dq);
}

#undef FN
#undef CAT
#undef CAT_
