/* l_tensor.c: the tensor type as Lua sees it: its metatable (fields, t[i] indexing,
 * printing, user fields), sizes and strides, grad_fn objects, torch.device objects and
 * the autograd methods; lt_open_tensor assembles torch.Tensor from these and the methods
 * of l_view.c (views), l_convert.c (values, conversions) and l_ops.c (arithmetic).  The
 * userdata itself and the argument checks live in lbind.c. */
#include <string.h>

#include "l_tensor.h"

/* ------------------------------------------------------------------ torch.device */

static int device_index(lua_State *L)
{
    dp_device *d = luaL_checkudata(L, 1, DPLUA_DEVICE_MT);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "type") == 0)
        lua_pushstring(L, d->type == DP_DEVICE_CUDA ? "cuda" : "cpu");
    else if (strcmp(k, "index") == 0)
        lua_pushinteger(L, d->index);
    else
        lua_pushnil(L);
    return 1;
}

static int device_tostring(lua_State *L)
{
    char buf[32];
    lua_pushstring(L, dp_device_str(*(dp_device *)luaL_checkudata(L, 1, DPLUA_DEVICE_MT), buf));
    return 1;
}

static int device_eq(lua_State *L)
{
    dp_device *a = luaL_testudata(L, 1, DPLUA_DEVICE_MT), *b = luaL_testudata(L, 2, DPLUA_DEVICE_MT);
    lua_pushboolean(L, a && b && dp_device_eq(*a, *b));
    return 1;
}

/* ------------------------------------------------------------------ sizes and fields */

/* a dimension of t that exists (0-d tensors have none) */
static int check_dim_of(lua_State *L, int arg, const dp_tensor *t)
{
    if (t->ndim == 0)
        luaL_argerror(L, arg, "a 0-d tensor has no dimensions");
    return lt_checkdim(L, arg, t->ndim, 0);
}

