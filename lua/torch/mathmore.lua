-- More tensor math as compositions of the engine's ops (every device, autograd for free):
-- comparisons and elementwise (isclose, heaviside, floor_divide, logaddexp, logaddexp2,
-- copysign, nextafter, deg2rad, rad2deg, clip, float_power, true_divide, addcmul,
-- addcdiv, frexp, ldexp, polygamma (the op table's row), mvlgamma), reductions (count_nonzero, nansum, nanmean, amax, amin, aminmax,
-- std_mean, var_mean, quantile, nanquantile, cov, corrcoef, nanmedian), distances
-- (torch.cosine_similarity, torch.pairwise_distance), shapes (block_diag, cartesian_prod,
-- combinations, diff, kron, vander, dstack, column_stack, row_stack, swapaxes, swapdims,
-- broadcast_to, broadcast_tensors, broadcast_shapes, atleast_1d/2d/3d, meshgrid, renorm)
-- and integrals (trapezoid, trapz, cumulative_trapezoid).  PyTorch 1.13's results, with
-- 1-based dims.
local define = require('torch.composite').define

local M = {}

function M.install(torch)
  local Tensor = torch.Tensor
  local function both(name, fn) define(torch, name, fn) end
  local function is_float(t) return t.dtype == 'float32' or t.dtype == 'float64' end
  local function floated(t) return is_float(t) and t or t:to(torch.get_default_dtype()) end
  local function as_tensor(v, like)
    if torch.is_tensor(v) then return v end
    local dt = like and is_float(like) and like.dtype or (math.type(v) == 'integer' and 'int64' or torch.get_default_dtype())
    return torch.tensor(v, { dtype = dt, device = like and like.device })
  end
  local function scalar(v, t) return torch.full({}, v, { dtype = t.dtype, device = t.device }) end

  local function dim_of(who, t, d)
    local n = math.max(t:dim(), 1)
    if math.type(d) ~= 'integer' or d == 0 or d > n or d < -n then
      error(('%s: dimension %s is out of range for a tensor with %d dimensions (expected 1 to %d, or -%d to -1; dplua counts dims from 1)')
        :format(who, tostring(d), t:dim(), n, n), 3)
    end
    return d < 0 and n + d + 1 or d
  end
  -- dims as a sorted list of positive dims (nil: all of them)
  local function dims_of(who, t, dim)
    local list = {}
    if dim == nil then
      for d = 1, t:dim() do list[d] = d end
    elseif type(dim) == 'table' then
      for i, d in ipairs(dim) do list[i] = dim_of(who, t, d) end
    else
      list[1] = dim_of(who, t, dim)
    end
    table.sort(list)
    return list
  end
  -- a reduction applied one dim at a time (the last first, so the others keep their places)
  local function reduce_dims(t, dims, keepdim, step)
    local r = t
    for i = #dims, 1, -1 do r = step(r, dims[i]) end   -- keepdim inside, squeezed below
    if not keepdim then
      for i = #dims, 1, -1 do r = r:squeeze(dims[i]) end
    end
    return r
  end

  -- ---------------------------------------------------------------- elementwise

  -- isclose(other [, {rtol=1e-5, atol=1e-8, equal_nan=false}]) or (other, rtol, atol, equal_nan)
  both('isclose', function(a, b, rtol, atol, equal_nan)
    if type(rtol) == 'table' then rtol, atol, equal_nan = rtol.rtol, rtol.atol, rtol.equal_nan end
    rtol, atol = rtol or 1e-5, atol or 1e-8
    for name, v in pairs({ rtol = rtol, atol = atol }) do
      if type(v) ~= 'number' or not (v >= 0) then   -- NaN too, as PyTorch
        error(('isclose: %s must be a number greater than or equal to zero, but got %s'):format(name, tostring(v)), 2)
      end
    end
    b = as_tensor(b, a)
    if a.dtype ~= b.dtype then
      error(('isclose: %s and %s tensors cannot be compared (convert one first)'):format(a.dtype, b.dtype), 2)
    end
    local eq = a:eq(b)
    if not is_float(a) then
      if rtol == 0 and atol == 0 then return eq end
      a, b = a:double(), b:double()
    end
    local finite = (a - b):abs():le((b:abs() * rtol + atol))
    local r = torch.where(eq, true, finite * a:isfinite() * b:isfinite())
    if equal_nan then r = torch.where(a:isnan() * b:isnan(), true, r) end
    return r
  end)

  -- heaviside(values): 0 where x < 0, values where x == 0, 1 where x > 0
  both('heaviside', function(x, values)
    values = as_tensor(values, x)
    if x.dtype ~= values.dtype then
      error(('heaviside: input is %s but values is %s; both must have the same dtype'):format(x.dtype, values.dtype), 2)
    end
    local r = torch.where(x:gt(0), scalar(1, x), scalar(0, x))
    r = torch.where(x:eq(0), values, r)
    return torch.where(x:ne(x), x, r)
  end)

  -- floor_divide(other): a / b rounded towards -inf (PyTorch 1.13's rule, float division
  -- corrected by fmod so that it is exact where the quotient is an integer)
  local function floor_divide(a, b)
    if not torch.is_tensor(b) then b = as_tensor(b, a) end
    if not is_float(a) and not is_float(b) then
      if b:eq(0):any():item() then error('floor_divide: ZeroDivisionError (integer division by zero)', 2) end
      local r = a:remainder(b)
      return ((a - r):double() / b:double()):round():to('int64')
    end
    if not is_float(a) then a = a:to(b.dtype) elseif not is_float(b) then b = b:to(a.dtype) end
    local mod = a:fmod(b)
    local div = (a - mod) / b
    div = torch.where(mod:ne(0) * b:lt(0):ne(mod:lt(0)), div - 1, div)
    local fl = div:floor()
    fl = torch.where((div - fl):gt(0.5), fl + 1, fl)
    local plain = a / b
    return torch.where(b:eq(0), plain, torch.where(div:eq(0), (plain * 0):abs() * plain:sign(), fl))
  end
  both('floor_divide', floor_divide)

  -- logaddexp(other): log(exp(a) + exp(b)) without overflow; logaddexp2 in base 2
  local function logaddexp(a, b)
    a, b = floated(a), floated(as_tensor(b, a))
    local m = torch.maximum(a, b)
    local r = m + (-(a - b):abs()):exp():log1p()
    return torch.where(a:eq(b) * a:isinf(), a, r)   -- inf and inf (or -inf and -inf)
  end
  both('logaddexp', logaddexp)
  both('logaddexp2', function(a, b)
    local ln2 = math.log(2)
    return logaddexp(floated(a) * ln2, floated(as_tensor(b, a)) * ln2) / ln2
  end)

  -- copysign(other): |a| with the sign of b (of -0.0 too)
  both('copysign', function(a, b)
    a, b = floated(a), as_tensor(b, a)
    local negative = b:signbit()
    local r = torch.where(negative, -a:abs(), a:abs())
    if b.requires_grad then
      -- b's gradient is zeros, as PyTorch's (not none): r minus a zero that b flows into
      -- (r - 0 keeps r's -0.0, NaN and infinities)
      r = r - torch.where(torch.zeros_like(negative), b, 0)
    end
    return r
  end)

  local MANT = { float32 = 24, float64 = 53 }
  local TINY = { float32 = 2.0 ^ -149, float64 = 2.0 ^ -1074 }
  -- frexp(): mantissa in [0.5, 1) (with x's sign) and exponent (int64), x = m * 2^e
  local function frexp(x)
    if not is_float(x) then error(('frexp: expected a floating point tensor, got %s'):format(x.dtype), 2) end
    local a = x:abs()
    local special = a:eq(0) + a:isinf() + x:isnan()
    local safe = torch.where(special, scalar(1, x), a):double()
    local e = safe:log2():floor() + 1
    local m = safe / (e * math.log(2)):exp()   -- 2^e
    -- log2 may be one off near powers of two
    e = torch.where(m:ge(1), e + 1, torch.where(m:lt(0.5), e - 1, e))
    m = (x:double() / torch.pow(scalar(2, safe), e)):to(x.dtype)
    return torch.where(special, x, m), torch.where(special, 0, e):to('int64')
  end
  both('frexp', frexp)
  -- ldexp(other): x * 2^other
  both('ldexp', function(x, e)
    e = as_tensor(e, x)
    x = floated(x)
    return x * torch.pow(scalar(2, x), e:to(x.dtype))
  end)

  -- nextafter(other): the next representable value after x towards other
  both('nextafter', function(x, y)
    if not is_float(x) then error(('nextafter: expected a floating point tensor, got %s'):format(x.dtype), 2) end
    y = as_tensor(y, x):to(x.dtype)
    local m, e = frexp(x)
    local ulp = torch.pow(scalar(2, x), (e - MANT[x.dtype]):to(x.dtype))
    local tiny = scalar(TINY[x.dtype], x)
    ulp = torch.maximum(ulp, tiny)
    local up = y:gt(x)
    local away = up:eq(x:gt(0))   -- moving away from zero
    -- going towards zero from a power of two crosses into the binade below
    local step = torch.where(away + m:abs():ne(0.5), ulp, torch.maximum(ulp / 2, tiny))
    local r = torch.where(up, x + step, x - step)
    r = torch.where(x:eq(0), torch.where(up, tiny, -tiny), r)
    r = torch.where(x:eq(y), y, r)
    return torch.where(x:isnan() + y:isnan(), scalar(0 / 0, x), r)
  end)

  -- polygamma(n, t) (PyTorch's order; t:polygamma(n)): the n-th derivative of digamma,
  -- an op table row as lgamma and digamma
  local C = require 'torch._C'
  function torch.polygamma(n, t)
    if not torch.is_tensor(t) then error(('torch.polygamma: expected a tensor as the second argument, got %s'):format(type(t)), 2) end
    if math.type(n) ~= 'integer' or n < 0 then
      error(('polygamma: n must be a non-negative integer, got %s'):format(tostring(n)), 2)
    end
    return C._polygamma(t, n)
  end
  Tensor.polygamma = function(t, n) return torch.polygamma(n, t) end
  -- mvlgamma(p): the multivariate log-gamma, sum over i < p of lgamma(x - i/2) plus
  -- p (p - 1) / 4 log(pi); every element must be above (p - 1) / 2
  both('mvlgamma', function(t, p)
    if type(p) == 'table' then p = p.p end
    if math.type(p) ~= 'integer' or p < 1 then error(('mvlgamma: p must be a positive integer, got %s'):format(tostring(p)), 2) end
    t = floated(t)
    if t:le((p - 1) / 2):any():item() then
      error(('mvlgamma: all elements must be greater than (p-1)/2 = %s'):format(tostring((p - 1) / 2)), 2)
    end
    local r = t:lgamma()
    for i = 1, p - 1 do r = r + (t - i / 2):lgamma() end
    return r + p * (p - 1) / 4 * math.log(math.pi)
  end)

  both('deg2rad', function(t) return floated(t) * (math.pi / 180) end)
  both('rad2deg', function(t) return floated(t) * (180 / math.pi) end)
  both('clip', function(t, ...) return t:clamp(...) end)
  Tensor.clip_ = function(t, ...) return t:clamp_(...) end
  both('true_divide', function(a, b) return a:div(b) end)
  -- float_power(exponent): in float64, as PyTorch
  both('float_power', function(a, b)
    if torch.is_tensor(b) then b = b:double() end
    return a:double():pow(b)
  end)
  -- addcmul(t1, t2 [, value=1]) = self + value * t1 * t2; addcdiv with t1 / t2
  local function value_of(v) if type(v) == 'table' then return v.value or 1 end return v or 1 end
  both('addcmul', function(t, t1, t2, v)
    v = value_of(v)
    local function int(x) return torch.is_tensor(x) and not torch.FLOAT_DTYPES[x.dtype] end
    if int(t) and int(t1) and int(t2) then
      if t.dtype == 'bool' and t1.dtype == 'bool' and t2.dtype == 'bool' then
        error('addcmul: not implemented for bool tensors', 2)
      end
      v = v < 0 and math.ceil(v) or math.floor(v)   -- integers stay integers: value toward zero, as PyTorch
    end
    return t + t1 * t2 * v
  end)
  both('addcdiv', function(t, t1, t2, v)
    if not is_float(t1) and not is_float(t2) then
      error('addcdiv: integer division with addcdiv is no longer supported; use floor_divide or true_divide', 2)
    end
    return t + t1 / t2 * value_of(v)
  end)
  Tensor.addcmul_ = function(t, ...) return t:copy_(t:addcmul(...)) end
  Tensor.addcdiv_ = function(t, ...) return t:copy_(t:addcdiv(...)) end

  -- ---------------------------------------------------------------- reductions

  local function reduction_args(dim, keepdim)
    if type(dim) == 'table' and (dim.dim ~= nil or dim.keepdim ~= nil) then return dim.dim, dim.keepdim or false end
    return dim, keepdim or false
  end

  -- count_nonzero([dim]): int64 count of nonzero elements
  both('count_nonzero', function(t, dim)
    if type(dim) == 'table' and dim.dim ~= nil then dim = dim.dim end
    local dims = dims_of('count_nonzero', t, dim)
    local nz = t:ne(0):to('int64')
    if dim == nil then return nz:sum() end
    return reduce_dims(nz, dims, false, function(r, d) return r:sum(d, true) end)
  end)

  -- nansum / nanmean([dim [, keepdim]]): NaN treated as 0 / left out
  local function nansum(t, dim, keepdim)
    dim, keepdim = reduction_args(dim, keepdim)
    local z = is_float(t) and torch.where(t:isnan(), scalar(0, t), t) or t
    if dim == nil then
      local s = z:sum()
      return keepdim and s:reshape(t:dim() > 0 and torch.ones(t:dim()):long():tolist() or {}) or s
    end
    return reduce_dims(z, dims_of('nansum', t, dim), keepdim, function(r, d) return r:sum(d, true) end)
  end
  both('nansum', nansum)
  both('nanmean', function(t, dim, keepdim)
    dim, keepdim = reduction_args(dim, keepdim)
    if not is_float(t) then error(('nanmean: expected a floating point tensor, got %s'):format(t.dtype), 2) end
    local n = nansum(t:eq(t):to(t.dtype), dim, keepdim)
    return nansum(t, dim, keepdim) / n
  end)

  -- amax / amin([dim [, keepdim]]): the largest / smallest values over dims (all by
  -- default); PyTorch splits the gradient evenly between equal extremes, this gives it to one
  local function extreme(name, op)
    return function(t, dim, keepdim)
      dim, keepdim = reduction_args(dim, keepdim)
      if t:numel() == 0 then error(('%s: expected a non-empty tensor (the reduction has no identity)'):format(name), 2) end
      if dim == nil or (type(dim) == 'table' and #dim == 0) then
        local r = t[op](t)
        if keepdim then
          local ones = {}
          for d = 1, t:dim() do ones[d] = 1 end
          r = r:reshape(ones)
        end
        return r
      end
      return reduce_dims(t, dims_of(name, t, dim), keepdim, function(r, d)
        return (r[op](r, d, true))
      end)
    end
  end
  local amax, amin = extreme('amax', 'max'), extreme('amin', 'min')
  both('amax', amax)
  both('amin', amin)
  -- aminmax([{dim=, keepdim=}]): min, max
  both('aminmax', function(t, opts)
    local dim, keepdim
    if type(opts) == 'table' then dim, keepdim = opts.dim, opts.keepdim else dim = opts end
    return amin(t, dim, keepdim), amax(t, dim, keepdim)
  end)

  -- std_mean / var_mean(...): var's (or std's) arguments; returns the spread and the mean
  local function with_mean(name)
    return function(t, dim, a, b)
      local spread = t[name](t, dim, a, b)
      local d, keepdim = dim, false
      if type(dim) == 'table' then d, keepdim = nil, dim.keepdim or false end
      if type(a) == 'table' then keepdim = a.keepdim or false elseif b ~= nil then keepdim = b end
      local mean = d and t:mean(d, keepdim) or t:mean()
      return spread, mean
    end
  end
  both('std_mean', with_mean('std'))
  both('var_mean', with_mean('var'))

  -- quantile(q [, dim [, keepdim]] [, {interpolation='linear'}]): q a number or a 1-D
  -- tensor in [0, 1] (its values become the first dim of the result); nanquantile leaves
  -- the NaNs out (quantile gives NaN where a NaN is present)
  local INTERP = { linear = true, lower = true, higher = true, midpoint = true, nearest = true }
  local function quantile(name, ignore_nan)
    return function(t, q, dim, keepdim, opts)
      if type(dim) == 'table' then opts, dim, keepdim = dim, dim.dim, dim.keepdim
      elseif type(keepdim) == 'table' then opts, keepdim = keepdim, keepdim.keepdim end
      local interp = opts and opts.interpolation or 'linear'
      if not INTERP[interp] then
        error(("%s: interpolation must be one of linear, lower, higher, midpoint or nearest, got '%s'"):format(name, tostring(interp)), 2)
      end
      if not is_float(t) then error(('%s: expected a floating point input, got %s'):format(name, t.dtype), 2) end
      if t:numel() == 0 then error(('%s: expected a non-empty input tensor'):format(name), 2) end
      local scalar_q = not torch.is_tensor(q)
      local qt = scalar_q and torch.tensor({ q }, { dtype = t.dtype, device = t.device }) or q:to(t.dtype):reshape(-1)
      if not scalar_q and q:dim() > 1 then error(('%s: q must be a number or a 1-D tensor, got %d-D'):format(name, q:dim()), 2) end
      local qv = qt:tolist()
      for _, v in ipairs(qv) do
        if not (v >= 0 and v <= 1) then error(('%s: q values must be in the range [0, 1], got %s'):format(name, tostring(v)), 2) end
      end
      local x, d = t, dim
      if d == nil then x, d = t:reshape(-1), 1 else d = dim_of(name, t, d) end
      if x:dim() == 0 then x, d = x:reshape(1), 1 end
      local sorted = x:sort(d)   -- NaNs last
      local n = x:size(d)
      local valid = x:eq(x):to('int64'):sum(d, true)   -- per row: the values that are not NaN
      local nq = #qv
      -- positions (0-based, float) per q and row: q * (count - 1)
      local count = ignore_nan and valid or torch.full(valid:size():totable(), n, { dtype = 'int64', device = t.device })
      local last = (count - 1):clamp(0):to(t.dtype)
      local outs = {}
      for k = 1, nq do
        local pos = last * qv[k]
        local lo, hi = pos:floor(), pos:ceil()
        if interp == 'lower' then hi = lo
        elseif interp == 'higher' then lo = hi
        elseif interp == 'nearest' then lo = pos:round(); hi = lo end
        local vlo = sorted:gather(d, lo:to('int64') + 1)
        local vhi = sorted:gather(d, hi:to('int64') + 1)
        local r
        if interp == 'midpoint' then r = vlo + (vhi - vlo) * 0.5
        else r = vlo + (vhi - vlo) * (pos - lo) end
        local bad = ignore_nan and count:eq(0) or valid:ne(n)
        r = torch.where(bad, scalar(0 / 0, r), r)
        if not keepdim or dim == nil or t:dim() == 0 then r = r:squeeze(d) end   -- a 0-dim input keeps 0 dims
        if keepdim and dim == nil then
          local ones = {}
          for i = 1, t:dim() do ones[i] = 1 end
          r = r:reshape(ones)
        end
        outs[k] = r
      end
      if scalar_q then return outs[1] end
      return torch.stack(outs, 1)
    end
  end
  both('quantile', quantile('quantile', false))
  both('nanquantile', quantile('nanquantile', true))

  -- cov([{correction=1, fweights=, aweights=}]): the covariance of the rows (variables)
  -- over the columns (observations)
  -- cov's fweights (int64) and aweights (floating): 1-D or 0-D, one per observation (n),
  -- none negative, as PyTorch checks them
  local function check_cov_weights(opts, n)
    for _, name in ipairs({ 'fweights', 'aweights' }) do
      local w = opts[name]
      if w ~= nil then
        if not torch.is_tensor(w) then error(('cov: %s must be a tensor, got %s'):format(name, type(w)), 3) end
        if w:dim() > 1 then
          error(('cov: expected %s to have one or fewer dimensions but got %s with %d dimensions'):format(name, name, w:dim()), 3)
        end
        local float = torch.FLOAT_DTYPES[w.dtype] == true
        if name == 'fweights' and (float or w.dtype == 'bool') then
          error(('cov: expected fweights to have integral dtype but got fweights with %s dtype'):format(w.dtype), 3)
        elseif name == 'aweights' and not float then
          error(('cov: expected aweights to have floating point dtype but got aweights with %s dtype'):format(w.dtype), 3)
        end
        if w:numel() ~= n then
          error(('cov: expected %s to have the same numel as there are observations in the input but got %d != %d')
            :format(name, w:numel(), n), 3)
        end
        if n > 0 and w:lt(0):any():item() then error(('cov: %s cannot be negative'):format(name), 3) end
      end
    end
  end

  local function cov(t, opts)
    opts = opts or {}
    if t:dim() <= 2 then check_cov_weights(opts, t:dim() < 2 and t:numel() or t:size(2)) end
    if t:dim() > 2 then error(('cov: expected a tensor with at most 2 dimensions, got %d'):format(t:dim()), 2) end
    local x = floated(t:dim() < 2 and t:reshape(1, -1) or t)
    local n = x:size(2)
    local w
    if opts.fweights ~= nil then w = opts.fweights:to(x.dtype) end
    if opts.aweights ~= nil then w = w and w * opts.aweights:to(x.dtype) or opts.aweights:to(x.dtype) end
    local correction = opts.correction or 1
    local mean, norm
    if w then
      local wsum = w:sum()
      mean = (x * w):sum(2, true) / wsum
      if correction == 0 then norm = wsum
      elseif opts.aweights == nil then norm = wsum - correction
      else norm = wsum - (w * opts.aweights:to(x.dtype)):sum() / wsum * correction end
    else
      mean = x:mean(2, true)
      norm = torch.full({}, n - correction, { dtype = x.dtype, device = x.device })
    end
    norm = norm:clamp(0)
    local dev = x - mean
    local c = (w and dev * w or dev):matmul(dev:t()) / norm
    -- one variable (a 1-D input, or one row) gives a 0-dim result, as PyTorch's squeeze
    return x:size(1) == 1 and c:reshape({}) or c
  end
  both('cov', cov)
  both('corrcoef', function(t)
    local c = cov(t)
    if c:dim() == 0 then return c / c end
    local d = c:diagonal():sqrt()
    c = c / d:unsqueeze(2) / d:unsqueeze(1)
    return c:clamp(-1, 1)
  end)

  -- nanmedian([dim [, keepdim]]) (also {dim=, keepdim=}): the lower median of the values
  -- that are not NaN (NaN where all are); with dim, the values and their 1-based indices
  -- (among equal values, the first in the stable sort).  Where every value is NaN the
  -- index is the first one's (PyTorch 1.13's is wherever its partial sort left a NaN).
  local function nanmedian(t, dim, keepdim)
    if type(dim) == 'table' then dim, keepdim = dim.dim, dim.keepdim end
    if type(keepdim) == 'table' then keepdim = keepdim.keepdim end
    local whole = dim == nil
    local x = whole and t:reshape(-1) or (t:dim() == 0 and t:reshape(1) or t)
    local d = whole and 1 or dim_of('nanmedian', t, dim)
    if x:size(d) == 0 then
      error(('nanmedian: expected a non-empty dimension %d, got shape [%s]')
        :format(d, table.concat(t:size():totable(), ', ')), 2)
    end
    local sorted, order = x:sort(d, { stable = true })
    local count = x:eq(x):long():sum(d, true)
    local k = ((count - 1):clamp(0):double() / 2):floor():long() + 1
    local value, index = sorted:gather(d, k), order:gather(d, k)
    if whole then return value:reshape({}) end
    if t:dim() == 0 then return value:reshape({}), index:reshape({}) end
    if not keepdim then value, index = value:squeeze(d), index:squeeze(d) end
    return value, index
  end
  both('nanmedian', nanmedian)

  -- msort(t): t sorted along its first dim, ascending (PyTorch's torch.sort(t, 0)[0]); a
  -- 0-dim tensor is itself
  both('msort', function(t)
    if not torch.is_tensor(t) then error(('msort: expected a tensor, got %s'):format(type(t)), 2) end
    return (torch.sort(t, 1))
  end)

  -- ---------------------------------------------------------------- distances

  -- cosine_similarity(x1, x2 [, dim=2 [, eps=1e-8]]) (PyTorch's dim=1): sum(x1 x2) /
  -- sqrt(max(|x1|^2 |x2|^2, eps^2)) along dim, broadcasting x1 and x2
  function torch.cosine_similarity(x1, x2, dim, eps)
    if type(dim) == 'table' then dim, eps = dim.dim, dim.eps end
    x1, x2 = torch.broadcast_tensors(x1, x2)
    dim = dim_of('cosine_similarity', x1, dim or 2)
    eps = eps or 1e-8
    local w12 = (x1 * x2):sum(dim)
    local w1, w2 = (x1 * x1):sum(dim), (x2 * x2):sum(dim)
    return w12 / (w1 * w2):clamp(eps * eps):sqrt()
  end
  -- pairwise_distance(x1, x2 [, p=2 [, eps=1e-6 [, keepdim=false]]]): the p-norm of
  -- x1 - x2 + eps along the last dim
  function torch.pairwise_distance(x1, x2, p, eps, keepdim)
    if type(p) == 'table' then p, eps, keepdim = p.p, p.eps, p.keepdim end
    local d = x1 - x2 + (eps or 1e-6)
    local dim = math.max(d:dim(), 1)
    if d:dim() == 0 then d = d:reshape(1) end
    return d:norm(p or 2, dim, keepdim or false)
  end

  -- ---------------------------------------------------------------- shapes

  -- broadcast_shapes(s1, s2, ...): the broadcast shape as a torch.Size
  function torch.broadcast_shapes(...)
    local shapes, out, n = table.pack(...), {}, 0
    for i = 1, shapes.n do
      local s = shapes[i]
      if type(s) == 'number' then s = { s } end
      if torch.is_tensor(s) then s = s:size() end
      shapes[i] = type(s) == 'table' and (s.totable and s:totable() or s) or error(('broadcast_shapes: shape %d is a %s'):format(i, type(s)), 2)
      n = math.max(n, #shapes[i])
    end
    for k = 1, n do out[k] = 1 end
    for i = 1, shapes.n do
      local s = shapes[i]
      for k = 1, #s do
        local at, v = n - #s + k, s[k]
        if v ~= 1 then
          if out[at] ~= 1 and out[at] ~= v then
            error(('broadcast_shapes: shape mismatch: dimension %d has sizes %d and %d, which cannot broadcast'):format(at, out[at], v), 2)
          end
          out[at] = v
        end
      end
    end
    return torch.Size(out)
  end
  both('broadcast_to', function(t, shape)
    if torch.is_tensor(shape) then shape = shape:tolist() end
    return t:expand(type(shape) == 'table' and (shape.totable and shape:totable() or shape) or { shape })
  end)
  -- broadcast_tensors(t1, t2, ...) or ({t1, t2, ...}): each expanded to the common shape
  function torch.broadcast_tensors(...)
    local list = table.pack(...)
    if list.n == 1 and type(list[1]) == 'table' and not torch.is_tensor(list[1]) then list = list[1]; list.n = #list end
    local shapes = {}
    for i = 1, list.n do
      if not torch.is_tensor(list[i]) then error(('broadcast_tensors: argument %d is a %s, not a tensor'):format(i, type(list[i])), 2) end
      shapes[i] = list[i]:size():totable()
    end
    local ok, s = pcall(torch.broadcast_shapes, table.unpack(shapes, 1, list.n))
    if not ok then error(tostring(s):gsub('broadcast_shapes', 'broadcast_tensors'), 2) end
    local out = {}
    for i = 1, list.n do out[i] = list[i]:expand(s:totable()) end
    return table.unpack(out, 1, list.n)
  end

  local function swap(t, a, b) return t:transpose(a, b) end
  both('swapaxes', swap)
  both('swapdims', swap)

  local function atleast(n)
    return function(...)
      local args = table.pack(...)
      local function one(t)
        if not torch.is_tensor(t) then error(('atleast_%dd: expected tensors, got %s'):format(n, type(t)), 3) end
        if t:dim() >= n then return t end
        if t:dim() == 0 then t = t:reshape(1) end
        if n >= 2 and t:dim() == 1 then t = t:unsqueeze(1) end
        if n == 3 and t:dim() == 2 then t = t:unsqueeze(3) end
        return t
      end
      if args.n == 1 and type(args[1]) == 'table' and not torch.is_tensor(args[1]) then
        local r = {}
        for i, t in ipairs(args[1]) do r[i] = one(t) end
        return r
      end
      local r = {}
      for i = 1, args.n do r[i] = one(args[i]) end
      return table.unpack(r, 1, args.n)
    end
  end
  for n = 1, 3 do
    local f = atleast(n)
    torch['atleast_' .. n .. 'd'] = f
  end

  local function list_of(who, list)
    if type(list) ~= 'table' or torch.is_tensor(list) or #list == 0 then
      error(('%s: expected a non-empty list of tensors'):format(who), 3)
    end
    return list
  end
  -- dstack: along the third dim (1-D and 2-D tensors made 3-D first)
  function torch.dstack(list)
    local r = torch.atleast_3d(list_of('dstack', list))
    return torch.cat(r, 3)
  end
  function torch.column_stack(list)
    list = list_of('column_stack', list)
    local cols = {}
    for i, t in ipairs(list) do cols[i] = t:dim() <= 1 and t:reshape(-1, 1) or t end
    return torch.cat(cols, 2)
  end
  torch.row_stack = function(list) return torch.vstack(list) end

  -- meshgrid(t1, t2, ... [, {indexing='ij'}]) or ({t1, t2, ...} [, opts]): 'ij' (matrix,
  -- PyTorch's default) or 'xy' (Cartesian: the grid of the first two inputs swapped, as
  -- PyTorch builds it)
  function torch.meshgrid(...)
    local args = table.pack(...)
    local opts
    if args.n > 0 and type(args[args.n]) == 'table' and not torch.is_tensor(args[args.n]) and args[args.n].indexing then
      opts = args[args.n]; args.n = args.n - 1
    end
    local list = args
    if args.n == 1 and type(args[1]) == 'table' and not torch.is_tensor(args[1]) then list = args[1]; list.n = #list end
    local indexing = opts and opts.indexing or 'ij'
    if indexing ~= 'ij' and indexing ~= 'xy' then
      error(("meshgrid: indexing must be 'ij' or 'xy', got '%s'"):format(tostring(indexing)), 2)
    end
    local ts = {}
    for i = 1, list.n do
      local t = list[i]
      if not torch.is_tensor(t) or t:dim() > 1 then error(('meshgrid: argument %d must be a 0-D or 1-D tensor'):format(i), 2) end
      ts[i] = t:reshape(-1)
    end
    local swap_xy = indexing == 'xy' and #ts >= 2
    if swap_xy then ts[1], ts[2] = ts[2], ts[1] end
    local shape = {}
    for i, t in ipairs(ts) do shape[i] = t:numel() end
    local out = {}
    for i, t in ipairs(ts) do
      local view = {}
      for k = 1, #ts do view[k] = k == i and -1 or 1 end
      out[i] = t:reshape(view):expand(shape)
    end
    if swap_xy then out[1], out[2] = out[2], out[1] end
    return table.unpack(out, 1, #out)
  end

  -- cartesian_prod(t1, t2, ...): the rows of every combination (one tensor: itself)
  function torch.cartesian_prod(...)
    local list = table.pack(...)
    if list.n == 1 then return list[1] end
    local grids = { torch.meshgrid(table.unpack(list, 1, list.n)) }
    for i, g in ipairs(grids) do grids[i] = g:reshape(-1) end
    return torch.stack(grids, 2)
  end

  -- combinations(t [, r=2 [, with_replacement=false]]): the r-element combinations of a 1-D
  -- tensor's elements as rows, in lexicographic order of positions
  both('combinations', function(t, r, with_replacement)
    if type(r) == 'table' then r, with_replacement = r.r, r.with_replacement end
    r = r or 2
    if t:dim() ~= 1 then error(('combinations: expected a 1-D tensor, got %d-D'):format(t:dim()), 2) end
    if math.type(r) ~= 'integer' or r < 0 then error(('combinations: r must be a non-negative integer, got %s'):format(tostring(r)), 2) end
    local n, rows = t:size(1), {}
    local cur = {}
    local function walk(k, from)
      if k > r then rows[#rows + 1] = { table.unpack(cur) }; return end
      for i = from, n do
        cur[k] = i
        walk(k + 1, with_replacement and i or i + 1)
      end
    end
    if r > 0 then walk(1, 1) end
    if #rows == 0 then
      return torch.zeros(r == 0 and { 0 } or { 0, r }, { dtype = t.dtype, device = t.device })
    end
    local cols = {}
    for k = 1, r do
      local idx = {}
      for i, row in ipairs(rows) do idx[i] = row[k] end
      cols[k] = t:index_select(1, torch.tensor(idx, { dtype = 'int64', device = t.device }))
    end
    return torch.stack(cols, 2)
  end)

  -- block_diag(t1, t2, ...): the tensors (0-D, 1-D as a row, or 2-D) on a block diagonal
  function torch.block_diag(...)
    local list = table.pack(...)
    local mats, rows, cols, dtype, device = {}, 0, 0, nil, nil
    for i = 1, list.n do
      local t = list[i]
      if not torch.is_tensor(t) or t:dim() > 2 then error(('block_diag: argument %d must be a tensor with at most 2 dimensions'):format(i), 2) end
      if t:dim() == 0 then t = t:reshape(1, 1) elseif t:dim() == 1 then t = t:reshape(1, -1) end
      mats[i] = t
      rows, cols = rows + t:size(1), cols + t:size(2)
      if dtype == nil or dtype == 'bool' or (dtype == 'int64' and is_float(t)) or (dtype == 'float32' and t.dtype == 'float64') then dtype = t.dtype end
      device = device or t.device
    end
    if #mats == 0 then return torch.zeros({ 1, 0 }) end
    local bands, at = {}, 0
    for i, t in ipairs(mats) do
      local h, w = t:size(1), t:size(2)
      local parts = {}
      if at > 0 then parts[#parts + 1] = torch.zeros({ h, at }, { dtype = dtype, device = device }) end
      parts[#parts + 1] = t:to(dtype)
      if cols - at - w > 0 then parts[#parts + 1] = torch.zeros({ h, cols - at - w }, { dtype = dtype, device = device }) end
      bands[i] = #parts == 1 and parts[1] or torch.cat(parts, 2)
      at = at + w
    end
    return torch.cat(bands, 1)
  end

  -- diff([n=1 [, dim=-1 [, prepend [, append]]]]): the n-th forward difference along dim
  both('diff', function(t, n, dim, prepend, append)
    if type(n) == 'table' then n, dim, prepend, append = n.n, n.dim, n.prepend, n.append end
    n = n or 1
    if t:dim() == 0 then error('diff: expected at least a 1-dimensional tensor', 2) end
    dim = dim_of('diff', t, dim or -1)
    local parts = {}
    if prepend ~= nil then parts[#parts + 1] = prepend end
    parts[#parts + 1] = t
    if append ~= nil then parts[#parts + 1] = append end
    local x = #parts > 1 and torch.cat(parts, dim) or t
    for _ = 1, n do
      local len = x:size(dim)
      if len == 0 then break end
      local a, b = x:narrow(dim, 2, len - 1), x:narrow(dim, 1, len - 1)
      x = x.dtype == 'bool' and a:ne(b) or a - b
    end
    return rawequal(x, t) and t:clone() or x   -- n = 0: a new tensor, as PyTorch
  end)

  -- kron(other): the Kronecker product
  both('kron', function(a, b)
    local nd = math.max(a:dim(), b:dim())
    local sa, sb = a:size():totable(), b:size():totable()
    while #sa < nd do table.insert(sa, 1, 1) end
    while #sb < nd do table.insert(sb, 1, 1) end
    local va, vb, out = {}, {}, {}
    for k = 1, nd do
      va[2 * k - 1], va[2 * k] = sa[k], 1
      vb[2 * k - 1], vb[2 * k] = 1, sb[k]
      out[k] = sa[k] * sb[k]
    end
    return (a:reshape(va) * b:reshape(vb)):reshape(out)
  end)

  -- vander(x [, N=#x [, increasing=false]]): columns x^(N-1) ... x^0 (or increasing)
  function torch.vander(x, N, increasing)
    if type(N) == 'table' then N, increasing = N.N, N.increasing end
    if not torch.is_tensor(x) or x:dim() ~= 1 then error('vander: x must be a 1-D tensor', 2) end
    N = N or x:size(1)
    if math.type(N) ~= 'integer' or N < 0 then error(('vander: N must be a non-negative integer, got %s'):format(tostring(N)), 2) end
    if N == 0 then return torch.zeros({ x:size(1), 0 }, { dtype = x.dtype == 'bool' and 'int64' or x.dtype, device = x.device }) end
    local xx = x.dtype == 'bool' and x:long() or x
    local cols = { torch.ones_like(xx) }
    for k = 2, N do cols[k] = cols[k - 1] * xx end
    if not increasing then
      local r = {}
      for k = 1, N do r[k] = cols[N - k + 1] end
      cols = r
    end
    return torch.stack(cols, 2)
  end

  -- renorm(p, dim, maxnorm): each slice along dim with p-norm above maxnorm scaled to it
  both('renorm', function(t, p, dim, maxnorm)
    if not is_float(t) then error(('renorm: expected a floating point tensor, got %s'):format(t.dtype), 2) end
    if type(p) ~= 'number' or p <= 0 then error(('renorm: p must be a positive number, got %s'):format(tostring(p)), 2) end
    if type(maxnorm) ~= 'number' or maxnorm < 0 then error(('renorm: maxnorm must be non-negative, got %s'):format(tostring(maxnorm)), 2) end
    if t:dim() < 2 then error(('renorm: input needs at least 2 dimensions, got %d dimensions'):format(t:dim()), 2) end
    dim = dim_of('renorm', t, dim)
    local others = {}
    for d = 1, t:dim() do if d ~= dim then others[#others + 1] = d end end
    local norms = t
    if p == math.huge then norms = amax(t:abs(), others, true)
    else norms = reduce_dims(t:abs() ^ p, others, true, function(r, d) return r:sum(d, true) end) ^ (1 / p) end
    local factor = torch.where(norms:gt(maxnorm), maxnorm / (norms + 1e-7), scalar(1, t))
    return t * factor   -- differentiated through the norms too, as PyTorch's renorm
  end)

  -- ---------------------------------------------------------------- integrals

  -- trapezoid(y [, x] [, {dx=1, dim=-1}]): the trapezoid rule along dim, with sample
  -- points x (a tensor) or spacing dx; trapz is the old name
  local function trapezoid_args(y, x, opts)
    if type(x) == 'table' and not torch.is_tensor(x) then opts, x = x, nil end
    if type(x) == 'number' then opts, x = { dx = x, dim = opts }, nil end
    opts = opts or {}
    local dim = dim_of('trapezoid', y, opts.dim or -1)
    return x, opts.dx or 1, dim
  end
  local function spacing(y, x, dx, dim)
    if x == nil then return dx end
    local d = x:diff(1, x:dim() == 1 and 1 or dim)
    if x:dim() == 1 then
      local view = {}
      for k = 1, y:dim() do view[k] = k == dim and -1 or 1 end
      d = d:reshape(view)
    end
    return d
  end
  local function trapezoid(y, x, opts)
    local xt, dx, dim = trapezoid_args(y, x, opts)
    local n = y:size(dim)
    if n == 0 then return floated(y):sum(dim) end
    local mid = floated(y:narrow(dim, 2, n - 1) + y:narrow(dim, 1, n - 1)) / 2
    return (mid * spacing(y, xt, dx, dim)):sum(dim)
  end
  both('trapezoid', trapezoid)
  both('trapz', trapezoid)
  both('cumulative_trapezoid', function(y, x, opts)
    local xt, dx, dim = trapezoid_args(y, x, opts)
    local n = y:size(dim)
    if n <= 1 then return floated(y):narrow(dim, 1, 0) end
    local mid = floated(y:narrow(dim, 2, n - 1) + y:narrow(dim, 1, n - 1)) / 2
    return (mid * spacing(y, xt, dx, dim)):cumsum(dim)
  end)
end

return M
