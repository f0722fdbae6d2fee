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
