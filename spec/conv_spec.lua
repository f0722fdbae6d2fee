-- Convolution: nn.functional's conv1d, conv2d, conv_transpose1d, conv_transpose2d and the
-- layers nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d.  Outputs and the input, weight and bias
-- gradients against PyTorch 1.13's for the same inputs (spec/fixtures/make_conv.py), in
-- float32 and float64; float64 gradchecks; the layers' shapes, initialisation and repr;
-- the errors.
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local check = dofile('spec/helpers/check.lua')
local expect_error, run_child = check.expect_error, check.run_child
local cases = dofile('spec/fixtures/conv.lua')

local function close(a, b, tol, what)
  b = torch.is_tensor(b) and b or torch.tensor(b, { dtype = 'float64' })
  local a64, b64 = a:detach():double():cpu(), b:detach():double():cpu()
  assert(a64:dim() == b64:dim(), ('%s: %d dims, expected %d'):format(what, a64:dim(), b64:dim()))
  for d = 1, a64:dim() do
    assert(a64:size(d) == b64:size(d), ('%s: size %d in dim %d, expected %d'):format(what, a64:size(d), d, b64:size(d)))
  end
  local diff = (a64 - b64):abs():max():item()
  local scale = 1 + b64:abs():max():item()
  assert(diff <= tol * scale, ('%s differs from PyTorch by %g'):format(what, diff))
end

-- Runs a fixture case in dtype; returns the output and the gradients.
local function replay(c, dtype)
  local function leaf(v) return torch.tensor(v, { dtype = dtype }):requires_grad_() end
  local x, w = leaf(c.x), leaf(c.w)
  local b = c.b and leaf(c.b) or nil
  local y = F[c.fn](x, w, b, c.opts)
  y:backward(torch.tensor(c.g, { dtype = dtype }))
  return y, x.grad, w.grad, b and b.grad
end

describe('nn.functional convolutions match PyTorch 1.13', function()
  for _, dtype in ipairs { 'float32', 'float64' } do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c.name, dtype), function()
        local y, gx, gw, gb = replay(c, dtype)
        local tol = dtype == 'float32' and 2e-5 or 1e-6
        assert.are.equal(dtype, y.dtype)
        close(y, c.y, tol, 'the output')
        close(gx, c.gx, tol, 'the input gradient')
        close(gw, c.gw, tol, 'the weight gradient')
        if c.b then close(gb, c.gb, tol, 'the bias gradient') end
        assert.are.equal('ConvolutionBackward0', y.grad_fn.name)
      end)
    end
  end

  -- The CPU kernels run small products per image and large ones in chunks of the batch;
  -- the cases above are small, so they run again with every product taking the chunks.
  it('match on the CPU with every convolution in chunks of the batch', function()
    local out, status = run_child([[
      local torch = require 'torch'
      local F = require('nn').functional
      for _, c in ipairs(dofile('spec/fixtures/conv.lua')) do
        for _, dtype in ipairs { 'float32', 'float64' } do
          local function leaf(v) return torch.tensor(v, { dtype = dtype }):requires_grad_() end
          local x, w = leaf(c.x), leaf(c.w)
          local b = c.b and leaf(c.b) or nil
          local y = F[c.fn](x, w, b, c.opts)
          y:backward(torch.tensor(c.g, { dtype = dtype }))
          local got = { y = y, gx = x.grad, gw = w.grad, gb = b and b.grad }
          for _, k in ipairs { 'y', 'gx', 'gw', 'gb' } do
            if c[k] then
              local ref = torch.tensor(c[k], { dtype = 'float64' })
              local diff = (got[k]:double() - ref):abs():max():item()
              if diff > 2e-5 * (1 + ref:abs():max():item()) then print('FAIL', c.name, dtype, k, diff) end
            end
          end
        end
      end
      print('checked')
    ]], 'DPLUA_CONV_SMALL_GEMM=0')
    assert.are.equal(0, status, out)
    assert.is_truthy(out:find('checked', 1, true), out)
    assert.is_falsy(out:find('FAIL', 1, true), out)
  end)

  it('a convolution without any requires_grad records nothing', function()
    local y = F.conv2d(torch.randn(1, 2, 4, 4), torch.randn(3, 2, 3, 3))
    assert.is_nil(y.grad_fn)
    assert.is_false(y.requires_grad)
  end)

  it('takes a non-contiguous input and weight', function()
    local c = cases[1]
    local x = torch.tensor(c.x):transpose(3, 4):contiguous():transpose(3, 4)
    local w = torch.tensor(c.w):transpose(1, 2):contiguous():transpose(1, 2)
    assert.is_false(x:is_contiguous())
    close(F.conv2d(x, w, torch.tensor(c.b), c.opts), c.y, 2e-5, 'the output')
  end)

  it('a batch larger than one chunk of buffers: the same as the convolution written with matmul', function()
    -- 18 x 417k columns per image: the CPU kernels take the images one chunk at a time
    local x = torch.randn(3, 2, 600, 700, { dtype = 'float64' }):requires_grad_()
    local w = torch.randn(2, 2, 3, 3, { dtype = 'float64' }):requires_grad_()
    local b = torch.randn(2, { dtype = 'float64' }):requires_grad_()
    local y = F.conv2d(x, w, b)
    local g = torch.randn(3, 2, 598, 698, { dtype = 'float64' })
    y:backward(g)
    local gx, gw, gb = x.grad, w.grad, b.grad
    x.grad, w.grad, b.grad = nil, nil, nil
    local ref = b:reshape(1, 2, 1)
    for kh = 1, 3 do
      for kw = 1, 3 do
        local patch = x:narrow(3, kh, 598):narrow(4, kw, 698):reshape(3, 2, 598 * 698)
        ref = ref + torch.matmul(w:select(4, kw):select(3, kh), patch)
      end
    end
    ref = ref:reshape(3, 2, 598, 698)
    ref:backward(g)
    close(y, ref, 1e-10, 'the output')
    close(gx, x.grad, 1e-10, 'the input gradient')
    close(gw, w.grad, 1e-10, 'the weight gradient')
    close(gb, b.grad, 1e-10, 'the bias gradient')
  end)

  it('an empty batch gives an empty output and zero gradients', function()
    local x = torch.randn(0, 2, 5, 5):requires_grad_()
    local w = torch.randn(3, 2, 3, 3):requires_grad_()
    local b = torch.randn(3):requires_grad_()
    local y = F.conv2d(x, w, b)
    assert.are.same({ 0, 3, 3, 3 }, { y:size(1), y:size(2), y:size(3), y:size(4) })
    y:sum():backward()
    assert.are.equal(0, w.grad:abs():sum():item())
    assert.are.equal(0, b.grad:abs():sum():item())
  end)
