/* backend.cu: the CUDA device behind the engine's dp_backend interface: device discovery
 * (with DPLUA_CUDA_VIRTUAL), one stream per device, a caching allocator per device, pinned
 * host memory, copies, and the dp_backend struct that dp_cuda_backend_init hands out.
 *
 * Devices.  Device i is physical GPU i / K when DPLUA_CUDA_VIRTUAL=K; each (virtual) device
 * has its own stream, cuBLAS handle and memory pools, so multi-GPU code paths run
 * concurrently on one GPU.  Pinned host memory has its own cache (below).
 *
 * Memory.  As PyTorch's caching allocator, simplified: requests are rounded up to 512 B;
 * those of at most 1 MiB come from 2 MiB segments (the small pool), larger ones from
 * segments of 20 MiB (requests under 10 MiB) or the request rounded to 2 MiB.  A free
 * block is split when enough is left over, freed blocks merge with free neighbours of the
 * same segment, and nothing goes back to the driver until empty_cache() or an allocation
 * that fails.  Blocks are reused in stream order: every kernel touching a device's memory
 * runs on that device's stream, and copies between devices join both streams.  A block
 * that another stream uses too (the side stream of collectives) is marked with
 * record_stream: when it is freed, an event goes on each such stream, and the block waits
 * in `pending` until those events have completed (PyTorch's record_stream).
 *
 * Events.  Each device keeps a small pool of events, taken and given back by the copies
 * between devices and by the side-stream joins of torch.distributed.  Every wait of the
 * host for the device goes through host_wait_*, which counts it per thread (host_syncs). 
 *
 * Errors.  The engine hands its error reporter (dp_error) to dp_cuda_backend_init; every
 * message of this library goes through it. */
#include <cublas_v2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <type_traits>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "common.cuh"

/* ---------------------------------------------------------------- errors */

static int (*g_error_fn)(const char *fmt, ...);
/* the engine's deterministic-algorithms flags (determ.c), read at each call */
static bool (*g_deterministic_fn)(void);
static bool (*g_cudnn_deterministic_fn)(void);

extern "C" int dp_cuda_error(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (g_error_fn) g_error_fn("%s", buf);
    return -1;
}

/* ---------------------------------------------------------------- devices and memory */

#define SMALL_LIMIT ((size_t)1 << 20)        /* requests up to 1 MiB use the small pool */
#define SMALL_SEGMENT ((size_t)2 << 20)      /* small-pool segments are 2 MiB */
#define LARGE_SEGMENT ((size_t)20 << 20)     /* large requests under 10 MiB share 20 MiB */
#define ROUND_LARGE ((size_t)2 << 20)
#define MIN_BLOCK ((size_t)512)

struct DP_HIDDEN block {
    char *ptr;
    size_t size;
    bool allocated;
    bool small;
    block *prev, *next;          /* neighbours within the segment */
    std::vector<cudaStream_t> streams;   /* other streams using it (record_stream) */
};

static block *new_block(char *ptr, size_t size, bool small, block *prev, block *next)
{
    block *b = new block();
    b->ptr = ptr;
    b->size = size;
    b->allocated = false;
    b->small = small;
    b->prev = prev;
    b->next = next;
    return b;
}

/* A freed block waiting for the events of the other streams that used it. */
struct DP_HIDDEN pending_block {
    block *b;
    std::vector<cudaEvent_t> events;
};

