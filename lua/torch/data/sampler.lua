-- torch.data samplers: the order in which a DataLoader visits a dataset's items.
--
-- A sampler has indices() (a table of 1-based dataset indices for one epoch; each call
-- starts a new epoch), iter() (an iterator over the same) and __len().  Any table with an
-- indices or iter method, or a plain list of indices, can be passed as a DataLoader's sampler.
-- Permutations come from the engine's random stream, so torch.manual_seed repeats them;
-- a generator {seed = s} gives a stream of its own.
local torch = require 'torch'
local options = require 'torch.options'
local C = require('torch._C').data
local Dataset = require('torch.data.dataset').Dataset

local function check_options(who, opts, allowed)
  local defaults = {}
  for k in pairs(allowed) do defaults[k] = options.none end
  return options.check(who, opts, defaults)
end

-- The most indices one epoch's list can hold: a Lua table's array part stops at 2^31 - 1
-- entries (and that many take 32 GiB).  A longer dataset is refused before anything is
-- allocated; a sampler of one's own that yields fewer indices can still visit it.
local MAX_INDICES = (1 << 31) - 1

-- The dataset's length, when its indices fit in one epoch's list.
local function listable_length(who, ds)
  local n = Dataset.length(ds)
  if n > MAX_INDICES then
    error(('%s: the dataset has %d items, too large for one epoch\'s list of indices (at most %d); '
      .. 'pass a sampler that yields fewer indices'):format(who, n, MAX_INDICES), 0)
  end
  return n
end

-- A permutation of 1..n from a generator (a table {seed = s}, which remembers how far it
-- has drawn, a number used as a seed, or an object with initial_seed()), or from the
-- global stream when gen is nil.
local function randperm(n, gen)
  if gen == nil then return C.randperm(n) end
  local seed, offset
  if math.type(gen) == 'integer' then
    seed, offset = gen, 0
  elseif type(gen) == 'table' or type(gen) == 'userdata' then
    seed = gen.seed
    if type(seed) == 'function' then seed = nil end
    if seed == nil and type(gen.initial_seed) == 'function' then seed = gen:initial_seed() end
    if math.type(seed) ~= 'integer' then
      error(('generator: expected a table {seed = integer}, got seed %s'):format(tostring(seed)), 3)
    end
    offset = type(gen) == 'table' and rawget(gen, 'offset') or 0
  else
    error(('generator: expected a table {seed = integer}, got a %s'):format(type(gen)), 3)
  end
  local perm = C.randperm(n, seed, offset)
  if type(gen) == 'table' then rawset(gen, 'offset', offset + n) end
  return perm
end

local Sampler = torch.class('torch.data.Sampler')

function Sampler:__init(data_source)
  self.data_source = data_source
end

function Sampler:iter()
  local idx, i = self:indices(), 0
  return function()
    i = i + 1
    return idx[i]
  end
end

function Sampler:__len()
  return Dataset.length(self.data_source)
end

local SequentialSampler, sparent = torch.class('torch.data.SequentialSampler', 'torch.data.Sampler')

function SequentialSampler:__init(data_source)
  sparent.__init(self, data_source)
end

function SequentialSampler:indices()
  local out = {}
  for i = 1, listable_length('SequentialSampler', self.data_source) do out[i] = i end
  return out
end

function SequentialSampler:__len()
  return Dataset.length(self.data_source)
end

local RandomSampler, rparent = torch.class('torch.data.RandomSampler', 'torch.data.Sampler')

-- RandomSampler(ds [, {generator = {seed = s}}]): a new permutation every epoch.
function RandomSampler:__init(data_source, opts)
  rparent.__init(self, data_source)
  opts = check_options('RandomSampler', opts, { generator = true })
  -- an integer seed becomes a generator of its own, so each epoch draws a new order
  self.generator = math.type(opts.generator) == 'integer' and { seed = opts.generator } or opts.generator
end

function RandomSampler:indices()
  return randperm(listable_length('RandomSampler', self.data_source), self.generator)
end

function RandomSampler:__len()
  return Dataset.length(self.data_source)
end

-- SubsetRandomSampler(indices [, {generator=}]): the given indices (1-based), in a new
-- random order every epoch.
local SubsetRandomSampler, subparent = torch.class('torch.data.SubsetRandomSampler', 'torch.data.Sampler')

function SubsetRandomSampler:__init(indices, opts)
  subparent.__init(self, nil)
  if type(indices) ~= 'table' and not torch.is_tensor(indices) then
    error(('SubsetRandomSampler: indices must be a list or a tensor of indices, got %s'):format(type(indices)), 3)
  end
  self.subset = torch.is_tensor(indices) and indices:reshape(-1):tolist() or { table.unpack(indices) }
  opts = check_options('SubsetRandomSampler', opts, { generator = true })
  self.generator = math.type(opts.generator) == 'integer' and { seed = opts.generator } or opts.generator
end

function SubsetRandomSampler:indices()
  local n = #self.subset
  if n == 0 then return {} end
  local perm = randperm(n, self.generator)
  if torch.is_tensor(perm) then perm = perm:tolist() end
  local out = {}
  for i, k in ipairs(perm) do out[i] = self.subset[k] end
  return out
end

function SubsetRandomSampler:__len() return #self.subset end

-- WeightedRandomSampler(weights, num_samples [, {replacement=true, generator=}]): indices
-- 1..#weights drawn in proportion to the weights (torch.multinomial's draws).
local WeightedRandomSampler, wparent = torch.class('torch.data.WeightedRandomSampler', 'torch.data.Sampler')

