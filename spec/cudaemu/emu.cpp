/* emu.cpp: the CUDA runtime and cuBLAS calls of include/, on the CPU (NCCL's: nccl.cpp).
 *
 * Devices.  DPLUA_EMU_GPUS (default 2) devices of DPLUA_EMU_GPU_MEMORY_MIB (default 2048)
 * MiB each.  Device memory is host memory registered with its device, so every call that
 * takes a device pointer checks that it is one (and, for copies, that the bytes lie inside
 * one allocation), and a kernel launched with a pointer argument that is host memory or
 * another device's memory fails, as it would fault on a GPU.
 *
 * Kernels.  Blocks run one after another on the launching thread.  The threads of a block
 * are fibers (started with ucontext, switched with _setjmp/_longjmp, kept for later blocks)
 * run round-robin up to their next barrier: __syncthreads releases
 * when every live thread of the block waits on it, a warp shuffle when every live thread of
 * the warp does; any other combination is a divergent barrier and aborts with the kernel's
 * name.  A kernel whose first block used no barrier runs later blocks as plain calls, one
 * thread after another (a barrier there aborts, naming the kernel).
 *
 * Streams.  Work queues on its stream and runs only when something waits for it: a stream
 * or device synchronisation, an event wait that reaches it, a copy into pageable host
 * memory, cudaFree.  That is the latest schedule CUDA allows, so a missing wait shows as
 * stale or clobbered data.  DPLUA_EMU_SYNC=1 runs everything when it is issued. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "include/cublas_v2.h"
#include "include/cuda_runtime.h"
#include "../../src/half.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

/* A stream: work queued in order, run when something waits for it (see submit). */
struct emu_stream {
    int device;
    std::mutex mu;                            /* guards q and the counters */
    std::deque<std::function<void()>> q;
    uint64_t queued = 0, started = 0;         /* operations ever queued / taken to run */
    uint64_t finished = 0;                    /* operations that have run */
    std::mutex run_mu;                        /* one runner at a time keeps the order */
};
struct emu_event {
    int device;
    emu_stream *stream;                       /* where it was recorded (NULL: never) */
    uint64_t mark;                            /* the stream's work up to then */
};
struct emu_cublas {
    cudaStream_t stream;
    int device;
    cublasMath_t math;
};

namespace {

void vsay(const char *fmt, va_list ap)
{
    fputs("cudaemu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

[[noreturn]] void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    abort();
}

void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- devices */

int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0) die("%s=%s is not a non-negative integer", name, s);
    return (int)v;
}

int n_devices()
{
    static int n = env_int("DPLUA_EMU_GPUS", 2);
    return n;
}

size_t capacity()
{
    static size_t c = (size_t)env_int("DPLUA_EMU_GPU_MEMORY_MIB", 2048) << 20;
    return c;
}

thread_local int t_device = 0;
thread_local cudaError_t t_last = cudaSuccess;

cudaError_t fail(cudaError_t e)
{
    t_last = e;
    return e;
}

/* ---------------------------------------------------------------- memory registry */

enum { MEM_DEVICE, MEM_PINNED };
struct alloc_info {
    size_t size;
    int device;
    int kind;
};
std::mutex g_mem_mu;
std::map<uintptr_t, alloc_info> g_allocs;
std::vector<size_t> g_used;

/* The allocation holding [p, p + n), or false. */
bool find_alloc(const void *p, size_t n, uintptr_t *base, alloc_info *info)
{
    std::lock_guard<std::mutex> lock(g_mem_mu);
    uintptr_t a = (uintptr_t)p;
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) return false;
    --it;
    if (a < it->first || a + n > it->first + it->second.size || (n == 0 && a > it->first + it->second.size))
        return false;
    if (base) *base = it->first;
    if (info) *info = it->second;
    return true;
}

bool is_device_mem(const void *p, size_t n, int *device)
{
    alloc_info info;
    if (!find_alloc(p, n, NULL, &info) || info.kind != MEM_DEVICE) return false;
    if (device) *device = info.device;
    return true;
}

/* ---------------------------------------------------------------- sticky errors
 * A kernel fault (a device-side assert, __trap, a warp shuffle or barrier used wrongly,
 * too much shared memory) is not returned by its launch: it is recorded against the
 * device, the next synchronising call reports it, and every call after that made with
 * the device current fails with it too, as a GPU context is lost after a fault. */

const int MAX_DEVICES = 64;
std::atomic<int> g_sticky[MAX_DEVICES];
/* the message of the first device lost to a collective (emu::device_lost): the string of
 * cudaErrorLaunchTimeout from then on */
std::mutex g_lost_mu;
char g_lost_msg[640];

cudaError_t sticky(int device)
{
    if (device < 0 || device >= MAX_DEVICES) return cudaSuccess;
    return (cudaError_t)g_sticky[device].load();
}

/* the device's sticky error, or cudaSuccess (cudaGetLastError returns it while the device
 * is current, so it is not stored as the thread's last error: another device stays clean) */
cudaError_t check_sticky(int device) { return sticky(device); }

/* ---------------------------------------------------------------- fibers */

enum { F_READY, F_RUNNING, F_WAIT_BLOCK, F_WAIT_WARP, F_DONE, F_FAULT };
const size_t STACK_SIZE = 256 * 1024;

struct fiber {
    ucontext_t uc;   /* for the first start only */
    jmp_buf jb;      /* where it waits */
    char *stack;
    bool started;
    int state;
    uint3 tid;
};

/* What stops a kernel: thrown by emu::fault inside an emulated thread. */
struct kernel_fault {
    cudaError_t err;
    char msg[768];
};

