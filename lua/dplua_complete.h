/* dplua_complete.h: tab completion for the dplua REPL (dplua_complete.c). */
#ifndef DPLUA_COMPLETE_H
#define DPLUA_COMPLETE_H

#include <lua.h>

/* The state whose globals and values completion reads; NULL frees what it kept. */
void repl_completion_state(lua_State *L);
/* rl_attempted_completion_function of libedit's readline interface. */
char **repl_complete(const char *text, int start, int end);

#endif
