/* l_parallel.c: the binding of the data-parallel primitives (src/parallel.h), stored as
 * require('torch._C').parallel and used by lua/nn/DataParallel.lua.  Dimensions are
 * 1-based here, as everywhere in Lua. */
#include "lbind.h"
#include "../src/parallel.h"

#include <stdio.h>
#include <string.h>

static int list_length(lua_State *L, int idx, const char *what)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    int n = (int)luaL_len(L, idx);
    if (n < 1)
        luaL_error(L, "%s: the list is empty", what);
    return n;
}

/* The tensors of the list at idx into ts (borrowed: the list keeps them alive). */
static void check_tensor_list(lua_State *L, int idx, int n, dp_tensor **ts, const char *what)
{
    for (int i = 0; i < n; i++) {
        lua_geti(L, idx, i + 1);
        ts[i] = lt_test(L, -1);
        if (!ts[i])
            luaL_error(L, "%s: element %d is a %s, not a tensor", what, i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
}

/* A device from element i of the list at idx: a string, a torch.device or a CUDA ordinal. */
static dp_device check_device_at(lua_State *L, int idx, int i, const char *what)
{
    lua_geti(L, idx, i);
    int t = lua_type(L, -1);
    if (t == LUA_TNUMBER && (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0))
        luaL_error(L, "%s: element %d is %s, but a CUDA ordinal is an integer >= 0", what, i,
                   lua_tostring(L, -1));
    if (t != LUA_TNUMBER && t != LUA_TSTRING && !luaL_testudata(L, -1, DPLUA_DEVICE_MT))
        luaL_error(L, "%s: element %d is a %s, not a device (a string such as 'cuda:0', "
                      "a torch.device or a CUDA ordinal)", what, i, luaL_typename(L, -1));
    dp_device d;
    if (t == LUA_TSTRING) {
        if (dp_device_parse(lua_tostring(L, -1), &d) < 0)
            luaL_error(L, "%s: element %d: %s", what, i, dp_last_error());
    } else {
        d = lt_check_device(L, lua_gettop(L));
    }
    lua_pop(L, 1);
    return d;
}

static int check_devices(lua_State *L, int idx, dp_device *devs, int n, const char *what)
{
    char a[32];
    for (int i = 0; i < n; i++) {
        devs[i] = check_device_at(L, idx, i + 1, what);
        if (dp_device_check(devs[i]) < 0)
            luaL_error(L, "%s: %s", what, dp_last_error());
        for (int j = 0; j < i; j++)
            if (dp_device_eq(devs[i], devs[j]))
                luaL_error(L, "%s: device %s is listed twice (elements %d and %d)", what,
                           dp_device_str(devs[i], a), j + 1, i + 1);
    }
    return n;
}

/* devices(list [, what]) -> a list of torch.device: each entry resolved and checked to
 * exist, no duplicates, at least one. */
static int l_devices(lua_State *L)
{
    const char *what = luaL_optstring(L, 2, "devices");
    int n = list_length(L, 1, what);
    dp_device *devs = lt_scratch(L, sizeof *devs * (size_t)n);
    check_devices(L, 1, devs, n, what);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lt_push_device(L, devs[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* scatter_sizes(n, ndev) -> the chunk sizes scatter uses. */
static int l_scatter_sizes(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    lua_Integer k = luaL_checkinteger(L, 2);
    luaL_argcheck(L, k >= 1 && k <= 1 << 20, 2, "the number of devices must be at least 1");
    int64_t *sizes = lt_scratch(L, sizeof *sizes * (size_t)k);
    int count = dp_scatter_sizes(n, (int)k, sizes);
    if (count < 0)
        return lt_raise(L);
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushinteger(L, sizes[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* scatter(t, devices, dim) -> a list of chunks, chunk i on devices[i]. */
static int l_scatter(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int n = list_length(L, 2, "scatter: devices");
    int dim = lt_checkdim(L, 3, t->ndim, 0);
    dp_device *devs = lt_scratch(L, sizeof *devs * (size_t)n);
    check_devices(L, 2, devs, n, "scatter: devices");
    dp_tensor **out = lt_scratch(L, sizeof *out * (size_t)n);
    int count = 0;
    if (dp_scatter(t, dim, n, devs, out, &count) < 0)
        return lt_raise(L);
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lt_push(L, out[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lt_account_memory(L);
    return 1;
}

/* broadcast_coalesced(tensors, devices [, reuse, changed]) -> a list per device of the
 * tensors' replicas there.  reuse: a previous result for the same tensors (its entries for
 * the tensors' own device are ignored); changed: a list of booleans, one per tensor. */
static int l_broadcast_coalesced(lua_State *L)
{
    int n = list_length(L, 1, "broadcast_coalesced: tensors");
    int ndev = list_length(L, 2, "broadcast_coalesced: devices");
    bool use_reuse = !lua_isnoneornil(L, 3);
    dp_tensor **ts = lt_scratch(L, sizeof *ts * (size_t)n);
    check_tensor_list(L, 1, n, ts, "broadcast_coalesced: tensors");
    dp_device *devs = lt_scratch(L, sizeof *devs * (size_t)ndev);
    check_devices(L, 2, devs, ndev, "broadcast_coalesced: devices");
    dp_tensor **reuse = NULL;
    bool *changed = NULL;
    if (use_reuse) {
        luaL_checktype(L, 3, LUA_TTABLE);
        luaL_checktype(L, 4, LUA_TTABLE);
        reuse = lt_scratch(L, sizeof *reuse * (size_t)ndev * n);
        changed = lt_scratch(L, sizeof *changed * (size_t)n);
        for (int i = 0; i < n; i++) {
            lua_geti(L, 4, i + 1);
            changed[i] = lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
        for (int d = 0; d < ndev; d++) {
            lua_geti(L, 3, d + 1);
            bool own = dp_device_eq(devs[d], ts[0]->device);
            if (!own && !lua_istable(L, -1))
                luaL_error(L, "broadcast_coalesced: reuse[%d] is a %s, not a list of tensors",
                           d + 1, luaL_typename(L, -1));
            for (int i = 0; i < n; i++) {
                reuse[(size_t)d * n + i] = NULL;
                if (own)
                    continue;
                lua_geti(L, -1, i + 1);
                reuse[(size_t)d * n + i] = lt_test(L, -1);
                if (!reuse[(size_t)d * n + i])
                    luaL_error(L, "broadcast_coalesced: reuse[%d][%d] is a %s, not a tensor", d + 1,
                               i + 1, luaL_typename(L, -1));
                lua_pop(L, 1); /* the reuse table keeps it alive */
            }
            lua_pop(L, 1);
        }
    }
    dp_tensor **out = lt_scratch(L, sizeof *out * (size_t)ndev * n);
    if (dp_broadcast_coalesced(n, ts, ndev, devs, reuse, changed, out) < 0)
        return lt_raise(L);
    lua_createtable(L, ndev, 0);
    for (int d = 0; d < ndev; d++) {
        lua_createtable(L, n, 0);
        for (int i = 0; i < n; i++) {
            lt_push(L, out[(size_t)d * n + i]);
            lua_rawseti(L, -2, i + 1);
        }
        lua_rawseti(L, -2, d + 1);
    }
    lt_account_memory(L);
    return 1;
}

/* gather(tensors, device, dim) -> one tensor on device, the tensors concatenated along dim. */
static int l_gather(lua_State *L)
{
    int n = list_length(L, 1, "gather: tensors");
    dp_tensor **ts = lt_scratch(L, sizeof *ts * (size_t)n);
    check_tensor_list(L, 1, n, ts, "gather: tensors");
    dp_device dev = lt_check_device(L, 2);
    int dim = lt_checkdim(L, 3, ts[0]->ndim, 0);
    lt_push(L, dp_gather(n, ts, dev, dim));
    lt_account_memory(L);
    return 1;
}

/* reduce_add_coalesced(lists, device) -> the element-wise sums of the lists, on device. */
static int l_reduce_add_coalesced(lua_State *L)
{
    int ndev = list_length(L, 1, "reduce_add_coalesced: lists");
    lua_geti(L, 1, 1);
    if (!lua_istable(L, -1))
        luaL_error(L, "reduce_add_coalesced: lists[1] is a %s, not a list of tensors", luaL_typename(L, -1));
    int n = list_length(L, lua_gettop(L), "reduce_add_coalesced: lists[1]");
    lua_pop(L, 1);
    dp_device dev = lt_check_device(L, 2);
    dp_tensor **ts = lt_scratch(L, sizeof *ts * (size_t)ndev * n);
    for (int d = 0; d < ndev; d++) {
        char what[64];
        snprintf(what, sizeof what, "reduce_add_coalesced: lists[%d]", d + 1);
        lua_geti(L, 1, d + 1);
        if (!lua_istable(L, -1) || luaL_len(L, -1) != n)
            luaL_error(L, "%s must be a list of %d tensors, as lists[1] is", what, n);
        check_tensor_list(L, lua_gettop(L), n, ts + (size_t)d * n, what);
        lua_pop(L, 1);
    }
    dp_tensor **out = lt_scratch(L, sizeof *out * (size_t)n);
    if (dp_reduce_add_coalesced(ndev, n, ts, dev, out) < 0)
        return lt_raise(L);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lt_push(L, out[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lt_account_memory(L);
    return 1;
}

static const luaL_Reg parallel_funcs[] = {
    { "devices", l_devices }, { "scatter_sizes", l_scatter_sizes }, { "scatter", l_scatter },
    { "broadcast_coalesced", l_broadcast_coalesced }, { "gather", l_gather },
    { "reduce_add_coalesced", l_reduce_add_coalesced }, { NULL, NULL }
};

int dplua_open_parallel(lua_State *L)
{
    luaL_newlib(L, parallel_funcs);
    return 1;
}
