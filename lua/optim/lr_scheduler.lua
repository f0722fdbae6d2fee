-- optim.lr_scheduler: PyTorch 1.13's learning rate schedulers, with its recursions (the
-- "chainable" forms, so two schedulers on one optimizer compose as in PyTorch) and its
-- closed forms where PyTorch uses them (step(epoch), SequentialLR's milestones).
--
--   local sched = optim.lr_scheduler.StepLR(opt, 30, {gamma = 0.1})   -- or {step_size = 30, ...}
--   for epoch = 1, 100 do train(); opt:step(); sched:step() end
--
-- Required settings may be given in PyTorch's order or by name in the options table (the
-- last argument, a table with names); every scheduler takes {last_epoch = -1}.
-- sched:get_last_lr() is the list of the groups' learning rates; state_dict() and
-- load_state_dict() save and restore everything but the optimizer (and LambdaLR's
-- functions, as PyTorch).
local torch = require 'torch'
local utils = require 'nn.utils'
local options = require 'torch.options'

local S = {}

local function fail(fmt, ...) utils.error(fmt:format(...)) end

-- An options table: a plain table with no array part (so milestones {3, 7} or a list of
-- lambdas is a positional argument).
local function is_options(v)
  return type(v) == 'table' and getmetatable(v) == nil and v[1] == nil and next(v) ~= nil
end

-- The settings of a scheduler: positional values in the order of names, then an options
-- table, checked against defaults.
local function settings(who, names, defaults, ...)
  local args = table.pack(...)
  local n, given = args.n, {}
  if n > 0 and is_options(args[n]) then
    for k, v in pairs(args[n]) do given[k] = v end
    n = n - 1
  end
  if n > #names then fail('%s: expected at most %d arguments after the optimizer, got %d', who, #names, n) end
  for i = 1, n do
    if args[i] ~= nil then
      if given[names[i]] ~= nil then fail('%s: %s given both as argument %d and as an option', who, names[i], i + 1) end
      given[names[i]] = args[i]
    end
  end
  defaults.last_epoch = defaults.last_epoch or -1
  defaults.verbose = false
  return options.check(who, given, defaults)
end

local function check_optimizer(who, opt)
  if not torch.isinstance(opt, 'optim.Optimizer') then
    fail('%s: expected an optimizer (optim.SGD, optim.Adam ...), got %s', who, torch.type(opt))
  end
end

local function number(who, name, v, lo, hi)
  if type(v) ~= 'number' or v ~= v or (lo and v < lo) or (hi and v > hi) then
    fail('%s: invalid %s: %s', who, name, tostring(v))
  end
  return v
end

local function positive_integer(who, name, v)
  if math.type(v) ~= 'integer' or v <= 0 then
    fail('%s: expected a positive integer %s, but got %s', who, name, tostring(v))
  end
  return v
end

-- a number for each group: one value for all, or a list with one per group
local function per_group(who, name, opt, v)
  local n = #opt.param_groups
  if type(v) == 'table' then
    if #v ~= n then fail('%s: expected %d values for %s, got %d', who, n, name, #v) end
    local out = {}
    for i = 1, n do out[i] = number(who, name, v[i]) end
    return out
  end
  number(who, name, v)
  local out = {}
  for i = 1, n do out[i] = v end
  return out
end

-- ---------------------------------------------------------------- the base class

local LRScheduler = torch.class('optim.lr_scheduler.LRScheduler')
S.LRScheduler = LRScheduler

-- Called by each scheduler's __init once its settings are in self: records the base
-- learning rates and takes the initial step (which sets the first learning rate).
function LRScheduler:_setup(opt, last_epoch)
  self.optimizer = opt
  if last_epoch == -1 then
    for _, g in ipairs(opt.param_groups) do
      if g.initial_lr == nil then g.initial_lr = g.lr end
    end
  else
    for i, g in ipairs(opt.param_groups) do
      if g.initial_lr == nil then
        fail("%s: param 'initial_lr' is not specified in param_groups[%d] when resuming an optimizer", self.name, i)
      end
    end
  end
  self.base_lrs = {}
  for i, g in ipairs(opt.param_groups) do self.base_lrs[i] = g.initial_lr end
  self.last_epoch = last_epoch
  self:_initial_step()
end

function LRScheduler:_initial_step()
  self._step_count = 0
  self:step()
end

function LRScheduler:_lrs()
  local out = {}
  for i, g in ipairs(self.optimizer.param_groups) do out[i] = g.lr end
  return out
end