struct DP_HIDDEN block_order {
    bool operator()(const block *a, const block *b) const
    {
        return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
};

struct DP_HIDDEN device_state {
    int phys;
    std::mutex mu;               /* guards everything below but `ready` */
    std::atomic<bool> ready;     /* the stream exists (set once, under mu) */
    cudaStream_t stream;
    cudaStream_t side;           /* collectives' stream (side_stream), made on first use */
    cublasHandle_t cublas;
    std::mutex cublas_mu;        /* one enqueuer at a time per handle */
    std::set<block *, block_order> free_small, free_large;
    std::unordered_map<void *, block *> live;
    std::vector<pending_block> pending;
    size_t allocated, peak, reserved;
    std::mutex event_mu;         /* guards events (taken while mu may be held, never the reverse) */
    std::vector<cudaEvent_t> events;   /* the pool, of this device's GPU */
};

static std::vector<device_state *> g_devices;
static int g_virtual = 1;
/* DPLUA_CUDA_POISON=1: every allocation is filled with 0xFF bytes (NaN in floats, -1 in
 * int64, a non-0/1 bool), so a kernel that leaves part of its output unwritten shows. */
static bool g_poison = false;
static std::atomic<bool> g_tf32(false);

/* segment base -> (size, device), for dp_cuda_device_of */
struct DP_HIDDEN segment_info {
    size_t size;
    int device;
};
static std::mutex g_seg_mu;
static std::map<uintptr_t, segment_info> g_segments;

/* (destination, source) GPU pairs whose peer access was tried */
struct DP_HIDDEN peer_pair {
    int dst, src;
    bool operator<(const peer_pair &o) const { return dst != o.dst ? dst < o.dst : src < o.src; }
};
static std::mutex g_peer_mu;
static std::set<peer_pair> g_peer_done;

static double mib(size_t n) { return (double)n / (1024.0 * 1024.0); }

/* ---------------------------------------------------------------- host waits and events */

static thread_local int64_t t_host_syncs = 0;

static cudaError_t host_wait_stream(cudaStream_t s)
{
    t_host_syncs++;
    return cudaStreamSynchronize(s);
}

static cudaError_t host_wait_event(cudaEvent_t e)
{
    t_host_syncs++;
    return cudaEventSynchronize(e);
}

static int64_t cuda_host_syncs(void) { return t_host_syncs; }

/* An event of d's GPU (which must be current) from the pool, or a new one. */
static cudaError_t event_take(device_state *d, cudaEvent_t *e)
{
    {
        std::lock_guard<std::mutex> lock(d->event_mu);
        if (!d->events.empty()) {
            *e = d->events.back();
            d->events.pop_back();
            return cudaSuccess;
        }
    }
    return cudaEventCreateWithFlags(e, cudaEventDisableTiming);
}

/* Back to the pool: a recording still pending is fine, a later record replaces it and the
 * waits already queued keep the old one. */
static void event_give(device_state *d, cudaEvent_t e)
{
    if (!e) return;
    {
        std::lock_guard<std::mutex> lock(d->event_mu);
        if (d->events.size() < 64) {
            d->events.push_back(e);
            return;
        }
    }
    if (cudaEventDestroy(e) != cudaSuccess) (void)cudaGetLastError();   /* nothing to keep */
}

static int check_index(int index)
{
    if (index < 0 || index >= (int)g_devices.size())
        return dp_cuda_error("cuda:%d does not exist (%d CUDA device%s)", index, (int)g_devices.size(),
                             g_devices.size() == 1 ? "" : "s");
    return 0;
}

/* Creates the device's stream on first use (with its GPU current). */
static int ensure_ready(device_state *d, int index)
{
    std::lock_guard<std::mutex> lock(d->mu);
    if (d->ready) return 0;
    CUDA_CHECK(cudaSetDevice(d->phys));
    CUDA_CHECK(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    d->ready.store(true);
    (void)index;
    return 0;
}

extern "C" int dp_cuda_enter(int index, void **stream)
{
    if (check_index(index)) return -1;
    device_state *d = g_devices[index];
    if (!d->ready && ensure_ready(d, index)) return -1;
    CUDA_CHECK(cudaSetDevice(d->phys));
    *stream = (void *)d->stream;
    return 0;
}

extern "C" void *dp_cuda_stream(int index)
{
    void *s = NULL;
    return dp_cuda_enter(index, &s) ? NULL : s;
}

extern "C" int dp_cuda_physical_device(int index)
{
    return index >= 0 && index < (int)g_devices.size() ? g_devices[index]->phys : -1;
}

extern "C" int dp_cuda_device_of(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    std::lock_guard<std::mutex> lock(g_seg_mu);
    auto it = g_segments.upper_bound(p);
    if (it != g_segments.begin()) {
        --it;
        if (p < it->first + it->second.size) return it->second.device;
    }
    return dp_cuda_error("CUDA backend: pointer %p is not device memory of dplua's allocator", ptr);
}

extern "C" bool dp_cuda_tf32(void) { return g_tf32.load(); }
extern "C" bool dp_cuda_deterministic(void) { return g_deterministic_fn && g_deterministic_fn(); }
extern "C" bool dp_cuda_cudnn_deterministic(void) { return g_cudnn_deterministic_fn && g_cudnn_deterministic_fn(); }

static size_t round_size(size_t n)
{
    if (n < MIN_BLOCK) return MIN_BLOCK;
    return (n + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
}

static size_t segment_size(size_t size)
{
    if (size <= SMALL_LIMIT) return SMALL_SEGMENT;
    if (size < ((size_t)10 << 20)) return LARGE_SEGMENT;
    return (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

/* Takes a free block of at least size from the pool (d->mu held), splitting off the rest
 * when it is worth keeping; NULL when the pool has none. */
static block *take_block(device_state *d, size_t size)
{
    bool small = size <= SMALL_LIMIT;
    auto &pool = small ? d->free_small : d->free_large;
    block key{};
    key.size = size;
    auto it = pool.lower_bound(&key);
    if (it == pool.end()) return NULL;
    block *b = *it;
    pool.erase(it);
    size_t rest = b->size - size;
    if (small ? rest >= MIN_BLOCK : rest > SMALL_LIMIT) {
        block *r = new_block(b->ptr + size, rest, small, b, b->next);
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        pool.insert(r);
    }
    b->allocated = true;
    d->live[b->ptr] = b;
    d->allocated += b->size;
    if (d->allocated > d->peak) d->peak = d->allocated;
    return b;
}

/* Returns whole free segments of a device to the driver (d->mu held). */
static void release_cached(device_state *d)
{
    for (auto *pool : { &d->free_small, &d->free_large }) {
        for (auto it = pool->begin(); it != pool->end();) {
            block *b = *it;
            if (!b->prev && !b->next) {
                cudaError_t err = cudaSetDevice(d->phys);
                if (err == cudaSuccess) err = cudaFree(b->ptr);
                if (err != cudaSuccess) {   /* still the driver's: keep it in the books */
                    (void)cudaGetLastError();
                    ++it;
                    continue;
                }
                {
                    std::lock_guard<std::mutex> lock(g_seg_mu);
                    g_segments.erase((uintptr_t)b->ptr);
                }
                d->reserved -= b->size;
                it = pool->erase(it);
                delete b;
            } else {
                ++it;
            }
        }
    }
}

/* Frees the cached segments of every (virtual) device on one physical GPU. */
static void release_cached_phys(int phys)
{
    for (device_state *d : g_devices) {
        if (d->phys != phys) continue;
        std::lock_guard<std::mutex> lock(d->mu);
        release_cached(d);
    }
}

static void *cuda_alloc_block(dp_device dev, size_t nbytes);
static void cuda_free(dp_device dev, void *ptr, size_t nbytes);
static void free_pending(device_state *d);

static void *cuda_alloc(dp_device dev, size_t nbytes)
{
    void *p = cuda_alloc_block(dev, nbytes);
    void *stream;
    if (p && g_poison && dp_cuda_enter(dev.index, &stream) == 0) {
        cudaError_t err = cudaMemsetAsync(p, 0xFF, nbytes, (cudaStream_t)stream);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            dp_cuda_error("CUDA error poisoning a new allocation: %s", cudaGetErrorString(err));
            cuda_free(dev, p, nbytes);
            return NULL;
        }
    }
    return p;
}

static void *cuda_alloc_block(dp_device dev, size_t nbytes)
{
    if (check_index(dev.index)) return NULL;
    device_state *d = g_devices[dev.index];
    if (!d->ready && ensure_ready(d, dev.index)) return NULL;
    size_t size = round_size(nbytes);
    {
        std::lock_guard<std::mutex> lock(d->mu);
        free_pending(d);
        block *b = take_block(d, size);
        if (b) return b->ptr;
    }
    size_t seg = segment_size(size);
    void *p = NULL;
    if (cudaSetDevice(d->phys) != cudaSuccess) {
        (void)cudaGetLastError();
        dp_cuda_error("cannot select GPU %d for cuda:%d", d->phys, dev.index);
        return NULL;
    }
    cudaError_t err = cudaMalloc(&p, seg);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        release_cached_phys(d->phys);
        err = cudaSetDevice(d->phys);
        if (err == cudaSuccess) err = cudaMalloc(&p, seg);
        if (err != cudaSuccess && seg > size) {   /* the exact size may still fit */
            (void)cudaGetLastError();
            seg = size;
            err = cudaMalloc(&p, seg);
        }
    }
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {   /* the message says 0 of 0 */
            (void)cudaGetLastError();
            free_b = total_b = 0;
        }
        size_t alloc_b, cached_b;
        {
            std::lock_guard<std::mutex> lock(d->mu);
            alloc_b = d->allocated;
            cached_b = d->reserved;
        }
        if (err == cudaErrorMemoryAllocation)
            dp_cuda_error("CUDA out of memory. Tried to allocate %.2f MiB on cuda:%d (allocated %.2f MiB, "
                          "cached %.2f MiB, free %.2f MiB of %.2f MiB)",
                          mib(nbytes), dev.index, mib(alloc_b), mib(cached_b), mib(free_b), mib(total_b));
        else
            dp_cuda_error("CUDA error allocating %.2f MiB on cuda:%d: %s", mib(nbytes), dev.index,
                          cudaGetErrorString(err));
        return NULL;
    }
    {
        std::lock_guard<std::mutex> lock(g_seg_mu);
        g_segments[(uintptr_t)p] = segment_info{ seg, dev.index };
    }
    std::lock_guard<std::mutex> lock(d->mu);
    d->reserved += seg;
    bool small = size <= SMALL_LIMIT;
    block *whole = new_block((char *)p, seg, small, NULL, NULL);
    (small ? d->free_small : d->free_large).insert(whole);
    block *b = take_block(d, size);
    if (!b) {   /* cannot happen: the new segment fits the request */
        dp_cuda_error("CUDA allocator: new segment of %zu bytes did not fit %zu", seg, size);
        return NULL;
    }
    return b->ptr;
}

/* b takes in the block after it in its segment (which the caller has taken off its pool);
 * returns b */
static block *absorb_next(block *b)
{
    block *n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
    return b;
}

/* Back to its pool, merged with free neighbours (d->mu held). */
static void free_block(device_state *d, block *b)
{
    d->allocated -= b->size;
    b->allocated = false;
    auto &pool = b->small ? d->free_small : d->free_large;
    if (b->prev && !b->prev->allocated) {   /* merge with the free block before */
        pool.erase(b->prev);
        b = absorb_next(b->prev);
    }
    if (b->next && !b->next->allocated) {   /* and the one after */
        pool.erase(b->next);
        absorb_next(b);
    }
    pool.insert(b);
}

/* The pending blocks whose other streams are done go back to their pools (d->mu held).  An
 * event that cannot be queried counts as done: its error shows at the next synchronisation. */
static void free_pending(device_state *d)
{
    for (size_t i = 0; i < d->pending.size();) {
        pending_block &pb = d->pending[i];
        bool done = true;
        for (cudaEvent_t e : pb.events) {
            cudaError_t q = cudaEventQuery(e);
            if (q == cudaErrorNotReady) { done = false; break; }
            if (q != cudaSuccess) (void)cudaGetLastError();
        }
        if (!done) { i++; continue; }
        for (cudaEvent_t e : pb.events) event_give(d, e);
        free_block(d, pb.b);
        pb = d->pending.back();
        d->pending.pop_back();
    }
}

static void cuda_free(dp_device dev, void *ptr, size_t nbytes)
{
    (void)nbytes;
    if (!ptr || dev.index < 0 || dev.index >= (int)g_devices.size()) return;
    device_state *d = g_devices[dev.index];
    std::lock_guard<std::mutex> lock(d->mu);
    auto it = d->live.find(ptr);
    if (it == d->live.end()) return;     /* not ours: nothing sensible to do */
    block *b = it->second;
    d->live.erase(it);
    if (b->streams.empty()) { free_block(d, b); return; }
    /* other streams used it: an event on each, and the block waits for them */
    pending_block pb{ b, {} };
    int current = -1;            /* a free may come in the middle of an op: keep its device */
    if (cudaGetDevice(&current) != cudaSuccess) current = -1;
    bool on_gpu = cudaSetDevice(d->phys) == cudaSuccess;
    for (cudaStream_t s : b->streams) {
        cudaEvent_t e = NULL;
        if (on_gpu && event_take(d, &e) == cudaSuccess && cudaEventRecord(e, s) == cudaSuccess) {
            pb.events.push_back(e);
            continue;
        }
        event_give(d, e);
        (void)cudaGetLastError();
        /* no event: wait here instead (a stream that fails that has stopped using it) */
        if (on_gpu && host_wait_stream(s) != cudaSuccess) (void)cudaGetLastError();
    }
    b->streams.clear();
    d->pending.push_back(pb);
    if (current >= 0 && cudaSetDevice(current) != cudaSuccess) (void)cudaGetLastError();
    (void)cudaGetLastError();
}

static int cuda_record_stream(int index, void *ptr, void *stream)
{
    if (check_index(index)) return -1;
    device_state *d = g_devices[index];
    std::lock_guard<std::mutex> lock(d->mu);
    auto it = d->live.find(ptr);
    if (it == d->live.end())
        return dp_cuda_error("record_stream: %p is not the start of a live block of cuda:%d", ptr, index);
    cudaStream_t s = (cudaStream_t)stream;
    if (s == d->stream) return 0;   /* its own stream: the usual stream order */
    for (cudaStream_t o : it->second->streams)
        if (o == s) return 0;
    it->second->streams.push_back(s);
    return 0;
}

extern "C" void *dp_cuda_scratch_alloc(int index, size_t nbytes)
{
    dp_device dev = { DP_DEVICE_CUDA, index };
    return cuda_alloc(dev, nbytes);
}

extern "C" void dp_cuda_scratch_free(int index, void *ptr)
{
    dp_device dev = { DP_DEVICE_CUDA, index };
    cuda_free(dev, ptr, 0);
}

static size_t cuda_memory_allocated(int index)
{
    if (index < 0 || index >= (int)g_devices.size()) return 0;
    device_state *d = g_devices[index];
    std::lock_guard<std::mutex> lock(d->mu);
    return d->allocated;
}

static size_t cuda_max_memory_allocated(int index)
{
    if (index < 0 || index >= (int)g_devices.size()) return 0;
    device_state *d = g_devices[index];
    std::lock_guard<std::mutex> lock(d->mu);
    return d->peak;
}

static void host_release_cached(void);

static void cuda_empty_cache(void)
{
    bool all_idle = true;
    for (device_state *d : g_devices) {
        std::lock_guard<std::mutex> lock(d->mu);
        if (d->ready) {
            /* cudaFree waits for the device anyway; make it explicit for the streams, and a
             * device that fails to get there keeps its cache */
            cudaError_t err = cudaSetDevice(d->phys);
            if (err == cudaSuccess) err = host_wait_stream(d->stream);
            if (err == cudaSuccess && d->side) err = host_wait_stream(d->side);
            if (err != cudaSuccess) {
                (void)cudaGetLastError();
                all_idle = false;
                continue;
            }
        }
        free_pending(d);
        release_cached(d);
    }
    if (all_idle) host_release_cached();
}

/* ---------------------------------------------------------------- pinned host memory
 *
 * A cache, as PyTorch's CachingHostAllocator: sizes round up to a power of two (4 KiB at
 * least).  A freed block does not go back to the driver (cudaFreeHost waits for every
 * GPU) and nothing waits at the free: an event is recorded on every device's stream, and
 * the block is handed out again only once those events have completed, since a
 * non_blocking copy from it may still be queued.  empty_cache() waits for the streams and
 * gives the cached blocks back; so does an allocation that fails, before it retries. */

struct DP_HIDDEN host_block {
    void *ptr;
    size_t size;
    std::vector<cudaEvent_t> events;   /* per device; NULL until first recorded */
};

static std::mutex g_host_mu;
static std::unordered_map<void *, host_block *> g_host_live;
static std::multimap<size_t, host_block *> g_host_free;

static size_t host_round(size_t n)
{
    size_t r = 4096;
    while (r < n) r <<= 1;
    return r;
}

/* Every stream has passed the block's events (an event that cannot be queried is done:
 * its error shows at the next synchronisation). */
static bool host_block_ready(host_block *b)
{
    for (cudaEvent_t e : b->events) {
        if (!e) continue;
        cudaError_t q = cudaEventQuery(e);
        if (q == cudaErrorNotReady) return false;
        if (q != cudaSuccess) (void)cudaGetLastError();
    }
    return true;
}

static void host_block_destroy(host_block *b)
{
    for (cudaEvent_t e : b->events)
        if (e) cudaEventDestroy(e);
    if (cudaFreeHost(b->ptr) != cudaSuccess) (void)cudaGetLastError();   /* nothing better to do */
    delete b;
}

/* Waits for every device's streams; false when one of them failed. */
static bool sync_all_streams(void)
{
    bool ok = true;
    for (device_state *d : g_devices) {
        if (!d->ready) continue;
        cudaError_t err = cudaSetDevice(d->phys);
        if (err == cudaSuccess) err = host_wait_stream(d->stream);
        if (err == cudaSuccess && d->side) err = host_wait_stream(d->side);
        if (err != cudaSuccess) ok = false;
    }
    (void)cudaGetLastError();
    return ok;
}

/* Gives every cached block back to the driver; the caller has waited for the streams. */
static void host_release_cached(void)
{
    std::lock_guard<std::mutex> lock(g_host_mu);
    for (auto &kv : g_host_free) host_block_destroy(kv.second);
    g_host_free.clear();
}

static void *cuda_alloc_host(size_t nbytes)
{
    size_t size = host_round(nbytes ? nbytes : 1);
    host_block *b = NULL;
    {
        std::lock_guard<std::mutex> lock(g_host_mu);
        for (auto it = g_host_free.lower_bound(size); it != g_host_free.end() && it->first == size; ++it) {
            if (!host_block_ready(it->second)) continue;
            b = it->second;
            g_host_free.erase(it);
            break;
        }
        if (b) {
            g_host_live[b->ptr] = b;
            return b->ptr;
        }
    }
    void *p = NULL;
    cudaError_t err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (sync_all_streams()) host_release_cached();
        err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    }
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        dp_cuda_error("cannot allocate %.2f MiB of pinned host memory: %s", mib(nbytes), cudaGetErrorString(err));
        return NULL;
    }
    b = new host_block{ p, size, {} };
    std::lock_guard<std::mutex> lock(g_host_mu);
    g_host_live[p] = b;
    return p;
}

