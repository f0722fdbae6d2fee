/* l_data.c: the binding of torch.data and the file formats: batch loaders over tensor
 * datasets (src/loader.c), stacking a batch's items, random permutations for samplers,
 * safetensors and .npy files (src/serialize.h), and the terminal test and clock that the
 * progress bar uses.
 * Everything here is reached through require('torch._C').data; the Lua modules
 * torch.data and torch.serialize are the user-facing layer. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lbind.h"
#include "../src/loader.h"
#include "../src/serialize.h"

#define LOADER_MT "torch.data.TensorLoader"
#define MAX_LOADER_TENSORS 64

/* ---------------------------------------------------------------- argument buffers */

/* Reads the sequence at idx into a 0-based int64 array (entries are 1-based integers);
 * the array lives in a userdata pushed on the stack. */
static int64_t *check_index_list(lua_State *L, int idx, const char *what, int64_t *n_out)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    int64_t n = (int64_t)luaL_len(L, idx);
    int64_t *out = lt_scratch(L, (size_t)n * sizeof *out);
    for (int64_t i = 1; i <= n; i++) {
        int isint = 0;
        lua_rawgeti(L, idx, i);
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (!isint) {
            const char *got = lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1);
            luaL_error(L, "%s: entry %d is not an integer index (got %s)", what, (int)i, got);
        }
        lua_pop(L, 1);
        out[i - 1] = (int64_t)v - 1;
    }
    *n_out = n;
    return out;
}

/* ---------------------------------------------------------------- tensor loader */

static dp_loader **check_loader(lua_State *L, int idx)
{
    dp_loader **p = luaL_checkudata(L, idx, LOADER_MT);
    if (!*p) luaL_error(L, "the data loader's batch assembler was closed");
    return p;
}

/* loader(tensors, num_workers, prefetch) */
static int l_loader_new(lua_State *L)
{
    lua_settop(L, 3);
    luaL_checktype(L, 1, LUA_TTABLE);
    int nw = (int)luaL_checkinteger(L, 2);
    int pf = (int)luaL_optinteger(L, 3, 2);
    int n = (int)luaL_len(L, 1);
    if (n < 1 || n > MAX_LOADER_TENSORS)
        return luaL_error(L, "a tensor loader takes 1 to %d tensors (got %d)", MAX_LOADER_TENSORS, n);
    dp_tensor **ts = lt_scratch(L, (size_t)n * sizeof *ts);
    for (int k = 1; k <= n; k++) {
        lua_rawgeti(L, 1, k);
        dp_tensor *t = lt_test(L, -1);
        if (!t) return luaL_error(L, "tensor loader: entry %d is a %s, not a tensor", k, luaL_typename(L, -1));
        ts[k - 1] = t;
        lua_pop(L, 1);   /* still referenced by the table */
    }
    dp_loader **p = lua_newuserdatauv(L, sizeof *p, 0);
    *p = NULL;
    luaL_setmetatable(L, LOADER_MT);
    *p = dp_loader_new(n, ts, nw, pf);
    if (!*p) return lt_raise(L);
    return 1;
}

/* ld:start(indices, batch_size, drop_last) */
static int l_loader_start(lua_State *L)
{
    lua_settop(L, 4);
    dp_loader **p = check_loader(L, 1);
    int64_t n;
    int64_t *idx = check_index_list(L, 2, "sampler", &n);
    lua_Integer bs = luaL_checkinteger(L, 3);
    bool drop_last = lt_optbool(L, 4, false);
    if (dp_loader_start(*p, idx, n, (int64_t)bs, drop_last) != 0) return lt_raise(L);
    lua_pushinteger(L, (lua_Integer)dp_loader_num_batches(*p));
    return 1;
}

/* ld:next() -> the batch's tensors, or nothing at the end of the epoch */
static int l_loader_next(lua_State *L)
{
    dp_loader **p = check_loader(L, 1);
    int n = dp_loader_num_tensors(*p);
    luaL_checkstack(L, n + 4, "too many tensors");
    dp_tensor *out[MAX_LOADER_TENSORS];
    dp_tensor **slots[MAX_LOADER_TENSORS];
    int base = lua_gettop(L);
    /* slots first, so that nothing can leak once the engine has handed over the batch */
    for (int k = 0; k < n; k++) slots[k] = lt_newslot(L);
    int rc = dp_loader_next(*p, out);
    if (rc < 0) return lt_raise(L);
    if (rc == 0) return 0;
    for (int k = 0; k < n; k++) *slots[k] = out[k];
    lt_account_memory(L);
    return lua_gettop(L) - base;
}

