-- allreduce.lua: torch.distributed.all_reduce (sum, in place) on float32 tensors of 1 KB
-- to 256 MB, timed exactly as its plain-MPI twin bench/allreduce_mpi.c times MPI_Allreduce.
-- Prints "ALLREDUCE <bytes> <seconds per call> <bus GB/s>" (bus bandwidth: bytes / time *
-- 2 (N-1) / N, the traffic of a ring all-reduce, comparable across process counts).
--   mpirun --allow-run-as-root --oversubscribe -np 2 dplua bench/allreduce.lua
-- bench/allreduce.run runs both and prints the ratio.
local dist = require 'torch.distributed'
dist.init_process_group { backend = 'mpi' }
torch.set_num_threads(1)
local rank, world = dist.get_rank(), dist.get_world_size()

local bytes = 1024
while bytes <= 256 * 1024 * 1024 do
  local n = bytes // 4
  local buf = torch.zeros(n)
  local iters = math.max(3, math.min(2000, (128 * 1024 * 1024) // bytes))
  for _ = 1, 2 do dist.all_reduce(buf) end
  local samples = {}
  local dt = torch.zeros(1, { dtype = 'float64' })
  for s = 1, 5 do
    dist.barrier()
    local timer = torch.Timer()
    for _ = 1, iters do dist.all_reduce(buf) end
    dt[1] = timer:time().real / iters
    dist.all_reduce(dt, 'max')
    samples[s] = dt[1]
  end
  -- the result must be the sum (the timed loop sums zeros, which would hide a wrong one)
  buf:fill(rank + 1)
  dist.all_reduce(buf)
  local want = world * (world + 1) / 2
  if buf:min():item() ~= want or buf:max():item() ~= want then
    error(('all_reduce of %d bytes: expected every element to be %g, got %g to %g'):format(
      bytes, want, buf:min():item(), buf:max():item()))
  end
  buf:zero()
  table.sort(samples)
  local t = samples[3]
  local busbw = bytes / t * 2 * (world - 1) / world / 1e9
  if rank == 0 then
    print(('ALLREDUCE %d %.9g %.6g'):format(bytes, t, busbw))
    io.stdout:flush()
  end
  buf = nil
  collectgarbage()
  bytes = bytes * 4
end
dist.destroy_process_group()
