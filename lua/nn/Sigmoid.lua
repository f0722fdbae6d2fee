-- nn.Sigmoid(): applies sigmoid elementwise.
local torch = require 'torch'
local F = require 'nn.functional'

local Sigmoid, parent = torch.class('nn.Sigmoid', 'nn.Module')

function Sigmoid:__init()
  parent.__init(self)
end

function Sigmoid:forward(x)
  return F.sigmoid(x)
end

return Sigmoid