/* What a thread of the emulation needs to run blocks of one launch. */
struct block_runner {
    jmp_buf sched;
    std::deque<fiber> fibers;   /* a deque: growing it moves no fiber */
    std::vector<uint64_t> slots;
    fiber *cur = NULL;
    bool fiber_mode = false;
    bool used_barrier = false;
    const char *name = "";
    void (*body)(void *) = NULL;
    void *ctx = NULL;
    uint64_t epoch = 0;         /* blocks started on this thread: __shared__ poisoning */
    size_t shared_bytes = 0;    /* static shared memory the block has touched */
    size_t dyn_shared = 0;
    bool faulted = false;       /* the block stopped on this fault */
    kernel_fault fault;

    ~block_runner()
    {
        for (fiber &f : fibers)
            if (f.stack) munmap(f.stack, STACK_SIZE + 4096);
    }
};
thread_local block_runner t_run;

void record_fault(const kernel_fault &f)
{
    block_runner &r = t_run;
    if (r.faulted) return;
    r.faulted = true;
    r.fault = f;
}

void vfault_at(kernel_fault *f, cudaError_t err, const char *fmt, va_list ap)
{
    block_runner &r = t_run;
    f->err = err;
    int n = snprintf(f->msg, sizeof f->msg, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u): ", r.name, blockIdx.x,
                     blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
    if (n < 0 || n >= (int)sizeof f->msg) n = 0;
    vsnprintf(f->msg + n, sizeof f->msg - n, fmt, ap);
}

/* A fault seen by the scheduler (not inside an emulated thread) */
void block_fault(cudaError_t err, const char *fmt, ...)
{
    kernel_fault f;
    va_list ap;
    va_start(ap, fmt);
    vfault_at(&f, err, fmt, ap);
    va_end(ap);
    record_fault(f);
}

/* A fiber runs one emulated thread after another: each time the scheduler resumes it
 * as a fresh thread, it runs the kernel's body, marks itself done (or faulted) and parks. */
void fiber_entry()
{
    block_runner &r = t_run;
    for (;;) {
        int state = F_DONE;
        try {
            r.body(r.ctx);
        } catch (const kernel_fault &f) {
            record_fault(f);
            state = F_FAULT;
        }
        fiber *self = r.cur;
        self->state = state;
        if (!_setjmp(self->jb)) _longjmp(r.sched, 1);
    }
}

void yield(int state)
{
    block_runner &r = t_run;
    r.used_barrier = true;
    if (!r.fiber_mode)
        emu::fault(cudaErrorLaunchFailure, "a barrier in a block run without fibers (the kernel's block (0,0,0) "
                                           "used none; the emulation cannot run it)");
    fiber *self = r.cur;
    self->state = state;
    if (!_setjmp(self->jb)) _longjmp(r.sched, 1);
}

void resume(fiber &f)
{
    block_runner &r = t_run;
    r.cur = &f;
    f.state = F_RUNNING;
    if (_setjmp(r.sched)) return;
    if (f.started) _longjmp(f.jb, 1);
    f.started = true;
    setcontext(&f.uc);
}

void fiber_reset(fiber &f)
{
    f.started = false;
    getcontext(&f.uc);
    f.uc.uc_stack.ss_sp = f.stack + 4096;
    f.uc.uc_stack.ss_size = STACK_SIZE;
    f.uc.uc_link = NULL;   /* fiber_entry never returns */
    makecontext(&f.uc, fiber_entry, 0);
}

unsigned int linear_tid(const uint3 &t, const dim3 &b) { return t.x + b.x * (t.y + b.y * t.z); }

/* After a fault the block stops: threads left waiting at a barrier are abandoned, their
 * fibers started afresh next time. */
void abandon_block(unsigned int nthreads)
{
    block_runner &r = t_run;
    for (unsigned int i = 0; i < nthreads; i++) {
        fiber &f = r.fibers[i];
        if (f.started && f.state != F_DONE && f.state != F_FAULT) fiber_reset(f);
    }
}

void run_block_fibers(unsigned int nthreads)
{
    block_runner &r = t_run;
    if (r.fibers.size() < nthreads) {
        size_t old = r.fibers.size();
        r.fibers.resize(nthreads);
        for (size_t i = old; i < nthreads; i++) {
            void *m = mmap(NULL, STACK_SIZE + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) die("cannot map a fiber stack");
            mprotect(m, 4096, PROT_NONE);   /* guard page: a stack overflow faults */
            fiber &f = r.fibers[i];
            f.stack = (char *)m;
            fiber_reset(f);
        }
    }
    r.slots.assign(nthreads + 32, 0);
    for (unsigned int i = 0; i < nthreads; i++) {
        fiber &f = r.fibers[i];
        f.state = F_READY;
        f.tid.x = i % blockDim.x;
        f.tid.y = (i / blockDim.x) % blockDim.y;
        f.tid.z = i / (blockDim.x * blockDim.y);
    }
    for (;;) {
        for (unsigned int i = 0; i < nthreads && !r.faulted; i++) {
            fiber &f = r.fibers[i];
            if (f.state != F_READY) continue;
            threadIdx = f.tid;
            resume(f);
        }
        if (r.faulted) {
            abandon_block(nthreads);
            return;
        }
        unsigned int live = 0, at_block = 0;
        bool released = false;
        for (unsigned int w = 0; w < nthreads; w += 32) {
            unsigned int end = w + 32 < nthreads ? w + 32 : nthreads, wl = 0, ww = 0;
            for (unsigned int i = w; i < end; i++) {
                int s = r.fibers[i].state;
                if (s != F_DONE) wl++;
                if (s == F_WAIT_WARP) ww++;
                if (s == F_WAIT_BLOCK) at_block++;
            }
            live += wl;
            if (wl > 0 && ww == wl) {
                for (unsigned int i = w; i < end; i++)
                    if (r.fibers[i].state == F_WAIT_WARP) r.fibers[i].state = F_READY;
                released = true;
            }
        }
        if (live == 0) return;
        if (released) continue;
        if (at_block == live) {
            for (unsigned int i = 0; i < nthreads; i++)
                if (r.fibers[i].state == F_WAIT_BLOCK) r.fibers[i].state = F_READY;
            continue;
        }
        threadIdx = uint3{ 0, 0, 0 };
        block_fault(cudaErrorLaunchFailure,
                    "divergent barriers: of %u live threads %u wait in __syncthreads and the rest in warp "
                    "shuffles whose warps are not all there (on a GPU: a hang or garbage)", live, at_block);
        abandon_block(nthreads);
        return;
    }
}

