-- torch.data.collate: turning a list of dataset items into one batch, as PyTorch's
-- default_collate does: tensors are stacked along a new first dimension, Lua integers
-- become an int64 tensor, other numbers float64, booleans bool, strings stay a table of
-- strings, and tables are collated field by field (sequences position by position).
local torch = require 'torch'
local C = require('torch._C').data

local collate = {}

local function describe(v)
  if C.is_tensor(v) then return 'a tensor' end
  if math.type(v) == 'integer' then return 'an integer' end
  if type(v) == 'table' then return 'a table' end
  return 'a ' .. type(v)
end

-- A plain table whose keys are exactly 1..#t (and not empty).
local function is_sequence(t)
  if type(t) ~= 'table' or getmetatable(t) ~= nil then return false end
  local n = #t
  if n == 0 then return false end
  local count = 0
  for _ in pairs(t) do count = count + 1 end
  return count == n
end
collate.is_sequence = is_sequence

local function where(path)
  if path == '' then return '' end
  return ' at ' .. path
end

local function key_str(k)
  if type(k) == 'string' then return '.' .. k end
  return '[' .. tostring(k) .. ']'
end

-- items: the items of one batch; ids: their dataset indices (for messages); path: where
-- inside the item we are ('' at the top, '.x' or '[2]' deeper).
local function collate_items(items, ids, path)
  local first = items[1]
  local n = #items
  if first == nil then
    error(('dataset item %d is nil%s'):format(ids[1], where(path)), 0)
  end
  if C.is_tensor(first) then
    -- the engine checks every item (tensor, shape, dtype, device) and names the culprit
    local ok, res = pcall(C.stack, items, ids)
    if ok then return res end
    if not res:find('is a', 1, true) then
      error((path == '' and res or res:gsub('the items of a batch', 'the items of a batch' .. where(path))), 0)
    end
  end
  for i = 2, n do
    local v = items[i]
    local same = (type(v) == type(first)) and (C.is_tensor(v) == C.is_tensor(first))
    if type(first) == 'number' and type(v) == 'number' then same = true end
    if not same then
      error(('cannot collate the batch%s: item %d is %s but item %d is %s')
        :format(where(path), ids[1], describe(first), ids[i], v == nil and 'nil' or describe(v)), 0)
    end
  end
  if C.is_tensor(first) then
    local ok, res = pcall(C.stack, items, ids)
    if not ok then
      error((path == '' and res or res:gsub('the items of a batch', 'the items of a batch' .. where(path))), 0)
    end
    return res
  end
  local t = type(first)
  if t == 'number' then
    local integers = true
    for i = 1, n do
      if math.type(items[i]) ~= 'integer' then integers = false; break end
    end
    return torch.tensor(items, { dtype = integers and 'int64' or 'float64' })
  elseif t == 'boolean' then
    return torch.tensor(items, { dtype = 'bool' })
  elseif t == 'string' then
    local out = {}
    for i = 1, n do out[i] = items[i] end
    return out
  elseif t == 'table' then
    if is_sequence(first) then
      local len = #first
      for i = 2, n do
        if #items[i] ~= len then
          error(('cannot collate the batch%s: item %d has %d entries but item %d has %d')
            :format(where(path), ids[1], len, ids[i], #items[i]), 0)
        end
      end
      local out = {}
      for pos = 1, len do
        local column = {}
        for i = 1, n do column[i] = items[i][pos] end
        out[pos] = collate_items(column, ids, path .. key_str(pos))
      end
      return out
    end
    local out = {}
    for k in pairs(first) do
      local column = {}
      for i = 1, n do
        local v = items[i][k]
        if v == nil then
          error(('cannot collate the batch%s: item %d has a field %s but item %d has not')
            :format(where(path), ids[1], tostring(k), ids[i]), 0)
        end
        column[i] = v
      end
      out[k] = collate_items(column, ids, path .. key_str(k))
    end
    for i = 2, n do
      for k in pairs(items[i]) do
        if first[k] == nil then
          error(('cannot collate the batch%s: item %d has a field %s but item %d has not')
            :format(where(path), ids[i], tostring(k), ids[1]), 0)
        end
      end
    end
    return out
  end
  error(('cannot collate the batch%s: item %d is %s (collate handles tensors, numbers, booleans, '
    .. 'strings and tables of them; pass collate_fn= for anything else)'):format(where(path), ids[1], describe(first)), 0)
end

-- default_collate(items [, ids]): ids are the dataset indices of the items (1..n when absent).
function collate.default_collate(items, ids)
  if type(items) ~= 'table' then
    error('default_collate: expected a table of items, got ' .. type(items), 2)
  end
  if #items == 0 then error('default_collate: the batch is empty', 2) end
  if ids == nil then
    ids = {}
    for i = 1, #items do ids[i] = i end
  end
  return collate_items(items, ids, '')
end

return collate
