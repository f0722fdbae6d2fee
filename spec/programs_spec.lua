-- What translating public PyTorch programs asked for (examples/programs/): affine_grid and
-- grid_sample (the spatial transformer tutorial) against PyTorch 1.13's values and
-- gradients (spec/fixtures/programs.lua, from spec/fixtures/make_programs.py) and float64
-- gradchecks; torch.finfo / iinfo; the logical ops; the functional dropouts' named
-- options (F.dropout(x, {training = self.training})); t:type(dtype); and a DataLoader
-- indexed as a list (ipairs) being an error instead of zero batches.  spec/gpu/specs runs
-- this file again on cpu:1 and the emulated cuda:0.
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local check = dofile('spec/helpers/check.lua')

local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*)/') or '.'
local fx = dofile(here .. '/fixtures/programs.lua')

local function T(v) return torch.tensor(v, { dtype = 'float64' }) end

local function assert_close(got, want, what, tol)
  tol = tol or 1e-10
  if not torch.is_tensor(want) then want = T(want) end
  assert.are.equal(tostring(want:size()), tostring(got:size()), what .. ': shapes differ')
  local g, w = got:to('cpu'):double(), want:to('cpu'):double()
  if not torch.allclose(g, w, tol, tol) then
    error(('%s: values differ (max |got - want| = %g)'):format(what, (g - w):abs():max():item()), 2)
  end
end

describe('F.affine_grid', function()
  for i, c in ipairs(fx.affine) do
    local what = ('size {%s}, align_corners=%s'):format(table.concat(c.size, ', '), tostring(c.align_corners))
    it('matches PyTorch: ' .. what, function()
      local theta = T(fx.theta):requires_grad_()
      local grid = F.affine_grid(theta, c.size, c.align_corners)
      assert_close(grid, c.grid, what .. ' (grid)')
      ;(grid * T(c.gout)):sum():backward()
      assert_close(theta.grad, c.dtheta, what .. ' (d theta)')
    end)
    if i == 1 then
      it('takes a torch.Size and the options as a table', function()
        local x = torch.zeros(c.size, { dtype = 'float64' })
        assert_close(F.affine_grid(T(fx.theta), x:size(), { align_corners = false }), c.grid, 'Size')
      end)
    end
  end

  it('refuses a theta of the wrong shape, a 3-D size and integer theta', function()
    check.expect_error(function() F.affine_grid(torch.zeros(2, 3, 3), { 2, 1, 4, 4 }) end,
      'affine_grid', '[2, 2, 3]', '[2, 3, 3]')
    check.expect_error(function() F.affine_grid(torch.zeros(2, 2, 3), { 1, 1, 4, 4 }) end, '[1, 2, 3]')
    check.expect_error(function() F.affine_grid(torch.zeros(1, 3, 4), { 1, 1, 2, 4, 4 }) end, '3-D')
    check.expect_error(function() F.affine_grid(torch.zeros(1, 2, 3, { dtype = 'int64' }), { 1, 1, 4, 4 }) end,
      'float32 or float64', 'int64')
    check.expect_error(function() F.affine_grid(torch.zeros(1, 2, 3), { 1, 1, 0, 4 }) end, 'positive integers')
  end)
end)

