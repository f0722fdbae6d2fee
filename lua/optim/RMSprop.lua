-- optim.RMSprop(params, {lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
-- centered=false, maximize=false}): PyTorch 1.13's rule, as a few tensor ops per parameter:
--   g = grad (-grad with maximize) + weight_decay * p
--   v = alpha * v + (1 - alpha) * g * g
--   avg = sqrt(v) + eps, or with centered (m = alpha * m + (1 - alpha) * g)
--   avg = sqrt(v - m * m) + eps
--   buf = momentum * buf + g / avg; p = p - lr * buf          (momentum > 0)
--   p = p - lr * g / avg                                      (otherwise)
local torch = require 'torch'
local utils = require 'nn.utils'

local RMSprop, parent = torch.class('optim.RMSprop', 'optim.Optimizer')

-- the settings in PyTorch's positional order (optim.RMSprop(params, 0.1)), or by name in a last table
function RMSprop:__init(params, ...)
  local opts = utils.positional('optim.RMSprop', { 'lr', 'alpha', 'eps', 'weight_decay', 'momentum', 'centered' }, ...)
  local defaults = utils.options('optim.RMSprop', opts, {
    lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false,
    maximize = false,
  })
  parent.__init(self, params, defaults, 'optim.RMSprop')
end

function RMSprop:check(g)
  parent.check_number(self, 'learning rate', g.lr, 0)
  parent.check_number(self, 'epsilon value', g.eps, 0)
  parent.check_number(self, 'momentum value', g.momentum, 0)
  parent.check_number(self, 'weight_decay value', g.weight_decay, 0)
  parent.check_number(self, 'alpha value', g.alpha, 0)
end

function RMSprop:update(p, grad, group, state)
  if state.step == nil then
    state.step = 0
    state.square_avg = torch.zeros_like(p)
    if group.momentum > 0 then state.momentum_buffer = torch.zeros_like(p) end
    if group.centered then state.grad_avg = torch.zeros_like(p) end
  end
  state.step = state.step + 1
  local alpha = group.alpha
  if group.maximize then grad = -grad end
  if group.weight_decay ~= 0 then grad = grad + p * group.weight_decay end
  local v = state.square_avg
  v:mul_(alpha):add_(grad * grad, 1 - alpha)
  local avg
  if group.centered then
    local m = state.grad_avg or torch.zeros_like(p)
    state.grad_avg = m
    m:mul_(alpha):add_(grad, 1 - alpha)
    avg = (v - m * m):sqrt() + group.eps
  else
    avg = v:sqrt() + group.eps
  end
  if group.momentum > 0 then
    local buf = state.momentum_buffer or torch.zeros_like(p)
    state.momentum_buffer = buf
    buf:mul_(group.momentum):add_(grad / avg)
    p:add_(buf, -group.lr)
  else
    p:add_(grad / avg, -group.lr)
  end
end

return RMSprop
