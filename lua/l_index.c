/* l_index.c: indexing with tables and tensors: t[{1, {2, -1}, idx}], t[idx], t[mask] (reading
 * and writing), index_put(_), gather, scatter(_add)(_) and nonzero.  Numbers and {first,
 * last} ranges make views (Torch7's table indexing); int64 and bool tensors then index the
 * view as PyTorch's advanced indexing does (src/index.c).  Everything counts from 1. */
#include <string.h>

#include "l_tensor.h"

#define MAX_KEY 16

/* A parsed key: the region its numbers and ranges take, and what indexes the region's view. */
typedef struct {
    dp_region region;
    int vdim;                        /* dims of the region's view */
    bool narrowed;                   /* a number or a range other than {} */
    int n;                           /* entries of ix: one per view dim (masks cover several) */
    dp_tensor *ix[DP_MAX_DIMS];      /* NULL: the whole dim */
    int ntensors;
    bool numbers_only;               /* every entry was a number (t[{i, j}] is an element) */
} index_key;

static int out_of_range(lua_State *L, lua_Integer i, int dim, int64_t size)
{
    return luaL_error(L, "index %I is out of range for dimension %d with size %I (dplua counts from 1)", i, dim + 1,
                      (lua_Integer)size);
}

/* An integer at idx (1-based, negative from the end) as a 0-based position in [0, size + extra) */
static int64_t position(lua_State *L, int idx, int dim, int64_t size, int extra)
{
    int isint;
    lua_Integer i = lua_tointegerx(L, idx, &isint);
    if (!isint)
        luaL_error(L, "index for dimension %d must be an integer, got %s", dim + 1, luaL_tolstring(L, idx, NULL));
    int64_t z = i < 0 ? i + size : i - 1;
    if (z < 0 || z >= size + extra || (i == 0))
        out_of_range(L, i, dim, size);
    return z;
}

static dp_tensor *push_view(lua_State *L, dp_tensor *v)
{
    dp_tensor **slot = lt_newslot(L);
    lt_done(L, *slot = v);
    return *slot;
}

/* A {first, last [, step]} range (inclusive; {} is the whole dim, {i} is i alone; a step takes
   every step-th element from first up to last, PyTorch's first-1:last:step) into dim of r,
   of the given size. */
static void apply_range(lua_State *L, int entry, dp_region *r, int dim, int64_t size)
{
    int len = (int)luaL_len(L, entry);
    if (len == 0)
        return;
    if (len > 3)
        luaL_error(L, "a range for dimension %d must be {}, {i}, {first, last} or {first, last, step}, got %d numbers",
                   dim + 1, len);
    lua_Integer step = 1;
    if (len == 3) {
        lua_geti(L, entry, 3);
        int isint;
        step = lua_tointegerx(L, -1, &isint);
        if (!isint || step < 1)
            luaL_error(L, "the step of a range for dimension %d must be a positive integer, got %s", dim + 1,
                       luaL_tolstring(L, -1, NULL));
        lua_pop(L, 1);
    }
    lua_geti(L, entry, 1);
    int64_t first = position(L, -1, dim, size, 0), last = first;
    lua_pop(L, 1);
    if (len >= 2) {
        lua_geti(L, entry, 2);
        int isint;
        lua_Integer e = lua_tointegerx(L, -1, &isint);
        if (!isint)
            luaL_error(L, "index for dimension %d must be an integer, got %s", dim + 1, luaL_tolstring(L, -1, NULL));
        last = e < 0 ? e + size : e - 1;
        if (e == 0 || last >= size || last < first - 1)
            luaL_error(L, "range {%I, %I} is out of range for dimension %d with size %I (dplua counts from 1)",
                       (lua_Integer)first + 1, e, dim + 1, (lua_Integer)size);
        lua_pop(L, 1);
    }
    r->start[dim] = first;
    r->count[dim] = last < first ? 0 : (last - first) / step + 1;
    r->step[dim] = step;
}

