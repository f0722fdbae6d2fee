-- optim.Adadelta(params, {lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=false}):
-- PyTorch 1.13's rule (one fused pass per parameter, torch._C.adadelta_step; the tensor ops
-- below for other dtypes):
--   g = grad (-grad with maximize) + weight_decay * p
--   v = rho * v + (1 - rho) * g * g
--   delta = sqrt(u + eps) / sqrt(v + eps) * g
--   u = rho * u + (1 - rho) * delta * delta
--   p = p - lr * delta
local torch = require 'torch'
local utils = require 'nn.utils'
local C = require 'torch._C'

local Adadelta, parent = torch.class('optim.Adadelta', 'optim.Optimizer')

-- the settings in PyTorch's positional order (optim.Adadelta(params, 0.1)), or by name in a last table
function Adadelta:__init(params, ...)
  local opts = utils.positional('optim.Adadelta', { 'lr', 'rho', 'eps', 'weight_decay' }, ...)
  local defaults = utils.options('optim.Adadelta', opts, {
    lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false,
  })
  parent.__init(self, params, defaults, 'optim.Adadelta')
end

function Adadelta:check(g)
  parent.check_number(self, 'learning rate', g.lr, 0)
  parent.check_number(self, 'rho value', g.rho, 0, 1)
  parent.check_number(self, 'epsilon value', g.eps, 0)
  parent.check_number(self, 'weight_decay value', g.weight_decay, 0)
end

function Adadelta:update(p, grad, group, state)
  if state.step == nil then
    state.step = 0
    state.square_avg = torch.zeros_like(p)
    state.acc_delta = torch.zeros_like(p)
  end
  state.step = state.step + 1
  local rho, eps = group.rho, group.eps
  if grad.dtype == p.dtype and torch.FLOAT_DTYPES[p.dtype] then   -- one fused pass
    C.adadelta_step(p, grad, state.square_avg, state.acc_delta, group)
    return
  end
  if group.maximize then grad = -grad end
  if group.weight_decay ~= 0 then grad = grad + p * group.weight_decay end
  local v, u = state.square_avg, state.acc_delta
  v:mul_(rho):add_(grad * grad, 1 - rho)
  local delta = (u + eps):sqrt() / (v + eps):sqrt() * grad
  u:mul_(rho):add_(delta * delta, 1 - rho)
  p:add_(delta, -group.lr)
end

return Adadelta
