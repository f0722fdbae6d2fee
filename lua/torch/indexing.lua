-- Indexing ops written with the engine's advanced indexing (t[key], index_put, scatter), so
-- they run on every device and the out-of-place ones are differentiable: masked_select,
-- masked_scatter(_), take, index_fill(_), index_copy(_), index_add(_), scatter_reduce.
-- Dims and indices count from 1, as everywhere.
local define = require('torch.composite').define

local M = {}
local scatter_with_grad

function M.install(torch)
  local Tensor = torch.Tensor
  local function both(name, fn) define(torch, name, fn) end

  local function shape_str(s)
    local parts = {}
    for i = 1, #s do parts[i] = tostring(s[i]) end
    return '[' .. table.concat(parts, ', ') .. ']'
  end

  local function same(a, b)
    if #a ~= #b then return false end
    for i = 1, #a do if a[i] ~= b[i] then return false end end
    return true
  end

  local function need(cond, level, fmt, ...)
    if not cond then error(fmt:format(...), level + 1) end
  end

  -- the key {{}, ..., {}, idx} that puts a 1-D index at dim of t
  local function dim_key(who, t, dim, idx)
    local nd = math.max(t:dim(), 1)
    need(math.type(dim) == 'integer', 3, '%s: dim must be an integer, got %s', who, tostring(dim))
    if dim < 0 then dim = dim + nd + 1 end
    need(dim >= 1 and dim <= nd, 3, '%s: dimension %d is out of range (the tensor has %d dimensions)', who, dim, t:dim())
    need(torch.is_tensor(idx) and idx.dtype == 'int64' and idx:dim() <= 1, 3,
      '%s: the index must be a 1-D int64 tensor, got %s', who,
      torch.is_tensor(idx) and ('a %d-D %s tensor'):format(idx:dim(), idx.dtype) or type(idx))
    local key = {}
    for d = 1, dim - 1 do key[d] = {} end
    key[dim] = idx:dim() == 0 and idx:reshape(1) or idx
    return key
  end

  -- index_copy(_)(dim, index, source), index_fill(_)(dim, index, value),
  -- index_add(_)(dim, index, source [, alpha | {alpha=}])
  local function alpha_of(a)
    if type(a) == 'table' then a = a.alpha end
    return a == nil and 1 or a
  end
  local function scaled(src, alpha)
    if alpha == 1 then return src end
    return src * alpha
  end
  Tensor.index_copy_ = function(t, dim, idx, src)
    return t:index_put_(dim_key('index_copy_', t, dim, idx), src)
  end
  both('index_copy', function(t, dim, idx, src)
    return t:index_put(dim_key('index_copy', t, dim, idx), src)
  end)
  Tensor.index_fill_ = function(t, dim, idx, value)
    return t:index_put_(dim_key('index_fill_', t, dim, idx), value)
  end
  both('index_fill', function(t, dim, idx, value)
    return t:index_put(dim_key('index_fill', t, dim, idx), value)
  end)
  Tensor.index_add_ = function(t, dim, idx, src, alpha)
    return t:index_put_(dim_key('index_add_', t, dim, idx), scaled(src, alpha_of(alpha)), { accumulate = true })
  end
  both('index_add', function(t, dim, idx, src, alpha)
    return t:index_put(dim_key('index_add', t, dim, idx), scaled(src, alpha_of(alpha)), { accumulate = true })
  end)

  -- the shape a and b broadcast to, or an error naming who (level: broadcast's caller's)
  local function broadcast(who, a, b, level)
    local na, nb = #a, #b
    local n, out = math.max(na, nb), {}
    for i = 1, n do
      local x, y = a[i - n + na] or 1, b[i - n + nb] or 1
      need(x == y or x == 1 or y == 1, (level or 2) + 1, '%s: the shapes %s and %s do not broadcast', who, shape_str(a), shape_str(b))
      out[i] = x == 1 and y or x
    end
    return out
  end

  local function check_mask(who, mask)
    need(torch.is_tensor(mask) and mask.dtype == 'bool', 3, '%s: the mask must be a bool tensor, got %s', who,
      torch.is_tensor(mask) and mask.dtype or type(mask))
  end

  -- masked_select(mask): the elements where mask (broadcast with t) is true, as a 1-D tensor
  both('masked_select', function(t, mask)
    check_mask('masked_select', mask)
    local shape = broadcast('masked_select', t:size(), mask:size())
    if not same(t:size(), shape) then t = t:expand(shape) end
    if not same(mask:size(), shape) then mask = mask:expand(shape) end
    if #shape == 0 then t, mask = t:reshape(1), mask:reshape(1) end
    return t[mask]
  end)

  -- masked_scatter(_)(mask, source): the true places of mask (broadcast to t) take source's
  -- elements in order
  local function masked_scatter(who, t, mask, source)
    check_mask(who, mask)
    need(torch.is_tensor(source), 3, '%s: source must be a tensor, got %s', who, type(source))
    local shape = broadcast(who, t:size(), mask:size(), 3)
    need(same(t:size(), shape), 3, '%s: the mask of shape %s does not broadcast to the tensor\'s shape %s',
      who, shape_str(mask:size()), shape_str(t:size()))
    if t:dim() == 0 then mask = mask:reshape(1) end   -- t stays as it is: no view of it
    mask = mask:expand(t:dim() == 0 and { 1 } or t:size())
    local count = mask:sum():item()
    need(source:numel() >= count, 3, '%s: the mask has %d true elements but source has only %d', who, count,
      source:numel())
    return mask, source:reshape(-1):narrow(1, 1, count)
  end
  Tensor.masked_scatter_ = function(t, mask, source)
    local m, values = masked_scatter('masked_scatter_', t, mask, source)
    -- a 0-d t through a copy: a view of t would share its memory, which a write autograd
    -- records refuses
    if t:dim() == 0 then return t:copy_(t:clone():reshape(1):index_put({ m }, values):reshape({})) end
    t:index_put_({ m }, values)
    return t
  end
  both('masked_scatter', function(t, mask, source)
    local m, values = masked_scatter('masked_scatter', t, mask, source)
    if t:dim() == 0 then return t:reshape(1):index_put({ m }, values):reshape({}) end
    return t:index_put({ m }, values)
  end)

  -- take(index): t as if it were 1-D, indexed by index (any shape)
  both('take', function(t, idx)
    need(torch.is_tensor(idx) and idx.dtype == 'int64', 2, 'take: the index must be an int64 tensor, got %s',
      torch.is_tensor(idx) and idx.dtype or type(idx))
    return t:reshape(-1)[idx]
  end)

  -- src cut down to index's shape (scatter reads only that corner)
  local function corner(src, idx)
    for d = 1, idx:dim() do
      if src:size(d) ~= idx:size(d) then src = src:narrow(d, 1, idx:size(d)) end
    end
    return src
  end

  -- scatter_reduce 'prod', 'amax', 'amin' with autograd: the engine's exact values, plus a
  -- term that is zero in value and carries PyTorch's gradient: for amax/amin shared evenly
  -- among the elements equal to the result, for prod the product of the others (zeros
  -- included); self's untouched places pass it on.  At infinite or NaN results that term is
  -- dropped: no gradient there.
  function scatter_with_grad(t, dim, idx, src, reduce, include_self)
    local res = t:detach():_scatter_reduce(dim, idx, src:detach(), reduce, include_self)
    local s = corner(src, idx)
    local td, sd, dt = t:detach(), s:detach(), t.dtype
    local w_self, w_src   -- d res / d self, d res / d src
    if reduce == 'prod' then
      local function nonzero(v) return torch.where(v:eq(0), 1, v) end
      local base = include_self and td or torch.ones_like(t)
      local p = nonzero(base):_scatter_reduce(dim, idx, nonzero(sd), 'prod', true)   -- of the nonzero ones
      local n = base:eq(0):to(dt):scatter_add(dim, idx, sd:eq(0):to(dt))               -- how many zeros
      local function others(v, pv, nv)
        return torch.where(v:eq(0), torch.where(nv:eq(1), pv, 0), torch.where(nv:eq(0), pv / nonzero(v), 0))
      end
      w_self = others(td, p, n)
      w_src = others(sd, p:gather(dim, idx), n:gather(dim, idx))
    else
      local e_src = sd:eq(res:gather(dim, idx))
      local e_self = include_self and td:eq(res) or torch.zeros_like(t, { dtype = 'bool' })
      local count = e_self:to(dt):scatter_add(dim, idx, e_src:to(dt)):clamp(1, nil)
      w_self = e_self:to(dt) / count
      w_src = e_src:to(dt) / count:gather(dim, idx)
    end
    if not include_self then
      local ones = torch.ones(idx:size(), { dtype = dt, device = t.device })
      w_self = torch.zeros_like(t):scatter_add(dim, idx, ones):eq(0):to(dt)
    end
    local function part(v, w) return torch.where(w:ne(0), v, 0) * w end   -- no 0 * inf
    local share = part(t, w_self) + torch.zeros_like(t):scatter_add(dim, idx, part(s, w_src))
    return res + torch.where(res:isfinite(), share - share:detach(), 0)
  end

  -- scatter_reduce(dim, index, src, reduce [, {include_self=true}]): 'sum' and 'mean' (as
  -- scatter_add), 'prod', 'amax' and 'amin' (the engine's), all differentiable
  both('scatter_reduce', function(t, dim, idx, src, reduce, opts)
    local include_self = not (type(opts) == 'table' and opts.include_self == false)
    need(torch.is_tensor(src), 2, 'scatter_reduce: src must be a tensor, got %s', type(src))
    if (reduce == 'prod' or reduce == 'amax' or reduce == 'amin') and torch.is_grad_enabled()
        and (t.requires_grad or src.requires_grad) then
      return scatter_with_grad(t, dim, idx, src, reduce, include_self)
    end
    if reduce ~= 'sum' and reduce ~= 'mean' then
      return t:_scatter_reduce(dim, idx, src, tostring(reduce), include_self)
    end
    local base = include_self and t or t:scatter(dim, idx, 0)
    local sum = base:scatter_add(dim, idx, src)
    if reduce == 'sum' then return sum end
    local ones = torch.ones(idx:size(), { dtype = t.dtype, device = t.device })
    local count = (include_self and torch.ones_like(t) or torch.zeros_like(t)):scatter_add(dim, idx, ones)
    count = count:clamp(1, nil)
    if t.dtype == 'int64' then return (sum / count):floor():long() end   -- PyTorch floors integer means
    return sum / count
  end)
end

return M
