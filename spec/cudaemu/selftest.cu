/* selftest.cu: kernels with the bugs a GPU shows and the host never does, each run on the
 * emulation to show it catches the kind (make cuda-emu builds build-emu/selftest;
 * spec/cudaemu/run runs it).  Each case runs in a child process, since a kernel fault
 * leaves its device unusable; the run ends with "N passed, N failed".
 *
 *   order       a block reads what another block writes (no order between blocks)
 *   nosync      a thread reads shared memory another thread writes, with no __syncthreads
 *   uninit      shared memory read before any thread of the block wrote it
 *   shfl_block  a full-mask warp shuffle in a block of 48 threads (lanes that do not exist)
 *   shfl_exit   a full-mask warp shuffle after half the warp returned
 *   shfl_mask   a shuffle reading a lane its mask leaves out
 *   assert      a device-side assert: reported at the next synchronisation, then sticky
 *   shared      static shared memory over 48 KiB
 *   config      1025 threads in a block, a grid of 65536 in y: launch errors at once
 *   divergent   half a warp in a shuffle while the rest of the block waits in __syncthreads
 *   threads     with DPLUA_EMU_THREADS=2, blocks run on two threads at once
 *   registers   a kernel of over 64 registers per thread (nvcc's count, at build time) in
 *               a block of 1024 threads: too many resources requested for launch */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "registers_kernel.cuh"

#define N_BLOCKS 64

/* out[b] = out[b - 1] + 1: right only when blocks run in order */
static __global__ void chain_kernel(int *out)
{
    if (threadIdx.x == 0) out[blockIdx.x] = blockIdx.x == 0 ? 0 : out[blockIdx.x - 1] + 1;
}

/* each thread writes its slot and reads its neighbour's, with no barrier between */
static __global__ void nosync_kernel(float *out)
{
    __shared__ float sh[64];
    sh[threadIdx.x] = (float)threadIdx.x;
    out[threadIdx.x] = sh[(threadIdx.x + 1) % 64];
}

/* only the even threads write; every thread reads its own slot after the barrier */
static __global__ void uninit_kernel(float *out)
{
    __shared__ float sh[64];
    if (threadIdx.x % 2 == 0) sh[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = sh[threadIdx.x];
}

static __global__ void shfl_kernel(float *out)
{
    float v = (float)threadIdx.x;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

static __global__ void shfl_exit_kernel(float *out)
{
    if (threadIdx.x >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (float)threadIdx.x, 1);
}

/* lanes 0-15 shuffle among themselves; lane 15 reads lane 16, outside the mask */
static __global__ void shfl_mask_kernel(float *out)
{
    float v = 1.0f;
    if (threadIdx.x < 16) v = __shfl_down_sync(0x0000ffffu, v, 1);
    out[threadIdx.x] = v;
}

static __global__ void assert_kernel(const int *idx, int n, int limit, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    assert(idx[i] >= 0 && idx[i] < limit);
    out[i] = (float)idx[i];
}

static __global__ void big_shared_kernel(float *out)
{
    __shared__ double a[4096];
    __shared__ double b[4096];
    a[threadIdx.x] = 1;
    b[threadIdx.x] = 2;
    __syncthreads();
    out[threadIdx.x] = (float)(a[threadIdx.x] + b[threadIdx.x]);
}

/* half of warp 0 shuffles while the rest of the block waits in __syncthreads */
static __global__ void divergent_kernel(float *out)
{
    float v = 1.0f;
    if (threadIdx.x >= 16 && threadIdx.x < 32) v = __shfl_down_sync(0xffff0000u, v, 1);
    else __syncthreads();
    out[threadIdx.x] = v;
}

/* records which host threads ran blocks */
static std::mutex g_seen_mu;
static std::set<std::thread::id> g_seen;
static __global__ void where_kernel(float *out)
{
    if (threadIdx.x == 0) {
        std::lock_guard<std::mutex> lock(g_seen_mu);
        g_seen.insert(std::this_thread::get_id());
        out[blockIdx.x] = 1.0f;
    }
}

/* ---------------------------------------------------------------- cases */

static int fails;

static void expect(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "  expected %s\n", what);
        fails++;
    }
}