static void push_size(lua_State *L, int n, const int64_t *sizes)
{
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, sizes[i]);
        lua_rawseti(L, -2, i + 1);
    }
    if (lua_getfield(L, LUA_REGISTRYINDEX, DPLUA_HOOKS) == LUA_TTABLE) {
        if (lua_getfield(L, -1, "Size") == LUA_TTABLE)
            lua_setmetatable(L, -3);
        else
            lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

static int t_size(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (lua_isnoneornil(L, 2)) {
        push_size(L, t->ndim, t->sizes);
        return 1;
    }
    lua_pushinteger(L, t->sizes[check_dim_of(L, 2, t)]);
    return 1;
}

static int t_stride(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (!lua_isnoneornil(L, 2)) {
        lua_pushinteger(L, t->strides[check_dim_of(L, 2, t)]);
        return 1;
    }
    lua_createtable(L, t->ndim, 0);
    for (int i = 0; i < t->ndim; i++) {
        lua_pushinteger(L, t->strides[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int t_dim(lua_State *L) { lua_pushinteger(L, lt_check(L, 1)->ndim); return 1; }
static int t_numel(lua_State *L) { lua_pushinteger(L, dp_numel(lt_check(L, 1))); return 1; }
static int t_is_contiguous(lua_State *L) { lua_pushboolean(L, dp_is_contiguous(lt_check(L, 1))); return 1; }
static int t_version(lua_State *L) { lua_pushinteger(L, (lua_Integer)lt_check(L, 1)->storage->version); return 1; }
static int t_data_ptr(lua_State *L) { lua_pushinteger(L, (lua_Integer)(intptr_t)dp_data(lt_check(L, 1))); return 1; }
static int t_storage_offset(lua_State *L) { lua_pushinteger(L, lt_check(L, 1)->offset); return 1; }

static int t_len(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (t->ndim == 0)
        return luaL_error(L, "# (length) of a 0-d tensor is not defined");
    lua_pushinteger(L, t->sizes[0]);
    return 1;
}

static int f_is_cuda(lua_State *L) { lua_pushboolean(L, lt_check(L, 1)->device.type == DP_DEVICE_CUDA); return 1; }
static int f_device(lua_State *L) { lt_push_device(L, lt_check(L, 1)->device); return 1; }
static int f_dtype(lua_State *L) { lua_pushstring(L, dp_dtype_name(lt_check(L, 1)->dtype)); return 1; }
static int f_requires_grad(lua_State *L) { lua_pushboolean(L, lt_check(L, 1)->requires_grad); return 1; }
static int f_is_leaf(lua_State *L) { lua_pushboolean(L, lt_check(L, 1)->grad_fn == NULL); return 1; }

/* t.grad: a leaf's, or what backward kept for a non-leaf after t:retain_grad() */
static int f_grad(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_tensor *g = t->grad ? t->grad : dp_retained_grad(t);
    if (!g)
        return 0;
    dp_tensor_retain(g);
    lt_push(L, g);
    return 1;
}

static int f_retains_grad(lua_State *L) { lua_pushboolean(L, dp_retains_grad(lt_check(L, 1))); return 1; }

/* t:retain_grad(): t.grad is filled by backward for a non-leaf too, as PyTorch's */
static int m_retain_grad(lua_State *L)
{
    if (dp_retain_grad(lt_check(L, 1)) != 0)
        return lt_raise(L);
    return 0;
}

static int f_grad_fn(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (!t->grad_fn)
        return 0;
    dp_node **p = lua_newuserdatauv(L, sizeof *p, 0);
    *p = t->grad_fn;
    dp_node_retain(*p);
    luaL_setmetatable(L, DPLUA_NODE_MT);
    return 1;
}

static int f_data(lua_State *L) { dp_tensor **slot = lt_newslot(L); return lt_done(L, *slot = dp_detach(lt_check(L, 1))); }

/* t.T: the dims reversed; t.mT: the last two swapped (views, as PyTorch's) */
static int f_T(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int perm[DP_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) perm[d] = t->ndim - 1 - d;
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_permute(t, perm));
}

static int f_mT(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (t->ndim < 2)
        return luaL_error(L, "tensor.mT is only supported on matrices or batches of matrices, got a %d-D tensor", t->ndim);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_transpose(t, t->ndim - 2, t->ndim - 1));
}

static const luaL_Reg tensor_fields[] = {
    { "is_cuda", f_is_cuda }, { "device", f_device }, { "dtype", f_dtype }, { "shape", t_size },
    { "requires_grad", f_requires_grad }, { "grad", f_grad }, { "grad_fn", f_grad_fn },
    { "retains_grad", f_retains_grad },
    { "is_leaf", f_is_leaf }, { "ndim", t_dim }, { "data", f_data }, { "T", f_T }, { "mT", f_mT },
    { NULL, NULL }
};

/* grad_fn objects */
static int node_gc(lua_State *L)
{
    dp_node **p = luaL_checkudata(L, 1, DPLUA_NODE_MT);
    if (*p)
        dp_node_release(*p);
    *p = NULL;
    return 0;
}

static int node_index(lua_State *L)
{
    dp_node **p = luaL_checkudata(L, 1, DPLUA_NODE_MT);
    if (strcmp(luaL_checkstring(L, 2), "name") != 0)
        return 0;
    lua_pushstring(L, dp_node_name(*p));
    return 1;
}

static int node_tostring(lua_State *L)
{
    lua_pushfstring(L, "<%s>", dp_node_name(*(dp_node **)luaL_checkudata(L, 1, DPLUA_NODE_MT)));
    return 1;
}

static int node_eq(lua_State *L)
{
    dp_node **a = luaL_testudata(L, 1, DPLUA_NODE_MT), **b = luaL_testudata(L, 2, DPLUA_NODE_MT);
    lua_pushboolean(L, a && b && *a == *b);
    return 1;
}

/* ------------------------------------------------------------------ indexing */

/* Whether an element of t is read as a 0-dim tensor rather than a Lua number: when t
   requires grad (or has a history) and grad mode is on, so the element carries its history
   into what is computed from it and no gradient is lost silently. */
bool lt_element_as_tensor(const dp_tensor *t)
{
    return (t->requires_grad || t->grad_fn) && dp_grad_enabled();
}

/* t[i]: a view, or on a 1-D tensor the element as a Lua value (a 0-dim tensor when t
   requires grad with grad mode on, see lt_element_as_tensor) */
static int index_get(lua_State *L, dp_tensor *t)
{
    if (!lua_isnumber(L, 2))
        return lt_index_get(L, t);   /* a table or a tensor */
    if (t->ndim == 0)
        return luaL_error(L, "cannot index a 0-d tensor (use item())");
    int64_t i = lt_checkposition(L, 2, t, 0);
    bool as_tensor = lt_element_as_tensor(t);
    if (t->ndim == 1 && !as_tensor && t->device.type == DP_DEVICE_CPU) { /* CPU ops finish before returning */
        lt_pushelement(L, t->dtype, (const char *)dp_data(t) + i * t->strides[0] * (int64_t)dp_dtype_size(t->dtype));
        return 1;
    }
    dp_tensor **slot = lt_newslot(L);
    lt_done(L, *slot = dp_select(t, 0, i));
    if (t->ndim > 1 || as_tensor)
        return 1;
    char elem[8];
    dp_dtype hdt = dp_dtype_is_float(t->dtype) ? DP_FLOAT64 : t->dtype;
    if (dp_to_host(*slot, elem, hdt, 1) != 0)
        lt_raise(L);
    lt_pushelement(L, hdt, elem);
    return 1;
}

/* t[i] = number | tensor */
static int index_set(lua_State *L, dp_tensor *t)
{
    if (!lua_isnumber(L, 2))
        return lt_index_set(L, t);   /* a table or a tensor */
    if (t->ndim == 0)
        return luaL_error(L, "cannot index a 0-d tensor (use fill_ or copy_)");
    lt_checkposition(L, 2, t, 0);
    if (!lt_test(L, 3) && !lua_isnumber(L, 3) && !lua_isboolean(L, 3))
        return luaL_error(L, "t[i] = value: value must be a number, boolean or tensor, got %s",
                          luaL_typename(L, 3));
    return lt_index_set(L, t);   /* t[i] as t[{i}]: a write autograd may record (CopySlices) */
}

static int tensor_index(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL)
            return 1; /* a method */
        lua_pushvalue(L, 2);
        if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TFUNCTION) {
            lua_CFunction field = lua_tocfunction(L, -1);
            lua_settop(L, 1);
            return field(L);
        }
        lua_pushvalue(L, 1); /* a field the user set */
        if (lua_rawget(L, lua_upvalueindex(3)) != LUA_TTABLE)
            return 0;
        lua_pushvalue(L, 2);
        lua_rawget(L, -2);
        return 1;
    }
    return index_get(L, lt_check(L, 1));
}

