-- nn.AdaptiveMaxPool2d(output_size [, {return_indices=false}]): F.adaptive_max_pool2d as a
-- layer; the indices count from 1 within each plane, as nn.MaxPool2d's.
local torch = require 'torch'
local F = require 'nn.functional'
local utils = require 'nn.utils'
local Avg = require 'nn.AdaptiveAvgPool2d'

local AdaptiveMaxPool2d, parent = torch.class('nn.AdaptiveMaxPool2d', 'nn.Module')

function AdaptiveMaxPool2d:__init(output_size, opts)
  parent.__init(self)
  local o = utils.options('nn.AdaptiveMaxPool2d', opts, { return_indices = false })
  self.output_size, self.return_indices = output_size, o.return_indices
end

function AdaptiveMaxPool2d:forward(x) return F.adaptive_max_pool2d(x, self.output_size, self.return_indices) end

function AdaptiveMaxPool2d:extra_repr() return 'output_size=' .. Avg._show(self.output_size) end

return AdaptiveMaxPool2d
