-- The torch.* names PyTorch programs use beyond the core: dtype aliases, the default dtype,
-- inference_mode, torch.utils.data, anomaly detection, torch.autograd.functional (and the
-- other sections below), against PyTorch 1.13: spec/fixtures/torch_more.lua (written by
-- spec/fixtures/make_torch_more.py) holds the inputs and PyTorch's outputs of each case;
-- the CALLS tables below are the dplua calls (1-based dims and classes).
-- spec/gpu/specs runs it again on cpu:1 and the emulated cuda:0.
local torch = require 'torch'
local optim = require 'optim'
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

  it('CyclicLR follows PyTorch', function()
    local OPTS = {
      ['triangular'] = { base_lr = 0.01, max_lr = 0.1, step_size_up = 3 },
      ['triangular2 down'] = { base_lr = 0.01, max_lr = 0.1, step_size_up = 2, step_size_down = 4, mode = 'triangular2' },
      ['exp_range'] = { base_lr = 0.01, max_lr = 0.1, step_size_up = 3, mode = 'exp_range', gamma = 0.9,
                        base_momentum = 0.7, max_momentum = 0.95 },
    }
    for name, o in pairs(OPTS) do
      local w = torch.zeros(2):requires_grad_(true)
      local opt = optim.SGD({ w }, { lr = 0.1, momentum = 0.9 })
      local sched = optim.lr_scheduler.CyclicLR(opt, o)
      for s, want in ipairs(fixtures.cyclic[name]) do
        local g = opt.param_groups[1]
        assert(same_number(g.lr, want.lr, 1e-12), ('%s step %d: lr %.17g, PyTorch %.17g'):format(name, s, g.lr, want.lr))
        assert(same_number(g.momentum, want.momentum, 1e-12), ('%s step %d: momentum %.17g, PyTorch %.17g'):format(name, s, g.momentum, want.momentum))
        opt:step()
        sched:step()
      end
    end
    local w = torch.zeros(2):requires_grad_(true)
    expect_error(function() optim.lr_scheduler.CyclicLR(optim.Adam({ w }), { base_lr = 0.1, max_lr = 1 }) end,
      'optimizer must support momentum with `cycle_momentum` option enabled')
    expect_error(function() optim.lr_scheduler.CyclicLR(optim.SGD({ w }, { lr = 1 }), 0.1, 1, { mode = 'sine' }) end,
      'mode is invalid and scale_fn is None')
    local opt = optim.SGD({ w }, { lr = 1 })
    local sched = optim.lr_scheduler.CyclicLR(opt, 0.1, 1, { step_size_up = 2, cycle_momentum = false,
      scale_fn = function(x) return 1 / x end, scale_mode = 'cycle' })
    for _ = 1, 5 do sched:step() end
    assert(same_number(opt.param_groups[1].lr, 0.1 + 0.9 * 0.5 * 0.5, 1e-12))
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

-- ---------------------------------------------------------------- torch.linalg

describe('torch.linalg against PyTorch', function()
  local LA = torch.linalg
  local INF = math.huge
  against_pytorch('linalg', {
    ['inv'] = function(a) return LA.inv(a) end,
    ['inv batched float32'] = function(a) return a:inverse() end,
    ['det'] = function(a) return LA.det(a) end,
    ['det batched'] = function(a) return torch.det(a) end,
    ['det singular'] = function(a) return LA.det(a) end,
    ['slogdet'] = function(a) return LA.slogdet(a) end,
    ['logdet'] = function(a) return torch.logdet(a) end,
    ['solve vector'] = function(a, v) return LA.solve(a, v) end,
    ['solve matrix'] = function(a, v) return LA.solve(a, v) end,
    ['solve broadcast'] = function(a, v) return LA.solve(a, v) end,
    ['solve left=false'] = function(a, v) return LA.solve(a, v, { left = false }) end,
    ['cholesky'] = function(a) return LA.cholesky(a) end,
    ['cholesky upper batched'] = function(a) return LA.cholesky(a, { upper = true }) end,
    ['qr'] = function(a) return LA.qr(a) end,
    ['qr complete'] = function(a) return LA.qr(a, 'complete') end,
    ['qr wide'] = function(a) return LA.qr(a) end,
    ['svdvals'] = function(a) return LA.svdvals(a) end,
    ['svdvals batched float32'] = function(a) return LA.svdvals(a) end,
    ['eigvalsh'] = function(a) return LA.eigvalsh(a) end,
    ['eigvalsh upper'] = function(a) return LA.eigvalsh(a, 'U') end,
    ['eigh vectors abs'] = function(a) local _, v = LA.eigh(a); return v:abs() end,
    ['lstsq'] = function(a, v) return LA.lstsq(a, v).solution end,
    ['pinv'] = function(a) return LA.pinv(a) end,
    ['matrix_rank'] = function(a) return LA.matrix_rank(a) end,
    ['matrix_power 3'] = function(a) return LA.matrix_power(a, 3) end,
    ['matrix_power -2'] = function(a) return a:matrix_power(-2) end,
    ['matrix_power 0'] = function(a) return LA.matrix_power(a, 0) end,
    ['norm fro'] = function(a) return LA.norm(a) end,
    ['norm nuc'] = function(a) return LA.norm(a, 'nuc') end,
    ['norm 2'] = function(a) return LA.norm(a, 2) end,
    ['norm -2'] = function(a) return LA.matrix_norm(a, -2) end,
    ['matrix_norm 1'] = function(a) return LA.matrix_norm(a, 1) end,
    ['matrix_norm -inf'] = function(a) return LA.matrix_norm(a, -INF) end,
    ['matrix_norm inf keepdim'] = function(a) return LA.matrix_norm(a, { ord = INF, keepdim = true }) end,
    ['vector_norm 3 dim'] = function(a) return LA.vector_norm(a, 3, 2) end,
    ['vector_norm inf'] = function(a) return LA.vector_norm(a, INF) end,
    ['vector_norm 0 dims'] = function(a) return LA.vector_norm(a, { ord = 0, dim = { 1, 3 } }) end,
    ['norm vector'] = function(a) return LA.norm(a, 1) end,
    ['solve_triangular lower'] = function(a, v) return LA.solve_triangular(a, v, { upper = false }) end,
    ['solve_triangular upper unit right'] = function(a, v)
      return LA.solve_triangular(a, v, { upper = true, left = false, unitriangular = true })
    end,
    ['cholesky_solve'] = function(v, l) return torch.cholesky_solve(v, l) end,
    ['triangular_solve'] = function(v, a) return torch.triangular_solve(v, a) end,
    ['triangular_solve transpose'] = function(v, a) return (torch.triangular_solve(v, a, false, true)) end,
    ['svd old reconstruct'] = function(a)
      local u, s, v = torch.svd(a)
      return u:matmul(torch.diag(s)):matmul(v:t())
    end,
    ['cross'] = function(a, c) return LA.cross(a, c) end,
  }, { ['pinv'] = 1e-9, ['svdvals batched float32'] = 1e-5, ['inv batched float32'] = 1e-5 })

  local function x(...) return torch.randn({ ... }, { dtype = 'float64' }):requires_grad_(true) end
  local gc = torch.autograd.gradcheck
  local function eye(n) return torch.eye(n, { dtype = 'float64' }) end

  it('float64 gradchecks', function()
    assert.is_true(gc(function(a) return LA.inv(a + eye(3) * 3) end, { x(3, 3) }))
    assert.is_true(gc(function(a) return LA.inv(a + eye(2) * 3) end, { x(2, 2, 2) }))
    assert.is_true(gc(function(a) return LA.det(a + eye(3) * 2) end, { x(3, 3) }))
    assert.is_true(gc(function(a) local _, l = LA.slogdet(a + eye(3) * 3); return l end, { x(2, 3, 3) }))
    assert.is_true(gc(function(a, b) return LA.solve(a + eye(3) * 3, b) end, { x(3, 3), x(3, 2) }))
    assert.is_true(gc(function(a, b) return LA.solve(a + eye(3) * 3, b) end, { x(2, 3, 3), x(3) }))
    assert.is_true(gc(function(a, b) return LA.solve(a + eye(3) * 3, b) end, { x(2, 3, 3), x(3, 1) }))
    assert.is_true(gc(function(a, b) return LA.solve(a + eye(3) * 3, b) end, { x(3, 3), x(2, 3, 2) }))
    assert.is_true(gc(function(a) return LA.cholesky(a:matmul(a:t()) + eye(3)) end, { x(3, 3) }))
    assert.is_true(gc(function(a) return LA.eigvalsh(a + a:t()) end, { x(3, 3) }))
    assert.is_true(gc(function(a) local _, v = LA.eigh(a + a:t()); return v:abs() end, { x(3, 3) }))
    assert.is_true(gc(function(a) return LA.svdvals(a) end, { x(4, 3) }))
    assert.is_true(gc(function(a) return LA.norm(a, 'nuc') + LA.norm(a, 2) + LA.norm(a) end, { x(3, 2) }))
    assert.is_true(gc(function(a, b) return LA.solve_triangular(a:triu() + eye(3) * 3, b, { upper = true }) end, { x(3, 3), x(3, 2) }))
    assert.is_true(gc(function(a, b) return LA.solve_triangular(a:tril() + eye(3) * 3, b, { upper = false, left = false }) end, { x(3, 3), x(2, 3) }))
    assert.is_true(gc(function(a) return torch.logdet(a:matmul(a:t()) + eye(2)) end, { x(2, 2) }))
  end)

  it('svd: U diag(S) Vh gives A back, U and Vh orthonormal', function()
    local A = torch.randn(5, 3, { dtype = 'float64' })
    for _, full in ipairs { true, false } do
      local U, S, Vh = LA.svd(A, { full_matrices = full })
      local k = S:size(1)
      check.close(U:narrow(2, 1, k):matmul(torch.diag(S)):matmul(Vh:narrow(1, 1, k)), A, 1e-12)
      check.close(U:t():matmul(U), torch.eye(U:size(2), { dtype = 'float64' }), 1e-12)
      check.close(Vh:matmul(Vh:t()), torch.eye(Vh:size(1), { dtype = 'float64' }), 1e-12)
    end
    local w = x(3, 3)
    local U = LA.svd(w)
    expect_error(function() U:sum():backward() end, 'the gradient through U and Vh is not implemented')
  end)

  it('names what is wrong', function()
    expect_error(function() LA.inv(torch.zeros(2, 2)) end,
      'The diagonal element 1 is zero, the inversion could not be completed because the input matrix is singular')
    expect_error(function() LA.inv(torch.ones(2, 3)) end, 'must be batches of square matrices, but they are 2 by 3')
    expect_error(function() LA.inv(torch.ones(3)) end, 'must have at least 2 dimensions')
    expect_error(function() LA.cholesky(-torch.eye(2)) end,
      'the leading minor of order 1 is not positive-definite')
    expect_error(function() LA.cholesky(torch.stack({ torch.eye(2), -torch.eye(2) })) end, '(batch element 2)')
    expect_error(function() LA.solve(torch.eye(3), torch.ones(2)) end, 'incompatible shapes')
    expect_error(function() LA.solve(torch.zeros(2, 2), torch.ones(2)) end, 'the input matrix is singular')
    expect_error(function() LA.solve_triangular(torch.eye(2), torch.ones(2, 1), {}) end, 'option upper (true or false) is required')
    expect_error(function() LA.eigh(torch.eye(2), 'X') end, "UPLO must be 'L' or 'U'")
    expect_error(function() LA.qr(torch.eye(2), 'full') end, "mode must be 'reduced', 'complete' or 'r'")
    expect_error(function() LA.matrix_power(torch.eye(2), 1.5) end, 'n must be an integer')
    expect_error(function() LA.matrix_norm(torch.eye(2), 3) end, 'ord must be')
    expect_error(function() LA.inv(torch.eye(2, { dtype = 'int64' })) end, 'expected a floating point tensor')
  end)
end)

-- ---------------------------------------------------------------- torch.distributions

describe('torch.distributions against PyTorch', function()
  local D = torch.distributions
  local function props(d, value, ...)
    local r = { value and d:log_prob(value) or nil, d:entropy() }
    for _, p in ipairs { ... } do r[#r + 1] = d[p] end
    return table.unpack(r)
  end
  local function kl(p, q) return D.kl_divergence(p, q) end
  against_pytorch('distributions', {
    ['Normal'] = function(l, s, v) return props(D.Normal(l, s), v, 'mean', 'variance', 'stddev') end,
    ['Normal cdf icdf'] = function(l, s, v) return D.Normal(l, s):cdf(v), D.Normal(l, s):icdf(v) end,
    ['Normal float32 broadcast'] = function(l, s, v) return D.Normal(l, s):log_prob(v) end,
    ['Categorical probs'] = function(p, v)
      local c = D.Categorical { probs = p }
      return c:log_prob(v + 1), c:entropy(), c.logits
    end,
    ['Categorical logits'] = function(l, v)
      local c = D.Categorical { logits = l }
      return c:log_prob(v + 1), c:entropy(), c.probs
    end,
    ['Categorical unnormalized probs'] = function(p, v)
      local c = D.Categorical(p)
      return c:log_prob(v + 1), c.probs
    end,
    ['Bernoulli probs'] = function(p, v) return props(D.Bernoulli { probs = p }, v, 'mean', 'variance', 'logits') end,
    ['Bernoulli logits'] = function(l, v) return props(D.Bernoulli { logits = l }, v, 'mean', 'variance', 'probs') end,
    ['Uniform'] = function(lo, hi, v) return props(D.Uniform(lo, hi), v, 'mean', 'variance', 'stddev') end,
    ['Exponential'] = function(r, v) return props(D.Exponential(r), v, 'mean', 'variance', 'stddev') end,
    ['Exponential cdf'] = function(r, v) return D.Exponential(r):cdf(v) end,
    ['MultivariateNormal covariance'] = function(l, c, v)
      return props(D.MultivariateNormal(l, { covariance_matrix = c }), v, 'mean', 'variance', 'scale_tril')
    end,
    ['MultivariateNormal precision'] = function(l, c, v)
      return props(D.MultivariateNormal(l, { precision_matrix = c }), v, 'covariance_matrix')
    end,
    ['MultivariateNormal scale_tril batched'] = function(l, t, v)
      return props(D.MultivariateNormal(l, { scale_tril = t }), v, 'variance')
    end,
    ['Independent Normal'] = function(l, s, v) return props(D.Independent(D.Normal(l, s), 1), v, 'mean', 'variance', 'stddev') end,
    ['kl Normal Normal'] = function(l, s) return kl(D.Normal(l, s), D.Normal(s, l:abs() + 0.5)) end,
    ['kl Categorical Categorical'] = function(p, q) return kl(D.Categorical { probs = p }, D.Categorical { probs = q }) end,
    ['kl Categorical zero'] = function(p, q) return kl(D.Categorical { probs = p }, D.Categorical { probs = q }) end,
    ['kl Bernoulli Bernoulli'] = function(p, q) return kl(D.Bernoulli { probs = p }, D.Bernoulli { probs = q }) end,
    ['kl Uniform Uniform'] = function(lo, hi)
      return kl(D.Uniform(lo, hi), D.Uniform(lo - 0.5, hi + torch.tensor({ 1.0, -1.0 }, { dtype = 'float64' })))
    end,
    ['kl Exponential Exponential'] = function(r) return kl(D.Exponential(r), D.Exponential(r * 3)) end,
    ['kl MultivariateNormal MultivariateNormal'] = function(l, c)
      return kl(D.MultivariateNormal(l, { covariance_matrix = c }),
        D.MultivariateNormal(l * 0, { scale_tril = torch.eye(3, { dtype = 'float64' }) * 1.5 }))
    end,
    ['kl Independent Independent'] = function(l, s)
      return kl(D.Independent(D.Normal(l, s), 1), D.Independent(D.Normal(s, l + 1), 1))
    end,
    ['kl Uniform Normal'] = function(lo, hi) return kl(D.Uniform(lo, hi), D.Normal(lo, hi)) end,
    ['kl Exponential Normal'] = function(r) return kl(D.Exponential(r), D.Normal(r, r * 2)) end,
  })

  it('samples with the right shapes and frequencies', function()
    torch.manual_seed(11)
    local c = D.Categorical { probs = torch.tensor({ 0.1, 0.6, 0.3 }) }
    local s = c:sample({ 20000 })
    assert.are.same({ 20000 }, s:size():totable())
    assert.are.equal('int64', s.dtype)
    for k, p in ipairs { 0.1, 0.6, 0.3 } do
      local f = s:eq(k):double():mean():item()
      assert(math.abs(f - p) < 0.015, ('class %d: frequency %g, probability %g'):format(k, f, p))
    end
    local cb = D.Categorical { logits = torch.zeros(4, 5) }
    assert.are.same({ 3, 4 }, cb:sample({ 3 }):size():totable())
    local n = D.Normal(torch.zeros(2), torch.ones(2) * 3)
    local x = n:sample({ 5000 })
    assert.are.same({ 5000, 2 }, x:size():totable())
    assert(math.abs(x:std():item() - 3) < 0.15)
    local b = D.Bernoulli { probs = torch.tensor({ 0.25 }) }:sample({ 8000 })
    assert(math.abs(b:mean():item() - 0.25) < 0.02)
    local u = D.Uniform(-1.0, 1.0):sample({ 1000 })
    assert.is_true(u:ge(-1):all():item() and u:lt(1):all():item())
    local e = D.Exponential(torch.tensor({ 4.0 })):sample({ 8000 })
    assert(math.abs(e:mean():item() - 0.25) < 0.02)
    local m = D.MultivariateNormal(torch.zeros(2), { covariance_matrix = torch.tensor({ { 1.0, 0.8 }, { 0.8, 1.0 } }) })
    local z = m:sample({ 8000 })
    assert.are.same({ 8000, 2 }, z:size():totable())
    assert(math.abs((z:select(2, 1) * z:select(2, 2)):mean():item() - 0.8) < 0.05)
    local ind = D.Independent(D.Normal(torch.zeros(3, 2), torch.ones(3, 2)), 1)
    assert.are.same({ 3 }, ind.batch_shape:totable())
    assert.are.same({ 2 }, ind.event_shape:totable())
    assert.are.same({ 4, 3, 2 }, ind:sample({ 4 }):size():totable())
  end)

  it('rsample is differentiable (reparametrised), sample is not', function()
    local loc = torch.tensor({ 0.5, -1 }, { dtype = 'float64', requires_grad = true })
    local scale = torch.tensor({ 2, 3 }, { dtype = 'float64', requires_grad = true })
    local n = D.Normal(loc, scale)
    local x = n:rsample()
    x:sum():backward()
    check.close(loc.grad, { 1, 1 }, 1e-12)
    check.close(scale.grad, ((x - loc) / scale):detach(), 1e-12)
    assert.is_false(n:sample().requires_grad)
    local lo = torch.tensor({ 0.0 }, { dtype = 'float64', requires_grad = true })
    D.Uniform(lo, torch.tensor({ 2.0 }, { dtype = 'float64' })):rsample():sum():backward()
    assert.is_not_nil(lo.grad)
    local L = torch.tensor({ { 1.0, 0.0 }, { 0.5, 2.0 } }, { dtype = 'float64', requires_grad = true })
    D.MultivariateNormal(torch.zeros(2, { dtype = 'float64' }), { scale_tril = L }):rsample():sum():backward()
    assert.is_not_nil(L.grad)
    expect_error(function() D.Categorical { probs = torch.ones(3) }:rsample() end, 'rsample is not implemented')
  end)

  it('log_prob and entropy pass gradients (gradcheck)', function()
    local gc = torch.autograd.gradcheck
    local v = torch.tensor({ 0.3, -0.2 }, { dtype = 'float64' })
    local l = torch.tensor({ 0.1, 0.5 }, { dtype = 'float64', requires_grad = true })
    local s = torch.tensor({ 1.5, 0.7 }, { dtype = 'float64', requires_grad = true })
    assert.is_true(gc(function(a, b) return D.Normal(a, b):log_prob(v) end, { l, s }))
    local lg = torch.tensor({ { 0.1, 0.5, -1 } }, { dtype = 'float64', requires_grad = true })
    assert.is_true(gc(function(a) return D.Categorical { logits = a }:log_prob(torch.tensor({ 3 })) end, { lg }))
    assert.is_true(gc(function(a) return D.Categorical { logits = a }:entropy() end, { lg }))
    assert.is_true(gc(function(a) return D.Bernoulli { logits = a }:log_prob(torch.tensor({ 1.0, 0.0 }, { dtype = 'float64' })) end, { l }))
    local C = torch.tensor({ { 2.0, 0.3 }, { 0.3, 1.0 } }, { dtype = 'float64', requires_grad = true })
    assert.is_true(gc(function(c) return D.MultivariateNormal(torch.zeros(2, { dtype = 'float64' }), { covariance_matrix = (c + c:t()) / 2 }):log_prob(v) end, { C }))
  end)

  it('validates its arguments', function()
    expect_error(function() D.Normal(0.0, -1.0) end,
      'Expected parameter scale (Tensor of shape ()) of distribution Normal to satisfy the constraint GreaterThan(lower_bound=0.0)')
    expect_error(function() D.Categorical { probs = torch.tensor({ 0.5, -0.1 }) } end, 'constraint Simplex()')
    expect_error(function() D.Categorical { probs = torch.ones(2), logits = torch.ones(2) } end, 'either probs or logits must be given, but not both')
    expect_error(function() D.Categorical { probs = torch.ones(3) }:log_prob(torch.tensor({ 4 })) end,
      'to be within the support (IntegerInterval(lower_bound=1, upper_bound=3))')
    expect_error(function() D.Bernoulli { probs = torch.tensor({ 1.5 }) } end, 'Interval(lower_bound=0.0, upper_bound=1.0)')
    expect_error(function() D.Bernoulli { probs = torch.tensor({ 0.5 }) }:log_prob(torch.tensor({ 0.5 })) end, 'support (Boolean())')
    expect_error(function() D.Uniform(1.0, 0.0) end, 'LessThan(upper_bound=high)')
    expect_error(function() D.Uniform(0.0, 1.0):log_prob(torch.tensor(2.0)) end, 'to be within the support')
    expect_error(function() D.Exponential(0.0) end, 'GreaterThan(lower_bound=0.0)')
    expect_error(function() D.Exponential(1.0):log_prob(torch.tensor(-1.0)) end, 'GreaterThanEq(lower_bound=0.0)')
    expect_error(function() D.MultivariateNormal(torch.zeros(2), {}) end, 'exactly one of covariance_matrix')
    expect_error(function() D.MultivariateNormal(torch.zeros(2), { covariance_matrix = -torch.eye(2) }) end, 'not positive-definite')
    expect_error(function() D.Independent(D.Normal(0.0, 1.0), 1) end, 'reinterpreted_batch_ndims')
    expect_error(function() D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli { probs = torch.tensor(0.5) }) end,
      'no KL(p || q) is implemented for p = Normal and q = Bernoulli')
    expect_error(function() D.Normal(torch.zeros(2), torch.ones(2)):log_prob(torch.zeros(3)) end, 'does not broadcast')
    -- validate_args = false skips the checks
    local n = D.Normal(0.0, -1.0, { validate_args = false })
    assert.is_true(n:log_prob(torch.tensor(0.0)):item() ~= n:log_prob(torch.tensor(0.0)):item())
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
    ['cosine_similarity dim 0 broadcast'] = function(a, c) return torch.cosine_similarity(a, c, 1) end,
    ['pairwise_distance'] = function(a, c) return torch.pairwise_distance(a, c) end,
    ['pairwise_distance p1 keepdim'] = function(a, c) return torch.pairwise_distance(a, c, { p = 1, keepdim = true }) end,
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
    ['lgamma digamma'] = function(a) return torch.lgamma(a), a:digamma() end,
    ['polygamma 1 2 3'] = function(a) return torch.polygamma(1, a), a:polygamma(2), torch.polygamma(3, a) end,
    ['digamma polygamma float32'] = function(a) return a:digamma(), a:polygamma(1) end,
    ['mvlgamma'] = function(a) return torch.mvlgamma(a, 1), a:mvlgamma(2), a:mvlgamma({ p = 3 }) end,
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
    local pos = torch.tensor({ 0.7, 1.9, 3.3, 12.5 }, { dtype = 'float64', requires_grad = true })
    assert.is_true(gc(function(a) return a:lgamma() + a:digamma() + torch.polygamma(2, a) end, { pos }))
    assert.is_true(gc(function(a) return a:mvlgamma(2) end, { pos }))
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
    expect_error(function() torch.polygamma(-1, torch.ones(2)) end, 'n must be a non-negative integer')
    expect_error(function() torch.mvlgamma(torch.ones(2), 3) end, 'all elements must be greater than (p-1)/2 = 1')
  end)
end)
