-- nn.BatchNorm2d(num_features [, opts]): batch normalization of [N, C, H, W] over N, H and
-- W; see lua/nn/_BatchNorm.lua for the options and buffers.
return require('nn._BatchNorm').subclass('BatchNorm2d', { 4 }, '[N, C, H, W]')
