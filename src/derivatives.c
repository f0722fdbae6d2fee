/* derivatives.c: the backward formulas of the op table's elementwise ops (ops.def), one case
 * per differentiable row.  A formula is written with the ops themselves, so it runs on any
 * device and is differentiable again; the temporaries it makes live in a scope that is
 * released as a whole, and an op that fails makes every expression over it NULL, so a
 * formula reads as the mathematics: case DP_TANH: r = MUL(g, RSUB(1, MUL(y, y))).
 * g is the gradient of the result, x the saved input, y the saved result (as the row's
 * SAVE says); a and b the saved operands of a binary op, s its scalar operand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SCOPE_MAX 24

typedef struct {
    dp_tensor *t[SCOPE_MAX];
    int n;
} scope;

static dp_tensor *own(scope *s, dp_tensor *t)
{
    if (!t) return NULL;
    if (s->n == SCOPE_MAX) {   /* a formula longer than any in this file */
        dp_tensor_release(t);
        dp_error("derivatives: a backward formula made more than %d temporaries", SCOPE_MAX);
        return NULL;
    }
    return s->t[s->n++] = t;
}

static void scope_close(scope *s)
{
    for (int i = 0; i < s->n; i++) dp_tensor_release(s->t[i]);
    s->n = 0;
}

static dp_tensor *bin(scope *s, dp_binary_op op, dp_tensor *a, dp_tensor *b)
{
    return a && b ? own(s, dp_binary(op, a, b)) : NULL;
}

static dp_tensor *bin_s(scope *s, dp_binary_op op, dp_tensor *a, double v, bool reverse)
{
    return a ? own(s, dp_binary_scalar(op, a, v, reverse)) : NULL;
}

static dp_tensor *un(scope *s, dp_unary_op op, dp_tensor *a) { return a ? own(s, dp_unary(op, a, 0, 0)) : NULL; }

/* a (a bool mask) as the dtype of like */
static dp_tensor *as(scope *s, dp_tensor *a, const dp_tensor *like)
{
    return a ? own(s, dp_to(a, like->device, like->dtype, false)) : NULL;
}

#define ADD(a, b) bin(s, DP_ADD, a, b)
#define SUB(a, b) bin(s, DP_SUB, a, b)
#define MUL(a, b) bin(s, DP_MUL, a, b)
#define DIV(a, b) bin(s, DP_DIV, a, b)
#define POW(a, b) bin(s, DP_POW, a, b)
#define EQ(a, b) bin(s, DP_EQ, a, b)
#define GT(a, b) bin(s, DP_GT, a, b)
#define LT(a, b) bin(s, DP_LT, a, b)
#define ADDS(a, v) bin_s(s, DP_ADD, a, v, false)
#define MULS(a, v) bin_s(s, DP_MUL, a, v, false)
#define DIVS(a, v) bin_s(s, DP_DIV, a, v, false)
#define POWS(a, v) bin_s(s, DP_POW, a, v, false)
#define RSUB(v, a) bin_s(s, DP_SUB, a, v, true)          /* v - a */
#define RPOW(v, a) bin_s(s, DP_POW, a, v, true)          /* v ^ a */
#define CMPS(op, a, v) bin_s(s, op, a, v, false)
#define NEG(a) un(s, DP_NEG, a)
#define EXP(a) un(s, DP_EXP, a)
#define LOG(a) un(s, DP_LOG, a)
#define SIGN(a) un(s, DP_SIGN, a)
#define SQRT(a) un(s, DP_SQRT, a)
#define SIN(a) un(s, DP_SIN, a)
#define COS(a) un(s, DP_COS, a)
#define SINH(a) un(s, DP_SINH, a)
#define COSH(a) un(s, DP_COSH, a)
#define TRUNC(a) un(s, DP_TRUNC, a)
#define FLOOR(a) un(s, DP_FLOOR, a)
#define RDIV(v, a) bin_s(s, DP_DIV, a, v, true)          /* v / a */
#define AS(mask, like) as(s, mask, like)
#define ZEROS(like) own(s, dp_zeros((like)->ndim, (like)->sizes, (like)->dtype, (like)->device))

