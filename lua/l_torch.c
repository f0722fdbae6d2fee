/* l_torch.c: the torch functions of torch._C: tensor creation (with PyTorch's dtype
 * inference), cat/stack, comparisons of whole tensors, devices and the cuda/cpu tables,
 * random seeds, threads, grad mode, and the functional internals that
 * nn and optim build on (linear, losses, dropout, optimizer steps, DataParallel's primitives).
 * dplua_open_core assembles _C from these and the tensor binding. */
#include <math.h>
#include <string.h>

#include "l_tensor.h"

#ifndef DPLUA_VERSION
#define DPLUA_VERSION "unknown"
#endif

/* ------------------------------------------------------------------ creation options */

typedef struct {
    dp_dtype dtype;
    bool has_dtype;
    dp_device device;
    bool has_device;
    bool requires_grad;
} create_opts;

static const char *const option_names[] = { "dtype", "device", "requires_grad", NULL };

/* The device of tensors created without device= (torch.set_default_device), kept in this
 * Lua state's registry: cpu until set. */
static const char default_device_key;

static dp_device default_device(lua_State *L)
{
    dp_device d = dp_cpu();
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &default_device_key) == LUA_TUSERDATA)
        d = *(const dp_device *)lua_touserdata(L, -1);
    lua_pop(L, 1);
    return d;
}

/* Raises unless d exists (cpu:0 always does). */
static void check_exists(lua_State *L, dp_device d)
{
    if (!dp_device_eq(d, dp_cpu()) && dp_device_check(d) != 0)
        lt_raise(L);
}

/* The name of the function at stack level `level` as the caller wrote it, or NULL: a
 * global's or a field's name; a local's or an upvalue's is a wrapper's own (torch7.lua's
 * result forms call the engine's function through a local). */
static const char *called_name(lua_State *L, int level)
{
    lua_Debug ar;
    if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "n", &ar) || !ar.name)
        return NULL;
    if (strcmp(ar.namewhat, "local") == 0 || strcmp(ar.namewhat, "upvalue") == 0)
        return NULL;
    return lua_pushfstring(L, "torch.%s", ar.name);
}

/* The field of torch that holds the function at stack level `level`, or NULL. */
static const char *field_name(lua_State *L, int level)
{
    lua_Debug ar;
    if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "f", &ar))
        return NULL;
    int f = lua_gettop(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, "torch") == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, f))
                return lua_pushfstring(L, "torch.%s", lua_tostring(L, -2));
            lua_pop(L, 1);
        }
    }
    lua_settop(L, f - 1);
    return NULL;
}

/* "torch.zeros": the name the running function was called by, for messages; when it was
 * called by a Lua wrapper (or without a name, as pcall(torch.zeros, ...)), the wrapper's */
static const char *function_name(lua_State *L)
{
    const char *name;
    if ((name = called_name(L, 0)) || (name = field_name(L, 0)))
        return name;
    lua_Debug ar;   /* the caller, when it is one of dplua's wrappers */
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "S", &ar) && lt_library_source(ar.source) &&
        ((name = called_name(L, 1)) || (name = field_name(L, 1))))
        return name;
    return "torch";
}

/* torch.set_default_dtype: the dtype of created floating point tensors and of the floating
 * results of integer operands; the engine holds it (dp_default_dtype, process-wide as PyTorch's) */
static int c_set_default_dtype(lua_State *L)
{
    dp_dtype dt;
    const char *s = luaL_checkstring(L, 1);
    if (dp_dtype_parse(s, &dt) != 0 || !dp_dtype_is_float(dt))
        return luaL_error(L, "set_default_dtype: only floating point dtypes are supported as the default "
                             "(float32 or float64), got '%s'", s);
    dp_set_default_dtype(dt);
    return 0;
}

static int c_get_default_dtype(lua_State *L)
{
    lua_pushstring(L, dp_dtype_name(dp_default_dtype()));
    return 1;
}

