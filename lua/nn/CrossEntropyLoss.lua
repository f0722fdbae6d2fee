-- nn.CrossEntropyLoss([{reduction='mean'}]): loss(input, target) is nn.functional.cross_entropy:
-- input [N, C] raw scores, target int64 [N] class indices, 1-based.
local torch = require 'torch'
local F = require 'nn.functional'

local CrossEntropyLoss, parent = torch.class('nn.CrossEntropyLoss', 'nn.Module')

function CrossEntropyLoss:__init(opts)
  parent.__init(self)
  self.reduction = F._reduction('nn.CrossEntropyLoss', opts)
end

function CrossEntropyLoss:forward(input, target)
  return F.cross_entropy(input, target, self.reduction)
end

return CrossEntropyLoss
