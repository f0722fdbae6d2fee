-- rank_leaves.lua MODE: rank 1 finishes early and cleanly (destroy_process_group, then a
-- normal exit) while the others still wait for it.  The job must end within a bounded time
-- with a message that names rank 1 and what the others were waiting in.
--   steps      rank 1 makes fewer all_reduce calls than the others
--   backward   rank 1 never calls backward; the others wait in DDP's gradient all-reduce
--   linger     rank 1 destroys its group, then keeps running for a while before exiting
--   backward_cuda  as backward, with the model on cuda:0 (the emulated GPU: the all-reduce
--              waits on DDP's communication thread)
local dist = require 'torch.distributed'
local mode = arg[1] or 'steps'
dist.init_process_group { backend = 'mpi' }
local rank = dist.get_rank()

if mode == 'backward' or mode == 'backward_cuda' then
  local dev = mode == 'backward_cuda' and 'cuda:0' or 'cpu'
  local ddp = nn.DistributedDataParallel(nn.Linear(4, 2):to(dev))
  local out = ddp(torch.ones(3, 4, { device = dev })):sum()
  if rank ~= 1 then
    out:backward()
    ddp(torch.ones(3, 4, { device = dev }))   -- the failed reduction is raised at the next forward
    print('rank ' .. rank .. ' should not get here')
  end
  dist.destroy_process_group()
  os.exit(0)
end

local t = torch.ones(4)
local steps = rank == 1 and 3 or 5
for _ = 1, steps do dist.all_reduce(t) end
if rank == 1 then
  dist.destroy_process_group()
  if mode == 'linger' then
    local t0 = os.time()
    while os.time() - t0 < 60 do end   -- the others must not wait for this
  end
  os.exit(0)
end
print('rank ' .. rank .. ' should not get here')
