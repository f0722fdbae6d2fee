-- autograd: every differentiable op of the tensor API checked with gradcheck (float64
-- central differences), compositions, and the rules of backward (errors, accumulation,
-- retain_graph, no_grad, detach).
local torch = require 'torch'
local nn = require 'nn'
local autograd = require 'torch.autograd'
local F = nn.functional
local expect_error = dofile('spec/helpers/check.lua').expect_error

-- A float64 leaf that requires grad: random normal values, or the given ones.
local function leaf(sizes_or_values, shift)
  local t
  if type(sizes_or_values[1]) == 'table' or math.type(sizes_or_values[1]) == 'float' then
    t = torch.tensor(sizes_or_values, { dtype = 'float64' })
  else
    t = torch.randn(sizes_or_values, { dtype = 'float64' })
  end
  if shift then t = t:abs() + shift end
  return t:detach():requires_grad_(true)
end

local function check(fn, ...)
  assert.is_true(autograd.gradcheck(fn, { ... }))
end

-- Values kept away from the kinks of relu, abs and clamp.
local away = { { -1.5, -0.7, 0.3 }, { 0.9, -0.2, 1.1 } }

describe('gradcheck on elementwise ops', function()
  before_each(function() torch.manual_seed(11) end)

  it('add, sub, mul, div with broadcasting and numbers', function()
    local a, b, c = leaf { 2, 3 }, leaf { 3 }, leaf({ 2, 1 }, 0.5)
    check(function(x, y) return x + y end, a, b)
    check(function(x, y) return x - y end, a, c)
    check(function(x, y) return x * y end, a, b)
    check(function(x, y) return x / y end, a, c)
    check(function(x, y) return x:add(y):mul(y):sub(x):div(y) end, a, c)
    check(function(x) return 2 * x + 1 - x / 4 end, a)
    check(function(x) return 3 / x - 1 end, c)
    check(function(x, y) return torch.add(x, y) end, a, b)
  end)

  it('pow, neg, exp, log, sqrt', function()
    local a, p = leaf({ 2, 3 }, 0.5), leaf({ 3 }, 0.5)
    check(function(x) return x ^ 2 end, a)
    check(function(x) return x:pow(0.5) end, a)
    check(function(x, y) return x:pow(y) end, a, p)
    check(function(x) return 2 ^ x end, a)
    check(function(x) return -x end, a)
    check(function(x) return x:neg():exp() end, a)
    check(function(x) return x:log() end, a)
    check(function(x) return x:sqrt() end, a)
    check(function(x) return torch.exp(x) end, a)
  end)

  it('abs, relu, sigmoid, tanh, clamp', function()
    local a = leaf(away)
    check(function(x) return x:abs() end, a)
    check(function(x) return x:relu() end, a)
    check(function(x) return x:sigmoid() end, a)
    check(function(x) return x:tanh() end, a)
    check(function(x) return x:clamp(-1, 1) end, a)
    check(function(x) return x:clamp(-0.5, 0.5) end, a)
  end)
end)

describe('gradcheck on matrix products', function()
  before_each(function() torch.manual_seed(12) end)

  it('matmul in every shape, mm, addmm', function()
    check(function(x, y) return x:matmul(y) end, leaf { 2, 3 }, leaf { 3, 4 })
    check(function(x, y) return x:matmul(y) end, leaf { 3 }, leaf { 3, 4 })
    check(function(x, y) return x:matmul(y) end, leaf { 2, 3 }, leaf { 3 })
    check(function(x, y) return x:matmul(y) end, leaf { 3 }, leaf { 3 })
    check(function(x, y) return x:matmul(y) end, leaf { 2, 2, 3 }, leaf { 2, 3, 2 })
    check(function(x, y) return x:matmul(y) end, leaf { 2, 2, 3 }, leaf { 3, 2 })
    check(function(x, y) return torch.matmul(x, y) end, leaf { 3, 2 }, leaf { 2, 2, 4 })
    check(function(x, y) return x:mm(y) end, leaf { 2, 3 }, leaf { 3, 4 })
    check(function(c, x, y) return c:addmm(x, y) end, leaf { 2, 4 }, leaf { 2, 3 }, leaf { 3, 4 })
    check(function(c, x, y) return c:addmm(x, y) end, leaf { 4 }, leaf { 2, 3 }, leaf { 3, 4 })
    check(function(x, w, b) return F.linear(x, w, b) end, leaf { 3, 4 }, leaf { 2, 4 }, leaf { 2 })
  end)
end)

