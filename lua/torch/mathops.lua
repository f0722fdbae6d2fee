-- Tensor math written as compositions of the engine's ops (so it runs on every device and
-- autograd differentiates it): prod; nan_to_num, sgn, signbit, logit, xlogy; bmm, baddbmm,
-- addmv, addr, einsum, tensordot; tensor_split, repeat_interleave, rot90, unflatten, diag,
-- diagonal, diag_embed, expand_as, triu_indices, tril_indices; unique, bincount, histc,
-- searchsorted, bucketize, cross, trace, cdist.  Each is torch.NAME(t, ...) and, where
-- PyTorch has the method, t:NAME(...), with PyTorch 1.13's results (1-based dims and
-- indices, as everywhere).
local define = require('torch.composite').define

local M = {}

function M.install(torch)
  local Tensor = torch.Tensor
  local function both(name, fn) define(torch, name, fn) end
  local function is_float(t) return torch.FLOAT_DTYPES[t.dtype] == true end

  -- a 1-based (or negative) dim of t, checked, as a positive 1-based dim
  local function dim_of(who, t, d, extra)
    local n = math.max(t:dim() + (extra or 0), 1)
    if math.type(d) ~= 'integer' or d == 0 or d > n or d < -n then
      error(('%s: dimension %s is out of range for a tensor with %d dimensions (expected 1 to %d, or -%d to -1; dplua counts dims from 1)')
        :format(who, tostring(d), t:dim(), n, n), 3)
    end
    return d < 0 and n + d + 1 or d
  end

  -- ---------------------------------------------------------------- reductions
  -- prod([dim [, keepdim]]): the product over everything or along dim (integers and bool
  -- give int64); the last element of cumprod, so its gradient handles zeros as PyTorch
  both('prod', function(t, dim, keepdim)
    if type(dim) == 'table' then dim, keepdim = dim.dim, dim.keepdim end
    if dim == nil then
      if t:numel() == 0 then return torch.ones({}, { dtype = is_float(t) and t.dtype or 'int64', device = t.device }) end
      local c = t:reshape(-1):cumprod(1)
      return c:select(1, c:size(1))
    end
    dim = dim_of('prod', t, dim)
    local n = t:dim() == 0 and 1 or t:size(dim)
    local r
    if t:dim() == 0 then
      r = t:cumprod(1)
    elseif n == 0 then
      local shape = t:size():totable()
      shape[dim] = 1
      r = torch.ones(shape, { dtype = is_float(t) and t.dtype or 'int64', device = t.device })
    else
      r = t:cumprod(dim):narrow(dim, n, 1)
    end
    if not keepdim and t:dim() > 0 then r = r:squeeze(dim) end
    return r
  end)

  -- ---------------------------------------------------------------- elementwise
  local FMAX = { float32 = 3.4028234663852886e38, float64 = 1.7976931348623157e308, float16 = 65504,
                 bfloat16 = 3.3895313892515355e38 }
  -- nan_to_num([nan=0 [, posinf [, neginf]]]) or nan_to_num({nan=, posinf=, neginf=}): NaN,
  -- +inf and -inf replaced (infinities by the dtype's largest and lowest finite values)
  both('nan_to_num', function(t, nan, posinf, neginf)
    if type(nan) == 'table' then nan, posinf, neginf = nan.nan, nan.posinf, nan.neginf end
    if not is_float(t) then return t:clone() end
    local big = FMAX[t.dtype]
    local function value(v) return torch.full({}, v, { dtype = t.dtype, device = t.device }) end
    local r = torch.where(t:ne(t), value(nan or 0), t)
    r = torch.where(r:eq(math.huge), value(posinf or big), r)
    return torch.where(r:eq(-math.huge), value(neginf or -big), r)
  end)
  -- sgn: sign for real tensors (PyTorch's complex sign)
  both('sgn', function(t) return t:sign() end)
  -- signbit: true where the sign bit is set (-0.0 included)
  both('signbit', function(t)
    if t.dtype == 'bool' then return torch.zeros_like(t, { dtype = 'bool' }) end
    if not is_float(t) then return t:lt(0) end
    return torch.where(t:eq(0), (1 / t):lt(0), t:lt(0))
  end)
  -- logit([eps]): log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given
  both('logit', function(t, eps)
    if type(eps) == 'table' then eps = eps.eps end
    if not is_float(t) then t = t:to(torch.get_default_dtype()) end
    if eps then t = t:clamp(eps, 1 - eps) end
    return t:log() - (1 - t):log()
  end)
  -- xlogy(other): self * log(other), 0 where self is 0 (unless other is NaN)
  both('xlogy', function(a, b)
    if not torch.is_tensor(b) then b = torch.tensor(b, { dtype = is_float(a) and a.dtype or torch.get_default_dtype(), device = a.device }) end
    if not is_float(a) and not is_float(b) then a = a:to(torch.get_default_dtype()) end
    local r = a * b:log()
    return torch.where(a:eq(0) * b:eq(b), 0, r)   -- bool * bool: and
  end)

  -- ---------------------------------------------------------------- products
  local function need_dims(who, t, n, name)
    if not torch.is_tensor(t) then error(('%s: %s must be a tensor, got %s'):format(who, name, type(t)), 3) end
    if t:dim() ~= n then error(('%s: %s must be %d-D, got %d-D'):format(who, name, n, t:dim()), 3) end
  end
  local function beta_alpha(a, b)
    if type(a) == 'table' then return a.beta or 1, a.alpha or 1 end
    return a or 1, b or 1
  end
  local function toward_zero(v) return v < 0 and math.ceil(v) or math.floor(v) end
  local function scaled_sum(input, prod, beta, alpha)
    if not is_float(input) and not is_float(prod) then
      -- integer operands keep their dtype: PyTorch converts beta and alpha to the integer
      -- type (toward zero), so baddbmm(int64, ..., {alpha = 0.6}) scales by 0
      beta, alpha = toward_zero(beta), toward_zero(alpha)
    end
    if alpha ~= 1 then prod = prod * alpha end
    if beta == 0 then return prod + torch.zeros_like(input) end   -- input is ignored (its NaN too), as PyTorch
    if beta ~= 1 then input = input * beta end
    return input + prod
  end
  both('bmm', function(a, b)
    need_dims('bmm', a, 3, 'the first batch')
    need_dims('bmm', b, 3, 'the second batch')
    if a:size(1) ~= b:size(1) or a:size(3) ~= b:size(2) then
      error(('bmm: batch shapes %s and %s do not match'):format(tostring(a:size()), tostring(b:size())), 2)
    end
    return a:matmul(b)
  end)
  -- baddbmm(b1, b2 [, {beta=1, alpha=1}]): beta * self + alpha * (b1 @ b2)
  both('baddbmm', function(input, b1, b2, x, y)
    local beta, alpha = beta_alpha(x, y)
    return scaled_sum(input, torch.bmm(b1, b2), beta, alpha)
  end)
  both('addbmm', function(input, b1, b2, x, y)
    local beta, alpha = beta_alpha(x, y)
    return scaled_sum(input, torch.bmm(b1, b2):sum(1), beta, alpha)
  end)
  -- addmv(mat, vec [, {beta=1, alpha=1}]) and addr(vec1, vec2 [, ...])
  both('addmv', function(input, m, v, x, y)
    need_dims('addmv', m, 2, 'the matrix')
    need_dims('addmv', v, 1, 'the vector')
    local beta, alpha = beta_alpha(x, y)
    return scaled_sum(input, m:matmul(v), beta, alpha)
  end)
  both('addr', function(input, u, v, x, y)
    local beta, alpha = beta_alpha(x, y)
    local outer = torch.outer(u, v)
    if not is_float(input) and not is_float(outer) then
      -- PyTorch refuses a fractional beta or alpha with integer (or bool) operands
      for _, p in ipairs({ { 'beta', beta }, { 'alpha', alpha } }) do
        if p[2] ~= math.floor(p[2]) then
          error(('addr: for integral input tensors, argument %s must not be a floating point number, got %s')
            :format(p[1], tostring(p[2])), 2)
        end
      end
      if input.dtype == 'bool' and outer.dtype == 'bool' then
        -- bool operands give bool: (beta and input) or (alpha and u v^T)
        local r = alpha ~= 0 and outer or torch.zeros_like(outer)
        if beta ~= 0 then r = torch.logical_or(r, input) end
        return r
      end
    end
    return scaled_sum(input, outer, beta, alpha)
  end)

  -- diagonal([offset=0 [, dim1=1 [, dim2=2]]]): the diagonal of the planes (dim1, dim2) as
  -- the last dim (a copy, differentiable, not a view)
  local function diagonal(t, offset, d1, d2)
    if type(offset) == 'table' then offset, d1, d2 = offset.offset, offset.dim1, offset.dim2 end
    offset = offset or 0
    if t:dim() < 2 then error(('diagonal: expected a tensor with at least 2 dimensions, got %d'):format(t:dim()), 2) end
    d1, d2 = dim_of('diagonal', t, d1 or 1), dim_of('diagonal', t, d2 or 2)
    if d1 == d2 then error(('diagonal: dim1 and dim2 are both %d'):format(d1), 2) end
    local order = {}
    for d = 1, t:dim() do if d ~= d1 and d ~= d2 then order[#order + 1] = d end end
    order[#order + 1], order[#order + 2] = d1, d2
    local p = t:permute(order)
    local h, w = t:size(d1), t:size(d2)
    local n = offset >= 0 and math.max(math.min(h, w - offset), 0) or math.max(math.min(h + offset, w), 0)
    local shape = {}
    for i = 1, #order - 2 do shape[i] = t:size(order[i]) end
    shape[#shape + 1] = h * w
    local flat = p:reshape(shape)
    local pos = {}
    for i = 0, n - 1 do
      pos[i + 1] = (offset >= 0 and i * w + i + offset or (i - offset) * w + i) + 1
    end
    local idx = torch.tensor(pos, { dtype = 'int64', device = t.device })
    if n == 0 then idx = torch.zeros({ 0 }, { dtype = 'int64', device = t.device }) end
    return flat:index_select(flat:dim(), idx)
  end
  both('diagonal', diagonal)

  -- diag_embed([offset=0]): the last dim's values on the diagonal of new last two dims
  local function diag_embed(t, offset)
    offset = offset or 0
    local n = t:size(t:dim())
    local m = n + math.abs(offset)
    local rows = torch.arange(m, { device = t.device }):view(m, 1)
    local cols = torch.arange(m, { device = t.device }):view(1, m)
    local mask = (cols - rows):eq(offset)
    local pad = t
    if offset ~= 0 then
      local shape = t:size():totable()
      shape[#shape] = math.abs(offset)
      pad = torch.cat({ t, torch.zeros(shape, { dtype = t.dtype, device = t.device }) }, t:dim())
    end
    -- row i holds v[i] (offset >= 0); column j holds v[j] (offset < 0)
    local v = offset >= 0 and pad:unsqueeze(-1) or pad:unsqueeze(-2)
    return torch.where(mask, v, torch.zeros({}, { dtype = t.dtype, device = t.device }))
  end
  both('diag_embed', diag_embed)

  -- diag([offset=0]): a vector's square matrix, or a matrix's diagonal
  both('diag', function(t, offset)
    if t:dim() == 1 then return diag_embed(t, offset) end
    if t:dim() == 2 then return diagonal(t, offset or 0, 1, 2) end
    error(('diag: expected a 1-D or 2-D tensor, got %d-D'):format(t:dim()), 2)
  end)
  both('trace', function(t)
    if t:dim() ~= 2 then error(('trace: expected a matrix, got a %d-D tensor'):format(t:dim()), 2) end
    return diagonal(t, 0, 1, 2):sum()
  end)

  -- tensordot(b, dims=2): contracts the last dims of a with the first dims of b (dims a
  -- number), or the listed dims ({{a dims}, {b dims}}, 1-based)
  local function tensordot(a, b, dims)
    dims = dims or 2
    local da, db = {}, {}
    if type(dims) == 'number' then
      for i = 1, dims do da[i], db[i] = a:dim() - dims + i, i end
    else
      for i, d in ipairs(dims[1]) do da[i] = dim_of('tensordot', a, d) end
      for i, d in ipairs(dims[2]) do db[i] = dim_of('tensordot', b, d) end
    end
    if #da ~= #db then error(('tensordot: %d dims of a against %d dims of b'):format(#da, #db), 2) end
    local ina, inb, k = {}, {}, 1
    for i = 1, #da do
      if a:size(da[i]) ~= b:size(db[i]) then
        error(('tensordot: dim %d of a (size %d) does not match dim %d of b (size %d)')
          :format(da[i], a:size(da[i]), db[i], b:size(db[i])), 2)
      end
      ina[da[i]], inb[db[i]] = true, true
      k = k * a:size(da[i])
    end
    local pa, pb, sa, sb, out = {}, {}, 1, 1, {}
    for d = 1, a:dim() do if not ina[d] then pa[#pa + 1] = d; sa = sa * a:size(d); out[#out + 1] = a:size(d) end end
    for _, d in ipairs(da) do pa[#pa + 1] = d end
    for _, d in ipairs(db) do pb[#pb + 1] = d end
    for d = 1, b:dim() do if not inb[d] then pb[#pb + 1] = d; sb = sb * b:size(d); out[#out + 1] = b:size(d) end end
    local am = a:permute(pa):reshape(sa, k)
    local bm = b:permute(pb):reshape(k, sb)
    return am:matmul(bm):reshape(out)
  end
  both('tensordot', tensordot)

  -- einsum(equation, a, b, ...): operands contracted as the equation says ('ij,jk->ik',
  -- 'bhqd,bhkd->bhqk', 'i,i->', 'ij->ji', 'ii->i', 'ii->', '...ij,...jk->...ik'; without
  -- '->' the output is the '...' dims, then the letters seen once, in alphabetical order).
  local function letters(s)
    local l = {}
    for c in s:gmatch('.') do l[#l + 1] = c end
    return l
  end
  -- one operand: repeated letters taken along the diagonal, so every letter is once
  local function undouble(t, l)
    local i = 1
    while i <= #l do
      local j
      for k = i + 1, #l do if l[k] == l[i] then j = k; break end end
      if j then
        t = diagonal(t, 0, i, j)   -- the diagonal becomes the last dim
        local c = l[i]
        table.remove(l, j); table.remove(l, i)
        l[#l + 1] = c
      else
        i = i + 1
      end
    end
    return t, l
  end
  local function sum_letters(t, l, keep)
    for i = #l, 1, -1 do
      if not keep[l[i]] then t = t:sum(i); table.remove(l, i) end
    end
    return t, l
  end
  local function permute_to(t, l, want)
    local pos = {}
    for i, c in ipairs(l) do pos[c] = i end
    local order = {}
    for i, c in ipairs(want) do order[i] = pos[c] end
    if #order == 0 then return t end
    return t:permute(order)
  end
  -- a (letters la) times b (letters lb), keeping the letters in keep
  local function contract(a, la, b, lb, keep)
    local inb, ina = {}, {}
    for _, c in ipairs(lb) do inb[c] = true end
    for _, c in ipairs(la) do ina[c] = true end
    local batch, left, right, inner = {}, {}, {}, {}
    for _, c in ipairs(la) do
      if inb[c] then
        if keep[c] then batch[#batch + 1] = c else inner[#inner + 1] = c end
      else left[#left + 1] = c end
    end
    for _, c in ipairs(lb) do if not ina[c] then right[#right + 1] = c end end
    local size = {}
    for i, c in ipairs(la) do size[c] = a:size(i) end
    for i, c in ipairs(lb) do
      if size[c] and size[c] ~= b:size(i) and size[c] ~= 1 and b:size(i) ~= 1 then
        error(("einsum: letter '%s' has size %d in one operand and %d in another"):format(c, size[c], b:size(i)), 4)
      end
      size[c] = math.max(size[c] or 1, b:size(i))
    end
    local function prod(list) local p = 1 for _, c in ipairs(list) do p = p * size[c] end return p end
    local function cat(...) local r = {} for _, l in ipairs({ ... }) do for _, c in ipairs(l) do r[#r + 1] = c end end return r end
    local function expand_to(t, l)
      local s = {}
      for i, c in ipairs(l) do s[i] = size[c] end
      return #s > 0 and t:expand(s) or t
    end
    local am = expand_to(permute_to(a, la, cat(batch, left, inner)), cat(batch, left, inner))
    local bm = expand_to(permute_to(b, lb, cat(batch, inner, right)), cat(batch, inner, right))
    local B, L, K, R = prod(batch), prod(left), prod(inner), prod(right)
    local r = am:reshape(B, L, K):matmul(bm:reshape(B, K, R))
    local out, shape = cat(batch, left, right), {}
    for i, c in ipairs(out) do shape[i] = size[c] end
    return r:reshape(shape), out
  end
  torch.einsum = function(eq, ...)
    local ops = { ... }
    if #ops == 1 and type(ops[1]) == 'table' and not torch.is_tensor(ops[1]) then ops = ops[1] end
    if type(eq) ~= 'string' then error('einsum: the first argument must be the equation string', 2) end
    eq = eq:gsub('%s', '')
    local lhs, rhs = eq:match('^(.-)%->(.*)$')
    lhs = lhs or eq
    local terms = {}
    for term in (lhs .. ','):gmatch('([^,]*),') do terms[#terms + 1] = term end
    if #terms ~= #ops then error(('einsum: the equation has %d operands, %d tensors given'):format(#terms, #ops), 2) end
    -- '...' stands for the dims no letter names, broadcast from the right: they become
    -- placeholder characters (bytes 1, 2, ...) that no equation can hold
    local nell = 0
    for i, term in ipairs(terms) do
      if not torch.is_tensor(ops[i]) then error(('einsum: operand %d is not a tensor'):format(i), 2) end
      if term:find('...', 1, true) then
        local n = ops[i]:dim() - (#term - 3)
        if n < 0 then
          error(("einsum: operand %d has %d dimensions but its subscripts '%s' name %d"):format(i, ops[i]:dim(), term, #term - 3), 2)
        end
        nell = math.max(nell, n)
      end
    end
    local function ellipsis(n)
      local s = {}
      for j = nell - n + 1, nell do s[#s + 1] = string.char(j) end
      return table.concat(s)
    end
    for i, term in ipairs(terms) do
      if term:find('...', 1, true) then terms[i] = term:gsub('%.%.%.', ellipsis(ops[i]:dim() - (#term - 3)), 1) end
    end
    if rhs and rhs:find('...', 1, true) then rhs = rhs:gsub('%.%.%.', ellipsis(nell), 1) end
    local count = {}
    for i, term in ipairs(terms) do
      if not term:match('^[%a\1-\8]*$') then error(("einsum: bad subscripts '%s' (letters and one '...' only)"):format(term), 2) end
      if #term ~= ops[i]:dim() then
        error(("einsum: operand %d has %d dimensions but its subscripts '%s' name %d"):format(i, ops[i]:dim(), term, #term), 2)
      end
      for c in term:gmatch('.') do count[c] = (count[c] or 0) + 1 end
    end
    if not rhs then   -- implicit: the '...' dims, then the letters seen once, in order
      local once = {}
      for c, n in pairs(count) do if n == 1 and c:match('%a') then once[#once + 1] = c end end
      table.sort(once)
      rhs = ellipsis(nell) .. table.concat(once)
    end
    local want = letters(rhs)
    local inout = {}
    for _, c in ipairs(want) do
      if not count[c] then error(("einsum: output letter '%s' is not in any operand"):format(c), 2) end
      inout[c] = true
    end
    -- fold the operands left to right; a letter is kept while the output or a later
    -- operand still needs it
    local cur, cl = undouble(ops[1], letters(terms[1]))
    local function needed_after(k)
      local keep = {}
      for c in pairs(inout) do keep[c] = true end
      for j = k + 1, #terms do for c in terms[j]:gmatch('.') do keep[c] = true end end
      return keep
    end
    for k = 2, #ops do
      local nxt, nl = undouble(ops[k], letters(terms[k]))
      local keep = needed_after(k)
      -- letters only one side has and nobody needs are summed first
      local other = {}
      for _, c in ipairs(nl) do other[c] = true end
      local keep_cur = {}
      for c in pairs(keep) do keep_cur[c] = true end
      for c in pairs(other) do keep_cur[c] = true end
      cur, cl = sum_letters(cur, cl, keep_cur)
      local mine = {}
      for _, c in ipairs(cl) do mine[c] = true end
      local keep_nxt = {}
      for c in pairs(keep) do keep_nxt[c] = true end
      for c in pairs(mine) do keep_nxt[c] = true end
      nxt, nl = sum_letters(nxt, nl, keep_nxt)
      cur, cl = contract(cur, cl, nxt, nl, keep)
    end
    cur, cl = sum_letters(cur, cl, inout)
    return permute_to(cur, cl, want)
  end

  -- ---------------------------------------------------------------- shapes
  -- tensor_split(sections or split points [, dim=1]): n pieces as equal as possible (the
  -- first size % n one longer), or pieces cut before the given element counts, as PyTorch's
  -- indices ({1, 4}: the first element, the next three, the rest)
  both('tensor_split', function(t, how, dim)
    dim = dim_of('tensor_split', t, dim or 1)
    local size = t:size(dim)
    local cuts = {}
    if type(how) == 'number' then
      if math.type(how) ~= 'integer' or how < 1 then
        error(('tensor_split: the number of sections must be a positive integer, got %s'):format(tostring(how)), 2)
      end
      local base, extra, at = size // how, size % how, 0
      for i = 1, how - 1 do at = at + base + (i <= extra and 1 or 0); cuts[i] = at end
    elseif type(how) == 'table' then
      for i, c in ipairs(how) do cuts[i] = c end
    else
      error('tensor_split: expected a number of sections or a table of split points', 2)
    end
    local out, start = {}, 0
    cuts[#cuts + 1] = size
    for _, c in ipairs(cuts) do
      local lo, hi = math.min(math.max(start, 0), size), math.min(math.max(c, 0), size)
      out[#out + 1] = t:narrow(dim, lo + 1, math.max(hi - lo, 0))
      start = math.max(c, start)
    end
    return out
  end)

  -- repeat_interleave(repeats [, dim]): each element (slice along dim) repeated; repeats a
  -- number or a tensor / table with one count per element; without dim, t flattened first
  both('repeat_interleave', function(t, repeats, dim)
    if dim == nil then t, dim = t:reshape(-1), 1 else dim = dim_of('repeat_interleave', t, dim) end
    local n = t:size(dim)
    if type(repeats) == 'number' then
      if math.type(repeats) ~= 'integer' or repeats < 0 then
        error(('repeat_interleave: repeats must be a non-negative integer, got %s'):format(tostring(repeats)), 2)
      end
      if repeats == 1 then return t:clone() end   -- a new tensor, as PyTorch
      local shape, grown = t:size():totable(), t:size():totable()
      table.insert(grown, dim + 1, repeats)
      local u = t:unsqueeze(dim + 1):expand(grown)
      shape[dim] = n * repeats
      return u:contiguous():view(shape)   -- copied even where a view would do (n == 1)
    end
    if torch.is_tensor(repeats) then repeats = repeats:reshape(-1):tolist() end
    if #repeats == 1 then repeats = (function() local r = {} for i = 1, n do r[i] = repeats[1] end return r end)() end
    if #repeats ~= n then
      error(('repeat_interleave: %d repeats for dimension %d of size %d'):format(#repeats, dim, n), 2)
    end
    local idx = {}
    for i, r in ipairs(repeats) do
      if math.type(r) ~= 'integer' or r < 0 then
        error(('repeat_interleave: repeats must be non-negative integers, got %s'):format(tostring(r)), 2)
      end
      for _ = 1, r do idx[#idx + 1] = i end
    end
    local it = #idx > 0 and torch.tensor(idx, { dtype = 'int64', device = t.device })
      or torch.zeros({ 0 }, { dtype = 'int64', device = t.device })
    return t:index_select(dim, it)
  end)

  -- rot90([k=1 [, dims={1, 2}]]): rotated by 90 degrees k times, from dims[1] towards dims[2]
  both('rot90', function(t, k, dims)
    k = (k or 1) % 4
    dims = dims or { 1, 2 }
    if #dims ~= 2 then error(('rot90: expected 2 dims, got %d'):format(#dims), 2) end
    local a, b = dim_of('rot90', t, dims[1]), dim_of('rot90', t, dims[2])
    if a == b then error(('rot90: the two dims are both %d'):format(a), 2) end
    if k == 1 then return t:flip(b):transpose(a, b) end
    if k == 2 then return t:flip({ a, b }) end
    if k == 3 then return t:flip(a):transpose(a, b) end
    return t:clone()
  end)

  -- unflatten(dim, sizes): dim split into sizes (one -1 allowed)
  both('unflatten', function(t, dim, sizes)
    dim = dim_of('unflatten', t, dim)
    if torch.is_tensor(sizes) or type(sizes) ~= 'table' then
      error('unflatten: sizes must be a table of sizes', 2)
    end
    local shape = {}
    for d = 1, dim - 1 do shape[#shape + 1] = t:size(d) end
    for _, s in ipairs(type(sizes.totable) == 'function' and sizes:totable() or sizes) do shape[#shape + 1] = s end
    for d = dim + 1, t:dim() do shape[#shape + 1] = t:size(d) end
    return t:view(shape)
  end)

  both('expand_as', function(t, other) return t:expand(other:size()) end)

  -- triu_indices / tril_indices(rows, cols [, offset=0]): a 2 x N int64 tensor of the
  -- 1-based (row, column) positions of the triangle, row by row
  local function tri_indices(who, rows, cols, offset, opts, upper)
    if type(offset) == 'table' then offset, opts = 0, offset end
    offset = offset or 0
    local r, c = {}, {}
    for i = 0, rows - 1 do
      for j = 0, cols - 1 do
        if (upper and j - i >= offset) or (not upper and j - i <= offset) then r[#r + 1], c[#c + 1] = i + 1, j + 1 end
      end
    end
    local dev = opts and opts.device
    if #r == 0 then return torch.zeros({ 2, 0 }, { dtype = 'int64', device = dev }) end
    return torch.tensor({ r, c }, { dtype = 'int64', device = dev })
  end
  torch.triu_indices = function(rows, cols, offset, opts) return tri_indices('triu_indices', rows, cols, offset, opts, true) end
  torch.tril_indices = function(rows, cols, offset, opts) return tri_indices('tril_indices', rows, cols, offset, opts, false) end

  -- ---------------------------------------------------------------- counting, searching
  -- unique([{sorted=true, return_inverse=false, return_counts=false, dim=nil}]): the
  -- distinct values in ascending order, then (when asked) the 1-based inverse indices (t's
  -- shape) and the counts.  PyTorch's positional form unique(sorted, return_inverse,
  -- return_counts) works too.
  both('unique', function(t, a, b, c)
    local inverse, counts
    if type(a) == 'table' then
      if a.dim ~= nil then error('unique: dim is not supported (only unique over all elements)', 2) end
      inverse, counts = a.return_inverse, a.return_counts
    else
      inverse, counts = b, c
    end
    local flat = t:reshape(-1)
    local n = flat:numel()
    if n == 0 then
      local none = torch.zeros({ 0 }, { dtype = 'int64', device = t.device })
      local r = { flat:clone() }
      if inverse then r[#r + 1] = torch.zeros(t:size(), { dtype = 'int64', device = t.device }) end
      if counts then r[#r + 1] = none end
      return table.unpack(r)
    end
    local sv, si = flat:detach():sort()
    -- a new value starts where a sorted element differs from the one before it
    local starts = torch.cat({ torch.ones({ 1 }, { dtype = 'bool', device = t.device }),
      sv:narrow(1, 2, n - 1):ne(sv:narrow(1, 1, n - 1)) }, 1)
    local k = starts:long():sum():item()
    -- the positions of the starts: a stable sort puts the true entries first, in order
    local at = starts:long():eq(0):long():argsort():narrow(1, 1, k)
    local r = { sv:index_select(1, at) }
    if inverse then
      local group = starts:long():cumsum(1)           -- 1-based group of each sorted element
      r[#r + 1] = group:index_select(1, si:argsort()):view(t:size())
    end
    if counts then
      local ends = torch.cat({ at:narrow(1, 2, k - 1), torch.tensor({ n + 1 }, { dtype = 'int64', device = t.device }) }, 1)
      r[#r + 1] = ends - at
    end
    return table.unpack(r)
  end)

  -- one-hot counts of the values v (int64, 1-D) in [0, m): sum over v of (v == j) * w,
  -- in blocks so that the mask stays small
  local function count_values(v, m, w, dtype)
    local n = v:size(1)
    local out = torch.zeros({ m }, { dtype = dtype, device = v.device })
    if n == 0 or m == 0 then return out end
    local cols = torch.arange(m, { device = v.device }):view(1, m)
    local step = math.max(1, (1 << 22) // m)
    for s = 1, n, step do
      local len = math.min(step, n - s + 1)
      local hit = v:narrow(1, s, len):view(len, 1):eq(cols)
      local part = w and torch.where(hit, w:narrow(1, s, len):view(len, 1), 0):sum(1) or hit:long():sum(1)
      out = out + part
    end
    return out
  end

  -- bincount([weights [, minlength=0]]): how often each value 0, 1, ... occurs in a 1-D
  -- int64 tensor of non-negative values (values, not indices: they are not shifted)
  both('bincount', function(t, weights, minlength)
    if type(weights) == 'table' and not torch.is_tensor(weights) then weights, minlength = weights.weights, weights.minlength end
    minlength = minlength or 0
    if t.dtype ~= 'int64' or t:dim() ~= 1 then
      error(('bincount: expected a 1-D int64 tensor, got a %d-D %s tensor'):format(t:dim(), t.dtype), 2)
    end
    -- the largest value sizes the result: the smallest and largest read back together
    -- (one synchronisation on a GPU, as PyTorch's)
    local lo, hi = 0, -1
    if t:numel() > 0 then lo, hi = table.unpack(torch.cat({ t:min():reshape(1), t:max():reshape(1) }):tolist()) end
    if lo < 0 then error(('bincount: values must be non-negative, got %d'):format(lo), 2) end
    if weights and (weights:dim() ~= 1 or weights:size(1) ~= t:size(1)) then
      error(('bincount: weights must be 1-D with %d elements, got shape %s'):format(t:size(1), tostring(weights:size())), 2)
    end
    local m = math.max(minlength, hi + 1)
    local dtype = weights and (weights.dtype == 'float32' and 'float32' or 'float64') or 'int64'
    if weights then weights = weights:to(dtype) end
    return count_values(t, m, weights, dtype)
  end)

  -- histc([bins=100 [, min=0 [, max=0]]]): a histogram of equal-width bins over [min, max]
  -- (min = max: the data's range); elements outside are ignored, max falls in the last bin
  both('histc', function(t, bins, lo, hi)
    if type(bins) == 'table' then bins, lo, hi = bins.bins, bins.min, bins.max end
    bins, lo, hi = bins or 100, lo or 0, hi or 0
    if not is_float(t) then error(('histc: expected a floating point tensor, got %s'):format(t.dtype), 2) end
    if bins < 1 then error(('histc: bins must be positive, got %d'):format(bins), 2) end
    local x = t:detach():reshape(-1)
    if lo == hi and x:numel() > 0 then lo, hi = x:min():item(), x:max():item() end
    if lo == hi then lo, hi = lo - 1, hi + 1 end
    if lo > hi then error(('histc: max (%g) must be larger than min (%g)'):format(hi, lo), 2) end
    local inside = x:ge(lo) * x:le(hi)
    local b = ((x - lo) * (bins / (hi - lo))):floor():clamp(0, bins - 1)
    b = torch.where(inside, b, bins):long()    -- outside: bin `bins`, dropped below
    return count_values(b, bins + 1, nil, 'int64'):narrow(1, 1, bins):to(t.dtype)
  end)

  -- searchsorted(sorted_sequence, values [, {right=false}]): for each value, the 1-based
  -- position where inserting it keeps the sequence (its last dim) sorted: 1 + the count of
  -- elements < value (<= with right).  NaN sorts last, as sort puts it: a NaN value goes
  -- after every number (PyTorch 1.13 agrees, but puts a number after the NaNs at the end of
  -- a sequence, which leaves it unsorted)
  torch.searchsorted = function(seq, values, opts)
    local right = type(opts) == 'table' and (opts.right or opts.side == 'right') or false
    local scalar = not torch.is_tensor(values)
    if scalar then values = torch.tensor({ values }, { dtype = seq.dtype, device = seq.device }) end
    local s = seq:dim() == 1 and seq or seq:unsqueeze(-2)
    local v = values:unsqueeze(-1)
    local cmp = right and s:le(v) or s:lt(v)
    if torch.FLOAT_DTYPES[s.dtype] or torch.FLOAT_DTYPES[v.dtype] then
      -- everything is <= NaN; every number is < NaN
      local vnan = v:ne(v)
      cmp = cmp:logical_or(right and vnan or vnan:logical_and(s:eq(s)))
    end
    local r = cmp:long():sum(-1) + 1
    if scalar then return r:reshape({}) end
    return r
  end
  -- bucketize(boundaries [, {right=false}]): searchsorted(boundaries, self)
  both('bucketize', function(t, boundaries, opts)
    if not torch.is_tensor(boundaries) or boundaries:dim() ~= 1 then
      error('bucketize: boundaries must be a 1-D tensor', 2)
    end
    return torch.searchsorted(boundaries, t, opts)
  end)

  -- cross(other [, dim]): the cross product of 3-vectors along dim (the first of size 3)
  both('cross', function(a, b, dim)
    if dim == nil then
      for d = 1, a:dim() do if a:size(d) == 3 then dim = d; break end end
      if not dim then error('cross: no dimension of size 3', 2) end
    end
    dim = dim_of('cross', a, dim)
    if a:size(dim) ~= 3 or b:size(dim) ~= 3 then
      error(('cross: dimension %d must have size 3, got %d and %d'):format(dim, a:size(dim), b:size(dim)), 2)
    end
    local function c(t, i) return t:narrow(dim, i, 1) end
    return torch.cat({
      c(a, 2) * c(b, 3) - c(a, 3) * c(b, 2),
      c(a, 3) * c(b, 1) - c(a, 1) * c(b, 3),
      c(a, 1) * c(b, 2) - c(a, 2) * c(b, 1) }, dim)
  end)

  -- cdist(x1, x2 [, p=2]): the p-norm distances between the rows of x1 [.., P, M] and x2
  -- [.., R, M], as [.., P, R]
  torch.cdist = function(x1, x2, p)
    if type(p) == 'table' then p = p.p end
    p = p or 2
    if x1:dim() < 2 or x2:dim() < 2 then error('cdist: expected tensors with at least 2 dimensions', 2) end
    if x1:size(x1:dim()) ~= x2:size(x2:dim()) then
      error(('cdist: the last dims differ (%d and %d)'):format(x1:size(x1:dim()), x2:size(x2:dim())), 2)
    end
    local diff = x1:unsqueeze(-2) - x2:unsqueeze(-3)
    if p == 2 then
      -- sqrt at 0 has no gradient; PyTorch gives 0 there
      local ss = (diff * diff):sum(-1)
      local zero = ss:eq(0)
      return torch.where(zero, 0, torch.where(zero, 1, ss):sqrt())
    end
    return diff:norm(p, -1)
  end
end

return M
