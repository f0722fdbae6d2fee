-- Ops whose results once differed from PyTorch 1.13's with no error, against PyTorch:
-- spec/fixtures/conformance_fixes.lua (written by spec/fixtures/make_conformance_fixes.py)
-- holds each case's inputs and PyTorch's outputs (dtype, shape, values), gradients, or the
-- message of the error PyTorch raises; CALLS below is the dplua call of each.  Then the
-- results that must be new tensors (PyTorch returns a copy, never the input itself).
local torch = require 'torch'
local F = torch.nn.functional
local check = dofile('spec/helpers/check.lua')
local flat, same_number = check.flat, check.same_number

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'spec'
local cases = dofile(here .. '/fixtures/conformance_fixes.lua')

-- lstsq's fields in PyTorch's order
local function lstsq(...)
  local r = torch.linalg.lstsq(...)
  return r.solution, r.residuals, r.rank, r.singular_values
end

local CALLS = {
  -- 1. dtypes of integer and bool inputs
  ['addmm int64 fractional'] = function(c, a, m) return torch.addmm(c, a, m, { alpha = 0.6, beta = 0.2 }) end,
  ['addmm int64 negative fractional'] = function(c, a, m) return torch.addmm(c, a, m, { alpha = -1.5, beta = -2.7 }) end,
  ['addmm int64'] = function(c, a, m) return c:addmm(a, m, { alpha = 2, beta = 3 }) end,
  ['addmv int64 fractional'] = function(c, a, v) return torch.addmv(c, a, v, { alpha = 2.9, beta = -1.2 }) end,
  ['addbmm int64 fractional'] = function(c, x, y) return torch.addbmm(c, x, y, { beta = 0.6, alpha = -2.2 }) end,
  ['baddbmm int64 fractional'] = function(c, x, y) return c:baddbmm(x, y, { beta = 1.9, alpha = 0.2 }) end,
  ['addr bool'] = function(c, u, v) return torch.addr(c, u, v) end,
  ['addr bool beta alpha'] = function(c, u, v) return torch.addr(c, u, v, { beta = 3, alpha = 2 }) end,
  ['addr bool beta 0'] = function(c, u, v) return c:addr(u, v, { beta = 0 }) end,
  ['addr bool alpha 0'] = function(c, u, v) return torch.addr(c, u, v, { alpha = 0 }) end,
  ['addr int64'] = function(c, u, v) return torch.addr(c, u, v, { beta = -2, alpha = 3 }) end,
  ['addr int64 fractional alpha'] = function(c, u, v) return torch.addr(c, u, v, { alpha = 0.5 }) end,
  ['addr bool fractional beta'] = function(c, u, v) return torch.addr(c, u, v, { beta = 0.5 }) end,
  ['addr float fractional'] = function(c, u, v) return torch.addr(c, u, v, { alpha = 0.5 }) end,
  ['hardtanh int64 half'] = function(t) return F.hardtanh(t, { min_val = -0.5, max_val = 0.5 }) end,
  ['hardtanh int64 fractional'] = function(t) return F.hardtanh(t, -2.5, 3.5) end,
  ['hardtanh int64'] = function(t) return F.hardtanh(t) end,
  ['hardtanh bool'] = function(t) return F.hardtanh(t) end,
  -- 3. linalg
  ['linalg.norm nil options'] = function(t) return torch.linalg.norm(t, nil, { keepdim = false }) end,
  ['linalg.norm ord options'] = function(t) return torch.linalg.norm(t, 0.5, { keepdim = true }) end,
  ['linalg.norm matrix options'] = function(t) return torch.linalg.norm(t, nil, { keepdim = true }) end,
  ['linalg.norm dim options'] = function(t) return torch.linalg.norm(t, 1, 2, { keepdim = true }) end,
  ['linalg.vector_norm options'] = function(t) return torch.linalg.vector_norm(t, 3, { keepdim = true }) end,
  ['linalg.matrix_norm options'] = function(t) return torch.linalg.matrix_norm(t, 'nuc', { keepdim = true }) end,
  ['linalg.pinv hermitian'] = function(t) return torch.linalg.pinv(t, { hermitian = true }) end,
  ['linalg.pinv hermitian float32 batched'] = function(t) return torch.linalg.pinv(t, { hermitian = true }) end,
  ['linalg.pinv hermitian singular'] = function(t) return torch.linalg.pinv(t, { hermitian = true }) end,
  ['linalg.pinv hermitian atol'] = function(t) return torch.linalg.pinv(t, { atol = 1.0, hermitian = true }) end,
  ['linalg.lstsq default'] = function(a, b) return lstsq(a, b) end,
  ['linalg.lstsq vector gelsd'] = function(a, b) return lstsq(a, b, { driver = 'gelsd' }) end,
  ['linalg.lstsq batched float32 gelss'] = function(a, b) return lstsq(a, b, { driver = 'gelss' }) end,
  ['linalg.lstsq rank deficient gelsd'] = function(a, b) return lstsq(a, b, { driver = 'gelsd' }) end,
  ['linalg.lstsq bad driver'] = function(a, b) return lstsq(a, b, { driver = 'gelsx' }) end,
  ['linalg.cross length 1'] = function(a, b) return torch.linalg.cross(a, b) end,
  ['linalg.cross dims'] = function(a, b) return torch.linalg.cross(a, b) end,
  ['linalg.cross broadcast'] = function(a, b) return torch.linalg.cross(a, b) end,
  ['linalg.det empty gradient'] = function(t) return torch.linalg.det(t) end,
  ['linalg.det gradient'] = function(t) return t:det() end,
  -- 4. quantile shapes, isclose tolerances
  ['quantile 0-dim keepdim midpoint'] = function(t) return torch.quantile(t, 0.5, { dim = 1, keepdim = true, interpolation = 'midpoint' }) end,
  ['nanquantile 0-dim keepdim midpoint'] = function(t)
    return t:nanquantile(0.5, { dim = -1, keepdim = true, interpolation = 'midpoint' })
  end,
  ['quantile 0-dim q tensor keepdim'] = function(t, q) return torch.quantile(t, q, 1, true) end,
  ['quantile keepdim midpoint'] = function(t) return torch.quantile(t, 0.5, { dim = 2, keepdim = true, interpolation = 'midpoint' }) end,
  ['isclose negative rtol'] = function(a, b) return torch.isclose(a, b, { rtol = -0.4 }) end,
  ['isclose negative atol'] = function(a, b) return a:isclose(b, { atol = -0.4 }) end,
  ['isclose NaN rtol'] = function(a, b) return torch.isclose(a, b, 0 / 0) end,
  ['isclose zero tolerances'] = function(a, b) return torch.isclose(a, b, 0, 0) end,
  -- 7. pooling arguments
  ['avg_pool2d positional'] = function(t) return F.avg_pool2d(t, 3, 1, 1, true, false, 2) end,
  ['avg_pool2d positional pairs'] = function(t) return F.avg_pool2d(t, { 4, 4 }, { 2, 3 }, 1, true, false, 2) end,
  ['avg_pool2d one-element padding'] = function(t) return F.avg_pool2d(t, { 3, 3 }, { 1, 1 }, { 1 }, true, false) end,
  ['avg_pool2d empty stride negative divisor'] = function(t) return F.avg_pool2d(t, { 2, 2 }, {}, { 0 }, false, true, -2) end,
  ['avg_pool2d options'] = function(t)
    return F.avg_pool2d(t, { kernel_size = 3, stride = 2, padding = 1, count_include_pad = false })
  end,
  ['max_pool2d kernel_size in options'] = function(t) return F.max_pool2d(t, { kernel_size = 2, stride = 1 }) end,
  ['max_pool2d positional indices'] = function(t) return F.max_pool2d(t, 3, 2, 1, 1, true, true) end,
  ['max_pool2d positional dilation'] = function(t) return F.max_pool2d(t, 2, 1, 0, 2) end,
  ['max_pool2d positional and options'] = function(t) return F.max_pool2d(t, 3, 2, { ceil_mode = true, dilation = { 1, 2 } }) end,
  ['max_pool1d positional'] = function(t) return F.max_pool1d(t, 3, 2, 1, 2, true) end,
  ['max_pool1d kernel_size in options'] = function(t) return F.max_pool1d(t, { kernel_size = 3, stride = 2, ceil_mode = true }) end,
  ['avg_pool1d positional'] = function(t) return F.avg_pool1d(t, 3, 2, 1, true, false) end,
  ['avg_pool1d options'] = function(t) return F.avg_pool1d(t, { 6 }, { stride = { 3 }, padding = { 2 }, ceil_mode = true }) end,
  -- 8. batch_norm's options table after positional arguments
  ['batch_norm options after weight and bias'] = function(x, m, v, w, b)
    return F.batch_norm(x, m, v, w, b, { training = true, momentum = 0.5, eps = 0.6 }), m, v
  end,
  ['batch_norm eval options after weight and bias'] = function(x, m, v, w, b)
    return F.batch_norm(x, m, v, w, b, { training = false, momentum = -1.2 }), m, v
  end,
  ['batch_norm positional'] = function(x, m, v, w, b) return F.batch_norm(x, m, v, w, b, true, 0.3, 0.01), m, v end,
  ['batch_norm weight in options'] = function(x, m, v, w) return F.batch_norm(x, m, v, { weight = w, training = true }), m, v end,
  -- addcmul's dtype, renorm's and copysign's gradients
  ['addcmul int64 fractional'] = function(t, a, c) return torch.addcmul(t, a, c, { value = 3.14 }) end,
  ['addcmul int64 negative fractional'] = function(t, a, c) return t:addcmul(a, c, { value = -3.7 }) end,
  ['addcmul mixed'] = function(t, a, c) return torch.addcmul(t, a, c, { value = 0.5 }) end,
  ['addcmul bool'] = function(t, a, c) return torch.addcmul(t, a, c) end,
  ['renorm p2 gradient'] = function(t) return torch.renorm(t, 2, 2, 0.5) end,
  ['renorm p1 gradient'] = function(t) return t:renorm(1, 3, 3.0) end,
  ['renorm inf gradient'] = function(t) return torch.renorm(t, math.huge, 1, 2.0) end,
  ['renorm p0.5 last dim gradient'] = function(t) return torch.renorm(t, 0.5, -1, 0.5) end,
  ['renorm 1-D'] = function(t) return torch.renorm(t, 2, 1, 1.0) end,
  ['copysign gradient'] = function(a, c) return torch.copysign(a, c) end,
  ['copysign broadcast gradient'] = function(a, c) return a:copysign(c) end,
  -- cov's weights
  ['cov float fweights'] = function(x, w) return torch.cov(x, { fweights = w }) end,
  ['cov fweights count'] = function(x, w) return torch.cov(x, { fweights = w }) end,
  ['cov negative fweights'] = function(x, w) return torch.cov(x, { fweights = w }) end,
  ['cov int64 aweights'] = function(x, w) return torch.cov(x, { aweights = w }) end,
  ['cov aweights count'] = function(x, w) return torch.cov(x, { aweights = w }) end,
  ['cov negative aweights'] = function(x, w) return torch.cov(x, { aweights = w }) end,
  ['cov weights'] = function(x, f, a) return torch.cov(x, { fweights = f, aweights = a }) end,
}
-- vector_norm gradient at zero ord ORD
for name in pairs(cases) do
  local o = name:match('^vector_norm gradient at zero ord (%S+)$')
  if o then
    local ord = o == 'inf' and math.huge or tonumber(o)
    CALLS[name] = function(t) return torch.linalg.vector_norm(t, ord, 2) end
  end
