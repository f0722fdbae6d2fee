-- torch.distributions: Normal, Categorical, Bernoulli, Uniform, Exponential,
-- MultivariateNormal and Independent, with PyTorch 1.13's sample / rsample / log_prob /
-- entropy / mean / stddev / variance, batch_shape and event_shape, argument validation, and
-- kl_divergence for the pairs PyTorch registers among them.  See doc/distributions.md.
--
--   local D = torch.distributions
--   local m = D.Categorical{logits = policy(state)}
--   local action = m:sample()               -- 1-based, as every class index in dplua
--   local loss = -m:log_prob(action) * reward
local torch = require 'torch'

local D = {}

local LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
local EPS = { float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16 }
local FMIN = { float32 = -3.4028234663852886e38, float64 = -1.7976931348623157e308 }

local options = require 'torch.options'
-- errors point at the caller's line outside the library
local function fail(fmt, ...) options.error(fmt:format(...)) end
local function is_float(t) return t.dtype == 'float32' or t.dtype == 'float64' end

-- a parameter as a floating point tensor (numbers become 0-D tensors of the default dtype,
-- or of like's dtype and device)
local function param(v, like)
  if torch.is_tensor(v) then return is_float(v) and v or v:to(torch.get_default_dtype()) end
  if type(v) ~= 'number' then return nil end
  return torch.tensor(v, { dtype = like and like.dtype or torch.get_default_dtype(), device = like and like.device })
end

local function shape_str(s)
  return '(' .. table.concat(s, ', ') .. (#s == 1 and ',' or '') .. ')'
end
local function totable(s)
  if s == nil then return {} end
  if type(s) == 'number' then return { s } end
  if torch.is_tensor(s) then return s:tolist() end
  return s.totable and s:totable() or s
end
local function concat(a, b)
  local r = { table.unpack(a) }
  for _, v in ipairs(b) do r[#r + 1] = v end
  return r
end

-- ------------------------------------------------------------------ the base class

local Distribution = torch.class('torch.distributions.Distribution')
D.Distribution = Distribution
Distribution.validate_args_default = true

-- torch.distributions.Distribution.set_default_validate_args(false) turns the checks off
function Distribution.set_default_validate_args(v) Distribution.validate_args_default = v end

function Distribution:__init(batch_shape, event_shape, validate_args)
  self.batch_shape = torch.Size(batch_shape or {})
  self.event_shape = torch.Size(event_shape or {})
  if validate_args == nil then validate_args = Distribution.validate_args_default end
  self._validate_args = validate_args
end

local function name_of(self) return (torch.typename(self) or 'Distribution'):match('[^.]+$') end

-- the check of one parameter's constraint (ok: a bool tensor or a boolean)
function Distribution:_check_param(name, t, ok, constraint)
  if not self._validate_args then return end
  local all = type(ok) == 'boolean' and ok or ok:all():item()
  if not all then
    fail('Expected parameter %s (Tensor of shape %s) of distribution %s to satisfy the constraint %s, but found invalid values:\n%s',
      name, shape_str(t:size():totable()), name_of(self), constraint, tostring(t))
  end
end

-- the check of a value given to log_prob (shape broadcastable, inside the support)
function Distribution:_validate_sample(value, ok, support)
  if not torch.is_tensor(value) then fail('%s: the value must be a tensor, got %s', name_of(self), type(value)) end
  if not self._validate_args then return end
  local want = concat(self.batch_shape:totable(), self.event_shape:totable())
  local got = value:size():totable()
  local ok_shape = pcall(torch.broadcast_shapes, got, want)
  if not ok_shape then
    fail('%s: the value has shape %s, which does not broadcast with the distribution\'s batch_shape .. event_shape %s',
      name_of(self), shape_str(got), shape_str(want))
  end
  if ok ~= nil and not ok:all():item() then
    fail('Expected value argument (Tensor of shape %s) to be within the support (%s) of the distribution %s, but found invalid values:\n%s',
      shape_str(got), support, name_of(self), tostring(value))
  end
end

-- sample_shape .. batch_shape .. event_shape
function Distribution:_extended_shape(sample_shape)
  return concat(concat(totable(sample_shape), self.batch_shape:totable()), self.event_shape:totable())
end

function Distribution:sample(sample_shape)
  return torch.no_grad(function() return self:rsample(sample_shape) end)
end

function Distribution:rsample()
  fail('%s: rsample is not implemented (the distribution has no reparametrised sampling)', name_of(self))
end

function Distribution:sample_n(n) return self:sample({ n }) end

function Distribution:entropy() fail('%s: entropy is not implemented', name_of(self)) end
function Distribution:log_prob() fail('%s: log_prob is not implemented', name_of(self)) end

-- methods through the class chain, and stddev, variance, mean and the other properties
-- read as fields (m.mean, m.stddev) through their _get_ functions
function Distribution:__index(k)
  local cls = getmetatable(self)
  local v = cls[k]
  if v ~= nil then return v end
  local getter = type(k) == 'string' and cls['_get_' .. k] or nil
  if getter then return getter(self) end
  return nil
end

function Distribution:_get_stddev() return self.variance:sqrt() end
function Distribution:_get_variance() return self.stddev ^ 2 end

function Distribution:perplexity() return self:entropy():exp() end

function Distribution:__tostring()
  local parts = {}
  for _, k in ipairs(self._param_names or {}) do
    local v = rawget(self, k)
    if v ~= nil then parts[#parts + 1] = ('%s: %s'):format(k, v:numel() == 1 and tostring(v:item()) or ('size ' .. tostring(v:size()))) end
  end
  return ('%s(%s)'):format(name_of(self), table.concat(parts, ', '))
end

-- ------------------------------------------------------------------ Normal

local Normal, Nparent = torch.class('torch.distributions.Normal', 'torch.distributions.Distribution')
D.Normal = Normal
Normal._param_names = { 'loc', 'scale' }

-- Normal(loc, scale [, {validate_args=}])
function Normal:__init(loc, scale, opts)
  local l, s = param(loc), nil
  s = param(scale, l)
  if l == nil then l = param(loc, s) end
  if l == nil or s == nil then fail('Normal: loc and scale must be numbers or tensors, got %s and %s', type(loc), type(scale)) end
  if not torch.is_tensor(loc) and torch.is_tensor(scale) then l = l:to(s.dtype) end
  self.loc, self.scale = torch.broadcast_tensors(l, s)
  Nparent.__init(self, self.loc:size():totable(), {}, opts and opts.validate_args)
  self:_check_param('loc', self.loc, self.loc:eq(self.loc), 'Real()')
  self:_check_param('scale', self.scale, self.scale:gt(0), 'GreaterThan(lower_bound=0.0)')
end

function Normal:_get_mean() return self.loc end
function Normal:_get_stddev() return self.scale end
function Normal:_get_variance() return self.scale ^ 2 end

function Normal:rsample(sample_shape)
  local shape = self:_extended_shape(sample_shape)
  local eps = torch.randn(shape, { dtype = self.loc.dtype, device = self.loc.device })
  return self.loc + eps * self.scale
end

function Normal:sample(sample_shape)
  return torch.no_grad(function()
    local shape = self:_extended_shape(sample_shape)
    return torch.normal(self.loc:expand(shape), self.scale:expand(shape))
  end)
end

function Normal:log_prob(value)
  self:_validate_sample(value)
  local var = self.scale ^ 2
  return -((value - self.loc) ^ 2) / (var * 2) - self.scale:log() - LOG_SQRT_2PI
end

function Normal:cdf(value)
  self:_validate_sample(value)
  return ((value - self.loc) / (self.scale * math.sqrt(2))):erf():add(1):mul(0.5)
end

function Normal:icdf(value)
  return self.loc + self.scale * (value * 2 - 1):erfinv() * math.sqrt(2)
end

function Normal:entropy() return self.scale:log() + (0.5 + LOG_SQRT_2PI) end

-- ------------------------------------------------------------------ Categorical

local Categorical, Cparent = torch.class('torch.distributions.Categorical', 'torch.distributions.Distribution')
D.Categorical = Categorical
Categorical._param_names = { 'probs', 'logits' }

-- a table of options {probs= | logits=, validate_args=} or the probs themselves
local function probs_or_logits(who, a, opts)
  if torch.is_tensor(a) then return a, nil, opts end
  if type(a) ~= 'table' then fail('%s: expected {probs = t} or {logits = t}, got %s', who, type(a)) end
  if (a.probs == nil) == (a.logits == nil) then
    fail('%s: either probs or logits must be given, but not both', who)
  end
  return param(a.probs), param(a.logits), a
end

-- Categorical{probs = p} or {logits = l}: classes 1 .. K over the last dim
function Categorical:__init(a, opts)
  local probs, logits
  probs, logits, opts = probs_or_logits('Categorical', a, opts)
  local t = probs or logits
  if t:dim() < 1 then fail('Categorical: %s must be at least one-dimensional', probs and 'probs' or 'logits') end
  local K = t:size(t:dim())
  if probs ~= nil then
    self.probs = probs / probs:sum(-1, true)
    self.logits = self.probs:clamp(EPS[probs.dtype], 1 - EPS[probs.dtype]):log()
  else
    self.logits = logits - logits:logsumexp(-1, true)
    self.probs = self.logits:softmax(-1)
  end
  self._num_events = K
  local batch = t:size():totable()
  table.remove(batch)
  Cparent.__init(self, batch, {}, opts and opts.validate_args)
  if probs ~= nil then
    self:_check_param('probs', probs, probs:ge(0) * probs:isfinite(), 'Simplex()')
  else
    self:_check_param('logits', logits, logits:eq(logits), 'IndependentConstraint(Real(), 1)')
  end
end

function Categorical:_get_param_shape() return (rawget(self, 'probs')):size() end
function Categorical:_get_mean()
  return torch.full(self.batch_shape:totable(), 0 / 0, { dtype = self.probs.dtype, device = self.probs.device })
end
Categorical._get_variance = Categorical._get_mean

function Categorical:sample(sample_shape)
  return torch.no_grad(function()
    local s = totable(sample_shape)
    local n = 1
    for _, v in ipairs(s) do n = n * v end
    local p2 = self.probs:reshape(-1, self._num_events)
    local draws = torch.multinomial(p2, n, { replacement = true })   -- (batch, n), 1-based
    return draws:t():reshape(concat(s, self.batch_shape:totable()))
  end)
end

function Categorical:log_prob(value)
  local ok
  if self._validate_args and torch.is_tensor(value) then
    ok = value:ge(1) * value:le(self._num_events) * value:eq(value:floor())
  end
  self:_validate_sample(value, ok, ('IntegerInterval(lower_bound=1, upper_bound=%d)'):format(self._num_events))
  value = value:long():unsqueeze(-1)
  local v, l = torch.broadcast_tensors(value, self.logits)
  v = v:narrow(-1, 1, 1)
  return l:gather(-1, v):squeeze(-1)
end

function Categorical:entropy()
  local l = self.logits:clamp(FMIN[self.logits.dtype])
  return -(l * self.probs):sum(-1)
end

-- enumerate_support([expand=true]): the classes 1 .. K, with the batch dims after them
function Categorical:enumerate_support(expand)
  local K = self._num_events
  local view = { K }
  for _ = 1, #self.batch_shape do view[#view + 1] = 1 end
  local v = torch.arange(1, K + 1, { device = self.probs.device }):reshape(view)
  if expand == false then return v end
  return v:expand(concat({ K }, self.batch_shape:totable()))
end

-- ------------------------------------------------------------------ Bernoulli

local Bernoulli, Bparent = torch.class('torch.distributions.Bernoulli', 'torch.distributions.Distribution')
D.Bernoulli = Bernoulli
Bernoulli._param_names = { 'probs', 'logits' }

-- Bernoulli{probs = p} or {logits = l}
function Bernoulli:__init(a, opts)
  local probs, logits
  probs, logits, opts = probs_or_logits('Bernoulli', a, opts)
  if probs ~= nil then
    self.probs = probs
    local e = EPS[probs.dtype]
    local p = probs:clamp(e, 1 - e)
    self.logits = p:log() - (-p):log1p()
  else
    self.logits = logits
    self.probs = logits:sigmoid()
  end
  Bparent.__init(self, (probs or logits):size():totable(), {}, opts and opts.validate_args)
  if probs ~= nil then
    self:_check_param('probs', probs, probs:ge(0) * probs:le(1), 'Interval(lower_bound=0.0, upper_bound=1.0)')
  else
    self:_check_param('logits', logits, logits:eq(logits), 'Real()')
  end
end

function Bernoulli:_get_mean() return self.probs end
function Bernoulli:_get_variance() return self.probs * (1 - self.probs) end

function Bernoulli:sample(sample_shape)
  return torch.no_grad(function()
    return torch.bernoulli(self.probs:expand(self:_extended_shape(sample_shape)))
  end)
end

-- -BCEWithLogits(logits, value)
local function bce_with_logits(l, v)
  return l:clamp(0) - l * v + (-l:abs()):exp():log1p()
end

function Bernoulli:log_prob(value)
  local ok = self._validate_args and torch.is_tensor(value) and (value:eq(0) + value:eq(1)) or nil
  self:_validate_sample(value, ok, 'Boolean()')
  local l, v = torch.broadcast_tensors(self.logits, value:to(self.logits.dtype))
  return -bce_with_logits(l, v)
end

function Bernoulli:entropy() return bce_with_logits(self.logits, self.probs) end

function Bernoulli:enumerate_support(expand)
  local view = { 2 }
  for _ = 1, #self.batch_shape do view[#view + 1] = 1 end
  local v = torch.tensor({ 0, 1 }, { dtype = self.probs.dtype, device = self.probs.device }):reshape(view)
  if expand == false then return v end
  return v:expand(concat({ 2 }, self.batch_shape:totable()))
end

-- ------------------------------------------------------------------ Uniform

local Uniform, Uparent = torch.class('torch.distributions.Uniform', 'torch.distributions.Distribution')
D.Uniform = Uniform
Uniform._param_names = { 'low', 'high' }

-- Uniform(low, high): the half-open interval [low, high)
function Uniform:__init(low, high, opts)
  local lo = param(low, torch.is_tensor(high) and high or nil)
  local hi = param(high, lo)
  if lo == nil or hi == nil then fail('Uniform: low and high must be numbers or tensors, got %s and %s', type(low), type(high)) end
  self.low, self.high = torch.broadcast_tensors(lo, hi)
  Uparent.__init(self, self.low:size():totable(), {}, opts and opts.validate_args)
  self:_check_param('low', self.low, self.low:lt(self.high), 'LessThan(upper_bound=high)')
end

function Uniform:_get_mean() return (self.high + self.low) / 2 end
function Uniform:_get_stddev() return (self.high - self.low) / 12 ^ 0.5 end
function Uniform:_get_variance() return (self.high - self.low) ^ 2 / 12 end

function Uniform:rsample(sample_shape)
  local u = torch.rand(self:_extended_shape(sample_shape), { dtype = self.low.dtype, device = self.low.device })
  return self.low + u * (self.high - self.low)
end

function Uniform:log_prob(value)
  local ok = self._validate_args and torch.is_tensor(value) and value:ge(self.low) * value:lt(self.high) or nil
  self:_validate_sample(value, ok, 'Interval(lower_bound=low, upper_bound=high)')
  local lb = self.low:le(value):to(self.low.dtype)
  local ub = self.high:gt(value):to(self.low.dtype)
  return (lb * ub):log() - (self.high - self.low):log()
end

function Uniform:cdf(value)
  return ((value - self.low) / (self.high - self.low)):clamp(0, 1)
end

function Uniform:entropy() return (self.high - self.low):log() end

-- ------------------------------------------------------------------ Exponential

local Exponential, Eparent = torch.class('torch.distributions.Exponential', 'torch.distributions.Distribution')
D.Exponential = Exponential
Exponential._param_names = { 'rate' }

function Exponential:__init(rate, opts)
  self.rate = param(rate)
  if self.rate == nil then fail('Exponential: rate must be a number or a tensor, got %s', type(rate)) end
  Eparent.__init(self, self.rate:size():totable(), {}, opts and opts.validate_args)
  self:_check_param('rate', self.rate, self.rate:gt(0), 'GreaterThan(lower_bound=0.0)')
end

function Exponential:_get_mean() return self.rate:reciprocal() end
function Exponential:_get_stddev() return self.rate:reciprocal() end
function Exponential:_get_variance() return self.rate ^ -2 end

function Exponential:rsample(sample_shape)
  local e = torch.empty(self:_extended_shape(sample_shape), { dtype = self.rate.dtype, device = self.rate.device })
  return e:exponential_() / self.rate
end

function Exponential:log_prob(value)
  local ok = self._validate_args and torch.is_tensor(value) and value:ge(0) or nil
  self:_validate_sample(value, ok, 'GreaterThanEq(lower_bound=0.0)')
  return self.rate:log() - self.rate * value
end

function Exponential:cdf(value) return 1 - (-self.rate * value):exp() end
function Exponential:entropy() return 1 - self.rate:log() end

-- ------------------------------------------------------------------ MultivariateNormal

local MVN, Mparent = torch.class('torch.distributions.MultivariateNormal', 'torch.distributions.Distribution')
D.MultivariateNormal = MVN
MVN._param_names = { 'loc' }

-- L^-1 b for a lower triangular L (..., n, n) and b (..., n)
local function tril_solve_vec(L, b)
  return torch.linalg.solve_triangular(L, b:unsqueeze(-1), { upper = false }):squeeze(-1)
end

-- MultivariateNormal(loc, {covariance_matrix= | precision_matrix= | scale_tril=, validate_args=})
function MVN:__init(loc, opts)
  opts = opts or {}
  if not torch.is_tensor(loc) or loc:dim() < 1 then fail('MultivariateNormal: loc must be at least one-dimensional') end
  local given = 0
  for _, k in ipairs { 'covariance_matrix', 'precision_matrix', 'scale_tril' } do
    if opts[k] ~= nil then given = given + 1 end
  end
  if given ~= 1 then
    fail('MultivariateNormal: exactly one of covariance_matrix, precision_matrix or scale_tril may be specified')
  end
  local m = opts.scale_tril or opts.covariance_matrix or opts.precision_matrix
  if not torch.is_tensor(m) or m:dim() < 2 or m:size(-1) ~= m:size(-2) then
    fail('MultivariateNormal: the matrix must be at least two-dimensional and square, got shape %s',
      torch.is_tensor(m) and shape_str(m:size():totable()) or type(m))
  end
  local n = loc:size(-1)
  if m:size(-1) ~= n then fail('MultivariateNormal: loc has %d elements but the matrix is %dx%d', n, m:size(-1), m:size(-1)) end
  local bm = m:size():totable(); table.remove(bm); table.remove(bm)
  local bl = loc:size():totable(); table.remove(bl)
  local batch = torch.broadcast_shapes(bm, bl):totable()
  Mparent.__init(self, batch, { n }, opts.validate_args)
  self.loc = loc:expand(concat(batch, { n }))
  if opts.scale_tril ~= nil then
    self:_check_param('scale_tril', m, m:diagonal(0, -2, -1):gt(0), 'LowerCholesky()')
    self._unbroadcasted_scale_tril = m:tril()
  elseif opts.covariance_matrix ~= nil then
    self:_check_param('covariance_matrix', m, (m - m:transpose(-1, -2)):abs():le(1e-6 * (m:abs() + 1)), 'PositiveDefinite()')
    self._unbroadcasted_scale_tril = torch.linalg.cholesky(m)
    self.covariance_matrix = m:expand(concat(batch, { n, n }))
  else
    -- the precision's inverse through its Cholesky factor, as PyTorch
    local Lp = torch.linalg.cholesky(m)
    local eye = torch.eye(n, { dtype = m.dtype, device = m.device })
    local Linv = torch.linalg.solve_triangular(Lp, eye:expand(m:size():totable()), { upper = false })
    self._unbroadcasted_scale_tril = torch.linalg.cholesky(Linv:transpose(-1, -2):matmul(Linv))
    self.precision_matrix = m:expand(concat(batch, { n, n }))
  end
end

function MVN:_get_scale_tril()
  local n = self.event_shape[1]
  return self._unbroadcasted_scale_tril:expand(concat(self.batch_shape:totable(), { n, n }))
end
function MVN:_get_covariance_matrix()
  local L = self._unbroadcasted_scale_tril
  return L:matmul(L:transpose(-1, -2)):expand(concat(self.batch_shape:totable(), { self.event_shape[1], self.event_shape[1] }))
end
function MVN:_get_precision_matrix() return torch.linalg.inv(self.covariance_matrix) end
function MVN:_get_mean() return self.loc end
function MVN:_get_variance()
  return (self._unbroadcasted_scale_tril ^ 2):sum(-1):expand(concat(self.batch_shape:totable(), { self.event_shape[1] }))
end

function MVN:rsample(sample_shape)
  local shape = self:_extended_shape(sample_shape)
  local eps = torch.randn(shape, { dtype = self.loc.dtype, device = self.loc.device })
  return self.loc + self._unbroadcasted_scale_tril:matmul(eps:unsqueeze(-1)):squeeze(-1)
end

local function half_log_det(L) return L:diagonal(0, -2, -1):log():sum(-1) end

function MVN:log_prob(value)
  self:_validate_sample(value)
  local diff = value - self.loc
  local L = self._unbroadcasted_scale_tril
  local bd = diff:size():totable(); table.remove(bd)
  local bL = L:size():totable(); table.remove(bL); table.remove(bL)
  local batch = torch.broadcast_shapes(bd, bL):totable()
  local n = self.event_shape[1]
  local Lb = L:expand(concat(batch, { n, n }))
  local db = diff:expand(concat(batch, { n }))
  local M = (tril_solve_vec(Lb, db) ^ 2):sum(-1)
  return -0.5 * (M + n * math.log(2 * math.pi)) - half_log_det(L)
end

function MVN:entropy()
  local n = self.event_shape[1]
  local H = half_log_det(self._unbroadcasted_scale_tril) + 0.5 * n * (1 + math.log(2 * math.pi))
  if #self.batch_shape == 0 then return H end
  return H:expand(self.batch_shape:totable())
end

-- ------------------------------------------------------------------ Independent

local Independent, Iparent = torch.class('torch.distributions.Independent', 'torch.distributions.Distribution')
D.Independent = Independent

-- Independent(base, reinterpreted_batch_ndims): the last batch dims of base become event dims
function Independent:__init(base, ndims, opts)
  if not torch.isinstance(base, 'torch.distributions.Distribution') then
    fail('Independent: base_distribution must be a distribution, got %s', torch.type(base))
  end
  local batch = base.batch_shape:totable()
  if math.type(ndims) ~= 'integer' or ndims < 0 or ndims > #batch then
    fail('Independent: expected 0 <= reinterpreted_batch_ndims <= len(base.batch_shape) = %d, got %s', #batch, tostring(ndims))
  end
  local event = {}
  for i = #batch - ndims + 1, #batch do event[#event + 1] = batch[i] end
  for _ = 1, ndims do table.remove(batch) end
  self.base_dist, self.reinterpreted_batch_ndims = base, ndims
  Iparent.__init(self, batch, concat(event, base.event_shape:totable()), opts and opts.validate_args)
end

local function sum_rightmost(t, n)
  if n == 0 then return t end
  return t:reshape(concat((function()
    local s = t:size():totable()
    for _ = 1, n do table.remove(s) end
    return s
  end)(), { -1 })):sum(-1)
end

function Independent:_get_mean() return self.base_dist.mean end
function Independent:_get_stddev() return self.base_dist.stddev end
function Independent:_get_variance() return self.base_dist.variance end
function Independent:sample(s) return self.base_dist:sample(s) end
function Independent:rsample(s) return self.base_dist:rsample(s) end
function Independent:log_prob(value) return sum_rightmost(self.base_dist:log_prob(value), self.reinterpreted_batch_ndims) end
function Independent:entropy() return sum_rightmost(self.base_dist:entropy(), self.reinterpreted_batch_ndims) end
function Independent:__tostring()
  return ('Independent(%s, %d)'):format(tostring(self.base_dist), self.reinterpreted_batch_ndims)
end

-- ------------------------------------------------------------------ kl_divergence

local KL = {}

local function kl_key(p, q) return (torch.typename(p) or '?') .. '|' .. (torch.typename(q) or '?') end
-- register_kl(P, Q, fn): fn(p, q) for distributions of classes P and Q
function D.register_kl(P, Q, fn)
  KL[(torch.typename(P) or P.__typename or tostring(P)) .. '|' .. (torch.typename(Q) or Q.__typename or tostring(Q))] = fn
end
local function reg(P, Q, fn) KL['torch.distributions.' .. P .. '|torch.distributions.' .. Q] = fn end

-- kl_divergence(p, q): KL(p || q), batch-shaped
function D.kl_divergence(p, q)
  local fn = KL[kl_key(p, q)]
  if fn == nil then
    error(('kl_divergence: no KL(p || q) is implemented for p = %s and q = %s'):format(name_of(p), name_of(q)), 2)
  end
  return fn(p, q)
end

reg('Normal', 'Normal', function(p, q)
  local var_ratio = (p.scale / q.scale) ^ 2
  local t1 = ((p.loc - q.loc) / q.scale) ^ 2
  return (var_ratio + t1 - 1 - var_ratio:log()) * 0.5
end)

reg('Categorical', 'Categorical', function(p, q)
  local t = p.probs * (p.logits - q.logits)
  t = torch.where(q.probs:eq(0):expand_as(t), torch.full({}, math.huge, { dtype = t.dtype, device = t.device }), t)
  t = torch.where(p.probs:eq(0):expand_as(t), torch.zeros({}, { dtype = t.dtype, device = t.device }), t)
  return t:sum(-1)
end)

reg('Bernoulli', 'Bernoulli', function(p, q)
  local function sp(x) return x:clamp(0) + (-x:abs()):exp():log1p() end   -- softplus
  local t1 = p.probs * (sp(-q.logits) - sp(-p.logits))
  local inf = torch.full({}, math.huge, { dtype = t1.dtype, device = t1.device })
  t1 = torch.where(q.probs:eq(0), inf, t1)
  t1 = torch.where(p.probs:eq(0), torch.zeros_like(t1), t1)
  local t2 = (1 - p.probs) * (sp(q.logits) - sp(p.logits))
  t2 = torch.where(q.probs:eq(1), inf, t2)
  t2 = torch.where(p.probs:eq(1), torch.zeros_like(t2), t2)
  return t1 + t2
end)

reg('Uniform', 'Uniform', function(p, q)
  local r = ((q.high - q.low) / (p.high - p.low)):log()
  local outside = q.low:gt(p.low) + q.high:lt(p.high)
  return torch.where(outside, torch.full({}, math.huge, { dtype = r.dtype, device = r.device }), r)
end)

reg('Exponential', 'Exponential', function(p, q)
  local rate_ratio = q.rate / p.rate
  return rate_ratio - rate_ratio:log() - 1
end)

reg('MultivariateNormal', 'MultivariateNormal', function(p, q)
  local n = p.event_shape[1]
  if q.event_shape[1] ~= n then
    error('kl_divergence: KL-divergence between two MultivariateNormals with different event shapes cannot be computed', 3)
  end
  local Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
  local batch = torch.broadcast_shapes(p.batch_shape:totable(), q.batch_shape:totable()):totable()
  local hq_minus_hp = half_log_det(Lq) - half_log_det(Lp)
  local Lqb = Lq:expand(concat(batch, { n, n }))
  local Lpb = Lp:expand(concat(batch, { n, n }))
  local term2 = (torch.linalg.solve_triangular(Lqb, Lpb, { upper = false }) ^ 2):sum(-1):sum(-1)
  local diff = (q.loc - p.loc):expand(concat(batch, { n }))
  local term3 = (tril_solve_vec(Lqb, diff) ^ 2):sum(-1)
  return hq_minus_hp + (term2 + term3 - n) * 0.5
end)

reg('Independent', 'Independent', function(p, q)
  if p.reinterpreted_batch_ndims ~= q.reinterpreted_batch_ndims then
    error('kl_divergence: Independent distributions with different reinterpreted_batch_ndims are not supported', 3)
  end
  return sum_rightmost(D.kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
end)

reg('Uniform', 'Normal', function(p, q)
  local common = p.high - p.low
  local t1 = (q.scale * math.sqrt(2 * math.pi) / common):log()
  local t2 = common ^ 2 / 12
  local t3 = ((p.high + p.low - q.loc * 2) / 2) ^ 2
  return t1 + (t2 + t3) * 0.5 / q.scale ^ 2
end)

reg('Exponential', 'Normal', function(p, q)
  local var_normal = q.scale ^ 2
  local rate_sqr = p.rate ^ 2
  local t1 = 0.5 * (rate_sqr * var_normal * 2 * math.pi):log()
  local t2 = rate_sqr:reciprocal()
  local t3 = q.loc / p.rate
  local t4 = q.loc ^ 2 * 0.5
  return t1 - 1 + (t2 - t3 + t4) / var_normal
end)

return D
