-- nn.Dropout([p=0.5]): while training zeroes each element with probability p and scales
-- the others by 1/(1-p); in eval mode returns its input unchanged.
local torch = require 'torch'
local F = require 'nn.functional'
local utils = require 'nn.utils'

local Dropout, parent = torch.class('nn.Dropout', 'nn.Module')

function Dropout:__init(p)
  parent.__init(self)
  if p == nil then p = 0.5 end
  if type(p) ~= 'number' or p < 0 or p > 1 then
    utils.error(('nn.Dropout: probability has to be between 0 and 1, but got %s'):format(tostring(p)))
  end
  self.p = p
end

function Dropout:forward(x)
  return F.dropout(x, self.p, self.training)
end

function Dropout:extra_repr()
  return ('p=%s, inplace=false'):format(tostring(self.p))
end

return Dropout