/* Back to the cache, behind an event on every device's stream: work queued so far may
 * still read it. */
static void cuda_free_host(void *ptr)
{
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(g_host_mu);
    auto it = g_host_live.find(ptr);
    if (it == g_host_live.end()) return;
    host_block *b = it->second;
    g_host_live.erase(it);
    b->events.resize(g_devices.size(), NULL);
    int current = -1;            /* a free may come in the middle of an op: keep its device */
    if (cudaGetDevice(&current) != cudaSuccess) current = -1;
    for (size_t i = 0; i < g_devices.size(); i++) {
        device_state *d = g_devices[i];
        if (!d->ready) continue;
        if (cudaSetDevice(d->phys) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;            /* a device that cannot be selected runs nothing more */
        }
        if (!b->events[i] && cudaEventCreateWithFlags(&b->events[i], cudaEventDisableTiming) != cudaSuccess)
            b->events[i] = NULL;
        if (!b->events[i] || cudaEventRecord(b->events[i], d->stream) != cudaSuccess) {
            host_wait_stream(d->stream);   /* no event: wait here instead */
            (void)cudaGetLastError();
        }
    }
    g_host_free.insert({ b->size, b });
    if (current >= 0 && cudaSetDevice(current) != cudaSuccess) (void)cudaGetLastError();
    (void)cudaGetLastError();
}