void run_block_direct(unsigned int nthreads)
{
    block_runner &r = t_run;
    for (unsigned int i = 0; i < nthreads; i++) {
        threadIdx.x = i % blockDim.x;
        threadIdx.y = (i / blockDim.x) % blockDim.y;
        threadIdx.z = i / (blockDim.x * blockDim.y);
        try {
            r.body(r.ctx);
        } catch (const kernel_fault &f) {
            record_fault(f);
            return;
        }
    }
}

/* ---------------------------------------------------------------- stream queues */

/* DPLUA_EMU_SYNC=1 (or CUDA_LAUNCH_BLOCKING=1): every operation runs when it is issued.  Otherwise work waits in its
 * stream's queue until something waits for it (a stream or device synchronisation, an
 * event wait that reaches it, a copy into pageable host memory, cudaFree): the latest
 * schedule CUDA allows, so a missing wait shows as stale data. */
bool sync_mode()
{
    static bool s = env_int("DPLUA_EMU_SYNC", 0) != 0 || env_int("CUDA_LAUNCH_BLOCKING", 0) != 0;
    return s;
}

/* Queued work runs under one lock, whichever thread runs it: no cycle of waits between
 * streams can deadlock, and kernels never run concurrently. */
std::recursive_mutex g_exec_mu;
std::mutex g_streams_mu;
std::set<emu_stream *> g_streams;

/* Runs the stream's queued operations until `mark` of them have been taken. */
void drain(emu_stream *s, uint64_t mark)
{
    std::lock_guard<std::recursive_mutex> run(g_exec_mu);
    for (;;) {
        std::function<void()> fn;
        {
            std::lock_guard<std::mutex> lock(s->mu);
            if (s->started >= mark || s->q.empty()) return;
            fn = std::move(s->q.front());
            s->q.pop_front();
            s->started++;
        }
        if (!sticky(s->device)) fn();   /* a lost context runs nothing more */
        std::lock_guard<std::mutex> lock(s->mu);
        s->finished++;
    }
}

uint64_t queued(emu_stream *s)
{
    std::lock_guard<std::mutex> lock(s->mu);
    return s->queued;
}

void drain_all(int device)   /* device < 0: every device */
{
    std::vector<emu_stream *> all;
    {
        std::lock_guard<std::mutex> lock(g_streams_mu);
        for (emu_stream *s : g_streams)
            if (device < 0 || s->device == device) all.push_back(s);
    }
    for (emu_stream *s : all) drain(s, queued(s));
}

std::mutex g_kernel_mu;
std::unordered_map<const void *, bool> g_kernel_uses_barrier;
std::mutex g_atomic_mu;

}   // namespace

/* ---------------------------------------------------------------- kernel built-ins */

