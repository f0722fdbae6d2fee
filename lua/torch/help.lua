-- help(x): a line of usage from the docs and where they explain x.  x is a documented name
-- ('torch.randn', 'nn.Linear', 'Tensor:view', 'x:view', 'F.cross_entropy'), the value
-- itself (torch.randn: its name is found by walking the modules), a tensor (its shape,
-- dtype and device, and where Tensor methods are documented) or a module or optimizer
-- (its class).  help() says how to use help.  The index is built from doc/*.md at build
-- time (tools/helpindex.lua, module 'torch._help').
local torch = require 'torch'

local index          -- name -> {usage, page, section}, loaded on first use

local function load_index()
  if not index then
    local ok, t = pcall(require, 'torch._help')
    index = ok and type(t) == 'table' and t or {}
  end
  return index
end

-- the modules walked to name a value, with the prefix their names take
local function module_roots()
  local roots = { { 'torch', torch }, { 'nn', torch.nn }, { 'nn.functional', torch.nn and torch.nn.functional },
    { 'nn.init', torch.nn and torch.nn.init }, { 'nn.utils', torch.nn and torch.nn.utils },
    { 'optim', torch.optim }, { 'optim.lr_scheduler', torch.optim and torch.optim.lr_scheduler },
    { 'torch.data', torch.data }, { 'torch.autograd', torch.autograd }, { 'torch.utils', torch.utils } }
  local out = {}
  for _, r in ipairs(roots) do
    if type(r[2]) == 'table' then out[#out + 1] = r end
  end
  return out
end

-- the documented name of a function or class value, or nil
local function name_of_value(v)
  local idx = load_index()
  local found
  for _, r in ipairs(module_roots()) do
    for k, x in pairs(r[2]) do
      if rawequal(x, v) and type(k) == 'string' then
        local name = r[1] .. '.' .. k
        if idx[name] then return name end
        found = found or name
      end
    end
  end
  for k, x in pairs(torch.Tensor) do
    if rawequal(x, v) and type(k) == 'string' then return 'Tensor:' .. k end
  end
  return found
end

-- the class name of an object (an nn layer, an optimizer), or nil
local function class_of(v)
  local mt = getmetatable(v)
  if type(mt) ~= 'table' then return nil end
  local name = rawget(mt, '__name') or rawget(mt, '__typename')
  if type(name) == 'string' then return name end
  return nil
end

-- edit distance, for suggestions
local function distance(a, b)
  local prev, cur = {}, {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    cur = { [0] = i }
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

-- up to n documented names close to name
local function suggestions(name, n)
  local scored = {}
  local tail = name:match('[%.:]([%w_]+)$') or name
  for k in pairs(load_index()) do
    local ktail = k:match('[%.:]([%w_]+)$') or k
    local d = math.min(distance(name, k), distance(tail, ktail) + (k:find(tail, 1, true) and 0 or 1))
    if d <= math.max(2, #tail // 3) then scored[#scored + 1] = { k, d } end
  end
  table.sort(scored, function(a, b) return a[2] < b[2] or (a[2] == b[2] and a[1] < b[1]) end)
  local out = {}
  for i = 1, math.min(n, #scored) do out[i] = scored[i][1] end
  return out
end

-- the index's key for a name as a user writes it
local function candidates(name)
  local c = { name }
  local rest = name:match('^F%.(.+)$') or name:match('^torch%.nn%.functional%.(.+)$')
  if rest then c[#c + 1] = 'nn.functional.' .. rest end
  rest = name:match('^torch%.nn%.(.+)$') or name:match('^torch%.optim%.(.+)$')
  if rest then c[#c + 1] = (name:match('^torch%.(%a+)')) .. '.' .. rest end
  local recv, sep, m = name:match('^([%w_%.]+)([%.:])([%w_]+)$')
  if recv then
    local v = recv:find('.', 1, true) == nil and rawget(_G, recv) or nil
    if recv == 'Tensor' or recv == 'torch.Tensor' or torch.is_tensor(v) then
      c[#c + 1] = 'Tensor:' .. m
      c[#c + 1] = 'Tensor.' .. m
    elseif v ~= nil and class_of(v) then
      c[#c + 1] = class_of(v) .. sep .. m
      if torch.nn and torch.nn.Module and torch.isTypeOf and torch.isTypeOf(v, 'nn.Module') then
        c[#c + 1] = 'nn.Module:' .. m
      end
    elseif sep == ':' then
      c[#c + 1] = 'Tensor:' .. m
      c[#c + 1] = 'nn.Module:' .. m
    end
  end
  return c
end

-- the value a dotted name reaches from the globals, or nil
local function resolve(name)
  local v = _G
  if rawget(_G, 'torch') == nil and name:match('^torch%.') then   -- torch required into a local
    v, name = torch, name:sub(7)
  end
  for part in name:gmatch('[^%.]+') do
    if type(v) ~= 'table' and not torch.is_tensor(v) then return nil end
    local ok, x = pcall(function() return v[part] end)
    if not ok then return nil end
    v = x
  end
  return v
end

local function entry_text(name, e)
  return ('%s\n  %s\n  see %s, "%s"'):format(name, e[1], e[2], e[3])
end

-- text with the signature lines of the op v in front (lua/torch/signatures.lua), as the
-- parser reads its arguments
local function with_signature(text, v)
  local lines = require('torch.signature').lines(v)
  if not lines then return text end
  local out = {}
  for i, l in ipairs(lines) do out[i] = '  ' .. l end
  return ('%s\nsignature%s (dims from 1; options in a last table):\n%s')
    :format(text, #lines > 1 and 's' or '', table.concat(out, '\n'))
end

local USAGE = [[
help(x) prints a line of usage and where the docs explain x:
  help(torch.randn)        a function or class: its documented use
  help('nn.Linear')        a name, as the docs write it (also 'Tensor:view', 'F.relu')
  help(x)                  a tensor: its shape, dtype and device, and where its methods are
In the REPL, ?name is help(name): ?torch.randn, ?x:view.
The docs are in doc/*.md (tensor.md, nn.md, data.md, cli.md ...).]]

local help

-- the help text for a name given as a string
local function for_name(name)
  name = name:gsub('^%s+', ''):gsub('%s+$', ''):gsub('%(%)$', '')
  local idx = load_index()
  for _, c in ipairs(candidates(name)) do
    if idx[c] then
      local v = resolve(c:gsub(':', '.'))
      if v == nil and c:match('^Tensor[.:]') then v = rawget(torch.Tensor, c:match('([%w_]+)$')) end
      return with_signature(entry_text(c, idx[c]), v)
    end
  end
  if not name:find(':', 1, true) then
    local v = resolve(name)
    if v ~= nil and type(v) ~= 'string' and type(v) ~= 'number' and type(v) ~= 'boolean' then
      local text = help(v, true)
      if text then return text end
    end
  end
  local close = suggestions(name, 5)
  local msg = ("no docs for '%s'"):format(name)
  if #close > 0 then msg = msg .. '; did you mean ' .. table.concat(close, ', ') .. '?' end
  return msg
end

-- the help text for x; quiet: nil instead of a "no docs" line
function help(x, quiet)
  if x == nil then return USAGE end
  if type(x) == 'string' then return for_name(x) end
  if torch.is_tensor(x) then
    local shape = table.concat(x:size():totable(), 'x')
    return ('a tensor of shape [%s], dtype %s, on %s%s\n  its methods (x:view, x:sum, ...) are in doc/tensor.md; ' ..
      'help(\'x:view\') for one of them'):format(shape == '' and '' or shape, x.dtype, tostring(x.device),
      x.requires_grad and ', requires_grad' or '')
  end
  local idx = load_index()
  local reg = require('torch.signature').registry[x]
  local name = reg and (idx['torch.' .. reg.name] and 'torch.' .. reg.name
                        or idx['Tensor:' .. reg.name] and 'Tensor:' .. reg.name or 'torch.' .. reg.name)
               or name_of_value(x)
  if name and idx[name] then return with_signature(entry_text(name, idx[name]), x) end
  if name and require('torch.signature').lines(x) then return with_signature(name, x) end
  local cls = class_of(x)
  if cls then
    if idx[cls] then return ('an instance of %s\n'):format(cls) .. entry_text(cls, idx[cls]) end
    if name == nil then name = cls end
  end
  if quiet then return nil end
  if name then return for_name(name) end
  return ('no docs for this %s value (help() says how to use help)'):format(type(x))
end

return function(...)
  if select('#', ...) > 0 and (...) == nil then
    print("help: got nil (a name that does not exist?); help('torch.name') looks the name up in the docs")
    return
  end
  print((help((...))))
end