static int tensor_newindex(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (lua_type(L, 2) != LUA_TSTRING)
        return index_set(L, t);
    const char *k = lua_tostring(L, 2);
    if (strcmp(k, "requires_grad") == 0) {
        if (!lua_isboolean(L, 3))
            return luaL_error(L, "requires_grad must be a boolean, got %s", luaL_typename(L, 3));
        return dp_set_requires_grad(t, lua_toboolean(L, 3)) == 0 ? 0 : lt_raise(L);
    }
    if (strcmp(k, "grad") == 0) {
        dp_tensor *g = lua_isnil(L, 3) ? NULL : lt_test(L, 3);
        if (!g && !lua_isnil(L, 3))
            return luaL_error(L, "grad must be a tensor or nil, got %s", luaL_typename(L, 3));
        if (g && (!dp_same_shape(g, t) || g->dtype != t->dtype || !dp_device_eq(g->device, t->device))) {
            char a[128], b[128], da[32], db[32];
            return luaL_error(L, "assigned grad (%s %s on %s) must match the tensor (%s %s on %s)",
                              dp_shape_str(g->ndim, g->sizes, a, sizeof a), dp_dtype_name(g->dtype),
                              dp_device_str(g->device, da), dp_shape_str(t->ndim, t->sizes, b, sizeof b),
                              dp_dtype_name(t->dtype), dp_device_str(t->device, db));
        }
        dp_set_grad(t, g);
        return 0;
    }
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TNIL)
        return luaL_error(L, "tensor field '%s' is read-only", k);
    lua_pushvalue(L, 1);
    if (lua_rawget(L, lua_upvalueindex(3)) != LUA_TTABLE) {
        lua_newtable(L);
        lua_pushvalue(L, 1);
        lua_pushvalue(L, -2);
        lua_rawset(L, lua_upvalueindex(3));
    }
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_rawset(L, -3);
    return 0;
}

static int tensor_tostring(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (lua_getfield(L, LUA_REGISTRYINDEX, DPLUA_HOOKS) == LUA_TTABLE &&
        lua_getfield(L, -1, "format") == LUA_TFUNCTION) {
        lua_pushvalue(L, 1);
        lua_call(L, 1, 1);
        return 1;
    }
    char shape[128];
    lua_pushfstring(L, "tensor of size %s (%s)", dp_shape_str(t->ndim, t->sizes, shape, sizeof shape),
                    dp_dtype_name(t->dtype));
    return 1;
}