static void *dmalloc(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) {
        fprintf(stderr, "  cudaMalloc failed\n");
        exit(1);
    }
    return p;
}

static cudaStream_t stream()
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
}

/* the fault is not returned by the launch, but by the next synchronisation and every
 * call after it on that device; the other device still works */
static void expect_sticky(cudaStream_t s, cudaError_t want)
{
    expect(cudaGetLastError() == cudaSuccess, "the launch itself to succeed (the fault is asynchronous)");
    expect(cudaStreamSynchronize(s) == want, "the synchronisation to report the fault");
    void *p = NULL;
    expect(cudaMalloc(&p, 16) == want, "a later cudaMalloc to fail with it too (sticky)");
    expect(cudaGetLastError() == want && cudaGetLastError() == want, "cudaGetLastError never to clear it");
    cudaSetDevice(1);
    expect(cudaMalloc(&p, 16) == cudaSuccess && cudaFree(p) == cudaSuccess, "the other device to work on");
}

static void case_order()
{
    int *d = (int *)dmalloc(N_BLOCKS * sizeof(int));
    cudaStream_t s = stream();
    chain_kernel<<<N_BLOCKS, 32, 0, s>>>(d);
    int h[N_BLOCKS];
    cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    int wrong = 0;
    for (int b = 0; b < N_BLOCKS; b++) wrong += h[b] != b;
    expect(wrong > 0, "the chain between blocks to come out wrong");
}

static void case_nosync()
{
    float *d = (float *)dmalloc(64 * sizeof(float));
    cudaStream_t s = stream();
    nosync_kernel<<<1, 64, 0, s>>>(d);
    float h[64];
    cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    expect(isnan(h[0]), "thread 0 to read its neighbour's slot before it was written (NaN)");
}

static void case_uninit()
{
    float *d = (float *)dmalloc(64 * sizeof(float));
    cudaStream_t s = stream();
    uninit_kernel<<<2, 64, 0, s>>>(d);
    float h[64];
    cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    expect(h[0] == 1.0f && isnan(h[1]), "the slots no thread wrote to read as NaN");
}

static void case_shfl_block()
{
    float *d = (float *)dmalloc(64 * sizeof(float));
    cudaStream_t s = stream();
    shfl_kernel<<<1, 48, 0, s>>>(d);
    expect_sticky(s, cudaErrorIllegalInstruction);
}

static void case_shfl_exit()
{
    float *d = (float *)dmalloc(64 * sizeof(float));
    cudaStream_t s = stream();
    shfl_exit_kernel<<<1, 32, 0, s>>>(d);
    expect_sticky(s, cudaErrorIllegalInstruction);
}

static void case_shfl_mask()
{
    float *d = (float *)dmalloc(32 * sizeof(float));
    cudaStream_t s = stream();
    shfl_mask_kernel<<<1, 32, 0, s>>>(d);
    float h[32];
    cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    expect(cudaStreamSynchronize(s) == cudaSuccess, "a partial mask naming only lanes that take part to be fine");
    expect(h[14] == 1.0f && isnan(h[15]), "lane 15's read of lane 16 (outside the mask) to give poison");
}

static void case_assert()
{
    int hi[40];
    for (int i = 0; i < 40; i++) hi[i] = i % 4;
    hi[37] = 9;
    int *di = (int *)dmalloc(sizeof hi);
    float *d = (float *)dmalloc(40 * sizeof(float));
    cudaStream_t s = stream();
    cudaMemcpyAsync(di, hi, sizeof hi, cudaMemcpyHostToDevice, s);
    assert_kernel<<<2, 32, 0, s>>>(di, 40, 4, d);
    expect_sticky(s, cudaErrorAssert);
}

