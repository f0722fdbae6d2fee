-- torch.distributed: one process per rank, started by MPI (`mpirun -np N dplua train.lua`).
--
--   local dist = require 'torch.distributed'
--   dist.init_process_group{backend = 'mpi'}      -- 'mpi' for CPU tensors, 'nccl' for CUDA
--   dist.all_reduce(t, 'sum')                      -- in place: 'sum', 'avg', 'max', 'min',
--                                                  -- 'product', 'band', 'bor', 'bxor'
--   dist.broadcast(t, 0)                           -- src is a 0-based rank
--   dist.all_gather(list, t)                       -- list[r + 1] receives rank r's t
--   dist.barrier(); dist.destroy_process_group()
--
-- Ranks are 0-based, as in MPI and PyTorch.  Every rank must call the collectives in the
-- same order with tensors of the same shape and dtype (a call that differs raises an error
-- naming each rank's call).  The work is done in src/dist*.c; this file checks arguments
-- and raises errors at the caller's line.
local C = require('torch._C').dist
local options = require 'torch.options'

local dist = {}

-- PyTorch's names for the reduction ops, for code written as dist.ReduceOp.SUM.  A name it
-- does not have (dist.ReduceOp.PROD) is an error rather than a nil that all_reduce would
-- take for its default, the sum.  BAND, BOR and BXOR take integer and bool tensors, over
-- the mpi backend only (NCCL has no bitwise reductions).
local reduce_op_names = 'SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR'
dist.ReduceOp = setmetatable({ SUM = 'sum', AVG = 'avg', PRODUCT = 'product', MIN = 'min', MAX = 'max',
                               BAND = 'band', BOR = 'bor', BXOR = 'bxor' }, {
  __index = function(_, k)
    error(('torch.distributed.ReduceOp has no op %s (its ops: %s)'):format(tostring(k), reduce_op_names), 2)
  end,
})

-- Raises a binding's error at the caller of the public function (level 3 from here), unless
-- the binding already put a position in front of it.
local function rethrow(err)
  if type(err) == 'string' and err:match('^[^\n:]+:%d+: ') then error(err, 0) end
  error(err, 3)
end

-- Calls a binding function; its error is raised at the caller of the public function.
local function call(fn, ...)
  local res = table.pack(pcall(fn, ...))
  if not res[1] then rethrow(res[2]) end
  return table.unpack(res, 2, res.n)
end

-- True when this build can create a process group at all (it has the MPI backend).
function dist.is_available() return C.has_mpi() end
function dist.is_mpi_available() return C.has_mpi() end
-- True when the CUDA backend with NCCL can be loaded (a GPU may still be missing).
function dist.is_nccl_available() return C.has_nccl() end

local init_options = { backend = options.none, world_size = options.none, rank = options.none,
                       init_method = options.none }

-- init_process_group{backend='mpi' | 'nccl' [, world_size=, rank=]} or
-- init_process_group('mpi').  world_size and rank, when given, must agree with what MPI
-- says (processes are started by mpirun, which decides both).
function dist.init_process_group(opts)
  local o
  if opts == nil then
    o = {}
  elseif type(opts) == 'string' then
    o = { backend = opts }
  elseif type(opts) == 'table' then
    o = options.check('torch.distributed.init_process_group', opts, init_options)
  else
    error(('torch.distributed.init_process_group: expected an option table or a backend name, got %s')
      :format(type(opts)), 2)
  end
  local backend = o.backend or 'mpi'
  if type(backend) ~= 'string' then
    error(('torch.distributed.init_process_group: backend must be a string, got %s'):format(type(backend)), 2)
  end
  backend = backend:lower()
  if backend ~= 'mpi' and backend ~= 'nccl' then
    error(("torch.distributed.init_process_group: unknown backend '%s' (expected 'mpi' or 'nccl')")
      :format(backend), 2)
  end
  if o.init_method ~= nil and o.init_method ~= 'mpi://' and o.init_method ~= 'env://' then
    error(("torch.distributed.init_process_group: init_method '%s' is not supported: processes "
      .. "are started and connected by mpirun"):format(tostring(o.init_method)), 2)
  end
  call(C.init, backend)
  local rank, size = C.get_rank(), C.get_world_size()
  -- A process that a launcher (torchrun, a cluster script) started as one rank of a larger
  -- job carries WORLD_SIZE and RANK: the group it joined must agree, never a silent world
  -- of 1 where every process trains alone.
  for _, v in ipairs { { 'WORLD_SIZE', size, 'world size' }, { 'RANK', rank, 'rank' } } do
    local env = os.getenv(v[1])
    if env ~= nil and env ~= '' and tonumber(env) ~= v[2] then
      C.destroy()
      error(('torch.distributed.init_process_group: this process was started with %s=%s, but the %s group '
        .. 'it joined gives it %s %d: dplua starts its ranks with mpirun (mpirun -np N dplua train.lua); '
        .. 'a torchrun-style launch through env:// is not supported yet'):format(v[1], env, backend, v[3], v[2]), 2)
    end
  end
  for _, k in ipairs { 'world_size', 'rank' } do
    local want, got = o[k], k == 'rank' and rank or size
    if want ~= nil and want ~= got then
      C.destroy()
      error(('torch.distributed.init_process_group: %s=%s was asked for, but mpirun started this '
        .. 'process with %s %d'):format(k, tostring(want), k, got), 2)
    end
  end
end

function dist.is_initialized() return C.is_initialized() end
-- This process's rank, 0-based.
function dist.get_rank() return call(C.get_rank) end
function dist.get_world_size() return call(C.get_world_size) end
-- The rank among the processes on this host (which GPU a rank usually takes).
function dist.get_local_rank() return call(C.get_local_rank) end
-- 'mpi' or 'nccl'.
function dist.get_backend()
  if not C.is_initialized() then call(C.get_rank) end
  return C.get_backend()
end

local function check_tensor(who, t, what)
  local torch = package.loaded.torch or require 'torch'
  if not torch.is_tensor(t) then
    error(('torch.distributed.%s: expected %s to be a tensor, got %s'):format(who, what or 'a tensor', type(t)), 3)
  end
end

-- Reduces t over all ranks, in place: every rank ends with the result.  The binding checks
-- t and op itself, so a call costs one pcall and no table (its overhead shows on small
-- tensors); the messages for a wrong t or op are made here only when it fails.
local C_all_reduce = C.all_reduce
function dist.all_reduce(t, op)
  local ok, err = pcall(C_all_reduce, t, op or 'sum')
  if ok then return end
  check_tensor('all_reduce', t)
  if op ~= nil and type(op) ~= 'string' then
    error(("torch.distributed.all_reduce: op must be 'sum', 'avg', 'max', 'min', 'product', 'band', 'bor' or 'bxor', got %s")
      :format(type(op)), 2)
  end
  rethrow(err)
end

-- Copies rank src's t into every rank's t (in place).
function dist.broadcast(t, src)
  check_tensor('broadcast', t)
  if math.type(src) ~= 'integer' then
    error(('torch.distributed.broadcast: src must be an integer rank (0-based), got %s'):format(
      src == nil and 'nil' or tostring(src)), 2)
  end
  call(C.broadcast, t, src)
end

-- Fills list with every rank's t: list[r + 1] is rank r's.  The list holds world_size
-- tensors shaped like t; an empty list is filled with new ones.
function dist.all_gather(list, t)
  if type(list) ~= 'table' then
    error(('torch.distributed.all_gather: expected a list of tensors first, got %s'):format(type(list)), 2)
  end
  check_tensor('all_gather', t, 'the second argument')
  if #list == 0 then
    local n = call(C.get_world_size)
    for i = 1, n do list[i] = t:clone():detach() end
  end
  call(C.all_gather, list, t)
end

-- Every rank's string, indexed by rank + 1 (used to compare models across ranks).
function dist.all_gather_string(s)
  if type(s) ~= 'string' then
    error(('torch.distributed.all_gather_string: expected a string, got %s'):format(type(s)), 2)
  end
  return call(C.all_gather_string, s)
end

function dist.barrier() call(C.barrier) end

-- Frees the process group; MPI itself is finalised when the program exits.
function dist.destroy_process_group() call(C.destroy) end

-- Debugging (the specs' view of DistributedDataParallel on CUDA), not part of the API:
-- how many times this thread has waited for a CUDA device (stream, event and device
-- synchronisations, blocking copies); backward with DDP on CUDA makes none.
function dist._cuda_host_syncs() return C.cuda_host_syncs() end
-- Queues work on t's device's side stream and marks t's memory as used by it (record_stream).
function dist._side_stream_use(t) call(C.side_stream_use, t) end

return dist
