/* l_sort.c: sorting and scanning from Lua (torch.sort(t, ...) and t:sort(...)): sort,
 * argsort, topk, kthvalue, median, mode, cumsum, cumprod, cummax, cummin, logcumsumexp.
 * Dimensions arrive 1-based and leave 0-based; indices are returned 1-based.  Options
 * come positionally as in PyTorch or as a last table ({dim=, descending=, keepdim=}). */
#include "l_tensor.h"

/* A 1-based (or negative) dim of t at arg, 0-based; nil gives def.  A 0-dim tensor takes
 * 1 or -1, as PyTorch takes 0 or -1. */
static int dim_arg(lua_State *L, int arg, const dp_tensor *t, const char *who, int def)
{
    if (lua_isnoneornil(L, arg)) return def;
    int isint;
    lua_Integer d = lua_tointegerx(L, arg, &isint);
    if (!isint) return luaL_error(L, "%s: dim must be an integer, got %s", who, luaL_typename(L, arg));
    int n = t->ndim ? t->ndim : 1;
    if (d == 0 || d > n || d < -n)
        return luaL_error(L, "%s: dimension %d is out of range for a tensor with %d dimension%s "
                             "(expected 1 to %d, or -%d to -1; dplua counts dims from 1)",
                          who, (int)d, t->ndim, t->ndim == 1 ? "" : "s", n, n);
    return d > 0 ? (int)d - 1 : n + (int)d;
}

static int last_dim(const dp_tensor *t) { return t->ndim ? t->ndim - 1 : 0; }

/* The option table, if the last argument is one (its index), else 0. */
static int opts_at(lua_State *L)
{
    int top = lua_gettop(L);
    return top >= 2 && lua_istable(L, top) && !lt_test(L, top) ? top : 0;
}

/* The dim given positionally at arg, or as opts.dim when the option table sits at arg or
 * before it; opt_bool likewise. */
static int opt_dim(lua_State *L, int arg, int opts, const dp_tensor *t, const char *who, int def)
{
    if (opts && arg >= opts) {
        lua_getfield(L, opts, "dim");
        int top = lua_gettop(L);
        int d = dim_arg(L, top, t, who, def);
        lua_pop(L, 1);
        return d;
    }
    return dim_arg(L, arg, t, who, def);
}

static bool opt_bool(lua_State *L, int arg, int opts, const char *key, bool def)
{
    if (opts && arg >= opts) return lt_optfield_bool(L, opts, key, def);
    return lt_optbool(L, arg, def);
}

static int64_t check_k(lua_State *L, int arg, const char *who)
{
    int isint;
    lua_Integer k = lua_tointegerx(L, arg, &isint);
    if (!isint) return luaL_error(L, "%s: k must be an integer, got %s", who, luaL_typename(L, arg));
    return k;
}

/* Pushes values and 1-based indices (computed out of place: autograd keeps the 0-based
 * ones for the backward). */
static int push_pair(lua_State *L, dp_tensor **values, dp_tensor **indices)
{
    lt_done(L, *values);
    dp_tensor *zero_based = *indices;
    *indices = dp_binary_scalar(DP_ADD, zero_based, 1, false);
    dp_tensor_release(zero_based);
    lt_done(L, *indices);
    return 2;
}

/* sort([dim=-1] [, descending=false]) or sort({dim=, descending=, stable=}): values and
 * indices; the sort is always stable */
static int sort_common(lua_State *L, bool want_values)
{
    dp_tensor *t = lt_check(L, 1);
    int opts = opts_at(L);
    int dim = opt_dim(L, 2, opts, t, want_values ? "sort" : "argsort", last_dim(t));
    bool desc = opt_bool(L, 3, opts, "descending", false);
    dp_tensor **values = lt_newslot(L), **indices = lt_newslot(L);
    *values = dp_sort(t, dim, desc, indices);
    if (!want_values) {
        lt_done(L, *values);
        dp_tensor *zero_based = *indices;
        *indices = dp_binary_scalar(DP_ADD, zero_based, 1, false);
        dp_tensor_release(zero_based);
        return lt_done(L, *indices);
    }
    return push_pair(L, values, indices);
}

static int s_sort(lua_State *L) { return sort_common(L, true); }
static int s_argsort(lua_State *L) { return sort_common(L, false); }

/* topk(k [, dim=-1 [, largest=true [, sorted=true]]]) or topk(k, {dim=, largest=, sorted=}) */
static int s_topk(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int64_t k = check_k(L, 2, "topk");
    int opts = opts_at(L);
    int dim = opt_dim(L, 3, opts, t, "topk", last_dim(t));
    bool largest = opt_bool(L, 4, opts, "largest", true);
    dp_tensor **values = lt_newslot(L), **indices = lt_newslot(L);
    *values = dp_topk(t, k, dim, largest, indices);
    return push_pair(L, values, indices);
}

