-- DataLoader workers for datasets written in Lua: each worker is a thread with a Lua state
-- of its own (lua/l_workers.c), into which the dataset, collate_fn and worker_init_fn are
-- copied when the workers start, as PyTorch pickles them into its worker processes.
--
-- In the main state, start() copies them and starts the threads; in a worker's state,
-- setup() prepares it and returns the function that makes one batch.
local torch = require 'torch'
local C = require('torch._C').data
local class = require 'torch.class'

local M = {}

-- ------------------------------------------------------------------ main state

-- What a fresh worker state holds without being sent it, as {module = {key = true}}
-- (found once per state, by making one).
local fresh
local function fresh_state()
  if fresh then return fresh end
  fresh = {}
  for line in C.worker_probe():gmatch('[^\n]+') do
    local keys, name = {}, nil
    for part in line:gmatch('[^%z]+') do
      if name == nil then name = part else keys[part] = true end
    end
    if name then fresh[name] = keys end
  end
  return fresh
end

-- Whether a worker's require(name) finds the module: built in, or on the search paths (a
-- table put into package.loaded by hand is copied instead).
local function findable(name)
  return package.preload[name] ~= nil or package.searchpath(name, package.path) ~= nil
    or package.searchpath(name, package.cpath) ~= nil
end

-- {[object] = 'm<module>' | 'f<module>\0<key>'}: what is sent by name.  Every module of
-- package.loaded that a worker can require, and the fields of modules: for a module that a
-- fresh worker has loaded already, only the fields it has there (a field that the main
-- state added, such as a class 'nn.MyLayer', is copied instead); for _G only those.
local function known_objects()
  local have = fresh_state()
  local known = {}
  local function add_module(name, mod)
    if known[mod] == nil then known[mod] = 'm' .. name end
  end
  local function add_fields(name, mod)
    local keys = have[name]
    if name == '_G' and not keys then return end
    for k, v in pairs(mod) do
      local tv = type(v)
      if type(k) == 'string' and (tv == 'function' or tv == 'table') and known[v] == nil
        and (keys == nil or keys[k]) then
        known[v] = 'f' .. name .. '\0' .. k
      end
    end
  end
  -- modules a fresh worker has first, so that their names win
  local later = {}
  for name, mod in pairs(package.loaded) do
    if type(mod) == 'table' and type(name) == 'string' then
      if have[name] then add_module(name, mod) elseif findable(name) then later[#later + 1] = name end
    end
  end
  table.sort(later)
  for _, name in ipairs(later) do add_module(name, package.loaded[name]) end
  for name, mod in pairs(package.loaded) do
    if type(mod) == 'table' and type(name) == 'string' and have[name] then add_fields(name, mod) end
  end
  for _, name in ipairs(later) do add_fields(name, package.loaded[name]) end
  return known
end

-- Starts the workers: opts {num_workers, window, base_seed, dataset, collate_fn,
-- worker_init_fn}.  Raises (naming the path) when something cannot be copied.
function M.start(opts)
  local known = known_objects()
  -- globals that hold modules (dplua's `torch`, `nn`, `optim`, a script's own) are set in
  -- the workers too
  local globals = {}
  for k, v in pairs(_G) do
    if type(k) == 'string' and type(v) == 'table' and (known[v] or ''):sub(1, 1) == 'm' then globals[k] = v end
  end
  local payload = {
    dataset = opts.dataset, collate_fn = opts.collate_fn, worker_init_fn = opts.worker_init_fn,
    num_workers = opts.num_workers, base_seed = opts.base_seed, globals = globals,
    default_device = torch.get_default_device(),
  }
  local paths = { path = package.path, cpath = package.cpath }
  return C.worker_pool(paths, payload, known, class.registry(), opts.num_workers, opts.window, opts.base_seed)
end

-- ------------------------------------------------------------------ worker state

local info

-- torch.data.get_worker_info(): {id, num_workers, seed, dataset} in a worker, nil elsewhere
function M.get_worker_info()
  return info
end

-- Called in worker `id` (1-based) with the copied payload; returns fetch(indices, batch),
-- which returns the batch and whether it is a sequence (returned as several values).
function M.setup(p, id)
  for k, v in pairs(p.globals) do rawset(_G, k, v) end
  torch.set_default_device(p.default_device)   -- the main state's, as a forked worker's
  torch.set_grad_enabled(false)   -- as PyTorch's workers, which never record
  local seed = p.base_seed + id - 1
  torch.manual_seed(seed)         -- this thread's own stream (l_workers.c)
  math.randomseed(seed)
  info = { id = id, num_workers = p.num_workers, seed = seed, dataset = p.dataset }
  if p.worker_init_fn then p.worker_init_fn(id) end
  local fetch = require('torch.data.loader').DataLoader.fetcher(p.dataset, p.collate_fn)
  return function(indices, b) return fetch(indices, 1, #indices, b, 0) end
end

return M
