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

return utils