end)

describe('convolution gradcheck (float64)', function()
  local function check(fn, xs, ws, bn, opts)
    local x = torch.randn(xs, { dtype = 'float64' }):requires_grad_()
    local w = torch.randn(ws, { dtype = 'float64' }):requires_grad_()
    local b = bn and torch.randn(bn, { dtype = 'float64' }):requires_grad_() or nil
    assert.is_true(torch.autograd.gradcheck(function(a, c, d) return F[fn](a, c, d, opts) end, { x, w, b }))
  end
  it('conv2d with stride, padding, dilation and groups', function()
    check('conv2d', { 2, 4, 6, 5 }, { 4, 2, 2, 3 }, 4, { stride = { 2, 1 }, padding = { 1, 2 }, dilation = { 1, 2 }, groups = 2 })
  end)
  it("conv2d with padding='same' and an even kernel", function()
    check('conv2d', { 1, 2, 5, 4 }, { 3, 2, 2, 4 }, 3, { padding = 'same' })
  end)
  it('conv1d', function()
    check('conv1d', { 2, 3, 7 }, { 2, 3, 3 }, nil, { stride = 2, padding = 1, dilation = 2 })
  end)
  it('conv_transpose2d with output_padding and groups', function()
    check('conv_transpose2d', { 1, 4, 3, 3 }, { 4, 1, 3, 2 }, 2, { stride = { 2, 3 }, padding = { 1, 0 }, output_padding = { 1, 2 }, groups = 2 })
  end)
  it('conv_transpose1d with dilation', function()
    check('conv_transpose1d', { 2, 2, 4 }, { 2, 3, 3 }, 3, { stride = 2, dilation = 2, output_padding = 1 })
  end)
end)

