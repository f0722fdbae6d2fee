/* l_convert.c: the tensor methods that read a tensor's values into Lua (item, tolist) and
 * that convert it: contiguous, pinned memory, to(device, dtype), cuda, cpu, float, double,
 * long, bool and Torch7's type(). */
#include <string.h>

#include "l_tensor.h"

/* Copies t's elements to a temporary buffer (pushed as a userdata) in a dtype Lua reads
 * without loss: float64 for floats, int64, bool. */
static void *host_copy(lua_State *L, dp_tensor *t, dp_dtype *hdt)
{
    int64_t n = dp_numel(t);
    *hdt = dp_dtype_is_float(t->dtype) ? DP_FLOAT64 : t->dtype;
    void *buf = lt_scratch(L, (size_t)n * 8);
    if (dp_to_host(t, buf, *hdt, n) != 0)
        lt_raise(L);
    return buf;
}

static int t_item(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int64_t n = dp_numel(t);
    if (n != 1)
        return luaL_error(L, "item: a tensor with %I elements cannot be converted to a number",
                          (lua_Integer)n);
    dp_dtype hdt;
    void *buf = host_copy(L, t, &hdt);
    lt_pushelement(L, hdt, buf);
    return 1;
}

static const char *nest(lua_State *L, const dp_tensor *t, int dim, const char *p, size_t elsize, dp_dtype hdt)
{
    if (dim == t->ndim) {
        lt_pushelement(L, hdt, p);
        return p + elsize;
    }
    luaL_checkstack(L, 4, "tensor nested too deep");
    lua_createtable(L, (int)t->sizes[dim], 0);
    for (int64_t i = 0; i < t->sizes[dim]; i++) {
        p = nest(L, t, dim + 1, p, elsize, hdt);
        lua_rawseti(L, -2, i + 1);
    }
    return p;
}

static int t_tolist(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_dtype hdt;
    const char *buf = host_copy(L, t, &hdt);
    nest(L, t, 0, buf, dp_dtype_size(hdt), hdt);
    return 1;
}

/* Returns the argument itself when the engine hands back the same tensor. */
static int push_same_or_new(lua_State *L, dp_tensor *self, dp_tensor **slot)
{
    if (*slot == self) {
        dp_tensor_release(*slot);
        *slot = NULL;
        lua_pushvalue(L, 1);
        return 1;
    }
    return lt_done(L, *slot);
}

static int t_contiguous(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_contiguous(t);
    return push_same_or_new(L, t, slot);
}

static int t_pin_memory(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_pin_memory(t);
    return push_same_or_new(L, t, slot);
}

static int t_is_pinned(lua_State *L) { lua_pushboolean(L, dp_is_pinned(lt_check(L, 1))); return 1; }

static void device_ready(lua_State *L, dp_device d)
{
    if (dp_device_check(d) != 0)
        lt_raise(L);
}

/* t on dev as dt: t itself when nothing changes, unless copy asks for a new tensor always */
static int convert_copy(lua_State *L, dp_tensor *t, dp_device dev, dp_dtype dt, bool non_blocking, bool copy)
{
    if (!dp_device_eq(dev, t->device))
        device_ready(L, dev);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_to(t, dev, dt, non_blocking);
    if (copy && *slot == t) {
        dp_tensor_release(*slot);
        *slot = dp_clone(t);
    }
    return push_same_or_new(L, t, slot);
}

static int convert(lua_State *L, dp_tensor *t, dp_device dev, dp_dtype dt, bool non_blocking)
{
    return convert_copy(L, t, dev, dt, non_blocking, false);
}

static int t_to(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_device dev = t->device;
    dp_dtype dt = t->dtype;
    bool non_blocking = false, copy = false;
    int top = lua_gettop(L), flags = 0;
    if (top < 2)
        return luaL_error(L, "to: expected a device, a dtype, a tensor or an options table");
    for (int i = 2; i <= top; i++) {
        dp_tensor *other = lt_test(L, i);
        if (other) {
            dev = other->device;
            dt = other->dtype;
        } else if (lua_type(L, i) == LUA_TSTRING && dp_dtype_parse(lua_tostring(L, i), &dt) == 0) {
            /* a dtype */
        } else if (lua_type(L, i) == LUA_TTABLE) {
            lua_pushnil(L);
            while (lua_next(L, i)) {
                const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
                if (!k)
                    return luaL_error(L, "Tensor:to: argument %d: expected an options table {device=, dtype=, "
                                         "non_blocking=}, got a table with a %s key (%s)",
                                      i - 1, luaL_typename(L, -2), luaL_tolstring(L, -2, NULL));
                if (strcmp(k, "device") && strcmp(k, "dtype") && strcmp(k, "non_blocking") && strcmp(k, "copy"))
                    return luaL_error(L, "Tensor:to: unknown option '%s' (the options are device, dtype, "
                                         "non_blocking, copy)", k);
                lua_pop(L, 1);
            }
            if (lua_getfield(L, i, "device") != LUA_TNIL)
                dev = lt_check_device(L, -1);
            if (lua_getfield(L, i, "dtype") != LUA_TNIL &&
                (lua_type(L, -1) != LUA_TSTRING || dp_dtype_parse(lua_tostring(L, -1), &dt) != 0))
                return luaL_error(L, "Tensor:to: option dtype: unknown dtype %s (expected float32, float64, "
                                     "float16, bfloat16, int64 or bool)", luaL_tolstring(L, -1, NULL));
            lua_pop(L, 2);
            non_blocking = lt_optfield_bool(L, i, "non_blocking", non_blocking);
            copy = lt_optfield_bool(L, i, "copy", copy);
        } else if (lua_isboolean(L, i)) {
            /* PyTorch's order: to(device, dtype, non_blocking, copy) */
            if (flags == 0)
                non_blocking = lua_toboolean(L, i);
            else if (flags == 1)
                copy = lua_toboolean(L, i);
            else
                return luaL_error(L, "Tensor:to: argument %d: at most two flags (non_blocking, copy), got a third", i - 1);
            flags++;
        } else if (lua_type(L, i) == LUA_TSTRING && dp_device_parse(lua_tostring(L, i), &dev) != 0) {
            return luaL_argerror(L, i, lua_pushfstring(L, "'%s' is neither a dtype (float32, float64, float16, "
                                                          "bfloat16, int64, bool) nor a device (cpu, cpu:N, cuda, cuda:N)",
                                                       lua_tostring(L, i)));
        } else if (lua_type(L, i) != LUA_TSTRING) {
            dev = lt_check_device(L, i);
        }
    }
    return convert_copy(L, t, dev, dt, non_blocking, copy);
}

