/* vision.c: 2-D pooling (max, average, adaptive) with its backward.  The shape rules and
 * the messages are PyTorch 1.13's; the kernels are the backends' pool2d slots, which see the
 * input as contiguous planes [N*C, H, W]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* PyTorch's pooling_output_shape: floor (or ceil) of the window count, where the last
 * window of ceil mode must start inside the input or its left padding */
static int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode)
{
    int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
    int64_t q = num / stride;
    if (num % stride != 0 && num < 0) q--;   /* floor division */
    int64_t out = q + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) out--;
    return out;
}

/* The node keeps the kernel's parameters: ip[0..7] the window, ip[8] the flags, ip[9] the
 * divisor; p[0], p[1] the output's plane size. */
enum { F_AVG = 1, F_ADAPTIVE = 2, F_COUNT_PAD = 4 };

static void params_to_node(dp_node *n, const dp_pool2d_params *p)
{
    int64_t w[8] = { p->kh, p->kw, p->sh, p->sw, p->ph, p->pw, p->dh, p->dw };
    memcpy(n->ip, w, sizeof w);
    n->ip[8] = (p->kind == DP_POOL_AVG ? F_AVG : 0) | (p->adaptive ? F_ADAPTIVE : 0) | (p->count_include_pad ? F_COUNT_PAD : 0);
    n->ip[9] = p->divisor;
    n->p[0] = (double)p->oh;
    n->p[1] = (double)p->ow;
}

static dp_pool2d_params params_from_node(const dp_node *n)
{
    const dp_edge *e = &n->in[0];
    int64_t planes = 1;
    for (int d = 0; d < e->ndim - 2; d++) planes *= e->sizes[d];
    dp_pool2d_params p = {
        .kind = n->ip[8] & F_AVG ? DP_POOL_AVG : DP_POOL_MAX, .adaptive = n->ip[8] & F_ADAPTIVE,
        .count_include_pad = n->ip[8] & F_COUNT_PAD, .divisor = n->ip[9],
        .planes = planes, .ih = e->sizes[e->ndim - 2], .iw = e->sizes[e->ndim - 1],
        .oh = (int64_t)n->p[0], .ow = (int64_t)n->p[1],
        .kh = n->ip[0], .kw = n->ip[1], .sh = n->ip[2], .sw = n->ip[3],
        .ph = n->ip[4], .pw = n->ip[5], .dh = n->ip[6], .dw = n->ip[7],
    };
    return p;
}

static int pool_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_pool2d_params p = params_from_node(n);
    dp_tensor *idx = NULL;
    if (p.kind == DP_POOL_MAX && !(idx = dp_saved(n, 0))) return -1;
    dp_tensor *z = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device);
    dp_tensor *gc = z ? dp_contiguous(g) : NULL;
    int rc = -1;
    if (gc) {
        rc = p.planes * p.oh * p.ow == 0 ? 0
           : dp_backend_for(g->device)->pool2d_backward(&p, g->dtype, g->device, dp_data(z), dp_data(gc),
                                                        idx ? dp_data(idx) : NULL);
    }
    dp_tensor_release(gc);
    if (rc) { dp_tensor_release(z); return -1; }
    gin[0] = z;
    return 0;
}

static const char *pool_name(const dp_pool2d_opts *o)
{
    if (o->adaptive) return o->kind == DP_POOL_AVG ? "adaptive_avg_pool2d" : "adaptive_max_pool2d";
    return o->kind == DP_POOL_AVG ? "avg_pool2d" : "max_pool2d";
}

