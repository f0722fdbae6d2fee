/* l_workers.c: DataLoader workers for datasets written in Lua (torch/data/worker.lua is
 * their Lua side).
 *
 * Each worker is a thread with a lua_State of its own.  Values cross between states as
 * messages: a byte stream written by encode() in one state and read by decode() in the
 * other.  Tables are copied with their metatables, cycles and shared references; Lua
 * functions travel as their bytecode (string.dump) with their upvalues copied the same way
 * (the _ENV upvalue becomes the receiving state's globals, shared upvalues stay shared);
 * modules and their fields are sent by name and looked up in the receiving state; classes
 * made with torch.class are registered again there; tensors are passed by reference (a
 * header of their own over the same storage, no copy).  Anything else (a file handle, a
 * coroutine, other userdata, a C function that no module holds) is refused, naming where
 * it was found.
 *
 * The main state submits batches (a list of dataset indices each) to the worker chosen by
 * the loader; batch g lives in slot g % window until the main state takes it, in order.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lualib.h>
#include "dplua.h"
#include "lbind.h"

#define POOL_MT "torch.data.WorkerPool"
#define MSG_MT "torch.data.WorkerMessage"

/* ---------------------------------------------------------------- messages */

typedef struct {
    char *buf;
    size_t len, cap, pos;     /* pos: the decoder's cursor */
    dp_tensor **ts;           /* the tensors the message holds a reference to */
    int nts, capts;
} wmsg;

static void msg_free(wmsg *m)
{
    for (int k = 0; k < m->nts; k++) dp_tensor_release(m->ts[k]);
    free(m->ts);
    free(m->buf);
    memset(m, 0, sizeof *m);
}

static bool msg_reserve(wmsg *m, size_t n)
{
    if (m->len + n <= m->cap) return true;
    size_t cap = m->cap ? m->cap : 256;
    while (cap < m->len + n) cap *= 2;
    char *b = realloc(m->buf, cap);
    if (!b) return false;
    m->buf = b;
    m->cap = cap;
    return true;
}

enum {
    T_NIL, T_FALSE, T_TRUE, T_INT, T_NUM, T_STR, T_TENSOR, T_DEVICE, T_REF, T_TABLE, T_CLASS,
    T_FUNC, T_MODULE, T_FIELD, T_END,
    U_ENV = 0, U_JOIN, U_VAL
};

/* ---------------------------------------------------------------- encoding */

typedef struct {
    lua_State *L;
    wmsg *m;
    int memo, upmemo, known, classes;   /* stack indices (known, classes: 0 when absent) */
    int nobj;
    bool code;                          /* to a worker: functions, modules and classes allowed */
    int depth;
    char path[512];
    size_t plen;
} encoder;

/* Values nested deeper than this (a long linked list) are refused rather than overflow
 * the C stack of the copy. */
#define MAX_DEPTH 1000

static void put(encoder *e, const void *p, size_t n)
{
    if (!msg_reserve(e->m, n)) luaL_error(e->L, "out of memory while copying a value for a worker");
    memcpy(e->m->buf + e->m->len, p, n);
    e->m->len += n;
}

static void put_byte(encoder *e, int b) { unsigned char c = (unsigned char)b; put(e, &c, 1); }
static void put_int(encoder *e, int64_t v) { put(e, &v, sizeof v); }
static void put_str(encoder *e, const char *s, size_t n) { put_int(e, (int64_t)n); put(e, s, n); }

static int refuse(encoder *e, const char *what)
{
    const char *where = e->plen ? e->path : "value";
    if (e->code)
        lua_pushfstring(e->L, "%s: %s cannot be sent to a worker (create it in the worker instead: in "
                        "worker_init_fn, or when the dataset first needs it)", where, what);
    else
        lua_pushfstring(e->L, "%s: %s cannot be handed back by a worker (a batch holds tensors, numbers, "
                        "strings, booleans and plain tables of these)", where, what);
    return lua_error(e->L);
}