/* Parses the key at arg (a number, a table or a tensor) for the tensor t. */
static void parse_key(lua_State *L, dp_tensor *t, int arg, index_key *k)
{
    dp_region *r = &k->region;
    r->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        r->start[d] = 0;
        r->count[d] = t->sizes[d];
        r->step[d] = 1;
        r->keep[d] = true;
    }
    k->vdim = t->ndim;
    k->narrowed = false;
    k->n = 0;
    k->ntensors = 0;
    k->numbers_only = true;
    dp_tensor *single = lt_test(L, arg);
    bool one = single || lua_isnumber(L, arg);
    if (!one && !lua_istable(L, arg))
        luaL_error(L, "a tensor index must be an integer, a table or a tensor, got %s", luaL_typename(L, arg));
    int count = one ? 1 : (int)luaL_len(L, arg);
    if (count > MAX_KEY)
        luaL_error(L, "too many indices (%d) for a tensor of dimension %d", count, t->ndim);
    int odim = 0;   /* the dim of t */
    for (int e = 1; e <= count; e++) {
        int entry = arg;
        if (!one) {
            lua_geti(L, arg, e);
            entry = lua_gettop(L);
        }
        dp_tensor *ix = single ? single : lt_test(L, entry);
        int consumes = ix && ix->dtype == DP_BOOL ? ix->ndim : 1;
        if (!ix && !lua_isnumber(L, entry) && !lua_istable(L, entry))
            luaL_error(L, "index entry %d must be an integer, a {first, last} range or a tensor, got %s", e,
                       luaL_typename(L, entry));
        if (odim + consumes > t->ndim)
            luaL_error(L, "too many indices for a tensor of dimension %d", t->ndim);
        if (ix) {
            if (ix->dtype != DP_INT64 && ix->dtype != DP_BOOL)
                luaL_error(L, "tensors used as indices must be int64 or bool tensors, got %s", dp_dtype_name(ix->dtype));
            k->ix[k->n++] = ix;
            k->ntensors++;
            k->numbers_only = false;
        } else if (lua_isnumber(L, entry)) {
            r->start[odim] = position(L, entry, odim, t->sizes[odim], 0);
            r->keep[odim] = false;
            k->vdim--;
            k->narrowed = true;
        } else {
            apply_range(L, entry, r, odim, t->sizes[odim]);
            k->narrowed = k->narrowed || luaL_len(L, entry) > 0;
            k->ix[k->n++] = NULL;
            k->numbers_only = false;
        }
        odim += consumes;
        if (!one)
            lua_pop(L, 1);
    }
}

/* t[key] for a number, table or tensor key */
int lt_index_get(lua_State *L, dp_tensor *t)
{
    index_key k;
    parse_key(L, t, 2, &k);
    dp_tensor *view = push_view(L, dp_region_view(t, &k.region));
    if (k.ntensors) {
        dp_tensor **slot = lt_newslot(L);
        return lt_done(L, *slot = dp_index(view, k.n, k.ix, 1));
    }
    /* an element, as t[i] on a 1-D tensor: a number, or the 0-dim view (on top of the stack)
       when t requires grad */
    if (k.numbers_only && view->ndim == 0 && t->ndim > 0) {
        if (lt_element_as_tensor(t))
            return 1;
        char elem[8];
        dp_dtype hdt = dp_dtype_is_float(t->dtype) ? DP_FLOAT64 : t->dtype;
        if (dp_to_host(view, elem, hdt, 1) != 0)
            lt_raise(L);
        lt_pushelement(L, hdt, elem);
        return 1;
    }
    push_view(L, dp_view_sizes(view, view->ndim, view->sizes));   /* a view, even of t itself */
    return 1;
}

/* A write that autograd records refuses a tensor sharing its memory with another (the
 * engine's dp_region_write_): views dropped but not yet collected would count, so they are
 * collected first. */
static void collect_dropped_views(lua_State *L, dp_tensor *t, dp_tensor *v)
{
    if (dp_grad_enabled() && (t->requires_grad || v->requires_grad) && __atomic_load_n(&t->storage->refcount, __ATOMIC_ACQUIRE) > 1)
        lua_gc(L, LUA_GCCOLLECT);
}

/* A value to write into t: the tensor at arg, or a number or boolean as a 0-dim tensor. */
static dp_tensor *value_arg(lua_State *L, int arg, dp_tensor *t, const char *what)
{
    dp_tensor *v = lt_test(L, arg);
    if (v)
        return v;
    if (!lua_isnumber(L, arg) && !lua_isboolean(L, arg))
        luaL_error(L, "%s: the value must be a number, boolean or tensor, got %s", what, luaL_typename(L, arg));
    double x = lua_isboolean(L, arg) ? lua_toboolean(L, arg) : lua_tonumber(L, arg);
    /* filled on t's device: a value made on the host would be a blocking copy there */
    return push_view(L, dp_full(0, NULL, x, t->dtype, t->device));
}

/* PyTorch's rule for index_put, scatter and their relatives: a tensor of values has t's dtype
 * (t[key] = v alone converts) */
