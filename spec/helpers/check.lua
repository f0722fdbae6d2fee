-- spec/helpers/check.lua: the checks on errors and strings that the busted specs share.
-- Load with dofile('spec/helpers/check.lua').
local assert = require 'luassert'
local M = {}

-- The message of the error that f(...) raises; fails when it raises none.
function M.err(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'expected an error')
  return tostring(e)
end

-- Runs fn, which must fail with a message containing every one of the strings; returns
-- the message.
function M.expect_error(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, 'expected an error')
  err = tostring(err)
  for _, s in ipairs { ... } do
    assert(err:find(s, 1, true), ('error %q does not mention %q'):format(err, s))
  end
  return err
end

-- got (a tensor) against want (a tensor, or nested tables of numbers made a tensor of got's
-- dtype): the same shape and every value within tol (1e-10 by default) absolutely and
-- relatively; `what` names the comparison in the error.
function M.assert_close(got, want, what, tol)
  local torch = require 'torch'
  tol = tol or 1e-10
  if not torch.is_tensor(want) then want = torch.tensor(want, { dtype = got.dtype }) end
  assert.are.equal(tostring(want:size()), tostring(got:size()), what .. ': shapes differ')
  local g, w = got:to('cpu'), want:to('cpu'):to(got.dtype)
  if not torch.allclose(g, w, tol, tol) then
    error(('%s: values differ (max |got - want| = %g)'):format(what, (g - w):abs():max():item()), 2)
  end
end

-- A nested list of values as one flat list, in order.
function M.flat(v, out)
  out = out or {}
  if type(v) == 'table' then
    for _, x in ipairs(v) do M.flat(x, out) end
  else
    out[#out + 1] = v
  end
  return out
end

-- Whether a value matches a reference one: booleans exactly, NaN with NaN, numbers to the
-- relative tolerance tol (absolute below 1).
function M.same_number(a, b, tol)
  if type(a) == 'boolean' or type(b) == 'boolean' then return a == b end
  if a ~= a or b ~= b then return a ~= a and b ~= b end
  if a == b then return true end
  return math.abs(a - b) <= tol * math.max(1, math.abs(b))
end

-- got (a tensor or a nested table) against want (the reference, e.g. PyTorch's values from
-- a fixture), element by element to tol (default 1e-10), NaN matching NaN.
function M.close(got, want, tol, what)
  local torch = require 'torch'
  if torch.is_tensor(got) then got = got:tolist() end
  if torch.is_tensor(want) then want = want:tolist() end
  local g, w = M.flat(got), M.flat(want)
  assert.are.equal(#w, #g, (what or '') .. ': element count')
  tol = tol or 1e-10
  for i = 1, #w do
    local ok = math.abs(g[i] - w[i]) <= tol * math.max(1, math.abs(w[i])) or (g[i] ~= g[i] and w[i] ~= w[i])
    assert(ok, ('%s element %d: dplua %s, PyTorch %s'):format(what or '', i, tostring(g[i]), tostring(w[i])))
  end
end

-- A tensor's sizes as a list of numbers.
function M.shape_of(t)
  local s = {}
  for d = 1, t:dim() do s[d] = t:size(d) end
  return s
end

function M.assert_contains(s, part)
  assert.is_truthy(s:find(part, 1, true), ('%q does not contain %q'):format(s, part))
end

-- Runs the Lua code in a child lua5.4 (same LUA_CPATH) after the shell prefix env (such
-- as "DPLUA_CPU_DEVICES=2"); returns its output (stdout and stderr) and exit status.
function M.run_child(code, env)
  local path = os.tmpname()
  local f = assert(io.open(path, 'w'))
  f:write(code)
  f:close()
  local p = io.popen((env or '') .. ' lua5.4 ' .. path .. ' 2>&1')
  local out = p:read('a')
  local _, _, status = p:close()
  os.remove(path)
  return out, status
end

return M