/* Appends a path element for the key at idx; returns the old length to restore. */
static size_t path_push_key(encoder *e, int idx)
{
    size_t old = e->plen;
    char part[96];
    if (lua_type(e->L, idx) == LUA_TSTRING) {
        const char *k = lua_tostring(e->L, idx);
        static const char word[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
        bool ident = k[0] && (k[0] < '0' || k[0] > '9') && strspn(k, word) == strlen(k);
        if (ident) snprintf(part, sizeof part, old ? ".%s" : "%s", k);
        else snprintf(part, sizeof part, "['%.80s']", k);
    } else if (lua_isinteger(e->L, idx)) {
        snprintf(part, sizeof part, "[%lld]", (long long)lua_tointeger(e->L, idx));
    } else {
        snprintf(part, sizeof part, "[a %s key]", luaL_typename(e->L, idx));
    }
    e->plen += (size_t)snprintf(e->path + old, sizeof e->path - old, "%s", part);
    if (e->plen >= sizeof e->path) e->plen = sizeof e->path - 1;
    return old;
}

static size_t path_push(encoder *e, const char *part)
{
    size_t old = e->plen;
    e->plen += (size_t)snprintf(e->path + old, sizeof e->path - old, "%s", part);
    if (e->plen >= sizeof e->path) e->plen = sizeof e->path - 1;
    return old;
}

static void path_pop(encoder *e, size_t old) { e->plen = old; e->path[old] = 0; }

static void encode(encoder *e, int idx);

/* A value seen before is sent as a reference to its first copy. */
static bool encode_seen(encoder *e, int idx)
{
    lua_pushvalue(e->L, idx);
    if (lua_rawget(e->L, e->memo) == LUA_TNUMBER) {
        put_byte(e, T_REF);
        put_int(e, lua_tointeger(e->L, -1));
        lua_pop(e->L, 1);
        return true;
    }
    lua_pop(e->L, 1);
    return false;
}

static void remember(encoder *e, int idx)
{
    lua_pushvalue(e->L, idx);
    lua_pushinteger(e->L, ++e->nobj);
    lua_rawset(e->L, e->memo);
}

/* A module or a module's field is sent by name ("m<name>" or "f<module>\0<key>"). */
static bool encode_known(encoder *e, int idx)
{
    if (!e->known) return false;
    lua_pushvalue(e->L, idx);
    if (lua_rawget(e->L, e->known) != LUA_TSTRING) { lua_pop(e->L, 1); return false; }
    size_t n;
    const char *s = lua_tolstring(e->L, -1, &n);
    put_byte(e, s[0] == 'm' ? T_MODULE : T_FIELD);
    put_str(e, s + 1, n - 1);
    lua_pop(e->L, 1);
    remember(e, idx);
    return true;
}

static void encode_fields(encoder *e, int idx)
{
    lua_pushnil(e->L);
    while (lua_next(e->L, idx)) {
        int k = lua_gettop(e->L) - 1;
        size_t old = path_push_key(e, k);
        encode(e, k);
        encode(e, k + 1);
        path_pop(e, old);
        lua_pop(e->L, 1);
    }
    put_byte(e, T_END);
}

static void encode_table(encoder *e, int idx)
{
    if (e->classes) {
        lua_pushvalue(e->L, idx);
        if (lua_rawget(e->L, e->classes) == LUA_TTABLE) {
            /* a class made with torch.class: {name, parent}; registered again on arrival */
            int info = lua_gettop(e->L);
            put_byte(e, T_CLASS);
            remember(e, idx);
            lua_rawgeti(e->L, info, 1);
            size_t n;
            const char *name = lua_tolstring(e->L, -1, &n);
            put_str(e, name ? name : "", name ? n : 0);
            lua_rawgeti(e->L, info, 2);
            size_t old = path_push(e, "<parent class>");
            encode(e, lua_gettop(e->L));
            path_pop(e, old);
            lua_settop(e->L, info - 1);
            encode_fields(e, idx);
            return;
        }
        lua_pop(e->L, 1);
    }
    put_byte(e, T_TABLE);
    remember(e, idx);
    encode_fields(e, idx);
    if (lua_getmetatable(e->L, idx)) {
        if (!e->code) refuse(e, "a table with a metatable");
        size_t old = path_push(e, "<metatable>");
        encode(e, lua_gettop(e->L));
        path_pop(e, old);
        lua_pop(e->L, 1);
    } else {
        put_byte(e, T_NIL);
    }
}

static int dump_writer(lua_State *L, const void *p, size_t n, void *ud)
{
    (void)L;
    wmsg *m = ud;
    if (!msg_reserve(m, n)) return 1;
    memcpy(m->buf + m->len, p, n);
    m->len += n;
    return 0;
}

static void encode_function(encoder *e, int idx)
{
    lua_State *L = e->L;
    if (!e->code) refuse(e, "a function");
    if (lua_iscfunction(L, idx)) refuse(e, "a C function that is not part of a loaded module");
    put_byte(e, T_FUNC);
    remember(e, idx);
    int fid = e->nobj;
    /* the bytecode, written straight into the message after its length */
    size_t at = e->m->len;
    put_int(e, 0);
    lua_pushvalue(L, idx);
    int rc = lua_dump(L, dump_writer, e->m, 0);
    lua_pop(L, 1);
    if (rc != 0) luaL_error(L, "out of memory while copying a function for a worker");
    int64_t n = (int64_t)(e->m->len - at - sizeof n);
    memcpy(e->m->buf + at, &n, sizeof n);
    int nups = 0;
    while (lua_getupvalue(L, idx, nups + 1)) { lua_pop(L, 1); nups++; }
    put_int(e, nups);
    for (int i = 1; i <= nups; i++) {
        const char *name = lua_getupvalue(L, idx, i);
        if (strcmp(name, "_ENV") == 0) {
            put_byte(e, U_ENV);
            lua_pop(L, 1);
            continue;
        }
        /* an upvalue shared with a closure sent before is joined to that one's */
        lua_pushlightuserdata(L, lua_upvalueid(L, idx, i));
        if (lua_rawget(L, e->upmemo) == LUA_TNUMBER) {
            put_byte(e, U_JOIN);
            put_int(e, lua_tointeger(L, -1));
            lua_pop(L, 2);
            continue;
        }
        lua_pop(L, 1);
        lua_pushlightuserdata(L, lua_upvalueid(L, idx, i));
        lua_pushinteger(L, (lua_Integer)fid * 256 + i);
        lua_rawset(L, e->upmemo);
        put_byte(e, U_VAL);
        char part[96];
        snprintf(part, sizeof part, "<upvalue '%.60s'>", name);
        size_t old = path_push(e, part);
        encode(e, lua_gettop(L));
        path_pop(e, old);
        lua_pop(L, 1);
    }
}

static void encode_userdata(encoder *e, int idx)
{
    lua_State *L = e->L;
    dp_tensor **slot = lt_slot(L, idx);
    if (slot) {
        if (!*slot) refuse(e, "a closed tensor");
        if (e->m->nts == e->m->capts) {
            int cap = e->m->capts ? 2 * e->m->capts : 16;
            dp_tensor **ts = realloc(e->m->ts, (size_t)cap * sizeof *ts);
            if (!ts) luaL_error(L, "out of memory while copying a value for a worker");
            e->m->ts = ts;
            e->m->capts = cap;
        }
        /* a header of its own over the same storage: the other thread may change its
         * header (requires_grad, grad, resize_) while this one reads it */
        dp_tensor *t = dp_detach(*slot);
        if (!t) lt_raise(L);
        e->m->ts[e->m->nts++] = t;
        put_byte(e, T_TENSOR);
        put_int(e, e->m->nts - 1);
        remember(e, idx);
        return;
    }
    if (luaL_testudata(L, idx, DPLUA_DEVICE_MT)) {
        size_t n;
        const char *s = luaL_tolstring(L, idx, &n);
        put_byte(e, T_DEVICE);
        put_str(e, s, n);
        lua_pop(L, 1);
        return;
    }
    if (luaL_testudata(L, idx, LUA_FILEHANDLE)) refuse(e, "a file handle");
    const char *name = NULL;
    if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) name = lua_tostring(L, -1);
    char what[128];
    snprintf(what, sizeof what, "a userdata%s%.60s%s", name ? " (" : "", name ? name : "", name ? ")" : "");
    refuse(e, what);
}

