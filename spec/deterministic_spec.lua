-- torch.use_deterministic_algorithms: the flags, torch.backends.cudnn, the error or warning
-- of an op without a deterministic implementation, and the ops whose CUDA kernels add with
-- atomics (index_add, the gradients of index_select, x[idx] and gather, scatter_add,
-- scatter_reduce 'prod', cummax's gradient, max and average pooling's gradients) against
-- PyTorch 1.13's CPU results (spec/fixtures/determ.lua, written by
-- spec/fixtures/make_determ.py).  PyTorch's CPU kernels add in source order, as dplua's CPU
-- kernels and its deterministic CUDA path do, so float32 results must match bit for bit.
-- On the emulated GPU it also checks that without the mode the sums vary with the blocks'
-- order (DPLUA_EMU_SEED, DPLUA_EMU_THREADS) and that with it they do not.
-- spec/gpu/specs runs it again on cpu:1 and the emulated cuda:0.
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local check = dofile('spec/helpers/check.lua')
local device = dofile('spec/helpers/device.lua')

local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*)/') or '.'
local fx = dofile(here .. '/fixtures/determ.lua')

local emulated = device.is_cuda and (os.getenv('DPLUA_CUDA_LIB') or ''):find('emu', 1, true) ~= nil

local function T(v, dtype) return torch.tensor(v, { dtype = dtype or 'float32' }) end
local function I(v) return torch.tensor(v, { dtype = 'int64' }) end

-- fn() with the mode set as given, restored afterwards even when fn fails
local function with_mode(mode, warn_only, fn)
  torch.use_deterministic_algorithms(mode, { warn_only = warn_only })
  local ok, err = pcall(fn)
  torch.use_deterministic_algorithms(false)
  if not ok then error(err, 0) end
end