end
CALLS['linalg.norm gradient of zeros'] = function(t) return torch.linalg.norm(t, nil, { keepdim = false }) end
CALLS['matrix_norm fro gradient of zeros'] = function(t) return torch.linalg.matrix_norm(t) end
-- linspace int64 START END STEPS
for name in pairs(cases) do
  local a, b, n = name:match('^linspace int64 (%S+) (%S+) (%d+)$')
  if a then
    CALLS[name] = function() return torch.linspace(tonumber(a), tonumber(b), math.tointeger(tonumber(n)), { dtype = 'int64' }) end
  end
end
for _, d in ipairs({ 'gels', 'gelsy', 'gelsd', 'gelss' }) do
  CALLS['linalg.lstsq tall ' .. d] = function(a, b) return lstsq(a, b, { driver = d }) end
  CALLS['linalg.lstsq wide ' .. d] = function(a, b) return lstsq(a, b, nil, { driver = d }) end
end

local function input_of(spec, grad)
  local t
  if type(spec.values) == 'table' and #spec.values == 0 then
    t = torch.zeros(spec.shape or { 0 }, { dtype = spec.dtype })
  else
    t = torch.tensor(spec.values, { dtype = spec.dtype })
    if spec.shape then t = t:reshape(spec.shape) end
  end
  if grad and torch.FLOAT_DTYPES[spec.dtype] then t:requires_grad_(true) end
  return t
