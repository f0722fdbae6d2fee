/* l_ops.c: tensor arithmetic from Lua: the arithmetic metamethods, elementwise, reduction,
 * comparison and matrix methods (also offered as torch.add(a, b) ...), and the in-place
 * methods.  Dimensions arrive 1-based and leave 0-based; argmax/argmin and max/min with a
 * dim return 1-based indices. */
#include <math.h>
#include <string.h>

#include "l_tensor.h"

/* ------------------------------------------------------------------ binary */

/* The operand at idx as a tensor: a tensor as it is, a Lua number or boolean as a 0-dim
 * tensor (an integer as int64, a float as the default dtype, a boolean as bool, as PyTorch
 * takes a Python scalar) pushed on the stack.  With a floating tensor beside it (other, may be
 * NULL) a float takes that tensor's dtype: a number never widens a tensor, even a 0-dim one. */
static dp_tensor *operand(lua_State *L, int idx, const char *fname, const dp_tensor *other)
{
    dp_tensor *t = lt_test(L, idx);
    if (t)
        return t;
    dp_dtype dt = lua_isboolean(L, idx) ? DP_BOOL : lua_isinteger(L, idx) ? DP_INT64
                : other && dp_dtype_is_float(other->dtype) ? other->dtype : dp_default_dtype();
    if (!lua_isboolean(L, idx) && !lua_isnumber(L, idx))
        luaL_error(L, "%s: argument %d must be a tensor, a number or a boolean, got %s", fname, idx, luaL_typename(L, idx));
    double v = lua_isboolean(L, idx) ? lua_toboolean(L, idx) : lua_tonumber(L, idx);
    dp_tensor **slot = lt_newslot(L);
    lt_done(L, *slot = dp_full(0, NULL, v, dt, dp_cpu()));
    return *slot;
}

/* a op b for any mix of tensors and numbers; the tensor operands sit at ia and ib. */
static int binary(lua_State *L, dp_binary_op op, int ia, int ib)
{
    dp_tensor *a = lt_test(L, ia), *b = lt_test(L, ib);
    if (a && b) {
        dp_tensor **slot = lt_newslot(L);
        return lt_done(L, *slot = dp_binary(op, a, b));
    }
    if (!a && !b)
        return luaL_typeerror(L, ia, "tensor");
    dp_tensor *t = a ? a : b;
    int sarg = a ? ib : ia;
    if (lua_isboolean(L, sarg)) {
        /* a boolean is a 0-dim bool tensor: with a bool tensor, ops that keep bools do */
        dp_tensor *sb = operand(L, sarg, dp_op_find(DP_OP_BINARY, op)->name, NULL);
        dp_tensor **slot = lt_newslot(L);
        return lt_done(L, *slot = a ? dp_binary(op, a, sb) : dp_binary(op, sb, b));
    }
    double s = lt_checkscalar(L, sarg);
    if (!lua_isinteger(L, sarg) && !dp_dtype_is_float(t->dtype)) {
        /* a Lua float makes an integer or bool tensor the default dtype, even when it is whole
         * (2.0), as a Python float does */
        dp_tensor **tf = lt_newslot(L);
        lt_done(L, *tf = dp_to(t, t->device, dp_default_dtype(), false));
        t = *tf;
    }
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_binary_scalar(op, t, s, b != NULL));
}

/* PyTorch's a.add(b, alpha=2) as a:add(b, {alpha = 2}): the table at 3 becomes the number
   (or nil); any other key is an error that names it. */
static void alpha_option(lua_State *L, const char *who)
{
    if (lua_type(L, 3) != LUA_TTABLE)
        return;
    lua_pushnil(L);
    while (lua_next(L, 3)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "alpha") != 0)
            luaL_error(L, "%s: unknown option %s (the option is alpha)", who, luaL_tolstring(L, -1, NULL));
    }
    lua_getfield(L, 3, "alpha");
    lua_replace(L, 3);
}