namespace emu {

void sync_block() { yield(F_WAIT_BLOCK); }

void fault(cudaError_t err, const char *fmt, ...)
{
    kernel_fault f;
    va_list ap;
    va_start(ap, fmt);
    vfault_at(&f, err, fmt, ap);
    va_end(ap);
    throw f;
}

void shared_enter(void *p, size_t n, uint64_t *epoch)
{
    block_runner &r = t_run;
    if (*epoch == r.epoch) return;
    *epoch = r.epoch;
    memset(p, 0xFF, n);   /* what an earlier block left: NaN in floats */
    r.shared_bytes += n;
    if (r.shared_bytes + r.dyn_shared > 48 * 1024)
        fault(cudaErrorLaunchOutOfResources, "%zu bytes of static and %zu of dynamic shared memory: a block may have "
              "48 KiB", r.shared_bytes, r.dyn_shared);
}

/* Every lane of the mask must be here: CUDA leaves a shuffle whose mask names a lane that
 * does not take part undefined (a hang or garbage on a GPU). */
uint64_t warp_exchange(unsigned int mask, uint64_t mine, int src_lane)
{
    block_runner &r = t_run;
    unsigned int lin = linear_tid(threadIdx, blockDim), base = lin & ~31u, lane = lin & 31u;
    unsigned int nthreads = blockDim.x * blockDim.y * blockDim.z;
    if (!(mask >> lane & 1u)) fault(cudaErrorIllegalInstruction, "a warp shuffle with mask 0x%08x, which does not "
                                    "name the calling lane %u", mask, lane);
    for (unsigned int l = 0; l < 32; l++)
        if ((mask >> l & 1u) && base + l >= nthreads)
            fault(cudaErrorIllegalInstruction, "a warp shuffle with mask 0x%08x names lane %u, which a block of %u "
                  "threads does not have", mask, l, nthreads);
    r.slots[lin] = mine;
    yield(F_WAIT_WARP);
    for (unsigned int l = 0; l < 32; l++)
        if ((mask >> l & 1u) && r.fibers[base + l].state == F_DONE)
            fault(cudaErrorIllegalInstruction, "a warp shuffle with mask 0x%08x names lane %u, which has exited",
                  mask, l);
    uint64_t v = mine;
    if (src_lane >= 0)   /* a lane outside the mask or the warp: undefined, here poison */
        v = src_lane < 32 && (mask >> src_lane & 1u) && base + src_lane < nthreads ? r.slots[base + src_lane]
                                                                                   : ~(uint64_t)0;
    yield(F_WAIT_WARP);
    return v;
}

void submit(cudaStream_t s, std::function<void()> fn)
{
    if (!s || sync_mode()) {
        std::lock_guard<std::recursive_mutex> run(g_exec_mu);
        if (!sticky(s ? s->device : t_device)) fn();
        return;
    }
    std::lock_guard<std::mutex> lock(s->mu);
    s->q.push_back(std::move(fn));
    s->queued++;
}

uint64_t stream_queued(cudaStream_t s) { return queued(s); }
void stream_run(cudaStream_t s, uint64_t mark) { drain(s, mark); }
bool device_memory(const void *p, size_t n, int *device) { return is_device_mem(p, n, device); }

void device_lost(int device, const char *msg)
{
    if (device < 0 || device >= MAX_DEVICES) return;
    {
        std::lock_guard<std::mutex> lock(g_lost_mu);
        if (!g_lost_msg[0])
            snprintf(g_lost_msg, sizeof g_lost_msg, "the launch timed out and was terminated (%s)", msg);
    }
    int none = cudaSuccess;
    if (g_sticky[device].compare_exchange_strong(none, (int)cudaErrorLaunchTimeout))
        warn("%s; device %d is unusable from now on: every later call fails with it", msg, device);
}

void atomic_lock() { g_atomic_mu.lock(); }
void atomic_unlock() { g_atomic_mu.unlock(); }

int current_device() { return t_device; }

}   // namespace emu

/* The registers per thread of each kernel, from nvcc's resource usage at build time (the
 * generated registers.cpp, spec/cudaemu/registers.sh); absent from a program built without
 * it.  emu_registers_note says why the table is empty. */
extern "C" int emu_kernel_registers(const char *name) __attribute__((weak));
extern "C" const char *emu_registers_note __attribute__((weak));

namespace emu {

const char *registers_unchecked()
{
    if (!emu_kernel_registers) return "the program has no register table";
    return &emu_registers_note && emu_registers_note ? emu_registers_note : NULL;
}

/* A block's registers as an sm_90 allocates them: per warp, in units of 256 (per thread
 * rounded up to 8), 65536 per block.  false when the launch asks for more. */
static bool registers_fit(const char *name, unsigned long long nthreads)
{
    int r = emu_kernel_registers ? emu_kernel_registers(name) : -1;
    if (r <= 0) return true;
    unsigned long long warps = (nthreads + 31) / 32, per_warp = ((unsigned long long)r * 32 + 255) / 256 * 256;
    if (warps * per_warp <= 65536) return true;
    warn("kernel %s: %d registers per thread x %llu threads is %llu registers (a block has 65536)", name, r, nthreads,
         warps * per_warp);
    return false;
}

bool check_launch(const cfg &c, const char *name, const void *const *ptrs, int nptrs)
{
    if (check_sticky(t_device)) return false;
    const dim3 &g = c.grid, &b = c.block;
    unsigned long long nthreads = (unsigned long long)b.x * b.y * b.z;
    if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0 || nthreads > 1024 || b.x > 1024 ||
        b.y > 1024 || b.z > 64 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        warn("kernel %s: invalid configuration grid (%u,%u,%u) block (%u,%u,%u)", name, g.x, g.y, g.z, b.x, b.y, b.z);
        fail(cudaErrorInvalidConfiguration);
        return false;
    }
    if (!registers_fit(name, nthreads)) {
        fail(cudaErrorLaunchOutOfResources);
        return false;
    }
    if (c.shared > 48 * 1024) {
        warn("kernel %s: %zu bytes of dynamic shared memory", name, c.shared);
        fail(cudaErrorInvalidValue);
        return false;
    }
    if (c.stream && c.stream->device != t_device) {
        warn("kernel %s launched on a stream of device %d while device %d is current", name, c.stream->device,
             t_device);
        fail(cudaErrorInvalidResourceHandle);
        return false;
    }
    for (int i = 0; i < nptrs; i++) {
        if (!ptrs[i]) continue;
        alloc_info info;
        if (!find_alloc(ptrs[i], 0, NULL, &info) || info.kind != MEM_DEVICE) {
            warn("kernel %s: pointer argument %d (%p) is not device memory", name, i + 1, ptrs[i]);
            fail(cudaErrorIllegalAddress);
            return false;
        }
        if (info.device != t_device) {
            warn("kernel %s on device %d: pointer argument %d is memory of device %d", name, t_device, i + 1,
                 info.device);
            fail(cudaErrorIllegalAddress);
            return false;
        }
    }
    return true;
}

}   // namespace emu

