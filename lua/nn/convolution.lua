-- Convolution: nn.functional's conv1d, conv2d, conv_transpose1d, conv_transpose2d (one
-- engine call each, after the arguments are read as PyTorch reads them), conv3d and
-- conv_transpose3d (composed of the 2-D ones) and nn._ConvNd, the base of nn.Conv1d,
-- nn.Conv2d, nn.Conv3d and the transposed layers (PyTorch's _ConvNd: the
-- arguments, the parameters with PyTorch's shapes and initialisation, the repr).
local torch = require 'torch'
local C = require 'torch._C'
local Parameter = require 'nn.Parameter'
local utils = require 'nn.utils'
require 'nn.Module'

local M = {}

local function is_int(v) return math.type(v) == 'integer' or (type(v) == 'number' and v == math.floor(v) and v == v) end

-- A size argument as a table of nd integers: a number repeats, a table must have nd.
local function tuple(who, what, v, nd)
  if type(v) == 'number' and is_int(v) then
    local t = {}
    for i = 1, nd do t[i] = math.tointeger(v) end
    return t
  end
  if type(v) == 'table' and #v == nd then
    local t = {}
    for i = 1, nd do
      if not is_int(v[i]) then break end
      t[i] = math.tointeger(v[i])
    end
    if #t == nd then return t end
  end
  local shown = tostring(v)
  if type(v) == 'table' then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = tostring(x) end
    shown = '{' .. table.concat(parts, ', ') .. '}'
  end
  utils.error(('%s: %s must be an integer or a table of %d integers, got %s'):format(who, what, nd, shown))
end
M.tuple = tuple

-- The padding on each side of each dim: a number, a table, 'valid' or 'same' (stride 1
-- only; an even span puts the extra element after, as PyTorch does).
local function padding(who, p, nd, kernel, stride, dilation)
  if type(p) == 'string' then
    if p == 'valid' then return tuple(who, 'padding', 0, nd), tuple(who, 'padding', 0, nd) end
    if p ~= 'same' then
      utils.error(("%s: invalid padding string '%s', should be one of 'valid', 'same'"):format(who, p))
    end
    for d = 1, nd do
      if stride[d] ~= 1 then utils.error(("%s: padding='same' is not supported for strided convolutions"):format(who)) end
    end
    local lo, hi = {}, {}
    for d = 1, nd do
      local total = dilation[d] * (kernel[d] - 1)
      lo[d] = total // 2
      hi[d] = total - lo[d]
    end
    return lo, hi
  end
  local t = tuple(who, 'padding', p, nd)
  return t, t
end

-- The engine's convolutions are 1-D and 2-D; a 3-D one is composed of a 2-D one:
--   conv3d: the depth taps of every output depth gathered into the channels
--     ([N * Do, groups * kd * C/groups, H, W], the input copied kd / stride times) and
--     convolved over H, W in one call with the weight [out, kd * C/groups, kh, kw], the same
--     multiply-adds as a direct 3-D kernel;
--   conv_transpose3d: every input depth through one 2-D transposed convolution that yields
--     all kd depth taps as channels, the taps then summed into their output depths
--     (index_add), and the result cropped by the padding.
-- Autograd differentiates the gathers, the permutes and the 2-D convolution, so the
-- gradients of the input, the weight and the bias come from the engine's 2-D kernels.
local function conv3d_by_planes(who, x, weight, bias, groups, transposed, stride, lo, hi, dilation, outpad)
  if x:dim() ~= 4 and x:dim() ~= 5 then
    utils.error(('%s: expected a 4-D (unbatched [C, D, H, W]) or 5-D ([N, C, D, H, W]) input, got shape %s')
      :format(who, utils.shape(x)))
  end
  local unbatched = x:dim() == 4
  if unbatched then x = x:unsqueeze(1) end
  local N, Cin, D, H, W = x:size(1), x:size(2), x:size(3), x:size(4), x:size(5)
  local w1, w2, kd, kh, kw = weight:size(1), weight:size(2), weight:size(3), weight:size(4), weight:size(5)
  local g = groups
  if g < 1 then utils.error(('%s: non-positive groups is not supported, got %d'):format(who, g)) end
  local cin_w = transposed and w1 or w2 * g
  if Cin ~= cin_w or (transposed and w1 % g ~= 0) or (not transposed and w1 % g ~= 0) then
    utils.error(('%s: given groups=%d and weight of size %s, expected input %s to have %d channels, but got %d channels instead')
      :format(who, g, utils.shape(weight), utils.shape(x), cin_w, Cin))
  end
  if bias ~= nil then
    local cout = transposed and w2 * g or w1
    if bias:dim() ~= 1 or bias:size(1) ~= cout then
      utils.error(('%s: expected a bias of %d elements, got shape %s'):format(who, cout, utils.shape(bias)))
    end
  end
  local function idx_tensor(list) return torch.tensor(list, { dtype = 'int64', device = x.device }) end
  local sd, dd = stride[1], dilation[1]
  local hw = function(t) return { t[2], t[3] } end
  local y
  if not transposed then
    local Cout, cg = w1, w2
    local span = dd * (kd - 1) + 1
    local Dp = D + lo[1] + hi[1]
    if Dp < span then
      utils.error(('%s: the padded input depth %d is smaller than the kernel\'s depth span %d (input %s, weight %s)')
        :format(who, Dp, span, utils.shape(x), utils.shape(weight)))
    end
    if lo[1] > 0 or hi[1] > 0 then
      x = require('nn.functional').pad(x, { 0, 0, 0, 0, lo[1], hi[1] })
    end
    local Do = (Dp - span) // sd + 1
    local idx = {}
    for o = 0, Do - 1 do
      for a = 0, kd - 1 do idx[#idx + 1] = o * sd + a * dd + 1 end
    end
    local xs = x:index_select(3, idx_tensor(idx))                        -- [N, Cin, Do * kd, H, W]
      :view(N, g, cg, Do, kd, H, W):permute(1, 4, 2, 5, 3, 6, 7):reshape(N * Do, g * kd * cg, H, W)
    local wt = weight:permute(1, 3, 2, 4, 5):reshape(Cout, kd * cg, kh, kw)
    local z = C.conv(xs, wt, bias, who, g, false, hw(stride), hw(lo), hw(hi), hw(dilation), { 0, 0 })
    y = z:view(N, Do, Cout, z:size(3), z:size(4))
  else
    local cig, cog = w1 // g, w2
    local Cout = cog * g
    local p, op = lo[1], outpad[1]
    if op >= sd and op >= dd then
      utils.error(('%s: output padding must be smaller than either stride or dilation, got output_padding %d, stride %d, dilation %d')
        :format(who, op, sd, dd))
    end
    local Dfull = (D - 1) * sd + dd * (kd - 1) + 1
    local Do = Dfull - 2 * p + op
    if Do < 1 then
      utils.error(('%s: the output depth would be %d (input %s, weight %s, padding %d)')
        :format(who, Do, utils.shape(x), utils.shape(weight), p))
    end
    local xs = x:permute(1, 3, 2, 4, 5):reshape(N * D, Cin, H, W)
    local wt = weight:view(g, cig, cog, kd, kh, kw):permute(1, 2, 4, 3, 5, 6):reshape(Cin, kd * cog, kh, kw)
    local z = C.conv(xs, wt, nil, who, g, true, hw(stride), hw(lo), hw(hi), hw(dilation), hw(outpad))
    local Ho, Wo = z:size(3), z:size(4)
    z = z:view(N, D, g, kd, cog, Ho, Wo):permute(1, 2, 4, 3, 5, 6, 7):reshape(N, D * kd, Cout, Ho, Wo)
    local idx = {}
    for i = 0, D - 1 do
      for a = 0, kd - 1 do idx[#idx + 1] = i * sd + a * dd + 1 end
    end
    local full = torch.zeros({ N, math.max(Dfull, p + Do), Cout, Ho, Wo }, { dtype = z.dtype, device = z.device })
    y = full:index_add(2, idx_tensor(idx), z):narrow(2, p + 1, Do)
    if bias ~= nil then y = y + bias:view(1, 1, Cout, 1, 1) end
  end
  y = y:permute(1, 3, 2, 4, 5):contiguous()                             -- [N, Cout, Do, Ho, Wo]
  if unbatched then y = y:squeeze(1) end
  return y
end

-- F.convNd(input, weight, bias, {stride=, padding=, dilation=, groups=}) and
-- F.conv_transposeNd(... {stride=, padding=, output_padding=, groups=, dilation=}): the
-- signature rows of lua/torch/signatures.lua read PyTorch's positional and keyword forms
-- and call these with one options table; the layers call them the same way.
local function conv(nd, transposed)
  local who = (transposed and 'conv_transpose%dd' or 'conv%dd'):format(nd)
  local defaults = { stride = 1, padding = 0, dilation = 1, groups = 1 }
  if transposed then defaults.output_padding = 0 end
  return function(x, weight, bias, opts)
    utils.check_tensor(who, x, 'input')
    utils.check_tensor(who, weight, 'weight')
    if bias ~= nil then utils.check_tensor(who, bias, 'bias') end
    local o = utils.options(who, opts, defaults)
    if weight:dim() ~= nd + 2 then
      utils.error(('%s: expected a %dD weight, but got weight of size %s'):format(who, nd + 2, utils.shape(weight)))
    end
    local kernel = {}
    for d = 1, nd do kernel[d] = weight:size(2 + d) end
    local stride = tuple(who, 'stride', o.stride, nd)
    local dilation = tuple(who, 'dilation', o.dilation, nd)
    if transposed and type(o.padding) == 'string' then
      utils.error(('%s: padding must be an integer or a table of %d integers, got %s'):format(who, nd, o.padding))
    end
    local lo, hi = padding(who, o.padding, nd, kernel, stride, dilation)
    local outpad = tuple(who, 'output_padding', o.output_padding or 0, nd)
    if not is_int(o.groups) then utils.error(('%s: groups must be an integer, got %s'):format(who, tostring(o.groups))) end
    if nd == 3 then
      return conv3d_by_planes(who, x, weight, bias, math.tointeger(o.groups), transposed, stride, lo, hi, dilation, outpad)
    end
    return C.conv(x, weight, bias, who, math.tointeger(o.groups), transposed, stride, lo, hi, dilation, outpad)
  end
end

M.functional = {
  conv1d = conv(1, false), conv2d = conv(2, false),
  conv_transpose1d = conv(1, true), conv_transpose2d = conv(2, true),
  conv3d = conv(3, false), conv_transpose3d = conv(3, true),
}

-- ---------------------------------------------------------------- nn._ConvNd

local ConvNd, parent = torch.class('nn._ConvNd', 'nn.Module')

-- Python's repr of a tuple: (3,) or (3, 3).
local function pytuple(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = tostring(v) end
  return '(' .. table.concat(s, ', ') .. (#t == 1 and ',)' or ')')
end

local function all(t, v)
  for _, x in ipairs(t) do if x ~= v then return false end end
  return true
end

-- The constructor of every convolution layer: nd spatial dims, transposed or not.
-- PyTorch's positional arguments after kernel_size, in its order
local PADDING_MODES = { zeros = true, reflect = true, replicate = true, circular = true }
local POSITIONAL = { 'stride', 'padding', 'dilation', 'groups', 'bias', 'padding_mode' }
local POSITIONAL_TRANSPOSED = { 'stride', 'padding', 'output_padding', 'groups', 'bias', 'dilation', 'padding_mode' }

function ConvNd:__init(who, nd, transposed, in_channels, out_channels, kernel_size, ...)
  parent.__init(self)
  local opts
  if type(kernel_size) == 'table' and getmetatable(kernel_size) == nil and kernel_size[1] == nil
      and select('#', ...) == 0 then
    -- PyTorch's nn.Conv2d(1, 10, kernel_size=5) as nn.Conv2d(1, 10, {kernel_size = 5})
    opts = {}
    for k, v in pairs(kernel_size) do opts[k] = v end
    kernel_size, opts.kernel_size = opts.kernel_size, nil
    if kernel_size == nil then utils.error(('%s: kernel_size is required'):format(who)) end
  else
    opts = utils.positional(who, transposed and POSITIONAL_TRANSPOSED or POSITIONAL, ...)
  end
  local defaults = { stride = 1, padding = 0, dilation = 1, groups = 1, bias = true, padding_mode = 'zeros',
                     device = false, dtype = false }
  if transposed then defaults.output_padding = 0 end
  local o = utils.options(who, opts, defaults)
  for what, v in pairs { in_channels = in_channels, out_channels = out_channels } do
    if math.type(v) ~= 'integer' or v < 0 then
      local hint = math.type(v) == 'float' and v == math.floor(v) and v >= 0
        and " (Lua's ^ and / give floats: write n * n, n // 2 or math.tointeger(x))" or ''
      utils.error(('%s: %s must be a non-negative integer, got %s%s'):format(who, what, tostring(v), hint))
    end
  end
  if math.type(o.groups) ~= 'integer' or o.groups <= 0 then
    utils.error(('%s: groups must be a positive integer, got %s'):format(who, tostring(o.groups)))
  end
  if in_channels % o.groups ~= 0 then
    utils.error(('%s: in_channels must be divisible by groups (%d and %d)'):format(who, in_channels, o.groups))
  end
  if out_channels % o.groups ~= 0 then
    utils.error(('%s: out_channels must be divisible by groups (%d and %d)'):format(who, out_channels, o.groups))
  end
  if not PADDING_MODES[o.padding_mode] then
    utils.error(("%s: padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular', but got %s")
      :format(who, tostring(o.padding_mode)))
  end
  if transposed and o.padding_mode ~= 'zeros' then
    utils.error(("%s: only padding_mode 'zeros' is supported for the transposed convolutions, got '%s'")
      :format(who, o.padding_mode))
  end
  self.in_channels, self.out_channels, self.groups = in_channels, out_channels, o.groups
  self.kernel_size = tuple(who, 'kernel_size', kernel_size, nd)
  self.stride = tuple(who, 'stride', o.stride, nd)
  self.dilation = tuple(who, 'dilation', o.dilation, nd)
  if transposed and type(o.padding) == 'string' then
    utils.error(('%s: padding must be an integer or a table of %d integers, got %s'):format(who, nd, o.padding))
  end
  local lo, hi = padding(who, o.padding, nd, self.kernel_size, self.stride, self.dilation)   -- checks it
  -- F.pad's (left, right) pairs from the last dim backwards, for the padding modes other
  -- than 'zeros' (PyTorch's _reversed_padding_repeated_twice)
  self._reversed_padding_repeated_twice = {}
  for d = nd, 1, -1 do
    local t = self._reversed_padding_repeated_twice
    t[#t + 1], t[#t + 2] = lo[d], hi[d]
  end
  self.padding = type(o.padding) == 'string' and o.padding or tuple(who, 'padding', o.padding, nd)
  self.output_padding = tuple(who, 'output_padding', o.output_padding or 0, nd)
  self.transposed, self.padding_mode, self._nd = transposed, o.padding_mode, nd
  local wshape = transposed and { in_channels, out_channels // o.groups } or { out_channels, in_channels // o.groups }
  for d = 1, nd do wshape[2 + d] = self.kernel_size[d] end
  local topts = { device = o.device or nil, dtype = o.dtype or nil }
  self.weight = Parameter(torch.empty(wshape, topts))
  if o.bias then self.bias = Parameter(torch.empty(out_channels, topts)) end
  self:reset_parameters()
end

-- PyTorch's kaiming_uniform_(a = sqrt(5)) on the weight, which is U(-b, b) with
-- b = 1/sqrt(fan_in), fan_in = weight:size(2) * the kernel's taps; the bias the same.
function ConvNd:reset_parameters()
  local fan_in = self.weight:size(2)
  for _, k in ipairs(self.kernel_size) do fan_in = fan_in * k end
  local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
  torch.no_grad(function()
    self.weight:uniform_(-bound, bound)
    if self.bias ~= nil then self.bias:uniform_(-bound, bound) end
  end)
end

function ConvNd:_conv_opts()
  local o = { stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups }
  if self.transposed then o.output_padding = self.output_padding end
  return o
end

-- With a padding_mode other than 'zeros', as PyTorch: the input padded by F.pad in that
-- mode ('reflect', 'replicate' or 'circular'), then convolved without padding.
function ConvNd:forward(x)
  local f = M.functional[(self.transposed and 'conv_transpose%dd' or 'conv%dd'):format(self._nd)]
  local opts = self:_conv_opts()
  if self.padding_mode ~= 'zeros' then
    utils.check_tensor(torch.typename(self), x, 'input')
    x = require('nn.functional').pad(x, self._reversed_padding_repeated_twice, self.padding_mode)
    opts.padding = 0
  end
  return f(x, self.weight, self.bias, opts)
end

function ConvNd:extra_repr()
  local s = ('%d, %d, kernel_size=%s, stride=%s'):format(self.in_channels, self.out_channels, pytuple(self.kernel_size),
    pytuple(self.stride))
  if type(self.padding) == 'string' then s = s .. ', padding=' .. self.padding
  elseif not all(self.padding, 0) then s = s .. ', padding=' .. pytuple(self.padding) end
  if not all(self.dilation, 1) then s = s .. ', dilation=' .. pytuple(self.dilation) end
  if not all(self.output_padding, 0) then s = s .. ', output_padding=' .. pytuple(self.output_padding) end
  if self.groups ~= 1 then s = s .. ', groups=' .. self.groups end
  if self.bias == nil then s = s .. ', bias=False' end
  if self.padding_mode ~= 'zeros' then s = s .. ', padding_mode=' .. self.padding_mode end
  return s
end

M.ConvNd = ConvNd
return M
