/* index_check.cu: range checks of index tensors on the device (dp_backend.check_indices),
 * as PyTorch's device-side asserts: copying the indices to the host to check them would
 * stall the stream on every index_select or loss.  A one-block kernel writes the first
 * bad position and its value (or -1) into a slot of the device's slot array; the kernels
 * that use the indices skip bad ones, so nothing reads out of bounds.  The device's next
 * synchronisation (dp_cuda_index_errors, after its stream has run) reads the slots queued
 * since the last one and reports the first bad index with its op's message.
 * CUDA_LAUNCH_BLOCKING=1 reports it at the op instead, as it does kernel errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common.cuh"

#define MAX_PENDING 256   /* checks queued between two synchronisations before one is forced */

/* first bad position into slot[0] (-1: none) and its value into slot[1] */
static __global__ void check_indices_kernel(const int64_t *idx, int64_t n, int64_t stride, int64_t limit, int64_t *slot)
{
    __shared__ int64_t first[DP_THREADS];
    int64_t mine = n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        int64_t v = idx[i * stride];
        if (v < 0 || v >= limit) {
            mine = i;
            break;
        }
    }
    first[threadIdx.x] = mine;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s && first[threadIdx.x + s] < first[threadIdx.x]) first[threadIdx.x] = first[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        int64_t p = first[0];
        slot[0] = p < n ? p : -1;
        slot[1] = p < n ? idx[p * stride] : 0;
    }
}

struct DP_HIDDEN device_checks {
    std::mutex mu;                   /* guards everything here; held while queuing or reading */
    int64_t *slots = NULL;           /* MAX_PENDING pairs on the device */
    std::vector<std::string> pending;   /* the message of each slot in use, in order */
};

static std::mutex g_checks_mu;
static std::map<int, device_checks *> g_checks;

static device_checks *checks_of(int index, bool create)
{
    std::lock_guard<std::mutex> lock(g_checks_mu);
    auto it = g_checks.find(index);
    if (it != g_checks.end()) return it->second;
    if (!create) return NULL;
    device_checks *c = new device_checks;
    g_checks[index] = c;
    return c;
}

static bool launch_blocking(void)
{
    static const bool b = [] {
        const char *v = getenv("CUDA_LAUNCH_BLOCKING");
        return v && *v && strcmp(v, "0") != 0;
    }();
    return b;
}

/* Reads the device's queued checks (c->mu held) and reports the first bad index. */
static int report(device_checks *c, int index, bool at_op)
{
    if (c->pending.empty()) return 0;
    size_t n = c->pending.size();
    std::vector<int64_t> h(2 * n);
    std::vector<std::string> msgs;
    msgs.swap(c->pending);
    dp_device dev = { DP_DEVICE_CUDA, index };
    CUDA_STREAM_OF(dev, s);
    CUDA_CHECK(cudaMemcpyAsync(h.data(), c->slots, 2 * n * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    for (size_t k = 0; k < n; k++) {
        if (h[2 * k] < 0) continue;
        char buf[512];
        snprintf(buf, sizeof buf, msgs[k].c_str(), (long long)h[2 * k + 1] + 1, (long long)h[2 * k] + 1);
        return dp_cuda_error("%s%s", buf, at_op ? "" : " (reported at the next synchronisation; "
                                                       "CUDA_LAUNCH_BLOCKING=1 reports it at the op)");
    }
    return 0;
}

extern "C" int dp_cuda_index_errors(int index)
{
    device_checks *c = checks_of(index, false);
    if (!c) return 0;
    std::lock_guard<std::mutex> lock(c->mu);
    return report(c, index, false);
}

extern "C" int dp_cuda_check_indices(const dp_view *idx, int64_t limit, const char *msg)
{
    if (idx->dtype != DP_INT64 || idx->ndim > 1) return dp_cuda_error("CUDA check_indices: the index must be a 1-D int64 tensor");
    int64_t n = idx->ndim ? idx->sizes[0] : 1, stride = idx->ndim ? idx->strides[0] : 0;
    if (n == 0) return 0;
    int index = idx->device.index;
    device_checks *c = checks_of(index, true);
    std::lock_guard<std::mutex> lock(c->mu);
    CUDA_STREAM_OF(idx->device, s);
    if (!c->slots) CUDA_CHECK(cudaMalloc((void **)&c->slots, MAX_PENDING * 2 * sizeof(int64_t)));
    if (c->pending.size() == MAX_PENDING && report(c, index, false)) return -1;
    int64_t *slot = c->slots + 2 * c->pending.size();
    c->pending.push_back(msg);
    check_indices_kernel<<<1, DP_THREADS, 0, s>>>((const int64_t *)idx->data, n, stride, limit, slot);
    CUDA_CHECK_LAUNCH("check_indices");
    return launch_blocking() ? report(c, index, true) : 0;
}

/* Reserves n consecutive slots (messages msgs[0..n)) and calls launch(slots, ctx), which
 * queues kernels that write them (pair k: first bad position or -1, its value - 1), all
 * under the device's lock, so that no synchronisation reads a slot before its kernel is
 * queued.  CUDA_LAUNCH_BLOCKING=1 reports a bad index here. */
extern "C" int dp_cuda_checked_launch(int index, int n, const char *const *msgs, int (*launch)(int64_t *slots, void *ctx),
                                      void *ctx)
{
    if (n < 0 || n > MAX_PENDING) return dp_cuda_error("CUDA checked launch: %d checks (at most %d)", n, MAX_PENDING);
    device_checks *c = checks_of(index, true);
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->slots) CUDA_CHECK(cudaMalloc((void **)&c->slots, MAX_PENDING * 2 * sizeof(int64_t)));
    if (c->pending.size() + n > MAX_PENDING && report(c, index, false)) return -1;
    int64_t *slots = c->slots + 2 * c->pending.size();
    for (int k = 0; k < n; k++) c->pending.push_back(msgs[k]);
    if (launch(slots, ctx)) {
        c->pending.resize(c->pending.size() - n);
        return -1;
    }
    return launch_blocking() ? report(c, index, true) : 0;
}