namespace {

/* ---------------------------------------------------------------- blocks of a launch
 * Block (0,0,0) of a kernel not seen before runs first, on fibers, to learn whether the
 * kernel uses barriers; the other blocks run in an order shuffled by DPLUA_EMU_SEED (and
 * the launch's number), on DPLUA_EMU_THREADS threads at once (the one draining the
 * stream and helpers), so a kernel whose blocks depend on each other's order or race on
 * memory gives other results from one seed to the next. */

uint64_t emu_seed()
{
    static uint64_t s = (uint64_t)env_int("DPLUA_EMU_SEED", 0);
    return s;
}

int emu_threads()
{
    static int n = env_int("DPLUA_EMU_THREADS", 1) < 1 ? 1 : env_int("DPLUA_EMU_THREADS", 1);
    return n;
}

uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct launch_job {
    emu::cfg c{ dim3(), dim3() };
    const char *name;
    void (*body)(void *);
    void *ctx;
    uint64_t total;
    std::vector<uint32_t> order;   /* empty: blocks first..total-1 in order */
    uint64_t first;
    std::atomic<uint64_t> next{ 0 };
    std::atomic<int> known{ -1 };  /* -1 unknown, 0 no barriers, 1 barriers */
    std::mutex mu;
    bool faulted = false;
    kernel_fault fault;
};

void run_one_block(launch_job &j, uint64_t lin)
{
    block_runner &r = t_run;
    const dim3 &g = j.c.grid, &b = j.c.block;
    unsigned int nthreads = b.x * b.y * b.z;
    blockIdx.x = (unsigned int)(lin % g.x);
    blockIdx.y = (unsigned int)(lin / g.x % g.y);
    blockIdx.z = (unsigned int)(lin / ((uint64_t)g.x * g.y));
    r.epoch++;
    r.shared_bytes = 0;
    r.dyn_shared = j.c.shared;
    r.faulted = false;
    if (j.known.load() == 0) {
        r.fiber_mode = false;
        run_block_direct(nthreads);
    } else {
        r.fiber_mode = true;
        r.used_barrier = false;
        run_block_fibers(nthreads);
    }
    if (r.faulted) {
        std::lock_guard<std::mutex> lock(j.mu);
        if (!j.faulted) {
            j.faulted = true;
            j.fault = r.fault;
        }
        j.next.store(j.total);   /* the rest of the grid does not run */
    }
}

/* Takes blocks of the job until there are none left. */
void work(launch_job &j)
{
    block_runner &r = t_run;
    if (r.body) die("kernel %s run from inside kernel %s", j.name, r.name);
    r.name = j.name;
    r.body = j.body;
    r.ctx = j.ctx;
    gridDim = j.c.grid;
    blockDim = j.c.block;
    for (;;) {
        uint64_t i = j.next.fetch_add(1);
        if (i >= j.total) break;
        run_one_block(j, j.order.empty() ? i : j.order[i]);
    }
    r.body = NULL;
    r.ctx = NULL;
    r.cur = NULL;
}

/* Helper threads, started once, kept for the process's life (never destroyed: they may
 * still wait on the condition at exit). */
struct helper_pool {
    std::mutex mu;
    std::condition_variable go, done;
    launch_job *job = NULL;
    uint64_t generation = 0;
    int busy = 0;
    int size = 0;
};

helper_pool *pool()
{
    static helper_pool *p = [] {
        helper_pool *h = new helper_pool;
        h->size = emu_threads() - 1;
        for (int i = 0; i < h->size; i++)
            std::thread([h] {
                uint64_t seen = 0;
                for (;;) {
                    launch_job *j;
                    {
                        std::unique_lock<std::mutex> lock(h->mu);
                        h->go.wait(lock, [&] { return h->generation != seen; });
                        seen = h->generation;
                        j = h->job;
                    }
                    work(*j);
                    std::lock_guard<std::mutex> lock(h->mu);
                    if (--h->busy == 0) h->done.notify_all();
                }
            }).detach();
        return h;
    }();
    return p;
}

std::atomic<uint64_t> g_launches{ 0 };

}   // namespace

namespace emu {

void execute(const cfg &c, int device, const void *key, const char *name, void (*body)(void *), void *ctx)
{
    launch_job j;
    j.c = c;
    j.name = name;
    j.body = body;
    j.ctx = ctx;
    j.total = (uint64_t)c.grid.x * c.grid.y * c.grid.z;
    {
        std::lock_guard<std::mutex> lock(g_kernel_mu);
        auto it = g_kernel_uses_barrier.find(key);
        j.known = it == g_kernel_uses_barrier.end() ? -1 : it->second ? 1 : 0;
    }
    uint64_t launch = g_launches.fetch_add(1);
    static const char *inject = getenv("DPLUA_EMU_FAULT");
    static std::atomic<bool> injected{ false };
    if (inject && *inject && strstr(name, inject) && !injected.exchange(true)) {
        /* a test of what a fault does to the library above: the kernel does not run */
        j.faulted = true;
        j.fault.err = cudaErrorIllegalAddress;
        snprintf(j.fault.msg, sizeof j.fault.msg, "kernel %s: a fault injected by DPLUA_EMU_FAULT", name);
        j.next = j.total;
    } else if (j.known.load() < 0) {   /* block 0 alone first: it tells whether barriers are used */
        j.total = 1;
        work(j);
        if (!j.faulted) {
            j.known = t_run.used_barrier ? 1 : 0;
            std::lock_guard<std::mutex> lock(g_kernel_mu);
            g_kernel_uses_barrier[key] = j.known.load() == 1;
        }
        j.total = (uint64_t)c.grid.x * c.grid.y * c.grid.z;
        j.next = j.faulted ? j.total : 1;
    }
    if (!j.faulted && j.next.load() < j.total) {
        uint64_t from = j.next.load(), n = j.total - from;
        if (j.total <= ((uint64_t)1 << 26)) {   /* Fisher-Yates over blocks from..total-1 */
            j.order.resize(j.total);
            for (uint64_t i = 0; i < j.total; i++) j.order[i] = (uint32_t)i;
            uint64_t st = emu_seed() * 0x2545f4914f6cdd1dull + launch;
            for (uint64_t i = n - 1; i > 0; i--) {
                uint64_t k = splitmix(&st) % (i + 1);
                std::swap(j.order[from + i], j.order[from + k]);
            }
        }
        helper_pool *h = pool();
        bool helpers = h->size > 0 && n > 1;
        if (helpers) {
            std::lock_guard<std::mutex> lock(h->mu);
            h->job = &j;
            h->busy = h->size;
            h->generation++;
            h->go.notify_all();
        }
        work(j);
        if (helpers) {
            std::unique_lock<std::mutex> lock(h->mu);
            h->done.wait(lock, [&] { return h->busy == 0; });
        }
    }
    if (j.faulted && device >= 0 && device < MAX_DEVICES) {
        int none = cudaSuccess;
        g_sticky[device].compare_exchange_strong(none, (int)j.fault.err);
        warn("%s: %s; device %d is unusable from now on: every later call fails with it (DPLUA_EMU_SEED=%llu, "
             "DPLUA_EMU_THREADS=%d)", j.fault.msg, cudaGetErrorString(j.fault.err), device,
             (unsigned long long)emu_seed(), emu_threads());
    }
}

}   // namespace emu

