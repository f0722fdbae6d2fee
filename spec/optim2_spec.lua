-- optim: Adadelta, RMSprop, Adagrad and the options of SGD, Adam and AdamW (maximize,
-- amsgrad, dampening), each replayed over six steps against PyTorch 1.13's trajectories
-- (spec/fixtures/make_train.py), in float64 so the comparison is tight; then parameter
-- groups, state saving and bad settings.
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'
local fx = dofile('spec/fixtures/train.lua')
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function flat(v, out)
  out = out or {}
  if type(v) == 'table' then for _, x in ipairs(v) do flat(x, out) end else out[#out + 1] = v end
  return out
end

local function close(t, expected, tol, what)
  local got, want = flat(t:detach():double():tolist()), flat(expected)
  assert(#got == #want, ('%s: %d values, expected %d'):format(what, #got, #want))
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) <= tol * (1 + math.abs(want[i])),
      ('%s, element %d: %.12g, expected %.12g'):format(what, i, got[i], want[i]))
  end
end

local function params(dtype)
  local ps = {}
  for i, v in ipairs { { 0.5, -1.25, 2.0 }, { { 0.3, -0.7 }, { 1.1, 0.05 } } } do
    ps[i] = nn.Parameter(torch.tensor(v, { dtype = dtype }))
  end
  return ps
end

-- replays case c on parameters of dtype, checking every step (and, halfway, a save and
-- a restore into a fresh optimizer, which must carry on the same trajectory)
local function replay(name, c, dtype, tol)
  local ps = params(dtype)
  local opt = optim[c.optimizer](ps, c.options)
  for s, grads in ipairs(c.grads) do
    for i, p in ipairs(ps) do p.grad = torch.tensor(grads[i], { dtype = dtype }) end
    opt:step()
    for i, p in ipairs(ps) do close(p, c.trajectory[s][i], tol, ('%s step %d param %d'):format(name, s, i)) end
    if s == 3 then
      local sd = opt:state_dict()
      local fresh = {}
      for i, p in ipairs(ps) do fresh[i] = nn.Parameter(p:detach():clone()) end
      local opt2 = optim[c.optimizer](fresh, c.options)
      opt2:load_state_dict(sd)
      ps, opt = fresh, opt2
    end
  end
end

describe('optimizers against PyTorch 1.13', function()
  local names = {}
  for name in pairs(fx.optim) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    it(name .. ' (float64)', function() replay(name, fx.optim[name], 'float64', 1e-10) end)
    it(name .. ' (float32)', function() replay(name, fx.optim[name], 'float32', 2e-5) end)
  end
end)

describe('new optimizers', function()
  it('have PyTorch\'s defaults and print them', function()
    local p = nn.Parameter(torch.zeros(2))
    local a = optim.Adadelta({ p })
    assert.are.same({ 1.0, 0.9, 1e-6, 0, false },
      { a.defaults.lr, a.defaults.rho, a.defaults.eps, a.defaults.weight_decay, a.defaults.maximize })
    local r = optim.RMSprop({ p })
    assert.are.same({ 1e-2, 0.99, 1e-8, 0, false, 0 },
      { r.defaults.lr, r.defaults.alpha, r.defaults.eps, r.defaults.momentum, r.defaults.centered, r.defaults.weight_decay })
    local g = optim.Adagrad({ p })
    assert.are.same({ 1e-2, 0, 0, 1e-10 }, { g.defaults.lr, g.defaults.lr_decay, g.defaults.initial_accumulator_value, g.defaults.eps })
    assert.truthy(tostring(r):find('centered: false', 1, true))
  end)

  it('skip parameters without a gradient and take per-group settings', function()
    local a, b = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))
    local opt = optim.RMSprop({ { params = { a } }, { params = { b }, lr = 0.5 } }, { lr = 0.1 })
    assert.are.equal(0.5, opt.param_groups[2].lr)
    b.grad = torch.ones(2)
    opt:step()
    close(a, { 1, 1 }, 0, 'a untouched')
    -- first RMSprop step: v = 0.01 g^2, p = 1 - lr * g / (0.1 |g| + eps)
    close(b, { 1 - 0.5 / (0.1 + 1e-8), 1 - 0.5 / (0.1 + 1e-8) }, 1e-6, 'b')
  end)

  it('Adagrad saves its accumulator before the first step', function()
    local p = nn.Parameter(torch.zeros(3))
    local opt = optim.Adagrad({ p }, { initial_accumulator_value = 0.25 })
    local sd = opt:state_dict()
    close(sd.state[1].sum, { 0.25, 0.25, 0.25 }, 0, 'sum')
    assert.are.equal(0, sd.state[1].step)
  end)

  it('reject bad settings with PyTorch\'s messages', function()
    local p = nn.Parameter(torch.zeros(2))
    expect_error(function() optim.Adadelta({ p }, { rho = 1.5 }) end, 'invalid rho value: 1.5')
    expect_error(function() optim.Adadelta({ p }, { lr = -1 }) end, 'invalid learning rate: -1')
    expect_error(function() optim.RMSprop({ p }, { alpha = -0.1 }) end, 'invalid alpha value: -0.1')
    expect_error(function() optim.RMSprop({ p }, { momentum = -1 }) end, 'invalid momentum value: -1')
    expect_error(function() optim.RMSprop({ p }, { centred = true }) end, 'unknown option centred')
    expect_error(function() optim.Adagrad({ p }, { lr_decay = -1 }) end, 'invalid lr_decay value: -1')
    expect_error(function() optim.Adagrad({ p }, { initial_accumulator_value = -1 }) end,
      'invalid initial_accumulator_value value: -1')
    expect_error(function() optim.Adam({ p }, { betas = { 0.9, 1.0 } }) end, 'invalid beta parameter at index 2')
  end)
end)
