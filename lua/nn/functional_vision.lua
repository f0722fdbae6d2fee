-- The vision functions of nn.functional: pooling (one engine call each), batch_norm,
-- dropout2d, pad and interpolate (compositions of the engine's ops, so autograd
-- differentiates them on every device).  PyTorch 1.13's results; sizes and pads given as
-- PyTorch gives them, dims 1-based as everywhere.
local torch = require 'torch'
local C = require 'torch._C'
local utils = require 'nn.utils'
local NONE = require('torch.options').none

local check = utils.check_tensor

return function(F)

-- n or {h, w} -> h, w (positive integers unless allow_zero)
local function pair(who, what, v, n, allow_zero)
  n = n or 2
  local out = {}
  if math.type(v) == 'integer' then
    for i = 1, n do out[i] = v end
  elseif type(v) == 'table' and getmetatable(v) == nil and #v == n then
    for i = 1, n do out[i] = v[i] end
  else
    utils.error(('%s: %s must be an integer or a table of %d integers, got %s')
      :format(who, what, n, type(v) == 'table' and ('a table of %d'):format(#v) or tostring(v)))
  end
  for i = 1, n do
    if math.type(out[i]) ~= 'integer' or out[i] < (allow_zero and 0 or 1) then
      utils.error(('%s: %s must hold %s integers, got %s'):format(who, what,
        allow_zero and 'non-negative' or 'positive', tostring(out[i])))
    end
  end
  return table.unpack(out)
end
F._pair = pair

-- The arguments of a pooling call after the input, in PyTorch's positional order (names),
-- the options table (a table with named fields) being the last one given, or the only one
-- (kernel_size among its fields): one table of them with the defaults filled in.  A size
-- given as a table of one number stands for n of them, an empty table (PyTorch's []) for
-- the default; an argument given both positionally and in the options table is an error.
local function pool_args(who, names, defaults, ...)
  local args = table.pack(...)
  local n, opts = args.n, nil
  while n > 0 and args[n] == nil do n = n - 1 end
  local last = args[n]
  if type(last) == 'table' and not torch.is_tensor(last) then
    local named = false
    for k in pairs(last) do if type(k) == 'string' then named = true end end
    if named then opts, n = last, n - 1 end
  end
  if n > #names then
    utils.error(('%s: takes at most %d positional arguments after the input (%s), got %d')
      :format(who, #names, table.concat(names, ', '), n))
  end
  local all = { kernel_size = NONE }
  for k, v in pairs(defaults) do all[k] = v end
  local merged = {}
  for k, v in pairs(opts or {}) do merged[k] = v end
  for i = 1, n do
    if args[i] ~= nil then
      if merged[names[i]] ~= nil then
        utils.error(('%s: %s given both positionally and in the options'):format(who, names[i]))
      end
      merged[names[i]] = args[i]
    end
  end
  local o = utils.options(who, merged, all)
  if o.kernel_size == nil then utils.error(('%s: kernel_size is required'):format(who)) end
  return o
end
F._pool_args = pool_args

-- a size argument of a pooling call as n numbers: a table of one number stands for n of
-- them, an empty table (PyTorch's []) for the default def
local function pool_size(v, n, def)
  if type(v) == 'table' and getmetatable(v) == nil then
    if #v == 0 and next(v) == nil then return def end
    if #v == 1 and n > 1 then
      local r = {}
      for i = 1, n do r[i] = v[1] end
      return r
    end
  end
  return v
end
F._pool_size = pool_size

local function check_dims(who, x, lo, hi, shape)
  check(who, x)
  if x:dim() < lo or x:dim() > hi then
    utils.error(('%s: expected a %d-D or %d-D input (%s), got shape %s')
      :format(who, lo, hi, shape, utils.shape(x)))
  end
end

local MAX_NAMES = { 'kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices' }
local MAX_DEFAULTS = { stride = false, padding = 0, dilation = 1, ceil_mode = false, return_indices = false }

-- max_pool2d(x, kernel_size [, stride=kernel_size [, padding=0 [, dilation=1 [,
-- ceil_mode=false [, return_indices=false]]]]]), PyTorch's positional order, or any of them
-- in an options table after the positional ones (kernel_size too: max_pool2d(x,
-- {kernel_size = 2, stride = 1})): with return_indices also the indices of the maxima,
-- counted from 1 within each plane (h-1) * W + w, PyTorch's flat index plus one.
function F.max_pool2d(x, ...)
  local who = 'max_pool2d'
  check_dims(who, x, 3, 4, '[C, H, W] or [N, C, H, W]')
  local o = pool_args(who, MAX_NAMES, MAX_DEFAULTS, ...)
  local kh, kw = pair(who, 'kernel_size', pool_size(o.kernel_size, 2))
  local sh, sw = kh, kw
  local stride = pool_size(o.stride, 2, false)
  if stride then sh, sw = pair(who, 'stride', stride) end
  local ph, pw = pair(who, 'padding', pool_size(o.padding, 2, 0), 2, true)
  local dh, dw = pair(who, 'dilation', pool_size(o.dilation, 2, 1))
  return C.pool2d(x, 'max', false, kh, kw, sh, sw, ph, pw, dh, dw, o.ceil_mode, false, 0, o.return_indices)
end

-- max_pool1d(x, kernel_size [, stride [, padding [, dilation [, ceil_mode [,
-- return_indices]]]]]) of [C, L] or [N, C, L], arguments as max_pool2d's; indices count
-- positions along L from 1.
function F.max_pool1d(x, ...)
  local who = 'max_pool1d'
  check_dims(who, x, 2, 3, '[C, L] or [N, C, L]')
  local o = pool_args(who, MAX_NAMES, MAX_DEFAULTS, ...)
  local k = pair(who, 'kernel_size', o.kernel_size, 1)
  local stride = pool_size(o.stride, 1, false)
  local s = stride and pair(who, 'stride', stride, 1) or k
  local p = pair(who, 'padding', pool_size(o.padding, 1, 0), 1, true)
  local d = pair(who, 'dilation', pool_size(o.dilation, 1, 1), 1)
  local h = x:dim()   -- the new dim of size 1 before L
  local y, idx = C.pool2d(x:unsqueeze(h), 'max', false, 1, k, 1, s, 0, p, 1, d, o.ceil_mode, false, 0,
                          o.return_indices)
  if idx then return y:squeeze(h), idx:squeeze(h) end
  return y:squeeze(h)
end

local AVG_NAMES = { 'kernel_size', 'stride', 'padding', 'ceil_mode', 'count_include_pad', 'divisor_override' }

-- avg_pool2d(x, kernel_size [, stride=kernel_size [, padding=0 [, ceil_mode=false [,
-- count_include_pad=true [, divisor_override]]]]]), PyTorch's positional order, or any of
-- them in an options table after the positional ones (kernel_size too); divisor_override
-- any nonzero integer, as PyTorch
function F.avg_pool2d(x, ...)
  local who = 'avg_pool2d'
  check_dims(who, x, 3, 4, '[C, H, W] or [N, C, H, W]')
  local o = pool_args(who, AVG_NAMES, { stride = false, padding = 0, ceil_mode = false, count_include_pad = true,
                                        divisor_override = false }, ...)
  local kh, kw = pair(who, 'kernel_size', pool_size(o.kernel_size, 2))
  local sh, sw = kh, kw
  local stride = pool_size(o.stride, 2, false)
  if stride then sh, sw = pair(who, 'stride', stride) end
  local ph, pw = pair(who, 'padding', pool_size(o.padding, 2, 0), 2, true)
  local div = o.divisor_override or 0
  if o.divisor_override and (math.type(div) ~= 'integer' or div == 0) then
    utils.error(('%s: divisor_override must be a nonzero integer, got %s'):format(who, tostring(div)))
  end
  return C.pool2d(x, 'avg', false, kh, kw, sh, sw, ph, pw, 1, 1, o.ceil_mode, o.count_include_pad, div, false)
end

-- output_size: n, or {h, w} where false keeps the input's size (PyTorch's None)
local function adaptive_size(who, x, size)
  if type(size) == 'table' and #size == 2 then
    size = { size[1] or x:size(x:dim() - 1), size[2] or x:size(x:dim()) }
  end
  return pair(who, 'output_size', size)
end

function F.adaptive_avg_pool2d(x, output_size)
  local who = 'adaptive_avg_pool2d'
  check_dims(who, x, 3, 4, '[C, H, W] or [N, C, H, W]')
  local oh, ow = adaptive_size(who, x, output_size)
  return C.pool2d(x, 'avg', true, oh, ow, 1, 1, 0, 0, 1, 1, false, false, 0, false)
end

-- adaptive_max_pool2d(x, output_size [, return_indices=false]): indices as max_pool2d's
function F.adaptive_max_pool2d(x, output_size, return_indices)
  local who = 'adaptive_max_pool2d'
  check_dims(who, x, 3, 4, '[C, H, W] or [N, C, H, W]')
  local oh, ow = adaptive_size(who, x, output_size)
  return C.pool2d(x, 'max', true, oh, ow, 1, 1, 0, 0, 1, 1, false, false, 0, return_indices and true or false)
end

-- The 3-D pools.  The engine's pool is 2-D; a window of a 3-D pool is a box, and the maximum
-- and the mean over a box (PyTorch's divisor is the product of the clipped extents along
-- each dim) are separable: first a 2-D pool over H, W of every depth slice, then a 2-D
-- pool of [N * C, D, Ho * Wo] along D only (a kernel of width 1).  Two passes, each as fast
-- as a 2-D pool; autograd chains their backwards.

-- x as [lead, D, H, W] (lead = N * C, or C unbatched) and the sizes before D
local function split_3d(x)
  local dims, lead, shape = x:dim(), 1, {}
  for i = 1, dims - 3 do lead = lead * x:size(i); shape[i] = x:size(i) end
  return lead, x:size(dims - 2), x:size(dims - 1), x:size(dims), shape
end

local function pool3d_sizes(who, o, with_dilation)
  local kd, kh, kw = pair(who, 'kernel_size', pool_size(o.kernel_size, 3), 3)
  local sd, sh, sw = kd, kh, kw
  local stride = pool_size(o.stride, 3, false)
  if stride then sd, sh, sw = pair(who, 'stride', stride, 3) end
  local pd, ph, pw = pair(who, 'padding', pool_size(o.padding, 3, 0), 3, true)
  local dd, dh, dw = 1, 1, 1
  if with_dilation then dd, dh, dw = pair(who, 'dilation', pool_size(o.dilation, 3, 1), 3) end
  for _, v in ipairs { { kd, pd, 'depth' }, { kh, ph, 'height' }, { kw, pw, 'width' } } do
    if v[2] > v[1] // 2 then
      utils.error(('%s: pad should be at most half of kernel size, but got pad=%d and kernel_size=%d (%s)')
        :format(who, v[2], v[1], v[3]))
    end
  end
  return { kd, kh, kw }, { sd, sh, sw }, { pd, ph, pw }, { dd, dh, dw }
end

local function check_3d_extent(who, x)
  local dims = x:dim()
  if x:size(dims - 2) == 0 or x:size(dims - 1) == 0 or x:size(dims) == 0 then
    utils.error(('%s: expected an input with non-zero depth, height and width, got shape %s'):format(who, utils.shape(x)))
  end
end

-- max_pool3d(x, kernel_size [, stride=kernel_size [, padding=0 [, dilation=1 [,
-- ceil_mode=false [, return_indices=false]]]]]) of [C, D, H, W] or [N, C, D, H, W], as
-- max_pool2d's (the options table too); the indices count from 1 within each volume,
-- ((d - 1) * H + h - 1) * W + w, PyTorch's flat index plus one.
function F.max_pool3d(x, ...)
  local who = 'max_pool3d'
  check_dims(who, x, 4, 5, '[C, D, H, W] or [N, C, D, H, W]')
  check_3d_extent(who, x)
  local o = pool_args(who, MAX_NAMES, MAX_DEFAULTS, ...)
  local k, s, p, d = pool3d_sizes(who, o, true)
  local lead, D, H, W, shape = split_3d(x)
  local ri = o.return_indices and true or false
  local y1, i1 = C.pool2d(x:reshape(lead * D, H, W), 'max', false, k[2], k[3], s[2], s[3], p[2], p[3], d[2], d[3],
                          o.ceil_mode, false, 0, ri)
  local Ho, Wo = y1:size(2), y1:size(3)
  local y2, i2 = C.pool2d(y1:reshape(lead, D, Ho * Wo), 'max', false, k[1], 1, s[1], 1, p[1], 0, d[1], 1,
                          o.ceil_mode, false, 0, ri)
  local Do = y2:size(2)
  shape[#shape + 1], shape[#shape + 2], shape[#shape + 3] = Do, Ho, Wo
  local y = y2:reshape(shape)
  if not ri then return y end
  -- i2 holds (depth - 1) * Ho * Wo + column; the column's index within its H, W plane is i1's
  local depth0 = (i2 - 1):div(Ho * Wo, { rounding_mode = 'floor' })
  local hw = i1:reshape(lead, D, Ho * Wo):gather(2, depth0 + 1)
  return y, (depth0 * (H * W) + hw):reshape(shape)
end

-- avg_pool3d(x, kernel_size [, stride=kernel_size [, padding=0 [, ceil_mode=false [,
-- count_include_pad=true [, divisor_override]]]]]) of [C, D, H, W] or [N, C, D, H, W], as
-- avg_pool2d's; with divisor_override both passes sum and the sum is divided once.
function F.avg_pool3d(x, ...)
  local who = 'avg_pool3d'
  check_dims(who, x, 4, 5, '[C, D, H, W] or [N, C, D, H, W]')
  check_3d_extent(who, x)
  local o = pool_args(who, AVG_NAMES, { stride = false, padding = 0, ceil_mode = false, count_include_pad = true,
                                        divisor_override = false }, ...)
  local k, s, p = pool3d_sizes(who, o, false)
  local div = o.divisor_override or 0
  if o.divisor_override and (math.type(div) ~= 'integer' or div == 0) then
    utils.error(('%s: divisor_override must be a nonzero integer, got %s'):format(who, tostring(div)))
  end
  local pass_div = o.divisor_override and 1 or 0
  local lead, D, H, W, shape = split_3d(x)
  local y1 = C.pool2d(x:reshape(lead * D, H, W), 'avg', false, k[2], k[3], s[2], s[3], p[2], p[3], 1, 1,
                      o.ceil_mode, o.count_include_pad, pass_div, false)
  local Ho, Wo = y1:size(2), y1:size(3)
  local y2 = C.pool2d(y1:reshape(lead, D, Ho * Wo), 'avg', false, k[1], 1, s[1], 1, p[1], 0, 1, 1,
                      o.ceil_mode, o.count_include_pad, pass_div, false)
  shape[#shape + 1], shape[#shape + 2], shape[#shape + 3] = y2:size(2), Ho, Wo
  local y = y2:reshape(shape)
  if o.divisor_override then y = y / div end
  return y
end

-- adaptive_avg_pool3d(x, output_size) of [C, D, H, W] or [N, C, D, H, W]: output_size n or
-- {d, h, w}, false keeping the input's size (PyTorch's None).  The engine has no 3-D pool:
-- the bins are boxes, so the average is separable, first along D (a 2-D adaptive pool of
-- [N * C, D, H * W] that keeps H * W), then over H and W: two passes over the data, each as
-- fast as a 2-D pool.
function F.adaptive_avg_pool3d(x, output_size)
  local who = 'adaptive_avg_pool3d'
  check_dims(who, x, 4, 5, '[C, D, H, W] or [N, C, D, H, W]')
  local dims = x:dim()
  local size = output_size
  if type(size) == 'table' and getmetatable(size) == nil and #size == 3 then
    size = { size[1] or x:size(dims - 2), size[2] or x:size(dims - 1), size[3] or x:size(dims) }
  end
  local od, oh, ow = pair(who, 'output_size', size, 3)
  local D, H, W = x:size(dims - 2), x:size(dims - 1), x:size(dims)
  local lead = x:numel() // math.max(D * H * W, 1)
  if x:numel() == 0 then lead = 1; for i = 1, dims - 3 do lead = lead * x:size(i) end end
  if D == 0 or H == 0 or W == 0 then
    utils.error(('%s: expected an input with non-zero D, H and W, got shape %s'):format(who, utils.shape(x)))
  end
  local y = C.pool2d(x:reshape(lead, D, H * W), 'avg', true, od, H * W, 1, 1, 0, 0, 1, 1, false, false, 0, false)
  y = C.pool2d(y:reshape(lead * od, H, W), 'avg', true, oh, ow, 1, 1, 0, 0, 1, 1, false, false, 0, false)
  local shape = {}
  for i = 1, dims - 3 do shape[i] = x:size(i) end
  shape[#shape + 1], shape[#shape + 2], shape[#shape + 3] = od, oh, ow
  return y:reshape(shape)
end

-- Batch normalization ------------------------------------------------------------------

-- x [N, C, *] reduced over every dim but the channels, kept as [1, C, 1, ...]
local function channel_mean(x)
  local m = x
  for d = 1, x:dim() do
    if d ~= 2 then m = m:mean(d, true) end
  end
  return m
end

-- batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps): the
-- signature row (lua/torch/signatures.lua) reads PyTorch's positional and keyword forms and
-- fills in the defaults.  In training the batch's statistics normalise x (the variance
-- biased) and, when given, the running statistics move toward them in place:
-- running = (1 - momentum) * running + momentum * batch (the variance unbiased).
function F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
  local who = 'batch_norm'
  check(who, x)
  if x:dim() < 2 then
    utils.error(('%s: expected an input of at least 2 dimensions [N, C, ...], got shape %s'):format(who, utils.shape(x)))
  end
  local C_ = x:size(2)
  local given = { running_mean = running_mean, running_var = running_var, weight = weight, bias = bias }
  for _, what in ipairs { 'running_mean', 'running_var', 'weight', 'bias' } do
    local t = given[what]
    if t ~= nil then
      check(who, t, what)
      if t:dim() ~= 1 or t:size(1) ~= C_ then
        utils.error(('%s: %s should contain %d elements not %d'):format(who, what, C_, t:numel()))
      end
    end
  end
  if type(momentum) ~= 'number' or type(eps) ~= 'number' then
    utils.error(('%s: momentum and eps must be numbers, got %s and %s'):format(who, tostring(momentum), tostring(eps)))
  end
  local shape = { 1, C_ }
  for _ = 3, x:dim() do shape[#shape + 1] = 1 end
  local mean, var
  if training then
    local n = x:numel() // C_
    if n <= 1 then
      utils.error(('%s: expected more than 1 value per channel when training, got input size %s')
        :format(who, utils.shape(x)))
    end
    mean = channel_mean(x)
    local centered = x - mean
    var = channel_mean(centered * centered)
    if running_mean ~= nil or running_var ~= nil then
      torch.no_grad(function()
        if running_mean ~= nil then
          running_mean:mul_(1 - momentum):add_(mean:detach():reshape(C_):mul(momentum))
        end
        if running_var ~= nil then
          running_var:mul_(1 - momentum):add_(var:detach():reshape(C_):mul(momentum * n / (n - 1)))
        end
      end)
    end
  else
    if running_mean == nil or running_var == nil then
      utils.error(('%s: running_mean and running_var must be given when training is false'):format(who))
    end
    mean, var = running_mean:view(shape), running_var:view(shape)
  end
  local y = (x - mean) * (var + eps):rsqrt()
  if weight ~= nil then y = y * weight:view(shape) end
  if bias ~= nil then y = y + bias:view(shape) end
  return y
end

-- Dropout2d ----------------------------------------------------------------------------

-- dropout2d(x [, p=0.5, training=true]): zeroes whole channels of [N, C, H, W] (or
-- [N, C, L]) with probability p and scales the others by 1/(1-p)
function F.dropout2d(x, p, training, inplace)
  local who = 'dropout2d'
  p, training = utils.dropout_args(who, p, training, inplace)
  check_dims(who, x, 3, 4, '[N, C, L] or [N, C, H, W]')
  if p == nil then p = 0.5 end
  if type(p) ~= 'number' or p < 0 or p > 1 then
    utils.error(('%s: probability has to be between 0 and 1, but got %s'):format(who, tostring(p)))
  end
  if training == nil then training = true end
  if not training or p == 0 then return x end
  local shape = { x:size(1), x:size(2) }
  for _ = 3, x:dim() do shape[#shape + 1] = 1 end
  local mask = C.dropout(torch.ones(shape, { dtype = x.dtype, device = x.device }), p, true)
  return x * mask
end

-- Padding ------------------------------------------------------------------------------

-- The source position (0-based) of output position j (0-based, j < 0 inside the left pad)
-- along a dim of size n
local sources = {
  reflect = function(j, n) if j < 0 then return -j elseif j >= n then return 2 * (n - 1) - j end return j end,
  replicate = function(j, n) return math.min(math.max(j, 0), n - 1) end,
  circular = function(j, n) return j % n end,
}

local function index_tensor(list, device)
  return torch.tensor(list, { dtype = 'int64', device = device })
end

-- pad(x, pad [, mode='constant' [, value=0]]), PyTorch's positional order, or any of them in
-- a last options table (pad(x, pad, {mode=, value=}), pad(x, pad, 'constant', {value=})): pad holds
-- (left, right) pairs from the last dim backwards, as PyTorch's; negative pads crop.
-- Modes: 'constant', 'reflect', 'replicate', 'circular'.
function F.pad(x, pad, mode, value)
  local who = 'pad'
  check(who, x)
  local o = utils.options(who, utils.positional(who, { 'mode', 'value' }, mode, value), { mode = 'constant', value = 0 })
  mode, value = o.mode, o.value
  if type(value) ~= 'number' then
    utils.error(('%s: value must be a number, got %s %s'):format(who, type(value), tostring(value)))
  end
  if type(pad) ~= 'table' or #pad % 2 ~= 0 or #pad // 2 > x:dim() then
    utils.error(('%s: pad must be a table of an even number of integers, at most 2 * %d for this input, got %s')
      :format(who, x:dim(), type(pad) == 'table' and #pad .. ' values' or tostring(pad)))
  end
  for i, v in ipairs(pad) do
    if math.type(v) ~= 'integer' then utils.error(('%s: pad[%d] must be an integer, got %s'):format(who, i, tostring(v))) end
  end
  if mode ~= 'constant' and not sources[mode] then
    utils.error(("%s: mode must be 'constant', 'reflect', 'replicate' or 'circular', got %s"):format(who, tostring(mode)))
  end
  local y = x
  for i = 1, #pad // 2 do
    local d, l, r = x:dim() - i + 1, pad[2 * i - 1], pad[2 * i]
    local n = y:size(d)
    if mode ~= 'constant' and n == 0 and (l ~= 0 or r ~= 0) then
      utils.error(("%s: mode '%s' cannot pad dim %d of size 0 (padding (%d, %d)): there is nothing to copy")
        :format(who, mode, d, l, r))
    end
    if n + l + r < 0 or (n + l + r == 0 and mode ~= 'constant' and (l ~= 0 or r ~= 0)) then
      utils.error(('%s: padding (%d, %d) of dim %d (size %d) leaves a negative or empty size')
        :format(who, l, r, d, n))
    end
    if mode == 'constant' then
      if l < 0 then y = y:narrow(d, 1 - l, y:size(d) + l); l = 0 end
      if r < 0 then y = y:narrow(d, 1, y:size(d) + r); r = 0 end
      local parts = {}
      local function filler(k)
        local s = y:size()
        local shape = {}
        for j = 1, #s do shape[j] = s[j] end
        shape[d] = k
        return torch.full(shape, value, { dtype = y.dtype, device = y.device })
      end
      if l > 0 then parts[#parts + 1] = filler(l) end
      parts[#parts + 1] = y
      if r > 0 then parts[#parts + 1] = filler(r) end
      if #parts > 1 then y = torch.cat(parts, d) end
    elseif l ~= 0 or r ~= 0 then
      if mode == 'reflect' and (l >= n or r >= n) then
        utils.error(('%s: padding size should be less than the corresponding input dimension, but got: padding (%d, %d) at dimension %d of input %s')
          :format(who, l, r, d, utils.shape(x)))
      end
      if mode == 'circular' and (l > n or r > n) then
        utils.error(('%s: padding value causes wrapping around more than once (padding (%d, %d), size %d)')
          :format(who, l, r, n))
      end
      local idx, src = {}, sources[mode]
      for j = -l, n + r - 1 do idx[#idx + 1] = src(j, n) + 1 end
      y = y:index_select(d, index_tensor(idx, y.device))
    end
  end
  -- a new tensor even where nothing was added (zero or only negative pads), as PyTorch
  if y:numel() > 0 and y:data_ptr() >= x:data_ptr() and y:data_ptr() < x:data_ptr() + x:numel() * x:element_size() then
    y = y:clone()
  end
  return y
end

-- Interpolation ------------------------------------------------------------------------

local function to_float32(v) return (string.unpack('f', string.pack('f', v))) end

-- the largest output size along one dim (2^31 - 1, what a 32-bit index reaches)
local MAX_INTERP_SIZE = 2147483647

-- the spatial dims each mode takes: 0 for any of 1, 2 and 3
local INTERP_MODES = { nearest = 0, ['nearest-exact'] = 0, area = 0, linear = 1, bilinear = 2, bicubic = 2,
                       trilinear = 3 }
local INTERP_SHAPES = { '[N, C, L]', '[N, C, H, W]', '[N, C, D, H, W]' }

-- PyTorch's cubic convolution kernel (Keys, A = -0.75): cc1 for |t| <= 1, cc2 for 1 < |t| < 2
local CUBIC_A = -0.75
local function cc1(t) return ((CUBIC_A + 2) * t - (CUBIC_A + 3)) * t * t + 1 end
local function cc2(t) return ((CUBIC_A * t - 5 * CUBIC_A) * t + 8 * CUBIC_A) * t - 4 * CUBIC_A end

-- The taps of one output dim of a linear or cubic interpolation from n to m positions:
-- taps[k] = {idx, w}, idx the source positions (1-based, clamped to the input as PyTorch's
-- border does) and w their weights, one per output position.  scale is PyTorch's
-- area_pixel_compute_scale; the linear source index is clamped at 0, the cubic one is not.
local function interp_taps(n, m, align, scale, cubic)
  local ntaps = cubic and 4 or 2
  local taps = {}
  for k = 1, ntaps do taps[k] = { idx = {}, w = {} } end
  for j = 0, m - 1 do
    local src = align and scale * j or scale * (j + 0.5) - 0.5
    if cubic then
      local i0 = math.floor(src)
      local t = src - i0
      local w = { cc2(t + 1), cc1(t), cc1(1 - t), cc2(2 - t) }
      for k = 1, 4 do
        taps[k].idx[j + 1] = math.min(math.max(i0 - 2 + k, 0), n - 1) + 1
        taps[k].w[j + 1] = w[k]
      end
    else
      if not align then src = math.max(src, 0) end
      local a = math.min(math.floor(src), n - 1)
      local lam = src - a
      -- along a dim that keeps its size PyTorch's kernel reads one element (an inf or NaN
      -- in the next one stays out); elsewhere it weighs the next one, by 0 too (0 * inf)
      taps[1].idx[j + 1], taps[2].idx[j + 1] = a + 1, (n == m and a or math.min(a + 1, n - 1)) + 1
      taps[1].w[j + 1], taps[2].w[j + 1] = 1 - lam, lam
    end
  end
  return taps
end

-- sum over the taps of y's dim d gathered at tap.idx and weighed by tap.w
local function apply_taps(y, d, taps)
  local shape = {}
  for i = 1, y:dim() do shape[i] = 1 end
  shape[d] = #taps[1].idx
  local out
  for _, tap in ipairs(taps) do
    local w = torch.tensor(tap.w, { dtype = y.dtype, device = y.device }):view(shape)
    local term = y:index_select(d, index_tensor(tap.idx, y.device)) * w
    out = out and out + term or term
  end
  return out
end

-- interpolate(x, {size= | scale_factor=, mode='nearest', align_corners=nil,
-- recompute_scale_factor=false}) of [N, C, L], [N, C, H, W] or [N, C, D, H, W], PyTorch
-- 1.13's values and gradients:
--   'nearest'        the source index floor(j * scale) in float32 (PyTorch's; its 2-D and 3-D
--                    kernels copy an output as long as the input, and repeat each element
--                    twice for one twice as long);
--   'nearest-exact'  floor((j + 0.5) * scale), rounding half up (scikit-image's, PIL's);
--   'linear', 'bilinear', 'trilinear' (3, 4, 5-D inputs), 'bicubic' (4-D: PyTorch's cubic
--                    convolution, A = -0.75, with the input's border repeated), with
--                    align_corners;
--   'area'           adaptive average pooling to the output size.
-- The interpolating modes are separable: one dim after the other, each output position a
-- weighed sum of 2 (linear) or 4 (cubic) gathered input slices, so autograd differentiates
-- them on every device.
function F.interpolate(x, opts)
  local who = 'interpolate'
  check(who, x)
  local o = utils.options(who, opts, { size = false, scale_factor = false, mode = 'nearest', align_corners = NONE,
                                       recompute_scale_factor = false })
  local mode = o.mode
  local need = INTERP_MODES[mode]
  if need == nil then
    utils.error(("%s: mode must be 'nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear' or 'area', got %s")
      :format(who, tostring(mode)))
  end
  if x:dim() < 3 or x:dim() > 5 then
    utils.error(('%s: expected a 3-D, 4-D or 5-D input ([N, C, L], [N, C, H, W] or [N, C, D, H, W]), got shape %s')
      :format(who, utils.shape(x)))
  end
  local nsp = x:dim() - 2
  if need > 0 and need ~= nsp then
    utils.error(("%s: got a %d-D input of shape %s, but mode '%s' needs a %d-D input %s")
      :format(who, x:dim(), utils.shape(x), mode, need + 2, INTERP_SHAPES[need]))
  end
  local interpolating = need > 0
  if o.align_corners ~= nil and not interpolating then
    utils.error(('%s: align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear')
      :format(who))
  end
  local align = o.align_corners and true or false
  if (o.size and o.scale_factor) or not (o.size or o.scale_factor) then
    utils.error(('%s: give exactly one of size and scale_factor'):format(who))
  end
  local out, scales = {}, {}
  for i = 1, nsp do
    local n = x:size(i + 2)
    if o.size then
      out[i] = select(i, pair(who, 'size', o.size, nsp))
    else
      local sf = o.scale_factor
      if type(sf) == 'table' then
        if #sf ~= nsp then
          utils.error(('%s: scale_factor must be a number or a table of %d numbers (one per spatial dim), got a table of %d')
            :format(who, nsp, #sf))
        end
        sf = sf[i]
      end
      if type(sf) ~= 'number' or not (sf > 0 and sf < math.huge) then
        utils.error(('%s: scale_factor must be a finite positive number or a table of %d, got %s')
          :format(who, nsp, tostring(sf)))
      end
      out[i] = math.floor(n * sf)
      if out[i] < 1 then utils.error(('%s: the output size along dim %d would be %d'):format(who, i + 2, out[i])) end
      if not o.recompute_scale_factor then scales[i] = sf end
    end
    -- checked before the loops below, which walk every output position
    if out[i] > MAX_INTERP_SIZE then
      utils.error(('%s: the output size along dim %d would be %.0f, more than the %d dplua interpolates to')
        :format(who, i + 2, out[i], MAX_INTERP_SIZE))
    end
    out[i] = math.tointeger(out[i])
  end
  if mode == 'area' then
    if nsp == 1 then return F.adaptive_avg_pool1d(x, out[1]) end
    if nsp == 2 then return F.adaptive_avg_pool2d(x, out) end
    return F.adaptive_avg_pool3d(x, out)
  end
  local y = x
  for i = 1, nsp do
    local d, n, m = i + 2, x:size(i + 2), out[i]
    if interpolating then
      local scale
      if align then scale = m > 1 and (n - 1) / (m - 1) or 0
      else scale = scales[i] and 1 / scales[i] or n / m end
      y = apply_taps(y, d, interp_taps(n, m, align, scale, mode == 'bicubic'))
    elseif mode == 'nearest-exact' then
      -- PyTorch's min(floorf((j + 0.5) * scale), n - 1), the scale in float32, the product
      -- in double and rounded to float32 before the floor
      local idx = {}
      local scale = to_float32(scales[i] and 1 / scales[i] or n / m)
      for j = 0, m - 1 do idx[j + 1] = math.min(math.floor(to_float32((j + 0.5) * scale)), n - 1) + 1 end
      y = y:index_select(d, index_tensor(idx, x.device))
    elseif m ~= n or (scales[i] and nsp == 1) then
      -- PyTorch's source index floor(j * scale) in float32, scale = 1 / scale_factor when
      -- one was given and is not recomputed (1.7 over 5 elements gives 8 that repeat
      -- 1 1 2 2 3 3 4 5, and 1.3 over 2 gives 1 1), else input size / output size.
      -- PyTorch 1.13's 2-D and 3-D kernels take two shortcuts that its 1-D kernel does
      -- not: an output as long as the input copies it, one twice as long repeats each
      -- element twice
      local idx = {}
      local scale = to_float32(scales[i] and 1 / scales[i] or n / m)
      for j = 0, m - 1 do
        local s = (nsp >= 2 and m == 2 * n) and j // 2 or math.floor(to_float32(j * scale))
        idx[j + 1] = math.min(s, n - 1) + 1
      end
      y = y:index_select(d, index_tensor(idx, x.device))
    end
  end
  return rawequal(y, x) and x:clone() or y   -- the same size: a new tensor, as PyTorch
end

function F.upsample(x, opts) return F.interpolate(x, opts) end

end