/* ---------------------------------------------------------------- runtime API */

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    if (n_devices() == 0) {
        *count = 0;
        return fail(cudaErrorNoDevice);
    }
    *count = n_devices();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= n_devices()) return fail(cudaErrorInvalidDevice);
    t_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = t_device;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    if (sticky(t_device)) return sticky(t_device);   /* a sticky error is never cleared */
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return sticky(t_device) ? sticky(t_device) : t_last; }

const char *cudaGetErrorString(cudaError_t err)
{
    switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchTimeout: {
        std::lock_guard<std::mutex> lock(g_lost_mu);
        return g_lost_msg[0] ? g_lost_msg : "the launch timed out and was terminated";
    }
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    *ptr = NULL;
    if (check_sticky(t_device)) return sticky(t_device);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    if (g_used.size() < (size_t)n_devices()) g_used.resize(n_devices(), 0);
    if (size > capacity() || g_used[t_device] + size > capacity()) return fail(cudaErrorMemoryAllocation);
    void *p = aligned_alloc(256, (size + 255) / 256 * 256 + 256);
    if (!p) return fail(cudaErrorMemoryAllocation);
    g_allocs[(uintptr_t)p] = alloc_info{ size, t_device, MEM_DEVICE };
    g_used[t_device] += size;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    if (!ptr) return cudaSuccess;
    drain_all(-1);   /* as on a GPU, cudaFree waits for the device */
    if (check_sticky(t_device)) return sticky(t_device);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    auto it = g_allocs.find((uintptr_t)ptr);
    if (it == g_allocs.end() || it->second.kind != MEM_DEVICE) {
        warn("cudaFree(%p): not the start of a device allocation", ptr);
        return fail(cudaErrorInvalidDevicePointer);
    }
    g_used[it->second.device] -= it->second.size;
    g_allocs.erase(it);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    if (check_sticky(t_device)) return sticky(t_device);
    void *p = aligned_alloc(256, (size + 255) / 256 * 256 + 256);
    if (!p) return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    g_allocs[(uintptr_t)p] = alloc_info{ size, -1, MEM_PINNED };
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
    if (!ptr) return cudaSuccess;
    drain_all(-1);
    if (check_sticky(t_device)) return sticky(t_device);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    auto it = g_allocs.find((uintptr_t)ptr);
    if (it == g_allocs.end() || it->second.kind != MEM_PINNED) {
        warn("cudaFreeHost(%p): not pinned host memory", ptr);
        return fail(cudaErrorInvalidValue);
    }
    g_allocs.erase(it);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (check_sticky(t_device)) return sticky(t_device);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    if (g_used.size() < (size_t)n_devices()) g_used.resize(n_devices(), 0);
    *total_bytes = capacity();
    *free_bytes = capacity() - g_used[t_device];
    return cudaSuccess;
}

