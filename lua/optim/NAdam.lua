-- optim.NAdam(params, {lr=2e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0,
-- momentum_decay=4e-3}): PyTorch 1.13's rule (Adam with Nesterov momentum).  At step t:
--   g = grad + weight_decay * p
--   mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)), prod_t = mu_1 * ... * mu_t
--   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
--   denom = sqrt(v / (1 - beta2^t)) + eps
--   p = p - lr * (1 - mu_t) / (1 - prod_t) * g / denom
--         - lr * mu_(t+1) / (1 - prod_t * mu_t * mu_(t+1)) * m / denom
-- (PyTorch 1.13's second product counts mu_t twice; later versions drop that.)  The
-- product of the mu is kept in float32, as PyTorch's state tensor.
local torch = require 'torch'
local utils = require 'nn.utils'

local NAdam, parent = torch.class('optim.NAdam', 'optim.Optimizer')

local function f32(x) return (string.unpack('f', string.pack('f', x))) end

-- the settings in PyTorch's positional order (optim.NAdam(params, 0.1)), or by name in a last table
function NAdam:__init(params, ...)
  local opts = utils.positional('optim.NAdam', { 'lr', 'betas', 'eps', 'weight_decay', 'momentum_decay' }, ...)
  local defaults = utils.options('optim.NAdam', opts, {
    lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3,
  })
  parent.__init(self, params, defaults, 'optim.NAdam')
end

function NAdam:check(g)
  require('optim.Adamax').check(self, g)
  parent.check_number(self, 'momentum_decay', g.momentum_decay, 0)
end

function NAdam:update(p, grad, group, state)
  if state.step == nil then
    state.step = 0
    state.mu_product = 1
    state.exp_avg = torch.zeros_like(p)
    state.exp_avg_sq = torch.zeros_like(p)
  end
  state.step = state.step + 1
  local step, beta1, beta2 = state.step, group.betas[1], group.betas[2]
  local bias_correction2 = 1 - beta2 ^ step
  if group.weight_decay ~= 0 then grad = grad + p * group.weight_decay end
  local mu = beta1 * (1 - 0.5 * 0.96 ^ (step * group.momentum_decay))
  local mu_next = beta1 * (1 - 0.5 * 0.96 ^ ((step + 1) * group.momentum_decay))
  state.mu_product = f32(state.mu_product * mu)
  local mu_product_next = f32(state.mu_product * mu * mu_next)
  state.exp_avg:mul_(beta1):add_(grad, 1 - beta1)
  state.exp_avg_sq:mul_(beta2):add_(grad * grad, 1 - beta2)
  local denom = (state.exp_avg_sq / bias_correction2):sqrt() + group.eps
  p:add_(grad / denom, -group.lr * (1 - mu) / (1 - state.mu_product))
  p:add_(state.exp_avg / denom, -group.lr * mu_next / (1 - mu_product_next))
end

return NAdam