/* cond ? a : 0 and cond ? 0 : a (masking, so a NaN outside the mask stays out) */
static dp_tensor *masked(scope *s, dp_tensor *cond, dp_tensor *a, bool keep)
{
    if (!cond || !a) return NULL;
    dp_tensor *zero = own(s, dp_zeros(0, NULL, a->dtype, a->device));
    return zero ? own(s, keep ? dp_where(cond, a, zero) : dp_where(cond, zero, a)) : NULL;
}
#define KEEP(cond, a) masked(s, cond, a, true)
#define DROP(cond, a) masked(s, cond, a, false)

/* a's gradient in maximum(a, b) from g (loses: where b wins, GT for minimum): 0 where b
 * wins, g / 2 on a tie, g elsewhere (NaN included), as PyTorch 1.13's
 * where(a == b, g / 2, g).masked_fill_(a < b, 0) */
static dp_tensor *win_grad(scope *s, dp_tensor *g, dp_tensor *loses, dp_tensor *ties)
{
    dp_tensor *half = MULS(g, 0.5), *tied = ties && half ? own(s, dp_where(ties, half, g)) : NULL;
    return DROP(loses, tied);
}

/* The one input's gradient r (owned by the scope, or g itself) as a new reference. */
static int finish1(scope *s, dp_tensor *r, dp_tensor **gin)
{
    if (r) dp_tensor_retain(r);
    gin[0] = r;
    scope_close(s);
    return r ? 0 : -1;
}

/* g summed down to input i's shape (the backward of broadcasting), as a new reference */
static int reduce_to_input(dp_node *n, int i, dp_tensor *g, dp_tensor **gin)
{
    if (!g) return -1;
    gin[i] = dp_sum_to(g, n->in[i].ndim, n->in[i].sizes);
    return gin[i] ? 0 : -1;
}


int dp_where_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    scope sc = { .n = 0 }, *s = &sc;
    dp_tensor *cond = dp_saved(n, 0);
    if (!cond) return -1;
    int rc = 0;
    if (DP_NEEDS_INPUT(n, 0)) rc |= reduce_to_input(n, 0, KEEP(cond, g), gin);
    if (DP_NEEDS_INPUT(n, 1)) rc |= reduce_to_input(n, 1, DROP(cond, g), gin);
    scope_close(s);
    return rc ? -1 : 0;
}

int dp_binary_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    scope sc = { .n = 0 }, *s = &sc;
    dp_tensor *a = n->saved[0] ? dp_saved(n, 0) : NULL, *b = n->saved[1] ? dp_saved(n, 1) : NULL;
    if ((n->saved[0] && !a) || (n->saved[1] && !b)) return -1;
    /* only the gradients that are needed are computed */
    bool na = DP_NEEDS_INPUT(n, 0), nb = DP_NEEDS_INPUT(n, 1);
    dp_tensor *ga = NULL, *gb = NULL;
#define GRADS(for_a, for_b) do { if (na) ga = (for_a); if (nb) gb = (for_b); } while (0)
    switch ((dp_binary_op)n->ip[0]) {
    case DP_ADD: GRADS(g, g); break;
    case DP_SUB: GRADS(g, NEG(g)); break;
    case DP_MUL: GRADS(MUL(g, b), MUL(g, a)); break;
    case DP_DIV: GRADS(DIV(g, b), NEG(DIV(MUL(g, a), MUL(b, b)))); break;
    case DP_POW:   /* d/da is 0 where b == 0 (a^(b-1) read as a^0 there); d/db reads log(a) as 0 where a == 0 */
        GRADS(MUL(g, MUL(b, POW(a, MUL(ADDS(b, -1), AS(CMPS(DP_NE, b, 0), b))))),
              MUL(g, MUL(POW(a, b), LOG(ADD(a, AS(CMPS(DP_EQ, a, 0), a))))));
        break;
    case DP_MAXIMUM: GRADS(win_grad(s, g, LT(a, b), EQ(a, b)), win_grad(s, g, GT(a, b), EQ(a, b))); break;
    case DP_MINIMUM: GRADS(win_grad(s, g, GT(a, b), EQ(a, b)), win_grad(s, g, LT(a, b), EQ(a, b))); break;
    case DP_ATAN2: {   /* d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2) */
        dp_tensor *q = ADD(MUL(a, a), MUL(b, b));
        GRADS(MUL(g, DIV(b, q)), NEG(MUL(g, DIV(a, q))));
        break;
    }
    case DP_HYPOT: {
        dp_tensor *h = POWS(ADD(MUL(a, a), MUL(b, b)), 0.5);
        GRADS(MUL(g, DIV(a, h)), MUL(g, DIV(b, h)));
        break;
    }
    case DP_FMOD: GRADS(g, NEG(MUL(g, TRUNC(DIV(a, b))))); break;
    case DP_REMAINDER: GRADS(g, NEG(MUL(g, FLOOR(DIV(a, b))))); break;
    default:
        return dp_error("%s is not differentiable", n->name);
    }
