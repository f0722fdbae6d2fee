-- nn.AvgPool3d(kernel_size [, stride | {stride=kernel_size, padding=0, ceil_mode=false,
-- count_include_pad=true, divisor_override=nil}]): F.avg_pool3d as a layer.
local F = require 'nn.functional'
local pool_class = require 'nn._pool'

return pool_class('AvgPool3d', F.avg_pool3d, { stride = false, padding = 0, ceil_mode = false, count_include_pad = true,
    divisor_override = false },
  { 'stride', 'padding', 'ceil_mode', 'count_include_pad', 'divisor_override' },
  { 'stride', 'padding' })
