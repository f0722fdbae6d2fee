-- nn.DistributedDataParallel(module [, {device_ids=, bucket_cap_mb=25, broadcast_buffers=true}]):
-- data parallel training over processes (one per rank, started by mpirun).
--
-- At construction every rank checks that its model has the same parameters and buffers
-- (names, dtypes, shapes) as rank 0's, then takes rank 0's values, so that models made
-- differently start equal.  During backward, gradients are averaged over all ranks in
-- buckets of about bucket_cap_mb megabytes, in reverse parameter order: a bucket's
-- all-reduce starts as soon as its last gradient is ready, while backward goes on, and
-- backward returns with every parameter's .grad averaged.  With a DistributedSampler, N
-- ranks training on batches of B match one process on batches of N*B.
--
--   local model = nn.DistributedDataParallel(net)
--   local loss = crit(model(x), y); loss:backward(); opt:step()
--   model:no_sync(function() crit(model(x), y):backward() end)  -- accumulate locally
local torch = require 'torch'
local utils = require 'nn.utils'
local dist = require 'torch.distributed'
local C = require('torch._C').dist

local DDP, parent = torch.class('nn.DistributedDataParallel', 'nn.Module')

local WHO = 'nn.DistributedDataParallel'

local function shape_of(t)
  local parts = {}
  for i = 1, t:dim() do parts[i] = tostring(t:size(i)) end
  return '[' .. table.concat(parts, ', ') .. ']'
end

