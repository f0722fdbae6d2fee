-- nccl_leaves.lua MODE: DDP over nccl (the emulated NCCL, a GPU per rank) where rank 1
-- stops taking part; NCCL itself would hang, the emulation must end the job with a message.
--   leaves  rank 1 never calls backward and destroys its group; rank 0's gradient
--           all-reduce fails when rank 0 reads a result
--   exits   rank 1 exits (without destroy_process_group) before backward
local dist = require 'torch.distributed'
local mode = arg[1] or 'leaves'
dist.init_process_group { backend = 'nccl' }
local rank = dist.get_rank()
local dev = ('cuda:%d'):format(rank)
local ddp = nn.DistributedDataParallel(nn.Linear(4, 2):to(dev))
local out = ddp(torch.ones(3, 4, { device = dev })):sum()
dist.all_reduce(torch.ones(1, { device = dev }))   -- the communicator exists on every rank
if rank == 1 then
  if mode == 'exits' then os.exit(0) end
  dist.destroy_process_group()
  os.exit(0)
end
out:backward()
print(ddp(torch.ones(3, 4, { device = dev })):sum():item())   -- waits for the all-reduce
print('rank ' .. rank .. ' should not get here')
