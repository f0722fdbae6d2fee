-- nn.MaxPool1d(kernel_size [, stride | {stride=kernel_size, padding=0, dilation=1,
-- return_indices=false, ceil_mode=false}]): F.max_pool1d over [N, C, L] as a layer.
local F = require 'nn.functional'
local pool_class = require 'nn._pool'

return pool_class('MaxPool1d', F.max_pool1d, { stride = false, padding = 0, dilation = 1, return_indices = false, ceil_mode = false },
  { 'stride', 'padding', 'dilation', 'return_indices', 'ceil_mode' },
  { 'stride', 'padding', 'dilation', 'ceil_mode' })