/* Checks the options against the input and fills the kernel's parameters. */
static int pool_params(dp_tensor *x, const dp_pool2d_opts *o, dp_pool2d_params *p)
{
    const char *who = pool_name(o);
    char s[128];
    if (x->ndim != 3 && x->ndim != 4) {
        dp_error("%s: expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape %s", who,
                 dp_shape_str(x->ndim, x->sizes, s, sizeof s));
        return -1;
    }
    if (dp_need_float(x->dtype, who)) return -1;
    int64_t ih = x->sizes[x->ndim - 2], iw = x->sizes[x->ndim - 1], planes = 1;
    for (int d = 0; d < x->ndim - 2; d++) {
        if (x->sizes[d] == 0 && d == x->ndim - 3) {
            dp_error("%s: expected an input with non-zero channels, got shape %s", who, dp_shape_str(x->ndim, x->sizes, s, sizeof s));
            return -1;
        }
        planes *= x->sizes[d];
    }
    if (ih < 1 || iw < 1) {
        dp_error("%s: expected an input with non-zero height and width, got shape %s", who,
                 dp_shape_str(x->ndim, x->sizes, s, sizeof s));
        return -1;
    }
    memset(p, 0, sizeof *p);
    p->kind = o->kind;
    p->adaptive = o->adaptive;
    p->planes = planes;
    p->ih = ih;
    p->iw = iw;
    if (o->adaptive) {
        if (o->output_size[0] < 1 || o->output_size[1] < 1) {
            dp_error("%s: output_size must be positive, got (%lld, %lld)", who,
                     (long long)o->output_size[0], (long long)o->output_size[1]);
            return -1;
        }
        p->oh = o->output_size[0];
        p->ow = o->output_size[1];
        return 0;
    }
    const char *names[4] = { "kernel_size", "stride", "dilation", "padding" };
    const int64_t *vals[4] = { o->kernel, o->stride, o->dilation, o->padding };
    for (int i = 0; i < 4; i++) {
        if (vals[i][0] < (i < 3) || vals[i][1] < (i < 3)) {
            dp_error("%s: %s must be %s, got (%lld, %lld)", who, names[i], i < 3 ? "greater than zero" : "non-negative",
                     (long long)vals[i][0], (long long)vals[i][1]);
            return -1;
        }
        /* far beyond any input, and small enough that the output size cannot overflow */
        if (vals[i][0] > INT32_MAX || vals[i][1] > INT32_MAX) {
            dp_error("%s: %s (%lld, %lld) is too large", who, names[i], (long long)vals[i][0], (long long)vals[i][1]);
            return -1;
        }
    }
    if (o->kind == DP_POOL_AVG && (o->dilation[0] != 1 || o->dilation[1] != 1)) {
        dp_error("%s: has no dilation", who);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (o->padding[i] < 0 || o->padding[i] > o->kernel[i] / 2) {
            dp_error("%s: pad should be at most half of kernel size, but got pad=%lld and kernel_size=%lld", who,
                     (long long)o->padding[i], (long long)o->kernel[i]);
            return -1;
        }
    }
    p->kh = o->kernel[0]; p->kw = o->kernel[1];
    p->sh = o->stride[0]; p->sw = o->stride[1];
    p->ph = o->padding[0]; p->pw = o->padding[1];
    p->dh = o->dilation[0]; p->dw = o->dilation[1];
    p->count_include_pad = o->count_include_pad;
    p->divisor = o->kind == DP_POOL_AVG ? o->divisor_override : 0;
    p->oh = pool_out_size(ih, p->kh, p->ph, p->sh, p->dh, o->ceil_mode);
    p->ow = pool_out_size(iw, p->kw, p->pw, p->sw, p->dw, o->ceil_mode);
    if (p->oh < 1 || p->ow < 1) {
        dp_error("%s: given input size (%lldx%lld), the calculated output size (%lldx%lld) is too small", who,
                 (long long)ih, (long long)iw, (long long)p->oh, (long long)p->ow);
        return -1;
    }
    return 0;
}

dp_tensor *dp_pool2d(dp_tensor *x, const dp_pool2d_opts *o, dp_tensor **indices)
{
    if (indices) *indices = NULL;
    if (o->kind != DP_POOL_MAX && o->kind != DP_POOL_AVG) { dp_error("pool2d: unknown pooling kind %d", o->kind); return NULL; }
    dp_pool2d_params p;
    if (pool_params(x, o, &p)) return NULL;
    int64_t sizes[DP_MAX_DIMS];
    memcpy(sizes, x->sizes, sizeof sizes);
    sizes[x->ndim - 2] = p.oh;
    sizes[x->ndim - 1] = p.ow;
    dp_tensor *xc = NO_GRAD(dp_contiguous(x));   /* the node links to x itself */
    dp_tensor *out = xc ? dp_empty(x->ndim, sizes, x->dtype, x->device) : NULL;
    dp_tensor *idx = out && p.kind == DP_POOL_MAX ? dp_empty(x->ndim, sizes, DP_INT64, x->device) : NULL;
    if (!out || (p.kind == DP_POOL_MAX && !idx)) goto fail;
    if (p.planes > 0 && dp_backend_for(x->device)->pool2d(&p, x->dtype, x->device, dp_data(out), idx ? dp_data(idx) : NULL,
                                                          dp_data(xc)))
        goto fail;
    if (dp_needs_grad(1, &x)) {
        static const char *const names[2][2] = { { "MaxPool2DWithIndicesBackward0", "AvgPool2DBackward0" },
                                                 { "AdaptiveMaxPool2DBackward0", "AdaptiveAvgPool2DBackward0" } };
        dp_node *node = dp_node_new(names[p.adaptive][p.kind], pool_backward, 1, &x);
        if (!node) goto fail;
        params_to_node(node, &p);
        if (idx) dp_node_save(node, 0, idx);
        dp_attach(out, node);
    }
    dp_tensor_release(xc);
    if (indices) *indices = idx;
    else dp_tensor_release(idx);
    return out;
fail:
    dp_tensor_release(xc);
    dp_tensor_release(out);
    dp_tensor_release(idx);
    return NULL;
}
