-- optim.SGD(params, {lr=, momentum=0, dampening=0, weight_decay=0, nesterov=false,
-- maximize=false}):
-- stochastic gradient descent with PyTorch 1.13's rule, one engine call per parameter:
--   g = grad (-grad with maximize) + weight_decay * p
--   buf = g on the first step, else momentum * buf + (1 - dampening) * g
--   g = g + momentum * buf with nesterov, else buf       (when momentum ~= 0)
--   p = p - lr * g
local torch = require 'torch'
local C = require 'torch._C'
local utils = require 'nn.utils'

local SGD, parent = torch.class('optim.SGD', 'optim.Optimizer')

-- the settings in PyTorch's positional order (optim.SGD(params, 0.1)), or by name in a last table
function SGD:__init(params, ...)
  local opts = utils.positional('optim.SGD', { 'lr', 'momentum', 'dampening', 'weight_decay', 'nesterov' }, ...)
  local defaults = utils.options('optim.SGD', opts, {
    lr = parent.required, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false,
    maximize = false,
  })
  parent.__init(self, params, defaults, 'optim.SGD')
end

local function check_number(who, name, v, lo)
  if type(v) ~= 'number' or v < lo then
    utils.error(('%s: invalid %s: %s'):format(who, name, tostring(v)))
  end
end

function SGD:check(g)
  check_number(self.name, 'learning rate', g.lr, 0)
  check_number(self.name, 'momentum value', g.momentum, 0)
  check_number(self.name, 'dampening value', g.dampening, -math.huge)
  check_number(self.name, 'weight_decay value', g.weight_decay, 0)
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    utils.error(('%s: Nesterov momentum requires a momentum and zero dampening'):format(self.name))
  end
end

function SGD:update(p, grad, group, state)
  local buf, first = nil, false
  if group.momentum ~= 0 then
    buf = state.momentum_buffer
    if buf == nil then
      buf = torch.zeros(p:size(), { dtype = p.dtype, device = p.device })
      state.momentum_buffer, first = buf, true
    end
  end
  if group.maximize then grad = -grad end
  C.sgd_step(p, grad, buf, {
    lr = group.lr, momentum = group.momentum, dampening = group.dampening,
    weight_decay = group.weight_decay, nesterov = group.nesterov and true or false,
    first_step = first,
  })
end

return SGD
