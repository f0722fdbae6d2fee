/* nn.c: random numbers, dropout, losses and optimizer updates. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "philox.h"

/* ---------------------------------------------------------------- random numbers */

#define DEFAULT_SEED 67280421310721ULL   /* PyTorch's default CPU seed */
static atomic_uint_least64_t g_seed = DEFAULT_SEED;
static atomic_uint_least64_t g_offset;

void dp_manual_seed(uint64_t seed) { atomic_store(&g_seed, seed); atomic_store(&g_offset, 0); }
uint64_t dp_initial_seed(void) { return atomic_load(&g_seed); }
uint64_t dp_rng_reserve(uint64_t n) { return atomic_fetch_add(&g_offset, n); }

static int fill_random(dp_tensor *t, dp_rng_dist dist, double a, double b)
{
    int64_t n = dp_numel(t);
    if (!n) return 0;
    uint64_t seed = dp_initial_seed(), off = dp_rng_reserve((uint64_t)n);
    dp_tensor *dst = dp_is_contiguous(t) ? t : dp_empty(t->ndim, t->sizes, t->dtype, t->device);
    if (!dst) return -1;
    dp_view v = dp_view_of(dst);
    int rc = dp_backend_for(t->device)->random(dist, &v, seed, off, a, b);
    if (!rc && dst != t) rc = dp_copy_raw(t, dst);
    if (dst != t) dp_tensor_release(dst);
    if (!rc) dp_bump_version(t);
    return rc;
}

static dp_tensor *new_random(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev, dp_rng_dist dist, double a, double b)
{
    dp_tensor *t = dp_empty(ndim, sizes, dt, dev);
    if (t && fill_random(t, dist, a, b)) { dp_tensor_release(t); return NULL; }
    return t;
}

static int need_float(dp_dtype dt, const char *op)
{
    return dp_dtype_is_float(dt) ? 0 : dp_error("%s: expected a floating point dtype, got %s", op, dp_dtype_name(dt));
}

dp_tensor *dp_rand(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev)
{
    if (need_float(dt, "rand")) return NULL;
    return new_random(ndim, sizes, dt, dev, DP_RNG_UNIFORM, 0, 1);
}

dp_tensor *dp_randn(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev)
{
    if (need_float(dt, "randn")) return NULL;
    return new_random(ndim, sizes, dt, dev, DP_RNG_NORMAL, 0, 1);
}

dp_tensor *dp_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev)
{
    if (high <= low) { dp_error("randint: high (%lld) must be greater than low (%lld)", (long long)high, (long long)low); return NULL; }
    return new_random(ndim, sizes, dt, dev, DP_RNG_RANDINT, (double)low, (double)high);
}

int dp_uniform_(dp_tensor *t, double a, double b)
{
    if (dp_check_inplace(t, "uniform_") || need_float(t->dtype, "uniform_")) return -1;
    if (a > b) return dp_error("uniform_: expects a <= b, got a=%g and b=%g", a, b);
    return fill_random(t, DP_RNG_UNIFORM, a, b);
}

int dp_normal_(dp_tensor *t, double mean, double std)
{
    if (dp_check_inplace(t, "normal_") || need_float(t->dtype, "normal_")) return -1;
    if (std < 0) return dp_error("normal_: expects std >= 0, got %g", std);
    return fill_random(t, DP_RNG_NORMAL, mean, std);
}

dp_tensor *dp_randperm(int64_t n, bool use_generator, uint64_t seed, uint64_t offset)
{
    if (n < 0) { dp_error("randperm: n must be non-negative, got %lld", (long long)n); return NULL; }
    if (!use_generator) { seed = dp_initial_seed(); offset = dp_rng_reserve((uint64_t)n); }
    dp_tensor *t = dp_empty(1, &n, DP_INT64, dp_cpu());
    if (!t) return NULL;
    int64_t *p = dp_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {   /* Fisher-Yates, one Philox draw per position */
        uint32_t r[4];
        dp_philox4x32(seed, offset + (uint64_t)i, r);
        int64_t j = dp_rng_int(r, 0, i + 1), tmp = p[i];
        p[i] = p[j];
        p[j] = tmp;
    }
    return t;
}

/* ---------------------------------------------------------------- dropout */

dp_tensor *dp_dropout(dp_tensor *x, double p, bool training)
{
    if (!(p >= 0 && p <= 1)) { dp_error("dropout probability has to be between 0 and 1, but got %g", p); return NULL; }
    if (!training || p == 0) { dp_tensor_retain(x); return x; }
    if (need_float(x->dtype, "dropout")) return NULL;
    if (p == 1) return dp_binary_scalar(DP_MUL, x, 0, false);
    dp_tensor *mask = new_random(x->ndim, x->sizes, x->dtype, x->device, DP_RNG_BERNOULLI_MASK, p, 0);
    dp_tensor *out = mask ? dp_binary(DP_MUL, x, mask) : NULL;
    dp_tensor_release(mask);
    return out;
}

