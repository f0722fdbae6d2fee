-- nn.Conv1d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, dilation=1,
-- groups=1, bias=true, padding_mode='zeros', device=, dtype=}]): PyTorch's Conv1d, with
-- weight and bias of its shapes and initialisation (nn._ConvNd in nn/convolution.lua).
local torch = require 'torch'
require 'nn.convolution'

local Conv1d, parent = torch.class('nn.Conv1d', 'nn._ConvNd')

function Conv1d:__init(in_channels, out_channels, kernel_size, ...)
  parent.__init(self, 'nn.Conv1d', 1, false, in_channels, out_channels, kernel_size, ...)
end

return Conv1d
