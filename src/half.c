/* half.c: float16 and bfloat16 compute.  The backends store the 2-byte types (fill and
 * copy convert them, half.h) and compute in float32: every other kernel is reached through
 * a wrapped table (dp_half_backend) that hands it float32 copies of its float16/bfloat16
 * operands and rounds the float32 results back into the real outputs.  So every op takes
 * the new dtypes with no kernel written for them, and computes as PyTorch does on the CPU
 * (in float32, one rounding at the end).  A backend with a native kernel (cuBLAS GemmEx for
 * matrix products) is called directly.  Kernels that take raw pointers without a device
 * (gemm, the convolutions) are converted here for the ops that call them (dp_half_gemm,
 * dp_half_conv). */
#include <string.h>

#include "half.h"
#include "internal.h"

#define HS_MAX 8

/* The float32 stand-ins of one kernel call: made before it, rounded back and released after. */
typedef struct {
    const dp_backend *b;
    int n;
    dp_tensor *tmp[HS_MAX];
    dp_view back[HS_MAX];     /* the real output of tmp[i] */
    bool write[HS_MAX];
    int rc;
} half_scope;

static const dp_backend *g_inner[DP_NDEVICE_TYPES];
static dp_backend g_wrapped[DP_NDEVICE_TYPES];

static bool is_half(int dt) { return dt == DP_FLOAT16 || dt == DP_BFLOAT16; }
static bool view_is_half(const dp_view *v) { return v && is_half(v->dtype); }

/* A float32 stand-in for v (NULL stays NULL, other dtypes stay themselves): with v's values
 * when read, rounded back into v by hs_end when write.  A read-only operand keeps its
 * broadcast (stride 0) dimensions at size 1. */
static const dp_view *hs_view(half_scope *s, const dp_view *v, dp_view *f, bool read, bool write)
{
    if (!view_is_half(v) || s->rc) return v;
    if (s->n == HS_MAX) { s->rc = dp_error("half: too many float16/bfloat16 operands in one kernel"); return v; }
    int64_t sizes[DP_MAX_DIMS];
    for (int d = 0; d < v->ndim; d++) sizes[d] = !write && v->strides[d] == 0 ? 1 : v->sizes[d];
    dp_tensor *t = dp_empty(v->ndim, sizes, DP_FLOAT32, v->device);
    if (!t) { s->rc = -1; return v; }
    s->tmp[s->n] = t;
    s->back[s->n] = *v;
    s->write[s->n++] = write;
    *f = dp_view_of(t);
    int64_t numel = 1;
    for (int d = 0; d < v->ndim; d++) numel *= v->sizes[d];
    if (read && numel) {
        dp_view src = *v;
        for (int d = 0; d < v->ndim; d++) src.sizes[d] = sizes[d];
        if (s->b->copy(f, &src)) { s->rc = -1; return v; }
    }
    for (int d = 0; d < v->ndim; d++) { f->sizes[d] = v->sizes[d]; if (sizes[d] != v->sizes[d]) f->strides[d] = 0; }
    return f;
}

/* n contiguous elements at p on dev as a 1-D view */
static dp_view flat(dp_device dev, int dtype, const void *p, int64_t n)
{
    dp_view v = { .data = (void *)p, .dtype = dtype, .ndim = 1, .sizes = { n }, .strides = { 1 }, .device = dev };
    return v;
}

/* the raw-pointer form: n contiguous elements; returns the float32 pointer */
static void *hs_ptr(half_scope *s, dp_device dev, int dtype, const void *p, int64_t n, bool read, bool write)
{
    if (!p || !is_half(dtype)) return (void *)p;
    dp_view v = flat(dev, dtype, p, n), f;
    const dp_view *r = hs_view(s, &v, &f, read, write);
    return r == &f ? f.data : NULL;
}

/* Rounds the outputs back (when the kernel succeeded) and releases the stand-ins. */
static int hs_end(half_scope *s, int rc)
{
    if (s->rc) rc = -1;
    for (int i = 0; i < s->n; i++) {
        if (!rc && s->write[i] && dp_numel(s->tmp[i])) {
            dp_view f = dp_view_of(s->tmp[i]);
            rc = s->b->copy(&s->back[i], &f);
        }
        dp_tensor_release(s->tmp[i]);
    }
    return rc;
}

