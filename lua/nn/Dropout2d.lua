-- nn.Dropout2d([p=0.5]): while training zeroes whole channels of [N, C, H, W] (or
-- [N, C, L]) with probability p and scales the others by 1/(1-p); in eval mode returns its
-- input unchanged.
local torch = require 'torch'
local F = require 'nn.functional'
local utils = require 'nn.utils'

local Dropout2d, parent = torch.class('nn.Dropout2d', 'nn.Module')

function Dropout2d:__init(p)
  parent.__init(self)
  if p == nil then p = 0.5 end
  if type(p) ~= 'number' or p < 0 or p > 1 then
    utils.error(('nn.Dropout2d: probability has to be between 0 and 1, but got %s'):format(tostring(p)))
  end
  self.p = p
end

function Dropout2d:forward(x) return F.dropout2d(x, self.p, self.training) end

function Dropout2d:extra_repr() return ('p=%s, inplace=false'):format(tostring(self.p)) end

return Dropout2d
