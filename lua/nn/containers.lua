-- Containers: nn.ModuleList, nn.ModuleDict, nn.ParameterList and nn.ParameterDict.
--
-- A list keeps its entries in fields 1, 2, ... as nn.Sequential does, so list[1], #list and
-- ipairs(list) work, and the entries' state-dict keys carry the 1-based position:
-- "layers.1.weight" (PyTorch's "layers.0.weight").  A dict keeps its entries in string
-- fields, in insertion order (a table given to the constructor goes in sorted key order,
-- since Lua tables have none).  The lists' append/extend/insert are nn.Sequential's too.
local torch = require 'torch'
local Module = require 'nn.Module'
local Parameter = require 'nn.Parameter'
local utils = require 'nn.utils'

local M = {}

local function class_name(m) return (torch.typename(m) or 'Module'):match('[^.]+$') end

-- Lists ----------------------------------------------------------------------------------

-- The entry check of a list of modules or of parameters (who: the class, for errors).
local function check_module(who, m, pos)
  if not Module.is_module(m) then
    utils.error(('%s: entry %d is not a module (got %s)'):format(who, pos, type(m)))
  end
  return m
end

-- appends at field #self + 1: the position after every child, those added by name too
-- (PyTorch's key str(len(self)))
local function append(self, m)
  local n = #self + 1
  self[n] = self:_check_entry(m, n)
  return self
end

-- extend(list): appends every entry of a Lua array or of another list
local function extend(self, list)
  if type(list) ~= 'table' then
    utils.error(('%s:extend: expected a table or a list, got %s'):format(class_name(self), type(list)))
  end
  for i = 1, #list do append(self, list[i]) end
  return self
end

-- insert(index, m): puts m at position index (1-based, 1 to #self + 1), moving the entries
-- from index on one place up
local function insert(self, index, m)
  local n = rawlen(self)
  if #self ~= n then
    utils.error(('%s:insert: the container holds children added by name (add_module), whose positions insert cannot shift')
      :format(class_name(self)))
  end
  if math.type(index) ~= 'integer' or index < 1 or index > n + 1 then
    utils.error(('%s:insert: index %s is out of range (expected 1 to %d; dplua counts from 1)')
      :format(class_name(self), tostring(index), n + 1))
  end
  self:_check_entry(m, index)
  if n == 0 or index == n + 1 then return append(self, m) end
  append(self, rawget(self, n))   -- registers position n + 1
  for i = n, index + 1, -1 do rawset(self, i, rawget(self, i - 1)) end
  rawset(self, index, m)
  return self
end

M.append, M.extend, M.insert = append, extend, insert

-- #list: every registered entry of the list's kind ('module' or 'parameter'), those added
-- by name (add_module, register_parameter) too, as PyTorch's len
local function list_len_of(kind)
  return function(self)
    local n, kinds = 0, rawget(self, '_kind') or {}
    for _, name in ipairs(rawget(self, '_order') or {}) do
      if kinds[name] == kind and rawget(self, name) ~= nil then n = n + 1 end
    end
    return n
  end
end

-- nn.ModuleList([modules]): holds modules, registered in order; it has no forward.
local ModuleList, parent = torch.class('nn.ModuleList', 'nn.Module')
M.ModuleList = ModuleList

function ModuleList:__init(modules)
  parent.__init(self)
  if modules ~= nil then extend(self, modules) end
end

function ModuleList:_check_entry(m, pos) return check_module('nn.ModuleList', m, pos) end
ModuleList.append, ModuleList.add, ModuleList.extend, ModuleList.insert = append, append, extend, insert
ModuleList.__len = list_len_of('module')

function ModuleList:forward()
  utils.error('nn.ModuleList has no forward: iterate over it (for i, m in ipairs(list)) in your own forward')
end

-- nn.ParameterList([tensors]): holds parameters (a tensor is made an nn.Parameter).
local ParameterList = torch.class('nn.ParameterList', 'nn.Module')
M.ParameterList = ParameterList

function ParameterList:__init(params)
  parent.__init(self)
  if params ~= nil then extend(self, params) end
end

function ParameterList:_check_entry(p, pos)
  if not torch.is_tensor(p) then
    utils.error(('nn.ParameterList: entry %d is not a tensor (got %s)'):format(pos, type(p)))
  end
  return Parameter.is(p) and p or Parameter(p)
end
ParameterList.append, ParameterList.extend, ParameterList.insert = append, extend, insert
ParameterList.__len = list_len_of('parameter')

function ParameterList:forward()
  utils.error('nn.ParameterList has no forward')
end

-- PyTorch's lines: "(1): Parameter containing: [torch.float32 of size 2x3]"
local function param_line(k, p)
  local sizes = p:size():totable()
  local dev = p.device.type == 'cuda' and (' (GPU %d)'):format(p.device.index) or ''
  return ('  (%s): Parameter containing: [torch.%s of size %s%s]'):format(k, p.dtype, table.concat(sizes, 'x'), dev)
end

function ParameterList:extra_repr()
  local lines = {}
  for i = 1, rawlen(self) do lines[i] = param_line(i, rawget(self, i)) end
  return table.concat(lines, '\n')
end

-- Dicts ----------------------------------------------------------------------------------

-- The names a dict holds, in order.
local function dict_keys(self)
  local out, kinds = {}, rawget(self, '_kind')
  for _, name in ipairs(rawget(self, '_order')) do
    if kinds[name] and rawget(self, name) ~= nil then out[#out + 1] = name end
  end
  return out
end

local function dict_set(self, key, v)
  if type(key) ~= 'string' or key == '' or key:find('.', 1, true) then
    utils.error(('%s: keys must be non-empty strings without dots, got %s'):format(class_name(self), tostring(key)))
  end
  if rawget(self, key) == nil and self[key] ~= nil then
    utils.error(('%s: key "%s" would hide the method or field of that name'):format(class_name(self), key))
  end
  self[key] = self:_check_entry(v, key)
end

-- update(tbl): adds or replaces entries (a plain table's keys in sorted order, or another dict)
local function update(self, tbl)
  if type(tbl) ~= 'table' then
    utils.error(('%s:update: expected a table, got %s'):format(class_name(self), type(tbl)))
  end
  if torch.isinstance(tbl, Module) then
    for _, k in ipairs(dict_keys(tbl)) do dict_set(self, k, rawget(tbl, k)) end
  else
    local keys = {}
    for k in pairs(tbl) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do dict_set(self, k, tbl[k]) end
  end
  return self
end

-- pop(key): removes the entry and returns it
local function pop(self, key)
  local v = rawget(self, key)
  if v == nil or type(key) ~= 'string' then
    utils.error(('%s:pop: no entry "%s"'):format(class_name(self), tostring(key)))
  end
  local order = rawget(self, '_order')
  for i, name in ipairs(order) do
    if name == key then table.remove(order, i); break end
  end
  rawget(self, '_kind')[key] = nil
  rawset(self, key, nil)
  return v
end

local function install_dict(class)
  class.update, class.pop = update, pop
  class.set = dict_set
  class.keys = function(self) return dict_keys(self) end
  class.values = function(self)
    local out = {}
    for i, k in ipairs(dict_keys(self)) do out[i] = rawget(self, k) end
    return out
  end
  -- for key, value in d:items() do ... end, in order
  class.items = function(self)
    local keys, i = dict_keys(self), 0
    return function()
      i = i + 1
      if keys[i] then return keys[i], rawget(self, keys[i]) end
    end
  end
  class.contains = function(self, key) return type(key) == 'string' and rawget(rawget(self, '_kind'), key) ~= nil end
  class.__len = function(self) return #dict_keys(self) end
end

-- nn.ModuleDict([tbl]): modules by name; d.name or d['name'], d:set(name, m)
local ModuleDict = torch.class('nn.ModuleDict', 'nn.Module')
M.ModuleDict = ModuleDict

function ModuleDict:__init(tbl)
  parent.__init(self)
  if tbl ~= nil then update(self, tbl) end
end

function ModuleDict:_check_entry(m, key)
  if not Module.is_module(m) then
    utils.error(('nn.ModuleDict: entry "%s" is not a module (got %s)'):format(tostring(key), type(m)))
  end
  return m
end
install_dict(ModuleDict)

function ModuleDict:forward()
  utils.error('nn.ModuleDict has no forward: call its modules by name in your own forward')
end

-- nn.ParameterDict([tbl]): parameters by name
local ParameterDict = torch.class('nn.ParameterDict', 'nn.Module')
M.ParameterDict = ParameterDict

function ParameterDict:__init(tbl)
  parent.__init(self)
  if tbl ~= nil then update(self, tbl) end
end

function ParameterDict:_check_entry(p, key)
  if not torch.is_tensor(p) then
    utils.error(('nn.ParameterDict: entry "%s" is not a tensor (got %s)'):format(tostring(key), type(p)))
  end
  return Parameter.is(p) and p or Parameter(p)
end
install_dict(ParameterDict)

function ParameterDict:forward()
  utils.error('nn.ParameterDict has no forward')
end

function ParameterDict:extra_repr()
  local lines = {}
  for i, k in ipairs(dict_keys(self)) do lines[i] = param_line(k, rawget(self, k)) end
  return table.concat(lines, '\n')
end

return M
