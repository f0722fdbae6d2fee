-- Bad inputs that once crashed, hung or answered wrongly: sizes whose element or byte
-- counts overflow, zero-sized dimensions, and silent wrong answers (dtype promotion with
-- 0-d tensors, chunk and split at the edges, collate functions that return nothing).
local torch = require 'torch'
local nn = require 'nn'
local data = require 'torch.data'
local expect_error = dofile('spec/helpers/check.lua').expect_error

local shape_of = dofile('spec/helpers/check.lua').shape_of

local function shapes(pieces)
  local out = {}
  for i, p in ipairs(pieces) do out[i] = shape_of(p) end
  return out
end

describe('sizes whose element or byte count overflows', function()
  it('are refused by every creation function, never a tensor', function()
    expect_error(function() return torch.empty(2^62) end, 'too large')
    expect_error(function() return torch.zeros(1 << 62) end, 'too large')
    expect_error(function() return torch.empty(2^31, 2^31, 4) end, 'too large')
    expect_error(function() return torch.ones(3, math.maxinteger) end, 'too large')
    expect_error(function() return torch.empty({ 2^62 }, { dtype = torch.int64 }) end, 'too large')
    expect_error(function() return torch.full({ 2^61, 8 }, 1) end, 'too large')
    expect_error(function() return torch.randn(2^40, 2^40) end, 'too large')
  end)

  it('count zero dimensions as NumPy does: a product that overflows is refused even when empty', function()
    expect_error(function() return torch.zeros(0, math.maxinteger, math.maxinteger) end, 'too large')
    expect_error(function() return torch.zeros(0, math.maxinteger, math.maxinteger):sum(1):sum(2) end, 'too large')
    assert.same({ 0, 1000000, 1000000 }, shape_of(torch.zeros(0, 1000000, 1000000)))
  end)

  it('refuses byte counts past the address space even when the element count fits', function()
    -- 2^61 elements fit an int64, 2^61 doubles do not fit PTRDIFF_MAX bytes
    expect_error(function() return torch.empty(2^61, { dtype = torch.float64 }) end, 'too large')
    expect_error(function() return torch.empty(2^60, 8) end, 'too large')
  end)

  it('reports an allocation that fails as out of memory', function()
    -- AddressSanitizer aborts on a 4 TiB request unless told to return NULL
    local asan = (os.getenv('LD_PRELOAD') or ''):find('asan', 1, true)
    if asan and not (os.getenv('ASAN_OPTIONS') or ''):find('allocator_may_return_null=1', 1, true) then
      pending('under AddressSanitizer without allocator_may_return_null=1')
      return
    end
    expect_error(function() return torch.empty(2^40) end, 'out of memory')
  end)

  it('checks views: expand, view, reshape, narrow', function()
    expect_error(function() return torch.ones(1):expand(1 << 62):sum() end, 'too large')
    expect_error(function() return torch.ones(1, 1):expand(2^62, 2^62) end, 'too large')
    local t = torch.zeros(4)
    expect_error(function() return t:view(2^62, 2^62, 4) end, 'too large')
    expect_error(function() return t:view(-1, 2^62, 2^62) end, 'too large')
    expect_error(function() return t:reshape(2^62, 2^62, 4) end, 'too large')
    expect_error(function() return torch.zeros(0):view(0, 2^62, 2^62) end, 'too large')
    local a = torch.arange(1, 6)
    expect_error(function() return a:narrow(1, math.maxinteger, 2) end, 'out of range')
    expect_error(function() return a:narrow(1, 2, math.maxinteger) end, 'out of range')
    assert.same({ 4, 5 }, a:narrow(1, -2, 2):tolist())
  end)

  it('checks counts: eye, arange, randperm', function()
    expect_error(function() return torch.eye(2^62) end, 'too large')
    expect_error(function() return torch.eye(2^62, 2) end, 'too large')
    assert.same({ 2, 0 }, shape_of(torch.eye(2, 0)))
    assert.same({ { 1, 0, 0 }, { 0, 1, 0 } }, torch.eye(2, 3):tolist())
    expect_error(function() return torch.arange(0, 2^62) end, 'too large')
    expect_error(function() return torch.arange(0, 2^61) end, 'too large')
    expect_error(function() return torch.arange(0, 1e300) end, 'too large')
    expect_error(function() return torch.randperm(2^62) end, 'too large')
  end)

  it('checks layers whose parameters would be too large', function()
    expect_error(function() return nn.Linear(1 << 31, 1 << 31) end, 'too large')
  end)
end)

