-- tools/fuzz/run.lua: replays a batch of the differential fuzzer's programs in dplua and
-- compares every step with what PyTorch gave (tools/fuzz/gen.py writes the batch).
--
-- usage: build/dplua tools/fuzz/run.lua BATCH.lua [FIRST]
--
-- Prints, for the driver (tools/fuzz/fuzz) to read, one line per event:
--   begin I             program I starts (a crash after it is program I's)
--   fail I STEP MSG     the first disagreement of program I: a value, dtype or shape that
--                       differs, or dplua raising where PyTorch did not; STEP is the step's
--                       number or "final" (the values after every in-place write)
--   note I STEP MSG     PyTorch raised and dplua did not (dplua may be more permissive by
--                       design), or dplua raised one of the STRICTER errors below: listed,
--                       but not a failure
--   done I
-- A program stops at its first failure or note (later steps would only repeat it, or work
-- on values PyTorch never had).
local torch = require 'torch'

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'tools/fuzz'
local compare = dofile(here .. '/compare.lua')

-- Where dplua raises by design and PyTorch computes: a pattern of dplua's message, and why.
local STRICTER = {
  { 'in%-place operation %S+ on a tensor that requires grad and shares its memory with a view',
    'in-place ops on tensors whose views autograd recorded are refused' },
  { 'matmul: expected both operands to have the same dtype', 'matmul does not promote' },
  { 'matmul: not supported for bool tensors', 'matmul has no bool kernel' },
  { 'more than one element of the written%-to tensor refers to a single memory location',
    'writes into expanded views are refused even when they have no elements' },
}

local function stricter(err)
  for _, s in ipairs(STRICTER) do
    if tostring(err):find(s[1]) then return s[2] end
  end
end

local function one_line(s)
  return (tostring(s):gsub('\n.*', ''))
end

local function describe(r)
  if r.none then return 'None' end
  return ('%s %s %s'):format(r.dtype, compare.list_str(r.shape, 99), compare.list_str(r.values))
end

-- Runs program p (number i); returns false at its first failure.
local function run_program(p, i)
  local env = setmetatable({ torch = torch }, { __index = _G })
  for s, step in ipairs(p.steps) do
    local chunk = assert(load(step.lua, 'step ' .. s, 't', env))
    local ok, err = pcall(chunk)
    if ok and step.error then
      -- what dplua computed (or wrote in place) has no PyTorch twin: the program ends here
      print(('note %d %d PyTorch raised, dplua did not: %s  [%s]'):format(i, s, one_line(step.error), step.lua))
      return true
    elseif not ok and not step.error and stricter(err) then
      print(('note %d %d dplua stricter by design (%s): %s  [%s]'):format(i, s, stricter(err), one_line(err), step.lua))
      return true
    elseif not ok and not step.error then
      local what = {}
      for k, r in ipairs(step.results) do what[k] = r.var .. ' = ' .. describe(r) end
      print(('fail %d %d dplua raised: %s  [PyTorch: %s]'):format(i, s, one_line(err), table.concat(what, '; ')))
      return false
    elseif ok then
      for _, r in ipairs(step.results) do
        local same, msg = compare.check(env[r.var], r)
        if not same then
          print(('fail %d %d %s: %s'):format(i, s, r.var, one_line(msg)))
          return false
        end
      end
    end
  end
  for _, r in ipairs(p.final or {}) do
    local same, msg = compare.check(env[r.var], r)
    if not same then
      print(('fail %d final %s: %s'):format(i, r.var, one_line(msg)))
      return false
    end
  end
  return true
end

local progs = dofile(assert(arg[1], 'usage: run.lua BATCH.lua [FIRST]'))
for i = tonumber(arg[2]) or 1, #progs do
  print('begin ' .. i)
  io.stdout:flush()
  run_program(progs[i], i)
  print('done ' .. i)
  io.stdout:flush()
end
