/* dplua_complete.c: tab completion in the dplua REPL: the globals, Lua's keywords, and
 * the fields and methods reachable from a dotted path (a.b.c, a:m), through tables,
 * metatables, __index chains and the tables a C __index function keeps as upvalues (a
 * tensor's methods and fields).  Part of the dplua program, not of the library. */
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include <editline/readline.h>

#include "dplua_complete.h"

static const char *const lua_keywords[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    NULL
};

static int is_identifier(const char *s) {
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return 0;
    for (s++; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* Adds the string keys of the table at idx that start with prefix (functions only when
 * methods_only) to the set at set_idx.  Names starting with '_' are offered only when the
 * prefix starts with one. */
static void add_keys(lua_State *L, int idx, const char *prefix, int methods_only, int set_idx) {
    size_t plen = strlen(prefix);
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -2);
            int callable = lua_isfunction(L, -1);
            if (!callable && luaL_getmetafield(L, -1, "__call") != LUA_TNIL) {
                lua_pop(L, 1);
                callable = 1;
            }
            if (strncmp(k, prefix, plen) == 0 && is_identifier(k) &&
                (k[0] != '_' || prefix[0] == '_') && (!methods_only || callable)) {
                lua_pushboolean(L, 1);
                lua_setfield(L, set_idx, k);
            }
        }
        lua_pop(L, 1);
    }
}

/* Adds the names reachable through the metatable of the value at idx: an __index table
 * (followed up its own chain, as class hierarchies are), the metatable's __methods table,
 * and, when __index is a function, the tables it keeps as upvalues and the metatable itself
 * with its own chain. */
static void add_meta_keys(lua_State *L, int idx, const char *prefix, int methods_only, int set_idx) {
    lua_pushvalue(L, idx);
    for (int depth = 0; depth < 16; depth++) {
        if (!lua_getmetatable(L, -1)) break;
        lua_remove(L, -2);                       /* the metatable replaces the value */
        if (lua_getfield(L, -1, "__methods") == LUA_TTABLE)
            add_keys(L, -1, prefix, methods_only, set_idx);
        lua_pop(L, 1);
        int t = lua_getfield(L, -1, "__index");
        if (t == LUA_TFUNCTION) {
            /* after ':' the first table upvalue (the methods); after '.' every table
             * upvalue, which for tensors adds the fields (shape, dtype, grad ...) */
            for (int up = 1; up <= (methods_only ? 1 : 8); up++) {
                if (lua_getupvalue(L, -1, up) == NULL) break;
                if (lua_istable(L, -1)) add_keys(L, -1, prefix, methods_only, set_idx);
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
            /* a class whose instances go through an __index function (nn.Module) keeps its
             * methods in itself and its parents: go on up the metatable's own chain */
            add_keys(L, -1, prefix, methods_only, set_idx);
            continue;
        }
        if (t != LUA_TTABLE) { lua_pop(L, 1); break; }
        add_keys(L, -1, prefix, methods_only, set_idx);
        lua_remove(L, -2);                       /* go on with the __index table */
    }
    lua_pop(L, 1);
}

/* completions(text): a sorted array of the full completions of text, run protected
 * (reading a field may call an __index function, which may raise). */
static int completions(lua_State *L) {
    const char *text = luaL_checkstring(L, 1);
    const char *sep = NULL;
    for (const char *p = text; *p; p++)
        if (*p == '.' || *p == ':') sep = p;
    lua_newtable(L);
    int set = lua_gettop(L);
    luaL_Buffer head;
    luaL_buffinit(L, &head);
    if (sep == NULL) {
        lua_pushglobaltable(L);
        add_keys(L, -1, text, 0, set);
        add_meta_keys(L, -1, text, 0, set);
        lua_pop(L, 1);
        for (int i = 0; lua_keywords[i]; i++)
            if (strncmp(lua_keywords[i], text, strlen(text)) == 0) {
                lua_pushboolean(L, 1);
                lua_setfield(L, set, lua_keywords[i]);
            }
        luaL_pushresult(&head);
    } else {
        /* resolve the dotted path before the last separator: a.b.c */
        lua_pushglobaltable(L);
        const char *p = text;
        while (p < sep) {
            const char *q = p;
            while (q < sep && *q != '.' && *q != ':') q++;
            if (q < sep && *q == ':') return 0;   /* a:b.c is not a path */
            lua_pushlstring(L, p, (size_t)(q - p));
            if (!is_identifier(lua_tostring(L, -1))) return 0;
            lua_gettable(L, -2);
            lua_remove(L, -2);
            if (lua_isnil(L, -1)) return 0;
            p = q + 1;
        }
        int methods_only = *sep == ':';
        const char *prefix = sep + 1;
        if (lua_istable(L, -1)) add_keys(L, -1, prefix, methods_only, set);
        add_meta_keys(L, -1, prefix, methods_only, set);
        lua_pop(L, 1);
        luaL_addlstring(&head, text, (size_t)(sep - text) + 1);
        luaL_pushresult(&head);
    }
    /* set -> array of head .. name */
    int headidx = lua_gettop(L);
    lua_newtable(L);
    lua_Integer n = 0;
    lua_pushnil(L);
    while (lua_next(L, set)) {
        lua_pop(L, 1);
        lua_pushvalue(L, headidx);
        lua_pushvalue(L, -2);
        lua_concat(L, 2);
        lua_rawseti(L, -3, ++n);
    }
    return 1;
}

static lua_State *completion_state = NULL;
static char **completion_list = NULL;
static size_t completion_count = 0, completion_next = 0;

static void free_completions(void) {
    for (size_t i = 0; i < completion_count; i++) free(completion_list[i]);
    free(completion_list);
    completion_list = NULL;
    completion_count = completion_next = 0;
}

void repl_completion_state(lua_State *L) {
    completion_state = L;
    if (!L) free_completions();
}

static int cmp_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_completions(const char *text) {
    lua_State *L = completion_state;
    free_completions();
    if (L == NULL) return;
    int top = lua_gettop(L);
    lua_pushcfunction(L, completions);
    lua_pushstring(L, text);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
        size_t n = (size_t)luaL_len(L, -1);
        completion_list = calloc(n ? n : 1, sizeof *completion_list);
        for (size_t i = 0; completion_list && i < n; i++) {
            lua_rawgeti(L, -1, (lua_Integer)i + 1);
            completion_list[completion_count] = strdup(lua_tostring(L, -1));
            if (completion_list[completion_count]) completion_count++;
            lua_pop(L, 1);
        }
        if (completion_count)
            qsort(completion_list, completion_count, sizeof *completion_list, cmp_strings);
    }
    lua_settop(L, top);
}

static char *completion_generator(const char *text, int state) {
    if (state == 0) load_completions(text);
    if (completion_next < completion_count) {
        char *s = completion_list[completion_next];
        completion_list[completion_next++] = NULL;
        return s;   /* readline frees it */
    }
    return NULL;
}

char **repl_complete(const char *text, int start, int end) {
    (void)start; (void)end;
    rl_attempted_completion_over = 1;       /* never fall back to file names */
    rl_completion_append_character = '\0';
    return rl_completion_matches(text, completion_generator);
}
