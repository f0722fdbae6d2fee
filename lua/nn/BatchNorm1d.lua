-- nn.BatchNorm1d(num_features [, opts]): batch normalization of [N, C] or [N, C, L] over
-- N (and L); see lua/nn/_BatchNorm.lua for the options and buffers.
return require('nn._BatchNorm').subclass('BatchNorm1d', { 2, 3 }, '[N, C] or [N, C, L]')
