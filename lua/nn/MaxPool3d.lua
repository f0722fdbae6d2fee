-- nn.MaxPool3d(kernel_size [, stride | {stride=kernel_size, padding=0, dilation=1,
-- return_indices=false, ceil_mode=false}]): F.max_pool3d as a layer (two 2-D pools, see
-- lua/nn/functional_vision.lua); with return_indices also the 1-based flat indices of the
-- maxima within each volume.
local F = require 'nn.functional'
local pool_class = require 'nn._pool'

return pool_class('MaxPool3d', F.max_pool3d, { stride = false, padding = 0, dilation = 1, return_indices = false, ceil_mode = false },
  { 'stride', 'padding', 'dilation', 'return_indices', 'ceil_mode' },
  { 'stride', 'padding', 'dilation', 'ceil_mode' })