/* {dtype=, device=, requires_grad=} at idx (none or nil: defaults) */
static create_opts check_opts(lua_State *L, int idx)
{
    create_opts o = { dp_default_dtype(), false, default_device(L), false, false };
    if (lua_isnoneornil(L, idx))
        return o;
    if (!lua_istable(L, idx) || lt_test(L, idx))
        luaL_typeerror(L, idx, "options table {dtype=, device=, requires_grad=}");
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_argerror(L, idx, lua_pushfstring(L, "unexpected %s in the options table (only dtype=, "
                                                     "device=, requires_grad= are taken)", luaL_typename(L, -1)));
        const char *k = lua_tostring(L, -1);
        int known = 0;
        while (option_names[known] && strcmp(option_names[known], k) != 0)
            known++;
        if (!option_names[known]) {
            lua_getfield(L, idx, k);
            const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_pushfstring(L, "'%s'", lua_tostring(L, -1))
                                                           : luaL_tolstring(L, -1, NULL);
            luaL_error(L, "%s: unknown option %s = %s (the options are device, dtype, requires_grad)",
                       function_name(L), k, v);
        }
    }
    if (lua_getfield(L, idx, "dtype") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING) {
            const char *type = luaL_typename(L, -1), *value = luaL_tolstring(L, -1, NULL);
            luaL_error(L, "%s: option dtype must be a string (float32, float64, float16, bfloat16, int64 or bool), got %s %s",
                       function_name(L), type, value);
        }
        const char *s = lua_tostring(L, -1);
        if (dp_dtype_parse(s, &o.dtype) != 0)
            luaL_error(L, "%s: option dtype: unknown dtype '%s' (expected float32, float64, float16, bfloat16, int64 or bool)",
                       function_name(L), s);
        o.has_dtype = true;
    }
    if (lua_getfield(L, idx, "device") != LUA_TNIL) {
        const char *s = lua_tostring(L, -1);
        if (lua_type(L, -1) == LUA_TSTRING && dp_device_parse(s, &o.device) != 0)
            luaL_error(L, "%s: option device: unknown device '%s' (expected cpu, cpu:N, cuda or cuda:N)",
                       function_name(L), s);
        o.device = lt_check_device(L, -1);
        o.has_device = true;
    }
    lua_pop(L, 2);
    o.requires_grad = lt_optfield_bool(L, idx, "requires_grad", false);
    if (o.has_device)   /* the default device was checked when it was set */
        check_exists(L, o.device);
    return o;
}

/* Finishes a created tensor sitting in slot: raises on failure, applies requires_grad. */
static int created(lua_State *L, dp_tensor **slot, const create_opts *o)
{
    lt_done(L, *slot);
    if (o->requires_grad && dp_set_requires_grad(*slot, true) != 0)
        lt_raise(L);
    return 1;
}

typedef dp_tensor *(*sized_fn)(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev);

/* f(sizes... | {sizes} [, opts]) */
static int create_sized(lua_State *L, sized_fn f)
{
    int64_t sizes[DP_MAX_DIMS];
    int next, n = lt_checksizes(L, 1, sizes, &next, false);
    if (!lua_isnoneornil(L, next + 1))
        luaL_argerror(L, next + 1, "unexpected argument after the options table");
    create_opts o = check_opts(L, next);
    dp_tensor **slot = lt_newslot(L);
    *slot = f(n, sizes, o.dtype, o.device);
    return created(L, slot, &o);
}

static int c_empty(lua_State *L) { return create_sized(L, dp_empty); }
static int c_zeros(lua_State *L) { return create_sized(L, dp_zeros); }
static int c_ones(lua_State *L) { return create_sized(L, dp_ones); }
static int c_rand(lua_State *L) { return create_sized(L, dp_rand); }
static int c_randn(lua_State *L) { return create_sized(L, dp_randn); }

/* The dtype PyTorch infers for a Lua value: int64 for integers, the default dtype for floats. */
static dp_dtype infer_dtype(lua_State *L, int idx)
{
    if (lua_isboolean(L, idx))
        return DP_BOOL;
    return lua_isinteger(L, idx) ? DP_INT64 : dp_default_dtype();
}

/* full(sizes, value [, opts]) */
static int c_full(lua_State *L)
{
    int64_t sizes[DP_MAX_DIMS];
    int next, n = lt_checksizes(L, 1, sizes, &next, false);
    if (next != 2)
        return luaL_argerror(L, 1, "full: sizes must be given as one table, e.g. full({2, 3}, 7)");
    double v = lt_checkscalar(L, 2);
    create_opts o = check_opts(L, 3);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_full(n, sizes, v, o.has_dtype ? o.dtype : infer_dtype(L, 2), o.device);
    return created(L, slot, &o);
}

/* arange([start,] stop [, step] [, opts]) */
static int c_arange(lua_State *L)
{
    int nnum = 0;
    while (nnum < 3 && lua_type(L, nnum + 1) == LUA_TNUMBER)
        nnum++;
    if (nnum == 0)
        return luaL_typeerror(L, 1, "number (arange([start,] stop [, step]))");
    create_opts o = check_opts(L, nnum + 1);
    double start = nnum > 1 ? lua_tonumber(L, 1) : 0, stop = lua_tonumber(L, nnum > 1 ? 2 : 1);
    double step = nnum > 2 ? lua_tonumber(L, 3) : 1;
    bool all_int = true;
    for (int i = 1; i <= nnum; i++)
        all_int = all_int && lua_isinteger(L, i);
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
        return luaL_error(L, "arange: start, stop and step must be finite and step nonzero "
                             "(got %f, %f, %f)", start, stop, step);
    if ((stop - start) * step < 0)
        return luaL_error(L, "arange: step %f goes away from stop (start %f, stop %f)", step, start, stop);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_arange(start, stop, step, o.has_dtype ? o.dtype : all_int ? DP_INT64 : dp_default_dtype(), o.device);
    return created(L, slot, &o);
}

