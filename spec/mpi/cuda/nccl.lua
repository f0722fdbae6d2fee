-- cuda/nccl.lua: backend 'nccl' refuses two ranks on one GPU, before NCCL is reached, with
-- the same error on every rank.  spec/mpi/run runs it on the emulated GPU (which has no
-- NCCL: a group that passes the check fails at ncclGetUniqueId instead):
--   dplua spec/mpi/cuda/nccl.lua own      rank r on cuda:(r % 2)
--   dplua spec/mpi/cuda/nccl.lua shared   every rank on cuda:1
--   dplua spec/mpi/cuda/nccl.lua virtual  rank r on cuda:(r % 2), two virtual devices of one
--                                         GPU (DPLUA_EMU_GPUS=1 DPLUA_CUDA_VIRTUAL=2)
local check = dofile((arg[0]:match('^(.*)/') or '.') .. '/../lib/check.lua')
local dist = require 'torch.distributed'
local test, raises = check.test, check.raises

local mode = arg[1] or 'own'
local ok = torch.cuda.is_available() and torch.cuda.device_count() >= 2 and dist.is_nccl_available()
dist.init_process_group { backend = ok and 'nccl' or 'mpi' }
local rank, world = dist.get_rank(), dist.get_world_size()
local dev = mode == 'shared' and 1 or rank % 2

test(('[%s] nccl with ranks sharing a GPU raises naming the ranks and the fix'):format(mode), function()
  if not ok then check.skip('needs two CUDA devices and the nccl backend') end
  local t = torch.ones(2, { device = ('cuda:%d'):format(dev) })
  if mode == 'own' and world == 2 then
    -- one rank per GPU passes the check; the emulation then has no NCCL
    local err = raises(function() dist.all_reduce(t) end, 'ncclGetUniqueId')
    if err:find('two ranks on one GPU', 1, true) then error('ranks on different GPUs were refused: ' .. err) end
    return
  end
  -- ranks 0 and 1 share cuda:1 (shared) or physical GPU 0 (virtual), or ranks 0 and 2 share
  -- cuda:0 (own, 3 ranks)
  local other = mode == 'own' and 2 or 1
  local gpu = ('0000:%02x:00.0'):format((mode == 'shared' and 1 or 0) + 1)   -- the emulation's bus ids
  raises(function() dist.all_reduce(t) end,
    "backend 'nccl' cannot put two ranks on one GPU", ('ranks 0 and %d both on GPU'):format(other), gpu,
    "use backend = 'mpi'")
  raises(function() dist.broadcast(t, 0) end, 'two ranks on one GPU')   -- and again: nothing was made
end)

check.finish()
dist.destroy_process_group()