static void cuda_set_tf32(bool allow) { g_tf32.store(allow); }

/* The device's cuBLAS handle (created on first use, bound to its stream), with the
 * device's cuBLAS lock held until dp_cuda_cublas_release: handles are not shared between
 * concurrent enqueuers. */
extern "C" void *dp_cuda_cublas_acquire(int index)
{
    void *sv;
    if (dp_cuda_enter(index, &sv)) return NULL;
    device_state *d = g_devices[index];
    d->cublas_mu.lock();
    if (!d->cublas) {
        cublasHandle_t h;
        cublasStatus_t st = cublasCreate(&h);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(h, d->stream);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
        if (st != CUBLAS_STATUS_SUCCESS) {
            d->cublas_mu.unlock();
            dp_cuda_error("cuBLAS could not be initialised on cuda:%d: %s", index, cublasGetStatusString(st));
            return NULL;
        }
        d->cublas = h;
    }
    return (void *)d->cublas;
}

extern "C" void dp_cuda_cublas_release(int index) { g_devices[index]->cublas_mu.unlock(); }

/* ---------------------------------------------------------------- copies */

static int cuda_copy_h2d(dp_device dev, void *dst, const void *src, size_t nbytes, bool non_blocking)
{
    if (!nbytes) return 0;
    CUDA_STREAM_OF(dev, s);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s));
    if (!non_blocking) {
        CUDA_CHECK(host_wait_stream(s));
        return dp_cuda_index_errors(dev.index);
    }
    return 0;
}

