/* l_view.c: the tensor methods that make views and copies of a tensor's elements: select,
 * narrow, view/reshape, expand, transpose, permute, (un)squeeze, flatten, chunk and split
 * (tables of narrow views), clone, detach and index_select.  Dimensions and indices are
 * 1-based here, as everywhere in Lua. */
#include <limits.h>
#include <stdint.h>

#include "l_tensor.h"

static int t_select(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    if (t->ndim == 0)
        return luaL_error(L, "select: cannot select from a 0-d tensor");
    int dim = lt_checkdim(L, 2, t->ndim, 0);
    int64_t i = lt_checkposition(L, 3, t, dim);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_select(t, dim, i));
}

static int t_narrow(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_checkdim(L, 2, t->ndim, 0);
    lua_Integer start = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
    if (start < 0)   /* from the end: -1 is the last element */
        start += t->sizes[dim] + 1;
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
    bool table = lua_istable(L, 2);
    int count = table ? (int)luaL_len(L, 2) : lua_gettop(L) - 1;
    if (count != t->ndim)
        return luaL_error(L, "permute: %d dimensions given for a %d-D tensor", count, t->ndim);
    for (n = 0; n < count; n++) {
        int arg = table ? (lua_geti(L, 2, n + 1), lua_gettop(L)) : n + 2;
        perm[n] = lt_checkdim(L, arg, t->ndim, 0);
        if (table)
            lua_pop(L, 1);
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
    /* PyTorch's rule: pieces of ceil(size / chunks), the last one shorter; an empty dimension
     * still gives `chunks` empty pieces */
    int64_t size = t->sizes[dim], each = size / chunks + (size % chunks != 0);
    int64_t count = each ? size / each + (size % each != 0) : chunks;
    if (count > INT_MAX)
        return luaL_argerror(L, 2, lua_pushfstring(L, "%I chunks are too many pieces", chunks));
    int n = (int)count;
    int64_t *lens = lt_scratch(L, sizeof *lens * (size_t)n);
    for (int i = 0; i < n; i++)
        lens[i] = size - i * each < each ? size - i * each : each;
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
        lens = lt_scratch(L, sizeof *lens * (size_t)n);
        int64_t total = 0;
        for (int i = 0; i < n; i++) {
            lua_geti(L, 2, i + 1);
            lens[i] = lt_checksize_entry(L, 2, i + 1, false);
            if (__builtin_add_overflow(total, lens[i], &total))
                return luaL_error(L, "split: the sizes add up to more than %I", (lua_Integer)INT64_MAX);
        }
        if (total != size)
            return luaL_error(L, "split: sizes add up to %I but dimension %d has size %I",
                              (lua_Integer)total, dim + 1, (lua_Integer)size);
    } else {
        lua_Integer each = luaL_checkinteger(L, 2);
        if (each < 1)
            return luaL_argerror(L, 2, lua_pushfstring(L, "split size must be positive, got %I", each));
        int64_t count = size / each + (size % each != 0);
        if (count > INT_MAX)
            return luaL_argerror(L, 2, lua_pushfstring(L, "split size %I gives too many pieces", each));
        n = count ? (int)count : 1;
        lens = lt_scratch(L, sizeof *lens * (size_t)n);
        for (int i = 0; i < n; i++)
            lens[i] = size - i * each < each ? size - i * each : each;
    }
    return push_pieces(L, t, dim, n, lens);
}

static int t_clone(lua_State *L) { dp_tensor **slot = lt_newslot(L); return lt_done(L, *slot = dp_clone(lt_check(L, 1))); }
static int t_detach(lua_State *L) { dp_tensor **slot = lt_newslot(L); return lt_done(L, *slot = dp_detach(lt_check(L, 1))); }

static int t_index_select(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_checkdim(L, 2, t->ndim, 0);
    dp_tensor **slot = lt_newslot(L);
    dp_tensor *idx = lt_checkindex_op(L, 3, t->ndim ? t->sizes[dim] : 1, dim + 1, t->device, "index");
    *slot = dp_index_select(t, dim, idx);
    dp_tensor_release(idx);
    return lt_done(L, *slot);
}

/* torch._C._diagonal(t, offset, dim1, dim2): the diagonal as a view (the signature table's
 * torch.diagonal gives every argument) */
static int t_diagonal(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    lua_Integer offset = luaL_checkinteger(L, 2);
    int d1 = lt_checkdim(L, 3, t->ndim, 0), d2 = lt_checkdim(L, 4, t->ndim, 0);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_diagonal(t, offset, d1, d2));
}

/* torch._C._unfold(t, dim, size, step): the windows as a view (Tensor:unfold in the signature table) */
static int t_unfold(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_checkdim(L, 2, t->ndim ? t->ndim : 1, 0);
    lua_Integer size = luaL_checkinteger(L, 3), step = luaL_checkinteger(L, 4);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_unfold(t, dim, size, step));
}

const luaL_Reg lt_view_functions[] = {
    { "select", t_select }, { "narrow", t_narrow }, { "reshape", t_reshape }, { "t", t_t },
    { "transpose", t_transpose }, { "permute", t_permute }, { "unsqueeze", t_unsqueeze },
    { "squeeze", t_squeeze }, { "flatten", t_flatten }, { "chunk", t_chunk }, { "split", t_split },
    { "clone", t_clone }, { "index_select", t_index_select }, { "detach", t_detach },
    { "_diagonal", t_diagonal }, { "_unfold", t_unfold }, { NULL, NULL }
};

const luaL_Reg lt_view_methods[] = { { "view", t_view }, { "expand", t_expand }, { NULL, NULL } };
