# launch.sed: rewrites CUDA kernel launches for the emulation (see include/cuda_runtime.h):
#   name<targs><<<grid, block, shared, stream>>>(args   ->
#   ::emu::launch(::emu::cfg(grid, block, shared, stream), "name", name<targs>, args
# One launch per line, as in kernels/.
s/([A-Za-z_][A-Za-z0-9_]*)(<[^;]*>)?<<<(.*)>>>\(/::emu::launch(::emu::cfg(\3), "\1", \1\2, /
#   __shared__ T name[N];   ->   EMU_SHARED(name, [N], T);   (poisoned at each block's start)
s/^([[:space:]]*)__shared__[[:space:]]+(.*[^[:space:]])[[:space:]]+([A-Za-z_][A-Za-z0-9_]*)((\[[^]]*\])*);/\1EMU_SHARED(\3, \4, \2);/
