-- nn.ZeroPad2d(padding): pads the last two dims with zeros; padding is n (every side) or
-- {left, right, top, bottom}; negative values crop.
local torch = require 'torch'
local F = require 'nn.functional'
local utils = require 'nn.utils'

local ZeroPad2d, parent = torch.class('nn.ZeroPad2d', 'nn.Module')

function ZeroPad2d:__init(padding)
  parent.__init(self)
  if math.type(padding) == 'integer' then padding = { padding, padding, padding, padding } end
  if type(padding) ~= 'table' or #padding ~= 4 then
    utils.error(('nn.ZeroPad2d: padding must be an integer or {left, right, top, bottom}, got %s'):format(tostring(padding)))
  end
  self.padding = padding
end

function ZeroPad2d:forward(x) return F.pad(x, self.padding, 'constant', 0) end

function ZeroPad2d:extra_repr() return ('(%s)'):format(table.concat(self.padding, ', ')) end

return ZeroPad2d