describe('gradcheck on reductions', function()
  before_each(function() torch.manual_seed(13) end)

  it('sum and mean, all, by dim, keepdim', function()
    local a = leaf { 2, 3, 4 }
    for _, op in ipairs { 'sum', 'mean' } do
      check(function(x) return x[op](x) end, a)
      check(function(x) return x[op](x, 1) end, a)
      check(function(x) return x[op](x, 2, true) end, a)
      check(function(x) return x[op](x, -1) end, a)
    end
  end)

  it('max and min, all and by dim', function()
    local a = leaf { 3, 4 }
    for _, op in ipairs { 'max', 'min' } do
      check(function(x) return x[op](x) end, a)
      check(function(x) return (x[op](x, 1)) end, a)
      check(function(x) return (x[op](x, 2, true)) end, a)
    end
  end)

  it('softmax and log_softmax', function()
    local a = leaf { 3, 4 }
    check(function(x) return x:softmax(1) end, a)
    check(function(x) return x:softmax(2) end, a)
    check(function(x) return x:log_softmax(2) end, a)
    check(function(x) return x:log_softmax(-2) end, a)
    check(function(x) return torch.softmax(x, 2) end, a)
  end)
end)

describe('gradcheck on views and copies', function()
  before_each(function() torch.manual_seed(14) end)

  it('select, narrow, view, reshape, transpose, permute', function()
    local a = leaf { 2, 3, 4 }
    check(function(x) return x:select(2, 2) end, a)
    check(function(x) return x[2] * 2 end, a)
    check(function(x) return x:narrow(3, 2, 2) end, a)
    check(function(x) return x:view(6, 4):mul(3) end, a)
    check(function(x) return x:view(-1, 2) end, a)
    check(function(x) return x:transpose(1, 3):reshape(4, 6) end, a)
    check(function(x) return x:permute(3, 1, 2):contiguous() end, a)
    check(function(x) return x:select(1, 1):t() end, a)
  end)

  it('unsqueeze, squeeze, expand, flatten, clone, split, chunk', function()
    check(function(x) return x:unsqueeze(2) * 2 end, leaf { 2, 3 })
    check(function(x) return x:squeeze() end, leaf { 2, 1, 3 })
    check(function(x) return x:squeeze(2) end, leaf { 2, 1, 3 })
    check(function(x) return x:expand(3, 4) end, leaf { 3, 1 })
    check(function(x) return x:expand(2, 3, 4) * 1 end, leaf { 3, 1 })
    check(function(x) return x:flatten() end, leaf { 2, 3, 2 })
    check(function(x) return x:flatten(2, 3) end, leaf { 2, 3, 2 })
    check(function(x) return x:clone() end, leaf { 2, 3 })
    check(function(x) local p = x:split(2, 2); return p[2] * p[1]:sum() end, leaf { 2, 4 })
    check(function(x) local p = x:chunk(2, 1); return p[1] - p[2] end, leaf { 4, 3 })
  end)

  it('cat, stack, index_select', function()
    local a, b = leaf { 2, 3 }, leaf { 1, 3 }
    check(function(x, y) return torch.cat({ x, y, x }, 1) end, a, b)
    check(function(x, y) return torch.cat({ x, y:expand(2, 3) }, 2) end, a, b)
    check(function(x) return torch.stack({ x, x * 2 }, 2) end, a)
    check(function(x) return torch.stack({ x, x }, 1) end, a)
    check(function(x) return x:index_select(1, torch.tensor { 2, 1, 2 }) end, a)
    check(function(x) return x:index_select(2, torch.tensor { 3, 3 }) end, a)
  end)

  it('to() across CPU devices', function()
    -- CPU devices are fixed before the first tensor, so this runs in a fresh interpreter
    local code = [[
      local torch = require 'torch'
      assert(torch.cpu.device_count() == 2)
      local x = torch.randn(2, 3, { dtype = 'float64', requires_grad = true })
      assert(torch.autograd.gradcheck(function(a) return a:to('cpu:1'):mul(2):exp():to('cpu') end, { x }))
      local y = torch.randn(3, { dtype = 'float64', requires_grad = true })
      local z = torch.randn(3, { dtype = 'float64' }):to('cpu:1')
      assert(torch.autograd.gradcheck(function(a) return (a:to('cpu:1') * z):sum() end, { y }))
      print('cross-device gradcheck ok')
    ]]
    local p = assert(io.popen("DPLUA_CPU_DEVICES=2 lua5.4 -e '" .. code:gsub("'", "'\\''") .. "' 2>&1"))
    local out = p:read('a')
    p:close()
    assert(out:find('cross-device gradcheck ok', 1, true), out)
  end)
end)

