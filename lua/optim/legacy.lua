-- Torch7's optim package: optim.sgd, optim.adam, optim.adagrad, optim.rmsprop as functions
-- of a closure, on the flat parameters of m:getParameters():
--
--   local x, dx = model:getParameters()
--   local function feval(x_new)
--     dx:zero()
--     local loss = criterion:forward(model:forward(input), target)
--     model:backward(input, criterion:backward(model.output, target))
--     return loss, dx
--   end
--   optim.sgd(feval, x, {learningRate = 0.01, momentum = 0.9})
--
-- Each returns x and {f(x)}, updates x in place, and keeps its state in `state` (by
-- default the config table itself, as Torch7 does).  The rules are Torch7's.
local torch = require 'torch'

local M = {}

local function evaluate(who, opfunc, x)
  if type(opfunc) ~= 'function' then error(('optim.%s: expected a function (the closure feval), got %s'):format(who, type(opfunc)), 3) end
  if not torch.is_tensor(x) then error(('optim.%s: expected the parameters as a tensor (m:getParameters()), got %s'):format(who, type(x)), 3) end
  local fx, dfdx = opfunc(x)
  if not torch.is_tensor(dfdx) or dfdx:numel() ~= x:numel() then
    error(('optim.%s: feval must return the loss and a gradient of %d elements'):format(who, x:numel()), 3)
  end
  return fx, dfdx
end

function M.sgd(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr, lrd = config.learningRate or 1e-3, config.learningRateDecay or 0
  local wd, mom = config.weightDecay or 0, config.momentum or 0
  local damp, nesterov = config.dampening or mom, config.nesterov or false
  if nesterov and (mom <= 0 or damp ~= 0) then error('optim.sgd: Nesterov momentum needs a momentum and zero dampening', 2) end
  local fx, dfdx = evaluate('sgd', opfunc, x)
  torch.no_grad(function()
    state.evalCounter = state.evalCounter or 0
    if wd ~= 0 then dfdx = dfdx + x * wd end
    if mom ~= 0 then
      if not state.dfdx then state.dfdx = dfdx:clone()
      else state.dfdx:mul_(mom):add_(dfdx, 1 - damp) end
      if nesterov then dfdx = dfdx + state.dfdx * mom else dfdx = state.dfdx end
    end
    local clr = lr / (1 + state.evalCounter * lrd)
    x:add_(dfdx, -clr)
    state.evalCounter = state.evalCounter + 1
  end)
  return x, { fx }
end

function M.adam(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr, lrd = config.learningRate or 1e-3, config.learningRateDecay or 0
  local b1, b2, eps = config.beta1 or 0.9, config.beta2 or 0.999, config.epsilon or 1e-8
  local wd = config.weightDecay or 0
  local fx, dfdx = evaluate('adam', opfunc, x)
  torch.no_grad(function()
    if wd ~= 0 then dfdx = dfdx + x * wd end
    state.t = state.t or 0
    state.m = state.m or torch.zeros_like(dfdx)
    state.v = state.v or torch.zeros_like(dfdx)
    local clr = lr / (1 + state.t * lrd)
    state.t = state.t + 1
    state.m:mul_(b1):add_(dfdx, 1 - b1)
    state.v:mul_(b2):add_(dfdx * dfdx, 1 - b2)
    local denom = state.v:sqrt():add_(eps)
    local step = clr * math.sqrt(1 - b2 ^ state.t) / (1 - b1 ^ state.t)
    x:add_(state.m / denom, -step)
  end)
  return x, { fx }
end

function M.adagrad(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr, lrd, wd = config.learningRate or 1e-3, config.learningRateDecay or 0, config.weightDecay or 0
  local fx, dfdx = evaluate('adagrad', opfunc, x)
  torch.no_grad(function()
    state.evalCounter = state.evalCounter or 0
    if wd ~= 0 then dfdx = dfdx + x * wd end
    local clr = lr / (1 + state.evalCounter * lrd)
    state.paramVariance = state.paramVariance or torch.zeros_like(dfdx)
    state.paramVariance:add_(dfdx * dfdx)
    x:add_(dfdx / (state.paramVariance:sqrt() + 1e-10), -clr)
    state.evalCounter = state.evalCounter + 1
  end)
  return x, { fx }
end

function M.rmsprop(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr, alpha, eps, wd = config.learningRate or 1e-2, config.alpha or 0.99, config.epsilon or 1e-8, config.weightDecay or 0
  local fx, dfdx = evaluate('rmsprop', opfunc, x)
  torch.no_grad(function()
    if wd ~= 0 then dfdx = dfdx + x * wd end
    state.m = state.m or torch.zeros_like(dfdx)
    state.m:mul_(alpha):add_(dfdx * dfdx, 1 - alpha)
    x:add_(dfdx / (state.m:sqrt() + eps), -lr)
  end)
  return x, { fx }
end

return M