/* ------------------------------------------------------------------ autograd */

static int t_backward(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int opts = lua_istable(L, 2) && !lt_test(L, 2) ? 2 : 3;
    dp_tensor *grad = opts == 3 && !lua_isnoneornil(L, 2) ? lt_check(L, 2) : NULL;
    bool retain = lt_optfield_bool(L, opts, "retain_graph", false);
    return lt_run_backward(L, t, grad, retain) == 0 ? 0 : lt_raise(L);
}

static int t_requires_grad_(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    bool on = lt_optbool(L, 2, true);
    if (dp_set_requires_grad(t, on) != 0)
        lt_raise(L);
    lua_settop(L, 1);
    return 1;
}

/* ------------------------------------------------------------------ registration */

const luaL_Reg lt_tensor_functions[] = { { "numel", t_numel }, { NULL, NULL } };

const luaL_Reg lt_tensor_methods[] = {
    { "size", t_size }, { "dim", t_dim }, { "nelement", t_numel }, { "is_contiguous", t_is_contiguous },
    { "stride", t_stride }, { "backward", t_backward }, { "retain_grad", m_retain_grad }, { "requires_grad_", t_requires_grad_ },
    { "_version", t_version }, { "data_ptr", t_data_ptr }, { "storage_offset", t_storage_offset },
    { NULL, NULL }
};

void lt_set_functions(lua_State *L)
{
    luaL_setfuncs(L, lt_tensor_functions, 0);
    luaL_setfuncs(L, lt_view_functions, 0);
    luaL_setfuncs(L, lt_math_functions, 0);
    luaL_setfuncs(L, lt_sort_functions, 0);
    luaL_setfuncs(L, lt_index_functions, 0);
}

void lt_open_tensor(lua_State *L)
{
    if (luaL_newmetatable(L, DPLUA_DEVICE_MT)) {
        const luaL_Reg meta[] = { { "__index", device_index }, { "__tostring", device_tostring },
                                  { "__eq", device_eq }, { NULL, NULL } };
        luaL_setfuncs(L, meta, 0);
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, DPLUA_NODE_MT)) {
        const luaL_Reg meta[] = { { "__index", node_index }, { "__tostring", node_tostring },
                                  { "__eq", node_eq }, { "__gc", node_gc }, { NULL, NULL } };
        luaL_setfuncs(L, meta, 0);
    }
    lua_pop(L, 1);
    if (!lt_newtensormt(L)) {
        lua_getfield(L, -1, "__methods");
        lua_remove(L, -2);
        return;
    }
    const luaL_Reg meta[] = { { "__len", t_len }, { "__tostring", tensor_tostring }, { NULL, NULL } };
    luaL_setfuncs(L, meta, 0);
    luaL_setfuncs(L, lt_math_metamethods, 0);
    lua_newtable(L); /* methods: torch.Tensor */
    lt_set_functions(L);
    luaL_setfuncs(L, lt_tensor_methods, 0);
    luaL_setfuncs(L, lt_view_methods, 0);
    luaL_setfuncs(L, lt_convert_methods, 0);
    luaL_setfuncs(L, lt_math_methods, 0);
    luaL_setfuncs(L, lt_index_methods, 0);
    lua_newtable(L); /* fields */
    luaL_setfuncs(L, tensor_fields, 0);
    lua_newtable(L); /* fields users set on a tensor: tensor -> {name = value}, weak keys */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    for (int i = 0; i < 2; i++) {
        lua_pushvalue(L, -3);
        lua_pushvalue(L, -3);
        lua_pushvalue(L, -3);
        lua_pushcclosure(L, i == 0 ? tensor_index : tensor_newindex, 3);
        lua_setfield(L, -5, i == 0 ? "__index" : "__newindex");
    }
    lua_pop(L, 2);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__methods");
    lua_remove(L, -2);
    if (lua_getfield(L, LUA_REGISTRYINDEX, DPLUA_HOOKS) != LUA_TTABLE) {
        lua_newtable(L);
        lua_setfield(L, LUA_REGISTRYINDEX, DPLUA_HOOKS);
    }
    lua_pop(L, 1);
}