describe('F.grid_sample', function()
  for _, c in ipairs(fx.samples) do
    local what = ('mode=%s, padding_mode=%s, align_corners=%s'):format(c.mode, c.padding_mode, tostring(c.align_corners))
    it('matches PyTorch: ' .. what, function()
      local x = T(fx.image):requires_grad_()
      local g = T(fx.grid):requires_grad_()
      local y = F.grid_sample(x, g, { mode = c.mode, padding_mode = c.padding_mode, align_corners = c.align_corners })
      assert_close(y, c.out, what .. ' (output)')
      ;(y * T(c.gout)):sum():backward()
      assert_close(x.grad, c.dinput, what .. ' (d input)')
      assert_close(g.grad or torch.zeros_like(g), c.dgrid, what .. ' (d grid)')
    end)
  end

  it('takes mode, padding_mode and align_corners positionally too', function()
    local c = fx.samples[4]   -- bilinear, border, align_corners=true
    assert.are.equal('border', c.padding_mode)
    assert_close(F.grid_sample(T(fx.image), T(fx.grid), c.mode, c.padding_mode, c.align_corners), c.out, 'positional')
  end)

  it('runs the spatial transformer chain (affine_grid then grid_sample) as PyTorch', function()
    local s = fx.stn
    local grid = F.affine_grid(T(s.theta), { 1, 1, 5, 4 })
    assert_close(F.grid_sample(T(s.image), grid), s.out, 'stn')
  end)

  it('is differentiable in the image and the grid (float64 gradcheck)', function()
    torch.manual_seed(3)
    local x = torch.randn(1, 2, 3, 4, { dtype = 'float64', requires_grad = true })
    -- away from pixel boundaries, where the bilinear weights are smooth
    local g = (torch.rand(1, 2, 3, 2, { dtype = 'float64' }) * 1.6 - 0.8):requires_grad_()
    for _, pm in ipairs { 'zeros', 'border' } do
      assert.is_true(torch.autograd.gradcheck(function(a, b)
        return F.grid_sample(a, b, { padding_mode = pm, align_corners = true })
      end, { x, g }))
    end
    local theta = torch.randn(1, 2, 3, { dtype = 'float64', requires_grad = true })
    assert.is_true(torch.autograd.gradcheck(function(t) return F.affine_grid(t, { 1, 2, 3, 4 }) end, { theta }))
  end)

  it('gives float32 for float32 inputs', function()
    local y = F.grid_sample(torch.randn(1, 1, 4, 4), F.affine_grid(torch.eye(2, 3):unsqueeze(1), { 1, 1, 4, 4 }))
    assert.are.equal('float32', y.dtype)
  end)

  it('refuses bad modes, shapes and dtypes with the values', function()
    local x, g = torch.randn(1, 1, 4, 4), torch.zeros(1, 2, 2, 2)
    check.expect_error(function() F.grid_sample(x, g, { mode = 'bicubic' }) end, "'bilinear' or 'nearest'", 'bicubic')
    check.expect_error(function() F.grid_sample(x, g, { padding_mode = 'wrap' }) end, 'padding_mode', 'wrap')
    check.expect_error(function() F.grid_sample(x, g, { mod = 'nearest' }) end, 'mod')
    check.expect_error(function() F.grid_sample(x, torch.zeros(2, 2, 2, 2)) end, '[1, 1, 4, 4]', '[2, 2, 2, 2]')
    check.expect_error(function() F.grid_sample(x, torch.zeros(1, 2, 2, 3)) end, '[1, 2, 2, 3]')
    check.expect_error(function() F.grid_sample(torch.zeros(1, 1, 2, 2, 2), torch.zeros(1, 2, 2, 2, 3)) end, '5-D')
    check.expect_error(function() F.grid_sample(x, g:double()) end, 'float32', 'float64')
  end)
end)

