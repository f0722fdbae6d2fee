-- More layers of PyTorch's torch.nn, each calling its functional form (lua/nn/functional_more.lua)
-- and printing as PyTorch's does:
--   activations  PReLU, SELU, CELU, GLU, Hardswish, Hardsigmoid, Softsign, Tanhshrink,
--                Threshold, Softmin, Softmax2d, LogSigmoid
--   shapes       PixelShuffle, PixelUnshuffle, ChannelShuffle, Unflatten, Unfold, Fold
--   padding      ReflectionPad1d/2d, ReplicationPad1d/2d, ConstantPad1d/2d
--   pooling      AvgPool1d, AdaptiveAvgPool1d, AdaptiveMaxPool1d, UpsamplingNearest2d,
--                UpsamplingBilinear2d
--   norms        InstanceNorm1d/2d, LocalResponseNorm
--   distances    CosineSimilarity, PairwiseDistance, Bilinear
--   dropouts     AlphaDropout, Dropout1d, Dropout3d
-- Options are positional as in PyTorch or one table: nn.CELU(0.5), nn.CELU{alpha=0.5}.
local torch = require 'torch'
local F = require 'nn.functional'
local Parameter = require 'nn.Parameter'
local utils = require 'nn.utils'
local act = require 'nn.activation'

local pyfloat = act.pyfloat
local M = {}

local function fail(fmt, ...) utils.error(fmt:format(...)) end

-- a bad value as an error shows it: numbers and strings as they are, tensors by shape
local function show(v)
  if torch.is_tensor(v) then return 'a tensor of shape ' .. utils.shape(v) end
  if type(v) == 'table' then return 'a table' end
  return tostring(v)
