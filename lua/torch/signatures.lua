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
                          'floor_divide', 'cat', 'stack', 'squeeze', 'unsqueeze', 'flatten', 'transpose',
                          'narrow', 'select', 'split', 'chunk', 'tensor_split', 'unbind', 'tril', 'triu',
                          'flip', 'roll', 'diagonal', 'repeat_interleave', 'index_select', 'gather',
                          'scatter', 'scatter_add', 'scatter_reduce', 'allclose', 'cross', 'index_put_',
                          'index_put', 'backward', 'nonzero', 'diag_embed' } do
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
    if math.type(dims) == 'integer' then return op(t, dims, keepdim) end
    if dims == nil or (type(dims) == 'table' and #dims == 0) then
      local r = op(t)
      if keepdim and t:dim() > 0 then r = r:reshape(kept_shape(t)) end
      return r
    end
    local list = dims_list(name, t, dims)
    if #list == 1 then return op(t, list[1], keepdim) end
    if #list == t:dim() then   -- every dim: the whole tensor, flattened
      local r = op(t:reshape(-1), 1, false)
      if keepdim then r = r:reshape(kept_shape(t)) end
      return r
    end
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

  -- the engine's reductions along one dim, made once
  local one = {}
  for _, name in ipairs { 'sum', 'mean', 'nansum', 'nanmean', 'prod', 'any', 'all', 'logsumexp' } do
    one[name] = engine(base[name])
  end
  one.count_nonzero = engine(function(x, d) return base.count_nonzero(x, d) end)

  local REDUCE = 'Tensor self, dims? dim=None, bool keepdim=False'
  local rows = {}
  -- module: nil for torch.NAME (and Tensor:NAME), 'F' for nn.functional.NAME
  local function row(name, lines, impl, module)
    rows[#rows + 1] = { name = name, lines = type(lines) == 'table' and lines or { lines }, impl = impl, module = module }
  end

  -- ---------------------------------------------------------------- reductions
  row('sum', ('sum(%s, *, dtype? dtype=None)'):format(REDUCE), function(t, dim, keepdim, dtype)
    return over_dims('sum', one.sum, cast(t, dtype), dim, keepdim)
  end)
  row('mean', ('mean(%s, *, dtype? dtype=None)'):format(REDUCE), function(t, dim, keepdim, dtype)
    t = cast(t, dtype)
    if not is_float(t) then
      err('mean: could not infer the result dtype: the input must be floating point (or give {dtype = ...}), got %s', t.dtype)
    end
    return over_dims('mean', one.mean, t, dim, keepdim)
  end)
  row('nansum', ('nansum(%s, *, dtype? dtype=None)'):format(REDUCE), function(t, dim, keepdim, dtype)
    return over_dims('nansum', one.nansum, cast(t, dtype), dim, keepdim)
  end)
  row('nanmean', ('nanmean(%s, *, dtype? dtype=None)'):format(REDUCE), function(t, dim, keepdim, dtype)
    return over_dims('nanmean', one.nanmean, cast(t, dtype), dim, keepdim)
  end)
  row('prod', 'prod(Tensor self, dim? dim=None, bool keepdim=False, *, dtype? dtype=None)', function(t, dim, keepdim, dtype)
    return over_dims('prod', one.prod, cast(t, dtype), dim, keepdim)
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
  -- argmax/argmin: 1-based positions along dim, or in the flattened tensor
  for _, name in ipairs { 'argmax', 'argmin' } do
    row(name, ('%s(Tensor self, dim? dim=None, bool keepdim=False)'):format(name), function(t, dim, keepdim)
      if dim ~= nil then return base[name](t, dim, keepdim) end
      local r = base[name](t)
      if keepdim and t:dim() > 0 then r = r:reshape(kept_shape(t)) end
      return r
    end)
  end
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
    return over_dims('any', one.any, t, dim, keepdim)
  end)
  row('all', ('all(%s)'):format(REDUCE), function(t, dim, keepdim)
    return over_dims('all', one.all, t, dim, keepdim)
  end)
  row('logsumexp', 'logsumexp(Tensor self, dims dim, bool keepdim=False)', function(t, dim, keepdim)
    return over_dims('logsumexp', one.logsumexp, t, dim, keepdim)
  end)
  row('count_nonzero', 'count_nonzero(Tensor self, dims? dim=None)', function(t, dim)
    return over_dims('count_nonzero', one.count_nonzero, t, dim, false)
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
  -- the spread over dims with a correction: sum((x - mean)^2) / max(n - correction, 0),
  -- computed in float32 for half inputs; `post` (sqrt for std) runs before the one rounding
  local function var(t, dim, correction, keepdim, post)
    if not is_float(t) then err('var: expected a floating point tensor, got %s', t.dtype) end
    local n = 1
    if dim == nil or (type(dim) == 'table' and #dim == 0) then
      n = t:numel()
    else
      for _, d in ipairs(dims_list('var', t, dim)) do n = n * (t:dim() > 0 and t:size(d) or 1) end
    end
    local work = (t.dtype == 'float16' or t.dtype == 'bfloat16') and t:float() or t
    local dev = work - over_dims('var', one.mean, work, dim, true)
    local r = over_dims('var', one.sum, dev * dev, dim, keepdim) / math.max(n - correction, 0)
    if post then r = post(r) end
    return cast(r, t.dtype)
  end
  local function std(t, dim, correction, keepdim)
    return var(t, dim, correction, keepdim, function(v) return v:sqrt() end)
  end
  local function with_mean(fn)
    return function(t, dim, correction, keepdim)
      return fn(t, dim, correction, keepdim), over_dims('mean', one.mean, t, dim, keepdim)
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
      if p == 'nuc' then   -- the sum of the singular values of the matrices in dims (default the last two)
        local d = dim or { -2, -1 }
        if type(d) ~= 'table' or #d ~= 2 then err("norm: p = 'nuc' needs two dims, got %s", signature.describe(dim)) end
        return torch.linalg.matrix_norm(t, 'nuc', { dim = d, keepdim = keepdim })
      end
      if type(p) == 'string' then err("norm: p must be a number, 'fro' or 'nuc', got '%s'", p) end
      return over_dims('norm', function(x, d, k)
        if d == nil then return base.norm(x, p) end
        return base.norm(x, p, d, k)
      end, t, dim, keepdim)
    end)

  -- histogram(bins=100 | edges [, {range = {min, max}, weight =, density = false}]): the
  -- counts (or weights' sums, or a density) in each bin and the bins' edges, as PyTorch's
  -- (and NumPy's: an empty input spans [0, 1], a constant one its value +- 0.5).  NaN is
  -- left out (PyTorch 1.13 puts a NaN in some bin).
  row('histogram', 'histogram(Tensor self, int|Tensor bins=100, *, float[]? range=None, Tensor? weight=None, bool density=False)',
    function(t, bins, range, weight, density)
      if not is_float(t) then err('histogram: expected a floating point input, got %s', t.dtype) end
      local edges
      if torch.is_tensor(bins) then
        if bins:dim() ~= 1 or bins:numel() < 2 then
          err('histogram: bins as a tensor must be 1-D with at least 2 edges, got shape [%s]', table.concat(bins:size():totable(), ', '))
        end
        edges = bins:to(t.dtype):clone()
      else
        if bins < 1 then err('histogram: bins must be > 0, got %d', bins) end
        local lo, hi
        if range ~= nil then
          if type(range) ~= 'table' or #range ~= 2 then err('histogram: range must be a table {min, max}') end
          lo, hi = range[1], range[2]
          if lo > hi then err('histogram: min should not exceed max, got min %s max %s', lo, hi) end
        elseif t:numel() == 0 then
          lo, hi = 0, 1
        else
          local finite = t:isnan():logical_not()
          if not finite:all():item() then
            err('histogram: the input has NaN, so its range is unknown: give {range = {min, max}}')
          end
          lo, hi = t:min():item(), t:max():item()
        end
        if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
        edges = torch.linspace(lo, hi, bins + 1, { dtype = t.dtype, device = t.device })
      end
      local nb = edges:numel() - 1
      local x = t:reshape(-1)
      local w = weight and weight:reshape(-1):to(t.dtype) or torch.ones_like(x)
      if weight and weight:numel() ~= t:numel() then
        err('histogram: weight must have the shape of the input, got %d and %d elements', weight:numel(), t:numel())
      end
      local lo_e, hi_e = edges[1], edges[nb + 1]
      if torch.is_tensor(lo_e) then lo_e, hi_e = lo_e:item(), hi_e:item() end
      local inside = x:ge(lo_e):logical_and(x:le(hi_e))
      local xs, ws = x:masked_select(inside), w:masked_select(inside)
      local hist = torch.zeros({ nb }, { dtype = t.dtype, device = t.device })
      if xs:numel() > 0 then
        local pos = torch.searchsorted(edges, xs, { right = true }) - 1   -- 1-based bins
        pos = pos:clamp(1, nb)
        hist:index_add_(1, pos, ws)
      end
      if density then
        local widths = edges:narrow(1, 2, nb) - edges:narrow(1, 1, nb)
        hist = hist / (widths * hist:sum())
      end
      return hist, edges
    end)
  rows[#rows].method = true   -- also Tensor:histogram, as PyTorch's

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

  -- nn.functional's: the same, and softmin (softmax of -input)
  for _, name in ipairs { 'softmax', 'log_softmax', 'softmin' } do
    row(name, ('%s(Tensor input, dim dim, *, dtype? dtype=None)'):format(name), function(t, dim, dtype)
      t = cast(t, dtype)
      if name == 'softmin' then return torch.softmax(-t, dim) end
      return torch[name](t, dim)
    end, 'F')
  end

  -- F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
  -- antialias): PyTorch's positional order, or the options
  row('interpolate', "interpolate(Tensor input, int[]? size=None, float[]? scale_factor=None, " ..
      "str{nearest,linear,bilinear,bicubic,trilinear,area,nearest-exact} mode='nearest', bool? align_corners=None, " ..
      "bool? recompute_scale_factor=None, bool antialias=False)",
    function(x, size, scale_factor, mode, align_corners, recompute, antialias)
      if antialias then err('interpolate: antialias = true is not supported (only antialias = false)') end
      return M.fbase.interpolate(x, { size = size, scale_factor = scale_factor, mode = mode,
                                      align_corners = align_corners, recompute_scale_factor = recompute })
    end, 'F')

  -- nn.functional's layers and shuffles, with their arguments by PyTorch's names
  row('layer_norm', 'layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05)',
    function(x, shape, w, b, eps) return M.fbase.layer_norm(x, shape, w, b, eps) end, 'F')
  row('group_norm', 'group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05)',
    function(x, g, w, b, eps) return M.fbase.group_norm(x, g, w, b, eps) end, 'F')
  row('prelu', 'prelu(Tensor input, Tensor weight)', function(x, w) return M.fbase.prelu(x, w) end, 'F')
  -- (a factor of 1 gives a copy, as PyTorch's, not a view)
  row('pixel_shuffle', 'pixel_shuffle(Tensor input, int upscale_factor)', function(x, r)
    local y = M.fbase.pixel_shuffle(x, r)
    return r == 1 and y:clone() or y
  end, 'F')
  row('pixel_unshuffle', 'pixel_unshuffle(Tensor input, int downscale_factor)', function(x, r)
    local y = M.fbase.pixel_unshuffle(x, r)
    return r == 1 and y:clone() or y
  end, 'F')
  -- convolutions in PyTorch's positional order, bias included
  for nd = 1, 3 do
    local name = ('conv%dd'):format(nd)
    row(name, ('%s(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=1, int[]|str padding=0, '
               .. 'int[] dilation=1, int groups=1)'):format(name),
      function(x, w, b, stride, padding, dilation, groups)
        return M.fbase[name](x, w, b, { stride = stride, padding = padding, dilation = dilation, groups = groups })
      end, 'F')
    local tname = ('conv_transpose%dd'):format(nd)
    row(tname, ('%s(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=1, int[] padding=0, '
                .. 'int[] output_padding=0, int groups=1, int[] dilation=1)'):format(tname),
      function(x, w, b, stride, padding, output_padding, groups, dilation)
        return M.fbase[tname](x, w, b, { stride = stride, padding = padding, output_padding = output_padding,
                                         groups = groups, dilation = dilation })
      end, 'F')
  end

  -- pooling and batch norm in PyTorch's positional order (stride None or {} is kernel_size)
  for _, name in ipairs { 'max_pool1d', 'max_pool2d' } do
    row(name, ('%s(Tensor input, int[] kernel_size, int[]? stride=None, int[] padding=0, int[] dilation=1, '
               .. 'bool ceil_mode=False, bool return_indices=False)'):format(name),
      function(x, k, stride, padding, dilation, ceil_mode, return_indices)
        return M.fbase[name](x, k, { stride = stride, padding = padding, dilation = dilation, ceil_mode = ceil_mode,
                                     return_indices = return_indices })
      end, 'F')
  end
  row('avg_pool1d', 'avg_pool1d(Tensor input, int[] kernel_size, int[]? stride=None, int[] padding=0, '
                    .. 'bool ceil_mode=False, bool count_include_pad=True)',
    function(x, k, stride, padding, ceil_mode, cip)
      return M.fbase.avg_pool1d(x, k, { stride = stride, padding = padding, ceil_mode = ceil_mode, count_include_pad = cip })
    end, 'F')
  row('avg_pool2d', 'avg_pool2d(Tensor input, int[] kernel_size, int[]? stride=None, int[] padding=0, '
                    .. 'bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None)',
    function(x, k, stride, padding, ceil_mode, cip, divisor)
      return M.fbase.avg_pool2d(x, k, { stride = stride, padding = padding, ceil_mode = ceil_mode, count_include_pad = cip,
                                        divisor_override = divisor })
    end, 'F')
  row('batch_norm', 'batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, '
                    .. 'Tensor? bias=None, bool training=False, float momentum=0.1, float eps=1e-05)',
    function(x, rm, rv, w, b, training, momentum, eps)
      return M.fbase.batch_norm(x, rm, rv, w, b, training, momentum, eps)
    end, 'F')
  row('unfold', 'unfold(Tensor input, int[] kernel_size, int[] dilation=1, int[] padding=0, int[] stride=1)',
    function(x, k, d, p, st) return M.fbase.unfold(x, k, { dilation = d, padding = p, stride = st }) end, 'F')
  row('fold', 'fold(Tensor input, int[] output_size, int[] kernel_size, int[] dilation=1, int[] padding=0, int[] stride=1)',
    function(x, o, k, d, p, st) return M.fbase.fold(x, o, k, { dilation = d, padding = p, stride = st }) end, 'F')
  row('one_hot', 'one_hot(Tensor input, int num_classes=-1)', function(t, n) return M.fbase.one_hot(t, n) end, 'F')

  -- ---------------------------------------------------------------- comparisons
  row('allclose', 'allclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False)',
    function(a, b, rtol, atol, equal_nan)
      if rtol < 0 or atol < 0 then err('allclose: rtol and atol must be >= 0, got %s and %s', rtol, atol) end
      if equal_nan then return torch.isclose(a, b, { rtol = rtol, atol = atol, equal_nan = true }):all():item() end
      return base.allclose(a, b, rtol, atol)
    end)
  row('cross', 'cross(Tensor self, Tensor other, dim? dim=None)', function(a, b, dim) return base.cross(a, b, dim) end)

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

  -- ---------------------------------------------------------------- joining and cutting
  row('cat', { 'cat(Tensor[] tensors, dim dim=1)', 'cat(Tensor a, Tensor b, dim dim=1)' },
    function(a, b, dim, form)
      if form == 1 then return base.cat(a, b) end
      return base.cat({ a, b }, dim)
    end)
  row('stack', 'stack(Tensor[] tensors, dim dim=1)', function(list, dim) return base.stack(list, dim) end)
  row('split', 'split(Tensor self, int|int[] split_size_or_sections, dim dim=1)',
    function(t, how, dim) return base.split(t, how, dim) end)
  row('chunk', 'chunk(Tensor self, int chunks, dim dim=1)', function(t, n, dim) return base.chunk(t, n, dim) end)
  -- a 0-dim tensor is a number of sections, a 1-D one the split points, as PyTorch
  row('tensor_split', 'tensor_split(Tensor self, int|int[]|Tensor indices_or_sections, dim dim=1)',
    function(t, how, dim)
      if torch.is_tensor(how) then
        if how.dtype ~= 'int64' or how:dim() > 1 then
          err('tensor_split: a tensor of split points must be a 0-D or 1-D int64 tensor, got a %d-D %s tensor', how:dim(), how.dtype)
        end
        how = how:dim() == 0 and how:item() or how:tolist()
      end
      return base.tensor_split(t, how, dim)
    end)
  row('unbind', 'unbind(Tensor self, dim dim=1)', function(t, dim) return base.unbind(t, dim) end)

  -- ---------------------------------------------------------------- views and shapes
  row('squeeze', 'squeeze(Tensor self, dims? dim=None)', function(t, dim)
    if dim == nil then return base.squeeze(t) end
    if type(dim) ~= 'table' then return base.squeeze(t, dim) end
    local list = dims_list('squeeze', t, dim)
    if t:dim() == 0 then return base.squeeze(t) end
    local shape = {}
    local drop = {}
    for _, d in ipairs(list) do drop[d] = t:size(d) == 1 end
    for d = 1, t:dim() do
      if not drop[d] then shape[#shape + 1] = t:size(d) end
    end
    return t:view(shape)
  end)
  row('unsqueeze', 'unsqueeze(Tensor self, dim dim)', function(t, dim) return base.unsqueeze(t, dim) end)
  row('flatten', 'flatten(Tensor self, dim start_dim=1, dim end_dim=-1)',
    function(t, a, b) return base.flatten(t, a, b) end)
  row('transpose', 'transpose(Tensor self, dim dim0, dim dim1)', function(t, a, b) return base.transpose(t, a, b) end)
  -- (start may be a 0-dim integer tensor, as PyTorch takes it)
  row('narrow', 'narrow(Tensor self, dim dim, int|Tensor start, int length)', function(t, dim, start, length)
    if torch.is_tensor(start) then
      if start:dim() ~= 0 or start.dtype ~= 'int64' then
        err('narrow: start must be an integer or a 0-dim int64 tensor, got a %d-D %s tensor', start:dim(), start.dtype)
      end
      start = start:item()
    end
    return base.narrow(t, dim, start, length)
  end)
  row('select', 'select(Tensor self, dim dim, int index)', function(t, dim, i) return base.select(t, dim, i) end)
  row('tril', 'tril(Tensor self, int diagonal=0)', function(t, k) return base.tril(t, k) end)
  row('triu', 'triu(Tensor self, int diagonal=0)', function(t, k) return base.triu(t, k) end)
  -- (a copy, as PyTorch's, also where no dim has more than one element)
  row('flip', 'flip(Tensor self, dims dims)', function(t, dims)
    local r = base.flip(t, dims)
    if rawequal(r, t) then r = t:clone() end
    return r
  end)
  row('roll', 'roll(Tensor self, int[] shifts, dims? dims=None)', function(t, shifts, dims)
    if type(dims) == 'table' and #dims == 0 then dims = nil end
    if dims == nil and type(shifts) == 'table' and #shifts ~= 1 then
      err('roll: %d shifts need as many dims, got none', #shifts)
    end
    if dims == nil and type(shifts) == 'table' then shifts = shifts[1] end
    return base.roll(t, shifts, dims)
  end)
  -- Tensor:unfold(dimension, size, step): the windows of size elements every step along
  -- dimension, as a new last dim of a view (PyTorch's; nn.functional.unfold is im2col)
  row('unfold', 'unfold(Tensor self, dim dimension, int size, int step)',
    function(t, dim, size, step) return C._unfold(t, dim, size, step) end, 'Tensor')
  -- t:backward([gradient] [, retain_graph] ...): PyTorch's positional order or options;
  -- create_graph and inputs are refused rather than ignored (torch.autograd.grad takes
  -- create_graph and inputs)
  row('backward', 'backward(Tensor self, Tensor? gradient=None, bool? retain_graph=None, bool create_graph=False, Tensor[]? inputs=None)',
    function(t, gradient, retain, create_graph, inputs)
      if create_graph then
        err('backward: create_graph = true is not supported by t:backward; use torch.autograd.grad(outputs, inputs, {create_graph = true})')
      end
      if inputs ~= nil then
        err('backward: inputs is not supported by t:backward; use torch.autograd.grad(outputs, inputs)')
      end
      return base.backward(t, gradient, { retain_graph = retain == true })
    end, 'Tensor')
  row('nonzero', 'nonzero(Tensor self, *, bool as_tuple=False)',
    function(t, as_tuple) return base.nonzero(t, { as_tuple = as_tuple }) end)

  -- index_put_(indices, values [, accumulate]): accumulate by position too, as PyTorch's
  -- (indices: a table with a tensor, or {} for all of a dim, per dim; or one tensor)
  row('index_put_', 'index_put_(Tensor self, Tensor|table indices, Tensor|Scalar values, bool accumulate=False)',
    function(t, indices, values, acc) return base.index_put_(t, indices, values, { accumulate = acc }) end, 'Tensor')
  row('index_put', 'index_put(Tensor self, Tensor|table indices, Tensor|Scalar values, bool accumulate=False)',
    function(t, indices, values, acc) return base.index_put(t, indices, values, { accumulate = acc }) end)

  -- diag_embed(offset, dim1, dim2): the last dim's values on the diagonal of two new dims,
  -- which land at dim1 (rows) and dim2 (columns) of the result
  row('diag_embed', 'diag_embed(Tensor self, int offset=0, dim dim1=-2, dim dim2=-1)', function(t, offset, d1, d2)
    local r = base.diag_embed(t, offset)
    if d1 == -2 and d2 == -1 then return r end
    local n = r:dim()
    local function pos(d)
      if d == 0 or d > n or d < -n then
        err('diag_embed: dimension %d is out of range for a %d-D result (dplua counts dims from 1)', d, n)
      end
      return d < 0 and n + d + 1 or d
    end
    local a, b = pos(d1), pos(d2)
    if a == b then err('diag_embed: dim1 and dim2 cannot be the same dimension (%d)', a) end
    return r:movedim({ n - 1, n }, { a, b })
  end)

  -- put_(index, source [, accumulate]): source's values written (or added) at index, the
  -- positions of t's elements in row-major order (1-based, negative from the end); put is
  -- the same on a copy
  local function put_(t, index, source, accumulate)
    if index.dtype ~= 'int64' then err('put_: the index must be an int64 tensor, got %s', index.dtype) end
    if index:numel() ~= source:numel() then
      err('put_: index and source must have the same number of elements, got %d and %d', index:numel(), source:numel())
    end
    if t:is_contiguous() then
      t:view(-1):index_put_({ index:reshape(-1) }, source:reshape(-1), accumulate)
    else
      local flat = t:contiguous():view(-1)
      flat:index_put_({ index:reshape(-1) }, source:reshape(-1), accumulate)
      t:copy_(flat:view(t:size()))
    end
    return t
  end
  row('put_', 'put_(Tensor self, Tensor index, Tensor source, bool accumulate=False)', put_, 'Tensor')
  -- (out of place, and so differentiable in t and source: index_put on the flattened t)
  row('put', 'put(Tensor self, Tensor index, Tensor source, bool accumulate=False)',
    function(t, index, source, accumulate)
      if index.dtype ~= 'int64' then err('put: the index must be an int64 tensor, got %s', index.dtype) end
      if index:numel() ~= source:numel() then
        err('put: index and source must have the same number of elements, got %d and %d', index:numel(), source:numel())
      end
      return t:reshape(-1):index_put({ index:reshape(-1) }, source:reshape(-1), accumulate):view(t:size())
    end)
  rows[#rows].method = true

  -- a view, as PyTorch's: writes into it land in t
  row('diagonal', 'diagonal(Tensor self, int offset=0, dim dim1=1, dim dim2=2)',
    function(t, offset, d1, d2)
      if t:dim() < 2 then err('diagonal: expected a tensor with at least 2 dimensions, got %d', t:dim()) end
      return C._diagonal(t, offset, dim_of('diagonal', t, d1), dim_of('diagonal', t, d2))
    end)
  row('repeat_interleave', 'repeat_interleave(Tensor self, Tensor|int[] repeats, dim? dim=None, *, int? output_size=None)',
    function(t, repeats, dim, output_size)
      local r = base.repeat_interleave(t, repeats, dim)
      if repeats == 1 then r = r:clone() end   -- an expand by 1 would be a view of t; PyTorch copies
      if output_size ~= nil and r:size(dim and dim_of('repeat_interleave', t, dim) or 1) ~= output_size then
        err('repeat_interleave: output_size is %d, but the repeats give %d', output_size, r:size(dim or 1))
      end
      return r
    end)

  -- ---------------------------------------------------------------- indexing
  row('index_select', 'index_select(Tensor self, dim dim, Tensor|int[] index)',
    function(t, dim, idx) return base.index_select(t, dim, idx) end)
  row('gather', 'gather(Tensor self, dim dim, Tensor index, *, bool sparse_grad=False)',
    function(t, dim, idx) return base.gather(t, dim, idx) end)
  -- scatter's reduce: 'add' as scatter_add, 'multiply' as scatter_reduce's product, both
  -- with the destination's values included, as PyTorch 1.13
  row('scatter', 'scatter(Tensor self, dim dim, Tensor index, Tensor|Scalar src, *, str{add,multiply}? reduce=None)',
    function(t, dim, idx, src, reduce)
      if reduce == nil then return base.scatter(t, dim, idx, src) end
      if not torch.is_tensor(src) then src = torch.full(idx:size(), src, { dtype = t.dtype, device = t.device }) end
      if reduce == 'add' then return base.scatter_add(t, dim, idx, src) end
      return base.scatter_reduce(t, dim, idx, src, 'prod', { include_self = true })
    end)
  row('scatter_add', 'scatter_add(Tensor self, dim dim, Tensor index, Tensor src)',
    function(t, dim, idx, src) return base.scatter_add(t, dim, idx, src) end)
  row('scatter_reduce', 'scatter_reduce(Tensor self, dim dim, Tensor index, Tensor src, str{sum,prod,mean,amax,amin} reduce, *, bool include_self=True)',
    function(t, dim, idx, src, reduce, include_self)
      return base.scatter_reduce(t, dim, idx, src, reduce, { include_self = include_self })
    end)

  return rows
end

-- the rows as installed (M.install fills it)
M.list = {}
-- PyTorch's other names of the same ops
M.ALIASES = { divide = 'div', moveaxis = 'movedim', concat = 'cat', concatenate = 'cat',
              swapaxes = 'transpose', swapdims = 'transpose' }

-- Puts each row's parsing wrapper in torch.NAME and, where the op is a method, Tensor:NAME.
function M.install(torch)
  local Tensor = torch.Tensor
  M.list = M.rows(torch)
  for _, r in ipairs(M.list) do
    if r.module == 'Tensor' then
      rawset(Tensor, r.name, signature.wrap(r.name, r.lines, r.impl))
      r.method = true
    end
    if r.module then goto continue end
    local fn = signature.wrap(r.name, r.lines, r.impl)
    local method = r.method or rawget(Tensor, r.name) ~= nil
    r.method = method
    torch[r.name] = fn
    if method then rawset(Tensor, r.name, fn) end
    ::continue::
  end
  -- PyTorch's other names of the same ops
  for alias, name in pairs(M.ALIASES) do
    torch[alias] = torch[name]
    if rawget(Tensor, name) ~= nil then rawset(Tensor, alias, torch[name]) end
  end
end

-- doc/signatures.md, written from the rows (tools/signatures.lua; spec/signatures_spec.lua
-- checks that the page is up to date)
function M.markdown()
  local out = {
    '# Signatures',
    '',
    '<!-- written by `build/dplua tools/signatures.lua > doc/signatures.md` from lua/torch/signatures.lua; do not edit -->',
    '',
    "The arguments of these ops are read from their signatures, written as PyTorch writes them",
    "(`native_functions.yaml`) with dplua's types: dims count from 1 (negative from the end), and",
    "PyTorch's keyword arguments go in an options table in last position, so",
    "`x.sum(1, keepdim=True)` is `x:sum(2, {keepdim = true})`. A parameter before `*` may be given",
    "by position or as an option; one after it only as an option. `?` allows nil. An unknown",
    "option, a value of the wrong type or outside an enum, or an argument given twice is an error",
    "naming the op, the parameter and the value. Several lines are overloads, tried in order.",
    "As PyTorch's parser, the options also take NumPy's names `axis` for `dim` and `keepdims` for `keepdim`.",
    "`help(torch.sum)` prints the same lines.",
    '',
    'Types: `Tensor`, `Tensor[]` (a table of tensors), `Scalar` (a number), `int`, `float`, `bool`,',
    '`dim` (an integer dimension), `dims` (a dimension or a table of them), `int[]` (an integer or a',
    "table of them), `dtype`, `device`, `str`, `str{a,b}` (one of the strings), unions `A|B`.",
    '',
    '| op | where | signature |',
    '|---|---|---|',
  }
  local rows = {}
  for _, r in ipairs(M.list) do rows[#rows + 1] = r end
  table.sort(rows, function(a, b)
    if a.name ~= b.name then return a.name < b.name end
    return (a.module or '') < (b.module or '')
  end)
  for _, r in ipairs(rows) do
    local where = r.module == 'F' and 'nn.functional' or r.module == 'Tensor' and 'Tensor'
                  or (r.method and 'torch, Tensor' or 'torch')
    for i, line in ipairs(r.lines) do
      out[#out + 1] = ('| %s | %s | `%s` |'):format(i == 1 and r.name or '', i == 1 and where or '', (line:gsub('|', '\\|')))
    end
  end
  local aliases = {}
  for alias, name in pairs(M.ALIASES) do aliases[#aliases + 1] = ('`%s` is `%s`'):format(alias, name) end
  table.sort(aliases)
  out[#out + 1] = ''
  out[#out + 1] = 'Other names: ' .. table.concat(aliases, ', ') .. '.'
  out[#out + 1] = ''
  out[#out + 1] = ('%d ops, %d signature lines.'):format(#rows, (function()
    local n = 0
    for _, r in ipairs(rows) do n = n + #r.lines end
    return n
  end)())
  return table.concat(out, '\n') .. '\n'
end

-- nn.functional's own functions that the rows call (install_functional fills it)
M.fbase = {}

-- Puts the rows of nn.functional's ops into F (lua/nn/functional.lua calls it).
function M.install_functional(F)
  for _, r in ipairs(M.list) do
    if r.module == 'F' then
      M.fbase[r.name] = F[r.name]
      F[r.name] = signature.wrap(r.name, r.lines, r.impl)
    end
  end
end

return M
