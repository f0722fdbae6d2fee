/* lbind.c: the binding core that every binding file builds on (see lbind.h): the tensor
 * userdata (one dp_tensor reference per userdata, liolib.c style) and its result slots,
 * raising engine errors, the collector's view of engine memory, and the argument checks
 * and small helpers the binding files share. */
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "lbind.h"
#include "../src/half.h"

/* ------------------------------------------------------------------ errors and userdata */

/* Where the library's Lua chunks say they come from: "lua/" (the embedded sources' own
 * names) or, when the sources are found on disk, that folder's absolute path (dplua_lib.c). */
static const char *library_root = "lua/";

void lt_set_library_root(const char *root) { library_root = root; }

static bool under(const char *src, const char *root)
{
    size_t n = strlen(root);
    if (strncmp(src, root, n) != 0) return false;
    src += n;
    return strncmp(src, "nn/", 3) == 0 || strncmp(src, "optim/", 6) == 0 || strncmp(src, "torch/", 6) == 0;
}

/* Whether a chunk is part of dplua's own Lua library (as torch.options' error judges). */
bool lt_library_source(const char *src)
{
    if (*src++ != '@') return false;
    return under(src, "lua/") || under(src, library_root);
}

/* Raises the engine's message at the line of the first caller outside the library, so an
 * error from a loss or a layer points at the program's line, not at nn/functional.lua. */
int lt_raise(lua_State *L)
{
    const char *msg = dp_last_error();
    lt_where(L);
    lua_pushstring(L, msg && *msg ? msg : "unknown error in the dplua engine");
    lua_concat(L, 2);
    return lua_error(L);
}

void lt_where(lua_State *L)
{
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar) || *ar.what == 'C' || lt_library_source(ar.source)) continue;
        if (ar.currentline <= 0) break;
        lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
        return;
    }
    lua_pushliteral(L, "");
}

int lt_error(lua_State *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lt_where(L);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

/* luaL_argerror's message ("bad argument #N to 'f' (...)"), at the caller's line as lt_error */
int lt_argerror(lua_State *L, int arg, const char *extramsg)
{
    lua_Debug ar;
    if (!lua_getstack(L, 0, &ar))
        return lt_error(L, "bad argument #%d (%s)", arg, extramsg);
    lua_getinfo(L, "n", &ar);
    if (ar.namewhat && strcmp(ar.namewhat, "method") == 0 && --arg == 0)
        return lt_error(L, "calling '%s' on bad self (%s)", ar.name ? ar.name : "?", extramsg);
    return lt_error(L, "bad argument #%d to '%s' (%s)", arg, ar.name ? ar.name : "?", extramsg);
}

int lt_typeerror(lua_State *L, int arg, const char *tname)
{
    const char *typearg;
    if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING) typearg = lua_tostring(L, -1);
    else if (lua_type(L, arg) == LUA_TLIGHTUSERDATA) typearg = "light userdata";
    else typearg = luaL_typename(L, arg);
    return lt_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", tname, typearg));
}

/* The tensor metatable is also kept in the registry under this address: looking it up by
 * a light userdata costs far less than by its name. */
static const char tensor_mt_key = 0;

static void push_tensor_mt(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
}

/* A tensor userdata is a tagged box: telling a tensor from other values is then a size and
 * a tag comparison, with no metatable lookups (every op checks its operands).  Only this
 * file makes full userdata of this size with this tag, and Lua code cannot make any. */
#define TENSOR_TAG 0x64706c7561746e73ull   /* "dpluatns" */
typedef struct {
    uint64_t tag;
    dp_tensor *t;
} tensor_box;

