-- nn.Sequential(m1, m2, ...): runs its children in order, each one's output the next
-- one's input.  Children are fields 1, 2, ... (seq[2] is the second), so their parameters
-- are named "2.weight".  As in PyTorch, every registered child runs, in registration
-- order, whether it came from the constructor, add/append, add_module(name, m) or the
-- assignment of a new field (seq.head = m); #seq counts them all and seq[i] is the i-th
-- (negative i from the end).  An error inside a child names the child and the input's shape.
local torch = require 'torch'
local Module = require 'nn.Module'
local utils = require 'nn.utils'

local Sequential, parent = torch.class('nn.Sequential', 'nn.Module')

function Sequential:__init(...)
  parent.__init(self)
  local n, first = select('#', ...), ...
  if n == 1 and type(first) == 'table' and not Module.is_module(first) then
    for _, m in ipairs(first) do self:add(m) end   -- nn.Sequential{m1, m2}
  else
    for i = 1, n do self:add((select(i, ...))) end
  end
end

-- Appends a module (Torch7's add; append is PyTorch's name).
function Sequential:add(m)
  if not Module.is_module(m) then
    utils.error(('nn.Sequential: child %d is not a module (got %s)'):format(#self + 1, type(m)))
  end
  self[#self + 1] = m
  return self
end
Sequential.append = Sequential.add

-- extend(list) and insert(index, m), as nn.ModuleList's (lua/nn/containers.lua)
local list = require 'nn.containers'
function Sequential:_check_entry(m, pos)
  if not Module.is_module(m) then
    utils.error(('nn.Sequential: child %d is not a module (got %s)'):format(pos, type(m)))
  end
  return m
end
Sequential.extend, Sequential.insert = list.extend, list.insert

-- The registered children as {name, module} pairs, in registration order.
local function children(self)
  local out, kinds = {}, rawget(self, '_kind') or {}
  for _, name in ipairs(rawget(self, '_order') or {}) do
    local m = rawget(self, name)
    if kinds[name] == 'module' and m ~= nil then out[#out + 1] = { name, m } end
  end
  return out
end

function Sequential:__len() return #children(self) end

-- seq[i]: the i-th child by position when no field i exists (children added by name take
-- a position too), negative i counting from the end; any other key is looked up as
-- nn.Module looks it up (nn/legacy.lua's __index, when installed, or the class).
function Sequential:__index(k)
  if math.type(k) == 'integer' then
    local list = children(self)
    if k < 0 then k = #list + 1 + k end
    local e = list[k]
    return e and e[2]
  end
  local base = rawget(Module, '__index')
  if type(base) == 'function' then return base(self, k) end
  return getmetatable(self)[k]
end

function Sequential:forward(input)
  for i, e in ipairs(children(self)) do
    local m = e[2]
    local ok, out = pcall(m, input)
    if not ok then
      if type(out) ~= 'string' then error(out, 0) end
      local pos, rest = out:match('^([^\n]-:%d+): (.*)$')
      if pos and not pos:find(': ', 1, true) then out = rest end   -- the position goes first
      utils.error(('nn.Sequential: layer %d, %s, failed on input of shape %s: %s')
        :format(i, tostring(m), utils.shape(input), out))
    end
    input = out
  end
  return input
end

return Sequential
