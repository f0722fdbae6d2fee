-- check.lua: the harness of the MPI specs.  Every rank runs every check; once a process
-- group exists the outcomes are gathered and rank 0 prints one line per check:
--   ok <name>            passed on every rank
--   ok <name> # SKIP why  not run here (e.g. no CUDA)
--   not ok <name>: rank R: <error>
-- spec/mpi/run counts these lines.  Checks made before the group exists are reported at
-- the first check after it (or by finish()).
local dist = require 'torch.distributed'

local M = {}
local queued = {}

local function flat(s) return (tostring(s):gsub('\n', ' | ')) end

local function report(name, status)
  if not dist.is_initialized() then
    queued[#queued + 1] = { name, status }
    return
  end
  local pending = queued
  queued = {}
  pending[#pending + 1] = { name, status }
  for _, item in ipairs(pending) do
    local all = dist.all_gather_string(item[2])
    if dist.get_rank() == 0 then
      local bad
      for r, s in ipairs(all) do
        if s:sub(1, 4) == 'fail' then bad = ('rank %d: %s'):format(r - 1, s:sub(6)); break end
      end
      if bad then print(('not ok %s: %s'):format(item[1], bad))
      elseif all[1]:sub(1, 4) == 'skip' then print(('ok %s # SKIP %s'):format(item[1], all[1]:sub(6)))
      else print('ok ' .. item[1]) end
      io.stdout:flush()
    end
  end
end

-- Runs fn (on every rank) as the check `name`.  fn may call M.skip(reason).
function M.test(name, fn)
  local ok, err = pcall(fn)
  local status
  if ok then status = 'ok'
  elseif type(err) == 'table' and err.skip then status = 'skip ' .. flat(err.skip)
  else status = 'fail ' .. flat(err) end
  report(name, status)
end

function M.skip(reason) error({ skip = reason }, 0) end

-- Prints what is still queued (checks made while no group existed) from rank 0 only.
function M.finish()
  for _, item in ipairs(queued) do
    local rank = tonumber(os.getenv('OMPI_COMM_WORLD_RANK') or '0')
    if rank == 0 then
      local s = item[2]
      if s:sub(1, 4) == 'fail' then print(('not ok %s: rank 0: %s'):format(item[1], s:sub(6)))
      else print('ok ' .. item[1]) end
    end
  end
  queued = {}
  io.stdout:flush()
end

-- Assertions with messages that say what differed.
function M.eq(a, b, what)
  if a ~= b then error(('%s: expected %s, got %s'):format(what or 'value', tostring(b), tostring(a)), 2) end
end

function M.close(a, b, tol, what)
  if not torch.allclose(a, b, tol or 1e-5, tol or 1e-5) then
    local d = (a - b):abs():max():item()
    error(('%s: tensors differ (max abs difference %g)'):format(what or 'tensor', d), 2)
  end
end

function M.equal_tensors(a, b, what)
  if not torch.equal(a, b) then
    error(('%s: expected %s, got %s'):format(what or 'tensor', tostring(b), tostring(a)), 2)
  end
end

-- Calls fn, which must fail with a message containing every one of the given strings.
function M.raises(fn, ...)
  local ok, err = pcall(fn)
  if ok then error('expected an error, but the call succeeded', 2) end
  err = tostring(err)
  for _, s in ipairs { ... } do
    if not err:find(s, 1, true) then
      error(('expected an error mentioning "%s", got: %s'):format(s, err), 2)
    end
  end
  return err
end

return M
