/* l_tensor.h: helpers shared by the tensor binding files (l_tensor.c, l_ops.c, l_torch.c):
 * argument parsing (1-based dims, sizes, scalars, options), result slots, and the
 * registration tables each file contributes to torch._C and to the tensor methods. */
#ifndef DPLUA_L_TENSOR_H
#define DPLUA_L_TENSOR_H

#include "lbind.h"

#define DPLUA_NODE_MT "torch.autograd.Node"
/* Registry table (also torch._C._hooks) where torch/init.lua leaves what the C side calls
 * back: Size (the metatable of t:size()) and format (tostring of a tensor). */
#define DPLUA_HOOKS "dplua.hooks"

/* A tensor result: lt_newslot pushes an empty tensor userdata (nothing is acquired yet, so
 * a Lua error can't leak), the caller stores the engine's result in it, and lt_done raises
 * the engine's error when that result is NULL, else tells the collector about the memory.
 * lt_done returns 1 so that a binding can `return lt_done(L, *slot = dp_xxx(...));`. */
dp_tensor **lt_newslot(lua_State *L);
int lt_done(lua_State *L, dp_tensor *t);

/* A Lua dimension (1-based, negative from the end) of a tensor with ndim dims as a 0-based
 * dimension; `extra` widens the range (1 for unsqueeze, which may add a last dim). */
int lt_checkdim(lua_State *L, int arg, int ndim, int extra);
int lt_optdim(lua_State *L, int arg, int ndim, int def);
/* Sizes given as numbers from arg `first` on, or as one table (or torch.Size) at `first`.
 * Returns the number of dims; *next is the first argument after the sizes.  allow_neg
 * accepts -1 entries (view, reshape, expand). */
int lt_checksizes(lua_State *L, int first, int64_t *sizes, int *next, bool allow_neg);
/* A number (or boolean: 1/0) operand of an arithmetic op. */
double lt_checkscalar(lua_State *L, int arg);
/* A Lua value to use as an int64 index tensor: a 1-D int64 tensor or a table of integers,
 * 1-based, each checked against [1, size]; returns a new 0-based int64 tensor on dev.
 * `what` names the values in errors ("index", "target"). */
dp_tensor *lt_checkindex(lua_State *L, int arg, int64_t size, int dim, dp_device dev, const char *what);
/* Pushes one element as Lua sees it: integer (int64), boolean (bool) or float. */
void lt_pushelement(lua_State *L, dp_dtype dt, const void *elem);
/* Option table helpers: field `k` of the table at idx. */
bool lt_optfield_bool(lua_State *L, int idx, const char *k, bool def);
double lt_optfield_number(lua_State *L, int idx, const char *k, double def);

/* Registration tables, each ending with {NULL, NULL}. */
extern const luaL_Reg lt_shape_functions[];  /* l_tensor.c: methods that torch.* also offers */
extern const luaL_Reg lt_tensor_methods[];   /* l_tensor.c: methods only */
extern const luaL_Reg lt_math_functions[];   /* l_ops.c: methods that torch.* also offers */
extern const luaL_Reg lt_math_methods[];     /* l_ops.c: in-place methods */
extern const luaL_Reg lt_math_metamethods[]; /* l_ops.c: __add, __sub, ... */
int lt_push_op_table(lua_State *L);          /* l_ops.c: torch._C.ops() */

/* Creates the tensor, device and node metatables (once per state) and pushes the table of
 * tensor methods (torch.Tensor). */
void lt_open_tensor(lua_State *L);

#endif
