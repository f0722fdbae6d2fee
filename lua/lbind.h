/* lbind.h: what every binding file (lua/l_*.c, dplua_lib.c) shares, implemented once in
 * lbind.c: the tensor userdata and its result slots, argument checks (tensors, devices,
 * dtypes, dimensions, sizes, scalars, index lists, option tables), scratch memory, turning
 * engine failures into Lua errors and telling the collector about engine memory.
 * Only lua/ includes this. */
#ifndef DPLUA_LBIND_H
#define DPLUA_LBIND_H

#include <lua.h>
#include <lauxlib.h>
#include "../src/dp.h"

#define DPLUA_TENSOR_MT "torch.Tensor"
#define DPLUA_DEVICE_MT "torch.device"

/* ------------------------------------------------------------------ errors */

/* Raises dp_last_error() as a Lua error (never returns). */
int lt_raise(lua_State *L);
/* Pushes "file:line: " of the first caller outside the library (dplua's own Lua files and C
 * functions are skipped, so an error points at the program's line), or "". */
void lt_where(lua_State *L);
/* luaL_error, luaL_argerror and luaL_typeerror at that position (never return). */
int lt_error(lua_State *L, const char *fmt, ...);
int lt_argerror(lua_State *L, int arg, const char *extramsg);
int lt_typeerror(lua_State *L, int arg, const char *tname);
/* whether a chunk name (ar.source) is one of dplua's own Lua files; the folder they are
 * named after when found on disk (an absolute path ending in '/'; kept, not copied) */
bool lt_library_source(const char *src);
void lt_set_library_root(const char *root);

/* ------------------------------------------------------------------ tensor userdata */

/* The tensor at idx, or a Lua error naming the argument. Borrowed. */
dp_tensor *lt_check(lua_State *L, int idx);
/* The tensor at idx, or NULL (a Lua error when it was closed). */
dp_tensor *lt_test(lua_State *L, int idx);
/* Pushes a userdata owning t (steals the reference).  When t is NULL, raises the engine's
 * last error instead. */
void lt_push(lua_State *L, dp_tensor *t);
/* A tensor result: lt_newslot pushes an empty tensor userdata (nothing is acquired yet, so
 * a Lua error can't leak), the caller stores the engine's result in it, and lt_done raises
 * the engine's error when that result is NULL, else tells the collector about the memory.
 * lt_done returns 1 so that a binding can `return lt_done(L, *slot = dp_xxx(...));`. */
dp_tensor **lt_newslot(lua_State *L);
/* The slot of the tensor userdata at idx (its dp_tensor *, NULL once closed), or NULL
 * when the value is not a tensor. */
dp_tensor **lt_slot(lua_State *L, int idx);
int lt_done(lua_State *L, dp_tensor *t);
/* Tells the collector about engine memory; called after every allocation. */
void lt_account_memory(lua_State *L);
/* Creates the tensor metatable (with __gc and __close) and returns true, or pushes the one
 * this state already has and returns false, as luaL_newmetatable does. */
bool lt_newtensormt(lua_State *L);
/* Sets __gc and __close of the metatable on top of the stack to gc, which must be
 * idempotent (a closed value is collected later). */
void lt_setgc(lua_State *L, lua_CFunction gc);

/* ------------------------------------------------------------------ devices and dtypes */

/* Accepts a string ("cuda:1"), a torch.device, or (for CUDA) a bare ordinal number. */
dp_device lt_check_device(lua_State *L, int idx);
void lt_push_device(lua_State *L, dp_device d);
/* Accepts "float32", "float64", "int64", "bool" (and float/double/long aliases). */
dp_dtype lt_check_dtype(lua_State *L, int idx);

/* ------------------------------------------------------------------ arguments */

/* A Lua dimension (1-based, negative from the end) of a tensor with ndim dims as a 0-based
 * dimension; `extra` widens the range (1 for unsqueeze, which may add a last dim). */
