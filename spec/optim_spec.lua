-- optim: single steps of SGD, Adam and AdamW against the update rules computed by hand
-- (in float64 here, so the float32 engine is held to float32 rounding), parameter groups,
-- state saving and the errors for bad settings.
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function close(t, expected, tol)
  local got = t:detach():double():tolist()
  tol = tol or 1e-6
  for i, e in ipairs(expected) do
    assert(math.abs(got[i] - e) <= tol * (1 + math.abs(e)),
      ('element %d: %.9g, expected %.9g'):format(i, got[i], e))
  end
end

-- A parameter p and a loss whose gradient with respect to p is g: sum(p * g).
local function param(values)
  return nn.Parameter(torch.tensor(values, { dtype = 'float32' }))
end
local function backward_with(p, g)
  (p * torch.tensor(g, { dtype = 'float32' })):sum():backward()
end

describe('optim.SGD', function()
  it('takes a plain step p - lr * g', function()
    local p = param { 1, 2, -3 }
    local opt = optim.SGD({ p }, { lr = 0.1 })
    backward_with(p, { 3, -4, 0.5 })
    opt:step()
    close(p, { 0.7, 2.4, -3.05 })
  end)

  it('follows PyTorch\'s momentum, dampening and weight decay over three steps', function()
    local p = param { 1, -2 }
    local lr, mom, damp, wd = 0.1, 0.9, 0.2, 0.01
    local opt = optim.SGD({ p }, { lr = lr, momentum = mom, dampening = damp, weight_decay = wd })
    local grads = { { 0.5, 1 }, { -1, 2 }, { 0.25, 0.25 } }
    local ref, buf = { 1, -2 }, nil
    for step, g in ipairs(grads) do
      opt:zero_grad()
      backward_with(p, g)
      opt:step()
      local d = { g[1] + wd * ref[1], g[2] + wd * ref[2] }
      if step == 1 then buf = { d[1], d[2] }   -- first step: the buffer is the gradient
      else buf = { mom * buf[1] + (1 - damp) * d[1], mom * buf[2] + (1 - damp) * d[2] } end
      ref = { ref[1] - lr * buf[1], ref[2] - lr * buf[2] }
      close(p, ref)
    end
    close(opt.state[p].momentum_buffer, buf)
  end)

  it('does Nesterov momentum', function()
    local p = param { 0.5 }
    local opt = optim.SGD({ p }, { lr = 0.2, momentum = 0.8, nesterov = true })
    backward_with(p, { 1 }); opt:step()           -- buf = 1, d = 1 + 0.8 = 1.8
    close(p, { 0.5 - 0.2 * 1.8 })
    opt:zero_grad(); backward_with(p, { 2 }); opt:step()   -- buf = 0.8 + 2, d = 2 + 0.8 * 2.8
    close(p, { 0.5 - 0.2 * 1.8 - 0.2 * (2 + 0.8 * 2.8) })
  end)

  it('skips parameters without a gradient and honours groups and lr changes', function()
    local a, b, c = param { 1 }, param { 1 }, param { 1 }
    local opt = optim.SGD({ { params = { a } }, { params = { b, c }, lr = 1 } }, { lr = 0.1 })
    assert.are.equal(2, #opt.param_groups)
    assert.are.equal(0.1, opt.param_groups[1].lr)
    assert.are.equal(0, opt.param_groups[2].momentum)
    backward_with(a, { 1 }); backward_with(b, { 1 })
    opt:step()
    close(a, { 0.9 }); close(b, { 0 }); close(c, { 1 })
    opt.param_groups[1].lr = 0.5
    opt:step()                                    -- the same gradients again
    close(a, { 0.4 })
  end)

  it('zero_grad zeroes the gradients in place', function()
    local p = param { 1, 2 }
    local opt = optim.SGD({ p }, { lr = 0.1 })
    backward_with(p, { 1, 1 })
    opt:zero_grad()
    close(p.grad, { 0, 0 })
    backward_with(p, { 2, 3 })
    close(p.grad, { 2, 3 })
  end)

  it('rejects bad settings with clear errors', function()
    local p = param { 1 }
    expect_error(function() optim.SGD({}, { lr = 0.1 }) end, 'empty parameter list')
    expect_error(function() optim.SGD({ p }) end, 'lr', 'required')
    expect_error(function() optim.SGD({ p }, {}) end, 'lr', 'required')
    expect_error(function() optim.SGD({ p }, { lr = -1 }) end, 'learning rate', '-1')
    expect_error(function() optim.SGD({ p }, { lr = 0.1, momentum = -0.5 }) end, 'momentum', '-0.5')
    expect_error(function() optim.SGD({ p }, { lr = 0.1, nesterov = true }) end, 'Nesterov')
    expect_error(function() optim.SGD({ p }, { lr = 0.1, momentun = 0.9 }) end, 'momentun')
    expect_error(function() optim.SGD({ p, 'x' }, { lr = 0.1 }) end, 'parameter 2', 'string')
    expect_error(function() optim.SGD({ p, p }, { lr = 0.1 }) end, 'more than one')
    expect_error(function() optim.SGD({ { params = { p } }, { params = { p } } }, { lr = 0.1 }) end, 'more than one')
    expect_error(function() optim.SGD(5, { lr = 0.1 }) end, 'params')
  end)

  it('takes a model\'s parameters', function()
    local m = nn.Linear(3, 2)
    local opt = optim.SGD(m:parameters(), { lr = 0.5 })
    local w = m.weight:clone()
    m(torch.ones(1, 3)):sum():backward()
    opt:step()
    -- d sum(W x + b) / dW = 1 for x = 1
    assert.is_true(torch.allclose(m.weight, w - 0.5, 1e-6, 1e-6))
    local opt2 = optim.SGD(m:named_parameters(), { lr = 0.5 })
    assert.are.equal(2, #opt2.param_groups[1].params)
  end)
end)

-- PyTorch 1.13's Adam, in float64.
local function adam_ref(p, grads, o)
  local m, v = {}, {}
  for i = 1, #p do m[i], v[i] = 0, 0 end
  for t, g in ipairs(grads) do
    for i = 1, #p do
      local gi = g[i]
      if o.decoupled then p[i] = p[i] * (1 - o.lr * o.wd) else gi = gi + o.wd * p[i] end
      m[i] = o.b1 * m[i] + (1 - o.b1) * gi
      v[i] = o.b2 * v[i] + (1 - o.b2) * gi * gi
      local step_size = o.lr / (1 - o.b1 ^ t)
      local denom = math.sqrt(v[i]) / math.sqrt(1 - o.b2 ^ t) + o.eps
      p[i] = p[i] - step_size * m[i] / denom
    end
  end
  return p, m, v
end

describe('optim.Adam and optim.AdamW', function()
  local grads = { { 0.5, -1, 1e-3 }, { 0.25, 2, -1e-3 }, { -1, 0.5, 0 } }

  it('Adam follows PyTorch\'s rule', function()
    local p = param { 1, -0.5, 2 }
    local opt = optim.Adam({ p })     -- the defaults: lr 1e-3, betas 0.9, 0.999, eps 1e-8
    assert.are.same({ 0.9, 0.999 }, opt.param_groups[1].betas)
    for _, g in ipairs(grads) do opt:zero_grad(); backward_with(p, g); opt:step() end
    local ref, m, v = adam_ref({ 1, -0.5, 2 }, grads, { lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0 })
    close(p, ref, 1e-6)
    close(opt.state[p].exp_avg, m, 1e-5)
    close(opt.state[p].exp_avg_sq, v, 1e-5)
    assert.are.equal(3, opt.state[p].step)
  end)

  it('Adam with L2 weight decay and other betas', function()
    local p = param { 1, -0.5, 2 }
    local opt = optim.Adam({ p }, { lr = 0.1, betas = { 0.8, 0.99 }, eps = 1e-3, weight_decay = 0.1 })
    for _, g in ipairs(grads) do opt:zero_grad(); backward_with(p, g); opt:step() end
    close(p, adam_ref({ 1, -0.5, 2 }, grads, { lr = 0.1, b1 = 0.8, b2 = 0.99, eps = 1e-3, wd = 0.1 }), 1e-6)
  end)

  it('AdamW decouples the weight decay (default 1e-2)', function()
    local p = param { 1, -0.5, 2 }
    local opt = optim.AdamW({ p }, { lr = 0.1 })
    assert.are.equal(1e-2, opt.param_groups[1].weight_decay)
    for _, g in ipairs(grads) do opt:zero_grad(); backward_with(p, g); opt:step() end
    close(p, adam_ref({ 1, -0.5, 2 }, grads, { lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 1e-2, decoupled = true }), 1e-6)
  end)

  it('rejects bad settings', function()
    local p = param { 1 }
    expect_error(function() optim.Adam({}) end, 'empty parameter list')
    expect_error(function() optim.Adam({ p }, { lr = -0.1 }) end, 'learning rate')
    expect_error(function() optim.Adam({ p }, { betas = { 0.9, 1 } }) end, 'beta parameter at index 2')
    expect_error(function() optim.Adam({ p }, { betas = 0.9 }) end, 'betas')
    expect_error(function() optim.Adam({ p }, { eps = -1 }) end, 'epsilon')
    expect_error(function() optim.AdamW({ p }, { weight_decay = -1 }) end, 'weight_decay')
    expect_error(function() optim.AdamW({ p }, { betas1 = 0.5 }) end, 'betas1')
    expect_error(function() optim.Adam({ p }, { amsgrad = 1 }) end, 'amsgrad')
  end)
end)

describe('optimizer state', function()
  for _, make in ipairs {
    function(ps) return optim.SGD(ps, { lr = 0.1, momentum = 0.9 }) end,
    function(ps) return optim.Adam(ps, { lr = 0.01 }) end,
  } do
    it('state_dict and load_state_dict continue training exactly', function()
      torch.manual_seed(5)
      local m = nn.Linear(3, 2)
      local x = torch.randn(4, 3)
      local opt = make(m:parameters())
      for _ = 1, 2 do opt:zero_grad(); m(x):pow(2):sum():backward(); opt:step() end
      local sd = opt:state_dict()
      assert.are.same({ 1, 2 }, sd.param_groups[1].params)
      assert.is_not_nil(sd.state[1])
      -- a second model and optimizer, restored
      local m2 = nn.Linear(3, 2)
      m2:load_state_dict(m:state_dict())
      local opt2 = make(m2:parameters())
      opt2:load_state_dict(sd)
      for _, pair in ipairs { { m, opt }, { m2, opt2 } } do
        pair[2]:zero_grad(); pair[1](x):pow(2):sum():backward(); pair[2]:step()
      end
      assert.is_true(torch.equal(m.weight, m2.weight))
      assert.is_true(torch.equal(m.bias, m2.bias))
      -- a state dict for other parameters is refused
      local opt3 = make({ nn.Parameter(torch.zeros(1)) })
      expect_error(function() opt3:load_state_dict(sd) end, 'parameter group 1', '2', '1')
    end)
  end
end)
