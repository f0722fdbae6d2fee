-- nn.Flatten([start_dim=2 [, end_dim=-1]]): flattens dimensions start_dim..end_dim
-- (1-based; the default keeps the batch dimension).
local torch = require 'torch'
local utils = require 'nn.utils'

local Flatten, parent = torch.class('nn.Flatten', 'nn.Module')

function Flatten:__init(start_dim, end_dim)
  parent.__init(self)
  start_dim, end_dim = start_dim or 2, end_dim or -1
  for what, d in pairs { start_dim = start_dim, end_dim = end_dim } do
    if math.type(d) ~= 'integer' or d == 0 then
      utils.error(('nn.Flatten: %s must be a non-zero integer (1-based), got %s'):format(what, tostring(d)))
    end
  end
  self.start_dim, self.end_dim = start_dim, end_dim
end

function Flatten:forward(x)
  utils.check_tensor('nn.Flatten', x)
  return x:flatten(self.start_dim, self.end_dim)
end

function Flatten:extra_repr()
  return ('start_dim=%d, end_dim=%d'):format(self.start_dim, self.end_dim)
end

return Flatten