dp_tensor **lt_newslot(lua_State *L)
{
    tensor_box *box = lua_newuserdatauv(L, sizeof *box, 0);
    box->tag = TENSOR_TAG;
    box->t = NULL;
    push_tensor_mt(L);
    lua_setmetatable(L, -2);
    return &box->t;
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
dp_tensor **lt_slot(lua_State *L, int idx)
{
    tensor_box *box = lua_touserdata(L, idx);
    /* (a light userdata has raw length 0, so it fails the size test) */
    if (!box || lua_rawlen(L, idx) != sizeof *box || box->tag != TENSOR_TAG)
        return NULL;
    return &box->t;
}

dp_tensor *lt_test(lua_State *L, int idx)
{
    dp_tensor **p = lt_slot(L, idx);
    if (p && !*p)
        lt_argerror(L, idx, "the tensor was closed");
    return p ? *p : NULL;
}

dp_tensor *lt_check(lua_State *L, int idx)
{
    dp_tensor **p = lt_slot(L, idx);
    if (!p && idx == 1 && lua_isnone(L, 1))   /* x.size() for x:size() */
        lt_argerror(L, 1, "a tensor expected, got no value (call methods with a colon: x:size(), not x.size())");
    if (!p)
        lt_typeerror(L, idx, DPLUA_TENSOR_MT);
    if (!*p)
        lt_argerror(L, idx, "the tensor was closed");
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

/* __gc and __close: releases the reference once */
static int tensor_gc(lua_State *L)
{
    dp_tensor **p = lt_slot(L, 1);
    if (p) {
        dp_tensor_release(*p);
        *p = NULL;
    }
    return 0;
}

void lt_setgc(lua_State *L, lua_CFunction gc)
{
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__close");
}

bool lt_newtensormt(lua_State *L)
{
    if (!luaL_newmetatable(L, DPLUA_TENSOR_MT))
        return false;
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
    lt_setgc(L, tensor_gc);
    return true;
}

/* ------------------------------------------------------------------ devices and dtypes */

dp_device lt_check_device(lua_State *L, int idx)
{
    dp_device d;
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        if (dp_device_parse(lua_tostring(L, idx), &d) != 0)
            lt_argerror(L, idx, dp_last_error());
        return d;
    case LUA_TNUMBER: {
        int isint;
        lua_Integer i = lua_tointegerx(L, idx, &isint);
        if (!isint || i < 0 || i > 1 << 20)
            lt_argerror(L, idx, lua_pushfstring(L, "a CUDA ordinal must be a non-negative "
                                                     "integer, got %s", luaL_tolstring(L, idx, NULL)));
        d.type = DP_DEVICE_CUDA;
        d.index = (int)i;
        return d;
    }
    default: {
        dp_device *p = luaL_testudata(L, idx, DPLUA_DEVICE_MT);
        if (!p)
            lt_typeerror(L, idx, "device (a string, a torch.device or a CUDA ordinal)");
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

dp_dtype lt_check_dtype(lua_State *L, int idx)
{
    dp_dtype dt;
    if (lua_type(L, idx) != LUA_TSTRING) lt_typeerror(L, idx, "string");
    const char *s = lua_tostring(L, idx);
    if (dp_dtype_parse(s, &dt) != 0)
        lt_argerror(L, idx, lua_pushfstring(L, "unknown dtype '%s' (expected float32, float64, "
                                                 "float16, bfloat16, int64 or bool)", s));
    return dt;
}

/* ------------------------------------------------------------------ argument helpers */

int lt_checkdim(lua_State *L, int arg, int ndim, int extra)
{
    int n = ndim + extra > 0 ? ndim + extra : 1;
    int isint;
    lua_Integer d = lua_tointegerx(L, arg, &isint);
    if (!isint)
        lt_typeerror(L, arg, "integer dimension");
    if (d == 0 || d > n || d < -n)
        lt_argerror(L, arg, lua_pushfstring(L, "dimension %d is out of range for a %d-D tensor "
                                                 "(expected 1 to %d, or -%d to -1)",
                                              (int)d, ndim, n, n));
    return d > 0 ? (int)d - 1 : n + (int)d;
}

int lt_optdim(lua_State *L, int arg, int ndim, int def)
{
    return lua_isnoneornil(L, arg) ? def : lt_checkdim(L, arg, ndim, 0);
}

int64_t lt_checkposition(lua_State *L, int arg, const dp_tensor *t, int dim)
{
    int isint;
    lua_Integer i = lua_tointegerx(L, arg, &isint);
    if (!isint)
        lt_typeerror(L, arg, "integer index");
    int64_t n = t->sizes[dim];
    if (i == 0 || i > n || i < -n)
        lt_error(L, "index %I is out of range for dimension %d with size %I", (lua_Integer)i, dim + 1,
                   (lua_Integer)n);
    return i > 0 ? i - 1 : n + i;
}

int64_t lt_checksize_entry(lua_State *L, int arg, int pos, bool allow_neg)
{
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < (allow_neg ? -1 : 0)) {
        const char *got = luaL_tolstring(L, -1, NULL);
        lt_argerror(L, arg, pos ? lua_pushfstring(L, "size %d must be a %s integer, got %s", pos,
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
            lt_argerror(L, first, lua_pushfstring(L, "%d sizes given, at most %d dimensions are "
                                                       "supported", (int)len, DP_MAX_DIMS));
        for (n = 0; n < len; n++) {
            lua_geti(L, first, n + 1);
            sizes[n] = lt_checksize_entry(L, first, n + 1, allow_neg);
        }
        *next = first + 1;
        return n;
    }
    int i = first;
    for (; lua_type(L, i) == LUA_TNUMBER; i++, n++) {
        if (n == DP_MAX_DIMS)
            lt_argerror(L, i, lua_pushfstring(L, "at most %d dimensions are supported", DP_MAX_DIMS));
        lua_pushvalue(L, i);
        sizes[n] = lt_checksize_entry(L, i, 0, allow_neg);
    }
    *next = i;
    return n;
}

double lt_checkscalar(lua_State *L, int arg)
{
    if (lua_isboolean(L, arg))
        return lua_toboolean(L, arg);
    if (lua_type(L, arg) != LUA_TNUMBER)
        lt_typeerror(L, arg, "tensor or number");
    return lua_tonumber(L, arg);
}

bool lt_optbool(lua_State *L, int arg, bool def)
{
    int ty = lua_type(L, arg);
    if (ty == LUA_TNONE || ty == LUA_TNIL)
        return def;
    if (ty != LUA_TBOOLEAN)
        lt_typeerror(L, arg, "boolean");
    return lua_toboolean(L, arg);
}

bool lt_optfield_bool(lua_State *L, int idx, const char *k, bool def)
{
    if (!lua_istable(L, idx))
        return def;
    int ty = lua_getfield(L, idx, k);
    if (ty != LUA_TNIL && ty != LUA_TBOOLEAN) {
        lt_error(L, "option %s must be a boolean, got %s", k, luaL_typename(L, -1));
    }
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
        lt_error(L, "option '%s' must be a number, got %s", k, luaL_typename(L, -1));
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
            lt_argerror(L, arg, lua_pushfstring(L, "%s must be a 1-D int64 tensor, got a %d-D %s tensor",
                                                  what, t->ndim, dp_dtype_name(t->dtype)));
        n = dp_numel(t);
        dev = t->device;
        buf = lt_scratch(L, (size_t)n * sizeof *buf);
        if (dp_to_host(t, buf, DP_INT64, n) != 0)
            lt_raise(L);
    } else {
        luaL_checktype(L, arg, LUA_TTABLE);
        n = luaL_len(L, arg);
        buf = lt_scratch(L, (size_t)n * sizeof *buf);
        for (int64_t i = 0; i < n; i++) {
            lua_geti(L, arg, i + 1);
            int isint;
            buf[i] = lua_tointegerx(L, -1, &isint);
            if (!isint)
                lt_argerror(L, arg, lua_pushfstring(L, "%s at position %d must be an integer, got %s",
                                                      what, (int)i + 1, luaL_tolstring(L, -1, NULL)));
            lua_pop(L, 1);
        }
    }
    for (int64_t i = 0; i < n; i++) {
        if ((buf[i] < 1 || buf[i] > size) && dim > 0)
            lt_argerror(L, arg, lua_pushfstring(L, "%s %I (at position %I) is out of range for dimension %d with size %I",
                                                  what, (lua_Integer)buf[i], (lua_Integer)i + 1, dim,
                                                  (lua_Integer)size));
        if (buf[i] < 1 || buf[i] > size)
            lt_argerror(L, arg, lua_pushfstring(L, "%s %I at position %I is out of range (expected 1 to %I)",
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

dp_tensor *lt_checkindex_op(lua_State *L, int arg, int64_t size, int dim, dp_device dev, const char *what)
{
    dp_tensor *t = lt_test(L, arg);
    if (!t || t->device.type != dev.type || t->device.index != dev.index || !dp_device_checks_indices(dev) ||
        t->dtype != DP_INT64 || t->ndim > 1)
        return lt_checkindex(L, arg, size, dim, dev, what);
    dp_tensor *r = dp_binary_scalar(DP_SUB, t, 1, false);
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
    case DP_FLOAT16: lua_pushnumber(L, dp_f16_to_float(*(const uint16_t *)elem)); break;
    case DP_BFLOAT16: lua_pushnumber(L, dp_bf16_to_float(*(const uint16_t *)elem)); break;
    default: lua_pushboolean(L, *(const bool *)elem); break;
    }
}

/* ------------------------------------------------------------------ shared pieces */

void *lt_scratch(lua_State *L, size_t nbytes)
{
    return lua_newuserdatauv(L, nbytes ? nbytes : 1, 0);
}

dp_tensor *lt_randperm(lua_State *L, lua_Integer n, bool gen, uint64_t seed, uint64_t offset)
{
    dp_tensor **slot = lt_newslot(L);
    dp_tensor *zero_based = dp_randperm((int64_t)n, gen, seed, offset);
    *slot = zero_based ? dp_binary_scalar(DP_ADD, zero_based, 1, false) : NULL;
    dp_tensor_release(zero_based);
    lt_done(L, *slot);
    return *slot;
}

int lt_is_tensor(lua_State *L)
{
    lua_pushboolean(L, lt_slot(L, 1) != NULL);
    return 1;
}

int lt_clock(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
    return 1;
}
