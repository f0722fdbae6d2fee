-- nn.Linear(in_features, out_features [, {bias=true, device=, dtype=}]): y = x W^T + b.
-- weight is [out, in] and bias [out], both drawn from U(-1/sqrt(in), 1/sqrt(in)) as
-- PyTorch does (its kaiming_uniform_ with a = sqrt(5) comes to the same bound).
local torch = require 'torch'
local Parameter = require 'nn.Parameter'
local F = require 'nn.functional'
local utils = require 'nn.utils'

local Linear, parent = torch.class('nn.Linear', 'nn.Module')

local function check_size(what, n)
  if math.type(n) ~= 'integer' or n < 0 then
    utils.error(('nn.Linear: %s must be a non-negative integer, got %s'):format(what, tostring(n)))
  end
end

function Linear:__init(in_features, out_features, opts)
  parent.__init(self)
  check_size('in_features', in_features)
  check_size('out_features', out_features)
  local o = utils.options('nn.Linear', opts, { bias = true, device = false, dtype = false })
  local topts = { device = o.device or nil, dtype = o.dtype or nil }
  self.in_features, self.out_features = in_features, out_features
  self.weight = Parameter(torch.empty(out_features, in_features, topts))
  if o.bias then self.bias = Parameter(torch.empty(out_features, topts)) end
  self:reset_parameters()
end

function Linear:reset_parameters()
  local bound = self.in_features > 0 and 1 / math.sqrt(self.in_features) or 0
  torch.no_grad(function()
    self.weight:uniform_(-bound, bound)
    if self.bias ~= nil then self.bias:uniform_(-bound, bound) end
  end)
end

function Linear:forward(x)
  utils.check_tensor('nn.Linear', x)
  if x:dim() == 0 or x:size(x:dim()) ~= self.in_features then
    utils.error(('%s: expected an input whose last dimension is %d, got shape %s')
      :format(tostring(self), self.in_features, utils.shape(x)))
  end
  return F.linear(x, self.weight, self.bias)
end

function Linear:extra_repr()
  return ('in_features=%d, out_features=%d, bias=%s'):format(self.in_features, self.out_features,
    tostring(self.bias ~= nil))
end

return Linear