/* randint(low, high, sizes [, opts]) or randint(high, sizes [, opts]) */
static int c_randint(lua_State *L)
{
    int base = lua_type(L, 2) == LUA_TNUMBER ? 2 : 1;
    lua_Integer low = base == 2 ? luaL_checkinteger(L, 1) : 0, high = luaL_checkinteger(L, base);
    int64_t sizes[DP_MAX_DIMS];
    luaL_checktype(L, base + 1, LUA_TTABLE);
    int next, n = lt_checksizes(L, base + 1, sizes, &next, false);
    create_opts o = check_opts(L, next);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_randint(low, high, n, sizes, o.has_dtype ? o.dtype : DP_INT64, o.device);
    return created(L, slot, &o);
}

/* eye(n [, m] [, opts]) */
static int c_eye(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    int optidx = lua_type(L, 2) == LUA_TNUMBER ? 3 : 2;
    lua_Integer m = optidx == 3 ? luaL_checkinteger(L, 2) : n;
    create_opts o = check_opts(L, optidx);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_eye(n, m, o.dtype, o.device);
    return created(L, slot, &o);
}

/* zeros_like(t [, opts]) ...: t's shape, dtype and device unless opts say otherwise */
static int create_like(lua_State *L, sized_fn f)
{
    dp_tensor *t = lt_check(L, 1);
    create_opts o = check_opts(L, 2);
    if (!o.has_dtype)
        o.dtype = t->dtype;
    if (!o.has_device)
        o.device = t->device;
    dp_tensor **slot = lt_newslot(L);
    *slot = f(t->ndim, t->sizes, o.dtype, o.device);
    return created(L, slot, &o);
}

static int c_empty_like(lua_State *L) { return create_like(L, dp_empty); }
static int c_zeros_like(lua_State *L) { return create_like(L, dp_zeros); }
static int c_ones_like(lua_State *L) { return create_like(L, dp_ones); }
static int c_rand_like(lua_State *L) { return create_like(L, dp_rand); }
static int c_randn_like(lua_State *L) { return create_like(L, dp_randn); }

/* randperm(n [, opts]): a random permutation of 1..n (int64; 1-based like every index) */
static int c_randperm(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    create_opts o = check_opts(L, 2);
    dp_tensor *perm = lt_randperm(L, n, false, 0, 0);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_to(perm, o.device, o.has_dtype ? o.dtype : DP_INT64, false);   /* a new reference */
    return created(L, slot, &o);
}

/* ------------------------------------------------------------------ torch.tensor */

typedef struct {
    int ndim;
    int64_t sizes[DP_MAX_DIMS];
    int64_t n, filled;
    double *d;          /* every value as a double */
    int64_t *i;         /* integers exactly (int64 results) */
    bool any_float, any_int;
} nested;

static void nested_error(lua_State *L, const int64_t *path, int depth, const char *msg)
{
    luaL_Buffer b;
    lua_Debug ar;          /* the FILE:LINE of the nearest Lua caller, as luaL_error gives */
    int level = 1;
    while (lua_getstack(L, level, &ar) && (lua_getinfo(L, "Sl", &ar), ar.currentline <= 0)) level++;
    luaL_buffinit(L, &b);
    luaL_where(L, level);
    luaL_addvalue(&b);
    luaL_addstring(&b, "tensor: ");
    luaL_addstring(&b, msg);
    if (depth > 0) {
        luaL_addstring(&b, " (at ");
        for (int k = 0; k < depth; k++)
            lua_pushfstring(L, "[%I]", (lua_Integer)path[k] + 1), luaL_addvalue(&b);
        luaL_addstring(&b, ")");
    }
    luaL_pushresult(&b);
    lua_error(L);
}

static void nested_leaf(lua_State *L, nested *s, const int64_t *path, int depth)
{
    double v;
    int64_t iv;
    dp_tensor *t;
    if (lua_isboolean(L, -1)) {
        iv = lua_toboolean(L, -1);
        v = (double)iv;
    } else if (lua_isinteger(L, -1)) {
        iv = lua_tointeger(L, -1);
        v = (double)iv;
        s->any_int = true;
    } else if (lua_type(L, -1) == LUA_TNUMBER) {
        v = lua_tonumber(L, -1);
        iv = (int64_t)v;
        s->any_float = true;
    } else if ((t = lt_test(L, -1)) && dp_numel(t) == 1) {
        if (dp_item(t, &v) != 0)
            lt_raise(L);
        iv = (int64_t)v;
        s->any_float |= dp_dtype_is_float(t->dtype);
        s->any_int |= t->dtype == DP_INT64;
    } else {
        nested_error(L, path, depth, lua_pushfstring(L, "expected a number or a boolean, got %s",
                                                     t ? "a tensor with several elements" : luaL_typename(L, -1)));
        return;
    }
    s->d[s->filled] = v;
    s->i[s->filled++] = iv;
}