static int t_cuda(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_device dev = { DP_DEVICE_CUDA, 0 };
    if (!lua_isnoneornil(L, 2))
        dev = lt_check_device(L, 2);
    if (dev.type != DP_DEVICE_CUDA)
        return luaL_argerror(L, 2, "cuda(): expected a CUDA device");
    device_ready(L, dev);
    return convert(L, t, dev, t->dtype, lt_optfield_bool(L, 3, "non_blocking", false));
}

static int t_cpu(lua_State *L) { dp_tensor *t = lt_check(L, 1); return convert(L, t, dp_cpu(), t->dtype, false); }
static int t_float(lua_State *L) { dp_tensor *t = lt_check(L, 1); return convert(L, t, t->device, DP_FLOAT32, false); }
static int t_double(lua_State *L) { dp_tensor *t = lt_check(L, 1); return convert(L, t, t->device, DP_FLOAT64, false); }
static int t_long(lua_State *L) { dp_tensor *t = lt_check(L, 1); return convert(L, t, t->device, DP_INT64, false); }
static int t_bool(lua_State *L) { dp_tensor *t = lt_check(L, 1); return convert(L, t, t->device, DP_BOOL, false); }
static int t_half(lua_State *L) { dp_tensor *t = lt_check(L, 1); return convert(L, t, t->device, DP_FLOAT16, false); }
static int t_bfloat16(lua_State *L) { dp_tensor *t = lt_check(L, 1); return convert(L, t, t->device, DP_BFLOAT16, false); }

static const char *const type_names[DP_NDTYPES] = { "FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor",
                                                    "HalfTensor", "BFloat16Tensor" };

/* t:type() is 'torch.FloatTensor' ('torch.cuda.FloatTensor' on CUDA); t:type(name) converts,
   and t:type(dtype) (PyTorch's t.type(torch.float)) converts on t's device. */
static int t_type(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (lua_isnoneornil(L, 2)) {
        lua_pushfstring(L, "torch.%s%s", t->device.type == DP_DEVICE_CUDA ? "cuda." : "", type_names[t->dtype]);
        return 1;
    }
    const char *name = luaL_checkstring(L, 2);
    dp_dtype as_dtype;
    if (dp_dtype_parse(name, &as_dtype) == 0)
        return convert(L, t, t->device, as_dtype, false);
    bool cuda = strncmp(name, "torch.cuda.", 11) == 0;
    const char *base = name + (cuda ? 11 : strncmp(name, "torch.", 6) == 0 ? 6 : 0);
    for (int dt = 0; dt < DP_NDTYPES; dt++) {
        if (strcmp(base, type_names[dt]) == 0) {
            dp_device dev = cuda ? (t->device.type == DP_DEVICE_CUDA ? t->device : (dp_device){ DP_DEVICE_CUDA, 0 })
                                 : (t->device.type == DP_DEVICE_CUDA ? dp_cpu() : t->device);
            return convert(L, t, dev, (dp_dtype)dt, false);
        }
    }
    return luaL_argerror(L, 2, lua_pushfstring(L, "unknown tensor type '%s' (expected e.g. "
                                                  "'torch.FloatTensor', 'torch.cuda.LongTensor' or a dtype "
                                                  "such as torch.float32)", name));
}

const luaL_Reg lt_convert_methods[] = {
    { "item", t_item }, { "tolist", t_tolist }, { "contiguous", t_contiguous },
    { "pin_memory", t_pin_memory }, { "is_pinned", t_is_pinned }, { "to", t_to }, { "cuda", t_cuda },
    { "cpu", t_cpu }, { "float", t_float }, { "double", t_double }, { "long", t_long },
    { "bool", t_bool }, { "half", t_half }, { "bfloat16", t_bfloat16 }, { "type", t_type }, { NULL, NULL }
};
