-- optim.RAdam(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0}): PyTorch
-- 1.13's rectified Adam.  At step t:
--   g = grad + weight_decay * p;  m, v as Adam's
--   rho_inf = 2 / (1 - beta2) - 1,  rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
--   rho_t > 5: p = p - lr * m / (1 - beta1^t) * rect * sqrt(1 - beta2^t) / (sqrt(v) + eps)
--              rect = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
--   otherwise: p = p - lr * m / (1 - beta1^t)
local torch = require 'torch'
local utils = require 'nn.utils'

local RAdam, parent = torch.class('optim.RAdam', 'optim.Optimizer')

-- the settings in PyTorch's positional order (optim.RAdam(params, 0.1)), or by name in a last table
function RAdam:__init(params, ...)
  local opts = utils.positional('optim.RAdam', { 'lr', 'betas', 'eps', 'weight_decay' }, ...)
  local defaults = utils.options('optim.RAdam', opts, {
    lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
  })
  parent.__init(self, params, defaults, 'optim.RAdam')
end

function RAdam:check(g) require('optim.Adamax').check(self, g) end

function RAdam:update(p, grad, group, state)
  if state.step == nil then
    state.step = 0
    state.exp_avg = torch.zeros_like(p)
    state.exp_avg_sq = torch.zeros_like(p)
  end
  state.step = state.step + 1
  local step, beta1, beta2, lr = state.step, group.betas[1], group.betas[2], group.lr
  local bias_correction1, bias_correction2 = 1 - beta1 ^ step, 1 - beta2 ^ step
  if group.weight_decay ~= 0 then grad = grad + p * group.weight_decay end
  state.exp_avg:mul_(beta1):add_(grad, 1 - beta1)
  state.exp_avg_sq:mul_(beta2):add_(grad * grad, 1 - beta2)
  local corrected = state.exp_avg / bias_correction1
  local rho_inf = 2 / (1 - beta2) - 1
  local rho_t = rho_inf - 2 * step * (beta2 ^ step) / bias_correction2
  if rho_t > 5 then
    local rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    local adaptive_lr = math.sqrt(bias_correction2) / (state.exp_avg_sq:sqrt() + group.eps)
    p:add_(corrected * lr * adaptive_lr * rect, -1)
  else
    p:add_(corrected * lr, -1)
  end
end

return RAdam