static cudaError_t check_copy(const char *what, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    bool dd = is_device_mem(dst, n, NULL), sd = is_device_mem(src, n, NULL);
    bool ok;
    switch (kind) {
    case cudaMemcpyHostToDevice: ok = dd && !sd; break;
    case cudaMemcpyDeviceToHost: ok = !dd && sd; break;
    case cudaMemcpyDeviceToDevice: ok = dd && sd; break;
    case cudaMemcpyHostToHost: ok = !dd && !sd; break;
    default: ok = true; break;
    }
    if (!ok) {
        warn("%s of %zu bytes, kind %d: destination %p is %s, source %p is %s (or the bytes run past an "
             "allocation)", what, n, (int)kind, dst, dd ? "device memory" : "not device memory", src,
             sd ? "device memory" : "not device memory");
        return fail(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

static bool is_pinned(const void *p, size_t n)
{
    alloc_info info;
    return find_alloc(p, n, NULL, &info) && info.kind == MEM_PINNED;
}

/* As the CUDA runtime: a copy from pageable host memory takes the bytes when it is issued
 * (the host may reuse them at once); one into pageable host memory returns when it has
 * completed; copies from and to pinned memory, and on the device, run in stream order. */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    if (check_sticky(t_device)) return sticky(t_device);
    if (n == 0) return cudaSuccess;
    cudaError_t e = check_copy("cudaMemcpyAsync", dst, src, n, kind);
    if (e) return e;
    if (kind == cudaMemcpyHostToDevice && !is_pinned(src, n)) {
        auto staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
        emu::submit(s, [dst, staged]() { memcpy(dst, staged->data(), staged->size()); });
        return cudaSuccess;
    }
    emu::submit(s, [dst, src, n]() { memmove(dst, src, n); });
    if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, n) && s) drain(s, queued(s));
    return check_sticky(t_device);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return cudaMemcpyAsync(dst, src, n, kind, NULL);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t n,
                                cudaStream_t s)
{
    if (check_sticky(t_device)) return sticky(t_device);
    if (n == 0) return cudaSuccess;
    int dd = -1, sd = -1;
    if (!is_device_mem(dst, n, &dd) || !is_device_mem(src, n, &sd) || dd != dst_device || sd != src_device) {
        warn("cudaMemcpyPeerAsync of %zu bytes: destination on device %d (said %d), source on device %d (said %d)",
             n, dd, dst_device, sd, src_device);
        return fail(cudaErrorInvalidValue);
    }
    emu::submit(s, [dst, src, n]() { memmove(dst, src, n); });
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t n, cudaStream_t s)
{
    if (check_sticky(t_device)) return sticky(t_device);
    if (n == 0) return cudaSuccess;
    if (!is_device_mem(ptr, n, NULL)) {
        warn("cudaMemsetAsync of %zu bytes at %p: not inside one device allocation", n, ptr);
        return fail(cudaErrorInvalidValue);
    }
    emu::submit(s, [ptr, value, n]() { memset(ptr, value, n); });
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    if (check_sticky(t_device)) return sticky(t_device);
    emu_stream *st = new emu_stream;
    st->device = t_device;
    std::lock_guard<std::mutex> lock(g_streams_mu);
    g_streams.insert(st);
    *s = st;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s) return fail(cudaErrorInvalidResourceHandle);
    drain(s, queued(s));
    {
        std::lock_guard<std::mutex> lock(g_streams_mu);
        g_streams.erase(s);
    }
    int device = s->device;
    delete s;
    return check_sticky(device);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s) drain(s, queued(s));
    return check_sticky(s ? s->device : t_device);
}

/* The waiting stream's later work runs after the event's: a marker in its queue runs the
 * recorded stream up to the event when it is reached. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (check_sticky(s ? s->device : t_device)) return sticky(s ? s->device : t_device);
    emu_stream *other = e->stream;
    uint64_t mark = e->mark;
    if (!other || other == s) return cudaSuccess;
    if (!s) {
        drain(other, mark);
        return check_sticky(other->device);
    }
    emu::submit(s, [other, mark]() { drain(other, mark); });
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    if (check_sticky(t_device)) return sticky(t_device);
    *e = new emu_event{ t_device, NULL, 0 };
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    /* as on a GPU: the event and the stream must belong to the same device */
    if (!e || (s && s->device != e->device)) {
        warn("cudaEventRecord: event of device %d recorded on a stream of device %d", e ? e->device : -1,
             s ? s->device : -1);
        return fail(cudaErrorInvalidResourceHandle);
    }
    if (check_sticky(e->device)) return sticky(e->device);
    e->stream = s;
    e->mark = s ? queued(s) : 0;
    return cudaSuccess;
}

/* Done when the stream has run its work up to the event; queries never run work, so
 * until something waits, recorded work is not ready (as on a busy GPU). */
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (check_sticky(e->device)) return sticky(e->device);
    if (!e->stream) return cudaSuccess;
    std::lock_guard<std::mutex> lock(e->stream->mu);
    return e->stream->finished >= e->mark ? cudaSuccess : cudaErrorNotReady;
}

/* Runs the recorded stream up to the event. */
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (e->stream) drain(e->stream, e->mark);
    return cudaSuccess;
}

/* Emulated GPU d sits at bus d + 1, alike in every process: two processes on one device
 * index share "a GPU", as they would on one machine. */
cudaError_t cudaDeviceGetPCIBusId(char *pci_bus_id, int len, int device)
{
    if (device < 0 || device >= n_devices()) return fail(cudaErrorInvalidDevice);
    snprintf(pci_bus_id, (size_t)len, "0000:%02x:00.0", device + 1);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    drain_all(t_device);
    return check_sticky(t_device);
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    if (device < 0 || device >= n_devices() || peer < 0 || peer >= n_devices()) return fail(cudaErrorInvalidDevice);
    *can = device != peer;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    static std::mutex mu;
    static std::set<std::pair<int, int>> enabled;
    (void)flags;
    if (peer < 0 || peer >= n_devices() || peer == t_device) return fail(cudaErrorInvalidDevice);
    std::lock_guard<std::mutex> lock(mu);
    if (!enabled.insert({ t_device, peer }).second) return fail(cudaErrorPeerAccessAlreadyEnabled);
    return cudaSuccess;
}

/* ---------------------------------------------------------------- cuBLAS */

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = new emu_cublas{ NULL, t_device, CUBLAS_DEFAULT_MATH };
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

}   // extern "C"

namespace {

/* TF32: 10 explicit mantissa bits, rounded to nearest (ties away, as the tensor cores' input
 * conversion is documented to round) */
float to_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    float r;
    memcpy(&r, &u, 4);
    return r;
}

/* Is [p, p + extent elements) inside one allocation of the handle's device? */
bool operand_ok(cublasHandle_t h, const char *which, const void *p, long long extent, size_t esize)
{
    int dev = -1;
    if (extent <= 0) return true;
    if (!is_device_mem(p, (size_t)extent * esize, &dev) || dev != h->device) {
        warn("cuBLAS gemm: operand %s (%p, %lld elements) is not inside device memory of device %d", which, p,
             extent, h->device);
        return false;
    }
    return true;
}

