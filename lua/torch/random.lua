-- Random draws with PyTorch 1.13's signatures and a `generator =` option on each:
-- torch.rand, randn, randint, randperm, rand_like, randn_like, randint_like, multinomial,
-- bernoulli, normal, and t:uniform_, normal_, exponential_, bernoulli_, random_.
--
-- A generator is torch.Generator() (or a table {seed = s, offset = o}): a Philox stream of
-- its own that remembers how far it has drawn, so two generators seeded alike give the same
-- values, and drawing from one leaves the global stream (torch.manual_seed) alone.  The
-- values are dplua's own (a different generator than PyTorch's), with the same
-- distributions.  Indices (multinomial, randperm) count from 1.
local M = {}

function M.install(torch)
  local C = require 'torch._C'
  local Tensor = torch.Tensor

  local options = require 'torch.options'
  local function fail(level, fmt, ...) error(fmt:format(...), level + 1) end

  -- f(...), its error raised at the caller's line outside the library
  local function engine(f, ...)
    local r = table.pack(pcall(f, ...))
    if not r[1] then options.error((tostring(r[2]):gsub('^[^:]*:%d+: ', ''))) end
    return table.unpack(r, 2, r.n)
  end

  -- The engine's own draws, called by the wrappers below when no generator is given: their
  -- errors name the public function (the engine names a function after the variable that
  -- called it, here a local) and point at the caller's line, not at this file.
  local function raise_as(who, ok, ...)
    if ok then return ... end
    local msg = tostring((...)):gsub('^[^:]*:%d+: ', '')
    msg = msg:gsub("^torch%.?[%w_]*: ", who .. ': '):gsub("^bad argument #(%d+) to '[^']*'", "bad argument #%1 to '" .. who .. "'")
    options.error(msg)
  end
  local function call_engine(who, f, ...) return raise_as(who, pcall(f, ...)) end

  local function is_opts(v)
    return type(v) == 'table' and getmetatable(v) == nil and not torch.is_tensor(v) and v[1] == nil
  end

  -- seed, offset of n counters: of gen (advancing it), or of the global stream
  local function stream(who, gen, n)
    if gen == nil then return C.rng_reserve(n) end
    if type(gen) ~= 'table' then fail(3, '%s: generator must be a torch.Generator, got %s', who, type(gen)) end
    local seed, offset = rawget(gen, 'seed'), rawget(gen, 'offset') or 0
    if math.type(seed) ~= 'integer' or math.type(offset) ~= 'integer' then
      fail(3, '%s: generator must be a torch.Generator (a table {seed = integer, offset = integer}), got seed %s', who, tostring(seed))
    end
    rawset(gen, 'offset', offset + n)
    return seed, offset
  end

  -- opts without generator and requires_grad; the generator; requires_grad
  local function split(opts)
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    local gen, rg = o.generator, o.requires_grad
    o.generator, o.requires_grad = nil, nil
    return o, gen, rg
  end

  local UNIFORM, NORMAL, RANDINT = 0, 1, 2

  -- each Philox counter gives 2 or 4 elements of a draw (src/philox.h)
  local function fill(who, t, dist, a, b, gen)
    local seed, offset = stream(who, gen, C.rng_counters(dist, t.dtype, t:numel()))
    return engine(C.random_fill_, t, dist, a, b, seed, offset)
  end

  -- torch[name](...) with a generator option: the tensor is made by make(args, opts) and
  -- filled by draw(t, gen); without one, the engine's own function
  local function creation(name, make, draw)
    local orig = torch[name]
    torch[name] = function(...)
      local n = select('#', ...)
      local last = n > 0 and select(n, ...) or nil
      if not is_opts(last) or last.generator == nil then return call_engine('torch.' .. name, orig, ...) end
      local args = table.pack(...)
      local o, gen, rg = split(last)
      args[n] = o
      local t = make(args, o)
      draw(t, gen)
      if rg then t:requires_grad_(true) end
      return t
    end
  end

  local function empty_of(args) return torch.empty(table.unpack(args, 1, args.n)) end
  creation('rand', empty_of, function(t, gen) fill('torch.rand', t, UNIFORM, 0, 1, gen) end)
  creation('randn', empty_of, function(t, gen) fill('torch.randn', t, NORMAL, 0, 1, gen) end)
  creation('rand_like', function(args) return torch.empty_like(table.unpack(args, 1, args.n)) end,
    function(t, gen) fill('torch.rand_like', t, UNIFORM, 0, 1, gen) end)
  creation('randn_like', function(args) return torch.empty_like(table.unpack(args, 1, args.n)) end,
    function(t, gen) fill('torch.randn_like', t, NORMAL, 0, 1, gen) end)

  local function check_range(who, low, high)
    if math.type(low) ~= 'integer' or math.type(high) ~= 'integer' then
      fail(3, '%s: low and high must be integers, got %s and %s', who, tostring(low), tostring(high))
    end
    if high <= low then fail(3, '%s: high (%d) must be greater than low (%d)', who, high, low) end
  end

  -- randint([low,] high, sizes [, opts])
  do
    local orig = torch.randint
    torch.randint = function(...)
      local n = select('#', ...)
      local last = n > 0 and select(n, ...) or nil
      if not is_opts(last) or last.generator == nil then return call_engine('torch.randint', orig, ...) end
      local args = table.pack(...)
      local o, gen, rg = split(last)
      local low, high, sizes
      if n == 4 then low, high, sizes = args[1], args[2], args[3] else low, high, sizes = 0, args[1], args[2] end
      check_range('torch.randint', low, high)
      if o.dtype == nil then o.dtype = 'int64' end
      local t = torch.empty(sizes, o)
      fill('torch.randint', t, RANDINT, low, high, gen)
      if rg then t:requires_grad_(true) end
      return t
    end
  end

  -- randint_like(t, [low,] high [, opts]): t's shape, dtype and device
  function torch.randint_like(t, a, b, opts)
    if not torch.is_tensor(t) then fail(2, 'torch.randint_like: expected a tensor, got %s', type(t)) end
    if is_opts(b) or b == nil then a, b, opts = 0, a, b end
    check_range('torch.randint_like', a, b)
    local o, gen, rg = split(opts or {})
    local out = torch.empty_like(t, o)
    fill('torch.randint_like', out, RANDINT, a, b, gen)
    if rg then out:requires_grad_(true) end
    return out
  end

  do
    local orig = torch.randperm
    torch.randperm = function(n, opts)
      if not is_opts(opts) or opts.generator == nil then return call_engine('torch.randperm', orig, n, opts) end
      if math.type(n) ~= 'integer' or n < 0 then fail(2, 'torch.randperm: n must be a non-negative integer, got %s', tostring(n)) end
      local o, gen, rg = split(opts)
      local seed, offset = stream('torch.randperm', gen, C.rng_counters(RANDINT, 'int64', n))
      local p = C.randperm_stream(n, seed, offset):to { dtype = o.dtype or 'int64', device = o.device or torch.get_default_device() }
      if rg then p:requires_grad_(true) end
      return p
    end
  end

  -- ---------------------------------------------------------------- in-place draws

  local function is_float(t) return torch.FLOAT_DTYPES[t.dtype] == true end

  -- opts may hold only the keys of allowed (and generator); else an error naming them
  local function only(who, opts, allowed)
    for k, v in pairs(opts) do
      local ok = k == 'generator'
      for _, a in ipairs(allowed) do ok = ok or k == a end
      if not ok then
        local known = { 'generator', table.unpack(allowed) }
        table.sort(known)
        options.error(('%s: unknown option %s = %s (the options are %s)'):format(who, tostring(k),
          options.show(v), table.concat(known, ', ')))
      end
    end
  end

  -- t:name(positional..., [opts]) with defaults; the options may also name the settings
  local function settings(who, args, names, defaults)
    local n = args.n
    local opts = {}
    if n > 0 and is_opts(args[n]) then opts = args[n]; n = n - 1 end
    only(who, opts, names)
    local v = {}
    for i, name in ipairs(names) do
      if i <= n and args[i] ~= nil then v[name] = args[i]
      elseif opts[name] ~= nil then v[name] = opts[name]
      else v[name] = defaults[i] end
    end
    return v, opts.generator
  end

  local orig_uniform, orig_normal = Tensor.uniform_, Tensor.normal_
  function Tensor.uniform_(t, ...)
    local args = table.pack(...)
    local v, gen = settings('uniform_', args, { 'from', 'to' }, { 0, 1 })
    if gen == nil then return call_engine('uniform_', orig_uniform, t, v.from, v.to) end
    return fill('uniform_', t, UNIFORM, v.from, v.to, gen)
  end

  function Tensor.normal_(t, ...)
    local args = table.pack(...)
    local v, gen = settings('normal_', args, { 'mean', 'std' }, { 0, 1 })
    if gen == nil then return call_engine('normal_', orig_normal, t, v.mean, v.std) end
    return fill('normal_', t, NORMAL, v.mean, v.std, gen)
  end

  -- uniform draws in float64 of t's shape and device (for the draws made from them)
  local function uniforms(who, t, gen)
    local u = torch.empty(t:size(), { dtype = 'float64', device = t.device })
    return fill(who, u, UNIFORM, 0, 1, gen)
  end

  -- exponential_(lambd=1): -log(1 - u) / lambd
  function Tensor.exponential_(t, ...)
    local v, gen = settings('exponential_', table.pack(...), { 'lambd' }, { 1 })
    if not is_float(t) then fail(2, 'exponential_: expected a floating point tensor, got %s', t.dtype) end
    if type(v.lambd) ~= 'number' or not (v.lambd > 0) then
      fail(2, 'exponential_: expects lambda > 0.0, but found lambda=%s', tostring(v.lambd))
    end
    local u = uniforms('exponential_', t, gen)
    return t:copy_(-(-u):log1p() / v.lambd)
  end

  local function check_p(who, p, level)
    if type(p) == 'number' then
      if not (p >= 0 and p <= 1) then fail(level + 1, '%s: p must be in [0, 1], got %s', who, tostring(p)) end
    elseif torch.is_tensor(p) then
      if not is_float(p) then fail(level + 1, '%s: p must be a floating point tensor, got %s', who, p.dtype) end
      if p:numel() > 0 and (p:lt(0) + p:gt(1) + p:ne(p)):any():item() then
        fail(level + 1, '%s: all the probabilities must be in [0, 1]', who)
      end
    else
      fail(level + 1, '%s: p must be a number or a tensor, got %s', who, type(p))
    end
  end

  -- bernoulli_(p=0.5): 1 with probability p (a number, or a tensor broadcast to t's shape)
  function Tensor.bernoulli_(t, ...)
    local v, gen = settings('bernoulli_', table.pack(...), { 'p' }, { 0.5 })
    check_p('bernoulli_', v.p, 2)
    local u = uniforms('bernoulli_', t, gen)
    local p = torch.is_tensor(v.p) and v.p:to { dtype = 'float64', device = t.device } or v.p
    return t:copy_(u:lt(p))
  end

  -- random_([from,] [to]): integers in [from, to), or [0, to), or [0, 2^mantissa] (2^53
  -- for int64, where PyTorch goes up to 2^63 - 1)
  function Tensor.random_(t, ...)
    local args = table.pack(...)
    local gen
    if args.n > 0 and is_opts(args[args.n]) then
      only('random_', args[args.n], {})
      gen = args[args.n].generator
      args.n = args.n - 1
    end
    local from, to
    if args.n >= 2 then from, to = args[1], args[2]
    elseif args.n == 1 then from, to = 0, args[1]
    else
      from = 0
      to = t.dtype == 'float32' and 2 ^ 24 + 1 or t.dtype == 'bool' and 2 or 2 ^ 53 + 1
    end
    if type(from) ~= 'number' or type(to) ~= 'number' then
      fail(2, 'random_: from and to must be numbers, got %s and %s', type(from), type(to))
    end
    return fill('random_', t, RANDINT, from, to, gen)
  end

  -- ---------------------------------------------------------------- torch.bernoulli, normal, multinomial

  -- bernoulli(p [, {generator=}]): 0/1 draws of p's shape and dtype with probabilities p;
  -- bernoulli(t, p_number): the same probability everywhere
  function torch.bernoulli(p, q, opts)
    if is_opts(q) then q, opts = nil, q end
    if not torch.is_tensor(p) then fail(2, 'torch.bernoulli: expected a tensor of probabilities, got %s', type(p)) end
    only('torch.bernoulli', opts or {}, {})
    local gen = opts and opts.generator
    if q ~= nil then return torch.empty_like(p):bernoulli_(q, { generator = gen }) end
    check_p('torch.bernoulli', p, 2)
    return torch.empty_like(p):bernoulli_(p:detach(), { generator = gen })
  end
  Tensor.bernoulli = function(t, ...) return torch.bernoulli(t, ...) end

  -- normal(mean, std [, size] [, {generator=}]): mean and std tensors (broadcast) or
  -- numbers (then size is needed); differentiable in mean and std, as PyTorch
  function torch.normal(mean, std, size, opts)
    if is_opts(size) then size, opts = nil, size end
    only('torch.normal', opts or {}, { 'dtype', 'device', 'requires_grad' })
    local o, gen = split(opts or {})
    local mt, st = torch.is_tensor(mean), torch.is_tensor(std)
    if not mt and type(mean) ~= 'number' then fail(2, 'torch.normal: mean must be a tensor or a number, got %s', type(mean)) end
    if not st and type(std) ~= 'number' then fail(2, 'torch.normal: std must be a tensor or a number, got %s', type(std)) end
    if st then
      if std:numel() > 0 and std:detach():lt(0):any():item() then fail(2, 'torch.normal: all std values must be >= 0') end
    elseif not (std >= 0) then
      fail(2, 'torch.normal: std must be >= 0, got %s', tostring(std))
    end
    local z
    if not mt and not st then
      if size == nil then fail(2, 'torch.normal: with a number mean and std, give the size: normal(mean, std, {2, 3})') end
      z = torch.empty(size, o)
      return fill('torch.normal', z, NORMAL, mean, std, gen)
    end
    local like = mt and st and (mean:detach() + std:detach()) or (mt and mean or std):detach()
    z = torch.empty(like:size(), { dtype = like.dtype, device = like.device })
    fill('torch.normal', z, NORMAL, 0, 1, gen)
    return z * std + mean
  end

  -- multinomial(probs, n [, {replacement=false, generator=}]): n category indices (from 1)
  -- per row of probs ([C] or [R, C] non-negative weights)
  function torch.multinomial(probs, n, opts)
    local who = 'torch.multinomial'
    if not torch.is_tensor(probs) then fail(2, '%s: expected a tensor of probabilities, got %s', who, type(probs)) end
    if math.type(n) ~= 'integer' then fail(2, '%s: num_samples must be an integer, got %s', who, tostring(n)) end
    opts = opts or {}
    if type(opts) ~= 'table' then fail(2, '%s: options must be a table, got %s', who, type(opts)) end
    only(who, opts, { 'replacement' })
    local replacement = opts.replacement and true or false
    local rows = probs:dim() == 2 and probs:size(1) or 1
    local cats = probs:dim() >= 1 and probs:size(probs:dim()) or 0
    local draws = rows * (replacement and math.max(n, 0) or cats)
    local seed, offset = stream(who, opts.generator, C.rng_counters(UNIFORM, 'float64', draws))
    return engine(C.multinomial, probs:detach(), n, replacement, seed, offset)
  end
  Tensor.multinomial = function(t, ...) return torch.multinomial(t, ...) end

  -- ---------------------------------------------------------------- Generator

  local G = getmetatable(torch.Generator())
  -- get_state() / set_state(s): the stream's position, {seed =, offset =}
  function G:get_state() return { seed = self.seed, offset = self.offset } end
  function G:set_state(s)
    if type(s) ~= 'table' or math.type(s.seed) ~= 'integer' or math.type(s.offset) ~= 'integer' then
      error('Generator:set_state: expected a table {seed = integer, offset = integer} from get_state()', 2)
    end
    self.seed, self.offset = s.seed, s.offset
    return self
  end
  -- seed(): a fresh seed from the global stream, set and returned
  function G:seed()
    local r = torch.randint(0, 2 ^ 53, { 1 }):item()
    self.seed, self.offset = math.tointeger(r), 0
    return self.seed
  end
end

return M