static void nested_fill(lua_State *L, nested *s, int depth, int64_t *path)
{
    if (depth == s->ndim) {
        if (lua_istable(L, -1) && !lt_test(L, -1))
            nested_error(L, path, depth, "too deeply nested (the first elements set the shape)");
        nested_leaf(L, s, path, depth);
        return;
    }
    if (!lua_istable(L, -1) || lt_test(L, -1))
        nested_error(L, path, depth, lua_pushfstring(L, "expected a table of length %I, got %s",
                                                     (lua_Integer)s->sizes[depth], luaL_typename(L, -1)));
    if ((int64_t)luaL_len(L, -1) != s->sizes[depth])
        nested_error(L, path, depth, lua_pushfstring(L, "expected a sequence of length %I at dimension %d, "
                                                        "got %I", (lua_Integer)s->sizes[depth], depth + 1,
                                                     (lua_Integer)luaL_len(L, -1)));
    luaL_checkstack(L, 3, "tensor nested too deep");
    for (int64_t k = 0; k < s->sizes[depth]; k++) {
        path[depth] = k;
        lua_geti(L, -1, k + 1);
        nested_fill(L, s, depth + 1, path);
        lua_pop(L, 1);
    }
}

/* tensor(number | boolean | nested table | tensor [, opts]) */
static int c_tensor(lua_State *L)
{
    create_opts o = check_opts(L, 2);
    dp_tensor *src = lt_test(L, 1);
    if (src) { /* a copy, detached from src's graph */
        dp_tensor **slot = lt_newslot(L);
        dp_tensor *d = dp_detach(src);
        if (!d)
            return lt_raise(L);
        *slot = dp_to(d, o.has_device ? o.device : src->device, o.has_dtype ? o.dtype : src->dtype, false);
        if (*slot == d) {
            *slot = dp_clone(d);
            dp_tensor_release(d);
        }
        dp_tensor_release(d);
        return created(L, slot, &o);
    }
    nested s = { 0 };
    lua_pushvalue(L, 1);
    while (lua_istable(L, -1) && !lt_test(L, -1)) {
        if (s.ndim == DP_MAX_DIMS)
            return luaL_error(L, "tensor: more than %d nested levels", DP_MAX_DIMS);
        int64_t len = luaL_len(L, -1);
        s.sizes[s.ndim++] = len;
        if (len == 0)
            break;
        lua_geti(L, -1, 1);
    }
    lua_settop(L, 2);
    s.n = 1;
    for (int k = 0; k < s.ndim; k++)
        s.n *= s.sizes[k];
    s.d = lt_scratch(L, (size_t)s.n * sizeof(double));
    s.i = lt_scratch(L, (size_t)s.n * sizeof(int64_t));
    int64_t path[DP_MAX_DIMS + 1];
    lua_pushvalue(L, 1);
    nested_fill(L, &s, 0, path);
    lua_pop(L, 1);
    dp_dtype inferred = s.any_float || s.n == 0 ? dp_default_dtype() : s.any_int ? DP_INT64 : DP_BOOL;
    dp_dtype dt = o.has_dtype ? o.dtype : inferred;
    bool exact = !dp_dtype_is_float(inferred) && dt == DP_INT64;
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_from_host(exact ? (void *)s.i : (void *)s.d, exact ? DP_INT64 : DP_FLOAT64, s.ndim, s.sizes,
                         dt, o.device);
    return created(L, slot, &o);
}

/* ------------------------------------------------------------------ joining, comparing */

/* The tensors of the list at idx, into a temporary array pushed on the stack. */
static dp_tensor **check_list(lua_State *L, int idx, int *n)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    if (lt_test(L, idx))
        luaL_typeerror(L, idx, "table of tensors");
    *n = (int)luaL_len(L, idx);
    if (*n == 0)
        luaL_argerror(L, idx, "expected a non-empty table of tensors");
    dp_tensor **ts = lt_scratch(L, sizeof *ts * (size_t)*n);
    for (int i = 0; i < *n; i++) {
        lua_geti(L, idx, i + 1);
        ts[i] = lt_test(L, -1);
        if (!ts[i])
            luaL_argerror(L, idx, lua_pushfstring(L, "element %d is a %s, expected a tensor", i + 1,
                                                  luaL_typename(L, -1)));
        lua_pop(L, 1); /* the table keeps it alive */
    }
    return ts;
}

static int join(lua_State *L, bool stack)
{
    int n;
    lua_settop(L, 2);
    dp_tensor **ts = check_list(L, 1, &n);
    int dim = lua_isnoneornil(L, 2) ? 0 : lt_checkdim(L, 2, ts[0]->ndim, stack ? 1 : 0);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = stack ? dp_stack(n, ts, dim) : dp_cat(n, ts, dim));
}

static int c_cat(lua_State *L) { return join(L, false); }
static int c_stack(lua_State *L) { return join(L, true); }

static int c_allclose(lua_State *L)
{
    dp_tensor *a = lt_check(L, 1), *b = lt_check(L, 2);
    int r = dp_allclose(a, b, luaL_optnumber(L, 3, 1e-5), luaL_optnumber(L, 4, 1e-8));
    if (r < 0)
        return lt_raise(L);
    lua_pushboolean(L, r);
    return 1;
}

static int c_equal(lua_State *L)
{
    int r = dp_equal(lt_check(L, 1), lt_check(L, 2));
    if (r < 0)
        return lt_raise(L);
    lua_pushboolean(L, r);
    return 1;
}

