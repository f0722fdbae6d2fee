-- torch.signatures: the signature of every op that takes more than tensors, in one table.
-- Each row is the op's name, its signature lines as PyTorch writes them (with dplua's
-- types, see torch.signature; several lines are overloads, tried in order), and the
-- implementation, which receives every parameter in order with defaults filled in (and the
-- overload's index after them when there are several).  install() puts the parsing wrapper
-- in torch.NAME and Tensor:NAME; help(torch.NAME) and doc/signatures.md show the same lines.
--
-- dplua's spellings: dims are 1-based (negative from the end), keyword arguments are the
-- options table in last position: x:sum(2, {keepdim = true}) is x.sum(1, keepdim=True).
local signature = require 'torch.signature'

local M = {}

function M.rows(torch)
  local C = require 'torch._C'
  local Tensor = torch.Tensor
  local base = {}
  for _, name in ipairs { 'sum', 'mean', 'prod', 'nansum', 'nanmean', 'amax', 'amin', 'argmax', 'argmin',
                          'max', 'min', 'any', 'all', 'logsumexp', 'var', 'std', 'var_mean', 'std_mean',
                          'count_nonzero', 'cumsum', 'cumprod', 'softmax', 'log_softmax', 'div', 'round',
                          'movedim', 'norm', 'sort', 'argsort', 'topk', 'kthvalue', 'median', 'mode',
                          'floor_divide' } do
    base[name] = rawget(Tensor, name) or torch[name]
    assert(base[name], name)
  end

  local function err(fmt, ...) require('torch.options').error(fmt:format(...)) end

  -- a 1-based dim of t as a positive dim (a 0-dim tensor takes 1 and -1)
  local function dim_of(name, t, d)
    local n = math.max(t:dim(), 1)
    if d == 0 or d > n or d < -n then
      err('%s: dimension %d is out of range for a tensor with %d dimensions (expected 1 to %d, or -%d to -1; dplua counts dims from 1)',
        name, d, t:dim(), n, n)
    end
    return d < 0 and n + d + 1 or d
  end

  -- dims (a dim or a table of dims) as a sorted list of distinct positive dims
  local function dims_list(name, t, dims)
    if type(dims) ~= 'table' then dims = { dims } end
    local list, seen = {}, {}
    for i, d in ipairs(dims) do
      local p = dim_of(name, t, math.tointeger(d))
      if seen[p] then err('%s: dim %d appears multiple times in the list of dims', name, dims[i]) end
      seen[p] = true
      list[#list + 1] = p
    end
    table.sort(list)
    return list
  end

  -- the shape of t with 1 at the dims in the set (all dims when set is nil)
  local function kept_shape(t, set)
    local shape = t:size():totable()
    for d = 1, #shape do
      if set == nil or set[d] then shape[d] = 1 end
    end
    return shape
  end

  -- A reduction over dims (nil: all; a dim; a table of dims) from one over a single dim:
  -- op(t) reduces everything, op(t, d, keepdim) one dim.  Several dims are moved last and
  -- flattened into one, so the values are reduced in one pass, as PyTorch reduces them.
  local function over_dims(name, op, t, dims, keepdim)
    if dims == nil or (type(dims) == 'table' and #dims == 0) then
      local r = op(t)
      if keepdim and t:dim() > 0 then r = r:reshape(kept_shape(t)) end
      return r
    end
    local list = dims_list(name, t, dims)
    if #list == 1 then return op(t, list[1], keepdim) end
    local set, perm, shape, n = {}, {}, {}, 1
    for _, d in ipairs(list) do set[d] = true end
    for d = 1, t:dim() do
      if not set[d] then perm[#perm + 1] = d; shape[#shape + 1] = t:size(d) end
    end
    for _, d in ipairs(list) do perm[#perm + 1] = d; n = n * t:size(d) end
    shape[#shape + 1] = n
    local r = op(t:permute(perm):reshape(shape), #shape, false)
    if keepdim then r = r:reshape(kept_shape(t, set)) end
    return r
  end

  local function cast(t, dtype)
    if dtype ~= nil and t.dtype ~= dtype then return t:to(dtype) end
    return t
  end

  -- the engine's reductions along one dim: op(t) or op(t, dim, keepdim)
  local function engine(fn)
    return function(t, d, keepdim)
      if d == nil then return fn(t) end
      return fn(t, d, keepdim)
    end
  end

  local function is_float(t) return torch.FLOAT_DTYPES[t.dtype] == true end

  local REDUCE = 'Tensor self, dims? dim=None, bool keepdim=False'
  local rows = {}
  local function row(name, lines, impl)
    rows[#rows + 1] = { name = name, lines = type(lines) == 'table' and lines or { lines }, impl = impl }
  end

  -- ---------------------------------------------------------------- reductions
  row('sum', ('sum(%s, *, dtype? dtype=None)'):format(REDUCE), function(t, dim, keepdim, dtype)
    return over_dims('sum', engine(base.sum), cast(t, dtype), dim, keepdim)
  end)
  row('mean', ('mean(%s, *, dtype? dtype=None)'):format(REDUCE), function(t, dim, keepdim, dtype)
    t = cast(t, dtype)
    if not is_float(t) then
      err('mean: could not infer the result dtype: the input must be floating point (or give {dtype = ...}), got %s', t.dtype)
    end
    return over_dims('mean', engine(base.mean), t, dim, keepdim)
  end)
  row('nansum', ('nansum(%s, *, dtype? dtype=None)'):format(REDUCE), function(t, dim, keepdim, dtype)
    return over_dims('nansum', engine(base.nansum), cast(t, dtype), dim, keepdim)
  end)
  row('nanmean', ('nanmean(%s, *, dtype? dtype=None)'):format(REDUCE), function(t, dim, keepdim, dtype)
    return over_dims('nanmean', engine(base.nanmean), cast(t, dtype), dim, keepdim)
  end)
  row('prod', 'prod(Tensor self, dim? dim=None, bool keepdim=False, *, dtype? dtype=None)', function(t, dim, keepdim, dtype)
    return over_dims('prod', engine(base.prod), cast(t, dtype), dim, keepdim)
  end)
  -- amax/amin: the extreme over dims; a reduced dim of size 0 has no identity
  local function extreme(name, op)
    local one = function(x, d, keepdim)
      if d == nil then return op(x) end
      return (op(x, d, keepdim))
    end
    return function(t, dim, keepdim)
      local list = dims_list(name, t, (type(dim) == 'table' and #dim == 0) and {} or dim)
      local empty = #list == 0 and t:numel() == 0
      for _, d in ipairs(list) do
        if t:dim() > 0 and t:size(d) == 0 then empty = true end
      end
      if empty then
        err('%s: expected a non-empty tensor, or reduced dims of nonzero size (the reduction has no identity), got a tensor of shape [%s]',
          name, table.concat(t:size():totable(), ', '))
      end
      return over_dims(name, one, t, dim, keepdim)
    end
  end
  row('amax', 'amax(Tensor self, dims dim=[], bool keepdim=False)', extreme('amax', base.max))
  row('amin', 'amin(Tensor self, dims dim=[], bool keepdim=False)', extreme('amin', base.min))
  row('argmax', 'argmax(Tensor self, dim? dim=None, bool keepdim=False)', function(t, dim, keepdim)
    if dim == nil then
      local r = base.argmax(t)
      if keepdim and t:dim() > 0 then r = r:reshape(kept_shape(t)) end
      return r
    end
    return base.argmax(t, dim, keepdim)
  end)
  row('argmin', 'argmin(Tensor self, dim? dim=None, bool keepdim=False)', function(t, dim, keepdim)
    if dim == nil then
      local r = base.argmin(t)
      if keepdim and t:dim() > 0 then r = r:reshape(kept_shape(t)) end
      return r
    end
    return base.argmin(t, dim, keepdim)
  end)
  for _, name in ipairs { 'max', 'min' } do
    row(name, { ('%s(Tensor self)'):format(name), ('%s(Tensor self, Tensor other)'):format(name),
                ('%s(Tensor self, dim dim, bool keepdim=False)'):format(name) },
      function(t, a, keepdim, form)
        if form == 1 then return base[name](t) end
        if form == 2 then return base[name](t, a) end
        return base[name](t, a, keepdim)
      end)
  end
  row('any', ('any(%s)'):format(REDUCE), function(t, dim, keepdim)
    return over_dims('any', engine(base.any), t, dim, keepdim)
  end)
  row('all', ('all(%s)'):format(REDUCE), function(t, dim, keepdim)
    return over_dims('all', engine(base.all), t, dim, keepdim)
  end)
  row('logsumexp', 'logsumexp(Tensor self, dims dim, bool keepdim=False)', function(t, dim, keepdim)
    return over_dims('logsumexp', engine(base.logsumexp), t, dim, keepdim)
  end)
  row('count_nonzero', 'count_nonzero(Tensor self, dims? dim=None)', function(t, dim)
    return over_dims('count_nonzero', engine(function(x, d) return base.count_nonzero(x, d) end), t, dim, false)
  end)

  -- var/std: PyTorch 1.13's three forms: (unbiased), (dim, unbiased, keepdim), and
  -- (dim, *, correction, keepdim)
  local function moments(name, fn)
    return {
      lines = { ('%s(Tensor self, bool unbiased)'):format(name),
                ('%s(Tensor self, dims? dim, bool unbiased, bool keepdim=False)'):format(name),
                ('%s(Tensor self, dims? dim=None, *, Scalar? correction=None, bool keepdim=False, bool? unbiased=None)'):format(name) },
      impl = function(t, a, b, c, d, form)
        local dim, correction, keepdim
        if form == 1 then correction = a and 1 or 0
        elseif form == 2 then dim, correction, keepdim = a, b and 1 or 0, c
        else
          dim, keepdim = a, c
          if b ~= nil and d ~= nil then err('%s: give correction or unbiased, not both', name) end
          correction = b ~= nil and b or (d == false and 0 or 1)
        end
        return fn(t, dim, correction, keepdim)
      end,
    }
  end
  -- the spread over dims with a correction: sum((x - mean)^2) / max(n - correction, 0)
  local function var(t, dim, correction, keepdim)
    if not is_float(t) then err('var: expected a floating point tensor, got %s', t.dtype) end
    local n = 1
    if dim == nil or (type(dim) == 'table' and #dim == 0) then
      n = t:numel()
    else
      for _, d in ipairs(dims_list('var', t, dim)) do n = n * (t:dim() > 0 and t:size(d) or 1) end
    end
    local work = (t.dtype == 'float16' or t.dtype == 'bfloat16') and t:float() or t
    local dev = work - over_dims('var', engine(base.mean), work, dim, true)
    local r = over_dims('var', engine(base.sum), dev * dev, dim, keepdim) / math.max(n - correction, 0)
    return cast(r, t.dtype)
  end
  local function std(t, dim, correction, keepdim)
    local v = var(t, dim, correction, keepdim)
    return v:sqrt()
  end
  local function with_mean(fn)
    return function(t, dim, correction, keepdim)
      return fn(t, dim, correction, keepdim), over_dims('mean', engine(base.mean), t, dim, keepdim)
    end
  end
  for name, fn in pairs { var = var, std = std, var_mean = with_mean(var), std_mean = with_mean(std) } do
    local m = moments(name, fn)
    row(name, m.lines, m.impl)
  end

  row('norm', 'norm(Tensor self, Scalar|str? p=2, dims? dim=None, bool keepdim=False, *, dtype? dtype=None)',
    function(t, p, dim, keepdim, dtype)
      t = cast(t, dtype)
      if p == 'fro' then p = 2 end
      if type(p) == 'string' then err("norm: p must be a number or 'fro', got '%s'", p) end
      return over_dims('norm', function(x, d, k)
        if d == nil then return base.norm(x, p) end
        return base.norm(x, p, d, k)
      end, t, dim, keepdim)
    end)

  -- ---------------------------------------------------------------- scans and sorting
  -- (dtype may come by position too, as dplua has always taken it)
  row('cumsum', 'cumsum(Tensor self, dim dim, dtype? dtype=None)', function(t, dim, dtype)
    return base.cumsum(cast(t, dtype), dim)
  end)
  row('cumprod', 'cumprod(Tensor self, dim dim, dtype? dtype=None)', function(t, dim, dtype)
    return base.cumprod(cast(t, dtype), dim)
  end)
  row('sort', { 'sort(Tensor self, dim dim=-1, bool descending=False, *, bool? stable=None)' },
    function(t, dim, descending) return base.sort(t, dim, descending) end)
  row('argsort', { 'argsort(Tensor self, dim dim=-1, bool descending=False, *, bool? stable=None)' },
    function(t, dim, descending) return base.argsort(t, dim, descending) end)
  row('topk', 'topk(Tensor self, int k, dim dim=-1, bool largest=True, bool sorted=True)',
    function(t, k, dim, largest) return base.topk(t, k, dim, largest) end)
  row('kthvalue', 'kthvalue(Tensor self, int k, dim dim=-1, bool keepdim=False)',
    function(t, k, dim, keepdim) return base.kthvalue(t, k, dim, keepdim) end)
  row('median', { 'median(Tensor self)', 'median(Tensor self, dim dim, bool keepdim=False)' },
    function(t, dim, keepdim, form)
      if form == 1 then return base.median(t) end
      return base.median(t, dim, keepdim)
    end)
  row('mode', 'mode(Tensor self, dim dim=-1, bool keepdim=False)',
    function(t, dim, keepdim) return base.mode(t, dim, keepdim) end)

  -- ---------------------------------------------------------------- softmax
  for _, name in ipairs { 'softmax', 'log_softmax' } do
    row(name, ('%s(Tensor self, dim dim, dtype? dtype=None)'):format(name), function(t, dim, dtype)
      return base[name](cast(t, dtype), dim)
    end)
  end

  -- ---------------------------------------------------------------- elementwise
  -- div(other, {rounding_mode = 'trunc' | 'floor'}): true division, or rounded toward 0 / -inf
  local function trunc_divide(a, b)
    if not torch.is_tensor(b) then
      b = torch.tensor(b, { dtype = (math.type(b) == 'integer' and not is_float(a)) and 'int64' or (is_float(a) and a.dtype or torch.get_default_dtype()), device = a.device })
    end
    if not is_float(a) and not is_float(b) then
      if b:eq(0):any():item() then err('div: ZeroDivisionError (integer division by zero)') end
      local r = a:fmod(b)
      return ((a - r):double() / b:double()):round():to('int64')
    end
    return (a / b):trunc()
  end
  row('div', 'div(Tensor self, Tensor|Scalar other, *, str{trunc,floor}? rounding_mode=None)',
    function(a, b, mode)
      if mode == 'floor' then return base.floor_divide(a, b) end
      if mode == 'trunc' then return trunc_divide(a, b) end
      return base.div(a, b)
    end)
  -- round({decimals = k}): to k decimals (half to even), as PyTorch: x * 10^k rounded, / 10^k
  row('round', 'round(Tensor self, *, int decimals=0)', function(t, decimals)
    if decimals == 0 then return base.round(t) end
    if not is_float(t) then err('round: decimals is not implemented for %s tensors', t.dtype) end
    if decimals > 0 then
      local p = 10.0 ^ decimals
      return base.round(t * p) / p
    end
    local p = 10.0 ^ -decimals
    return base.round(t / p) * p
  end)

  -- ---------------------------------------------------------------- shapes
  row('movedim', 'movedim(Tensor self, dims source, dims destination)', function(t, src, dst)
    local s = type(src) == 'table' and src or { src }
    local d = type(dst) == 'table' and dst or { dst }
    if #s ~= #d then
      err('movedim: source and destination must have the same number of dims, got %d and %d', #s, #d)
    end
    local n = t:dim()
    local order, taken, used = {}, {}, {}
    for i = 1, #s do
      local sd, dd = dim_of('movedim', t, s[i]), dim_of('movedim', t, d[i])
      if taken[sd] then err('movedim: repeated dim %d in source', s[i]) end
      if order[dd] then err('movedim: repeated dim %d in destination', d[i]) end
      order[dd], taken[sd] = sd, true
    end
    local rest = 1
    for pos = 1, n do
      if not order[pos] then
        while taken[rest] or used[rest] do rest = rest + 1 end
        order[pos], used[rest] = rest, true
      end
    end
    if n == 0 then return t:view({}) end
    return t:permute(order)
  end)

  return rows
end

-- Puts each row's parsing wrapper in torch.NAME and, where the op is a method, Tensor:NAME.
function M.install(torch)
  local Tensor = torch.Tensor
  for _, r in ipairs(M.rows(torch)) do
    local fn = signature.wrap(r.name, r.lines, r.impl)
    local method = rawget(Tensor, r.name) ~= nil
    torch[r.name] = fn
    if method then rawset(Tensor, r.name, fn) end
  end
  torch.divide = torch.div
  rawset(Tensor, 'divide', torch.div)
  torch.moveaxis = torch.movedim
  rawset(Tensor, 'moveaxis', torch.movedim)
end

return M
