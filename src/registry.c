/* registry.c: the backend registry.  Each device type has one entry: its name, the backend
 * that serves it (the dp_backend interface of backend.h) and how many devices it has.  The
 * CPU backend is there from the start, with DPLUA_CPU_DEVICES logical devices; the CUDA
 * backend lives in libdplua_cuda.so, which is loaded on the first question about CUDA and
 * registers what its init call hands back.  Everything above the backends asks here:
 * which backend serves a device, whether a device exists, and the device-wide services
 * (synchronize, memory counters, caches, pinned memory). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
    const char *name;            /* "cpu", "cuda" */
    const dp_backend *backend;   /* NULL while the type has no usable backend */
    int count;                   /* devices (CPU: see dp_cpu_device_count) */
    char why[512];               /* why there is no device */
    void *lib;                   /* the library the backend came from, if any */
} registry_entry;

static registry_entry g_types[DP_NDEVICE_TYPES] = {
    [DP_DEVICE_CPU] = { .name = "cpu", .backend = &dp_cpu_backend },
    [DP_DEVICE_CUDA] = { .name = "cuda" },
};

static void cuda_load(void);
static pthread_once_t g_load_once[DP_NDEVICE_TYPES] = { PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT };
static void (*const g_loaders[DP_NDEVICE_TYPES])(void) = { [DP_DEVICE_CUDA] = cuda_load };

/* The entry of a device type, its backend loaded (or its absence explained) first. */
static registry_entry *entry(dp_device_type type)
{
    if ((unsigned)type >= DP_NDEVICE_TYPES) return NULL;
    if (g_loaders[type]) pthread_once(&g_load_once[type], g_loaders[type]);
    return &g_types[type];
}

int dp_backend_register(dp_device_type type, const dp_backend *b, int device_count, void *lib)
{
    if ((unsigned)type >= DP_NDEVICE_TYPES || !b) return dp_error("dp_backend_register: bad device type %d", (int)type);
    g_types[type].backend = dp_half_backend(type, b);
    g_types[type].count = device_count;
    g_types[type].lib = lib;
    return 0;
}

/* ---------------------------------------------------------------- CPU devices */

static int g_cpu_devices = 0;          /* 0: not decided yet; read and written atomically */
static pthread_mutex_t g_dev_lock = PTHREAD_MUTEX_INITIALIZER;

/* DPLUA_CPU_DEVICES as a count from 1 to 1024, or 0 when it is malformed */
static int cpu_devices_from_env(const char *env)
{
    char *end;
    errno = 0;
    long n = strtol(env, &end, 10);
    return end != env && *end == 0 && n >= 1 && n <= 1024 ? (int)n : 0;
}

int dp_cpu_device_env_check(void)
{
    const char *env = getenv("DPLUA_CPU_DEVICES");
    if (env && *env && !cpu_devices_from_env(env))
        return dp_error("DPLUA_CPU_DEVICES must be a whole number from 1 to 1024, got '%s'", env);
    return 0;
}

