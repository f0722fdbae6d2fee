-- torch.options: the one check of option tables, shared by printing, nn, optim, torch.data
-- and torch.distributed.  A typo never passes silently: an unknown option is an error that
-- names the function, the option, its value and the options there are.
local options = {}

-- A default that must be given, and one that is only allowed (absent unless given).
options.required = setmetatable({}, { __tostring = function() return '<required>' end })
options.none = setmetatable({}, { __tostring = function() return '<none>' end })

-- Raises msg with the position of the first caller outside the library, so that an error
-- about a bad argument points at the line of the program that passed it.
local library_source = require('torch._C').library_source
function options.error(msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, 'S')
    if info == nil then level = 0; break end
    if info.what ~= 'C' and not library_source(info.source) then break end
    level = level + 1
  end
  error(msg, level)
end

local function show(v)
  if type(v) == 'string' then return ("'%s'"):format(v) end
  return tostring(v)
end
options.show = show

-- options.check(who, opts, defaults): opts (nil or a table) merged over defaults in a new
-- table; defaults of options.none are left out unless given, those of options.required
-- must be given.
function options.check(who, opts, defaults)
  if opts ~= nil and type(opts) ~= 'table' then
    options.error(('%s: options must be a table, got %s %s'):format(who, type(opts), show(opts)))
  end
  local out = {}
  for k, v in pairs(defaults) do
    if v ~= options.none then out[k] = v end
  end
  for k, v in pairs(opts or {}) do
    if defaults[k] == nil then
      local known = {}
      for name in pairs(defaults) do known[#known + 1] = tostring(name) end
      table.sort(known)
      options.error(('%s: unknown option %s = %s (the options are %s)')
        :format(who, tostring(k), show(v), table.concat(known, ', ')))
    end
    out[k] = v
  end
  for k, v in pairs(out) do
    if v == options.required then
      options.error(('%s: option %s is required'):format(who, k))
    end
  end
  return out
end

return options