describe('torch.finfo and torch.iinfo', function()
  for _, name in ipairs { 'float32', 'float64', 'float16', 'bfloat16' } do
    it('match PyTorch for ' .. name, function()
      local f, want = torch.finfo(name), fx.finfo[name]
      for _, k in ipairs { 'bits', 'eps', 'max', 'min', 'tiny', 'resolution' } do
        assert.are.equal(want[k], f[k], name .. '.' .. k)
      end
      assert.are.equal(want.tiny, f.smallest_normal)
      assert.are.equal(name, f.dtype)
    end)
  end

  it('take the default dtype, a dtype alias or a tensor', function()
    assert.are.equal(2.0 ^ -23, torch.finfo().eps)
    assert.are.equal(2.0 ^ -52, torch.finfo(torch.double).eps)
    assert.are.equal(2.0 ^ -52, torch.finfo(torch.zeros(1, { dtype = 'float64' })).eps)
    assert.are.equal(math.maxinteger, torch.iinfo(torch.int64).max)
    assert.are.equal(math.mininteger, torch.iinfo(torch.long).min)
    assert.are.equal(64, torch.iinfo('int64').bits)
    assert.truthy(tostring(torch.finfo('float32')):find('finfo(resolution=1e-06', 1, true))
  end)

  it('refuse the other kind of dtype and unknown names', function()
    check.expect_error(function() torch.finfo('int64') end, 'int64 is not a floating point dtype', 'torch.iinfo')
    check.expect_error(function() torch.iinfo('float32') end, 'float32 is not an integer dtype')
    check.expect_error(function() torch.iinfo('bool') end, 'bool is not an integer dtype')
    check.expect_error(function() torch.finfo('float8') end, 'unknown dtype', 'float8')
    check.expect_error(function() torch.finfo(3) end, 'expected a dtype', 'number')
  end)
end)

describe('torch.logical_and, logical_or, logical_xor, logical_not', function()
  it('treat nonzero as true, broadcast and give bool', function()
    local a = torch.tensor { 0, 1, 2, 0 }
    local b = torch.tensor { { 0.0, 0.0, 3.5, 1.0 }, { 1.0, 1.0, 1.0, 1.0 } }
    local r = torch.logical_and(a, b)
    assert.are.equal('bool', r.dtype)
    assert.are.same({ { false, false, true, false }, { false, true, true, false } }, r:tolist())
    assert.are.same({ { false, true, true, true }, { true, true, true, true } }, a:logical_or(b):tolist())
    assert.are.same({ { false, true, false, true }, { true, false, false, true } }, a:logical_xor(b):tolist())
    assert.are.same({ true, false, false, true }, torch.logical_not(a):tolist())
  end)

  it('want a tensor as the other argument', function()
    check.expect_error(function() torch.logical_and(torch.ones(2), 1) end, 'logical_and', 'expected a tensor', 'number')
    check.expect_error(function() torch.logical_or(1, torch.ones(2)) end, 'logical_or', 'expected a tensor')
  end)
end)

describe('the functional dropouts take their options by name', function()
  local x = torch.ones(4, 3, 5, 5)
  it('F.dropout(x, {training = false}) is x; {p = 1} zeroes everything', function()
    assert.is_true(torch.equal(F.dropout(x, { training = false }), x))
    assert.are.equal(0, F.dropout(x, { p = 1 }):abs():sum():item())
    assert.are.equal(0, F.dropout(x, 1, { training = true }):abs():sum():item())
    assert.is_true(torch.equal(F.dropout(x, 0.3, { training = false }), x))
    assert.is_true(torch.equal(F.dropout(x, 0.3, false), x))   -- positional, as before
  end)
  it('the feature and alpha dropouts too', function()
    assert.is_true(torch.equal(F.dropout2d(x, { training = false }), x))
    assert.are.equal(0, F.dropout2d(x, { p = 1 }):abs():sum():item())
    assert.is_true(torch.equal(F.dropout1d(x[1], { training = false }), x[1]))
    assert.is_true(torch.equal(F.alpha_dropout(x, { p = 0.5 }), x))       -- training defaults to false
    assert.is_false(torch.equal(F.alpha_dropout(x, { p = 0.5, training = true }), x))
  end)
  it('a misspelt option or p given twice is an error', function()
    check.expect_error(function() F.dropout(x, { traning = false }) end, 'dropout', 'traning')
    check.expect_error(function() F.dropout(x, 0.2, { p = 0.3 }) end, 'p given twice', '0.2', '0.3')
    check.expect_error(function() F.dropout(x, { p = 2 }) end, 'between 0 and 1', '2')
  end)
end)

