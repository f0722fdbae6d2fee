-- cuda/nccl.lua: torch.distributed's nccl backend on CUDA tensors, and
-- nn.DistributedDataParallel over it.  spec/mpi/run runs it under mpirun on the emulated
-- GPU (spec/cudaemu, whose NCCL moves the bytes between the processes):
--   dplua spec/mpi/cuda/nccl.lua own      rank r on cuda:(r % GPUs): with a GPU per rank, the
--                                         collectives and DDP; else ranks share one and are refused
--   dplua spec/mpi/cuda/nccl.lua shared   every rank on cuda:1: refused
--   dplua spec/mpi/cuda/nccl.lua virtual  rank r on cuda:(r % 2), two virtual devices of one
--                                         GPU (DPLUA_EMU_GPUS=1 DPLUA_CUDA_VIRTUAL=2): refused
-- The collectives are checked against sums and averages worked out here from what every rank
-- holds, DDP against one process training on the full batches on the CPU.
local check = dofile((arg[0]:match('^(.*)/') or '.') .. '/../lib/check.lua')
local reference = dofile((arg[0]:match('^(.*)/') or '.') .. '/../lib/ddp_reference.lua')
local dist = require 'torch.distributed'
local test, eq, raises = check.test, check.eq, check.raises

torch.set_num_threads(1)
local mode = arg[1] or 'own'
local gpus = torch.cuda.is_available() and torch.cuda.device_count() or 0
local ok = gpus >= 2 and dist.is_nccl_available()
dist.init_process_group { backend = ok and 'nccl' or 'mpi' }
local rank, world = dist.get_rank(), dist.get_world_size()
local dev = mode == 'shared' and 1 or rank % math.max(gpus, 1)
local device = ('cuda:%d'):format(dev)
-- one GPU per rank: nccl works; otherwise two ranks share a physical GPU and it refuses
local own_gpus = mode == 'own' and world <= gpus

local function need(own)
  if not ok then check.skip('needs two CUDA devices and the nccl backend') end
  if own and not own_gpus then check.skip(('ranks share a GPU here (%s, %d ranks, %d GPUs)'):format(mode, world, gpus)) end
  if not own and own_gpus then check.skip('every rank has its own GPU here') end
end

-- refusing ranks that share a GPU ------------------------------------------------------------

test(('[%s] nccl with ranks sharing a GPU raises naming the ranks and the fix'):format(mode), function()
  need(false)
  local t = torch.ones(2, { device = device })
  -- ranks 0 and 1 share cuda:1 (shared) or physical GPU 0 (virtual), or ranks 0 and 2 share
  -- cuda:0 (own, 3 ranks on 2 GPUs)
  local other = mode == 'own' and 2 or 1
  local gpu = ('0000:%02x:00.0'):format((mode == 'shared' and 1 or 0) + 1)   -- the emulation's bus ids
  raises(function() dist.all_reduce(t) end,
    "backend 'nccl' cannot put two ranks on one GPU", ('ranks 0 and %d both on GPU'):format(other), gpu,
    "use backend = 'mpi'")
  raises(function() dist.broadcast(t, 0) end, 'two ranks on one GPU')   -- and again: nothing was made
end)

-- collectives --------------------------------------------------------------------------------

-- what rank r holds: integers, so every sum is exact
local function held(r, dtype, d)
  return torch.arange(6, { dtype = dtype, device = d }) * (r + 1) - 2 * r
end

test(('[%s] all_reduce over nccl: each op and dtype, as worked out from every rank\'s tensor'):format(mode), function()
  need(true)
  for _, dtype in ipairs { 'float32', 'float64', 'int64' } do
    local all = {}
    for r = 0, world - 1 do all[r + 1] = held(r, dtype) end
    local stacked = torch.stack(all)
    -- NCCL's average: of floats close to sum / world, of integers the sum divided, truncated
    local truncated = {}
    for i = 0, 5 do
      local sum = i * world * (world + 1) / 2 - world * (world - 1)
      truncated[i + 1] = sum >= 0 and sum // world or -((-sum) // world)
    end
    local want = {
      sum = stacked:sum(1), max = stacked:max(1), min = stacked:min(1),
      avg = dtype == 'int64' and torch.tensor(truncated, { dtype = 'int64' }) or stacked:sum(1) / world,
    }
    for _, op in ipairs { 'sum', 'avg', 'max', 'min' } do
      local t = held(rank, dtype, device)
      dist.all_reduce(t, op)
      eq(tostring(t.device), device, 'the result stays on ' .. device)
      if op == 'avg' and dtype ~= 'int64' then check.close(t:cpu(), want.avg, 1e-12, 'avg ' .. dtype)
      else check.equal_tensors(t:cpu(), want[op]:to(dtype), ('%s %s'):format(op, dtype)) end
    end
  end
  -- bools: sum and max are "or", min is "and"
  local b = torch.tensor({ rank == 0, rank == 1, true, false }, { device = device })
  local b2 = b:clone()
  dist.all_reduce(b, 'sum')
  dist.all_reduce(b2, 'min')
  check.equal_tensors(b:cpu(), torch.tensor({ true, true, true, false }), 'bool sum')
  check.equal_tensors(b2:cpu(), torch.tensor({ false, false, true, false }), 'bool min')
end)

