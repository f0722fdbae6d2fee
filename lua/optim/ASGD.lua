-- optim.ASGD(params, {lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
-- maximize=false}): PyTorch
-- 1.13's averaged SGD.  At step t:
--   g = grad (-grad with maximize) + weight_decay * p
--   p = p * (1 - lambd * eta) - eta * g
--   ax = p while mu == 1, else ax + (p - ax) * mu          (the average, state.ax)
--   eta = lr / (1 + lambd * lr * t)^alpha,  mu = 1 / max(1, t - t0)
-- eta and mu are kept in float32, as PyTorch's state tensors.
local torch = require 'torch'
local utils = require 'nn.utils'

local ASGD, parent = torch.class('optim.ASGD', 'optim.Optimizer')

local function f32(x) return (string.unpack('f', string.pack('f', x))) end

-- the settings in PyTorch's positional order (optim.ASGD(params, 0.1)), or by name in a last table
function ASGD:__init(params, ...)
  local opts = utils.positional('optim.ASGD', { 'lr', 'lambd', 'alpha', 't0', 'weight_decay' }, ...)
  local defaults = utils.options('optim.ASGD', opts, {
    lr = 1e-2, lambd = 1e-4, alpha = 0.75, t0 = 1e6, weight_decay = 0, maximize = false,
  })
  parent.__init(self, params, defaults, 'optim.ASGD')
end

function ASGD:check(g)
  parent.check_number(self, 'learning rate', g.lr, 0)
  parent.check_number(self, 'weight_decay value', g.weight_decay, 0)
  for _, k in ipairs { 'lambd', 'alpha', 't0' } do
    if type(g[k]) ~= 'number' then utils.error(('%s: invalid %s: %s'):format(self.name, k, tostring(g[k]))) end
  end
end

function ASGD:update(p, grad, group, state)
  if state.step == nil then
    state.step = 0
    state.eta = f32(group.lr)
    state.mu = 1
    state.ax = torch.zeros_like(p)
  end
  state.step = state.step + 1
  if group.maximize then grad = -grad end
  if group.weight_decay ~= 0 then grad = grad + p * group.weight_decay end
  p:mul_(1 - group.lambd * state.eta)
  p:add_(grad, -state.eta)
  if state.mu ~= 1 then state.ax:add_((p - state.ax) * state.mu) else state.ax:copy_(p) end
  state.eta = f32(group.lr / (1 + group.lambd * group.lr * state.step) ^ group.alpha)
  state.mu = f32(1 / math.max(1, state.step - group.t0))
end

return ASGD