/* ------------------------------------------------------------------ devices */

/* device('cpu'), device('cuda:1'), device('cuda', 1), device(d), device(0) */
static int c_device(lua_State *L)
{
    if (lua_isnoneornil(L, 2)) {
        lt_push_device(L, lt_check_device(L, 1));
        return 1;
    }
    const char *type = luaL_checkstring(L, 1);
    lua_Integer index = luaL_checkinteger(L, 2);
    if (strchr(type, ':'))
        return luaL_argerror(L, 1, lua_pushfstring(L, "type '%s' already has an index", type));
    if (index < 0)
        return luaL_argerror(L, 2, lua_pushfstring(L, "device index must be non-negative, got %I", index));
    dp_device d;
    if (dp_device_parse(lua_pushfstring(L, "%s:%I", type, index), &d) != 0)
        return luaL_argerror(L, 1, dp_last_error());
    lt_push_device(L, d);
    return 1;
}

/* set_default_device(d | nil): factories without device= create on d from now on (nil: cpu) */
static int c_set_default_device(lua_State *L)
{
    dp_device d = lua_isnoneornil(L, 1) ? dp_cpu() : lt_check_device(L, 1);
    check_exists(L, d);
    *(dp_device *)lua_newuserdatauv(L, sizeof d, 0) = d;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &default_device_key);
    return 0;
}

static int c_get_default_device(lua_State *L)
{
    lt_push_device(L, default_device(L));
    return 1;
}

/* A CUDA ordinal from an optional device argument; `none` when absent. */
static int cuda_index(lua_State *L, int idx, int none)
{
    if (lua_isnoneornil(L, idx))
        return none;
    dp_device d = lt_check_device(L, idx);
    if (d.type != DP_DEVICE_CUDA)
        luaL_argerror(L, idx, "expected a CUDA device");
    return d.index;
}

/* torch.cuda.set_device(d): the device a bare 'cuda' names from now on (in this thread) */
static int cuda_set_device(lua_State *L)
{
    dp_device d = lt_check_device(L, 1);
    if (d.type != DP_DEVICE_CUDA)
        return luaL_argerror(L, 1, "expected a CUDA device (an ordinal, 'cuda:N' or a torch.device)");
    if (dp_device_check(d) != 0)
        return lt_raise(L);
    dp_cuda_set_current(d.index);
    return 0;
}

static int cuda_current_device(lua_State *L)
{
    dp_device d = { DP_DEVICE_CUDA, dp_cuda_current() };
    if (dp_device_check(d) != 0)
        return lt_raise(L);
    lua_pushinteger(L, d.index);
    return 1;
}

static int cuda_is_built(lua_State *L) { lua_pushboolean(L, dp_device_type_built(DP_DEVICE_CUDA)); return 1; }
static int cuda_is_available(lua_State *L) { lua_pushboolean(L, dp_device_count(DP_DEVICE_CUDA) > 0); return 1; }
static int cuda_device_count(lua_State *L) { lua_pushinteger(L, dp_device_count(DP_DEVICE_CUDA)); return 1; }
static int cuda_empty_cache(lua_State *L) { dp_empty_cache(DP_DEVICE_CUDA); return 0; }

static int cuda_synchronize(lua_State *L)
{
    int index = cuda_index(L, 1, -1);
    dp_device d = { DP_DEVICE_CUDA, index < 0 ? 0 : index };
    if (dp_device_check(d) != 0 || dp_device_synchronize(DP_DEVICE_CUDA, index) != 0)
        return lt_raise(L);
    return 0;
}

static int cuda_memory_allocated(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_memory_allocated((dp_device){ DP_DEVICE_CUDA, cuda_index(L, 1, 0) }));
    return 1;
}

static int cuda_max_memory_allocated(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_max_memory_allocated((dp_device){ DP_DEVICE_CUDA, cuda_index(L, 1, 0) }));
    return 1;
}

static int cpu_device_count(lua_State *L) { lua_pushinteger(L, dp_cpu_device_count()); return 1; }

static int cpu_set_device_count(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    if (n < 1 || n > 1 << 16)
        return luaL_argerror(L, 1, lua_pushfstring(L, "device count must be positive, got %I", n));
    return dp_cpu_set_device_count((int)n) == 0 ? 0 : lt_raise(L);
}

static const luaL_Reg cuda_functions[] = {
    { "is_built", cuda_is_built }, { "is_available", cuda_is_available },
    { "device_count", cuda_device_count }, { "synchronize", cuda_synchronize },
    { "memory_allocated", cuda_memory_allocated }, { "max_memory_allocated", cuda_max_memory_allocated },
    { "empty_cache", cuda_empty_cache }, { "set_device", cuda_set_device },
    { "current_device", cuda_current_device }, { NULL, NULL }
};

static const luaL_Reg cpu_functions[] = {
    { "device_count", cpu_device_count }, { "set_device_count", cpu_set_device_count }, { NULL, NULL }
};

