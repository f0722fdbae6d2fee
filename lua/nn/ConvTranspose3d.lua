-- nn.ConvTranspose3d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, output_padding=0, dilation=1,
-- groups=1, bias=true, padding_mode='zeros', device=, dtype=}]): PyTorch's ConvTranspose3d, with
-- weight and bias of its shapes and initialisation (nn._ConvNd in nn/convolution.lua); composed
-- of 2-D convolutions (see conv3d_by_planes there).
local torch = require 'torch'
require 'nn.convolution'

local ConvTranspose3d, parent = torch.class('nn.ConvTranspose3d', 'nn._ConvNd')

function ConvTranspose3d:__init(in_channels, out_channels, kernel_size, ...)
  parent.__init(self, 'nn.ConvTranspose3d', 3, true, in_channels, out_channels, kernel_size, ...)
end

return ConvTranspose3d
