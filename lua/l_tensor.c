/* l_tensor.c: the tensor userdata (one dp_tensor reference per userdata, liolib.c style),
 * torch.device and grad_fn objects, argument helpers shared by the binding files, and the
 * tensor methods that read, view, convert and differentiate tensors.  Arithmetic lives in
 * l_ops.c, creation and the torch functions in l_torch.c. */
#include <string.h>

#include "l_tensor.h"

/* ------------------------------------------------------------------ errors and userdata */

int lt_raise(lua_State *L)
{
    const char *msg = dp_last_error();
    return luaL_error(L, "%s", msg && *msg ? msg : "unknown error in the dplua engine");
}

/* The tensor metatable is also kept in the registry under this address: looking it up by
 * a light userdata costs far less than by its name, and every op does it several times. */
static const char tensor_mt_key = 0;

static void push_tensor_mt(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
}

dp_tensor **lt_newslot(lua_State *L)
{
    dp_tensor **slot = lua_newuserdatauv(L, sizeof *slot, 0);
    *slot = NULL;
    push_tensor_mt(L);
    lua_setmetatable(L, -2);
    return slot;
}

int lt_done(lua_State *L, dp_tensor *t)
{
    if (!t)
        lt_raise(L);
    lt_account_memory(L);
    return 1;
}

void lt_push(lua_State *L, dp_tensor *t)
{
    if (!t)
        lt_raise(L);
    *lt_newslot(L) = t;
    lt_account_memory(L);
}

/* The userdata slot at idx when it is a tensor (open or closed), else NULL. */
static dp_tensor **test_slot(lua_State *L, int idx)
{
    dp_tensor **p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx))
        return NULL;
    push_tensor_mt(L);
    bool is_tensor = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return is_tensor ? p : NULL;
}

dp_tensor *lt_test(lua_State *L, int idx)
{
    dp_tensor **p = test_slot(L, idx);
    if (p && !*p)
        luaL_argerror(L, idx, "the tensor was closed");
    return p ? *p : NULL;
}

dp_tensor *lt_check(lua_State *L, int idx)
{
    dp_tensor **p = test_slot(L, idx);
    if (!p)
        luaL_typeerror(L, idx, DPLUA_TENSOR_MT);
    if (!*p)
        luaL_argerror(L, idx, "the tensor was closed");
    return *p;
}

/* The collector only sees the small userdata, not the engine memory behind it.  Two
 * things make up for that:
 *   - every tensor pushed adds what the engine allocated for it (its header, and its
 *     storage when new) to the collector's debt, so collections keep pace with tensor
 *     memory as they do with Lua's own;
 *   - a full collection runs once tensors worth max(64 MiB, what was alive after the last
 *     one) have been allocated, a hard bound however the collector is tuned.
 * The marks are per thread: a state is used by one thread at a time, and a collection that
 * a neighbouring state on the same thread triggers early is harmless. */
#define LT_GC_MIN_BYTES ((size_t)64 << 20)
#define LT_GC_REPORT_BYTES ((size_t)16 << 10)
static _Thread_local struct gc_marks {
    size_t mark, budget;     /* allocation counter at the last full collection, and the allowance */
    size_t seen;             /* allocation counter at the last push */
    size_t unreported;       /* bytes not yet added to the collector's debt */
} gc_marks;

void lt_account_memory(lua_State *L)
{
    size_t ever = dp_total_bytes_allocated_ever();
    struct gc_marks *g = &gc_marks;
    if (g->budget == 0) {
        g->mark = g->seen = ever;
        g->budget = LT_GC_MIN_BYTES;
    }
    g->unreported += sizeof(dp_tensor) + (ever - g->seen);
    g->seen = ever;
    if (ever - g->mark > g->budget) {
        lua_gc(L, LUA_GCCOLLECT);
        size_t live = dp_host_bytes_in_use();
        g->mark = g->seen = dp_total_bytes_allocated_ever();
        g->budget = live > LT_GC_MIN_BYTES ? live : LT_GC_MIN_BYTES;
        g->unreported = 0;
    } else if (g->unreported >= LT_GC_REPORT_BYTES) {
        size_t kb = g->unreported >> 10;
        g->unreported &= 1023;
        if (lua_gc(L, LUA_GCISRUNNING)) /* a stopped collector stays stopped */
            lua_gc(L, LUA_GCSTEP, kb > INT32_MAX ? INT32_MAX : (int)kb);
    }
}