static int l_loader_num_batches(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_loader_num_batches(*check_loader(L, 1)));
    return 1;
}

static int l_loader_num_workers(lua_State *L)
{
    lua_pushinteger(L, dp_loader_num_workers(*check_loader(L, 1)));
    return 1;
}

/* __gc and __close (and ld:close()): stops and joins the workers; idempotent. */
static int l_loader_gc(lua_State *L)
{
    dp_loader **p = luaL_checkudata(L, 1, LOADER_MT);
    dp_loader_free(*p);
    *p = NULL;
    return 0;
}

static const luaL_Reg loader_methods[] = {
    { "start", l_loader_start }, { "next", l_loader_next }, { "num_batches", l_loader_num_batches },
    { "num_workers", l_loader_num_workers }, { "close", l_loader_gc }, { NULL, NULL }
};

/* ---------------------------------------------------------------- collate, permutations */

/* stack(items [, ids [, offset]]): items a sequence of tensors; ids[offset + i] (offset 0
 * by default) is the dataset index of item i, read only to name items in errors. */
static int l_stack(lua_State *L)
{
    lua_settop(L, 3);   /* scratch buffers go above the arguments */
    luaL_checktype(L, 1, LUA_TTABLE);
    int64_t n = (int64_t)luaL_len(L, 1);
    if (n < 1) return luaL_error(L, "cannot stack an empty batch");
    bool have_ids = !lua_isnil(L, 2);
    if (have_ids) luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer offset = luaL_optinteger(L, 3, 0);
    dp_tensor **items = lt_scratch(L, (size_t)n * sizeof *items);
    int top = lua_gettop(L);
    for (int64_t i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        items[i] = lt_test(L, -1);   /* raises for a closed tensor */
        if (!items[i]) {
            lua_Integer id = i + 1;
            if (have_ids) {
                lua_rawgeti(L, 2, offset + i + 1);
                id = luaL_optinteger(L, -1, i + 1);
            }
            return luaL_error(L, "cannot stack the items of a batch: item %d is a %s, not a tensor",
                              (int)id, luaL_typename(L, top + 1));
        }
        lua_settop(L, top);   /* the table keeps the item alive */
    }
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_stack_items(n, items, NULL);
    if (!*slot && have_ids) {
        /* say it again with the dataset indices of the items */
        int64_t *ids = lt_scratch(L, (size_t)n * sizeof *ids);
        for (int64_t i = 0; i < n; i++) {
            lua_rawgeti(L, 2, offset + i + 1);
            ids[i] = (int64_t)luaL_optinteger(L, -1, i + 1);
            lua_pop(L, 1);
        }
        dp_tensor *again = dp_stack_items(n, items, ids);
        dp_tensor_release(again);
        return lt_raise(L);
    }
    return lt_done(L, *slot);
}

/* randperm(n [, seed [, offset]]) -> a table holding a permutation of 1..n.  Without a
 * seed it draws from the global stream, so torch.manual_seed repeats it. */
