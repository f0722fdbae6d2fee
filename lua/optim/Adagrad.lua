-- optim.Adagrad(params, {lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
-- eps=1e-10, maximize=false}): PyTorch 1.13's rule, as a few tensor ops per parameter.  At
-- step t (1-based):
--   g = grad (-grad with maximize) + weight_decay * p
--   sum = sum + g * g                      (sum starts at initial_accumulator_value)
--   p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)
local torch = require 'torch'
local utils = require 'nn.utils'

local Adagrad, parent = torch.class('optim.Adagrad', 'optim.Optimizer')

-- the settings in PyTorch's positional order (optim.Adagrad(params, 0.1)), or by name in a last table
function Adagrad:__init(params, ...)
  local opts = utils.positional('optim.Adagrad', { 'lr', 'lr_decay', 'weight_decay', 'initial_accumulator_value', 'eps' }, ...)
  local defaults = utils.options('optim.Adagrad', opts, {
    lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10,
    maximize = false,
  })
  parent.__init(self, params, defaults, 'optim.Adagrad')
  -- as PyTorch, the state exists from the start (so it is saved before the first step)
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      self.state[p] = { step = 0, sum = torch.full_like(p, group.initial_accumulator_value):detach() }
    end
  end
end

function Adagrad:check(g)
  parent.check_number(self, 'learning rate', g.lr, 0)
  parent.check_number(self, 'lr_decay value', g.lr_decay, 0)
  parent.check_number(self, 'weight_decay value', g.weight_decay, 0)
  parent.check_number(self, 'initial_accumulator_value value', g.initial_accumulator_value, 0)
  parent.check_number(self, 'epsilon value', g.eps, 0)
end

function Adagrad:update(p, grad, group, state)
  if state.sum == nil then
    state.step = 0
    state.sum = torch.full_like(p, group.initial_accumulator_value)
  end
  state.step = state.step + 1
  if group.maximize then grad = -grad end
  if group.weight_decay ~= 0 then grad = grad + p * group.weight_decay end
  local clr = group.lr / (1 + (state.step - 1) * group.lr_decay)
  state.sum:add_(grad * grad)
  p:add_(grad / (state.sum:sqrt() + group.eps), -clr)
end

return Adagrad
