-- where and masked_fill: values against hand-computed results, broadcasting, dtype
-- promotion as PyTorch 1.13 (a Lua integer is int64, a float float32, a boolean bool), the
-- gradient (masked: a NaN outside the mask stays out), and errors.
local torch = require 'torch'
local expect_error = dofile('spec/helpers/check.lua').expect_error

describe('torch.where', function()
  it('picks a where the condition holds, else b, broadcasting the three', function()
    local c = torch.tensor({ { true }, { false } })
    local r = torch.where(c, torch.tensor({ 1, 2, 3 }), torch.tensor({ { 10 }, { 20 } }))
    assert.are.same({ { 1, 2, 3 }, { 20, 20, 20 } }, r:tolist())
    assert.are.equal('int64', r.dtype)
  end)

  it('promotes as PyTorch: numbers are scalars, tensors keep their dtype', function()
    local c = torch.tensor({ true, false })
    assert.are.equal('int64', torch.where(c, 1, 2).dtype)
    assert.are.equal('float32', torch.where(c, 1.5, torch.tensor({ 3, 4 })).dtype)
    assert.are.equal('float64', torch.where(c, torch.zeros(2, { dtype = 'float64' }), 1.5).dtype)
    assert.are.equal('bool', torch.where(c, true, false).dtype)
    assert.are.same({ 1.5, 4 }, torch.where(c, 1.5, torch.tensor({ 3, 4 })):tolist())
  end)

  it('sends the gradient to the side the condition picked, 0 elsewhere even for NaN', function()
    local x = torch.tensor({ 1.5, -2, 0 / 0 }, { requires_grad = true })
    local y = torch.where(x:gt(0), x * 2, 0.5)
    assert.are.equal('<WhereBackward0>', tostring(y.grad_fn))
    y:sum():backward()
    assert.are.same({ 2, 0, 0 }, x.grad:tolist())
    local a = torch.randn(3, 4, { dtype = 'float64', requires_grad = true })
    local b = torch.randn(4, { dtype = 'float64', requires_grad = true })
    local m = torch.randn(3, 4):gt(0)
    assert.is_true(torch.autograd.gradcheck(function(p, q) return torch.where(m, p, q) end, { a, b }))
  end)

  it('refuses a condition that is not bool, and shapes that do not broadcast', function()
    expect_error(function() torch.where(torch.ones(2), 1, 2) end, 'bool', 'float32')
    expect_error(function() torch.where(torch.ones(2):gt(0), torch.ones(3), 0) end, 'must match')
  end)
end)

describe('masked_fill', function()
  it('fills where the mask holds, keeping the tensor dtype', function()
    local t = torch.arange(6):view(2, 3)
    assert.are.same({ { 0, 1, 2 }, { -1, -1, -1 } }, t:masked_fill(t:gt(2), -1):tolist())
    assert.are.equal('int64', t:masked_fill(t:gt(2), 2.7).dtype)
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, t:tolist())
  end)

  it('in place with a broadcast mask returns the tensor itself', function()
    local t = torch.zeros(2, 3)
    local r = t:masked_fill_(torch.tensor({ true, false, true }), 9)
    assert.are.equal(t, r)
    assert.are.same({ { 9, 0, 9 }, { 9, 0, 9 } }, t:tolist())
  end)

  it('refuses a mask that would grow the tensor and a value that is not 0-dim', function()
    expect_error(function() torch.zeros(3):masked_fill(torch.ones(2, 3):gt(0), 1) end, 'does not broadcast')
    expect_error(function() torch.zeros(3):masked_fill(torch.ones(3):gt(0), torch.ones(3)) end, '0-dimensional')
  end)
end)
