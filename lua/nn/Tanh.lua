-- nn.Tanh(): applies tanh elementwise.
local torch = require 'torch'
local F = require 'nn.functional'

local Tanh, parent = torch.class('nn.Tanh', 'nn.Module')

function Tanh:__init()
  parent.__init(self)
end

function Tanh:forward(x)
  return F.tanh(x)
end

return Tanh
