/* l_linalg.c: torch._C.lapack_*: LAPACK (as OpenBLAS ships it) on batches of float64 CPU
 * matrices, for lua/torch/linalg.lua, which converts dtypes and devices (a CUDA tensor is
 * copied to the host and back), broadcasts the batch dims and adds autograd.
 *
 * Every function takes contiguous float64 CPU tensors of shape (batch..., m, n) (row-major)
 * and returns new ones; LAPACK works column-major, so each matrix is transposed into a
 * scratch buffer and back.  A failed factorization is an error naming the batch element
 * (1-based) and LAPACK's info, in PyTorch's words. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_tensor.h"

typedef int lp_int;
extern void dgetrf_(const lp_int *m, const lp_int *n, double *a, const lp_int *lda, lp_int *ipiv, lp_int *info);
extern void dgetri_(const lp_int *n, double *a, const lp_int *lda, const lp_int *ipiv, double *work,
                    const lp_int *lwork, lp_int *info);
extern void dgesv_(const lp_int *n, const lp_int *nrhs, double *a, const lp_int *lda, lp_int *ipiv, double *b,
                   const lp_int *ldb, lp_int *info);
extern void dpotrf_(const char *uplo, const lp_int *n, double *a, const lp_int *lda, lp_int *info);
extern void dgeqrf_(const lp_int *m, const lp_int *n, double *a, const lp_int *lda, double *tau, double *work,
                    const lp_int *lwork, lp_int *info);
extern void dorgqr_(const lp_int *m, const lp_int *n, const lp_int *k, double *a, const lp_int *lda,
                    const double *tau, double *work, const lp_int *lwork, lp_int *info);
extern void dgesdd_(const char *jobz, const lp_int *m, const lp_int *n, double *a, const lp_int *lda, double *s,
                    double *u, const lp_int *ldu, double *vt, const lp_int *ldvt, double *work,
                    const lp_int *lwork, lp_int *iwork, lp_int *info);
extern void dsyevd_(const char *jobz, const char *uplo, const lp_int *n, double *a, const lp_int *lda, double *w,
                    double *work, const lp_int *lwork, lp_int *iwork, const lp_int *liwork, lp_int *info);
extern void dtrtrs_(const char *uplo, const char *trans, const char *diag, const lp_int *n, const lp_int *nrhs,
                    const double *a, const lp_int *lda, double *b, const lp_int *ldb, lp_int *info);
extern void dgelsd_(const lp_int *m, const lp_int *n, const lp_int *nrhs, double *a, const lp_int *lda, double *b,
                    const lp_int *ldb, double *s, const double *rcond, lp_int *rank, double *work,
                    const lp_int *lwork, lp_int *iwork, lp_int *info);

#define MAX_SIDE 46340   /* side * side must fit LAPACK's 32-bit integers */

/* A float64 CPU contiguous tensor with at least 2 dims at idx; its batch count, rows, cols. */
static dp_tensor *check_matrix(lua_State *L, int idx, const char *who, int64_t *batch, lp_int *m, lp_int *n)
{
    dp_tensor *t = lt_check(L, idx);
    if (t->dtype != DP_FLOAT64 || t->device.type != DP_DEVICE_CPU || !dp_is_contiguous(t) || t->ndim < 2)
        luaL_error(L, "%s: internal: expected a contiguous float64 CPU tensor with at least 2 dims", who);
    int64_t rows = t->sizes[t->ndim - 2], cols = t->sizes[t->ndim - 1];
    if (rows > MAX_SIDE || cols > MAX_SIDE)
        luaL_error(L, "%s: matrices of %lld x %lld are too large for LAPACK's 32-bit sizes", who, (long long)rows,
                   (long long)cols);
    *batch = 1;
    for (int d = 0; d < t->ndim - 2; d++) *batch *= t->sizes[d];
    *m = (lp_int)rows;
    *n = (lp_int)cols;
    return t;
}

/* A new float64 CPU tensor with t's batch dims and the given last dims (0, 1 or 2 of them). */
static dp_tensor *push_result(lua_State *L, const dp_tensor *t, int nlast, int64_t a, int64_t b)
{
    int64_t sizes[DP_MAX_DIMS];
    int nb = t->ndim - 2;
    for (int d = 0; d < nb; d++) sizes[d] = t->sizes[d];
    if (nlast >= 1) sizes[nb] = a;
    if (nlast >= 2) sizes[nb + 1] = b;
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_zeros(nb + nlast, sizes, DP_FLOAT64, dp_cpu());
    if (!*slot) lt_raise(L);
    return *slot;
}