static int l_randperm(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    bool gen = !lua_isnoneornil(L, 2);
    uint64_t seed = gen ? (uint64_t)luaL_checkinteger(L, 2) : 0;
    uint64_t offset = (uint64_t)luaL_optinteger(L, 3, 0);
    if (n > INT32_MAX)   /* a Lua table's array part holds no more */
        return luaL_error(L, "randperm: %I indices are too many for a table (at most %d)", n, INT32_MAX);
    dp_tensor *perm = lt_randperm(L, n, gen, seed, offset);
    int64_t *v = lt_scratch(L, (size_t)n * sizeof *v);
    if (dp_to_host(perm, v, DP_INT64, n) != 0) return lt_raise(L);
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* ---------------------------------------------------------------- files */

/* The file name at idx.  A Lua string may hold a NUL, and the C side would cut the name
 * there and open another file: refuse it. */
static const char *check_file_name(lua_State *L, int idx)
{
    size_t len;
    const char *path = luaL_checklstring(L, idx, &len);
    if (strlen(path) != len)
        luaL_error(L, "the file name contains a NUL character (after '%s'), which no file name can hold",
                   path);
    return path;
}

/* save_safetensors(path, tbl [, metadata]): tbl maps names to tensors */
static int l_save_safetensors(lua_State *L)
{
    lua_settop(L, 3);   /* scratch buffers go above the arguments */
    const char *path = check_file_name(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int64_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, 2)) { n++; lua_pop(L, 1); }
    dp_named_tensor *ts = lt_scratch(L, (size_t)n * sizeof *ts);
    int64_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_pushvalue(L, -2);
            const char *key = luaL_tolstring(L, -1, NULL);
            return luaL_error(L, "torch.save: key %s is a %s; tensor names must be strings", key,
                              luaL_typename(L, -3));
        }
        dp_tensor *t = lt_test(L, -1);
        if (!t)
            return luaL_error(L, "torch.save: the value for '%s' is a %s, not a tensor", lua_tostring(L, -2),
                              luaL_typename(L, -1));
        if (strlen(lua_tostring(L, -2)) != lua_rawlen(L, -2))
            return luaL_error(L, "torch.save: a tensor name contains a NUL character");
        ts[k].name = (char *)lua_tostring(L, -2);   /* the keys stay in the table */
        ts[k].tensor = t;
        k++;
        lua_pop(L, 1);
    }
    int64_t nmeta = 0;
    const char **mk = NULL, **mv = NULL;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 3)) { nmeta++; lua_pop(L, 1); }
        mk = lt_scratch(L, (size_t)nmeta * sizeof *mk);
        mv = lt_scratch(L, (size_t)nmeta * sizeof *mv);
        int64_t j = 0;
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "metadata must map strings to strings");
            if (strlen(lua_tostring(L, -2)) != lua_rawlen(L, -2) || strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
                return luaL_error(L, "a metadata key or value contains a NUL character");
            mk[j] = lua_tostring(L, -2);
            mv[j] = lua_tostring(L, -1);
            j++;
            lua_pop(L, 1);
        }
    }
    if (dp_safetensors_save(path, n, ts, nmeta, mk, mv) != 0) return lt_raise(L);
    return 0;
}

/* load_safetensors(path) -> tensors, metadata (nil when the file has none) */
static int l_load_safetensors(lua_State *L)
{
    const char *path = check_file_name(L, 1);
    dp_safetensors *st = lua_newuserdatauv(L, sizeof *st, 0);   /* no __gc: freed below */
    if (dp_safetensors_load(path, st) != 0) return lt_raise(L);
    /* Hand each tensor to a Lua slot before anything can raise, so nothing leaks. */
    lua_createtable(L, 0, (int)st->ntensors);
    for (int64_t k = 0; k < st->ntensors; k++) {
        if (!lua_checkstack(L, 4)) break;
        dp_tensor **slot = lt_newslot(L);
        *slot = st->tensors[k].tensor;
        st->tensors[k].tensor = NULL;
        lua_setfield(L, -2, st->tensors[k].name);
    }
    if (st->nmeta > 0) {
        lua_createtable(L, 0, (int)st->nmeta);
        for (int64_t k = 0; k < st->nmeta; k++) {
            lua_pushstring(L, st->meta_values[k]);
            lua_setfield(L, -2, st->meta_keys[k]);
        }
    } else {
        lua_pushnil(L);
    }
    dp_safetensors_free(st);
    lt_account_memory(L);
    return 2;
}

static int l_save_npy(lua_State *L)
{
    const char *path = check_file_name(L, 1);
    dp_tensor *t = lt_check(L, 2);
    if (dp_npy_save(path, t) != 0) return lt_raise(L);
    return 0;
}

static int l_load_npy(lua_State *L)
{
    const char *path = check_file_name(L, 1);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_npy_load(path));
}

/* ---------------------------------------------------------------- for the progress bar */

static int l_stderr_isatty(lua_State *L)
{
    lua_pushboolean(L, isatty(STDERR_FILENO));
    return 1;
}

static const luaL_Reg data_functions[] = {
    { "loader", l_loader_new }, { "stack", l_stack }, { "randperm", l_randperm },
    { "save_safetensors", l_save_safetensors }, { "load_safetensors", l_load_safetensors },
    { "save_npy", l_save_npy }, { "load_npy", l_load_npy }, { "is_tensor", lt_is_tensor },
    { "stderr_isatty", l_stderr_isatty }, { "clock", lt_clock }, { NULL, NULL }
};

int dplua_open_data(lua_State *L)
{
    if (luaL_newmetatable(L, LOADER_MT)) {
        luaL_newlib(L, loader_methods);
        lua_setfield(L, -2, "__index");
        lt_setgc(L, l_loader_gc);
    }
    lua_pop(L, 1);
    luaL_newlib(L, data_functions);
    dplua_data_workers(L);
    return 1;
}
