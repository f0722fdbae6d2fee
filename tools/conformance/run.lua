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
--
-- A case with a `ctor` field is one of PyTorch's module inputs (tools/conformance/moduledb.py):
-- the module is made, its state_dict compared with PyTorch's (names, dtypes, shapes) and
-- loaded with PyTorch's values, the forward run and compared, then the state_dict after the
-- forward and the gradients of the parameters and floating inputs.  Its KIND is missing,
-- refused, wrong, statewrong (state_dict names, order, dtypes, shapes or values after the
-- forward), gradwrong or gradrefused; every difference found is in MSG, the first's kind
-- is the case's.
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


-- ---------------------------------------------------------------- module cases

-- A name as PyTorch spells it: the numbers of dotted parts count from 0 ("layers.0.w").
local function pytorch_name(name)
  return (('.' .. name .. '.'):gsub('%.(%d+)%f[.]', function(n) return '.' .. (tonumber(n) - 1) end):sub(2, -2))
end

local function names_of(iter)
  local out = {}
  for name in iter do out[#out + 1] = pytorch_name(name) end
  return out
end

local function shape_str(t)
  local s = {}
  local size = t:size()
  for i = 1, #size do s[i] = size[i] end
  return compare.list_str(s, 99)
end

-- Differences between a state_dict (PyTorch's names) and PyTorch's records of one: the
-- names, then the dtype and shape of each tensor, and with values its values.
local function state_diff(sd, recs, values)
  local want, missing, extra = {}, {}, {}
  for _, r in ipairs(recs) do
    want[r.name] = r
    if sd[r.name] == nil then missing[#missing + 1] = r.name end
  end
  for name in pairs(sd) do
    if want[name] == nil then extra[#extra + 1] = tostring(name) end
  end
  table.sort(extra)
  if #missing > 0 or #extra > 0 then
    return ('state_dict keys: dplua lacks %s and has %s'):format(compare.list_str(missing, 6), compare.list_str(extra, 6))
  end
  for _, r in ipairs(recs) do
    local t = sd[r.name]
    if not torch.is_tensor(t) then return ('state_dict %s is a %s'):format(r.name, type(t)) end
    if t.dtype ~= r.dtype then return ('state_dict %s: dtype %s, PyTorch %s'):format(r.name, t.dtype, r.dtype) end
    if shape_str(t) ~= compare.list_str(r.shape, 99) then
      return ('state_dict %s: shape %s, PyTorch %s'):format(r.name, shape_str(t), compare.list_str(r.shape, 99))
    end
    if values then
      local ok, msg = compare.check(t, r)
      if not ok then return ('state_dict %s after the forward: %s'):format(r.name, msg) end
    end
  end
end

local function order_diff(what, got, want)
  if compare.list_str(got, 999) ~= compare.list_str(want, 999) then
    return ('%s order: %s, PyTorch %s'):format(what, compare.list_str(got, 8), compare.list_str(want, 8))
  end
end

-- The tensors (and nils) of a forward's results, nested tables flattened in order.
local function flat(v, out)
  if type(v) == 'table' and not torch.is_tensor(v) and getmetatable(v) == nil then
    for i = 1, v.n or #v do flat(v[i], out) end
  else
    out[#out + 1] = v
  end
  return out
end

-- An error message without the position in this file (a constructor called in a tail call).
local function module_error(err)
  return (one_line(err):gsub('^[^:]*run%.lua:%d+: ', ''))
end

local function module_case(case)
  local env = env_of(case, case.leaves)
  local found = pcall(function()
    assert(load('return ' .. case.check, 'check', 't', env)() ~= nil)
  end)
  if not found then return 'missing', 'dplua has no ' .. case.check end
  local ok, m = pcall(function()
    local m = assert(load('return ' .. case.ctor, 'ctor', 't', env))()
    m:to(case.dtype)
    m:train(case.mode == 'train')
    return m
  end)
  if not ok then return 'refused', module_error(m) end
  local diffs = {}
  local function differs(kind, msg)
    if msg then diffs[#diffs + 1] = { kind, msg } end
  end
  local sd = m:state_dict { to_pytorch = true }
  local bad = state_diff(sd, case.state, false)
  if bad then return 'statewrong', bad end                      -- PyTorch's weights cannot be copied in
  differs('statewrong', order_diff('named_parameters', names_of(m:named_parameters()), case.params))
  differs('statewrong', order_diff('named_buffers', names_of(m:named_buffers()), case.buffers))
  local weights = {}
  for _, r in ipairs(case.state) do weights[r.name] = make(r) end
  local loaded, err = pcall(m.load_state_dict, m, weights, { from_pytorch = true })
  if not loaded then return 'refused', 'load_state_dict: ' .. module_error(err) end
  local outs
  ok, err = pcall(function()
    local args = assert(load('return ' .. case.args, 'args', 't', env))
    outs = flat(table.pack(m(args())), {})
  end)
  if not ok then return 'refused', module_error(err) end
  if #outs ~= #case.outs then
    differs('wrong', ('%d results, PyTorch %d'):format(#outs, #case.outs))
  else
    for i, rec in ipairs(case.outs) do
      local same, msg = compare.check(outs[i], rec)
      if not same then differs('wrong', ('result %d: %s'):format(i, msg)) end
    end
  end
  ok, err = pcall(function() differs('statewrong', state_diff(m:state_dict { to_pytorch = true }, case.after, true)) end)
  if not ok then differs('refused', 'state_dict after the forward: ' .. module_error(err)) end
  local forward_wrong = false
  for _, d in ipairs(diffs) do forward_wrong = forward_wrong or d[1] ~= 'statewrong' end
  if case.grads and not forward_wrong then
    ok, err = pcall(function()
      local loss
      for _, c in ipairs(case.cotangents) do
        local o = outs[c.out]
        if not torch.is_tensor(o) or not o.requires_grad then
          error(('result %d does not require grad (PyTorch: it does)'):format(c.out), 0)
        end
        local term = (o * make(c)):sum()
        loss = loss and loss + term or term
      end
      loss:backward()
    end)
    if not ok then
      differs('gradrefused', module_error(err))
    else
      local params = {}
      for name, p in m:named_parameters() do params[pytorch_name(name)] = p end
      for _, rec in ipairs(case.grads.params) do
        local p = params[rec.name]
        local same, msg = compare.check(p and p.grad, rec)
        if not same then differs('gradwrong', ('grad of %s: %s'):format(rec.name, msg)) end
      end
      for _, rec in ipairs(case.grads.inputs) do
        local same, msg = compare.check(env['a' .. rec.input].grad, rec)
        if not same then differs('gradwrong', ('grad of input a%d: %s'):format(rec.input, msg)) end
      end
    end
  end
  if #diffs == 0 then return end
  local msgs = {}
  for i, d in ipairs(diffs) do msgs[i] = d[2] end
  return diffs[1][1], table.concat(msgs, '; ')
end

local function run_case(case)
  if case.ctor then return module_case(case) end
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
