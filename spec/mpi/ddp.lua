-- ddp.lua: nn.DistributedDataParallel over MPI.  The reference for training is one process
-- on the full batches, computed on rank 0 inside this script and broadcast; the checks run
-- under mpirun -np 2 and -np 3 (spec/mpi/run).
local check = dofile((arg[0]:match('^(.*)/') or '.') .. '/lib/check.lua')
local dist = require 'torch.distributed'
local test, eq, raises = check.test, check.eq, check.raises

torch.set_num_threads(1)
dist.init_process_group { backend = 'mpi' }
local rank, world = dist.get_rank(), dist.get_world_size()

-- Every rank's copy of t, as a list indexed by rank + 1.
local function gather(t)
  local list = {}
  for i = 1, world do list[i] = torch.zeros_like(t) end
  dist.all_gather(list, t:contiguous())
  return list
end

local function net(dtype)
  return nn.Sequential(nn.Linear(5, 8, { dtype = dtype }), nn.Tanh(), nn.Linear(8, 3, { dtype = dtype }))
end

-- Same on every rank: data drawn after a common seed.
local function dataset(n, dtype)
  torch.manual_seed(1234)
  return torch.randn(n, 5, { dtype = dtype }), torch.randn(n, 3, { dtype = dtype })
end

test('models initialised differently become equal at construction', function()
  torch.manual_seed(100 + rank)
  local m = net('float32')
  m:register_buffer('steps', torch.full({ 2 }, rank, { dtype = 'int64' }))
  local w_before = gather(m:parameters()[1])
  if world > 1 and torch.equal(w_before[1], w_before[2]) then error('the ranks started equal: the check proves nothing') end
  local ddp = nn.DistributedDataParallel(m)
  for i, p in ipairs(m:parameters()) do
    local all = gather(p)
    for r = 2, world do check.equal_tensors(all[r], all[1], ('parameter %d on rank %d'):format(i, r - 1)) end
  end
  check.equal_tensors(w_before[1], m:parameters()[1], 'rank 0 keeps its values')
  check.equal_tensors(m.steps, torch.zeros(2, { dtype = 'int64' }), 'buffer from rank 0')
  eq(ddp.module, m, '.module')
end)