/* add/sub take an optional alpha: a + alpha * b */
static int add_sub(lua_State *L, dp_binary_op op)
{
    alpha_option(L, op == DP_ADD ? "add" : "sub");
    if (lua_type(L, 2) == LUA_TNUMBER && lt_test(L, 3) && lua_gettop(L) == 3)
        lua_rotate(L, 2, 1);   /* Torch7's a:add(value, b): a + value * b */
    if (lua_isnoneornil(L, 3) || lua_tonumber(L, 3) == 1)
        return binary(L, op, 1, 2);
    luaL_checknumber(L, 3);
    dp_tensor *a = lt_test(L, 1), *b = lt_test(L, 2);
    /* two bool tensors: a nonzero alpha is true, and a + true * b is a or b */
    if (op == DP_ADD && a && b && a->dtype == DP_BOOL && b->dtype == DP_BOOL && lua_tonumber(L, 3) != 0)
        return binary(L, op, 1, 2);
    if (op == DP_SUB && ((a && a->dtype == DP_BOOL) || (b && b->dtype == DP_BOOL)))
        return binary(L, op, 1, 2);   /* the engine refuses it, with PyTorch's message */
    lua_settop(L, 3);              /* alpha keeps its kind: an integer alpha keeps integers integral */
    if (b) binary(L, DP_MUL, 2, 3);  /* alpha * b on top (binary may leave temporaries below it) */
    else {
        lt_checkscalar(L, 2);
        lua_pushvalue(L, 2);
        lua_pushvalue(L, 3);
        lua_arith(L, LUA_OPMUL);
    }
    return binary(L, op, 1, lua_gettop(L));
}

static int o_add(lua_State *L) { return add_sub(L, DP_ADD); }
static int o_sub(lua_State *L) { return add_sub(L, DP_SUB); }
static int o_mul(lua_State *L) { return binary(L, DP_MUL, 1, 2); }
static int o_div(lua_State *L) { return binary(L, DP_DIV, 1, 2); }
static int o_pow(lua_State *L) { return binary(L, DP_POW, 1, 2); }

/* ------------------------------------------------------------------ unary */

static int unary(lua_State *L, dp_unary_op op, double p0, double p1)
{
    dp_tensor *t = lt_check(L, 1);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_unary(op, t, p0, p1));
}

static int o_unm(lua_State *L)
{
    lua_settop(L, 1);
    return unary(L, DP_NEG, 0, 0);
}

/* clamp(min, max), either may be nil; also clamp{min=, max=} */
static void clamp_bounds(lua_State *L, double *lo, double *hi)
{
    int ilo = 2, ihi = 3;
    if (lua_istable(L, 2)) {
        lua_settop(L, 2);
        lua_getfield(L, 2, "min");
        lua_getfield(L, 2, "max");
        ilo = 3;
        ihi = 4;
    }
    lua_settop(L, ihi);   /* the bounds are the last two values */
    if (lua_isnoneornil(L, ilo) && lua_isnoneornil(L, ihi))
        luaL_error(L, "clamp: at least one of min and max must be given");
    *lo = lua_isnoneornil(L, ilo) ? NAN : luaL_checknumber(L, ilo);
    *hi = lua_isnoneornil(L, ihi) ? NAN : luaL_checknumber(L, ihi);
}

/* clamp with tensor bounds (either may be a number or nil): min(max(t, lo), hi), broadcast */
static int clamp_tensors(lua_State *L)
{
    dp_tensor *cur = lt_check(L, 1);
    lua_settop(L, 3);
    if (lua_isnil(L, 2) && lua_isnil(L, 3))
        return luaL_error(L, "clamp: at least one of min and max must be given");
    for (int k = 0; k < 2; k++) {
        int arg = 2 + k;
        if (lua_isnil(L, arg)) continue;
        dp_tensor *bound = lt_test(L, arg);
        double v = bound ? 0 : luaL_checknumber(L, arg);
        dp_tensor **slot = lt_newslot(L);
        *slot = bound ? dp_binary(k ? DP_MINIMUM : DP_MAXIMUM, cur, bound)
                      : dp_unary(DP_CLAMP, cur, k ? NAN : v, k ? v : NAN);
        lt_done(L, *slot);
        cur = *slot;
    }
    return 1;
}