/* ------------------------------------------------------------------ seeds, threads, grad mode */

static int c_manual_seed(lua_State *L)
{
    dp_manual_seed((uint64_t)luaL_checkinteger(L, 1));
    return 0;
}

static int c_initial_seed(lua_State *L) { lua_pushinteger(L, (lua_Integer)dp_initial_seed()); return 1; }

static int c_set_num_threads(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    if (n < 1)
        return luaL_argerror(L, 1, lua_pushfstring(L, "number of threads must be positive, got %I", n));
    dp_set_num_threads((int)n);
    return 0;
}

static int c_get_num_threads(lua_State *L) { lua_pushinteger(L, dp_get_num_threads()); return 1; }

static int c_set_float32_matmul_precision(lua_State *L)
{
    static const char *const modes[] = { "highest", "high", "medium", NULL };
    int mode = luaL_checkoption(L, 1, NULL, modes);
    dp_set_allow_tf32(mode != 0); /* a build or machine without CUDA has nothing to change */
    dp_clear_error();
    return 0;
}

/* ------------------------------------------------------------------ nn and optim internals */

static dp_reduction check_reduction(lua_State *L, int idx)
{
    static const char *const names[] = { "none", "mean", "sum", NULL };
    return (dp_reduction)luaL_checkoption(L, idx, "mean", names);
}

static int c_linear(lua_State *L)
{
    dp_tensor *x = lt_check(L, 1), *w = lt_check(L, 2), *b = lua_isnoneornil(L, 3) ? NULL : lt_check(L, 3);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_linear(x, w, b));
}

/* conv(x, w, b, name, groups, transposed, stride, pad_lo, pad_hi, dilation, output_padding):
 * the five tables are arrays of nd integers (nn.functional checks what users pass) */
static int c_conv(lua_State *L)
{
    dp_tensor *x = lt_check(L, 1), *w = lt_check(L, 2), *b = lua_isnoneornil(L, 3) ? NULL : lt_check(L, 3);
    dp_conv_opts o = { .name = luaL_checkstring(L, 4), .groups = luaL_checkinteger(L, 5), .transposed = lt_optbool(L, 6, false) };
    int64_t *fields[5] = { o.stride, o.pad_lo, o.pad_hi, o.dilation, o.output_padding };
    luaL_checktype(L, 7, LUA_TTABLE);
    o.nd = (int)luaL_len(L, 7);
    if (o.nd < 1 || o.nd > 3) return luaL_error(L, "%s: %d spatial dims are not supported", o.name, o.nd);
    for (int f = 0; f < 5; f++) {
        luaL_checktype(L, 7 + f, LUA_TTABLE);
        if (luaL_len(L, 7 + f) != o.nd) return luaL_argerror(L, 7 + f, "expected one value per spatial dim");
        for (int d = 0; d < o.nd; d++) {
            lua_geti(L, 7 + f, d + 1);
            int ok;
            fields[f][d] = lua_tointegerx(L, -1, &ok);
            if (!ok) return luaL_argerror(L, 7 + f, "expected integers");
            lua_pop(L, 1);
        }
    }
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_conv(x, w, b, &o));
}

static int c_mse_loss(lua_State *L)
{
    dp_tensor *x = lt_check(L, 1), *y = lt_check(L, 2);
    dp_reduction red = check_reduction(L, 3);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_mse_loss(x, y, red));
}

typedef dp_tensor *(*class_loss_fn)(dp_tensor *input, dp_tensor *target, dp_reduction red);

/* input [N, C] (or [C]), target 1-based int64 classes */
static int class_loss(lua_State *L, class_loss_fn f)
{
    dp_tensor *x = lt_check(L, 1);
    dp_reduction red = check_reduction(L, 3);
    if (x->ndim < 1 || x->ndim > 2)
        return luaL_argerror(L, 1, lua_pushfstring(L, "expected input of shape [N, C] or [C], got a %d-D tensor",
                                                   x->ndim));
    dp_tensor **slot = lt_newslot(L);
    dp_tensor *target = lt_checkindex_op(L, 2, x->sizes[x->ndim - 1], 0, x->device, "target");
    *slot = f(x, target, red);
    dp_tensor_release(target);
    return lt_done(L, *slot);
}

static int c_nll_loss(lua_State *L) { return class_loss(L, dp_nll_loss); }
static int c_cross_entropy(lua_State *L) { return class_loss(L, dp_cross_entropy); }

static int c_dropout(lua_State *L)
{
    dp_tensor *x = lt_check(L, 1);
    double p = luaL_checknumber(L, 2);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_dropout(x, p, lt_optbool(L, 3, false)));
}

/* layer_norm(x, norm_ndim, weight|nil, bias|nil, eps): over the last norm_ndim dims */
static int c_layer_norm(lua_State *L)
{
    dp_tensor *x = lt_check(L, 1);
    lua_Integer nd = luaL_checkinteger(L, 2);
    dp_tensor *w = lua_isnoneornil(L, 3) ? NULL : lt_check(L, 3), *b = lua_isnoneornil(L, 4) ? NULL : lt_check(L, 4);
    double eps = luaL_checknumber(L, 5);
    if (nd < 0 || nd > x->ndim)
        return luaL_argerror(L, 2, lua_pushfstring(L, "cannot normalize over %I dims of a %d-D tensor", nd, x->ndim));
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_layer_norm(x, (int)nd, w, b, eps));
}

