-- The functional forms of the layers that sequence models and transformers are built from:
-- embedding, layer_norm, group_norm, rms_norm and the activations (gelu, silu, leaky_relu,
-- elu, softplus, mish, hardtanh, relu6).  nn.functional installs them (install(F)).
--
-- layer_norm is one engine op (src/norm.c: the forward saves each row's mean and 1/std,
-- the backward is one kernel); group_norm is that op on a [N, groups, -1] view.  The rest
-- (but gelu and silu, rows of the op table) are compositions of the engine's differentiable
-- ops, so they run on every device and autograd needs nothing of their own.  Where a branch could overflow (exp of a large x),
-- its input is clamped first, so the branch that torch.where drops never feeds inf * 0 =
-- NaN into the gradient.
local torch = require 'torch'
local C = require 'torch._C'
local utils = require 'nn.utils'

local M = {}

local check = utils.check_tensor

local function check_number(who, what, v)
  if type(v) ~= 'number' then
    utils.error(('%s: %s must be a number, got %s'):format(who, what, tostring(v)))
  end
  return v
end

local function check_float(who, x)
  if not torch.FLOAT_DTYPES[x.dtype] then
    utils.error(('%s: expected a floating point input, got %s'):format(who, x.dtype))
  end
end

-- Embedding ------------------------------------------------------------------------------

