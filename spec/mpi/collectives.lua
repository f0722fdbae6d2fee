-- collectives.lua: torch.distributed's process group and collectives over MPI, checked
-- against values every rank can compute on its own.  Run by spec/mpi/run under
-- mpirun -np 2 and -np 3.
local check = dofile((arg[0]:match('^(.*)/') or '.') .. '/lib/check.lua')
local dist = require 'torch.distributed'
local test, eq, raises = check.test, check.eq, check.raises

torch.set_num_threads(1)

-- Before the process group exists ----------------------------------------------------

test('torch.distributed is the module and reports no group yet', function()
  eq(torch.distributed, dist, 'torch.distributed')
  eq(dist.is_available(), true, 'is_available()')
  eq(dist.is_initialized(), false, 'is_initialized()')
end)

test('collectives before init_process_group raise a clear error', function()
  local t = torch.ones(3)
  raises(function() dist.all_reduce(t) end, 'all_reduce', 'not initialized', 'init_process_group')
  raises(function() dist.broadcast(t, 0) end, 'broadcast', 'not initialized')
  raises(function() dist.all_gather({}, t) end, 'not initialized')
  raises(function() dist.barrier() end, 'barrier', 'not initialized')
  raises(function() dist.get_rank() end, 'get_rank', 'not initialized')
  raises(function() dist.get_world_size() end, 'get_world_size', 'not initialized')
  raises(function() dist.destroy_process_group() end, 'not initialized')
  raises(function() nn.DistributedDataParallel(nn.Linear(2, 2)) end, 'DistributedDataParallel', 'not initialized')
end)

test('init_process_group rejects bad arguments', function()
  raises(function() dist.init_process_group { backend = 'gloo' } end, "unknown backend 'gloo'")
  raises(function() dist.init_process_group { backend = 'mpi', colour = 1 } end, 'unknown option colour')
  raises(function() dist.init_process_group(42) end, 'expected an option table')
  eq(dist.is_initialized(), false, 'is_initialized() after failed inits')
end)

test('backend nccl without CUDA says what is missing', function()
  if torch.cuda.is_available() then check.skip('CUDA is available here') end
  local err = raises(function() dist.init_process_group { backend = 'nccl' } end, 'nccl')
  if not (err:find('CUDA backend', 1, true) or err:find('CUDA is not available', 1, true)) then
    error('the message should say that CUDA is missing: ' .. err)
  end
  eq(dist.is_initialized(), false, 'is_initialized()')
end)

-- The group --------------------------------------------------------------------------

dist.init_process_group { backend = 'mpi' }
local rank, world = dist.get_rank(), dist.get_world_size()
local mpi_world = tonumber(os.getenv('OMPI_COMM_WORLD_SIZE'))

test('rank and world size come from mpirun', function()
  eq(dist.is_initialized(), true, 'is_initialized()')
  eq(dist.get_backend(), 'mpi', 'get_backend()')
  if mpi_world then eq(world, mpi_world, 'world size') end
  eq(rank, tonumber(os.getenv('OMPI_COMM_WORLD_RANK') or rank), 'rank')
  assert(rank >= 0 and rank < world, 'rank out of range')
  eq(math.type(rank), 'integer', 'rank type')
  -- one host: the local rank is the rank
  eq(dist.get_local_rank(), tonumber(os.getenv('OMPI_COMM_WORLD_LOCAL_RANK') or rank), 'local rank')
  local all = dist.all_gather_string(tostring(rank))
  for r = 1, world do eq(all[r], tostring(r - 1), 'rank gathered from ' .. r) end
end)

test('init_process_group twice raises', function()
  raises(function() dist.init_process_group { backend = 'mpi' } end, 'already initialized')
  eq(dist.get_rank(), rank, 'rank afterwards')
end)

-- all_reduce -------------------------------------------------------------------------

-- rank r contributes v(r, i) = (r + 1) * base[i]; the reference reduces over r in Lua.
local base = { 1, -2, 3, 7, -5, 0 }
local function contribution(r, dtype)
  local vals = {}
  for i, b in ipairs(base) do
    local v = (r + 1) * b
    if dtype ~= 'int64' then v = v + 0.25 * r end
    vals[i] = v
  end
  return vals
end

local function idiv_trunc(a, b)   -- integer division toward zero (NCCL's and C's)
  if a >= 0 then return a // b else return -((-a) // b) end
end

local function reference(op, dtype)
  local out = {}
  for i = 1, #base do
    local acc
    for r = 0, world - 1 do
      local v = contribution(r, dtype)[i]
      if acc == nil then acc = v
      elseif op == 'sum' or op == 'avg' then acc = acc + v
      elseif op == 'max' then acc = math.max(acc, v)
      elseif op == 'product' then acc = acc * v
      elseif op == 'band' then acc = acc & v
      elseif op == 'bor' then acc = acc | v
      elseif op == 'bxor' then acc = acc ~ v
      else acc = math.min(acc, v) end
    end
    if op == 'avg' then acc = dtype == 'int64' and idiv_trunc(acc, world) or acc / world end
    out[i] = acc
  end
  return torch.tensor(out, { dtype = dtype })