static int tensor_gc(lua_State *L)
{
    dp_tensor **p = test_slot(L, 1);
    if (p) {
        dp_tensor_release(*p);
        *p = NULL;
    }
    return 0;
}

/* ------------------------------------------------------------------ devices and dtypes */

dp_device lt_check_device(lua_State *L, int idx)
{
    dp_device d;
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        if (dp_device_parse(lua_tostring(L, idx), &d) != 0)
            luaL_argerror(L, idx, dp_last_error());
        return d;
    case LUA_TNUMBER: {
        int isint;
        lua_Integer i = lua_tointegerx(L, idx, &isint);
        if (!isint || i < 0 || i > 1 << 20)
            luaL_argerror(L, idx, lua_pushfstring(L, "a CUDA ordinal must be a non-negative "
                                                     "integer, got %s", luaL_tolstring(L, idx, NULL)));
        d.type = DP_DEVICE_CUDA;
        d.index = (int)i;
        return d;
    }
    default: {
        dp_device *p = luaL_testudata(L, idx, DPLUA_DEVICE_MT);
        if (!p)
            luaL_typeerror(L, idx, "device (a string, a torch.device or a CUDA ordinal)");
        return *p;
    }
    }
}

void lt_push_device(lua_State *L, dp_device d)
{
    dp_device *p = lua_newuserdatauv(L, sizeof *p, 0);
    *p = d;
    luaL_setmetatable(L, DPLUA_DEVICE_MT);
}

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

dp_dtype lt_check_dtype(lua_State *L, int idx)
{
    dp_dtype dt;
    const char *s = luaL_checkstring(L, idx);
    if (dp_dtype_parse(s, &dt) != 0)
        luaL_argerror(L, idx, lua_pushfstring(L, "unknown dtype '%s' (expected float32, float64, "
                                                 "int64 or bool)", s));
    return dt;
}

/* ------------------------------------------------------------------ argument helpers */

int lt_checkdim(lua_State *L, int arg, int ndim, int extra)
{
    int n = ndim + extra > 0 ? ndim + extra : 1;
    int isint;
    lua_Integer d = lua_tointegerx(L, arg, &isint);
    if (!isint)
        luaL_typeerror(L, arg, "integer dimension");
    if (d == 0 || d > n || d < -n)
        luaL_argerror(L, arg, lua_pushfstring(L, "dimension %d is out of range for a %d-D tensor "
                                                 "(expected 1 to %d, or -%d to -1)",
                                              (int)d, ndim, n, n));
    return d > 0 ? (int)d - 1 : n + (int)d;
}

int lt_optdim(lua_State *L, int arg, int ndim, int def)
{
    return lua_isnoneornil(L, arg) ? def : lt_checkdim(L, arg, ndim, 0);
}

static int64_t size_entry(lua_State *L, int arg, int pos, bool allow_neg)
{
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < (allow_neg ? -1 : 0)) {
        const char *got = luaL_tolstring(L, -1, NULL);
        luaL_argerror(L, arg, pos ? lua_pushfstring(L, "size %d must be a %s integer, got %s", pos,
                                                    allow_neg ? "positive (or -1)" : "non-negative", got)
                                  : lua_pushfstring(L, "sizes must be %s integers, got %s",
                                                    allow_neg ? "positive (or -1)" : "non-negative", got));
    }
    lua_pop(L, 1);
    return v;
}

static bool is_opts_table(lua_State *L, int idx)
{
    if (!lua_istable(L, idx) || lua_rawlen(L, idx) > 0)
        return false;
    if (lua_getmetatable(L, idx)) { /* a torch.Size */
        lua_pop(L, 1);
        return false;
    }
    lua_pushnil(L);
    if (lua_next(L, idx)) {
        lua_pop(L, 2);
        return true;
    }
    return false;
}