/* the n results pushed from stack index first on (the scratch buffers lie above them) */
static int results(lua_State *L, int first, int n)
{
    for (int i = 0; i < n; i++) lua_pushvalue(L, first + i);
    return n;
}

/* row-major m x n <-> column-major */
static void to_cm(const double *src, double *dst, lp_int m, lp_int n)
{
    for (lp_int i = 0; i < m; i++)
        for (lp_int j = 0; j < n; j++) dst[(size_t)j * m + i] = src[(size_t)i * n + j];
}
static void from_cm(const double *src, double *dst, lp_int m, lp_int n, lp_int ld)
{
    for (lp_int i = 0; i < m; i++)
        for (lp_int j = 0; j < n; j++) dst[(size_t)i * n + j] = src[(size_t)j * ld + i];
}

static double *scratch_d(lua_State *L, size_t n) { return lt_scratch(L, (n ? n : 1) * sizeof(double)); }
static lp_int *scratch_i(lua_State *L, size_t n) { return lt_scratch(L, (n ? n : 1) * sizeof(lp_int)); }

static void need_square(lua_State *L, const char *who, lp_int m, lp_int n)
{
    if (m != n)
        luaL_error(L, "%s: A must be batches of square matrices, but they are %d by %d matrices", who, m, n);
}

static const char *batch_str(lua_State *L, int64_t b, int64_t batch)
{
    return batch > 1 ? lua_pushfstring(L, " (batch element %d)", (int)(b + 1)) : "";
}

/* slogdet(A) -> sign, logabsdet through the LU factorization */
static int c_slogdet(lua_State *L)
{
    int64_t batch; lp_int m, n, info;
    dp_tensor *A = check_matrix(L, 1, "linalg.slogdet", &batch, &m, &n);
    need_square(L, "linalg.slogdet", m, n);
    int first = lua_gettop(L) + 1;
    dp_tensor *sign = push_result(L, A, 0, 0, 0), *logabs = push_result(L, A, 0, 0, 0);
    double *a = scratch_d(L, (size_t)n * n);
    lp_int *piv = scratch_i(L, (size_t)n);
    const double *src = dp_data(A);
    double *ps = dp_data(sign), *pl = dp_data(logabs);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(src + b * n * n, a, n, n);
        double s = 1, la = 0;
        if (n > 0) {
            dgetrf_(&n, &n, a, &n, piv, &info);
            if (info < 0) return luaL_error(L, "linalg.slogdet: LAPACK dgetrf failed (info %d)", info);
            for (lp_int i = 0; i < n; i++) {
                double d = a[(size_t)i * n + i];
                if (piv[i] != i + 1) s = -s;
                if (d < 0) { s = -s; d = -d; }
                if (d == 0) { s = 0; la = -INFINITY; break; }
                la += log(d);
            }
        }
        ps[b] = s;
        pl[b] = la;
    }
    return results(L, first, 2);
}

/* inv(A) */
static int c_inv(lua_State *L)
{
    int64_t batch; lp_int m, n, info;
    dp_tensor *A = check_matrix(L, 1, "linalg.inv", &batch, &m, &n);
    need_square(L, "linalg.inv", m, n);
    int first = lua_gettop(L) + 1;
    dp_tensor *R = push_result(L, A, 2, n, n);
    double *a = scratch_d(L, (size_t)n * n), wq;
    lp_int *piv = scratch_i(L, (size_t)n), lwork = -1;
    if (n == 0) return results(L, first, 1);
    dgetri_(&n, a, &n, piv, &wq, &lwork, &info);
    lwork = (lp_int)wq > n ? (lp_int)wq : n;
    double *work = scratch_d(L, (size_t)lwork);
    const double *src = dp_data(A);
    double *dst = dp_data(R);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(src + b * n * n, a, n, n);
        dgetrf_(&n, &n, a, &n, piv, &info);
        if (info > 0)
            return luaL_error(L, "linalg.inv%s: The diagonal element %d is zero, the inversion could not be completed "
                                 "because the input matrix is singular.", batch_str(L, b, batch), info);
        dgetri_(&n, a, &n, piv, work, &lwork, &info);
        if (info != 0) return luaL_error(L, "linalg.inv: LAPACK dgetri failed (info %d)", info);
        from_cm(a, dst + b * n * n, n, n, n);
    }
    return results(L, first, 1);
}