static void case_shared()
{
    float *d = (float *)dmalloc(64 * sizeof(float));
    cudaStream_t s = stream();
    big_shared_kernel<<<1, 64, 0, s>>>(d);
    expect_sticky(s, cudaErrorLaunchOutOfResources);
}

static void case_config()
{
    float *d = (float *)dmalloc(64 * sizeof(float));
    cudaStream_t s = stream();
    where_kernel<<<1, 1025, 0, s>>>(d);
    expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "1025 threads to be refused at the launch");
    where_kernel<<<dim3(1, 65536), 32, 0, s>>>(d);
    expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "a grid of 65536 in y to be refused at the launch");
    expect(cudaStreamSynchronize(s) == cudaSuccess, "a launch error not to be sticky");
}

static void case_divergent()
{
    float *d = (float *)dmalloc(64 * sizeof(float));
    cudaStream_t s = stream();
    divergent_kernel<<<1, 64, 0, s>>>(d);
    expect_sticky(s, cudaErrorLaunchFailure);
}

static void case_threads()
{
    float *d = (float *)dmalloc(4096 * sizeof(float));
    cudaStream_t s = stream();
    for (int k = 0; k < 20 && g_seen.size() < 2; k++) where_kernel<<<4096, 32, 0, s>>>(d);
    expect(cudaStreamSynchronize(s) == cudaSuccess, "the launches to run");
    expect(g_seen.size() == 2, "blocks of one launch to run on two threads");
}

static void case_registers()
{
    if (const char *why = emu::registers_unchecked()) {
        printf("  registers per launch are not checked: %s (skipped)\n", why);
        fflush(stdout);   /* the case's process ends with _exit */
        return;
    }
    float *d = (float *)dmalloc(HEAVY_VALUES * 1024 * sizeof(float));
    cudaStream_t s = stream();
    register_heavy_kernel<<<1, 1024, 0, s>>>(d);
    cudaError_t e = cudaGetLastError();
    expect(e == cudaErrorLaunchOutOfResources, "1024 threads of the heavy kernel to be refused at the launch");
    expect(!strcmp(cudaGetErrorString(e), "too many resources requested for launch"), "the driver's message");
    register_heavy_kernel<<<1, 64, 0, s>>>(d);
    expect(cudaGetLastError() == cudaSuccess, "64 threads of it to launch");
    expect(cudaStreamSynchronize(s) == cudaSuccess, "the launch error not to be sticky");
}

struct test_case {
    const char *name;
    void (*fn)();
    const char *threads;   /* DPLUA_EMU_THREADS for the case */
};

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        { "order: a block reads what another block writes", case_order, "1" },
        { "nosync: shared memory read with no __syncthreads after the write", case_nosync, "1" },
        { "uninit: shared memory read before it is written", case_uninit, "1" },
        { "shfl_block: a full-mask shuffle in a block of 48 threads", case_shfl_block, "1" },
        { "shfl_exit: a full-mask shuffle after half the warp returned", case_shfl_exit, "1" },
        { "shfl_mask: a shuffle reading a lane outside its mask", case_shfl_mask, "1" },
        { "assert: a device-side assert, reported at the synchronisation and sticky", case_assert, "2" },
        { "shared: 64 KiB of static shared memory", case_shared, "1" },
        { "config: 1025 threads, or a grid of 65536 in y, at the launch", case_config, "1" },
        { "divergent: half a warp in a shuffle, the rest of the block in __syncthreads", case_divergent, "1" },
        { "threads: blocks on two threads at once", case_threads, "2" },
        { "registers: 1024 threads of a kernel with over 64 registers each", case_registers, "1" },
    };
    int passed = 0, failed = 0;
    for (const test_case &c : cases) {
        if (argc > 1 && strncmp(argv[1], c.name, strlen(argv[1])) != 0) continue;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("DPLUA_EMU_THREADS", c.threads, 1);
            setenv("DPLUA_EMU_GPUS", "2", 1);
            c.fn();
            _exit(fails ? 1 : 0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        printf("%s %s\n", ok ? "PASS" : "FAIL", c.name);
        ok ? passed++ : failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