end
local function pybool(v) return tostring(v) end   -- printed as the codebase's other reprs: true / false
local function tuple(t)
  if type(t) ~= 'table' then return tostring(t) end
  local parts = {}
  for i, v in ipairs(t) do parts[i] = tostring(v) end
  return '(' .. table.concat(parts, ', ') .. (#parts == 1 and ',)' or ')')
end

-- nn.NAME(args...): the values of `params` ({name, default, check}, in order) taken
-- positionally or from one options table, kept as fields; forward is fn(self, x).
local function layer(name, params, fn, repr)
  local class, parent = torch.class('nn.' .. name, 'nn.Module')
  local who = 'nn.' .. name
  function class:__init(first, ...)
    parent.__init(self)
    local given = { first, ... }
    if type(first) == 'table' and getmetatable(first) == nil and not (params[1] and params[1].table) then
      local defaults = {}
      for _, p in ipairs(params) do
        local d = p[2]
        if d == nil then d = utils.required end
        defaults[p[1]] = d
      end
      local o = utils.options(who, first, defaults)
      for _, p in ipairs(params) do self[p[1]] = o[p[1]] end
    else
      if #given > #params then fail('%s: expected at most %d arguments, got %d', who, #params, #given) end
      for i, p in ipairs(params) do
        local v = given[i]
        if v == nil then v = p[2] end
        if v == nil then fail('%s: %s is required', who, p[1]) end
        self[p[1]] = v
      end
    end
    for _, p in ipairs(params) do
      if p[3] then p[3](who, p[1], self[p[1]]) end
    end
    if self._setup then self:_setup() end
  end
  class.forward = fn
  function class:extra_repr() return repr and repr(self) or '' end
  M[name] = class
  return class
end

local function number(who, what, v)
  if type(v) ~= 'number' then fail('%s: %s must be a number, got %s', who, what, show(v)) end
end
local function integer(who, what, v)
  if math.type(v) ~= 'integer' then fail('%s: %s must be an integer, got %s', who, what, show(v)) end
end
local function positive(who, what, v)
  if math.type(v) ~= 'integer' or v < 1 then fail('%s: %s must be a positive integer, got %s', who, what, show(v)) end
end
local function boolean(who, what, v)
  if type(v) ~= 'boolean' then fail('%s: %s must be a boolean, got %s', who, what, show(v)) end
end
local function probability(who, what, v)
  if type(v) ~= 'number' or v < 0 or v > 1 then
    fail('%s: dropout probability has to be between 0 and 1, but got %s', who, show(v))
  end
end

-- Activations ----------------------------------------------------------------------------

-- inplace = true: forward writes into its input and returns it, as PyTorch's
local function inplace_repr(self) return self.inplace and 'inplace=True' or '' end   -- as nn.ReLU's

layer('SELU', { { 'inplace', false, boolean } }, function(self, x) return F.selu(x, self.inplace) end, inplace_repr)
layer('CELU', { { 'alpha', 1.0, number }, { 'inplace', false, boolean } }, function(self, x) return F.celu(x, self.alpha, self.inplace) end,
  function(self) return 'alpha=' .. pyfloat(self.alpha) .. (self.inplace and ', inplace=True' or '') end)
layer('GLU', { { 'dim', -1, integer } }, function(self, x) return F.glu(x, self.dim) end,
  function(self) return 'dim=' .. self.dim end)
-- (PyTorch's Hardswish and Hardsigmoid print no inplace)
layer('Hardswish', { { 'inplace', false, boolean } }, function(self, x) return F.hardswish(x, self.inplace) end)
layer('Hardsigmoid', { { 'inplace', false, boolean } }, function(self, x) return F.hardsigmoid(x, self.inplace) end)
layer('Softsign', {}, function(_, x) return F.softsign(x) end)
layer('Tanhshrink', {}, function(_, x) return F.tanhshrink(x) end)
layer('LogSigmoid', {}, function(_, x) return F.logsigmoid(x) end)
layer('Threshold', { { 'threshold', nil, number }, { 'value', nil, number }, { 'inplace', false, boolean } },
  function(self, x) return F.threshold(x, self.threshold, self.value, self.inplace) end,
  function(self)
    return ('threshold=%s, value=%s'):format(pyfloat(self.threshold), pyfloat(self.value)) .. (self.inplace and ', inplace=True' or '')
  end)
layer('Softmin', { { 'dim', nil, integer } }, function(self, x) return F.softmin(x, self.dim) end,
  function(self) return 'dim=' .. self.dim end)

-- nn.Softmax2d(): softmax over the channels of [N, C, H, W] or [C, H, W]
layer('Softmax2d', {}, function(_, x)
  utils.check_tensor('nn.Softmax2d', x)
  if x:dim() ~= 3 and x:dim() ~= 4 then
    fail('nn.Softmax2d: Softmax2d: expected input to be 3D or 4D, got %dD instead', x:dim())
  end
  return x:softmax(x:dim() - 2)
end)

-- nn.PReLU([num_parameters=1 [, init=0.25]] | {num_parameters=, init=, device=, dtype=})
local PReLU, prelu_parent = torch.class('nn.PReLU', 'nn.Module')
M.PReLU = PReLU
function PReLU:__init(num_parameters, init)
  prelu_parent.__init(self)
  local o
  if type(num_parameters) == 'table' then
    o = utils.options('nn.PReLU', num_parameters, { num_parameters = 1, init = 0.25, device = false, dtype = false })
  else
    o = { num_parameters = num_parameters or 1, init = init or 0.25 }
  end
  positive('nn.PReLU', 'num_parameters', o.num_parameters)
  number('nn.PReLU', 'init', o.init)
  self.num_parameters, self.init = o.num_parameters, o.init
  self.weight = Parameter(torch.full({ o.num_parameters }, o.init, { device = o.device or nil, dtype = o.dtype or nil }))
end
function PReLU:reset_parameters() torch.no_grad(function() self.weight:fill_(self.init) end) end
function PReLU:forward(x) return F.prelu(x, self.weight) end
function PReLU:extra_repr() return 'num_parameters=' .. self.num_parameters end

-- Shapes ---------------------------------------------------------------------------------

layer('PixelShuffle', { { 'upscale_factor', nil, positive } }, function(self, x) return F.pixel_shuffle(x, self.upscale_factor) end,
  function(self) return 'upscale_factor=' .. self.upscale_factor end)
layer('PixelUnshuffle', { { 'downscale_factor', nil, positive } },
  function(self, x) return F.pixel_unshuffle(x, self.downscale_factor) end,
  function(self) return 'downscale_factor=' .. self.downscale_factor end)
layer('ChannelShuffle', { { 'groups', nil, positive } }, function(self, x) return F.channel_shuffle(x, self.groups) end,
  function(self) return 'groups=' .. self.groups end)

-- nn.Unflatten(dim, unflattened_size): dim (1-based) split into the sizes of unflattened_size
local function sizes(who, what, v)
  if type(v) ~= 'table' or #v == 0 then fail('%s: %s must be a table of integers, got %s', who, what, show(v)) end
  for i = 1, #v do
    if math.type(v[i]) ~= 'integer' then fail('%s: %s[%d] must be an integer, got %s', who, what, i, show(v[i])) end
  end
end
layer('Unflatten', { { 'dim', nil, function(who, what, v)
  if math.type(v) ~= 'integer' or v == 0 then fail('%s: %s must be a non-zero integer (1-based), got %s', who, what, show(v)) end
end }, { 'unflattened_size', nil, sizes } }, function(self, x)
  utils.check_tensor('nn.Unflatten', x)
  local nd = x:dim()
  local d = self.dim < 0 and nd + 1 + self.dim or self.dim
  if d < 1 or d > nd then fail('nn.Unflatten: dim %d is out of range for a %d-D input (dplua counts dims from 1)', self.dim, nd) end
  local want, free = 1, false
  for _, s in ipairs(self.unflattened_size) do if s == -1 then free = true else want = want * s end end
  local n = x:size(d)
  if (not free and want ~= n) or (free and (want == 0 or n % want ~= 0)) then
    fail('nn.Unflatten: unflattened_size %s does not multiply to the size %d of dim %d', tuple(self.unflattened_size), n, d)
  end
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = x:size(i) end
  for _, s in ipairs(self.unflattened_size) do shape[#shape + 1] = s end
  for i = d + 1, nd do shape[#shape + 1] = x:size(i) end
  return x:reshape(shape)
end, function(self) return ('dim=%d, unflattened_size=%s'):format(self.dim, tuple(self.unflattened_size)) end)

local function unfold_repr(self)
  local function s(v) return type(v) == 'table' and tuple(v) or tostring(v) end
  return ('kernel_size=%s, dilation=%s, padding=%s, stride=%s'):format(s(self.kernel_size), s(self.dilation),
    s(self.padding), s(self.stride))
end
-- nn.Unfold(kernel_size [, {dilation=1, padding=0, stride=1}])
local Unfold, unfold_parent = torch.class('nn.Unfold', 'nn.Module')
M.Unfold = Unfold
function Unfold:__init(kernel_size, opts)
  unfold_parent.__init(self)
  local o = utils.options('nn.Unfold', opts, { dilation = 1, padding = 0, stride = 1 })
  if kernel_size == nil then fail('nn.Unfold: kernel_size is required') end
  self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, o.dilation, o.padding, o.stride
end
function Unfold:forward(x)
  return F.unfold(x, self.kernel_size, { dilation = self.dilation, padding = self.padding, stride = self.stride })
end
Unfold.extra_repr = unfold_repr

-- nn.Fold(output_size, kernel_size [, {dilation=1, padding=0, stride=1}])
local Fold, fold_parent = torch.class('nn.Fold', 'nn.Module')
M.Fold = Fold
function Fold:__init(output_size, kernel_size, opts)
  fold_parent.__init(self)
  local o = utils.options('nn.Fold', opts, { dilation = 1, padding = 0, stride = 1 })
  if output_size == nil or kernel_size == nil then fail('nn.Fold: output_size and kernel_size are required') end
  self.output_size, self.kernel_size = output_size, kernel_size
  self.dilation, self.padding, self.stride = o.dilation, o.padding, o.stride
end
function Fold:forward(x)
  return F.fold(x, self.output_size, self.kernel_size, { dilation = self.dilation, padding = self.padding, stride = self.stride })
end
function Fold:extra_repr()
  return ('output_size=%s, '):format(type(self.output_size) == 'table' and tuple(self.output_size) or tostring(self.output_size))
    .. unfold_repr(self)
end

-- Padding --------------------------------------------------------------------------------

-- nn.<Mode>Pad<n>d(padding [, value]): padding is one integer (every side) or 2n integers
-- (left, right [, top, bottom])
local function pad_layer(name, mode, n, with_value)
  local params = { { 'padding', nil, function(who, what, v)
    if math.type(v) == 'integer' then return end
    if type(v) ~= 'table' or #v ~= 2 * n then fail('%s: padding must be an integer or a table of %d integers, got %s', who, 2 * n, show(v)) end
    for i = 1, #v do integer(who, 'padding[' .. i .. ']', v[i]) end
  end } }
  params[1].table = true
  if with_value then params[2] = { 'value', nil, number } end
  local cls = layer(name, params, function(self, x)
    utils.check_tensor('nn.' .. name, x)
    if x:dim() ~= n + 1 and x:dim() ~= n + 2 then
      fail('nn.%s: expected a %d-D or %d-D input, got shape %s', name, n + 1, n + 2, utils.shape(x))
    end
    return F.pad(x, self._pads, mode, self.value or 0)
  end, function(self)
    local s = tuple(self._pads)
    if with_value then s = s .. ', value=' .. pyfloat(self.value) end
    return s
  end)
  function cls:_setup()
    local p = self.padding
    if math.type(p) == 'integer' then
      self._pads = {}
      for i = 1, 2 * n do self._pads[i] = p end
    else
      self._pads = { table.unpack(p) }
    end
  end
end
pad_layer('ReflectionPad1d', 'reflect', 1)
pad_layer('ReflectionPad2d', 'reflect', 2)
pad_layer('ReplicationPad1d', 'replicate', 1)
pad_layer('ReplicationPad2d', 'replicate', 2)
pad_layer('ConstantPad1d', 'constant', 1, true)
pad_layer('ConstantPad2d', 'constant', 2, true)

-- Pooling and upsampling -----------------------------------------------------------------

-- nn.AvgPool1d(kernel_size [, stride | {stride=kernel_size, padding=0, ceil_mode=false, count_include_pad=true}])
local AvgPool1d, avg_parent = torch.class('nn.AvgPool1d', 'nn.Module')
M.AvgPool1d = AvgPool1d
function AvgPool1d:__init(kernel_size, opts)
  avg_parent.__init(self)
  if math.type(opts) == 'integer' then opts = { stride = opts } end
  local o = utils.options('nn.AvgPool1d', opts, { stride = false, padding = 0, ceil_mode = false, count_include_pad = true })
  positive('nn.AvgPool1d', 'kernel_size', kernel_size)
  self.kernel_size, self.stride, self.padding = kernel_size, o.stride or kernel_size, o.padding
  self.ceil_mode, self.count_include_pad = o.ceil_mode, o.count_include_pad
end
function AvgPool1d:forward(x)
  return F.avg_pool1d(x, self.kernel_size, { stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
                                              count_include_pad = self.count_include_pad })
end
function AvgPool1d:extra_repr()
  return ('kernel_size=(%d,), stride=(%d,), padding=(%d,)'):format(self.kernel_size, self.stride, self.padding)
end

layer('AdaptiveAvgPool1d', { { 'output_size', nil, positive } }, function(self, x) return F.adaptive_avg_pool1d(x, self.output_size) end,
  function(self) return 'output_size=' .. self.output_size end)
layer('AdaptiveMaxPool1d', { { 'output_size', nil, positive }, { 'return_indices', false, boolean } },
  function(self, x) return F.adaptive_max_pool1d(x, self.output_size, self.return_indices) end,
  function(self) return 'output_size=' .. self.output_size end)

-- nn.UpsamplingNearest2d / UpsamplingBilinear2d({size= | scale_factor=}): F.interpolate
-- with mode 'nearest' / 'bilinear' (align_corners=true, as PyTorch's)
local function upsampling(name, mode, align)
  local cls, parent = torch.class('nn.' .. name, 'nn.Module')
  M[name] = cls
  function cls:__init(opts)
    parent.__init(self)
    local o = utils.options('nn.' .. name, opts, { size = false, scale_factor = false })
    if (o.size and o.scale_factor) or not (o.size or o.scale_factor) then
      fail('nn.%s: give exactly one of size and scale_factor', name)
    end
    self.size, self.scale_factor, self.mode = o.size, o.scale_factor, mode
  end
  function cls:forward(x)
    utils.check_tensor('nn.' .. name, x)
    if x:dim() ~= 4 then fail('nn.%s: expected a 4-D input [N, C, H, W], got shape %s', name, utils.shape(x)) end
    return F.interpolate(x, { size = self.size, scale_factor = self.scale_factor, mode = mode, align_corners = align })
  end
  function cls:extra_repr()
    local s = self.scale_factor and 'scale_factor=' .. pyfloat(self.scale_factor)
           or 'size=' .. (type(self.size) == 'table' and tuple(self.size) or tostring(self.size))
    return s .. ', mode=' .. mode   -- PyTorch's repr: mode=nearest
  end
end
upsampling('UpsamplingNearest2d', 'nearest', nil)
upsampling('UpsamplingBilinear2d', 'bilinear', true)

-- Normalization --------------------------------------------------------------------------

-- nn.InstanceNorm1d/2d(num_features [, {eps=1e-5, momentum=0.1, affine=false,
-- track_running_stats=false, device=, dtype=}]): input [N, C, *] or unbatched [C, *]
local function instance_norm(name, spatial)
  local cls, parent = torch.class('nn.' .. name, 'nn.Module')
  M[name] = cls
  local who = 'nn.' .. name
  function cls:__init(num_features, opts)
    parent.__init(self)
    positive(who, 'num_features', num_features)
    local o = utils.options(who, opts, { eps = 1e-5, momentum = 0.1, affine = false, track_running_stats = false,
                                         device = false, dtype = false })
    self.num_features, self.eps, self.momentum = num_features, o.eps, o.momentum
    self.affine, self.track_running_stats = o.affine, o.track_running_stats
    local topts = { device = o.device or nil, dtype = o.dtype or nil }
    if o.affine then
      self.weight = Parameter(torch.ones(num_features, topts))
      self.bias = Parameter(torch.zeros(num_features, topts))
    end
    if o.track_running_stats then
      self:register_buffer('running_mean', torch.zeros(num_features, topts))
      self:register_buffer('running_var', torch.ones(num_features, topts))
      self:register_buffer('num_batches_tracked', torch.tensor(0, { dtype = 'int64', device = topts.device }))
    end
  end
  function cls:reset_parameters()
    torch.no_grad(function()
      if self.running_mean ~= nil then self.running_mean:zero_(); self.running_var:fill_(1); self.num_batches_tracked:zero_() end
      if self.weight ~= nil then self.weight:fill_(1); self.bias:zero_() end
    end)
  end
  function cls:forward(x)
    utils.check_tensor(who, x)
    if x:dim() ~= spatial + 1 and x:dim() ~= spatial + 2 then
      fail('%s: expected %dD or %dD input (got %dD input)', who, spatial + 1, spatial + 2, x:dim())
    end
    local unbatched = x:dim() == spatial + 1
    if unbatched then x = x:unsqueeze(1) end
    if x:size(2) ~= self.num_features and self.affine then
      fail('%s: expected input\'s size at dim=2 to match num_features (%d), but got: %d.', who, self.num_features, x:size(2))
    end
    local use_input_stats = self.training or not self.track_running_stats
    if self.training and self.track_running_stats then
      torch.no_grad(function() self.num_batches_tracked:add_(1) end)
    end
    local y = F.instance_norm(x, { running_mean = self.running_mean or false, running_var = self.running_var or false,
                                   weight = self.weight or false, bias = self.bias or false,
                                   use_input_stats = use_input_stats, momentum = self.momentum, eps = self.eps })
    return unbatched and y:squeeze(1) or y
  end
  function cls:extra_repr()
    return ('%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s'):format(self.num_features, tostring(self.eps),
      tostring(self.momentum), pybool(self.affine), pybool(self.track_running_stats))
  end
end
instance_norm('InstanceNorm1d', 1)
instance_norm('InstanceNorm2d', 2)

layer('LocalResponseNorm', { { 'size', nil, positive }, { 'alpha', 1e-4, number }, { 'beta', 0.75, number }, { 'k', 1.0, number } },
  function(self, x) return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k) end,
  function(self) return ('%d, alpha=%s, beta=%s, k=%s'):format(self.size, tostring(self.alpha), tostring(self.beta), pyfloat(self.k)) end)

-- Distances ------------------------------------------------------------------------------

local CosineSimilarity = layer('CosineSimilarity', { { 'dim', 2, integer }, { 'eps', 1e-8, number } }, nil,
  function(self) return ('dim=%d, eps=%s'):format(self.dim, tostring(self.eps)) end)
function CosineSimilarity:forward(x1, x2) return F.cosine_similarity(x1, x2, self.dim, self.eps) end

local PairwiseDistance = layer('PairwiseDistance', { { 'p', 2.0, number }, { 'eps', 1e-6, number }, { 'keepdim', false, boolean } }, nil)
function PairwiseDistance:forward(x1, x2) return F.pairwise_distance(x1, x2, self.p, self.eps, self.keepdim) end

-- nn.Bilinear(in1_features, in2_features, out_features [, {bias=true, device=, dtype=}]):
-- y = x1^T A x2 + b with weight A [out, in1, in2], initialized U(-1/sqrt(in1), 1/sqrt(in1))
local Bilinear, bil_parent = torch.class('nn.Bilinear', 'nn.Module')
M.Bilinear = Bilinear
function Bilinear:__init(in1, in2, out, opts)
  bil_parent.__init(self)
  for what, v in pairs { in1_features = in1, in2_features = in2, out_features = out } do positive('nn.Bilinear', what, v) end
  local o = utils.options('nn.Bilinear', opts, { bias = true, device = false, dtype = false })
  local topts = { device = o.device or nil, dtype = o.dtype or nil }
  self.in1_features, self.in2_features, self.out_features = in1, in2, out
  self.weight = Parameter(torch.empty(out, in1, in2, topts))
  if o.bias then self.bias = Parameter(torch.empty(out, topts)) end
  self:reset_parameters()
end
function Bilinear:reset_parameters()
  local bound = 1 / math.sqrt(self.in1_features)
  torch.no_grad(function()
    self.weight:uniform_(-bound, bound)
    if self.bias ~= nil then self.bias:uniform_(-bound, bound) end
  end)
end
function Bilinear:forward(x1, x2) return F.bilinear(x1, x2, self.weight, self.bias) end
function Bilinear:extra_repr()
  return ('in1_features=%d, in2_features=%d, out_features=%d, bias=%s'):format(self.in1_features, self.in2_features,
    self.out_features, pybool(self.bias ~= nil))
end

-- nn.EmbeddingBag(num_embeddings, embedding_dim [, {mode='mean', padding_idx=, max_norm=,
-- norm_type=2, include_last_offset=false, _weight=, device=, dtype=}]): F.embedding_bag as
-- a layer, weight drawn from N(0, 1) (the padding_idx row zeroed) as PyTorch's
local EmbeddingBag, bag_parent = torch.class('nn.EmbeddingBag', 'nn.Module')
M.EmbeddingBag = EmbeddingBag
function EmbeddingBag:__init(num, dim, opts)
  bag_parent.__init(self)
  positive('nn.EmbeddingBag', 'num_embeddings', num)
  positive('nn.EmbeddingBag', 'embedding_dim', dim)
  local o = utils.options('nn.EmbeddingBag', opts, { mode = 'mean', padding_idx = false, max_norm = false, norm_type = 2,
    include_last_offset = false, scale_grad_by_freq = false, sparse = false, _weight = false, device = false, dtype = false })
  if o.mode ~= 'sum' and o.mode ~= 'mean' and o.mode ~= 'max' then
    fail("nn.EmbeddingBag: mode must be 'sum', 'mean' or 'max', got %s", show(o.mode))
  end
  self.num_embeddings, self.embedding_dim, self.mode = num, dim, o.mode
  self.padding_idx = require('nn.functional_layers').padding_index('nn.EmbeddingBag', o.padding_idx or nil, num)
  self.max_norm, self.norm_type, self.include_last_offset = o.max_norm or nil, o.norm_type, o.include_last_offset
  if o._weight then
    if o._weight:dim() ~= 2 or o._weight:size(1) ~= num or o._weight:size(2) ~= dim then
      fail('nn.EmbeddingBag: _weight must have shape [%d, %d], got %s', num, dim, utils.shape(o._weight))
    end
    self.weight = Parameter(o._weight)
  else
    self.weight = Parameter(torch.empty(num, dim, { device = o.device or nil, dtype = o.dtype or nil }))
    self:reset_parameters()
  end
end
function EmbeddingBag:reset_parameters()
  torch.no_grad(function()
    self.weight:normal_()
    if self.padding_idx then self.weight:select(1, self.padding_idx):zero_() end
  end)
end
-- m(input [, offsets [, per_sample_weights]])
function EmbeddingBag:forward(input, offsets, per_sample_weights)
  return F.embedding_bag(input, self.weight, offsets, { mode = self.mode, padding_idx = self.padding_idx or false,
    max_norm = self.max_norm or false, norm_type = self.norm_type, include_last_offset = self.include_last_offset,
    per_sample_weights = per_sample_weights or false })
end
function EmbeddingBag:extra_repr()
  local s = ('%d, %d'):format(self.num_embeddings, self.embedding_dim)
  if self.max_norm then s = s .. ', max_norm=' .. tostring(self.max_norm) end
  if self.norm_type ~= 2 then s = s .. ', norm_type=' .. tostring(self.norm_type) end
  s = s .. ", mode='" .. self.mode .. "'"
  if self.include_last_offset then s = s .. ', include_last_offset=true' end
  if self.padding_idx then s = s .. ', padding_idx=' .. self.padding_idx end
  return s
end

-- Dropouts -------------------------------------------------------------------------------

local function dropout_layer(name, fn)
  local cls = layer(name, { { 'p', 0.5, probability }, { 'inplace', false, boolean } }, nil,
    function(self) return ('p=%s, inplace=%s'):format(tostring(self.p), pybool(self.inplace)) end)
  function cls:forward(x) return fn(x, self.p, self.training) end
end
dropout_layer('AlphaDropout', F.alpha_dropout)
dropout_layer('Dropout1d', F.dropout1d)
dropout_layer('Dropout3d', F.dropout3d)

return M