static int cuda_copy_d2h(dp_device dev, void *dst, const void *src, size_t nbytes)
{
    if (!nbytes) return 0;
    CUDA_STREAM_OF(dev, s);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(host_wait_stream(s));
    return dp_cuda_index_errors(dev.index);
}

/* Makes stream `waiter` wait for the work queued so far on `other`, a stream of device od
 * (an event belongs to its stream's GPU; a wait may cross GPUs), with an event of od's
 * pool.  Leaves od's GPU current. */
static int join_stream(cudaStream_t waiter, cudaStream_t other, device_state *od)
{
    cudaEvent_t e = NULL;
    CUDA_CHECK(cudaSetDevice(od->phys));
    CUDA_CHECK(event_take(od, &e));
    cudaError_t err = cudaEventRecord(e, other);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, e, 0);
    event_give(od, e);
    CUDA_CHECK(err);
    return 0;
}

static void enable_peer(int dst_phys, int src_phys)
{
    std::lock_guard<std::mutex> lock(g_peer_mu);
    if (!g_peer_done.insert(peer_pair{ dst_phys, src_phys }).second) return;
    int can = 0;
    /* best effort: without peer access cudaMemcpyPeerAsync still copies, through the host,
     * and "already enabled" is fine */
    if (cudaDeviceCanAccessPeer(&can, dst_phys, src_phys) == cudaSuccess && can &&
        cudaSetDevice(dst_phys) == cudaSuccess && cudaDeviceEnablePeerAccess(src_phys, 0) != cudaSuccess)
        (void)cudaGetLastError();
    (void)cudaGetLastError();
}

