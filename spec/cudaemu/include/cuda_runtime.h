/* cuda_runtime.h (emulation): the part of the CUDA runtime that kernels/ uses, for
 * compiling the kernels' source with the host C++ compiler and running it on the CPU.
 * It checks the CUDA logic of the backend on a machine without a GPU: launch geometry,
 * index arithmetic, strided offsets, block reductions (__syncthreads and warp shuffles
 * run with the same barrier semantics as on a GPU), the caching allocator, copies between
 * devices, and cuBLAS's argument rules.  Blocks run in a seeded random order
 * (DPLUA_EMU_SEED), on several threads at once with DPLUA_EMU_THREADS; a kernel fault is
 * sticky and reported asynchronously.  It does not model timing, the memory model or
 * floating-point details of the hardware.  See spec/cudaemu/README.md.
 *
 * Kernel launches `k<<<grid, block, shared, stream>>>(args)` are rewritten by
 * spec/cudaemu/launch.sed into
 * `::emu::launch(::emu::cfg(grid, block, shared, stream), "k", k, args)` before compiling. */
#ifndef DP_CUDAEMU_CUDA_RUNTIME_H
#define DP_CUDAEMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

/* ---------------------------------------------------------------- qualifiers */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
/* One copy per block in flight: each thread of the emulation runs one block at a time.
 * launch.sed rewrites `__shared__ T name[N];` into EMU_SHARED(name, [N], T), which also
 * fills it with 0xFF bytes (NaN in floats, -1 in integers) when a block first reaches it,
 * as a GPU leaves shared memory holding whatever the last block wrote. */
#define __shared__ static thread_local
#define EMU_SHARED(name, dims, ...)                                  \
    static thread_local __VA_ARGS__ name dims;                       \
    static thread_local uint64_t name##_emu_epoch = 0;               \
    ::emu::shared_enter(&name, sizeof name, &name##_emu_epoch)

/* ---------------------------------------------------------------- types */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchTimeout = 702,
    cudaErrorAssert = 710,
    cudaErrorIllegalInstruction = 715,
    cudaErrorLaunchFailure = 719,
} cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01

typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* ---------------------------------------------------------------- runtime API */
extern "C" {
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t err);
cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t n,
                                cudaStream_t s);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t n, cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaDeviceGetPCIBusId(char *pci_bus_id, int len, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags);
}

/* ---------------------------------------------------------------- device built-ins */
/* Set by the scheduler before it resumes each emulated thread. */
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

