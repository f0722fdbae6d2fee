-- nn.MSELoss([{reduction='mean'}]): loss(input, target) is nn.functional.mse_loss.
local torch = require 'torch'
local F = require 'nn.functional'

local MSELoss, parent = torch.class('nn.MSELoss', 'nn.Module')

function MSELoss:__init(opts)
  parent.__init(self)
  self.reduction = F._reduction('nn.MSELoss', opts)
end

function MSELoss:forward(input, target)
  return F.mse_loss(input, target, self.reduction)
end

return MSELoss