#define SCOPE(dev) half_scope s_ = { .b = g_inner[(dev).type] }; half_scope *s = &s_
#define IN(v, f) hs_view(s, v, &f, true, false)
#define OUT(v, f) hs_view(s, v, &f, false, true)
#define INOUT(v, f) hs_view(s, v, &f, true, true)
#define FDT(dt) (is_half(dt) ? DP_FLOAT32 : (dt))
/* the call, when the scope has not failed */
#define CALL(expr) hs_end(s, s->rc ? -1 : (expr))

/* ---------------------------------------------------------------- the view kernels */

static int h_unary(dp_unary_op op, const dp_view *out, const dp_view *in, double p0, double p1)
{
    if (!view_is_half(out) && !view_is_half(in)) return g_inner[out->device.type]->unary(op, out, in, p0, p1);
    SCOPE(out->device); dp_view fo, fi;
    const dp_view *o = OUT(out, fo), *i = IN(in, fi);
    return CALL(s->b->unary(op, o, i, p0, p1));
}

static int h_binary(dp_binary_op op, const dp_view *out, const dp_view *a, const dp_view *b)
{
    if (!view_is_half(out) && !view_is_half(a) && !view_is_half(b)) return g_inner[out->device.type]->binary(op, out, a, b);
    SCOPE(out->device); dp_view fo, fa, fb;
    const dp_view *o = OUT(out, fo), *x = IN(a, fa), *y = IN(b, fb);
    return CALL(s->b->binary(op, o, x, y));
}

static int h_binary_scalar(dp_binary_op op, const dp_view *out, const dp_view *a, double v, bool reverse)
{
    if (!view_is_half(out) && !view_is_half(a)) return g_inner[out->device.type]->binary_scalar(op, out, a, v, reverse);
    /* the scalar takes the tensor's dtype first, as PyTorch's CPU kernels take it */
    if (a->dtype == DP_FLOAT16) v = dp_f16_to_float(dp_float_to_f16((float)v));
    else if (a->dtype == DP_BFLOAT16) v = dp_bf16_to_float(dp_float_to_bf16((float)v));
    SCOPE(out->device); dp_view fo, fa;
    const dp_view *o = OUT(out, fo), *x = IN(a, fa);
    return CALL(s->b->binary_scalar(op, o, x, v, reverse));
}

static int h_where(const dp_view *out, const dp_view *cond, const dp_view *a, const dp_view *b)
{
    if (!view_is_half(out)) return g_inner[out->device.type]->where(out, cond, a, b);
    SCOPE(out->device); dp_view fo, fa, fb;
    const dp_view *o = OUT(out, fo), *x = IN(a, fa), *y = IN(b, fb);
    return CALL(s->b->where(o, cond, x, y));
}

static int h_reduce(dp_reduce_op op, const dp_view *out, const dp_view *idx, const dp_view *in, int dim)
{
    if (!view_is_half(out) && !view_is_half(in)) return g_inner[in->device.type]->reduce(op, out, idx, in, dim);
    SCOPE(in->device); dp_view fo, fi;
    const dp_view *o = OUT(out, fo), *i = IN(in, fi);
    return CALL(s->b->reduce(op, o, idx, i, dim));
}

static int h_softmax(bool log, const dp_view *out, const dp_view *in, int dim)
{
    if (!view_is_half(out)) return g_inner[out->device.type]->softmax(log, out, in, dim);
    SCOPE(out->device); dp_view fo, fi;
    const dp_view *o = OUT(out, fo), *i = IN(in, fi);
    return CALL(s->b->softmax(log, o, i, dim));
}

