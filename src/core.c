/* core.c: errors, dtypes, devices (CPU devices, the run-time loaded CUDA backend), threads. */
#include <dlfcn.h>
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

static const char *const dtype_names[DP_NDTYPES] = { "float32", "float64", "int64", "bool" };
static const size_t dtype_sizes[DP_NDTYPES] = { 4, 8, 8, 1 };

size_t dp_dtype_size(dp_dtype dt) { return dt < DP_NDTYPES ? dtype_sizes[dt] : 0; }
const char *dp_dtype_name(dp_dtype dt) { return dt < DP_NDTYPES ? dtype_names[dt] : "?"; }
bool dp_dtype_is_float(dp_dtype dt) { return dt == DP_FLOAT32 || dt == DP_FLOAT64; }

int dp_dtype_parse(const char *name, dp_dtype *out)
{
    static const struct { const char *name; dp_dtype dt; } names[] = {
        { "float32", DP_FLOAT32 }, { "float", DP_FLOAT32 }, { "float64", DP_FLOAT64 },
        { "double", DP_FLOAT64 }, { "int64", DP_INT64 }, { "long", DP_INT64 }, { "bool", DP_BOOL },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) { *out = names[i].dt; return 0; }
    return dp_error("unknown dtype '%s' (expected float32, float64, int64 or bool)", name);
}

/* ---------------------------------------------------------------- devices */

static int g_cpu_devices = 0;          /* 0: not decided yet */
static pthread_mutex_t g_dev_lock = PTHREAD_MUTEX_INITIALIZER;

int dp_cpu_device_count(void)
{
    if (g_cpu_devices == 0) {
        pthread_mutex_lock(&g_dev_lock);
        if (g_cpu_devices == 0) {
            const char *env = getenv("DPLUA_CPU_DEVICES");
            int n = env ? atoi(env) : 1;
            g_cpu_devices = n >= 1 ? n : 1;
        }
        pthread_mutex_unlock(&g_dev_lock);
    }
    return g_cpu_devices;
}

int dp_cpu_set_device_count(int n)
{
    if (n < 1 || n > 1024) return dp_error("the number of CPU devices must be between 1 and 1024, got %d", n);
    if (dp_tensors_made() && n != dp_cpu_device_count())
        return dp_error("torch.cpu.set_device_count(%d) must be called before the first tensor is made "
                        "(the number of CPU devices is already fixed at %d); set DPLUA_CPU_DEVICES=%d instead", n,
                        dp_cpu_device_count(), n);
    g_cpu_devices = n;
    return 0;
}

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

/* ---------------------------------------------------------------- CUDA backend loading */

static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;
static void *g_cuda_lib;
static const dp_backend *g_cuda_backend;
static int g_cuda_count;
static char g_cuda_why[512] = "";

static void *try_open(const char *dir, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void cuda_load(void)
{
#ifndef DP_HAVE_CUDA
    snprintf(g_cuda_why, sizeof g_cuda_why, "this build of dplua has no CUDA backend (rebuild with nvcc available)");
    return;
#else
    const char *env = getenv("DPLUA_CUDA_LIB");
    void *h = NULL;
    if (env && *env) h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        Dl_info info;
        if (dladdr((void *)&cuda_load, &info) && info.dli_fname) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s", info.dli_fname);
            char *slash = strrchr(dir, '/');
            if (slash) {
                *slash = 0;
                static const char *const rels[] = { "libdplua_cuda.so", "../libdplua_cuda.so",
                                                    "../../libdplua_cuda.so", "../lib/libdplua_cuda.so",
                                                    "../../../libdplua_cuda.so" };
                for (size_t i = 0; !h && i < sizeof rels / sizeof rels[0]; i++) h = try_open(dir, rels[i]);
            }
        }
    }
    if (!h) h = dlopen("libdplua_cuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(g_cuda_why, sizeof g_cuda_why, "the CUDA backend library could not be loaded (%s)", e ? e : "not found");
        return;
    }
    dp_cuda_init_fn init = (dp_cuda_init_fn)dlsym(h, "dp_cuda_backend_init");
    if (!init) {
        snprintf(g_cuda_why, sizeof g_cuda_why, "libdplua_cuda.so has no dp_cuda_backend_init");
        dlclose(h);
        return;
    }
    char err[400] = "";
    int count = 0;
    static const dp_backend_host host = { .error = dp_error };
    const dp_backend *b = init(&host, &count, err, sizeof err);
    g_cuda_lib = h;
    if (!b || count <= 0) {
        snprintf(g_cuda_why, sizeof g_cuda_why, "no CUDA device was found%s%s", err[0] ? ": " : "", err);
        return;
    }
    g_cuda_backend = b;
    g_cuda_count = count;