template <typename T>
void gemm_run(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha, const T *A, int lda,
              long long sa, const T *B, int ldb, long long sb, T beta, T *C, int ldc, long long sc, int batch,
              bool tf32);

template <typename T>
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha,
                    const T *A, int lda, long long sa, const T *B, int ldb, long long sb, T beta, T *C, int ldc,
                    long long sc, int batch, bool tf32)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (check_sticky(h->device)) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (h->device != t_device) {
        warn("cuBLAS gemm: handle of device %d used while device %d is current", h->device, t_device);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (h->stream && h->stream->device != h->device) return CUBLAS_STATUS_EXECUTION_FAILED;
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
        ldc < (m > 1 ? m : 1)) {
        warn("cuBLAS gemm: invalid value m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d (ops %d %d)", m, n, k, lda, ldb,
             ldc, batch, (int)ta, (int)tb);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    long long ea = k == 0 ? 0 : (long long)(ac - 1) * lda + ar, eb = k == 0 ? 0 : (long long)(bc - 1) * ldb + br;
    long long ec = (long long)(n - 1) * ldc + m;
    if (!operand_ok(h, "A", A, ea + (long long)(batch - 1) * sa, sizeof(T)) ||
        !operand_ok(h, "B", B, eb + (long long)(batch - 1) * sb, sizeof(T)) ||
        !operand_ok(h, "C", C, ec + (long long)(batch - 1) * sc, sizeof(T)))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    emu::submit(h->stream, [=]() { gemm_run<T>(ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc,
                                               batch, tf32); });
    return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
void gemm_run(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha, const T *A, int lda,
              long long sa, const T *B, int ldb, long long sb, T beta, T *C, int ldc, long long sc, int batch,
              bool tf32)
{
    for (int bi = 0; bi < batch; bi++) {
        const T *a = A + bi * sa, *b = B + bi * sb;
        T *c = C + bi * sc;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int p = 0; p < k; p++) {
                    T x = ta == CUBLAS_OP_N ? a[i + (long long)p * lda] : a[p + (long long)i * lda];
                    T y = tb == CUBLAS_OP_N ? b[p + (long long)j * ldb] : b[j + (long long)p * ldb];
                    if (tf32) {
                        x = (T)to_tf32((float)x);
                        y = (T)to_tf32((float)y);
                    }
                    acc += (double)x * (double)y;
                }
                T &out = c[i + (long long)j * ldc];
                /* beta == 0: C is not read (NaN in it does not propagate) */
                out = (T)((double)alpha * acc + (beta == (T)0 ? 0.0 : (double)beta * (double)out));
            }
    }
}

/* a float16 (BF = false) or bfloat16 element for gemm<T>: it computes through double and
 * stores rounded through float32 (cuBLAS accumulates in float32 and rounds once) */
template <bool BF> struct h16 {
    uint16_t bits;
    h16() = default;
    h16(double v) : bits(BF ? dp_float_to_bf16((float)v) : dp_float_to_f16((float)v)) {}
    operator double() const { return BF ? dp_bf16_to_float(bits) : dp_f16_to_float(bits); }
};

template <bool BF>
cublasStatus_t gemm_h16(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const float *alpha, const void *A, int lda, long long sa, const void *B, int ldb, long long sb,
                        const float *beta, void *C, int ldc, long long sc, int batch)
{
    typedef h16<BF> T;
    return gemm<T>(h, ta, tb, m, n, k, T(*alpha), (const T *)A, lda, sa, (const T *)B, ldb, sb, T(*beta), (T *)C, ldc, sc,
                   batch, false);
}

}   // namespace

extern "C" {

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B,
                            cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0,
                                      1, compute, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                          int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                                          int lda, long long sa, const void *B, cudaDataType_t bt, int ldb,
                                          long long sb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                                          long long sc, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo)
{
    (void)algo;
    if ((at == CUDA_R_16F || at == CUDA_R_16BF) && bt == at && ct == at && compute == CUBLAS_COMPUTE_32F) {
        if (at == CUDA_R_16F)
            return gemm_h16<false>(h, ta, tb, m, n, k, (const float *)alpha, A, lda, sa, B, ldb, sb, (const float *)beta, C,
                                   ldc, sc, batch);
        return gemm_h16<true>(h, ta, tb, m, n, k, (const float *)alpha, A, lda, sa, B, ldb, sb, (const float *)beta, C, ldc,
                              sc, batch);
    }
    if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F ||
        (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    return gemm<float>(h, ta, tb, m, n, k, *(const float *)alpha, (const float *)A, lda, sa, (const float *)B, ldb,
                       sb, *(const float *)beta, (float *)C, ldc, sc, batch, compute == CUBLAS_COMPUTE_32F_FAST_TF32);
}

cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double *alpha, const double *A, int lda, const double *B, int ldb,
                           const double *beta, double *C, int ldc)
{
    return gemm<double>(h, ta, tb, m, n, k, *alpha, A, lda, 0, B, ldb, 0, *beta, C, ldc, 0, 1, false);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const double *alpha, const double *A, int lda, long long sa,
                                         const double *B, int ldb, long long sb, const double *beta, double *C,
                                         int ldc, long long sc, int batch)
{
    return gemm<double>(h, ta, tb, m, n, k, *alpha, A, lda, sa, B, ldb, sb, *beta, C, ldc, sc, batch, false);
}

}   // extern "C"
