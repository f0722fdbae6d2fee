/* conv_cudnn.cu: convolution through cuDNN, tried before conv.cu's im2col path when
 * DPLUA_CUDNN=1.  libcudnn.so.9 is loaded at run time with dlopen (as the engine loads
 * this library), so a machine without it runs the im2col path.  A shape cuDNN's legacy API
 * cannot express (padding that differs on the two sides of a dim) or any cuDNN failure
 * before the output is written falls back to im2col as well.  Under
 * torch.backends.cudnn.deterministic (or torch.use_deterministic_algorithms) only the
 * algorithms cuDNN reports deterministic are used, as PyTorch does.
 *
 * Opt-in until it has been checked on a GPU (spec/conv_spec.lua with DPLUA_CUDNN=1 on
 * cuda:0); the emulation has no cuDNN, so this file is compiled only by nvcc. */
#include "common.cuh"

#if defined(__CUDACC__) && __has_include(<cudnn.h>)
#include <cudnn.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>

namespace {

#define API(X)                                                                                  \
    X(cudnnCreate) X(cudnnSetStream) X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) \
    X(cudnnSetTensorNdDescriptor) X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor)  \
    X(cudnnSetFilterNdDescriptor) X(cudnnCreateConvolutionDescriptor)                             \
    X(cudnnDestroyConvolutionDescriptor) X(cudnnSetConvolutionNdDescriptor)                       \
    X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)                               \
    X(cudnnGetConvolutionNdForwardOutputDim) X(cudnnGetConvolutionForwardAlgorithm_v7)            \
    X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward)                         \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7) X(cudnnGetConvolutionBackwardDataWorkspaceSize) \
    X(cudnnConvolutionBackwardData) X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)              \
    X(cudnnGetConvolutionBackwardFilterWorkspaceSize) X(cudnnConvolutionBackwardFilter)

struct cudnn_api {
#define FIELD(name) decltype(&::name) name;
    API(FIELD)
#undef FIELD
};

cudnn_api g_api;
bool g_loaded;
std::mutex g_mu;                     /* loading, and the handles */
cudnnHandle_t g_handles[64];

const cudnn_api *api()
{
    static std::once_flag once;
    std::call_once(once, [] {
        const char *on = getenv("DPLUA_CUDNN");
        if (!on || strcmp(on, "1") != 0) return;
        void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
        if (!lib) lib = dlopen("libcudnn.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return;
        bool ok = true;
#define LOAD(name) ok = ok && (g_api.name = (decltype(&::name))dlsym(lib, #name)) != NULL;
        API(LOAD)
#undef LOAD
        g_loaded = ok;
    });
    return g_loaded ? &g_api : NULL;
}

/* The handle of a device, bound to its stream; NULL when cuDNN cannot serve it. */
cudnnHandle_t handle_for(const cudnn_api *a, int dev, cudaStream_t s)
{
    if (dev < 0 || dev >= 64) return NULL;
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_handles[dev] && a->cudnnCreate(&g_handles[dev]) != CUDNN_STATUS_SUCCESS) g_handles[dev] = NULL;
    if (g_handles[dev] && a->cudnnSetStream(g_handles[dev], s) != CUDNN_STATUS_SUCCESS) return NULL;
    return g_handles[dev];
}

/* The descriptors of one convolution: 1-D and 2-D as 2-D (cuDNN wants 4-D tensors). */
struct descs {
    const cudnn_api *a;
    cudnnTensorDescriptor_t in = NULL, out = NULL;
    cudnnFilterDescriptor_t w = NULL;
    cudnnConvolutionDescriptor_t conv = NULL;
    ~descs()
    {
        if (in) a->cudnnDestroyTensorDescriptor(in);
        if (out) a->cudnnDestroyTensorDescriptor(out);
        if (w) a->cudnnDestroyFilterDescriptor(w);
        if (conv) a->cudnnDestroyConvolutionDescriptor(conv);
    }
};

