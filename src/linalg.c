/* linalg.c: matrix products through the backend's GEMM (OpenBLAS / cuBLAS): mm, bmm,
 * matmul, addmm and the fused linear layer, each with its backward. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* How a 2-D or 3-D tensor's matrices can be handed to GEMM without a copy. */
typedef struct { bool trans; int64_t ld, bstride; } mat_layout;

static bool layout_of(const dp_tensor *t, mat_layout *l)
{
    int r = t->ndim - 2, c = t->ndim - 1;
    int64_t rows = t->sizes[r], cols = t->sizes[c];
    l->bstride = t->ndim == 3 ? t->strides[0] : 0;
    if (t->strides[c] == 1 && (rows == 1 || t->strides[r] >= (cols > 1 ? cols : 1))) { l->trans = false; l->ld = rows == 1 ? (cols > 1 ? cols : 1) : t->strides[r]; return true; }
    if (t->strides[r] == 1 && (cols == 1 || t->strides[c] >= (rows > 1 ? rows : 1))) { l->trans = true; l->ld = cols == 1 ? (rows > 1 ? rows : 1) : t->strides[c]; return true; }
    return false;
}

/* op(a) @ op(b) for 2-D or 3-D a, b (same batch), without autograd. */
dp_tensor *dp_bmm_raw(dp_tensor *a, dp_tensor *b, bool ta, bool tb)
{
    dp_tensor *ac = NULL, *bc = NULL, *out = NULL;
    mat_layout la = { 0 }, lb = { 0 };
    ac = layout_of(a, &la) ? (dp_tensor_retain(a), a) : dp_clone(a);
    bc = layout_of(b, &lb) ? (dp_tensor_retain(b), b) : dp_clone(b);
    if (!ac || !bc) goto done;
    layout_of(ac, &la);
    layout_of(bc, &lb);
    int nd = a->ndim;
    int64_t m = ta ? a->sizes[nd - 1] : a->sizes[nd - 2], k = ta ? a->sizes[nd - 2] : a->sizes[nd - 1];
    int64_t n = tb ? b->sizes[nd - 2] : b->sizes[nd - 1], batch = nd == 3 ? a->sizes[0] : 1;
    int64_t sizes[3] = { batch, m, n };
    out = dp_empty(nd, nd == 3 ? sizes : sizes + 1, a->dtype, a->device);
    if (!out || m * n == 0) goto done;
    if (k == 0) { dp_fill_(out, 0); goto done; }
    if (dp_half_gemm(a->device, a->dtype, la.trans != ta, lb.trans != tb, m, n, k, 1.0, dp_data(ac), la.ld, la.bstride,
                     dp_data(bc), lb.ld, lb.bstride, 0.0, dp_data(out), n, m * n, batch)) {
        dp_tensor_release(out);
        out = NULL;
    }
done:
    dp_tensor_release(ac);
    dp_tensor_release(bc);
    return out;
}

static int mm_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *a = dp_saved(n, 0), *b = dp_saved(n, 1);
    if (!a || !b) return -1;
    if (n->in[0].fn || n->in[0].leaf) { gin[0] = dp_bmm_raw(g, b, false, true); if (!gin[0]) return -1; }
    if (n->in[1].fn || n->in[1].leaf) { gin[1] = dp_bmm_raw(a, g, true, false); if (!gin[1]) return -1; }
    return 0;
}

static int check_mm(dp_tensor *a, dp_tensor *b, const char *op)
{
    char x[128], y[128];
    if (dp_check_same_device(2, (dp_tensor *const[]){ a, b })) return -1;
    int nd = a->ndim;
    if (a->sizes[nd - 1] != b->sizes[nd - 2])
        return dp_error("%s: shapes %s and %s cannot be multiplied (%lld columns vs %lld rows)", op,
                        dp_shape_str(a->ndim, a->sizes, x, sizeof x), dp_shape_str(b->ndim, b->sizes, y, sizeof y),
                        (long long)a->sizes[nd - 1], (long long)b->sizes[nd - 2]);
    if (a->dtype != b->dtype)
        return dp_error("%s: expected both operands to have the same dtype, got %s and %s", op, dp_dtype_name(a->dtype), dp_dtype_name(b->dtype));
    if (a->dtype == DP_BOOL) return dp_error("%s: not supported for bool tensors", op);
    return 0;
}

/* differentiable 2-D x 2-D or 3-D x 3-D (same batch) product */
static dp_tensor *bmm(dp_tensor *a, dp_tensor *b, const char *name)
{
    if (check_mm(a, b, name)) return NULL;
    dp_tensor *out = dp_bmm_raw(a, b, false, false);
    if (out && dp_needs_grad(2, (dp_tensor *const[]){ a, b })) {
        dp_node *node = dp_node_new(a->ndim == 3 ? "BmmBackward0" : "MmBackward0", mm_backward, 2, (dp_tensor *const[]){ a, b });
        if (!node) { dp_tensor_release(out); return NULL; }
        dp_node_save(node, 0, a);
        dp_node_save(node, 1, b);
        dp_attach(out, node);
    }
    return out;
}

