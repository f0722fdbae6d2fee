-- The vision layers against PyTorch 1.13: pooling (max, average, adaptive), batch norm
-- (training steps, running statistics, eval mode, state_dict), dropout2d, pad and
-- interpolate.  spec/fixtures/vision.lua holds PyTorch's values and gradients over grids of
-- options (written by spec/fixtures/make_vision.py); float64 gradchecks cover what the
-- fixtures do not.  spec/gpu/specs runs this file again on cpu:1 and the emulated cuda:0.
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local check = dofile('spec/helpers/check.lua')

local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*)/') or '.'
local fx = dofile(here .. '/fixtures/vision.lua')

local inputs = {}
for _, e in ipairs(fx.inputs) do inputs[e.name] = e.value end

local function T(v, dtype) return torch.tensor(v, { dtype = dtype or 'float64' }) end

local assert_close = check.assert_close

-- the case's call: fn(x) -> output [, indices]
local function call(c)
  local o = c.opts or {}
  if c.fn == 'max_pool2d' or c.fn == 'max_pool1d' then
    return function(x)
      return F[c.fn](x, c.kernel, { stride = o.stride, padding = o.padding, dilation = o.dilation,
                                   ceil_mode = o.ceil_mode, return_indices = true })
    end
  elseif c.fn == 'avg_pool2d' then
    return function(x)
      return F.avg_pool2d(x, c.kernel, { stride = o.stride, padding = o.padding, ceil_mode = o.ceil_mode,
                                         count_include_pad = o.count_include_pad,
                                         divisor_override = o.divisor_override })
    end
  elseif c.fn == 'adaptive_avg_pool2d' then
    local size = type(c.kernel) == 'table' and { c.kernel[1], c.kernel[2] or false } or c.kernel
    return function(x) return F.adaptive_avg_pool2d(x, size) end
  elseif c.fn == 'adaptive_max_pool2d' then
    local size = type(c.kernel) == 'table' and { c.kernel[1], c.kernel[2] or false } or c.kernel
    return function(x) return F.adaptive_max_pool2d(x, size, true) end
  elseif c.fn == 'interpolate' then
    return function(x) return F.interpolate(x, o) end
  elseif c.fn == 'pad' then
    return function(x) return F.pad(x, c.pad, c.mode, c.value) end
  end
  error('unknown case ' .. c.fn)
end

