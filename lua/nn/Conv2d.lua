-- nn.Conv2d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, dilation=1,
-- groups=1, bias=true, padding_mode='zeros', device=, dtype=}]): PyTorch's Conv2d, with
-- weight and bias of its shapes and initialisation (nn._ConvNd in nn/convolution.lua).
local torch = require 'torch'
require 'nn.convolution'

local Conv2d, parent = torch.class('nn.Conv2d', 'nn._ConvNd')

function Conv2d:__init(in_channels, out_channels, kernel_size, ...)
  parent.__init(self, 'nn.Conv2d', 2, false, in_channels, out_channels, kernel_size, ...)
end

return Conv2d
