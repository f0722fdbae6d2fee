/* cpu_ops_generic.h: the op table's elementwise kernels for one element type T, included by
 * cpu_ops.c once per type with T and SUFFIX defined (as Torch7's generic files are).  Each
 * case is a row of ops.def: its formula, compiled for T, in the contiguous and strided loops
 * of LOOP2/LOOP3. */
#define CPU_FN_(name, suffix) name##_##suffix
#define CPU_FN(name, suffix) CPU_FN_(name, suffix)

#ifndef CPU_NO_UNARY
HOT static void CPU_FN(unary, SUFFIX)(void *c, int64_t n, char **p, const int64_t *s)
{
    const ew_ctx *cx = c;
    const double p0 = cx->p0, p1 = cx->p1;
    (void)p0;
    (void)p1;
    switch ((dp_unary_op)cx->op) {
#define DP_UNARY_OP(NAME, lua, BIND, node, RULE, SAVE, formula) \
    case DP_##NAME: LOOP2(T, T, formula); break;
#include "ops.def"
    default: break;   /* cpu_unary checked the op */
    }
}
#endif

HOT static void CPU_FN(binary, SUFFIX)(void *c, int64_t n, char **p, const int64_t *s)
{
    switch ((dp_binary_op)((const ew_ctx *)c)->op) {
#define CPU_OUT_ARITH T
#define CPU_OUT_FLOAT T
#define CPU_OUT_FLOATONLY T
#define CPU_OUT_CMP bool
#define DP_BINARY_OP(NAME, lua, BIND, node, KIND, BOOLS, SAVE, formula) \
    case DP_##NAME: LOOP3(CPU_OUT_##KIND, T, formula); break;
#include "ops.def"
#undef CPU_OUT_ARITH
#undef CPU_OUT_FLOAT
#undef CPU_OUT_FLOATONLY
#undef CPU_OUT_CMP
    default: break;   /* cpu_binary checked the op */
    }
}

#undef CPU_FN
#undef CPU_FN_
