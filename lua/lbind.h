/* lbind.h: what every binding file (lua/l_*.c) shares: tensor userdata, devices, dtypes,
 * and turning engine failures into Lua errors.  Only lua/ includes this. */
#ifndef DPLUA_LBIND_H
#define DPLUA_LBIND_H

#include <lua.h>
#include <lauxlib.h>
#include "../src/dp.h"

#define DPLUA_TENSOR_MT "torch.Tensor"
#define DPLUA_DEVICE_MT "torch.device"

/* The tensor at idx, or a Lua error naming the argument. Borrowed. */
dp_tensor *lt_check(lua_State *L, int idx);
/* The tensor at idx, or NULL. */
dp_tensor *lt_test(lua_State *L, int idx);
/* Pushes a userdata owning t (steals the reference).  When t is NULL, raises the engine's
 * last error instead. */
void lt_push(lua_State *L, dp_tensor *t);
/* Raises dp_last_error() as a Lua error (never returns). */
int lt_raise(lua_State *L);
/* Accepts a string ("cuda:1"), a torch.device, or (for CUDA) a bare ordinal number. */
dp_device lt_check_device(lua_State *L, int idx);
void lt_push_device(lua_State *L, dp_device d);
/* Accepts "float32", "float64", "int64", "bool" (and float/double/long aliases). */
dp_dtype lt_check_dtype(lua_State *L, int idx);
/* Tells the collector about engine memory; called after every allocation. */
void lt_account_memory(lua_State *L);

/* Each area's binding fills a table of functions; luaopen_dplua stores them under
 * package.loaded['torch._C'] as fields (core functions at the top level, the rest as
 * _C.data, _C.dist ...). */
int dplua_open_core(lua_State *L);   /* pushes the _C table */
int dplua_open_data(lua_State *L);   /* pushes a table: loaders, serialization */
int dplua_open_dist(lua_State *L);   /* pushes a table: process group, collectives */

#endif