static int o_clamp(lua_State *L)
{
    double lo, hi;
    dp_tensor *t = lt_check(L, 1);
    if (lt_test(L, 2) || lt_test(L, 3))
        return clamp_tensors(L);
    clamp_bounds(L, &lo, &hi);
    int top = lua_gettop(L);
    bool float_bound = (!lua_isnil(L, top - 1) && !lua_isinteger(L, top - 1)) || (!lua_isnil(L, top) && !lua_isinteger(L, top));
    if (float_bound && !dp_dtype_is_float(t->dtype)) {
        /* a float bound makes an integer tensor the default dtype, as any Lua float operand does */
        dp_tensor **slot = lt_newslot(L), *tf;
        lt_done(L, tf = *slot = dp_to(t, t->device, dp_default_dtype(), false));
        dp_tensor **out = lt_newslot(L);
        return lt_done(L, *out = dp_unary(DP_CLAMP, tf, lo, hi));
    }
    return unary(L, DP_CLAMP, lo, hi);
}

/* ------------------------------------------------------------------ reductions */

/* sum/mean([dim] [, keepdim]) */
static int reduce(lua_State *L, dp_reduce_op op)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_optdim(L, 2, t->ndim, -1);
    bool keepdim = lt_optbool(L, 3, false);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_reduce(op, t, dim, keepdim, NULL));
}

static int o_sum(lua_State *L) { return reduce(L, DP_SUM); }
static int o_mean(lua_State *L) { return reduce(L, DP_MEAN); }

/* Replaces the 0-based indices in slot by a 1-based copy (out of place: autograd may have
 * saved the 0-based ones for the backward of max/min). */
static void one_based(lua_State *L, dp_tensor **slot)
{
    dp_tensor *zero_based = *slot;
    *slot = dp_binary_scalar(DP_ADD, zero_based, 1, false);
    dp_tensor_release(zero_based);
    lt_done(L, *slot);
}

/* max()/min(): the extreme; max(dim [, keepdim]): values and 1-based indices; max(other):
 * the elementwise maximum */
static int extreme(lua_State *L, dp_reduce_op op, dp_binary_op elementwise)
{
    dp_tensor *t = lt_check(L, 1);
    if (lt_test(L, 2))
        return binary(L, elementwise, 1, 2);
    if (lua_isnoneornil(L, 2)) {
        dp_tensor **slot = lt_newslot(L);
        return lt_done(L, *slot = dp_reduce(op, t, -1, false, NULL));
    }
    int dim = lt_checkdim(L, 2, t->ndim, 0);
    bool keepdim = lt_optbool(L, 3, false);
    dp_tensor **values = lt_newslot(L), **indices = lt_newslot(L);
    *values = dp_reduce(op, t, dim, keepdim, indices);
    lt_done(L, *values);
    one_based(L, indices);
    return 2;
}

static int o_max(lua_State *L) { return extreme(L, DP_MAX, DP_MAXIMUM); }
static int o_min(lua_State *L) { return extreme(L, DP_MIN, DP_MINIMUM); }

static int arg_extreme(lua_State *L, dp_reduce_op op)
{
    reduce(L, op);
    one_based(L, lt_slot(L, -1));
    return 1;
}

static int o_argmax(lua_State *L) { return arg_extreme(L, DP_ARGMAX); }
static int o_argmin(lua_State *L) { return arg_extreme(L, DP_ARGMIN); }

static int softmax(lua_State *L, bool log)
{
    dp_tensor *t = lt_check(L, 1);
    int dim = lt_optdim(L, 2, t->ndim, t->ndim ? t->ndim - 1 : 0);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = log ? dp_log_softmax(t, dim) : dp_softmax(t, dim));
}

static int o_softmax(lua_State *L) { return softmax(L, false); }
static int o_log_softmax(lua_State *L) { return softmax(L, true); }

/* ------------------------------------------------------------------ matrix products */

static int o_matmul(lua_State *L)
{
    dp_tensor *a = lt_check(L, 1), *b = lt_check(L, 2);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_matmul(a, b));
}

static int o_mm(lua_State *L)
{
    dp_tensor *a = lt_check(L, 1), *b = lt_check(L, 2);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_mm(a, b));
}

/* addmm(c, a, b [, {beta=, alpha=}]) or addmm(c, a, b, beta, alpha) */
static int o_addmm(lua_State *L)
{
    dp_tensor *c = lt_check(L, 1), *a = lt_check(L, 2), *b = lt_check(L, 3);
    double beta = 1, alpha = 1;
    if (lua_istable(L, 4)) {
        beta = lt_optfield_number(L, 4, "beta", 1);
        alpha = lt_optfield_number(L, 4, "alpha", 1);
    } else {
        beta = luaL_optnumber(L, 4, 1);
        alpha = luaL_optnumber(L, 5, 1);
    }
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_addmm(c, a, b, beta, alpha));
}