int lt_checksizes(lua_State *L, int first, int64_t *sizes, int *next, bool allow_neg)
{
    int n = 0;
    first = lua_absindex(L, first);
    if (lua_type(L, first) == LUA_TTABLE && !is_opts_table(L, first)) {
        lua_Integer len = luaL_len(L, first);
        if (len > DP_MAX_DIMS)
            luaL_argerror(L, first, lua_pushfstring(L, "%d sizes given, at most %d dimensions are "
                                                       "supported", (int)len, DP_MAX_DIMS));
        for (n = 0; n < len; n++) {
            lua_geti(L, first, n + 1);
            sizes[n] = size_entry(L, first, n + 1, allow_neg);
        }
        *next = first + 1;
        return n;
    }
    int i = first;
    for (; lua_type(L, i) == LUA_TNUMBER; i++, n++) {
        if (n == DP_MAX_DIMS)
            luaL_argerror(L, i, lua_pushfstring(L, "at most %d dimensions are supported", DP_MAX_DIMS));
        lua_pushvalue(L, i);
        sizes[n] = size_entry(L, i, 0, allow_neg);
    }
    *next = i;
    return n;
}

double lt_checkscalar(lua_State *L, int arg)
{
    if (lua_isboolean(L, arg))
        return lua_toboolean(L, arg);
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_typeerror(L, arg, "tensor or number");
    return lua_tonumber(L, arg);
}

bool lt_optfield_bool(lua_State *L, int idx, const char *k, bool def)
{
    if (!lua_istable(L, idx))
        return def;
    int ty = lua_getfield(L, idx, k);
    bool v = ty == LUA_TNIL ? def : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

double lt_optfield_number(lua_State *L, int idx, const char *k, double def)
{
    if (!lua_istable(L, idx))
        return def;
    int ty = lua_getfield(L, idx, k);
    if (ty != LUA_TNIL && ty != LUA_TNUMBER)
        luaL_error(L, "option '%s' must be a number, got %s", k, luaL_typename(L, -1));
    double v = ty == LUA_TNIL ? def : lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* dim (1-based) is named in range errors; 0 for class targets */
dp_tensor *lt_checkindex(lua_State *L, int arg, int64_t size, int dim, dp_device dev, const char *what)
{
    int top = lua_gettop(L);
    dp_tensor *t = lt_test(L, arg);
    int64_t n;
    int64_t *buf;
    if (t) {
        if (t->dtype != DP_INT64 || t->ndim > 1)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a 1-D int64 tensor, got a %d-D %s tensor",
                                                  what, t->ndim, dp_dtype_name(t->dtype)));
        n = dp_numel(t);
        dev = t->device;
        buf = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *buf, 0);
        if (dp_to_host(t, buf, DP_INT64, n) != 0)
            lt_raise(L);
    } else {
        luaL_checktype(L, arg, LUA_TTABLE);
        n = luaL_len(L, arg);
        buf = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *buf, 0);
        for (int64_t i = 0; i < n; i++) {
            lua_geti(L, arg, i + 1);
            int isint;
            buf[i] = lua_tointegerx(L, -1, &isint);
            if (!isint)
                luaL_argerror(L, arg, lua_pushfstring(L, "%s at position %d must be an integer, got %s",
                                                      what, (int)i + 1, luaL_tolstring(L, -1, NULL)));
            lua_pop(L, 1);
        }
    }
    for (int64_t i = 0; i < n; i++) {
        if ((buf[i] < 1 || buf[i] > size) && dim > 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s %I (at position %I) is out of range for dimension %d with size %I",
                                                  what, (lua_Integer)buf[i], (lua_Integer)i + 1, dim,
                                                  (lua_Integer)size));
        if (buf[i] < 1 || buf[i] > size)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s %I at position %I is out of range (expected 1 to %I)",
                                                  what, (lua_Integer)buf[i], (lua_Integer)i + 1,
                                                  (lua_Integer)size));
        buf[i] -= 1;
    }
    dp_tensor *r = dp_from_host(buf, DP_INT64, 1, &n, DP_INT64, dev);
    lua_settop(L, top);
    if (!r)
        lt_raise(L);
    return r;
}

void lt_pushelement(lua_State *L, dp_dtype dt, const void *elem)
{
    switch (dt) {
    case DP_FLOAT32: lua_pushnumber(L, *(const float *)elem); break;
    case DP_FLOAT64: lua_pushnumber(L, *(const double *)elem); break;
    case DP_INT64: lua_pushinteger(L, *(const int64_t *)elem); break;
    default: lua_pushboolean(L, *(const bool *)elem); break;
    }
}

