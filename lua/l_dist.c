/* l_dist.c: the binding of torch.distributed (src/dist.h): the process group, collectives on
 * tensors, and DistributedDataParallel's reducer as a userdata.  lua/torch/distributed.lua
 * and lua/nn/DistributedDataParallel.lua are the user-facing side; this file only checks
 * arguments and turns engine failures into Lua errors. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lbind.h"
#include "../src/dist.h"

#define REDUCER_MT "torch.distributed.Reducer"

static int check_rc(lua_State *L, int rc) {
    if (rc < 0) return lt_raise(L);
    return rc;
}

/* init(backend): backend is 'mpi' or 'nccl'. */
static int d_init(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    dp_dist_backend b;
    if (strcmp(name, "mpi") == 0) b = DP_DIST_MPI;
    else if (strcmp(name, "nccl") == 0) b = DP_DIST_NCCL;
    else return luaL_error(L, "torch.distributed.init_process_group: unknown backend '%s' "
                              "(expected 'mpi' or 'nccl')", name);
    check_rc(L, dp_dist_init(b));
    return 0;
}

static int d_is_initialized(lua_State *L) {
    lua_pushboolean(L, dp_dist_is_initialized());
    return 1;
}

static int d_rank(lua_State *L) { lua_pushinteger(L, check_rc(L, dp_dist_rank())); return 1; }
static int d_world_size(lua_State *L) { lua_pushinteger(L, check_rc(L, dp_dist_world_size())); return 1; }
static int d_local_rank(lua_State *L) { lua_pushinteger(L, check_rc(L, dp_dist_local_rank())); return 1; }

static int d_backend(lua_State *L) {
    int b = dp_dist_backend_of();
    if (b < 0) lua_pushnil(L);
    else lua_pushstring(L, dp_dist_backend_name(b));
    return 1;
}

static int d_has_mpi(lua_State *L) { lua_pushboolean(L, dp_dist_has_mpi()); return 1; }
static int d_has_nccl(lua_State *L) { lua_pushboolean(L, dp_dist_has_nccl()); return 1; }

static int d_cuda_host_syncs(lua_State *L) { lua_pushinteger(L, (lua_Integer)dp_dist_cuda_host_syncs()); return 1; }
static int d_side_stream_use(lua_State *L) {
    check_rc(L, dp_dist_debug_side_stream_use(lt_check(L, 1)));
    return 0;
}

static dp_dist_op check_op(lua_State *L, int idx) {
    /* in dp_dist_op's order */
    static const char *const names[] = { "sum", "avg", "max", "min", "product", "band", "bor", "bxor", NULL };
    if (lua_isnoneornil(L, idx)) return DP_DIST_SUM;
    const char *s = lua_tostring(L, idx);
    for (int i = 0; s && names[i]; i++)
        if (strcasecmp(s, names[i]) == 0) return (dp_dist_op)i;   /* 'SUM' too, as before */
    luaL_error(L, "torch.distributed.all_reduce: unknown op %s%s%s (expected 'sum', 'avg', 'max', 'min', "
                  "'product', 'band', 'bor' or 'bxor')",
               s ? "'" : "", s ? s : luaL_typename(L, idx), s ? "'" : "");
    return DP_DIST_SUM;
}

static int d_all_reduce(lua_State *L) {
    dp_tensor *t = lt_check(L, 1);
    dp_dist_op op = check_op(L, 2);
    check_rc(L, dp_dist_all_reduce(t, op));
    lua_settop(L, 1);
    return 1;
}

static int d_broadcast(lua_State *L) {
    dp_tensor *t = lt_check(L, 1);
    lua_Integer src = luaL_checkinteger(L, 2);
    if (src < 0 || src > 1 << 30)
        return luaL_error(L, "torch.distributed.broadcast: src %d is not a rank (ranks are 0-based)", (int)src);
    check_rc(L, dp_dist_broadcast(t, (int)src));
    lua_settop(L, 1);
    return 1;
}