static void encode_value(encoder *e, int idx);

static void encode(encoder *e, int idx)
{
    if (++e->depth > MAX_DEPTH) refuse(e, "a value nested more than 1000 tables or functions deep");
    encode_value(e, idx);
    e->depth--;
}

static void encode_value(encoder *e, int idx)
{
    lua_State *L = e->L;
    luaL_checkstack(L, 8, "a value too deeply nested to send to a worker");
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TNIL: put_byte(e, T_NIL); return;
    case LUA_TBOOLEAN: put_byte(e, lua_toboolean(L, idx) ? T_TRUE : T_FALSE); return;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) { put_byte(e, T_INT); put_int(e, lua_tointeger(L, idx)); }
        else { double d = lua_tonumber(L, idx); put_byte(e, T_NUM); put(e, &d, sizeof d); }
        return;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        put_byte(e, T_STR);
        put_str(e, s, n);
        return;
    }
    case LUA_TTABLE:
        if (!encode_seen(e, idx) && !encode_known(e, idx)) encode_table(e, idx);
        return;
    case LUA_TFUNCTION:
        if (!encode_seen(e, idx) && !encode_known(e, idx)) encode_function(e, idx);
        return;
    case LUA_TUSERDATA:
        if (!encode_seen(e, idx)) encode_userdata(e, idx);
        return;
    case LUA_TTHREAD: refuse(e, "a coroutine"); return;
    default: refuse(e, lua_type(L, idx) == LUA_TLIGHTUSERDATA ? "a light userdata" : "this value"); return;
    }
}