function WeightedRandomSampler:__init(weights, num_samples, opts)
  wparent.__init(self, nil)
  if type(weights) == 'table' then weights = torch.tensor(weights, { dtype = 'float64' }) end
  if not torch.is_tensor(weights) or weights:dim() ~= 1 then
    error(('WeightedRandomSampler: weights must be a list or a 1-D tensor, got %s'):format(
      torch.is_tensor(weights) and ('a tensor of %d dims'):format(weights:dim()) or type(weights)), 3)
  end
  if math.type(num_samples) ~= 'integer' or num_samples <= 0 then
    error(('WeightedRandomSampler: num_samples should be a positive integer value, but got num_samples=%s')
      :format(tostring(num_samples)), 3)
  end
  opts = check_options('WeightedRandomSampler', opts, { replacement = true, generator = true })
  self.weights = weights:to { dtype = 'float64', device = 'cpu' }
  self.num_samples = num_samples
  self.replacement = opts.replacement == nil and true or opts.replacement
  self.generator = math.type(opts.generator) == 'integer' and { seed = opts.generator } or opts.generator
end

function WeightedRandomSampler:indices()
  return torch.multinomial(self.weights, self.num_samples, { replacement = self.replacement, generator = self.generator }):tolist()
end

function WeightedRandomSampler:__len() return self.num_samples end

local DistributedSampler, dparent = torch.class('torch.data.DistributedSampler', 'torch.data.Sampler')

local function is_count(v) return math.type(v) == 'integer' end

-- DistributedSampler(ds, {num_replicas=, rank=, shuffle=true, seed=0, drop_last=false}):
-- the share of one rank (rank 0-based), as PyTorch's: every rank gets ceil(n / replicas)
-- indices (floor with drop_last), the list padded by repeating it from the start, and rank
-- r takes every replicas-th index from position r + 1.  Shuffling draws from seed + epoch,
-- the same permutation on every rank.
function DistributedSampler:__init(data_source, opts)
  dparent.__init(self, data_source)
  opts = check_options('DistributedSampler', opts,
    { num_replicas = true, rank = true, shuffle = true, seed = true, drop_last = true })
  local replicas, rank = opts.num_replicas, opts.rank
  if replicas == nil or rank == nil then
    local ok, dist = pcall(require, 'torch.distributed')
    local up = ok and type(dist) == 'table' and type(dist.is_initialized) == 'function' and dist.is_initialized()
    if not up then
      error('DistributedSampler: num_replicas and rank were not given and no process group is initialised '
        .. '(call torch.distributed.init_process_group first, or pass {num_replicas=, rank=})', 3)
    end
    if replicas == nil then replicas = dist.get_world_size() end
    if rank == nil then rank = dist.get_rank() end
  end
  if not is_count(replicas) or replicas < 1 then
    error(('DistributedSampler: num_replicas must be a positive integer, got %s'):format(tostring(replicas)), 3)
  end
  if not is_count(rank) or rank < 0 or rank >= replicas then
    error(('DistributedSampler: invalid rank %s, rank should be in the interval [0, %d]')
      :format(tostring(rank), replicas - 1), 3)
  end
  local shuffle = opts.shuffle
  if shuffle == nil then shuffle = true end
  if type(shuffle) ~= 'boolean' then
    error(('DistributedSampler: shuffle must be a boolean, got %s'):format(tostring(shuffle)), 3)
  end
  local seed = opts.seed or 0
  if not is_count(seed) then
    error(('DistributedSampler: seed must be an integer, got %s'):format(tostring(seed)), 3)
  end
  local drop_last = opts.drop_last or false
  if type(drop_last) ~= 'boolean' then
    error(('DistributedSampler: drop_last must be a boolean, got %s'):format(tostring(drop_last)), 3)
  end
  self.num_replicas, self.rank, self.shuffle, self.seed, self.drop_last = replicas, rank, shuffle, seed, drop_last
  self.epoch = 0
end

-- Samples per rank, and the total over all ranks.
function DistributedSampler:_sizes()
  local n, r = listable_length('DistributedSampler', self.data_source), self.num_replicas
  local per
  if self.drop_last and n % r ~= 0 then
    per = (n - r + r - 1) // r      -- ceil((n - r) / r)
    if per < 0 then per = 0 end
  else
    per = (n + r - 1) // r
  end
  return n, per, per * r
end

function DistributedSampler:set_epoch(epoch)
  if not is_count(epoch) then
    error(('DistributedSampler:set_epoch: epoch must be an integer, got %s'):format(tostring(epoch)), 2)
  end
  self.epoch = epoch
end

function DistributedSampler:indices()
  local n, per, total = self:_sizes()
  local all
  if self.shuffle then
    all = n > 0 and C.randperm(n, self.seed + self.epoch, 0) or {}
  else
    all = {}
    for i = 1, n do all[i] = i end
  end
  if self.drop_last then
    for i = #all, total + 1, -1 do all[i] = nil end
  elseif n > 0 then
    for i = n + 1, total do all[i] = all[(i - 1) % n + 1] end
  end
  local out = {}
  for p = self.rank + 1, total, self.num_replicas do out[#out + 1] = all[p] end
  return out
end

function DistributedSampler:__len()
  local _, per = self:_sizes()
  return per
end

return {
  Sampler = Sampler,
  SequentialSampler = SequentialSampler,
  RandomSampler = RandomSampler,
  SubsetRandomSampler = SubsetRandomSampler,
  WeightedRandomSampler = WeightedRandomSampler,
  DistributedSampler = DistributedSampler,
  randperm = randperm,
  check_options = check_options,
}