end

for _, dtype in ipairs { 'float32', 'float64', 'int64' } do
  for _, op in ipairs { 'sum', 'avg', 'max', 'min', 'product' } do
    test(('all_reduce %s %s'):format(op, dtype), function()
      local t = torch.tensor(contribution(rank, dtype), { dtype = dtype })
      dist.all_reduce(t, op)
      eq(t.dtype, dtype, 'dtype after all_reduce')
      if dtype == 'int64' then check.equal_tensors(t, reference(op, dtype), op)
      else check.close(t, reference(op, dtype), 1e-6, op) end
    end)
  end
end

test('all_reduce defaults to sum and takes ReduceOp names', function()
  local t = torch.full({ 2, 3 }, rank + 1, { dtype = 'float64' })
  dist.all_reduce(t)
  check.equal_tensors(t, torch.full({ 2, 3 }, world * (world + 1) / 2, { dtype = 'float64' }), 'default op')
  local m = torch.tensor({ rank }, { dtype = 'int64' })
  dist.all_reduce(m, dist.ReduceOp.MAX)
  eq(m[1], world - 1, 'ReduceOp.MAX')
end)

test('all_reduce on bool tensors: sum/max are or, min is and', function()
  local only0 = torch.tensor({ rank == 0, true, false })
  local a, b = only0:clone(), only0:clone()
  dist.all_reduce(a, 'max')
  dist.all_reduce(b, 'min')
  check.equal_tensors(a, torch.tensor({ true, true, false }), 'max')
  check.equal_tensors(b, torch.tensor({ world == 1, true, false }), 'min')
  raises(function() dist.all_reduce(torch.tensor({ true }), 'avg') end, 'avg', 'bool')
end)

test('all_reduce works in place on views (non-contiguous too)', function()
  local m = torch.zeros(3, 4, { dtype = 'float64' })
  local col = m:select(2, 2)           -- a strided view of the second column
  col:copy_(torch.tensor({ 1, 2, 3 }, { dtype = 'float64' }) * (rank + 1))
  dist.all_reduce(col, 'sum')
  local s = world * (world + 1) / 2
  check.equal_tensors(m:select(2, 2), torch.tensor({ s, 2 * s, 3 * s }, { dtype = 'float64' }), 'column')
  eq(m:sum():item(), 6 * s, 'the rest of the matrix is untouched')
  local row = m:select(1, 1)           -- contiguous view with an offset
  row:fill_(rank)
  dist.all_reduce(row, 'max')
  eq(m[1][4], world - 1, 'row view')
  eq(m[2][2], 2 * s, 'next row untouched')
end)

test('all_reduce of a large tensor (4M floats)', function()
  local n = 4 * 1024 * 1024
  local t = torch.full({ n }, rank + 1)
  dist.all_reduce(t, 'sum')
  local s = world * (world + 1) / 2
  eq(t[1], s, 'first'); eq(t[n], s, 'last'); eq(t:min():item(), s, 'min'); eq(t:max():item(), s, 'max')
end)

test('all_reduce of a parameter that requires grad writes in place', function()
  local p = torch.ones(4, { requires_grad = true })
  dist.all_reduce(p, 'sum')
  eq(p:tolist()[1], world, 'value')   -- p requires grad: p[1] would be a 0-dim tensor
  eq(p.requires_grad, true, 'requires_grad kept')
end)

test('all_reduce with ReduceOp.PRODUCT multiplies, and the bitwise ops take integers and bools', function()
  local t = torch.tensor({ rank + 2, -1 }, { dtype = 'float64' })
  dist.all_reduce(t, dist.ReduceOp.PRODUCT)
  local want = 1
  for r = 0, world - 1 do want = want * (r + 2) end
  check.equal_tensors(t, torch.tensor({ want, (-1) ^ world }, { dtype = 'float64' }), 'PRODUCT')
  for _, op in ipairs { 'band', 'bor', 'bxor' } do
    local m = torch.tensor(contribution(rank, 'int64'), { dtype = 'int64' })
    dist.all_reduce(m, dist.ReduceOp[op:upper()])
    check.equal_tensors(m, reference(op, 'int64'), op)
  end
  local only0 = torch.tensor({ rank == 0, true, false })
  local a, x = only0:clone(), only0:clone()
  dist.all_reduce(a, dist.ReduceOp.PRODUCT)
  dist.all_reduce(x, dist.ReduceOp.BXOR)
  check.equal_tensors(a, torch.tensor({ world == 1, true, false }), 'bool PRODUCT is and')
  check.equal_tensors(x, torch.tensor({ true, world % 2 == 1, false }), 'bool BXOR is xor')
  raises(function() dist.all_reduce(torch.ones(2), dist.ReduceOp.BAND) end, "op 'band'", 'float32')
  raises(function() return dist.ReduceOp.PROD end, 'ReduceOp has no op PROD')
end)

