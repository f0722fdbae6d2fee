-- rank_fails.lua MODE: one rank fails while the others wait for it in a collective.  The
-- whole job must stop with a non-zero status, quickly, with the first error printed.
--   error      rank 1 raises a Lua error while the others are in all_reduce
--   exit       rank 1 calls os.exit(0) while the others are in all_reduce
--   exit3      rank 1 calls os.exit(3)
--   backward   rank 1 raises between forward and backward; the others wait in DDP's reducer
local dist = require 'torch.distributed'
local mode = arg[1] or 'error'
dist.init_process_group { backend = 'mpi' }
local rank = dist.get_rank()
local t = torch.ones(4)
dist.all_reduce(t)   -- everyone got this far

if mode == 'backward' then
  local ddp = nn.DistributedDataParallel(nn.Linear(4, 2))
  local out = ddp(torch.ones(3, 4)):sum()
  if rank == 1 then error('boom from rank 1 before backward') end
  out:backward()
  print('rank ' .. rank .. ' should not get here')
  os.exit(0)
end

if rank == 1 then
  if mode == 'error' then error('boom from rank 1') end
  if mode == 'exit' then os.exit(0) end
  if mode == 'exit3' then os.exit(3) end
end
for _ = 1, 1000 do dist.all_reduce(t) end
print('rank ' .. rank .. ' should not get here')