static void same_dtype(lua_State *L, const char *what, dp_tensor *t, dp_tensor *v)
{
    if (v->dtype != t->dtype)
        luaL_error(L, "%s: expected the values to have the tensor's dtype %s, got %s", what, dp_dtype_name(t->dtype),
                   dp_dtype_name(v->dtype));
}

/* PyTorch's assignment rule: a value with more dims than the destination loses its leading
   size-1 dims (logits[i] = v with v of shape [1, 27] into a row of 27); pushes the view. */
dp_tensor *lt_drop_leading_ones(lua_State *L, dp_tensor *src, int ndim)
{
    while (src->ndim > ndim && src->sizes[0] == 1)
        src = push_view(L, dp_select(src, 0, 0));
    return src;
}

/* t[key] = value for a number, table or tensor key */
int lt_index_set(lua_State *L, dp_tensor *t)
{
    lua_settop(L, 3);
    index_key k;
    parse_key(L, t, 2, &k);
    dp_tensor *v = lt_test(L, 3);
    if (!v && !lua_isnumber(L, 3) && !lua_isboolean(L, 3))
        return luaL_error(L, "t[index] = value: value must be a number, boolean or tensor, got %s", luaL_typename(L, 3));
    if (!v && !k.ntensors)   /* a number or boolean */
        return dp_region_fill_(t, &k.region, lt_checkscalar(L, 3)) == 0 ? 0 : lt_raise(L);
    if (v && !k.ntensors)
        v = lt_drop_leading_ones(L, v, k.vdim);
    else if (!v)
        v = value_arg(L, 3, t, "t[index] = value");
    collect_dropped_views(L, t, v);
    return dp_region_write_(t, &k.region, k.ntensors ? k.n : 0, k.ix, v, false, 1) == 0 ? 0 : lt_raise(L);
}

/* t:index_put_(indices, values [, {accumulate=false}]) and the out-of-place index_put */
static int index_put(lua_State *L, bool inplace)
{
    dp_tensor *t = lt_check(L, 1);
    lua_settop(L, 4);
    if (!lua_istable(L, 2) && !lt_test(L, 2))
        return luaL_typeerror(L, 2, "table of index tensors");
    bool acc = lt_optfield_bool(L, 4, "accumulate", false);
    dp_tensor *v = value_arg(L, 3, t, inplace ? "index_put_" : "index_put");
    if (lt_test(L, 3))
        same_dtype(L, inplace ? "index_put_" : "index_put", t, v);
    index_key k;
    parse_key(L, t, 2, &k);
    if (!k.ntensors)
        return luaL_error(L, "index_put%s: expected at least one index tensor", inplace ? "_" : "");
    if (inplace) {
        if (k.narrowed)
            return luaL_error(L, "index_put_: the indices must be tensors or {} (use t[{...}] = v for numbers and ranges)");
        collect_dropped_views(L, t, v);
        if (dp_index_put_(t, k.n, k.ix, v, acc, 1))
            return lt_raise(L);
        lua_settop(L, 1);
        return 1;
    }
    if (k.narrowed)
        return luaL_error(L, "index_put: the indices must be tensors or {}");
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_index_put(t, k.n, k.ix, v, acc, 1));
}

static int l_index_put_(lua_State *L) { return index_put(L, true); }
static int l_index_put(lua_State *L) { return index_put(L, false); }

/* t:gather(dim, index) */
static int l_gather(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_checkdim(L, 2, t->ndim ? t->ndim : 1, 0);
    dp_tensor *ix = lt_check(L, 3);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_gather_index(t, dim, ix, 1));
}

/* scatter(dim, index, src | value), scatter_add(dim, index, src) and the in-place forms */
static int scatter(lua_State *L, bool add, bool inplace)
{
    dp_tensor *t = lt_check(L, 1);
    lua_settop(L, 5);
    int dim = lt_checkdim(L, 2, t->ndim ? t->ndim : 1, 0);
    dp_tensor *ix = lt_check(L, 3);
    if (!lua_isnil(L, 5))
        return luaL_error(L, "scatter: the reduce argument is not supported; use scatter_add or scatter_reduce");
    if (add && !lt_test(L, 4))
        return luaL_typeerror(L, 4, "tensor");
    dp_tensor *src = value_arg(L, 4, t, add ? "scatter_add" : "scatter");
    if (lt_test(L, 4))
        same_dtype(L, add ? "scatter_add" : "scatter", t, src);
    if (inplace) {
        collect_dropped_views(L, t, src);
        if (dp_scatter_index_(t, dim, ix, src, add, 1))
            return lt_raise(L);
        lua_settop(L, 1);
        return 1;
    }
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_scatter_index(t, dim, ix, src, add, 1));
}

