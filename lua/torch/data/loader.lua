-- torch.data.DataLoader: batches of a dataset, in the order of a sampler.
--
--   local loader = torch.data.DataLoader(ds, {batch_size = 30, shuffle = true})
--   for x, y in loader:iter() do ... end
--
-- A TensorDataset is batched by the engine, one call per batch (rows gathered by index
-- into a new batch tensor); with num_workers = N, N engine threads assemble batches ahead
-- of the caller, in the same order as without them.  Any other dataset is read with
-- get(i) and its items collated with collate_fn: on the caller's thread, or with
-- num_workers = N by N worker threads, each with its own Lua state holding a copy of the
-- dataset (torch/data/worker.lua), batch k made by worker k % N as in PyTorch.
local torch = require 'torch'
local C = require('torch._C').data
local Dataset = require('torch.data.dataset').Dataset
local TensorDataset = require('torch.data.dataset').TensorDataset
local samplers = require 'torch.data.sampler'
local collate = require 'torch.data.collate'
local Progress = require 'torch.data.progress'

local is_tensor, stack, mtype = C.is_tensor, C.stack, math.type

local DataLoader = torch.class('torch.data.DataLoader')

-- A loader is iterated with loader:iter(), never indexed: PyTorch's
-- `for i, (x, y) in enumerate(loader)` written as `for i, b in ipairs(loader)` would
-- otherwise run no batch at all without a word (ipairs stops at loader[1] == nil).
function DataLoader.__index(self, k)
  local v = DataLoader[k]
  if v == nil and math.type(k) == 'integer' then
    require('torch.options').error(('DataLoader: loader[%d] is not a batch; iterate over the batches with '
      .. '`for x, y in loader:iter() do ... end` (count them yourself for enumerate(loader))'):format(k))
  end
  return v
end

local DEFAULTS = {
  batch_size = 1, shuffle = false, drop_last = false, sampler = false, collate_fn = false,
  num_workers = 0, prefetch = 2, pin_memory = false, device = false, generator = false,
  progress = false, worker_init_fn = false, persistent_workers = false,
}

local function show(v)
  if type(v) == 'string' then return ("'%s'"):format(v) end
  local name = type(v) == 'table' and torch.typename and torch.typename(v)
  if name then return 'a ' .. name end
  return tostring(v)
end

local function check_positive_integer(name, v, allow_zero)
  if math.type(v) ~= 'integer' then
    if type(v) == 'number' and v == math.floor(v) and v == v and math.abs(v) < 2^53 then
      v = math.tointeger(v)
    else
      error(('DataLoader: %s must be %s integer, got %s')
        :format(name, allow_zero and 'a non-negative' or 'a positive', show(v)), 4)
    end
  end
  if v < (allow_zero and 0 or 1) then
    error(('DataLoader: %s must be %s integer, got %s')
      :format(name, allow_zero and 'a non-negative' or 'a positive', show(v)), 4)
  end
  return v
end

local function check_boolean(name, v)
  if type(v) ~= 'boolean' then
    error(('DataLoader: %s must be true or false, got %s'):format(name, show(v)), 4)
  end
  return v
end

-- Whether get is TensorDataset's own (a subclass that overrides get is read item by item).
local function tensor_backed(ds)
  local ok, get = pcall(function() return ds.get end)
  return ok and get == TensorDataset.get and type(ds.tensors) == 'table'
end