/* solve(A, B) -> X with A X = B; B is (batch..., n, k) */
static int c_solve(lua_State *L)
{
    int64_t batch, batch2; lp_int m, n, bn, k, info;
    dp_tensor *A = check_matrix(L, 1, "linalg.solve", &batch, &m, &n);
    dp_tensor *B = check_matrix(L, 2, "linalg.solve", &batch2, &bn, &k);
    need_square(L, "linalg.solve", m, n);
    if (batch2 != batch || bn != n) return luaL_error(L, "linalg.solve: internal: A and B do not match");
    int first = lua_gettop(L) + 1;
    dp_tensor *X = push_result(L, B, 2, n, k);
    double *a = scratch_d(L, (size_t)n * n), *bb = scratch_d(L, (size_t)n * k);
    lp_int *piv = scratch_i(L, (size_t)n);
    const double *pa = dp_data(A), *pb = dp_data(B);
    double *px = dp_data(X);
    if (n == 0 || k == 0) return results(L, first, 1);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(pa + b * n * n, a, n, n);
        to_cm(pb + b * n * k, bb, n, k);
        dgesv_(&n, &k, a, &n, piv, bb, &n, &info);
        if (info > 0)
            return luaL_error(L, "linalg.solve%s: The diagonal element %d is zero, the solve could not be completed "
                                 "because the input matrix is singular.", batch_str(L, b, batch), info);
        from_cm(bb, px + b * n * k, n, k, n);
    }
    return results(L, first, 1);
}

/* cholesky(A [, upper]) -> L (or U = L^T) from A's lower triangle */
static int c_cholesky(lua_State *L)
{
    int64_t batch; lp_int m, n, info;
    dp_tensor *A = check_matrix(L, 1, "linalg.cholesky", &batch, &m, &n);
    bool upper = lt_optbool(L, 2, false);
    need_square(L, "linalg.cholesky", m, n);
    int first = lua_gettop(L) + 1;
    dp_tensor *R = push_result(L, A, 2, n, n);
    double *a = scratch_d(L, (size_t)n * n);
    const double *src = dp_data(A);
    double *dst = dp_data(R);
    if (n == 0) return results(L, first, 1);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(src + b * n * n, a, n, n);
        dpotrf_("L", &n, a, &n, &info);
        if (info > 0)
            return luaL_error(L, "linalg.cholesky%s: The factorization could not be completed because the input is "
                                 "not positive-definite (the leading minor of order %d is not positive-definite).",
                              batch_str(L, b, batch), info);
        double *o = dst + b * n * n;
        for (lp_int i = 0; i < n; i++)
            for (lp_int j = 0; j <= i; j++) {
                double v = a[(size_t)j * n + i];   /* L[i][j] */
                if (upper) o[(size_t)j * n + i] = v; else o[(size_t)i * n + j] = v;
            }
    }
    return results(L, first, 1);
}

/* qr(A, complete) -> Q, R */
static int c_qr(lua_State *L)
{
    int64_t batch; lp_int m, n, info;
    dp_tensor *A = check_matrix(L, 1, "linalg.qr", &batch, &m, &n);
    bool complete = lt_optbool(L, 2, false);
    lp_int k = m < n ? m : n, qc = complete ? m : k, rr = complete ? m : k;
    int first = lua_gettop(L) + 1;
    dp_tensor *Q = push_result(L, A, 2, m, qc), *R = push_result(L, A, 2, rr, n);
    lp_int cols = n > qc ? n : qc;
    double *a = scratch_d(L, (size_t)m * cols), *tau = scratch_d(L, (size_t)k), wq;
    lp_int lwork = -1;
    if (m == 0 || n == 0) {
        if (complete && m > 0) {   /* Q = I */
            double *pq = dp_data(Q);
            for (int64_t b = 0; b < batch; b++)
                for (lp_int i = 0; i < m; i++) pq[b * m * m + (int64_t)i * m + i] = 1;
        }
        return results(L, first, 2);
    }
    dgeqrf_(&m, &cols, a, &m, tau, &wq, &lwork, &info);
    lwork = (lp_int)wq;
    lp_int lw2 = -1;
    dorgqr_(&m, &qc, &k, a, &m, tau, &wq, &lw2, &info);
    if ((lp_int)wq > lwork) lwork = (lp_int)wq;
    if (lwork < cols) lwork = cols;
    double *work = scratch_d(L, (size_t)lwork);
    const double *src = dp_data(A);
    double *pq = dp_data(Q), *pr = dp_data(R);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(src + b * m * n, a, m, n);
        dgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
        if (info != 0) return luaL_error(L, "linalg.qr: LAPACK dgeqrf failed (info %d)", info);
        double *r = pr + b * rr * n;
        for (lp_int i = 0; i < rr && i < m; i++)
            for (lp_int j = i; j < n; j++) r[(size_t)i * n + j] = a[(size_t)j * m + i];
        dorgqr_(&m, &qc, &k, a, &m, tau, work, &lwork, &info);
        if (info != 0) return luaL_error(L, "linalg.qr: LAPACK dorgqr failed (info %d)", info);
        from_cm(a, pq + b * m * qc, m, qc, m);
    }
    return results(L, first, 2);
}