/* A message userdata (freed by the collector when an error leaves it behind). */
static int l_msg_gc(lua_State *L)
{
    msg_free(luaL_checkudata(L, 1, MSG_MT));
    return 0;
}

static wmsg *new_msg(lua_State *L)
{
    wmsg *m = lua_newuserdatauv(L, sizeof *m, 0);
    memset(m, 0, sizeof *m);
    if (luaL_newmetatable(L, MSG_MT)) lt_setgc(L, l_msg_gc);
    lua_setmetatable(L, -2);
    return m;
}

/* Encodes the values at first..last into m.  known and classes: stack indices of the maps
 * of modules and classes, or 0 (data only: no functions, metatables or modules).  root
 * names the values in errors ("" for a table whose keys name them). */
static void encode_values(lua_State *L, wmsg *m, int first, int last, int known, int classes, bool code,
                          const char *root)
{
    encoder e = { .L = L, .m = m, .known = known, .classes = classes, .code = code };
    e.plen = (size_t)snprintf(e.path, sizeof e.path, "%s", root);
    lua_newtable(L);
    e.memo = lua_gettop(L);
    lua_newtable(L);
    e.upmemo = lua_gettop(L);
    for (int i = first; i <= last; i++) encode(&e, i);
    lua_pop(L, 2);
}

/* ---------------------------------------------------------------- decoding */

typedef struct {
    lua_State *L;
    wmsg *m;
    int memo;           /* stack index: id -> object */
    int nobj;
    bool steal;         /* take the message's tensor references (else add references) */
} decoder;

static void get(decoder *d, void *p, size_t n)
{
    if (d->m->pos + n > d->m->len) luaL_error(d->L, "a worker message ended early");
    memcpy(p, d->m->buf + d->m->pos, n);
    d->m->pos += n;
}

static int get_byte(decoder *d) { unsigned char c; get(d, &c, 1); return c; }
static int64_t get_int(decoder *d) { int64_t v; get(d, &v, sizeof v); return v; }

static void push_str(decoder *d)
{
    int64_t n = get_int(d);
    if (n < 0 || (size_t)n > d->m->len - d->m->pos) luaL_error(d->L, "a worker message ended early");
    lua_pushlstring(d->L, d->m->buf + d->m->pos, (size_t)n);
    d->m->pos += (size_t)n;
}

static void keep(decoder *d)
{
    lua_pushvalue(d->L, -1);
    lua_rawseti(d->L, d->memo, ++d->nobj);
}

/* require(name) in this state */
static void push_module(lua_State *L, const char *name)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, name) != LUA_TNIL) { lua_remove(L, -2); return; }
    lua_pop(L, 2);
    lua_getglobal(L, "require");
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
}

static bool decode_one(decoder *d);

static void decode_fields(decoder *d)
{
    int t = lua_gettop(d->L);
    while (decode_one(d)) {
        decode_one(d);
        if (lua_isnil(d->L, -2)) lua_pop(d->L, 2);
        else lua_rawset(d->L, t);
    }
    lua_pop(d->L, 1);   /* the T_END marker's nil */
}

static void decode_function(decoder *d)
{
    lua_State *L = d->L;
    push_str(d);
    size_t n;
    const char *code = lua_tolstring(L, -1, &n);
    if (luaL_loadbufferx(L, code, n, "=worker", "b") != LUA_OK) lua_error(L);
    lua_remove(L, -2);
    keep(d);
    int f = lua_gettop(L);
    int64_t nups = get_int(d);
    for (int i = 1; i <= nups; i++) {
        int kind = get_byte(d);
        if (kind == U_ENV) {
            lua_pushglobaltable(L);
            lua_setupvalue(L, f, i);
        } else if (kind == U_JOIN) {
            int64_t ref = get_int(d);
            lua_rawgeti(L, d->memo, ref / 256);
            if (lua_type(L, -1) == LUA_TFUNCTION) lua_upvaluejoin(L, f, i, -1, (int)(ref % 256));
            lua_pop(L, 1);
        } else {
            decode_one(d);
            if (!lua_setupvalue(L, f, i)) lua_pop(L, 1);
        }
    }
}

