-- Bad indices of gather, scatter, advanced indexing, index_add/copy/fill, take, one_hot,
-- embedding_bag and the class targets of the losses: on the CPU an error at the op; on a GPU
-- checked there and reported at the next synchronisation (as PyTorch's device-side
-- asserts), with no copy of the indices to the host: the host's waits for the device
-- (torch.distributed._cuda_host_syncs) do not move across the op.  The values with good
-- indices are hand-computed.  spec/gpu/specs runs it on cuda:0 (the emulated GPU).
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local dist = require 'torch.distributed'
local is_cuda = dofile('spec/helpers/device.lua').is_cuda

local LATER = '(reported at the next synchronisation; CUDA_LAUNCH_BLOCKING=1 reports it at the op)'

local function i64(v) return torch.tensor(v, { dtype = 'int64' }) end

local function syncs() return is_cuda and dist._cuda_host_syncs() or 0 end

-- (index tensors and values are made before the op is timed: making a tensor from a Lua
-- table copies it to the device, and that copy waits)
local function f64(v) return torch.tensor(v, { dtype = 'float64' }) end

local function has(err, pieces)
  err = tostring(err)
  for _, p in ipairs(pieces) do
    assert(err:find(p, 1, true), ('expected "%s" in: %s'):format(p, err))
  end
end