static int h_softmax_backward(bool log, const dp_view *gin, const dp_view *gout, const dp_view *y, int dim)
{
    if (!view_is_half(gin)) return g_inner[gin->device.type]->softmax_backward(log, gin, gout, y, dim);
    SCOPE(gin->device); dp_view f1, f2, f3;
    const dp_view *gi = OUT(gin, f1), *go = IN(gout, f2), *yy = IN(y, f3);
    return CALL(s->b->softmax_backward(log, gi, go, yy, dim));
}

static int h_index_select(const dp_view *out, const dp_view *in, int dim, const dp_view *idx)
{
    if (!view_is_half(out)) return g_inner[out->device.type]->index_select(out, in, dim, idx);
    SCOPE(out->device); dp_view fo, fi;
    const dp_view *o = OUT(out, fo), *i = IN(in, fi);
    return CALL(s->b->index_select(o, i, dim, idx));
}

static int h_index_add(const dp_view *gin, int dim, const dp_view *idx, const dp_view *src)
{
    if (!view_is_half(gin)) return g_inner[gin->device.type]->index_add(gin, dim, idx, src);
    SCOPE(gin->device); dp_view fg, fs;
    const dp_view *g = INOUT(gin, fg), *x = IN(src, fs);
    return CALL(s->b->index_add(g, dim, idx, x));
}

static int h_random(int dist, const dp_view *out, uint64_t seed, uint64_t offset, double a, double b)
{
    if (!view_is_half(out)) return g_inner[out->device.type]->random(dist, out, seed, offset, a, b);
    SCOPE(out->device); dp_view fo;
    const dp_view *o = OUT(out, fo);
    return CALL(s->b->random(dist, o, seed, offset, a, b));
}

static int h_nll_loss(const dp_view *out, const dp_view *input, const dp_view *target, bool per_item)
{
    if (!view_is_half(out)) return g_inner[out->device.type]->nll_loss(out, input, target, per_item);
    SCOPE(out->device); dp_view fo, fi;
    const dp_view *o = OUT(out, fo), *i = IN(input, fi);
    return CALL(s->b->nll_loss(o, i, target, per_item));
}

static int h_nll_loss_backward(const dp_view *gin, const dp_view *gout, const dp_view *target, bool per_item, double scale)
{
    if (!view_is_half(gin)) return g_inner[gin->device.type]->nll_loss_backward(gin, gout, target, per_item, scale);
    SCOPE(gin->device); dp_view f1, f2;
    const dp_view *gi = INOUT(gin, f1), *go = IN(gout, f2);
    return CALL(s->b->nll_loss_backward(gi, go, target, per_item, scale));
}

static int h_layer_norm(const dp_view *out, const dp_view *mean, const dp_view *rstd, const dp_view *x,
                        const dp_view *weight, const dp_view *bias, int64_t rows, int64_t cols, double eps)
{
    if (!view_is_half(out)) return g_inner[out->device.type]->layer_norm(out, mean, rstd, x, weight, bias, rows, cols, eps);
    SCOPE(out->device); dp_view f1, f2, f3, f4, f5, f6;
    const dp_view *o = OUT(out, f1), *m = OUT(mean, f2), *r = OUT(rstd, f3), *xx = IN(x, f4), *w = IN(weight, f5),
                  *b = IN(bias, f6);
    return CALL(s->b->layer_norm(o, m, r, xx, w, b, rows, cols, eps));
}

static int h_layer_norm_backward(const dp_view *grad_x, const dp_view *grad_weight, const dp_view *grad_bias,
                                 const dp_view *grad_out, const dp_view *x, const dp_view *mean, const dp_view *rstd,
                                 const dp_view *weight, int64_t rows, int64_t cols)
{
    if (!view_is_half(grad_out))
        return g_inner[grad_out->device.type]->layer_norm_backward(grad_x, grad_weight, grad_bias, grad_out, x, mean, rstd,
                                                                   weight, rows, cols);
    SCOPE(grad_out->device); dp_view f[8];
    const dp_view *gx = OUT(grad_x, f[0]), *gw = OUT(grad_weight, f[1]), *gb = OUT(grad_bias, f[2]), *go = IN(grad_out, f[3]),
                  *xx = IN(x, f[4]), *m = IN(mean, f[5]), *r = IN(rstd, f[6]), *w = IN(weight, f[7]);
    return CALL(s->b->layer_norm_backward(gx, gw, gb, go, xx, m, r, w, rows, cols));
}