static int c_sgd_step(lua_State *L)
{
    dp_tensor *p = lt_check(L, 1), *g = lt_check(L, 2), *buf = lua_isnil(L, 3) ? NULL : lt_check(L, 3);
    luaL_checktype(L, 4, LUA_TTABLE);
    dp_sgd_opts o = {
        .lr = lt_optfield_number(L, 4, "lr", 0), .momentum = lt_optfield_number(L, 4, "momentum", 0),
        .dampening = lt_optfield_number(L, 4, "dampening", 0),
        .weight_decay = lt_optfield_number(L, 4, "weight_decay", 0),
        .nesterov = lt_optfield_bool(L, 4, "nesterov", false),
        .first_step = lt_optfield_bool(L, 4, "first_step", false),
    };
    return dp_sgd_step(p, g, buf, &o) == 0 ? 0 : lt_raise(L);
}

static int c_adam_step(lua_State *L)
{
    dp_tensor *p = lt_check(L, 1), *g = lt_check(L, 2), *m = lt_check(L, 3), *v = lt_check(L, 4);
    luaL_checktype(L, 5, LUA_TTABLE);
    dp_adam_opts o = {
        .lr = lt_optfield_number(L, 5, "lr", 1e-3), .beta1 = lt_optfield_number(L, 5, "beta1", 0.9),
        .beta2 = lt_optfield_number(L, 5, "beta2", 0.999), .eps = lt_optfield_number(L, 5, "eps", 1e-8),
        .weight_decay = lt_optfield_number(L, 5, "weight_decay", 0),
        .decoupled = lt_optfield_bool(L, 5, "decoupled", false),
        .step = (int64_t)lt_optfield_number(L, 5, "step", 1),
    };
    return dp_adam_step(p, g, m, v, &o) == 0 ? 0 : lt_raise(L);
}

static int c_adadelta_step(lua_State *L)
{
    dp_tensor *p = lt_check(L, 1), *g = lt_check(L, 2), *sq = lt_check(L, 3), *acc = lt_check(L, 4);
    luaL_checktype(L, 5, LUA_TTABLE);
    dp_adadelta_opts o = {
        .lr = lt_optfield_number(L, 5, "lr", 1.0), .rho = lt_optfield_number(L, 5, "rho", 0.9),
        .eps = lt_optfield_number(L, 5, "eps", 1e-6), .weight_decay = lt_optfield_number(L, 5, "weight_decay", 0),
        .maximize = lt_optfield_bool(L, 5, "maximize", false),
    };
    return dp_adadelta_step(p, g, sq, acc, &o) == 0 ? 0 : lt_raise(L);
}

/* set_data(p, new): p takes new's storage, shape, dtype and device in place, keeping its
 * identity (every Lua reference, hooks), requires_grad and grad: PyTorch's `p.data = new`,
 * which nn's Module:to() uses so that optimizers holding p keep working. */
static int c_set_data(lua_State *L)
{
    if (dp_set_data(lt_check(L, 1), lt_check(L, 2)))
        return lt_raise(L);
    return 0;
}

static int c_bytes_copied(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_bytes_copied_between_devices());
    return 1;
}

/* _linspace_int64(start, end, steps): linspace's int64 values (steps >= 2) on the CPU, as
 * PyTorch 1.13's CPU kernel makes them.  start and end are truncated to integers and
 * step = (end - start) / (steps - 1) in double; element i is trunc(start + step * i) below
 * steps / 2 and trunc(end - step * (steps - 1 - i)) from there, each product and sum one
 * fused multiply-add, as that kernel is compiled.  But the kernel fills whole blocks of 8 (two
 * vectors of 4) from the value v of each vector's first element: its element k is
 * trunc(v + k * step); the elements after the last whole block are computed one by one. */
static int64_t linspace_one(int64_t start, int64_t end, double step, int64_t steps, int64_t i)
{
    if (i < steps / 2)
        return (int64_t)fma(step, (double)i, (double)start);
    return (int64_t)fma(-step, (double)(steps - i - 1), (double)end);
}