-- Rows of weight that idx names, renormalized in place (without autograd) to norm at most
-- max_norm, as PyTorch's embedding_renorm_: each row once, scaled by max_norm / (norm + 1e-7).
local function renorm_rows(weight, flat, max_norm, norm_type)
  torch.no_grad(function()
    local seen, rows = {}, {}
    for _, i in ipairs(flat:tolist()) do
      if not seen[i] then seen[i] = true; rows[#rows + 1] = i end
    end
    if #rows == 0 then return end
    local norms = weight:index_select(1, rows):norm(norm_type, 2):tolist()
    for k, i in ipairs(rows) do
      if norms[k] > max_norm then
        weight:narrow(1, i, 1):mul_(max_norm / (norms[k] + 1e-7))
      end
    end
  end)
end

local embedding_opts = { padding_idx = false, max_norm = false, norm_type = 2, scale_grad_by_freq = false,
                         sparse = false }

-- A 1-based padding_idx for a weight of n rows: nil, or an integer in [1, n] (a negative one
-- counts from the end, as PyTorch's).
function M.padding_index(who, padding_idx, n)
  if padding_idx == nil or padding_idx == false then return nil end
  if math.type(padding_idx) ~= 'integer' then
    utils.error(('%s: padding_idx must be an integer (1-based), got %s'):format(who, tostring(padding_idx)))
  end
  local p = padding_idx < 0 and n + 1 + padding_idx or padding_idx
  if p < 1 or p > n then
    utils.error(('%s: padding_idx %d is out of range for an embedding of %d rows (dplua counts from 1)')
      :format(who, padding_idx, n))
  end
  return p
end

-- embedding(idx, weight [, padding_idx [, max_norm [, norm_type [, scale_grad_by_freq [,
-- sparse]]]]] [, opts]), PyTorch's positional order, or any of them in a last options
-- table {padding_idx=, max_norm=, norm_type=2, scale_grad_by_freq=false, sparse=false}: the rows of weight [num, dim] that the int64 1-based indices idx (any
-- shape) name; the result has shape idx.shape .. {dim}.  The padding_idx row gets no
-- gradient; with max_norm the named rows are renormalized in place first.
local EMBEDDING_NAMES = { 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse' }

function M.embedding(idx, weight, ...)
  check('embedding', idx, 'the indices')
  check('embedding', weight, 'weight')
  local o = utils.options('embedding', utils.positional('embedding', EMBEDDING_NAMES, ...), embedding_opts)
  if idx.dtype ~= 'int64' then
    utils.error(('embedding: the indices must be an int64 tensor of 1-based indices, got %s'):format(idx.dtype))
  end
  if weight:dim() ~= 2 then
    utils.error(('embedding: weight must be 2-D [num_embeddings, embedding_dim], got shape %s')
      :format(utils.shape(weight)))
  end
  if o.sparse then utils.error('embedding: sparse gradients are not supported (use sparse=false)') end
  local num, dim = weight:size(1), weight:size(2)
  local pad = M.padding_index('embedding', o.padding_idx, num)
  local flat = idx:reshape(-1)
  if flat.device ~= weight.device then flat = flat:to(weight.device) end   -- indices may live elsewhere
  -- on a GPU index_select checks the indices there, reporting a bad one at the next
  -- synchronisation: reading them here would stall the stream on every lookup
  if flat:numel() > 0 and weight.device.type ~= 'cuda' then
    local lo, hi = flat:min():item(), flat:max():item()
    local bad = lo < 1 and lo or hi > num and hi or nil
    if bad then
      utils.error(('embedding: index %d is out of range for an embedding of %d rows (dplua counts from 1, so indices run from 1 to %d)')
        :format(bad, num, num))
    end
  end
  if o.max_norm then
    renorm_rows(weight, flat, check_number('embedding', 'max_norm', o.max_norm), o.norm_type)
  end
  local out = weight:index_select(1, flat)
  if pad or o.scale_grad_by_freq then
    -- values unchanged; only the gradient is masked (padding) or scaled (frequency)
    local rows = flat:reshape(-1, 1)
    if o.scale_grad_by_freq then
      local list, count = flat:tolist(), {}
      for _, i in ipairs(list) do count[i] = (count[i] or 0) + 1 end
      for k, i in ipairs(list) do list[k] = count[i] end
      local freq = torch.tensor(list, { dtype = weight.dtype, device = weight.device }):reshape(-1, 1)
      out = out:detach() + (out - out:detach()) / freq
    end
    if pad then out = torch.where(rows:ne(pad), out, out:detach()) end
  end
  local shape = idx:size():totable()
  shape[#shape + 1] = dim
  return out:reshape(shape)
end

-- Normalization --------------------------------------------------------------------------

-- normalized_shape as a table of sizes: an integer, a table or a torch.Size.
function M.normalized_shape(who, s)
  if math.type(s) == 'integer' then s = { s } end
  if type(s) ~= 'table' then
    utils.error(('%s: normalized_shape must be an integer or a table of integers, got %s'):format(who, tostring(s)))
  end
  local out = {}
  for i = 1, #s do
    if math.type(s[i]) ~= 'integer' or s[i] < 0 then
      utils.error(('%s: normalized_shape entry %d must be a non-negative integer, got %s'):format(who, i, tostring(s[i])))
    end
    out[i] = s[i]
  end
  return out
end

local function shape_str(s) return '[' .. table.concat(s, ', ') .. ']' end

-- PyTorch's message for an input whose trailing dims are not normalized_shape.
local function check_trailing(who, x, shape)
  local n, nd, ok = #shape, x:dim(), #shape <= x:dim()
  for i = 1, n do
    if ok and x:size(nd - n + i) ~= shape[i] then ok = false end
  end
  if not ok then
    utils.error(('%s: given normalized_shape=%s, expected input with shape [*, %s], but got input of size %s')
      :format(who, shape_str(shape), table.concat(shape, ', '), utils.shape(x)))
  end
end

-- layer_norm(x, normalized_shape [, weight [, bias [, eps=1e-5]]]): normalizes over the
-- trailing dims normalized_shape, (x - mean) / sqrt(var + eps) * weight + bias, var biased.
function M.layer_norm(x, normalized_shape, weight, bias, eps)
  check('layer_norm', x)
  local shape = M.normalized_shape('layer_norm', normalized_shape)
  check_float('layer_norm', x)
  check_trailing('layer_norm', x, shape)
  if weight ~= nil then check('layer_norm', weight, 'weight') end
  if bias ~= nil then check('layer_norm', bias, 'bias') end
  return C.layer_norm(x, #shape, weight, bias, check_number('layer_norm', 'eps', eps or 1e-5))
end

-- group_norm(x, num_groups [, weight [, bias [, eps=1e-5]]]): x [N, C, *] normalized over
-- each group of C / num_groups channels (and all of *), then weight and bias [C] per channel.
function M.group_norm(x, num_groups, weight, bias, eps)
  check('group_norm', x)
  check_float('group_norm', x)
  if math.type(num_groups) ~= 'integer' or num_groups < 1 then
    utils.error(('group_norm: num_groups must be a positive integer, got %s'):format(tostring(num_groups)))
  end
  if x:dim() < 2 then
    utils.error(('group_norm: expected an input [N, C, *] with at least 2 dims, got shape %s'):format(utils.shape(x)))
  end
  local n, c = x:size(1), x:size(2)
  if c % num_groups ~= 0 then
    utils.error(('group_norm: expected the number of channels %d to be divisible by num_groups %d'):format(c, num_groups))
  end
  for what, p in pairs { weight = weight, bias = bias } do
    check('group_norm', p, what)
    if p:dim() ~= 1 or p:size(1) ~= c then
      utils.error(('group_norm: %s must have shape [%d] (one per channel), got %s'):format(what, c, utils.shape(p)))
    end
  end
  local y = C.layer_norm(x:reshape(n, num_groups, -1), 1, nil, nil, check_number('group_norm', 'eps', eps or 1e-5))
  y = y:reshape(x:size())
  if weight == nil and bias == nil then return y end
  local pshape = { c }
  for _ = 3, x:dim() do pshape[#pshape + 1] = 1 end
  if weight ~= nil then y = y * weight:reshape(pshape) end
  if bias ~= nil then y = y + bias:reshape(pshape) end
  return y
end

-- machine epsilon of a float dtype (torch.finfo(dtype).eps)
local finfo_eps = { float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16, float16 = 0.0009765625,
                    bfloat16 = 0.0078125 }
M.finfo_eps = finfo_eps

-- rms_norm(x, normalized_shape [, weight [, eps]]): x / sqrt(mean(x^2) + eps) * weight over
-- the trailing dims normalized_shape (PyTorch 2.4); eps defaults to the dtype's epsilon.
function M.rms_norm(x, normalized_shape, weight, eps)
  check('rms_norm', x)
  local shape = M.normalized_shape('rms_norm', normalized_shape)
  check_float('rms_norm', x)
  check_trailing('rms_norm', x, shape)
  if eps == nil then eps = finfo_eps[x.dtype] end
  check_number('rms_norm', 'eps', eps)
  -- float16 and bfloat16 compute in float32 (x^2 leaves float16's range past 256) and
  -- round once at the end
  local dtype = x.dtype
  local half = dtype == 'float16' or dtype == 'bfloat16'
  if half then x = x:float() end
  local lead = {}
  for i = 1, x:dim() - #shape do lead[i] = x:size(i) end
  lead[#lead + 1] = -1
  local rows = x:reshape(lead)
  local r = ((rows * rows):mean(#lead, true) + eps):rsqrt()
  local y = (rows * r):reshape(x:size())
  if weight ~= nil then
    check('rms_norm', weight, 'weight')
    if weight:size() ~= torch.Size(shape) then
      utils.error(('rms_norm: weight has shape %s but normalized_shape is %s'):format(utils.shape(weight), shape_str(shape)))
    end
    y = y * ((half and weight.dtype == dtype) and weight:float() or weight)
  end
  if half and y.dtype == 'float32' then y = y:to(dtype) end
  return y
end

-- Activations ----------------------------------------------------------------------------

local SQRT_2_PI = math.sqrt(2 / math.pi)
local hardtanh   -- hardtanh(x, min_val, max_val), below

-- gelu(x [, approximate='none' | 'tanh'], also {approximate=}):
-- x * Phi(x) = x/2 (1 + erf(x / sqrt 2)), or the tanh approximation
function M.gelu(x, approximate)
  check('gelu', x)
  if type(approximate) == 'table' then approximate = utils.options('gelu', approximate, { approximate = 'none' }).approximate end
  approximate = approximate or 'none'
  if approximate == 'none' then
    return x:gelu()   -- one op of the op table (src/ops.def)
  elseif approximate == 'tanh' then
    local inner = (x + x * x * x * 0.044715) * SQRT_2_PI
    return x * 0.5 * (inner:tanh() + 1)
  end
  utils.error(("gelu: approximate must be 'none' or 'tanh', got %s"):format(tostring(approximate)))
end

-- The activations that take PyTorch's inplace (the last option, positional or by name):
-- inplace = true writes the result into x and returns x (utils.activation_inplace).
local activation_args, activation_inplace = utils.activation_args, utils.activation_inplace

-- silu(x [, inplace=false])
function M.silu(x, ...)
  check('silu', x)
  local o = activation_args('silu', { 'inplace' }, { inplace = false }, ...)
  return activation_inplace('silu', x, o.inplace, function(v) return v:silu() end)
end

-- leaky_relu(x [, negative_slope=0.01 [, inplace=false]]), or the options by name in a table
function M.leaky_relu(x, ...)
  check('leaky_relu', x)
  local o = activation_args('leaky_relu', { 'negative_slope', 'inplace' }, { negative_slope = 0.01, inplace = false }, ...)
  local s = check_number('leaky_relu', 'negative_slope', o.negative_slope)
  return activation_inplace('leaky_relu', x, o.inplace, function(v) return torch.where(v:gt(0), v, v * s) end)
end

-- elu(x [, alpha=1 [, inplace=false]]): x for x > 0, alpha (e^x - 1) otherwise
function M.elu(x, ...)
  check('elu', x)
  local o = activation_args('elu', { 'alpha', 'inplace' }, { alpha = 1.0, inplace = false }, ...)
  local a = check_number('elu', 'alpha', o.alpha)
  return activation_inplace('elu', x, o.inplace, function(v) return torch.where(v:gt(0), v, v:clamp(nil, 0):expm1() * a) end)
end

-- softplus(x [, beta=1 [, threshold=20]]) or softplus(x, {beta=, threshold=}):
-- log(1 + e^(beta x)) / beta, and x itself where beta x > threshold
function M.softplus(x, beta, threshold)
  check('softplus', x)
  if type(beta) == 'table' then
    local o = utils.options('softplus', beta, { beta = 1, threshold = 20 })
    beta, threshold = o.beta, o.threshold
  end
  beta = check_number('softplus', 'beta', beta or 1)
  threshold = check_number('softplus', 'threshold', threshold or 20)
  local bx = x * beta
  return torch.where(bx:gt(threshold), x, bx:clamp(nil, threshold):exp():log1p() / beta)
end

-- mish(x [, inplace=false]): x tanh(softplus(x))
function M.mish(x, ...)
  check('mish', x)
  local o = activation_args('mish', { 'inplace' }, { inplace = false }, ...)
  return activation_inplace('mish', x, o.inplace, function(v) return v * M.softplus(v):tanh() end)
end

-- hardtanh(x [, min_val=-1 [, max_val=1 [, inplace=false]]]), or the options by name in a
-- table: x clamped; the gradient passes only strictly inside (min_val, max_val), as PyTorch's.
-- min_val > max_val is no error (only nn.Hardtanh refuses it): every element is max_val, as
-- PyTorch's clamp gives, with a zero gradient.
function M.hardtanh(x, ...)
  check('hardtanh', x)
  local o = activation_args('hardtanh', { 'min_val', 'max_val', 'inplace' }, { min_val = -1, max_val = 1, inplace = false }, ...)
  return activation_inplace('hardtanh', x, o.inplace, function(v) return hardtanh(v, o.min_val, o.max_val) end)
end

hardtanh = function(x, min_val, max_val)
  min_val = check_number('hardtanh', 'min_val', min_val)
  max_val = check_number('hardtanh', 'max_val', max_val)
  if x.dtype == 'bool' then utils.error('hardtanh: bool inputs are not supported') end
  if not torch.FLOAT_DTYPES[x.dtype] then
    -- integers stay integers: PyTorch converts the bounds to the integer type (toward zero)
    local function toward_zero(v) return v < 0 and math.ceil(v) or math.floor(v) end
    return x:clamp(toward_zero(min_val), toward_zero(max_val))
  end
  local bound = x:clamp(min_val, max_val):detach()
  return torch.where(x:le(min_val), bound, torch.where(x:ge(max_val), bound, x))
end

-- relu6(x [, inplace=false]): hardtanh(x, 0, 6)
function M.relu6(x, ...)
  check('relu6', x)
  local o = activation_args('relu6', { 'inplace' }, { inplace = false }, ...)
  return activation_inplace('relu6', x, o.inplace, function(v) return hardtanh(v, 0, 6) end)
end

function M.install(F)
  for _, name in ipairs { 'embedding', 'layer_norm', 'group_norm', 'rms_norm', 'gelu', 'silu', 'leaky_relu',
                          'elu', 'softplus', 'mish', 'hardtanh', 'relu6' } do
    F[name] = M[name]
  end
end

return M