describe('t:type(dtype)', function()
  it('converts on the tensor\'s device, as PyTorch\'s t.type(torch.float)', function()
    local t = torch.tensor { true, false, true }
    local f = t:type(torch.float)
    assert.are.equal('float32', f.dtype)
    assert.are.equal(tostring(t.device), tostring(f.device))
    assert.are.same({ 1, 0, 1 }, f:tolist())
    assert.are.equal('float64', t:type('double').dtype)
    assert.are.equal('torch.DoubleTensor', torch.ones(1):type('torch.DoubleTensor'):type())
    check.expect_error(function() t:type('float8') end, "unknown tensor type 'float8'", 'a dtype')
  end)
end)

describe('DataLoader indexed as a list', function()
  it('is an error that points at loader:iter(), instead of a loop over no batch', function()
    local loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(10, 2)), { batch_size = 4 })
    local err = check.expect_error(function()
      for _ in ipairs(loader) do end   -- enumerate(loader), translated literally
    end, 'loader[1] is not a batch', 'loader:iter()')
    assert.truthy(err:find('programs_spec', 1, true), err)   -- points at the caller's line
    local n = 0
    for _ in loader:iter() do n = n + 1 end
    assert.are.equal(3, n)
    assert.are.equal(3, #loader)
    assert.are.equal(4, loader.batch_size)   -- fields still read as before
  end)
end)

describe('stepped ranges {first, last, step}', function()
  it('are views of every step-th element, as PyTorch\'s first-1:last:step', function()
    local a = torch.arange(1, 11)
    assert.are.same({ 1, 3, 5, 7, 9 }, a[{ { 1, -1, 2 } }]:tolist())   -- a[0::2]
    assert.are.same({ 2, 5, 8 }, a[{ { 2, 9, 3 } }]:tolist())           -- a[1:9:3]
    assert.are.same({ 10 }, a[{ { 10, 10, 4 } }]:tolist())
    assert.are.same({ 3 }, a[{ { 3, 4, 5 } }]:tolist())
    assert.are.same({ 1, 2, 3 }, a[{ { 1, 3, 1 } }]:tolist())
    local m = torch.arange(1, 13):view(3, 4)
    assert.are.same({ { 1, 3 }, { 5, 7 }, { 9, 11 } }, m[{ {}, { 1, -1, 2 } }]:tolist())
    assert.are.same({ { 2, 4 }, { 10, 12 } }, m[{ { 1, 3, 2 }, { 2, 4, 2 } }]:tolist())
    assert.are.same({ 1, 9 }, m[{ { 1, 3, 2 }, 1 }]:tolist())
  end)

  it('write through to the tensor (the positional encoding\'s pe[:, 0::2] = sin)', function()
    local pe = torch.zeros(2, 6)
    pe[{ {}, { 1, -1, 2 } }] = torch.ones(2, 3)
    pe[{ {}, { 2, -1, 2 } }] = 2
    assert.are.same({ { 1, 2, 1, 2, 1, 2 }, { 1, 2, 1, 2, 1, 2 } }, pe:tolist())
    local v = pe[{ 1, { 2, 6, 2 } }]
    v:fill_(7)
    assert.are.same({ 1, 7, 1, 7, 1, 7 }, pe[1]:tolist())
  end)

  it('pass the gradient back to the picked places', function()
    local x = torch.zeros(2, 5, { dtype = 'float64', requires_grad = true })
    local y = x[{ {}, { 2, 5, 2 } }]
    ;(y * torch.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }, { dtype = 'float64' })):sum():backward()
    assert.are.same({ { 0, 1, 0, 2, 0 }, { 0, 3, 0, 4, 0 } }, x.grad:tolist())
    local z = torch.randn(3, 7, { dtype = 'float64', requires_grad = true })
    assert.is_true(torch.autograd.gradcheck(function(t) return t[{ { 1, -1, 2 }, { 2, 7, 3 } }] * 2 end, { z }))
  end)

  it('refuse a step below 1 and four numbers', function()
    local a = torch.arange(1, 11)
    check.expect_error(function() return a[{ { 1, -1, 0 } }] end, 'step', 'positive integer', '0')
    check.expect_error(function() return a[{ { 1, -1, -2 } }] end, 'step', '-2')
    check.expect_error(function() return a[{ { 1, -1, 1.5 } }] end, 'step', '1.5')
    check.expect_error(function() return a[{ { 1, 2, 3, 4 } }] end, '{first, last, step}', '4 numbers')
    check.expect_error(function() return a[{ { 1, 11, 2 } }] end, 'out of range', '11')
  end)