static int c_linspace_int64(lua_State *L)
{
    double a = luaL_checknumber(L, 1), b = luaL_checknumber(L, 2);
    lua_Integer steps = luaL_checkinteger(L, 3);
    luaL_argcheck(L, steps >= 2, 3, "linspace: expected at least 2 steps");
    luaL_argcheck(L, isfinite(a) && isfinite(b) && fabs(a) < 9.2e18 && fabs(b) < 9.2e18, 1,
                  "linspace: start and end must be finite int64 values");
    int64_t start = (int64_t)a, end = (int64_t)b, n = steps;
    double step = ((double)end - (double)start) / (double)(n - 1);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_empty(1, &n, DP_INT64, (dp_device){ DP_DEVICE_CPU, 0 });
    if (!*slot)
        return lt_done(L, NULL);
    int64_t *out = dp_data(*slot), whole = n / 8 * 8;
    for (int64_t c = 0; c < whole; c += 4) {
        int64_t v = linspace_one(start, end, step, n, c);
        for (int k = 0; k < 4; k++)
            out[c + k] = (int64_t)fma((double)k, step, (double)v);
    }
    for (int64_t i = whole; i < n; i++)
        out[i] = linspace_one(start, end, step, n, i);
    return lt_done(L, *slot);
}

/* ------------------------------------------------------------------ _C */

static const luaL_Reg torch_functions[] = {
    { "tensor", c_tensor }, { "empty", c_empty }, { "zeros", c_zeros }, { "ones", c_ones },
    { "full", c_full }, { "rand", c_rand }, { "randn", c_randn }, { "randint", c_randint }, { "randperm", c_randperm },
    { "arange", c_arange }, { "set_default_dtype", c_set_default_dtype }, { "get_default_dtype", c_get_default_dtype }, { "eye", c_eye }, { "empty_like", c_empty_like },
    { "zeros_like", c_zeros_like }, { "ones_like", c_ones_like }, { "rand_like", c_rand_like },
    { "randn_like", c_randn_like }, { "cat", c_cat }, { "stack", c_stack },
    { "allclose", c_allclose }, { "equal", c_equal }, { "is_tensor", lt_is_tensor },
    { "device", c_device }, { "set_default_device", c_set_default_device },
    { "get_default_device", c_get_default_device }, { "manual_seed", c_manual_seed }, { "initial_seed", c_initial_seed },
    { "set_num_threads", c_set_num_threads }, { "get_num_threads", c_get_num_threads },
    { "set_float32_matmul_precision", c_set_float32_matmul_precision }, { "clock", lt_clock },
    { "linear", c_linear }, { "conv", c_conv }, { "mse_loss", c_mse_loss }, { "nll_loss", c_nll_loss },
    { "cross_entropy", c_cross_entropy }, { "dropout", c_dropout }, { "sgd_step", c_sgd_step },
    { "adam_step", c_adam_step }, { "adadelta_step", c_adadelta_step }, { "bytes_copied", c_bytes_copied }, { "set_data", c_set_data },
    { "layer_norm", c_layer_norm }, { "_linspace_int64", c_linspace_int64 },
    { "ops", lt_push_op_table }, { NULL, NULL }
};

/* When an allocation fails, the engine runs this (on the thread whose state last opened
 * dplua) before it empties the caches and retries: a full collection frees the tensors
 * that only the collector still holds, which may be device memory the collector's pace
 * (driven by host bytes) had not caught up with. */
static void collect_on_oom(void *ctx)
{
    lua_gc((lua_State *)ctx, LUA_GCCOLLECT);
}

static int forget_oom_hook(lua_State *L)
{
    dp_clear_oom_hook(lua_touserdata(L, lua_upvalueindex(1)));
    return 0;
}

static void set_oom_hook(lua_State *L)
{
    dp_set_oom_hook(collect_on_oom, L);
    lua_newuserdatauv(L, 1, 0);               /* cleared when the state closes */
    lua_createtable(L, 0, 1);
    lua_pushlightuserdata(L, L);
    lua_pushcclosure(L, forget_oom_hook, 1);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, "dplua.oom_hook");
}

int dplua_open_core(lua_State *L)
{
    if (dp_cpu_device_env_check() != 0)
        return luaL_error(L, "%s", dp_last_error());
    set_oom_hook(L);
    lt_open_tensor(L);                 /* torch.Tensor's methods */
    lua_newtable(L);
    lua_insert(L, -2);
    lua_setfield(L, -2, "Tensor");
    luaL_setfuncs(L, torch_functions, 0);
    luaL_setfuncs(L, lt_grad_functions, 0);
    luaL_setfuncs(L, lt_vision_functions, 0);
    luaL_setfuncs(L, lt_attention_functions, 0);
    luaL_setfuncs(L, lt_rnn_cell_functions, 0);
    luaL_setfuncs(L, lt_function_functions, 0);
    luaL_setfuncs(L, lt_random_functions, 0);
    luaL_setfuncs(L, lt_linalg_functions, 0);
    luaL_setfuncs(L, lt_determ_functions, 0);
    lt_set_functions(L);
    luaL_setfuncs(L, lt_op_functions, 0);   /* torch.* only */
    luaL_newlib(L, cuda_functions);
    lua_setfield(L, -2, "cuda");
    luaL_newlib(L, cpu_functions);
    lua_setfield(L, -2, "cpu");
    lua_getfield(L, LUA_REGISTRYINDEX, DPLUA_HOOKS);
    lua_setfield(L, -2, "_hooks");
    lua_pushliteral(L, DPLUA_VERSION);   /* set by the Makefile's VERSION */
    lua_setfield(L, -2, "__version__");
    return 1;
}