bool fits(int64_t v) { return v >= 0 && v <= 2147483647; }

void packed_strides(int n, const int *dims, int *strides)
{
    strides[n - 1] = 1;
    for (int i = n - 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
}

/* Fills d for g; false when cuDNN cannot express it (the caller falls back). */
bool describe(descs &d, const dp_conv_geom &g, int dtype)
{
    const cudnn_api *a = d.a;
    int sp = g.nd == 3 ? 3 : 2, first = 3 - sp;          /* spatial slots used */
    int in[5], out[5], wd[5], pad[3], str[3], dil[3], is[5], os[5];
    int64_t vals[] = { g.batch, g.in_channels, g.out_channels, g.in_channels / g.groups,
                       g.batch * g.in_channels * g.in[0] * g.in[1] * g.in[2],
                       g.batch * g.out_channels * g.out[0] * g.out[1] * g.out[2] };
    for (int64_t v : vals)
        if (!fits(v)) return false;
    in[0] = out[0] = (int)g.batch;
    in[1] = (int)g.in_channels;
    out[1] = wd[0] = (int)g.out_channels;
    wd[1] = (int)(g.in_channels / g.groups);
    for (int i = 0; i < sp; i++) {
        int s = first + i;
        in[2 + i] = (int)g.in[s];
        out[2 + i] = (int)g.out[s];
        wd[2 + i] = (int)g.kernel[s];
        pad[i] = (int)g.pad[s];
        str[i] = (int)g.stride[s];
        dil[i] = (int)g.dilation[s];
    }
    packed_strides(sp + 2, in, is);
    packed_strides(sp + 2, out, os);
    cudnnDataType_t t = dtype == DP_FLOAT32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
    if (a->cudnnCreateTensorDescriptor(&d.in) || a->cudnnCreateTensorDescriptor(&d.out) ||
        a->cudnnCreateFilterDescriptor(&d.w) || a->cudnnCreateConvolutionDescriptor(&d.conv))
        return false;
    if (a->cudnnSetTensorNdDescriptor(d.in, t, sp + 2, in, is) || a->cudnnSetTensorNdDescriptor(d.out, t, sp + 2, out, os) ||
        a->cudnnSetFilterNdDescriptor(d.w, t, CUDNN_TENSOR_NCHW, sp + 2, wd) ||
        a->cudnnSetConvolutionNdDescriptor(d.conv, sp, pad, str, dil, CUDNN_CROSS_CORRELATION, t) ||
        a->cudnnSetConvolutionGroupCount(d.conv, (int)g.groups) ||
        a->cudnnSetConvolutionMathType(d.conv, dtype == DP_FLOAT32 && dp_cuda_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH))
        return false;
    /* the same padding on both sides gives exactly this output, or cuDNN cannot do it */
    int got[5];
    if (a->cudnnGetConvolutionNdForwardOutputDim(d.conv, d.in, d.w, sp + 2, got)) return false;
    for (int i = 0; i < sp + 2; i++)
        if (got[i] != out[i]) return false;
    return true;
}

/* Runs one cuDNN call with its workspace: 1 done, 0 not done (fall back). */
template <typename F>
int with_workspace(int dev, size_t bytes, F call)
{
    void *ws = bytes ? dp_cuda_scratch_alloc(dev, bytes) : NULL;
    if (bytes && !ws) return 0;
    cudnnStatus_t st = call(ws);
    if (ws) dp_cuda_scratch_free(dev, ws);
    return st == CUDNN_STATUS_SUCCESS;
}

struct scalars {
    float f1 = 1, f0 = 0;
    double d1 = 1, d0 = 0;
    const void *one(int dt) const { return dt == DP_FLOAT32 ? (const void *)&f1 : (const void *)&d1; }
    const void *zero(int dt) const { return dt == DP_FLOAT32 ? (const void *)&f0 : (const void *)&d0; }
};

}  // namespace

