-- batchnorm.lua: batch norm's buffers under nn.DistributedDataParallel over MPI, as
-- PyTorch 1.13 keeps them: with broadcast_buffers (the default) every forward starts from
-- rank 0's running statistics and each rank then updates its own copy from its own batch;
-- without it each rank's statistics follow its own batches only.  The references are
-- computed on every rank from every rank's batches (drawn from per-rank seeds).
local check = dofile((arg[0]:match('^(.*)/') or '.') .. '/lib/check.lua')
local dist = require 'torch.distributed'
local test, eq = check.test, check.eq

torch.set_num_threads(1)
dist.init_process_group { backend = 'mpi' }
local rank, world = dist.get_rank(), dist.get_world_size()

local function net()
  torch.manual_seed(77)
  return nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4, { momentum = 0.3 })):double()
end

-- batch `step` of rank r, the same on every rank
local function batch(r, step)
  torch.manual_seed(1000 * step + r)
  return torch.randn(6, 5, { dtype = 'float64' }) * (r + 1) + r
end

local function bn_state(m)
  return { m[2].running_mean:clone(), m[2].running_var:clone(), m[2].num_batches_tracked:item() }
end

local function same_state(got, want, what)
  check.close(got[1], want[1], 1e-12, what .. ' running_mean')
  check.close(got[2], want[2], 1e-12, what .. ' running_var')
  eq(got[3], want[3], what .. ' num_batches_tracked')
end

for _, broadcast in ipairs { true, false } do
  test(('running statistics after 3 steps, broadcast_buffers=%s'):format(tostring(broadcast)), function()
    local m = net()
    local ddp = nn.DistributedDataParallel(m, { broadcast_buffers = broadcast })
    for step = 1, 3 do
      local out = ddp(batch(rank, step))
      out:sum():backward()
    end
    -- the reference on this rank: rank 0's module before the last step (when broadcast),
    -- then this rank's batch
    local ref = net()
    local last_start
    for step = 1, 3 do
      if step == 3 then last_start = bn_state(ref) end
      ref(batch(broadcast and 0 or rank, step))
    end
    if broadcast and rank ~= 0 then
      local r = net()
      torch.no_grad(function()
        r[2].running_mean:copy_(last_start[1]); r[2].running_var:copy_(last_start[2])
        r[2].num_batches_tracked:fill_(last_start[3])
      end)
      r(batch(rank, 3))
      ref = r
    end
    same_state(bn_state(m), bn_state(ref), ('rank %d'):format(rank))
    -- the ranks differ: the check can fail
    if world > 1 then
      local all = {}
      for i = 1, world do all[i] = torch.zeros(4, { dtype = 'float64' }) end
      dist.all_gather(all, m[2].running_mean)
      if torch.equal(all[1], all[2]) then error('ranks 0 and 1 ended with equal statistics: the check proves nothing') end
    end
  end)
end

test('eval forward normalises with rank 0\'s running statistics on every rank', function()
  local m = net()
  local ddp = nn.DistributedDataParallel(m)
  for step = 1, 2 do ddp(batch(rank, step)) end
  ddp:eval()
  local x = batch(5, 9)
  local y = ddp(x)
  local ref = net()
  ref(batch(0, 1)); ref(batch(0, 2))
  ref:eval()
  check.close(y, ref(x), 1e-12, 'eval output')
end)

check.finish()
