/* l_tensor.h: what the tensor binding files share beyond lbind.h: the grad_fn and hook
 * registry names, and the registration tables each file contributes to torch._C and to
 * the tensor methods (l_tensor.c: the tensor type, l_view.c: views, l_convert.c: values
 * and conversions, l_ops.c: arithmetic). */
#ifndef DPLUA_L_TENSOR_H
#define DPLUA_L_TENSOR_H

#include "lbind.h"

#define DPLUA_NODE_MT "torch.autograd.Node"
/* Registry table (also torch._C._hooks) where torch/init.lua leaves what the C side calls
 * back: Size (the metatable of t:size()) and format (tostring of a tensor). */
#define DPLUA_HOOKS "dplua.hooks"

/* Registration tables, each ending with {NULL, NULL}.  *_functions are methods that
 * torch.* also offers (torch.narrow(t, ...) is t:narrow(...)); *_methods are methods only. */
extern const luaL_Reg lt_tensor_functions[];  /* l_tensor.c */
extern const luaL_Reg lt_tensor_methods[];    /* l_tensor.c */
extern const luaL_Reg lt_view_functions[];    /* l_view.c */
extern const luaL_Reg lt_view_methods[];      /* l_view.c */
extern const luaL_Reg lt_convert_methods[];   /* l_convert.c */
extern const luaL_Reg lt_math_functions[];    /* l_ops.c */
extern const luaL_Reg lt_math_methods[];      /* l_ops.c: in-place methods */
extern const luaL_Reg lt_math_metamethods[];  /* l_ops.c: __add, __sub, ... */
int lt_push_op_table(lua_State *L);           /* l_ops.c: torch._C.ops() */
extern const luaL_Reg lt_op_functions[];      /* l_ops.c: torch.* only (where) */
extern const luaL_Reg lt_grad_functions[];    /* l_grad.c: torch.no_grad ... */
extern const luaL_Reg lt_vision_functions[];  /* l_vision.c: torch._C.pool2d */
extern const luaL_Reg lt_attention_functions[];  /* l_attention.c: torch._C.sdpa */
extern const luaL_Reg lt_rnn_cell_functions[];   /* l_rnn_cell.c: torch._C.lstm_cell, gru_cell */
extern const luaL_Reg lt_sort_functions[];    /* l_sort.c: sort, topk, cumsum ... */
extern const luaL_Reg lt_function_functions[]; /* l_function.c: custom_attach, autograd_grad */
extern const luaL_Reg lt_random_functions[];   /* l_random.c: draws from a given stream */
extern const luaL_Reg lt_linalg_functions[];   /* l_linalg.c: _lapack_* for torch.linalg */
extern const luaL_Reg lt_determ_functions[];   /* l_determ.c: use_deterministic_algorithms ... */
/* dp_backward run so that custom Function nodes can call back into L (l_function.c) */
int lt_run_backward(lua_State *L, dp_tensor *root, dp_tensor *grad, bool retain);
extern const luaL_Reg lt_index_functions[];   /* l_index.c: gather, scatter, index_put, nonzero */
extern const luaL_Reg lt_index_methods[];     /* l_index.c: the in-place forms */
/* l_index.c: t[key] and t[key] = value (the value at 3) for a table or tensor key at 2 (and a
 * number key, for t[i] = value) */
int lt_index_get(lua_State *L, dp_tensor *t);
bool lt_element_as_tensor(const dp_tensor *t);
dp_tensor *lt_drop_leading_ones(lua_State *L, dp_tensor *src, int ndim);   /* l_index.c */   /* t[i] of a 1-D t, t[{i, j}]: a 0-dim tensor? */
int lt_index_set(lua_State *L, dp_tensor *t);

/* Sets every *_functions entry in the table on top of the stack (torch._C and the methods). */
void lt_set_functions(lua_State *L);
/* Creates the tensor, device and node metatables (once per state) and pushes the table of
 * tensor methods (torch.Tensor). */
void lt_open_tensor(lua_State *L);

#endif