test('state_dict keys start with module.', function()
  local m = net('float32')
  local ddp = nn.DistributedDataParallel(m)
  local keys = {}
  for k in pairs(ddp:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  eq(table.concat(keys, ','), 'module.1.bias,module.1.weight,module.3.bias,module.3.weight', 'keys')
  eq(#ddp:parameters(), 4, '#parameters()')
  ddp:load_state_dict(ddp:state_dict())
end)

-- N ranks on batches of B against one process on batches of N * B.
local function train_matches(dtype, opt_opts, bucket_cap_mb, tol, use_loader)
  local B, steps = 4, 10
  local X, Y = dataset(world * B * steps, dtype)
  torch.manual_seed(7)
  local init = net(dtype)
  local state = {}
  for k, v in pairs(init:state_dict()) do state[k] = v:clone() end

  -- the reference: one process, full batches (every rank computes it; rank 0's is used)
  local ref = net(dtype)
  ref:load_state_dict(state)
  local ropt = optim.SGD(ref:parameters(), opt_opts)
  local crit = nn.MSELoss()
  for s = 0, steps - 1 do
    local x, y = X:narrow(1, s * world * B + 1, world * B), Y:narrow(1, s * world * B + 1, world * B)
    ropt:zero_grad()
    crit(ref(x), y):backward()
    ropt:step()
  end

  -- DDP: this rank's share of each global batch
  local model = net(dtype)
  torch.manual_seed(999 + rank)                   -- different starting point on each rank ...
  for _, p in ipairs(model:parameters()) do torch.no_grad(function() p:uniform_(-1, 1) end) end
  if rank == 0 then model:load_state_dict(state) end  -- ... rank 0's wins
  local ddp = nn.DistributedDataParallel(model, { bucket_cap_mb = bucket_cap_mb })
  local opt = optim.SGD(ddp:parameters(), opt_opts)
  local batches = {}
  if use_loader then
    local ds = torch.data.TensorDataset(X, Y)
    local sampler = torch.data.DistributedSampler(ds, { shuffle = false })
    local loader = torch.data.DataLoader(ds, { batch_size = B, sampler = sampler })
    for x, y in loader:iter() do batches[#batches + 1] = { x, y } end
    -- with the sampler each global batch is rows s*N*B+1 .. (s+1)*N*B, interleaved by rank
  else
    for s = 0, steps - 1 do
      local first = s * world * B + rank * B + 1
      batches[#batches + 1] = { X:narrow(1, first, B), Y:narrow(1, first, B) }
    end
  end
  eq(#batches, steps, 'number of batches')
  for s = 1, steps do
    opt:zero_grad()
    local x, y = batches[s][1], batches[s][2]
    eq(x:size(1), B, 'per-rank batch')
    crit(ddp(x), y):backward()
    opt:step()
  end
  local refp = ref:parameters()
  for i, p in ipairs(model:parameters()) do
    local want = refp[i]:clone()
    dist.broadcast(want, 0)
    check.close(p, want, tol, ('parameter %d after %d steps'):format(i, steps))
  end
  return ddp
end

test('DDP on batches of B matches one process on batches of N*B (float64, 10 SGD steps)', function()
  train_matches('float64', { lr = 0.1 }, 25, 1e-12)
end)

test('... float32, momentum, several buckets overlapping backward', function()
  local ddp = train_matches('float32', { lr = 0.05, momentum = 0.9 }, 0.0001, 2e-6)
  local buckets = ddp:buckets()
  if #buckets < 2 then error('expected several buckets with a 100-byte cap, got ' .. #buckets) end
  -- reverse parameter order: the first bucket holds the last parameter
  eq(buckets[1][1], #ddp:parameters(), 'first bucket starts with the last parameter')
  local stats = ddp:reducer_stats()
  eq(stats.passes, 10, 'backward passes averaged')
  eq(stats.allreduces, 10 * #buckets, 'all-reduces started')
  if stats.early < 10 then
    error(('only %d all-reduces started before backward finished'):format(stats.early))
  end
end)

test('... with a DistributedSampler and a DataLoader', function()
  train_matches('float64', { lr = 0.1 }, 25, 1e-12, true)
end)

test('a DistributedSampler takes the rank and world size from the group', function()
  local n = 10
  local ds = torch.data.TensorDataset(torch.arange(n))
  local sampler = torch.data.DistributedSampler(ds, { shuffle = false })
  local per = math.ceil(n / world)
  local want = {}
  for k = 0, per - 1 do
    local pos = rank + 1 + k * world
    want[#want + 1] = (pos - 1) % n + 1
  end
  local got = {}
  for i in sampler:iter() do got[#got + 1] = i end
  eq(table.concat(got, ','), table.concat(want, ','), 'indices')
  if world == 3 then
    local spec = { '1,4,7,10', '2,5,8,1', '3,6,9,2' }
    eq(table.concat(got, ','), spec[rank + 1], 'SPEC example')
  end
end)

-- no_sync: local accumulation, then one averaging of the totals
local function no_sync_case(use_context)
  local X, Y = dataset(world * 9, 'float64')
  torch.manual_seed(5)
  local m = net('float64')
  local ddp = nn.DistributedDataParallel(m)
  local local_copy = net('float64')
  local_copy:load_state_dict(m:state_dict())
  local crit = nn.MSELoss()
  local function part(k)   -- this rank's k-th micro-batch of 3 rows
    local first = (k - 1) * world * 3 + rank * 3 + 1
    return X:narrow(1, first, 3), Y:narrow(1, first, 3)
  end
  ddp:zero_grad(); local_copy:zero_grad()
  for k = 1, 2 do
    local x, y = part(k)
    if use_context then
      local _ <close> = ddp:no_sync()
      crit(ddp(x), y):backward()
    else
      ddp:no_sync(function() crit(ddp(x), y):backward() end)
    end
    crit(local_copy(x), y):backward()
  end
  -- inside no_sync nothing is averaged: the gradients are this rank's own
  for i, p in ipairs(m:parameters()) do
    check.close(p.grad, local_copy:parameters()[i].grad, 1e-12, 'local gradient ' .. i)
  end
  if world > 1 then
    local g = gather(m:parameters()[1].grad)
    if torch.allclose(g[1], g[2]) then error('ranks had equal gradients under no_sync') end
  end
  local x, y = part(3)
  crit(ddp(x), y):backward()
  crit(local_copy(x), y):backward()
  for i, p in ipairs(m:parameters()) do
    local want = local_copy:parameters()[i].grad:clone()
    dist.all_reduce(want, 'avg')
    check.close(p.grad, want, 1e-12, 'averaged total gradient ' .. i)
  end
  eq(ddp:reducer_stats().passes, 1, 'synchronised passes')
end

test('no_sync(fn) accumulates; the next synced backward averages the totals', function() no_sync_case(false) end)
test('no_sync() as a to-be-closed value does the same', function() no_sync_case(true) end)

test('two synced backwards before a step average each one; a shared weight counts once', function()
  local Shared, parent = torch.class('SharedWeights', 'nn.Module')
  function Shared:__init() parent.__init(self); self.fc = nn.Linear(4, 4, { dtype = 'float64' }) end
  function Shared:forward(x) return self.fc(torch.tanh(self.fc(x))) end   -- fc used twice
  torch.manual_seed(3)
  local m = Shared()
  local ddp = nn.DistributedDataParallel(m)
  local plain = Shared()
  plain:load_state_dict(m:state_dict())
  torch.manual_seed(50 + rank)
  local x1, x2 = torch.randn(2, 4, { dtype = 'float64' }), torch.randn(3, 4, { dtype = 'float64' })
  ddp:zero_grad()
  ddp(x1):pow(2):sum():backward()
  ddp(x2):sum():backward()
  -- the reference: each backward's gradient averaged over ranks, then summed
  local want = {}
  for i, p in ipairs(plain:parameters()) do want[i] = torch.zeros_like(p) end
  for _, step in ipairs { function() plain(x1):pow(2):sum():backward() end,
                          function() plain(x2):sum():backward() end } do
    plain:zero_grad()
    step()
    for i, p in ipairs(plain:parameters()) do
      local g = p.grad:clone()
      dist.all_reduce(g, 'avg')
      want[i] = want[i] + g
    end
  end
  for i, p in ipairs(m:parameters()) do check.close(p.grad, want[i], 1e-12, 'gradient ' .. i) end
  eq(ddp:reducer_stats().passes, 2, 'averaged passes')
end)

test('the first bucket is small (1 MB), later ones take bucket_cap_mb', function()
  local m = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 512), nn.Linear(512, 512))  -- 1 MB weights
  local ddp = nn.DistributedDataParallel(m, { bucket_cap_mb = 25 })
  local b = ddp:buckets()
  eq(#b, 2, 'buckets')
  eq(table.concat(b[1], ','), '6', 'first bucket: the last bias (the last weight would pass 1 MB)')
  eq(table.concat(b[2], ','), '5,4,3,2,1', 'second bucket')
end)

test('forward passes every argument through', function()
  local Two, parent = torch.class('TwoInputs', 'nn.Module')
  function Two:__init() parent.__init(self); self.fc = nn.Linear(2, 2) end
  function Two:forward(a, b, scale) return self.fc(a + b) * scale end
  local ddp = nn.DistributedDataParallel(Two())
  local out = ddp(torch.ones(1, 2), torch.ones(1, 2), 3)
  eq(out:size(2), 2, 'output width')
  out:sum():backward()
end)

-- Bad input --------------------------------------------------------------------------

test('parameter shapes that differ across ranks raise on every rank, naming both shapes', function()
  if world == 1 then check.skip('one rank') end
  local m = nn.Sequential(nn.Linear(5, 2 + (rank == 1 and 1 or 0)))
  raises(function() nn.DistributedDataParallel(m) end, '1.weight', '[2, 5]', '[3, 5]', 'rank 1')
  local extra = nn.Linear(3, 3)
  if rank == world - 1 then extra.more = nn.Linear(3, 3) end
  raises(function() nn.DistributedDataParallel(extra) end, 'rank 0', 'parameters')
end)

test('a parameter that got no gradient is named at the next forward', function()
  local Unused, parent = torch.class('Unused', 'nn.Module')
  function Unused:__init() parent.__init(self); self.used = nn.Linear(2, 2); self.spare = nn.Linear(2, 2) end
  function Unused:forward(x) return self.used(x) end
  local ddp = nn.DistributedDataParallel(Unused())
  ddp(torch.ones(1, 2)):sum():backward()
  raises(function() ddp(torch.ones(1, 2)) end, 'spare.weight', 'spare.bias', 'no gradient')
end)

test('bad options raise', function()
  raises(function() nn.DistributedDataParallel(nn.Linear(2, 2), { bucket_cap_mb = 0 }) end, 'bucket_cap_mb')
  raises(function() nn.DistributedDataParallel(nn.Linear(2, 2), { buckets = 3 }) end, 'unknown option buckets')
  raises(function() nn.DistributedDataParallel(42) end, 'expected a module')
  raises(function() nn.DistributedDataParallel(nn.Linear(2, 2), { device_ids = { 'cuda:0' } }) end, 'device_ids')
end)

check.finish()