local function describe_case(c)
  local parts = {}
  for k, v in pairs(c.opts or {}) do
    parts[#parts + 1] = k .. '=' .. (type(v) == 'table' and '{' .. table.concat(v, ',') .. '}' or tostring(v))
  end
  table.sort(parts)
  local k = c.kernel or c.pad
  return ('%s(%s%s %s)'):format(c.fn, type(k) == 'table' and '{' .. table.concat(k, ',') .. '}' or tostring(k),
    c.mode and ' ' .. c.mode or '', table.concat(parts, ' '))
end

-- runs a fixture case in dtype: values, indices and the gradient of sum(out * gout)
local function replay(c, dtype, tol)
  local x = T(inputs[c.input], dtype):requires_grad_(true)
  local out, idx = call(c)(x)
  local what = describe_case(c)
  assert_close(out, c.out, what .. ' output', tol)
  if c.indices then
    assert.are.equal('int64', idx.dtype)
    assert.is_true(torch.equal(idx:to('cpu'), torch.tensor(c.indices, { dtype = 'int64', device = 'cpu' })),
      what .. ': indices differ')
  end
  ;(out * T(c.gout, dtype)):sum():backward()
  assert_close(x.grad, c.grad, what .. ' gradient', tol)
end

describe('pooling matches PyTorch 1.13', function()
  it('over the grid of options, float64', function()
    for _, c in ipairs(fx.pool) do replay(c, 'float64') end
  end)

  it('over the grid of options, float32', function()
    for _, c in ipairs(fx.pool) do replay(c, 'float32', 1e-5) end
  end)

  it('max_pool2d of 64x64x24x24 by 2 has the shape and node PyTorch gives', function()
    local x = torch.randn(64, 64, 24, 24):requires_grad_(true)
    local y = F.max_pool2d(x, 2)
    assert.are.equal('[64, 64, 12, 12]', tostring(y:size()):match('%[.*%]') or tostring(y:size()))
    assert.are.equal('MaxPool2DWithIndicesBackward0', y.grad_fn.name)
    -- against the same maximum written with views: [.., 12, 2, 12, 2] reduced twice
    local ref = x:detach():reshape(64, 64, 12, 2, 12, 2):max(6):max(4)
    assert.is_true(torch.equal(y:detach(), ref))
  end)

  it('gives the layers the functions\' values', function()
    local x = T(inputs.x2)
    assert.is_true(torch.equal(nn.MaxPool2d(3, { stride = 2, padding = 1 })(x),
                               F.max_pool2d(x, 3, { stride = 2, padding = 1 })))
    assert.is_true(torch.equal(nn.MaxPool2d(2, 1)(x), F.max_pool2d(x, 2, { stride = 1 })))
    assert.is_true(torch.equal(nn.AvgPool2d(2, { count_include_pad = false, padding = 1 })(x),
                               F.avg_pool2d(x, 2, { count_include_pad = false, padding = 1 })))
    assert.is_true(torch.equal(nn.AdaptiveAvgPool2d({ 3, 2 })(x), F.adaptive_avg_pool2d(x, { 3, 2 })))
    assert.is_true(torch.equal(nn.AdaptiveMaxPool2d(3)(x), F.adaptive_max_pool2d(x, 3)))
    local y, i = nn.MaxPool1d(3, { return_indices = true })(T(inputs.x1))
    local y2, i2 = F.max_pool1d(T(inputs.x1), 3, { return_indices = true })
    assert.is_true(torch.equal(y, y2) and torch.equal(i, i2))
    assert.are.equal('MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=false)',
                     tostring(nn.MaxPool2d(3, 2, { padding = 1 }) and nn.MaxPool2d(3, { stride = 2, padding = 1 })))
    assert.are.equal('AdaptiveAvgPool2d(output_size=(3, None))', tostring(nn.AdaptiveAvgPool2d({ 3, false })))
    assert.are.equal('AvgPool2d(kernel_size=3, stride=2, padding=0)', tostring(nn.AvgPool2d(3, 2)))
  end)

  it('returns indices that index the input (1-based)', function()
    local x = T(inputs.x2)
    local y, idx = F.max_pool2d(x, 3, { stride = 2, return_indices = true })
    -- every index picks its value from its plane
    local xv, yv, iv = x:to('cpu'), y:to('cpu'), idx:to('cpu')
    for n = 1, 2 do
      for c = 1, 2 do
        for h = 1, y:size(3) do
          for w = 1, y:size(4) do
            local k = iv[n][c][h][w]
            local r, col = (k - 1) // 8 + 1, (k - 1) % 8 + 1
            assert.are.equal(yv[n][c][h][w], xv[n][c][r][col])
          end
        end
      end
    end
  end)

  it('passes gradcheck in float64', function()
    local x = torch.randn(2, 2, 6, 5, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(torch.autograd.gradcheck(function(t) return F.avg_pool2d(t, 3, { stride = 2, padding = 1, ceil_mode = true, count_include_pad = false }) end, x))
    assert.is_true(torch.autograd.gradcheck(function(t) return F.max_pool2d(t, { 2, 3 }, { stride = 1, dilation = { 2, 1 } }) end, x))
    assert.is_true(torch.autograd.gradcheck(function(t) return F.adaptive_avg_pool2d(t, { 4, 3 }) end, x))
    assert.is_true(torch.autograd.gradcheck(function(t) return F.adaptive_max_pool2d(t, 2) end, x))
    local x1 = torch.randn(2, 3, 9, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(torch.autograd.gradcheck(function(t) return F.max_pool1d(t, 3, { stride = 2, padding = 1 }) end, x1))
  end)

  it('propagates NaN as PyTorch (the maximum of a window holding NaN is NaN)', function()
    local x = T({ { { 1, 0 / 0, 3 }, { 4, 5, 6 } } })
    local y, i = F.max_pool2d(x, 2, { stride = 1, return_indices = true })
    local yv = y:to('cpu')
    assert.is_true(yv[1][1][1] ~= yv[1][1][1])
    assert.is_true(yv[1][1][2] ~= yv[1][1][2])
    assert.are.same({ { { 2, 2 } } }, i:to('cpu'):tolist())
  end)

  it('handles an empty batch', function()
    local y = F.max_pool2d(torch.zeros(0, 3, 4, 4), 2)
    assert.are.equal(0, y:size(1))
    assert.are.equal(2, y:size(4))
  end)

  it('rejects bad arguments with clear errors', function()
    local x = torch.zeros(1, 1, 4, 4)
    check.expect_error(function() F.max_pool2d(torch.zeros(4, 4), 2) end, 'max_pool2d', '3-D or 4-D', '[4, 4]')
    check.expect_error(function() F.max_pool2d(x, 0) end, 'kernel_size', 'positive')
    check.expect_error(function() F.max_pool2d(x, 2, { padding = 2 }) end, 'pad should be at most half of kernel size')
    check.expect_error(function() F.max_pool2d(x, 5) end, 'too small')
    check.expect_error(function() F.max_pool2d(x, 2, { strde = 1 }) end, 'unknown option strde')
    check.expect_error(function() F.max_pool2d(x, { 2, 2, 2 }) end, 'kernel_size', 'table of 2')
    check.expect_error(function() F.avg_pool2d(x, 2, { divisor_override = 0 }) end, 'divisor_override')
    check.expect_error(function() F.max_pool2d(torch.zeros(1, 1, 4, 4, { dtype = 'int64' }), 2) end, 'int64')
    check.expect_error(function() F.adaptive_avg_pool2d(x, 0) end, 'output_size')
    check.expect_error(function() F.max_pool1d(x, 2) end, 'max_pool1d', '2-D or 3-D')
    check.expect_error(function() F.max_pool2d(torch.zeros(1, 1, 0, 4), 2) end, 'non-zero height and width')
    check.expect_error(function() F.max_pool2d(x, 2, { dilation = 1 << 40 }) end, 'dilation', 'too large')
    check.expect_error(function() torch._C.pool2d(x, 'max', false, 2, 2, 1, 1, -1, 0, 1, 1) end, 'padding', 'non-negative')
  end)
end)

describe('resizing and padding match PyTorch 1.13', function()
  it('interpolate (nearest, linear, bilinear, align_corners) and pad (constant, reflect, replicate, circular)', function()
    for _, c in ipairs(fx.resize) do replay(c, 'float64') end
  end)

  it('in float32', function()
    for _, c in ipairs(fx.resize) do replay(c, 'float32', 1e-5) end
  end)

  it('nn.Upsample and nn.ZeroPad2d are the functions as layers', function()
    local x = T(inputs.xr)
    assert.is_true(torch.equal(nn.Upsample({ scale_factor = 2 })(x), F.interpolate(x, { scale_factor = 2 })))
    assert.is_true(torch.equal(nn.Upsample({ size = { 5, 7 }, mode = 'bilinear', align_corners = true })(x),
      F.interpolate(x, { size = { 5, 7 }, mode = 'bilinear', align_corners = true })))
    assert.is_true(torch.equal(nn.ZeroPad2d({ 1, -1, 2, 0 })(x), F.pad(x, { 1, -1, 2, 0 })))
    assert.are.same({ 2, 3, 6, 7 }, check.shape_of(nn.ZeroPad2d(1)(x)))
    assert.are.equal('ZeroPad2d((1, 1, 1, 1))', tostring(nn.ZeroPad2d(1)))
  end)

  it('rejects bad arguments', function()
    local x = torch.zeros(1, 1, 3, 3)
    check.expect_error(function() F.pad(x, { 1, 2, 3 }) end, 'pad', 'even number')
    check.expect_error(function() F.pad(x, { 3, 0 }, 'reflect') end, 'padding size should be less than')
    check.expect_error(function() F.pad(x, { -4, 0 }) end, 'negative or empty size')
    check.expect_error(function() F.pad(x, { 1, 1 }, 'mirror') end, "mode must be 'constant'")
    check.expect_error(function() F.interpolate(x, { size = 4, scale_factor = 2 }) end, 'exactly one of size and scale_factor')
    check.expect_error(function() F.interpolate(x, { size = 4, align_corners = true }) end, 'align_corners')
    check.expect_error(function() F.interpolate(torch.zeros(1, 1, 3), { size = 4, mode = 'bicubic' }) end, 'bicubic', '4-D')
    check.expect_error(function() F.interpolate(x, { size = 4, mode = 'cubic' }) end, 'mode', 'cubic')
  end)

  it('passes gradcheck in float64', function()
    local x = torch.randn(1, 2, 3, 4, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(torch.autograd.gradcheck(function(t) return F.interpolate(t, { size = { 5, 7 }, mode = 'bilinear' }) end, x))
    assert.is_true(torch.autograd.gradcheck(function(t) return F.pad(t, { 2, 1, 1, 2 }, 'reflect') end, x))
    assert.is_true(torch.autograd.gradcheck(function(t) return F.pad(t, { 1, -1, -1, 2 }, 'constant', 3) end, x))
  end)
end)

describe('dropout2d', function()
  it('zeroes whole channels and scales the rest by 1/(1-p)', function()
    torch.manual_seed(7)
    local x = torch.ones(8, 16, 3, 4, { dtype = 'float64' })
    local y = F.dropout2d(x, 0.25):to('cpu')
    local zeros, kept = 0, 0
    for n = 1, 8 do
      for c = 1, 16 do
        local ch = y[n][c]
        local lo, hi = ch:min():item(), ch:max():item()
        assert.are.equal(lo, hi)             -- one value per channel
        if lo == 0 then zeros = zeros + 1 else kept = kept + 1; assert.is_true(math.abs(lo - 4 / 3) < 1e-12) end
      end
    end
    assert.is_true(zeros > 10 and zeros < 60, 'dropped ' .. zeros .. ' of 128 channels')
    local m = nn.Dropout2d(0.5)
    m:eval()
    assert.is_true(rawequal(m(x), x) or torch.equal(m(x), x))
    check.expect_error(function() nn.Dropout2d(1.5) end, 'between 0 and 1')
    check.expect_error(function() F.dropout2d(torch.ones(3, 4), 0.5) end, 'dropout2d')
  end)

  it('sends the gradient only through the kept channels', function()
    torch.manual_seed(3)
    local x = torch.randn(4, 6, 2, 2, { dtype = 'float64' }):requires_grad_(true)
    local y = F.dropout2d(x, 0.5)
    y:sum():backward()
    assert.is_true(torch.equal(x.grad, (y:detach() / x:detach())))
  end)
end)

-- Batch norm -----------------------------------------------------------------------------

local function make_bn(run)
  local m = nn[run.cls](run.shape[2], run.opts)
  m:double()
  if run.init.weight then
    torch.no_grad(function()
      m.weight:copy_(T(run.init.weight))
      m.bias:copy_(T(run.init.bias))
    end)
  end
  return m
end

describe('batch norm matches PyTorch 1.13', function()
  for r, run in ipairs(fx.batchnorm) do
    local opts = {}
    for k, v in pairs(run.opts) do opts[#opts + 1] = k .. '=' .. tostring(v) end
    table.sort(opts)
    local name = ('%s %s {%s}'):format(run.cls, table.concat(run.shape, 'x'), table.concat(opts, ', '))
    it(name .. ': training steps, running statistics, eval', function()
      local m = make_bn(run)
      for s, step in ipairs(run.steps) do
        local what = ('%s step %d'):format(name, s)
        local x = T(step.input):requires_grad_(true)
        if m.weight then m:zero_grad() end
        local y = m(x)
        assert_close(y, step.out, what .. ' output', 1e-9)
        ;(y * T(step.gout)):sum():backward()
        assert_close(x.grad, step.grad, what .. ' input gradient', 1e-9)
        if step.grad_weight then
          assert_close(m.weight.grad, step.grad_weight, what .. ' weight gradient', 1e-9)
          assert_close(m.bias.grad, step.grad_bias, what .. ' bias gradient', 1e-9)
        end
        if step.running_mean then
          assert_close(m.running_mean, step.running_mean, what .. ' running_mean', 1e-12)
          assert_close(m.running_var, step.running_var, what .. ' running_var', 1e-12)
          assert.are.equal(step.num_batches_tracked, m.num_batches_tracked:item())
          assert.are.equal('int64', m.num_batches_tracked.dtype)
        else
          assert.is_nil(m.running_mean)
        end
      end
      m:eval()
      assert_close(m(T(run.eval_input)), run.eval_out, name .. ' eval output', 1e-9)
      local keys = {}
      for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
      table.sort(keys)
      assert.are.same(run.state_keys, keys)
    end)
  end

  it('float32 training follows the float64 run', function()
    local run = fx.batchnorm[1]
    local m = nn.BatchNorm2d(3)
    torch.no_grad(function() m.weight:copy_(T(run.init.weight)); m.bias:copy_(T(run.init.bias)) end)
    for _, step in ipairs(run.steps) do
      local y = m(T(step.input, 'float32'))
      assert_close(y, step.out, 'float32 output', 1e-4)
    end
    assert_close(m.running_var, run.steps[3].running_var, 'float32 running_var', 1e-5)
  end)

  it('passes gradcheck in float64 (training mode, affine)', function()
    local x = torch.randn(3, 2, 2, 2, { dtype = 'float64' }):requires_grad_(true)
    local w = torch.randn(2, { dtype = 'float64' }):requires_grad_(true)
    local b = torch.randn(2, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(torch.autograd.gradcheck(function(t, ww, bb)
      return F.batch_norm(t, nil, nil, { weight = ww, bias = bb, training = true })
    end, { x, w, b }))
  end)

  it('F.batch_norm takes positional arguments as PyTorch', function()
    local x = torch.randn(4, 3, { dtype = 'float64' })
    local rm, rv = torch.zeros(3, { dtype = 'float64' }), torch.ones(3, { dtype = 'float64' })
    local y = F.batch_norm(x, rm, rv, nil, nil, true, 0.5, 1e-5)
    local mean = x:mean(1)
    assert_close(rm, mean * 0.5, 'running mean after one step')
    assert_close(y:mean(1), torch.zeros(3, { dtype = 'float64' }), 'normalised mean', 1e-12)
    -- eval: the running statistics, nothing updated
    local y2 = F.batch_norm(x, rm, rv)
    assert_close(y2, (x - rm) / (rv + 1e-5):sqrt(), 'eval output', 1e-12)
  end)

  it('moves its buffers with :to() and prints as PyTorch', function()
    local m = nn.BatchNorm2d(4, { momentum = false })
    assert.are.equal('BatchNorm2d(4, eps=1e-05, momentum=None, affine=true, track_running_stats=true)', tostring(m))
    m:double()
    assert.are.equal('float64', m.running_mean.dtype)
    assert.are.equal('int64', m.num_batches_tracked.dtype)
    local names = {}
    for n in m:named_buffers() do names[#names + 1] = n end
    assert.are.same({ 'running_mean', 'running_var', 'num_batches_tracked' }, names)
    local seq = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    local keys = {}
    for k in pairs(seq:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ '1.bias', '1.weight', '2.bias', '2.num_batches_tracked', '2.running_mean', '2.running_var',
                      '2.weight' }, keys)
    -- load_state_dict copies the buffers
    local other = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    seq:forward(torch.randn(5, 3))
    other:load_state_dict(seq:state_dict())
    assert.is_true(torch.equal(other[2].running_mean, seq[2].running_mean))
    assert.are.equal(1, other[2].num_batches_tracked:item())
  end)

  it('register_buffer(name, t, false) keeps a buffer out of state_dict only', function()
    local m = nn.Linear(2, 2)
    m:register_buffer('scratch', torch.zeros(2), false)
    m:register_buffer('kept', torch.ones(2))
    local keys = {}
    for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ 'bias', 'kept', 'weight' }, keys)
    assert.are.equal(2, #m:buffers())
    m:double()
    assert.are.equal('float64', m.scratch.dtype)
    m:load_state_dict(m:state_dict())   -- strict: the transient buffer is not missing
    m:register_buffer('scratch', torch.zeros(2))   -- registered again: persistent
    assert.is_not_nil(m:state_dict().scratch)
  end)

  it('nn.SyncBatchNorm without a process group is batch norm; convert_sync_batchnorm swaps the layers', function()
    local run = fx.batchnorm[1]
    local m = nn.SyncBatchNorm(3):double()
    torch.no_grad(function() m.weight:copy_(T(run.init.weight)); m.bias:copy_(T(run.init.bias)) end)
    for s, step in ipairs(run.steps) do
      assert_close(m(T(step.input)), step.out, 'SyncBatchNorm step ' .. s, 1e-9)
    end
    assert_close(m.running_var, run.steps[3].running_var, 'SyncBatchNorm running_var', 1e-12)
    local net = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Sequential(nn.BatchNorm2d(3)))
    local w = net[2].weight
    local conv = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert.is_true(rawequal(conv, net))
    assert.are.equal('nn.SyncBatchNorm', torch.typename(net[2]))
    assert.are.equal('nn.SyncBatchNorm', torch.typename(net[3][1]))
    assert.is_true(rawequal(w, net[2].weight))
    assert.are.equal('nn.Linear', torch.typename(net[1]))
  end)

  it('rejects bad inputs', function()
    check.expect_error(function() nn.BatchNorm2d(3)(torch.zeros(2, 3, 4)) end, 'BatchNorm2d', '4D', '[2, 3, 4]')
    check.expect_error(function() nn.BatchNorm1d(3)(torch.zeros(1, 3)) end, 'more than 1 value per channel')
    check.expect_error(function() nn.BatchNorm1d(3)(torch.zeros(2, 4)) end, 'running_mean should contain 4 elements not 3')
    check.expect_error(function() nn.BatchNorm1d(0) end, 'num_features')
    check.expect_error(function() nn.BatchNorm1d(3, { momentum = 'x' }) end, 'momentum')
    check.expect_error(function() F.batch_norm(torch.zeros(2, 3), nil, nil) end, 'training is false')
  end)
end)
