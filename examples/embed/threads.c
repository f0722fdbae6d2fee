/* threads.c: four threads, each with its own dplua state, each running a different
 * computation many times at once (matrix products, autograd, training a linear model with
 * SGD, reductions).  The host calls a Lua function step(i) for every iteration and checks
 * each result against the value computed in C.  Exits 0 only when every thread is right.
 *
 *   ./threads [ITERATIONS]      (default 200)
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "dplua.h"

#define NTHREADS 4

struct job {
    const char *name;
    const char *script;             /* defines step(i) returning a number, and finish() */
    double (*expected_step)(int i); /* NULL: step results are not checked one by one */
    double (*expected_total)(int n);
    double tolerance;
    int iterations;
    /* results */
    int ok;
    int bad_steps;
    double total;
    double final[2];                /* what finish() returned */
    char error[512];
};

/* 1. matrix products: full(8x8, i) @ ones(8x8) sums to 8*8*8*i */
static const char *matmul_script =
    "local ones = torch.ones(8, 8)\n"
    "function step(i)\n"
    "  local a = torch.full({8, 8}, i, {dtype='float32'})\n"
    "  return a:matmul(ones):sum():item()\n"
    "end\n"
    "function finish() return 0 end\n";
static double matmul_step(int i) { return 512.0 * i; }
static double matmul_total(int n) { return 512.0 * n * (n + 1) / 2.0; }

/* 2. autograd: d/dx sum(x*x) at x = {i, 2i, 3i} is 2x, which sums to 12i */
static const char *autograd_script =
    "function step(i)\n"
    "  local x = torch.tensor({i, 2 * i, 3 * i}, {dtype='float32', requires_grad=true})\n"
    "  local y = (x * x):sum()\n"
    "  y:backward()\n"
    "  return x.grad:sum():item()\n"
    "end\n"
    "function finish() return 0 end\n";
static double autograd_step(int i) { return 12.0 * i; }
static double autograd_total(int n) { return 12.0 * n * (n + 1) / 2.0; }

/* 3. training: fit y = 3x + 2 with nn.Linear, MSELoss and SGD; finish() returns the
 * learnt weight and bias, which must be close to 3 and 2 */
static const char *train_script =
    "local x = torch.arange(0, 1, 0.0625, {dtype='float32'}):view(-1, 1)\n"
    "local y = x * 3 + 2\n"
    "local model = nn.Linear(1, 1)\n"
    "local loss_fn = nn.MSELoss()\n"
    "local opt = optim.SGD(model:parameters(), {lr = 0.5})\n"
    "function step(i)\n"
    "  opt:zero_grad()\n"
    "  local loss = loss_fn(model(x), y)\n"
    "  loss:backward()\n"
    "  opt:step()\n"
    "  return loss:item()\n"
    "end\n"
    "function finish() return model.weight:item(), model.bias:item() end\n";

/* 4. reductions: mean of 1..i is (i+1)/2; a softmax sums to 1 */
static const char *reduce_script =
    "function step(i)\n"
    "  local t = torch.arange(1, i + 1, {dtype='float64'})\n"
    "  local p = t:softmax(1)\n"
    "  return t:mean():item() + p:sum():item()\n"
    "end\n"
    "function finish() return 0 end\n";
static double reduce_step(int i) { return (i + 1) / 2.0 + 1.0; }
static double reduce_total(int n) {
    double s = 0;
    for (int i = 1; i <= n; i++) s += reduce_step(i);
    return s;
}

static void *run_job(void *arg) {
    struct job *job = arg;
    lua_State *L = dplua_newstate();
    if (L == NULL) {
        snprintf(job->error, sizeof job->error, "dplua_newstate: %s", dplua_last_error());
        return NULL;
    }
    if (luaL_dostring(L, job->script) != LUA_OK) {
        snprintf(job->error, sizeof job->error, "%s", lua_tostring(L, -1));
        lua_close(L);
        return NULL;
    }
    for (int i = 1; i <= job->iterations; i++) {
        lua_getglobal(L, "step");
        lua_pushinteger(L, i);
        if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
            snprintf(job->error, sizeof job->error, "step(%d): %s", i, lua_tostring(L, -1));
            lua_close(L);
            return NULL;
        }
        double v = lua_tonumber(L, -1);
        lua_pop(L, 1);
        if (job->expected_step && fabs(v - job->expected_step(i)) > job->tolerance) {
            if (job->bad_steps++ == 0)
                snprintf(job->error, sizeof job->error, "step(%d) gave %.9g, expected %.9g", i, v,
                         job->expected_step(i));
        }
        job->total += v;
    }
    lua_getglobal(L, "finish");
    if (lua_pcall(L, 0, 2, 0) != LUA_OK) {
        snprintf(job->error, sizeof job->error, "finish(): %s", lua_tostring(L, -1));
        lua_close(L);
        return NULL;
    }
    job->final[0] = lua_tonumber(L, -2);
    job->final[1] = lua_tonumber(L, -1);
    lua_close(L);
    job->ok = job->bad_steps == 0;
    return NULL;
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 200;
    if (iterations < 1) {
        fprintf(stderr, "usage: %s [ITERATIONS >= 1]\n", argv[0]);
        return 2;
    }
    struct job jobs[NTHREADS] = {
        { .name = "matmul", .script = matmul_script, .expected_step = matmul_step,
          .expected_total = matmul_total, .tolerance = 1e-6 },
        { .name = "autograd", .script = autograd_script, .expected_step = autograd_step,
          .expected_total = autograd_total, .tolerance = 1e-6 },
        { .name = "train", .script = train_script },
        { .name = "reduce", .script = reduce_script, .expected_step = reduce_step,
          .expected_total = reduce_total, .tolerance = 1e-9 },
    };
    pthread_t threads[NTHREADS];
    int started[NTHREADS] = { 0 };
    for (int k = 0; k < NTHREADS; k++) {
        jobs[k].iterations = iterations;
        started[k] = pthread_create(&threads[k], NULL, run_job, &jobs[k]) == 0;
        if (!started[k]) snprintf(jobs[k].error, sizeof jobs[k].error, "pthread_create failed");
    }
    for (int k = 0; k < NTHREADS; k++)
        if (started[k]) pthread_join(threads[k], NULL);

    int failures = 0;
    for (int k = 0; k < NTHREADS; k++) {
        struct job *job = &jobs[k];
        if (job->ok && job->expected_total) {
            double want = job->expected_total(iterations);
            if (fabs(job->total - want) > 1e-9 * fabs(want) + job->tolerance * iterations) {
                job->ok = 0;
                snprintf(job->error, sizeof job->error, "total %.9g, expected %.9g", job->total, want);
            }
        }
        if (job->ok && strcmp(job->name, "train") == 0) {
            double weight = job->final[0], bias = job->final[1];
            if (iterations >= 200 && (fabs(weight - 3) > 0.05 || fabs(bias - 2) > 0.05)) {
                job->ok = 0;
                snprintf(job->error, sizeof job->error, "learnt y = %.4fx + %.4f, expected 3x + 2",
                         weight, bias);
            }
        }
        printf("thread %d %-8s %d iterations: %s%s%s\n", k + 1, job->name, iterations,
               job->ok ? "ok" : "FAILED", job->ok ? "" : ": ", job->ok ? "" : job->error);
        if (!job->ok) failures++;
    }
    if (failures) {
        printf("%d of %d threads FAILED\n", failures, NTHREADS);
        return 1;
    }
    printf("all %d threads ok\n", NTHREADS);
    return 0;
}
