-- nn.SyncBatchNorm(num_features [, opts]): batch norm whose statistics in training are
-- those of the whole batch over every rank of the process group (torch.distributed): the
-- per-channel sums are all-reduced, and so are their gradients in backward, so every rank
-- normalises with the same mean and variance and gets the gradient of the sum of every
-- rank's loss, as PyTorch's SyncBatchNorm.  The options and buffers are nn.BatchNorm2d's
-- (lua/nn/_BatchNorm.lua); the input is [N, C, ...].  Without a process group of more
-- than one rank, and in eval mode, it is plain batch norm.  Unlike PyTorch 1.13 it runs on
-- CPU tensors (MPI) as well as CUDA ones.
--
-- nn.SyncBatchNorm.convert_sync_batchnorm(module) returns module with every BatchNorm1d
-- and BatchNorm2d replaced by a SyncBatchNorm holding the same parameters and buffers.
-- Every rank must run every forward and backward, in the same order.
local torch = require 'torch'
require 'nn._BatchNorm'
local utils = require 'nn.utils'

local SyncBatchNorm, parent = torch.class('nn.SyncBatchNorm', 'nn._BatchNorm')

function SyncBatchNorm:_check_input_dim(x)
  if x:dim() < 2 then
    utils.error(('nn.SyncBatchNorm: expected at least 2D input [N, C, ...], got shape %s'):format(utils.shape(x)))
  end
end

local function synced()
  local ok, dist = pcall(require, 'torch.distributed')
  return ok and dist.is_initialized() and dist.get_world_size() > 1
end

-- x summed over every dim but the channels, as [C]
local function channel_sum(x)
  local s = x
  for d = x:dim(), 1, -1 do
    if d ~= 2 then s = s:sum(d) end
  end
  return s
end

function SyncBatchNorm:forward(x)
  utils.check_tensor(tostring(self), x)
  self:_check_input_dim(x)
  if not (self.training and synced()) then return parent.forward(self, x) end
  if self.num_features ~= x:size(2) then
    utils.error(('%s: expected %d channels, got shape %s'):format(tostring(self), self.num_features, utils.shape(x)))
  end
  local factor = self:_average_factor()
  local C, AR = x:size(2), torch._C.all_reduce_sum
  local shape = { 1, C }
  for _ = 3, x:dim() do shape[#shape + 1] = 1 end
  -- the count travels with the sums: ranks may hold batches of different sizes
  local count = torch.full({ 1 }, x:numel() // C, { dtype = x.dtype, device = x.device })
  local sums = AR(torch.cat({ channel_sum(x), count }, 1))
  local n = sums[C + 1]
  if n <= 1 then
    utils.error(('%s: expected more than 1 value per channel when training, got %d over every rank')
      :format(tostring(self), n))
  end
  local mean = sums:narrow(1, 1, C) / n
  local centered = x - mean:view(shape)
  local var = AR(channel_sum(centered * centered)) / n
  if self.track_running_stats then
    torch.no_grad(function()
      self.running_mean:mul_(1 - factor):add_(mean:detach():mul(factor))
      self.running_var:mul_(1 - factor):add_(var:detach():mul(factor * n / (n - 1)))
    end)
  end
  local y = centered * (var + self.eps):rsqrt():view(shape)
  if self.weight ~= nil then y = y * self.weight:view(shape) + self.bias:view(shape) end
  return y
end

function SyncBatchNorm.convert_sync_batchnorm(module)
  local BN1, BN2 = require('nn.BatchNorm1d'), require('nn.BatchNorm2d')
  local out = module
  if torch.isinstance(module, BN1) or torch.isinstance(module, BN2) then
    out = SyncBatchNorm(module.num_features, { eps = module.eps, momentum = module.momentum, affine = module.affine,
                                              track_running_stats = module.track_running_stats })
    if module.affine then
      out.weight, out.bias = module.weight, module.bias
    end
    if module.track_running_stats then
      out:register_buffer('running_mean', module.running_mean)
      out:register_buffer('running_var', module.running_var)
      out:register_buffer('num_batches_tracked', module.num_batches_tracked)
    end
    rawset(out, 'training', module.training)
  end
  local kinds = rawget(module, '_kind') or {}
  for _, name in ipairs(rawget(module, '_order') or {}) do
    local child = rawget(module, name)
    if kinds[name] == 'module' and child ~= nil then
      local c = SyncBatchNorm.convert_sync_batchnorm(child)
      if c ~= child then rawset(module, name, c) end
    end
  end
  return out
end

return SyncBatchNorm