-- f() with a bad index: on the CPU it raises at once; on a GPU it returns without a host
-- wait, and the next synchronisation raises, with the same message and LATER
local function bad(f, ...)
  local pieces = { ... }
  if not is_cuda then
    local ok, err = pcall(f)
    assert(not ok, 'expected an error at the op')
    return has(err, pieces)
  end
  local before = syncs()
  local ok, err = pcall(f)
  if not ok then error('expected no error at the op on a GPU, got: ' .. tostring(err)) end   -- (printing a result syncs)
  assert.are.equal(before, syncs(), 'the op waited for the device (a copy of the indices to the host?)')
  ok, err = pcall(torch.cuda.synchronize)
  assert(not ok, 'expected the next synchronisation to report the bad index')
  pieces[#pieces + 1] = LATER
  has(err, pieces)
  assert.are.same({ 2, 4 }, (torch.ones(2) * 2):cumsum(1):tolist(), 'the device works after the report')
end

-- f() with good indices: no host wait on a GPU; returns f's result
local function no_wait(f)
  local before = syncs()
  local r = f()
  assert.are.equal(before, syncs(), 'the op waited for the device')
  return r
end

describe('advanced indexing checks its indices on the device', function()
  local A = torch.arange(12):view(3, 4):double()

  it('t[idx], t[{i, j}], take: good indices give the values without a host wait', function()
    local i, j, k = i64({ 3, -1, 1 }), i64({ 2, 4, 1 }), i64({ { 12, 1 } })
    local r1 = no_wait(function() return A[i] end)
    local r2 = no_wait(function() return A[{ i, j }] end)
    local r3 = no_wait(function() return A:take(k) end)
    assert.are.same({ 8, 9, 10, 11 }, r1[1]:tolist())
    assert.are.same({ 8, 8, 0 }, r1[{ {}, 1 }]:tolist())
    assert.are.same({ 9, 11, 0 }, r2:tolist())
    assert.are.same({ { 11, 0 } }, r3:tolist())
  end)

  it('t[idx] with a bad index', function()
    local a, b, c, d1, d2, e = i64({ 1, 4 }), i64({ 0 }), i64({ -5 }), i64({ 1, 2 }), i64({ { 1 }, { 7 } }), i64({ 13 })
    bad(function() return A[a] end, 'index 4 is out of range for dimension 1 with size 3 (dplua counts from 1)')
    bad(function() return A[b] end, 'index 0 is out of range for dimension 1 with size 3')
    bad(function() return A[{ {}, c }] end, 'index -5 is out of range for dimension 2 with size 4')
    bad(function() return A[{ d1, d2 }] end, 'index 7 is out of range for dimension 2 with size 4')
    bad(function() return A:take(e) end, 'index 13 is out of range for dimension 1 with size 12')
  end)

  it('t[idx] = v, index_put_ with accumulate, with good and bad indices', function()
    local t = torch.zeros(4, { dtype = 'float64' })
    local i, v = i64({ 2, 2, 4 }), f64(1.5)
    no_wait(function() t:index_put_({ i }, v, { accumulate = true }) end)
    assert.are.same({ 0, 3, 0, 1.5 }, t:tolist())
    local B = A:clone()
    local a, one, five, nine = i64({ 1, 5 }), i64({ 1 }), i64({ 5 }), i64({ 9 })
    bad(function() B[a] = 0 end, 'index 5 is out of range for dimension 1 with size 3')
    bad(function() B[{ one, five }] = 0 end, 'index 5 is out of range for dimension 2 with size 4')
    bad(function() t:index_put_({ nine }, v, { accumulate = true }) end, 'index 9 is out of range for dimension 1 with size 4')
    -- a bad index writes nothing, the good ones are written
    if is_cuda then
      local u, w = torch.zeros(3), i64({ 2, 7 })
      u[w] = 5
      pcall(torch.cuda.synchronize)
      assert.are.same({ 0, 5, 0 }, u:tolist())
    end
  end)

  it('gather, scatter, scatter_add, scatter_reduce', function()
    local idx, sidx = i64({ { 2, 1 }, { 4, 4 }, { 1, 3 } }), i64({ { 2, 1, 2 } })
    local g = no_wait(function() return A:gather(2, idx) end)
    assert.are.same({ { 1, 0 }, { 7, 7 }, { 8, 10 } }, g:tolist())
    local s = no_wait(function() return torch.zeros(2, 3):scatter_add(1, sidx, torch.ones(1, 3)) end)
    assert.are.same({ { 0, 1, 0 }, { 1, 0, 1 } }, s:tolist())
    local a, b, c, d, e = i64({ { 5 } }), i64({ { 9 } }), i64({ { 1, 3 } }), i64({ 1, 0 }), i64({ 4 })
    bad(function() return A:gather(2, a) end, 'index 5 is out of range for dimension 2 with size 4')
    bad(function() return A:scatter(1, b, 1) end, 'index 9 is out of range for dimension 1 with size 3')
    bad(function() torch.zeros(2, 3):scatter_add_(1, c, torch.ones(1, 2)) end, 'index 3 is out of range for dimension 1 with size 2')
    bad(function() return torch.ones(3):scatter_reduce(1, d, torch.ones(2), 'prod') end,
      'index 0 is out of range for dimension 1 with size 3')
    bad(function() return torch.ones(3):scatter_reduce(1, e, torch.ones(1), 'mean') end,
      'index 4 is out of range for dimension 1 with size 3')
  end)

  it('index_add, index_copy, index_fill', function()
    local i = i64({ 3, 3 })
    local t = no_wait(function() return torch.zeros(3, 2):index_add(1, i, torch.ones(2, 2)) end)
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 2, 2 } }, t:tolist())
    local a, b, c = i64({ 4 }), i64({ 3 }), i64({ -4 })
    bad(function() return torch.zeros(3, 2):index_add(1, a, torch.ones(1, 2)) end, 'index 4 is out of range for dimension 1 with size 3')
    bad(function() return torch.zeros(3, 2):index_copy(2, b, torch.ones(3, 1)) end, 'index 3 is out of range for dimension 2 with size 2')
    bad(function() torch.zeros(3, 2):index_fill_(1, c, 1) end, 'index -4 is out of range for dimension 1 with size 3')
  end)

  it('a bool mask reads its count to the host (the result size)', function()
    local m = A:gt(5)
    local before = syncs()
    local r = A[m]
    if is_cuda then assert.is_true(syncs() > before, 'the number of true elements is read back') end
    assert.are.same({ 6, 7, 8, 9, 10, 11 }, r:tolist())
  end)
end)