/* 1 when cuDNN computed it, 0 when the caller should use im2col. */
extern "C" int dp_cuda_cudnn_conv(int which, int dtype, const dp_conv_geom *g, void *a0, const void *a1, const void *a2,
                                  bool accumulate)
{
    const cudnn_api *a = api();
    if (!a) return 0;
    int dev = dp_cuda_device_of(a0);
    if (dev < 0) return 0;
    void *stream;
    if (dp_cuda_enter(dev, &stream)) return 0;
    cudnnHandle_t h = handle_for(a, dev, (cudaStream_t)stream);
    if (!h) return 0;
    descs d;
    d.a = a;
    if (!describe(d, *g, dtype)) return 0;
    scalars s;
    const void *beta = accumulate ? s.one(dtype) : s.zero(dtype);
    /* torch.backends.cudnn.deterministic or torch.use_deterministic_algorithms: only the
     * algorithms cuDNN says are deterministic; with none, im2col (deterministic) does it */
    bool det = dp_cuda_cudnn_deterministic();
    int n = 0;
    size_t bytes = 0;
    if (which == 0) {            /* forward: a0 = out, a1 = in, a2 = w */
        cudnnConvolutionFwdAlgoPerf_t perf[8];
        if (a->cudnnGetConvolutionForwardAlgorithm_v7(h, d.in, d.w, d.conv, d.out, 8, &n, perf) || n < 1) return 0;
        for (int i = 0; i < n; i++) {
            if (perf[i].status != CUDNN_STATUS_SUCCESS || (det && perf[i].determinism != CUDNN_DETERMINISTIC)) continue;
            if (a->cudnnGetConvolutionForwardWorkspaceSize(h, d.in, d.w, d.conv, d.out, perf[i].algo, &bytes)) continue;
            return with_workspace(dev, bytes, [&](void *ws) {
                return a->cudnnConvolutionForward(h, s.one(dtype), d.in, a1, d.w, a2, d.conv, perf[i].algo, ws, bytes, beta,
                                                  d.out, a0);
            });
        }
    } else if (which == 1) {     /* input gradient: a0 = grad_in, a1 = grad_out, a2 = w */
        cudnnConvolutionBwdDataAlgoPerf_t perf[8];
        if (a->cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.out, d.conv, d.in, 8, &n, perf) || n < 1) return 0;
        for (int i = 0; i < n; i++) {
            if (perf[i].status != CUDNN_STATUS_SUCCESS || (det && perf[i].determinism != CUDNN_DETERMINISTIC)) continue;
            if (a->cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.out, d.conv, d.in, perf[i].algo, &bytes)) continue;
            return with_workspace(dev, bytes, [&](void *ws) {
                return a->cudnnConvolutionBackwardData(h, s.one(dtype), d.w, a2, d.out, a1, d.conv, perf[i].algo, ws, bytes,
                                                       beta, d.in, a0);
            });
        }
    } else {                     /* weight gradient: a0 = grad_w, a1 = grad_out, a2 = in */
        cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
        if (a->cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.in, d.out, d.conv, d.w, 8, &n, perf) || n < 1) return 0;
        for (int i = 0; i < n; i++) {
            if (perf[i].status != CUDNN_STATUS_SUCCESS || (det && perf[i].determinism != CUDNN_DETERMINISTIC)) continue;
            if (a->cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.in, d.out, d.conv, d.w, perf[i].algo, &bytes)) continue;
            return with_workspace(dev, bytes, [&](void *ws) {
                return a->cudnnConvolutionBackwardFilter(h, s.one(dtype), d.in, a2, d.out, a1, d.conv, perf[i].algo, ws, bytes,
                                                         beta, d.w, a0);
            });
        }
    }
    return 0;
}

#else

extern "C" int dp_cuda_cudnn_conv(int which, int dtype, const dp_conv_geom *g, void *a0, const void *a1, const void *a2,
                                  bool accumulate)
{
    return 0;     /* built without cuDNN's header (or for the emulation): im2col only */
}

#endif
