-- More of nn.functional, the functions public PyTorch programs use beyond the basic layers:
-- activations (selu, celu, glu, hardswish, hardsigmoid, softsign, tanhshrink, threshold,
-- softmin, logsigmoid, prelu, gumbel_softmax), pixel_shuffle / pixel_unshuffle /
-- channel_shuffle, the 1-d pools, normalize, cosine_similarity, pairwise_distance,
-- instance_norm, local_response_norm, the feature and alpha dropouts, unfold / fold and
-- one_hot.  All are compositions of the engine's differentiable ops (so they run on every
-- device and autograd needs nothing of their own); unfold and fold are one index_select /
-- index_add over the flattened padded plane.  nn.functional installs them (install(F)).
-- Dims are 1-based, as everywhere in dplua: PyTorch's default dim=1 (the channels) is 2 here.
local torch = require 'torch'
local C = require 'torch._C'
local utils = require 'nn.utils'
local FL = require 'nn.functional_layers'

local M = {}

local check = utils.check_tensor
local function fail(fmt, ...) utils.error(fmt:format(...)) end

-- a bad value as an error shows it: numbers and strings as they are, tensors by shape
local function show(v)
  if torch.is_tensor(v) then return 'a tensor of shape ' .. utils.shape(v) end
  if type(v) == 'table' then return 'a table' end
  return tostring(v)
end

local function check_number(who, what, v)
  if type(v) ~= 'number' then fail('%s: %s must be a number, got %s', who, what, show(v)) end
  return v
end

local function check_float(who, x)
  if x.dtype ~= 'float32' and x.dtype ~= 'float64' then
    fail('%s: expected a floating point input, got %s', who, x.dtype)
  end
end

-- a 1-based dim of x (negative counts from the end) as a positive one
local function dim_of(who, x, dim)
  if math.type(dim) ~= 'integer' or dim == 0 then
    fail('%s: dim must be a non-zero integer (1-based), got %s', who, show(dim))
  end
  local n = math.max(x:dim(), 1)
  local d = dim < 0 and n + 1 + dim or dim
  if d < 1 or d > n then
    fail('%s: dim %d is out of range for a %d-D input (dplua counts dims from 1)', who, dim, x:dim())
  end
  return d
end