end)

describe('PyTorch\'s positional arguments of the layers', function()
  it('nn.LSTM(10, 20, 2) has two layers; nn.RNN takes nonlinearity fourth', function()
    local lstm = nn.LSTM(10, 20, 2)
    assert.are.equal(2, lstm.num_layers)
    assert.is_not_nil(lstm.weight_ih_l1)
    local out, hc = lstm(torch.randn(5, 3, 10))
    assert.are.same({ 5, 3, 20 }, out:size():totable())
    assert.are.same({ 2, 3, 20 }, hc[1]:size():totable())
    local gru = nn.GRU(4, 6, 3, true, true)
    assert.are.equal(3, gru.num_layers)
    assert.is_true(gru.batch_first)
    local rnn = nn.RNN(4, 6, 2, 'relu', { dropout = 0.5 })
    assert.are.equal('relu', rnn.nonlinearity)
    assert.are.equal(0.5, rnn.dropout)
    assert.are.equal(2, nn.LSTM(4, 6, { num_layers = 2 }).num_layers)   -- the options, as before
  end)

  it('refuse too many arguments and an option given twice', function()
    check.expect_error(function() nn.LSTM(4, 6, 2, true, false, 0, false, 9) end, 'nn.LSTM', 'too many arguments', '6')
    check.expect_error(function() nn.LSTM(4, 6, 2, { num_layers = 3 }) end, 'num_layers given twice')
    check.expect_error(function() nn.GRU(4, 6, 0) end, 'num_layers')
  end)

  it('nn.Conv2d takes stride and padding tuples positionally', function()
    local conv = nn.Conv2d(1, 4, { 5, 3 }, { 1, 2 }, { 2, 1 })
    assert.are.same({ 5, 3 }, conv.kernel_size)
    assert.are.same({ 1, 2 }, conv.stride)
    assert.are.same({ 2, 1 }, conv.padding)
    assert.are.same({ 2, 4, 8, 4 }, conv(torch.randn(2, 1, 8, 8)):size():totable())
    local named = nn.Conv2d(1, 10, { kernel_size = 5, stride = 2 })   -- nn.Conv2d(1, 10, kernel_size=5, stride=2)
    assert.are.same({ 5, 5 }, named.kernel_size)
    assert.are.same({ 2, 2 }, named.stride)
    check.expect_error(function() nn.Conv2d(1, 10, { stride = 2 }) end, 'kernel_size is required')
    local c2 = nn.Conv2d(1, 4, 3, { 2, 2 }, { padding = 1 })
    assert.are.same({ 2, 2 }, c2.stride)
    assert.are.same({ 1, 1 }, c2.padding)
  end)

  it('F.conv2d takes stride, padding, dilation and groups positionally', function()
    local x, w = torch.randn(1, 2, 6, 6, { dtype = 'float64' }), torch.randn(4, 1, 3, 3, { dtype = 'float64' })
    local want = F.conv2d(x, w, nil, { stride = 2, padding = 1, groups = 2 })
    assert.is_true(torch.equal(F.conv2d(x, w, nil, 2, 1, 1, 2), want))
    assert.is_true(torch.equal(F.conv2d(x, w, nil, { 2, 2 }, { 1, 1 }, { groups = 2 }), want))
    check.expect_error(function() F.conv2d(x, w, nil, 1, 1, 1, 2, 5) end, 'conv2d', 'too many arguments')
    check.expect_error(function() F.conv2d(x, w, nil, 1, { stride = 1 }) end, 'stride given twice')
  end)
end)