int dp_cpu_device_count(void)
{
    int n = __atomic_load_n(&g_cpu_devices, __ATOMIC_ACQUIRE);
    if (n) return n;
    pthread_mutex_lock(&g_dev_lock);
    n = g_cpu_devices;
    if (n == 0) {
        const char *env = getenv("DPLUA_CPU_DEVICES");
        n = env && *env ? cpu_devices_from_env(env) : 1;
        if (n == 0) n = 1;   /* malformed: dp_cpu_device_env_check reports it */
        __atomic_store_n(&g_cpu_devices, n, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_dev_lock);
    return n;
}

int dp_cpu_set_device_count(int n)
{
    if (n < 1 || n > 1024) return dp_error("the number of CPU devices must be between 1 and 1024, got %d", n);
    if (dp_tensors_made() && n != dp_cpu_device_count())
        return dp_error("torch.cpu.set_device_count(%d) must be called before the first tensor is made "
                        "(the number of CPU devices is already fixed at %d); set DPLUA_CPU_DEVICES=%d instead", n,
                        dp_cpu_device_count(), n);
    pthread_mutex_lock(&g_dev_lock);
    __atomic_store_n(&g_cpu_devices, n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_dev_lock);
    return 0;
}

/* ---------------------------------------------------------------- the CUDA backend's library */

static void *try_open(const char *dir, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* $DPLUA_CUDA_LIB, then libdplua_cuda.so beside the library or binary that holds the engine
 * (and a few folders up), then the dynamic loader's path. */
static void *open_cuda_library(void)
{
    const char *env = getenv("DPLUA_CUDA_LIB");
    void *h = NULL;
    if (env && *env) h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    Dl_info info;
    if (!h && dladdr((void *)&open_cuda_library, &info) && info.dli_fname) {
        char dir[4096];
        if (strlen(info.dli_fname) >= sizeof dir) return NULL;
        memcpy(dir, info.dli_fname, strlen(info.dli_fname) + 1);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = 0;
            static const char *const rels[] = { "libdplua_cuda.so", "../libdplua_cuda.so", "../../libdplua_cuda.so",
                                                "../lib/libdplua_cuda.so", "../../../libdplua_cuda.so" };
            for (size_t i = 0; !h && i < sizeof rels / sizeof rels[0]; i++) h = try_open(dir, rels[i]);
        }
    }
    if (!h) h = dlopen("libdplua_cuda.so", RTLD_NOW | RTLD_LOCAL);
    return h;
}

/* The driver first: without libcuda.so.1 or a GPU there is nothing to load, and the
 * backend library would bring in the CUDA runtime, cuBLAS and NCCL for nothing (hundreds of
 * MB and a slow start on a machine without a GPU).  Not done for an explicit DPLUA_CUDA_LIB
 * (the CUDA emulation has no driver). */
static bool driver_has_device(char *why, size_t n)
{
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!drv) {
        snprintf(why, n, "no CUDA driver was found (libcuda.so.1 cannot be loaded)");
        return false;
    }
    int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(drv, "cuInit");
    int (*cu_count)(int *) = (int (*)(int *))dlsym(drv, "cuDeviceGetCount");
    int count = 0;
    if (!cu_init || !cu_count || cu_init(0) != 0 || cu_count(&count) != 0 || count <= 0) {
        snprintf(why, n, "the CUDA driver reports no GPU");
        return false;
    }
    return true;   /* the driver stays loaded: the backend's runtime uses it */
}

static void cuda_load(void)
{
    registry_entry *e = &g_types[DP_DEVICE_CUDA];
#ifndef DP_HAVE_CUDA
    snprintf(e->why, sizeof e->why, "this build of dplua has no CUDA backend (rebuild with nvcc available)");
#else
    const char *explicit_lib = getenv("DPLUA_CUDA_LIB");
    if (!(explicit_lib && *explicit_lib) && !driver_has_device(e->why, sizeof e->why)) return;
    void *h = open_cuda_library();
    if (!h) {
        const char *err = dlerror();
        snprintf(e->why, sizeof e->why, "the CUDA backend library could not be loaded (%s)", err ? err : "not found");
        return;
    }
    dp_cuda_init_fn init = (dp_cuda_init_fn)dlsym(h, "dp_cuda_backend_init");
    if (!init) {
        snprintf(e->why, sizeof e->why, "libdplua_cuda.so has no dp_cuda_backend_init");
        dlclose(h);
        return;
    }
    static const dp_backend_host host = { .error = dp_error,
                                          .deterministic = dp_deterministic_algorithms,
                                          .cudnn_deterministic = dp_cudnn_wants_deterministic,
                                          .alert_not_deterministic = dp_alert_not_deterministic };
    char err[400] = "";
    int count = 0;
    const dp_backend *b = init(&host, &count, err, sizeof err);
    e->lib = h;
    if (!b || count <= 0) {
        snprintf(e->why, sizeof e->why, "no CUDA device was found%s%s", err[0] ? ": " : "", err);
        return;
    }
    dp_backend_register(DP_DEVICE_CUDA, b, count, h);
#endif
}

void *dp_backend_symbol(dp_device_type type, const char *name)
{
    registry_entry *e = entry(type);
    return e && e->lib ? dlsym(e->lib, name) : NULL;
}

/* ---------------------------------------------------------------- devices */