/* kthvalue(k [, dim=-1 [, keepdim=false]]) */
static int s_kthvalue(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int64_t k = check_k(L, 2, "kthvalue");
    int opts = opts_at(L);
    int dim = opt_dim(L, 3, opts, t, "kthvalue", last_dim(t));
    bool keepdim = opt_bool(L, 4, opts, "keepdim", false);
    dp_tensor **values = lt_newslot(L), **indices = lt_newslot(L);
    *values = dp_kthvalue(t, k, dim, keepdim, indices);
    return push_pair(L, values, indices);
}

/* median(): the lower median of everything; median(dim [, keepdim]): values, indices */
static int s_median(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int opts = opts_at(L);
    bool has_dim = !lua_isnoneornil(L, 2);
    if (opts == 2) { lua_getfield(L, 2, "dim"); has_dim = !lua_isnil(L, -1); lua_pop(L, 1); }
    if (!has_dim) {
        dp_tensor **slot = lt_newslot(L);
        return lt_done(L, *slot = dp_median(t, -1, false, NULL));
    }
    int dim = opt_dim(L, 2, opts, t, "median", 0);
    bool keepdim = opt_bool(L, 3, opts, "keepdim", false);
    dp_tensor **values = lt_newslot(L), **indices = lt_newslot(L);
    *values = dp_median(t, dim, keepdim, indices);
    return push_pair(L, values, indices);
}

/* mode([dim=-1 [, keepdim=false]]): values, indices */
static int s_mode(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int opts = opts_at(L);
    int dim = opt_dim(L, 2, opts, t, "mode", last_dim(t));
    bool keepdim = opt_bool(L, 3, opts, "keepdim", false);
    dp_tensor **values = lt_newslot(L), **indices = lt_newslot(L);
    *values = dp_mode(t, dim, keepdim, indices);
    return push_pair(L, values, indices);
}

/* cumsum(dim) and the other scans; the dim is required, as in PyTorch (given positionally,
 * or as {dim=}) */
static int scan(lua_State *L, dp_scan_op op, const char *who)
{
    dp_tensor *t = lt_check(L, 1);
    int opts = opts_at(L);
    if (lua_isnoneornil(L, 2)) return luaL_error(L, "%s: a dimension is required, as in PyTorch (dplua counts dims from 1)", who);
    int dim = opt_dim(L, 2, opts, t, who, 0);
    if (op != DP_CUMMAX && op != DP_CUMMIN) {
        /* cumsum(dim, {dtype=}) or cumsum(dim, dtype): the input converted first, as PyTorch */
        int dt_arg = 0;
        if (opts) { lua_getfield(L, opts, "dtype"); dt_arg = lua_isnil(L, -1) ? 0 : lua_gettop(L); }
        else if (!lua_isnoneornil(L, 3)) dt_arg = 3;
        if (dt_arg) {
            dp_dtype dt = lt_check_dtype(L, dt_arg);
            dp_tensor **conv = lt_newslot(L);
            lt_done(L, *conv = dp_to(t, t->device, dt, false));
            t = *conv;
        }
        dp_tensor **slot = lt_newslot(L);
        return lt_done(L, *slot = dp_scan(op, t, dim, false, NULL));
    }
    dp_tensor **values = lt_newslot(L), **indices = lt_newslot(L);
    *values = dp_scan(op, t, dim, false, indices);
    return push_pair(L, values, indices);
}

static int s_cumsum(lua_State *L) { return scan(L, DP_CUMSUM, "cumsum"); }
static int s_cumprod(lua_State *L) { return scan(L, DP_CUMPROD, "cumprod"); }
static int s_cummax(lua_State *L) { return scan(L, DP_CUMMAX, "cummax"); }
static int s_cummin(lua_State *L) { return scan(L, DP_CUMMIN, "cummin"); }
static int s_logcumsumexp(lua_State *L) { return scan(L, DP_LOGCUMSUMEXP, "logcumsumexp"); }

const luaL_Reg lt_sort_functions[] = {
    { "sort", s_sort }, { "argsort", s_argsort }, { "topk", s_topk }, { "kthvalue", s_kthvalue },
    { "median", s_median }, { "mode", s_mode }, { "cumsum", s_cumsum }, { "cumprod", s_cumprod },
    { "cummax", s_cummax }, { "cummin", s_cummin }, { "logcumsumexp", s_logcumsumexp }, { NULL, NULL }
};