end

-- got (a tensor or nil) against want (a fixture output, or 'none')
local function same(what, got, want, tol)
  if want == 'none' then
    assert(got == nil, what .. ': expected nil (PyTorch: None), got ' .. tostring(got))
    return
  end
  assert(torch.is_tensor(got), what .. ': expected a tensor, got ' .. tostring(got))
  assert.are.equal(want.dtype, got.dtype, what .. ': dtype')
  assert.are.same(want.shape, got:size():totable(), what .. ': shape')
  local g = flat(got:detach():reshape(-1):tolist())
  assert.are.equal(#want.values, #g, what .. ': element count')
  for i, w in ipairs(want.values) do
    assert(same_number(g[i], w, tol), ('%s element %d: dplua %s, PyTorch %s'):format(what, i, tostring(g[i]), tostring(w)))
  end
end

describe('conformance fixes against PyTorch', function()
  local names = {}
  for name in pairs(cases) do names[#names + 1] = name end
  table.sort(names)
  it('every fixture case has a call and every call a case', function()
    for _, name in ipairs(names) do assert(CALLS[name], 'no call for ' .. name) end
    for name in pairs(CALLS) do assert(cases[name], 'no fixture case for ' .. name) end
  end)
  for _, name in ipairs(names) do
    local c = cases[name]
    it(name, function()
      local inputs = {}
      for i, spec in ipairs(c.inputs) do inputs[i] = input_of(spec, c.grads ~= nil) end
      if c.error then
        local ok, err = pcall(CALLS[name], table.unpack(inputs))
        assert(not ok, ('%s: dplua accepted what PyTorch refuses (%s)'):format(name, c.error))
        assert(tostring(err):find('%S'), name .. ': an empty error message')
        return
      end
      local results = table.pack(CALLS[name](table.unpack(inputs)))
      assert.are.equal(#c.outputs, results.n, name .. ': number of results')
      for j, want in ipairs(c.outputs) do
        local tol = want ~= 'none' and want.dtype == 'float32' and 1e-5 or 1e-10
        same(('%s (result %d)'):format(name, j), results[j], want, tol)
      end
      if c.grads then
        local loss
        for j = 1, results.n do
          local r = results[j]
          local gout = torch.arange(1, r:numel() + 1, { dtype = r.dtype }):cos():reshape(r:size())
          local term = (r * gout):sum()
          loss = loss and loss + term or term
        end
        local leaves = {}
        for _, t in ipairs(inputs) do if t.requires_grad then leaves[#leaves + 1] = t end end
        loss:backward()
        for j, want in ipairs(c.grads) do
          same(('%s (gradient %d)'):format(name, j), leaves[j].grad, want, 1e-10)
        end
      end
    end)
  end
end)

describe('results that are new tensors, as PyTorch', function()
  local function fresh(what, r, t, want)
    assert(torch.is_tensor(r), what .. ': expected a tensor')
    assert(r:data_ptr() ~= t:data_ptr(), what .. ': the result shares memory with the input')
    assert.are.same(want:size():totable(), r:size():totable(), what .. ': shape')
    assert.is_true(r:equal(want), what .. ': values')
    -- writing into the result leaves the input alone
    local before = t:clone()
    r:fill_(7)
    assert.is_true(t:equal(before), what .. ': writing into the result changed the input')
  end
  local a = torch.tensor({ { 1.5, -2 }, { 3, 4 }, { -5, 6 } })
  it('flip, roll, repeat_interleave, diff, pad and interpolate that change nothing', function()
    fresh('flip with no dims', torch.flip(a, { dims = {} }), a, a)
    fresh('flip of size-1 dims', torch.flip(a:narrow(1, 1, 1), { 1 }), a, a:narrow(1, 1, 1))
    fresh('roll by 0', torch.roll(a, 0, 1), a, a)
    fresh('roll by a whole turn', a:roll({ 3, 2 }, { 1, 2 }), a, a)
    fresh('roll flattened by 0', torch.roll(a, 0), a, a)
    local one = torch.tensor({ 2.5 })
    fresh('repeat_interleave of one element', torch.repeat_interleave(one, { repeats = 2 }), one, torch.tensor({ 2.5, 2.5 }))
    fresh('repeat_interleave once', a:repeat_interleave(1, 1), a, a)
    fresh('diff with n = 0', torch.diff(a, 0, 1), a, a)
    local x = torch.randn(2, 3, 4)
    fresh('pad by zero', F.pad(x, { 0, 0 }), x, x)
    fresh('pad by zero, reflect', F.pad(x, { 0, 0 }, 'reflect'), x, x)
    fresh('pad by a negative amount', F.pad(x, { -1, -1 }), x, x:narrow(3, 2, 2))
    fresh('interpolate to the same size', F.interpolate(x, { size = 4 }), x, x)
    fresh('interpolate by 1', F.interpolate(x, { scale_factor = 1.0 }), x, x)
  end)
  it('to with copy = true, positional (device, dtype, non_blocking, copy) or in the options', function()
    local d = a:double()
    fresh('to positional copy', d:to('cpu', 'float64', true, true), d, d)
    fresh('to dtype copy', d:to('float64', false, true), d, d)
    fresh('to options copy', d:to({ dtype = 'float64', copy = true }), d, d)
    fresh('to tensor copy', d:to(d, false, true), d, d)
    assert.are.equal(d:data_ptr(), d:to('cpu', 'float64', true):data_ptr(), 'to without copy: t itself')
    assert.are.equal(d:data_ptr(), d:to('float64', false, false):data_ptr(), 'to with copy = false: t itself')
    check.expect_error(function() d:to('cpu', true, true, true) end, 'at most two flags')
  end)
end)
