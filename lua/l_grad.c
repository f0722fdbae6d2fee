/* l_grad.c: grad mode from Lua (torch.no_grad, enable_grad, set_grad_enabled,
 * is_grad_enabled), kept per Lua state: each state's C functions enter its grad context
 * first (dplua_enter_grad_context wraps them when the state opens dplua). */
#include <string.h>

#include "l_tensor.h"

/* Each Lua state has its own grad mode (a dp_grad_context userdata in its registry), and
 * every C function that Lua can call enters it first: dplua_enter_grad_context wraps them
 * when the state opens dplua.  States alternating on one thread, or a state moving to
 * another thread, thus each see their own mode; entering is a comparison when the state is
 * already current on its thread. */
static const char grad_context_key;

static dp_grad_context *grad_context(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &grad_context_key);
    dp_grad_context *c = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return c;
}

/* A wrapped function: upvalues u1..un of the original (a C closure's own, which it reads
 * through lua_upvalueindex as before, since it runs in this frame), then the original
 * function, then the grad context.  n is 0 for all but a few. */
static int enter_grad_context(lua_State *L)
{
    int n = 0;
    while (lua_type(L, lua_upvalueindex(n + 3)) != LUA_TNONE)
        n++;
    dp_grad_context_enter(lua_touserdata(L, lua_upvalueindex(n + 2)));
    return lua_tocfunction(L, lua_upvalueindex(n + 1))(L);
}

/* the same for a function without upvalues of its own (nearly all): no counting */
static int enter_grad_context0(lua_State *L)
{
    dp_grad_context_enter(lua_touserdata(L, lua_upvalueindex(2)));
    return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

/* Metamethods that never reach grad mode (releasing, sizes, printing, equality) are not
 * wrapped: __gc runs for every tensor the collector frees. */
static bool mode_free(lua_State *L, int key)
{
    static const char *const names[] = { "__gc", "__close", "__len", "__tostring", "__eq" };
    if (lua_type(L, key) != LUA_TSTRING)
        return false;
    const char *k = lua_tostring(L, key);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    return false;
}

/* Replaces every C function in the table at idx (and in the tables it holds, each once:
 * `seen` is at stack index seen) with its wrapped form. */
static void wrap_table(lua_State *L, int idx, int seen)
{
    idx = lua_absindex(L, idx);
    lua_pushvalue(L, idx);
    if (lua_rawget(L, seen) != LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, seen);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -1) == LUA_TTABLE) {
            wrap_table(L, -1, seen);
        } else if (lua_iscfunction(L, -1) && lua_tocfunction(L, -1) != enter_grad_context &&
                   lua_tocfunction(L, -1) != enter_grad_context0 && !mode_free(L, -2)) {
            int f = lua_gettop(L), n = 0;
            while (lua_getupvalue(L, f, n + 1))
                n++;
            lua_pushcfunction(L, lua_tocfunction(L, f));
            lua_rawgetp(L, LUA_REGISTRYINDEX, &grad_context_key);
            lua_pushcclosure(L, n ? enter_grad_context : enter_grad_context0, n + 2);
            lua_pushvalue(L, -3);     /* key */
            lua_insert(L, -2);
            lua_rawset(L, idx);       /* replacing a present key is allowed during lua_next */
        }
        lua_pop(L, 1);
    }
}

void dplua_enter_grad_context(lua_State *L, int c_table)
{
    c_table = lua_absindex(L, c_table);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &grad_context_key) == LUA_TUSERDATA) {
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    dp_grad_context *c = lua_newuserdatauv(L, sizeof *c, 0);
    *c = (dp_grad_context)DP_GRAD_CONTEXT_INIT;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &grad_context_key);
    lua_newtable(L);
    int seen = lua_gettop(L);
    wrap_table(L, c_table, seen);
    /* the metatables of dplua's userdata (tensor, device, node, loader, reducer ...) */
    lua_pushnil(L);
    while (lua_next(L, LUA_REGISTRYINDEX)) {
        if (lua_type(L, -2) == LUA_TSTRING && strncmp(lua_tostring(L, -2), "torch.", 6) == 0 &&
            lua_type(L, -1) == LUA_TTABLE)
            wrap_table(L, -1, seen);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    dp_grad_context_enter(c);
}

/* fn(...) with grad mode set to `on`, restored afterwards even when fn raises */
static int with_grad_mode(lua_State *L, bool on)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    dp_grad_context *c = grad_context(L);
    bool prev = c->enabled, prev_thread = dp_grad_enabled();
    dp_grad_context_set(c, on);
    int rc = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    dp_grad_context_set(c, prev);
    dp_set_grad_enabled(prev_thread);
    if (rc != LUA_OK)
        return lua_error(L);
    return lua_gettop(L);
}

static int c_no_grad(lua_State *L) { return with_grad_mode(L, false); }
static int c_enable_grad(lua_State *L) { return with_grad_mode(L, true); }
static int c_is_grad_enabled(lua_State *L) { lua_pushboolean(L, dp_grad_enabled()); return 1; }

static int c_set_grad_enabled(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    dp_grad_context_set(grad_context(L), lua_toboolean(L, 1));
    return 0;
}

static int c_set_detect_anomaly(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    dp_set_detect_anomaly(lua_toboolean(L, 1));
    return 0;
}
static int c_is_anomaly_enabled(lua_State *L) { lua_pushboolean(L, dp_detect_anomaly()); return 1; }

const luaL_Reg lt_grad_functions[] = {
    { "no_grad", c_no_grad }, { "enable_grad", c_enable_grad }, { "is_grad_enabled", c_is_grad_enabled },
    { "set_grad_enabled", c_set_grad_enabled }, { "_set_detect_anomaly", c_set_detect_anomaly },
    { "is_anomaly_enabled", c_is_anomaly_enabled }, { NULL, NULL }
};