/* ------------------------------------------------------------------ reading values */

/* Copies t's elements to a temporary buffer (pushed as a userdata) in a dtype Lua reads
 * without loss: float64 for floats, int64, bool. */
static void *host_copy(lua_State *L, dp_tensor *t, dp_dtype *hdt)
{
    int64_t n = dp_numel(t);
    *hdt = dp_dtype_is_float(t->dtype) ? DP_FLOAT64 : t->dtype;
    void *buf = lua_newuserdatauv(L, (size_t)(n ? n : 1) * 8, 0);
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

static int f_grad(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (!t->grad)
        return 0;
    dp_tensor_retain(t->grad);
    lt_push(L, t->grad);
    return 1;
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

static const luaL_Reg tensor_fields[] = {
    { "is_cuda", f_is_cuda }, { "device", f_device }, { "dtype", f_dtype }, { "shape", t_size },
    { "requires_grad", f_requires_grad }, { "grad", f_grad }, { "grad_fn", f_grad_fn },
    { "is_leaf", f_is_leaf }, { "ndim", t_dim }, { "data", f_data }, { NULL, NULL }
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

static int64_t check_index(lua_State *L, int arg, dp_tensor *t, int dim)
{
    int isint;
    lua_Integer i = lua_tointegerx(L, arg, &isint);
    if (!isint)
        luaL_typeerror(L, arg, "integer index");
    int64_t n = t->sizes[dim];
    if (i == 0 || i > n || i < -n)
        luaL_error(L, "index %I is out of range for dimension %d with size %I", (lua_Integer)i, dim + 1,
                   (lua_Integer)n);
    return i > 0 ? i - 1 : n + i;
}

static int t_select(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (t->ndim == 0)
        return luaL_error(L, "select: cannot select from a 0-d tensor");
    int dim = lt_checkdim(L, 2, t->ndim, 0);
    int64_t i = check_index(L, 3, t, dim);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_select(t, dim, i));
}

/* t[i]: a view, or on a 1-D tensor the element as a Lua value */
static int index_get(lua_State *L, dp_tensor *t)
{
    if (t->ndim == 0)
        return luaL_error(L, "cannot index a 0-d tensor (use item())");
    int64_t i = check_index(L, 2, t, 0);
    if (t->ndim == 1 && t->device.type == DP_DEVICE_CPU) { /* CPU ops finish before returning */
        lt_pushelement(L, t->dtype, (const char *)dp_data(t) + i * t->strides[0] * (int64_t)dp_dtype_size(t->dtype));
        return 1;
    }
    dp_tensor **slot = lt_newslot(L);
    lt_done(L, *slot = dp_select(t, 0, i));
    if (t->ndim > 1)
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
    if (t->ndim == 0)
        return luaL_error(L, "cannot index a 0-d tensor (use fill_ or copy_)");
    int64_t i = check_index(L, 2, t, 0);
    dp_tensor *src = lt_test(L, 3);
    if (!src && !lua_isnumber(L, 3) && !lua_isboolean(L, 3))
        return luaL_error(L, "t[i] = value: value must be a number, boolean or tensor, got %s",
                          luaL_typename(L, 3));
    dp_tensor **slot = lt_newslot(L);
    lt_done(L, *slot = dp_select(t, 0, i));
    int rc = src ? dp_copy_(*slot, src) : dp_fill_(*slot, lt_checkscalar(L, 3));
    return rc == 0 ? 0 : lt_raise(L);
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

/* ------------------------------------------------------------------ views and copies */

static int t_narrow(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_checkdim(L, 2, t->ndim, 0);
    lua_Integer start = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
    int64_t n = t->sizes[dim];
    if (start < 0)
        start += n + 1;
    if (start < 1 || start > n + 1)
        return luaL_error(L, "narrow: start %I is out of range for dimension %d with size %I",
                          luaL_checkinteger(L, 3), dim + 1, (lua_Integer)n);
    if (len < 0 || start - 1 + len > n)
        return luaL_error(L, "narrow: start %I + length %I exceeds size %I of dimension %d",
                          start, len, (lua_Integer)n, dim + 1);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_narrow(t, dim, start - 1, len));
}

static int view_or_reshape(lua_State *L, bool view)
{
    dp_tensor *t = lt_check(L, 1);
    int64_t sizes[DP_MAX_DIMS];
    int next, n = lt_checksizes(L, 2, sizes, &next, true);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = view ? dp_view_sizes(t, n, sizes) : dp_reshape(t, n, sizes));
}

static int t_view(lua_State *L) { return view_or_reshape(L, true); }
static int t_reshape(lua_State *L) { return view_or_reshape(L, false); }

static int t_expand(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int64_t sizes[DP_MAX_DIMS];
    int next, n = lt_checksizes(L, 2, sizes, &next, true);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_expand(t, n, sizes));
}