describe('one_hot and the class targets of the losses are checked on the device', function()
  local x = torch.tensor({ { 0.5, -1, 2 }, { 0, 0.25, -0.5 } }, { dtype = 'float64' })

  it('one_hot with num_classes', function()
    local i = i64({ 3, 1 })
    local r = no_wait(function() return torch.one_hot(i, 4) end)
    assert.are.same({ { 0, 0, 1, 0 }, { 1, 0, 0, 0 } }, r:tolist())
    local a, b = i64({ 1, 5 }), i64({ 0 })
    bad(function() return torch.one_hot(a, 4) end,
      'one_hot: class values must be between 1 and 4 (dplua counts classes from 1), got 5 at position 2')
    bad(function() return F.one_hot(b, 2) end, 'between 1 and 2', 'got 0 at position 1')
  end)

  it('cross_entropy and nll_loss with ignore_index: the mean divides by the kept count, computed on the device', function()
    -- by hand: logsumexp of row 1 is log(e^0.5 + e^-1 + e^2); row 2 is ignored
    local lse = math.log(math.exp(0.5) + math.exp(-1) + math.exp(2))
    local t, t2, t3, wt = i64({ 3, -100 }), i64({ 3, 2 }), i64({ 1, 3 }), f64({ 2, 1, 4 })
    local l = no_wait(function() return F.cross_entropy(x, t) end)
    assert(math.abs(l:item() - (lse - 2)) < 1e-12)
    local s = no_wait(function() return F.cross_entropy(x, t2, { ignore_index = 2, reduction = 'sum' }) end)
    assert(math.abs(s:item() - (lse - 2)) < 1e-12)
    local n = no_wait(function() return F.nll_loss(x, t3, { ignore_index = 1, reduction = 'none' }) end)
    assert.are.same({ 0, 0.5 }, n:tolist())
    local w = no_wait(function() return F.nll_loss(x, t3, { weight = wt }) end)
    assert(math.abs(w:item() - (-(2 * 0.5) - 4 * -0.5) / 6) < 1e-12)
    -- every target ignored: the mean is 0/0, NaN, as PyTorch's
    local all = F.cross_entropy(x, i64({ -100, -100 })):item()
    assert.is_true(all ~= all)
    -- the gradient flows only through the kept rows
    local xg = x:clone():requires_grad_()
    F.cross_entropy(xg, t):backward()
    assert.are.same({ 0, 0, 0 }, xg.grad[2]:tolist())
  end)

  it('a bad target is named with its position, ignore_index or not', function()
    local a, b, c, d, w = i64({ 1, 4 }), i64({ 0, -100 }), i64({ 2, 7 }), i64({ 9, 1 }), f64({ 1, 1, 1 })
    bad(function() return F.cross_entropy(x, a) end,
      'cross_entropy: target 4 at position 2 is out of bounds: class indices must be between 1 and 3 (dplua counts classes from 1)')
    bad(function() return F.nll_loss(x, b) end, 'nll_loss: target 0 at position 1 is out of bounds')
    bad(function() return F.nll_loss(x, c, { weight = w }) end, 'nll_loss: target 7 at position 2 is out of bounds')
    bad(function() return F.cross_entropy(x, d, { label_smoothing = 0.1 }) end, 'target 9 at position 1')
  end)

  it('embedding_bag with padding_idx reads only the offsets, not the indices', function()
    local w = f64({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
    local idx, offs = i64({ 1, 2, 2, 3 }), i64({ 1, 3 })
    local m = F.embedding_bag(idx, w, offs, { mode = 'mean', padding_idx = 2 })
    assert.are.same({ { 1, 2 }, { 5, 6 } }, m:tolist())
    local mx = F.embedding_bag(i64({ { 2, 2 }, { 3, 1 } }), w, { mode = 'max', padding_idx = 2 })
    assert.are.same({ { 0, 0 }, { 5, 6 } }, mx:tolist())
    local s = F.embedding_bag(idx, w, offs, { mode = 'sum' })
    assert.are.same({ { 4, 6 }, { 8, 10 } }, s:tolist())
  end)
end)
