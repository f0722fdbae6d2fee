-- The torch.* names PyTorch programs use beyond the core: dtype aliases, the default dtype,
-- inference_mode, torch.utils.data, anomaly detection, torch.autograd.functional (and the
-- other sections below), against PyTorch 1.13: spec/fixtures/torch_more.lua (written by
-- spec/fixtures/make_torch_more.py) holds the inputs and PyTorch's outputs of each case;
-- the CALLS tables below are the dplua calls (1-based dims and classes).
-- spec/gpu/specs runs it again on cpu:1 and the emulated cuda:0.
local torch = require 'torch'
local optim = require 'optim'
local nn = require 'nn'
local check = dofile('spec/helpers/check.lua')
local flat, same_number, expect_error = check.flat, check.same_number, check.expect_error

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'spec'
local fixtures = dofile(here .. '/fixtures/torch_more.lua')

local function compare(label, got, want, tol)
  assert(torch.is_tensor(got), label .. ': not a tensor')
  assert.are.same(want.shape, got:size():totable(), label .. ': shape')
  assert.are.equal(want.dtype, got.dtype, label .. ': dtype')
  local g, w = flat(got:dim() == 0 and { got:item() } or got:tolist()), flat(want.values)
  assert.are.equal(#w, #g, label .. ': element count')
  for i = 1, #w do
    assert(same_number(g[i], w[i], tol), ('%s: element %d is %s, PyTorch %s'):format(label, i, tostring(g[i]), tostring(w[i])))
  end
end

-- every case of a fixture section through its call; tols: per-case tolerances
local function against_pytorch(section, calls, tols)
  local cases = fixtures[section]
  local names = {}
  for name in pairs(cases) do names[#names + 1] = name end
  table.sort(names)
  it('every fixture case has a call and every call a case', function()
    for _, name in ipairs(names) do assert(calls[name], 'no call for ' .. name) end
    for name in pairs(calls) do assert(cases[name], 'no fixture case for ' .. name) end
  end)
  for _, name in ipairs(names) do
    local c = cases[name]
    it(name, function()
      local inputs = {}
      for i, spec in ipairs(c.inputs) do
        inputs[i] = #spec.values == 0 and torch.zeros({ 0 }, { dtype = spec.dtype })
          or torch.tensor(spec.values, { dtype = spec.dtype })
      end
      local results = table.pack(calls[name](table.unpack(inputs)))
      assert.are.equal(#c.outputs, results.n, name .. ': number of results')
      for j, want in ipairs(c.outputs) do
        local tol = (tols and tols[name]) or (want.dtype == 'float64' and 1e-10 or 1e-5)
        compare(('%s (result %d)'):format(name, j), results[j], want, tol)
      end
    end)
  end
end

local function f64(v) return torch.tensor(v, { dtype = 'float64' }) end

-- ---------------------------------------------------------------- names

describe('PyTorch names', function()
  it('takes int32, int16, int8, uint8 and int as int64, dplua\'s integer dtype', function()
    for _, name in ipairs { 'int32', 'int16', 'int8', 'uint8', 'int', 'short' } do
      assert.are.equal('int64', torch[name])
      assert.are.equal('int64', torch.zeros(2, { dtype = name }).dtype)
      assert.are.equal('int64', torch.tensor({ 1, 2 }, { dtype = name }).dtype)
    end
    assert.are.equal('int64', torch.ones(3):to('int32').dtype)
    assert.are.equal('int64', torch.IntTensor(2).dtype)
    assert.are.equal('int64', torch.ByteTensor({ 1, 2 }).dtype)
    expect_error(function() torch.zeros(2, { dtype = 'int33' }) end, "unknown dtype 'int33'")
  end)

  it('set_default_dtype: creation follows float64, numbers stay int64', function()
    assert.are.equal('float32', torch.get_default_dtype())
    torch.set_default_dtype('float64')
    local ok, err = pcall(function()
      assert.are.equal('float64', torch.get_default_dtype())
      assert.are.equal('float64', torch.zeros(2).dtype)
      assert.are.equal('float64', torch.rand(2).dtype)
      assert.are.equal('float64', torch.tensor({ 1.5, 2 }).dtype)
      assert.are.equal('int64', torch.tensor({ 1, 2 }).dtype)
      assert.are.equal('float64', torch.arange(0, 1, 0.25).dtype)
      assert.are.equal('float64', torch.full({ 2 }, 0.5).dtype)
      assert.are.equal('float64', torch.linspace(0, 1, 5).dtype)
      -- 0.1 keeps its double value
      assert.are.equal(0.1, torch.tensor({ 0.1 }):item())
    end)
    torch.set_default_dtype('float32')
    assert(ok, err)
    assert.are.equal('float32', torch.tensor({ 1.5 }).dtype)
    expect_error(function() torch.set_default_dtype('int64') end, 'only floating point dtypes')
  end)

  it('inference_mode runs without recording', function()
    local x = torch.ones(2, { requires_grad = true })
    local y, n = torch.inference_mode(function(a) return a * 2, 7 end, x)
    assert.is_false(y.requires_grad)
    assert.are.equal(7, n)
    assert.is_true((x * 2).requires_grad)
  end)

  it('torch.utils.data is torch.data, with Subset, ConcatDataset, random_split, BatchSampler', function()
    local U = torch.utils.data
    assert.are.equal(torch.data, U)
    local ds = U.TensorDataset(torch.arange(1, 11))
    local sub = U.Subset(ds, { 3, 1, 10 })
    assert.are.equal(3, #sub)
    assert.are.equal(10, sub:get(3))
    expect_error(function() sub:get(4) end, 'index 4 is out of range for a dataset of 3 items')
    expect_error(function() U.Subset(ds, { 11 }) end, 'indices[1] = 11 is out of range')
    local cat = U.ConcatDataset({ sub, ds })
    assert.are.equal(13, #cat)
    assert.are.equal(1, cat:get(2))
    assert.are.equal(1, cat:get(4))
    assert.are.equal(10, cat:get(13))
    local parts = U.random_split(ds, { 0.7, 0.3 }, torch.Generator():manual_seed(3))
    assert.are.equal(7, #parts[1])
    assert.are.equal(3, #parts[2])
    local seen = {}
    for _, p in ipairs(parts) do
      for i = 1, #p do
        local v = p:get(i)
        assert.is_nil(seen[v])
        seen[v] = true
      end
    end
    for v = 1, 10 do assert.is_true(seen[v]) end
    assert.are.equal(3, #U.random_split(ds, { 5, 2, 3 })[3])
    expect_error(function() U.random_split(ds, { 5, 6 }) end, 'the lengths add up to 11 but the dataset has 10 items')
    local batches = {}
    local bs = U.BatchSampler(U.SequentialSampler(ds), 4, false)
    for batch in bs:iter() do batches[#batches + 1] = batch end
    assert.are.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10 } }, batches)
    assert.are.equal(3, #bs)
    assert.are.equal(2, #U.BatchSampler({ 1, 2, 3, 4, 5 }, 2, true))
    expect_error(function() U.BatchSampler(ds, 0, false) end, 'batch_size must be a positive integer')
    assert.is_function(U.IterableDataset.iter)
  end)

  it('detect_anomaly names the node that returned NaN', function()
    local x = torch.tensor({ 1.0, 0.0 }, { requires_grad = true })
    expect_error(function()
      torch.autograd.detect_anomaly(function() (x:sqrt() * 0):sum():backward() end)
    end, "Function 'SqrtBackward0' returned nan values in its 1th output")
    assert.is_false(torch.autograd.is_anomaly_enabled())
    -- off: the NaN just lands in the gradient
    local y = (x:sqrt() * 0):sum()
    y:backward()
    assert.is_true(x.grad[2] ~= x.grad[2])
    torch.autograd.set_detect_anomaly(true)
    local ok = pcall(function() (x * 2):sum():backward() end)
    torch.autograd.set_detect_anomaly(false)
    assert.is_true(ok)
    expect_error(function() torch.autograd.set_detect_anomaly(1) end, 'expected true or false')
  end)
end)

-- ---------------------------------------------------------------- autograd.functional

describe('torch.autograd.functional against PyTorch', function()
  local F = torch.autograd.functional
  against_pytorch('functional', {
    ['jacobian'] = function(x) return F.jacobian(function(v) return v:exp() * v:sum() end, x) end,
    ['jacobian two inputs'] = function(x, y)
      return table.unpack(F.jacobian(function(a, c) return torch.outer(a:sin(), c) end, { x, y }))
    end,
    ['hessian'] = function(x) return F.hessian(function(v) return (v ^ 3):sum() + v:prod() end, x) end,
    ['vjp'] = function(x, v) return F.vjp(function(a) return a:tanh() * a end, x, v) end,
    ['jvp'] = function(x, v) return F.jvp(function(a) return a:tanh() * a:sum() end, x, v) end,
    ['hvp'] = function(x, v) return F.hvp(function(a) return (a:exp() * a):sum() end, x, v) end,
    ['vhp'] = function(x, v) return F.vhp(function(a) return (a ^ 2 * a:sin()):sum() end, x, v) end,
  })

  it('create_graph gives gradients that differentiate again', function()
    local x = f64({ 0.5, 2.0 }):requires_grad_(true)
    local g = torch.autograd.grad((x:sin() * x):sum(), x, { create_graph = true })[1]
    local gg = torch.autograd.grad(g:sum(), x)[1]
    -- d/dx (sin x + x cos x) = 2 cos x - x sin x
    check.close(gg, { 2 * math.cos(0.5) - 0.5 * math.sin(0.5), 2 * math.cos(2) - 2 * math.sin(2) }, 1e-12)
  end)

  it('refuses a double backward through a backward that is not recorded', function()
    local x = f64({ 0.5, 2.0 }):requires_grad_(true)
    expect_error(function() F.hessian(function(v) return v:select(1, 1) * v:select(1, 2) end, x) end,
      'create_graph: the backward of SelectBackward0 is not differentiable yet')
  end)

  it('refuses bad arguments', function()
    expect_error(function() F.jacobian(function(v) return v end, 3) end, 'inputs must be a tensor')
    expect_error(function() F.vjp(function(v) return v * 2 end, f64 { 1, 2 }) end, 'v can be omitted only')
    expect_error(function() F.hessian(function(v) return v * 2 end, f64 { 1, 2 }) end, 'single-element tensor')
    expect_error(function() F.hvp(function(v) return v:sum() end, f64 { 1, 2 }, f64 { 1 }) end, 'v[1] has shape')
  end)
end)

-- ---------------------------------------------------------------- optimizers

describe('optimizers against PyTorch', function()
  local P = fixtures.optim_problem
  local function loss_of(w)
    local x, y = f64(P.x), f64(P.y)
    local r = x:matmul(w:t()) - y
    return (r * r):mean() + (w ^ 4):sum() * 0.1
  end
  -- the losses and parameters after each step, as the generator's trajectory()
  local function trajectory(make, steps, closure_steps)
    local w = f64(P.w0):requires_grad_(true)
    local opt = make({ w })
    local out = {}
    for _ = 1, steps do
      local function closure()
        opt:zero_grad()
        local loss = loss_of(w)
        loss:backward()
        return loss
      end
      local loss
      if closure_steps then
        loss = opt:step(closure)
      else
        loss = closure()
        opt:step()
      end
      out[#out + 1] = { loss = loss:item(), w = w:detach():reshape(-1):tolist() }
    end
    return out, opt, w
  end
  local MAKE = {
    ['LBFGS'] = { function(p) return optim.LBFGS(p, { lr = 0.5, max_iter = 4, history_size = 3 }) end, 10, true },
    ['LBFGS strong_wolfe'] = { function(p)
      return optim.LBFGS(p, { lr = 1, max_iter = 5, history_size = 4, line_search_fn = 'strong_wolfe' })
    end, 10, true },
    ['Adamax'] = { function(p) return optim.Adamax(p, { lr = 0.05, weight_decay = 0.01 }) end, 6 },
    ['NAdam'] = { function(p) return optim.NAdam(p, { lr = 0.05, weight_decay = 0.01 }) end, 6 },
    ['RAdam'] = { function(p) return optim.RAdam(p, { lr = 0.05, weight_decay = 0.01 }) end, 8 },
    ['Rprop'] = { function(p) return optim.Rprop(p, { lr = 0.05 }) end, 6 },
    ['ASGD'] = { function(p) return optim.ASGD(p, { lr = 0.05, t0 = 2, weight_decay = 0.01 }) end, 6 },
  }
  for name, m in pairs(MAKE) do
    it(name .. ' follows PyTorch step for step', function()
      local want = fixtures.optim[name]
      local got = trajectory(m[1], m[2], m[3])
      assert.are.equal(#want, #got)
      -- NAdam and ASGD keep scalars in float32 as PyTorch does; the rest is float64
      local tol = 1e-9
      for s = 1, #want do
        assert(same_number(got[s].loss, want[s].loss, tol), ('%s step %d: loss %.17g, PyTorch %.17g'):format(name, s, got[s].loss, want[s].loss))
        check.close(got[s].w, want[s].w, tol, ('%s step %d'):format(name, s))
      end
    end)
  end

  it('state_dict round trips and a restored optimizer continues the same trajectory', function()
    for name, m in pairs(MAKE) do
      local _, opt, w = trajectory(m[1], 3, m[3])
      local sd = opt:state_dict()
      local w2 = w:detach():clone():requires_grad_(true)
      local opt2 = m[1]({ w2 })
      opt2:load_state_dict(sd)
      for _, pair in ipairs { { opt, w }, { opt2, w2 } } do
        local o, p = pair[1], pair[2]
        local function closure()
          o:zero_grad()
          local loss = loss_of(p)
          loss:backward()
          return loss
        end
        if m[3] then o:step(closure) else closure(); o:step() end
      end
      check.close(w2, w, 1e-12, name .. ' after load_state_dict')
    end
  end)

  it('refuses bad settings', function()
    local w = f64({ 1, 2 }):requires_grad_(true)
    expect_error(function() optim.LBFGS({ w }, { line_search_fn = 'armijo' }) end, "only 'strong_wolfe' is supported")
    expect_error(function() optim.LBFGS({ w }, { history_size = 0 }) end, 'invalid history_size')
    expect_error(function() optim.LBFGS({ { params = { w } }, { params = { f64({ 1 }):requires_grad_(true) } } }) end,
      "LBFGS doesn't support per-parameter options")
    expect_error(function() optim.LBFGS({ w }):step() end, 'step needs a closure')
    expect_error(function() optim.Adamax({ w }, { betas = { 0.9, 1.0 } }) end, 'invalid beta parameter at index 2')
    expect_error(function() optim.NAdam({ w }, { lr = -1 }) end, 'invalid learning rate')
    expect_error(function() optim.RAdam({ w }, { eps = -1 }) end, 'invalid epsilon value')
    expect_error(function() optim.Rprop({ w }, { etas = { 1.5, 1.2 } }) end, 'invalid eta values')
    expect_error(function() optim.ASGD({ w }, { weight_decay = -1 }) end, 'invalid weight_decay value')
    expect_error(function() optim.Adamax({ w }, { momentum = 0.9 }) end, 'unknown option momentum')
  end)

  it('LBFGS minimizes on the device the parameters are on', function()
    local w = torch.zeros(2, { dtype = 'float64' }):requires_grad_(true)
    local target = f64({ 3, -1 })
    local opt = optim.LBFGS({ w }, { line_search_fn = 'strong_wolfe' })
    for _ = 1, 3 do
      opt:step(function()
        opt:zero_grad()
        local loss = ((w - target) ^ 2):sum() + ((w - target) ^ 4):sum()
        loss:backward()
        return loss
      end)
    end
    check.close(w, { 3, -1 }, 1e-4)
  end)
end)

-- ---------------------------------------------------------------- math

describe('math against PyTorch', function()
  local INF = math.huge
  against_pytorch('math', {
    ['isclose'] = function(a, c) return torch.isclose(a, c) end,
    ['isclose equal_nan rtol'] = function(a, c) return a:isclose(c, { rtol = 0.02, equal_nan = true }) end,
    ['heaviside'] = function(a, v) return a:heaviside(v) end,
    ['floor_divide float'] = function(a, c) return torch.floor_divide(a, c) end,
    ['floor_divide int'] = function(a, c) return a:floor_divide(c) end,
    ['count_nonzero'] = function(a) return torch.count_nonzero(a) end,
    ['count_nonzero dim'] = function(a) return a:count_nonzero(2) end,
    ['nansum'] = function(a) return a:nansum() end,
    ['nansum dim'] = function(a) return torch.nansum(a, 2) end,
    ['nanmean dim keepdim'] = function(a) return a:nanmean(1, true) end,
    ['amax dims'] = function(a) return a:amax({ 1, 3 }) end,
    ['amin'] = function(a) return torch.amin(a) end,
    ['amax keepdim'] = function(a) return a:amax(2, true) end,
    ['aminmax'] = function(a) return a:aminmax({ dim = 1 }) end,
    ['std_mean'] = function(a) return torch.std_mean(a, 2) end,
    ['var_mean unbiased false'] = function(a) return a:var_mean(1, false) end,
    ['quantile scalar'] = function(a) return a:quantile(0.3) end,
    ['quantile tensor dim'] = function(a, q) return torch.quantile(a, q, 2) end,
    ['quantile keepdim'] = function(a) return a:quantile(0.5, 1, true) end,
    ['quantile lower higher nearest midpoint'] = function(a)
      local r = {}
      for _, i in ipairs { 'lower', 'higher', 'nearest', 'midpoint' } do r[#r + 1] = a:quantile(0.3, { interpolation = i }) end
      return table.unpack(r)
    end,
    ['quantile nan'] = function(a) return a:quantile(0.5, 2) end,
    ['nanquantile'] = function(a) return a:nanquantile(0.4, 2) end,
    ['logaddexp'] = function(a, c) return a:logaddexp(c) end,
    ['logaddexp2'] = function(a, c) return torch.logaddexp2(a, c) end,
    ['copysign'] = function(a, c) return a:copysign(c) end,
    ['frexp'] = function(a) return a:frexp() end,
    ['frexp float32'] = function(a) return torch.frexp(a) end,
    ['ldexp'] = function(a, e) return a:ldexp(e) end,
    ['nextafter'] = function(a, c) return a:nextafter(c) end,
    ['nextafter float32'] = function(a, c) return torch.nextafter(a, c) end,
    ['deg2rad rad2deg'] = function(a) return a:deg2rad(), torch.rad2deg(a) end,
    ['clip'] = function(a) return a:clip(-1, 1) end,
    ['float_power'] = function(a, c) return a:float_power(c) end,
    ['true_divide'] = function(a, c) return torch.true_divide(a, c) end,
    ['addcmul addcdiv'] = function(t, a, c) return t:addcmul(a, c, { value = 0.5 }), torch.addcdiv(t, a, c, 2.0) end,
    ['cov'] = function(a) return a:cov() end,
    ['cov correction 0'] = function(a) return torch.cov(a, { correction = 0 }) end,
    ['cov weights'] = function(a, fw, aw) return a:cov({ fweights = fw, aweights = aw }) end,
    ['cov 1-D'] = function(a) return a:cov() end,
    ['corrcoef'] = function(a) return a:corrcoef() end,
    ['cosine_similarity'] = function(a, c) return torch.cosine_similarity(a, c) end,
    ['cosine_similarity dim 0 broadcast'] = function(a, c) return nn.functional.cosine_similarity(a, c, 1) end,
    ['pairwise_distance'] = function(a, c) return torch.pairwise_distance(a, c) end,
    ['pairwise_distance p1 keepdim'] = function(a, c) return nn.functional.pairwise_distance(a, c, { p = 1, keepdim = true }) end,
    ['block_diag'] = function(a, c, d) return torch.block_diag(a, c, d) end,
    ['cartesian_prod'] = function(a, c) return torch.cartesian_prod(a, c) end,
    ['combinations'] = function(a) return a:combinations() end,
    ['combinations r3 replacement'] = function(a) return torch.combinations(a, { r = 3, with_replacement = true }) end,
    ['diff'] = function(a) return a:diff() end,
    ['diff n2 dim0 prepend'] = function(a, p) return a:diff({ n = 2, dim = 1, prepend = p }) end,
    ['diff bool'] = function(a) return torch.diff(a) end,
    ['kron'] = function(a, c) return a:kron(c) end,
    ['kron mixed dims'] = function(a, c) return torch.kron(a, c) end,
    ['vander'] = function(a) return torch.vander(a) end,
    ['vander N increasing'] = function(a) return torch.vander(a, { N = 4, increasing = true }) end,
    ['trapezoid'] = function(a) return a:trapezoid() end,
    ['trapezoid x'] = function(a, x) return torch.trapezoid(a, x) end,
    ['trapz dx dim'] = function(a) return torch.trapz(a, { dx = 0.5, dim = 1 }) end,
    ['cumulative_trapezoid'] = function(a) return a:cumulative_trapezoid() end,
    ['cumulative_trapezoid x'] = function(a, x) return torch.cumulative_trapezoid(a, x) end,
    ['dstack'] = function(a, c) return torch.dstack({ a, c }) end,
    ['column_stack'] = function(a, c) return torch.column_stack({ a, c }) end,
    ['row_stack'] = function(a, c) return torch.row_stack({ a, c }) end,
    ['swapaxes swapdims'] = function(a) return a:swapaxes(1, 3), torch.swapdims(a, 2, 3) end,
    ['broadcast_to'] = function(a) return a:broadcast_to({ 2, 3 }) end,
    ['broadcast_tensors'] = function(a, c) return torch.broadcast_tensors(a, c) end,
    ['atleast'] = function(a)
      local s = a:reshape({})
      return torch.atleast_2d(s), torch.atleast_3d(a), torch.atleast_1d(s)
    end,
    ['meshgrid ij'] = function(a, c) return torch.meshgrid(a, c, { indexing = 'ij' }) end,
    ['meshgrid xy'] = function(a, c, d) return torch.meshgrid({ a, c, d }, { indexing = 'xy' }) end,
    ['renorm'] = function(a) return a:renorm(2, 1, 1.0) end,
    ['renorm p1 dim1'] = function(a) return torch.renorm(a, 1, 2, 0.5) end,
  }, { ['logaddexp2'] = 1e-6, ['float_power'] = 1e-6 })

  local function x(...) return torch.randn({ ... }, { dtype = 'float64' }):requires_grad_(true) end
  local gc = torch.autograd.gradcheck

  it('float64 gradchecks', function()
    assert.is_true(gc(function(a, c) return a:logaddexp(c) end, { x(3), x(3) }))
    assert.is_true(gc(function(a, c) return torch.logaddexp2(a, c) end, { x(3), x(3) }))
    assert.is_true(gc(function(a) return a:amax(2) end, { x(2, 3) }))
    assert.is_true(gc(function(a) return a:nansum(1) + a:nanmean(1) end, { x(2, 3) }))
    assert.is_true(gc(function(a) return a:quantile(0.3, 2) end, { x(2, 5) }))
    assert.is_true(gc(function(a) return a:cov() end, { x(2, 4) }))
    assert.is_true(gc(function(a) return a:corrcoef() end, { x(2, 4) }))
    assert.is_true(gc(function(a, c) return torch.cosine_similarity(a, c) end, { x(2, 3), x(2, 3) }))
    assert.is_true(gc(function(a, c) return torch.pairwise_distance(a, c) end, { x(2, 3), x(2, 3) }))
    assert.is_true(gc(function(a, c) return torch.block_diag(a, c) end, { x(2, 2), x(1, 3) }))
    assert.is_true(gc(function(a) return a:diff(2) end, { x(2, 5) }))
    assert.is_true(gc(function(a, c) return a:kron(c) end, { x(2, 2), x(2, 3) }))
    assert.is_true(gc(function(a) return torch.vander(a, 3) end, { x(3) }))
    assert.is_true(gc(function(a, t) return torch.trapezoid(a, t:cumsum(1)) end, { x(2, 4), x(4) }))
    assert.is_true(gc(function(a) return a:cumulative_trapezoid() end, { x(2, 4) }))
    assert.is_true(gc(function(a, c) return a:addcdiv(c, c * c + 1, { value = 0.5 }) end, { x(3), x(3) }))
    assert.is_true(gc(function(a) return a:copysign(torch.tensor({ -1.0, 1.0, -1.0 }, { dtype = 'float64' })) end, { x(3) }))
    assert.is_true(gc(function(a) return a:combinations() end, { x(4) }))
    assert.is_true(gc(function(a) local s, m = a:std_mean(2); return s + m end, { x(2, 4) }))
  end)

  it('refuses bad arguments', function()
    expect_error(function() torch.quantile(torch.randn(3), 1.5) end, 'q values must be in the range [0, 1]')
    expect_error(function() torch.quantile(torch.randn(3), 0.5, { interpolation = 'cubic' }) end, 'interpolation must be one of')
    expect_error(function() torch.quantile(torch.tensor({ 1, 2 }), 0.5) end, 'expected a floating point input')
    expect_error(function() torch.amax(torch.randn(2, 3), 3) end, 'dimension 3 is out of range')
    expect_error(function() torch.amax(torch.zeros(0)) end, 'expected a non-empty tensor')
    expect_error(function() torch.broadcast_shapes({ 2, 3 }, { 4 }) end, 'shape mismatch')
    expect_error(function() torch.broadcast_tensors(torch.ones(2), torch.ones(3)) end, 'broadcast_tensors: shape mismatch')
    expect_error(function() torch.meshgrid(torch.ones(2), { indexing = 'yx' }) end, "indexing must be 'ij' or 'xy'")
    expect_error(function() torch.floor_divide(torch.tensor({ 1 }), torch.tensor({ 0 })) end, 'ZeroDivisionError')
    expect_error(function() torch.combinations(torch.ones(2, 2)) end, 'expected a 1-D tensor')
    expect_error(function() torch.isclose(torch.ones(2), torch.ones(2, { dtype = 'float64' })) end, 'cannot be compared')
    expect_error(function() torch.heaviside(torch.ones(2), torch.ones(1, { dtype = 'int64' })) end, 'same dtype')
    expect_error(function() torch.renorm(torch.ones(2, 2), -1, 1, 1) end, 'p must be a positive number')
    expect_error(function() torch.cov(torch.ones(2, 2, 2)) end, 'at most 2 dimensions')
    expect_error(function() torch.addcdiv(torch.ones(2), torch.tensor({ 1, 2 }), torch.tensor({ 1, 2 })) end, 'integer division')
  end)
end)
