/* l_function.c: torch.autograd.Function's hook into the engine's autograd, and
 * torch.autograd.grad.
 *
 * A custom node (dp_custom_attach) holds a registry reference to a Lua function, its
 * backward.  Backward passes run on the thread of the Lua call that started them
 * (t:backward(), torch.autograd.grad), which records its state in a thread-local for the
 * nodes to call into; a node reached any other way refuses with an error.
 *
 * A node may be freed on any thread and at any time (a tensor collected, an embedding
 * program releasing its last tensor, the state closing), so freeing never touches the
 * state: the reference goes on its state's pending list, and the state drops those
 * references the next time it runs a backward or makes a node.  When the state closes, its
 * owner record is marked closed and later frees just free. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "l_tensor.h"

typedef struct pending pending;

typedef struct {
    pthread_mutex_t mu;
    int refs;          /* the state's sentinel, plus one per live node */
    bool closed;
    pending *list;     /* references of freed nodes, to unref in the state */
} owner;

struct pending {
    owner *o;
    int ref;
    pending *next;
};

static const char owner_key;
static _Thread_local lua_State *t_current;   /* the state running a backward on this thread */

static void owner_decref(owner *o)
{
    pthread_mutex_lock(&o->mu);
    bool last = --o->refs == 0;
    pthread_mutex_unlock(&o->mu);
    if (last) {
        pthread_mutex_destroy(&o->mu);
        free(o);
    }
}

/* the state closes: its references go with it */
static int owner_gc(lua_State *L)
{
    owner **po = lua_touserdata(L, 1);
    owner *o = *po;
    if (!o) return 0;
    *po = NULL;
    pthread_mutex_lock(&o->mu);
    o->closed = true;
    pending *p = o->list;
    o->list = NULL;
    pthread_mutex_unlock(&o->mu);
    while (p) {
        pending *next = p->next;
        free(p);
        owner_decref(o);
        p = next;
    }
    owner_decref(o);
    return 0;
}

static owner *find_owner(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &owner_key);
    owner **po = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return po ? *po : NULL;
}

static owner *get_owner(lua_State *L)
{
    owner *o = find_owner(L);
    if (o) return o;
    owner **po = lua_newuserdatauv(L, sizeof *po, 0);
    *po = NULL;
    lua_newtable(L);
    lua_pushcfunction(L, owner_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    o = calloc(1, sizeof *o);
    if (!o) luaL_error(L, "out of memory");
    pthread_mutex_init(&o->mu, NULL);
    o->refs = 1;
    *po = o;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &owner_key);
    return o;
}

/* dp_custom_attach's free_fn: any thread */
static void node_freed(void *user)
{
    pending *p = user;
    owner *o = p->o;
    pthread_mutex_lock(&o->mu);
    bool closed = o->closed;
    if (!closed) {
        p->next = o->list;
        o->list = p;
    }
    pthread_mutex_unlock(&o->mu);
    if (closed) {
        free(p);
        owner_decref(o);
    }
}

/* drops the references of the nodes freed since the last time (in the state itself) */
static void drain(lua_State *L)
{
    owner *o = find_owner(L);
    if (!o) return;
    pthread_mutex_lock(&o->mu);
    pending *p = o->list;
    o->list = NULL;
    pthread_mutex_unlock(&o->mu);
    while (p) {
        pending *next = p->next;
        luaL_unref(L, LUA_REGISTRYINDEX, p->ref);
        free(p);
        owner_decref(o);
        p = next;
    }
}

/* ------------------------------------------------------------------ the node's backward */

typedef struct {
    pending *node;
    dp_tensor *grad;
    int n;
    dp_tensor **gin;
} call_args;

