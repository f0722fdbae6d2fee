-- nn.utils: small helpers shared by the layers, losses and optimizers: option tables
-- checked against their defaults, tensor arguments checked with errors that name them.
local torch = require 'torch'
local options = require 'torch.options'

local utils = {}

-- Option tables and errors at the caller's line: torch.options, shared with torch, optim,
-- torch.data and torch.distributed.
utils.error = options.error
utils.required = options.required
utils.options = options.check

-- A constructor's arguments after its required ones as one options table: PyTorch's
-- positional order (names), then a last table of options by name.  A last table that is a
-- list ({1, 1}) is a positional tuple, as PyTorch's (5, 5); only one with names is the
-- options.  A setting given both ways, or too many by position, is an error.
function utils.positional(who, names, ...)
  local n = select('#', ...)
  while n > 0 and select(n, ...) == nil do n = n - 1 end
  local last = n > 0 and select(n, ...) or nil
  local opts = {}
  if n > 0 and type(last) == 'table' and getmetatable(last) == nil and last[1] == nil then
    for k, v in pairs(last) do opts[k] = v end
    n = n - 1
  end
  if n > #names then
    utils.error(('%s: %d arguments by position is too many (it takes %s by position, then an options table)')
      :format(who, n, table.concat(names, ', ')))
  end
  for i = 1, n do
    local v = select(i, ...)
    if v ~= nil then
      if opts[names[i]] ~= nil then utils.error(('%s: %s is given twice, by position and as an option'):format(who, names[i])) end
      opts[names[i]] = v
    end
  end
  return opts
end

-- The options of a functional activation after x, by position in PyTorch's order (names) or
-- by name in a last table, checked against defaults: F.leaky_relu(x, 0.2, true) and
-- F.leaky_relu(x, {negative_slope = 0.2, inplace = true}) both give {negative_slope = 0.2,
-- inplace = true}.
function utils.activation_args(who, names, defaults, ...)
  local o = options.check(who, utils.positional(who, names, ...), defaults)
  if type(o.inplace) ~= 'boolean' then
    utils.error(('%s: inplace must be a boolean, got %s'):format(who, tostring(o.inplace)))
  end
  return o
end

-- PyTorch's inplace=True of an activation: fn(x) written into x, which is returned (its dtype
-- kept).  As in PyTorch, a leaf that requires grad is refused while grad mode is on; a tensor
-- that requires grad keeps its history (the activation of its old value, through a clone so
-- that no saved tensor is the one overwritten).  Without inplace, fn(x).
function utils.activation_inplace(who, x, inplace, fn)
  if not inplace then return fn(x) end
  local recording = x.requires_grad and torch.is_grad_enabled()
  if recording and x.is_leaf then
    utils.error(('%s: a leaf tensor that requires grad is being used in an in-place operation; '
      .. 'wrap it in torch.no_grad or use the out-of-place form'):format(who))
  end
  local y = fn(recording and x:clone() or x)
  if y.dtype ~= x.dtype then
    utils.error(("%s: result type %s can't be cast to the desired output type %s"):format(who, y.dtype, x.dtype))
  end
  return x:copy_(y)
end

-- The arguments of the functional dropouts: (p, training[, inplace]) positional as in
-- PyTorch, or their names in a table in any trailing place, so that PyTorch's
-- F.dropout(x, training=self.training) is F.dropout(x, {training = self.training}) and
-- F.dropout(x, 0.2, {training = false}) works too.  Returns p, training, inplace (nil
-- where not given: each dropout has its own default for training).
function utils.dropout_args(who, p, training, inplace)
  local opts
  if type(p) == 'table' and getmetatable(p) == nil then
    opts, p = p, nil
  elseif type(training) == 'table' and getmetatable(training) == nil then
    opts, training = training, nil
  end
  if opts then
    local o = options.check(who, opts, { p = options.none, training = options.none, inplace = options.none })
    if o.p ~= nil then
      if p ~= nil then options.error(('%s: p given twice (%s and p = %s)'):format(who, tostring(p), tostring(o.p))) end
      p = o.p
    end
    if o.training ~= nil then training = o.training end
    if o.inplace ~= nil then inplace = o.inplace end
  end
  return p, training, inplace
end

-- Zeroes the gradients of params in place, or drops them with {set_to_none = true}
-- (Module:zero_grad and Optimizer:zero_grad).
function utils.zero_grad(who, params, opts)
  local o = options.check(who, opts, { set_to_none = false })
  for _, p in ipairs(params) do
    local g = p.grad
    if g ~= nil then
      if o.set_to_none then p.grad = nil else g:zero_() end
    end
  end
end

function utils.is_tensor(x)
  return torch.is_tensor(x)
end

-- "[30, 5]" for a tensor, the Lua type otherwise.
function utils.shape(x)
  if not torch.is_tensor(x) then return type(x) end
  local s = x:size()
  local parts = {}
  for i = 1, #s do parts[i] = tostring(s[i]) end
  return '[' .. table.concat(parts, ', ') .. ']'
end

