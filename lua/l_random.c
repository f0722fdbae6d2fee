/* l_random.c: the random draws that take a stream (a torch.Generator's seed and offset, or
 * a piece of the global stream reserved here): torch/random.lua builds the user-facing
 * functions on these. */
#include "l_tensor.h"

/* rng_reserve(n) -> seed, offset: n counters of the global stream */
static int c_rng_reserve(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 0, 1, "a non-negative count");
    lua_pushinteger(L, (lua_Integer)dp_initial_seed());
    lua_pushinteger(L, (lua_Integer)dp_rng_reserve((uint64_t)n));
    return 2;
}

/* rng_counters(dist, dtype, n) -> the counters a draw of n elements takes (dp.h) */
static int c_rng_counters(lua_State *L)
{
    int dist = (int)luaL_checkinteger(L, 1);
    dp_dtype dt = lt_check_dtype(L, 2);
    lua_Integer n = luaL_checkinteger(L, 3);
    luaL_argcheck(L, n >= 0, 3, "a non-negative count");
    lua_pushinteger(L, (lua_Integer)dp_rng_counters(dist, dt, (int64_t)n));
    return 1;
}

/* random_fill_(t, dist, a, b, seed, offset) -> t */
static int c_random_fill_(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dist = (int)luaL_checkinteger(L, 2);
    double a = luaL_checknumber(L, 3), b = luaL_checknumber(L, 4);
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 5), offset = (uint64_t)luaL_checkinteger(L, 6);
    if (dp_random_fill_(t, dist, a, b, seed, offset)) return lt_raise(L);
    lua_settop(L, 1);
    return 1;
}

/* multinomial(probs, n, replacement, seed, offset) -> int64 indices counting from 1 */
static int c_multinomial(lua_State *L)
{
    dp_tensor *p = lt_check(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    bool replacement = lt_optbool(L, 3, false);
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 4), offset = (uint64_t)luaL_checkinteger(L, 5);
    dp_tensor **slot = lt_newslot(L);
    dp_tensor *zero_based = dp_multinomial(p, (int64_t)n, replacement, seed, offset);
    *slot = zero_based ? dp_binary_scalar(DP_ADD, zero_based, 1, false) : NULL;
    dp_tensor_release(zero_based);
    return lt_done(L, *slot);
}

/* randperm_stream(n, seed, offset) -> a permutation of 1..n (int64, cpu) */
static int c_randperm_stream(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 2), offset = (uint64_t)luaL_checkinteger(L, 3);
    lt_randperm(L, n, true, seed, offset);
    return 1;
}

const luaL_Reg lt_random_functions[] = {
    { "rng_reserve", c_rng_reserve }, { "rng_counters", c_rng_counters }, { "random_fill_", c_random_fill_ },
    { "multinomial", c_multinomial },
    { "randperm_stream", c_randperm_stream }, { NULL, NULL }
};