/* svd(A, full_matrices) -> U, S, Vh */
static int c_svd(lua_State *L)
{
    int64_t batch; lp_int m, n, info;
    dp_tensor *A = check_matrix(L, 1, "linalg.svd", &batch, &m, &n);
    bool full = lt_optbool(L, 2, false);
    lp_int k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
    int first = lua_gettop(L) + 1;
    dp_tensor *U = push_result(L, A, 2, m, uc), *S = push_result(L, A, 1, k, 0), *V = push_result(L, A, 2, vr, n);
    if (m == 0 || n == 0) {
        for (int64_t b = 0; full && b < batch; b++) {   /* identities */
            for (lp_int i = 0; i < m; i++) ((double *)dp_data(U))[b * m * m + (int64_t)i * m + i] = 1;
            for (lp_int i = 0; i < n; i++) ((double *)dp_data(V))[b * n * n + (int64_t)i * n + i] = 1;
        }
        return results(L, first, 3);
    }
    const char *jobz = full ? "A" : "S";
    double *a = scratch_d(L, (size_t)m * n), *s = scratch_d(L, (size_t)k);
    double *u = scratch_d(L, (size_t)m * uc), *vt = scratch_d(L, (size_t)vr * n), wq;
    lp_int *iwork = scratch_i(L, 8 * (size_t)k), lwork = -1;
    dgesdd_(jobz, &m, &n, a, &m, s, u, &m, vt, &vr, &wq, &lwork, iwork, &info);
    lwork = (lp_int)wq;
    double *work = scratch_d(L, (size_t)lwork);
    const double *src = dp_data(A);
    double *pu = dp_data(U), *ps = dp_data(S), *pv = dp_data(V);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(src + b * m * n, a, m, n);
        dgesdd_(jobz, &m, &n, a, &m, s, u, &m, vt, &vr, work, &lwork, iwork, &info);
        if (info > 0) return luaL_error(L, "linalg.svd%s: the algorithm failed to converge", batch_str(L, b, batch));
        if (info < 0) return luaL_error(L, "linalg.svd: LAPACK dgesdd failed (info %d)", info);
        from_cm(u, pu + b * m * uc, m, uc, m);
        from_cm(vt, pv + b * vr * n, vr, n, vr);
        memcpy(ps + b * k, s, (size_t)k * sizeof(double));
    }
    return results(L, first, 3);
}

/* eigh(A, upper) -> eigenvalues (ascending), eigenvectors (columns) */
static int c_eigh(lua_State *L)
{
    int64_t batch; lp_int m, n, info;
    dp_tensor *A = check_matrix(L, 1, "linalg.eigh", &batch, &m, &n);
    const char *uplo = lt_optbool(L, 2, false) ? "U" : "L";
    need_square(L, "linalg.eigh", m, n);
    int first = lua_gettop(L) + 1;
    dp_tensor *W = push_result(L, A, 1, n, 0), *V = push_result(L, A, 2, n, n);
    if (n == 0) return results(L, first, 2);
    double *a = scratch_d(L, (size_t)n * n), wq;
    lp_int lwork = -1, liwork = -1, iwq;
    dsyevd_("V", uplo, &n, a, &n, (double *)dp_data(W), &wq, &lwork, &iwq, &liwork, &info);
    lwork = (lp_int)wq;
    liwork = iwq;
    double *work = scratch_d(L, (size_t)lwork);
    lp_int *iwork = scratch_i(L, (size_t)liwork);
    const double *src = dp_data(A);
    double *pw = dp_data(W), *pv = dp_data(V);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(src + b * n * n, a, n, n);
        dsyevd_("V", uplo, &n, a, &n, pw + b * n, work, &lwork, iwork, &liwork, &info);
        if (info > 0) return luaL_error(L, "linalg.eigh%s: the algorithm failed to converge", batch_str(L, b, batch));
        if (info < 0) return luaL_error(L, "linalg.eigh: LAPACK dsyevd failed (info %d)", info);
        from_cm(a, pv + b * n * n, n, n, n);
    }
    return results(L, first, 2);
}

