-- The op sweep: every op of the op table (src/ops.def, as torch._C.ops() lists it) that Lua
-- can reach, on the default device, against PyTorch 1.13.  spec/fixtures/op_sweep.data
-- (written by spec/fixtures/make_op_sweep.py) holds each op's cases: inputs of every dtype,
-- 0-dim, empty and 1-sized shapes, broadcasting, transposed operands, NaN and infinities,
-- reductions over everything and along each dim; and PyTorch's result (dtype, shape,
-- values) or the error it raised.  Every differentiable row is gradchecked in float64.
-- spec/gpu/specs runs this file again with the default device set to cpu:1 and cuda:0.
local torch = require 'torch'

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'spec'
local fixtures = dofile(here .. '/fixtures/op_sweep.data')

-- float16 and bfloat16 compute in float32 and round once: half a unit in the last place
-- (2^-11, 2^-8) from the exact value, and a little more from float32's own rounding
local RTOL = { float32 = 1e-5, float64 = 1e-12, float16 = 1e-3, bfloat16 = 8e-3 }
-- Where an op's gradient is smooth, for gradcheck's inputs (unary: the input; binary: the
-- left operand); other ops take values in (-2.75, 3).
local POSITIVE = { 0.3, 6 }
local DOMAIN = {
  log = POSITIVE, sqrt = POSITIVE, pow = POSITIVE, log2 = POSITIVE, log10 = POSITIVE, log1p = POSITIVE,
  rsqrt = POSITIVE, reciprocal = POSITIVE, asin = { -0.9, 0.9 }, acos = { -0.9, 0.9 }, atanh = { -0.9, 0.9 },
  acosh = { 1.2, 6 }, erfinv = { -0.9, 0.9 },
}

-- Where PyTorch raises and dplua computes a result by design: such a case is reported as
-- pending with the reason (so every run counts it) rather than passed or failed.  Each
-- entry takes the case's input dtypes and its fixture entry.  Anything else that differs
-- from PyTorch fails.
local ACCEPTED = {
  fmod = { 'integer fmod by zero gives 0 (PyTorch raises ZeroDivisionError on the CPU)',
    function(d, case) return case.error == 'ZeroDivisionError' end },
  remainder = { 'integer remainder by zero gives 0 (PyTorch raises ZeroDivisionError on the CPU)',
    function(d, case) return case.error == 'ZeroDivisionError' end },
  argmax = { 'argmax of a bool tensor (PyTorch has no CPU kernel for it)', function(d) return d[1] == 'bool' end },
  argmin = { 'argmin of a bool tensor (PyTorch has no CPU kernel for it)', function(d) return d[1] == 'bool' end },
}

-- An input as the fixture describes it, on the default device.
local function build(spec)
  local t = torch.tensor(spec.values, { dtype = spec.dtype }):reshape(spec.shape)
  if spec.t then t = t:t() end
  return t
end

local function shape_str(s)
  local parts = {}
  for i = 1, #s do parts[i] = tostring(s[i]) end
  return '{' .. table.concat(parts, ',') .. '}'
end

local function list_str(values)
  local s = {}
  for i, v in ipairs(values) do s[i] = tostring(v) end
  return table.concat(s, ' ')
end

local function same_value(got, expected, rtol)
  if type(expected) == 'boolean' or math.type(expected) == 'integer' or not rtol then
    return got == expected
  end
  if expected ~= expected then return got ~= got end
  if expected == math.huge or expected == -math.huge then return got == expected end
  return math.abs(got - expected) <= rtol * math.abs(expected)
end

local function check_output(what, got, expected)
  assert(torch.is_tensor(got), ('%s: expected a tensor, got %s'):format(what, type(got)))
  assert(got.dtype == expected.dtype, ('%s: dtype %s, PyTorch gives %s'):format(what, got.dtype, expected.dtype))
  local gs = got:size()
  assert(shape_str(gs) == shape_str(expected.shape),
    ('%s: shape %s, PyTorch gives %s'):format(what, shape_str(gs), shape_str(expected.shape)))
  local values = got:reshape(-1):tolist()
  local rtol = RTOL[expected.dtype]
  for i, e in ipairs(expected.values) do
    if not same_value(values[i], e, rtol) then
      error(('%s: element %d is %s, PyTorch gives %s\n  got      %s\n  expected %s'):format(what, i,
        tostring(values[i]), tostring(e), list_str(values), list_str(expected.values)), 0)
    end
  end
end