describe('Torch7\'s names that the classic programs use', function()
  it('torch.setdefaulttensortype switches the default dtype and torch.Tensor with it', function()
    local before = torch.get_default_dtype()
    torch.setdefaulttensortype('torch.DoubleTensor')
    local ok, err = pcall(function()
      assert.are.equal('float64', torch.get_default_dtype())
      assert.are.equal('float64', torch.Tensor(2, 2).dtype)
      assert.are.equal('torch.DoubleTensor', torch.getdefaulttensortype())
    end)
    torch.set_default_dtype(before)
    assert(ok, err)
    torch.setdefaulttensortype('torch.FloatTensor')
    assert.are.equal('float32', torch.Tensor(1).dtype)
    check.expect_error(function() torch.setdefaulttensortype('torch.LongTensor') end, 'torch.LongTensor',
      "'torch.FloatTensor' or 'torch.DoubleTensor'")
  end)

  it('nn.SpatialConvolutionMM is nn.SpatialConvolution', function()
    local m = nn.SpatialConvolutionMM(1, 3, 5, 5)
    assert.is_true(torch.isinstance(m, nn.SpatialConvolution))
    assert.are.same({ 2, 3, 4, 4 }, m(torch.randn(2, 1, 8, 8)):size():totable())
  end)

  it('optim.ConfusionMatrix counts, prints and totals as Torch7\'s', function()
    local optim = require 'optim'
    local cm = optim.ConfusionMatrix({ 'a', 'b', 'c' })
    cm:add(torch.tensor({ 0.1, 0.8, 0.1 }), 2)              -- right
    cm:add(3, 3)                                             -- right
    cm:add(torch.tensor({ 0.9, 0.05, 0.05 }), torch.tensor({ 0, 0, 1 }))   -- c taken for a
    cm:batchAdd(torch.tensor({ { 1.0, 0.0, 0.0 }, { 0.0, 1.0, 0.0 } }), torch.tensor({ 1, 1 }))
    assert.are.same({ { 1, 1, 0 }, { 0, 1, 0 }, { 1, 0, 1 } }, cm.mat:tolist())
    local s = tostring(cm)
    assert.truthy(s:find('[class: c]', 1, true), s)
    assert.truthy(s:find('global correct: 60.000%', 1, true), s)
    assert.are.equal(0.6, cm.totalValid)
    assert.is_true(math.abs(cm.averageValid - (0.5 + 1 + 0.5) / 3) < 1e-12)
    cm:zero()
    assert.are.equal(0, cm.mat:sum():item())
    assert.are.equal(0, cm.totalValid)
    check.expect_error(function() cm:add(torch.ones(4), 1) end, 'the prediction', '4 values', '3')
    check.expect_error(function() cm:add(1, 4) end, 'the target', 'between 1 and 3', '4')
    check.expect_error(function() optim.ConfusionMatrix(0) end, 'class count')
  end)
end)

describe('add and sub take alpha by name', function()
  it('a:add(b, {alpha = -lr}) as PyTorch\'s a.add(b, alpha=-lr), in place too', function()
    local p = torch.ones(3)
    p:add_(torch.tensor { 1.0, 2.0, 3.0 }, { alpha = -2 })
    assert.are.same({ -1, -3, -5 }, p:tolist())
    assert.are.same({ 4, 4 }, torch.ones(2):add(torch.ones(2), { alpha = 3 }):tolist())
    assert.are.same({ 0.5, 0.5 }, torch.ones(2):sub(torch.ones(2), { alpha = 0.5 }):tolist())
    assert.are.same({ 0, 0 }, torch.ones(2):sub_(torch.ones(2), {}):tolist())
    check.expect_error(function() p:add_(p, { alpah = 1 }) end, 'add_', 'unknown option alpah')
  end)

  it('an integral float where a channel count belongs says where floats come from in Lua', function()
    check.expect_error(function() nn.Conv2d(1, 3 ^ 2, 3) end, 'out_channels', '9.0', 'n * n')
  end)
end)