describe('gradcheck on compositions', function()
  before_each(function() torch.manual_seed(15) end)

  it('broadcasting chains', function()
    check(function(a, b, c) return (a * b + c):tanh():sum(1) end, leaf { 3, 1 }, leaf { 1, 4 }, leaf { 4 })
    check(function(a) return (a - a:mean(2, true)) / (a:pow(2):sum(2, true) + 1):sqrt() end, leaf { 3, 4 })
  end)

  it('losses', function()
    local t = torch.tensor { 2, 1, 3 }
    check(function(x, y) return F.mse_loss(x, y) end, leaf { 3, 2 }, leaf { 3, 2 })
    check(function(x, y) return F.mse_loss(x, y, { reduction = 'none' }) end, leaf { 3, 2 }, leaf { 3, 2 })
    check(function(x) return F.cross_entropy(x, t) end, leaf { 3, 4 })
    check(function(x) return F.cross_entropy(x, t, { reduction = 'sum' }) end, leaf { 3, 4 })
    check(function(x) return F.cross_entropy(x, t, { reduction = 'none' }) end, leaf { 3, 4 })
    check(function(x) return F.nll_loss(x:log_softmax(2), t) end, leaf { 3, 4 })
  end)

  it('a small MLP, with respect to its input and its weights', function()
    local w1, b1, w2, b2 = leaf { 5, 3 }, leaf { 5 }, leaf { 2, 5 }, leaf { 2 }
    local x = leaf { 4, 3 }
    local target = torch.tensor { 1, 2, 2, 1 }
    check(function(x_, a, b, c, d)
      return F.cross_entropy(F.linear(F.linear(x_, a, b):tanh(), c, d), target)
    end, x, w1, b1, w2, b2)
    local m = nn.Sequential(nn.Linear(3, 4), nn.Sigmoid(), nn.Linear(4, 2)):double()
    check(function(x_) return m(x_) end, x)
  end)
end)

describe('gradcheck itself', function()
  it('names the input, element and both values of a wrong gradient', function()
    local x = leaf { { 1.0, 2.0 }, { 3.0, 4.0 } }
    -- d/dx (x * detached x) is x, not 2x
    local err = expect_error(function()
      autograd.gradcheck(function(a) return a * a:detach() end, { x })
    end, 'input 1', 'element 1', 'analytical 1', 'numerical 2')
    assert.is_truthy(err:find('gradcheck', 1, true))
  end)

  it('checks float32 inputs in float64, takes a single tensor, leaves .grad alone', function()
    local x = torch.randn(3, { requires_grad = true })
    assert.is_true(autograd.gradcheck(function(a) return a:sigmoid() end, x))
    assert.is_nil(x.grad)
    local y = leaf { 3 }
    y:sum():backward()
    assert.is_true(autograd.gradcheck(function(a) return a * a end, { y }))
    assert.is_true(torch.equal(y.grad, torch.ones(3, { dtype = 'float64' })))
  end)

  it('rejects inputs without anything to check', function()
    expect_error(function() autograd.gradcheck(function(a) return a end, { torch.zeros(2) }) end, 'requires grad')
    expect_error(function() autograd.gradcheck(function(a) return a end, { leaf { 2 } }, { epsilon = 1 }) end, 'epsilon')
  end)

  it('is torch.autograd', function()
    assert.are.equal(autograd, torch.autograd)
  end)
end)

describe('backward', function()
  it('needs a gradient for a non-scalar output', function()
    local x = torch.randn(3, { requires_grad = true })
    expect_error(function() (x * 2):backward() end, 'scalar')
  end)

  it('refuses a second backward unless the graph was retained', function()
    local x = torch.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local y = (x * x):sum()
    y:backward(nil, { retain_graph = true })
    y:backward()
    assert.is_true(torch.equal(x.grad, torch.tensor { 4.0, 8.0 }))
    expect_error(function() y:backward() end, 'backward')
  end)

  it('refuses a gradient of the wrong shape', function()
    local x = torch.randn(2, 3, { requires_grad = true })
    local y = x * 2
    expect_error(function() y:backward(torch.ones(3, 2)) end, '[2, 3]')
  end)

  it('accumulates over backward passes', function()
    local x = torch.tensor({ 1.0, -2.0, 3.0 }, { requires_grad = true })
    ;(x * 3):sum():backward()
    ;(x * x):sum():backward()
    assert.is_true(torch.allclose(x.grad, torch.tensor { 5.0, -1.0, 9.0 }))
    local y = torch.tensor({ 1.0, 2.0 }, { requires_grad = true })
    autograd.backward({ y * 2, (y * y):sum() }, { torch.ones(2), nil })
    assert.is_true(torch.allclose(y.grad, torch.tensor { 4.0, 6.0 }))
  end)

  it('records nothing under no_grad, and detach cuts the graph', function()
    local x = torch.randn(3, { requires_grad = true })
    local y
    torch.no_grad(function() y = x * 2 end)
    assert.is_false(y.requires_grad)
    assert.is_nil(y.grad_fn)
    local z = x * 2
    assert.is_true(z.requires_grad)
    assert.is_not_nil(z.grad_fn)
    assert.is_false(z.is_leaf)
    local d = z:detach()
    assert.is_false(d.requires_grad)
    assert.is_true(d.is_leaf)
    d:fill_(7)                                   -- shares storage
    assert.are.equal(7, z[1]:item())      -- z has a history: z[1] is a 0-dim tensor
    local w = (x * 2 + d):sum()
    w:backward()
    assert.is_true(torch.equal(x.grad, torch.full({ 3 }, 2.0)))
  end)

  it('only floating point tensors can require grad', function()
    expect_error(function() torch.tensor({ 1, 2 }):requires_grad_(true) end, 'int64')
    expect_error(function() torch.tensor({ true }):requires_grad_(true) end, 'bool')
    local x = torch.zeros(2)
    assert.are.equal(x, x:requires_grad_(true))
    assert.is_true(x.requires_grad)
  end)
end)
