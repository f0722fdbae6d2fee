-- optim.Adam(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0, amsgrad=false,
-- maximize=false}): PyTorch 1.13's rule, one engine call per parameter.  At step t (1-based):
--   g = grad (-grad with maximize) + weight_decay * p
--                                          (AdamW instead scales p by 1 - lr * weight_decay)
--   m = beta1 * m + (1 - beta1) * g
--   v = beta2 * v + (1 - beta2) * g * g
--   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
-- With amsgrad, vmax = max(vmax, v) takes v's place in the last line (a composition of
-- tensor ops rather than the fused step).
local torch = require 'torch'
local C = require 'torch._C'
local utils = require 'nn.utils'

local Adam, parent = torch.class('optim.Adam', 'optim.Optimizer')

-- Shared with AdamW, which differs in its name, its weight_decay default and in decoupling.
function Adam:_setup(params, opts, name, weight_decay, decoupled)
  local defaults = utils.options(name, opts, {
    lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = weight_decay, amsgrad = false,
    maximize = false,
  })
  self.decoupled = decoupled
  parent.__init(self, params, defaults, name)
end

-- the settings in PyTorch's positional order (optim.Adam(params, 0.1)), or by name in a last table
function Adam:__init(params, ...)
  local opts = utils.positional('optim.Adam', { 'lr', 'betas', 'eps', 'weight_decay', 'amsgrad' }, ...)
  self:_setup(params, opts, 'optim.Adam', 0, false)
end

function Adam:check(g)
  local function bad(what, v)
    utils.error(('%s: invalid %s: %s'):format(self.name, what, tostring(v)))
  end
  if type(g.lr) ~= 'number' or g.lr < 0 then bad('learning rate', g.lr) end
  if type(g.eps) ~= 'number' or g.eps < 0 then bad('epsilon value', g.eps) end
  if type(g.weight_decay) ~= 'number' or g.weight_decay < 0 then bad('weight_decay value', g.weight_decay) end
  if type(g.betas) ~= 'table' or #g.betas ~= 2 then bad('betas (expected {beta1, beta2})', g.betas) end
  if type(g.amsgrad) ~= 'boolean' then bad('amsgrad (expected true or false)', g.amsgrad) end
  if type(g.maximize) ~= 'boolean' then bad('maximize (expected true or false)', g.maximize) end
  for i = 1, 2 do
    local b = g.betas[i]
    if type(b) ~= 'number' or b < 0 or b >= 1 then bad(('beta parameter at index %d'):format(i), b) end
  end
end

function Adam:update(p, grad, group, state)
  if state.step == nil then
    local o = { dtype = p.dtype, device = p.device }
    state.step = 0
    state.exp_avg = torch.zeros(p:size(), o)
    state.exp_avg_sq = torch.zeros(p:size(), o)
    if group.amsgrad then state.max_exp_avg_sq = torch.zeros(p:size(), o) end
  end
  state.step = state.step + 1
  if group.maximize then grad = -grad end
  if group.amsgrad then return self:_amsgrad(p, grad, group, state) end
  C.adam_step(p, grad, state.exp_avg, state.exp_avg_sq, {
    lr = group.lr, beta1 = group.betas[1], beta2 = group.betas[2], eps = group.eps,
    weight_decay = group.weight_decay, decoupled = self.decoupled, step = state.step,
  })
end

-- PyTorch's single-tensor amsgrad step, op for op.
function Adam:_amsgrad(p, grad, group, state)
  local lr, wd, beta1, beta2 = group.lr, group.weight_decay, group.betas[1], group.betas[2]
  if state.max_exp_avg_sq == nil then state.max_exp_avg_sq = torch.zeros_like(p) end
  if self.decoupled then p:mul_(1 - lr * wd)
  elseif wd ~= 0 then grad = grad + p * wd end
  local m, v, vmax = state.exp_avg, state.exp_avg_sq, state.max_exp_avg_sq
  m:mul_(beta1):add_(grad, 1 - beta1)
  v:mul_(beta2):add_(grad * grad, 1 - beta2)
  vmax:copy_(torch.maximum(vmax, v))
  local step_size = lr / (1 - beta1 ^ state.step)
  local denom = vmax:sqrt() / math.sqrt(1 - beta2 ^ state.step) + group.eps
  p:add_(m / denom, -step_size)
end

return Adam
