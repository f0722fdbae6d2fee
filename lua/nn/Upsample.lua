-- nn.Upsample({size= | scale_factor=, mode='nearest', align_corners=nil}): F.interpolate as
-- a layer.
local torch = require 'torch'
local F = require 'nn.functional'
local utils = require 'nn.utils'
local NONE = require('torch.options').none

local Upsample, parent = torch.class('nn.Upsample', 'nn.Module')

function Upsample:__init(opts)
  parent.__init(self)
  local o = utils.options('nn.Upsample', opts, { size = false, scale_factor = false, mode = 'nearest',
                                                  align_corners = NONE })
  self.size, self.scale_factor, self.mode, self.align_corners = o.size, o.scale_factor, o.mode, o.align_corners
end

function Upsample:forward(x)
  return F.interpolate(x, { size = self.size, scale_factor = self.scale_factor, mode = self.mode,
                            align_corners = self.align_corners })
end

function Upsample:extra_repr()
  local s = self.scale_factor and 'scale_factor=' .. tostring(self.scale_factor)
         or 'size=' .. (type(self.size) == 'table' and ('(%s)'):format(table.concat(self.size, ', ')) or tostring(self.size))
  return s .. ", mode='" .. self.mode .. "'"
end

return Upsample