dp_tensor *dp_mm(dp_tensor *a, dp_tensor *b)
{
    if (a->ndim != 2 || b->ndim != 2) {
        dp_error("mm: expected 2-D tensors, got %dD and %dD", a->ndim, b->ndim);
        return NULL;
    }
    return bmm(a, b, "mm");
}

dp_tensor *dp_matmul(dp_tensor *a, dp_tensor *b)
{
    if (a->ndim == 0 || b->ndim == 0) {
        dp_error("matmul: both arguments need at least 1 dimension, got %dD and %dD", a->ndim, b->ndim);
        return NULL;
    }
    if (a->ndim == 2 && b->ndim == 2) return bmm(a, b, "matmul");
    /* 1-D operands become a row (left) or a column (right), removed again at the end */
    dp_tensor *a2 = a->ndim == 1 ? dp_unsqueeze(a, 0) : (dp_tensor_retain(a), a);
    dp_tensor *b2 = b->ndim == 1 ? dp_unsqueeze(b, 1) : (dp_tensor_retain(b), b);
    dp_tensor *out = NULL, *ae = NULL, *be = NULL, *a3 = NULL, *b3 = NULL, *r3 = NULL;
    if (!a2 || !b2) goto done;
    if (a2->sizes[a2->ndim - 1] != b2->sizes[b2->ndim - 2]) { check_mm(a2, b2, "matmul"); goto done; }
    if (a2->ndim == 2 && b2->ndim == 2) out = bmm(a2, b2, "matmul");
    else {
        /* broadcast the batch dimensions, flatten them to one, multiply batched */
        int nd;
        int64_t batch[DP_MAX_DIMS], full[DP_MAX_DIMS];
        if (dp_broadcast_shape(a2->ndim - 2, a2->sizes, b2->ndim - 2, b2->sizes, &nd, batch)) goto done;
        int64_t nb = 1;
        for (int d = 0; d < nd; d++) nb *= batch[d];
        int64_t m = a2->sizes[a2->ndim - 2], k = a2->sizes[a2->ndim - 1], n = b2->sizes[b2->ndim - 1];
        memcpy(full, batch, sizeof(int64_t) * (size_t)nd);
        full[nd] = m; full[nd + 1] = k;
        ae = dp_expand(a2, nd + 2, full);
        full[nd] = k; full[nd + 1] = n;
        be = ae ? dp_expand(b2, nd + 2, full) : NULL;
        int64_t s3a[3] = { nb, m, k }, s3b[3] = { nb, k, n };
        a3 = be ? dp_reshape(ae, 3, s3a) : NULL;
        b3 = a3 ? dp_reshape(be, 3, s3b) : NULL;
        r3 = b3 ? bmm(a3, b3, "matmul") : NULL;
        full[nd] = m; full[nd + 1] = n;
        out = r3 ? dp_reshape(r3, nd + 2, full) : NULL;
    }
    if (out && (a->ndim == 1 || b->ndim == 1)) {
        dp_tensor *s = dp_squeeze(out, a->ndim == 1 ? out->ndim - 2 : out->ndim - 1);
        dp_tensor_release(out);
        out = s;
        if (out && a->ndim == 1 && b->ndim == 1) { s = dp_squeeze(out, 0); dp_tensor_release(out); out = s; }
    }
done:
    dp_tensor_release(a2); dp_tensor_release(b2); dp_tensor_release(ae); dp_tensor_release(be);
    dp_tensor_release(a3); dp_tensor_release(b3); dp_tensor_release(r3);
    return out;
}

dp_tensor *dp_addmm(dp_tensor *c, dp_tensor *a, dp_tensor *b, double beta, double alpha)
{
    dp_tensor *p = dp_mm(a, b), *pa = NULL, *cb = NULL, *out = NULL;
    if (!p) return NULL;
    if (!dp_dtype_is_float(p->dtype) && !dp_dtype_is_float(c->dtype)) {
        /* integer operands keep their dtype: PyTorch converts beta and alpha to the
           integer type (toward zero), so addmm(int64, ..., {alpha = 0.6}) scales by 0 */
        beta = trunc(beta);
        alpha = trunc(alpha);
    }
    pa = alpha == 1 ? (dp_tensor_retain(p), p) : dp_binary_scalar(DP_MUL, p, alpha, false);
    cb = beta == 1 ? (dp_tensor_retain(c), c) : dp_binary_scalar(DP_MUL, c, beta, false);
    if (pa && cb) out = dp_binary(DP_ADD, cb, pa);
    if (out && out->grad_fn) out->grad_fn->name = "AddmmBackward0";   /* the whole op, as PyTorch names it */
    dp_tensor_release(p); dp_tensor_release(pa); dp_tensor_release(cb);
    return out;
}

/* ---------------------------------------------------------------- linear: y = x W^T + b */

