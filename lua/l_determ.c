/* l_determ.c: torch.use_deterministic_algorithms and its questions, and the flags behind
 * torch.backends.cudnn (lua/torch/backends.lua), over the engine's determ.c. */
#include <string.h>

#include "l_tensor.h"

/* a boolean argument, or an error naming what came instead */
static bool bool_arg(lua_State *L, int arg, const char *who, const char *name)
{
    if (!lua_isboolean(L, arg))
        return luaL_error(L, "%s: %s must be a boolean, got %s", who, name, luaL_typename(L, arg));
    return lua_toboolean(L, arg);
}

/* torch.use_deterministic_algorithms(mode [, {warn_only=false}]) */
static int c_use_deterministic_algorithms(lua_State *L)
{
    const char *who = "use_deterministic_algorithms";
    bool mode = bool_arg(L, 1, who, "mode");
    bool warn_only = false;
    if (!lua_isnoneornil(L, 2)) {
        if (!lua_istable(L, 2))
            return luaL_error(L, "%s: expected an option table {warn_only=} as argument 2, got %s", who,
                              luaL_typename(L, 2));
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            lua_pop(L, 1);
            if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "warn_only") != 0)
                return luaL_error(L, "%s: unknown option %s (the option is warn_only)", who, luaL_tolstring(L, -1, NULL));
        }
        lua_getfield(L, 2, "warn_only");
        warn_only = bool_arg(L, -1, who, "warn_only");
        lua_pop(L, 1);
    }
    dp_use_deterministic_algorithms(mode, warn_only);
    return 0;
}

static int c_are_deterministic_algorithms_enabled(lua_State *L)
{
    lua_pushboolean(L, dp_deterministic_algorithms());
    return 1;
}

static int c_is_deterministic_algorithms_warn_only_enabled(lua_State *L)
{
    lua_pushboolean(L, dp_deterministic_algorithms_warn_only());
    return 1;
}

/* torch._C._alert_not_deterministic(caller): what an op without a deterministic
 * implementation calls first (nothing while the mode is off) */
static int c_alert_not_deterministic(lua_State *L)
{
    const char *caller = luaL_checkstring(L, 1);
    if (dp_alert_not_deterministic(caller)) return luaL_error(L, "%s", dp_last_error());
    return 0;
}

static int c_set_cudnn_deterministic(lua_State *L)
{
    dp_set_cudnn_deterministic(bool_arg(L, 1, "torch.backends.cudnn.deterministic", "the value"));
    return 0;
}

static int c_get_cudnn_deterministic(lua_State *L) { lua_pushboolean(L, dp_cudnn_deterministic()); return 1; }

static int c_set_cudnn_benchmark(lua_State *L)
{
    dp_set_cudnn_benchmark(bool_arg(L, 1, "torch.backends.cudnn.benchmark", "the value"));
    return 0;
}

static int c_get_cudnn_benchmark(lua_State *L) { lua_pushboolean(L, dp_cudnn_benchmark()); return 1; }

const luaL_Reg lt_determ_functions[] = {
    { "use_deterministic_algorithms", c_use_deterministic_algorithms },
    { "are_deterministic_algorithms_enabled", c_are_deterministic_algorithms_enabled },
    { "is_deterministic_algorithms_warn_only_enabled", c_is_deterministic_algorithms_warn_only_enabled },
    { "_alert_not_deterministic", c_alert_not_deterministic },
    { "_set_cudnn_deterministic", c_set_cudnn_deterministic }, { "_get_cudnn_deterministic", c_get_cudnn_deterministic },
    { "_set_cudnn_benchmark", c_set_cudnn_benchmark }, { "_get_cudnn_benchmark", c_get_cudnn_benchmark },
    { NULL, NULL }
};
