-- nn.BatchNorm3d(num_features [, opts]): batch normalization of [N, C, D, H, W] over N, D, H
-- and W; see lua/nn/_BatchNorm.lua for the options and buffers.
return require('nn._BatchNorm').subclass('BatchNorm3d', { 5 }, '[N, C, D, H, W]')
