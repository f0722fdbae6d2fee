-- Places where a program translated from PyTorch used to get a wrong answer with no error:
-- repeat's copy, Sequential's add_module, element access under autograd, the distributed
-- PRODUCT reduction, tied parameters in state dicts and the small errors that stopped
-- programs. Expected values come from PyTorch 1.13 run on the same inputs.
local torch = require 'torch'
local nn = require 'nn'

local function close(got, want, tol)
  if type(want) == 'number' then got, want = { got }, { want } end
  assert.are.equal(#want, #got)
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) <= (tol or 1e-5) * math.max(1, math.abs(want[i])),
      ('element %d: %s, PyTorch %s'):format(i, got[i], want[i]))
  end
end

describe('repeat copies', function()
  it('never shares memory with its input, whatever the sizes', function()
    local x = torch.tensor({ { 1, 2 }, { 3, 4 } })
    local r = x['repeat'](x, 1, 1)
    r[1][1] = 9
    assert.are.same({ { 1, 2 }, { 3, 4 } }, x:tolist())
    local y = torch.tensor({ 5 })
    local r2 = torch['repeat'](y, 3)
    r2[1] = 9
    -- PyTorch: y.repeat(3); r[0] = 9 -> y tensor([5.]), r tensor([9., 5., 5.])
    assert.are.same({ 5 }, y:tolist())
    assert.are.same({ 9, 5, 5 }, r2:tolist())
    local r3 = y:repeatTensor(1)
    r3:fill_(0)
    assert.are.same({ 5 }, y:tolist())
  end)

  it('tile copies and in-place ops on the result work', function()
    local z = torch.ones(2, 2)
    local t = z:tile({ 1 })
    t:add_(1)
    assert.are.same({ { 1, 1 }, { 1, 1 } }, z:tolist())
    assert.are.same({ { 2, 2 }, { 2, 2 } }, t:tolist())
    local u = torch.tile(z, { 1, 1 })
    u:mul_(3)
    assert.are.same({ { 1, 1 }, { 1, 1 } }, z:tolist())
  end)

  it('values and gradient as PyTorch', function()
    local x = torch.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = torch.float32, requires_grad = true })
    local r = x['repeat'](x, 2, 1, 3)
    assert.are.same({ 2, 2, 6 }, r:size():totable())
    assert.are.same({ { 1, 2, 1, 2, 1, 2 }, { 3, 4, 3, 4, 3, 4 } }, r[1]:tolist())
    local w = torch.arange(0, r:numel()):reshape(r:size()):float()
    ;(r * w):sum():backward()
    -- PyTorch: x.repeat(2,1,3); (r * arange(24).reshape(r.shape)).sum().backward()
    close(x.grad:flatten():tolist(), { 48, 54, 84, 90 })
    -- repeats of 1 still carry the gradient
    local x2 = torch.tensor({ 1, 2 }, { dtype = torch.float32, requires_grad = true })
    local r2 = x2['repeat'](x2, 1)
    ;(r2 * torch.tensor({ 3, 5 })):sum():backward()
    close(x2.grad:tolist(), { 3, 5 })
  end)
end)
