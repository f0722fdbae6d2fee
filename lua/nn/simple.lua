-- Modules that are one function of their input: elementwise activations (module(x) is
-- fn(x)) and losses (module(input, target) is fn(input, target, reduction), with
-- {reduction = 'mean' | 'sum' | 'none'} given to the constructor).  Each has its own file
-- too (lua/nn/ReLU.lua ...), so require 'nn.ReLU' works, and nn.ReLU is found on first use.
local torch = require 'torch'
local F = require 'nn.functional'

local M = {}

-- nn.NAME(): fn applied to the input; constructor arguments are ignored.
local function activation(name, fn)
  local class, parent = torch.class('nn.' .. name, 'nn.Module')
  function class:__init() parent.__init(self) end
  function class:forward(x) return fn(x) end
  M[name] = class
end

-- nn.NAME([{reduction='mean'}]): fn(input, target, reduction).
local function loss(name, fn)
  local class, parent = torch.class('nn.' .. name, 'nn.Module')
  function class:__init(opts)
    parent.__init(self)
    self.reduction = F._reduction('nn.' .. name, opts)
  end
  function class:forward(input, target) return fn(input, target, self.reduction) end
  M[name] = class
end

activation('Identity', function(x) return x end)
activation('ReLU', F.relu)
activation('Sigmoid', F.sigmoid)
activation('Tanh', F.tanh)

loss('MSELoss', F.mse_loss)
-- input [N, C] raw scores, target int64 [N] class indices, 1-based
loss('CrossEntropyLoss', F.cross_entropy)
-- input [N, C] log-probabilities, target int64 [N] class indices, 1-based
loss('NLLLoss', F.nll_loss)

return M
