-- torch.class: Torch7's classes.
--
--   local Model, parent = torch.class('Model', 'nn.Module')
--   function Model:__init(n) parent.__init(self); self.n = n end
--   local m = Model(3)          -- constructs and calls Model:__init(3)
--
-- A class is the metatable of its instances (__index = the class itself); methods are
-- looked up through the parent chain.  Metamethods (__call, __tostring, __len, __newindex,
-- an __index function, __close ...) that a class doesn't define itself are copied from
-- the nearest ancestor each time an instance is made, so a parent may define them later.
-- 'nn.Foo' also puts the class into the nn table (when that module is loaded).
local class = {}

local by_name = {}                                   -- full name -> class
local names = setmetatable({}, { __mode = 'k' })     -- class -> full name
local parents = setmetatable({}, { __mode = 'k' })   -- class -> parent class
local copied = setmetatable({}, { __mode = 'k' })    -- class -> {metamethod = value copied in}

local METAMETHODS = {
  '__call', '__tostring', '__len', '__newindex', '__index', '__close', '__gc', '__concat',
  '__eq', '__lt', '__le', '__unm', '__add', '__sub', '__mul', '__div', '__mod', '__pow',
  '__idiv', '__band', '__bor', '__bxor', '__shl', '__shr', '__bnot',
}

-- what cls defines itself for metamethod k (nil when absent, copied or the default __index)
local function own(cls, k)
  local v = rawget(cls, k)
  if v == nil or copied[cls][k] == v or (k == '__index' and v == cls) then return nil end
  return v
end

local function inherit(cls)
  for _, k in ipairs(METAMETHODS) do
    if own(cls, k) == nil then
      local v
      local p = parents[cls]
      while p and v == nil do
        v = own(p, k)
        p = parents[p]
      end
      if v ~= nil then
        rawset(cls, k, v)
        copied[cls][k] = v
      elseif copied[cls][k] ~= nil then
        rawset(cls, k, k == '__index' and cls or nil)
        copied[cls][k] = nil
      end
    end
  end
end

local function construct(cls, ...)
  inherit(cls)
  local obj = setmetatable({}, cls)
  local init = cls.__init
  if init then init(obj, ...) end
  return obj
end

-- The class called `name`, loading the module that defines it if needed.
local function find(name)
  if by_name[name] then return by_name[name] end
  local prefix = name:match('^(.*)%.[^.]+$')
  for _, mod in ipairs({ name, prefix }) do
    if package.preload[mod] and not package.loaded[mod] then require(mod) end
    if by_name[name] then return by_name[name] end
  end
  return nil
end

-- The table a dotted name's last part goes into: a loaded module or a global table.
local function namespace(prefix)
  local ns = package.loaded[prefix]
  if type(ns) == 'table' then return ns end
  ns = _G
  for part in prefix:gmatch('[^.]+') do
    ns = rawget(ns, part)
    if type(ns) ~= 'table' then return nil end
  end
  return ns
end

function class.new(name, parent)
  if type(name) ~= 'string' or not name:match('^[%a_][%w_.]*$') then
    error(('torch.class: the class name must be an identifier (dots allowed), got %s'):format(tostring(name)), 2)
  end
  local pcls = parent
  if type(parent) == 'string' then
    pcls = find(parent)
    if not pcls then error(("torch.class: unknown parent class '%s'"):format(parent), 2) end
  elseif parent ~= nil and not names[parent] then
    error(('torch.class: the parent of %s must be a class or a class name, got %s'):format(name, tostring(parent)), 2)
  end
  local cls = {}
  cls.__index = cls
  cls.__name = name
  return class.adopt(cls, name, pcls), pcls
end

-- Registers cls as the class called name, child of pcls: class.new's work on a table
-- that holds the class already (a DataLoader worker's copy of a class of the main state).
function class.adopt(cls, name, pcls)
  by_name[name] = cls
  names[cls] = name
  parents[cls] = pcls
  copied[cls] = {}
  setmetatable(cls, {
    __index = pcls,
    __call = construct,
    __tostring = function() return name end,
  })
  local prefix, short = name:match('^(.*)%.([^.]+)$')
  if prefix then
    local ns = namespace(prefix)
    if ns then rawset(ns, short, cls) end
  else
    rawset(_G, name, cls)
  end
  return cls
end

-- every class made so far: {[cls] = {name, parent}}
function class.registry()
  local out = {}
  for cls, name in pairs(names) do out[cls] = { name, parents[cls] } end
  return out
end

-- the class name of an instance, or nil
function class.name_of(obj)
  local mt = getmetatable(obj)
  return mt and names[mt]
end

-- the class called name, or nil
function class.get(name)
  return by_name[name]
end

-- obj is an instance of the class (name or table) or of one of its subclasses
function class.isinstance(obj, cls)
  local target = type(cls) == 'string' and by_name[cls] or cls
  local mt = getmetatable(obj)
  while mt do
    if mt == target then return true end
    mt = parents[mt]
  end
  return false
end

-- the parent of a class, or nil
function class.parent(cls)
  return parents[cls]
end

return class
