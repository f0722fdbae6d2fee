-- torch.data.Dataset and torch.data.TensorDataset.
--
-- A dataset defines get(i) (i from 1 to #ds) and __len().  A subclass's __init calls
-- parent.__init(self) first, as for modules:
--
--   local Squares, parent = torch.class('Squares', 'torch.data.Dataset')
--   function Squares:__init(n) parent.__init(self); self.n = n end
--   function Squares:get(i) return i * i end
--   function Squares:__len() return self.n end
local torch = require 'torch'
local C = require('torch._C').data

local Dataset = torch.class('torch.data.Dataset')

function Dataset:__init() end

-- The number of items of any dataset-like value: its __len method (looked up through the
-- class chain, since Lua only reads metamethods from the object's own metatable), else #.
function Dataset.length(ds)
  local ok, len = pcall(function() return ds.__len end)
  if ok and type(len) == 'function' then
    local n = len(ds)
    if math.type(n) ~= 'integer' then
      if type(n) == 'number' and n == math.floor(n) and n >= 0 then
        local i = math.tointeger(n)
        if i then return i end
        error(('the dataset\'s __len returned %s, too large for an integer count'):format(tostring(n)), 0)
      end
      error(('the dataset\'s __len returned %s, not a non-negative integer'):format(tostring(n)), 0)
    end
    if n < 0 then error(('the dataset\'s __len returned %d, not a non-negative integer'):format(n), 0) end
    return n
  end
  error('the dataset has no __len method (a dataset defines get(i) and __len())', 0)
end

local TensorDataset, parent = torch.class('torch.data.TensorDataset', 'torch.data.Dataset')

-- TensorDataset(t1, t2, ...): item i is {t1[i], t2[i], ...}, or just t1[i] for one tensor.
function TensorDataset:__init(...)
  parent.__init(self)
  local tensors = table.pack(...)
  if tensors.n == 1 and type(tensors[1]) == 'table' and not C.is_tensor(tensors[1]) then
    tensors = tensors[1]
    tensors.n = #tensors
  end
  if tensors.n == 0 then error('TensorDataset: expected at least one tensor', 3) end
  local list = {}
  for k = 1, tensors.n do
    local t = tensors[k]
    if not C.is_tensor(t) then
      error(('TensorDataset: argument %d is a %s, not a tensor'):format(k, type(t)), 3)
    end
    if t:dim() == 0 then
      error(('TensorDataset: tensor %d is 0-dimensional; its first dimension must index the items'):format(k), 3)
    end
    if #list > 0 and t:size(1) ~= list[1]:size(1) then
      error(('TensorDataset: every tensor must have the same size in dimension 1, but tensor 1 has %d items '
        .. 'and tensor %d has %d'):format(list[1]:size(1), k, t:size(1)), 3)
    end
    list[k] = t
  end
  self.tensors = list
end

function TensorDataset:get(i)
  local n = self.tensors[1]:size(1)
  if math.type(i) ~= 'integer' then
    if type(i) == 'number' and i == math.floor(i) then
      i = math.tointeger(i)
    else
      error(('TensorDataset: index %s is not an integer'):format(tostring(i)), 2)
    end
  end
  if i < 1 or i > n then
    error(('TensorDataset: index %d is out of range for a dataset of %d items'):format(i, n), 2)
  end
  local ts = self.tensors
  if #ts == 1 then return ts[1][i] end
  local item = {}
  for k = 1, #ts do item[k] = ts[k][i] end
  return item
end

function TensorDataset:__len()
  return self.tensors[1]:size(1)
end

return { Dataset = Dataset, TensorDataset = TensorDataset }