bool dp_device_type_built(dp_device_type type)
{
    if (type == DP_DEVICE_CPU) return true;
#ifdef DP_HAVE_CUDA
    return type == DP_DEVICE_CUDA;
#else
    return false;
#endif
}

int dp_device_count(dp_device_type type)
{
    if (type == DP_DEVICE_CPU) return dp_cpu_device_count();
    registry_entry *e = entry(type);
    return e && e->backend ? e->count : 0;
}

int dp_device_check(dp_device d)
{
    char buf[32];
    registry_entry *e = entry(d.type);
    if (!e) return dp_error("unknown device type %d", d.type);
    int n = dp_device_count(d.type);
    if (d.type == DP_DEVICE_CPU) {
        if (d.index >= n)
            return dp_error("device %s does not exist: there %s %d CPU device%s (set DPLUA_CPU_DEVICES or "
                            "call torch.cpu.set_device_count before the first tensor)",
                            dp_device_str(d, buf), n == 1 ? "is" : "are", n, n == 1 ? "" : "s");
        return 0;
    }
    if (n == 0) return dp_error("CUDA is not available: %s (asked for %s)", e->why, dp_device_str(d, buf));
    if (d.index >= n)
        return dp_error("device %s does not exist: there %s %d CUDA device%s", dp_device_str(d, buf),
                        n == 1 ? "is" : "are", n, n == 1 ? "" : "s");
    return 0;
}

static const dp_backend *g_cpu_wrapped;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;
static void cpu_wrap(void) { g_cpu_wrapped = dp_half_backend(DP_DEVICE_CPU, &dp_cpu_backend); }

const dp_backend *dp_backend_for(dp_device d)
{
    if (d.type == DP_DEVICE_CPU && d.index < dp_cpu_device_count()) {
        pthread_once(&g_cpu_once, cpu_wrap);
        return g_cpu_wrapped;
    }
    if (dp_device_check(d)) return NULL;
    return g_types[d.type].backend;
}

int dp_device_synchronize(dp_device_type type, int index)
{
    int n = dp_device_count(type);
    if (n == 0 || index >= n) return dp_device_check((dp_device){ type, index < 0 ? 0 : index });
    const dp_backend *b = g_types[type].backend;
    for (int i = 0; i < n; i++) {
        if (index >= 0 && i != index) continue;
        if (b->synchronize((dp_device){ type, i })) return -1;
    }
    return 0;
}

size_t dp_memory_allocated(dp_device d)
{
    const dp_backend *b = dp_device_count(d.type) > d.index ? g_types[d.type].backend : NULL;
    return b && b->memory_allocated ? b->memory_allocated(d.index) : 0;
}

size_t dp_max_memory_allocated(dp_device d)
{
    const dp_backend *b = dp_device_count(d.type) > d.index ? g_types[d.type].backend : NULL;
    return b && b->max_memory_allocated ? b->max_memory_allocated(d.index) : 0;
}

void dp_empty_cache(dp_device_type type)
{
    const dp_backend *b = dp_device_count(type) ? g_types[type].backend : NULL;
    if (b && b->empty_cache) b->empty_cache();
}

void dp_set_allow_tf32(bool allow)
{
    for (int t = 0; t < DP_NDEVICE_TYPES; t++) {
        const dp_backend *b = dp_device_count((dp_device_type)t) ? g_types[t].backend : NULL;
        if (b && b->set_tf32) b->set_tf32(allow);
    }
}

/* ---------------------------------------------------------------- pinned host memory */

void *dp_pinned_alloc(size_t nbytes)
{
    if (dp_device_count(DP_DEVICE_CUDA) == 0) {
        dp_error("pinned memory needs CUDA, and CUDA is not available: %s", g_types[DP_DEVICE_CUDA].why);
        return NULL;
    }
    const dp_backend *b = g_types[DP_DEVICE_CUDA].backend;
    if (!b->alloc_host) { dp_error("this CUDA backend has no pinned memory"); return NULL; }
    return b->alloc_host(nbytes ? nbytes : 1);
}

void dp_pinned_free(void *p)
{
    const dp_backend *b = g_types[DP_DEVICE_CUDA].backend;
    if (p && b && b->free_host) b->free_host(p);
}
