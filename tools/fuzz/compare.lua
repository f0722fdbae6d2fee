-- tools/fuzz/compare.lua: how the differential fuzzer compares a dplua value with what
-- PyTorch recorded for it (tools/fuzz/gen.py's record: dtype, shape and flat row-major
-- values, or none = true for a missing grad).  run.lua and the reproducers it leaves under
-- the findings folder both use it: check(got, expected) returns true, or false and a message.
local torch = require 'torch'

local M = {}

-- Tolerances per dtype: relative, and absolute as a fraction of the tensor's largest
-- magnitude (sums and products of a few ops reorder rounding, nothing more).  float16 and
-- bfloat16 results are PyTorch's float32 ones rounded once: two units in the last place.
M.RTOL = { float32 = 1e-4, float64 = 1e-7, float16 = 2e-3, bfloat16 = 1.6e-2 }
M.ATOL = { float32 = 1e-5, float64 = 1e-10, float16 = 1e-3, bfloat16 = 8e-3 }

local function flatten(v, out)
  if type(v) ~= 'table' then
    out[#out + 1] = v
  else
    for _, x in ipairs(v) do flatten(x, out) end
  end
  return out
end
M.flatten = flatten

local function list_str(xs, limit)
  local parts = {}
  for i = 1, math.min(#xs, limit or 12) do parts[i] = tostring(xs[i]) end
  if #xs > (limit or 12) then parts[#parts + 1] = '...' end
  return '{' .. table.concat(parts, ', ') .. '}'
end
M.list_str = list_str

local function same(g, e, dtype, scale)
  if type(e) == 'boolean' or dtype == 'int64' or dtype == 'bool' then return g == e end
  if type(g) ~= 'number' then return false end
  if e ~= e then return g ~= g end
  if e == math.huge or e == -math.huge then return g == e end
  return math.abs(g - e) <= M.RTOL[dtype] * math.abs(e) + M.ATOL[dtype] * scale
end

function M.check(got, expected)
  if expected.none then
    if got == nil then return true end
    return false, 'expected nil (PyTorch: None), got ' .. tostring(got)
  end
  if not torch.is_tensor(got) then
    return false, 'expected a tensor, got ' .. type(got) .. ' ' .. tostring(got)
  end
  if got.dtype ~= expected.dtype then
    return false, ('dtype %s, PyTorch %s'):format(got.dtype, expected.dtype)
  end
  local shape = {}
  local size = got:size()
  for i = 1, #size do shape[i] = size[i] end
  if list_str(shape, 99) ~= list_str(expected.shape, 99) then
    return false, ('shape %s, PyTorch %s'):format(list_str(shape, 99), list_str(expected.shape, 99))
  end
  local values = flatten(got:tolist(), {})
  local scale = 1
  for _, e in ipairs(expected.values) do
    if type(e) == 'number' and e == e and math.abs(e) ~= math.huge then scale = math.max(scale, math.abs(e)) end
  end
  for i, e in ipairs(expected.values) do
    if not same(values[i], e, expected.dtype, scale) then
      return false, ('values %s, PyTorch %s (element %d: %s, PyTorch %s)'):format(
        list_str(values), list_str(expected.values), i, tostring(values[i]), tostring(e))
    end
  end
  return true
end

return M