/* Registers a class copied from the other state: torch.class's adopt(cls, name, parent). */
static void adopt_class(lua_State *L, int cls, int name, int parent)
{
    push_module(L, "torch.class");
    lua_getfield(L, -1, "adopt");
    lua_pushvalue(L, cls);
    lua_pushvalue(L, name);
    lua_pushvalue(L, parent);
    lua_call(L, 3, 0);
    lua_pop(L, 1);
}

/* Pushes the next value; false (with nil pushed) at a T_END marker. */
static bool decode_one(decoder *d)
{
    lua_State *L = d->L;
    luaL_checkstack(L, 8, "a value too deeply nested to receive from a worker");
    int tag = get_byte(d);
    switch (tag) {
    case T_NIL: lua_pushnil(L); break;
    case T_FALSE: lua_pushboolean(L, 0); break;
    case T_TRUE: lua_pushboolean(L, 1); break;
    case T_INT: lua_pushinteger(L, (lua_Integer)get_int(d)); break;
    case T_NUM: { double v; get(d, &v, sizeof v); lua_pushnumber(L, v); break; }
    case T_STR: push_str(d); break;
    case T_END: lua_pushnil(L); return false;
    case T_REF: lua_rawgeti(L, d->memo, get_int(d)); break;
    case T_TENSOR: {
        int64_t k = get_int(d);
        if (k < 0 || k >= d->m->nts || !d->m->ts[k]) luaL_error(L, "a worker message names a tensor it lacks");
        dp_tensor **slot = lt_newslot(L);
        *slot = d->m->ts[k];
        if (d->steal) d->m->ts[k] = NULL;
        else dp_tensor_retain(*slot);
        keep(d);
        break;
    }
    case T_DEVICE: {
        push_str(d);
        dp_device dev = lt_check_device(L, -1);
        lua_pop(L, 1);
        lt_push_device(L, dev);
        break;
    }
    case T_TABLE:
        lua_newtable(L);
        keep(d);
        decode_fields(d);
        decode_one(d);
        if (lua_istable(L, -1)) lua_setmetatable(L, -2);
        else lua_pop(L, 1);
        break;
    case T_CLASS: {
        lua_newtable(L);
        keep(d);
        int cls = lua_gettop(L);
        push_str(d);
        decode_one(d);
        lua_pushvalue(L, cls);
        decode_fields(d);
        lua_pop(L, 1);
        adopt_class(L, cls, cls + 1, cls + 2);
        lua_settop(L, cls);
        break;
    }
    case T_FUNC: decode_function(d); break;
    case T_MODULE:
        push_str(d);
        push_module(L, lua_tostring(L, -1));
        lua_remove(L, -2);
        keep(d);
        break;
    case T_FIELD: {
        push_str(d);
        const char *s = lua_tostring(L, -1);
        push_module(L, s);
        const char *key = s + strlen(s) + 1;
        if (lua_getfield(L, -1, key) == LUA_TNIL)
            luaL_error(L, "module '%s' has no field '%s' in the worker's Lua state (add it in worker_init_fn)", s, key);
        lua_replace(L, -3);
        lua_pop(L, 1);
        keep(d);
        break;
    }
    default: luaL_error(L, "a worker message is damaged (tag %d)", tag);
    }
    return true;
}

/* Pushes the next value of m (read from its cursor on); memo (a stack index) maps the
 * ids of the values read so far to their copies. */
static void decode_value(lua_State *L, wmsg *m, bool steal, int memo)
{
    decoder d = { .L = L, .m = m, .memo = lua_absindex(L, memo), .steal = steal };
    d.nobj = (int)lua_rawlen(L, d.memo);
    decode_one(&d);
}

/* ---------------------------------------------------------------- the pool */

enum { S_EMPTY = 0, S_PENDING, S_BUSY, S_DONE, S_FAILED, S_DROPPED };

typedef struct {
    int64_t gid, batch;       /* global batch number; the batch's number in its epoch */
    int state, worker;        /* worker: 0-based */
    int64_t *idx, nidx;
    wmsg out;                 /* the batch, or the error message in out.buf */
} pslot;

typedef struct pool pool;

typedef struct {
    pool *p;
    int id;                   /* 0-based */
    pthread_t th;
    bool started;
    lua_State *L;
    char *init_err;           /* set when the state could not be made ready */
} worker;

struct pool {
    int n, window;
    worker *w;
    pslot *slots;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    bool shutdown;
    wmsg init;                /* paths, then the payload; read by every worker */
    int64_t base_seed;
};