-- Runs one case of an op; the function and method forms take turns, so both bindings run.
local function call(row, case, inputs, method)
  local name, x = row.name, inputs[1]
  local f = method and function(...) return x[name](...) end or torch[name]
  if row.family == 'unary' then
    if name == 'clamp' then return f(x, case.min, case.max) end
    return f(x)
  elseif row.family == 'binary' then
    if case.alpha then return f(x, inputs[2], case.alpha) end
    return f(x, inputs[2])
  elseif row.family == 'reduce' then
    if case.dim then return f(x, case.dim, case.keepdim) end
    return f(x)
  end
  error('op ' .. name .. ': no way to call the ' .. tostring(row.family) .. ' family')
end

local function run_case(row, case, method)
  local inputs = {}
  for i, spec in ipairs(case.inputs) do inputs[i] = build(spec) end
  local results = table.pack(pcall(call, row, case, inputs, method))
  local what = ('%s %s'):format(row.name, case.name)
  if case.error then
    if results[1] then
      local accepted, dtypes = ACCEPTED[row.name], {}
      for i, spec in ipairs(case.inputs) do dtypes[i] = spec.dtype end
      if accepted and accepted[2](dtypes, case) then
        pending(('%s: PyTorch raises "%s"; dplua accepts it: %s'):format(what, case.error, accepted[1]))
        return
      end
    end
    assert(not results[1], ('%s: PyTorch raises "%s", dplua returned %s'):format(what, case.error,
      tostring(results[2])))
    return
  end
  assert(results[1], ('%s: raised %s'):format(what, tostring(results[2])))
  for j, expected in ipairs(case.out) do
    local label = #case.out > 1 and ('%s (output %d)'):format(what, j) or what
    check_output(label, results[j + 1], expected)
  end
end

-- ---------------------------------------------------------------- gradcheck

-- n float64 values on the default device away from 0 and from each other (no kinks, no
-- ties); positive ones in (0, 6].
local function smooth(shape, salt, domain)
  local lo, hi = table.unpack(domain or { -2.75, 3 })
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 0, n - 1 do
    local k = (i * 7 + salt * 5) % 23
    v[i + 1] = lo + (hi - lo) * (k + 0.5 + 0.3 * salt) / 24
  end
  return torch.tensor(v, { dtype = 'float64' }):reshape(shape):requires_grad_(true)
end

-- {label, fn, inputs} for the gradchecks of a differentiable row
local function gradchecks(row)
  local name, pos = row.name, DOMAIN[row.name]
  local list = {}
  if row.family == 'unary' then
    local f = name == 'clamp' and function(x) return torch.clamp(x, -1, 1.5) end or torch[name]
    list[#list + 1] = { '{3,4}', f, { smooth({ 3, 4 }, 0, pos) } }
    list[#list + 1] = { '{4,3}:t()', function(x) return f(x:t()) end, { smooth({ 4, 3 }, 1, pos) } }
  elseif row.family == 'binary' then
    local f = torch[name]
    list[#list + 1] = { '{3,4} x {3,4}', f, { smooth({ 3, 4 }, 0, pos), smooth({ 3, 4 }, 1) } }
    list[#list + 1] = { '{3,1,4} x {5,1} (broadcast)', f, { smooth({ 3, 1, 4 }, 0, pos), smooth({ 5, 1 }, 1) } }
  elseif row.family == 'reduce' then
    local f = torch[name]
    if row.node then list[#list + 1] = { '{3,4} over everything', f, { smooth({ 3, 4 }, 0) } } end
    if row.node_dim then
      for dim = 1, 2 do
        for _, keep in ipairs({ false, true }) do
          list[#list + 1] = { ('{3,4} dim=%d keepdim=%s'):format(dim, keep),
            function(x) return f(x, dim, keep) end, { smooth({ 3, 4 }, 0) } }
        end
      end
    end
  end
  return list
end

-- ---------------------------------------------------------------- the sweep

describe('the op sweep against PyTorch 1.13', function()
  for _, row in ipairs(torch._C.ops()) do
    if row.bind ~= 'none' then
      local fx = fixtures[row.name]
      if not fx then
        it(row.name, function()
          error(('op %s has no sweep fixture: run spec/fixtures/make_op_sweep.py'):format(row.name), 0)
        end)
      else
        for i, case in ipairs(fx.cases) do
          it(('%s %s'):format(row.name, case.name), function() run_case(row, case, i % 2 == 0) end)
        end
        if row.node or row.node_dim then
          for _, g in ipairs(gradchecks(row)) do
            it(('%s gradcheck %s'):format(row.name, g[1]), function()
              assert(torch.autograd.gradcheck(g[2], g[3]))
            end)
          end
        end
      end
    end
  end

  it('the fixture covers no op the op table lacks', function()
    local known = {}
    for _, row in ipairs(torch._C.ops()) do known[row.name] = true end
    for name in pairs(fixtures) do
      assert(known[name], ('the sweep fixture has op %s, which src/ops.def no longer has: run '
        .. 'spec/fixtures/make_op_sweep.py'):format(name))
    end
  end)
end)
