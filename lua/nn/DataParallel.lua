-- nn.DataParallel(module [, {device_ids=, output_device=, dim=1}]): runs `module` on
-- several devices at once, each on a slice of the batch.
--
-- One forward is four steps, each a call into the engine (torch._C.parallel):
--   scatter         the tensors of the input are cut along `dim` into chunks of
--                   ceil(n / #device_ids), chunk i copied to device_ids[i];
--   replicate       the module is copied structurally onto every device that got a chunk;
--                   a replica's parameters are copies of the originals that autograd links
--                   back to them, so backward sums every replica's gradient into the
--                   original parameters on device_ids[1];
--   parallel apply  each replica runs on its chunk (on CUDA each device works on its own
--                   stream: nothing here waits for one replica before starting the next);
--   gather          the outputs are concatenated along `dim` on output_device.
--
-- Unlike PyTorch, the parameter copies are kept between forwards: a parameter is copied
-- again only when its storage changed (an optimizer step, load_state_dict, an in-place
-- write, a move), and otherwise the cached copy is linked to it again at no cost.
local torch = require 'torch'
local Module = require 'nn.Module'
local utils = require 'nn.utils'

local C = torch._C
local P = C.parallel

local DataParallel, parent = torch.class('nn.DataParallel', 'nn.Module')

local WHO = 'nn.DataParallel'

-- Devices ------------------------------------------------------------------------------

-- device_ids as given (ordinals, strings, devices), or every CUDA device when nil.
local function resolve_devices(ids)
  if ids == nil then
    ids = {}
    for i = 0, torch.cuda.device_count() - 1 do ids[#ids + 1] = i end
    if #ids == 0 then return {} end
  end
  if type(ids) ~= 'table' or getmetatable(ids) ~= nil then
    error(('%s: device_ids must be a list of devices, got %s'):format(WHO, tostring(ids)), 4)
  end
  if #ids == 0 then
    error(WHO .. ': device_ids is empty: give at least one device, or leave it out to use every CUDA device', 4)
  end
  return P.devices(ids, WHO .. ': device_ids')
end

function DataParallel:__init(module, opts)
  parent.__init(self)
  if not Module.is_module(module) then
    error(('%s: expected a module to wrap, got %s'):format(WHO, type(module)), 2)
  end
  local o = utils.options(WHO, opts, { device_ids = false, output_device = false, dim = 1 })
  if math.type(o.dim) ~= 'integer' or o.dim < 1 then
    error(('%s: dim must be an integer >= 1 (dims are 1-based), got %s'):format(WHO, tostring(o.dim)), 2)
  end
  self.module = module
  rawset(self, 'device_ids', resolve_devices(o.device_ids or nil))
  rawset(self, 'dim', o.dim)
  local out = o.output_device or self.device_ids[1]
  if out ~= nil then out = P.devices({ out }, WHO .. ': output_device')[1] end
  rawset(self, 'output_device', out)
end

-- Every parameter and buffer must be where the replicas are copied from.
function DataParallel:_check_placement()
  local home = self.device_ids[1]
  local function check(t)
    if t.device ~= home then
      error(('module must have its parameters and buffers on device %s (device_ids[1]) but found one of them on device: %s')
        :format(tostring(home), tostring(t.device)), 0)
    end
  end
  for _, p in ipairs(self.module:parameters()) do check(p) end
  for _, b in ipairs(self.module:buffers()) do check(b) end
end

-- Scatter ------------------------------------------------------------------------------

-- Visits every tensor in v (a tensor, or plain tables of them, nested), depth first.
local function each_tensor(v, fn, seen)
  if torch.is_tensor(v) then
    fn(v)
  elseif type(v) == 'table' and getmetatable(v) == nil and not seen[v] then
    seen[v] = true
    for _, x in pairs(v) do each_tensor(x, fn, seen) end
  end
end

-- v with every tensor replaced by chunks[tensor][r]; other values are shared as they are.
local function take_chunk(v, chunks, r)
  if torch.is_tensor(v) then return chunks[v][r] end
  if type(v) ~= 'table' or getmetatable(v) ~= nil then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = take_chunk(x, chunks, r) end
  return out
end

-- inputs (a packed argument list) -> one packed argument list per replica.
function DataParallel:_scatter(inputs, devices)
  local dim, first, chunks = self.dim, nil, {}
  each_tensor(inputs, function(t)
    if chunks[t] then return end
    if t:dim() < dim then
      error(('%s: cannot split an input of shape %s along dim %d (it has %d dimension%s)')
        :format(WHO, utils.shape(t), dim, t:dim(), t:dim() == 1 and '' or 's'), 0)
    end
    if first == nil then
      first = t
    elseif t:size(dim) ~= first:size(dim) then
      error(('%s: the input tensors differ in size along dim %d: %s and %s')
        :format(WHO, dim, utils.shape(first), utils.shape(t)), 0)
    end
    if t:size(dim) == 0 then
      error(('%s: cannot split an empty batch (input of shape %s) along dim %d'):format(WHO, utils.shape(t), dim), 0)
    end
    chunks[t] = P.scatter(t, devices, dim)
  end, {})
  if first == nil then
    error(WHO .. ': the input contains no tensor to split over the devices', 0)
  end
  local n = #chunks[first]
  local per_replica = {}
  for r = 1, n do
    per_replica[r] = take_chunk(inputs, chunks, r)
    per_replica[r].n = inputs.n
  end
  return per_replica
end

-- Replicate ----------------------------------------------------------------------------


-- The copies of `tensors` on every device, linked to them by autograd.  The memory of the
-- previous forward's copies is reused; only tensors whose storage changed are copied.
function DataParallel:_broadcast(tensors)
  local cache, n = rawget(self, '_cache'), #tensors
  local keys, versions, anchors = {}, {}, {}
  for i, t in ipairs(tensors) do
    keys[i], versions[i], anchors[i] = t:data_ptr(), t:_version(), t:detach()
  end
  local same = cache ~= nil and #cache.tensors == n
  for i = 1, n do
    if not same then break end
    same = rawequal(cache.tensors[i], tensors[i]) and cache.anchors[i]:size() == tensors[i]:size()
      and cache.anchors[i].dtype == tensors[i].dtype
  end
  local copies
  if same then
    local changed = {}
    for i = 1, n do changed[i] = keys[i] ~= cache.keys[i] or versions[i] ~= cache.versions[i] end
    copies = P.broadcast_coalesced(tensors, self.device_ids, cache.copies, changed)
  else
    copies = P.broadcast_coalesced(tensors, self.device_ids)
  end
  -- anchors keep the copied-from storage alive, so no new storage can take its address:
  -- an equal data_ptr and _version mean the same values
  rawset(self, '_cache', { tensors = tensors, keys = keys, versions = versions,
                           anchors = anchors, copies = copies })
  return copies
end

-- A structural copy of module m in which every tensor t of `swap` is replaced by swap[t]:
-- child modules are copied the same way, the registration tables copied, everything else
-- shared as PyTorch's replicate does.
local function replicate_tree(m, swap, memo)
  if memo[m] then return memo[m] end
  local r = {}
  memo[m] = r
  local kinds = rawget(m, '_kind')
  for k, v in next, m do
    local kind = kinds[k]
    if kind == 'module' then
      v = replicate_tree(v, swap, memo)
    elseif kind == 'parameter' or kind == 'buffer' then
      v = swap[v] or v
    elseif k == '_order' or k == '_kind' then
      local copy = {}
      for kk, vv in pairs(v) do copy[kk] = vv end
      v = copy
    end
    r[k] = v
  end
  return setmetatable(r, getmetatable(m))
end

-- Fresh copies of the buffers on every device, outside autograd, as PyTorch's replicate
-- makes them at each forward: a replica's in-place update (batch norm's running
-- statistics) then touches only its own copy, never memory shared with the parameter
-- copies that autograd saved, and only device_ids[1]'s module keeps its updates.
function DataParallel:_broadcast_buffers(buffers)
  local copies
  torch.no_grad(function() copies = P.broadcast_coalesced(buffers, self.device_ids) end)
  return copies
end

-- One module per used device: the module itself on device_ids[1], replicas elsewhere.
function DataParallel:_replicate(count)
  local params, buffers = self.module:parameters(), self.module:buffers()
  if (#params == 0 and #buffers == 0) or count == 1 then
    local same = {}
    for r = 1, count do same[r] = self.module end
    return same
  end
  local pcopies = #params > 0 and self:_broadcast(params) or nil
  local bcopies = #buffers > 0 and self:_broadcast_buffers(buffers) or nil
  local replicas = { self.module }
  for r = 2, count do
    local swap = {}
    for i, t in ipairs(params) do swap[t] = pcopies[r][i] end
    for i, t in ipairs(buffers) do swap[t] = bcopies[r][i] end
    replicas[r] = replicate_tree(self.module, swap, {})
  end
  return replicas
end

-- Parallel apply -----------------------------------------------------------------------

function DataParallel:_parallel_apply(replicas, inputs)
  local outputs = {}
  for r, replica in ipairs(replicas) do
    local args = inputs[r]
    local ok, out = pcall(replica, table.unpack(args, 1, args.n))
    if not ok then
      if type(out) ~= 'string' then error(out, 0) end
      error(('%s: replica %d on %s failed: %s'):format(WHO, r, tostring(self.device_ids[r]), out), 0)
    end
    outputs[r] = out
  end
  return outputs
end

-- Gather -------------------------------------------------------------------------------

local function gather(outputs, device, dim, path)
  local first = outputs[1]
  if torch.is_tensor(first) then
    local list = {}
    for r, out in ipairs(outputs) do
      if not torch.is_tensor(out) then
        error(('%s: output%s of replica %d is a %s, but that of replica 1 a tensor'):format(WHO, path, r, type(out)), 0)
      end
      list[r] = out
    end
    if first:dim() == 0 then
      -- scalars (a loss computed inside the module) become a vector, one per replica
      for r, out in ipairs(list) do list[r] = out:unsqueeze(1) end
      dim = 1
    elseif dim > first:dim() then
      error(('%s: cannot concatenate outputs%s of shape %s along dim %d'):format(WHO, path, utils.shape(first), dim), 0)
    end
    local ok, result = pcall(P.gather, list, device, dim)
    if not ok then
      error(('%s: the replicas\' outputs%s cannot be gathered: %s')
        :format(WHO, path, (tostring(result):gsub('^.-:%d+: ', ''))), 0)
    end
    return result
  elseif type(first) == 'table' and getmetatable(first) == nil then
    local result = {}
    for k in pairs(first) do
      local field = {}
      for r, out in ipairs(outputs) do
        if type(out) ~= 'table' or out[k] == nil then
          error(('%s: output of replica %d has no field %s%s'):format(WHO, r, path, '.' .. tostring(k)), 0)
        end
        field[r] = out[k]
      end
      result[k] = gather(field, device, dim, path .. '.' .. tostring(k))
    end
    return result
  end
  error(('%s: cannot gather output%s of type %s: outputs must be tensors or tables of tensors')
    :format(WHO, path, type(first)), 0)
end

-- Forward ------------------------------------------------------------------------------

-- Values (a packed list) with every tensor moved to device (one device: nothing to split).
local function move_inputs(inputs, device)
  local moved = {}
  each_tensor(inputs, function(t) moved[t] = { t:to(device) } end, {})
  local out = take_chunk(inputs, moved, 1)
  out.n = inputs.n
  return out
end

function DataParallel:forward(...)
  local devices = self.device_ids
  if #devices == 0 then return self.module(...) end
  self:_check_placement()
  if #devices == 1 then
    local args = move_inputs(table.pack(...), devices[1])
    local out = self.module(table.unpack(args, 1, args.n))
    if self.output_device == devices[1] then return out end
    return move_inputs({ out, n = 1 }, self.output_device)[1]
  end
  local inputs = self:_scatter(table.pack(...), devices)
  local replicas = self:_replicate(#inputs)
  local outputs = self:_parallel_apply(replicas, inputs)
  return gather(outputs, self.output_device, self.dim, '')
end

return DataParallel