function DataLoader:__init(dataset, opts)
  if type(dataset) ~= 'table' and type(dataset) ~= 'userdata' then
    error(('DataLoader: expected a dataset as the first argument, got %s'):format(type(dataset)), 3)
  end
  require('torch.options').check('DataLoader', opts, DEFAULTS)
  opts = opts or {}
  local ok, get = pcall(function() return dataset.get end)
  if not ok or type(get) ~= 'function' then
    error('DataLoader: the dataset has no get(i) method (a dataset defines get(i) and __len())', 3)
  end
  local okl, err = pcall(Dataset.length, dataset)
  if not okl then error('DataLoader: ' .. tostring(err), 3) end

  self.dataset = dataset
  self.batch_size = check_positive_integer('batch_size', opts.batch_size or 1)
  self.shuffle = check_boolean('shuffle', opts.shuffle or false)
  self.drop_last = check_boolean('drop_last', opts.drop_last or false)
  self.num_workers = check_positive_integer('num_workers', opts.num_workers or 0, true)
  self.prefetch = check_positive_integer('prefetch', opts.prefetch or 2)
  if self.num_workers == 0 and self.prefetch ~= 2 then
    -- as PyTorch's prefetch_factor: only worker threads fetch ahead
    error(('DataLoader: prefetch only applies with worker threads (num_workers > 0), got prefetch = %d with '
      .. 'num_workers = 0'):format(self.prefetch), 3)
  end
  if self.num_workers * self.prefetch > 4096 then
    error(('DataLoader: num_workers * prefetch must be at most 4096 batches ahead, got num_workers = %d, '
      .. 'prefetch = %d'):format(self.num_workers, self.prefetch), 3)
  end
  self.pin_memory = check_boolean('pin_memory', opts.pin_memory or false)
  self.progress = check_boolean('progress', opts.progress or false)
  self.persistent_workers = check_boolean('persistent_workers', opts.persistent_workers or false)
  if self.persistent_workers and self.num_workers == 0 then
    error('DataLoader: persistent_workers = true needs worker threads (num_workers > 0)', 3)
  end
  if opts.worker_init_fn ~= nil and type(opts.worker_init_fn) ~= 'function' then
    error(('DataLoader: worker_init_fn must be a function, got %s'):format(show(opts.worker_init_fn)), 3)
  end
  self.worker_init_fn = opts.worker_init_fn
  if opts.collate_fn ~= nil and type(opts.collate_fn) ~= 'function' then
    error(('DataLoader: collate_fn must be a function, got %s'):format(show(opts.collate_fn)), 3)
  end
  self.collate_fn = opts.collate_fn
  if opts.device ~= nil then
    local okd, dev = pcall(torch.device, opts.device)
    if not okd then error(('DataLoader: device = %s: %s'):format(show(opts.device), tostring(dev)), 3) end
    self.device = dev
  end
  local g = opts.generator
  if g ~= nil and math.type(g) ~= 'integer' and type(g) ~= 'table' and type(g) ~= 'userdata' then
    error(('DataLoader: generator must be a table {seed = integer}, got %s'):format(show(g)), 3)
  end
  if opts.sampler ~= nil then
    if self.shuffle then
      error(('DataLoader: option shuffle = true cannot be used together with option sampler (got %s; '
        .. 'the sampler decides the order)'):format(show(opts.sampler)), 3)
    end
    local s = opts.sampler
    local oks, has = pcall(function() return type(s.indices) == 'function' or type(s.iter) == 'function' end)
    if type(s) ~= 'table' or not (oks and (has or #s > 0 or next(s) == nil)) then
      error(('DataLoader: sampler = %s is not a sampler (an object with indices() or iter(), or a list of indices)')
        :format(show(s)), 3)
    end
    self.sampler = s
  elseif self.shuffle then
    self.sampler = samplers.RandomSampler(dataset, { generator = opts.generator })
  else
    self.sampler = samplers.SequentialSampler(dataset)
  end
  self.generator = opts.generator
  if tensor_backed(dataset) and self.collate_fn == nil and #dataset.tensors <= 64 then
    self._tensors = dataset.tensors
  end
end

-- The sampler's indices for one epoch, as a list.
local function epoch_indices(sampler)
  if type(sampler.indices) == 'function' then return sampler:indices() end
  if type(sampler.iter) == 'function' then
    local out = {}
    for i in sampler:iter() do out[#out + 1] = i end
    return out
  end
  local out = {}
  for i = 1, #sampler do out[i] = sampler[i] end
  return out
end

-- The sampler's length: its __len, or the size of a plain list of indices.  A sampler with
-- indices() or iter() and no __len has no length, as in PyTorch (len() raises): drawing an
-- epoch to count it would advance its random stream.
local function sampler_length(sampler)
  local ok, len = pcall(function() return sampler.__len end)
  if ok and type(len) == 'function' then return len(sampler) end
  if type(sampler.indices) == 'function' or type(sampler.iter) == 'function' then
    error('DataLoader: #loader needs the length of its sampler, and this sampler has no __len() '
      .. '(define Sampler:__len(), as PyTorch needs __len__ for len(loader))', 3)
  end
  return #sampler
end

function DataLoader:__len()
  local n = sampler_length(self.sampler)
  local bs = self.batch_size
  if self.drop_last then return n // bs end
  return n // bs + (n % bs ~= 0 and 1 or 0)   -- ceil without n + bs - 1 overflowing
end

-- Moves every tensor of a batch (also inside tables) to the loader's device; pinned
-- tensors go to a GPU asynchronously (the GPU's queue orders the copy before their use).
local function to_device(batch, dev)
  if C.is_tensor(batch) then return batch:to { device = dev, non_blocking = batch:is_pinned() } end
  if type(batch) == 'table' and getmetatable(batch) == nil then
    for k, v in pairs(batch) do batch[k] = to_device(v, dev) end
  end
  return batch
end

-- Copies every CPU tensor of a batch (also inside tables) into pinned memory.
local function pin(batch)
  if C.is_tensor(batch) then return batch.device.type == 'cpu' and batch:pin_memory() or batch end
  if type(batch) == 'table' and getmetatable(batch) == nil then
    for k, v in pairs(batch) do batch[k] = pin(v) end
  end
  return batch
end

local warned_pin = false

-- The engine's batch assembler for a tensor dataset, made on first use.
function DataLoader:_engine()
  local eng = rawget(self, '_eng')
  if eng == nil then
    eng = C.loader(self._tensors, self.num_workers, self.prefetch)
    rawset(self, '_eng', eng)
  end
  return eng
end

-- Stops the loader's worker threads now (they are stopped anyway when the loader is
-- collected).  The loader can still be iterated afterwards.
function DataLoader:close()
  local eng = rawget(self, '_eng')
  if eng ~= nil then
    eng:close()
    rawset(self, '_eng', nil)
  end
  local pool = rawget(self, '_pool')
  if pool ~= nil then
    rawset(self, '_pool', nil)
    pool:close()
  end
end

local function check_index(i, n, b)
  if math.type(i) ~= 'integer' then
    if type(i) == 'number' and i == math.floor(i) then return math.tointeger(i) end
    error(('DataLoader: the sampler yielded %s in batch %d, not an integer index'):format(show(i), b), 3)
  end
  if i < 1 or i > n then
    error(('DataLoader: the sampler yielded index %d in batch %d, out of range for a dataset of %d items')
      :format(i, b, n), 3)
  end
  return i
end

-- loader:iter() starts an epoch and returns an iterator over its batches.  A batch that is
-- a sequence (items that are {x, y}) is returned as multiple values.
-- loader:set_postfix{loss = ...}: fields shown after the progress bar of the epoch going on
function DataLoader:set_postfix(t)
  local bar = rawget(self, 'bar')
  if bar then bar:set_postfix(t) end
end

function DataLoader:iter()
  local indices = epoch_indices(self.sampler)
  local bs, dev = self.batch_size, self.device
  local pin_memory = self.pin_memory
  if pin_memory and not torch.cuda.is_available() then
    if not warned_pin then
      io.stderr:write('DataLoader: pin_memory = true but CUDA is not available; batches stay in ordinary memory\n')
      warned_pin = true
    end
    pin_memory = false
  end
  -- pinned (when asked) and moved to the device (when given)
  local function place(x)
    if pin_memory then x = pin(x) end
    if dev then x = to_device(x, dev) end
    return x
  end
  local nbatches = #indices // bs + ((not self.drop_last and #indices % bs ~= 0) and 1 or 0)
  local bar = self.progress and Progress.new(nbatches) or nil
  rawset(self, 'bar', bar)
  local b = 0
  -- the generic for's closing value: a `break` out of the loop ends the bar's line
  local closer = bar and setmetatable({}, { __close = function() bar:finish() end }) or nil

  if self._tensors then
    -- one batch assembler per loader: a later iter() takes it over from this iterator
    local eng = self:_engine()
    eng:start(indices, bs, self.drop_last)
    local epoch = (rawget(self, '_epoch') or 0) + 1
    rawset(self, '_epoch', epoch)
    local k = #self._tensors
    return function()
      if b >= nbatches then
        if bar then bar:finish() end
        return nil
      end
      if rawget(self, '_epoch') ~= epoch or rawget(self, '_eng') ~= eng then
        error('DataLoader: this iterator was ended by a later loader:iter() or loader:close() '
          .. '(a loader over a TensorDataset runs one epoch at a time)', 2)
      end
      b = b + 1
      if k == 1 then
        local x = place(eng:next())
        if bar then bar:step(b) end
        return x
      elseif k == 2 then
        local x, y = eng:next()
        x, y = place(x), place(y)
        if bar then bar:step(b) end
        return x, y
      end
      local batch = table.pack(eng:next())
      for j = 1, k do batch[j] = place(batch[j]) end
      if bar then bar:step(b) end
      return table.unpack(batch, 1, k)
    end, nil, nil, closer
  end

  if self.num_workers > 0 then return self:_iter_workers(indices, nbatches, place, bar) end

  local fetch, nidx = DataLoader.fetcher(self.dataset, self.collate_fn), #indices
  return function()
    if b >= nbatches then
      if bar then bar:finish() end
      return nil
    end
    b = b + 1
    local batch, sequence = fetch(indices, (b - 1) * bs + 1, math.min(b * bs, nidx), b, 3)
    batch = place(batch)
    if bar then bar:step(b) end
    if sequence then return table.unpack(batch, 1, #batch) end
    return batch
  end, nil, nil, closer
end

-- fetch(indices, first, last, b, level) -> the batch of the dataset items at
-- indices[first..last] (batch number b), collated, and whether it is a sequence to return
-- as multiple values; errors are raised at `level`.  Used on the caller's thread and in
-- the workers.
function DataLoader.fetcher(ds, collate_fn)
  local n = Dataset.length(ds)
  return function(indices, first, last, b, level)
    local items, m = {}, 0
    for j = first, last do
      local i = indices[j]
      if mtype(i) ~= 'integer' or i < 1 or i > n then i = check_index(i, n, b) end
      local item = ds:get(i)
      if item == nil then
        error(('DataLoader: dataset:get(%d) returned nil'):format(i), level)
      end
      m = m + 1
      items[m] = item
    end
    local batch
    if collate_fn then
      batch = collate_fn(items)
      if batch == nil then
        error(('DataLoader: collate_fn returned nil for batch %d (dataset indices %s); it must return the batch')
          :format(b, table.concat(indices, ', ', first, math.min(last, first + 7)) .. (last > first + 7 and ', ...' or '')), level)
      end
    else
      local ok, res
      if is_tensor(items[1]) then
        -- the common case, straight to the engine (which names the dataset indices on error)
        ok, res = pcall(stack, items, indices, first - 1)
        if not ok and res:find('is a', 1, true) then ok = nil end
      end
      if not ok then
        if ok == nil then
          local ids = {}
          for j = first, last do ids[#ids + 1] = indices[j] end
          ok, res = pcall(collate.default_collate, items, ids)
        end
        if not ok then error('DataLoader: ' .. tostring(res), level) end
      end
      batch = res
    end
    return batch, collate.is_sequence(batch) and (collate_fn ~= nil or collate.is_sequence(items[1]))
  end
end

-- The epoch's base seed for the workers' streams (worker id seeds with base + id - 1): a
-- draw at the current position of the loader's generator, or of the global stream, that
-- does not advance it, so that the orders and every later draw are those of
-- num_workers = 0.  The loader's epoch number moves it from epoch to epoch.
local function base_seed(gen, epoch)
  local seed, offset
  if type(gen) == 'table' and math.type(rawget(gen, 'seed')) == 'integer' then
    seed, offset = rawget(gen, 'seed'), rawget(gen, 'offset') or 0
  elseif math.type(gen) == 'integer' then
    seed, offset = gen, 0
  else
    seed, offset = require('torch._C').rng_reserve(0)
  end
  local at = { seed = seed, offset = offset + 64 * epoch }
  return torch.randint(0, 1 << 53, { 1 }, { dtype = 'int64', generator = at }):item()
end

-- The batches of an epoch made by the worker threads: batch k goes to worker
-- (k - 1) % num_workers + 1, at most `prefetch` batches per worker ahead of the caller, and
-- the caller takes them strictly in order.
function DataLoader:_iter_workers(indices, nbatches, place, bar)
  local nw, bs, nidx = self.num_workers, self.batch_size, #indices
  local window = nw * self.prefetch
  local pool = rawget(self, '_pool')
  if pool and not self.persistent_workers then
    -- the workers of an epoch left without a loop's end: each epoch gets fresh ones
    rawset(self, '_pool', nil)
    pool:close()
    pool = nil
  end
  if pool then
    pool:cancel()   -- batches of an epoch left early
  else
    pool = require('torch.data.worker').start {
      dataset = self.dataset, collate_fn = self.collate_fn, worker_init_fn = self.worker_init_fn,
      num_workers = nw, window = window, base_seed = base_seed(self.generator, rawget(self, '_epoch') or 0),
    }
    rawset(self, '_pool', pool)
  end
  local epoch = (rawget(self, '_epoch') or 0) + 1
  rawset(self, '_epoch', epoch)
  local base = rawget(self, '_gid') or 0   -- batch numbers keep growing across epochs
  rawset(self, '_gid', base + nbatches)
  local persistent = self.persistent_workers
  local function finish()
    if rawget(self, '_pool') ~= pool then return end
    if persistent then
      pool:cancel()
    else
      rawset(self, '_pool', nil)
      pool:close()
    end
  end
  local function submit(k)
    local list = table.move(indices, (k - 1) * bs + 1, math.min(k * bs, nidx), 1, {})
    pool:submit(base + k, (k - 1) % nw + 1, k, list)
  end
  for k = 1, math.min(window, nbatches) do submit(k) end
  local b = 0
  -- the generic for's closing value: a `break` (or an error) stops or idles the workers
  local ender = setmetatable({}, { __close = function()
    if bar then bar:finish() end
    if rawget(self, '_epoch') == epoch then finish() end
  end })
  return function()
    if b >= nbatches then
      if bar then bar:finish() end
      if rawget(self, '_epoch') == epoch then finish() end
      return nil
    end
    if rawget(self, '_epoch') ~= epoch or rawget(self, '_pool') ~= pool then
      error('DataLoader: this iterator was ended by a later loader:iter() or loader:close()', 2)
    end
    b = b + 1
    -- take returns to Lua between waits, so that Ctrl-C can stop the loop
    local r, err
    repeat r, err = pool:take(base + b) until r ~= false
    if b + window <= nbatches then submit(b + window) end   -- also after a failed batch
    if r == nil then error(err, 0) end
    local batch = place(r[1])
    if bar then bar:step(b) end
    if r[2] then return table.unpack(batch, 1, #batch) end
    return batch
  end, nil, nil, ender
end

return { DataLoader = DataLoader }