static int l_scatter(lua_State *L) { return scatter(L, false, false); }
static int l_scatter_(lua_State *L) { return scatter(L, false, true); }
static int l_scatter_add(lua_State *L) { return scatter(L, true, false); }
static int l_scatter_add_(lua_State *L) { return scatter(L, true, true); }

/* torch._C._scatter_reduce(t, dim, index, src, reduce, include_self): prod, amax, amin */
static int l_scatter_reduce(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_checkdim(L, 2, t->ndim ? t->ndim : 1, 0);
    dp_tensor *ix = lt_check(L, 3), *src = lt_check(L, 4);
    const char *reduce = luaL_checkstring(L, 5);
    same_dtype(L, "scatter_reduce", t, src);
    bool include_self = lt_optbool(L, 6, false);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_scatter_reduce(t, dim, ix, src, reduce, include_self, 1));
}

/* t:nonzero([{as_tuple=false}]): an int64 [count, ndim] tensor of 1-based coordinates, or
 * with as_tuple a table of ndim 1-D tensors (one per dim) */
static int l_nonzero(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    bool as_tuple = lt_optfield_bool(L, 2, "as_tuple", false);
    dp_tensor **slot = lt_newslot(L);
    lt_done(L, *slot = dp_nonzero(t, 1));
    if (!as_tuple)
        return 1;
    int nd = t->ndim ? t->ndim : 1;
    lua_createtable(L, nd, 0);
    for (int d = 0; d < nd; d++) {
        dp_tensor **col = lt_newslot(L);
        if (t->ndim == 0) {   /* PyTorch: a 0-d tensor counts as 1-D here */
            int64_t n = (*slot)->sizes[0];
            lt_done(L, *col = dp_zeros(1, &n, DP_INT64, t->device));
            dp_binary_scalar_(DP_ADD, *col, 1);
        } else {
            dp_tensor *c = dp_select(*slot, 1, d);
            lt_done(L, *col = c ? dp_contiguous(c) : NULL);
            dp_tensor_release(c);
        }
        lua_rawseti(L, -2, d + 1);
    }
    return 1;
}

/* A format for two long longs (the value, its position) made of Lua's %d: the only
 * conversions allowed, so that a message cannot read what printf was not given */
static const char *two_values_format(lua_State *L, int arg, char *buf, size_t n)
{
    const char *f = luaL_checkstring(L, arg);
    size_t j = 0;
    int count = 0;
    for (; *f && j + 5 < n; f++) {
        if (*f == '%' && f[1] == 'd') {
            memcpy(buf + j, "%lld", 4);
            j += 4;
            f++;
            count++;
        } else if (*f == '%') {
            if (f[1] != '%')
                luaL_argerror(L, arg, "only %d (twice) and %% may appear in the message");
            memcpy(buf + j, "%%", 2);
            j += 2;
            f++;
        } else {
            buf[j++] = *f;
        }
    }
    buf[j] = 0;
    if (*f || count != 2)
        luaL_argerror(L, arg, "the message must hold %d twice (the value, then its position) and fit 400 characters");
    return buf;
}

/* t:_check_index(limit, msg): every value of t (int64) lies in 1..limit, checked on t's device
 * where it can (the first bad one reported at the next synchronisation), else now; msg
 * formats the bad value and its position (1-based, in t's elements) with %d, %d. */
static int l_check_index(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    lua_Integer limit = luaL_checkinteger(L, 2);
    char buf[512];
    const char *msg = two_values_format(L, 3, buf, sizeof buf);
    if (dp_check_index_values(t, 1, limit < 0 ? 0 : (int64_t)limit, msg))
        return lt_raise(L);
    lua_settop(L, 1);
    return 1;
}

const luaL_Reg lt_index_functions[] = {
    { "_check_index", l_check_index },
    { "gather", l_gather }, { "scatter", l_scatter }, { "scatter_add", l_scatter_add },
    { "index_put", l_index_put }, { "nonzero", l_nonzero }, { "_scatter_reduce", l_scatter_reduce }, { NULL, NULL }
};

const luaL_Reg lt_index_methods[] = {
    { "index_put_", l_index_put_ }, { "scatter_", l_scatter_ }, { "scatter_add_", l_scatter_add_ }, { NULL, NULL }
};
