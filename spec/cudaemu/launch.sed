# launch.sed: rewrites CUDA kernel launches for the emulation (see include/cuda_runtime.h):
#   name<targs><<<grid, block, shared, stream>>>(args   ->
#   ::emu::launch(::emu::cfg(grid, block, shared, stream), "name", name<targs>, args
# One launch per line, as in kernels/.
s/([A-Za-z_][A-Za-z0-9_]*)(<[^;]*>)?<<<(.*)>>>\(/::emu::launch(::emu::cfg(\3), "\1", \1\2, /
#   __shared__ T a[N], b[M];   ->   __shared__ T a[N]; __shared__ T b[M];   (one per declaration)
:split
s/__shared__ ([A-Za-z_][A-Za-z0-9_:<>]*( [A-Za-z_][A-Za-z0-9_:<>]*)*) ([A-Za-z_][A-Za-z0-9_]*)((\[[^]]*\])*),[[:space:]]*/__shared__ \1 \3\4; __shared__ \1 /
t split
#   __shared__ T name[N];   ->   EMU_SHARED(name, [N], T);   (poisoned at each block's start)
s/__shared__ ([A-Za-z_][A-Za-z0-9_:<>]*( [A-Za-z_][A-Za-z0-9_:<>]*)*) ([A-Za-z_][A-Za-z0-9_]*)((\[[^]]*\])*);/EMU_SHARED(\3, \4, \1);/g
