/* vision_window.h: the pooling windows, shared by the CPU kernels (cpu_vision.c) and the
 * CUDA kernels (kernels/vision.cu) so that both compute PyTorch 1.13's windows from the
 * same text.  An output position o of one spatial dimension reads the input rows
 * start, start + dil, ... below end. */
#ifndef DP_VISION_WINDOW_H
#define DP_VISION_WINDOW_H

#include <stdint.h>

#ifdef __CUDACC__
#define DP_WINDOW_FN __host__ __device__ __forceinline__
#else
#define DP_WINDOW_FN static inline
#endif

/* max pooling: the window starts k*dil before its end; rows in the padding are skipped by
 * stepping start forward by whole dilations, as PyTorch does */
DP_WINDOW_FN void dp_max_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                                int64_t *start, int64_t *end)
{
    int64_t a = o * s - p, b = a + (k - 1) * d + 1;
    if (b > in) b = in;
    while (a < 0) a += d;
    *start = a;
    *end = b;
}

/* average pooling: *len is the window's size counting the padding it covers (what
 * count_include_pad divides by); start and end are clipped to the input */
DP_WINDOW_FN void dp_avg_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t p,
                                int64_t *start, int64_t *end, int64_t *len)
{
    int64_t a = o * s - p, b = a + k;
    if (b > in + p) b = in + p;
    *len = b - a;
    if (a < 0) a = 0;
    if (b > in) b = in;
    *start = a;
    *end = b;
}

/* adaptive pooling: [floor(o*in/out), ceil((o+1)*in/out)) */
DP_WINDOW_FN void dp_adaptive_window(int64_t o, int64_t in, int64_t out, int64_t *start, int64_t *end)
{
    *start = o * in / out;
    *end = ((o + 1) * in + out - 1) / out;
}

#endif
