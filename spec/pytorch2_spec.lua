-- spec/pytorch2_spec.lua: what PyTorch 2 programs set on any machine, GPU or not (TF32
-- switches, CUDA seeds, bf16 support, set_device, torch.compile, GradScaler without CUDA),
-- and the scopes that take a function (no_grad, enable_grad, autocast, detect_anomaly),
-- whose errors keep the function's frames in the traceback.
local torch = require 'torch'
local nn = require 'nn'
local check = dofile('spec/helpers/check.lua')
local has_cuda = torch.cuda.is_available()

describe('PyTorch 2 settings', function()
  after_each(function() torch.set_float32_matmul_precision('highest') end)

  it('TF32: backends.cuda.matmul.allow_tf32 and set_float32_matmul_precision are one switch', function()
    assert.is_false(torch.backends.cuda.matmul.allow_tf32)          -- PyTorch's default
    assert.are.equal('highest', torch.get_float32_matmul_precision())
    torch.backends.cuda.matmul.allow_tf32 = true
    assert.are.equal('high', torch.get_float32_matmul_precision())
    torch.set_float32_matmul_precision('medium')
    assert.is_true(torch.backends.cuda.matmul.allow_tf32)
    torch.set_float32_matmul_precision('highest')
    assert.is_false(torch.backends.cuda.matmul.allow_tf32)
    check.expect_error(function() torch.backends.cuda.matmul.allow_tf32 = 1 end, 'allow_tf32 must be a boolean')
    check.expect_error(function() torch.backends.cuda.matmul.allow_tf33 = true end, "has no setting 'allow_tf33'")
    check.expect_error(function() torch.set_float32_matmul_precision('low') end, 'low')
  end)

  it('cudnn.allow_tf32 defaults to true and keeps what is set', function()
    assert.is_true(torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.allow_tf32 = false
    assert.is_false(torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.allow_tf32 = true
    check.expect_error(function() torch.backends.cudnn.allow_tf = true end, "has no setting 'allow_tf'")
  end)

  it('torch.cuda.manual_seed(_all) take an integer seed; without CUDA they leave the CPU stream alone', function()
    torch.manual_seed(7)
    local a = torch.rand(3)
    torch.manual_seed(7)
    torch.cuda.manual_seed(123)
    torch.cuda.manual_seed_all(123)
    local b = torch.rand(3)
    if not has_cuda then assert.is_true(torch.equal(a, b)) end
    check.expect_error(function() torch.cuda.manual_seed(1.5) end, 'expected an integer seed')
  end)

  it('is_bf16_supported and set_device follow whether CUDA is there', function()
    assert.are.equal(has_cuda, torch.cuda.is_bf16_supported())
    if has_cuda then
      torch.cuda.set_device(0)
      assert.are.equal(0, torch.cuda.current_device())
      check.expect_error(function() torch.cuda.set_device(99) end, 'cuda:99')
    else
      check.expect_error(function() torch.cuda.set_device(0) end, 'CUDA is not available')
    end
    check.expect_error(function() torch.cuda.set_device('cpu') end, 'expected a CUDA device')
  end)

  it('torch.compile returns the module, which runs and keeps its state_dict names', function()
    local m = nn.Linear(3, 2)
    local c = torch.compile(m, { mode = 'max-autotune' })
    assert.are.equal(m, c)
    local x = torch.randn(4, 3)
    assert.is_true(torch.equal(m(x), c(x)))
    assert.is_not_nil(c:state_dict()['weight'])
    local f = function(t) return t * 2 end
    assert.are.equal(f, torch.compile(f))
    check.expect_error(function() torch.compile(m, { mod = 'x' }) end, 'torch.compile: unknown option mod')
  end)

  it('GradScaler for cuda turns itself off where CUDA is absent (PyTorch: "Disabling."), for cpu it scales', function()
    local s = torch.cuda.amp.GradScaler()
    assert.are.equal(has_cuda, s:is_enabled())
    assert.are.equal(has_cuda and 65536 or 1, s:get_scale())
    assert.are.equal(has_cuda, torch.amp.GradScaler('cuda'):is_enabled())
    assert.is_true(torch.amp.GradScaler('cpu'):is_enabled())
    check.expect_error(function() torch.amp.GradScaler('tpu') end, "device must be 'cuda' or 'cpu'")
  end)
end)

describe('scopes that take a function', function()
  -- the traceback that the error of fn gets from a handler at the error, as dplua's own
  local function traceback_of(scope_call)
    local tb
    xpcall(scope_call, function(e) tb = debug.traceback(tostring(e), 2) end)
    return tb
  end
  local function failing_inner() error('boom inside') end

  for name, run in pairs {
    no_grad = function(fn) return torch.no_grad(fn) end,
    enable_grad = function(fn) return torch.enable_grad(fn) end,
    inference_mode = function(fn) return torch.inference_mode(fn) end,
    autocast = function(fn) return torch.autocast('cpu', {}, fn) end,
    detect_anomaly = function(fn) return torch.autograd.detect_anomaly(fn) end,
  } do
    it(name .. ' keeps the frames of fn in the traceback and restores its state after an error', function()
      local grad_before = torch.is_grad_enabled()
      local tb = traceback_of(function() run(function() failing_inner() end) end)
      assert.truthy(tb:find('boom inside', 1, true))
      assert.truthy(tb:find('failing_inner', 1, true), tb)
      assert.are.equal(grad_before, torch.is_grad_enabled())
      assert.is_false(torch.is_autocast_enabled('cpu'))
      assert.is_false(torch.autograd.is_anomaly_enabled())
    end)
  end

  it('no_grad returns every result of fn and passes its arguments', function()
    local a, b, c = torch.no_grad(function(x, y) return x + y, torch.is_grad_enabled(), nil end, 1, 2)
    assert.are.same({ 3, false }, { a, b })
    assert.is_nil(c)
    check.expect_error(function() torch.no_grad(5) end, 'torch.no_grad: expected a function')
  end)
end)