-- name, dtype, shape of every parameter and buffer, in order.
local function signature(module)
  local entries = {}
  for name, p in module:named_parameters() do
    entries[#entries + 1] = { 'parameter', name, p.dtype, shape_of(p) }
  end
  for name, b in module:named_buffers() do
    entries[#entries + 1] = { 'buffer', name, b.dtype, shape_of(b) }
  end
  return entries
end

local function encode(entries)
  local lines = {}
  for i, e in ipairs(entries) do lines[i] = table.concat(e, '\t') end
  return table.concat(lines, '\n')
end

local function decode(s)
  local entries = {}
  for line in s:gmatch('[^\n]+') do
    local kind, name, dtype, shape = line:match('^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$')
    entries[#entries + 1] = { kind, name, dtype, shape }
  end
  return entries
end

local function count(entries, kind)
  local n = 0
  for _, e in ipairs(entries) do if e[1] == kind then n = n + 1 end end
  return n
end

-- Raises the same error on every rank when some rank's model differs from rank 0's, naming
-- the first mismatching parameter and both shapes.
local function check_same_model(module)
  local all = dist.all_gather_string(encode(signature(module)))
  local ref = decode(all[1])
  for r = 2, #all do
    local other = decode(all[r])
    for i = 1, math.max(#ref, #other) do
      local a, b = ref[i], other[i]
      if a == nil or b == nil or a[1] ~= b[1] then
        for _, kind in ipairs { 'parameter', 'buffer' } do
          local na, nb = count(ref, kind), count(other, kind)
          if na ~= nb then
            error(('%s: the model has %d %ss on rank 0 but %d on rank %d (every rank must build '
              .. 'the same model)'):format(WHO, na, kind, nb, r - 1), 0)
          end
        end
      end
      if a[2] ~= b[2] then
        error(('%s: %s %d is %s on rank 0 but %s on rank %d (every rank must build the same model)')
          :format(WHO, a[1], i, a[2], b[2], r - 1), 0)
      end
      if a[4] ~= b[4] then
        error(('%s: %s %s has shape %s on rank 0 but %s on rank %d (every rank must build the '
          .. 'same model)'):format(WHO, a[1], a[2], a[4], b[4], r - 1), 0)
      end
      if a[3] ~= b[3] then
        error(('%s: %s %s has dtype %s on rank 0 but %s on rank %d'):format(WHO, a[1], a[2], a[3], b[3], r - 1), 0)
      end
    end
  end
end

local function device_string(d)
  if d == nil then return nil end
  if type(d) == 'number' then return 'cuda:' .. math.tointeger(d) end
  return tostring(torch.device(d))
end

function DDP:__init(module, opts)
  parent.__init(self)
  if type(module) ~= 'table' or not (require 'nn').Module.is_module(module) then
    error(('%s: expected a module, got %s'):format(WHO, type(module)), 2)
  end
  local o = utils.options(WHO, opts, {
    device_ids = false, output_device = false, bucket_cap_mb = 25, broadcast_buffers = true,
    find_unused_parameters = false, dim = 1,
  })
  if type(o.bucket_cap_mb) ~= 'number' or not (o.bucket_cap_mb > 0) or o.bucket_cap_mb == math.huge then
    error(('%s: bucket_cap_mb must be a positive number, got %s'):format(WHO, tostring(o.bucket_cap_mb)), 2)
  end
  if o.find_unused_parameters then
    error(('%s: find_unused_parameters=true is not supported: every parameter must take part in '
      .. 'computing the loss'):format(WHO), 2)
  end
  if not dist.is_initialized() then
    error(('%s: the default process group is not initialized (call '
      .. 'torch.distributed.init_process_group first)'):format(WHO), 2)
  end
  local device_ids = o.device_ids or nil
  if device_ids ~= nil then
    if type(device_ids) ~= 'table' or #device_ids ~= 1 then
      error(('%s: device_ids must list the one device of this rank, e.g. {%d}'):format(
        WHO, dist.get_local_rank()), 2)
    end
    local want = device_string(device_ids[1])
    for name, p in module:named_parameters() do
      if tostring(p.device) ~= want then
        error(('%s: device_ids is {%s}, but parameter %s is on %s (move the model there first)')
          :format(WHO, want, name, tostring(p.device)), 2)
      end
    end
  end

  self.module = module
  rawset(self, 'device_ids', device_ids)
  rawset(self, 'bucket_cap_mb', o.bucket_cap_mb)
  rawset(self, 'broadcast_buffers', o.broadcast_buffers and true or false)
  rawset(self, 'require_backward_grad_sync', true)

  local ok, err = pcall(check_same_model, module)
  if not ok then error(err, 2) end
  -- Rank 0's values everywhere: parameters, then buffers, in the (identical) order above.
  for _, p in ipairs(module:parameters()) do dist.broadcast(p, 0) end
  for _, b in ipairs(module:buffers()) do dist.broadcast(b, 0) end

  local params, names = {}, {}
  for name, p in module:named_parameters() do
    if p.requires_grad then
      params[#params + 1] = p
      names[#names + 1] = name
    end
  end
  local rok, reducer = pcall(C.reducer, params, names, math.floor(o.bucket_cap_mb * 1024 * 1024))
  if not rok then error(reducer, 2) end
  rawset(self, '_reducer', reducer)
  rawset(self, '_has_buffers', #module:buffers() > 0)
end

function DDP:forward(...)
  local ok, err = pcall(self._reducer.prepare, self._reducer, self.require_backward_grad_sync)
  if not ok then error(err, 2) end
  if self.broadcast_buffers and self._has_buffers then
    for _, b in ipairs(self.module:buffers()) do dist.broadcast(b, 0) end
  end
  return self.module(...)
end

-- Gradients of the backward passes of forwards made inside no_sync are accumulated
-- locally; the first synchronised backward after it averages the totals.
--   model:no_sync(function() crit(model(x), y):backward() end)
-- or, with a to-be-closed variable:
--   do local _ <close> = model:no_sync(); crit(model(x), y):backward() end
function DDP:no_sync(fn, ...)
  local before = self.require_backward_grad_sync
  if fn == nil then
    rawset(self, 'require_backward_grad_sync', false)
    local ddp = self
    return setmetatable({}, {
      __close = function() rawset(ddp, 'require_backward_grad_sync', before) end,
      __index = { restore = function() rawset(ddp, 'require_backward_grad_sync', before) end },
    })
  end
  if type(fn) ~= 'function' then
    error(('%s:no_sync: expected a function or nothing, got %s'):format(WHO, type(fn)), 2)
  end
  rawset(self, 'require_backward_grad_sync', false)
  local res = table.pack(pcall(fn, ...))
  rawset(self, 'require_backward_grad_sync', before)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- The buckets, in all-reduce order, each a list of indices into module:parameters()
-- (those that require grad).
function DDP:buckets() return self._reducer:buckets() end

-- Counters: backward passes averaged, bucket all-reduces started (and how many of them
-- while gradients were still being computed), bytes all-reduced.
function DDP:reducer_stats() return self._reducer:stats() end

return DDP
