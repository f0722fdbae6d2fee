-- nn.init: PyTorch 1.13's weight initializers.  Each fills its tensor in place (without
-- recording autograd history) and returns it:
--
--   nn.init.kaiming_uniform_(layer.weight, {a = math.sqrt(5)})
--   nn.init.xavier_normal_(w, nn.init.calculate_gain('tanh'))
--   nn.init.zeros_(layer.bias)
--
-- Settings come in PyTorch's order or by name in a last options table.  Fans are PyTorch's:
-- for a weight [out, in, k1, k2 ...], fan_in = in * k1 * k2 ..., fan_out = out * k1 * k2 ...
-- (this file is nn.init; lua/nn/init.lua is the loader of the nn package itself).
local torch = require 'torch'
local utils = require 'nn.utils'
local options = require 'torch.options'

local init = {}

local function fail(fmt, ...) utils.error(fmt:format(...)) end

-- positional values in the order of names, then an optional options table
local function args(who, names, defaults, ...)
  local a = table.pack(...)
  local n, given = a.n, {}
  if n > 0 and type(a[n]) == 'table' and getmetatable(a[n]) == nil then
    for k, v in pairs(a[n]) do given[k] = v end
    n = n - 1
  end
  if n > #names then fail('%s: expected at most %d settings after the tensor, got %d', who, #names, n) end
  for i = 1, n do
    if a[i] ~= nil then given[names[i]] = a[i] end
  end
  return options.check(who, given, defaults)
end

local function tensor_arg(who, t)
  if not torch.is_tensor(t) then fail('%s: expected a tensor, got %s', who, type(t)) end
  return t
end

local function float_arg(who, t)
  tensor_arg(who, t)
  if not torch.FLOAT_DTYPES[t.dtype] then
    fail('%s: expected a floating point tensor, got %s', who, t.dtype)
  end
  return t
end

local function number(who, name, v)
  if type(v) ~= 'number' then fail('%s: %s must be a number, got %s', who, name, tostring(v)) end
  return v
end

local function no_grad(fn) return torch.no_grad(fn) end

-- ---------------------------------------------------------------- gains and fans

local LINEAR = {
  linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
  conv_transpose2d = true, conv_transpose3d = true, sigmoid = true,
}

-- calculate_gain(nonlinearity [, param]): the recommended gain for a nonlinearity
function init.calculate_gain(nonlinearity, param)
  local who = 'nn.init.calculate_gain'
  if LINEAR[nonlinearity] then return 1 end
  if nonlinearity == 'tanh' then return 5.0 / 3 end
  if nonlinearity == 'relu' then return math.sqrt(2.0) end
  if nonlinearity == 'leaky_relu' then
    local slope = 0.01
    if param ~= nil then
      if type(param) ~= 'number' then
        fail('%s: negative_slope %s not a valid number', who, tostring(param))
      end
      slope = param
    end
    return math.sqrt(2.0 / (1 + slope ^ 2))
  end
  if nonlinearity == 'selu' then return 3.0 / 4 end
  fail('%s: Unsupported nonlinearity %s', who, options.show(nonlinearity))
end

-- fan_in, fan_out of a weight with at least 2 dimensions
function init._calculate_fan_in_and_fan_out(t, who)
  who = who or 'nn.init'
  if t:dim() < 2 then
    fail('%s: Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (got %s)', who, utils.shape(t))
  end
  local receptive = 1
  for d = 3, t:dim() do receptive = receptive * t:size(d) end
  return t:size(2) * receptive, t:size(1) * receptive
end

local function fan(who, t, mode)
  if mode ~= 'fan_in' and mode ~= 'fan_out' then
    fail("%s: Mode %s not supported, please use one of 'fan_in', 'fan_out'", who, options.show(mode))
  end
  local fin, fout = init._calculate_fan_in_and_fan_out(t, who)
  return mode == 'fan_in' and fin or fout
end

-- ---------------------------------------------------------------- fills

function init.uniform_(t, ...)
  local who = 'nn.init.uniform_'
  local o = args(who, { 'a', 'b' }, { a = 0.0, b = 1.0 }, ...)
  float_arg(who, t)
  return no_grad(function() return t:uniform_(number(who, 'a', o.a), number(who, 'b', o.b)) end)
end