-- step(): the next epoch's learning rates (the recursion); step(epoch): those of that
-- epoch, by the closed form where the scheduler has one.
function LRScheduler:step(epoch)
  self._step_count = self._step_count + 1
  local values
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    values = self:get_lr()
  else
    self.last_epoch = number(self.name .. ':step', 'epoch', epoch)
    values = self._closed_form_lr and self:_closed_form_lr() or self:get_lr()
  end
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = values[i] end
  self._last_lr = self:_lrs()
end

function LRScheduler:get_last_lr()
  return { table.unpack(self._last_lr) }
end

function LRScheduler:get_lr()
  fail('%s: get_lr is not implemented', self.name)
end

local function copy(v)
  if type(v) ~= 'table' or getmetatable(v) ~= nil then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  return out
end

-- everything but the optimizer (and functions, which can't be saved)
function LRScheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= 'optimizer' and type(v) ~= 'function' and k ~= 'lr_lambdas' and k ~= '_schedulers' then
      sd[k] = copy(v)
    end
  end
  return sd
end

function LRScheduler:load_state_dict(sd)
  if type(sd) ~= 'table' then fail('%s:load_state_dict: expected a table, got %s', self.name, type(sd)) end
  for k, v in pairs(sd) do
    if k ~= 'optimizer' and k ~= 'lr_lambdas' and k ~= '_schedulers' then self[k] = copy(v) end
  end
end

function LRScheduler:__tostring()
  return ('%s (last_epoch %s, lr %s)'):format(self.name:match('[^.]+$'), tostring(self.last_epoch),
    table.concat(self._last_lr or {}, ', '))
end

-- a scheduler class: make(self, opt, s) checks its settings s and stores them
local function scheduler(name, names, defaults, make)
  local cls = torch.class('optim.lr_scheduler.' .. name, 'optim.lr_scheduler.LRScheduler')
  function cls:__init(opt, ...)
    self.name = 'optim.lr_scheduler.' .. name
    check_optimizer(self.name, opt)
    local d = {}
    for k, v in pairs(defaults) do d[k] = v end
    local s = settings(self.name, names, d, ...)
    make(self, opt, s)
    self:_setup(opt, s.last_epoch)
  end
  S[name] = cls
  return cls
end

local required = options.required

-- ---------------------------------------------------------------- StepLR, MultiStepLR, ExponentialLR

-- lr * gamma every step_size epochs
local StepLR = scheduler('StepLR', { 'step_size', 'gamma' }, { step_size = required, gamma = 0.1 },
  function(self, opt, s)
    self.step_size = positive_integer(self.name, 'step_size', s.step_size)
    self.gamma = number(self.name, 'gamma', s.gamma)
  end)

function StepLR:get_lr()
  local lrs = self:_lrs()
  if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma end
  return lrs
end

function StepLR:_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ (self.last_epoch // self.step_size) end
  return out
end

-- lr * gamma at each milestone (epochs; a milestone listed twice decays twice)
local MultiStepLR = scheduler('MultiStepLR', { 'milestones', 'gamma' }, { milestones = required, gamma = 0.1 },
  function(self, opt, s)
    if type(s.milestones) ~= 'table' then fail('%s: milestones must be a list of epochs, got %s', self.name, type(s.milestones)) end
    self.milestones = {}
    for i, m in ipairs(s.milestones) do
      if math.type(m) ~= 'integer' then fail('%s: milestone %d must be an integer, got %s', self.name, i, tostring(m)) end
      self.milestones[i] = m
    end
    table.sort(self.milestones)
    self.gamma = number(self.name, 'gamma', s.gamma)
  end)

function MultiStepLR:get_lr()
  local lrs, count = self:_lrs(), 0
  for _, m in ipairs(self.milestones) do if m == self.last_epoch then count = count + 1 end end
  if count == 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma ^ count end
  return lrs
end

function MultiStepLR:_closed_form_lr()
  local passed = 0
  for _, m in ipairs(self.milestones) do if m <= self.last_epoch then passed = passed + 1 end end
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ passed end
  return out
end

-- lr * gamma every epoch
local ExponentialLR = scheduler('ExponentialLR', { 'gamma' }, { gamma = required },
  function(self, opt, s) self.gamma = number(self.name, 'gamma', s.gamma) end)

function ExponentialLR:get_lr()
  local lrs = self:_lrs()
  if self.last_epoch == 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma end
  return lrs
end

function ExponentialLR:_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ self.last_epoch end
  return out
end

-- ---------------------------------------------------------------- CosineAnnealingLR

-- eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, by PyTorch's recursion
local Cosine = scheduler('CosineAnnealingLR', { 'T_max', 'eta_min' }, { T_max = required, eta_min = 0 },
  function(self, opt, s)
    self.T_max = number(self.name, 'T_max', s.T_max)
    if self.T_max == 0 then fail('%s: T_max must not be 0', self.name) end
    self.eta_min = number(self.name, 'eta_min', s.eta_min)
  end)

function Cosine:get_lr()
  local e, T, eta, pi = self.last_epoch, self.T_max, self.eta_min, math.pi
  local lrs = self:_lrs()
  if e == 0 then return lrs end
  local out = {}
  if self._step_count == 1 and e > 0 then
    for i, b in ipairs(self.base_lrs) do out[i] = eta + (b - eta) * (1 + math.cos(e * pi / T)) / 2 end
  elseif (e - 1 - T) % (2 * T) == 0 then
    for i, b in ipairs(self.base_lrs) do out[i] = lrs[i] + (b - eta) * (1 - math.cos(pi / T)) / 2 end
  else
    for i = 1, #lrs do
      out[i] = (1 + math.cos(pi * e / T)) / (1 + math.cos(pi * (e - 1) / T)) * (lrs[i] - eta) + eta
    end
  end
  return out
end

function Cosine:_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do
    out[i] = self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end
  return out
end

-- ---------------------------------------------------------------- LambdaLR, LinearLR

-- base_lr * lr_lambda(epoch): one function for every group, or a list with one per group
local LambdaLR = scheduler('LambdaLR', { 'lr_lambda' }, { lr_lambda = required },
  function(self, opt, s) self:_lambdas(opt, s) end)

-- lr_lambda: one function for every group, or a list with one per group
function LambdaLR:_lambdas(opt, s)
  local f, n = s.lr_lambda, #opt.param_groups
  local callable = function(v)
    local mt = getmetatable(v)
    return type(v) == 'function' or (mt ~= nil and type(mt) == 'table' and mt.__call ~= nil)
  end
  self.lr_lambdas = {}
  if type(f) == 'table' and not callable(f) then
    if #f ~= n then fail('%s: expected %d lr_lambdas, but got %d', self.name, n, #f) end
    for i = 1, n do self.lr_lambdas[i] = f[i] end
  else
    for i = 1, n do self.lr_lambdas[i] = f end
  end
  for i, fn in ipairs(self.lr_lambdas) do
    if not callable(fn) then fail('%s: lr_lambda %d must be a function, got %s', self.name, i, type(fn)) end
  end
end

function LambdaLR:get_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do
    local f = self.lr_lambdas[i](self.last_epoch)
    if type(f) ~= 'number' then fail('%s: lr_lambda %d returned %s, not a number', self.name, i, tostring(f)) end
    out[i] = b * f
  end
  return out
end

-- from start_factor * lr to end_factor * lr over total_iters epochs, then constant
local LinearLR = scheduler('LinearLR', { 'start_factor', 'end_factor', 'total_iters' },
  { start_factor = 1 / 3, end_factor = 1.0, total_iters = 5 },
  function(self, opt, s)
    self.start_factor = number(self.name, 'start_factor (expected between 0 and 1)', s.start_factor, 0, 1)
    if self.start_factor == 0 then fail('%s: start_factor must be above 0', self.name) end
    self.end_factor = number(self.name, 'end_factor (expected between 0 and 1)', s.end_factor, 0, 1)
    self.total_iters = positive_integer(self.name, 'total_iters', s.total_iters)
  end)

function LinearLR:get_lr()
  local lrs, e = self:_lrs(), self.last_epoch
  local a, b, n = self.start_factor, self.end_factor, self.total_iters
  if e == 0 then
    for i = 1, #lrs do lrs[i] = lrs[i] * a end
  elseif e <= n then
    for i = 1, #lrs do lrs[i] = lrs[i] * (1 + (b - a) / (n * a + (e - 1) * (b - a))) end
  end
  return lrs
end

function LinearLR:_closed_form_lr()
  local out, a, b, n = {}, self.start_factor, self.end_factor, self.total_iters
  for i, base in ipairs(self.base_lrs) do out[i] = base * (a + (b - a) * math.min(n, self.last_epoch) / n) end
  return out
end

-- lr * lr_lambda(epoch) every epoch after the first (one function, or one per group)
local MultiplicativeLR = scheduler('MultiplicativeLR', { 'lr_lambda' }, { lr_lambda = required },
  function(self, opt, s) LambdaLR._lambdas(self, opt, s) end)

function MultiplicativeLR:get_lr()
  local lrs = self:_lrs()
  if self.last_epoch <= 0 then return lrs end
  for i = 1, #lrs do
    local f = self.lr_lambdas[i](self.last_epoch)
    if type(f) ~= 'number' then fail('%s: lr_lambda %d returned %s, not a number', self.name, i, tostring(f)) end
    lrs[i] = lrs[i] * f
  end
  return lrs
end

-- factor * lr until total_iters epochs have passed, then lr
local ConstantLR = scheduler('ConstantLR', { 'factor', 'total_iters' }, { factor = 1 / 3, total_iters = 5 },
  function(self, opt, s)
    self.factor = number(self.name, 'factor (expected between 0 and 1)', s.factor, 0, 1)
    if self.factor == 0 then fail('%s: factor must be above 0', self.name) end
    self.total_iters = positive_integer(self.name, 'total_iters', s.total_iters)
  end)

function ConstantLR:get_lr()
  local lrs = self:_lrs()
  if self.last_epoch == 0 then
    for i = 1, #lrs do lrs[i] = lrs[i] * self.factor end
  elseif self.last_epoch == self.total_iters then
    for i = 1, #lrs do lrs[i] = lrs[i] * (1.0 / self.factor) end
  end
  return lrs
end

function ConstantLR:_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do
    out[i] = b * (self.factor + (self.last_epoch >= self.total_iters and 1 or 0) * (1 - self.factor))
  end
  return out
end

-- base_lr * (1 - epoch / total_iters)^power, then 0
local PolynomialLR = scheduler('PolynomialLR', { 'total_iters', 'power' }, { total_iters = 5, power = 1.0 },
  function(self, opt, s)
    self.total_iters = positive_integer(self.name, 'total_iters', s.total_iters)
    self.power = number(self.name, 'power', s.power)
  end)

function PolynomialLR:get_lr()
  local lrs, e, n = self:_lrs(), self.last_epoch, self.total_iters
  if e == 0 or e > n then return lrs end
  local decay = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ^ self.power
  for i = 1, #lrs do lrs[i] = lrs[i] * decay end
  return lrs
end

function PolynomialLR:_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do
    out[i] = b * (1.0 - math.min(self.total_iters, self.last_epoch) / self.total_iters) ^ self.power
  end
  return out
end

-- ---------------------------------------------------------------- OneCycleLR

-- The 1cycle policy: from max_lr / div_factor up to max_lr over pct_start of the steps, then
-- down to max_lr / div_factor / final_div_factor (three_phase: back to the start first);
-- momentum (or Adam's beta1) cycles the other way between max_momentum and base_momentum.
-- Give total_steps, or epochs and steps_per_epoch.
local OneCycle = scheduler('OneCycleLR', { 'max_lr', 'total_steps' }, {
  max_lr = required, total_steps = options.none, epochs = options.none, steps_per_epoch = options.none,
  pct_start = 0.3, anneal_strategy = 'cos', cycle_momentum = true, base_momentum = 0.85,
  max_momentum = 0.95, div_factor = 25.0, final_div_factor = 1e4, three_phase = false,
}, function(self, opt, s)
  local who = self.name
  if s.total_steps ~= nil then
    self.total_steps = positive_integer(who, 'total_steps', s.total_steps)
  elseif s.epochs ~= nil and s.steps_per_epoch ~= nil then
    self.total_steps = positive_integer(who, 'epochs', s.epochs) * positive_integer(who, 'steps_per_epoch', s.steps_per_epoch)
  else
    fail('%s: You must define either total_steps OR (epochs AND steps_per_epoch)', who)
  end
  local pct, total = number(who, 'pct_start (expected between 0 and 1)', s.pct_start, 0, 1), self.total_steps
  if s.three_phase then
    self._schedule_phases = {
      { end_step = pct * total - 1, start_lr = 'initial_lr', end_lr = 'max_lr', start_momentum = 'max_momentum', end_momentum = 'base_momentum' },
      { end_step = 2 * pct * total - 2, start_lr = 'max_lr', end_lr = 'initial_lr', start_momentum = 'base_momentum', end_momentum = 'max_momentum' },
      { end_step = total - 1, start_lr = 'initial_lr', end_lr = 'min_lr', start_momentum = 'max_momentum', end_momentum = 'max_momentum' },
    }
  else
    self._schedule_phases = {
      { end_step = pct * total - 1, start_lr = 'initial_lr', end_lr = 'max_lr', start_momentum = 'max_momentum', end_momentum = 'base_momentum' },
      { end_step = total - 1, start_lr = 'max_lr', end_lr = 'min_lr', start_momentum = 'base_momentum', end_momentum = 'max_momentum' },
    }
  end
  if s.anneal_strategy ~= 'cos' and s.anneal_strategy ~= 'linear' then
    fail("%s: anneal_strategy must be one of 'cos' or 'linear', got %s", who, options.show(s.anneal_strategy))
  end
  self.anneal_strategy = s.anneal_strategy
  local max_lrs = per_group(who, 'max_lr', opt, s.max_lr)
  number(who, 'div_factor', s.div_factor)
  number(who, 'final_div_factor', s.final_div_factor)
  if s.last_epoch == -1 then
    for i, g in ipairs(opt.param_groups) do
      g.initial_lr = max_lrs[i] / s.div_factor
      g.max_lr = max_lrs[i]
      g.min_lr = g.initial_lr / s.final_div_factor
    end
  end
  self.cycle_momentum = s.cycle_momentum and true or false
  if self.cycle_momentum then
    local d = opt.defaults
    if d.momentum == nil and d.betas == nil then
      fail('%s: optimizer must support momentum with `cycle_momentum` option enabled', who)
    end
    self.use_beta1 = d.betas ~= nil
    local maxm = per_group(who, 'max_momentum', opt, s.max_momentum)
    local basem = per_group(who, 'base_momentum', opt, s.base_momentum)
    if s.last_epoch == -1 then
      for i, g in ipairs(opt.param_groups) do
        if self.use_beta1 then g.betas = { maxm[i], g.betas[2] } else g.momentum = maxm[i] end
        g.max_momentum, g.base_momentum = maxm[i], basem[i]
      end
    end
  end
end)

local function anneal(strategy, start, stop, pct)
  if strategy == 'cos' then return stop + (start - stop) / 2.0 * (math.cos(math.pi * pct) + 1) end
  return (stop - start) * pct + start
end

function OneCycle:get_lr()
  local step = self.last_epoch
  if step > self.total_steps then
    fail('%s: Tried to step %d times. The specified number of total steps is %d', self.name, step + 1, self.total_steps)
  end
  local lrs, phases = {}, self._schedule_phases
  for gi, g in ipairs(self.optimizer.param_groups) do
    local start, lr, mom = 0, nil, nil
    for i, phase in ipairs(phases) do
      if step <= phase.end_step or i == #phases then
        local pct = (step - start) / (phase.end_step - start)
        lr = anneal(self.anneal_strategy, g[phase.start_lr], g[phase.end_lr], pct)
        if self.cycle_momentum then
          mom = anneal(self.anneal_strategy, g[phase.start_momentum], g[phase.end_momentum], pct)
        end
        break
      end
      start = phase.end_step
    end
    lrs[gi] = lr
    if self.cycle_momentum then
      if self.use_beta1 then g.betas = { mom, g.betas[2] } else g.momentum = mom end
    end
  end
  return lrs
end

-- ---------------------------------------------------------------- CyclicLR

-- The cyclical policy: the learning rate goes from base_lr up to max_lr over step_size_up
-- steps and back down over step_size_down (default: the same), the amplitude scaled per
-- cycle ('triangular': 1, 'triangular2': halved each cycle) or per step ('exp_range':
-- gamma^step), or by scale_fn(x) with scale_mode 'cycle' or 'iterations'; momentum cycles
-- the other way between max_momentum and base_momentum.  Stepped after every batch.
local Cyclic = scheduler('CyclicLR', { 'base_lr', 'max_lr' }, {
  base_lr = required, max_lr = required, step_size_up = 2000, step_size_down = options.none,
  mode = 'triangular', gamma = 1.0, scale_fn = options.none, scale_mode = 'cycle', cycle_momentum = true,
  base_momentum = 0.8, max_momentum = 0.9,
}, function(self, opt, s)
  local who = self.name
  local base_lrs = per_group(who, 'base_lr', opt, s.base_lr)
  if s.last_epoch == -1 then
    for i, g in ipairs(opt.param_groups) do g.lr = base_lrs[i] end
  end
  self.max_lrs = per_group(who, 'max_lr', opt, s.max_lr)
  local up = number(who, 'step_size_up', s.step_size_up, 0)
  local down = s.step_size_down ~= nil and number(who, 'step_size_down', s.step_size_down, 0) or up
  self.total_size = up + down
  if self.total_size <= 0 then fail('%s: step_size_up + step_size_down must be positive', who) end
  self.step_ratio = up / self.total_size
  local mode = s.mode
  if mode ~= 'triangular' and mode ~= 'triangular2' and mode ~= 'exp_range' and s.scale_fn == nil then
    fail("%s: mode is invalid and scale_fn is None (mode must be 'triangular', 'triangular2' or 'exp_range', got %s)",
      who, options.show(mode))
  end
  self.mode, self.gamma = mode, number(who, 'gamma', s.gamma)
  if s.scale_fn ~= nil then
    if type(s.scale_fn) ~= 'function' then fail('%s: scale_fn must be a function, got %s', who, type(s.scale_fn)) end
    if s.scale_mode ~= 'cycle' and s.scale_mode ~= 'iterations' then
      fail("%s: scale_mode must be 'cycle' or 'iterations', got %s", who, options.show(s.scale_mode))
    end
    self.scale_fn, self.scale_mode = s.scale_fn, s.scale_mode
  end
  self.cycle_momentum = s.cycle_momentum and true or false
  if self.cycle_momentum then
    if opt.defaults.momentum == nil then
      fail('%s: optimizer must support momentum with `cycle_momentum` option enabled', who)
    end
    local base_m = per_group(who, 'base_momentum', opt, s.base_momentum)
    if s.last_epoch == -1 then
      for i, g in ipairs(opt.param_groups) do g.momentum = base_m[i] end
    end
    self.base_momentums = {}
    for i, g in ipairs(opt.param_groups) do self.base_momentums[i] = g.momentum end
    self.max_momentums = per_group(who, 'max_momentum', opt, s.max_momentum)
  end
end)

-- the scale of cycle (scale_mode 'cycle') or of step x ('iterations')
function Cyclic:_scale(x)
  if self.scale_fn then return self.scale_fn(x) end
  if self.mode == 'triangular' then return 1.0 end
  if self.mode == 'triangular2' then return 1 / (2.0 ^ (x - 1)) end
  return self.gamma ^ x
end

function Cyclic:get_lr()
  local cycle = math.floor(1 + self.last_epoch / self.total_size)
  local x = 1.0 + self.last_epoch / self.total_size - cycle
  local factor = x <= self.step_ratio and x / self.step_ratio or (x - 1) / (self.step_ratio - 1)
  local by_cycle = self.scale_fn == nil and self.mode ~= 'exp_range' or (self.scale_fn ~= nil and self.scale_mode == 'cycle')
  local scale = self:_scale(by_cycle and cycle or self.last_epoch)
  local lrs = {}
  for i, base in ipairs(self.base_lrs) do lrs[i] = base + (self.max_lrs[i] - base) * factor * scale end
  if self.cycle_momentum then
    for i, g in ipairs(self.optimizer.param_groups) do
      local maxm = self.max_momentums[i]
      g.momentum = maxm - (maxm - self.base_momentums[i]) * factor * scale
    end
  end
  return lrs
end

-- ---------------------------------------------------------------- CosineAnnealingWarmRestarts

-- Cosine annealing from base_lr to eta_min over T_0 epochs, restarting with periods T_0,
-- T_0 * T_mult, T_0 * T_mult^2, ...; step(epoch) takes fractional epochs.
local WarmRestarts = scheduler('CosineAnnealingWarmRestarts', { 'T_0', 'T_mult', 'eta_min' },
  { T_0 = required, T_mult = 1, eta_min = 0 },
  function(self, opt, s)
    self.T_0 = positive_integer(self.name, 'T_0', s.T_0)
    if math.type(s.T_mult) ~= 'integer' or s.T_mult < 1 then
      fail('%s: Expected integer T_mult >= 1, but got %s', self.name, tostring(s.T_mult))
    end
    self.T_i, self.T_mult = self.T_0, s.T_mult
    self.eta_min = number(self.name, 'eta_min', s.eta_min)
    self.T_cur = s.last_epoch
  end)

function WarmRestarts:get_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do
    out[i] = self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
  end
  return out
end

function WarmRestarts:step(epoch)
  self._step_count = self._step_count + 1
  if epoch == nil and self.last_epoch < 0 then epoch = 0 end
  if epoch == nil then
    epoch = self.last_epoch + 1
    self.T_cur = self.T_cur + 1
    if self.T_cur >= self.T_i then
      self.T_cur = self.T_cur - self.T_i
      self.T_i = self.T_i * self.T_mult
    end
  else
    number(self.name .. ':step', 'epoch (expected non-negative)', epoch, 0)
    if epoch >= self.T_0 then
      if self.T_mult == 1 then
        self.T_cur = math.fmod(epoch, self.T_0)
      else
        local m = self.T_mult
        local n = math.floor(math.log(epoch / self.T_0 * (m - 1) + 1, m))
        self.T_cur = epoch - self.T_0 * (m ^ n - 1) / (m - 1)
        self.T_i = self.T_0 * m ^ n
      end
    else
      self.T_i, self.T_cur = self.T_0, epoch
    end
  end
  self.last_epoch = math.floor(epoch)
  local values = self:get_lr()
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = values[i] end
  self._last_lr = self:_lrs()
end

-- ---------------------------------------------------------------- SequentialLR

-- schedulers[1] until milestones[1], then schedulers[2] (started by its closed form at
-- epoch 0) ..., all on one optimizer.
local Sequential = torch.class('optim.lr_scheduler.SequentialLR', 'optim.lr_scheduler.LRScheduler')
S.SequentialLR = Sequential

function Sequential:__init(opt, schedulers, milestones, opts)
  self.name = 'optim.lr_scheduler.SequentialLR'
  check_optimizer(self.name, opt)
  if is_options(schedulers) then schedulers, milestones, opts = schedulers.schedulers, schedulers.milestones, schedulers end
  if is_options(milestones) then milestones, opts = milestones.milestones, milestones end
  local s = options.check(self.name, opts, { schedulers = options.none, milestones = options.none, last_epoch = -1, verbose = false })
  if type(schedulers) ~= 'table' or #schedulers == 0 then fail('%s: expected a list of schedulers', self.name) end
  if type(milestones) ~= 'table' then fail('%s: expected a list of milestones', self.name) end
  for i, sc in ipairs(schedulers) do
    if not torch.isinstance(sc, 'optim.lr_scheduler.LRScheduler') then
      fail('%s: scheduler %d is a %s, not a learning rate scheduler', self.name, i, torch.type(sc))
    end
    if sc.optimizer ~= opt then
      fail('%s: Sequential Schedulers expects all schedulers to belong to the same optimizer, but got schedulers at index %d to be different than the optimizer passed in.', self.name, i)
    end
  end
  if #milestones ~= #schedulers - 1 then
    fail('%s: Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone points, but got number of schedulers %d and the number of milestones to be equal to %d',
      self.name, #schedulers, #milestones)
  end
  self.optimizer = opt
  self._schedulers = schedulers
  self._milestones = { table.unpack(milestones) }
  self.last_epoch = s.last_epoch + 1
  for _, g in ipairs(opt.param_groups) do g.lr = g.initial_lr end
  for _, sc in ipairs(schedulers) do sc.last_epoch = sc.last_epoch - 1 end
  schedulers[1]:_initial_step()
  self._last_lr = schedulers[1]:get_last_lr()
end

function Sequential:step()
  self.last_epoch = self.last_epoch + 1
  local idx = 0
  for _, m in ipairs(self._milestones) do if m <= self.last_epoch then idx = idx + 1 end end
  local sc = self._schedulers[idx + 1]
  if idx > 0 and self._milestones[idx] == self.last_epoch then sc:step(0) else sc:step() end
  self._last_lr = sc:get_last_lr()
end

function Sequential:state_dict()
  local sd = LRScheduler.state_dict(self)
  sd._schedulers = {}
  for i, sc in ipairs(self._schedulers) do sd._schedulers[i] = sc:state_dict() end
  return sd
end

function Sequential:load_state_dict(sd)
  LRScheduler.load_state_dict(self, sd)
  for i, s in ipairs(sd._schedulers or {}) do self._schedulers[i]:load_state_dict(s) end
end

-- ---------------------------------------------------------------- ChainedScheduler

-- every scheduler's step at each step (their factors multiply), all on one optimizer
local Chained = torch.class('optim.lr_scheduler.ChainedScheduler', 'optim.lr_scheduler.LRScheduler')
S.ChainedScheduler = Chained

function Chained:__init(schedulers)
  self.name = 'optim.lr_scheduler.ChainedScheduler'
  if type(schedulers) ~= 'table' or #schedulers == 0 then fail('%s: expected a list of schedulers', self.name) end
  for i, sc in ipairs(schedulers) do
    if not torch.isinstance(sc, 'optim.lr_scheduler.LRScheduler') then
      fail('%s: scheduler %d is a %s, not a learning rate scheduler', self.name, i, torch.type(sc))
    end
    if sc.optimizer ~= schedulers[1].optimizer then
      fail('%s: ChainedScheduler expects all schedulers to belong to the same optimizer, but got schedulers at index 1 and %d to be different', self.name, i)
    end
  end
  self._schedulers = { table.unpack(schedulers) }
  self.optimizer = schedulers[1].optimizer
  self._last_lr = self:_lrs()
end

function Chained:step()
  for _, sc in ipairs(self._schedulers) do sc:step() end
  self._last_lr = self:_lrs()
end

Chained.state_dict = Sequential.state_dict
Chained.load_state_dict = Sequential.load_state_dict

-- ---------------------------------------------------------------- ReduceLROnPlateau

-- ReduceLROnPlateau(opt [, mode] [, opts]).
-- step(metric): lr * factor (not below min_lr) once the metric has not improved for more
-- than patience steps; improving means below best * (1 - threshold) in mode 'min' with
-- threshold_mode 'rel' (best - threshold with 'abs'; above, in mode 'max').
local Plateau = torch.class('optim.lr_scheduler.ReduceLROnPlateau')
S.ReduceLROnPlateau = Plateau

function Plateau:__init(opt, mode, opts)
  self.name = 'optim.lr_scheduler.ReduceLROnPlateau'
  check_optimizer(self.name, opt)
  if type(mode) == 'string' then   -- PyTorch's positional mode: ReduceLROnPlateau(opt, 'max', {...})
    opts = opts or {}
    if opts.mode ~= nil then fail('%s: mode given both as argument 2 and as an option', self.name) end
    local o = { mode = mode }
    for k, v in pairs(opts) do o[k] = v end
    opts = o
  elseif opts == nil then
    opts = mode
  end
  local s = options.check(self.name, opts, {
    mode = 'min', factor = 0.1, patience = 10, threshold = 1e-4, threshold_mode = 'rel',
    cooldown = 0, min_lr = 0, eps = 1e-8, verbose = false,
  })
  number(self.name, 'factor', s.factor)
  if s.factor >= 1.0 then fail('%s: Factor should be < 1.0, got %s', self.name, tostring(s.factor)) end
  self.factor = s.factor
  self.optimizer = opt
  self.min_lrs = per_group(self.name, 'min_lr', opt, s.min_lr)
  self.patience = number(self.name, 'patience', s.patience, 0)
  self.cooldown = number(self.name, 'cooldown', s.cooldown, 0)
  self.cooldown_counter = 0
  self.eps = number(self.name, 'eps', s.eps)
  self.last_epoch = 0
  self:_init_is_better(s.mode, number(self.name, 'threshold', s.threshold), s.threshold_mode)
  self:_reset()
  self._last_lr = LRScheduler._lrs(self)
end

function Plateau:_init_is_better(mode, threshold, threshold_mode)
  if mode ~= 'min' and mode ~= 'max' then fail("%s: mode %s is unknown (expected 'min' or 'max')", self.name, options.show(mode)) end
  if threshold_mode ~= 'rel' and threshold_mode ~= 'abs' then
    fail("%s: threshold mode %s is unknown (expected 'rel' or 'abs')", self.name, options.show(threshold_mode))
  end
  self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
  self.mode_worse = mode == 'min' and math.huge or -math.huge
end

function Plateau:_reset()
  self.best = self.mode_worse
  self.cooldown_counter = 0
  self.num_bad_epochs = 0
end

function Plateau:is_better(a, best)
  if self.mode == 'min' and self.threshold_mode == 'rel' then return a < best * (1 - self.threshold)
  elseif self.mode == 'min' then return a < best - self.threshold
  elseif self.threshold_mode == 'rel' then return a > best * (self.threshold + 1)
  else return a > best + self.threshold end
end

-- metrics: a number or a one-element tensor
function Plateau:step(metrics, epoch)
  local current = metrics
  if torch.is_tensor(metrics) then current = metrics:item() end
  if type(current) ~= 'number' then fail('%s:step: expected the metric as a number, got %s', self.name, type(metrics)) end
  epoch = epoch or self.last_epoch + 1
  self.last_epoch = epoch
  if self:is_better(current, self.best) then
    self.best, self.num_bad_epochs = current, 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    for i, g in ipairs(self.optimizer.param_groups) do
      local old = g.lr
      local new = math.max(old * self.factor, self.min_lrs[i])
      if old - new > self.eps then g.lr = new end
    end
    self.cooldown_counter = self.cooldown
    self.num_bad_epochs = 0
  end
  self._last_lr = LRScheduler._lrs(self)
end

Plateau.get_last_lr = LRScheduler.get_last_lr
Plateau.state_dict = LRScheduler.state_dict

function Plateau:load_state_dict(sd)
  LRScheduler.load_state_dict(self, sd)
  self:_init_is_better(self.mode, self.threshold, self.threshold_mode)
end

return S
