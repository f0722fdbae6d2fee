-- cuda/ddp.lua: torch.distributed's mpi backend on CUDA tensors (staged through pinned host
-- memory) and nn.DistributedDataParallel on a CUDA model over it.  spec/mpi/run runs it under
-- mpirun on the emulated GPU (DPLUA_CUDA_LIB=build-emu/libdplua_cuda.so, DPLUA_EMU_GPUS=2):
--   dplua spec/mpi/cuda/ddp.lua own      rank r on cuda:(r % 2)
--   dplua spec/mpi/cuda/ddp.lua shared   every rank on cuda:1
--   dplua spec/mpi/cuda/ddp.lua virtual  as own, on two virtual devices of one GPU
--                                        (DPLUA_EMU_GPUS=1 DPLUA_CUDA_VIRTUAL=2)
-- The CUDA results are checked against the same calls on CPU tensors, and DDP against one
-- process training on the full batches.
local check = dofile((arg[0]:match('^(.*)/') or '.') .. '/../lib/check.lua')
local reference = dofile((arg[0]:match('^(.*)/') or '.') .. '/../lib/ddp_reference.lua')
local dist = require 'torch.distributed'
local test, eq = check.test, check.eq

torch.set_num_threads(1)
dist.init_process_group { backend = 'mpi' }
local rank, world = dist.get_rank(), dist.get_world_size()
local mode = arg[1] or 'own'
local dev = mode == 'shared' and 'cuda:1' or ('cuda:%d'):format(rank % 2)

local function need_cuda()
  if not torch.cuda.is_available() or torch.cuda.device_count() < 2 then check.skip('needs two CUDA devices') end
end

-- collectives ---------------------------------------------------------------------------

test(('[%s] all_reduce of CUDA tensors: each op and dtype, as on the CPU'):format(mode), function()
  need_cuda()
  for _, dtype in ipairs { 'float32', 'float64', 'int64' } do
    for _, op in ipairs { 'sum', 'avg', 'max', 'min' } do
      local cpu = torch.arange(6, { dtype = dtype }) * (rank + 1) - 2 * rank
      local gpu = cpu:to(dev)
      dist.all_reduce(cpu, op)
      dist.all_reduce(gpu, op)
      eq(tostring(gpu.device), dev, 'the result stays on ' .. dev)
      check.equal_tensors(gpu:cpu(), cpu, ('%s %s'):format(op, dtype))
    end
  end
  -- the expected sum, worked out by hand: sum over r of (i*(r+1) - 2r)
  local t = torch.arange(3, { dtype = 'float64', device = dev }) * (rank + 1) - 2 * rank
  dist.all_reduce(t)
  local want = torch.arange(3, { dtype = 'float64' }) * (world * (world + 1) / 2) - world * (world - 1)
  check.equal_tensors(t:cpu(), want, 'sum by hand')
end)

test(('[%s] all_reduce into a non-contiguous CUDA view writes back'):format(mode), function()
  need_cuda()
  local m = torch.zeros(3, 4, { device = dev })
  local col = m:select(2, 2)
  col:fill_(rank + 1)
  dist.all_reduce(col)
  local want = torch.zeros(3, 4)
  want:select(2, 2):fill_(world * (world + 1) / 2)
  check.equal_tensors(m:cpu(), want, 'matrix')
end)

test(('[%s] broadcast and all_gather of CUDA tensors; barrier'):format(mode), function()
  need_cuda()
  for src = 0, world - 1 do
    local t = (torch.arange(5, { dtype = 'float64' }) + 10 * rank):to(dev)
    dist.broadcast(t, src)
    check.equal_tensors(t:cpu(), torch.arange(5, { dtype = 'float64' }) + 10 * src, 'broadcast from ' .. src)
  end
  local list = {}
  for r = 1, world do list[r] = torch.zeros(2, 2, { dtype = 'int64', device = dev }) end
  dist.all_gather(list, torch.full({ 2, 2 }, rank * 7, { dtype = 'int64', device = dev }))
  for r = 1, world do
    eq(tostring(list[r].device), dev, 'gathered tensor device')
    check.equal_tensors(list[r]:cpu(), torch.full({ 2, 2 }, (r - 1) * 7, { dtype = 'int64' }), 'from rank ' .. r - 1)
  end
  dist.barrier()
end)

-- DistributedDataParallel -------------------------------------------------------------------

local net = reference.net

-- Trains net on device d with DDP (this rank's share of each global batch of world * B rows)
-- and returns the model's parameters on the CPU, and the DDP module.
local function train(d, dtype, state, X, Y, B, steps, cap_mb)
  local model = net(dtype)
  model:load_state_dict(state)
  model:to(d)
  local ddp = nn.DistributedDataParallel(model, { bucket_cap_mb = cap_mb })
  local opt = optim.SGD(ddp:parameters(), { lr = 0.05, momentum = 0.9 })
  local crit = nn.MSELoss()
  local syncs = 0   -- the host's waits for the device inside backward, over every step
  for s = 0, steps - 1 do
    local first = s * world * B + rank * B + 1
    opt:zero_grad()
    local loss = crit(ddp(X:narrow(1, first, B):to(d)), Y:narrow(1, first, B):to(d))
    local before = dist._cuda_host_syncs()
    loss:backward()
    syncs = syncs + dist._cuda_host_syncs() - before
    opt:step()
  end
  local out = {}
  for i, p in ipairs(model:parameters()) do out[i] = p:detach():cpu() end
  return out, ddp, syncs
end

local function ddp_case(dtype, tol)
  need_cuda()
  local B, steps = 4, 8
  -- the reference: one process on the full batches, on the CPU
  local X, Y, state, ref = reference.reference(dtype, world, B, steps)
  local on_cpu = train('cpu', dtype, state, X, Y, B, steps, 0.0001)
  local before = dist._cuda_host_syncs()
  local on_gpu, ddp, syncs = train(dev, dtype, state, X, Y, B, steps, 0.0001)
  -- backward never made the host wait for the device, though the run as a whole did (the
  -- counter counts: reading the parameters back waits)
  eq(syncs, 0, 'host synchronisations during backward')
  if dist._cuda_host_syncs() - before < #on_gpu then error('the host-sync counter counted nothing') end
  for i, p in ipairs(on_gpu) do
    check.close(p, on_cpu[i], tol, ('parameter %d: DDP on %s against DDP on the CPU'):format(i, dev))
    check.close(p, ref:parameters()[i], tol, ('parameter %d: DDP on %s against one process'):format(i, dev))
  end
  -- the run did move: the parameters are not the initial ones
  local moved = (on_gpu[1] - state['1.weight']):abs():max():item()
  if moved < 1e-3 then error(('the parameters hardly moved (%g): the check proves nothing'):format(moved)) end
  local stats, buckets = ddp:reducer_stats(), ddp:buckets()
  if #buckets < 3 then error('expected several buckets with a 100-byte cap, got ' .. #buckets) end
  eq(stats.passes, steps, 'averaged passes')
  eq(stats.allreduces, steps * #buckets, 'bucket all-reduces')
  if stats.early < steps then error(('only %d all-reduces started before backward finished'):format(stats.early)) end
  return ddp
end

test(('[%s] DDP on CUDA over mpi: the parameters of the CPU run (float64, momentum, 8 steps)'):format(mode),
  function() ddp_case('float64', 1e-12) end)

test(('[%s] ... float32'):format(mode), function() ddp_case('float32', 2e-6) end)

check.finish()
dist.destroy_process_group()