static void set_error(pslot *s, const char *msg)
{
    msg_free(&s->out);
    size_t n = strlen(msg);
    s->out.buf = malloc(n + 1);
    if (s->out.buf) { memcpy(s->out.buf, msg, n + 1); s->out.len = n; }
}

static int traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = lua_pushfstring(L, "(an error object of type %s)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* In the worker's state: torch, the copied payload, and worker.setup's fetch function
 * (left in the registry under "fetch"). */
static int worker_open(lua_State *L)
{
    worker *w = lua_touserdata(L, 1);
    pool *p = w->p;
    lua_pushcfunction(L, luaopen_dplua);
    lua_call(L, 0, 0);
    lua_newtable(L);   /* the memo, shared by the two values */
    int memo = lua_gettop(L);
    wmsg view = p->init;   /* a cursor of its own over the shared message */
    view.pos = 0;
    decode_value(L, &view, false, memo);
    /* the main state's module paths, so that its modules are found by name */
    lua_getglobal(L, "package");
    lua_getfield(L, -2, "path");
    lua_setfield(L, -2, "path");
    lua_getfield(L, -2, "cpath");
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 2);
    decode_value(L, &view, false, memo);
    push_module(L, "torch.data.worker");
    lua_getfield(L, -1, "setup");
    lua_pushvalue(L, -3);
    lua_pushinteger(L, w->id + 1);
    lua_call(L, 2, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "dplua.worker.fetch");
    return 0;
}

static int worker_encode(lua_State *L)
{
    wmsg *m = lua_touserdata(L, 2);
    encode_values(L, m, 1, 1, 0, 0, false, "batch");
    encode_values(L, m, 3, 3, 0, 0, false, "");
    return 0;
}

/* Runs batch s on worker w's state: fetch(indices, batch) -> the batch and whether it is a
 * sequence, both encoded into s->out. */
static void worker_run(worker *w, pslot *s)
{
    lua_State *L = w->L;
    if (w->init_err) { set_error(s, w->init_err); s->state = S_FAILED; return; }
    lua_settop(L, 0);
    lua_pushcfunction(L, traceback);
    lua_getfield(L, LUA_REGISTRYINDEX, "dplua.worker.fetch");
    lua_createtable(L, (int)s->nidx, 0);
    for (int64_t i = 0; i < s->nidx; i++) {
        lua_pushinteger(L, (lua_Integer)s->idx[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_pushinteger(L, (lua_Integer)s->batch);
    if (lua_pcall(L, 2, 2, 1) != LUA_OK) {
        set_error(s, lua_tostring(L, -1));
        s->state = S_FAILED;
        return;
    }
    /* encode in a protected call: a value that cannot be sent is an error of this batch */
    wmsg *m = new_msg(L);
    lua_pushcfunction(L, worker_encode);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 4);
    lua_pushvalue(L, 3);
    if (lua_pcall(L, 3, 0, 1) != LUA_OK) {
        set_error(s, lua_tostring(L, -1));
        s->state = S_FAILED;
    } else {
        msg_free(&s->out);
        s->out = *m;              /* the slot takes the message over */
        memset(m, 0, sizeof *m);
        s->state = S_DONE;
    }
    lua_settop(L, 0);
}

/* The pending slot of worker id with the lowest batch number, or NULL. */
static pslot *next_task(pool *p, int id)
{
    pslot *best = NULL;
    for (int k = 0; k < p->window; k++) {
        pslot *s = &p->slots[k];
        if (s->state == S_PENDING && s->worker == id && (!best || s->gid < best->gid)) best = s;
    }
    return best;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pool *p = w->p;
    dp_rng_thread_stream(true, (uint64_t)(p->base_seed + w->id));
    w->L = luaL_newstate();
    if (!w->L) {
        w->init_err = strdup("could not make a Lua state for the worker (out of memory)");
    } else {
        luaL_openlibs(w->L);
        lua_pushcfunction(w->L, traceback);
        lua_pushcfunction(w->L, worker_open);
        lua_pushlightuserdata(w->L, w);
        if (lua_pcall(w->L, 1, 0, 1) != LUA_OK) w->init_err = strdup(lua_tostring(w->L, -1));
        lua_settop(w->L, 0);
    }
    pthread_mutex_lock(&p->mu);
    for (;;) {
        pslot *s = NULL;
        while (!p->shutdown && !(s = next_task(p, w->id))) pthread_cond_wait(&p->work, &p->mu);
        if (p->shutdown) break;
        s->state = S_BUSY;
        pslot run = *s;           /* the main thread leaves a busy slot's task alone */
        memset(&run.out, 0, sizeof run.out);
        pthread_mutex_unlock(&p->mu);
        if (w->L) worker_run(w, &run);
        else { set_error(&run, w->init_err ? w->init_err : "out of memory"); run.state = S_FAILED; }
        pthread_mutex_lock(&p->mu);
        if (s->state == S_DROPPED) {
            msg_free(&run.out);
            s->state = S_EMPTY;
        } else {
            s->out = run.out;
            s->state = run.state;
        }
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    if (w->L) lua_close(w->L);
    w->L = NULL;
    return NULL;
}

static void pool_free(pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->shutdown = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; i++) {
        if (p->w[i].started) pthread_join(p->w[i].th, NULL);
        free(p->w[i].init_err);
    }
    for (int k = 0; k < p->window; k++) {
        msg_free(&p->slots[k].out);
        free(p->slots[k].idx);
    }
    msg_free(&p->init);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->slots);
    free(p->w);
    free(p);
}

static pool **check_pool(lua_State *L)
{
    pool **pp = luaL_checkudata(L, 1, POOL_MT);
    if (!*pp) luaL_error(L, "the DataLoader's workers were stopped (loader:close())");
    return pp;
}

/* worker_pool(paths, payload, known, classes, num_workers, window, base_seed): copies the
 * payload for the workers (errors name what cannot be copied) and starts them. */
static int l_pool_new(lua_State *L)
{
    lua_settop(L, 7);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    int n = (int)luaL_checkinteger(L, 5), window = (int)luaL_checkinteger(L, 6);
    lua_Integer seed = luaL_checkinteger(L, 7);
    if (n < 1 || window < n) return luaL_error(L, "worker_pool: bad sizes (%d workers, window %d)", n, window);
    wmsg *m = new_msg(L);
    encode_values(L, m, 1, 2, 3, 4, true, "");

    pool **pp = lua_newuserdatauv(L, sizeof *pp, 0);
    *pp = NULL;
    luaL_setmetatable(L, POOL_MT);
    pool *p = calloc(1, sizeof *p);
    if (!p) return luaL_error(L, "out of memory");
    p->w = calloc((size_t)n, sizeof *p->w);
    p->slots = calloc((size_t)window, sizeof *p->slots);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->init = *m;              /* the pool takes the message over */
    memset(m, 0, sizeof *m);
    *pp = p;
    if (!p->w || !p->slots) return luaL_error(L, "out of memory");
    p->n = n;
    p->window = window;
    p->base_seed = (int64_t)seed;
    for (int i = 0; i < n; i++) {
        p->w[i].p = p;
        p->w[i].id = i;
        if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]) != 0)
            return luaL_error(L, "could not start DataLoader worker %d", i + 1);
        p->w[i].started = true;
    }
    return 1;
}

