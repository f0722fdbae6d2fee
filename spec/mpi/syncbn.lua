-- syncbn.lua: nn.SyncBatchNorm under nn.DistributedDataParallel over MPI.  The reference is
-- one process running plain batch norm on every rank's batch at once (ranks hold batches
-- of different sizes): outputs, running statistics and gradients (DDP averages the
-- parameters' gradients, so they are the reference's over the world size) must match.
local check = dofile((arg[0]:match('^(.*)/') or '.') .. '/lib/check.lua')
local dist = require 'torch.distributed'
local test, eq = check.test, check.eq

torch.set_num_threads(1)
dist.init_process_group { backend = 'mpi' }
local rank, world = dist.get_rank(), dist.get_world_size()

local function net(sync)
  torch.manual_seed(31)
  local m = nn.Sequential(nn.Linear(5, 3), nn.BatchNorm1d(3, { momentum = 0.2 })):double()
  torch.no_grad(function() m[2].weight:uniform_(0.5, 1.5); m[2].bias:uniform_(-1, 1) end)
  if sync then m = nn.SyncBatchNorm.convert_sync_batchnorm(m) end
  return m
end

-- rank r's batch of a step (4 + r samples) and the gradient its loss weights it by
local function batch(r, step)
  torch.manual_seed(100 * step + r)
  return torch.randn(4 + r, 5, { dtype = 'float64' }) * (r + 1) + r, torch.randn(4 + r, 3, { dtype = 'float64' })
end

test('convert_sync_batchnorm keeps the parameters, buffers and state_dict keys', function()
  local m = net(false)
  local w, rm = m[2].weight, m[2].running_mean
  local s = nn.SyncBatchNorm.convert_sync_batchnorm(m)
  eq(torch.typename(s[2]), 'nn.SyncBatchNorm', 'converted child')
  eq(rawequal(s[2].weight, w) and rawequal(s[2].running_mean, rm), true, 'same tensors')
  local keys = {}
  for k in pairs(s:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  eq(table.concat(keys, ','), '1.bias,1.weight,2.bias,2.num_batches_tracked,2.running_mean,2.running_var,2.weight', 'keys')
  eq(tostring(nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm2d(4))):match('^%a+'), 'SyncBatchNorm', 'top level')
end)

test('two steps match one process on the whole batch (outputs, statistics, gradients)', function()
  local m = net(true)
  local ddp = nn.DistributedDataParallel(m)
  local ref = net(false)
  local opt = optim.SGD(m:parameters(), { lr = 0.1 })
  local ropt = optim.SGD(ref:parameters(), { lr = 0.1 / world })   -- DDP averages: the reference's sum / world
  for step = 1, 2 do
    local xs, gs, starts, at = {}, {}, {}, 1
    for r = 0, world - 1 do
      xs[r + 1], gs[r + 1] = batch(r, step)
      starts[r + 1] = at
      at = at + xs[r + 1]:size(1)
    end
    local x, g = batch(rank, step)
    opt:zero_grad()
    local y = ddp(x)
    ;(y * g):sum():backward()
    ropt:zero_grad()
    local Y = ref(torch.cat(xs, 1))
    ;(Y * torch.cat(gs, 1)):sum():backward()
    check.close(y, Y:narrow(1, starts[rank + 1], x:size(1)), 1e-10, ('step %d output on rank %d'):format(step, rank))
    local pm, pr = m:parameters(), ref:parameters()
    for i = 1, #pm do
      check.close(pm[i].grad, pr[i].grad / world, 1e-10, ('step %d gradient of parameter %d'):format(step, i))
    end
    check.close(m[2].running_mean, ref[2].running_mean, 1e-12, 'running_mean')
    check.close(m[2].running_var, ref[2].running_var, 1e-12, 'running_var')
    eq(m[2].num_batches_tracked:item(), step, 'num_batches_tracked')
    opt:step()
    ropt:step()
  end
  -- eval: the running statistics, no communication
  ddp:eval()
  local x = batch(7, 9)
  ref:eval()
  check.close(ddp(x), ref(x), 1e-10, 'eval output')
end)

check.finish()
