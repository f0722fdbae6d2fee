-- nn.ConvTranspose1d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, output_padding=, dilation=1,
-- groups=1, bias=true, padding_mode='zeros', device=, dtype=}]): PyTorch's ConvTranspose1d, with
-- weight and bias of its shapes and initialisation (nn._ConvNd in nn/convolution.lua).
local torch = require 'torch'
require 'nn.convolution'

local ConvTranspose1d, parent = torch.class('nn.ConvTranspose1d', 'nn._ConvNd')

function ConvTranspose1d:__init(in_channels, out_channels, kernel_size, ...)
  parent.__init(self, 'nn.ConvTranspose1d', 1, true, in_channels, out_channels, kernel_size, ...)
end

return ConvTranspose1d
