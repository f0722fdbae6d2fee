/* l_vision.c: the binding of the vision layers' engine calls (torch._C.pool2d and the
 * differentiable torch._C.all_reduce_sum of nn.SyncBatchNorm).  nn's
 * functional.lua checks and normalises the arguments; this file only converts them. */
#include "l_tensor.h"
#include "../src/dist.h"

/* pool2d(x, kind, adaptive, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode, count_include_pad,
 * divisor_override, return_indices): kind is 'max' or 'avg'; when adaptive, (kh, kw) is the
 * output size.  Returns the output and, when asked, the 1-based flat indices of the maxima
 * within each plane. */
static int c_pool2d(lua_State *L)
{
    static const char *const kinds[] = { "max", "avg", NULL };
    dp_tensor *x = lt_check(L, 1);
    dp_pool2d_opts o = { .kind = luaL_checkoption(L, 2, NULL, kinds), .adaptive = lt_optbool(L, 3, false) };
    int64_t v[8];
    for (int i = 0; i < 8; i++) v[i] = (int64_t)luaL_checkinteger(L, 4 + i);
    if (o.adaptive) { o.output_size[0] = v[0]; o.output_size[1] = v[1]; }
    o.kernel[0] = v[0]; o.kernel[1] = v[1];
    o.stride[0] = v[2]; o.stride[1] = v[3];
    o.padding[0] = v[4]; o.padding[1] = v[5];
    o.dilation[0] = v[6]; o.dilation[1] = v[7];
    o.ceil_mode = lt_optbool(L, 12, false);
    o.count_include_pad = lt_optbool(L, 13, false);
    o.divisor_override = (int64_t)luaL_optinteger(L, 14, 0);
    bool want = lt_optbool(L, 15, false);
    dp_tensor **out = lt_newslot(L), **idx = want ? lt_newslot(L) : NULL;
    *out = dp_pool2d(x, &o, idx);
    lt_done(L, *out);
    if (!want) return 1;
    dp_tensor *zero_based = *idx;
    *idx = dp_binary_scalar(DP_ADD, zero_based, 1, false);
    dp_tensor_release(zero_based);
    lt_done(L, *idx);
    return 2;
}

/* all_reduce_sum(t): t summed over the ranks, differentiable (nn.SyncBatchNorm) */
static int c_all_reduce_sum(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_dist_all_reduce_sum_autograd(t));
}

const luaL_Reg lt_vision_functions[] = {
    { "pool2d", c_pool2d }, { "all_reduce_sum", c_all_reduce_sum }, { NULL, NULL }
};
