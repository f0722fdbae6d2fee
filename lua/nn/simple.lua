-- Modules that are one function of their input: elementwise activations (module(x) is
-- fn(x)) and losses (module(input, target) is fn(input, target, opts), with
-- {reduction = 'mean' | 'sum' | 'none', ...} given to the constructor).  Each has its own file
-- too (lua/nn/ReLU.lua ...), so require 'nn.ReLU' works, and nn.ReLU is found on first use.
local torch = require 'torch'
local F = require 'nn.functional'
local losses = require 'nn.losses'
local options = require 'torch.options'

local M = {}

-- nn.NAME(): fn applied to the input; constructor arguments are ignored.
local function activation(name, fn)
  local class, parent = torch.class('nn.' .. name, 'nn.Module')
  function class:__init() parent.__init(self) end
  function class:forward(x) return fn(x) end
  M[name] = class
end

-- nn.NAME([{reduction='mean', ...}]): fn(input, target, {reduction=, ...}).  defaults are
-- the loss's other options; tensor options (weight, pos_weight) are buffers, so they move
-- with the module.
local function loss(name, fn, defaults, reductions)
  local class, parent = torch.class('nn.' .. name, 'nn.Module')
  defaults = defaults or {}
  function class:__init(opts)
    parent.__init(self)
    local o = losses.options('nn.' .. name, opts, defaults, reductions)
    self.reduction = o.reduction
    for k in pairs(defaults) do
      local v = o[k]
      if torch.is_tensor(v) then self:register_buffer(k, v) elseif v ~= nil then self[k] = v end
    end
  end
  function class:forward(input, target)
    local o = { reduction = self.reduction }
    for k in pairs(defaults) do o[k] = self[k] end
    return fn(input, target, o)
  end
  M[name] = class
end

activation('Identity', function(x) return x end)

-- nn.ReLU([inplace]) or nn.ReLU({inplace = true}): PyTorch's, printing ReLU(inplace=True)
do
  local ReLU, parent = torch.class('nn.ReLU', 'nn.Module')
  function ReLU:__init(inplace)
    parent.__init(self)
    if type(inplace) == 'table' then inplace = options.check('nn.ReLU', inplace, { inplace = false }).inplace end
    if inplace ~= nil and type(inplace) ~= 'boolean' then
      options.error(('nn.ReLU: inplace must be a boolean, got %s'):format(type(inplace)))
    end
    self.inplace = inplace == true
  end
  function ReLU:forward(x) return F.relu(x, self.inplace) end
  function ReLU:extra_repr() return self.inplace and 'inplace=True' or '' end
  M.ReLU = ReLU
end
activation('Sigmoid', F.sigmoid)
activation('Tanh', F.tanh)

local none = options.none
loss('MSELoss', F.mse_loss)
-- input [N, C] raw scores, target int64 [N] class indices, 1-based, or class probabilities
loss('CrossEntropyLoss', F.cross_entropy, { weight = none, ignore_index = -100, label_smoothing = 0.0 })
-- input [N, C] log-probabilities, target int64 [N] class indices, 1-based
loss('NLLLoss', F.nll_loss, { weight = none, ignore_index = -100 })
loss('L1Loss', F.l1_loss)
loss('SmoothL1Loss', F.smooth_l1_loss, { beta = 1.0 })
loss('HuberLoss', F.huber_loss, { delta = 1.0 })
loss('BCELoss', F.binary_cross_entropy, { weight = none })
loss('BCEWithLogitsLoss', F.binary_cross_entropy_with_logits, { weight = none, pos_weight = none })
loss('KLDivLoss', F.kl_div, { log_target = false }, { mean = true, sum = true, none = true, batchmean = true })

return M