static int h_gather_offsets(const dp_view *out, const dp_view *base, const dp_view *offs)
{
    if (!view_is_half(out)) return g_inner[out->device.type]->gather_offsets(out, base, offs);
    /* a plain element move: the 2-byte elements go as they are through a same-size dtype
     * would be quicker, but the float32 round trip is exact */
    SCOPE(out->device); dp_view fo, fb;
    const dp_view *o = OUT(out, fo), *b = IN(base, fb);
    return CALL(s->b->gather_offsets(o, b, offs));
}

static int h_scatter_offsets(const dp_view *base, const dp_view *offs, const dp_view *src, int mode)
{
    if (!view_is_half(base)) return g_inner[base->device.type]->scatter_offsets(base, offs, src, mode);
    SCOPE(base->device); dp_view fb, fs;
    const dp_view *b = INOUT(base, fb), *x = IN(src, fs);
    return CALL(s->b->scatter_offsets(b, offs, x, mode));
}

/* ---------------------------------------------------------------- the raw kernels with a device */

static int h_pool2d(const dp_pool2d_params *p, int dtype, dp_device dev, void *out, int64_t *idx, const void *in)
{
    if (!is_half(dtype)) return g_inner[dev.type]->pool2d(p, dtype, dev, out, idx, in);
    SCOPE(dev);
    void *o = hs_ptr(s, dev, dtype, out, p->planes * p->oh * p->ow, false, true);
    const void *i = hs_ptr(s, dev, dtype, in, p->planes * p->ih * p->iw, true, false);
    return CALL(s->b->pool2d(p, DP_FLOAT32, dev, o, idx, i));
}

static int h_pool2d_backward(const dp_pool2d_params *p, int dtype, dp_device dev, void *grad_in, const void *grad_out,
                             const int64_t *idx)
{
    if (!is_half(dtype)) return g_inner[dev.type]->pool2d_backward(p, dtype, dev, grad_in, grad_out, idx);
    SCOPE(dev);
    void *gi = hs_ptr(s, dev, dtype, grad_in, p->planes * p->ih * p->iw, true, true);
    const void *go = hs_ptr(s, dev, dtype, grad_out, p->planes * p->oh * p->ow, true, false);
    return CALL(s->b->pool2d_backward(p, DP_FLOAT32, dev, gi, go, idx));
}

static int h_sort_rows(dp_device dev, int dtype, int64_t rows, int64_t n, int64_t k, const void *in, void *values,
                       int64_t *indices, bool descending)
{
    if (!is_half(dtype)) return g_inner[dev.type]->sort_rows(dev, dtype, rows, n, k, in, values, indices, descending);
    SCOPE(dev);
    const void *i = hs_ptr(s, dev, dtype, in, rows * n, true, false);
    void *v = hs_ptr(s, dev, dtype, values, rows * k, false, true);
    return CALL(s->b->sort_rows(dev, DP_FLOAT32, rows, n, k, i, v, indices, descending));
}

static int h_scan_rows(dp_device dev, int op, int dtype, int64_t rows, int64_t n, const void *in, void *out,
                       int64_t *indices, bool reverse)
{
    if (!is_half(dtype)) return g_inner[dev.type]->scan_rows(dev, op, dtype, rows, n, in, out, indices, reverse);
    SCOPE(dev);
    const void *i = hs_ptr(s, dev, dtype, in, rows * n, true, false);
    void *o = hs_ptr(s, dev, dtype, out, rows * n, false, true);
    return CALL(s->b->scan_rows(dev, op, DP_FLOAT32, rows, n, i, o, indices, reverse));
}

