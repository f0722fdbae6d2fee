-- nn.utils.weight_norm(module [, name='weight' [, dim=1]]) or (module, {name=, dim=}):
-- reparametrizes module[name] as g * v / ||v|| (Salimans and Kingma 2016) with the new
-- parameters name_g (the norms, of the size of dim and 1 elsewhere) and name_v (the
-- direction), as PyTorch's.  A forward pre-hook recomputes the weight from them before
-- each forward.  The norm is taken
-- over every dim but dim (1-based); dim=false takes it over the whole tensor.
-- nn.utils.remove_weight_norm(module [, name='weight']) folds it back into one parameter.
local torch = require 'torch'
local Parameter = require 'nn.Parameter'
local utils = require 'nn.utils'

local M = {}

local function fail(fmt, ...) utils.error(fmt:format(...)) end

-- a bad value as an error shows it: numbers and strings as they are, tensors by shape
local function show(v)
  if torch.is_tensor(v) then return 'a tensor of shape ' .. utils.shape(v) end
  if type(v) == 'table' then return 'a table' end
  return tostring(v)
end

-- ||v|| over every dim but d (all of them when d is false), kept as [1, .., n, .., 1]
local function norm_except_dim(v, d)
  if not d then return v:norm() end
  local s = v * v
  for k = 1, v:dim() do
    if k ~= d then s = s:sum(k, true) end
  end
  return s:sqrt()
end

local function compute(module, name, d)
  local g, v = rawget(module, name .. '_g'), rawget(module, name .. '_v')
  return v * (g / norm_except_dim(v, d))
end

local function unregister(module, name)
  rawget(module, '_kind')[name] = nil
  local order = rawget(module, '_order')
  for i, n in ipairs(order) do
    if n == name then table.remove(order, i); break end
  end
  rawset(module, name, nil)
end

function M.weight_norm(module, name, dim)
  local who = 'nn.utils.weight_norm'
  if type(name) == 'table' then
    local o = utils.options(who, name, { name = 'weight', dim = 1 })
    name, dim = o.name, o.dim
  end
  name = name or 'weight'
  if dim == nil then dim = 1 end
  if not (type(module) == 'table' and torch.isinstance(module, 'nn.Module')) then
    fail('%s: expected a module, got %s', who, type(module))
  end
  local kinds = rawget(module, '_kind')
  local w = rawget(module, name)
  if kinds[name] ~= 'parameter' or not torch.is_tensor(w) then
    fail("%s: module %s has no parameter '%s'", who, torch.typename(module) or '?', show(name))
  end
  if rawget(module, '_weight_norm') and rawget(module, '_weight_norm')[name] then
    fail("%s: Cannot register two weight_norm hooks on the same parameter %s", who, name)
  end
  local d = dim
  if d ~= false then
    if math.type(d) ~= 'integer' or d == 0 then fail('%s: dim must be a non-zero integer (1-based) or false, got %s', who, show(dim)) end
    if d < 0 then d = w:dim() + 1 + d end
    if d < 1 or d > w:dim() then
      fail('%s: dim %d is out of range for the %d-D parameter %s (dplua counts dims from 1)', who, dim, w:dim(), name)
    end
  end
  local g, v = torch.no_grad(function() return norm_except_dim(w:detach(), d):clone(), w:detach():clone() end)
  unregister(module, name)
  module:register_parameter(name .. '_g', Parameter(g))
  module:register_parameter(name .. '_v', Parameter(v))
  rawset(module, name, compute(module, name, d))
  local norms = rawget(module, '_weight_norm') or {}
  rawset(module, '_weight_norm', norms)
  norms[name] = { dim = d, hook = module:register_forward_pre_hook(function(self) rawset(self, name, compute(self, name, d)) end) }
  return module
end

function M.remove_weight_norm(module, name)
  local who = 'nn.utils.remove_weight_norm'
  name = name or 'weight'
  local norms = type(module) == 'table' and rawget(module, '_weight_norm')
  if not norms or norms[name] == nil then
    fail("%s: weight_norm of '%s' not found in %s", who, show(name), show(module))
  end
  local w = torch.no_grad(function() return compute(module, name, norms[name].dim):detach():clone() end)
  unregister(module, name .. '_g')
  unregister(module, name .. '_v')
  rawset(module, name, nil)
  module:register_parameter(name, Parameter(w))
  norms[name].hook.remove()
  norms[name] = nil
  if next(norms) == nil then rawset(module, '_weight_norm', nil) end
  return module
end

return M
