-- The activation modules of sequence models and transformers: nn.GELU, nn.SiLU,
-- nn.LeakyReLU, nn.ELU, nn.Softplus, nn.Mish, nn.Hardtanh, nn.ReLU6, nn.Softmax and
-- nn.LogSoftmax.  Each calls its functional form (lua/nn/functional_layers.lua) and prints
-- as PyTorch's does (GELU(approximate='none'), LeakyReLU(negative_slope=0.01) ...).
-- Options are positional as in PyTorch or one table: nn.LeakyReLU(0.2), nn.LeakyReLU{negative_slope=0.2}.
-- The layers that have PyTorch's inplace (LeakyReLU, ELU, Hardtanh, ReLU6, SiLU, Mish) take it
-- last (nn.ReLU6(true), nn.LeakyReLU(0.2, true), nn.ReLU6{inplace=true}): forward then writes
-- into its input and returns it, and the layer prints inplace=True as PyTorch's.
local torch = require 'torch'
local F = require 'nn.functional'
local utils = require 'nn.utils'

local M = {}

-- Python's repr of a float: 1.0, 0.01, 1e-05 (integral values keep their ".0")
local function pyfloat(v)
  if math.type(v) == 'integer' or (v == math.floor(v) and math.abs(v) < 1e16) then
    return ('%.1f'):format(v)
  end
  return tostring(v)
end
M.pyfloat = pyfloat

-- nn.NAME(args...): the values of `params` (names in order, with defaults) taken
-- positionally or from one options table, kept as fields; forward is fn(x, values...), with
-- self.inplace last when the layer has inplace.  check(who, self), when given, checks the
-- values together.
local function activation(name, params, fn, repr, has_inplace, check)
  local class, parent = torch.class('nn.' .. name, 'nn.Module')
  function class:__init(first, ...)
    parent.__init(self)
    local who = 'nn.' .. name
    local inplace = false
    if type(first) == 'table' and getmetatable(first) == nil then
      local defaults = {}
      for _, p in ipairs(params) do   -- false: no default
        local d = p[2]
        if d == nil then d = false end
        defaults[p[1]] = d
      end
      if has_inplace then defaults.inplace = false end
      local o = utils.options(who, first, defaults)
      for _, p in ipairs(params) do
        local v = o[p[1]]
        if v == false and p[2] == nil then v = nil end
        self[p[1]] = v
      end
      inplace = o.inplace
    else
      local args = table.pack(first, ...)
      local n = args.n
      while n > 0 and args[n] == nil do n = n - 1 end
      local most = #params + (has_inplace and 1 or 0)
      if n > most then
        utils.error(('%s: expected at most %d arguments, got %d'):format(who, most, n))
      end
      for i, p in ipairs(params) do
        local v = args[i]
        if v == nil then v = p[2] end
        self[p[1]] = v
      end
      if has_inplace and args[#params + 1] ~= nil then inplace = args[#params + 1] end
    end
    for _, p in ipairs(params) do
      local v, want = self[p[1]], type(p[2])
      if p[3] then p[3](who, v) elseif type(v) ~= want then
        utils.error(('%s: %s must be a %s, got %s'):format(who, p[1], want, tostring(v)))
      end
    end
    if has_inplace then
      if type(inplace) ~= 'boolean' then utils.error(('%s: inplace must be a boolean, got %s'):format(who, tostring(inplace))) end
      self.inplace = inplace
    end
    if check then check(who, self) end
  end
  function class:forward(x)
    local args = {}
    for i, p in ipairs(params) do args[i] = self[p[1]] end
    if has_inplace then args[#params + 1] = self.inplace end
    return fn(x, table.unpack(args, 1, #params + (has_inplace and 1 or 0)))
  end
  function class:extra_repr()
    local r = repr and repr(self) or ''
    if has_inplace and self.inplace then r = r == '' and 'inplace=True' or r .. ', inplace=True' end
    return r
  end
  M[name] = class
  return class
end

local function check_dim(who, dim)
  if math.type(dim) ~= 'integer' then
    utils.error(('%s: dim must be an integer (1-based), got %s; dplua does not guess a dimension'):format(who, tostring(dim)))
  end
end

activation('GELU', { { 'approximate', 'none', function(who, v)
  if v ~= 'none' and v ~= 'tanh' then
    utils.error(("%s: approximate must be 'none' or 'tanh', got %s"):format(who, tostring(v)))
  end
end } }, F.gelu, function(self) return ("approximate='%s'"):format(self.approximate) end)
activation('SiLU', {}, F.silu, nil, true)
activation('Mish', {}, F.mish, nil, true)
activation('LeakyReLU', { { 'negative_slope', 0.01 } }, F.leaky_relu,
  function(self) return 'negative_slope=' .. pyfloat(self.negative_slope) end, true)
activation('ELU', { { 'alpha', 1.0 } }, F.elu, function(self) return 'alpha=' .. pyfloat(self.alpha) end, true)
activation('Softplus', { { 'beta', 1 }, { 'threshold', 20 } }, F.softplus,
  function(self) return ('beta=%s, threshold=%s'):format(tostring(self.beta), tostring(self.threshold)) end)
-- nn.Hardtanh refuses max_val <= min_val when it is made, as PyTorch's (F.hardtanh does not)
activation('Hardtanh', { { 'min_val', -1.0 }, { 'max_val', 1.0 } }, F.hardtanh,
  function(self) return ('min_val=%s, max_val=%s'):format(pyfloat(self.min_val), pyfloat(self.max_val)) end, true,
  function(who, self)
    if not (self.max_val > self.min_val) then
      utils.error(('%s: max_val (%s) must be greater than min_val (%s)'):format(who, pyfloat(self.max_val), pyfloat(self.min_val)))
    end
  end)
activation('ReLU6', {}, F.relu6, nil, true)
activation('Softmax', { { 'dim', nil, check_dim } }, F.softmax, function(self) return 'dim=' .. self.dim end)
activation('LogSoftmax', { { 'dim', nil, check_dim } }, F.log_softmax, function(self) return 'dim=' .. self.dim end)

return M
