-- nn.Conv3d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, dilation=1,
-- groups=1, bias=true, padding_mode='zeros', device=, dtype=}]): PyTorch's Conv3d, with
-- weight and bias of its shapes and initialisation (nn._ConvNd in nn/convolution.lua); composed
-- of 2-D convolutions (see conv3d_by_planes there).
local torch = require 'torch'
require 'nn.convolution'

local Conv3d, parent = torch.class('nn.Conv3d', 'nn._ConvNd')

function Conv3d:__init(in_channels, out_channels, kernel_size, ...)
  parent.__init(self, 'nn.Conv3d', 3, false, in_channels, out_channels, kernel_size, ...)
end

return Conv3d
