/* registers_kernel.cuh: a kernel that keeps 96 floats live per thread, with no
 * __launch_bounds__, so that nvcc gives it well over 64 registers (255 with CUDA 13): too
 * many for a block of 1024 threads (65536 registers per block).  selftest.cu launches it; the build compiles
 * it with nvcc for sm_90 (spec/cudaemu/registers.sh) to learn its count. */
#define HEAVY_VALUES 96

static __global__ void register_heavy_kernel(float *p)
{
    float a[HEAVY_VALUES];
#pragma unroll
    for (int i = 0; i < HEAVY_VALUES; i++) a[i] = p[i * blockDim.x + threadIdx.x];
    float s = 0;
#pragma unroll
    for (int i = 0; i < HEAVY_VALUES; i++) s += a[i] * a[HEAVY_VALUES - 1 - i] + a[(i * 7) % HEAVY_VALUES];
#pragma unroll
    for (int i = 0; i < HEAVY_VALUES; i++) p[i * blockDim.x + threadIdx.x] = a[i] * s;
}
