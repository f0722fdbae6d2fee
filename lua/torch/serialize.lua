-- torch.serialize: torch.save / torch.load (safetensors) and torch.save_npy /
-- torch.load_npy (NumPy .npy).  The parsing and writing are in the engine
-- (src/safetensors.c, src/npy.c); this layer checks arguments and names the function in errors.
local C = require('torch._C').data

local checkpoint = require 'torch.checkpoint'

local serialize = {}

local function call(who, fn, ...)
  local ok, a, b = pcall(fn, ...)
  if not ok then error(who .. ': ' .. tostring(a), 3) end
  return a, b
end

local function check_path(who, path, argn)
  if type(path) ~= 'string' then
    error(('%s: argument %d must be a file name (a string), got %s'):format(who, argn, type(path)), 3)
  end
  if path == '' then error(who .. ': the file name is empty', 3) end
end

-- an argument after the ones who takes: PyTorch habits (map_location=) are refused, not
-- ignored
local function no_more(who, n, ...)
  if select('#', ...) > 0 and (...) ~= nil then
    local extra = (...)
    local what = type(extra) == 'table' and next(extra) ~= nil and ('option ' .. tostring(next(extra))) or type(extra)
    error(('%s: unexpected argument %d (%s): %s takes no options (tensors load on the CPU; ' ..
      'move them with :to())'):format(who, n + 1, what, who), 3)
  end
end

-- torch.save(path, value [, metadata]): value is a table of name to tensor (a module's
-- state_dict(), or a module itself), or any nesting of tables of tensors, numbers, strings
-- and booleans (modules inside become their state_dicts); metadata maps strings to strings
-- (the file's __metadata__).  The PyTorch order torch.save(value, path) is accepted too.
-- Nested values keep their tree in the metadata (lua/torch/checkpoint.lua).
function serialize.save(path, tbl, metadata)
  if type(path) ~= 'string' and type(tbl) == 'string' then path, tbl = tbl, path end
  check_path('torch.save', path, 1)
  local torch = require 'torch'
  if C.is_tensor(tbl) then
    error('torch.save: expected a table (of name to tensor, or a checkpoint), got a tensor (save it as '
      .. '{name = t}, or use torch.save_npy for a single tensor)', 2)
  end
  if type(tbl) ~= 'table' then
    error(('torch.save: expected a table (of name to tensor, or a checkpoint), got %s'):format(type(tbl)), 2)
  end
  local ok, sd = pcall(function() return tbl.state_dict end)
  if ok and type(sd) == 'function' then tbl = tbl:state_dict() end
  if metadata ~= nil and type(metadata) ~= 'table' then
    error(('torch.save: metadata must be a table of strings, got %s'):format(type(metadata)), 2)
  end
  if metadata and metadata[checkpoint.TREE_KEY] ~= nil then
    error(("torch.save: the metadata key '%s' is dplua's own"):format(checkpoint.TREE_KEY), 2)
  end
  if not checkpoint.is_flat(torch, tbl) then
    local done, tensors, tree = pcall(checkpoint.flatten, torch, tbl)
    if not done then error(tensors, 2) end
    local meta = {}
    for k, v in pairs(metadata or {}) do meta[k] = v end
    meta[checkpoint.TREE_KEY] = tree
    tbl, metadata = tensors, meta
  end
  call('torch.save', C.save_safetensors, path, tbl, metadata)
end

-- PyTorch's map_location: a device (or its name) for every tensor, a table {from = to} of
-- device names (a tensor on `from` goes to `to`; the others stay), or a function
-- fn(tensor, location) returning the tensor to use (nil: the tensor as loaded).  The file's
-- tensors are read on the CPU, so their location is 'cpu'.
local function map_location(torch, tbl, where)
  local function move(t)
    if type(where) == 'function' then
      local r = where(t, 'cpu')
      if r == nil then return t end
      if not torch.is_tensor(r) then
        error(('torch.load: map_location function must return a tensor or nil, got %s'):format(type(r)), 4)
      end
      return r
    elseif type(where) == 'table' and getmetatable(where) == nil then
      for from, to in pairs(where) do
        if tostring(from) == tostring(t.device) then
          return t:to(to)
        end
      end
      return t
    end
    return t:to(where)
  end
  local out = {}
  for k, t in pairs(tbl) do out[k] = move(t) end
  return out
end

-- torch.load(path [, {map_location=}]) -> what torch.save wrote (a table of name to tensor,
-- or the checkpoint's nested table), with tensors on the CPU (or where map_location puts
-- them, as PyTorch's; map_location may also come alone as the second argument), and the
-- file's metadata (or nil).
function serialize.load(path, opts, ...)
  check_path('torch.load', path, 1)
  if select('#', ...) > 0 and (...) ~= nil then
    error(('torch.load: unexpected argument 3 (%s): torch.load takes a path and {map_location=}'):format(type((...))), 2)
  end
  local torch = require 'torch'
  local where
  if type(opts) == 'table' and getmetatable(opts) == nil then
    local options = require 'torch.options'
    where = options.check('torch.load', opts, { map_location = options.none }).map_location
  elseif opts ~= nil then
    where = opts
  end
  if where ~= nil and type(where) ~= 'string' and type(where) ~= 'function' and type(where) ~= 'table'
      and type(where) ~= 'userdata' then
    error(('torch.load: map_location must be a device, a device name, a table {from = to} or a function, got %s')
      :format(type(where)), 2)
  end
  local tbl, meta = call('torch.load', C.load_safetensors, path)
  if where ~= nil then tbl = map_location(torch, tbl, where) end
  local tree = meta and meta[checkpoint.TREE_KEY]
  if tree then
    local ok, rebuilt = pcall(checkpoint.rebuild, tbl, tree)
    if not ok then error(rebuilt, 2) end
    meta[checkpoint.TREE_KEY] = nil
    tbl = rebuilt
    if next(meta) == nil then meta = nil end
  end
  return tbl, meta
end

-- torch.save_npy(path, t): writes t as a NumPy .npy file.
function serialize.save_npy(path, t)
  if type(path) ~= 'string' and type(t) == 'string' then path, t = t, path end
  check_path('torch.save_npy', path, 1)
  if not C.is_tensor(t) then
    error(('torch.save_npy: expected a tensor as argument 2, got %s'):format(type(t)), 2)
  end
  call('torch.save_npy', C.save_npy, path, t)
end

-- torch.load_npy(path) -> a CPU tensor.
function serialize.load_npy(path, ...)
  check_path('torch.load_npy', path, 1)
  no_more('torch.load_npy', 1, ...)
  return (call('torch.load_npy', C.load_npy, path))
end

return serialize