#undef GRADS
    int rc = 0;
    if (na) rc |= reduce_to_input(n, 0, ga, gin);
    if (nb) rc |= reduce_to_input(n, 1, gb, gin);
    scope_close(s);
    return rc ? -1 : 0;
}

int dp_scalar_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    scope sc = { .n = 0 }, *s = &sc;
    double v = n->p[0];
    bool rev = n->ip[1];
    dp_tensor *x = n->saved[0] ? dp_saved(n, 0) : NULL, *r = NULL;
    if (n->saved[0] && !x) return -1;
    switch ((dp_binary_op)n->ip[0]) {
    case DP_ADD: r = g; break;
    case DP_SUB: r = rev ? NEG(g) : g; break;
    case DP_MUL: r = MULS(g, v); break;
    case DP_DIV: r = rev ? MULS(DIV(g, MUL(x, x)), -v) : DIVS(g, v); break;   /* d(v/x) = -v/x^2 */
    case DP_POW:
        r = rev ? MULS(MUL(g, RPOW(v, x)), log(v))                           /* v^x log v */
                : v == 0 ? ZEROS(g) : MULS(MUL(g, v == 2 ? x : POWS(x, v - 1)), v);   /* v x^(v-1) */
        break;
    case DP_ATAN2:   /* atan2(x, v): v / (x^2 + v^2); atan2(v, x) when reversed: -v / (x^2 + v^2) */
        r = MULS(DIV(g, ADDS(MUL(x, x), v * v)), rev ? -v : v);
        break;
    case DP_HYPOT: r = MUL(g, DIV(x, POWS(ADDS(MUL(x, x), v * v), 0.5))); break;
    case DP_FMOD: r = rev ? NEG(MUL(g, TRUNC(RDIV(v, x)))) : g; break;
    case DP_REMAINDER: r = rev ? NEG(MUL(g, FLOOR(RDIV(v, x)))) : g; break;
    case DP_MAXIMUM: r = win_grad(s, g, CMPS(DP_LT, x, v), CMPS(DP_EQ, x, v)); break;
    case DP_MINIMUM: r = win_grad(s, g, CMPS(DP_GT, x, v), CMPS(DP_EQ, x, v)); break;
    default:
        return dp_error("%s is not differentiable", n->name);
    }
    return finish1(s, r, gin);
}

/* (x >= lo) * (x <= hi) as x's dtype; a NaN bound is absent */
static dp_tensor *clamp_mask(scope *s, dp_tensor *x, double lo, double hi)
{
    dp_tensor *m = own(s, dp_ones(x->ndim, x->sizes, x->dtype, x->device));
    if (lo == lo) m = MUL(m, AS(CMPS(DP_GE, x, lo), x));
    if (hi == hi) m = MUL(m, AS(CMPS(DP_LE, x, hi), x));
    return m;
}