describe('data loading over huge lengths', function()
  local Huge = torch.class('hardening.HugeDataset', 'torch.data.Dataset')
  function Huge:__init(n) self.n = n end
  function Huge:get(i) return torch.tensor({ i }) end
  function Huge:__len() return self.n end

  it('refuses a sampler list that cannot exist, before allocating it', function()
    for _, shuffle in ipairs { true, false } do
      local loader = data.DataLoader(Huge(2^62), { batch_size = 4, shuffle = shuffle })
      expect_error(function() for _ in loader:iter() do end end, 'too large for one epoch', '4611686018427387904')
    end
    expect_error(function()
      return data.DistributedSampler(Huge(1 << 62), { num_replicas = 2, rank = 0 }):indices()
    end, 'too large')
    expect_error(function() return data.DataLoader(Huge(1e300)) end, 'too large')
  end)

  it('counts batches without overflowing for a batch_size near 2^63', function()
    local ds = data.TensorDataset(torch.arange(1, 11))
    local loader = data.DataLoader(ds, { batch_size = math.maxinteger })
    assert.equal(1, #loader)
    local got = {}
    for x in loader:iter() do got[#got + 1] = x:tolist() end
    assert.same({ { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 } }, got)
    local items = data.DataLoader(Huge(3), { batch_size = math.maxinteger })
    assert.equal(1, #items)
    local n = 0
    for x in items:iter() do n = n + 1; assert.same({ 3, 1 }, shape_of(x)) end
    assert.equal(1, n)
    assert.equal(0, #data.DataLoader(ds, { batch_size = math.maxinteger, drop_last = true }))
    assert.equal(2, #data.DataLoader(Huge(math.maxinteger), { batch_size = (1 << 62) }))
  end)
end)

describe('zero-sized dimensions', function()
  it('in-place ops broadcast into an empty tensor (no stride 0 in an empty tensor)', function()
    local t = torch.zeros(2, 0, 3)
    assert.same({ 3, 3, 1 }, { t:stride(1), t:stride(2), t:stride(3) })
    assert.is_true(t:is_contiguous())
    assert.same({ 2, 0, 3 }, shape_of(t:add_(torch.ones(2, 1, 1))))
    assert.same({ 0, 3 }, shape_of(torch.zeros(0, 3):mul_(torch.ones(3))))
  end)

  it('in-place ops on a 0-wide narrow leave the rest alone', function()
    local t = torch.zeros(3, 4)
    local v = t:narrow(2, 2, 0)
    v:mul_(2):add_(1):fill_(7)
    assert.same({ 3, 0 }, shape_of(v))
    assert.equal(0, t:abs():sum():item())
  end)

  it('index_select on empty views and with empty indices', function()
    assert.same({ 2, 0 }, shape_of(torch.zeros(3, 0):index_select(1, torch.tensor({ 1, 2 }, { dtype = torch.int64 }))))
    assert.same({ 0, 1 }, shape_of(torch.zeros(0, 3):index_select(2, torch.tensor({ 1 }, { dtype = torch.int64 }))))
    assert.same({ 0, 3 }, shape_of(torch.zeros(4, 3):index_select(1, torch.zeros(0, { dtype = torch.int64 }))))
  end)

  it('softmax, matmul with k = 0, cat and mean over empty dimensions', function()
    assert.same({ 2, 0 }, shape_of(torch.zeros(2, 0):softmax(2)))
    assert.same({ 0, 2 }, shape_of(torch.zeros(0, 2):log_softmax(1)))
    assert.same({ { 0, 0, 0 }, { 0, 0, 0 } }, torch.ones(2, 0):matmul(torch.ones(0, 3)):tolist())
    assert.same({ 0, 3 }, shape_of(torch.zeros(0, 2):matmul(torch.zeros(2, 3))))
    assert.same({ 0, 3 }, shape_of(torch.cat({ torch.zeros(0, 3), torch.zeros(0, 3) })))
    assert.same({ 2, 0 }, shape_of(torch.cat({ torch.zeros(2, 0), torch.zeros(2, 0) }, 2)))
    local m = torch.zeros(2, 0):mean(2):tolist()
    assert.is_true(m[1] ~= m[1] and m[2] ~= m[2])   -- NaN, as PyTorch
    assert.same({ 0, 0 }, torch.zeros(0, 2):sum(1):tolist())
    assert.same({ 3 }, shape_of(torch.zeros(0, 3):sum(1)))
    expect_error(function() return torch.zeros(0, 2):max(1) end, 'non-empty')
  end)
end)

describe('silent wrong answers', function()
  local f32, f64, i64, b8 = torch.float32, torch.float64, torch.int64, torch.bool

  -- PyTorch 1.13's torch.result_type(tensor of dtype A, 0-d tensor of dtype B), and of two
  -- 0-d tensors, for every pair of dplua's dtypes.
  local with_zero_dim = {
    { f32, f32, f32 }, { f32, f64, f32 }, { f32, i64, f32 }, { f32, b8, f32 },
    { f64, f32, f64 }, { f64, f64, f64 }, { f64, i64, f64 }, { f64, b8, f64 },
    { i64, f32, f32 }, { i64, f64, f64 }, { i64, i64, i64 }, { i64, b8, i64 },
    { b8, f32, f32 }, { b8, f64, f64 }, { b8, i64, i64 }, { b8, b8, b8 },
  }
  local both_zero_dim = {
    { f32, f64, f64 }, { f64, f32, f64 }, { i64, f32, f32 }, { f32, i64, f32 }, { b8, i64, i64 },
    { i64, f64, f64 }, { b8, f64, f64 },
  }

  it('promotes a 0-d operand of a higher category to its own dtype, as PyTorch', function()
    for _, c in ipairs(with_zero_dim) do
      local a, z = torch.ones(2, { dtype = c[1] }), torch.tensor(1, { dtype = c[2] })
      assert.equal(c[3], (a + z).dtype, ('%s tensor + %s 0-d tensor'):format(c[1], c[2]))
      assert.equal(c[3], (z + a).dtype, ('%s 0-d tensor + %s tensor'):format(c[2], c[1]))
    end
    for _, c in ipairs(both_zero_dim) do
      local a, z = torch.tensor(1, { dtype = c[1] }), torch.tensor(1, { dtype = c[2] })
      assert.equal(c[3], (a + z).dtype, ('%s 0-d + %s 0-d'):format(c[1], c[2]))
    end
    local r = torch.zeros(2, { dtype = i64 }) + torch.tensor(1.5, { dtype = f64 })
    assert.equal(f64, r.dtype)
    assert.same({ 1.5, 1.5 }, r:tolist())
    assert.equal(f32, (torch.zeros(2, { dtype = i64 }) + 1.5).dtype)   -- a Lua number stays a scalar
  end)

  it('chunk of an empty dimension gives every piece, as PyTorch', function()
    assert.same({ { 0, 3 }, { 0, 3 }, { 0, 3 } }, shapes(torch.zeros(0, 3):chunk(3, 1)))
    assert.same({ { 2 }, { 2 }, { 1 } }, shapes(torch.zeros(5):chunk(3)))
    assert.same({ { 2 }, { 2 }, { 2 } }, shapes(torch.zeros(6):chunk(4)))
    assert.same({ { 1 }, { 1 }, { 1 }, { 1 }, { 1 } }, shapes(torch.zeros(5):chunk(math.maxinteger)))
  end)

  it('split by a huge block size gives the whole tensor', function()
    assert.same({ { 5 } }, shapes(torch.zeros(5):split(math.maxinteger)))
    assert.same({ { 0 } }, shapes(torch.zeros(0):split(math.maxinteger)))
    expect_error(function() return torch.zeros(4):split({ math.maxinteger, math.maxinteger }) end, 'split')
  end)

  it('a collate_fn that returns nil is an error naming the batch', function()
    local ds = data.TensorDataset(torch.arange(1, 6))
    local loader = data.DataLoader(ds, { batch_size = 2, collate_fn = function() return nil end })
    expect_error(function() for _ in loader:iter() do end end, 'collate_fn returned nil for batch 1', 'indices 1, 2')
    local n = 0
    loader = data.DataLoader(ds, { batch_size = 2, collate_fn = function(items) n = n + 1; if n < 3 then return items end end })
    expect_error(function() for _ in loader:iter() do end end, 'batch 3', 'indices 5')
  end)

  it('maximum and minimum split the gradient of ties', function()
    local a = torch.tensor({ 1, 2, 3 }, { dtype = f32, requires_grad = true })
    local b = torch.tensor({ 3, 2, 1 }, { dtype = f32, requires_grad = true })
    torch.maximum(a, b):sum():backward()
    assert.same({ 0, 0.5, 1 }, a.grad:tolist())
    assert.same({ 1, 0.5, 0 }, b.grad:tolist())
    a.grad, b.grad = nil, nil
    torch.minimum(a, b):sum():backward()
    assert.same({ 1, 0.5, 0 }, a.grad:tolist())
    assert.same({ 0, 0.5, 1 }, b.grad:tolist())
  end)

  it('compares bools with numbers as numbers', function()
    local t = torch.tensor({ true, false })
    assert.same({ true, false }, (t:gt(0.5)):tolist())
    assert.same({ true, false }, (t:eq(1)):tolist())
    assert.same({ true, true }, (t:gt(-2)):tolist())
    assert.same({ false, true }, (t:lt(0.5)):tolist())
    assert.same({ false, false }, (t:eq(0.5)):tolist())
  end)

  it('clamp with min above max gives max, as PyTorch', function()
    assert.same({ 1, 1, 1 }, torch.tensor({ 0, 1.5, 3 }):clamp(2, 1):tolist())
    assert.same({ 1, 1, 1 }, torch.tensor({ 0, 5, 3 }, { dtype = i64 }):clamp(2, 1):tolist())
  end)

  it('the mean of nothing is NaN', function()
    local m = torch.zeros(0):mean():item()
    assert.is_true(m ~= m)
    for _, v in ipairs(torch.zeros(0, 3):mean(1):tolist()) do assert.is_true(v ~= v) end
  end)

  it('refuses in-place writes on an expanded view', function()
    expect_error(function() return torch.zeros(1):expand(3):add_(1) end, 'expanded view')
    expect_error(function() return torch.zeros(2, 1):expand(2, 3):mul_(torch.ones(2, 3)) end, 'expanded view')
  end)
end)