/* trsolve(A, B, upper, unitriangular) -> X with A X = B, A triangular */
static int c_trsolve(lua_State *L)
{
    int64_t batch, batch2; lp_int m, n, bn, k, info;
    dp_tensor *A = check_matrix(L, 1, "linalg.solve_triangular", &batch, &m, &n);
    dp_tensor *B = check_matrix(L, 2, "linalg.solve_triangular", &batch2, &bn, &k);
    const char *uplo = lt_optbool(L, 3, false) ? "U" : "L", *diag = lt_optbool(L, 4, false) ? "U" : "N";
    need_square(L, "linalg.solve_triangular", m, n);
    if (batch2 != batch || bn != n) return luaL_error(L, "linalg.solve_triangular: internal: A and B do not match");
    int first = lua_gettop(L) + 1;
    dp_tensor *X = push_result(L, B, 2, n, k);
    if (n == 0 || k == 0) return results(L, first, 1);
    double *a = scratch_d(L, (size_t)n * n), *bb = scratch_d(L, (size_t)n * k);
    const double *pa = dp_data(A), *pb = dp_data(B);
    double *px = dp_data(X);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(pa + b * n * n, a, n, n);
        to_cm(pb + b * n * k, bb, n, k);
        dtrtrs_(uplo, "N", diag, &n, &k, a, &n, bb, &n, &info);
        /* a zero on the diagonal: PyTorch returns infinities and NaNs rather than failing */
        if (info > 0) {
            for (size_t i = 0; i < (size_t)n * k; i++) bb[i] = NAN;
        } else if (info < 0) {
            return luaL_error(L, "linalg.solve_triangular: LAPACK dtrtrs failed (info %d)", info);
        }
        from_cm(bb, px + b * n * k, n, k, n);
    }
    return results(L, first, 1);
}

/* lstsq(A, B, rcond) -> X (n x k), the minimum norm least squares solution (dgelsd) */
static int c_lstsq(lua_State *L)
{
    int64_t batch, batch2; lp_int m, n, bm, k, info, rank;
    dp_tensor *A = check_matrix(L, 1, "linalg.lstsq", &batch, &m, &n);
    dp_tensor *B = check_matrix(L, 2, "linalg.lstsq", &batch2, &bm, &k);
    double rcond = luaL_optnumber(L, 3, -1);
    if (batch2 != batch || bm != m) return luaL_error(L, "linalg.lstsq: internal: A and B do not match");
    int first = lua_gettop(L) + 1;
    dp_tensor *X = push_result(L, B, 2, n, k);
    if (m == 0 || n == 0 || k == 0) return results(L, first, 1);
    lp_int ld = m > n ? m : n, mn = m < n ? m : n;
    double *a = scratch_d(L, (size_t)m * n), *bb = scratch_d(L, (size_t)ld * k), *s = scratch_d(L, (size_t)mn), wq;
    lp_int lwork = -1, iwq;
    dgelsd_(&m, &n, &k, a, &m, bb, &ld, s, &rcond, &rank, &wq, &lwork, &iwq, &info);
    lwork = (lp_int)wq;
    double *work = scratch_d(L, (size_t)lwork);
    lp_int *iwork = scratch_i(L, (size_t)(iwq > 1 ? iwq : 1));
    const double *pa = dp_data(A), *pb = dp_data(B);
    double *px = dp_data(X);
    for (int64_t b = 0; b < batch; b++) {
        to_cm(pa + b * m * n, a, m, n);
        for (lp_int i = 0; i < m; i++)
            for (lp_int j = 0; j < k; j++) bb[(size_t)j * ld + i] = pb[b * m * k + (int64_t)i * k + j];
        dgelsd_(&m, &n, &k, a, &m, bb, &ld, s, &rcond, &rank, work, &lwork, iwork, &info);
        if (info > 0) return luaL_error(L, "linalg.lstsq%s: the SVD failed to converge", batch_str(L, b, batch));
        if (info < 0) return luaL_error(L, "linalg.lstsq: LAPACK dgelsd failed (info %d)", info);
        from_cm(bb, px + b * n * k, n, k, ld);
    }
    return results(L, first, 1);
}

const luaL_Reg lt_linalg_functions[] = {
    { "_lapack_slogdet", c_slogdet }, { "_lapack_inv", c_inv }, { "_lapack_solve", c_solve },
    { "_lapack_cholesky", c_cholesky }, { "_lapack_qr", c_qr }, { "_lapack_svd", c_svd },
    { "_lapack_eigh", c_eigh }, { "_lapack_trsolve", c_trsolve }, { "_lapack_lstsq", c_lstsq },
    { NULL, NULL }
};
