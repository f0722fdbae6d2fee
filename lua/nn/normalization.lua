-- Normalization layers: nn.LayerNorm, nn.GroupNorm and nn.RMSNorm (PyTorch 2.4's).  Their
-- weights start at ones and their biases at zeros, as PyTorch's; each calls its functional
-- form (lua/nn/functional_layers.lua), LayerNorm and GroupNorm the engine's fused op.
local torch = require 'torch'
local Parameter = require 'nn.Parameter'
local F = require 'nn.functional'
local FL = require 'nn.functional_layers'
local utils = require 'nn.utils'

local M = {}

local function tensor_opts(o) return { device = o.device or nil, dtype = o.dtype or nil } end

local function shape_repr(s) return '{' .. table.concat(s, ', ') .. '}' end

-- nn.LayerNorm(normalized_shape [, {eps=1e-5, elementwise_affine=true, bias=true, device=, dtype=}])
local LayerNorm, parent = torch.class('nn.LayerNorm', 'nn.Module')
M.LayerNorm = LayerNorm

function LayerNorm:__init(normalized_shape, opts)
  parent.__init(self)
  self.normalized_shape = FL.normalized_shape('nn.LayerNorm', normalized_shape)
  local o = utils.options('nn.LayerNorm', opts,
    { eps = 1e-5, elementwise_affine = true, bias = true, device = false, dtype = false })
  self.eps, self.elementwise_affine = o.eps, o.elementwise_affine
  if o.elementwise_affine then
    self.weight = Parameter(torch.ones(self.normalized_shape, tensor_opts(o)))
    if o.bias then self.bias = Parameter(torch.zeros(self.normalized_shape, tensor_opts(o))) end
  end
end

function LayerNorm:reset_parameters()
  torch.no_grad(function()
    if self.weight ~= nil then self.weight:fill_(1) end
    if self.bias ~= nil then self.bias:zero_() end
  end)
end

function LayerNorm:forward(x)
  return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
end

function LayerNorm:extra_repr()
  return ('%s, eps=%s, elementwise_affine=%s'):format(shape_repr(self.normalized_shape), tostring(self.eps),
    tostring(self.elementwise_affine))
end

-- nn.GroupNorm(num_groups, num_channels [, {eps=1e-5, affine=true, device=, dtype=}])
local GroupNorm = torch.class('nn.GroupNorm', 'nn.Module')
M.GroupNorm = GroupNorm

function GroupNorm:__init(num_groups, num_channels, opts)
  parent.__init(self)
  for what, v in pairs { num_groups = num_groups, num_channels = num_channels } do
    if math.type(v) ~= 'integer' or v < 1 then
      utils.error(('nn.GroupNorm: %s must be a positive integer, got %s'):format(what, tostring(v)))
    end
  end
  if num_channels % num_groups ~= 0 then
    utils.error(('nn.GroupNorm: num_channels (%d) must be divisible by num_groups (%d)'):format(num_channels, num_groups))
  end
  local o = utils.options('nn.GroupNorm', opts, { eps = 1e-5, affine = true, device = false, dtype = false })
  self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, o.eps, o.affine
  if o.affine then
    self.weight = Parameter(torch.ones(num_channels, tensor_opts(o)))
    self.bias = Parameter(torch.zeros(num_channels, tensor_opts(o)))
  end
end

GroupNorm.reset_parameters = LayerNorm.reset_parameters

function GroupNorm:forward(x)
  return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end

function GroupNorm:extra_repr()
  return ('%d, %d, eps=%s, affine=%s'):format(self.num_groups, self.num_channels, tostring(self.eps), tostring(self.affine))
end

-- nn.RMSNorm(normalized_shape [, {eps=nil, elementwise_affine=true, device=, dtype=}]):
-- eps nil is the machine epsilon of the input's dtype, as PyTorch 2.4's
local RMSNorm = torch.class('nn.RMSNorm', 'nn.Module')
M.RMSNorm = RMSNorm

function RMSNorm:__init(normalized_shape, opts)
  parent.__init(self)
  self.normalized_shape = FL.normalized_shape('nn.RMSNorm', normalized_shape)
  local o = utils.options('nn.RMSNorm', opts, { eps = false, elementwise_affine = true, device = false, dtype = false })
  self.eps, self.elementwise_affine = o.eps or nil, o.elementwise_affine
  if o.elementwise_affine then self.weight = Parameter(torch.ones(self.normalized_shape, tensor_opts(o))) end
end

RMSNorm.reset_parameters = LayerNorm.reset_parameters

function RMSNorm:forward(x)
  return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)
end

function RMSNorm:extra_repr()
  return ('%s, eps=%s, elementwise_affine=%s'):format(shape_repr(self.normalized_shape), tostring(self.eps),
    tostring(self.elementwise_affine))
end

return M
