-- Ops written as compositions of the engine's ops, so they run on every device and autograd
-- differentiates them with no code of their own: isnan, isinf, isfinite, any, all,
-- logsumexp, var, std, norm, dist; flip, roll, repeat, tile, movedim, tril, triu, unbind,
-- outer, dot, mv, lerp, one_hot, hstack, vstack.  Each is torch.NAME(t, ...) and
-- t:NAME(...), with PyTorch 1.13's results (1-based dims and classes, as everywhere).
local M = {}

-- define(torch, name, fn): torch.NAME(t, ...) (which checks that t is a tensor) and the
-- method t:NAME(...), both fn; the other composition files use it too
function M.define(torch, name, fn)
  torch[name] = function(t, ...)
    if not torch.is_tensor(t) then
      error(('torch.%s: expected a tensor, got %s'):format(name, type(t)), 2)
    end
    return fn(t, ...)
  end
  torch.Tensor[name] = fn
end

function M.install(torch)
  local Tensor = torch.Tensor
  local function both(name, fn) M.define(torch, name, fn) end
  local function is_float(t) return torch.FLOAT_DTYPES[t.dtype] == true end

  -- predicates: bool tensors of t's shape
  both('isnan', function(t) return t:ne(t) end)
  both('isinf', function(t)
    if not is_float(t) then return torch.zeros_like(t, { dtype = 'bool' }) end
    return t:abs():eq(math.huge)
  end)
  both('isfinite', function(t)
    if not is_float(t) then return torch.ones_like(t, { dtype = 'bool' }) end
    return (t - t):eq(0)   -- inf - inf and NaN - NaN are NaN
  end)

  -- any/all([dim [, keepdim]]): bool, over everything or along dim
  local function count(mask, dim, keepdim)
    if dim == nil then return mask:sum() end
    return mask:sum(dim, keepdim)
  end
  both('any', function(t, dim, keepdim) return count(t:ne(0), dim, keepdim):gt(0) end)
  both('all', function(t, dim, keepdim) return count(t:eq(0), dim, keepdim):eq(0) end)

  -- logsumexp(dim [, keepdim]): log(sum(exp(t))) along dim, shifted by the maximum so it
  -- neither overflows nor loses the small terms; an infinite maximum is not shifted by
  local function finite_or_zero(m) return torch.where(m:isfinite(), m, 0) end
  both('logsumexp', function(t, dim, keepdim)
    if dim == nil then error('logsumexp: a dimension is required, as in PyTorch', 2) end
    if not is_float(t) then t = t:to(torch.get_default_dtype()) end
    local m = finite_or_zero(t:max(dim, true):detach())
    local r = (t - m):exp():sum(dim, true):log() + m
    return keepdim and r or r:squeeze(dim)
  end)

  -- var/std([dim] [, {unbiased=true | correction=1, keepdim=false}]), or var(dim, unbiased,
  -- keepdim) as Torch7 and PyTorch's positional form
  local function moments_args(who, dim, a, b)
    local correction, keepdim = 1, false
    if type(dim) == 'table' then dim, a = nil, dim end
    if type(a) == 'table' then
      if a.correction ~= nil then correction = a.correction
      elseif a.unbiased ~= nil then correction = a.unbiased and 1 or 0 end
      keepdim = a.keepdim or false
    else
      if a ~= nil then correction = a and 1 or 0 end
      keepdim = b or false
    end
    if type(correction) ~= 'number' then
      error(('%s: correction must be a number, got %s'):format(who, type(correction)), 3)
    end
    return dim, correction, keepdim
  end
  local function var(t, dim, a, b)
    local d, correction, keepdim = moments_args('var', dim, a, b)
    if not is_float(t) then error(('var: expected a floating point tensor, got %s'):format(t.dtype), 2) end
    local n = d and t:size(d) or t:numel()
    local dev = d and (t - t:mean(d, true)) or (t - t:mean())
    local ss = d and (dev * dev):sum(d, keepdim) or (dev * dev):sum()
    return ss / math.max(n - correction, 0)
  end
  both('var', var)
  both('std', function(t, dim, a, b) return var(t, dim, a, b):sqrt() end)

  -- norm([p=2] [, dim [, keepdim]]): the p-norm over everything or along dim; p may be
  -- math.huge (the largest |x|), -math.huge, 0 (the count of nonzeros) or any number
  local function norm(t, p, dim, keepdim)
    if type(p) == 'table' then p, dim, keepdim = p.p, p.dim, p.keepdim end
    p = p or 2
    if type(p) ~= 'number' then error(('norm: p must be a number, got %s'):format(type(p)), 2) end
    if not is_float(t) then error(('norm: expected a floating point tensor, got %s'):format(t.dtype), 2) end
    local a = t:abs()
    local function reduce(x, op)
      if dim == nil then return x[op](x) end
      local r = x[op](x, dim, keepdim)
      return r
    end
    if p == math.huge then return reduce(a, 'max') end
    if p == -math.huge then return reduce(a, 'min') end
    if p == 0 then return reduce(a:ne(0):to(t.dtype), 'sum') end
    if p == 1 then return reduce(a, 'sum') end
    if p == 2 then return reduce(t * t, 'sum'):sqrt() end
    return reduce(a ^ p, 'sum') ^ (1 / p)
  end
  both('norm', norm)
  both('dist', function(a, b, p) return norm(a - b, p) end)

  -- ---------------------------------------------------------------- shapes
  local function dims_of(who, t, dims)
    if type(dims) == 'number' then dims = { dims } end
    if type(dims) ~= 'table' then error(('%s: dims must be a number or a table of numbers'):format(who), 3) end
    local out = {}
    for i, d in ipairs(dims) do
      if math.type(d) ~= 'integer' or d == 0 or d > t:dim() or d < -t:dim() then
        error(('%s: dimension %s is out of range for a tensor with %d dimensions (dplua counts from 1)')
          :format(who, tostring(d), t:dim()), 3)
      end
      out[i] = d < 0 and t:dim() + d + 1 or d
    end
    return out
  end

  -- flip(dims): the order of the elements along each dim reversed; always a new tensor, as
  -- PyTorch's (with no dim to reverse too)
  both('flip', function(t, dims)
    local r = t
    for _, d in ipairs(dims_of('flip', t, dims)) do
      local n = r:size(d)
      if n > 1 then r = r:index_select(d, torch.arange(n, 0, -1, { device = r.device })) end
    end
    return rawequal(r, t) and t:clone() or r
  end)

  -- roll(shifts [, dims]): elements shifted along dims, wrapping around; without dims the
  -- flattened tensor is rolled
  both('roll', function(t, shifts, dims)
    if dims == nil then return torch.roll(t:reshape(-1), shifts, 1):view(t:size()) end
    if type(shifts) == 'number' then shifts = { shifts } end
    dims = dims_of('roll', t, dims)
    if #shifts ~= #dims then
      error(('roll: %d shifts for %d dims'):format(#shifts, #dims), 2)
    end
    local r = t
    for i, d in ipairs(dims) do
      local n = r:size(d)
      local k = n > 0 and shifts[i] % n or 0
      if k ~= 0 then r = torch.cat({ r:narrow(d, n - k + 1, k), r:narrow(d, 1, n - k) }, d) end
    end
    return rawequal(r, t) and t:clone() or r   -- a new tensor even when nothing moves, as PyTorch
  end)

  -- repeat(sizes...): a new tensor (never a view), t repeated sizes[i] times along dim i
  -- (leading sizes add dims); as
  -- Lua reserves the word, t['repeat'](t, 2, 3), torch['repeat'](t, 2, 3) or Torch7's
  -- t:repeatTensor(2, 3)
  local function sizes_of(args)
    if #args == 1 and type(args[1]) == 'table' then args = args[1] end
    local out = {}
    for i = 1, #args do out[i] = args[i] end
    return out
  end
  local function repeat_(t, ...)
    local reps = sizes_of({ ... })
    local shape = t:size():totable()
    if #reps < #shape then
      error(('repeat: %d repeats for a tensor with %d dimensions (give at least one per dimension)')
        :format(#reps, #shape), 2)
    end
    while #shape < #reps do table.insert(shape, 1, 1) end
    local view, grown, out = {}, {}, {}
    for i = 1, #reps do
      view[#view + 1], view[#view + 2] = 1, shape[i]
      grown[#grown + 1], grown[#grown + 2] = reps[i], shape[i]
      out[i] = reps[i] * shape[i]
    end
    -- clone, as PyTorch's repeat always copies: without it repeats of 1 (or of size-1
    -- dims) would come back as a view sharing t's memory
    return t:reshape(view):expand(grown):clone():reshape(out)
  end
  both('repeat', repeat_)
  both('repeatTensor', repeat_)

  -- tile(reps): repeat, with reps padded by leading 1s to t's number of dimensions
  both('tile', function(t, ...)
    local reps = sizes_of({ ... })
    while #reps < t:dim() do table.insert(reps, 1, 1) end
    return repeat_(t, reps)
  end)

  -- movedim(source, destination): one dim moved to another position
  both('movedim', function(t, src, dst)
    src, dst = dims_of('movedim', t, src)[1], dims_of('movedim', t, dst)[1]
    local order = {}
    for d = 1, t:dim() do if d ~= src then order[#order + 1] = d end end
    table.insert(order, dst, src)
    return t:permute(order)
  end)

  -- tril / triu([diagonal=0]): the lower / upper triangle of the last two dims, 0 elsewhere
  local function triangle(who, t, k, lower)
    if t:dim() < 2 then error(('%s: expected a tensor with at least 2 dimensions, got %d'):format(who, t:dim()), 3) end
    k = k or 0
    local h, w = t:size(t:dim() - 1), t:size(t:dim())
    local rows = torch.arange(h, { device = t.device }):view(h, 1)
    local cols = torch.arange(w, { device = t.device }):view(1, w)
    local offset = cols - rows
    return t:masked_fill(lower and offset:gt(k) or offset:lt(k), 0)
  end
  both('tril', function(t, k) return triangle('tril', t, k, true) end)
  both('triu', function(t, k) return triangle('triu', t, k, false) end)

  -- unbind([dim=1]): the slices along dim, as a table
  both('unbind', function(t, dim)
    dim = dims_of('unbind', t, dim or 1)[1]
    local out = {}
    for i = 1, t:size(dim) do out[i] = t:select(dim, i) end
    return out
  end)

  -- ---------------------------------------------------------------- products
  local function need_dims(who, t, n, name)
    if t:dim() ~= n then error(('%s: %s must be %d-D, got %d-D'):format(who, name, n, t:dim()), 3) end
  end
  both('outer', function(a, b)
    need_dims('outer', a, 1, 'the first vector')
    need_dims('outer', b, 1, 'the second vector')
    return a:unsqueeze(2) * b:unsqueeze(1)
  end)
  both('dot', function(a, b)
    need_dims('dot', a, 1, 'the first vector')
    need_dims('dot', b, 1, 'the second vector')
    return a:matmul(b)
  end)
  both('mv', function(m, v)
    need_dims('mv', m, 2, 'the matrix')
    need_dims('mv', v, 1, 'the vector')
    return m:matmul(v)
  end)
  -- lerp(end, weight): self + weight * (end - self); weight a number or a tensor
  both('lerp', function(a, b, w) return a + (b - a) * w end)

  -- ---------------------------------------------------------------- one_hot, stacking
  -- one_hot(classes [, num_classes]): int64, one row per element; classes count from 1
  torch.one_hot = function(t, n)
    if not torch.is_tensor(t) or t.dtype ~= 'int64' then
      error('one_hot: expected an int64 tensor of class indices (counting from 1)', 2)
    end
    -- without n the largest class sizes the result: read to the host (as PyTorch does); the
    -- range check runs on the device (a bad class reported at the next synchronisation)
    if n == nil then n = t:numel() > 0 and t:max():item() or 0 end
    local ok, err = pcall(t._check_index, t, n,
      ('one_hot: class values must be between 1 and %d (dplua counts classes from 1), got %%d at position %%d'):format(n))
    if not ok then error((tostring(err):gsub('^.-:%d+: ', '')), 2) end
    -- a 1 scattered into zeros at each class (arange would be made on the host and copied)
    local shape = t:size():totable()
    shape[#shape + 1] = n
    local ones = torch.ones(t:size(), { dtype = 'int64', device = t.device }):unsqueeze(-1)
    return torch.zeros(shape, { dtype = 'int64', device = t.device }):scatter_(#shape, t:unsqueeze(-1), ones)
  end

  -- hstack / vstack(list): along the columns (the first dim for 1-D tensors) / rows
  torch.hstack = function(list)
    return torch.cat(list, list[1] and list[1]:dim() == 1 and 1 or 2)
  end
  torch.vstack = function(list)
    local rows = {}
    for i, t in ipairs(list) do rows[i] = t:dim() == 1 and t:view(1, -1) or t end
    return torch.cat(rows, 1)
  end
end

return M