test('all_reduce rejects bad arguments', function()
  raises(function() dist.all_reduce(torch.ones(2), 'prod') end, "unknown op 'prod'")
  raises(function() dist.all_reduce(torch.ones(2), 3) end, 'op must be')
  raises(function() dist.all_reduce({ 1, 2 }) end, 'expected a tensor')
end)

test('a CUDA tensor on the mpi backend is reduced through host memory (spec/mpi/cuda/ has more)', function()
  if not torch.cuda.is_available() then check.skip('no CUDA device') end
  local t = torch.ones(2, { device = 'cuda:0' })
  dist.all_reduce(t)
  eq(tostring(t.device), 'cuda:0', 'device')
  check.equal_tensors(t:cpu(), torch.full({ 2 }, world), 'sum')
end)

-- broadcast, all_gather, barrier -----------------------------------------------------

test('broadcast from every source rank, each dtype', function()
  for src = 0, world - 1 do
    for _, dtype in ipairs { 'float32', 'float64', 'int64' } do
      local t = torch.arange(5, { dtype = dtype }) + 10 * rank
      dist.broadcast(t, src)
      check.equal_tensors(t, torch.arange(5, { dtype = dtype }) + 10 * src, ('src %d %s'):format(src, dtype))
    end
  end
end)

test('broadcast into a non-contiguous view', function()
  local m = torch.zeros(2, 3, { dtype = 'int64' })
  m:select(2, 3):fill_(rank + 5)
  dist.broadcast(m:select(2, 3), world - 1)
  check.equal_tensors(m, torch.tensor({ { 0, 0, world + 4 }, { 0, 0, world + 4 } }), 'matrix')
end)

test('broadcast rejects a bad source rank', function()
  raises(function() dist.broadcast(torch.ones(2), world) end, 'src ' .. world, 'not a rank')
  raises(function() dist.broadcast(torch.ones(2), -1) end, 'src')
  raises(function() dist.broadcast(torch.ones(2)) end, 'src must be an integer')
end)

test('all_gather fills the list with every rank\'s tensor', function()
  for _, dtype in ipairs { 'float32', 'float64', 'int64' } do
    local mine = (torch.arange(6, { dtype = dtype }) + 100 * rank):view(2, 3)
    local list = {}
    for i = 1, world do list[i] = torch.zeros(2, 3, { dtype = dtype }) end
    dist.all_gather(list, mine)
    for r = 0, world - 1 do
      check.equal_tensors(list[r + 1], (torch.arange(6, { dtype = dtype }) + 100 * r):view(2, 3),
        ('list[%d] %s'):format(r + 1, dtype))
    end
  end
  local fresh = {}
  dist.all_gather(fresh, torch.tensor({ rank }))
  eq(#fresh, world, 'an empty list is filled')
  for r = 0, world - 1 do eq(fresh[r + 1][1], r, 'fresh[' .. (r + 1) .. ']') end
end)

test('all_gather rejects a list of the wrong length or shape', function()
  local bad = {}
  for i = 1, world + 1 do bad[i] = torch.zeros(2) end
  raises(function() dist.all_gather(bad, torch.zeros(2)) end, 'expected a list of ' .. world)
  local wrong = {}
  for i = 1, world do wrong[i] = torch.zeros(3) end
  raises(function() dist.all_gather(wrong, torch.zeros(2)) end, 'tensor_list[1]', '[3]', '[2]')
  raises(function() dist.all_gather(torch.zeros(2), torch.zeros(2)) end, 'expected a list')
end)

test('barrier waits for the slowest rank', function()
  local timer = torch.Timer()
  if rank == world - 1 then
    local t0 = os.clock()
    while os.clock() - t0 < 0.3 do end
  end
  dist.barrier()
  local waited = timer:time().real
  if waited < 0.25 then error(('rank %d left the barrier after %.3f s'):format(rank, waited)) end
end)

-- destroy and create again -----------------------------------------------------------

test('destroy_process_group, then collectives raise, then a new group works', function()
  dist.destroy_process_group()
  eq(dist.is_initialized(), false, 'is_initialized() after destroy')
  raises(function() dist.all_reduce(torch.ones(1)) end, 'not initialized')
  dist.init_process_group('mpi')
  local t = torch.ones(1)
  dist.all_reduce(t)
  eq(t[1], world, 'sum in the new group')
end)

check.finish()
