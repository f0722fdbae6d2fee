-- optim.Adamax(params, {lr=2e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0,
-- maximize=false}): PyTorch 1.13's rule (Adam with the infinity norm).  At step t:
--   g = grad (-grad with maximize) + weight_decay * p
--   m = beta1 * m + (1 - beta1) * g
--   u = max(beta2 * u, |g| + eps)
--   p = p - lr / (1 - beta1^t) * m / u
local torch = require 'torch'
local utils = require 'nn.utils'

local Adamax, parent = torch.class('optim.Adamax', 'optim.Optimizer')

-- the settings in PyTorch's positional order (optim.Adamax(params, 0.1)), or by name in a last table
function Adamax:__init(params, ...)
  local opts = utils.positional('optim.Adamax', { 'lr', 'betas', 'eps', 'weight_decay' }, ...)
  local defaults = utils.options('optim.Adamax', opts, {
    lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, maximize = false,
  })
  parent.__init(self, params, defaults, 'optim.Adamax')
end

-- shared with NAdam and RAdam
function Adamax:check(g)
  parent.check_number(self, 'learning rate', g.lr, 0)
  parent.check_number(self, 'epsilon value', g.eps, 0)
  parent.check_number(self, 'weight_decay value', g.weight_decay, 0)
  if type(g.betas) ~= 'table' or #g.betas ~= 2 then
    utils.error(('%s: invalid betas (expected {beta1, beta2}): %s'):format(self.name, tostring(g.betas)))
  end
  for i = 1, 2 do
    local b = g.betas[i]
    if type(b) ~= 'number' or b < 0 or b >= 1 then
      utils.error(('%s: invalid beta parameter at index %d: %s'):format(self.name, i, tostring(b)))
    end
  end
end

function Adamax:update(p, grad, group, state)
  if state.step == nil then
    state.step = 0
    state.exp_avg = torch.zeros_like(p)
    state.exp_inf = torch.zeros_like(p)
  end
  state.step = state.step + 1
  local beta1, beta2 = group.betas[1], group.betas[2]
  if group.maximize then grad = -grad end
  if group.weight_decay ~= 0 then grad = grad + p * group.weight_decay end
  state.exp_avg:mul_(beta1):add_(grad, 1 - beta1)
  state.exp_inf:copy_(torch.maximum(state.exp_inf * beta2, grad:abs() + group.eps))
  local clr = group.lr / (1 - beta1 ^ state.step)
  p:add_(state.exp_avg / state.exp_inf, -clr)
end

return Adamax