static int t_transpose(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int d0 = lt_checkdim(L, 2, t->ndim, 0), d1 = lt_checkdim(L, 3, t->ndim, 0);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_transpose(t, d0, d1));
}

static int t_t(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (t->ndim > 2)
        return luaL_error(L, "t() expects a tensor with at most 2 dimensions, but it has %d", t->ndim);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = t->ndim == 2 ? dp_transpose(t, 0, 1) : dp_view_sizes(t, t->ndim, t->sizes));
}

static int t_permute(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int perm[DP_MAX_DIMS], n = 0;
    bool seen[DP_MAX_DIMS] = { false };
    bool table = lua_istable(L, 2);
    int count = table ? (int)luaL_len(L, 2) : lua_gettop(L) - 1;
    if (count != t->ndim)
        return luaL_error(L, "permute: %d dimensions given for a %d-D tensor", count, t->ndim);
    for (n = 0; n < count; n++) {
        int arg = table ? (lua_geti(L, 2, n + 1), lua_gettop(L)) : n + 2;
        perm[n] = lt_checkdim(L, arg, t->ndim, 0);
        if (table)
            lua_pop(L, 1);
        if (seen[perm[n]])
            return luaL_error(L, "permute: dimension %d is repeated", perm[n] + 1);
        seen[perm[n]] = true;
    }
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_permute(t, perm));
}

static int t_unsqueeze(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_checkdim(L, 2, t->ndim, 1);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_unsqueeze(t, dim));
}

static int t_squeeze(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_optdim(L, 2, t->ndim, -1);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_squeeze(t, dim));
}

static int t_flatten(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int start = lt_optdim(L, 2, t->ndim, 0);
    int end = lt_optdim(L, 3, t->ndim, t->ndim ? t->ndim - 1 : 0);
    if (t->ndim && start > end)
        return luaL_error(L, "flatten: start dimension %d comes after end dimension %d", start + 1, end + 1);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_flatten(t, start, end));
}

/* Pushes a table of narrow views of t along dim, of the given lengths. */
static int push_pieces(lua_State *L, dp_tensor *t, int dim, int n, const int64_t *lens)
{
    lua_createtable(L, n, 0);
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        dp_tensor **slot = lt_newslot(L);
        lt_done(L, *slot = dp_narrow(t, dim, start, lens[i]));
        lua_rawseti(L, -2, i + 1);
        start += lens[i];
    }
    return 1;
}

static int t_chunk(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    lua_Integer chunks = luaL_checkinteger(L, 2);
    if (t->ndim == 0)
        return luaL_error(L, "chunk expects at least a 1-dimensional tensor");
    if (chunks < 1)
        return luaL_argerror(L, 2, lua_pushfstring(L, "number of chunks must be positive, got %I", chunks));
    int dim = lt_optdim(L, 3, t->ndim, 0);
    int64_t size = t->sizes[dim], each = (size + chunks - 1) / chunks;
    int n = each ? (int)((size + each - 1) / each) : 1;
    int64_t *lens = lua_newuserdatauv(L, sizeof *lens * (size_t)(n ? n : 1), 0);
    for (int i = 0; i < n; i++)
        lens[i] = each ? (size - i * each < each ? size - i * each : each) : 0;
    return push_pieces(L, t, dim, n, lens);
}