function init.normal_(t, ...)
  local who = 'nn.init.normal_'
  local o = args(who, { 'mean', 'std' }, { mean = 0.0, std = 1.0 }, ...)
  float_arg(who, t)
  return no_grad(function() return t:normal_(number(who, 'mean', o.mean), number(who, 'std', o.std)) end)
end

function init.constant_(t, val)
  tensor_arg('nn.init.constant_', t)
  number('nn.init.constant_', 'val', val)
  return no_grad(function() return t:fill_(val) end)
end

function init.zeros_(t)
  tensor_arg('nn.init.zeros_', t)
  return no_grad(function() return t:zero_() end)
end

function init.ones_(t)
  tensor_arg('nn.init.ones_', t)
  return no_grad(function() return t:fill_(1) end)
end

-- the identity in a 2-D tensor (ones on the diagonal)
function init.eye_(t)
  tensor_arg('nn.init.eye_', t)
  if t:dim() ~= 2 then fail('nn.init.eye_: Only tensors with 2 dimensions are supported, got %s', utils.shape(t)) end
  return no_grad(function()
    return t:copy_(torch.eye(t:size(1), t:size(2), { dtype = t.dtype, device = t.device }))
  end)
end

-- the Dirac delta in a convolution weight [out, in, k...]: output channel i of each group
-- passes input channel i through unchanged
function init.dirac_(t, groups)
  local who = 'nn.init.dirac_'
  tensor_arg(who, t)
  groups = groups or 1
  local nd = t:dim()
  if nd < 3 or nd > 5 then fail('%s: Only tensors with 3, 4, or 5 dimensions are supported, got %s', who, utils.shape(t)) end
  if math.type(groups) ~= 'integer' or groups < 1 or t:size(1) % groups ~= 0 then
    fail('%s: dim 1 (%d) is not divisible by groups (%s)', who, t:size(1), tostring(groups))
  end
  local out_per = t:size(1) // groups
  local m = math.min(out_per, t:size(2))
  local host = torch.zeros(t:size(), { dtype = t.dtype })
  return no_grad(function()
    for g = 0, groups - 1 do
      for d = 1, m do
        local v = host:select(1, g * out_per + d):select(1, d)
        for k = 3, nd do v = v:select(1, (t:size(k) - 1) // 2 + 1) end
        v:fill_(1)
      end
    end
    return t:copy_(host:to(t.device))
  end)
end

-- ---------------------------------------------------------------- Xavier (Glorot), Kaiming (He)

function init.xavier_uniform_(t, ...)
  local who = 'nn.init.xavier_uniform_'
  local o = args(who, { 'gain' }, { gain = 1.0 }, ...)
  float_arg(who, t)
  local fin, fout = init._calculate_fan_in_and_fan_out(t, who)
  local a = math.sqrt(3.0) * number(who, 'gain', o.gain) * math.sqrt(2.0 / (fin + fout))
  return no_grad(function() return t:uniform_(-a, a) end)
end

function init.xavier_normal_(t, ...)
  local who = 'nn.init.xavier_normal_'
  local o = args(who, { 'gain' }, { gain = 1.0 }, ...)
  float_arg(who, t)
  local fin, fout = init._calculate_fan_in_and_fan_out(t, who)
  local std = number(who, 'gain', o.gain) * math.sqrt(2.0 / (fin + fout))
  return no_grad(function() return t:normal_(0, std) end)
end

local KAIMING = { a = 0, mode = 'fan_in', nonlinearity = 'leaky_relu' }

local function kaiming_std(who, t, o)
  local f = fan(who, t, o.mode)
  if f == 0 then fail('%s: Initializing zero-element tensors is a no-op', who) end
  return init.calculate_gain(o.nonlinearity, number(who, 'a', o.a)) / math.sqrt(f)
end

-- kaiming_uniform_(t [, a=0, mode='fan_in', nonlinearity='leaky_relu']): U(-bound, bound),
-- bound = gain * sqrt(3 / fan)
function init.kaiming_uniform_(t, ...)
  local who = 'nn.init.kaiming_uniform_'
  local o = args(who, { 'a', 'mode', 'nonlinearity' }, KAIMING, ...)
  float_arg(who, t)
  if t:numel() == 0 then return t end
  local bound = math.sqrt(3.0) * kaiming_std(who, t, o)
  return no_grad(function() return t:uniform_(-bound, bound) end)
end

function init.kaiming_normal_(t, ...)
  local who = 'nn.init.kaiming_normal_'
  local o = args(who, { 'a', 'mode', 'nonlinearity' }, KAIMING, ...)
  float_arg(who, t)
  if t:numel() == 0 then return t end
  local std = kaiming_std(who, t, o)
  return no_grad(function() return t:normal_(0, std) end)
end

-- ---------------------------------------------------------------- orthogonal, truncated normal

-- Q of a (semi-)orthogonal matrix [rows, numel / rows] from normal draws, as PyTorch's QR
-- with R's diagonal made positive; here Gram-Schmidt, each column orthogonalized twice
-- against the ones before it (which is that same Q), in float64.
function init.orthogonal_(t, ...)
  local who = 'nn.init.orthogonal_'
  local o = args(who, { 'gain' }, { gain = 1.0 }, ...)
  float_arg(who, t)
  if t:dim() < 2 then fail('%s: Only tensors with 2 or more dimensions are supported, got %s', who, utils.shape(t)) end
  if t:numel() == 0 then return t end
  local rows = t:size(1)
  local cols = t:numel() // rows
  return no_grad(function()
    local a = torch.empty({ rows, cols }, { dtype = t.dtype, device = t.device }):normal_(0, 1):to('float64')
    if rows < cols then a = a:t() end
    local m, n = a:size(1), a:size(2)
    local q = torch.zeros({ m, n }, { dtype = 'float64', device = t.device })
    for j = 1, n do
      local v = a:select(2, j)
      if j > 1 then
        local prev = q:narrow(2, 1, j - 1)
        for _ = 1, 2 do v = v - prev:mv(prev:t():mv(v)) end
      end
      q:select(2, j):copy_(v / v:norm())
    end
    if rows < cols then q = q:t() end
    return t:copy_((q * number(who, 'gain', o.gain)):reshape(t:size()))
  end)
end

-- trunc_normal_(t [, mean=0, std=1, a=-2, b=2]): normal draws redrawn until they lie in
-- [a, b] (a and b are values, not multiples of std, as PyTorch)
function init.trunc_normal_(t, ...)
  local who = 'nn.init.trunc_normal_'
  local o = args(who, { 'mean', 'std', 'a', 'b' }, { mean = 0.0, std = 1.0, a = -2.0, b = 2.0 }, ...)
  float_arg(who, t)
  local mean, std, a, b = number(who, 'mean', o.mean), number(who, 'std', o.std), number(who, 'a', o.a), number(who, 'b', o.b)
  if not (a < b) then fail('%s: expected a < b, got a=%g and b=%g', who, a, b) end
  return no_grad(function()
    local x = torch.empty(t:size(), { dtype = t.dtype, device = t.device }):normal_(mean, std)
    for _ = 1, 1000 do
      local out = x:lt(a) + x:gt(b)
      if not out:any():item() then return t:copy_(x) end
      x = torch.where(out, torch.empty_like(x):normal_(mean, std), x)
    end
    -- [a, b] far in a tail: what is left is clamped (PyTorch's inverse CDF clamps too)
    return t:copy_(x:clamp(a, b))
  end)
end

-- sparse_(t, sparsity [, std=0.01]): a 2-D t drawn from N(0, std), then in each column
-- ceil(sparsity * rows) entries, chosen at random, set to zero (Martens 2010)
function init.sparse_(t, ...)
  local who = 'nn.init.sparse_'
  float_arg(who, t)
  local o = args(who, { 'sparsity', 'std' }, { sparsity = utils.required, std = 0.01 }, ...)
  local sparsity, std = number(who, 'sparsity', o.sparsity), number(who, 'std', o.std)
  if t:dim() ~= 2 then fail('%s: Only tensors with 2 dimensions are supported, got shape %s', who, utils.shape(t)) end
  if sparsity < 0 or sparsity > 1 then fail('%s: sparsity must be between 0 and 1, got %s', who, tostring(sparsity)) end
  local rows, cols = t:size(1), t:size(2)
  local zeros = math.ceil(sparsity * rows)
  return no_grad(function()
    t:normal_(0, std)
    if zeros == 0 then return t end
    for c = 1, cols do
      local picked = torch.randperm(rows):narrow(1, 1, zeros)
      t:select(2, c):index_fill_(1, picked:to(t.device), 0)
    end
    return t
  end)
end

return init