-- every element of got is want's, bit for bit (float32 values are exact in Lua's doubles)
local function same_bits(label, got, want)
  assert.are.equal('float32', got.dtype, label .. ': dtype')
  local g, w = check.flat(got:tolist()), check.flat(want)
  assert.are.equal(#w, #g, label .. ': element count')
  for i = 1, #w do
    if g[i] ~= w[i] then
      error(('%s: element %d is %.9g, PyTorch %.9g'):format(label, i, g[i], w[i]), 2)
    end
  end
end

-- every case's results, as lists, in one table (to compare two runs)
local function run_cases()
  local r = {}
  local c = fx.index_add
  r.index_add = T(c.base):index_add(1, I(c.index), T(c.src))
  c = fx.index_select_backward
  local x = T(c.x):requires_grad_(true)
  x:index_select(1, I(c.index)):backward(T(c.grad))
  r.index_select_backward = x.grad
  x = T(c.x):requires_grad_(true)
  x[I(c.index)]:backward(T(c.grad))
  r.getitem_backward = x.grad
  c = fx.scatter_add
  r.scatter_add = T(c.base):scatter_add(2, I(c.index), T(c.src))
  x = torch.zeros(3, 4):requires_grad_(true)
  x:gather(2, I(c.index)):backward(T(c.src))
  r.gather_backward = x.grad
  c = fx.scatter_prod
  r.scatter_prod = T(c.base):scatter_reduce(1, I(c.index), T(c.src), 'prod')
  c = fx.cummax_backward
  x = T(c.x):requires_grad_(true)
  torch.cummax(x, 2):backward(T(c.grad))
  r.cummax_backward = x.grad
  c = fx.max_pool_backward
  x = torch.zeros(1, 1, 48, 48)
  x[{ 1, 1, 25, 25 }] = 10
  x:requires_grad_(true)
  F.max_pool2d(x, 24, { stride = 1 }):backward(T(c.grad))
  r.max_pool_backward = x.grad
  c = fx.avg_pool_backward
  x = torch.rand(1, 1, 48, 48):requires_grad_(true)   -- the values do not matter
  F.avg_pool2d(x, 24, { stride = 1 }):backward(T(c.grad))
  r.avg_pool_backward = x.grad
  x = T(c.x2):requires_grad_(true)
  F.adaptive_avg_pool2d(x, { 4, 4 }):backward(T(c.grad2))
  r.adaptive_avg_pool_backward = x.grad
  return r
end

local WANT = {
  index_add = fx.index_add.want, index_select_backward = fx.index_select_backward.want,
  getitem_backward = fx.index_select_backward.want_getitem, scatter_add = fx.scatter_add.want,
  gather_backward = fx.scatter_add.want_gather, scatter_prod = fx.scatter_prod.want,
  cummax_backward = fx.cummax_backward.want, max_pool_backward = fx.max_pool_backward.want,
  avg_pool_backward = fx.avg_pool_backward.want, adaptive_avg_pool_backward = fx.avg_pool_backward.want2,
}
local NAMES = {}
for k in pairs(WANT) do NAMES[#NAMES + 1] = k end
table.sort(NAMES)

describe('torch.use_deterministic_algorithms', function()
  after_each(function()
    torch.use_deterministic_algorithms(false)
    torch.backends.cudnn.deterministic = false
    torch.backends.cudnn.benchmark = false
  end)

  it('is off by default and says what was set', function()
    assert.is_false(torch.are_deterministic_algorithms_enabled())
    assert.is_false(torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(true)
    assert.is_true(torch.are_deterministic_algorithms_enabled())
    assert.is_false(torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(true, { warn_only = true })
    assert.is_true(torch.are_deterministic_algorithms_enabled())
    assert.is_true(torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(false, { warn_only = true })
    assert.is_false(torch.are_deterministic_algorithms_enabled())
    assert.is_false(torch.is_deterministic_algorithms_warn_only_enabled())
  end)

  it('rejects what is not a boolean or an option it knows', function()
    check.expect_error(function() torch.use_deterministic_algorithms(1) end,
      'use_deterministic_algorithms: mode must be a boolean, got number')
    check.expect_error(function() torch.use_deterministic_algorithms() end, 'mode must be a boolean, got no value')
    check.expect_error(function() torch.use_deterministic_algorithms(true, { warn_only = 'yes' }) end,
      'warn_only must be a boolean, got string')
    check.expect_error(function() torch.use_deterministic_algorithms(true, { warnonly = true }) end,
      'unknown option warnonly (the option is warn_only)')
    check.expect_error(function() torch.use_deterministic_algorithms(true, true) end,
      'expected an option table {warn_only=} as argument 2, got boolean')
    assert.is_false(torch.are_deterministic_algorithms_enabled())
  end)

  it('has torch.backends.cudnn.deterministic and benchmark', function()
    assert.is_false(torch.backends.cudnn.deterministic)
    assert.is_false(torch.backends.cudnn.benchmark)
    torch.backends.cudnn.deterministic = true
    torch.backends.cudnn.benchmark = true
    assert.is_true(torch.backends.cudnn.deterministic)
    assert.is_true(torch.backends.cudnn.benchmark)
    assert.is_false(torch.are_deterministic_algorithms_enabled())   -- separate flags, as in PyTorch
    check.expect_error(function() torch.backends.cudnn.deterministic = 1 end,
      'torch.backends.cudnn.deterministic must be a boolean, got number')
    check.expect_error(function() torch.backends.cudnn.fastest = true end,
      "torch.backends.cudnn has no setting 'fastest'")
  end)

  it('fails, or with warn_only goes on, where an op has no deterministic implementation', function()
    torch._C._alert_not_deterministic('my_op_cuda')   -- mode off: nothing
    torch.use_deterministic_algorithms(true)
    check.expect_error(function() torch._C._alert_not_deterministic('my_op_cuda') end,
      "my_op_cuda does not have a deterministic implementation, but you set " ..
      "'torch.use_deterministic_algorithms(true)'", "warn_only=true")
    torch.use_deterministic_algorithms(true, { warn_only = true })
    torch._C._alert_not_deterministic('my_op_cuda')   -- a warning on stderr, no error
  end)
end)

describe('the ops that add with atomics on CUDA, against PyTorch', function()
  for _, name in ipairs(NAMES) do
    it(name .. ', with the mode on: PyTorch\'s in-order result, bit for bit', function()
      with_mode(true, false, function() same_bits(name, run_cases()[name], WANT[name]) end)
    end)
  end

  it('give the same values without the mode (to float32 rounding on a GPU, exactly on the CPU)', function()
    local r = run_cases()
    for _, name in ipairs(NAMES) do
      if device.is_cuda then
        local g, w = check.flat(r[name]:tolist()), check.flat(WANT[name])
        for i = 1, #w do
          local tol = 1e-4 * (1 + math.abs(w[i]))
          assert(math.abs(g[i] - w[i]) <= tol, ('%s: element %d is %.9g, PyTorch %.9g'):format(name, i, g[i], w[i]))
        end
      else
        same_bits(name, r[name], WANT[name])
      end
    end
  end)

  it('with warn_only take the deterministic path too', function()
    with_mode(true, true, function()
      local r = run_cases()
      for _, name in ipairs(NAMES) do same_bits(name, r[name], WANT[name]) end
    end)
  end)

  it('give the same results on the other dtypes with the mode on', function()
    with_mode(true, false, function()
      -- float64 as PyTorch's in-order sums of the float32 case's values; int64 and bool exactly
      local c = fx.index_add
      local got = torch.tensor(c.base, { dtype = 'float64' }):index_add(1, I(c.index), torch.tensor(c.src, { dtype = 'float64' }))
      local want = torch.tensor(c.base, { dtype = 'float64' }):cpu()
      local idx, src = I(c.index):cpu(), torch.tensor(c.src, { dtype = 'float64' }):cpu()
      for i = 1, idx:size(1) do   -- one row at a time, in order, on the CPU
        local r = idx[i]
        want[r] = want[r] + src[i]
      end
      assert.is_true(torch.equal(got:cpu(), want))
      local n = torch.tensor({ 1, 2, 3, 4 }, { dtype = 'int64' }):index_add(1, I({ 1, 1, 4, 1 }), I({ 10, 20, 30, 40 }))
      assert.are.same({ 71, 2, 3, 34 }, n:tolist())
      local b = torch.tensor({ false, false, true }, { dtype = 'bool' })
      b[I({ 2, 2 })] = torch.tensor({ true, false }, { dtype = 'bool' })   -- a repeated copy: the last wins
      assert.are.same({ false, false, true }, b:tolist())
      local f = torch.zeros(3)
      f[I({ 2, 2, 2, 1 })] = T({ 5, 6, 7, 8 })
      assert.are.same({ 8, 7, 0 }, f:tolist())
    end)
  end)
end)

describe('the order of the additions on the emulated GPU', function()
  -- 4096 values of mixed magnitudes into 3 places, so that another order rounds otherwise
  local SCRIPT = [[
local torch = require 'torch'
torch.use_deterministic_algorithms(%s)
torch.manual_seed(7)
local n = 4096
local mag = (torch.randint(-3, 4, { n, 1 }, { device = 'cuda:0' }):float() * math.log(10)):exp()
local src = torch.randn(n, 2, { device = 'cuda:0' }) * mag
local idx = torch.randint(1, 4, { n }, { device = 'cuda:0' })
local got = torch.zeros(3, 2, { device = 'cuda:0' }):index_add(1, idx, src)
local cpu = torch.zeros(3, 2):index_add(1, idx:cpu(), src:cpu())
local out = {}
for _, v in ipairs(got:view(-1):tolist()) do out[#out + 1] = ('%%a'):format(v) end
print(table.concat(out, ' '), torch.equal(got:cpu(), cpu))
]]

  local function run(mode, seed, threads)
    local path = os.tmpname()
    local f = assert(io.open(path, 'w'))
    f:write(SCRIPT:format(tostring(mode)))
    f:close()
    local p = assert(io.popen(('DPLUA_EMU_SEED=%d DPLUA_EMU_THREADS=%d DPLUA_SPEC_DEVICE= lua5.4 %s 2>&1')
      :format(seed, threads, path)))
    local out = p:read('a')
    p:close()
    os.remove(path)
    local sums, same = out:match('^(%S+ %S+ %S+ %S+ %S+ %S+)\t(%a+)\n$')
    assert(sums, 'the script printed: ' .. out)
    return sums, same == 'true'
  end

  local RUNS = { { 1, 1 }, { 2, 4 }, { 3, 4 }, { 4, 1 } }

  it('varies between seeds without the mode, and not with it (equal to the CPU)', function()
    if not emulated then pending('needs the emulated GPU (DPLUA_CUDA_LIB=build-emu/...)') return end
    local off, on = {}, {}
    for _, r in ipairs(RUNS) do
      off[#off + 1] = run(false, r[1], r[2])
      local sums, same = run(true, r[1], r[2])
      assert.is_true(same, 'with the mode on, cuda:0 gives the CPU sum')
      on[#on + 1] = sums
    end
    local distinct = {}
    for _, s in ipairs(off) do distinct[s] = true end
    local count = 0
    for _ in pairs(distinct) do count = count + 1 end
    assert(count > 1, 'without the mode, every seed gave the same sums: ' .. off[1])
    for i = 2, #on do assert.are.equal(on[1], on[i]) end
  end)
end)
