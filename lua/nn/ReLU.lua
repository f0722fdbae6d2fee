-- nn.ReLU(): applies relu elementwise.
local torch = require 'torch'
local F = require 'nn.functional'

local ReLU, parent = torch.class('nn.ReLU', 'nn.Module')

function ReLU:__init()
  parent.__init(self)
end

function ReLU:forward(x)
  return F.relu(x)
end

return ReLU
