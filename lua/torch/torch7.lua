-- More of Torch7's tensor API, so Torch7 programs and tests run (spec/torch7/test.lua runs
-- Torch7's own tensor tests through torch.Tester): the function forms (torch.cmul(a, b),
-- torch.view(x, 3, 5), torch.equal, torch.totable), the camelCase methods (viewAs, expandAs,
-- repeatTensor, indexCopy, maskedFill, isSameSizeAs, ...), the result-tensor forms
-- (torch.sum(res, x, 2) fills res), x:normal(), x:byte() and the other narrow integer
-- conversions, sort(x, true), torch.getRNGState/setRNGState and torch.LongStorage{...} as
-- sizes.  Installed after the engine's modules, so it wraps their final versions.
--
-- Where Torch7 and PyTorch give the same name different meanings, PyTorch's stays
-- (max(x, dim) drops dim, x:add(y) returns a new tensor, full reductions are 0-dim
-- tensors); the Torch7 names that PyTorch does not have keep Torch7's meaning, in place
-- included (x:cmul(y), x:maskedFill(m, v), x:indexCopy(...) change x, as in Torch7).
local M = {}

function M.install(torch)
  local Tensor = torch.Tensor
  local is_tensor = torch.is_tensor
  -- a wrapper keeps the signature of the op it wraps (help() shows it)
  local registry = require('torch.signature').registry
  local function keep(new, old)
    registry[new] = registry[old]
    return new
  end

  local function fail(level, fmt, ...) error(fmt:format(...), level + 1) end

  -- Torch7's result-tensor form: res takes the size, values and memory of result (Torch7
  -- resizes res and fills it); a result of another dtype is converted to res's dtype
  local function into(res, result)
    if result.dtype ~= res.dtype then result = result:to(res.dtype) end
    torch._C.set_data(res, result)
    return res
  end
  -- the same, for a result that may share memory with an input (Torch7 copies it)
  local function into_copy(res, result) return into(res, result:clone()) end

  -- ------------------------------------------------------------ element-wise names
  -- torch.cmul / cdiv / cpow / cmax / cmin / cfmod / cremainder: PyTorch's mul, div, pow,
  -- maximum (clamp with a number), minimum, fmod, remainder; torch.cmul(res, a, b) fills res
  local function binary(name, f)
    torch[name] = function(a, b, c)
      if is_tensor(a) and is_tensor(b) and (is_tensor(c) or type(c) == 'number') then return into(a, f(b, c)) end
      if not is_tensor(a) then fail(2, 'torch.%s: argument 1 must be a tensor, got %s', name, type(a)) end
      return f(a, b)
    end
  end
  binary('cmul', torch.mul)
  binary('cdiv', torch.div)
  binary('cpow', torch.pow)
  binary('cfmod', torch.fmod)
  binary('cremainder', torch.remainder)
  local function bound(which, clamp_opt)
    return function(a, b)
      if type(b) == 'number' then return a:clamp({ [clamp_opt] = b }) end
      return torch[which](a, b)
    end
  end
  binary('cmax', bound('maximum', 'min'))
  binary('cmin', bound('minimum', 'max'))

  -- the methods of the same names change self (Torch7's), x:csub(y) is x - y in place and
  -- x:cinv() is 1 / x in place
  local function inplace(name, f)
    Tensor[name] = function(self, ...)
      local r = f(self, ...)
      if torch.FLOAT_DTYPES[r.dtype] and not torch.FLOAT_DTYPES[self.dtype] then
        fail(2, "%s: the result type %s can't be cast to the %s tensor it would change in place", name, r.dtype, self.dtype)
      end
      return self:copy_(r)
    end
  end
  inplace('cmul', torch.mul)
  inplace('cdiv', torch.div)
  inplace('cpow', torch.pow)
  inplace('cfmod', torch.fmod)
  inplace('cremainder', torch.remainder)
  inplace('cmax', bound('maximum', 'min'))
  inplace('cmin', bound('minimum', 'max'))
  inplace('csub', function(a, b) return a - b end)
  inplace('cinv', function(a) return a:reciprocal() end)

  -- x:normal([mean, std]): fills x from N(mean, std^2) in place (Torch7's normal)
  function Tensor:normal(mean, std) return self:normal_(mean or 0, std or 1) end

  -- x:byte(), x:char(), x:short(), x:int(): dplua's one integer dtype, int64, as the
  -- typed constructors torch.ByteTensor etc. give.  The values must fit the narrower type
  -- (0..255, -128..127, 16 and 32 bits): the wrap-around Torch7 and PyTorch do outside it
  -- is an error here rather than a different answer.
  local RANGES = {
    byte = { 0, 255, 'torch.ByteTensor' }, char = { -128, 127, 'torch.CharTensor' },
    short = { -32768, 32767, 'torch.ShortTensor' }, int = { -2147483648, 2147483647, 'torch.IntTensor' },
  }
  local function narrow_int(self, name)
    local r = RANGES[name]
    local t = self:to('int64')
    if t:numel() > 0 then
      local lo, hi = t:min():item(), t:max():item()
      if lo < r[1] or hi > r[2] then
        fail(3, '%s(): the values %d..%d do not fit %s (%d..%d); dplua keeps integers as int64, use long()',
          name, lo, hi, r[3], r[1], r[2])
      end
    end
    return t
  end
  for name in pairs(RANGES) do
    Tensor[name] = function(self) return narrow_int(self, name) end
  end
  -- x:type('torch.IntTensor') and the other narrow integer names: the same conversions
  local TYPE_NAMES = { ['torch.ByteTensor'] = 'byte', ['torch.CharTensor'] = 'char',
    ['torch.ShortTensor'] = 'short', ['torch.IntTensor'] = 'int' }
  local type_ = Tensor.type
  function Tensor:type(name, ...)
    if TYPE_NAMES[name] then return narrow_int(self, TYPE_NAMES[name]) end
    return type_(self, name, ...)
  end

  -- ------------------------------------------------------------ comparisons and tests
  -- x:equal(y) / torch.equal(x, y): same size and the same values
  function Tensor:equal(other) return torch.equal(self, other) end
  Tensor.isTensor = function(t) return is_tensor(t) end
  Tensor.isContiguous = Tensor.is_contiguous
  function Tensor:isSameSizeAs(other) return tostring(self.shape) == tostring(other.shape) end
  function Tensor:isSize(size)
    local want = type(size) == 'table' and size or {}
    local got = self:size():totable()
    if #got ~= #want then return false end
    for i = 1, #got do if got[i] ~= want[i] then return false end end
    return true
  end
  -- torch.totable(x) and x:totable(): nested Lua tables (x:tolist())
  function Tensor:totable() return self:tolist() end
  function torch.totable(x)
    if type(x) == 'table' and not is_tensor(x) and x.totable then return x:totable() end
    return x:tolist()
  end

  -- ------------------------------------------------------------ shapes
  -- torch.LongStorage{3, 5}: Torch7's sizes, a torch.Size here (no storages of their own)
  function torch.LongStorage(sizes)
    if type(sizes) ~= 'table' then
      fail(2, 'torch.LongStorage: expected a table of sizes such as {3, 5}, got %s (dplua has no storages; sizes are torch.Size)', type(sizes))
    end
    return torch.Size(sizes)
  end

  -- res:view(src, sizes...), res:viewAs(src, template), res:expand(src, sizes...),
  -- res:expandAs(src, template): Torch7's result forms make res a view of src
  local view, expand, expand_as = Tensor.view, Tensor.expand, Tensor.expand_as
  function Tensor:view(first, ...)
    if is_tensor(first) then return into(self, view(first, ...)) end
    return view(self, first, ...)
  end
  function Tensor:viewAs(a, b)
    if b ~= nil then return into(self, view(a, b.shape)) end
    return view(self, a.shape)
  end
  function Tensor:expand(first, ...)
    if is_tensor(first) then return into(self, expand(first, ...)) end
    return expand(self, first, ...)
  end
  function Tensor:expandAs(a, b)
    if b ~= nil then return into(self, expand_as(a, b)) end
    return expand_as(self, a)
  end
  local rep = Tensor.repeatTensor
  function Tensor:repeatTensor(first, ...)
    if is_tensor(first) then return into(self, rep(first, ...)) end
    return rep(self, first, ...)
  end
  -- function forms of the methods: torch.view(x, 3, 5), torch.expand(x, 8, 5), ...
  for _, name in ipairs({ 'view', 'viewAs', 'expand', 'expandAs', 'repeatTensor' }) do
    if torch[name] == nil then
      torch[name] = function(x, ...)
        if not is_tensor(x) then fail(2, 'torch.%s: argument 1 must be a tensor, got %s', name, type(x)) end
        return x[name](x, ...)
      end
    end
  end

  -- torch.split(result, x, size [, dim]) and torch.chunk(result, x, n [, dim]): fill the
  -- table result with the pieces (Torch7's); with x first, PyTorch's forms
  for _, name in ipairs({ 'split', 'chunk' }) do
    local f = torch[name]
    torch[name] = keep(function(first, ...)
      if type(first) == 'table' and not is_tensor(first) then
        for k in pairs(first) do first[k] = nil end
        for i, piece in ipairs(f(...)) do first[i] = piece end
        return first
      end
      return f(first, ...)
    end, f)
  end

  -- ------------------------------------------------------------ indexing by masks and indices
  -- Torch7 masks are ByteTensors of 0 and 1: any nonzero integer mask is taken as true
  local function mask_of(m, who)
    if not is_tensor(m) then fail(3, '%s: the mask must be a tensor, got %s', who, type(m)) end
    if m.dtype == 'bool' then return m end
    if torch.FLOAT_DTYPES[m.dtype] then
      fail(3, '%s: the mask must be a bool or integer (0/1) tensor, got %s', who, m.dtype)
    end
    return m:ne(0)
  end
  function Tensor:maskedFill(mask, value) return self:masked_fill_(mask_of(mask, 'maskedFill'), value) end
  function Tensor:maskedCopy(mask, src)
    local m = mask_of(mask, 'maskedCopy')
    local need = m:sum():item()
    if not is_tensor(src) or src:numel() < need then
      fail(2, 'maskedCopy: the source must have at least %d elements (the ones in the mask), got %s', need,
        is_tensor(src) and tostring(src:numel()) or type(src))
    end
    return self:masked_scatter_(m, src)
  end
  -- x:maskedSelect(mask) returns the selected elements; res:maskedSelect(src, mask) fills res
  function Tensor:maskedSelect(a, b)
    if b ~= nil then return into(self, a:masked_select(mask_of(b, 'maskedSelect'))) end
    return self:masked_select(mask_of(a, 'maskedSelect'))
  end
  function Tensor:indexCopy(dim, index, src) return self:index_copy_(dim, index, src) end
  function Tensor:indexAdd(dim, index, src) return self:index_add_(dim, index, src) end
  function Tensor:indexFill(dim, index, value) return self:index_fill_(dim, index, value) end

  -- ------------------------------------------------------------ sort
  -- sort(x, true): descending along the last dim (Torch7's); sort(x, dim, descending) as
  -- PyTorch; torch.sort(values, indices, x [, dim] [, descending]) fills values and indices
  local sort = torch.sort
  local function sort7(x, a, b)
    if type(a) == 'boolean' then return sort(x, x:dim() > 0 and x:dim() or 1, a) end
    return sort(x, a, b)
  end
  torch.sort = keep(function(first, second, third, ...)
    if is_tensor(first) and is_tensor(second) and is_tensor(third) then
      local v, i = sort7(third, ...)
      into(first, v); into(second, i)
      return first, second
    end
    return sort7(first, second, third, ...)
  end, sort)
  Tensor.sort = keep(function(self, ...) return sort7(self, ...) end, sort)

  -- ------------------------------------------------------------ result-tensor forms
  -- torch.f(res, x, ...) for the functions whose second argument is never a tensor in
  -- PyTorch, and torch.f(res, ...) for the makers (zeros, rand, ...): res is filled with
  -- what torch.f(x, ...) or torch.f(...) returns
  local ONE_INPUT = { 'sum', 'prod', 'cumsum', 'cumprod', 'diag', 'tril', 'triu', 'reshape',
    'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh', 'tanh', 'exp', 'log', 'sqrt',
    'rsqrt', 'abs', 'floor', 'ceil', 'round', 'trunc', 'frac', 'sigmoid', 'neg', 'sign',
    'mean', 'std', 'var', 'norm', 'histc' }
  for _, name in ipairs(ONE_INPUT) do
    local f = torch[name]
    if f then
      torch[name] = keep(function(first, second, ...)
        if is_tensor(first) and is_tensor(second) then return into_copy(first, f(second, ...)) end
        return f(first, second, ...)
      end, f)
    end
  end
  local MAKERS = { 'zeros', 'ones', 'eye', 'range', 'rand', 'randn', 'randperm', 'linspace', 'logspace' }
  for _, name in ipairs(MAKERS) do
    local f = torch[name]
    if f then
      torch[name] = function(first, ...)
        if is_tensor(first) then return into(first, f(...)) end
        return f(first, ...)
      end
    end
  end
  -- torch.cross(res, a, b [, dim]) and torch.cat(res, a, b [, dim]) / torch.cat(res, {...} [, dim])
  local cross = torch.cross
  torch.cross = keep(function(a, b, c, ...)
    if is_tensor(a) and is_tensor(b) and is_tensor(c) then return into(a, cross(b, c, ...)) end
    return cross(a, b, c, ...)
  end, cross)
  local cat = torch.cat
  torch.cat = keep(function(a, b, c, d)
    if is_tensor(a) and type(b) == 'table' and not is_tensor(b) then return into(a, cat(b, c)) end
    if is_tensor(a) and is_tensor(b) and is_tensor(c) then return into(a, cat({ b, c }, d)) end
    return cat(a, b, c)
  end, cat)

  -- torch.setheaptracking(on): Torch7's switch for telling Lua's collector about tensor
  -- memory; dplua always tells it (lt_account_memory), so there is nothing to switch
  function torch.setheaptracking(on)
    if type(on) ~= 'boolean' then fail(2, 'torch.setheaptracking: expected a boolean, got %s', type(on)) end
  end

  -- ------------------------------------------------------------ random state
  -- torch.getRNGState(): the global stream's position as an int64 tensor {seed, offset};
  -- torch.setRNGState(state) goes back to it, so the same numbers come again
  function torch.getRNGState()
    local seed, offset = torch._C.rng_reserve(0)
    return torch.tensor({ seed, offset }, { dtype = 'int64' })
  end
  function torch.setRNGState(state)
    if not is_tensor(state) or state:numel() ~= 2 or state.dtype ~= 'int64' then
      fail(2, 'torch.setRNGState: expected the int64 tensor of 2 elements that torch.getRNGState() returns, got %s',
        is_tensor(state) and (state.dtype .. ' tensor of ' .. state:numel() .. ' elements') or type(state))
    end
    local v = state:tolist()
    torch.manual_seed(v[1])
    if v[2] > 0 then torch._C.rng_reserve(v[2]) end
    return state
  end
end

return M
