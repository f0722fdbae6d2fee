-- torch.autograd.Function (custom ops with a Lua backward) and torch.autograd.grad: the
-- gradients against the built-in ops' (and float64 gradchecks), several inputs and
-- outputs, errors inside backward as Lua errors, released references, and grad's options.
local torch = require 'torch'
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function close(a, b, tol)
  local x, y = a:double():reshape(-1):tolist(), b:double():reshape(-1):tolist()
  assert(#x == #y, 'sizes differ')
  for i = 1, #x do assert(math.abs(x[i] - y[i]) <= (tol or 1e-12) * (1 + math.abs(y[i])), ('element %d: %g vs %g'):format(i, x[i], y[i])) end
end

local function f64(v, rg) return torch.tensor(v, { dtype = 'float64', requires_grad = rg }) end

local Exp = torch.autograd.Function:extend('Exp')
function Exp.forward(ctx, x)
  local y = x:exp()
  ctx:save_for_backward(y)
  return y
end
function Exp.backward(ctx, g) return g * ctx.saved_tensors[1] end

-- a * x^p, with a number argument that gets no gradient
local ScaledPow = torch.autograd.Function:extend('ScaledPow')
function ScaledPow.forward(ctx, a, x, p)
  ctx:save_for_backward(a, x)
  ctx.p = p
  return a * x ^ p
end
function ScaledPow.backward(ctx, g)
  local a, x = ctx.saved_tensors[1], ctx.saved_tensors[2]
  local ga = ctx.needs_input_grad[1] and (g * x ^ ctx.p) or nil
  local gx = ctx.needs_input_grad[2] and (g * a * ctx.p * x ^ (ctx.p - 1)) or nil
  return ga, gx, nil
end

-- two outputs: x + y and x * y
local SumProd = torch.autograd.Function:extend('SumProd')
function SumProd.forward(ctx, x, y)
  ctx:save_for_backward(x, y)
  return x + y, x * y
end
function SumProd.backward(ctx, gs, gp)
  local x, y = ctx.saved_tensors[1], ctx.saved_tensors[2]
  return gs + gp * y, gs + gp * x
end

describe('torch.autograd.Function', function()
  it('records a node whose backward is the Lua function', function()
    local x = f64({ 0.5, -1, 2 }, true)
    local y = Exp.apply(x)
    assert.are.equal('ExpBackward', tostring(y.grad_fn):match('<(.-)>') or tostring(y.grad_fn))
    assert.is_true(y.requires_grad)
    close(y, x:detach():exp())
    ;(y * f64 { 1, 2, 3 }):sum():backward()
    close(x.grad, x:detach():exp() * f64 { 1, 2, 3 })
  end)

  it('passes gradcheck, with a number argument and inputs that need no gradient', function()
    local a, x = f64({ 1.5, -0.5 }, true), f64({ 0.7, 1.3 }, true)
    assert.is_true(torch.autograd.gradcheck(function(a_, x_) return ScaledPow.apply(a_, x_, 3) end, { a, x }))
    local c = f64 { 2, 3 }
    local seen
    local Probe = torch.autograd.Function:extend('Probe')
    function Probe.forward(ctx, p, q, n) seen = ctx.needs_input_grad; return p * q * n end
    function Probe.backward(ctx, g) return nil, g * 2, nil end
    Probe.apply(c, x, 2):sum():backward()
    assert.are.same({ false, true, false }, seen)
  end)

  it('composes with built-in ops and sums the gradients of several outputs', function()
    local x, y = f64({ 1, 2 }, true), f64({ 3, -1 }, true)
    local s, p = SumProd.apply(x, y)
    ;(s * 2 + p:exp()):sum():backward()
    local x2, y2 = f64({ 1, 2 }, true), f64({ 3, -1 }, true)
    ;((x2 + y2) * 2 + (x2 * y2):exp()):sum():backward()
    close(x.grad, x2.grad)
    close(y.grad, y2.grad)
    -- only one output used: the other gets zeros
    local x3 = f64({ 1, 2 }, true)
    local _, p3 = SumProd.apply(x3, f64 { 3, -1 })
    p3:sum():backward()
    close(x3.grad, f64 { 3, -1 })
  end)

  it('records nothing when no input needs a gradient or grad mode is off', function()
    local y = Exp.apply(f64 { 1, 2 })
    assert.is_false(y.requires_grad)
    local x = f64({ 1 }, true)
    local z = torch.no_grad(function() return Exp.apply(x) end)
    assert.is_false(z.requires_grad)
  end)

  it('raises errors inside backward as Lua errors', function()
    local x = f64({ 1, 2 }, true)
    local Boom = torch.autograd.Function:extend('Boom')
    function Boom.forward(ctx, t) return t * 2 end
    function Boom.backward(ctx, g) error('boom in backward') end
    expect_error(function() Boom.apply(x):sum():backward() end, 'boom in backward')
    local Shape = torch.autograd.Function:extend('Shape')
    function Shape.forward(ctx, t) return t:sum() end
    function Shape.backward(ctx, g) return torch.ones(3, { dtype = 'float64' }) end
    expect_error(function() Shape.apply(x):backward() end, 'ShapeBackward: backward returned an invalid gradient at index 1', '[3]', '[2]')
    local Many = torch.autograd.Function:extend('Many')
    function Many.forward(ctx, t) return t * 1 end
    function Many.backward(ctx, g) return g, g end
    expect_error(function() Many.apply(x):sum():backward() end, 'incorrect number of gradients (expected 1, got 2)')
    local NotT = torch.autograd.Function:extend('NotT')
    function NotT.forward(ctx, t) return t * 1 end
    function NotT.backward(ctx, g) return 'grad' end
    expect_error(function() NotT.apply(x):sum():backward() end, 'returned a string as the gradient of argument 1')
    local Missing = torch.autograd.Function:extend('Missing')
    expect_error(function() Missing.apply(x) end, 'forward is not implemented')
    -- the graph still works afterwards
    local y = Exp.apply(x)
    y:sum():backward()
  end)

  it('refuses a saved tensor modified in place', function()
    local x = f64({ 1, 2 }, true)
    local y = Exp.apply(x)
    local h = y:detach()
    h:add_(1)
    expect_error(function() y:sum():backward() end, 'modified by an inplace operation')
  end)

  it('releases its Lua references with the graph', function()
    local weak = setmetatable({}, { __mode = 'v' })
    local Keep = torch.autograd.Function:extend('Keep')
    function Keep.forward(ctx, t) weak[1] = ctx; ctx:save_for_backward(t); return t * 2 end
    function Keep.backward(ctx, g) return g * 2 end
    do
      local y = Keep.apply(f64({ 1 }, true))
      assert.is_not_nil(weak[1])
      y = nil
    end
    collectgarbage(); collectgarbage()
    Exp.apply(f64({ 1 }, true))   -- the next Function call drops the freed nodes' references
    collectgarbage(); collectgarbage()
    assert.is_nil(weak[1])
  end)

  it('runs its backward from a coroutine too', function()
    local x = f64({ 1, 2 }, true)
    local co = coroutine.wrap(function()
      local y = Exp.apply(x)
      coroutine.yield(1)
      y:sum():backward()
      return 2
    end)
    assert.are.equal(1, co())
    assert.are.equal(2, co())
    close(x.grad, x:detach():exp())
  end)
end)

describe('torch.autograd.grad', function()
  it('returns the gradients without touching .grad', function()
    local x, w = f64({ 1, 2, 3 }, true), f64({ 0.5, -1, 2 }, true)
    local h = x * w
    local y = (h * h):sum()
    local g = torch.autograd.grad(y, { x, h }, { retain_graph = true })
    close(g[1], (x * w * w * 2):detach())
    close(g[2], (h * 2):detach())
    assert.is_nil(x.grad)
    assert.is_nil(w.grad)
    -- the graph was retained: a second pass
    local g2 = torch.autograd.grad(y, w)
    close(g2[1], (x * x * w * 2):detach())
  end)

  it('takes grad_outputs and several outputs', function()
    local x = f64({ 1, 2 }, true)
    local a, b = x * 3, x:exp()
    local g = torch.autograd.grad({ a, b }, x, { grad_outputs = { f64 { 1, 2 }, f64 { 1, 1 } } })
    close(g[1], f64 { 3, 6 } + x:detach():exp())
  end)

  it('goes through custom Functions', function()
    local x = f64({ 0.1, 0.2 }, true)
    local g = torch.autograd.grad(Exp.apply(x):sum(), x)
    close(g[1], x:detach():exp())
  end)

  it('names unused inputs unless allow_unused, and refuses bad calls', function()
    local x, z = f64({ 1 }, true), f64({ 2 }, true)
    local y = (x * 2):sum()
    expect_error(function() torch.autograd.grad(y, { x, z }, { retain_graph = true }) end,
      'inputs[2]) appears to not have been used in the graph')
    local g = torch.autograd.grad(y, { x, z }, { allow_unused = true })
    close(g[1], f64 { 2 })
    assert.is_nil(g[2])
    assert.are.equal(2, g.n)
    -- create_graph: the gradient of x^3 (3x^2) is differentiable again (6x)
    local gx = torch.autograd.grad((x * x * x):sum(), x, { create_graph = true })[1]
    assert.is_true(gx.requires_grad)
    close(gx, f64 { 3 })
    close(torch.autograd.grad(gx:sum(), x)[1], f64 { 6 })
    expect_error(function() torch.autograd.grad((x * 2):sum(), f64 { 1 }) end, 'inputs[1] does not require grad')
    expect_error(function() torch.autograd.grad(x * f64 { 1, 2 }, x) end, 'only for scalar outputs')
    expect_error(function() torch.autograd.grad((x * 2):sum(), x, { retain = true }) end, 'unknown option retain')
  end)
end)