/* pool:submit(gid, worker, batch, indices) */
static int l_pool_submit(lua_State *L)
{
    pool *p = *check_pool(L);
    int64_t gid = (int64_t)luaL_checkinteger(L, 2);
    int wk = (int)luaL_checkinteger(L, 3);
    int64_t batch = (int64_t)luaL_checkinteger(L, 4);
    luaL_checktype(L, 5, LUA_TTABLE);
    if (wk < 1 || wk > p->n) return luaL_error(L, "submit: worker %d out of range", wk);
    int64_t n = (int64_t)luaL_len(L, 5);
    int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx) return luaL_error(L, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        lua_rawgeti(L, 5, i + 1);
        idx[i] = (int64_t)lua_tointeger(L, -1);   /* the worker checks them */
        if (!lua_isinteger(L, -1)) idx[i] = INT64_MIN;
        lua_pop(L, 1);
    }
    pthread_mutex_lock(&p->mu);
    pslot *s = &p->slots[gid % p->window];
    if (s->state != S_EMPTY) {
        pthread_mutex_unlock(&p->mu);
        free(idx);
        return luaL_error(L, "submit: slot of batch %d is in use", (int)gid);
    }
    free(s->idx);
    s->idx = idx;
    s->nidx = n;
    s->gid = gid;
    s->batch = batch;
    s->worker = wk - 1;
    s->state = S_PENDING;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

/* pool:take(gid [, seconds]) -> {batch, is_sequence}; nil and the message when the worker failed;
 * false when it is not ready within seconds (so that the caller's hooks, Ctrl-C, run
 * between waits) */
