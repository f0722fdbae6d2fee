-- sort, argsort, topk, kthvalue, median, mode, cumsum, cumprod, cummax, cummin,
-- logcumsumexp and prod against PyTorch 1.13 (spec/fixtures/sortscan.lua, written by
-- spec/fixtures/make_sortscan.py): values, 1-based indices (ties where PyTorch is
-- deterministic: stable sort, NaN the largest), gradients where the formula matters
-- (zeros in cumprod and prod, ties in median), float64 gradchecks and the errors.
-- spec/gpu/specs runs it again on cpu:1 and the emulated cuda:0.
local torch = require 'torch'
local check = dofile('spec/helpers/check.lua')
local flat, same_number = check.flat, check.same_number

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'spec'
local cases = dofile(here .. '/fixtures/sortscan.lua')


local function check(label, got, want_values, want_shape, tol)
  assert(torch.is_tensor(got), label .. ': not a tensor')
  assert.are.same(want_shape, got:size():totable(), label .. ': shape')
  local g, w = flat(got:tolist()), flat(want_values)
  assert.are.equal(#w, #g, label .. ': element count')
  for i = 1, #w do
    assert(same_number(g[i], w[i], tol), ('%s: element %d is %s, PyTorch %s'):format(label, i, tostring(g[i]), tostring(w[i])))
  end
end

local function input_of(c, requires_grad)
  local t = torch.tensor(c.input, { dtype = c.dtype })
  if requires_grad then t:requires_grad_(true) end
  return t
end

describe('sort and scan against PyTorch', function()
  for _, c in ipairs(cases) do
    it(c.name, function()
      local tol = c.dtype == 'float64' and 1e-12 or 1e-6
      local x = input_of(c)
      local v, i = torch[c.fn](x, table.unpack(c.args))
      check(c.name .. ' values', v, c.values, c.shape, tol)
      if c.indices then
        check(c.name .. ' indices', i, c.indices, c.shape, 0)
        assert.are.equal('int64', i.dtype)
      end
      -- the method form gives the same
      local v2 = x[c.fn](x, table.unpack(c.args))
      assert.is_true(torch.equal(v:isnan(), v2:isnan()))
      if c.grad then
        local xg = input_of(c, true)
        local out = torch[c.fn](xg, table.unpack(c.args))
        local w = torch.arange(1, out:numel() + 1, { dtype = out.dtype }):reshape(out:size())
        local loss = (out * w):sum()
        loss:backward()
        check(c.name .. ' gradient', xg.grad, c.grad, torch.tensor(c.input):size():totable(), 1e-10)
      end
    end)
  end
end)

describe('sort and scan details', function()
  it('sort returns values on the input device and int64 indices, and a 0-dim tensor sorts to itself', function()
    local v, i = torch.tensor(2.5):sort()
    assert.are.equal(0, v:dim())
    assert.are.equal(2.5, v:item())
    assert.are.equal(1, i:item())
    local e, ei = torch.zeros({ 2, 0 }):sort(2)
    assert.are.same({ 2, 0 }, e:size():totable())
    assert.are.same({ 2, 0 }, ei:size():totable())
  end)

  it('sort on a transposed (non-contiguous) tensor along each dim', function()
    local base = torch.tensor({ { 3.0, 1, 2 }, { 0, 5, 4 } }):t()   -- {{3,0},{1,5},{2,4}}
    local v, i = base:sort(1)
    assert.are.same({ { 1, 0 }, { 2, 4 }, { 3, 5 } }, v:tolist())
    assert.are.same({ { 2, 1 }, { 3, 3 }, { 1, 2 } }, i:tolist())
    v = base:sort(2, true)
    assert.are.same({ { 3, 0 }, { 5, 1 }, { 4, 2 } }, v:tolist())
  end)

  it('max and min along a dim return values and 1-based indices', function()
    local v, i = torch.tensor({ { 1.0, 7, 3 }, { 9, 2, 9 } }):max(2)
    assert.are.same({ 7, 9 }, v:tolist())
    assert.are.same({ 2, 1 }, i:tolist())
  end)

  it('the grad_fn names are PyTorch\'s', function()
    local x = torch.randn(3, 4, { dtype = 'float64' }):requires_grad_(true)
    assert.are.equal('<SortBackward0>', tostring(x:sort().grad_fn))
    assert.are.equal('<TopkBackward0>', tostring(x:topk(2).grad_fn))
    assert.are.equal('<KthvalueBackward0>', tostring(x:kthvalue(2).grad_fn))
    assert.are.equal('<MedianBackward1>', tostring(x:median(1).grad_fn))
    assert.are.equal('<MedianBackward0>', tostring(x:median().grad_fn))
    assert.are.equal('<CumsumBackward0>', tostring(x:cumsum(1).grad_fn))
    assert.are.equal('<CumprodBackward0>', tostring(x:cumprod(2).grad_fn))
    assert.are.equal('<CummaxBackward0>', tostring(x:cummax(2).grad_fn))
  end)

  it('float64 gradchecks', function()
    local function x(...) return torch.randn({ ... }, { dtype = 'float64' }):requires_grad_(true) end
    local gc = torch.autograd.gradcheck
    assert.is_true(gc(function(t) return (t:sort(2)) end, { x(3, 5) }))
    assert.is_true(gc(function(t) return (t:sort(1, true)) end, { x(4, 3) }))
    assert.is_true(gc(function(t) return (t:topk(2, 1)) end, { x(5, 3) }))
    assert.is_true(gc(function(t) return (t:kthvalue(3, 2, true)) end, { x(2, 5) }))
    assert.is_true(gc(function(t) return (t:median(2)) end, { x(3, 4) }))
    assert.is_true(gc(function(t) return t:median() end, { x(3, 3) }))
    assert.is_true(gc(function(t) return (t:mode(2)) end, { x(3, 4) }))
    assert.is_true(gc(function(t) return t:cumsum(2) end, { x(3, 4) }))
    assert.is_true(gc(function(t) return t:cumsum(1) end, { x(3, 4, 2) }))
    assert.is_true(gc(function(t) return t:cumprod(2) end, { x(3, 4) }))
    assert.is_true(gc(function(t) return (t:cummax(2)) end, { x(3, 4) }))
    assert.is_true(gc(function(t) return (t:cummin(1)) end, { x(4, 3) }))
    assert.is_true(gc(function(t) return t:logcumsumexp(2) end, { x(3, 4) }))
    assert.is_true(gc(function(t) return t:prod(2) end, { x(3, 4) }))
    assert.is_true(gc(function(t) return t:prod() end, { x(2, 3) }))
    -- a zero, and two zeros, in the row: the gradient formula's special cases
    local z = torch.tensor({ { 1.5, 0, -2, 0.5 }, { 0.7, -1.1, 0, 0 } }, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(gc(function(t) return t:cumprod(2) end, { z }))
    assert.is_true(gc(function(t) return t:prod(2) end, { z }))
  end)

  it('cumsum of cumsum is twice differentiable through its own backward', function()
    local x = torch.tensor({ 1.0, 2, 3 }, { dtype = 'float64' }):requires_grad_(true)
    local y = x:cumsum(1)
    y:backward(torch.tensor({ 1.0, 0, 0 }, { dtype = 'float64' }))
    assert.are.same({ 1, 0, 0 }, x.grad:tolist())
  end)

  it('cumsum and cumprod take a dtype to compute in, as PyTorch', function()
    local c = torch.tensor({ 1, 2, 3 }):cumsum(1, { dtype = 'float64' })
    assert.are.equal('float64', c.dtype)
    assert.are.same({ 1, 3, 6 }, c:tolist())
    assert.are.equal('float32', torch.cumprod(torch.tensor({ 1, 2 }), 1, 'float32').dtype)
    assert.are.same({ 1, 3 }, torch.tensor({ 1, 2 }):cumsum({ dim = 1 }):tolist())
  end)

  it('integer and bool scans give int64; logcumsumexp wants floats', function()
    assert.are.equal('int64', torch.tensor({ true, false }):cumsum(1).dtype)
    assert.are.equal('int64', torch.tensor({ 2, 3 }):cumprod(1).dtype)
    assert.has_error(function() torch.tensor({ 1, 2 }):logcumsumexp(1) end,
      'logcumsumexp: expected a floating point tensor, got int64')
  end)

  it('bad k and bad dims are errors that say what was wrong', function()
    local t = torch.randn(3, 4)
    local ok, err = pcall(function() return t:topk(5) end)
    assert.is_false(ok)
    assert.matches('topk: k %(5%) is out of range for dimension 2 of size 4', err)
    ok, err = pcall(function() return t:topk(-1) end)
    assert.is_false(ok)
    ok, err = pcall(function() return t:kthvalue(0) end)
    assert.matches('kthvalue: k %(0%) is out of range for dimension 2 of size 4 %(k counts from 1%)', err)
    ok, err = pcall(function() return t:sort(3) end)
    assert.matches('sort: dimension 3 is out of range for a tensor with 2 dimensions.*dplua counts dims from 1', err)
    ok, err = pcall(function() return t:cumsum(0) end)
    assert.matches('cumsum: dimension 0 is out of range.*dplua counts dims from 1', err)
    ok, err = pcall(function() return t:cumsum() end)
    assert.matches('cumsum: dim must be an integer dimension %(counted from 1%), got nil %(it has no default%)', err)
    ok, err = pcall(function() return torch.zeros({ 0 }):median() end)
    assert.matches('median%(%) input tensor cannot be empty', err)
    ok, err = pcall(function() return torch.zeros({ 2, 0 }):median(2) end)
    assert.matches('median: expected a non%-empty dimension 2', err)
    ok, err = pcall(function() return t:topk('x') end)
    assert.matches('topk: k must be an integer', err)
  end)

  it('topk and kthvalue pick what a stable sort puts first, ties and NaN included', function()
    local x = torch.randint(0, 6, { 3, 200 }):double()
    x[2][17] = 0 / 0
    x[2][90] = 0 / 0
    for _, largest in ipairs({ true, false }) do
      local sv, si = x:sort(2, largest)
      for _, k in ipairs({ 1, 5, 24, 200 }) do
        local v, i = x:topk(k, 2, largest)
        assert.is_true(torch.equal(si:narrow(2, 1, k), i))
        assert.is_true(torch.equal(sv:narrow(2, 1, k):nan_to_num(-1), v:nan_to_num(-1)))
      end
    end
    local sv, si = x:sort(2)
    for _, k in ipairs({ 1, 3, 150 }) do
      local v, i = x:kthvalue(k, 2)
      assert.are.same(si:select(2, k):tolist(), i:tolist())
    end
  end)

  it('a long row sorts like the host', function()
    local n = 3000
    local x = torch.randn(2, n, { dtype = 'float64' })
    local v, i = x:sort(2, true)
    local rows = x:tolist()
    for r = 1, 2 do
      local want = {}
      for k = 1, n do want[k] = rows[r][k] end
      table.sort(want, function(a, b) return a > b end)
      local got = v[r]:tolist()
      for k = 1, n do assert.are.equal(want[k], got[k]) end
      local gi = i[r]:tolist()
      for k = 1, n, 97 do assert.are.equal(got[k], rows[r][gi[k]]) end
    end
  end)
end)
