/* host.c: a C program that embeds dplua.  It hands a script a tensor made from a C
 * array, runs Lua on it (a matmul and a small nn.Linear), reads the results back into C
 * arrays, checks them against the same values computed in C, and shows that a Lua error
 * comes back as a message.  Exits 0 when every check passes.
 *
 *   cc host.c $(pkg-config --cflags --libs dplua) -lm -o host
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "dplua.h"

#define ROWS 2
#define COLS 3
#define OUT  2

static int failures = 0;

static void check(int ok, const char *what) {
    printf("%-44s %s\n", what, ok ? "ok" : "FAILED");
    if (!ok) failures++;
}

/* Reading a global back is done under lua_pcall: dplua_checktensor raises a Lua error
 * when the value is not a tensor, and a Lua error outside a protected call would end
 * the program. */
struct readback {
    const char *name;
    float *out;
    size_t n;
    int rc;
    int ndim;
    int64_t sizes[2];
    char msg[512];   /* why reading failed */
};

static int readback_protected(lua_State *L) {
    struct readback *rb = lua_touserdata(L, 1);
    lua_getglobal(L, rb->name);
    const dplua_tensor *t = dplua_checktensor(L, lua_gettop(L));   /* borrowed while on the stack */
    rb->ndim = dplua_tensor_ndim(t);
    for (int d = 0; d < rb->ndim && d < 2; d++) rb->sizes[d] = dplua_tensor_size(t, d);
    rb->rc = dplua_tensor_to_host(t, rb->out, rb->n);
    return 0;
}

/* Copies the global tensor `name` (of n elements) into out; 0 on success. */
static int read_global(lua_State *L, const char *name, float *out, size_t n, struct readback *rb) {
    memset(rb, 0, sizeof *rb);
    rb->name = name;
    rb->out = out;
    rb->n = n;
    lua_pushcfunction(L, readback_protected);
    lua_pushlightuserdata(L, rb);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        snprintf(rb->msg, sizeof rb->msg, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    if (rb->rc != 0) {
        snprintf(rb->msg, sizeof rb->msg, "%s", dplua_last_error());
        return -1;
    }
    return 0;
}

static void print_matrix(const char *name, const float *m, int rows, int cols) {
    printf("%s = [", name);
    for (int i = 0; i < rows; i++) {
        printf("%s[", i ? ", " : "");
        for (int j = 0; j < cols; j++) printf("%s%g", j ? ", " : "", m[i * cols + j]);
        printf("]");
    }
    printf("]\n");
}

static int close_to(const float *a, const float *b, size_t n, float tol) {
    for (size_t i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > tol * (1.0f + fabsf(b[i]))) return 0;
    return 1;
}

/* The script: x is set by the host.  The Linear layer gets fixed weights so that C can
 * compute the same forward pass. */
static const char *script =
    "y = x:matmul(x:t()) * 2 + 1\n"
    "local fc = nn.Linear(3, 2)\n"
    "torch.no_grad(function()\n"
    "  fc.weight:copy_(torch.tensor({{0.5, -1.0, 0.25}, {2.0, 0.0, -0.5}}))\n"
    "  fc.bias:fill_(0.1)\n"
    "end)\n"
    "z = torch.no_grad(function() return fc(x) end)\n"
    "return tostring(y)\n";

int main(void) {
    const float x[ROWS * COLS] = { 1, 2, 3, 4, 5, 6 };
    const float w[OUT * COLS] = { 0.5f, -1.0f, 0.25f, 2.0f, 0.0f, -0.5f };
    const float b = 0.1f;

    lua_State *L = dplua_newstate();
    if (L == NULL) {
        fprintf(stderr, "host: cannot create a dplua state: %s\n", dplua_last_error());
        return 1;
    }

    /* The tensor goes to Lua as the global x; Lua keeps its own reference. */
    const int64_t sizes[2] = { ROWS, COLS };
    dplua_tensor *t = dplua_tensor_from_host(x, 2, sizes);
    if (t == NULL) {
        fprintf(stderr, "host: dplua_tensor_from_host: %s\n", dplua_last_error());
        lua_close(L);
        return 1;
    }
    dplua_pushtensor(L, t);
    lua_setglobal(L, "x");
    dplua_tensor_release(t);

    if (luaL_dostring(L, script) != LUA_OK) {
        fprintf(stderr, "host: script failed: %s\n", lua_tostring(L, -1));
        lua_close(L);
        return 1;
    }
    printf("Lua sees y as:\n%s\n", lua_tostring(L, -1));
    lua_pop(L, 1);

    /* y = x x^T * 2 + 1, computed in C */
    float y_c[ROWS * ROWS], y[ROWS * ROWS];
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < ROWS; j++) {
            float s = 0;
            for (int k = 0; k < COLS; k++) s += x[i * COLS + k] * x[j * COLS + k];
            y_c[i * ROWS + j] = s * 2 + 1;
        }
    struct readback rb;
    int rc = read_global(L, "y", y, ROWS * ROWS, &rb);
    if (rc == 0) print_matrix("y", y, ROWS, ROWS);
    else fprintf(stderr, "host: reading y: %s\n", rb.msg);
    check(rc == 0 && rb.ndim == 2 && rb.sizes[0] == ROWS && rb.sizes[1] == ROWS,
          "y has shape 2x2");
    check(rc == 0 && close_to(y, y_c, ROWS * ROWS, 1e-6f), "y == x x^T * 2 + 1");

    /* z = x w^T + b, computed in C */
    float z_c[ROWS * OUT], z[ROWS * OUT];
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < OUT; j++) {
            float s = b;
            for (int k = 0; k < COLS; k++) s += x[i * COLS + k] * w[j * COLS + k];
            z_c[i * OUT + j] = s;
        }
    rc = read_global(L, "z", z, ROWS * OUT, &rb);
    if (rc == 0) print_matrix("z", z, ROWS, OUT);
    else fprintf(stderr, "host: reading z: %s\n", rb.msg);
    check(rc == 0 && close_to(z, z_c, ROWS * OUT, 1e-5f), "nn.Linear forward matches C");

    /* Asking for the wrong number of elements is an error code with a message. */
    float small[3];
    rc = read_global(L, "y", small, 3, &rb);
    printf("reading y into 3 floats: %s\n", rc ? rb.msg : "(no error)");
    check(rc != 0 && rb.rc != 0 && rb.msg[0] != '\0', "a size mismatch is reported, not a crash");

    /* So is asking for a value that is not a tensor. */
    rc = read_global(L, "print", small, 3, &rb);
    printf("reading print as a tensor: %s\n", rc ? rb.msg : "(no error)");
    check(rc != 0 && rb.msg[0] != '\0', "a non-tensor is reported, not a crash");

    /* A failing script comes back as a Lua error message. */
    int status = luaL_dostring(L, "return torch.ones(2, 3):matmul(torch.ones(2, 3))");
    const char *msg = status != LUA_OK ? lua_tostring(L, -1) : NULL;
    printf("Lua error: %s\n", msg ? msg : "(none)");
    check(status != LUA_OK && msg != NULL && msg[0] != '\0', "a Lua error comes back as a message");
    lua_settop(L, 0);

    /* The state still works after the error. */
    status = luaL_dostring(L, "return (x * 0 + 1):sum():item()");
    check(status == LUA_OK && lua_tonumber(L, -1) == ROWS * COLS, "the state still works afterwards");
    lua_settop(L, 0);

    lua_close(L);
    if (failures) {
        printf("%d check(s) FAILED\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
