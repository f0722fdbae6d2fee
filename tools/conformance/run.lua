-- tools/conformance/run.lua: runs a batch of the conformance cases (PyTorch's op database,
-- translated by tools/conformance/opdb.py) in dplua and compares each with PyTorch's result.
--
-- usage: build/dplua tools/conformance/run.lua CASES.lua [FIRST]
--
-- Prints, in the differential fuzzer's protocol (tools/fuzz/fuzz reads it), one line per
-- event:
--   begin I            case I starts (a crash after it is case I's)
--   fail I KIND MSG    case I differs; KIND is one of
--                        missing   dplua has no such function or method
--                        refused   dplua raised where PyTorch computed
--                        wrong     a value, dtype, shape, number of results or alias differs
--                        accepted  an error input of PyTorch's that dplua did not refuse
--                        gradwrong / gradrefused   the same for the float64 gradients
--   done I
-- A case with no fail line agrees with PyTorch.  Each case runs under pcall, on fresh
-- tensors, so one case's error or in-place write cannot touch another.
local torch = require 'torch'

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'tools/conformance'
local compare = dofile(here .. '/../fuzz/compare.lua')
compare.RTOL.float32, compare.ATOL.float32 = 1e-5, 1e-5

local function one_line(s)
  return (tostring(s):gsub('\n.*', ''))
end

local function make(rec, requires_grad)
  local opts = { dtype = rec.dtype }
  local t
  local numel = 1
  for _, n in ipairs(rec.shape) do numel = numel * n end
  if numel == 0 then
    t = torch.empty(rec.shape, opts)
  elseif #rec.shape == 0 then
    t = torch.tensor(rec.values[1], opts)
  else
    t = torch.tensor(rec.values, opts):view(rec.shape)
  end
  if requires_grad then t.requires_grad = true end
  return t
end

-- The environment of a case: a1, a2 ... are fresh tensors of its inputs.
local function env_of(case, leaves)
  local env = setmetatable({ torch = torch }, { __index = _G })
  local grad = {}
  for _, k in ipairs(leaves or {}) do grad[k] = true end
  for k, rec in ipairs(case.inputs) do env['a' .. k] = make(rec, grad[k]) end
  return env
end

local function results(case, env)
  local chunk = assert(load('return ' .. case.lua, 'case', 't', env))
  local res = table.pack(chunk())
  local outs = {}
  if case.multi and res.n == 1 and type(res[1]) == 'table' and not torch.is_tensor(res[1]) then
    local t = res[1]
    if #t == 0 and case.fields then          -- a table with PyTorch's named fields
      for i, name in ipairs(case.fields) do outs[i] = t[name] end
      return outs, #case.fields
    end
    for i, v in ipairs(t) do outs[i] = v end
    return outs, #t
  end
  for i = 1, res.n do outs[i] = res[i] end
  return outs, res.n
end

local function numel(t)
  local n = 1
  local s = t:size()
  for i = 1, #s do n = n * s[i] end
  return n
end

-- The input (its number) whose memory t lies in, or 0.
local function alias_of(t, env, case)
  if numel(t) == 0 then return 0 end
  local p = t:data_ptr()
  for k = 1, #case.inputs do
    local a = env['a' .. k]
    if torch.is_tensor(a) and a.dtype == t.dtype and numel(a) > 0 then
      local base = a:data_ptr()
      if p >= base and p < base + numel(a) * a:element_size() then return k end
    end
  end
  return 0
end

local function check_out(got, rec, case, env, i)
  if rec.number ~= nil then
    local e = rec.number
    if type(got) ~= type(e) and not (type(got) == 'number' and type(e) == 'number') then
      return false, ('result %d: %s %s, PyTorch the %s %s'):format(i, type(got), tostring(got), type(e), tostring(e))
    end
    if type(e) == 'number' and math.abs(got - e) > 1e-6 * math.max(1, math.abs(e)) or
        type(e) ~= 'number' and got ~= e then
      return false, ('result %d: %s, PyTorch %s'):format(i, tostring(got), tostring(e))
    end
    return true
  end
  if (case.random or rec.shape_only) and not rec.none then
    rec = { dtype = rec.dtype, shape = rec.shape, values = {} }
  end
  local ok, msg = compare.check(got, rec)
  if not ok then return false, ('result %d: %s'):format(i, msg) end
  if rec.alias ~= nil and case.view ~= false then
    local a = alias_of(got, env, case)
    if a ~= rec.alias then
      if rec.alias == 0 then
        return false, ('result %d shares memory with input a%d; PyTorch returns a new tensor'):format(i, a)
      end
      return false, ('result %d does not share memory with input a%d; PyTorch returns a view'):format(i, rec.alias)
    end
  end
  return true
end

local function forward(case)
  local env = env_of(case)
  local ok, outs, n = pcall(results, case, env)
  if not ok then return 'refused', one_line(outs) end
  if n ~= #case.outs then
    return 'wrong', ('%d results, PyTorch %d'):format(n, #case.outs)
  end
  for i, rec in ipairs(case.outs) do
    local same, msg = check_out(outs[i], rec, case, env, i)
    if not same then return 'wrong', msg end
  end
end

local function backward(case)
  local g = case.grad
  local env = env_of(case, g.leaves)
  local ok, err = pcall(function()
    local outs = results(case, env)
    local loss
    for j, i in ipairs(g.outs) do
      local o = outs[i]
      if not torch.is_tensor(o) or not o.requires_grad then
        error(('result %d does not require grad (PyTorch: it does)'):format(i), 0)
      end
      local term = (o * make(g.cotangents[j])):sum()
      loss = loss and loss + term or term
    end
    local leaves = {}
    for j, k in ipairs(g.leaves) do leaves[j] = env['a' .. k] end
    local grads = torch.autograd.grad(loss, leaves, { allow_unused = true })
    for j, rec in ipairs(g.grads) do
      local same, msg = compare.check(grads[j], rec)
      if not same then error({ wrong = ('grad of a%d: %s'):format(g.leaves[j], msg) }) end
    end
  end)
  if ok then return end
  if type(err) == 'table' then return 'gradwrong', err.wrong end
  return 'gradrefused', one_line(err)
end

local function run_case(case)
  if case.check then
    local env = env_of(case)
    local found = pcall(function()
      assert(load('return ' .. case.check, 'check', 't', env)() ~= nil)
    end)
    if not found then return 'missing', 'dplua has no ' .. case.check:gsub('^a1%[(.*)%]$', 'method %1') end
  end
  if case.error then
    local ok = pcall(results, case, env_of(case))
    if ok then return 'accepted', 'PyTorch raised ' .. case.error end
    return
  end
  local kind, msg = forward(case)
  if kind then return kind, msg end
  if case.grad then return backward(case) end
end

local cases = dofile(assert(arg[1], 'usage: run.lua CASES.lua [FIRST]'))
for i = tonumber(arg[2]) or 1, #cases do
  print('begin ' .. i)
  io.stdout:flush()
  local ok, kind, msg = pcall(run_case, cases[i])
  if not ok then kind, msg = 'refused', one_line(kind) end
  if kind then print(('fail %d %s %s'):format(i, kind, (tostring(msg):gsub('\n', ' ')))) end
  print('done ' .. i)
  io.stdout:flush()
end
