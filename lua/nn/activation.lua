-- The activation modules of sequence models and transformers: nn.GELU, nn.SiLU,
-- nn.LeakyReLU, nn.ELU, nn.Softplus, nn.Mish, nn.Hardtanh, nn.ReLU6, nn.Softmax and
-- nn.LogSoftmax.  Each calls its functional form (lua/nn/functional_layers.lua) and prints
-- as PyTorch's does (GELU(approximate='none'), LeakyReLU(negative_slope=0.01) ...).
-- Options are positional as in PyTorch or one table: nn.LeakyReLU(0.2), nn.LeakyReLU{negative_slope=0.2}.
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
-- positionally or from one options table, kept as fields; forward is fn(x, values...).
local function activation(name, params, fn, repr)
  local class, parent = torch.class('nn.' .. name, 'nn.Module')
  function class:__init(first, ...)
    parent.__init(self)
    local who = 'nn.' .. name
    if type(first) == 'table' and getmetatable(first) == nil then
      local defaults = {}
      for _, p in ipairs(params) do   -- false: no default
        local d = p[2]
        if d == nil then d = false end
        defaults[p[1]] = d
      end
      defaults.inplace = false
      local o = utils.options(who, first, defaults)
      for _, p in ipairs(params) do
        local v = o[p[1]]
        if v == false and p[2] == nil then v = nil end
        self[p[1]] = v
      end
    else
      local args = { first, ... }
      if #args > #params and not (#args == #params + 1 and type(args[#args]) == 'boolean') then
        utils.error(('%s: expected at most %d arguments, got %d'):format(who, #params, #args))
      end
      for i, p in ipairs(params) do
        local v = args[i]
        if v == nil then v = p[2] end
        self[p[1]] = v
      end
    end
    for _, p in ipairs(params) do
      local v, want = self[p[1]], type(p[2])
      if p[3] then p[3](who, v) elseif type(v) ~= want then
        utils.error(('%s: %s must be a %s, got %s'):format(who, p[1], want, tostring(v)))
      end
    end
  end
  function class:forward(x)
    local args = {}
    for i, p in ipairs(params) do args[i] = self[p[1]] end
    return fn(x, table.unpack(args, 1, #params))
  end
  function class:extra_repr() return repr and repr(self) or '' end
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
activation('SiLU', {}, F.silu)
activation('Mish', {}, F.mish)
activation('LeakyReLU', { { 'negative_slope', 0.01 } }, F.leaky_relu,
  function(self) return 'negative_slope=' .. pyfloat(self.negative_slope) end)
activation('ELU', { { 'alpha', 1.0 } }, F.elu, function(self) return 'alpha=' .. pyfloat(self.alpha) end)
activation('Softplus', { { 'beta', 1 }, { 'threshold', 20 } }, F.softplus,
  function(self) return ('beta=%s, threshold=%s'):format(tostring(self.beta), tostring(self.threshold)) end)
activation('Hardtanh', { { 'min_val', -1.0 }, { 'max_val', 1.0 } }, F.hardtanh,
  function(self) return ('min_val=%s, max_val=%s'):format(pyfloat(self.min_val), pyfloat(self.max_val)) end)
activation('ReLU6', {}, F.relu6)
activation('Softmax', { { 'dim', nil, check_dim } }, F.softmax, function(self) return 'dim=' .. self.dim end)
activation('LogSoftmax', { { 'dim', nil, check_dim } }, F.log_softmax, function(self) return 'dim=' .. self.dim end)

return M
