-- The base of nn.BatchNorm1d and nn.BatchNorm2d (and nn.SyncBatchNorm):
-- nn.BatchNormNd(num_features [, {eps=1e-5, momentum=0.1, affine=true,
-- track_running_stats=true, device=, dtype=}]).
--
-- momentum = false is PyTorch's momentum=None (a Lua table cannot hold nil): the running
-- statistics are then the cumulative average of every batch seen, 1/num_batches_tracked.
-- The buffers running_mean, running_var and num_batches_tracked (int64, 0-dim) carry
-- PyTorch's names into state_dict and move with :to(); they are updated in place, so that
-- nn.DataParallel keeps the updates made on device_ids[1].
local torch = require 'torch'
local Parameter = require 'nn.Parameter'
local F = require 'nn.functional'
local utils = require 'nn.utils'

local BatchNorm, parent = torch.class('nn._BatchNorm', 'nn.Module')

function BatchNorm:__init(num_features, opts)
  parent.__init(self)
  local who = 'nn.' .. (torch.typename(self) or 'BatchNorm'):match('[^.]+$')
  if math.type(num_features) ~= 'integer' or num_features < 1 then
    utils.error(('%s: num_features must be a positive integer, got %s'):format(who, tostring(num_features)))
  end
  local o = utils.options(who, opts, { eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true,
                                       device = false, dtype = false, process_group = false })
  if o.momentum ~= false and type(o.momentum) ~= 'number' then
    utils.error(('%s: momentum must be a number, or false for a cumulative average, got %s'):format(who, tostring(o.momentum)))
  end
  local topts = { device = o.device or nil, dtype = o.dtype or nil }
  self.num_features, self.eps, self.affine, self.track_running_stats = num_features, o.eps, o.affine, o.track_running_stats
  self.momentum = o.momentum
  rawset(self, 'process_group', o.process_group or nil)
  if o.affine then
    self.weight = Parameter(torch.ones(num_features, topts))
    self.bias = Parameter(torch.zeros(num_features, topts))
  end
  if o.track_running_stats then
    self:register_buffer('running_mean', torch.zeros(num_features, topts))
    self:register_buffer('running_var', torch.ones(num_features, topts))
    self:register_buffer('num_batches_tracked', torch.tensor(0, { dtype = 'int64', device = o.device or nil }))
  end
end

function BatchNorm:reset_running_stats()
  if not self.track_running_stats then return end
  torch.no_grad(function()
    self.running_mean:zero_()
    self.running_var:fill_(1)
    self.num_batches_tracked:zero_()
  end)
end

function BatchNorm:reset_parameters()
  self:reset_running_stats()
  if self.affine then
    torch.no_grad(function()
      self.weight:fill_(1)
      self.bias:zero_()
    end)
  end
end

-- subclasses check the input's dims
function BatchNorm:_check_input_dim(x) end

-- the factor of this batch in the running statistics (and num_batches_tracked counted up)
function BatchNorm:_average_factor()
  local factor = self.momentum or 0
  if self.training and self.track_running_stats and self.num_batches_tracked ~= nil then
    torch.no_grad(function() self.num_batches_tracked:add_(1) end)
    if self.momentum == false then factor = 1 / self.num_batches_tracked:item() end
  end
  return factor
end

function BatchNorm:forward(x)
  utils.check_tensor(tostring(self), x)
  self:_check_input_dim(x)
  local factor = self:_average_factor()
  -- eval mode normalises with the running statistics when there are any
  local use_batch = self.training or self.running_mean == nil
  local rm, rv
  if not self.training or self.track_running_stats then rm, rv = self.running_mean, self.running_var end
  return F.batch_norm(x, rm, rv, self.weight, self.bias, use_batch, factor, self.eps)
end

function BatchNorm:extra_repr()
  return ('%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s'):format(self.num_features,
    tostring(self.eps), self.momentum == false and 'None' or tostring(self.momentum), tostring(self.affine),
    tostring(self.track_running_stats))
end

-- a subclass nn.NAME checking that inputs have one of the given numbers of dims
function BatchNorm.subclass(name, dims, shape)
  local cls = torch.class('nn.' .. name, 'nn._BatchNorm')
  function cls:_check_input_dim(x)
    local d = x:dim()
    for _, ok in ipairs(dims) do if d == ok then return end end
    utils.error(('nn.%s: expected %s input (%s), got shape %s'):format(name,
      table.concat(dims, 'D or ') .. 'D', shape, utils.shape(x)))
  end
  return cls
end

return BatchNorm