static int t_split(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (t->ndim == 0)
        return luaL_error(L, "split expects at least a 1-dimensional tensor");
    int dim = lt_optdim(L, 3, t->ndim, 0);
    int64_t size = t->sizes[dim];
    int64_t *lens;
    int n;
    if (lua_istable(L, 2)) {
        n = (int)luaL_len(L, 2);
        lens = lua_newuserdatauv(L, sizeof *lens * (size_t)(n ? n : 1), 0);
        int64_t total = 0;
        for (int i = 0; i < n; i++) {
            lua_geti(L, 2, i + 1);
            lens[i] = size_entry(L, 2, i + 1, false);
            total += lens[i];
        }
        if (total != size)
            return luaL_error(L, "split: sizes add up to %I but dimension %d has size %I",
                              (lua_Integer)total, dim + 1, (lua_Integer)size);
    } else {
        lua_Integer each = luaL_checkinteger(L, 2);
        if (each < 1)
            return luaL_argerror(L, 2, lua_pushfstring(L, "split size must be positive, got %I", each));
        n = size ? (int)((size + each - 1) / each) : 1;
        lens = lua_newuserdatauv(L, sizeof *lens * (size_t)n, 0);
        for (int i = 0; i < n; i++)
            lens[i] = size - i * each < each ? size - i * each : each;
    }
    return push_pieces(L, t, dim, n, lens);
}

static int t_clone(lua_State *L) { dp_tensor **slot = lt_newslot(L); return lt_done(L, *slot = dp_clone(lt_check(L, 1))); }
static int t_detach(lua_State *L) { dp_tensor **slot = lt_newslot(L); return lt_done(L, *slot = dp_detach(lt_check(L, 1))); }

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

static int t_pin_memory(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_pin_memory(t);
    return push_same_or_new(L, t, slot);
}

static int t_is_pinned(lua_State *L) { lua_pushboolean(L, dp_is_pinned(lt_check(L, 1))); return 1; }

static int t_contiguous(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_contiguous(t);
    return push_same_or_new(L, t, slot);
}

static int t_index_select(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_checkdim(L, 2, t->ndim, 0);
    dp_tensor **slot = lt_newslot(L);
    dp_tensor *idx = lt_checkindex(L, 3, t->ndim ? t->sizes[dim] : 1, dim + 1, t->device, "index");
    *slot = dp_index_select(t, dim, idx);
    dp_tensor_release(idx);
    return lt_done(L, *slot);
}

/* ------------------------------------------------------------------ conversions */

static void device_ready(lua_State *L, dp_device d)
{
    if (dp_device_check(d) != 0)
        lt_raise(L);
}

static int convert(lua_State *L, dp_tensor *t, dp_device dev, dp_dtype dt, bool non_blocking)
{
    if (!dp_device_eq(dev, t->device))
        device_ready(L, dev);
    dp_tensor **slot = lt_newslot(L);
    *slot = dp_to(t, dev, dt, non_blocking);
    return push_same_or_new(L, t, slot);
}

static int t_to(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    dp_device dev = t->device;
    dp_dtype dt = t->dtype;
    bool non_blocking = false;
    int top = lua_gettop(L);
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
                if (!k || (strcmp(k, "device") && strcmp(k, "dtype") && strcmp(k, "non_blocking") && strcmp(k, "copy")))
                    return luaL_error(L, "to: invalid option '%s' (expected device, dtype, non_blocking)",
                                      k ? k : luaL_typename(L, -2));
                lua_pop(L, 1);
            }
            if (lua_getfield(L, i, "device") != LUA_TNIL)
                dev = lt_check_device(L, -1);
            if (lua_getfield(L, i, "dtype") != LUA_TNIL)
                dt = lt_check_dtype(L, -1);
            lua_pop(L, 2);
            non_blocking = lt_optfield_bool(L, i, "non_blocking", false);
        } else if (lua_isboolean(L, i)) {
            non_blocking = lua_toboolean(L, i);
        } else if (lua_type(L, i) == LUA_TSTRING && dp_device_parse(lua_tostring(L, i), &dev) != 0) {
            return luaL_argerror(L, i, lua_pushfstring(L, "'%s' is neither a dtype (float32, float64, int64, "
                                                          "bool) nor a device (cpu, cpu:N, cuda, cuda:N)",
                                                       lua_tostring(L, i)));
        } else if (lua_type(L, i) != LUA_TSTRING) {
            dev = lt_check_device(L, i);
        }
    }
    return convert(L, t, dev, dt, non_blocking);
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

static const char *const type_names[DP_NDTYPES] = { "FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor" };

