-- linspace, logspace, full_like and the new_* methods, against PyTorch 1.13's values.
local torch = require 'torch'

local function close(got, want, tol)
  assert.are.equal(#want, #got)
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) <= tol * math.max(1, math.abs(want[i])),
      ('element %d: %s, PyTorch %s'):format(i, got[i], want[i]))
  end
end

describe('linspace and logspace', function()
  it('match PyTorch, both ends exact', function()
    -- torch.linspace(-1.3, 2.9, 11).tolist()
    local want = { -1.2999999523162842, -0.8799999952316284, -0.4599999785423279, -0.03999999165534973,
      0.3799999952316284, 0.8000001907348633, 1.220000147819519, 1.6400001049041748, 2.06000018119812,
      2.4800000190734863, 2.9000000953674316 }
    local t = torch.linspace(-1.3, 2.9, 11)
    assert.are.equal('float32', t.dtype)
    close(t:tolist(), want, 1e-6)
    assert.are.equal(want[1], t:tolist()[1])
    assert.are.equal(want[11], t:tolist()[11])
    close(torch.linspace(0, 1, 4, { dtype = 'float64' }):tolist(), { 0, 1 / 3, 2 / 3, 1 }, 1e-15)
    assert.are.same({ 1 }, torch.linspace(1, 2, 1):tolist())
    assert.are.same({}, torch.linspace(1, 2, 0):tolist())
    -- torch.logspace(-2, 2, 5, base=3).tolist()
    close(torch.logspace(-2, 2, 5, 3):tolist(), { 0.1111111119389534, 0.3333333432674408, 1.0, 3.0, 9.0 }, 1e-6)
    close(torch.logspace(0, 3, 4):tolist(), { 1, 10, 100, 1000 }, 1e-6)
  end)

  it('refuse a negative or fractional number of steps', function()
    assert.has_error(function() torch.linspace(0, 1, -1) end)
    assert.has_error(function() torch.linspace(0, 1, 2.5) end)
  end)
end)

describe('full_like and new_*', function()
  it('take the tensor dtype and device unless told otherwise', function()
    local t = torch.ones(2, 3, { dtype = 'int64' })
    local f = torch.full_like(t, 7)
    assert.are.equal('int64', f.dtype)
    assert.are.same({ { 7, 7, 7 }, { 7, 7, 7 } }, f:tolist())
    assert.are.same({ { 0, 0 }, { 0, 0 } }, t:new_zeros(2, 2):tolist())
    assert.are.same({ 1, 1, 1 }, t:new_ones({ 3 }):tolist())
    assert.are.same({ 5, 5 }, t:new_full({ 2 }, 5):tolist())
    assert.are.equal('int64', t:new_tensor({ 1, 2 }).dtype)
    assert.are.equal('float32', t:new_zeros(2, { dtype = 'float32' }).dtype)
    assert.are.same({ 2, 3 }, t:new_empty(t:size()):size():totable())
  end)
end)
