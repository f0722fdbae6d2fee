-- nn.NLLLoss([{reduction='mean'}]): loss(input, target) is nn.functional.nll_loss:
-- input [N, C] log-probabilities, target int64 [N] class indices, 1-based.
local torch = require 'torch'
local F = require 'nn.functional'

local NLLLoss, parent = torch.class('nn.NLLLoss', 'nn.Module')

function NLLLoss:__init(opts)
  parent.__init(self)
  self.reduction = F._reduction('nn.NLLLoss', opts)
end

function NLLLoss:forward(input, target)
  return F.nll_loss(input, target, self.reduction)
end

return NLLLoss