/* in a protected call: fn(grad) must return a table of n gradients (tensors or nil) */
static int call_backward(lua_State *L)
{
    call_args *a = lua_touserdata(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->node->ref);
    dp_tensor **slot = lt_newslot(L);
    dp_tensor_retain(a->grad);
    *slot = a->grad;
    lua_call(L, 1, 1);
    if (!lua_istable(L, -1))
        return luaL_error(L, "backward must return a table of gradients, got %s", luaL_typename(L, -1));
    for (int i = 0; i < a->n; i++) {
        lua_rawgeti(L, -1, i + 1);
        if (!lua_isnil(L, -1) && !lt_test(L, -1))
            return luaL_error(L, "backward's gradient %d is a %s, not a tensor (or nil)", i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    for (int i = 0; i < a->n; i++) {   /* no Lua error past this point */
        lua_rawgeti(L, -1, i + 1);
        dp_tensor *t = lt_test(L, -1);
        if (t) dp_tensor_retain(t);
        a->gin[i] = t;
        lua_pop(L, 1);
    }
    return 0;
}

static int node_backward(void *user, dp_tensor *grad, int n, dp_tensor **gin)
{
    pending *node = user;
    lua_State *L = t_current;
    if (!L || find_owner(L) != node->o)
        return dp_error("a torch.autograd.Function's backward can only run in a backward() or torch.autograd.grad "
                        "called from the Lua state that made the Function's output");
    call_args a = { node, grad, n, gin };
    lua_pushcfunction(L, call_backward);
    lua_pushlightuserdata(L, &a);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        dp_error("%s", msg ? msg : "error in a torch.autograd.Function's backward");
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ bindings */

/* _C.custom_attach(out, name, inputs, n, backward): makes out the output of a node over
 * inputs[1..n] (tensors, or false for arguments that are not) whose backward is
 * backward(grad) -> {grad_1, ..., grad_n}.  Returns whether it recorded one. */
static int c_custom_attach(lua_State *L)
{
    dp_tensor *out = lt_check(L, 1);
    const char *name = luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_Integer n = luaL_checkinteger(L, 4);
    luaL_checktype(L, 5, LUA_TFUNCTION);
    luaL_argcheck(L, n >= 0 && n <= 1024, 4, "between 0 and 1024 inputs");
    drain(L);
    dp_tensor **inputs = lt_scratch(L, sizeof *inputs * (size_t)(n ? n : 1));
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, 3, i + 1);
        inputs[i] = lt_test(L, -1);
        lua_pop(L, 1);
    }
    owner *o = get_owner(L);
    pending *p = calloc(1, sizeof *p);
    if (!p) return luaL_error(L, "out of memory");
    lua_pushvalue(L, 5);
    p->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    p->o = o;
    pthread_mutex_lock(&o->mu);
    o->refs++;
    pthread_mutex_unlock(&o->mu);
    int rc = dp_custom_attach(out, name, (int)n, inputs, node_backward, node_freed, p);
    if (rc != 1) {   /* not recorded: the node does not own p */
        luaL_unref(L, LUA_REGISTRYINDEX, p->ref);
        free(p);
        owner_decref(o);
        if (rc < 0) return lt_raise(L);
    }
    lua_pushboolean(L, rc == 1);
    return 1;
}

int lt_run_backward(lua_State *L, dp_tensor *root, dp_tensor *grad, bool retain)
{
    lua_State *prev = t_current;
    t_current = L;
    drain(L);
    int rc = dp_backward(root, grad, retain);
    t_current = prev;
    return rc;
}

/* _C.autograd_grad(root, grad | nil, inputs, retain_graph [, create_graph]): a list of the inputs'
 * gradients (false where the graph does not reach one) */
static int c_autograd_grad(lua_State *L)
{
    dp_tensor *root = lt_check(L, 1);
    dp_tensor *grad = lua_isnoneornil(L, 2) ? NULL : lt_check(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    bool retain = lt_optbool(L, 4, false), create_graph = lt_optbool(L, 5, false);
    int n = (int)luaL_len(L, 3);
    luaL_argcheck(L, n >= 1 && n <= 4096, 3, "between 1 and 4096 inputs");
    dp_tensor **inputs = lt_scratch(L, sizeof *inputs * 2 * (size_t)n), **out = inputs + n;
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 3, i + 1);
        inputs[i] = lt_test(L, -1);
        if (!inputs[i]) return luaL_error(L, "torch.autograd.grad: inputs[%d] is a %s, not a tensor", i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    /* the result table and a userdata per input come first, so nothing can raise once
     * the engine has handed over its results */
    luaL_checkstack(L, n + 4, "too many inputs");
    int base = lua_gettop(L);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) lt_newslot(L);
    lua_State *prev = t_current;
    t_current = L;
    drain(L);
    int rc = dp_grad_graph(root, grad, retain || create_graph, create_graph, n, inputs, out);
    t_current = prev;
    if (rc) return lt_raise(L);
    for (int i = 0; i < n; i++) {
        *lt_slot(L, base + 2 + i) = out[i];
        if (out[i]) lua_pushvalue(L, base + 2 + i); else lua_pushboolean(L, 0);
        lua_rawseti(L, base + 1, i + 1);
    }
    lua_settop(L, base + 1);
    lt_account_memory(L);
    return 1;
}

const luaL_Reg lt_function_functions[] = {
    { "custom_attach", c_custom_attach }, { "autograd_grad", c_autograd_grad }, { NULL, NULL }
};
