-- optim.lr_scheduler: every scheduler's learning rates (and OneCycleLR's momentum) over up
-- to 30 steps against PyTorch 1.13's (spec/fixtures/make_train.py), state saving, and bad
-- settings.
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'
local S = optim.lr_scheduler
local fx = dofile('spec/fixtures/train.lua')
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function near(got, want, what)
  assert(math.abs(got - want) <= 1e-12 * (1 + math.abs(want)),
    ('%s: %.15g, expected %.15g'):format(what, got, want))
end

-- an optimizer with one group per lr, as the fixture's
local function optimizer(lrs, kind, opts)
  local groups = {}
  for i, lr in ipairs(lrs) do groups[i] = { params = { nn.Parameter(torch.zeros(1)) }, lr = lr } end
  return optim[kind or 'SGD'](groups, opts or { lr = 0.1, momentum = 0.9 })
end

-- runs make(opt)'s scheduler for the fixture's steps and compares each step's lrs (and the
-- momentum or beta1 of each group)
local function replay(name, make, lrs, kind, opts, metrics)
  local c = fx.sched[name]
  local opt = optimizer(lrs or { 0.1 }, kind, opts)
  local sched = make(opt)
  local function check(step)
    local got = metrics and {} or sched:get_last_lr()
    for i, g in ipairs(opt.param_groups) do
      if metrics then got[i] = g.lr end
      near(got[i], c.lr[step][i], ('%s step %d group %d lr'):format(name, step - 1, i))
      local m = g.momentum or g.betas[1]
      near(m, c.momentum[step][i], ('%s step %d group %d momentum'):format(name, step - 1, i))
    end
  end
  check(1)
  for step = 2, #c.lr do
    opt:step()
    if metrics then sched:step(metrics[step - 1]) else sched:step() end
    check(step)
  end
  return sched, opt
end

describe('lr_scheduler against PyTorch 1.13', function()
  it('StepLR', function() replay('step', function(o) return S.StepLR(o, 4, { gamma = 0.5 }) end, { 0.1, 0.02 }) end)
  it('MultiStepLR', function()
    replay('multistep', function(o) return S.MultiStepLR(o, { milestones = { 7, 3, 20 }, gamma = 0.3 }) end)
  end)
  it('ExponentialLR', function() replay('exponential', function(o) return S.ExponentialLR(o, 0.9) end) end)
  it('CosineAnnealingLR (past T_max, where the recursion turns back up)', function()
    replay('cosine', function(o) return S.CosineAnnealingLR(o, { T_max = 10, eta_min = 0.001 }) end, { 0.1, 0.05 })
    replay('cosine_zero', function(o) return S.CosineAnnealingLR(o, 7) end)
  end)
  it('LambdaLR with a function per group', function()
    replay('lambda', function(o)
      return S.LambdaLR(o, { function(e) return 0.95 ^ e end, function(e) return 1 / (e + 1) end })
    end, { 0.1, 0.3 })
  end)
  it('OneCycleLR (cos; linear three-phase with per-group max_lr; on Adam\'s beta1)', function()
    replay('onecycle', function(o) return S.OneCycleLR(o, 1.0, 30) end)
    replay('onecycle_linear', function(o)
      return S.OneCycleLR(o, { max_lr = { 0.5, 0.2 }, epochs = 3, steps_per_epoch = 8, pct_start = 0.25,
        anneal_strategy = 'linear', div_factor = 10, final_div_factor = 100, three_phase = true })
    end, { 0.1, 0.1 })
    replay('onecycle_adam', function(o)
      return S.OneCycleLR(o, { max_lr = 0.01, total_steps = 12, base_momentum = 0.8, max_momentum = 0.9 })
    end, nil, 'Adam', { lr = 0.001 })
  end)
  it('OneCycleLR refuses to step past total_steps', function()
    local opt = optimizer({ 0.1 })
    local s = S.OneCycleLR(opt, { max_lr = 1, total_steps = 3 })
    s:step(); s:step(); s:step()
    expect_error(function() s:step() end, 'Tried to step 5 times. The specified number of total steps is 3')
  end)
  it('ReduceLROnPlateau (min/rel; max/abs with cooldown and per-group min_lr)', function()
    replay('plateau', function(o) return S.ReduceLROnPlateau(o, { factor = 0.5, patience = 2 }) end,
      nil, nil, nil, fx.plateau_metrics)
    replay('plateau_max', function(o)
      return S.ReduceLROnPlateau(o, 'max', { factor = 0.1, patience = 1, threshold = 0.05,
        threshold_mode = 'abs', cooldown = 2, min_lr = { 1e-4, 1e-3 } })
    end, { 0.1, 0.05 }, nil, nil, fx.plateau_max)
  end)
  it('LinearLR', function()
    replay('linear', function(o) return S.LinearLR(o, { start_factor = 0.25, end_factor = 0.9, total_iters = 8 }) end)
  end)
  it('SequentialLR (the second scheduler starts by its closed form)', function()
    replay('sequential', function(o)
      return S.SequentialLR(o, { S.LinearLR(o, { start_factor = 0.1, total_iters = 4 }), S.ExponentialLR(o, 0.8) }, { 5 })
    end)
  end)
  it('CosineAnnealingWarmRestarts', function()
    replay('warm_restarts', function(o) return S.CosineAnnealingWarmRestarts(o, 4, { T_mult = 2, eta_min = 0.01 }) end)
    replay('warm_restarts1', function(o) return S.CosineAnnealingWarmRestarts(o, { T_0 = 5 }) end)
  end)
end)