namespace emu {
/* block barrier; warp exchange of up to 8 bytes among the lanes of `mask`: returns the
 * value of lane src_lane (poison when that lane is outside the mask or the warp); every
 * lane of the mask must take part, or the kernel faults */
void sync_block();
uint64_t warp_exchange(unsigned int mask, uint64_t mine, int src_lane);
void atomic_lock();
void atomic_unlock();
/* the kernel faults: it stops, and the error is reported by the next synchronising call
 * and every call after it, as a GPU context is lost after a fault */
[[noreturn]] void fault(cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* first use of a __shared__ variable in a block: poisons it and counts it against the
 * 48 KiB a block may have */
void shared_enter(void *p, size_t n, uint64_t *epoch);
}

inline void __syncthreads() { emu::sync_block(); }
inline void __trap() { emu::fault(cudaErrorLaunchFailure, "__trap()"); }

/* device-side assert: faults with cudaErrorAssert ("device-side assert triggered") */
#include <assert.h>
#undef assert
#define assert(e) \
    ((e) ? (void)0 : ::emu::fault(cudaErrorAssert, "%s:%d: assertion '%s' failed", __FILE__, __LINE__, #e))

/* the lane of src (up) or width-relative lane: shuffles move up to 8 bytes */
template <typename T> inline T emu_shfl(unsigned int mask, T v, int src, bool keep)
{
    static_assert(sizeof(T) <= 8, "a warp shuffle of a type wider than 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    bits = emu::warp_exchange(mask, bits, keep ? -1 : src);
    if (keep) return v;
    T r;
    memcpy(&r, &bits, sizeof(T));
    return r;
}

template <typename T> inline T __shfl_down_sync(unsigned int mask, T v, unsigned int delta, int width = 32)
{
    unsigned int lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
    unsigned int seg = lane % (unsigned)width;
    /* a source past the segment's end leaves the value unchanged (CUDA's definition) */
    return emu_shfl(mask, v, (int)(lane + delta), seg + delta >= (unsigned)width);
}

template <typename T> inline T __shfl_xor_sync(unsigned int mask, T v, int lane_mask, int width = 32)
{
    unsigned int lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
    unsigned int src = lane ^ (unsigned)lane_mask;
    return emu_shfl(mask, v, (int)src, src / (unsigned)width != lane / (unsigned)width);
}

template <typename T> inline T __shfl_sync(unsigned int mask, T v, int src_lane, int width = 32)
{
    unsigned int lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
    unsigned int base = lane - lane % (unsigned)width;
    return emu_shfl(mask, v, (int)(base + (unsigned)src_lane % (unsigned)width), false);
}

template <typename T> inline T atomicMin(T *p, T v)
{
    emu::atomic_lock();
    T old = *p;
    if (v < old) *p = v;
    emu::atomic_unlock();
    return old;
}

template <typename T> inline T atomicExch(T *p, T v)
{
    emu::atomic_lock();
    T old = *p;
    *p = v;
    emu::atomic_unlock();
    return old;
}

template <typename T> inline T atomicAdd(T *p, T v)
{
    emu::atomic_lock();
    T old = *p;
    *p = old + v;
    emu::atomic_unlock();
    return old;
}

template <typename T> inline T atomicCAS(T *p, T compare, T v)
{
    emu::atomic_lock();
    T old = *p;
    if (old == compare) *p = v;
    emu::atomic_unlock();
    return old;
}

/* round-to-nearest intrinsics: the host's arithmetic rounds to nearest already */
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return sqrt(a); }

/* ---------------------------------------------------------------- launches */
namespace emu {

struct cfg {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
    cfg(dim3 g, dim3 b, size_t shm = 0, cudaStream_t s = 0) : grid(g), block(b), shared(shm), stream(s) {}
};

/* Checks a launch as the driver would when it is made: the configuration, the stream's
 * device, the registers of a block (registers per thread, from nvcc at build time, times
 * threads), and the pointer arguments (ptrs: n of them; each must be null or device memory
 * of the current device).  false: the error is set and nothing runs. */
bool check_launch(const cfg &c, const char *name, const void *const *ptrs, int nptrs);
/* Why registers per launch are not checked (no register table from nvcc), or NULL. */
const char *registers_unchecked();
int current_device();
/* Queues fn on the stream (runs it at once on the null stream or with DPLUA_EMU_SYNC=1). */
void submit(cudaStream_t s, std::function<void()> fn);
/* Runs body(ctx) once per thread of every block of a launch on `device` (key identifies
 * the kernel: its barrier use is learnt per kernel). */
void execute(const cfg &c, int device, const void *key, const char *name, void (*body)(void *), void *ctx);

/* For the emulated NCCL (nccl.cpp): how many operations were ever queued on s; running s's
 * queue until `mark` of them have been taken (what a wait on an event recorded then does);
 * whether [p, p + n) is inside one allocation of device memory (and whose); and losing the
 * device as a fault does, with cudaErrorLaunchTimeout (a collective that never completes),
 * whose error string then carries msg. */
uint64_t stream_queued(cudaStream_t s);
void stream_run(cudaStream_t s, uint64_t mark);
bool device_memory(const void *p, size_t n, int *device);
void device_lost(int device, const char *msg);

template <typename T> inline void collect_ptr(const T &v, const void **out, int &n)
{
    if constexpr (std::is_pointer<T>::value) out[n++] = (const void *)v;
    (void)v; (void)out; (void)n;
}

/* An argument converted to its parameter's type as a call would convert it (NULL, an
 * integer constant to the host compiler, becomes a null pointer). */
template <typename P, typename A> inline typename std::decay<P>::type arg(A &&a)
{
    if constexpr (std::is_pointer<typename std::decay<P>::type>::value &&
                  std::is_integral<typename std::decay<A>::type>::value)
        return nullptr;
    else
        return std::forward<A>(a);
}

template <typename... P> struct call {
    void (*k)(P...);
    std::tuple<typename std::decay<P>::type...> args;
    static void body(void *self)
    {
        call *c = (call *)self;
        std::apply(c->k, c->args);
    }
};

template <typename... P, typename... A>
inline void launch(const cfg &c, const char *name, void (*k)(P...), A &&...a)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    auto cl = std::make_shared<call<P...>>(
        call<P...>{ k, std::tuple<typename std::decay<P>::type...>(arg<P>(std::forward<A>(a))...) });
    const void *ptrs[sizeof...(P) + 1];
    int n = 0;
    std::apply([&](const auto &...v) { (collect_ptr(v, ptrs, n), ...); }, cl->args);
    if (!check_launch(c, name, ptrs, n)) return;
    int device = current_device();
    submit(c.stream, [c, device, k, name, cl]() {
        execute(c, device, (const void *)k, name, &call<P...>::body, cl.get());
    });
}

}   // namespace emu

#endif