static int h_scatter_add_rows(dp_device dev, int dtype, int64_t rows, int64_t n_src, int64_t n_out, const void *src,
                              const int64_t *idx, void *out)
{
    if (!is_half(dtype)) return g_inner[dev.type]->scatter_add_rows(dev, dtype, rows, n_src, n_out, src, idx, out);
    SCOPE(dev);
    const void *x = hs_ptr(s, dev, dtype, src, rows * n_src, true, false);
    void *o = hs_ptr(s, dev, dtype, out, rows * n_out, true, true);
    return CALL(s->b->scatter_add_rows(dev, DP_FLOAT32, rows, n_src, n_out, x, idx, o));
}

/* ---------------------------------------------------------------- the kernels without a device */

/* elements from the first to the last of `batch` matrices of rows x cols, ld apart, stride apart */
static int64_t span(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch)
{
    if (rows == 0 || cols == 0 || batch == 0) return 0;
    return (batch - 1) * (stride > 0 ? stride : 0) + (rows - 1) * ld + cols;
}

int dp_half_gemm(dp_device dev, int dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                 const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                 double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    const dp_backend *be = dp_backend_for(dev);
    if (!be) return -1;
    if (!is_half(dtype) || be->gemm_half)
        return (is_half(dtype) ? be->gemm_half : be->gemm)(dtype, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                                                            beta, c, ldc, stride_c, batch);
    /* the whole span of each operand converts (gaps between rows round-trip exactly) */
    SCOPE(dev);
    const void *fa = hs_ptr(s, dev, dtype, a, span(ta ? k : m, ta ? m : k, lda, stride_a, batch), true, false);
    const void *fb = hs_ptr(s, dev, dtype, b, span(tb ? n : k, tb ? k : n, ldb, stride_b, batch), true, false);
    void *fc = hs_ptr(s, dev, dtype, c, span(m, n, ldc, stride_c, batch), beta != 0, true);
    return CALL(s->b->gemm(DP_FLOAT32, ta, tb, m, n, k, alpha, fa, lda, stride_a, fb, ldb, stride_b, beta, fc, ldc, stride_c,
                           batch));
}

static int64_t prod3(const int64_t *v) { return v[0] * v[1] * v[2]; }

int dp_half_conv(dp_device dev, dp_half_conv_kind kind, int dtype, const dp_conv_geom *g, void *out, const void *x,
                 const void *y, const void *bias)
{
    const dp_backend *be = dp_backend_for(dev);
    if (!be) return -1;
    if (!is_half(dtype)) {
        switch (kind) {
        case DP_CONV_FORWARD: return be->conv_forward(dtype, g, out, x, y, bias);
        case DP_CONV_BACKWARD_INPUT: return be->conv_backward_input(dtype, g, out, x, y);
        default: return be->conv_backward_weight(dtype, g, out, x, y);
        }
    }
    int64_t image = g->batch * g->in_channels * prod3(g->in), output = g->batch * g->out_channels * prod3(g->out);
    int64_t weight = g->out_channels * (g->in_channels / g->groups) * prod3(g->kernel);
    SCOPE(dev);
    switch (kind) {
    case DP_CONV_FORWARD: {     /* out: output side, x: image, y: weight */
        void *o = hs_ptr(s, dev, dtype, out, output, false, true);
        const void *i = hs_ptr(s, dev, dtype, x, image, true, false), *w = hs_ptr(s, dev, dtype, y, weight, true, false);
        const void *b = hs_ptr(s, dev, dtype, bias, g->out_channels, true, false);
        return CALL(s->b->conv_forward(DP_FLOAT32, g, o, i, w, b));
    }
    case DP_CONV_BACKWARD_INPUT: {   /* out: image side, x: output side, y: weight */
        void *o = hs_ptr(s, dev, dtype, out, image, false, true);
        const void *go = hs_ptr(s, dev, dtype, x, output, true, false), *w = hs_ptr(s, dev, dtype, y, weight, true, false);
        return CALL(s->b->conv_backward_input(DP_FLOAT32, g, o, go, w));
    }
    default: {                   /* out: weight, x: output side, y: image */
        void *o = hs_ptr(s, dev, dtype, out, weight, false, true);
        const void *go = hs_ptr(s, dev, dtype, x, output, true, false), *i = hs_ptr(s, dev, dtype, y, image, true, false);
        return CALL(s->b->conv_backward_weight(DP_FLOAT32, g, o, go, i));
    }
    }
}