static int linear_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *x = dp_saved(n, 0), *w = dp_saved(n, 1);
    if (!x || !w) return -1;
    int64_t outf = g->sizes[g->ndim - 1], g2d[2] = { outf ? dp_numel(g) / outf : 0, outf };
    dp_tensor *gc = dp_contiguous(g), *g2 = gc ? dp_reshape(gc, 2, g2d) : NULL;
    dp_tensor_release(gc);
    if (!g2) return -1;
    int rc = 0;
    if (n->in[0].fn || n->in[0].leaf) {            /* dx = g W */
        dp_tensor *dx = dp_bmm_raw(g2, w, false, false);
        gin[0] = dx ? dp_reshape(dx, n->in[0].ndim, n->in[0].sizes) : NULL;
        dp_tensor_release(dx);
        if (!gin[0]) rc = -1;
    }
    if (!rc && (n->in[1].fn || n->in[1].leaf)) {   /* dW = g^T x */
        gin[1] = dp_bmm_raw(g2, x, true, false);
        if (!gin[1]) rc = -1;
    }
    if (!rc && n->n_inputs > 2 && (n->in[2].fn || n->in[2].leaf)) {  /* db = sum of g's rows */
        gin[2] = dp_reduce(DP_SUM, g2, 0, false, NULL);
        if (!gin[2]) rc = -1;
    }
    dp_tensor_release(g2);
    return rc;
}

dp_tensor *dp_linear(dp_tensor *x, dp_tensor *w, dp_tensor *b)
{
    char s1[128], s2[128];
    if (dp_check_same_device(3, (dp_tensor *const[]){ x, w, b })) return NULL;
    if (w->ndim != 2 || x->ndim < 1 || x->sizes[x->ndim - 1] != w->sizes[1]) {
        dp_error("linear: input of shape %s does not match a weight of shape %s (expected the input's last "
                 "dimension to be %lld)", dp_shape_str(x->ndim, x->sizes, s1, sizeof s1), dp_shape_str(w->ndim, w->sizes, s2, sizeof s2),
                 w->ndim == 2 ? (long long)w->sizes[1] : -1LL);
        return NULL;
    }
    if (b && (b->ndim != 1 || b->sizes[0] != w->sizes[0])) {
        dp_error("linear: bias of shape %s does not match %lld output features", dp_shape_str(b->ndim, b->sizes, s1, sizeof s1),
                 (long long)w->sizes[0]);
        return NULL;
    }
    if (x->dtype != w->dtype || (b && b->dtype != w->dtype)) {
        dp_error("linear: expected input, weight and bias of the same dtype, got %s, %s and %s", dp_dtype_name(x->dtype),
                 dp_dtype_name(w->dtype), b ? dp_dtype_name(b->dtype) : "none");
        return NULL;
    }
    int64_t in = w->sizes[1], outf = w->sizes[0], rows = dp_numel(x) / (in ? in : 1);
    int64_t s2d[2] = { rows, in };
    dp_tensor *x2 = NULL, *y = NULL, *out = NULL;
    { bool was = dp_grad_enabled(); dp_set_grad_enabled(false);
      dp_tensor *xc = dp_contiguous(x); x2 = xc ? dp_reshape(xc, 2, s2d) : NULL; dp_tensor_release(xc);
      dp_set_grad_enabled(was); }
    if (!x2) return NULL;
    int64_t ysz[2] = { rows, outf };
    y = dp_empty(2, ysz, x->dtype, x->device);
    if (!y) goto done;
    mat_layout lw = { 0 };
    dp_tensor *wc = layout_of(w, &lw) ? (dp_tensor_retain(w), w) : dp_clone(w);
    if (!wc) goto done;
    layout_of(wc, &lw);
    double beta = 0;
    if (b && rows) {     /* the bias in every row first, then one GEMM accumulates onto it */
        dp_view yv = dp_view_of(y), bv = dp_view_of(b);
        bv.ndim = 2; bv.sizes[0] = rows; bv.sizes[1] = outf; bv.strides[1] = b->strides[0]; bv.strides[0] = 0;
        if (dp_backend_for(y->device)->copy(&yv, &bv)) { dp_tensor_release(wc); goto done; }
        beta = 1;
    }
    int rc = rows && outf ? (in ? dp_half_gemm(x->device, x->dtype, false, !lw.trans, rows, outf, in, 1.0, dp_data(x2), in, 0,
                                               dp_data(wc), lw.ld, 0, beta, dp_data(y), outf, 0, 1)
                                 : (b ? 0 : dp_fill_(y, 0)))
                          : 0;
    dp_tensor_release(wc);
    if (rc) goto done;
    int64_t osz[DP_MAX_DIMS];
    memcpy(osz, x->sizes, sizeof osz);
    osz[x->ndim - 1] = outf;
    out = dp_make_view(y, x->ndim, osz, NULL, 0);
    dp_tensor *ins[3] = { x, w, b };
    if (out && dp_needs_grad(3, ins)) {
        dp_node *node = dp_node_new(x->ndim == 2 && b ? "AddmmBackward0" : "LinearBackward0", linear_backward, b ? 3 : 2, ins);
        if (!node) { dp_tensor_release(out); out = NULL; goto done; }
        dp_node_save(node, 0, x2);
        dp_node_save(node, 1, w);
        dp_attach(out, node);
    }
done:
    dp_tensor_release(x2);
    dp_tensor_release(y);
    return out;
}