/* ------------------------------------------------------------------ in place (return self) */

static int self_or_raise(lua_State *L, int rc)
{
    if (rc != 0)
        return lt_raise(L);
    lua_settop(L, 1);
    return 1;
}

static int inplace_binary(lua_State *L, dp_binary_op op)
{
    if (op == DP_ADD || op == DP_SUB)
        alpha_option(L, op == DP_ADD ? "add_" : "sub_");
    if (lua_type(L, 2) == LUA_TNUMBER && lt_test(L, 3) && lua_gettop(L) == 3)
        lua_rotate(L, 2, 1);   /* Torch7's a:add_(value, b) */
    dp_tensor *t = lt_check(L, 1), *other = lt_test(L, 2);
    double alpha = luaL_optnumber(L, 3, 1);
    if (!other)
        return self_or_raise(L, dp_binary_scalar_(op, t, lt_checkscalar(L, 2) * alpha));
    if (alpha == 1)
        return self_or_raise(L, dp_binary_(op, t, other));
    lua_settop(L, 2);
    lua_pushnumber(L, alpha);
    binary(L, DP_MUL, 2, 3);
    return self_or_raise(L, dp_binary_(op, t, lt_check(L, 4)));
}

static int o_add_(lua_State *L) { return inplace_binary(L, DP_ADD); }
static int o_sub_(lua_State *L) { return inplace_binary(L, DP_SUB); }
static int o_mul_(lua_State *L) { return inplace_binary(L, DP_MUL); }
static int o_div_(lua_State *L) { return inplace_binary(L, DP_DIV); }
static int o_pow_(lua_State *L) { return inplace_binary(L, DP_POW); }

static int o_clamp_(lua_State *L)
{
    double lo, hi;
    dp_tensor *t = lt_check(L, 1);
    clamp_bounds(L, &lo, &hi);
    return self_or_raise(L, dp_unary_(DP_CLAMP, t, lo, hi));
}

static int o_zero_(lua_State *L) { return self_or_raise(L, dp_fill_(lt_check(L, 1), 0)); }

static int o_fill_(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    return self_or_raise(L, dp_fill_(t, lt_checkscalar(L, 2)));
}

static int o_copy_(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    return self_or_raise(L, dp_copy_(t, lt_check(L, 2)));
}

static int o_uniform_(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    double a = luaL_optnumber(L, 2, 0), b = luaL_optnumber(L, 3, 1);
    if (!(a <= b))
        return luaL_error(L, "uniform_: expected from <= to, got from=%f, to=%f", a, b);
    return self_or_raise(L, dp_uniform_(t, a, b));
}

static int o_normal_(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1);
    double mean = luaL_optnumber(L, 2, 0), std = luaL_optnumber(L, 3, 1);
    if (!(std >= 0))
        return luaL_error(L, "normal_: expected std >= 0, got %f", std);
    return self_or_raise(L, dp_normal_(t, mean, std));
}

/* ------------------------------------------------------------------ where, masked_fill */

/* torch.where(cond, a, b): a where cond is true, else b; a and b tensors or numbers */
static int o_where(lua_State *L)
{
    dp_tensor *cond = lt_check(L, 1);
    lua_settop(L, 3);
    dp_tensor *ta = lt_test(L, 2), *tb = lt_test(L, 3);
    dp_tensor *a = operand(L, 2, "where", tb), *b = operand(L, 3, "where", ta);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_where(cond, a, b));
}

/* t:masked_fill(mask, value): value (a number or a 0-dim tensor, converted to t's dtype)
 * where mask is true; mask broadcasts to t's shape */
static dp_tensor *masked_fill(lua_State *L)
{
    dp_tensor *t = lt_check(L, 1), *mask = lt_check(L, 2);
    lua_settop(L, 3);
    dp_tensor *v = operand(L, 3, "masked_fill", NULL);
    if (v->ndim != 0)
        luaL_error(L, "masked_fill only supports a 0-dimensional value tensor, but got one with %d dimensions", v->ndim);
    dp_tensor **vt = lt_newslot(L);
    lt_done(L, *vt = dp_to(v, v->device, t->dtype, false));
    dp_tensor **slot = lt_newslot(L);
    lt_done(L, *slot = dp_where(mask, *vt, t));
    if (!dp_same_shape(*slot, t)) {
        char a[64], b[64];
        luaL_error(L, "masked_fill: the mask of shape %s does not broadcast to the tensor's shape %s",
                   dp_shape_str(mask->ndim, mask->sizes, a, sizeof a), dp_shape_str(t->ndim, t->sizes, b, sizeof b));
    }
    return *slot;
}

