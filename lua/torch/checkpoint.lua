-- Checkpoints: nested Lua tables of tensors, numbers, strings and booleans (a model's
-- state_dict, an optimizer's, the epoch, the loss ...) in a safetensors file.
--
-- The tensors are stored under flat names: the keys on the path to each tensor joined with
-- '.', integer keys written as numbers ({model = {['fc.weight'] = w}, history = {t1}} gives
-- "model.fc.weight" and "history.1").  The tree itself (every key, every non-tensor value,
-- and which flat name each tensor has) is JSON in the metadata entry "dplua.tree", so
-- torch.load rebuilds the same table while Python's safetensors sees plain tensors.
local M = {}

M.TREE_KEY = 'dplua.tree'

-- ------------------------------------------------------------------ a small JSON

local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
                  ['\r'] = '\\r', ['\t'] = '\\t' }

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return escapes[c] or ('\\u%04x'):format(c:byte()) end) .. '"'
end

local function json_number(x)
  if math.type(x) == 'integer' then return ('%d'):format(x) end
  if x ~= x then return '{"float":"nan"}' end
  if x == math.huge then return '{"float":"inf"}' end
  if x == -math.huge then return '{"float":"-inf"}' end
  local s = ('%.17g'):format(x)
  if not s:find('[%.eEn]') then s = s .. '.0' end   -- keeps 3.0 a float
  return s
end

local function decode(text)
  local pos = 1
  local function fail(what)
    error(('the checkpoint\'s tree (metadata "%s") is not valid JSON: %s at byte %d'):format(M.TREE_KEY, what, pos), 0)
  end
  local function skip() pos = text:find('[^ \t\r\n]', pos) or #text + 1 end
  local value
  local function str()
    local out, i = {}, pos + 1
    while true do
      local c = text:sub(i, i)
      if c == '' then fail('an unterminated string') end
      if c == '"' then pos = i + 1; return table.concat(out) end
      if c == '\\' then
        local e = text:sub(i + 1, i + 1)
        local simple = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }
        if simple[e] then out[#out + 1] = simple[e]; i = i + 2
        elseif e == 'u' then
          local code = tonumber(text:sub(i + 2, i + 5), 16) or fail('a bad \\u escape')
          out[#out + 1] = utf8.char(code); i = i + 6
        else fail('a bad escape') end
      else
        out[#out + 1] = c; i = i + 1
      end
    end
  end
  function value()
    skip()
    local c = text:sub(pos, pos)
    if c == '"' then return str() end
    if c == '{' or c == '[' then
      local close, obj = c == '{' and '}' or ']', {}
      pos = pos + 1
      skip()
      if text:sub(pos, pos) == close then pos = pos + 1; return obj end
      while true do
        if c == '{' then
          skip()
          if text:sub(pos, pos) ~= '"' then fail('a key that is not a string') end
          local k = str()
          skip()
          if text:sub(pos, pos) ~= ':' then fail("a missing ':'") end
          pos = pos + 1
          obj[k] = value()
        else
          obj[#obj + 1] = value()
        end
        skip()
        local d = text:sub(pos, pos)
        pos = pos + 1
        if d == close then return obj end
        if d ~= ',' then fail("a missing ',' or '" .. close .. "'") end
      end
    end
    for word, v in pairs({ ['true'] = true, ['false'] = false }) do
      if text:sub(pos, pos + #word - 1) == word then pos = pos + #word; return v end
    end
    local num = text:match('^-?%d+%.?%d*[eE]?[-+]?%d*', pos)
    if not num or num == '' then fail('an unexpected character') end
    pos = pos + #num
    return math.tointeger(tonumber(num)) and not num:find('[%.eE]') and math.tointeger(tonumber(num)) or tonumber(num)
  end
  local v = value()
  skip()
  if pos <= #text then fail('trailing characters') end
  return v
end

-- ------------------------------------------------------------------ flattening

local function is_module(v)
  if type(v) ~= 'table' then return false end
  local ok, sd = pcall(function() return v.state_dict end)
  return ok and type(sd) == 'function' and type(v.parameters) == 'function'
end

local function path_str(path)
  return #path == 0 and 'the top level' or "'" .. table.concat(path, '.') .. "'"
end

-- Whether tbl needs a tree: anything but a flat table of string keys to tensors.
function M.is_flat(torch, tbl)
  for k, v in pairs(tbl) do
    if type(k) ~= 'string' or not torch.is_tensor(v) then return false end
  end
  return true
end

-- tbl -> (tensors by flat name, the tree as JSON)
function M.flatten(torch, tbl)
  local tensors, seen_tables = {}, {}
  local function node(v, path)
    if torch.is_tensor(v) then
      local name = table.concat(path, '.')
      if tensors[name] then
        error(("torch.save: two tensors would be stored as '%s'; rename one of the keys"):format(name), 0)
      end
      tensors[name] = v
      return '{"tensor":' .. json_string(name) .. '}'
    end
    local tv = type(v)
    if tv == 'number' then return json_number(v) end
    if tv == 'string' then return json_string(v) end
    if tv == 'boolean' then return tostring(v) end
    if tv ~= 'table' then
      error(('torch.save: the value at %s is a %s; a checkpoint holds tensors, numbers, strings, '
        .. 'booleans and tables of them'):format(path_str(path), tv), 0)
    end
    if is_module(v) then v = v:state_dict() end
    if seen_tables[v] then error(('torch.save: the table at %s contains itself'):format(path_str(path)), 0) end
    seen_tables[v] = true
    local keys = {}
    for k in pairs(v) do
      if math.type(k) ~= 'integer' and type(k) ~= 'string' then
        error(('torch.save: a key at %s is a %s; keys must be strings or integers')
          :format(path_str(path), math.type(k) or type(k)), 0)
      end
      keys[#keys + 1] = k
    end
    table.sort(keys, function(a, b)
      if type(a) == type(b) then return a < b end
      return type(a) == 'number'
    end)
    local parts = {}
    for _, k in ipairs(keys) do
      path[#path + 1] = tostring(k)
      parts[#parts + 1] = '[' .. (type(k) == 'string' and json_string(k) or ('%d'):format(k)) .. ',' .. node(v[k], path) .. ']'
      path[#path] = nil
    end
    seen_tables[v] = nil
    return '{"table":[' .. table.concat(parts, ',') .. ']}'
  end
  local tree = node(tbl, {})
  return tensors, tree
end

-- (tensors by flat name, JSON) -> the table
function M.rebuild(tensors, json)
  local function build(n)
    if type(n) ~= 'table' then return n end
    if n.tensor then
      local t = tensors[n.tensor]
      if not t then error(("torch.load: the checkpoint names a tensor '%s' that the file does not hold"):format(n.tensor), 0) end
      return t
    end
    if n.float then return ({ nan = 0 / 0, inf = math.huge, ['-inf'] = -math.huge })[n.float] end
    local out = {}
    for _, pair in ipairs(n.table or {}) do out[pair[1]] = build(pair[2]) end
    return out
  end
  return build(decode(json))
end

return M