/* ---------------------------------------------------------------- losses */

static dp_tensor *reduce_loss(dp_tensor *per_item, dp_reduction red)
{
    if (red == DP_REDUCTION_NONE) { dp_tensor_retain(per_item); return per_item; }
    return dp_reduce(red == DP_REDUCTION_MEAN ? DP_MEAN : DP_SUM, per_item, -1, false, NULL);
}

dp_tensor *dp_mse_loss(dp_tensor *input, dp_tensor *target, dp_reduction red)
{
    char a[128], b[128];
    if (!dp_same_shape(input, target)) {
        dp_error("mse_loss: the input has shape %s but the target has shape %s (they must match)",
                 dp_shape_str(input->ndim, input->sizes, a, sizeof a), dp_shape_str(target->ndim, target->sizes, b, sizeof b));
        return NULL;
    }
    dp_tensor *d = dp_binary(DP_SUB, input, target), *sq = d ? dp_binary(DP_MUL, d, d) : NULL;
    dp_tensor *out = sq ? reduce_loss(sq, red) : NULL;
    dp_tensor_release(d);
    dp_tensor_release(sq);
    return out;
}

static int nll_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *target = dp_saved(n, 0);
    if (!target) return -1;
    dp_tensor *z = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device), *z2 = NULL;
    if (!z) return -1;
    z2 = z->ndim == 1 ? dp_unsqueeze(z, 0) : dp_alias(z);
    dp_tensor *gc = dp_contiguous(g);
    int rc = -1;
    if (z2 && gc) {
        dp_view zv = dp_view_of(z2), gv = dp_view_of(gc), tv = dp_view_of(target);
        rc = dp_backend_for(g->device)->nll_loss_backward(&zv, &gv, &tv, n->ip[0] == DP_REDUCTION_NONE, n->p[0]);
    }
    dp_tensor_release(z2);
    dp_tensor_release(gc);
    if (rc) { dp_tensor_release(z); return -1; }
    gin[0] = z;
    return 0;
}

dp_tensor *dp_nll_loss(dp_tensor *input, dp_tensor *target, dp_reduction red)
{
    char a[128], b[128];
    if (dp_check_same_device(2, (dp_tensor *const[]){ input, target })) return NULL;
    if (target->dtype != DP_INT64) { dp_error("nll_loss: the target must be an int64 tensor of class indices, got %s", dp_dtype_name(target->dtype)); return NULL; }
    bool single = input->ndim == 1;
    if (!(input->ndim == 2 || single) || (single ? target->ndim != 0 && !(target->ndim == 1 && target->sizes[0] == 1)
                                                 : target->ndim != 1 || target->sizes[0] != input->sizes[0])) {
        dp_error("nll_loss: expected input [N, C] with target [N] (or input [C] with one target), got input %s and target %s",
                 dp_shape_str(input->ndim, input->sizes, a, sizeof a), dp_shape_str(target->ndim, target->sizes, b, sizeof b));
        return NULL;
    }
    if (need_float(input->dtype, "nll_loss")) return NULL;
    int64_t N = single ? 1 : input->sizes[0], C = input->sizes[input->ndim - 1];
    /* range-check the targets on the host */
    int64_t bad, *t = dp_indices_to_host(target, N, C, &bad);
    if (!t) return NULL;
    if (bad >= 0)
        dp_error("target %lld at position %lld is out of bounds: class indices must be between 1 and %lld",
                 (long long)t[bad] + 1, (long long)bad + 1, (long long)C);
    free(t);
    if (bad >= 0) return NULL;
    int64_t one = 1;
    dp_tensor *tg = dp_reshape(target, 1, &one), *in2 = NULL, *out = NULL;
    if (!single) { dp_tensor_release(tg); tg = dp_contiguous(target); }
    in2 = single ? dp_unsqueeze(input, 0) : dp_alias(input);
    if (!tg || !in2) goto done;
    bool per_item = red == DP_REDUCTION_NONE;
    out = per_item && !single ? dp_empty(1, &N, input->dtype, input->device) : dp_empty(0, NULL, input->dtype, input->device);
    if (!out) goto done;
    dp_view ov = dp_view_of(out), iv = dp_view_of(in2), tv = dp_view_of(tg);
    if (per_item && single) { ov.ndim = 1; ov.sizes[0] = 1; ov.strides[0] = 1; }
    if (N == 0) dp_fill_(out, red == DP_REDUCTION_MEAN ? NAN : 0);
    else if (dp_backend_for(input->device)->nll_loss(&ov, &iv, &tv, per_item)) { dp_tensor_release(out); out = NULL; goto done; }
    if (red == DP_REDUCTION_MEAN && N > 0) {
        dp_view o2 = dp_view_of(out);
        if (dp_backend_for(input->device)->binary_scalar(DP_DIV, &o2, &o2, (double)N, false)) { dp_tensor_release(out); out = NULL; goto done; }
    }
    if (dp_needs_grad(1, &input)) {
        dp_node *node = dp_node_new("NllLossBackward0", nll_backward, 1, &input);
        if (!node) { dp_tensor_release(out); out = NULL; goto done; }
        node->ip[0] = red;
        node->p[0] = red == DP_REDUCTION_MEAN && N ? 1.0 / (double)N : 1.0;
        dp_node_save(node, 0, tg);
        dp_attach(out, node);
    }
done:
    dp_tensor_release(tg);
    dp_tensor_release(in2);
    return out;
}