static int o_masked_fill(lua_State *L)
{
    masked_fill(L);
    return 1;
}

static int o_masked_fill_(lua_State *L)
{
    dp_tensor *filled = masked_fill(L);
    if (dp_copy_(lt_check(L, 1), filled) != 0)
        return lt_raise(L);
    lua_settop(L, 1);
    return 1;
}

/* _polygamma(t, n): the polygamma row (torch.polygamma(n, t) is lua/torch/mathmore.lua) */
static int o_polygamma(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 2);
    if (n < 0) return luaL_error(L, "polygamma: n must be a non-negative integer, got %d", (int)n);
    lua_settop(L, 1);
    return unary(L, DP_POLYGAMMA, (double)n, 0);
}

const luaL_Reg lt_op_functions[] = { { "where", o_where }, { "_polygamma", o_polygamma }, { NULL, NULL } };

/* ------------------------------------------------------------------ the op table's rows */

/* Rows whose BIND is AUTO get a C function here, named after the op: t:name(...) and
 * torch.name(t, ...); OWN rows are bound above by hand. */
#define BIND_UNARY_AUTO(NAME) \
    static int u_##NAME(lua_State *L) { return unary(L, DP_##NAME, 0, 0); } \
    static int u_##NAME##_(lua_State *L) { return self_or_raise(L, dp_unary_(DP_##NAME, lt_check(L, 1), 0, 0)); }
#define BIND_BINARY_AUTO(NAME) static int b_##NAME(lua_State *L) { return binary(L, DP_##NAME, 1, 2); }
#define BIND_UNARY_OWN(NAME)
#define BIND_UNARY_NONE(NAME)
#define BIND_BINARY_OWN(NAME)
#define BIND_BINARY_NONE(NAME)
#define DP_UNARY_OP(NAME, lua, BIND, ...) BIND_UNARY_##BIND(NAME)
#define DP_BINARY_OP(NAME, lua, BIND, ...) BIND_BINARY_##BIND(NAME)
#include "../src/ops.def"

#define REG_UNARY_AUTO(NAME, lua) { lua, u_##NAME },
#define REG_UNARY_AUTO_INPLACE(NAME, lua) { lua "_", u_##NAME##_ },
#define REG_BINARY_AUTO(NAME, lua) { lua, b_##NAME },
#define REG_UNARY_OWN(NAME, lua)
#define REG_UNARY_NONE(NAME, lua)
#define REG_BINARY_OWN(NAME, lua)
#define REG_BINARY_NONE(NAME, lua)

/* ------------------------------------------------------------------ metamethods */

static int m_add(lua_State *L) { return binary(L, DP_ADD, 1, 2); }
static int m_sub(lua_State *L) { return binary(L, DP_SUB, 1, 2); }
/* a % b: PyTorch's remainder, whose result takes the divisor's sign (Python's %); an
   integer remainder by zero is an error, as PyTorch's ZeroDivisionError */
static int m_mod(lua_State *L)
{
    lua_settop(L, 2);
    dp_tensor *a = lt_test(L, 1), *b = lt_test(L, 2);
    bool a_int = a ? !dp_dtype_is_float(a->dtype) : lua_isinteger(L, 1);
    bool b_int = b ? !dp_dtype_is_float(b->dtype) : lua_isinteger(L, 2);
    if (a_int && b_int) {
        bool zero = false;
        if (!b) {
            zero = lua_tointeger(L, 2) == 0;
        } else {
            dp_tensor **eq = lt_newslot(L);
            lt_done(L, *eq = dp_binary_scalar(DP_EQ, b, 0, false));
            dp_tensor **any = lt_newslot(L);
            lt_done(L, *any = dp_reduce(DP_MAX, *eq, -1, false, NULL));
            double x = 0;
            if (dp_numel(*eq) > 0 && dp_to_host(*any, &x, DP_FLOAT64, 1) != 0)
                return lt_raise(L);
            zero = x != 0;
            lua_settop(L, 2);
        }
        if (zero)
            return luaL_error(L, "a %% b: integer remainder by zero (the divisor holds a 0)");
    }
    return binary(L, DP_REMAINDER, 1, 2);
}