int dp_half_sgd_step(dp_device dev, int dtype, int64_t n, void *param, const void *grad, void *buf, const dp_sgd_opts *o)
{
    const dp_backend *be = dp_backend_for(dev);
    if (!be) return -1;
    if (!is_half(dtype)) return be->sgd_step(dtype, n, param, grad, buf, o);
    SCOPE(dev);
    void *p = hs_ptr(s, dev, dtype, param, n, true, true), *b = hs_ptr(s, dev, dtype, buf, n, true, true);
    const void *g = hs_ptr(s, dev, dtype, grad, n, true, false);
    return CALL(s->b->sgd_step(DP_FLOAT32, n, p, g, b, o));
}

int dp_half_adam_step(dp_device dev, int dtype, int64_t n, void *param, const void *grad, void *m, void *v,
                      const dp_adam_opts *o)
{
    const dp_backend *be = dp_backend_for(dev);
    if (!be) return -1;
    if (!is_half(dtype)) return be->adam_step(dtype, n, param, grad, m, v, o);
    SCOPE(dev);
    void *p = hs_ptr(s, dev, dtype, param, n, true, true), *fm = hs_ptr(s, dev, dtype, m, n, true, true);
    void *fv = hs_ptr(s, dev, dtype, v, n, true, true);
    const void *g = hs_ptr(s, dev, dtype, grad, n, true, false);
    return CALL(s->b->adam_step(DP_FLOAT32, n, p, g, fm, fv, o));
}

int dp_half_adadelta_step(dp_device dev, int dtype, int64_t n, void *param, const void *grad, void *square_avg,
                          void *acc_delta, const dp_adadelta_opts *o)
{
    const dp_backend *be = dp_backend_for(dev);
    if (!be) return -1;
    if (!is_half(dtype)) return be->adadelta_step(dtype, n, param, grad, square_avg, acc_delta, o);
    SCOPE(dev);
    void *p = hs_ptr(s, dev, dtype, param, n, true, true), *sq = hs_ptr(s, dev, dtype, square_avg, n, true, true);
    void *ad = hs_ptr(s, dev, dtype, acc_delta, n, true, true);
    const void *g = hs_ptr(s, dev, dtype, grad, n, true, false);
    return CALL(s->b->adadelta_step(DP_FLOAT32, n, p, g, sq, ad, o));
}

/* ---------------------------------------------------------------- the wrapped table */

const dp_backend *dp_half_backend(dp_device_type type, const dp_backend *inner)
{
    if (!inner || (unsigned)type >= DP_NDEVICE_TYPES) return inner;
    if (g_inner[type] == inner) return &g_wrapped[type];
    dp_backend w = *inner;
    w.unary = h_unary;
    w.binary = h_binary;
    w.binary_scalar = h_binary_scalar;
    w.where = h_where;
    w.reduce = h_reduce;
    w.softmax = h_softmax;
    w.softmax_backward = h_softmax_backward;
    w.index_select = h_index_select;
    w.index_add = h_index_add;
    w.random = h_random;
    w.nll_loss = h_nll_loss;
    w.nll_loss_backward = h_nll_loss_backward;
    if (inner->layer_norm) w.layer_norm = h_layer_norm;
    if (inner->layer_norm_backward) w.layer_norm_backward = h_layer_norm_backward;
    if (inner->gather_offsets) w.gather_offsets = h_gather_offsets;
    if (inner->scatter_offsets) w.scatter_offsets = h_scatter_offsets;
    if (inner->pool2d) w.pool2d = h_pool2d;
    if (inner->pool2d_backward) w.pool2d_backward = h_pool2d_backward;
    if (inner->sort_rows) w.sort_rows = h_sort_rows;
    if (inner->scan_rows) w.scan_rows = h_scan_rows;
    if (inner->scatter_add_rows) w.scatter_add_rows = h_scatter_add_rows;
    g_wrapped[type] = w;
    g_inner[type] = inner;
    return &g_wrapped[type];
}