test(('[%s] all_reduce into a non-contiguous CUDA view writes back; a big tensor in several chunks'):format(mode), function()
  need(true)
  local m = torch.zeros(3, 4, { device = device })
  local col = m:select(2, 2)
  col:fill_(rank + 1)
  dist.all_reduce(col)
  local want = torch.zeros(3, 4)
  want:select(2, 2):fill_(world * (world + 1) / 2)
  check.equal_tensors(m:cpu(), want, 'matrix')
  -- 3 MB: several chunks of the emulation's 1 MiB slots
  local n = 3 * 2 ^ 18
  local big = torch.arange(n, { dtype = 'float32', device = device }):remainder(1000) + rank
  dist.all_reduce(big)
  local expect = torch.arange(n, { dtype = 'float32' }):remainder(1000) * world + world * (world - 1) / 2
  check.equal_tensors(big:cpu(), expect, 'big sum')
end)

test(('[%s] broadcast and all_gather over nccl; barrier'):format(mode), function()
  need(true)
  for src = 0, world - 1 do
    local t = (torch.arange(5, { dtype = 'float64' }) + 10 * rank):to(device)
    dist.broadcast(t, src)
    check.equal_tensors(t:cpu(), torch.arange(5, { dtype = 'float64' }) + 10 * src, 'broadcast from ' .. src)
  end
  local list = {}
  for r = 1, world do list[r] = torch.zeros(2, 2, { dtype = 'int64', device = device }) end
  dist.all_gather(list, torch.full({ 2, 2 }, rank * 7, { dtype = 'int64', device = device }))
  for r = 1, world do
    eq(tostring(list[r].device), device, 'gathered tensor device')
    check.equal_tensors(list[r]:cpu(), torch.full({ 2, 2 }, (r - 1) * 7, { dtype = 'int64' }), 'from rank ' .. r - 1)
  end
  dist.barrier()
end)

test(('[%s] nccl refuses CPU tensors, naming the backend to use'):format(mode), function()
  need(true)
  raises(function() dist.all_reduce(torch.ones(2)) end, 'the nccl backend takes CUDA tensors', "backend='mpi'")
end)

-- DistributedDataParallel --------------------------------------------------------------------

local net = reference.net

local function ddp_case(dtype, tol)
  need(true)
  local B, steps = 4, 8
  -- the reference: one process on the full batches, on the CPU
  local X, Y, state, ref = reference.reference(dtype, world, B, steps)
  local crit = nn.MSELoss()
  -- this rank's share of each global batch, on its GPU, with DDP over nccl
  local model = net(dtype)
  model:load_state_dict(state)
  model:to(device)
  local ddp = nn.DistributedDataParallel(model, { bucket_cap_mb = 0.0001 })
  local opt = optim.SGD(ddp:parameters(), { lr = 0.05, momentum = 0.9 })
  local syncs, before_all = 0, dist._cuda_host_syncs()   -- the host's waits for the device inside backward
  for s = 0, steps - 1 do
    local first = s * world * B + rank * B + 1
    opt:zero_grad()
    local loss = crit(ddp(X:narrow(1, first, B):to(device)), Y:narrow(1, first, B):to(device))
    local before = dist._cuda_host_syncs()
    loss:backward()
    syncs = syncs + dist._cuda_host_syncs() - before
    opt:step()
  end
  local got = {}
  for i, p in ipairs(model:parameters()) do got[i] = p:detach():cpu() end
  -- backward never made the host wait for the device, though the run as a whole did (reading
  -- the parameters back waits: the counter counts)
  eq(syncs, 0, 'host synchronisations during backward')
  if dist._cuda_host_syncs() - before_all < #got then error('the host-sync counter counted nothing') end
  for i, p in ipairs(got) do
    check.close(p, ref:parameters()[i], tol, ('parameter %d: DDP over nccl on %s against one process'):format(i, device))
  end
  local moved = (got[1] - state['1.weight']):abs():max():item()
  if moved < 1e-3 then error(('the parameters hardly moved (%g): the check proves nothing'):format(moved)) end
  local stats, buckets = ddp:reducer_stats(), ddp:buckets()
  if #buckets < 3 then error('expected several buckets with a 100-byte cap, got ' .. #buckets) end
  eq(stats.passes, steps, 'averaged passes')
  eq(stats.allreduces, steps * #buckets, 'bucket all-reduces')
  if stats.early < steps then error(('only %d all-reduces started before backward finished'):format(stats.early)) end
end

test(('[%s] DDP over nccl: the parameters of one process on the full batches (float64, momentum, 8 steps)'):format(mode),
  function() ddp_case('float64', 1e-12) end)

test(('[%s] ... float32'):format(mode), function() ddp_case('float32', 2e-6) end)

check.finish()
dist.destroy_process_group()