/* a < b, a <= b (and so a > b, a >= b) with a tensor on either side: a Lua boolean, as
   PyTorch's bool(a < b) in an if; Lua calls these for a number and a tensor too.  Only a
   one-element result has a truth value. */
static int compare(lua_State *L, dp_binary_op op, const char *sym)
{
    lua_settop(L, 2);
    binary(L, op, 1, 2);
    dp_tensor *r = lt_check(L, -1);
    if (dp_numel(r) != 1) {
        char shape[64];
        return luaL_error(L, "a %s b: the comparison has shape %s, and a tensor with %I elements has no single "
                             "truth value (use torch.%s for the element-wise result, then :all() or :any())",
                          sym, dp_shape_str(r->ndim, r->sizes, shape, sizeof shape), (lua_Integer)dp_numel(r),
                          op == DP_LT ? "lt" : "le");
    }
    double x;
    if (dp_to_host(r, &x, DP_FLOAT64, 1) != 0)
        return lt_raise(L);
    lua_pushboolean(L, x != 0);
    return 1;
}
static int m_lt(lua_State *L) { return compare(L, DP_LT, "<"); }
static int m_le(lua_State *L) { return compare(L, DP_LE, "<="); }

const luaL_Reg lt_math_metamethods[] = {
    { "__add", m_add }, { "__sub", m_sub }, { "__mul", o_mul }, { "__div", o_div },
    { "__pow", o_pow }, { "__unm", o_unm }, { "__mod", m_mod }, { "__lt", m_lt }, { "__le", m_le },
    { NULL, NULL }
};

const luaL_Reg lt_math_functions[] = {
#define DP_UNARY_OP(NAME, lua, BIND, ...) REG_UNARY_##BIND(NAME, lua)
#define DP_BINARY_OP(NAME, lua, BIND, ...) REG_BINARY_##BIND(NAME, lua)
#include "../src/ops.def"
    { "add", o_add }, { "sub", o_sub },
    { "clamp", o_clamp }, { "sum", o_sum }, { "mean", o_mean }, { "max", o_max }, { "min", o_min },
    { "argmax", o_argmax }, { "argmin", o_argmin }, { "softmax", o_softmax },
    { "log_softmax", o_log_softmax }, { "matmul", o_matmul }, { "mm", o_mm }, { "addmm", o_addmm },
    { "masked_fill", o_masked_fill }, { NULL, NULL }
};

const luaL_Reg lt_math_methods[] = {
#define DP_UNARY_OP(NAME, lua, BIND, ...) REG_UNARY_##BIND##_INPLACE(NAME, lua)
#define DP_BINARY_OP(NAME, lua, BIND, ...)
#define REG_UNARY_OWN_INPLACE(NAME, lua)
#define REG_UNARY_NONE_INPLACE(NAME, lua)
#include "../src/ops.def"
    { "pow_", o_pow_ },
    { "add_", o_add_ }, { "sub_", o_sub_ }, { "mul_", o_mul_ }, { "div_", o_div_ },
    { "clamp_", o_clamp_ }, { "zero_", o_zero_ }, { "fill_", o_fill_ }, { "copy_", o_copy_ },
    { "uniform_", o_uniform_ }, { "normal_", o_normal_ }, { "masked_fill_", o_masked_fill_ }, { NULL, NULL }
};

/* torch._C.ops(): the op table as a list of rows {family=, name=, bind=, node=, node_dim=,
 * rule=, bools=, save=} (nil where a row has no such fact), for the op sweep and tools. */
int lt_push_op_table(lua_State *L)
{
    static const char *const families[] = { "unary", "binary", "reduce" };
    int n;
    const dp_op_info *rows = dp_op_table(&n);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        const dp_op_info *r = &rows[i];
        lua_createtable(L, 0, 8);
        const char *const fields[][2] = {
            { "family", families[r->family] }, { "name", r->name }, { "bind", r->bind }, { "node", r->node },
            { "node_dim", r->node_dim }, { "rule", r->rule }, { "bools", r->bools }, { "save", r->save },
        };
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            if (!fields[f][1]) continue;
            lua_pushstring(L, fields[f][1]);
            lua_setfield(L, -2, fields[f][0]);
        }
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}