-- options given positionally or as one table: args(who, {a, b, ...}, {{'name', default}, ...})
local function args(who, given, params)
  local out = {}
  if type(given[1]) == 'table' and getmetatable(given[1]) == nil then
    local defaults = {}
    for _, p in ipairs(params) do defaults[p[1]] = p[2] end
    local o = utils.options(who, given[1], defaults)
    for i, p in ipairs(params) do out[i] = o[p[1]] end
  else
    for i, p in ipairs(params) do
      local v = given[i]
      if v == nil then v = p[2] end
      out[i] = v
    end
  end
  return table.unpack(out, 1, #params)
end
M.args = args

-- Activations ----------------------------------------------------------------------------

local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

-- The activations that take PyTorch's inplace (the last option, positional or by name):
-- inplace = true writes the result into x and returns x (utils.activation_inplace).
local activation_args, activation_inplace = utils.activation_args, utils.activation_inplace

-- selu(x [, inplace=false])
function M.selu(x, ...)
  check('selu', x)
  local o = activation_args('selu', { 'inplace' }, { inplace = false }, ...)
  return activation_inplace('selu', x, o.inplace, function(v)
    return torch.where(v:gt(0), v, v:clamp(nil, 0):expm1() * SELU_ALPHA) * SELU_SCALE
  end)
end

-- celu(x [, alpha=1 [, inplace=false]]): max(0, x) + min(0, alpha (e^(x / alpha) - 1))
function M.celu(x, ...)
  check('celu', x)
  local o = activation_args('celu', { 'alpha', 'inplace' }, { alpha = 1.0, inplace = false }, ...)
  local alpha = check_number('celu', 'alpha', o.alpha)
  if alpha == 0 then fail('celu: alpha must not be 0 (it divides x)') end
  return activation_inplace('celu', x, o.inplace, function(v)
    return torch.where(v:gt(0), v, (v:clamp(nil, 0) / alpha):expm1() * alpha)
  end)
end

-- glu(x [, dim=-1]): a * sigmoid(b) of the two halves of x along dim
function M.glu(x, ...)
  check('glu', x)
  local dim = args('glu', { ... }, { { 'dim', -1 } })
  if x:dim() == 0 then fail('glu: glu does not support scalars because halving size must be even') end
  local d = dim_of('glu', x, dim)
  if x:size(d) % 2 ~= 0 then
    fail('glu: Halving dimension must be even, but dimension %d is size %d', d, x:size(d))
  end
  local a, b = table.unpack(x:chunk(2, d))
  return a * b:sigmoid()
end

-- hardswish(x [, inplace=false]): x (x + 3) / 6 inside [-3, 3], 0 below, x above; PyTorch's
-- gradient at the ends
function M.hardswish(x, ...)
  check('hardswish', x)
  local o = activation_args('hardswish', { 'inplace' }, { inplace = false }, ...)
  return activation_inplace('hardswish', x, o.inplace, function(v)
    return torch.where(v:lt(-3), v * 0, torch.where(v:le(3), v * (v + 3) / 6, v))
  end)
end

-- hardsigmoid: x / 6 + 1/2 strictly inside (-3, 3), 0 below, 1 above.  PyTorch's gradient
-- there is the float32 1/6 even for float64, so it is here too.
local ONE_SIXTH_F32 = string.unpack('f', string.pack('f', 1 / 6))

function M.hardsigmoid(x, ...)
  check('hardsigmoid', x)
  local o = activation_args('hardsigmoid', { 'inplace' }, { inplace = false }, ...)
  return activation_inplace('hardsigmoid', x, o.inplace, function(v)
    local inside = (v / 6 + 0.5):detach() + (v - v:detach()) * ONE_SIXTH_F32
    return torch.where(v:le(-3), v * 0, torch.where(v:ge(3), v * 0 + 1, inside))
  end)
end

function M.softsign(x) return check('softsign', x) / (x:abs() + 1) end
function M.tanhshrink(x) return check('tanhshrink', x) - x:tanh() end

-- threshold(x, threshold, value [, inplace=false]): x where x > threshold, else value
function M.threshold(x, ...)
  check('threshold', x)
  local o = activation_args('threshold', { 'threshold', 'value', 'inplace' },
    { threshold = utils.required, value = utils.required, inplace = false }, ...)
  local threshold, value = o.threshold, o.value
  check_number('threshold', 'threshold', threshold)
  check_number('threshold', 'value', value)
  return activation_inplace('threshold', x, o.inplace, function(v) return torch.where(v:gt(threshold), v, value) end)
end

-- softmin(x, dim): softmax(-x, dim)
function M.softmin(x, dim)
  check('softmin', x)
  if math.type(dim) ~= 'integer' then
    fail('softmin: dim must be an integer (1-based), got %s; dplua does not guess a dimension', show(dim))
  end
  return (-x):softmax(dim)
end

-- logsigmoid: log(1 / (1 + e^-x)) = -softplus(-x), finite for large |x|
function M.logsigmoid(x)
  check('logsigmoid', x)
  return -FL.softplus(-x)
end

-- prelu(x, weight): x where x > 0, else weight * x; weight has 1 element or one per channel
-- (dim 2 of x)
function M.prelu(x, weight)
  check('prelu', x); check('prelu', weight, 'weight')
  local n = weight:numel()
  if weight:dim() > 1 then fail('prelu: weight must be 1-D (one element, or one per channel), got shape %s', utils.shape(weight)) end
  local w = weight
  if n ~= 1 then
    local c = x:dim() >= 2 and x:size(2) or (x:dim() == 1 and x:size(1) or 1)
    if n ~= c then
      fail('prelu: Mismatch of parameter numbers and input channel size. Found parameter numbers = %d and channel size = %d.', n, c)
    end
    if x:dim() >= 2 then
      local shape = { 1, n }
      for _ = 3, x:dim() do shape[#shape + 1] = 1 end
      w = weight:reshape(shape)
    end
  elseif x:dim() == 0 then
    w = weight:reshape({})
  end
  return torch.where(x:gt(0), x, x * w)
end

-- gumbel_softmax(logits [, {tau=1, hard=false, dim=-1}]): softmax((logits + g) / tau) with
-- g ~ Gumbel(0, 1); hard gives the one-hot of the argmax whose gradient is the soft sample's
function M.gumbel_softmax(logits, opts)
  local who = 'gumbel_softmax'
  check(who, logits, 'logits')
  local o = utils.options(who, opts, { tau = 1, hard = false, eps = 1e-10, dim = -1 })
  check_number(who, 'tau', o.tau)
  local d = dim_of(who, logits, o.dim)
  local gumbels = torch.no_grad(function()
    return -torch.empty(logits:size(), { dtype = logits.dtype, device = logits.device }):exponential_():log()
  end)
  local y = ((logits + gumbels) / o.tau):softmax(d)
  if not o.hard then return y end
  local index = y:detach():argmax(d, true)
  local hard = torch.zeros(logits:size(), { dtype = logits.dtype, device = logits.device }):scatter(d, index, 1.0)
  return hard - y:detach() + y
end

-- Pixel and channel shuffles -------------------------------------------------------------

local function check_factor(who, what, r)
  if math.type(r) ~= 'integer' or r < 1 then fail('%s: %s must be a positive integer, got %s', who, what, show(r)) end
  return r
end

local function lead_of(x, n)   -- the sizes of all but the last n dims
  local lead = {}
  for i = 1, x:dim() - n do lead[i] = x:size(i) end
  return lead
end

local function concat(a, b)
  local out = { table.unpack(a) }
  for _, v in ipairs(b) do out[#out + 1] = v end
  return out
end

-- pixel_shuffle(x, r): [*, C r^2, H, W] -> [*, C, H r, W r]
function M.pixel_shuffle(x, r)
  local who = 'pixel_shuffle'
  check(who, x); check_factor(who, 'upscale_factor', r)
  if x:dim() < 3 then fail('%s: expected an input of at least 3 dims [*, C, H, W], got shape %s', who, utils.shape(x)) end
  local nd = x:dim()
  local c, h, w = x:size(nd - 2), x:size(nd - 1), x:size(nd)
  if c % (r * r) ~= 0 then
    fail('%s: the channels (dim %d, size %d) must be divisible by the square of upscale_factor (%d)', who, nd - 2, c, r * r)
  end
  local lead = lead_of(x, 3)
  local k = #lead
  local y = x:reshape(concat(lead, { c // (r * r), r, r, h, w }))
  local perm = {}
  for i = 1, k do perm[i] = i end
  for _, p in ipairs { 1, 4, 2, 5, 3 } do perm[#perm + 1] = k + p end
  return y:permute(perm):reshape(concat(lead, { c // (r * r), h * r, w * r }))
end

-- pixel_unshuffle(x, r): [*, C, H r, W r] -> [*, C r^2, H, W]
function M.pixel_unshuffle(x, r)
  local who = 'pixel_unshuffle'
  check(who, x); check_factor(who, 'downscale_factor', r)
  if x:dim() < 3 then fail('%s: expected an input of at least 3 dims [*, C, H, W], got shape %s', who, utils.shape(x)) end
  local nd = x:dim()
  local c, h, w = x:size(nd - 2), x:size(nd - 1), x:size(nd)
  if h % r ~= 0 or w % r ~= 0 then
    fail('%s: the height (%d) and width (%d) must be divisible by downscale_factor (%d)', who, h, w, r)
  end
  local lead = lead_of(x, 3)
  local k = #lead
  local y = x:reshape(concat(lead, { c, h // r, r, w // r, r }))
  local perm = {}
  for i = 1, k do perm[i] = i end
  for _, p in ipairs { 1, 3, 5, 2, 4 } do perm[#perm + 1] = k + p end
  return y:permute(perm):reshape(concat(lead, { c * r * r, h // r, w // r }))
end

-- channel_shuffle(x, groups): [N, C, *] with the channels regrouped (C/g, g) -> (g, C/g)
function M.channel_shuffle(x, groups)
  local who = 'channel_shuffle'
  check(who, x); check_factor(who, 'groups', groups)
  if x:dim() < 3 then fail('%s: expected an input of at least 3 dims [N, C, *], got shape %s', who, utils.shape(x)) end
  local c = x:size(2)
  if c % groups ~= 0 then fail('%s: the number of channels (%d) must be divisible by groups (%d)', who, c, groups) end
  local shape = x:size():totable()
  local split = { shape[1], groups, c // groups }
  for i = 3, #shape do split[#split + 1] = shape[i] end
  return x:reshape(split):transpose(2, 3):reshape(shape)
end

-- 1-d pools ------------------------------------------------------------------------------

local function one(who, what, v, allow_zero)
  if type(v) == 'table' and #v == 1 then v = v[1] end
  if math.type(v) ~= 'integer' or v < (allow_zero and 0 or 1) then
    fail('%s: %s must be a %s integer, got %s', who, what, allow_zero and 'non-negative' or 'positive', show(v))
  end
  return v
end

local function check_1d(who, x)
  check(who, x)
  if x:dim() ~= 2 and x:dim() ~= 3 then fail('%s: expected a 2-D or 3-D input ([C, L] or [N, C, L]), got shape %s', who, utils.shape(x)) end
end

-- avg_pool1d(x, kernel_size [, stride=kernel_size [, padding=0 [, ceil_mode=false [,
-- count_include_pad=true]]]]) of [C, L] or [N, C, L], PyTorch's positional order, or any of
-- them in an options table after the positional ones (kernel_size too)
function M.avg_pool1d(x, ...)
  local who = 'avg_pool1d'
  check_1d(who, x)
  local o = M._pool_args(who, { 'kernel_size', 'stride', 'padding', 'ceil_mode', 'count_include_pad' },
                         { stride = false, padding = 0, ceil_mode = false, count_include_pad = true }, ...)
  local k = one(who, 'kernel_size', o.kernel_size)
  local stride = M._pool_size(o.stride, 1, false)
  local s = stride and one(who, 'stride', stride) or k
  local p = one(who, 'padding', o.padding, true)
  if p > k // 2 then fail('%s: pad should be at most half of kernel size, but got pad=%d and kernel_size=%d', who, p, k) end
  local h = x:dim()
  return C.pool2d(x:unsqueeze(h), 'avg', false, 1, k, 1, s, 0, p, 1, 1, o.ceil_mode, o.count_include_pad, 0, false):squeeze(h)
end

function M.adaptive_avg_pool1d(x, output_size)
  local who = 'adaptive_avg_pool1d'
  check_1d(who, x)
  local n = one(who, 'output_size', output_size)
  local h = x:dim()
  return C.pool2d(x:unsqueeze(h), 'avg', true, 1, n, 1, 1, 0, 0, 1, 1, false, false, 0, false):squeeze(h)
end

-- adaptive_max_pool1d(x, output_size [, return_indices=false]): indices count along L from 1
function M.adaptive_max_pool1d(x, output_size, return_indices)
  local who = 'adaptive_max_pool1d'
  check_1d(who, x)
  local n = one(who, 'output_size', output_size)
  local h = x:dim()
  local y, idx = C.pool2d(x:unsqueeze(h), 'max', true, 1, n, 1, 1, 0, 0, 1, 1, false, false, 0, return_indices and true or false)
  if idx then return y:squeeze(h), idx:squeeze(h) end
  return y:squeeze(h)
end

-- Norms and distances --------------------------------------------------------------------

-- the p-norm of x along dim whose gradient is 0 (not NaN) where the norm is 0, as PyTorch's
local function vector_norm(x, p, dim, keepdim)
  if p == math.huge then return (x:abs():max(dim, keepdim)) end
  local a = x:abs()
  local s = p == 2 and (x * x):sum(dim, keepdim) or (p == 1 and a:sum(dim, keepdim) or a:pow(p):sum(dim, keepdim))
  if p == 1 then return s end
  local pos = s:gt(0)
  local safe = torch.where(pos, s, 1)
  return torch.where(pos, p == 2 and safe:sqrt() or safe:pow(1 / p), 0)
end
M.vector_norm = vector_norm

-- normalize(x [, p=2 [, dim=2 [, eps=1e-12]]]) or normalize(x, {p=, dim=, eps=}):
-- x / max(||x||_p, eps) along dim
function M.normalize(x, ...)
  local who = 'normalize'
  check(who, x)
  local p, dim, eps = args(who, { ... }, { { 'p', 2.0 }, { 'dim', 2 }, { 'eps', 1e-12 } })
  check_number(who, 'p', p); check_number(who, 'eps', eps)
  if p <= 0 then fail('%s: p must be positive, got %s', who, show(p)) end
  local d = dim_of(who, x, dim)
  return x / vector_norm(x, p, d, true):clamp(eps)
end

-- cosine_similarity(x1, x2 [, dim=2 [, eps=1e-8]]): x1 . x2 / max(||x1|| ||x2||, eps), the
-- inputs broadcast against each other
function M.cosine_similarity(x1, x2, ...)
  local who = 'cosine_similarity'
  check(who, x1, 'x1'); check(who, x2, 'x2')
  local dim, eps = args(who, { ... }, { { 'dim', 2 }, { 'eps', 1e-8 } })
  check_number(who, 'eps', eps)
  local nd = math.max(x1:dim(), x2:dim())
  if math.type(dim) ~= 'integer' or dim == 0 or math.abs(dim) > math.max(nd, 1) then
    fail('%s: dim %s is out of range for %d-D inputs (dplua counts dims from 1)', who, show(dim), nd)
  end
  local ok = pcall(function() return x1 + x2 end)
  if not ok then fail('%s: the shapes %s and %s do not broadcast', who, utils.shape(x1), utils.shape(x2)) end
  local w12 = (x1 * x2):sum(dim)
  local w1, w2 = (x1 * x1):sum(dim), (x2 * x2):sum(dim)
  return w12 / (w1 * w2):clamp(eps * eps):sqrt()
end

-- pairwise_distance(x1, x2 [, p=2 [, eps=1e-6 [, keepdim=false]]]): ||x1 - x2 + eps||_p
-- along the last dim
function M.pairwise_distance(x1, x2, ...)
  local who = 'pairwise_distance'
  check(who, x1, 'x1'); check(who, x2, 'x2')
  local p, eps, keepdim = args(who, { ... }, { { 'p', 2.0 }, { 'eps', 1e-6 }, { 'keepdim', false } })
  check_number(who, 'p', p); check_number(who, 'eps', eps)
  local ok, diff = pcall(function() return x1 - x2 + eps end)
  if not ok then fail('%s: the shapes %s and %s do not broadcast', who, utils.shape(x1), utils.shape(x2)) end
  if diff:dim() == 0 then diff = diff:reshape(1) end
  return vector_norm(diff, p, diff:dim(), keepdim)
end

-- bilinear(x1, x2, weight [, bias]): x1 [*, in1], x2 [*, in2], weight [out, in1, in2] ->
-- [*, out], y_o = x1^T weight_o x2 + bias_o
function M.bilinear(x1, x2, weight, bias)
  local who = 'bilinear'
  check(who, x1, 'input1'); check(who, x2, 'input2'); check(who, weight, 'weight')
  if weight:dim() ~= 3 then fail('%s: weight must be 3-D [out, in1, in2], got shape %s', who, utils.shape(weight)) end
  local out, in1, in2 = weight:size(1), weight:size(2), weight:size(3)
  if x1:dim() < 1 or x1:size(x1:dim()) ~= in1 or x2:dim() ~= x1:dim() or x2:size(x2:dim()) ~= in2 then
    fail('%s: expected input1 [*, %d] and input2 [*, %d] with the same leading dims, got %s and %s', who, in1, in2,
      utils.shape(x1), utils.shape(x2))
  end
  for d = 1, x1:dim() - 1 do
    if x1:size(d) ~= x2:size(d) then
      fail('%s: input1 %s and input2 %s differ in dim %d', who, utils.shape(x1), utils.shape(x2), d)
    end
  end
  if bias ~= nil then
    check(who, bias, 'bias')
    if bias:dim() ~= 1 or bias:size(1) ~= out then fail('%s: bias must have shape [%d], got %s', who, out, utils.shape(bias)) end
  end
  local lead = lead_of(x1, 1)
  local a = x1:reshape(-1, in1):matmul(weight:permute(2, 1, 3):reshape(in1, out * in2))
  local y = (a:reshape(-1, out, in2) * x2:reshape(-1, 1, in2)):sum(3)
  if bias ~= nil then y = y + bias end
  lead[#lead + 1] = out
  return y:reshape(lead)
end

-- instance_norm(x [, running_mean [, running_var [, weight [, bias [, use_input_stats [,
-- momentum [, eps]]]]]]] [, opts]), PyTorch's positional order, or any of them in a last
-- options table {running_mean=, running_var=, weight=, bias=, use_input_stats=true,
-- momentum=0.1, eps=1e-5}: each (sample, channel) plane of x [N, C, *] normalized by its
-- own mean and biased variance; the running statistics (when given) move toward the batch
-- averages of those, the variance unbiased, as PyTorch's
local INSTANCE_NORM_NAMES = { 'running_mean', 'running_var', 'weight', 'bias', 'use_input_stats', 'momentum', 'eps' }

function M.instance_norm(x, ...)
  local who = 'instance_norm'
  check(who, x)
  local o = utils.options(who, utils.positional(who, INSTANCE_NORM_NAMES, ...), { running_mean = false, running_var = false, weight = false, bias = false,
                                       use_input_stats = true, momentum = 0.1, eps = 1e-5 })
  if not torch.FLOAT_DTYPES[x.dtype] then fail('%s: expected a floating point input, got %s', who, x.dtype) end
  if x:dim() < 3 then
    fail('%s: expected an input [N, C, *] with at least 3 dims, got shape %s', who, utils.shape(x))
  end
  local n, c = x:size(1), x:size(2)
  for _, what in ipairs { 'running_mean', 'running_var', 'weight', 'bias' } do
    local t = o[what]
    if t then
      check(who, t, what)
      if t:dim() ~= 1 or t:size(1) ~= c then fail('%s: %s should contain %d elements not %d', who, what, c, t:numel()) end
    end
  end
  check_number(who, 'momentum', o.momentum); check_number(who, 'eps', o.eps)
  local shape = { 1, c }
  for _ = 3, x:dim() do shape[#shape + 1] = 1 end
  -- float16 and bfloat16 compute in float32 and round once at the end
  local dtype = x.dtype
  local half = dtype == 'float16' or dtype == 'bfloat16'
  local function work(t) return (half and t.dtype == dtype) and t:float() or t end
  local input = x
  x = work(x)
  local y
  if o.use_input_stats then
    local planes = x:reshape(n, c, -1)
    local m = planes:size(3)
    if m <= 1 then
      fail('%s: expected more than 1 spatial element when training, got input size %s', who, utils.shape(input))
    end
    local mean = planes:mean(3, true)
    local centered = planes - mean
    local var = (centered * centered):mean(3, true)
    y = (centered * (var + o.eps):rsqrt()):reshape(x:size())
    if o.running_mean or o.running_var then
      torch.no_grad(function()
        if o.running_mean then
          local step = mean:detach():reshape(n, c):mean(1):mul(o.momentum)
          o.running_mean:mul_(1 - o.momentum):add_(step:to(o.running_mean.dtype))
        end
        if o.running_var then
          local step = var:detach():reshape(n, c):mean(1):mul(o.momentum * m / (m - 1))
          o.running_var:mul_(1 - o.momentum):add_(step:to(o.running_var.dtype))
        end
      end)
    end
  else
    if not (o.running_mean and o.running_var) then
      fail('%s: Expected running_mean and running_var to be defined when use_input_stats is false', who)
    end
    y = (x - work(o.running_mean):reshape(shape)) * (work(o.running_var):reshape(shape) + o.eps):rsqrt()
  end
  if o.weight then y = y * work(o.weight):reshape(shape) end
  if o.bias then y = y + work(o.bias):reshape(shape) end
  if half and y.dtype == 'float32' then y = y:to(dtype) end
  return y
end

-- local_response_norm(x, size [, alpha=1e-4 [, beta=0.75 [, k=1]]]): x divided by
-- (k + alpha / size * the sum of x^2 over `size` neighbouring channels)^beta
function M.local_response_norm(x, size, ...)
  local who = 'local_response_norm'
  check(who, x)
  local alpha, beta, k = args(who, { ... }, { { 'alpha', 1e-4 }, { 'beta', 0.75 }, { 'k', 1.0 } })
  if math.type(size) ~= 'integer' or size < 1 then fail('%s: size must be a positive integer, got %s', who, show(size)) end
  if x:dim() < 3 then
    fail('%s: Expected 3D or higher dimensionality input (got %d dimensions)', who, x:dim())
  end
  if x:numel() == 0 then return x end
  local c = x:size(2)
  local sq = x * x
  local lo, hi = size // 2, (size - 1) // 2
  local shape = sq:size():totable()
  local function zeros(m)
    local s = { table.unpack(shape) }
    s[2] = m
    return torch.zeros(s, { dtype = x.dtype, device = x.device })
  end
  local parts = {}
  if lo > 0 then parts[#parts + 1] = zeros(lo) end
  parts[#parts + 1] = sq
  if hi > 0 then parts[#parts + 1] = zeros(hi) end
  local padded = #parts > 1 and torch.cat(parts, 2) or sq
  local sum = padded:narrow(2, 1, c)
  for i = 2, size do sum = sum + padded:narrow(2, i, c) end
  local div = (sum * (alpha / size) + k):pow(beta)
  return x / div
end

-- Dropouts -------------------------------------------------------------------------------

local function check_p(who, p)
  if p == nil then p = 0.5 end
  if type(p) ~= 'number' or p < 0 or p > 1 then
    fail('%s: dropout probability has to be between 0 and 1, but got %s', who, show(p))
  end
  return p
end

local function keep_mask(shape, p, x)
  return C.dropout(torch.ones(shape, { dtype = x.dtype, device = x.device }), p, true)
end

-- dropout over whole channels: x [N, C, *rest] (or unbatched [C, *rest]) with rest of
-- `spatial` dims
local function feature_dropout(who, x, p, training, spatial)
  check(who, x)
  p, training = utils.dropout_args(who, p, training)
  p = check_p(who, p)
  if x:dim() ~= spatial + 1 and x:dim() ~= spatial + 2 then
    fail('%s: expected a %d-D or %d-D input, got shape %s', who, spatial + 1, spatial + 2, utils.shape(x))
  end
  if training == nil then training = true end
  if not training or p == 0 then return x end
  local shape = x:size():totable()
  for i = x:dim() - spatial + 1, x:dim() do shape[i] = 1 end
  return x * keep_mask(shape, p, x)
end

-- dropout1d(x [, p=0.5 [, training=true]]): zeroes whole channels of [N, C, L] or [C, L]
function M.dropout1d(x, p, training) return feature_dropout('dropout1d', x, p, training, 1) end
-- dropout3d(x [, p=0.5 [, training=true]]): zeroes whole channels of [N, C, D, H, W] or [C, D, H, W]
function M.dropout3d(x, p, training) return feature_dropout('dropout3d', x, p, training, 3) end

-- alpha_dropout(x [, p=0.5 [, training=false]]): the dropout of SELU networks, which keeps
-- the mean and variance: dropped elements become -alpha' and all are then affinely rescaled
function M.alpha_dropout(x, p, training)
  local who = 'alpha_dropout'
  check(who, x)
  p, training = utils.dropout_args(who, p, training)
  p = check_p(who, p)
  if not training or p == 0 then return x end
  if p == 1 then return x * 0 end
  local alpha = 1.7580993408473766
  local a = 1 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
  local keep = keep_mask(x:size(), p, x) * (1 - p)   -- 1 kept, 0 dropped
  return x * keep * a + (keep - 1) * (alpha * a) + alpha * a * p
end

-- Unfold and fold ------------------------------------------------------------------------

local function quad(who, what, v, allow_zero)
  local F = require 'nn.functional'
  return F._pair(who, what, v, 2, allow_zero)
end

-- the 1-based positions in the flattened padded plane [Hp * Wp] that each block element
-- reads, ordered (kernel row, kernel col, block row, block col), and the block counts
local function block_index(who, hp, wp, kh, kw, dh, dw, sh, sw, device)
  local bh = (hp - dh * (kh - 1) - 1) // sh + 1
  local bw = (wp - dw * (kw - 1) - 1) // sw + 1
  if bh < 1 or bw < 1 then
    fail('%s: the padded input plane (%d, %d) is smaller than the dilated kernel (%d, %d)', who, hp, wp,
      dh * (kh - 1) + 1, dw * (kw - 1) + 1)
  end
  local idx = {}
  for i = 0, kh - 1 do
    for j = 0, kw - 1 do
      for r = 0, bh - 1 do
        local row = (r * sh + i * dh) * wp
        for q = 0, bw - 1 do idx[#idx + 1] = row + q * sw + j * dw + 1 end
      end
    end
  end
  return torch.tensor(idx, { dtype = 'int64', device = device }), bh, bw
end

local UNFOLD_DEFAULTS = { dilation = 1, padding = 0, stride = 1 }

-- unfold(x, kernel_size [, {dilation=1, padding=0, stride=1}]): the sliding blocks of
-- x [N, C, H, W] (or [C, H, W]) as columns: [N, C kh kw, L]
function M.unfold(x, kernel_size, opts)
  local who = 'unfold'
  check(who, x)
  if x:dim() ~= 3 and x:dim() ~= 4 then
    fail('%s: Input Error: Only 3D or 4D input Tensors are supported (got %dD)', who, x:dim())
  end
  local o = utils.options(who, opts, UNFOLD_DEFAULTS)
  local kh, kw = quad(who, 'kernel_size', kernel_size)
  local dh, dw = quad(who, 'dilation', o.dilation)
  local ph, pw = quad(who, 'padding', o.padding, true)
  local sh, sw = quad(who, 'stride', o.stride)
  local batched = x:dim() == 4
  if not batched then x = x:unsqueeze(1) end
  local n, c, h, w = x:size(1), x:size(2), x:size(3), x:size(4)
  local padded = (ph > 0 or pw > 0) and require('nn.functional').pad(x, { pw, pw, ph, ph }) or x
  local idx, bh, bw = block_index(who, h + 2 * ph, w + 2 * pw, kh, kw, dh, dw, sh, sw, x.device)
  local cols = padded:reshape(n, c, -1):index_select(3, idx):reshape(n, c * kh * kw, bh * bw)
  return batched and cols or cols:squeeze(1)
end

-- fold(x, output_size, kernel_size [, {dilation=1, padding=0, stride=1}]): unfold's adjoint:
-- the columns x [N, C kh kw, L] (or [C kh kw, L]) summed back into [N, C, H, W]
function M.fold(x, output_size, kernel_size, opts)
  local who = 'fold'
  check(who, x)
  if x:dim() ~= 2 and x:dim() ~= 3 then
    fail('%s: Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got %dD)', who, x:dim())
  end
  local o = utils.options(who, opts, UNFOLD_DEFAULTS)
  local h, w = quad(who, 'output_size', output_size)
  local kh, kw = quad(who, 'kernel_size', kernel_size)
  local dh, dw = quad(who, 'dilation', o.dilation)
  local ph, pw = quad(who, 'padding', o.padding, true)
  local sh, sw = quad(who, 'stride', o.stride)
  local batched = x:dim() == 3
  if not batched then x = x:unsqueeze(1) end
  local n, ck, l = x:size(1), x:size(2), x:size(3)
  if ck % (kh * kw) ~= 0 then
    fail('%s: Expected size of input\'s dimension 1 to be divisible by the product of kernel_size, but got input.size(1)=%d and kernel_size=(%d, %d)',
      who, ck, kh, kw)
  end
  local hp, wp = h + 2 * ph, w + 2 * pw
  local idx, bh, bw = block_index(who, hp, wp, kh, kw, dh, dw, sh, sw, x.device)
  if l ~= bh * bw then
    fail('%s: Given output_size=(%d, %d), kernel_size=(%d, %d), dilation=(%d, %d), padding=(%d, %d), stride=(%d, %d), expected size of input\'s dimension 2 to match the calculated number of sliding blocks %d * %d = %d, but got input.size(2)=%d',
      who, h, w, kh, kw, dh, dw, ph, pw, sh, sw, bh, bw, bh * bw, l)
  end
  local c = ck // (kh * kw)
  local plane = torch.zeros(n, c, hp * wp, { dtype = x.dtype, device = x.device })
  local y = plane:index_add(3, idx, x:reshape(n, c, -1)):reshape(n, c, hp, wp)
  if ph > 0 then y = y:narrow(3, ph + 1, h) end
  if pw > 0 then y = y:narrow(4, pw + 1, w) end
  return batched and y or y:squeeze(1)
end

-- embedding_bag(idx, weight [, offsets] [, {mode='mean', per_sample_weights=,
-- include_last_offset=false, padding_idx=, max_norm=, norm_type=2}]): the sum, mean or max
-- of the embedding rows of each bag.  idx [B, L] is B bags of L indices; a 1-D idx with
-- offsets: bag b starts at position offsets[b] (1-based, so the first offset is 1) and ends
-- where the next one starts (with include_last_offset, offsets holds B + 1 entries, the last
-- one #idx + 1).  Indices equal to padding_idx are left out of their bag; an empty bag is
-- zeros.  per_sample_weights (the shape of idx) scales each row, with mode 'sum' only.
local BAG_DEFAULTS = { mode = 'mean', per_sample_weights = false, include_last_offset = false, padding_idx = false,
                       max_norm = false, norm_type = 2, scale_grad_by_freq = false, sparse = false }

function M.embedding_bag(idx, weight, offsets, opts)
  local who = 'embedding_bag'
  if type(offsets) == 'table' and not torch.is_tensor(offsets) then offsets, opts = nil, offsets end
  check(who, idx, 'the indices'); check(who, weight, 'weight')
  local o = utils.options(who, opts, BAG_DEFAULTS)
  if o.mode ~= 'sum' and o.mode ~= 'mean' and o.mode ~= 'max' then
    fail("%s: mode must be 'sum', 'mean' or 'max', got %s", who, show(o.mode))
  end
  if o.scale_grad_by_freq or o.sparse then fail('%s: scale_grad_by_freq and sparse are not supported', who) end
  if idx.dtype ~= 'int64' then fail('%s: the indices must be an int64 tensor of 1-based indices, got %s', who, idx.dtype) end
  if weight:dim() ~= 2 then fail('%s: weight must be 2-D [num_embeddings, embedding_dim], got shape %s', who, utils.shape(weight)) end
  local n = idx:numel()
  local starts = {}   -- 1-based start of each bag, and n + 1 after the last
  if idx:dim() == 2 then
    if offsets ~= nil then fail('%s: offsets has to be nil if the indices are 2-D, got a tensor', who) end
    local b, l = idx:size(1), idx:size(2)
    for k = 1, b + 1 do starts[k] = (k - 1) * l + 1 end
  elseif idx:dim() == 1 then
    if offsets == nil then fail('%s: offsets has to be a 1-D int64 tensor if the indices are 1-D, got nil', who) end
    check(who, offsets, 'offsets')
    if offsets.dtype ~= 'int64' or offsets:dim() ~= 1 then
      fail('%s: offsets has to be a 1-D int64 tensor of 1-based positions, got %s %s', who, offsets.dtype, utils.shape(offsets))
    end
    starts = offsets:tolist()
    if #starts == 0 or starts[1] ~= 1 then
      fail('%s: offsets[1] has to be 1 (the first bag starts at the first index; dplua counts from 1), got %s', who,
        show(starts[1]))
    end
    if o.include_last_offset then
      if #starts < 1 or starts[#starts] ~= n + 1 then
        fail('%s: with include_last_offset the last offset has to be %d (the number of indices + 1), got %s', who, n + 1,
          show(starts[#starts]))
      end
    else
      starts[#starts + 1] = n + 1
    end
    for k = 2, #starts do
      if starts[k] < starts[k - 1] or starts[k] > n + 1 then
        fail('%s: offsets must be non-decreasing positions in 1..%d, got %d after %d', who, n + 1, starts[k], starts[k - 1])
      end
    end
  else
    fail('%s: the indices must be 1-D (with offsets) or 2-D [bags, length], got shape %s', who, utils.shape(idx))
  end
  local psw = o.per_sample_weights or nil
  if psw ~= nil then
    check(who, psw, 'per_sample_weights')
    if o.mode ~= 'sum' then
      fail("%s: embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' (got mode='%s'). Please open a feature request on GitHub.",
        who, o.mode)
    end
    if psw:numel() ~= n then fail('%s: per_sample_weights must have the shape of the indices %s, got %s', who, utils.shape(idx), utils.shape(psw)) end
  end
  local num, dim = weight:size(1), weight:size(2)
  local pad = FL.padding_index(who, o.padding_idx or nil, num)
  local flat = idx:reshape(-1)
  local rows = FL.embedding(flat, weight, { max_norm = o.max_norm, norm_type = o.norm_type })   -- [n, dim]
  if psw ~= nil then rows = rows * psw:reshape(n, 1) end
  -- the bags come from the offsets (on the host); what padding_idx leaves out is decided on
  -- the device: the indices are not read back (a stall on a GPU)
  local nb = #starts - 1
  local topts = { dtype = weight.dtype, device = weight.device }
  local ids, sizes = {}, {}
  for b = 1, nb do
    sizes[b] = starts[b + 1] - starts[b]
    for k = starts[b], starts[b + 1] - 1 do ids[k] = b end
  end
  local keep = pad and flat:to(weight.device):ne(pad) or nil   -- bool [n]
  local ids_t = n > 0 and torch.tensor(ids, { dtype = 'int64', device = weight.device }) or nil
  local count   -- [nb]: the indices each bag keeps
  if keep and n > 0 then
    rows = rows * keep:to(weight.dtype):reshape(n, 1)
    count = torch.zeros(nb, topts):index_add(1, ids_t, keep:to(weight.dtype))
  else
    count = torch.tensor(sizes, topts):reshape(nb)
  end
  if o.mode == 'max' then
    -- each bag's rows gathered into [nb, longest, dim], short bags (and padding_idx
    -- entries) filled from an extra row of -inf, then the max over the bag; an empty bag is 0
    if nb == 0 then return torch.zeros(0, dim, topts) end
    local longest = 0
    for b = 1, nb do longest = math.max(longest, sizes[b]) end
    if longest == 0 then return torch.zeros(nb, dim, topts) end
    local fill, gather = n + 1, {}
    for b = 1, nb do
      for k = 1, longest do gather[#gather + 1] = k <= sizes[b] and starts[b] + k - 1 or fill end
    end
    local at = torch.tensor(gather, { dtype = 'int64', device = weight.device })
    local ext = torch.cat({ rows, torch.full({ 1, dim }, -math.huge, topts) }, 1)
    local picked = ext:index_select(1, at)
    if keep then
      local kept = torch.cat({ keep, torch.zeros(1, { dtype = 'bool', device = weight.device }) }):index_select(1, at)
      picked = torch.where(kept:reshape(-1, 1), picked, -math.huge)
    end
    local maxed = (picked:reshape(nb, longest, dim):max(2))
    return torch.where(count:gt(0):reshape(nb, 1), maxed, 0)
  end
  local sums = torch.zeros(nb, dim, topts)
  if n > 0 then sums = sums:index_add(1, ids_t, rows) end
  if o.mode == 'sum' then return sums end
  return sums / count:clamp(1, nil):reshape(nb, 1)
end

-- one_hot(classes [, num_classes=-1]): torch.one_hot, classes counting from 1 as the
-- class targets of cross_entropy and nll_loss do; -1 takes the largest class present
function M.one_hot(t, num_classes)
  if num_classes == -1 then num_classes = nil end
  if num_classes ~= nil and (math.type(num_classes) ~= 'integer' or num_classes < 0) then
    fail('one_hot: num_classes must be a non-negative integer or -1, got %s', show(num_classes))
  end
  local ok, r = pcall(torch.one_hot, t, num_classes)
  if not ok then utils.error((show(r):gsub('^.-:%d+: ', ''))) end
  return r
end

function M.install(F)
  M._pool_args, M._pool_size = F._pool_args, F._pool_size   -- lua/nn/functional_vision.lua's
  for _, name in ipairs { 'selu', 'celu', 'glu', 'hardswish', 'hardsigmoid', 'softsign', 'tanhshrink', 'threshold',
                          'softmin', 'logsigmoid', 'prelu', 'gumbel_softmax', 'pixel_shuffle', 'pixel_unshuffle',
                          'channel_shuffle', 'avg_pool1d', 'adaptive_avg_pool1d', 'adaptive_max_pool1d', 'normalize',
                          'cosine_similarity', 'pairwise_distance', 'instance_norm', 'local_response_norm',
                          'dropout1d', 'dropout3d', 'alpha_dropout', 'unfold', 'fold', 'one_hot', 'bilinear',
                          'embedding_bag' } do
    F[name] = M[name]
  end
end

return M