/* The copy runs on the destination's stream after the source's queued work, and the
 * source's stream waits for the copy, so neither side reuses the memory too early. */
static int cuda_copy_d2d(dp_device dst_dev, void *dst, dp_device src_dev, const void *src, size_t nbytes)
{
    if (!nbytes) return 0;
    if (dst_dev.index == src_dev.index) {
        CUDA_STREAM_OF(dst_dev, s);
        CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, s));
        return 0;
    }
    if (check_index(dst_dev.index) || check_index(src_dev.index)) return -1;
    int dphys = g_devices[dst_dev.index]->phys, sphys = g_devices[src_dev.index]->phys;
    if (dphys != sphys) enable_peer(dphys, sphys);
    CUDA_STREAM_OF(src_dev, ss);
    CUDA_STREAM_OF(dst_dev, ds);
    if (join_stream(ds, ss, g_devices[src_dev.index])) return -1;
    CUDA_CHECK(cudaSetDevice(dphys));
    if (dphys == sphys) CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, ds));
    else CUDA_CHECK(cudaMemcpyPeerAsync(dst, dphys, src, sphys, nbytes, ds));
    if (join_stream(ss, ds, g_devices[dst_dev.index])) return -1;
    return 0;
}

static int cuda_synchronize(dp_device dev)
{
    CUDA_STREAM_OF(dev, s);
    CUDA_CHECK(host_wait_stream(s));
    return dp_cuda_index_errors(dev.index);
}

/* ---------------------------------------------------------------- the side stream and events */

