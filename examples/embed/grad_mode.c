/* grad_mode.c: grad mode belongs to a lua_State, not to a thread.  Two states take turns on
 * one thread, one with grad mode off, the other training; then a state with grad mode off
 * moves to another thread (which another state used before), is switched back on there, and
 * returns.  Every step checks what torch.is_grad_enabled() says and whether a product of a
 * tensor that requires grad records a graph (backward gives the right gradient).  Prints one
 * line per check and exits 0 only when all pass.
 *
 *   ./grad_mode
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "dplua.h"

static int failures;

/* Runs `code` in L (it returns a string) and compares the result with `want`. */
static void check(lua_State *L, const char *what, const char *code, const char *want)
{
    if (luaL_loadstring(L, code) == LUA_OK)
        lua_pcall(L, 0, 1, 0);
    const char *got = lua_tostring(L, -1);   /* the result, or the error message */
    bool ok = got && strcmp(got, want) == 0;
    printf("%-52s %s", what, ok ? "ok\n" : "FAILED: ");
    if (!ok) {
        printf("got '%s', expected '%s'\n", got ? got : "(nil)", want);
        failures++;
    }
    lua_pop(L, 1);
}

/* probe(): grad mode as seen by the state, and whether a product records: "on 12" means
 * grad mode is on and backward through sum(x * x) at x = {1, 2, 3} gave gradients summing
 * to 12 */
static const char *define_probe =
    "function probe()\n"
    "local x = torch.tensor({1, 2, 3}, {dtype = 'float32', requires_grad = true})\n"
    "local y = (x * x):sum()\n"
    "if not y.requires_grad then return (torch.is_grad_enabled() and 'on' or 'off') .. ' no graph' end\n"
    "y:backward()\n"
    "return (torch.is_grad_enabled() and 'on ' or 'off ') .. string.format('%g', x.grad:sum():item())\n"
    "end\n"
    "return 'ok'\n";
static const char *probe = "return probe()";

struct move {
    lua_State *L;   /* the state that moves to the thread */
    lua_State *own; /* the thread's own state, run before it */
};

static void *moved(void *arg)
{
    struct move *m = arg;
    check(m->own, "thread 2: its own state is on", probe, "on 12");
    check(m->own, "thread 2: its own state switches off", "torch.set_grad_enabled(false) return 'ok'", "ok");
    check(m->L, "thread 2: state C arrives off", probe, "off no graph");
    check(m->L, "thread 2: state C switches on", "torch.set_grad_enabled(true) return 'ok'", "ok");
    check(m->L, "thread 2: state C records", probe, "on 12");
    check(m->own, "thread 2: its own state is still off", probe, "off no graph");
    return NULL;
}

int main(void)
{
    lua_State *a = dplua_newstate(), *b = dplua_newstate(), *c = dplua_newstate(), *d = dplua_newstate();
    if (!a || !b || !c || !d) {
        fprintf(stderr, "dplua_newstate: %s\n", dplua_last_error());
        return 1;
    }
    check(a, "A defines probe()", define_probe, "ok");
    check(b, "B defines probe()", define_probe, "ok");
    check(c, "C defines probe()", define_probe, "ok");
    check(d, "D defines probe()", define_probe, "ok");
    /* 1. A and B alternate on the main thread */
    check(a, "A switches grad mode off", "torch.set_grad_enabled(false) return 'ok'", "ok");
    check(b, "B, after A, is on and backward works", probe, "on 12");
    check(a, "A, after B, is still off", probe, "off no graph");
    check(b, "B inside no_grad is off",
          "return torch.no_grad(function() return tostring(torch.is_grad_enabled()) end)", "false");
    check(a, "A inside enable_grad is on and records",
          "return torch.enable_grad(probe)", "on 12");
    check(b, "B trains a model while A is off",
          "local m = nn.Linear(2, 1)\n"
          "local loss = m(torch.ones(3, 2)):sum()\n"
          "loss:backward()\n"
          "return string.format('%g', m.bias.grad:item())", "3");
    check(a, "A after enable_grad is off again", probe, "off no graph");

    /* 2. C, off, moves to a second thread and comes back on */
    check(c, "C switches grad mode off", "torch.set_grad_enabled(false) return 'ok'", "ok");
    check(a, "A switches grad mode on", "torch.set_grad_enabled(true) return 'ok'", "ok");
    struct move m = { c, d };
    pthread_t t;
    if (pthread_create(&t, NULL, moved, &m) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    pthread_join(t, NULL);
    check(c, "C, back on the main thread, is on", probe, "on 12");
    check(a, "A is on", probe, "on 12");
    check(b, "B is on", probe, "on 12");
    check(d, "D, moved here, is still off", probe, "off no graph");

    lua_close(a);
    lua_close(b);
    lua_close(c);
    lua_close(d);
    if (failures) {
        printf("%d checks FAILED\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