/* t:type() is 'torch.FloatTensor' ('torch.cuda.FloatTensor' on CUDA); t:type(name) converts. */
static int t_type(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (lua_isnoneornil(L, 2)) {
        lua_pushfstring(L, "torch.%s%s", t->device.type == DP_DEVICE_CUDA ? "cuda." : "", type_names[t->dtype]);
        return 1;
    }
    const char *name = luaL_checkstring(L, 2);
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
                                                  "'torch.FloatTensor' or 'torch.cuda.LongTensor')", name));
}

/* ------------------------------------------------------------------ autograd */

static int t_backward(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int opts = lua_istable(L, 2) && !lt_test(L, 2) ? 2 : 3;
    dp_tensor *grad = opts == 3 && !lua_isnoneornil(L, 2) ? lt_check(L, 2) : NULL;
    bool retain = lt_optfield_bool(L, opts, "retain_graph", false);
    return dp_backward(t, grad, retain) == 0 ? 0 : lt_raise(L);
}

static int t_requires_grad_(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    bool on = lua_isnoneornil(L, 2) ? true : lua_toboolean(L, 2);
    if (dp_set_requires_grad(t, on) != 0)
        lt_raise(L);
    lua_settop(L, 1);
    return 1;
}

/* ------------------------------------------------------------------ registration */

const luaL_Reg lt_shape_functions[] = {
    { "select", t_select }, { "narrow", t_narrow }, { "reshape", t_reshape }, { "t", t_t },
    { "transpose", t_transpose }, { "permute", t_permute }, { "unsqueeze", t_unsqueeze },
    { "squeeze", t_squeeze }, { "flatten", t_flatten }, { "chunk", t_chunk }, { "split", t_split },
    { "clone", t_clone }, { "index_select", t_index_select }, { "numel", t_numel },
    { "detach", t_detach }, { NULL, NULL }
};

const luaL_Reg lt_tensor_methods[] = {
    { "size", t_size }, { "dim", t_dim }, { "nelement", t_numel }, { "item", t_item }, { "tolist", t_tolist },
    { "is_contiguous", t_is_contiguous }, { "stride", t_stride }, { "view", t_view }, { "expand", t_expand },
    { "contiguous", t_contiguous }, { "pin_memory", t_pin_memory }, { "is_pinned", t_is_pinned }, { "to", t_to }, { "cuda", t_cuda }, { "cpu", t_cpu },
    { "float", t_float }, { "double", t_double }, { "long", t_long }, { "bool", t_bool },
    { "type", t_type }, { "backward", t_backward }, { "requires_grad_", t_requires_grad_ },
    { "_version", t_version }, { "data_ptr", t_data_ptr }, { "storage_offset", t_storage_offset },
    { NULL, NULL }
};

static void set_funcs(lua_State *L, const luaL_Reg *r)
{
    for (; r->name; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
}

void lt_open_tensor(lua_State *L)
{
    if (luaL_newmetatable(L, DPLUA_DEVICE_MT)) {
        const luaL_Reg meta[] = { { "__index", device_index }, { "__tostring", device_tostring },
                                  { "__eq", device_eq }, { NULL, NULL } };
        set_funcs(L, meta);
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, DPLUA_NODE_MT)) {
        const luaL_Reg meta[] = { { "__index", node_index }, { "__tostring", node_tostring },
                                  { "__eq", node_eq }, { "__gc", node_gc }, { NULL, NULL } };
        set_funcs(L, meta);
    }
    lua_pop(L, 1);
    if (!luaL_newmetatable(L, DPLUA_TENSOR_MT)) {
        lua_getfield(L, -1, "__methods");
        lua_remove(L, -2);
        return;
    }
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
    const luaL_Reg meta[] = { { "__gc", tensor_gc }, { "__close", tensor_gc }, { "__len", t_len },
                              { "__tostring", tensor_tostring }, { NULL, NULL } };
    set_funcs(L, meta);
    set_funcs(L, lt_math_metamethods);
    lua_newtable(L); /* methods: torch.Tensor */
    set_funcs(L, lt_shape_functions);
    set_funcs(L, lt_tensor_methods);
    set_funcs(L, lt_math_functions);
    set_funcs(L, lt_math_methods);
    lua_newtable(L); /* fields */
    set_funcs(L, tensor_fields);
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
