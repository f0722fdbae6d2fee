/* dplua.h: embedding dplua in a C program.
 *
 *   lua_State *L = dplua_newstate();
 *   int64_t sizes[2] = {2, 3};
 *   dplua_tensor *t = dplua_tensor_from_host(data, 2, sizes);
 *   dplua_pushtensor(L, t); lua_setglobal(L, "x");
 *   dplua_tensor_release(t);
 *   luaL_dostring(L, "y = x * 2");
 *
 * The library never exits, aborts or prints: failures come back as Lua errors or as an
 * error code with dplua_last_error().  Several lua_States may be used from different
 * threads at once (one thread per state at a time).  Each state has its own grad mode
 * (torch.set_grad_enabled, torch.no_grad), wherever it runs.
 */
#ifndef DPLUA_H
#define DPLUA_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the library exports: it is built with -fvisibility=hidden, so these functions (and
 * the luaopen_* entry points that stock lua5.4 looks up) are its whole dynamic interface. */
#ifndef DPLUA_API
#define DPLUA_API __attribute__((visibility("default")))
#endif

typedef struct dp_tensor dplua_tensor;

/* Registers torch, nn, optim, torch.data, torch.distributed in package.loaded (and their
 * Lua sources in package.preload); returns 1 with the torch table on the stack. */
DPLUA_API int luaopen_dplua(lua_State *L);
/* A new state with the standard libraries and dplua; globals torch, nn, optim set.
 * NULL on failure (see dplua_last_error). */
DPLUA_API lua_State *dplua_newstate(void);

/* The tensor at idx, or a Lua error.  Borrowed: valid while the value is on the stack. */
DPLUA_API dplua_tensor *dplua_checktensor(lua_State *L, int idx);
/* Pushes t; Lua takes its own reference (the caller keeps its own). */
DPLUA_API void dplua_pushtensor(lua_State *L, dplua_tensor *t);
/* A new float32 CPU tensor with a copy of data; the caller owns the reference. NULL on failure. */
DPLUA_API dplua_tensor *dplua_tensor_from_host(const float *data, int ndim, const int64_t *sizes);
/* Copies t's elements (converted to float, row-major) into out[n]; 0 on success, -1 if
 * n differs from the number of elements or on failure. */
DPLUA_API int dplua_tensor_to_host(const dplua_tensor *t, float *out, size_t n);
/* Shape queries. */
DPLUA_API int dplua_tensor_ndim(const dplua_tensor *t);
DPLUA_API int64_t dplua_tensor_size(const dplua_tensor *t, int dim);   /* dim 0-based */
/* Drops the caller's reference. */
DPLUA_API void dplua_tensor_release(dplua_tensor *t);
/* The message of this thread's last failure. */
DPLUA_API const char *dplua_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