#endif
}

bool dp_cuda_is_built(void)
{
#ifdef DP_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

int dp_cuda_device_count(void)
{
    pthread_once(&g_cuda_once, cuda_load);
    return g_cuda_count;
}

void *dp_cuda_host_alloc(size_t nbytes)
{
    if (dp_cuda_device_count() == 0) {
        dp_error("pinned memory needs CUDA, and CUDA is not available: %s", g_cuda_why);
        return NULL;
    }
    if (!g_cuda_backend->alloc_host) { dp_error("this CUDA backend has no pinned memory"); return NULL; }
    return g_cuda_backend->alloc_host(nbytes ? nbytes : 1);
}

void dp_cuda_host_free(void *p)
{
    if (p && g_cuda_backend && g_cuda_backend->free_host) g_cuda_backend->free_host(p);
}

void *dp_cuda_symbol(const char *name)
{
    pthread_once(&g_cuda_once, cuda_load);
    return g_cuda_lib ? dlsym(g_cuda_lib, name) : NULL;
}

int dp_device_check(dp_device d)
{
    char buf[32];
    if (d.type == DP_DEVICE_CPU) {
        int n = dp_cpu_device_count();
        if (d.index >= n)
            return dp_error("device %s does not exist: there %s %d CPU device%s (set DPLUA_CPU_DEVICES or "
                            "call torch.cpu.set_device_count before the first tensor)",
                            dp_device_str(d, buf), n == 1 ? "is" : "are", n, n == 1 ? "" : "s");
        return 0;
    }
    if (d.type != DP_DEVICE_CUDA) return dp_error("unknown device type %d", d.type);
    int n = dp_cuda_device_count();
    if (n == 0)
        return dp_error("CUDA is not available: %s (asked for %s)", g_cuda_why, dp_device_str(d, buf));
    if (d.index >= n)
        return dp_error("device %s does not exist: there %s %d CUDA device%s", dp_device_str(d, buf),
                        n == 1 ? "is" : "are", n, n == 1 ? "" : "s");
    return 0;
}

const dp_backend *dp_backend_for(dp_device d)
{
    if (d.type == DP_DEVICE_CPU && d.index < dp_cpu_device_count()) return &dp_cpu_backend;
    if (dp_device_check(d)) return NULL;
    return d.type == DP_DEVICE_CPU ? &dp_cpu_backend : g_cuda_backend;
}

int dp_cuda_synchronize(int index)
{
    int n = dp_cuda_device_count();
    if (n == 0) return dp_device_check((dp_device){ DP_DEVICE_CUDA, index < 0 ? 0 : index });
    for (int i = 0; i < n; i++) {
        if (index >= 0 && i != index) continue;
        if (g_cuda_backend->synchronize((dp_device){ DP_DEVICE_CUDA, i })) return -1;
    }
    if (index >= n) return dp_device_check((dp_device){ DP_DEVICE_CUDA, index });
    return 0;
}

size_t dp_cuda_memory_allocated(int index)
{
    return dp_cuda_device_count() && g_cuda_backend->memory_allocated ? g_cuda_backend->memory_allocated(index) : 0;
}

size_t dp_cuda_max_memory_allocated(int index)
{
    return dp_cuda_device_count() && g_cuda_backend->max_memory_allocated ? g_cuda_backend->max_memory_allocated(index) : 0;
}

void dp_cuda_empty_cache(void)
{
    if (dp_cuda_device_count() && g_cuda_backend->empty_cache) g_cuda_backend->empty_cache();
}

int dp_cuda_set_tf32(bool allow)
{
    if (dp_cuda_device_count() && g_cuda_backend->set_tf32) g_cuda_backend->set_tf32(allow);
    return 0;
}

/* ---------------------------------------------------------------- OOM hook, threads */

static _Thread_local void (*g_oom_fn)(void *);
static _Thread_local void *g_oom_ctx;

void dp_set_oom_hook(void (*fn)(void *ctx), void *ctx) { g_oom_fn = fn; g_oom_ctx = ctx; }
void dp_run_oom_hook(void) { if (g_oom_fn) g_oom_fn(g_oom_ctx); }

void dp_set_num_threads(int n)
{
    if (n < 1) n = 1;
    dp_pool_set_threads(n);
    openblas_set_num_threads(n);
}

int dp_get_num_threads(void) { return dp_pool_threads(); }
