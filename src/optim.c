/* optim.c: the optimizers' updates (SGD, Adam, AdamW), one call per parameter, run by
 * the parameter's backend after the arguments are checked here. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------------- optimizer updates */

static int check_step(dp_tensor *param, dp_tensor *grad, dp_tensor *const *bufs, int nbufs, const char *op)
{
    char a[128], b[128];
    if (!dp_dtype_is_float(param->dtype)) return dp_error("%s: parameters must be floating point, got %s", op, dp_dtype_name(param->dtype));
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
    int rc = dp_half_sgd_step(param->device, param->dtype, dp_numel(param), dp_data(param), dp_data(g),
                                                     o->momentum != 0 ? dp_data(momentum_buf) : NULL, o);
    dp_tensor_release(g);
    if (!rc) { dp_bump_version(param); if (momentum_buf) dp_bump_version(momentum_buf); }
    return rc;
}

int dp_adadelta_step(dp_tensor *param, dp_tensor *grad, dp_tensor *square_avg, dp_tensor *acc_delta,
                     const dp_adadelta_opts *o)
{
    if (check_step(param, grad, (dp_tensor *const[]){ square_avg, acc_delta }, 2, "Adadelta")) return -1;
    if (!square_avg || !acc_delta) return dp_error("Adadelta: missing state buffers");
    dp_tensor *g = dp_contiguous(grad);
    if (!g) return -1;
    int rc = dp_half_adadelta_step(param->device, param->dtype, dp_numel(param), dp_data(param), dp_data(g),
                                                          dp_data(square_avg), dp_data(acc_delta), o);
    dp_tensor_release(g);
    if (!rc) { dp_bump_version(param); dp_bump_version(square_avg); dp_bump_version(acc_delta); }
    return rc;
}

int dp_adam_step(dp_tensor *param, dp_tensor *grad, dp_tensor *m, dp_tensor *v, const dp_adam_opts *o)
{
    if (check_step(param, grad, (dp_tensor *const[]){ m, v }, 2, o->decoupled ? "AdamW" : "Adam")) return -1;
    if (!m || !v) return dp_error("Adam: missing state buffers");
    dp_tensor *g = dp_contiguous(grad);
    if (!g) return -1;
    int rc = dp_half_adam_step(param->device, param->dtype, dp_numel(param), dp_data(param), dp_data(g),
                                                      dp_data(m), dp_data(v), o);
    dp_tensor_release(g);
    if (!rc) { dp_bump_version(param); dp_bump_version(m); dp_bump_version(v); }
    return rc;
}