static void *cuda_side_stream(int index)
{
    void *own;
    if (dp_cuda_enter(index, &own)) return NULL;
    device_state *d = g_devices[index];
    std::lock_guard<std::mutex> lock(d->mu);
    if (!d->side) {
        cudaError_t err = cudaStreamCreateWithFlags(&d->side, cudaStreamNonBlocking);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            d->side = NULL;
            dp_cuda_error("cannot create the side stream of cuda:%d: %s", index, cudaGetErrorString(err));
            return NULL;
        }
    }
    return (void *)d->side;
}

/* The stream a caller means: its own, or the device's when NULL (the device is current). */
#define STREAM_OR_OWN(index, stream, var)                                                  \
    cudaStream_t var;                                                                      \
    do {                                                                                   \
        void *own_;                                                                        \
        if (dp_cuda_enter((index), &own_)) return -1;                                     \
        var = (stream) ? (cudaStream_t)(stream) : (cudaStream_t)own_;                       \
    } while (0)

static int cuda_event_record(int index, void *stream, void **event)
{
    STREAM_OR_OWN(index, stream, s);
    device_state *d = g_devices[index];
    cudaEvent_t e = NULL;
    CUDA_CHECK(event_take(d, &e));
    cudaError_t err = cudaEventRecord(e, s);
    if (err != cudaSuccess) event_give(d, e);
    CUDA_CHECK(err);
    *event = (void *)e;
    return 0;
}

static int cuda_stream_wait_event(int index, void *stream, void *event)
{
    STREAM_OR_OWN(index, stream, s);
    CUDA_CHECK(cudaStreamWaitEvent(s, (cudaEvent_t)event, 0));
    return 0;
}

static int cuda_event_synchronize(int index, void *event)
{
    void *own;
    if (dp_cuda_enter(index, &own)) return -1;
    CUDA_CHECK(host_wait_event((cudaEvent_t)event));
    return 0;
}

static void cuda_event_release(int index, void *event)
{
    if (index >= 0 && index < (int)g_devices.size()) event_give(g_devices[index], (cudaEvent_t)event);
}

static int cuda_copy_async(int index, void *stream, void *dst, const void *src, size_t nbytes, bool to_device)
{
    if (!nbytes) return 0;
    STREAM_OR_OWN(index, stream, s);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
    return 0;
}

/* ---------------------------------------------------------------- the backend */

/* half.cu: float16/bfloat16 matrix products (the only user is this table) */
extern "C" DP_CUDA_INTERNAL int dp_cuda_gemm_half(int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                                  double alpha, const void *a, int64_t lda, int64_t stride_a,
                                                  const void *b, int64_t ldb, int64_t stride_b, double beta, void *c,
                                                  int64_t ldc, int64_t stride_c, int64_t batch);

static const dp_backend g_cuda_backend = {
    /* name                 */ "cuda",
    /* alloc                */ cuda_alloc,
    /* free                 */ cuda_free,
    /* copy_h2d             */ cuda_copy_h2d,
    /* copy_d2h             */ cuda_copy_d2h,
    /* copy_d2d             */ cuda_copy_d2d,
    /* synchronize          */ cuda_synchronize,
    /* fill                 */ dp_cuda_fill,
    /* copy                 */ dp_cuda_copy,
    /* unary                */ dp_cuda_unary,
    /* binary               */ dp_cuda_binary,
    /* binary_scalar        */ dp_cuda_binary_scalar,
    /* where                */ dp_cuda_where,
    /* reduce               */ dp_cuda_reduce,
    /* softmax              */ dp_cuda_softmax,
    /* softmax_backward     */ dp_cuda_softmax_backward,
    /* gemm                 */ dp_cuda_gemm,
    /* index_select         */ dp_cuda_index_select,
    /* index_add            */ dp_cuda_index_add,
    /* random               */ dp_cuda_random,
    /* nll_loss             */ dp_cuda_nll_loss,
    /* nll_loss_backward    */ dp_cuda_nll_loss_backward,
    /* sgd_step             */ dp_cuda_sgd_step,
    /* adam_step            */ dp_cuda_adam_step,
    /* alloc_host           */ cuda_alloc_host,
    /* free_host            */ cuda_free_host,
    /* memory_allocated     */ cuda_memory_allocated,
    /* max_memory_allocated */ cuda_max_memory_allocated,
    /* empty_cache          */ cuda_empty_cache,
    /* set_tf32             */ cuda_set_tf32,
    /* pool2d               */ dp_cuda_pool2d,
    /* pool2d_backward      */ dp_cuda_pool2d_backward,
    /* sort_rows            */ dp_cuda_sort_rows,
    /* scan_rows            */ dp_cuda_scan_rows,
    /* scatter_add_rows     */ dp_cuda_scatter_add_rows,
    /* conv_forward         */ dp_cuda_conv_forward,
    /* conv_backward_input  */ dp_cuda_conv_backward_input,
    /* conv_backward_weight */ dp_cuda_conv_backward_weight,
    /* layers: normalization */
    /* layer_norm           */ dp_cuda_layer_norm,
    /* layer_norm_backward  */ dp_cuda_layer_norm_backward,
    /* adadelta_step        */ dp_cuda_adadelta_step,
    /* gather_offsets       */ dp_cuda_gather_offsets,
    /* scatter_offsets      */ dp_cuda_scatter_offsets,
    /* float16 / bfloat16 */
    /* gemm_half            */ dp_cuda_gemm_half,
    /* attention */
    /* sdpa_forward         */ dp_cuda_sdpa_forward,
    /* sdpa_backward        */ dp_cuda_sdpa_backward,
    /* distributed: side stream and events */
    /* side_stream          */ cuda_side_stream,
    /* event_record         */ cuda_event_record,
    /* stream_wait_event    */ cuda_stream_wait_event,
    /* event_synchronize    */ cuda_event_synchronize,
    /* event_release        */ cuda_event_release,
    /* copy_async           */ cuda_copy_async,
    /* record_stream        */ cuda_record_stream,
    /* host_syncs           */ cuda_host_syncs,
    /* device-side index checks */
    /* check_indices        */ dp_cuda_check_indices,
    /* recurrent cells */
    /* lstm_cell            */ dp_cuda_lstm_cell,
    /* lstm_cell_backward   */ dp_cuda_lstm_cell_backward,
    /* gru_cell             */ dp_cuda_gru_cell,
    /* gru_cell_backward    */ dp_cuda_gru_cell_backward,
    /* advanced indexing's offsets on the device */
    /* index_offsets        */ dp_cuda_index_offsets,
};

