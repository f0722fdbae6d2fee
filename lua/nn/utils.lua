-- nn.utils: small helpers shared by the layers, losses and optimizers: option tables
-- checked against their defaults, tensor arguments checked with errors that name them.
local torch = require 'torch'

local utils = {}

-- Raises msg with the position of the first caller outside the library, so that an error
-- about a bad argument points at the line of the program that passed it.
function utils.error(msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, 'S')
    if info == nil then level = 0; break end
    local src = info.source
    if info.what ~= 'C' and not (src:find('^@lua/nn/') or src:find('^@lua/optim/') or src:find('^@lua/torch/')) then
      break
    end
    level = level + 1
  end
  error(msg, level)
end

-- Merges `opts` (nil or a table) over `defaults` and returns a new table.  An option that
-- `defaults` does not name is an error naming it, so a typo never passes silently.
-- A default equal to utils.required must be given.
utils.required = setmetatable({}, { __tostring = function() return '<required>' end })

function utils.options(who, opts, defaults)
  if opts ~= nil and type(opts) ~= 'table' then
    utils.error(('%s: options must be a table, got %s'):format(who, type(opts)))
  end
  local out = {}
  for k, v in pairs(defaults) do out[k] = v end
  for k, v in pairs(opts or {}) do
    if defaults[k] == nil then
      local known = {}
      for name in pairs(defaults) do known[#known + 1] = name end
      table.sort(known)
      utils.error(('%s: unknown option %s (the options are %s)')
        :format(who, tostring(k), table.concat(known, ', ')))
    end
    out[k] = v
  end
  for k, v in pairs(out) do
    if v == utils.required then
      utils.error(('%s: option %s is required'):format(who, k))
    end
  end
  return out
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
