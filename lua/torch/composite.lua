-- Ops written as compositions of the engine's ops, so they run on every device and autograd
-- differentiates them with no code of their own: isnan, isinf, isfinite, any, all,
-- logsumexp, var, std, norm, dist.  Each is torch.NAME(t, ...) and t:NAME(...), with
-- PyTorch 1.13's results (1-based dims, as everywhere).
local M = {}

function M.install(torch)
  local Tensor = torch.Tensor
  local function both(name, fn)
    torch[name] = function(t, ...)
      if not torch.is_tensor(t) then
        error(('torch.%s: expected a tensor, got %s'):format(name, type(t)), 2)
      end
      return fn(t, ...)
    end
    Tensor[name] = fn
  end
  local function is_float(t) return t.dtype == 'float32' or t.dtype == 'float64' end

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
    if not is_float(t) then t = t:float() end
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
end

return M
