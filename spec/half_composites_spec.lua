-- float16 and bfloat16 through the ops written as compositions of engine ops: each
-- computes in float32 and rounds once (doc/tensor.md), so an intermediate that leaves the
-- half dtype's range (a square, a product) gives no inf, NaN or 0 where the result fits.
-- Expected values: spec/fixtures/make_half_composites.py, PyTorch 1.13 in float32 on the
-- same inputs, rounded once.  PyTorch 1.13 itself refuses most of these for float16 on the
-- CPU, and rounds intermediates where it runs them (torch.norm of float16 {300, 400} is inf
-- there; floor_divide of bfloat16 1000 by 3 gives 334, not 332, the rounding of 333).
local torch = require 'torch'
local F = require('nn').functional
local cases = dofile('spec/fixtures/half_composites.lua')

local ULP = { float16 = 2 ^ -10, bfloat16 = 2 ^ -7 }

-- got equals expected, or is within one unit in the last place of the dtype (float32 and
-- float64 round a result near a halfway point to either side)
local function close(expected, got, dtype, what)
  assert.are.equal(dtype, got.dtype, what .. ': dtype')
  local e = torch.tensor(expected, { dtype = 'float64' }):reshape(-1):totable()
  local g = got:double():reshape(-1):totable()
  assert.are.equal(#e, #g, what .. ': element count')
  for i = 1, #e do
    local a, b = e[i], g[i]
    local ok = a == b or (a ~= a and b ~= b)
    if not ok and a == a and b == b and math.abs(a) ~= math.huge then
      local m = math.max(math.abs(a), math.abs(b))
      local _, ex = math.frexp(m)
      ok = math.abs(a - b) <= ULP[dtype] * 2 ^ (ex - 1) * 1.0000001
    end
    if not ok then error(('%s: element %d: expected %.9g, got %.9g'):format(what, i, a, b), 2) end
  end
end

local OPS = {
  ['cdist'] = function(x, y) return torch.cdist(x, y) end,
  ['torch.cosine_similarity'] = function(x, y) return torch.cosine_similarity(x, y, 2) end,
  ['F.cosine_similarity'] = function(x, y) return F.cosine_similarity(x, y, 2) end,
  ['F.normalize'] = function(x) return F.normalize(x, { dim = 2 }) end,
  ['F.pairwise_distance'] = function(x, y) return F.pairwise_distance(x, y, { eps = 0 }) end,
  ['F.local_response_norm'] = function(x) return F.local_response_norm(x, 2) end,
  ['F.rms_norm'] = function(x, w) return F.rms_norm(x, { 3 }, w) end,
  ['std'] = function(x) return x:std(2) end,
  ['std_mean'] = function(x) return torch.std_mean(x, 2) end,
  ['var'] = function(x) return x:var(2) end,
  ['norm'] = function(x) return x:norm() end,
  ['dist'] = function(x, y) return torch.dist(x, y) end,
  ['cov'] = function(x) return torch.cov(x) end,
  ['corrcoef'] = function(x) return torch.corrcoef(x) end,
  ['F.instance_norm'] = function(x) return F.instance_norm(x) end,
  ['addcmul'] = function(t, a, b) return torch.addcmul(t, a, b, { value = 0.5 }) end,
  ['addcdiv'] = function(t, a, b) return torch.addcdiv(t, a, b, { value = 0.25 }) end,
  ['floor_divide'] = function(a, b) return torch.floor_divide(a, b) end,
}

describe('half-precision compositions compute in float32 and round once', function()
  for _, c in ipairs(cases) do
    local op = c.name:match('^(%S+)')
    it(c.name, function()
      local fn = assert(OPS[op], op)
      local inputs = {}
      for i, v in ipairs(c.inputs) do inputs[i] = torch.tensor(v, { dtype = c.dtype }) end
      local got = table.pack(fn(table.unpack(inputs)))
      assert.are.equal(#c.expected, got.n, c.name .. ': results')
      for i, e in ipairs(c.expected) do close(e, got[i], c.dtype, c.name) end
    end)
  end

  it('keeps the gradient flowing to the half inputs', function()
    local x = torch.tensor({ { 300, 400 } }, { dtype = 'float16', requires_grad = true })
    local y = F.normalize(x)
    y:sum():backward()
    assert.are.equal('float16', x.grad.dtype)
    -- d/dx sum(x / |x|) = (|x|^2 - x (x1 + x2)) / |x|^3: {0.00032, -0.00024}
    local g = x.grad:tolist()[1]
    assert.is_true(math.abs(g[1] - 0.00032) < 2e-6)
    assert.is_true(math.abs(g[2] + 0.00024) < 2e-6)
  end)

  it('promotes a half input with a float32 one to float32, as PyTorch', function()
    local a = torch.tensor({ { 300, 400 } }, { dtype = 'float16' })
    assert.are.equal('float32', torch.cdist(a, torch.zeros(1, 2)).dtype)
    local r = torch.addcmul(torch.zeros(2), a[1], a[1])
    assert.are.equal('float32', r.dtype)
    assert.are.same({ 90000, 160000 }, r:tolist())
  end)

  it('keeps floor_divide and cov in the half dtype', function()
    for _, dt in ipairs { 'float16', 'bfloat16' } do
      local a = torch.tensor({ 7, -7 }, { dtype = dt })
      assert.are.equal(dt, torch.floor_divide(a, 2).dtype)
      assert.are.equal(dt, torch.floor_divide(a, torch.tensor({ 2, 2 }, { dtype = dt })).dtype)
      assert.are.equal(dt, torch.cov(torch.tensor({ { 1, 2, 4 }, { 0, 1, 1 } }, { dtype = dt })).dtype)
    end
  end)

  it('accepts float16 and bfloat16 in addcdiv and instance_norm', function()
    for _, dt in ipairs { 'float16', 'bfloat16' } do
      local t = torch.tensor({ 1, 2 }, { dtype = dt })
      assert.are.same({ 2, 3 }, torch.addcdiv(t, t, t):tolist())
      local y = F.instance_norm(torch.tensor({ { { 1, 3 } } }, { dtype = dt }))
      assert.are.equal(dt, y.dtype)
    end
  end)

  it('keeps instance_norm running statistics in their dtype', function()
    local rm, rv = torch.zeros(1, { dtype = 'float16' }), torch.ones(1, { dtype = 'float16' })
    F.instance_norm(torch.tensor({ { { 300, 500 } } }, { dtype = 'float16' }), { running_mean = rm, running_var = rv })
    assert.are.equal('float16', rm.dtype)
    -- PyTorch: running_mean 0.1 * 400 = 40, running_var 0.9 + 0.1 * 20000 = 2000.9
    assert.are.same({ 40 }, rm:tolist())
    assert.are.same({ 2001 }, rv:tolist())
  end)
end)
