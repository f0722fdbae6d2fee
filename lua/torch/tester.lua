-- torch.Tester and torch.TestSuite: Torch7's unit-test runner, so Torch7 test files run.
--
--   local tests = torch.TestSuite()
--   local tester = torch.Tester()
--   function tests.addition() tester:eq(torch.ones(2) + 1, torch.Tensor{2, 2}, 1e-6) end
--   tester:add(tests):run()
--
-- Every assert records a pass or a failure (with the message and where it was called);
-- run() calls each test in a protected call (an error is a failure of that test), prints
-- a line per test that failed and a summary, and returns whether everything passed.
local torch = require 'torch'

local Tester = {}
Tester.__index = Tester

local function caller()
  local info = debug.getinfo(3, 'Sl')   -- the test: the asserts tail-call _record
  return info and ('%s:%d'):format(info.short_src, info.currentline) or '?'
end

local function new()
  return setmetatable({ tests = {}, names = {}, failures = {}, asserts = 0 }, Tester)
end

-- add(tests) with a table of functions (a TestSuite), or add(fn, name)
function Tester:add(f, name)
  if type(f) == 'table' then
    local keys = {}
    for k in pairs(f) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do self:add(f[k], k) end
    return self
  end
  if type(f) ~= 'function' then error('Tester:add: expected a function or a table of functions', 2) end
  name = name or ('test' .. (#self.names + 1))
  if self.tests[name] then error(("Tester:add: a test called '%s' exists already"):format(name), 2) end
  self.tests[name] = f
  self.names[#self.names + 1] = name
  return self
end

function Tester:_record(ok, message)
  self.asserts = self.asserts + 1
  if not ok then
    table.insert(self.failures, { test = self.current, where = caller(), message = message or 'assertion failed' })
  end
  return ok
end

local function describe(v)
  if torch.is_tensor(v) then return ('a %s tensor of size %s'):format(v.dtype, tostring(v.shape)) end
  return tostring(v)
end

-- a one-element tensor (what PyTorch's full reductions such as x:max() return, where
-- Torch7's returned a number) compares as its number in the number asserts
local function num(v)
  if torch.is_tensor(v) and v:numel() == 1 then return v:item() end
  return v
end

-- a one-element tensor condition (x:all(), x:eq(y):all()) counts by its value, not as a
-- Lua value that is always true
function Tester:assert(cond, msg)
  if torch.is_tensor(cond) then
    if cond:numel() ~= 1 then
      error(('Tester:assert: a tensor of %d elements is not a condition; use :all() or :any()'):format(cond:numel()), 2)
    end
    local v = cond:item()
    cond = v ~= 0 and v ~= false
  end
  return self:_record(cond and true or false, msg)
end
function Tester:assertlt(a, b, msg) a, b = num(a), num(b); return self:_record(a < b, ('%s (%s < %s)'):format(msg or 'assertlt', a, b)) end
function Tester:assertle(a, b, msg) a, b = num(a), num(b); return self:_record(a <= b, ('%s (%s <= %s)'):format(msg or 'assertle', a, b)) end
function Tester:assertgt(a, b, msg) a, b = num(a), num(b); return self:_record(a > b, ('%s (%s > %s)'):format(msg or 'assertgt', a, b)) end
function Tester:assertge(a, b, msg) a, b = num(a), num(b); return self:_record(a >= b, ('%s (%s >= %s)'):format(msg or 'assertge', a, b)) end
function Tester:assertne(a, b, msg) a, b = num(a), num(b); return self:_record(a ~= b, ('%s (%s ~= %s)'):format(msg or 'assertne', a, b)) end
function Tester:asserteq(a, b, msg) a, b = num(a), num(b); return self:_record(a == b, ('%s (%s == %s)'):format(msg or 'asserteq', a, b)) end
function Tester:assertalmosteq(a, b, tol, msg)
  if type(tol) == 'string' then tol, msg = nil, tol end
  tol = tol or 1e-16
  a, b = num(a), num(b)
  return self:_record(math.abs(a - b) <= tol, ('%s (|%s - %s| <= %s)'):format(msg or 'assertalmosteq', a, b, tol))
end

-- the largest absolute difference of two tensors of the same size, or nil and why not
local function tensor_diff(a, b)
  if not torch.is_tensor(a) or not torch.is_tensor(b) then return nil, 'not two tensors' end
  if a:numel() ~= b:numel() or tostring(a.shape) ~= tostring(b.shape) then
    return nil, ('sizes differ: %s and %s'):format(tostring(a.shape), tostring(b.shape))
  end
  if a:numel() == 0 then return 0 end
  return (a:double() - b:to(a.device):double()):abs():max():item()
end

function Tester:assertTensorEq(a, b, tol, msg)
  if type(tol) == 'string' then tol, msg = nil, tol end
  local d, why = tensor_diff(a, b)
  return self:_record(d ~= nil and d <= (tol or 0),
    ('%s (%s)'):format(msg or 'assertTensorEq', d and ('largest difference %g, tolerance %g'):format(d, tol or 0) or why))
end

function Tester:assertTensorNe(a, b, tol, msg)
  if type(tol) == 'string' then tol, msg = nil, tol end
  local d = tensor_diff(a, b)
  return self:_record(d == nil or d > (tol or 0), msg or 'assertTensorNe: the tensors are equal')
end

local function deep_eq(a, b, tol)
  if torch.is_tensor(a) or torch.is_tensor(b) then
    local d = tensor_diff(a, b)
    return d ~= nil and d <= tol
  end
  if type(a) == 'number' and type(b) == 'number' then return math.abs(a - b) <= tol or a == b end
  if type(a) ~= 'table' or type(b) ~= 'table' then return a == b end
  for k, v in pairs(a) do if not deep_eq(v, b[k], tol) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

function Tester:assertTableEq(a, b, tol, msg)
  if type(tol) == 'string' then tol, msg = nil, tol end
  return self:_record(deep_eq(a, b, tol or 0), msg or 'assertTableEq')
end
function Tester:assertTableNe(a, b, tol, msg)
  if type(tol) == 'string' then tol, msg = nil, tol end
  return self:_record(not deep_eq(a, b, tol or 0), msg or 'assertTableNe')
end

-- eq(got, expected [, tolerance] [, message]): numbers, strings, tables and tensors
function Tester:eq(a, b, tol, msg)
  if type(tol) == 'string' then tol, msg = nil, tol end
  return self:_record(deep_eq(a, b, tol or 0), ('%s (got %s, expected %s)'):format(msg or 'eq', describe(a), describe(b)))
end
function Tester:ne(a, b, tol, msg)
  if type(tol) == 'string' then tol, msg = nil, tol end
  return self:_record(not deep_eq(a, b, tol or 0), msg or 'ne')
end

function Tester:assertError(f, msg) return self:_record(not pcall(f), msg or 'assertError: no error') end
function Tester:assertNoError(f, msg)
  local ok, err = pcall(f)
  return self:_record(ok, ('%s (%s)'):format(msg or 'assertNoError', tostring(err)))
end
function Tester:assertErrorMsg(f, want, msg)
  local ok, err = pcall(f)
  return self:_record(not ok and tostring(err):find(want, 1, true) ~= nil, msg or 'assertErrorMsg')
end
function Tester:assertErrorPattern(f, pattern, msg)
  local ok, err = pcall(f)
  return self:_record(not ok and tostring(err):find(pattern) ~= nil, msg or 'assertErrorPattern')
end

-- run([name or list of names]): runs the tests; true when none failed
function Tester:run(which)
  local names = self.names
  if type(which) == 'string' then names = { which } elseif type(which) == 'table' then names = which end
  io.write(('Running %d test%s\n'):format(#names, #names == 1 and '' or 's'))
  local failed_tests = 0
  for _, name in ipairs(names) do
    local f = self.tests[name]
    if not f then error(("Tester:run: no test called '%s'"):format(tostring(name)), 2) end
    self.current = name
    local before = #self.failures
    local ok, err = xpcall(f, debug.traceback)
    if not ok then
      table.insert(self.failures, { test = name, where = 'error', message = tostring(err) })
    end
    if #self.failures > before then failed_tests = failed_tests + 1 end
  end
  for _, f in ipairs(self.failures) do
    io.write(('FAIL %s (%s): %s\n'):format(f.test, f.where, f.message))
  end
  io.write(('%d/%d tests passed, %d assertions, %d failures\n')
    :format(#names - failed_tests, #names, self.asserts, #self.failures))
  return failed_tests == 0
end

-- torch.TestSuite(): a table of tests that refuses a name used twice
local function suite()
  local tests = {}
  return setmetatable({}, {
    __index = tests,
    __newindex = function(_, k, v)
      if tests[k] ~= nil then error(("TestSuite: a test called '%s' exists already"):format(tostring(k)), 2) end
      tests[k] = v
    end,
    __pairs = function() return next, tests, nil end,
  })
end

return { Tester = new, TestSuite = suite }