/* all_gather(list, t): list holds world_size tensors shaped like t. */
static int d_all_gather(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    dp_tensor *t = lt_check(L, 2);
    lua_Integer n = luaL_len(L, 1);
    if (n < 0 || n > 1 << 20) return luaL_error(L, "torch.distributed.all_gather: bad list length");
    dp_tensor **outs = lua_newuserdatauv(L, sizeof(dp_tensor *) * (size_t)(n ? n : 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        outs[i - 1] = lt_test(L, -1);
        if (!outs[i - 1])
            return luaL_error(L, "torch.distributed.all_gather: tensor_list[%d] is a %s, not a tensor",
                              (int)i, luaL_typename(L, -1));
        lua_pop(L, 1);   /* the list keeps it alive */
    }
    check_rc(L, dp_dist_all_gather(outs, (int)n, t));
    lua_settop(L, 1);
    return 1;
}

/* all_gather_string(s): a table of every rank's string, indexed by rank + 1. */
static int d_all_gather_string(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    int w = check_rc(L, dp_dist_world_size());
    size_t *lens = lua_newuserdatauv(L, sizeof(size_t) * (size_t)w, 0);
    char *all = NULL;
    check_rc(L, dp_dist_all_gather_bytes(s, len, &all, lens));
    lua_createtable(L, w, 0);
    size_t off = 0;
    for (int r = 0; r < w; r++) {
        lua_pushlstring(L, all + off, lens[r]);   /* memory errors here would leak `all`: tiny */
        lua_rawseti(L, -2, r + 1);
        off += lens[r];
    }
    free(all);
    return 1;
}

static int d_barrier(lua_State *L) { check_rc(L, dp_dist_barrier()); return 0; }
static int d_destroy(lua_State *L) { check_rc(L, dp_dist_destroy()); return 0; }

/* ---- reducer */

static dp_reducer **reducer_box(lua_State *L) {
    dp_reducer **box = luaL_checkudata(L, 1, REDUCER_MT);
    if (!*box) luaL_error(L, "nn.DistributedDataParallel: the reducer was closed");
    return box;
}

/* reducer(params, names, bucket_cap_bytes) */
static int d_reducer(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Number cap = luaL_checknumber(L, 3);
    if (!(cap >= 1) || cap > 1e15)
        return luaL_error(L, "nn.DistributedDataParallel: bucket_cap_mb must be positive (got %f bytes)", (double)cap);
    lua_Integer n = luaL_len(L, 1);
    if (n > 1 << 24) return luaL_error(L, "nn.DistributedDataParallel: too many parameters");
    dp_reducer **box = lua_newuserdatauv(L, sizeof(dp_reducer *), 0);
    *box = NULL;
    luaL_setmetatable(L, REDUCER_MT);
    dp_tensor **ps = lua_newuserdatauv(L, sizeof(dp_tensor *) * (size_t)(n ? n : 1), 0);
    const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n ? n : 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        ps[i - 1] = lt_check(L, -1);
        lua_pop(L, 1);
        lua_geti(L, 2, i);
        names[i - 1] = lua_tostring(L, -1);   /* the names table keeps it alive */
        lua_pop(L, 1);
    }
    *box = dp_reducer_new((int)n, ps, names, (size_t)cap);
    if (!*box) return lt_raise(L);
    lua_pop(L, 2);
    return 1;
}

static int r_prepare(lua_State *L) {
    dp_reducer **box = reducer_box(L);
    check_rc(L, dp_reducer_prepare(*box, lt_optbool(L, 2, true)));
    return 0;
}

/* A table of buckets, each a table of 1-based parameter indices, in all-reduce order. */
static int r_buckets(lua_State *L) {
    dp_reducer *r = *reducer_box(L);
    int nb = dp_reducer_bucket_count(r);
    lua_createtable(L, nb, 0);
    for (int b = 0; b < nb; b++) {
        int n = dp_reducer_bucket(r, b, NULL, 0);
        int *idx = lua_newuserdatauv(L, sizeof(int) * (size_t)(n ? n : 1), 0);
        dp_reducer_bucket(r, b, idx, n);
        lua_createtable(L, n, 0);
        for (int i = 0; i < n; i++) {
            lua_pushinteger(L, idx[i] + 1);
            lua_rawseti(L, -2, i + 1);
        }
        lua_remove(L, -2);
        lua_rawseti(L, -2, b + 1);
    }
    return 1;
}

static int r_stats(lua_State *L) {
    dp_reducer_stats s;
    dp_reducer_get_stats(*reducer_box(L), &s);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, s.passes); lua_setfield(L, -2, "passes");
    lua_pushinteger(L, s.allreduces); lua_setfield(L, -2, "allreduces");
    lua_pushinteger(L, s.early); lua_setfield(L, -2, "early");
    lua_pushinteger(L, s.bytes); lua_setfield(L, -2, "bytes");
    return 1;
}

static int r_gc(lua_State *L) {
    dp_reducer **box = luaL_checkudata(L, 1, REDUCER_MT);
    dp_reducer_free(*box);
    *box = NULL;
    return 0;
}

static const luaL_Reg reducer_methods[] = {
    { "prepare", r_prepare }, { "buckets", r_buckets }, { "stats", r_stats }, { "close", r_gc },
    { NULL, NULL }
};

static const luaL_Reg dist_functions[] = {
    { "init", d_init }, { "is_initialized", d_is_initialized }, { "get_rank", d_rank },
    { "get_world_size", d_world_size }, { "get_local_rank", d_local_rank },
    { "get_backend", d_backend }, { "has_mpi", d_has_mpi }, { "has_nccl", d_has_nccl },
    { "all_reduce", d_all_reduce }, { "broadcast", d_broadcast }, { "all_gather", d_all_gather },
    { "all_gather_string", d_all_gather_string }, { "barrier", d_barrier },
    { "destroy", d_destroy }, { "reducer", d_reducer },
    { "cuda_host_syncs", d_cuda_host_syncs }, { "side_stream_use", d_side_stream_use }, { NULL, NULL }
};

int dplua_open_dist(lua_State *L) {
    if (luaL_newmetatable(L, REDUCER_MT)) {
        luaL_newlib(L, reducer_methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, r_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, r_gc);
        lua_setfield(L, -2, "__close");
        lua_pushliteral(L, REDUCER_MT);
        lua_setfield(L, -2, "__name");
    }
    lua_pop(L, 1);
    luaL_newlib(L, dist_functions);
    return 1;
}
