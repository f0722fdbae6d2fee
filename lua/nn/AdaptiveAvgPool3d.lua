-- nn.AdaptiveAvgPool3d(output_size): F.adaptive_avg_pool3d as a layer; output_size is n or
-- {d, h, w}, where false keeps the input's size (PyTorch's None).
local torch = require 'torch'
local F = require 'nn.functional'

local AdaptiveAvgPool3d, parent = torch.class('nn.AdaptiveAvgPool3d', 'nn.Module')

function AdaptiveAvgPool3d:__init(output_size)
  parent.__init(self)
  self.output_size = output_size
end

function AdaptiveAvgPool3d:forward(x) return F.adaptive_avg_pool3d(x, self.output_size) end

function AdaptiveAvgPool3d:extra_repr()
  local v = self.output_size
  if type(v) ~= 'table' then return 'output_size=' .. tostring(v) end
  return ('output_size=(%s, %s, %s)'):format(v[1] or 'None', v[2] or 'None', v[3] or 'None')
end

return AdaptiveAvgPool3d