describe('nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d', function()
  it("print as PyTorch's repr", function()
    assert.are.equal('Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))', tostring(nn.Conv2d(1, 32, 3, { stride = 1 })))
    assert.are.equal('Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 2), groups=2, bias=False)',
      tostring(nn.Conv2d(4, 8, { 3, 5 }, { stride = { 2, 1 }, padding = { 1, 2 }, dilation = 2, groups = 2, bias = false })))
    assert.are.equal('Conv1d(2, 4, kernel_size=(4,), stride=(1,), padding=same)', tostring(nn.Conv1d(2, 4, 4, { padding = 'same' })))
    assert.are.equal('ConvTranspose2d(16, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))',
      tostring(nn.ConvTranspose2d(16, 8, 3, { stride = 2, padding = 1, output_padding = 1 })))
    assert.are.equal('ConvTranspose1d(2, 3, kernel_size=(3,), stride=(2,), dilation=(2,), bias=False)',
      tostring(nn.ConvTranspose1d(2, 3, 3, { stride = 2, dilation = 2, bias = false })))
  end)

  it("have PyTorch's parameter shapes and names", function()
    local m = nn.Conv2d(4, 6, { 3, 2 }, { groups = 2 })
    assert.are.same({ 6, 2, 3, 2 }, { m.weight:size(1), m.weight:size(2), m.weight:size(3), m.weight:size(4) })
    assert.are.equal(6, m.bias:size(1))
    local t = nn.ConvTranspose2d(4, 6, 3, { groups = 2 })
    assert.are.same({ 4, 3, 3, 3 }, { t.weight:size(1), t.weight:size(2), t.weight:size(3), t.weight:size(4) })
    assert.are.equal(6, t.bias:size(1))
    local sd = nn.Conv1d(2, 3, 5, { bias = false }):state_dict()
    assert.is_not_nil(sd.weight)
    assert.is_nil(sd.bias)
  end)

  it('draw weight and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as kaiming_uniform(a=sqrt(5))', function()
    torch.manual_seed(1)
    local m = nn.Conv2d(8, 64, 3)                    -- fan_in 72
    local t = nn.ConvTranspose2d(8, 16, 3)           -- fan_in = 16 * 9
    for _, case in ipairs { { m, 72 }, { t, 144 } } do
      local mod, bound = case[1], 1 / math.sqrt(case[2])
      for _, p in ipairs { mod.weight, mod.bias } do
        local top = p:abs():max():item()
        assert.is_true(top <= bound * (1 + 1e-6), ('%g > %g'):format(top, bound))
        assert.is_true(top > 0.5 * bound, ('%g: not spread over the interval'):format(top))
      end
    end
  end)

  it('forward is the functional form with the layer options', function()
    local m = nn.ConvTranspose2d(2, 3, 3, { stride = 2, padding = 1, output_padding = 1 })
    local x = torch.randn(1, 2, 4, 4)
    local y = m(x)
    assert.are.same({ 1, 3, 8, 8 }, { y:size(1), y:size(2), y:size(3), y:size(4) })
    close(y, F.conv_transpose2d(x, m.weight, m.bias, { stride = 2, padding = 1, output_padding = 1 }), 1e-6, 'the output')
    local c = nn.Conv1d(2, 4, 4, { padding = 'same', dilation = 2, bias = false })
    local x1 = torch.randn(3, 2, 9)
    local y1 = c(x1)
    assert.are.same({ 3, 4, 9 }, { y1:size(1), y1:size(2), y1:size(3) })
    close(y1, F.conv1d(x1, c.weight, nil, { padding = 'same', dilation = 2 }), 1e-6, 'the output')
  end)

  it('float64 layers with dtype=', function()
    local m = nn.Conv2d(1, 2, 3, { dtype = 'float64' })
    assert.are.equal('float64', m.weight.dtype)
    assert.are.equal('float64', m(torch.randn(1, 1, 4, 4, { dtype = 'float64' })).dtype)
  end)
end)

