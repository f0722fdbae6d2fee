-- mismatch.lua MODE: the ranks call a collective with different tensors.  Every rank must
-- raise an error that names each rank's call, instead of MPI_ERR_TRUNCATE on one rank and
-- garbage on the other.  Prints "mismatch raised on rank R: <message>" and exits 0.
--   numel      all_reduce of 4 float32 elements on rank 0, 5 elsewhere
--   dtype      all_reduce of float32 on rank 0, float64 elsewhere
--   call       broadcast on rank 0, all_reduce elsewhere
local dist = require 'torch.distributed'
local mode = arg[1] or 'numel'
dist.init_process_group { backend = 'mpi' }
local rank = dist.get_rank()

local ok, err = pcall(function()
  if mode == 'numel' then dist.all_reduce(torch.ones(rank == 0 and 4 or 5))
  elseif mode == 'dtype' then dist.all_reduce(torch.ones(4, { dtype = rank == 0 and 'float32' or 'float64' }))
  else
    if rank == 0 then dist.broadcast(torch.ones(4), 0) else dist.all_reduce(torch.ones(4)) end
  end
end)
if ok then print('mismatch not detected on rank ' .. rank) else print('mismatch raised on rank ' .. rank .. ': ' .. tostring(err)) end
-- the group is still usable afterwards
local t = torch.ones(2)
dist.all_reduce(t)
print(('after the mismatch rank %d sums to %g'):format(rank, t[1]))
dist.destroy_process_group()
