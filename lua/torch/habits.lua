-- What Torch7 users and PyTorch users type without thinking, on top of the engine's API:
-- the typed constructors (torch.Tensor(2, 3), torch.LongTensor{1, 2}), torch.range,
-- Torch7's method names (fill, zero, copy, nElement, nDimension, apply, map), and
-- PyTorch's small conveniences (view_as, reshape_as, type_as, element_size,
-- is_floating_point, torch.seed).  Semantics are PyTorch's where the two differ: methods
-- without a trailing underscore return new tensors, except the Torch7 names that only
-- ever meant "fill this tensor" (fill, zero, copy, uniform).
local M = {}

local ELEMENT_SIZE = { float32 = 4, float64 = 8, int64 = 8, bool = 1, float16 = 2, bfloat16 = 2 }

function M.install(torch)
  local Tensor = torch.Tensor

  -- torch.Tensor(2, 3), torch.Tensor(size), torch.Tensor({1, 2}), torch.Tensor(t): sizes
  -- give a zero-filled tensor (PyTorch leaves it uninitialised; zeros are never garbage),
  -- a table gives its data, a tensor gives a view of it (the same memory, as in PyTorch)
  local function constructor(name, dtype)
    return function(first, ...)
      if first == nil then return torch.empty(0, { dtype = dtype }) end
      if torch.is_tensor(first) then
        if first.dtype ~= dtype then
          error(('%s(t): t is %s, not %s; use t:to(\'%s\') to convert'):format(name, first.dtype, dtype, dtype), 2)
        end
        return first:view(first.shape)
      end
      if type(first) == 'table' and getmetatable(first) ~= torch.Size then
        return torch.tensor(first, { dtype = dtype })
      end
      local sizes = type(first) == 'table' and first or { first, ... }
      for i, n in ipairs(sizes) do
        if math.type(n) ~= 'integer' or n < 0 then
          error(('%s: size %d must be a non-negative integer, got %s'):format(name, i, tostring(n)), 2)
        end
      end
      return torch.zeros(sizes, { dtype = dtype })
    end
  end
  -- torch.Tensor makes the default dtype's tensors (float32 unless torch.set_default_dtype or
  -- Torch7's torch.setdefaulttensortype changed it), as in both
  setmetatable(Tensor, { __call = function(_, ...) return constructor('torch.Tensor', torch.get_default_dtype())(...) end })

  -- Torch7's torch.setdefaulttensortype('torch.DoubleTensor') and getdefaulttensortype():
  -- torch.set_default_dtype under their names (floating point types only, as PyTorch's)
  local TENSOR_TYPES = { ['torch.FloatTensor'] = 'float32', ['torch.DoubleTensor'] = 'float64' }
  function torch.setdefaulttensortype(name)
    local dt = TENSOR_TYPES[name]
    if not dt then
      error(("torch.setdefaulttensortype: expected 'torch.FloatTensor' or 'torch.DoubleTensor', got %s")
        :format(type(name) == 'string' and "'" .. name .. "'" or tostring(name)), 2)
    end
    torch.set_default_dtype(dt)
  end
  function torch.getdefaulttensortype()
    return torch.get_default_dtype() == 'float64' and 'torch.DoubleTensor' or 'torch.FloatTensor'
  end
  -- The typed constructors are callable tables, as Torch7's classes are, so that programs
  -- (Torch7's own tests) can define methods on them (function torch.HalfTensor:mean ...);
  -- such methods are kept in the table but every dplua tensor has one metatable, so they
  -- are not called on tensors
  local plain = constructor
  constructor = function(name, dtype)
    local ctor = plain(name, dtype)
    return setmetatable({}, { __call = function(_, ...) return ctor(...) end, __name = name })
  end
  torch.FloatTensor = constructor('torch.FloatTensor', 'float32')
  torch.DoubleTensor = constructor('torch.DoubleTensor', 'float64')
  torch.LongTensor = constructor('torch.LongTensor', 'int64')
  torch.BoolTensor = constructor('torch.BoolTensor', 'bool')
  torch.HalfTensor = constructor('torch.HalfTensor', 'float16')
  torch.BFloat16Tensor = constructor('torch.BFloat16Tensor', 'bfloat16')
  -- Torch7's narrower integer tensors, int64 here (dplua's one integer dtype)
  torch.IntTensor = constructor('torch.IntTensor', 'int64')
  torch.ShortTensor = constructor('torch.ShortTensor', 'int64')
  torch.CharTensor = constructor('torch.CharTensor', 'int64')
  torch.ByteTensor = constructor('torch.ByteTensor', 'int64')

  -- torch.range(a, b [, step]): a, a + step, ... up to b inclusive, float32 (Torch7's,
  -- and PyTorch's deprecated one; torch.arange excludes b)
  function torch.range(a, b, step)
    step = step or 1
    if type(a) ~= 'number' or type(b) ~= 'number' or type(step) ~= 'number' then
      error('torch.range(start, end [, step]) takes numbers', 2)
    end
    if step == 0 or (b - a) * step < 0 then
      error(('torch.range: the step %s does not lead from %s to %s'):format(step, a, b), 2)
    end
    local n = math.floor((b - a) / step + 1e-9) + 1
    return torch.arange(n, { dtype = 'float64' }):mul(step):add(a):to(torch.get_default_dtype())
  end

  -- torch.seed(): seeds the default generator from the clock and returns the seed
  function torch.seed()
    local s = math.floor(torch._C.clock() * 1e9) ~ (os.time() << 20)
    s = s & 0x1fffffffffffff
    torch.manual_seed(s)
    return s
  end

  -- Torch7's names
  torch.CmdLine = require('torch.cmdline')
  torch.Tester = function() return require('torch.tester').Tester() end
  torch.TestSuite = function() return require('torch.tester').TestSuite() end
  torch.isTensor = torch.is_tensor
  torch.manualSeed = torch.manual_seed
  torch.initialSeed = torch.initial_seed
  -- torch.random([a,] [b]): a random integer from the default generator (1..2^32 with no
  -- arguments, 1..a with one, a..b with two); torch.uniform([a, b]): a number in [a, b)
  function torch.random(a, b)
    if a == nil then return torch.randint(1, 2 ^ 32 + 1, { 1 }):item() end
    if b == nil then a, b = 1, a end
    return torch.randint(a, b + 1, { 1 }):item()
  end
  function torch.uniform(a, b)
    a, b = a or 0, b or 1
    return torch.rand(1, { dtype = 'float64' }):item() * (b - a) + a
  end
  -- torch.cat(a, b [, dim]) as well as torch.cat({a, b, ...} [, dim])
  local cat = torch.cat
  function torch.cat(first, second, dim)
    if torch.is_tensor(first) then
      if torch.is_tensor(second) then return cat({ first, second }, dim) end
      return cat({ first }, second)
    end
    return cat(first, second)
  end

  function torch.is_floating_point(t) return torch.FLOAT_DTYPES[t.dtype] == true end
  Tensor.is_floating_point = torch.is_floating_point
  function Tensor:element_size() return ELEMENT_SIZE[self.dtype] end

  -- resize_(sizes) / resize_as_(other) (Torch7: resize, resizeAs): in place, keeping the
  -- leading elements in row-major order; new elements are zero
  local function resize(self, sizes, who)
    local n = 1
    for i, s in ipairs(sizes) do
      if math.type(s) ~= 'integer' or s < 0 then
        error(('%s: size %d must be a non-negative integer, got %s'):format(who, i, tostring(s)), 3)
      end
      n = n * s
    end
    if self.requires_grad then error(who .. ': cannot resize a tensor that requires grad', 3) end
    local new = torch.zeros(n, { dtype = self.dtype, device = self.device })
    local keep = math.min(n, self:numel())
    if keep > 0 then new:narrow(1, 1, keep):copy_(self:reshape(self:numel()):narrow(1, 1, keep)) end
    torch._C.set_data(self, new:view(sizes))
    return self
  end
  local function sizes_of(first, ...)
    if type(first) == 'table' then return first end
    return { first, ... }
  end
  function Tensor:resize_(...) return resize(self, sizes_of(...), 'resize_') end
  function Tensor:resize_as_(other) return resize(self, other:size():totable(), 'resize_as_') end
  Tensor.resize = Tensor.resize_
  Tensor.resizeAs = Tensor.resize_as_

  function Tensor:view_as(other) return self:view(other.shape) end
  function Tensor:reshape_as(other) return self:reshape(other.shape) end
  function Tensor:type_as(other) return self:to(other.dtype) end

  -- Torch7's names for what PyTorch spells with an underscore (in place, return self)
  Tensor.fill = Tensor.fill_
  Tensor.zero = Tensor.zero_
  Tensor.copy = Tensor.copy_
  Tensor.uniform = Tensor.uniform_
  Tensor.nElement = Tensor.numel
  Tensor.nDimension = Tensor.dim

  -- t:apply(fn): t[i] = fn(t[i]) for every element, in place (fn may return nil to keep
  -- the element); t:map(u, fn): t[i] = fn(t[i], u[i]).  Element by element in Lua, as in
  -- Torch7: for small tensors and set-up code, not for the training loop.
  local function each(self, others, fn, who)
    if type(fn) ~= 'function' then error(who .. ': expected a function', 3) end
    local n = self:numel()
    local flat = function(t) return n == 0 and {} or t:reshape(n):tolist() end
    local mine, theirs = flat(self), {}
    for k, o in ipairs(others) do
      if not torch.is_tensor(o) or o:numel() ~= n then
        error(('%s: argument %d must be a tensor of %d elements'):format(who, k, n), 3)
      end
      theirs[k] = flat(o)
    end
    for i = 1, n do
      local r
      if #theirs == 0 then r = fn(mine[i])
      elseif #theirs == 1 then r = fn(mine[i], theirs[1][i])
      else r = fn(mine[i], theirs[1][i], theirs[2][i]) end
      if r ~= nil then mine[i] = r end
    end
    if n > 0 then
      self:copy_(torch.tensor(mine, { dtype = self.dtype, device = self.device }):view(self.shape))
    end
    return self
  end
  function Tensor:apply(fn) return each(self, {}, fn, 'apply') end
  function Tensor:map(other, fn) return each(self, { other }, fn, 'map') end
  function Tensor:map2(a, b, fn) return each(self, { a, b }, fn, 'map2') end
end

return M