static int l_pool_take(lua_State *L)
{
    pool *p = *check_pool(L);
    int64_t gid = (int64_t)luaL_checkinteger(L, 2);
    double secs = luaL_optnumber(L, 3, 0.1);
    pslot *s = &p->slots[gid % p->window];
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)secs;
    until.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&p->mu);
    if (s->gid != gid || s->state == S_EMPTY) {
        pthread_mutex_unlock(&p->mu);
        return luaL_error(L, "take: batch %d was not submitted", (int)gid);
    }
    while (s->state != S_DONE && s->state != S_FAILED)
        if (pthread_cond_timedwait(&p->done, &p->mu, &until) != 0) break;
    int state = s->state;
    wmsg out = s->out;
    int wk = s->worker;
    int64_t batch = s->batch;
    if (state == S_DONE || state == S_FAILED) {
        memset(&s->out, 0, sizeof s->out);
        s->state = S_EMPTY;
    }
    pthread_mutex_unlock(&p->mu);
    if (state != S_DONE && state != S_FAILED) {
        lua_pushboolean(L, 0);
        return 1;
    }
    wmsg *m = new_msg(L);   /* freed by the collector, also when decoding raises */
    *m = out;
    if (state == S_FAILED) {
        lua_pushnil(L);
        lua_pushfstring(L, "DataLoader worker %d (batch %I): %s", wk + 1, (lua_Integer)batch,
                        m->buf ? m->buf : "out of memory");
        msg_free(m);
        return 2;
    }
    lua_createtable(L, 2, 0);
    for (int k = 1; k <= 2; k++) {   /* the batch and its flag were encoded one by one */
        lua_newtable(L);
        decode_value(L, m, true, -1);
        lua_rawseti(L, -3, k);
        lua_pop(L, 1);
    }
    msg_free(m);
    lt_account_memory(L);
    return 1;
}

/* pool:cancel(): drops every batch submitted and not taken (a loop left early) */
static int l_pool_cancel(lua_State *L)
{
    pool *p = *check_pool(L);
    pthread_mutex_lock(&p->mu);
    for (int k = 0; k < p->window; k++) {
        pslot *s = &p->slots[k];
        if (s->state == S_BUSY) s->state = S_DROPPED;
        else if (s->state != S_DROPPED) { msg_free(&s->out); s->state = S_EMPTY; }
    }
    for (int k = 0; k < p->window; k++)
        while (p->slots[k].state == S_DROPPED) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

/* __gc, __close and pool:close(): stops and joins the workers; idempotent. */
static int l_pool_gc(lua_State *L)
{
    pool **pp = luaL_checkudata(L, 1, POOL_MT);
    pool *p = *pp;
    *pp = NULL;
    pool_free(p);
    return 0;
}

/* worker_probe() -> "module\0key\0key...\n..." for a fresh state: what a worker finds
 * without being sent it. */
static int l_worker_probe(lua_State *L)
{
    static const char *const script =
        "local out = {}\n"
        "for name, m in pairs(package.loaded) do\n"
        "  if type(m) == 'table' then\n"
        "    local ks = { name }\n"
        "    for k in pairs(m) do if type(k) == 'string' then ks[#ks + 1] = k end end\n"
        "    out[#out + 1] = table.concat(ks, '\\0')\n"
        "  end\n"
        "end\n"
        "return table.concat(out, '\\n')\n";
    lua_State *P = luaL_newstate();
    if (!P) return luaL_error(L, "out of memory");
    luaL_openlibs(P);
    lua_pushcfunction(P, luaopen_dplua);
    int rc = lua_pcall(P, 0, 0, 0);
    if (rc == LUA_OK) rc = luaL_loadstring(P, script);
    if (rc == LUA_OK) rc = lua_pcall(P, 0, 1, 0);
    size_t n;
    const char *s = lua_tolstring(P, -1, &n);
    lua_pushlstring(L, s ? s : "", s ? n : 0);
    lua_close(P);
    if (rc != LUA_OK) return lua_error(L);
    return 1;
}

static const luaL_Reg pool_methods[] = {
    { "submit", l_pool_submit }, { "take", l_pool_take }, { "cancel", l_pool_cancel },
    { "close", l_pool_gc }, { NULL, NULL }
};

/* Adds the workers' functions to the torch._C.data table on top of the stack. */
void dplua_data_workers(lua_State *L)
{
    if (luaL_newmetatable(L, POOL_MT)) {
        luaL_newlib(L, pool_methods);
        lua_setfield(L, -2, "__index");
        lt_setgc(L, l_pool_gc);
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_pool_new);
    lua_setfield(L, -2, "worker_pool");
    lua_pushcfunction(L, l_worker_probe);
    lua_setfield(L, -2, "worker_probe");
}