dp_tensor *dp_cross_entropy(dp_tensor *input, dp_tensor *target, dp_reduction red)
{
    dp_tensor *ls = dp_log_softmax(input, input->ndim == 1 ? 0 : 1);
    dp_tensor *out = ls ? dp_nll_loss(ls, target, red) : NULL;
    dp_tensor_release(ls);
    return out;
}

/* ---------------------------------------------------------------- optimizer updates */

static int check_step(dp_tensor *param, dp_tensor *grad, dp_tensor *const *bufs, int nbufs, const char *op)
{
    char a[128], b[128];
    if (!dp_dtype_is_float(param->dtype)) return dp_error("%s: parameters must be float32 or float64, got %s", op, dp_dtype_name(param->dtype));
    if (!dp_is_contiguous(param)) return dp_error("%s: the parameter must be contiguous", op);
    if (!dp_same_shape(param, grad) || grad->dtype != param->dtype)
        return dp_error("%s: the gradient (%s %s) does not match the parameter (%s %s)", op,
                        dp_shape_str(grad->ndim, grad->sizes, a, sizeof a), dp_dtype_name(grad->dtype),
                        dp_shape_str(param->ndim, param->sizes, b, sizeof b), dp_dtype_name(param->dtype));
    if (dp_check_same_device(2, (dp_tensor *const[]){ param, grad })) return -1;
    for (int i = 0; i < nbufs; i++) {
        if (!bufs[i]) continue;
        if (!dp_same_shape(bufs[i], param) || bufs[i]->dtype != param->dtype || !dp_is_contiguous(bufs[i]) ||
            !dp_device_eq(bufs[i]->device, param->device))
            return dp_error("%s: optimizer state %d does not match its parameter (shape, dtype, device)", op, i + 1);
    }
    return 0;
}

int dp_sgd_step(dp_tensor *param, dp_tensor *grad, dp_tensor *momentum_buf, const dp_sgd_opts *o)
{
    if (check_step(param, grad, &momentum_buf, 1, "SGD")) return -1;
    if (o->momentum != 0 && !momentum_buf) return dp_error("SGD: momentum %g needs a momentum buffer", o->momentum);
    dp_tensor *g = dp_contiguous(grad);
    if (!g) return -1;
    int rc = dp_backend_for(param->device)->sgd_step(param->dtype, dp_numel(param), dp_data(param), dp_data(g),
                                                     o->momentum != 0 ? dp_data(momentum_buf) : NULL, o);
    dp_tensor_release(g);
    if (!rc) { dp_bump_version(param); if (momentum_buf) dp_bump_version(momentum_buf); }
    return rc;
}

int dp_adam_step(dp_tensor *param, dp_tensor *grad, dp_tensor *m, dp_tensor *v, const dp_adam_opts *o)
{
    if (check_step(param, grad, (dp_tensor *const[]){ m, v }, 2, o->decoupled ? "AdamW" : "Adam")) return -1;
    if (!m || !v) return dp_error("Adam: missing state buffers");
    dp_tensor *g = dp_contiguous(grad);
    if (!g) return -1;
    int rc = dp_backend_for(param->device)->adam_step(param->dtype, dp_numel(param), dp_data(param), dp_data(g),
                                                      dp_data(m), dp_data(v), o);
    dp_tensor_release(g);
    if (!rc) { dp_bump_version(param); dp_bump_version(m); dp_bump_version(v); }
    return rc;
}