int dp_unary_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    scope sc = { .n = 0 }, *s = &sc;
    dp_tensor *x = n->saved[0] ? dp_saved(n, 0) : NULL, *y = n->saved[1] ? dp_saved(n, 1) : NULL, *r = NULL;
    if ((n->saved[0] && !x) || (n->saved[1] && !y)) return -1;
    switch ((dp_unary_op)n->ip[0]) {
    case DP_NEG: r = NEG(g); break;
    case DP_EXP: r = MUL(g, y); break;
    case DP_LOG: r = DIV(g, x); break;
    case DP_SQRT: r = DIV(g, MULS(y, 2)); break;
    case DP_ABS: r = MUL(g, SIGN(x)); break;
    case DP_RELU: r = MUL(g, un(s, DP_RELU_MASK, y)); break;
    case DP_SIGMOID: r = MUL(g, MUL(y, RSUB(1, y))); break;
    case DP_TANH: r = MUL(g, RSUB(1, MUL(y, y))); break;
    case DP_ERF: r = MUL(g, MULS(EXP(NEG(MUL(x, x))), 1.1283791670955126)); break;   /* 2/sqrt(pi) e^(-x^2) */
    case DP_ERFC: r = MUL(g, MULS(EXP(NEG(MUL(x, x))), -1.1283791670955126)); break;
    case DP_ERFINV: r = MUL(g, MULS(EXP(MUL(y, y)), 0.88622692545275801)); break;   /* sqrt(pi)/2 e^(y^2) */
    case DP_SIN: r = MUL(g, COS(x)); break;
    case DP_COS: r = NEG(MUL(g, SIN(x))); break;
    case DP_TAN: r = MUL(g, ADDS(MUL(y, y), 1)); break;
    case DP_ASIN: r = DIV(g, SQRT(RSUB(1, MUL(x, x)))); break;
    case DP_ACOS: r = NEG(DIV(g, SQRT(RSUB(1, MUL(x, x))))); break;
    case DP_ATAN: r = DIV(g, ADDS(MUL(x, x), 1)); break;
    case DP_SINH: r = MUL(g, COSH(x)); break;
    case DP_COSH: r = MUL(g, SINH(x)); break;
    case DP_ASINH: r = DIV(g, SQRT(ADDS(MUL(x, x), 1))); break;
    case DP_ACOSH: r = DIV(g, SQRT(ADDS(MUL(x, x), -1))); break;
    case DP_ATANH: r = DIV(g, RSUB(1, MUL(x, x))); break;
    case DP_LOG1P: r = DIV(g, ADDS(x, 1)); break;
    case DP_EXPM1: r = MUL(g, ADDS(y, 1)); break;
    case DP_LOG2: r = DIV(g, MULS(x, 0.6931471805599453)); break;
    case DP_LOG10: r = DIV(g, MULS(x, 2.302585092994046)); break;
    case DP_EXP2: r = MUL(g, MULS(y, 0.6931471805599453)); break;
    case DP_RECIPROCAL: r = NEG(MUL(g, MUL(y, y))); break;
    case DP_RSQRT: r = MUL(g, MULS(MUL(y, MUL(y, y)), -0.5)); break;
    case DP_SQUARE: r = MUL(g, MULS(x, 2)); break;
    case DP_FLOOR: case DP_CEIL: case DP_ROUND: case DP_TRUNC: r = ZEROS(g); break;
    case DP_FRAC: r = g; break;
    case DP_SIGN: r = ZEROS(g); break;
    case DP_CLAMP: r = MUL(g, clamp_mask(s, x, n->p[0], n->p[1])); break;
    case DP_GELU: r = MUL(g, un(s, DP_GELU_GRAD, x)); break;   /* Phi(x) + x phi(x) */
    case DP_SILU: r = MUL(g, un(s, DP_SILU_GRAD, x)); break;   /* sigmoid(x) (1 + x (1 - sigmoid(x))) */
    case DP_LGAMMA: r = MUL(g, un(s, DP_DIGAMMA, x)); break;
    case DP_DIGAMMA: r = MUL(g, x ? own(s, dp_unary(DP_POLYGAMMA, x, 1, 0)) : NULL); break;
    case DP_POLYGAMMA: r = MUL(g, x ? own(s, dp_unary(DP_POLYGAMMA, x, n->p[0] + 1, 0)) : NULL); break;
    default:
        return dp_error("%s is not differentiable", n->name);
    }
    return finish1(s, r, gin);
}