/* A driver older than the runtime this library was built with fails every call with
 * cudaErrorInsufficientDriver; say so once, with both versions, instead.  The runtime runs
 * on any driver of its major version (CUDA's minor version compatibility); a driver of an
 * older major version cannot run it.  Returns false with the message in err. */
static bool driver_new_enough(cudaError_t count_error, char *err, size_t errlen)
{
#ifdef CUDART_VERSION
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) return true;
    if (driver <= 0) {   /* the runtime calls a missing driver an insufficient one */
        if (count_error != cudaErrorInsufficientDriver) return true;
        if (err) snprintf(err, errlen, "no NVIDIA driver was found (libcuda.so.1 cannot be loaded)");
        return false;
    }
    if (driver >= CUDART_VERSION / 1000 * 1000 && count_error != cudaErrorInsufficientDriver) return true;
    if (err)
        snprintf(err, errlen,
                 "the NVIDIA driver supports CUDA %d.%d but dplua was built with CUDA %d.%d: update the driver "
                 "to one for CUDA %d.%d or newer, or rebuild libdplua_cuda.so with a CUDA toolkit the driver supports",
                 driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    return false;
#else
    (void)count_error; (void)err; (void)errlen;
    return true;
#endif
}

extern "C" const dp_backend *dp_cuda_backend_init(const dp_backend_host *host, int *device_count, char *err,
                                                   size_t errlen)
{
    static std::mutex init_mu;
    std::lock_guard<std::mutex> lock(init_mu);
    *device_count = 0;
    if (err && errlen) err[0] = 0;
    if (!host || !host->error) {
        if (err) snprintf(err, errlen, "dp_cuda_backend_init needs the engine's error reporter");
        return NULL;
    }
    g_error_fn = host->error;
    g_deterministic_fn = host->deterministic;
    g_cudnn_deterministic_fn = host->cudnn_deterministic;
    if (!g_devices.empty()) {
        *device_count = (int)g_devices.size();
        return &g_cuda_backend;
    }
    const char *v = getenv("DPLUA_CUDA_VIRTUAL");
    g_virtual = 1;
    const char *poison = getenv("DPLUA_CUDA_POISON");
    g_poison = poison && *poison && strcmp(poison, "0") != 0;
    if (v && *v) {
        char *end;
        long k = strtol(v, &end, 10);
        if (*end || k < 1 || k > 64) {
            if (err) snprintf(err, errlen, "DPLUA_CUDA_VIRTUAL must be an integer from 1 to 64, not '%s'", v);
            return NULL;
        }
        g_virtual = (int)k;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (!driver_new_enough(e, err, errlen)) return NULL;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (err) snprintf(err, errlen, "%s", cudaGetErrorString(e));
        return NULL;
    }
    if (n <= 0) {
        if (err) snprintf(err, errlen, "the CUDA driver reports no GPU");
        return NULL;
    }
    for (int i = 0; i < n * g_virtual; i++) {
        device_state *d = new device_state();
        d->phys = i / g_virtual;
        d->ready = false;
        d->stream = NULL;
        d->side = NULL;
        d->cublas = NULL;
        d->allocated = d->peak = d->reserved = 0;
        g_devices.push_back(d);
    }
    *device_count = n * g_virtual;
    return &g_cuda_backend;
}

/* the engine calls this through its own typedef: a change on one side fails to compile */
static_assert(std::is_same<decltype(&dp_cuda_backend_init), dp_cuda_init_fn>::value,
              "dp_cuda_backend_init must have the type src/backend.h gives it");
