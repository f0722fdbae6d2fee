-- torch.class (Torch7's classes) and torch.Size.
local torch = require 'torch'
local err = dofile('spec/helpers/check.lua').err

describe('torch.class', function()
  it('constructs with __init and returns the parent', function()
    local Base = torch.class('spec.Base')
    function Base:__init(x) self.x = x end
    function Base:get() return self.x end
    local Derived, parent = torch.class('spec.Derived', 'spec.Base')
    assert.are.equal(Base, parent)
    function Derived:__init(x, y)
      parent.__init(self, x)
      self.y = y
    end
    function Derived:sum() return self.x + self.y end
    local d = Derived(2, 3)
    assert.are.equal(2, d:get())
    assert.are.equal(5, d:sum())
    assert.are.equal(Derived, getmetatable(d))
    assert.are.equal(Derived, Derived.__index)
    assert.are.equal('spec.Derived', torch.type(d))
    assert.are.equal('spec.Derived', torch.typename(d))
    assert.is_true(torch.isinstance(d, 'spec.Base'))
    assert.is_true(torch.isinstance(d, Base))
    assert.is_false(torch.isinstance(Base(1), 'spec.Derived'))
    assert.are.equal('table', torch.type({}))
    assert.are.equal('number', torch.type(1))
    assert.is_nil(torch.typename({}))
    assert.are.equal('torch.device', torch.type(torch.device('cpu')))
    assert.are.equal('torch.Size', torch.type(torch.Size({ 2 })))
    assert.are.equal('torch.FloatTensor', torch.type(torch.zeros(1, { device = 'cpu' })))
  end)

  it('accepts the parent as a class table and works without __init', function()
    local A = torch.class('spec.A')
    local B, pa = torch.class('spec.B', A)
    assert.are.equal(A, pa)
    local b = B()
    assert.is_true(torch.isinstance(b, A))
    assert.are.equal(B, torch.getmetatable('spec.B'))
  end)

  it('puts dotted names into their namespace table', function()
    package.loaded['speclib'] = {}
    local Foo = torch.class('speclib.Foo')
    assert.are.equal(Foo, package.loaded['speclib'].Foo)
    local Top = torch.class('SpecTopLevel')
    assert.are.equal(Top, _G.SpecTopLevel)
    _G.SpecTopLevel = nil
    package.loaded['speclib'] = nil
  end)

  it('inherits metamethods, also those a parent defines later', function()
    local P = torch.class('spec.P')
    function P:__init(n) self.n = n end
    local C = torch.class('spec.C', 'spec.P')
    local before = C(1)
    P.__tostring = function(self) return 'P(' .. self.n .. ')' end
    P.__len = function(self) return self.n end
    P.__call = function(self, a) return self.n + a end
    local c = C(4)
    assert.are.equal('P(4)', tostring(c))
    assert.are.equal(4, #c)
    assert.are.equal(14, c(10))
    assert.are.equal('P(1)', tostring(before)) -- same metatable, so it sees the copy too
    C.__tostring = function(self) return 'C' .. self.n end
    assert.are.equal('C5', tostring(C(5)))
    assert.are.equal('P(6)', tostring(P(6)))
  end)

  it('inherits __index and __newindex functions', function()
    local Store = torch.class('spec.Store')
    function Store:__init() rawset(self, '_fields', {}) end
    Store.__newindex = function(self, k, v) self._fields[k] = v end
    Store.__index = function(self, k)
      local v = getmetatable(self)[k]
      if v ~= nil then return v end
      return rawget(self, '_fields')[k]
    end
    function Store:keys()
      local n = 0
      for _ in pairs(self._fields) do n = n + 1 end
      return n
    end
    local Sub = torch.class('spec.Sub', 'spec.Store')
    local s = Sub()
    s.a = 1
    s.b = 2
    assert.is_nil(rawget(s, 'a'))
    assert.are.equal(1, s.a)
    assert.are.equal(2, s:keys())
  end)

  it('loads the parent module by name', function()
    if not package.preload['nn'] then return pending('nn is not part of this build') end
    local Model, parent = torch.class('spec.Model', 'nn.Module')
    assert.are.equal(require('nn').Module, parent)
    assert.is_true(torch.isinstance(Model(), 'nn.Module'))
  end)

  it('names bad arguments', function()
    assert.is_truthy(err(torch.class, 'spec.X', 'spec.NoSuchParent'):find("unknown parent class 'spec.NoSuchParent'", 1, true))
    assert.is_truthy(err(torch.class, 'bad name'):find('must be an identifier', 1, true))
    assert.is_truthy(err(torch.class, 'spec.Y', {}):find('must be a class or a class name', 1, true))
  end)
end)

describe('torch.Size', function()
  it('indexes, measures, compares and prints', function()
    local s = torch.Size({ 30, 5 })
    assert.are.equal(30, s[1])
    assert.are.equal(2, #s)
    assert.is_true(s == torch.Size({ 30, 5 }))
    assert.is_true(s == torch.Size(30, 5))
    assert.is_false(s == torch.Size({ 5, 30 }))
    assert.is_false(s == torch.Size({ 30 }))
    assert.are.equal('torch.Size([30, 5])', tostring(s))
    assert.are.equal('torch.Size([])', tostring(torch.Size({})))
    assert.are.equal(150, s:numel())
    assert.are.equal(1, torch.Size({}):numel())
    assert.are.same({ 30, 5 }, s:totable())
    assert.is_truthy(err(torch.Size, { 2, -1 }):find('entry 2 must be a non-negative integer, got -1', 1, true))
  end)

  it('is what tensors report and creation functions accept', function()
    local t = torch.zeros(torch.Size({ 2, 3 }))
    assert.are.equal(torch.Size({ 2, 3 }), t:size())
    assert.are.equal(torch.Size({ 2, 3 }), torch.ones(t:size()):size())
    assert.are.equal(torch.Size({ 3, 2 }), t:view(t:size(2), t:size(1)):size())
  end)
end)
