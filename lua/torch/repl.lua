-- The REPL's printer: show(...) prints each result as the REPL shows it.  Tensors and
-- objects with a __tostring print as themselves; plain tables print as Lua tables
-- (`{1, 2, x = {3}}`), nested up to `depth` levels and `items` entries per table, on one
-- line when short and indented otherwise.  The first result is kept in the global `_`.
-- With M.color set (the dplua program sets it on a terminal, see doc/cli.md) numbers,
-- strings, booleans and a tensor's header are coloured; M.paint colours error messages.
local torch = require 'torch'

local M = { depth = 3, items = 40, width = 78, color = false }

-- ANSI colours by kind of value
local COLORS = {
  number = '\27[36m', string = '\27[32m', boolean = '\27[35m', ['nil'] = '\27[35m',
  tensor = '\27[1;34m', meta = '\27[2m', error = '\27[31m',
}
local RESET = '\27[0m'

-- s in the colour of kind, when colour is on
function M.paint(kind, s)
  if not M.color or not COLORS[kind] then return s end
  return COLORS[kind] .. s .. RESET
end

-- a printed value in colour: the kind of a plain value, or a tensor's `tensor(` and its
-- dtype/device/grad settings
local function colored(v, text)
  if not M.color then return text end
  if torch.is_tensor(v) then
    text = text:gsub('^tensor%(', M.paint('tensor', 'tensor') .. '(')
    return (text:gsub(', ((%a[%w_]*)=[^,%)]*)', function(kv, k)
      if k == 'dtype' or k == 'device' or k == 'requires_grad' or k == 'grad_fn' then return ', ' .. M.paint('meta', kv) end
    end))
  end
  return M.paint(type(v), text)
end

local function key_str(k)
  if type(k) == 'string' and k:match('^[%a_][%w_]*$') then return k end
  if type(k) == 'string' then return ('[%q]'):format(k) end
  return '[' .. tostring(k) .. ']'
end

local function scalar(v)
  if type(v) == 'string' then return ('%q'):format(v):gsub('\\\n', '\\n') end
  if torch.is_tensor(v) then
    if v:numel() <= 8 and v:dim() <= 1 then return (tostring(v):gsub('\n%s*', ' ')) end
    return ('tensor(%s, %s%s)'):format(table.concat(v:size():totable(), 'x'), v.dtype,
      tostring(v.device) ~= 'cpu' and ', ' .. tostring(v.device) or '')
  end
  return tostring(v)
end

local function plain(t)
  local mt = getmetatable(t)
  return type(t) == 'table' and (mt == nil or (type(mt) == 'table' and rawget(mt, '__tostring') == nil and
    rawget(mt, '__name') == nil))
end

-- a table as text: nil when it does not fit on one line
local function render(t, depth, seen, indent)
  if not plain(t) then return scalar(t) end
  if seen[t] then return '<cycle>' end
  if depth > M.depth then return '{...}' end
  seen[t] = true
  local parts, n = {}, #t
  for i = 1, math.min(n, M.items) do
    parts[#parts + 1] = type(t[i]) == 'table' and render(t[i], depth + 1, seen, indent .. '  ') or scalar(t[i])
  end
  local keys = {}
  for k in pairs(t) do
    if not (math.type(k) == 'integer' and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == 'number' or type(a) == 'string') then return a < b end
    return type(a) < type(b)
  end)
  for _, k in ipairs(keys) do
    if #parts >= M.items then break end
    local v = t[k]
    parts[#parts + 1] = key_str(k) .. ' = ' .. (type(v) == 'table' and render(v, depth + 1, seen, indent .. '  ') or scalar(v))
  end
  local total = n + #keys
  if total > #parts then parts[#parts + 1] = ('... (%d more)'):format(total - #parts) end
  seen[t] = nil
  local one = '{' .. table.concat(parts, ', ') .. '}'
  if #one + #indent <= M.width and not one:find('\n') then return one end
  -- too long for a line: short entries fill lines, long ones get a line each
  local lines, cur = {}, ''
  for i, part in ipairs(parts) do
    local piece = part .. (i < #parts and ',' or '')
    if part:find('\n') or #part > M.width / 2 then
      if cur ~= '' then lines[#lines + 1] = cur; cur = '' end
      lines[#lines + 1] = piece
    elseif cur ~= '' and #cur + 1 + #piece + #indent + 2 > M.width then
      lines[#lines + 1] = cur
      cur = piece
    else
      cur = cur == '' and piece or (cur .. ' ' .. piece)
    end
  end
  if cur ~= '' then lines[#lines + 1] = cur end
  return '{\n' .. indent .. '  ' .. table.concat(lines, '\n' .. indent .. '  ') .. '\n' .. indent .. '}'
end

function M.show(...)
  local n = select('#', ...)
  if n == 0 then return end
  _G._ = (...)
  local out = {}
  for i = 1, n do
    local v = select(i, ...)
    out[i] = plain(v) and render(v, 1, {}, '') or colored(v, tostring(v))
  end
  print(table.concat(out, '\t'))
end

return M
