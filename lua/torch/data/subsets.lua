-- torch.data.Subset, ConcatDataset, random_split, IterableDataset and BatchSampler, as
-- PyTorch's torch.utils.data ones (indices 1-based).
--
--   local train, val = table.unpack(torch.data.random_split(ds, {0.8, 0.2}, torch.Generator():manual_seed(1)))
local torch = require 'torch'
local Dataset = require('torch.data.dataset').Dataset

local M = {}

local function check_index(who, i, n)
  if math.type(i) ~= 'integer' then
    if type(i) == 'number' and i == math.floor(i) then i = math.tointeger(i) end
    if math.type(i) ~= 'integer' then error(('%s: index %s is not an integer'):format(who, tostring(i)), 3) end
  end
  if i < 1 or i > n then
    error(('%s: index %d is out of range for a dataset of %d items (dplua counts from 1)'):format(who, i, n), 3)
  end
  return i
end

-- Subset(dataset, indices): the items of dataset at indices (a list or an int64 tensor)
local Subset, sparent = torch.class('torch.data.Subset', 'torch.data.Dataset')
M.Subset = Subset

function Subset:__init(dataset, indices)
  sparent.__init(self)
  if torch.is_tensor(indices) then indices = indices:reshape(-1):tolist() end
  if type(indices) ~= 'table' then
    error(('Subset: indices must be a list of integers or a tensor, got %s'):format(type(indices)), 3)
  end
  local n = Dataset.length(dataset)
  for k, i in ipairs(indices) do
    if math.type(i) ~= 'integer' or i < 1 or i > n then
      error(('Subset: indices[%d] = %s is out of range for a dataset of %d items (dplua counts from 1)')
        :format(k, tostring(i), n), 3)
    end
  end
  self.dataset, self.indices = dataset, indices
end

function Subset:get(i) return self.dataset:get(self.indices[check_index('Subset', i, #self.indices)]) end
function Subset:__len() return #self.indices end

-- ConcatDataset(datasets): the items of each dataset in turn
local ConcatDataset, cparent = torch.class('torch.data.ConcatDataset', 'torch.data.Dataset')
M.ConcatDataset = ConcatDataset

function ConcatDataset:__init(datasets)
  cparent.__init(self)
  if type(datasets) ~= 'table' or #datasets == 0 then
    error('ConcatDataset: expected a non-empty list of datasets', 3)
  end
  self.datasets, self.cumulative_sizes = datasets, {}
  local total = 0
  for k, ds in ipairs(datasets) do
    local ok, n = pcall(Dataset.length, ds)
    if not ok then error(('ConcatDataset: dataset %d: %s'):format(k, n), 3) end
    total = total + n
    self.cumulative_sizes[k] = total
  end
end

function ConcatDataset:get(i)
  local cum = self.cumulative_sizes
  i = check_index('ConcatDataset', i, cum[#cum])
  local lo, hi = 1, #cum   -- the first dataset whose cumulative size reaches i
  while lo < hi do
    local mid = (lo + hi) // 2
    if cum[mid] >= i then hi = mid else lo = mid + 1 end
  end
  return self.datasets[lo]:get(i - (cum[lo - 1] or 0))
end

function ConcatDataset:__len() return self.cumulative_sizes[#self.cumulative_sizes] end

-- random_split(dataset, lengths [, generator]): a list of Subsets, a random partition of
-- the dataset; lengths are counts adding up to its length, or fractions adding up to 1
-- (the remainder going round-robin to the first ones, as PyTorch)
function M.random_split(dataset, lengths, generator)
  local n = Dataset.length(dataset)
  if type(lengths) ~= 'table' or #lengths == 0 then
    error('random_split: lengths must be a non-empty list of counts or fractions', 2)
  end
  local total, fractions = 0, true
  for _, l in ipairs(lengths) do
    if type(l) ~= 'number' or l < 0 then error(('random_split: lengths must be non-negative, got %s'):format(tostring(l)), 2) end
    total = total + l
    fractions = fractions and math.type(l) == 'float'
  end
  local counts = {}
  if fractions and math.abs(total - 1) < 1e-9 then
    local used = 0
    for k, f in ipairs(lengths) do counts[k] = math.floor(n * f); used = used + counts[k] end
    for k = 0, n - used - 1 do
      local j = k % #counts + 1
      counts[j] = counts[j] + 1
    end
  else
    for k, l in ipairs(lengths) do
      if math.type(l) ~= 'integer' then
        error(('random_split: lengths must be integers, or fractions adding up to 1 (got %s)'):format(tostring(l)), 2)
      end
      counts[k] = l
    end
    if total ~= n then
      error(('random_split: the lengths add up to %s but the dataset has %d items'):format(tostring(total), n), 2)
    end
  end
  local perm
  if generator ~= nil then
    perm = torch.randperm(n, { generator = generator })
  else
    perm = torch.randperm(n)
  end
  perm = perm:tolist()
  local out, at = {}, 0
  for k, c in ipairs(counts) do
    out[k] = Subset(dataset, table.move(perm, at + 1, at + c, 1, {}))
    at = at + c
  end
  return out
end

-- IterableDataset: a dataset read in order through iter() (a Lua iterator over the items),
-- without get(i); `for x in ds:iter() do ... end`
local IterableDataset = torch.class('torch.data.IterableDataset')
M.IterableDataset = IterableDataset
function IterableDataset:__init() end
function IterableDataset:iter()
  error(('%s: iter is not implemented (a subclass defines iter())'):format(torch.typename(self) or 'IterableDataset'), 2)
end

-- BatchSampler(sampler, batch_size, drop_last): lists of batch_size indices from sampler
-- (a sampler object or a list of indices); iter() yields them, __len() counts them
local BatchSampler = torch.class('torch.data.BatchSampler')
M.BatchSampler = BatchSampler

function BatchSampler:__init(sampler, batch_size, drop_last)
  if type(sampler) ~= 'table' then error(('BatchSampler: sampler must be a sampler or a list of indices, got %s'):format(type(sampler)), 3) end
  if math.type(batch_size) ~= 'integer' or batch_size < 1 then
    error(('BatchSampler: batch_size must be a positive integer, got %s'):format(tostring(batch_size)), 3)
  end
  if type(drop_last) ~= 'boolean' then
    error(('BatchSampler: drop_last must be true or false, got %s'):format(tostring(drop_last)), 3)
  end
  self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last
end

local function all_indices(s)
  if type(s.indices) == 'function' then return s:indices() end
  if type(s.iter) == 'function' then
    local out = {}
    for i in s:iter() do out[#out + 1] = i end
    return out
  end
  return s
end

function BatchSampler:iter()
  local idx, at, bs = all_indices(self.sampler), 0, self.batch_size
  return function()
    local left = #idx - at
    if left <= 0 or (self.drop_last and left < bs) then return nil end
    local batch = table.move(idx, at + 1, at + math.min(bs, left), 1, {})
    at = at + #batch
    return batch
  end
end

function BatchSampler:__len()
  local n = #all_indices(self.sampler)
  return self.drop_last and n // self.batch_size or (n + self.batch_size - 1) // self.batch_size
end

return M