describe('more schedulers against PyTorch 1.13', function()
  it('ConstantLR, MultiplicativeLR, PolynomialLR, ChainedScheduler', function()
    replay('constant', function(o) return S.ConstantLR(o, { factor = 0.4, total_iters = 6 }) end)
    replay('multiplicative', function(o)
      return S.MultiplicativeLR(o, function(e) return e % 3 ~= 0 and 0.9 or 1.05 end)
    end)
    replay('polynomial', function(o) return S.PolynomialLR(o, { total_iters = 12, power = 2.0 }) end, { 0.1, 0.5 })
    replay('chained', function(o)
      return S.ChainedScheduler({ S.ConstantLR(o, { factor = 0.5, total_iters = 3 }), S.ExponentialLR(o, 0.9) })
    end)
  end)
end)

describe('lr_scheduler state', function()
  it('a restored scheduler carries on where the saved one was', function()
    local c = fx.sched.cosine
    local opt = optimizer({ 0.1, 0.05 })
    local s = S.CosineAnnealingLR(opt, { T_max = 10, eta_min = 0.001 })
    for _ = 1, 12 do opt:step(); s:step() end
    local sd, osd = s:state_dict(), opt:state_dict()
    assert.is_nil(sd.optimizer)
    assert.are.equal(12, sd.last_epoch)
    local opt2 = optimizer({ 0.1, 0.05 })
    opt2:load_state_dict(osd)
    local s2 = S.CosineAnnealingLR(opt2, { T_max = 10, eta_min = 0.001 })
    s2:load_state_dict(sd)
    for step = 13, 20 do
      opt2:step(); s2:step()
      near(s2:get_last_lr()[1], c.lr[step + 1][1], 'restored step ' .. step)
    end
  end)

  it('ReduceLROnPlateau keeps its best value and counters', function()
    local opt = optimizer({ 0.1 })
    local s = S.ReduceLROnPlateau(opt, { patience = 1 })
    s:step(1.0); s:step(2.0)
    local sd = s:state_dict()
    local s2 = S.ReduceLROnPlateau(optimizer({ 0.1 }))
    s2:load_state_dict(sd)
    assert.are.same({ 1.0, 1, 1 }, { s2.best, s2.num_bad_epochs, s2.patience })
    s2:step(torch.tensor(3.0))
    near(s2:get_last_lr()[1], 0.01, 'reduced after the restored bad epoch')
  end)

  it('LambdaLR leaves its functions out of the state', function()
    local opt = optimizer({ 0.1 })
    local s = S.LambdaLR(opt, function(e) return 1 / (e + 1) end)
    local sd = s:state_dict()
    for _, v in pairs(sd) do assert.are_not.equal('function', type(v)) end
    assert.is_nil(sd.lr_lambdas)
  end)

  it('step(epoch) uses the closed form', function()
    local opt = optimizer({ 1.0 })
    local s = S.StepLR(opt, { step_size = 3, gamma = 0.5 })
    s:step(7)
    near(s:get_last_lr()[1], 0.25, 'StepLR at epoch 7')
  end)
end)

describe('lr_scheduler errors', function()
  it('name what was wrong', function()
    local opt = optimizer({ 0.1 })
    expect_error(function() S.StepLR({}, 3) end, 'expected an optimizer')
    expect_error(function() S.StepLR(opt) end, 'option step_size is required')
    expect_error(function() S.StepLR(opt, 0) end, 'expected a positive integer step_size, but got 0')
    expect_error(function() S.StepLR(opt, 3, { gama = 0.5 }) end, 'unknown option gama')
    expect_error(function() S.ExponentialLR(opt, 0.9, { gamma = 0.5 }) end, 'gamma given both')
    expect_error(function() S.LambdaLR(opt, { function() return 1 end, function() return 1 end }) end,
      'expected 1 lr_lambdas, but got 2')
    expect_error(function() S.OneCycleLR(opt, { max_lr = 0.1 }) end, 'total_steps OR (epochs AND steps_per_epoch)')
    expect_error(function() S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 5, anneal_strategy = 'exp' }) end,
      "anneal_strategy must be one of 'cos' or 'linear'")
    expect_error(function() S.ReduceLROnPlateau(opt, { factor = 1.5 }) end, 'Factor should be < 1.0')
    expect_error(function() S.ReduceLROnPlateau(opt, { mode = 'up' }) end, "mode 'up' is unknown")
    expect_error(function() S.SequentialLR(opt, { S.StepLR(opt, 2) }, { 3 }) end, 'one more than the number of milestone')
    expect_error(function() S.StepLR(optimizer({ 0.1 }), 3, { last_epoch = 4 }) end, "param 'initial_lr' is not specified")
    expect_error(function() S.CosineAnnealingWarmRestarts(opt, 2, { T_mult = 0 }) end, 'Expected integer T_mult >= 1')
  end)
end)
