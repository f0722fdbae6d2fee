/* l_attention.c: the binding of the fused attention op (torch._C.sdpa).  nn's
 * F.scaled_dot_product_attention (lua/nn/transformer.lua) checks and broadcasts the
 * arguments; this file only converts them. */
#include "l_tensor.h"
#include "../src/attention.h"

/* sdpa(q, k, v, mask|nil, is_causal, dropout_p, scale|nil) */
static int c_sdpa(lua_State *L)
{
    dp_tensor *q = lt_check(L, 1), *k = lt_check(L, 2), *v = lt_check(L, 3);
    dp_tensor *mask = lua_isnoneornil(L, 4) ? NULL : lt_check(L, 4);
    bool causal = lt_optbool(L, 5, false);
    double p = luaL_optnumber(L, 6, 0), scale = luaL_optnumber(L, 7, 0);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_sdpa(q, k, v, mask, causal, p, scale));
}

const luaL_Reg lt_attention_functions[] = { { "sdpa", c_sdpa }, { NULL, NULL } };
