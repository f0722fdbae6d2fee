-- The interpolation modes (bicubic, area, nearest-exact, 3-D nearest and trilinear), the
-- convolutions' padding modes and the 3-D layers against PyTorch 1.13: values and float64
-- gradients from spec/fixtures/vismodes.lua (written by spec/fixtures/make_vismodes.py),
-- float32 to a looser tolerance, and the errors of bad arguments.
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local check = dofile('spec/helpers/check.lua')

local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*)/') or '.'
local fx = dofile(here .. '/fixtures/vismodes.lua')

local inputs = {}
for _, e in ipairs(fx.inputs) do inputs[e.name] = e.value end

local function T(v, dtype) return torch.tensor(v, { dtype = dtype or 'float64' }) end

local assert_close = check.assert_close

-- the output's gradient the generator used: sin(0.7 k + 0.3) at flat position k (from 0)
local function gout_for(y)
  return (torch.arange(y:numel(), { dtype = 'float64' }) * 0.7 + 0.3):sin():reshape(y:size()):to(y.dtype)
end

local function show(v)
  if type(v) ~= 'table' then return tostring(v) end
  local parts = {}
  for i, x in ipairs(v) do parts[i] = tostring(x) end
  return '{' .. table.concat(parts, ',') .. '}'
end

local function describe_case(c)
  local parts = {}
  for k, v in pairs(c.opts or {}) do parts[#parts + 1] = k .. '=' .. show(v) end
  table.sort(parts)
  return ('%s(%s: %s)'):format(c.fn, c.input, table.concat(parts, ' '))
end

-- replays case c in dtype: f(x [, weight, bias]) -> output; compares the output and the
-- gradients of sum(output * gout)
local function replay(c, f, dtype, tol, params)
  local x = T(inputs[c.input], dtype):requires_grad_(true)
  local out = f(x)
  local what = describe_case(c)
  assert_close(out, c.out, what .. ' output', tol)
  ;(out * gout_for(out)):sum():backward()
  assert_close(x.grad, c.grad, what .. ' input gradient', tol)
  for name, p in pairs(params or {}) do
    assert_close(p.grad, c['grad_' .. name], what .. ' ' .. name .. ' gradient', tol)
  end
end

local function interp_call(c)
  if c.fn == 'Upsample' then return nn.Upsample(c.opts) end
  return function(x) return F.interpolate(x, c.opts) end
end

describe('interpolate modes match PyTorch 1.13', function()
  it('bicubic, area, nearest-exact, 3-D nearest and trilinear, and nn.Upsample: values and float64 gradients', function()
    for _, c in ipairs(fx.interp) do replay(c, interp_call(c), 'float64') end
  end)

  it('in float32', function()
    for _, c in ipairs(fx.interp) do replay(c, interp_call(c), 'float32', 2e-5) end
  end)

  it('shows nn.Upsample as PyTorch does', function()
    local n = 0
    for _, c in ipairs(fx.interp) do
      if c.repr then
        assert.are.equal(c.repr, tostring(nn.Upsample(c.opts)))
        n = n + 1
      end
    end
    assert.are.equal(5, n)
  end)

  it('takes PyTorch\'s positional arguments (size, scale_factor, mode, align_corners)', function()
    local x = T(inputs.x2)
    assert.is_true(torch.equal(F.interpolate(x, { 7, 8 }, nil, 'bicubic', true),
                               F.interpolate(x, { size = { 7, 8 }, mode = 'bicubic', align_corners = true })))
    assert.is_true(torch.equal(F.interpolate(x, nil, 0.5, 'area'), F.adaptive_avg_pool2d(x, { 2, 3 })))
  end)

  it('passes gradcheck in float64', function()
    local x = torch.randn(1, 2, 3, 4, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(torch.autograd.gradcheck(function(t)
      return F.interpolate(t, { size = { 5, 3 }, mode = 'bicubic' }) end, x))
    local x3 = torch.randn(1, 1, 2, 3, 4, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(torch.autograd.gradcheck(function(t)
      return F.interpolate(t, { size = { 3, 2, 5 }, mode = 'trilinear', align_corners = true }) end, x3))
    assert.is_true(torch.autograd.gradcheck(function(t)
      return F.interpolate(t, { size = { 2, 2, 3 }, mode = 'area' }) end, x3))
  end)

  it('rejects bad modes, dims and options with clear errors', function()
    local x1, x2, x3 = torch.zeros(1, 1, 4), torch.zeros(1, 1, 4, 4), torch.zeros(1, 1, 2, 4, 4)
    check.expect_error(function() F.interpolate(x2, { size = 3, mode = 'cubic' }) end, 'interpolate', 'mode', 'cubic')
    check.expect_error(function() F.interpolate(x1, { size = 3, mode = 'bicubic' }) end, "mode 'bicubic'", '4-D',
      '[1, 1, 4]')
    check.expect_error(function() F.interpolate(x3, { size = 3, mode = 'bilinear' }) end, "mode 'bilinear'", '4-D')
    check.expect_error(function() F.interpolate(x2, { size = 3, mode = 'trilinear' }) end, "mode 'trilinear'", '5-D')
    check.expect_error(function() F.interpolate(torch.zeros(1, 4), { size = 3 }) end, '3-D, 4-D or 5-D', '[1, 4]')
    check.expect_error(function() F.interpolate(x3, { size = 3, mode = 'area', align_corners = true }) end,
      'align_corners', 'bicubic')
    check.expect_error(function() F.interpolate(x3, { scale_factor = { 2, 2 } }) end, 'scale_factor', 'table of 3')
    check.expect_error(function() F.interpolate(x3, { size = { 2, 2 } }) end, 'size', 'table of 3')
    check.expect_error(function() F.interpolate(x2, { scale_factor = 0.1, mode = 'area' }) end, 'output size', '0')
    check.expect_error(function() nn.Upsample({ scale_factor = 2, mode = 'bicubic' })(x1) end, "mode 'bicubic'")
  end)
end)

-- the case's layer in dtype with PyTorch's weight and bias
local function conv_layer(c, dtype)
  local o = {}
  for k, v in pairs(c.opts) do o[k] = v end
  o.dtype = dtype
  local m = nn[c.cls](4, c.out_channels, c.kernel, o)
  torch.no_grad(function()
    m.weight:copy_(T(c.weight, dtype))
    if c.bias then m.bias:copy_(T(c.bias, dtype)) end
  end)
  return m
end

describe('convolution padding modes match PyTorch 1.13', function()
  it("nn.Conv1d / Conv2d with padding_mode 'zeros', 'reflect', 'replicate', 'circular': values and float64 gradients", function()
    for _, c in ipairs(fx.conv) do
      local m = conv_layer(c, 'float64')
      replay(c, m, 'float64', 1e-10, { weight = m.weight, bias = m.bias })
    end
  end)

  it('in float32', function()
    for _, c in ipairs(fx.conv) do
      local m = conv_layer(c, 'float32')
      replay(c, m, 'float32', 1e-4, { weight = m.weight, bias = m.bias })
    end
  end)

  it('prints as PyTorch', function()
    for _, c in ipairs(fx.conv) do assert.are.equal(c.repr, tostring(conv_layer(c, 'float64'))) end
  end)

  it('pads an unbatched input as the batched one (circular too, which PyTorch 1.13 refuses there)', function()
    local x = T(inputs.c2u)
    for _, mode in ipairs { 'reflect', 'replicate', 'circular' } do
      local m = nn.Conv2d(4, 3, 3, { padding = { 1, 2 }, padding_mode = mode, dtype = 'float64' })
      assert_close(m(x), m(x:unsqueeze(1)):squeeze(1), mode)
      -- against the padding written out: F.pad in that mode, then no padding
      local want = F.conv2d(F.pad(x:unsqueeze(1), { 2, 2, 1, 1 }, mode), m.weight, m.bias)
      assert_close(m(x:unsqueeze(1)), want, mode .. ' as F.pad then conv2d')
    end
  end)

  it('rejects bad padding modes and pads that do not fit', function()
    check.expect_error(function() nn.Conv1d(1, 1, 3, { padding_mode = 'reflection' }) end, 'nn.Conv1d', 'padding_mode',
      'reflection')
    check.expect_error(function() nn.ConvTranspose1d(1, 1, 3, { padding_mode = 'circular' }) end, "only padding_mode 'zeros'")
    local m = nn.Conv2d(1, 1, 3, { padding = 2, padding_mode = 'reflect' })
    check.expect_error(function() m(torch.zeros(1, 1, 2, 5)) end, 'pad', 'padding size should be less than')
    check.expect_error(function() m('x') end, 'nn.Conv2d', 'input')
  end)
end)

-- the case's call in dtype: f(x) -> output [, indices], and the weight and bias it uses
local function three_d_call(c, dtype)
  local o = c.opts
  if c.fn == 'conv3d' or c.fn == 'conv_transpose3d' then
    local w = T(c.weight, dtype):requires_grad_(true)
    local b = c.bias and T(c.bias, dtype):requires_grad_(true) or nil
    return function(x) return F[c.fn](x, w, b, o) end, { weight = w, bias = b }
  elseif c.fn == 'adaptive_avg_pool3d' then
    return function(x) return F.adaptive_avg_pool3d(x, o.output_size) end
  end
  local rest = {}
  for k, v in pairs(o) do if k ~= 'kernel_size' then rest[k] = v end end
  if c.fn == 'max_pool3d' then rest.return_indices = true end
  return function(x) return F[c.fn](x, o.kernel_size, rest) end
end

describe('3-D layers match PyTorch 1.13', function()
  it('conv3d, conv_transpose3d, max_pool3d (with indices), avg_pool3d, adaptive_avg_pool3d: values and float64 gradients', function()
    for _, c in ipairs(fx.three_d) do
      local f, params = three_d_call(c, 'float64')
      local indices
      replay(c, function(x)
        local y, i = f(x)
        indices = i
        return y
      end, 'float64', 1e-10, params)
      if c.indices then
        assert.is_true(torch.equal(indices, torch.tensor(c.indices, { dtype = 'int64' })), describe_case(c) .. ' indices')
      end
    end
  end)

  it('in float32', function()
    for _, c in ipairs(fx.three_d) do
      local f, params = three_d_call(c, 'float32')
      replay(c, function(x) return (f(x)) end, 'float32', 1e-4, params)
    end
  end)

  it('as layers: nn.Conv3d, nn.ConvTranspose3d, nn.MaxPool3d, nn.AvgPool3d, nn.AdaptiveAvgPool3d', function()
    local x = T(inputs.v)
    local conv = nn.Conv3d(4, 2, { 2, 3, 2 }, { stride = { 1, 2, 1 }, padding = 1, dtype = 'float64' })
    assert.are.same({ 2, 4, 2, 3, 2 }, check.shape_of(conv.weight))
    assert_close(conv(x), F.conv3d(x, conv.weight, conv.bias, { stride = { 1, 2, 1 }, padding = 1 }), 'Conv3d')
    assert.are.equal('Conv3d(4, 2, kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 1))', tostring(conv))
    local up = nn.ConvTranspose3d(4, 2, 3, { stride = 2, padding = 1, output_padding = 1, dtype = 'float64' })
    assert.are.same({ 4, 2, 3, 3, 3 }, check.shape_of(up.weight))
    assert.are.same({ 1, 2, 6, 8, 10 }, check.shape_of(up(x)))
    assert.is_true(torch.equal(nn.MaxPool3d(2, { stride = 1 })(x), F.max_pool3d(x, 2, { stride = 1 })))
    assert.is_true(torch.equal(nn.AvgPool3d(2, 1, { count_include_pad = false, padding = 1 })(x),
                               F.avg_pool3d(x, 2, { stride = 1, count_include_pad = false, padding = 1 })))
    assert.is_true(torch.equal(nn.AdaptiveAvgPool3d({ 2, false, 3 })(x), F.adaptive_avg_pool3d(x, { 2, 4, 3 })))
    assert.are.equal('AdaptiveAvgPool3d(output_size=(2, None, 3))', tostring(nn.AdaptiveAvgPool3d({ 2, false, 3 })))
    assert.are.equal('MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)', tostring(nn.MaxPool3d(2)))
  end)

  it('conv3d against a naive sum over the kernel', function()
    local x = torch.randn(1, 2, 3, 4, 3, { dtype = 'float64' })
    local w = torch.randn(2, 2, 2, 2, 2, { dtype = 'float64' })
    local y = F.conv3d(x, w):tolist()
    local xv, wv = x:tolist(), w:tolist()
    for o = 1, 2 do
      for d = 1, 2 do for h = 1, 3 do for ww = 1, 2 do
        local s = 0
        for ci = 1, 2 do for a = 1, 2 do for b = 1, 2 do for e = 1, 2 do
          s = s + xv[1][ci][d + a - 1][h + b - 1][ww + e - 1] * wv[o][ci][a][b][e]
        end end end end
        assert.is_true(math.abs(y[1][o][d][h][ww] - s) < 1e-12)
      end end end
    end
  end)

  it('passes gradcheck in float64', function()
    local x = torch.randn(1, 2, 3, 3, 4, { dtype = 'float64' }):requires_grad_(true)
    local w = torch.randn(2, 1, 2, 2, 2, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(torch.autograd.gradcheck(function(a, b) return F.conv3d(a, b, nil, { padding = 1, groups = 2 }) end, { x, w }))
    local wt = torch.randn(2, 2, 2, 1, 2, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(torch.autograd.gradcheck(function(a, b)
      return F.conv_transpose3d(a, b, nil, { stride = 2, padding = { 1, 0, 0 } }) end, { x, wt }))
    assert.is_true(torch.autograd.gradcheck(function(a) return F.avg_pool3d(a, 2, { stride = 1, padding = 1 }) end, x))
    assert.is_true(torch.autograd.gradcheck(function(a) return F.max_pool3d(a, 2, { stride = 1 }) end, x))
  end)

  it('nn.BatchNorm3d: training steps, running statistics and eval', function()
    local r = fx.batchnorm3d[1]
    local m = nn.BatchNorm3d(3, { momentum = 0.2, dtype = 'float64' })
    torch.no_grad(function() m.weight:copy_(T(r.weight)); m.bias:copy_(T(r.bias)) end)
    for i, step in ipairs(r.steps) do
      m:zero_grad()
      local x = T(step.input):requires_grad_(true)
      local y = m(x)
      assert_close(y, step.out, 'step ' .. i .. ' output')
      ;(y * gout_for(y)):sum():backward()
      assert_close(x.grad, step.grad, 'step ' .. i .. ' input gradient')
      assert_close(m.weight.grad, step.grad_weight, 'step ' .. i .. ' weight gradient')
      assert_close(m.bias.grad, step.grad_bias, 'step ' .. i .. ' bias gradient')
      assert_close(m.running_mean, step.running_mean, 'step ' .. i .. ' running_mean')
      assert_close(m.running_var, step.running_var, 'step ' .. i .. ' running_var')
    end
    m:eval()
    assert_close(m(T(r.eval_input)), r.eval_out, 'eval output')
    check.expect_error(function() m(torch.zeros(2, 3, 4, 4, { dtype = 'float64' })) end, 'BatchNorm3d', '5D', '[2, 3, 4, 4]')
  end)

  it('rejects bad 3-D arguments with clear errors', function()
    local x = torch.zeros(1, 2, 3, 4, 4)
    check.expect_error(function() F.conv3d(torch.zeros(2, 3, 4), torch.zeros(1, 2, 1, 1, 1)) end, 'conv3d', '5-D', '[2, 3, 4]')
    check.expect_error(function() F.conv3d(x, torch.zeros(1, 3, 1, 1, 1)) end, 'conv3d', 'expected input', '3 channels',
      'got 2 channels')
    check.expect_error(function() F.conv3d(x, torch.zeros(1, 2, 4, 1, 1)) end, 'conv3d', 'depth')
    check.expect_error(function() F.conv3d(x, torch.zeros(1, 2, 1, 1)) end, 'conv3d', '5D weight')
    check.expect_error(function() F.conv3d(x, torch.zeros(1, 2, 1, 1, 1), torch.zeros(2)) end, 'conv3d', 'bias')
    check.expect_error(function() F.conv_transpose3d(x, torch.zeros(2, 1, 2, 2, 2), nil, { output_padding = { 2, 0, 0 } }) end,
      'conv_transpose3d', 'output padding')
    check.expect_error(function() F.max_pool3d(torch.zeros(3, 4, 4), 2) end, 'max_pool3d', '4-D or 5-D')
    check.expect_error(function() F.max_pool3d(x, 2, { padding = 2 }) end, 'max_pool3d', 'pad should be at most half')
    check.expect_error(function() F.avg_pool3d(x, { 2, 2 }) end, 'avg_pool3d', 'kernel_size', 'table of 3')
    check.expect_error(function() F.avg_pool3d(x, 2, { divisor_override = 0 }) end, 'divisor_override')
    check.expect_error(function() F.max_pool3d(torch.zeros(1, 1, 0, 4, 4), 2) end, 'non-zero depth')
    check.expect_error(function() F.adaptive_avg_pool3d(x, { 1, 2 }) end, 'adaptive_avg_pool3d', 'output_size')
  end)
end)