describe('convolution errors', function()
  it('wrong channel counts', function()
    expect_error(function() F.conv2d(torch.randn(2, 3, 8, 8), torch.randn(4, 2, 3, 3)) end,
      'Given groups=1, weight of size [4, 2, 3, 3], expected input[2, 3, 8, 8] to have 2 channels, but got 3 channels instead')
    expect_error(function() nn.Conv2d(1, 32, 3)(torch.randn(64, 3, 28, 28)) end, 'expected input[64, 3, 28, 28] to have 1 channels')
    expect_error(function() F.conv_transpose2d(torch.randn(1, 3, 4, 4), torch.randn(2, 2, 3, 3)) end,
      'Given transposed=1, groups=1, weight of size [2, 2, 3, 3], expected input[1, 3, 4, 4] to have 2 channels, but got 3 channels instead')
  end)
  it('groups that do not divide', function()
    expect_error(function() nn.Conv2d(3, 4, 3, { groups = 2 }) end, 'in_channels must be divisible by groups')
    expect_error(function() nn.Conv2d(4, 3, 3, { groups = 2 }) end, 'out_channels must be divisible by groups')
    expect_error(function() nn.Conv2d(4, 4, 3, { groups = 0 }) end, 'groups must be a positive integer')
    expect_error(function() F.conv2d(torch.randn(1, 4, 5, 5), torch.randn(3, 2, 3, 3), nil, { groups = 2 }) end,
      'Given groups=2, expected weight to be divisible by 2 at dimension 1, but got weight of size [3, 2, 3, 3] instead')
  end)
  it('a kernel larger than the padded input', function()
    expect_error(function() F.conv2d(torch.randn(1, 1, 2, 5), torch.randn(1, 1, 3, 3)) end,
      'calculated padded input size per channel: (2 x 5). Kernel size: (3 x 3). Kernel size can\'t be greater than actual input size')
    expect_error(function() F.conv1d(torch.randn(1, 1, 4), torch.randn(1, 1, 3), nil, { dilation = 2 }) end,
      'padded input size per channel: (4). Kernel size: (5)')
  end)
  it('padding strings', function()
    expect_error(function() nn.Conv2d(1, 1, 3, { padding = 'same', stride = 2 }) end,
      "padding='same' is not supported for strided convolutions")
    expect_error(function() F.conv2d(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3), nil, { padding = 'full' }) end,
      "invalid padding string 'full', should be one of 'valid', 'same'")
    expect_error(function() nn.ConvTranspose2d(1, 1, 3, { padding = 'same' }) end, 'padding must be an integer or a table of 2 integers')
    expect_error(function() nn.Conv2d(1, 1, 3, { padding_mode = 'mirror' }) end, 'nn.Conv2d', 'padding_mode must be one of', 'mirror')
    expect_error(function() nn.ConvTranspose2d(1, 1, 3, { padding_mode = 'reflect' }) end, 'nn.ConvTranspose2d',
      "only padding_mode 'zeros'", 'reflect')
  end)
  it('bad sizes and options', function()
    expect_error(function() nn.Conv2d(1, 1, { 3, 3, 3 }) end, 'kernel_size must be an integer or a table of 2 integers, got {3, 3, 3}')
    expect_error(function() F.conv2d(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3), nil, { stride = 0 }) end,
      'non-positive stride is not supported')
    expect_error(function() F.conv2d(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3), nil, { padding = -1 }) end,
      'negative padding is not supported')
    expect_error(function() F.conv2d(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3), nil, { dilation = 0 }) end,
      'dilation should be greater than zero')
    expect_error(function() nn.Conv2d(1, 1, 3, { strides = 2 }) end, 'unknown option strides')
    expect_error(function() F.conv_transpose2d(torch.randn(1, 1, 3, 3), torch.randn(1, 1, 3, 3), nil, { stride = 2, output_padding = 2 }) end,
      'output padding must be smaller than either stride or dilation, but got output_padding 2, stride 2 and dilation 1 in dim 1')
    expect_error(function() F.conv_transpose2d(torch.randn(1, 1, 1, 1), torch.randn(1, 1, 1, 1), nil, { padding = 1 }) end,
      'Output size is too small')
  end)
  it('wrong input, weight and bias shapes and dtypes', function()
    expect_error(function() nn.Conv2d(1, 2, 3)(torch.randn(28, 28)) end,
      'conv2d: expected 3D (unbatched) or 4D (batched) input, but got input of size: [28, 28]')
    expect_error(function() F.conv2d(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3)) end, 'expected a 4D weight')
    expect_error(function() F.conv2d(torch.randn(1, 1, 5, 5), torch.randn(2, 1, 3, 3), torch.randn(3)) end,
      'expected bias to be 1-dimensional with 2 elements, but got bias of size [3] instead')
    expect_error(function() F.conv2d(torch.randn(1, 1, 5, 5, { dtype = 'float64' }), torch.randn(2, 1, 3, 3)) end,
      'expected input, weight and bias of the same dtype, got float64, float32 and none')
    expect_error(function() F.conv1d(torch.ones(1, 1, 5, { dtype = 'int64' }), torch.ones(1, 1, 3, { dtype = 'int64' })) end,
      'expected a float32, float64, float16 or bfloat16 input, got int64')
    expect_error(function() F.conv2d('x', torch.randn(1, 1, 3, 3)) end, "conv2d: input must be a tensor, got 'x'")
  end)
end)
