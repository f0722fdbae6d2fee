-- nn.AdaptiveAvgPool2d(output_size): F.adaptive_avg_pool2d as a layer; output_size is n or
-- {h, w}, where false keeps the input's size (PyTorch's None).
local torch = require 'torch'
local F = require 'nn.functional'

local AdaptiveAvgPool2d, parent = torch.class('nn.AdaptiveAvgPool2d', 'nn.Module')

function AdaptiveAvgPool2d:__init(output_size)
  parent.__init(self)
  self.output_size = output_size
end

function AdaptiveAvgPool2d:forward(x) return F.adaptive_avg_pool2d(x, self.output_size) end

local function show(v)
  if type(v) ~= 'table' then return tostring(v) end
  return ('(%s, %s)'):format(v[1] or 'None', v[2] or 'None')
end
AdaptiveAvgPool2d._show = show

function AdaptiveAvgPool2d:extra_repr() return 'output_size=' .. show(self.output_size) end

return AdaptiveAvgPool2d
