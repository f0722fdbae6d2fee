-- Findings of the differential fuzzer (tools/fuzz), each reduced to the few lines that show
-- it, with PyTorch 1.13's result as the expectation.  A finding stays here once fixed, as a
-- regression check.
local torch = require 'torch'

local function values(t)
  return torch.is_tensor(t) and t:tolist() or t
end

describe('fuzz findings: dtypes', function()
  it('an integer tensor minus an integral float number is float32', function()
    -- PyTorch: torch.tensor([3]) - 2.0 is tensor([1.]) (float32); dplua keeps int64
    assert.are.equal('float32', (torch.tensor({ 3 }) - 2.0).dtype)
    assert.are.equal('float32', torch.tensor(3):sub(2.0).dtype)
  end)

  it('a 0-dim float64 tensor with a bool tensor gives float64', function()
    -- PyTorch: a 0-dim operand of a higher category decides the dtype (float64, not float32)
    local x = torch.tensor(3.0, { dtype = 'float64' })
    assert.are.equal('float64', x:pow(torch.tensor({ true })).dtype)
    assert.are.equal('float64', torch.tensor({ true, false }):minimum(torch.tensor(-1.0, { dtype = 'float64' })).dtype)
  end)

  it('maximum of a bool tensor and a boolean is bool', function()
    -- PyTorch: torch.maximum(torch.tensor([True]), torch.tensor(False)) is tensor([True])
    local r = torch.maximum(torch.tensor({ true }), false)
    assert.are.equal('bool', r.dtype)
    assert.are.same({ true }, r:tolist())
  end)

  it('clamp of an integer tensor with float bounds is float32', function()
    -- PyTorch: torch.clamp(torch.tensor([4, -2]), 1.0, -3) is tensor([-3., -3.])
    local r = torch.tensor({ 4, -2 }):clamp(1.0, -3)
    assert.are.equal('float32', r.dtype)
    assert.are.same({ -3, -3 }, r:tolist())
  end)

  it('hypot of an integer tensor and a float number computes in float32', function()
    -- PyTorch: torch.hypot(torch.tensor(-1), torch.tensor(3.0)) is tensor(3.1623)
    local r = torch.hypot(torch.tensor(-1), 3.0)
    assert.are.equal('float32', r.dtype)
    assert.is_true(math.abs(r:item() - math.sqrt(10)) < 1e-6)
  end)
end)

describe('fuzz findings: arguments and errors', function()
  it('add and sub take a number with alpha', function()
    -- PyTorch: torch.add(torch.tensor([1.0]), 2, alpha=3) is tensor([7.])
    assert.are.same({ 7 }, values(torch.tensor({ 1.0 }):add(2, 3)))
    assert.are.same({ -5 }, values(torch.sub(torch.tensor({ 1.0 }), 2, 3)))
  end)

  it('sub_ refuses bool tensors as sub does', function()
    -- PyTorch: torch.tensor([True]).sub_(torch.tensor([True])) raises "Subtraction, the `-`
    -- operator, with a bool tensor is not supported"; dplua gives tensor([False])
    assert.has_error(function() torch.tensor({ true }):sub_(torch.tensor({ true })) end)
  end)
end)

describe('fuzz findings: autograd', function()
  it('transpose of a 0-dim tensor passes the gradient on', function()
    -- PyTorch: x.transpose(0, 0).sum() + x.abs().sum() with x = -1.5 gives x.grad 0
    local x = torch.tensor(-1.5, { dtype = 'float64', requires_grad = true })
    local loss = x:transpose(1, 1):sum() + x:abs():sum()
    loss:backward()
    assert.are.equal(0, x.grad:item())
  end)

  it('pow(x, x) at x = 0 has gradient 0, as PyTorch masks it', function()
    -- PyTorch: r = w.relu(); r.pow(r).sum().backward() gives w.grad [2.1406, 0.]
    local w = torch.tensor({ 1.4, -0.2 }, { dtype = 'float64', requires_grad = true })
    local r = w:relu()
    r:pow(r):sum():backward()
    assert.are.equal(0, w.grad:tolist()[2])
  end)

  it('max() sends the gradient only to the maximum, even when it is NaN', function()
    -- PyTorch: torch.acos(m.max()).backward() with m = [0.5, 3, 1] gives m.grad [0, nan, 0]
    local m = torch.tensor({ 0.5, 3.0, 1.0 }, { dtype = 'float64', requires_grad = true })
    torch.acos(m:max()):backward()
    local g = m.grad:tolist()
    assert.are.equal(0, g[1])
    assert.are_not.equal(g[2], g[2])
    assert.are.equal(0, g[3])
  end)

  it('minimum(a, a) of NaN elements passes the gradient to both sides, as PyTorch', function()
    -- PyTorch: x = [-1.5, 2]; l = x.log2(); torch.minimum(l, l).sum().backward() gives
    -- x.grad [-1.9236, 0.7213]: at the NaN both sides take the whole gradient (not a tie),
    -- at 2 each side takes half
    local x = torch.tensor({ -1.5, 2 }, { dtype = 'float64', requires_grad = true })
    local l = x:log2()
    torch.minimum(l, l):sum():backward()
    local g = x.grad:tolist()
    assert.is_true(math.abs(g[1] - 2 / (-1.5 * math.log(2))) < 1e-12)
    assert.is_true(math.abs(g[2] - 1 / (2 * math.log(2))) < 1e-12)
  end)
end)

describe('fuzz findings: alpha', function()
  it('add/sub with a float alpha and an int64 tensor keep the alpha', function()
    -- PyTorch: torch.add(torch.tensor([-1.75]), torch.tensor([-4]), alpha=2.0) gives [-9.75];
    -- torch.sub(torch.zeros(1, dtype=float64), torch.tensor([1]), alpha=-0.25) gives [0.25]
    assert.are.same({ -9.75 }, torch.add(torch.tensor({ -1.75 }), torch.tensor({ -4 }), 2.0):tolist())
    local r = torch.sub(torch.zeros(1, { dtype = 'float64' }), torch.tensor({ 1 }), -0.25)
    assert.are.same({ 0.25 }, r:tolist())
    assert.are.equal('float64', r.dtype)
  end)
end)