int lt_checkdim(lua_State *L, int arg, int ndim, int extra);
int lt_optdim(lua_State *L, int arg, int ndim, int def);
/* A Lua index (1-based, negative from the end) into dimension dim of t, 0-based. */
int64_t lt_checkposition(lua_State *L, int arg, const dp_tensor *t, int dim);
/* Sizes given as numbers from arg `first` on, or as one table (or torch.Size) at `first`.
 * Returns the number of dims; *next is the first argument after the sizes.  allow_neg
 * accepts -1 entries (view, reshape, expand). */
int lt_checksizes(lua_State *L, int first, int64_t *sizes, int *next, bool allow_neg);
/* One size, the integer on top of the stack (popped); pos > 0 names its position. */
int64_t lt_checksize_entry(lua_State *L, int arg, int pos, bool allow_neg);
/* A number (or boolean: 1/0) operand of an arithmetic op. */
double lt_checkscalar(lua_State *L, int arg);
/* A Lua value to use as an int64 index tensor: a 1-D int64 tensor or a table of integers,
 * 1-based, each checked against [1, size]; returns a new 0-based int64 tensor on dev.
 * `what` names the values in errors ("index", "target"). */
dp_tensor *lt_checkindex(lua_State *L, int arg, int64_t size, int dim, dp_device dev, const char *what);
/* As lt_checkindex, but an int64 1-D index tensor already on dev, a device whose backend
 * checks indices itself (CUDA), stays there: made 0-based by a kernel and left for the op
 * to check on the device, with no copy to the host. */
dp_tensor *lt_checkindex_op(lua_State *L, int arg, int64_t size, int dim, dp_device dev, const char *what);
/* Pushes one element as Lua sees it: integer (int64), boolean (bool) or float. */
void lt_pushelement(lua_State *L, dp_dtype dt, const void *elem);
/* An optional boolean argument: def when absent or nil, else it must be a boolean (a table
 * or a number is an error, never read as true). */
bool lt_optbool(lua_State *L, int arg, bool def);
/* Option table helpers: field `k` of the table at idx (def when idx is not a table); a
 * boolean field of another type is an error. */
bool lt_optfield_bool(lua_State *L, int idx, const char *k, bool def);
double lt_optfield_number(lua_State *L, int idx, const char *k, double def);

/* ------------------------------------------------------------------ shared pieces */

/* nbytes of scratch memory in a userdata pushed on the stack, so a Lua error frees it. */
void *lt_scratch(lua_State *L, size_t nbytes);
/* A random permutation of 1..n (1-based, as every Lua index) as an int64 CPU tensor pushed
 * on the stack; drawn from the global stream, or from (seed, offset) when gen is true. */
dp_tensor *lt_randperm(lua_State *L, lua_Integer n, bool gen, uint64_t seed, uint64_t offset);
/* Lua functions that several tables offer: is_tensor(v) (true for a closed tensor too) and
 * clock() (seconds from a monotonic clock). */
int lt_is_tensor(lua_State *L);
int lt_clock(lua_State *L);

/* ------------------------------------------------------------------ areas */

/* Each area's binding fills a table of functions; luaopen_dplua stores them under
 * package.loaded['torch._C'] as fields (core functions at the top level, the rest as
 * _C.data, _C.dist ...). */
int dplua_open_core(lua_State *L);     /* pushes the _C table */
int dplua_open_data(lua_State *L);     /* pushes a table: loaders, serialization */
void dplua_data_workers(lua_State *L); /* adds the Lua-dataset workers to that table (l_workers.c) */
int dplua_open_dist(lua_State *L);     /* pushes a table: process group, collectives */
int dplua_open_parallel(lua_State *L); /* pushes a table: scatter, gather, broadcast */
/* Gives the state its grad mode and makes every C function in the _C table at c_table, and
 * in the metatables of dplua's userdata, enter it before running (l_torch.c). */
void dplua_enter_grad_context(lua_State *L, int c_table);

#endif