function utils.check_tensor(who, x, what)
  if not torch.is_tensor(x) then
    utils.error(('%s: expected %s to be a tensor, got %s'):format(who, what or 'the input', type(x)))
  end
  return x
end

-- ---------------------------------------------------------------- gradients and parameters

-- parameters: a tensor, an array of tensors, or an iterator (model:parameters() is both)
local function tensor_list(who, params)
  if torch.is_tensor(params) then return { params } end
  local list = {}
  if type(params) == 'function' then
    for a, b in params do list[#list + 1] = torch.is_tensor(a) and a or b end
  elseif type(params) == 'table' then
    for i, p in ipairs(params) do
      if not torch.is_tensor(p) then utils.error(('%s: parameter %d is a %s, not a tensor'):format(who, i, type(p))) end
      list[i] = p
    end
  else
    utils.error(('%s: parameters must be a tensor, a table of tensors or an iterator, got %s'):format(who, type(params)))
  end
  return list
end

-- clip_grad_norm_(parameters, max_norm [, norm_type=2 | {norm_type=2, error_if_nonfinite=false}]):
-- scales the gradients in place so that their norm, taken as one vector, is at most
-- max_norm (as PyTorch: by max_norm / (norm + 1e-6) when that is below 1); returns that
-- total norm (a 0-dim tensor).  norm_type may be math.huge.
function utils.clip_grad_norm_(params, max_norm, norm_type, opts)
  local who = 'nn.utils.clip_grad_norm_'
  if type(norm_type) == 'table' then norm_type, opts = nil, norm_type end
  local o = options.check(who, opts, { norm_type = 2.0, error_if_nonfinite = false })
  norm_type = norm_type or o.norm_type
  if type(max_norm) ~= 'number' then utils.error(('%s: max_norm must be a number, got %s'):format(who, type(max_norm))) end
  if type(norm_type) ~= 'number' then utils.error(('%s: norm_type must be a number, got %s'):format(who, type(norm_type))) end
  local grads = {}
  for _, p in ipairs(tensor_list(who, params)) do
    if p.grad ~= nil then grads[#grads + 1] = p.grad end
  end
  if #grads == 0 then return torch.tensor(0.0) end
  local device = grads[1].device
  return torch.no_grad(function()
    local norms = {}
    for i, g in ipairs(grads) do norms[i] = g:detach():norm(norm_type):to(device) end
    local total = norms[1]
    if #norms > 1 then
      total = norm_type == math.huge and torch.stack(norms):max() or torch.stack(norms):norm(norm_type)
    end
    if o.error_if_nonfinite and not total:isfinite():item() then
      utils.error(('%s: The total norm of order %s for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=false`')
        :format(who, tostring(norm_type)))
    end
    local coef = (max_norm / (total + 1e-6)):clamp(nil, 1.0)
    for _, g in ipairs(grads) do g:mul_(coef:to(g.device)) end
    return total
  end)
end

-- clip_grad_value_(parameters, clip_value): each gradient clamped into [-clip_value, clip_value]
function utils.clip_grad_value_(params, clip_value)
  local who = 'nn.utils.clip_grad_value_'
  if type(clip_value) ~= 'number' then utils.error(('%s: clip_value must be a number, got %s'):format(who, type(clip_value))) end
  torch.no_grad(function()
    for _, p in ipairs(tensor_list(who, params)) do
      if p.grad ~= nil then p.grad:clamp_(-clip_value, clip_value) end
    end
  end)
end

-- parameters_to_vector(parameters): one flat tensor of all the parameters, in order
function utils.parameters_to_vector(params)
  local flat = {}
  for i, p in ipairs(tensor_list('nn.utils.parameters_to_vector', params)) do flat[i] = p:reshape(-1) end
  return torch.cat(flat)
end

-- vector_to_parameters(vec, parameters): the inverse, copied into the parameters in place
function utils.vector_to_parameters(vec, params)
  local who = 'nn.utils.vector_to_parameters'
  utils.check_tensor(who, vec, 'vec')
  local list, total = tensor_list(who, params), 0
  for _, p in ipairs(list) do total = total + p:numel() end
  if vec:dim() ~= 1 or vec:numel() ~= total then
    utils.error(('%s: expected a vector of %d elements (the parameters\' total), got %s'):format(who, total, utils.shape(vec)))
  end
  torch.no_grad(function()
    local at = 1
    for _, p in ipairs(list) do
      local n = p:numel()
      p:copy_(vec:narrow(1, at, n):reshape(p:size()))
      at = at + n
    end
  end)
end

-- nn.utils.rnn (lua/nn/rnn_utils.lua) and nn.utils.weight_norm / remove_weight_norm
-- (lua/nn/weight_norm.lua) load on first use: they need the layers this file comes before.
local lazy = { rnn = function() return require 'nn.rnn_utils' end,
               weight_norm = function() return require('nn.weight_norm').weight_norm end,
               remove_weight_norm = function() return require('nn.weight_norm').remove_weight_norm end }
setmetatable(utils, {
  __index = function(t, k)
    local load = lazy[k]
    if not load then return nil end
    local v = load()
    rawset(t, k, v)
    return v
  end,
})

return utils
