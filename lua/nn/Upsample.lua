-- nn.Upsample({size= | scale_factor=, mode='nearest', align_corners=nil,
-- recompute_scale_factor=nil}): F.interpolate as a layer, with every mode it has
-- ('nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area').
local torch = require 'torch'
local F = require 'nn.functional'
local utils = require 'nn.utils'
local NONE = require('torch.options').none
local pyfloat = require('nn.activation').pyfloat

local Upsample, parent = torch.class('nn.Upsample', 'nn.Module')

function Upsample:__init(opts)
  parent.__init(self)
  local o = utils.options('nn.Upsample', opts, { size = false, scale_factor = false, mode = 'nearest',
                                                  align_corners = NONE, recompute_scale_factor = NONE })
  self.size, self.scale_factor, self.mode, self.align_corners = o.size, o.scale_factor, o.mode, o.align_corners
  self.recompute_scale_factor = o.recompute_scale_factor
end

function Upsample:forward(x)
  return F.interpolate(x, { size = self.size, scale_factor = self.scale_factor, mode = self.mode,
                            align_corners = self.align_corners,
                            recompute_scale_factor = self.recompute_scale_factor or false })
end

-- PyTorch's repr: Upsample(scale_factor=2.0, mode=bicubic), Upsample(size=(3, 4), mode=area)
local function show(v, fmt)
  if type(v) ~= 'table' then return fmt(v) end
  local parts = {}
  for i, x in ipairs(v) do parts[i] = fmt(x) end
  return '(' .. table.concat(parts, ', ') .. (#parts == 1 and ',)' or ')')
end

function Upsample:extra_repr()
  local s = self.scale_factor and 'scale_factor=' .. show(self.scale_factor, pyfloat)
         or 'size=' .. show(self.size, tostring)
  return s .. ', mode=' .. self.mode
end

return Upsample
