-- nn.ConvTranspose2d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, output_padding=, dilation=1,
-- groups=1, bias=true, padding_mode='zeros', device=, dtype=}]): PyTorch's ConvTranspose2d, with
-- weight and bias of its shapes and initialisation (nn._ConvNd in nn/convolution.lua).
local torch = require 'torch'
require 'nn.convolution'

local ConvTranspose2d, parent = torch.class('nn.ConvTranspose2d', 'nn._ConvNd')

function ConvTranspose2d:__init(in_channels, out_channels, kernel_size, ...)
  parent.__init(self, 'nn.ConvTranspose2d', 2, true, in_channels, out_channels, kernel_size, ...)
end

return ConvTranspose2d
