-- nn.MaxPool2d(kernel_size [, stride | {stride=kernel_size, padding=0, dilation=1,
-- return_indices=false, ceil_mode=false}]): F.max_pool2d as a layer.  With return_indices
-- the forward returns the output and the 1-based flat indices of the maxima within each
-- plane (PyTorch's indices plus one).
local F = require 'nn.functional'
local pool_class = require 'nn._pool'

return pool_class('MaxPool2d', F.max_pool2d, { stride = false, padding = 0, dilation = 1, return_indices = false, ceil_mode = false },
  { 'stride', 'padding', 'dilation', 'return_indices', 'ceil_mode' },
  { 'stride', 'padding', 'dilation', 'ceil_mode' })
