/* core.c: errors, dtypes, device names, the OOM hook and thread settings.  Devices and
 * their backends are in registry.c. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>

#include "backend.h"
#include "internal.h"

/* ---------------------------------------------------------------- errors */

static _Thread_local char g_err[1024];

int dp_error(const char *fmt, ...)
{
    char tmp[sizeof g_err];   /* fmt's arguments may point into g_err itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(g_err, tmp, sizeof g_err);
    return -1;
}

const char *dp_last_error(void) { return g_err; }
void dp_clear_error(void) { g_err[0] = 0; }

/* ---------------------------------------------------------------- dtypes */

static const char *const dtype_names[DP_NDTYPES] = { "float32", "float64", "int64", "bool", "float16", "bfloat16" };
static const size_t dtype_sizes[DP_NDTYPES] = { 4, 8, 8, 1, 2, 2 };

size_t dp_dtype_size(dp_dtype dt) { return dt < DP_NDTYPES ? dtype_sizes[dt] : 0; }
const char *dp_dtype_name(dp_dtype dt) { return dt < DP_NDTYPES ? dtype_names[dt] : "?"; }
bool dp_dtype_is_float(dp_dtype dt) { return dt == DP_FLOAT32 || dt == DP_FLOAT64 || dp_dtype_is_half(dt); }
bool dp_dtype_is_half(dp_dtype dt) { return dt == DP_FLOAT16 || dt == DP_BFLOAT16; }

static _Atomic dp_dtype g_default_dtype = DP_FLOAT32;

int dp_set_default_dtype(dp_dtype dt)
{
    if ((unsigned)dt >= DP_NDTYPES || !dp_dtype_is_float(dt))
        return dp_error("set_default_dtype: only floating point dtypes are supported as the default, got %s", dp_dtype_name(dt));
    g_default_dtype = dt;
    return 0;
}

dp_dtype dp_default_dtype(void) { return g_default_dtype; }

int dp_dtype_parse(const char *name, dp_dtype *out)
{
    static const struct { const char *name; dp_dtype dt; } names[] = {
        { "float32", DP_FLOAT32 }, { "float", DP_FLOAT32 }, { "float64", DP_FLOAT64 },
        { "double", DP_FLOAT64 }, { "int64", DP_INT64 }, { "long", DP_INT64 }, { "bool", DP_BOOL },
        { "float16", DP_FLOAT16 }, { "half", DP_FLOAT16 }, { "bfloat16", DP_BFLOAT16 },
        /* the narrower integer types PyTorch has, held as int64 (the one integer dtype) */
        { "int32", DP_INT64 }, { "int", DP_INT64 }, { "int16", DP_INT64 }, { "short", DP_INT64 },
        { "int8", DP_INT64 }, { "uint8", DP_INT64 },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) { *out = names[i].dt; return 0; }
    return dp_error("unknown dtype '%s' (expected float32, float64, float16, bfloat16, int64 or bool)", name);
}

/* ---------------------------------------------------------------- device names */

static _Thread_local int g_cuda_current;

void dp_cuda_set_current(int index) { g_cuda_current = index; }
int dp_cuda_current(void) { return g_cuda_current; }

int dp_device_parse(const char *s, dp_device *out)
{
    const char *colon = strchr(s, ':');
    size_t tlen = colon ? (size_t)(colon - s) : strlen(s);
    dp_device d = { 0, 0 };
    if (tlen == 3 && strncmp(s, "cpu", 3) == 0) d.type = DP_DEVICE_CPU;
    else if (tlen == 4 && strncmp(s, "cuda", 4) == 0) d.type = DP_DEVICE_CUDA;
    else return dp_error("invalid device '%s' (expected 'cpu', 'cpu:N', 'cuda' or 'cuda:N')", s);
    if (colon) {
        char *end;
        long idx = strtol(colon + 1, &end, 10);
        if (*end || end == colon + 1 || idx < 0 || idx > 1000000)
            return dp_error("invalid device '%s': the index must be a non-negative integer", s);
        d.index = (int)idx;
    } else if (d.type == DP_DEVICE_CUDA) {
        d.index = g_cuda_current;
    }
    *out = d;
    return 0;
}

char *dp_device_str(dp_device d, char *buf)
{
    /* buf holds at least 32 bytes: "cuda:" and an int fit */
    if (d.type == DP_DEVICE_CPU && d.index == 0) strcpy(buf, "cpu");
    else sprintf(buf, "%s:%d", d.type == DP_DEVICE_CPU ? "cpu" : "cuda", d.index);
    return buf;
}

/* ---------------------------------------------------------------- OOM hook, threads */

static _Thread_local void (*g_oom_fn)(void *);
static _Thread_local void *g_oom_ctx;

void dp_set_oom_hook(void (*fn)(void *ctx), void *ctx) { g_oom_fn = fn; g_oom_ctx = ctx; }
void dp_clear_oom_hook(void *ctx) { if (g_oom_ctx == ctx) { g_oom_fn = NULL; g_oom_ctx = NULL; } }
void dp_run_oom_hook(void) { if (g_oom_fn) g_oom_fn(g_oom_ctx); }

void dp_set_num_threads(int n)
{
    if (n < 1) n = 1;
    dp_pool_set_threads(n);
    openblas_set_num_threads(n);
}

int dp_get_num_threads(void) { return dp_pool_threads(); }
