-- The layers, functionals and losses of lua/nn/functional_more.lua, layers_more.lua,
-- losses_more.lua, rnn_utils.lua and nn.Transformer: values and gradients against PyTorch
-- 1.13 (spec/fixtures/nn_more.lua, written by spec/fixtures/make_nn_more.py), float64
-- gradchecks, the module forms and their reprs, and argument errors.
local torch = require 'torch'
local check = dofile('spec/helpers/check.lua')
local close = check.close
local nn = require 'nn'
local F = nn.functional

local ref = dofile('spec/fixtures/nn_more.lua')

local function tensor_of(input, dtype)
  if input.dt == 'int64' then return torch.tensor(input.v, { dtype = 'int64' }) end
  return torch.tensor(input.v, { dtype = dtype or 'float64', requires_grad = input.grad or nil })
end

-- fixture case `name` through fn: its value and the gradients of sum(out * gout)
local function against(name, fn, tol)
  local case = assert(ref[name], 'no fixture ' .. name)
  local ins = {}
  for k, input in ipairs(case.inputs) do ins[k] = tensor_of(input) end
  local out = fn(table.unpack(ins, 1, #case.inputs))
  close(out, case.out, tol or 1e-10, name .. ' value')
  if #case.grads > 0 then
    (out * torch.tensor(case.gout, { dtype = 'float64' })):sum():backward()
    local g = 0
    for k, input in ipairs(case.inputs) do
      if input.grad then
        g = g + 1
        close(ins[k].grad, case.grads[g], tol or 1e-10, name .. ' gradient of input ' .. k)
      end
    end
  end
end

-- the same in float32, to float rounding
local function against32(name, fn)
  local case = ref[name]
  local ins = {}
  for k, input in ipairs(case.inputs) do ins[k] = tensor_of(input, 'float32') end
  local out = fn(table.unpack(ins, 1, #case.inputs))
  assert.are.equal('float32', out.dtype)
  close(out, case.out, 2e-5, name .. ' float32 value')
end

local function gradcheck(fn, inputs)
  assert.is_true(torch.autograd.gradcheck(fn, inputs))
end

local function f64(...) return torch.randn({ ... }, { dtype = 'float64', requires_grad = true }) end

local function errors(fn, ...) return check.expect_error(fn, ...) end

-- ---------------------------------------------------------------- activations

describe('activations', function()
  local functional = {
    selu = F.selu, celu = function(x) return F.celu(x, 0.7) end, celu_default = F.celu,
    hardswish = F.hardswish, hardsigmoid = F.hardsigmoid, softsign = F.softsign, tanhshrink = F.tanhshrink,
    threshold = function(x) return F.threshold(x, 0.5, -2.0) end, logsigmoid = F.logsigmoid,
    softmin = function(x) return F.softmin(x, 2) end, glu = function(x) return F.glu(x) end,
    glu_dim1 = function(x) return F.glu(x, 1) end, prelu = F.prelu, prelu_one = F.prelu,
  }
  local modules = {
    selu = nn.SELU(), celu = nn.CELU(0.7), celu_default = nn.CELU(), hardswish = nn.Hardswish(),
    hardsigmoid = nn.Hardsigmoid(), softsign = nn.Softsign(), tanhshrink = nn.Tanhshrink(),
    threshold = nn.Threshold(0.5, -2.0), logsigmoid = nn.LogSigmoid(), softmin = nn.Softmin(2),
    glu = nn.GLU(), glu_dim1 = nn.GLU { dim = 1 }, softmax2d = nn.Softmax2d(),
  }

  it('match PyTorch in value and gradient, functional and module forms', function()
    -- PyTorch's celu gradient is exp(x / alpha) to about 1e-7 only
    local tol = { celu = 1e-6 }
    for name, fn in pairs(functional) do against(name, fn, tol[name] or 1e-12) end
    for name, m in pairs(modules) do against(name, function(x) return m(x) end, tol[name] or 1e-12) end
  end)

  it('float32 agrees with PyTorch to float rounding', function()
    for name, fn in pairs(functional) do against32(name, fn) end
  end)

  it('nn.PReLU holds one weight per channel, initialized to init', function()
    local m = nn.PReLU(3, 0.1)
    close(m.weight, { 0.1, 0.1, 0.1 }, 1e-7)
    assert.are.equal('PReLU(num_parameters=3)', tostring(m))
    local case = ref.prelu
    m:double()
    torch.no_grad(function() m.weight:copy_(torch.tensor(case.inputs[2].v, { dtype = 'float64' })) end)
    local x = tensor_of(case.inputs[1])
    local y = m(x)
    close(y, case.out, 1e-12, 'PReLU value');
    (y * torch.tensor(case.gout, { dtype = 'float64' })):sum():backward()
    close(x.grad, case.grads[1], 1e-12, 'PReLU input gradient')
    close(m.weight.grad, case.grads[2], 1e-12, 'PReLU weight gradient')
    assert.are.equal(1, nn.PReLU().weight:numel())
  end)

  it('pass float64 gradchecks away from their kinks', function()
    local x = torch.tensor({ -4.1, -2.3, -1.1, -0.4, 0.35, 0.9, 1.7, 3.2, 6.5 }, { dtype = 'float64', requires_grad = true })
    for name, fn in pairs(functional) do
      if name ~= 'softmin' and name ~= 'glu' and name ~= 'glu_dim1' and name ~= 'prelu' and name ~= 'prelu_one' then gradcheck(fn, { x }) end
    end
    gradcheck(function(a) return F.softmin(a, 1) end, { f64(3, 4) })
    gradcheck(function(a) return F.glu(a, 1) end, { f64(4, 3) })
    gradcheck(F.glu, { f64(3, 4) })
    gradcheck(F.prelu, { torch.tensor({ { -1.0, 2.0 }, { 0.5, -0.3 } }, { dtype = 'float64', requires_grad = true }),
                         torch.tensor({ 0.2, 0.4 }, { dtype = 'float64', requires_grad = true }) })
  end)

  it('print as PyTorch', function()
    assert.are.equal('SELU()', tostring(nn.SELU()))
    assert.are.equal('CELU(alpha=0.7)', tostring(nn.CELU(0.7)))
    assert.are.equal('GLU(dim=-1)', tostring(nn.GLU()))
    assert.are.equal('Threshold(threshold=0.5, value=-2.0)', tostring(nn.Threshold(0.5, -2)))
    assert.are.equal('Softmin(dim=2)', tostring(nn.Softmin(2)))
    assert.are.equal('Hardswish()', tostring(nn.Hardswish()))
  end)

  it('gumbel_softmax samples the simplex; hard gives one-hot rows with the soft gradient', function()
    torch.manual_seed(3)
    local logits = torch.randn(5, 4, { dtype = 'float64', requires_grad = true })
    local y = F.gumbel_softmax(logits, { tau = 0.5 })
    close(y:sum(2), { 1, 1, 1, 1, 1 }, 1e-12)
    local h = F.gumbel_softmax(logits, { hard = true })
    close(h:sum(2), { 1, 1, 1, 1, 1 }, 1e-12)
    assert.are.equal(20, h:eq(0):sum():item() + h:eq(1):sum():item())
    h:sum():backward()
    assert.is_not_nil(logits.grad)
    -- the argmax wins more often for a dominant logit
    local l = torch.tensor({ { 4.0, 0.0, 0.0 } })
    local wins = 0
    for _ = 1, 200 do if F.gumbel_softmax(l, { hard = true })[1][1] == 1 then wins = wins + 1 end end
    assert.is_true(wins > 180)
  end)

  it('reject bad arguments with clear errors', function()
    errors(function() F.glu(torch.randn(3, 5)) end, 'Halving dimension must be even', 'size 5')
    errors(function() F.softmin(torch.randn(3)) end, 'dim must be an integer')
    errors(function() F.prelu(torch.randn(2, 3), torch.randn(4)) end, 'channel size = 3')
    errors(function() F.celu(torch.randn(3), 0) end, 'alpha must not be 0')
    errors(function() nn.Threshold(0.5) end, 'value is required')
    errors(function() nn.CELU('x') end, 'alpha must be a number')
    errors(function() nn.Softmax2d()(torch.randn(3, 4)) end, 'expected input to be 3D or 4D')
    errors(function() F.selu('x') end, 'expected the input to be a tensor')
  end)
end)

-- ---------------------------------------------------------------- shapes, padding, pools

describe('shuffles, unfold / fold, padding and pools', function()
  local cases = {
    pixel_shuffle = function(x) return F.pixel_shuffle(x, 2) end,
    pixel_unshuffle = function(x) return F.pixel_unshuffle(x, 2) end,
    channel_shuffle = function(x) return F.channel_shuffle(x, 3) end,
    unfold = function(x) return F.unfold(x, { 2, 3 }) end,
    unfold_opts = function(x) return F.unfold(x, 2, { dilation = { 1, 2 }, padding = 1, stride = { 2, 1 } }) end,
    fold = function(x) return F.fold(x, { 4, 5 }, { 2, 3 }) end,
    fold_opts = function(x) return F.fold(x, { 4, 5 }, 2, { dilation = { 1, 2 }, padding = 1, stride = { 2, 1 } }) end,
    avg_pool1d = function(x) return F.avg_pool1d(x, 3) end,
    avg_pool1d_opts = function(x) return F.avg_pool1d(x, 4, { stride = 2, padding = 1, ceil_mode = true, count_include_pad = false }) end,
    adaptive_avg_pool1d = function(x) return F.adaptive_avg_pool1d(x, 4) end,
    adaptive_max_pool1d = function(x) return F.adaptive_max_pool1d(x, 4) end,
  }
  local modules = {
    pixel_shuffle = nn.PixelShuffle(2), pixel_unshuffle = nn.PixelUnshuffle(2), channel_shuffle = nn.ChannelShuffle(3),
    unfold = nn.Unfold { 2, 3 }, unfold_opts = nn.Unfold(2, { dilation = { 1, 2 }, padding = 1, stride = { 2, 1 } }),
    fold = nn.Fold({ 4, 5 }, { 2, 3 }),
    pad_reflect1d = nn.ReflectionPad1d { 2, 1 }, pad_reflect2d = nn.ReflectionPad2d(1),
    pad_replicate1d = nn.ReplicationPad1d(2), pad_replicate2d = nn.ReplicationPad2d { 1, 0, 2, 1 },
    pad_constant1d = nn.ConstantPad1d({ 1, 2 }, 3.5), pad_constant2d = nn.ConstantPad2d(1, -1.0),
    avg_pool1d = nn.AvgPool1d(3), adaptive_avg_pool1d = nn.AdaptiveAvgPool1d(4), adaptive_max_pool1d = nn.AdaptiveMaxPool1d(4),
    upsampling_nearest2d = nn.UpsamplingNearest2d { scale_factor = 2 },
    upsampling_bilinear2d = nn.UpsamplingBilinear2d { size = { 3, 5 } },
  }

  it('match PyTorch in value and gradient', function()
    for name, fn in pairs(cases) do against(name, fn) end
    for name, m in pairs(modules) do against(name, function(x) return m(x) end) end
    for name, fn in pairs(cases) do against32(name, fn) end
  end)

  it('fold is the adjoint of unfold, and both pass gradchecks', function()
    local x = f64(1, 2, 4, 5)
    gradcheck(function(a) return F.unfold(a, 2, { padding = 1, stride = 2 }) end, { x })
    gradcheck(function(a) return F.fold(a, { 4, 5 }, 2, { padding = 1, stride = 2 }) end, { f64(1, 8, 9) })
    gradcheck(function(a) return F.pixel_shuffle(a, 2) end, { f64(1, 4, 2, 2) })
    gradcheck(function(a) return F.channel_shuffle(a, 2) end, { f64(1, 4, 2) })
    -- <unfold(x), y> = <x, fold(y)>
    local y = torch.randn(1, 8, 9, { dtype = 'float64' })
    local lhs = (F.unfold(x:detach(), 2, { padding = 1, stride = 2 }) * y):sum():item()
    local rhs = (x:detach() * F.fold(y, { 4, 5 }, 2, { padding = 1, stride = 2 })):sum():item()
    assert.is_true(math.abs(lhs - rhs) < 1e-10)
    -- unbatched forms
    assert.are.same({ 8, 9 }, F.unfold(x:detach()[1], 2, { padding = 1, stride = 2 }):size():totable())
    assert.are.same({ 2, 4, 5 }, F.fold(y[1], { 4, 5 }, 2, { padding = 1, stride = 2 }):size():totable())
  end)

  it('nn.Unflatten splits one dim', function()
    local m = nn.Unflatten(2, { 2, 3 })
    assert.are.same({ 4, 2, 3, 5 }, m(torch.randn(4, 6, 5)):size():totable())
    assert.are.same({ 4, 5, 3, 2 }, nn.Unflatten(-1, { -1, 2 })(torch.randn(4, 5, 6)):size():totable())
    assert.are.equal('Unflatten(dim=2, unflattened_size=(2, 3))', tostring(m))
    errors(function() m(torch.randn(4, 7)) end, 'does not multiply to the size 7')
  end)

  it('print as PyTorch', function()
    assert.are.equal('PixelShuffle(upscale_factor=2)', tostring(nn.PixelShuffle(2)))
    assert.are.equal('ReflectionPad2d((1, 1, 1, 1))', tostring(nn.ReflectionPad2d(1)))
    assert.are.equal('ConstantPad1d((1, 2), value=3.5)', tostring(nn.ConstantPad1d({ 1, 2 }, 3.5)))
    assert.are.equal('AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))', tostring(nn.AvgPool1d(3)))
    assert.are.equal('AdaptiveAvgPool1d(output_size=4)', tostring(nn.AdaptiveAvgPool1d(4)))
    assert.are.equal("UpsamplingNearest2d(scale_factor=2.0, mode=nearest)", tostring(nn.UpsamplingNearest2d { scale_factor = 2 }))
    assert.are.equal('Unfold(kernel_size=(2, 3), dilation=1, padding=0, stride=1)', tostring(nn.Unfold { 2, 3 }))
    assert.are.equal('Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1)', tostring(nn.Fold({ 4, 5 }, 2)))
  end)

  it('reject bad arguments with clear errors', function()
    errors(function() F.pixel_shuffle(torch.randn(1, 6, 2, 2), 2) end, 'divisible by the square of upscale_factor (4)')
    errors(function() F.pixel_unshuffle(torch.randn(1, 1, 3, 4), 2) end, 'height (3)')
    errors(function() F.channel_shuffle(torch.randn(1, 5, 2), 2) end, 'channels (5)', 'groups (2)')
    errors(function() F.unfold(torch.randn(2, 3), 2) end, 'Only 3D or 4D')
    errors(function() F.unfold(torch.randn(1, 1, 2, 2), 3) end, 'smaller than the dilated kernel')
    errors(function() F.fold(torch.randn(1, 7, 4), { 3, 3 }, 2) end, 'divisible by the product of kernel_size')
    errors(function() F.fold(torch.randn(1, 4, 5), { 3, 3 }, 2) end, 'calculated number of sliding blocks 2 * 2 = 4', 'got input.size(2)=5')
    errors(function() nn.ReflectionPad2d { 1, 2 } end, 'a table of 4 integers')
    errors(function() nn.ReflectionPad1d(3)(torch.randn(1, 2, 3)) end, 'padding size should be less than')
    errors(function() F.avg_pool1d(torch.randn(2, 3, 4, 5), 2) end, 'expected a 2-D or 3-D input')
    errors(function() F.avg_pool1d(torch.randn(2, 3, 8), 2, { padding = 2 }) end, 'pad should be at most half')
    errors(function() nn.UpsamplingBilinear2d {} end, 'exactly one of size and scale_factor')
  end)
end)

-- ---------------------------------------------------------------- distances, norms, dropouts

describe('distances, bilinear and norms', function()
  local cases = {
    normalize = F.normalize,
    normalize_p1_dim1 = function(x) return F.normalize(x, 1.0, 1) end,
    cosine_similarity = F.cosine_similarity,
    cosine_similarity_dim = function(a, b) return F.cosine_similarity(a, b, 1) end,
    cosine_similarity_bcast = F.cosine_similarity,
    pairwise_distance = F.pairwise_distance,
    pairwise_distance_p1 = function(a, b) return F.pairwise_distance(a, b, { p = 1.0, keepdim = true }) end,
    bilinear = F.bilinear, bilinear_nobias = F.bilinear,
    instance_norm = F.instance_norm,
    instance_norm_affine = function(x, w, b) return F.instance_norm(x, { weight = w, bias = b }) end,
    instance_norm2d = F.instance_norm,
    instance_norm_eval = function(x)
      return F.instance_norm(x, { running_mean = torch.zeros(3, { dtype = 'float64' }) + 0.5,
                                  running_var = torch.ones(3, { dtype = 'float64' }) * 2, use_input_stats = false })
    end,
    instance_norm_running = function(x)
      local m, v = torch.zeros(3, { dtype = 'float64' }) + 0.5, torch.ones(3, { dtype = 'float64' }) * 2
      local y = F.instance_norm(x, { running_mean = m, running_var = v, momentum = 0.2 })
      return torch.cat({ y:reshape(-1), m, v })
    end,
    local_response_norm = function(x) return F.local_response_norm(x, 3, 0.1, 0.75, 2.0) end,
    local_response_norm_even = function(x) return F.local_response_norm(x, 2) end,
  }

  it('match PyTorch in value and gradient', function()
    for name, fn in pairs(cases) do against(name, fn) end
    for _, name in ipairs { 'normalize', 'cosine_similarity', 'pairwise_distance', 'bilinear', 'instance_norm',
                            'local_response_norm' } do
      against32(name, cases[name])
    end
  end)

  it('the modules match too', function()
    local cs, pd = nn.CosineSimilarity(), nn.PairwiseDistance { p = 1.0, keepdim = true }
    against('cosine_similarity', function(a, b) return cs(a, b) end)
    against('pairwise_distance_p1', function(a, b) return pd(a, b) end)
    assert.are.equal('CosineSimilarity(dim=2, eps=1e-08)', tostring(cs))
    against('local_response_norm', function(x) return nn.LocalResponseNorm(3, 0.1, 0.75, 2.0)(x) end)
    assert.are.equal('LocalResponseNorm(3, alpha=0.0001, beta=0.75, k=1.0)', tostring(nn.LocalResponseNorm(3)))
    local b = nn.Bilinear(4, 2, 5):double()
    local case = ref.bilinear
    torch.no_grad(function()
      b.weight:copy_(torch.tensor(case.inputs[3].v, { dtype = 'float64' }))
      b.bias:copy_(torch.tensor(case.inputs[4].v, { dtype = 'float64' }))
    end)
    close(b(tensor_of(case.inputs[1]), tensor_of(case.inputs[2])), case.out)
    assert.are.equal('Bilinear(in1_features=4, in2_features=2, out_features=5, bias=true)', tostring(b))
  end)

  it('nn.InstanceNorm1d/2d: affine, running statistics while training, eval with them', function()
    local case = ref.instance_norm_running
    local m = nn.InstanceNorm1d(3, { momentum = 0.2, track_running_stats = true }):double()
    torch.no_grad(function() m.running_mean:fill_(0.5); m.running_var:fill_(2) end)
    local x = tensor_of(ref.instance_norm.inputs[1])
    local y = m(x)
    close(torch.cat({ y:reshape(-1), m.running_mean, m.running_var }), case.out, 1e-10, 'InstanceNorm1d running')
    assert.are.equal(1, m.num_batches_tracked:item())
    m:eval()
    local want = F.instance_norm(x:detach(), { running_mean = m.running_mean, running_var = m.running_var, use_input_stats = false })
    close(m(x), want, 1e-12)
    assert.are.equal('InstanceNorm1d(3, eps=1e-05, momentum=0.2, affine=false, track_running_stats=true)', tostring(m))
    local a = nn.InstanceNorm2d(3, { affine = true }):double()
    against('instance_norm2d', function(t) return a(t) end)
    assert.are.equal(2, #a:parameters())
    -- unbatched [C, L]
    close(nn.InstanceNorm1d(3)(x:detach()[1]), F.instance_norm(x:detach()[{ { 1 } }])[1], 1e-12)
    gradcheck(function(t, w, bb) return F.instance_norm(t, { weight = w, bias = bb }) end, { f64(2, 3, 4), f64(3), f64(3) })
  end)

  it('pass float64 gradchecks', function()
    gradcheck(F.normalize, { f64(3, 4) })
    gradcheck(F.cosine_similarity, { f64(3, 4), f64(3, 4) })
    gradcheck(function(a, b) return F.pairwise_distance(a, b, 3) end, { f64(3, 4), f64(3, 4) })
    gradcheck(F.bilinear, { f64(2, 3), f64(2, 2), f64(4, 3, 2), f64(4) })
    gradcheck(function(x) return F.local_response_norm(x, 3) end, { f64(2, 4, 3) })
  end)

  it("normalize has PyTorch's finite gradient (1 / eps) at zero vectors, not NaN", function()
    local z = torch.zeros(2, 3, { dtype = 'float64', requires_grad = true })
    F.normalize(z):sum():backward()
    close(z.grad, { { 1e12, 1e12, 1e12 }, { 1e12, 1e12, 1e12 } })
  end)

  it('reject bad arguments with clear errors', function()
    errors(function() F.normalize(torch.randn(3), 2, 3) end, 'dim 3 is out of range for a 1-D input')
    errors(function() F.cosine_similarity(torch.randn(3, 4), torch.randn(2, 4)) end, 'do not broadcast')
    errors(function() F.bilinear(torch.randn(2, 3), torch.randn(2, 2), torch.randn(4, 2, 2)) end, 'input1 [*, 2]')
    errors(function() F.instance_norm(torch.randn(2, 3)) end, 'at least 3 dims')
    errors(function() F.instance_norm(torch.randn(2, 3, 1)) end, 'more than 1 spatial element')
    errors(function() F.instance_norm(torch.randn(2, 3, 4), { weight = torch.randn(4) }) end, 'weight should contain 3 elements not 4')
    errors(function() F.instance_norm(torch.randn(2, 3, 4), { use_input_stats = false }) end, 'running_mean and running_var')
    errors(function() nn.InstanceNorm2d(3)(torch.randn(2, 3)) end, 'expected 3D or 4D input (got 2D input)')
    errors(function() F.local_response_norm(torch.randn(2, 3), 2) end, 'Expected 3D or higher dimensionality input (got 2 dimensions)')
  end)
end)

describe('dropouts', function()
  it('dropout1d / dropout3d zero whole channels and scale the rest; identity in eval', function()
    torch.manual_seed(5)
    for _, c in ipairs { { F.dropout1d, { 8, 16, 5 }, nn.Dropout1d }, { F.dropout3d, { 8, 16, 2, 2, 2 }, nn.Dropout3d } } do
      local fn, shape, M = c[1], c[2], c[3]
      local x = torch.ones(shape, { dtype = 'float64' })
      local y = fn(x, 0.25, true)
      local planes = y:reshape(8 * 16, -1)
      local mins, maxs = planes:min(2), planes:max(2)
      close(mins, maxs, 1e-12, 'each channel all kept or all dropped')
      local kept = mins:gt(0):sum():item()
      assert.is_true(kept > 70 and kept < 122, 'kept ' .. kept .. ' of 128')
      close(planes:max(), 1 / 0.75, 1e-12)
      local m = M(0.25)
      m:eval()
      assert.are.equal(x, m(x))
      assert.are.equal(('%s(p=0.25, inplace=false)'):format(tostring(m):match('^(%w+)')), tostring(m))
    end
    errors(function() F.dropout1d(torch.randn(2, 3, 4, 5), 0.5) end, 'expected a 2-D or 3-D input')
    errors(function() F.dropout3d(torch.randn(2, 3), 1.5) end, 'between 0 and 1')
  end)

  it('alpha_dropout keeps the mean and variance of standard normal inputs', function()
    torch.manual_seed(6)
    local x = torch.randn(200000, { dtype = 'float64' })
    local y = F.alpha_dropout(x, 0.3, true)
    assert.is_true(math.abs(y:mean():item()) < 0.02)
    assert.is_true(math.abs(y:std():item() - 1) < 0.02)
    -- dropped elements all take one value: a * -alpha' + b
    local a = 1 / math.sqrt((1.7580993408473766 ^ 2 * 0.3 + 1) * 0.7)
    local dropped = -1.7580993408473766 * a + 1.7580993408473766 * a * 0.3
    local n = y:eq(dropped):sum():item() + (y - dropped):abs():lt(1e-12):sum():item()
    assert.is_true(n > 0.25 * 200000)
    assert.are.equal(x, F.alpha_dropout(x, 0.3, false))
    assert.are.equal(x, nn.AlphaDropout(0.3):eval()(x))
  end)
end)

-- ---------------------------------------------------------------- losses

describe('losses', function()
  local cases, modules = {}, {}
  for _, red in ipairs { 'mean', 'sum', 'none' } do
    cases['margin_ranking_' .. red] = function(a, b, y) return F.margin_ranking_loss(a, b, y, { margin = 0.3, reduction = red }) end
    cases['hinge_embedding_' .. red] = function(a, y) return F.hinge_embedding_loss(a, y, { margin = 1.5, reduction = red }) end
    cases['soft_margin_' .. red] = function(a, y) return F.soft_margin_loss(a, y, red) end
    modules['margin_ranking_' .. red] = nn.MarginRankingLoss { margin = 0.3, reduction = red }
    modules['hinge_embedding_' .. red] = nn.HingeEmbeddingLoss { margin = 1.5, reduction = red }
    modules['soft_margin_' .. red] = nn.SoftMarginLoss { reduction = red }
  end
  cases.multilabel_soft_margin = F.multilabel_soft_margin_loss
  cases.multilabel_soft_margin_weight = function(a, y, w) return F.multilabel_soft_margin_loss(a, y, { weight = w, reduction = 'none' }) end
  cases.multilabel_margin = F.multilabel_margin_loss
  cases.multilabel_margin_none = function(a, y) return F.multilabel_margin_loss(a, y, 'none') end
  cases.cosine_embedding = function(a, b, y) return F.cosine_embedding_loss(a, b, y, { margin = -0.2 }) end
  cases.cosine_embedding_none = function(a, b, y) return F.cosine_embedding_loss(a, b, y, 'none') end
  cases.multi_margin = F.multi_margin_loss
  cases.multi_margin_p2 = function(a, y, w) return F.multi_margin_loss(a, y, { p = 2, margin = 0.7, weight = w, reduction = 'none' }) end
  cases.triplet_margin = F.triplet_margin_loss
  cases.triplet_margin_swap = function(a, p, n) return F.triplet_margin_loss(a, p, n, { margin = 2.0, p = 1.0, swap = true, reduction = 'none' }) end
  cases.poisson_nll = F.poisson_nll_loss
  cases.poisson_nll_full = function(a, y) return F.poisson_nll_loss(a, y, { full = true, reduction = 'none' }) end
  cases.poisson_nll_rate = function(a, y) return F.poisson_nll_loss(a, y, { log_input = false, reduction = 'sum' }) end
  cases.gaussian_nll = F.gaussian_nll_loss
  cases.gaussian_nll_lead = function(a, y, v) return F.gaussian_nll_loss(a, y, v, { full = true, reduction = 'sum' }) end
  cases.gaussian_nll_clamped = function(a, y, v) return F.gaussian_nll_loss(a, y, v, { eps = 0.1, reduction = 'none' }) end
  modules.multilabel_soft_margin = nn.MultiLabelSoftMarginLoss()
  modules.multilabel_margin = nn.MultiLabelMarginLoss()
  modules.cosine_embedding = nn.CosineEmbeddingLoss { margin = -0.2 }
  modules.multi_margin = nn.MultiMarginLoss()
  modules.triplet_margin_swap = nn.TripletMarginLoss { margin = 2.0, p = 1.0, swap = true, reduction = 'none' }
  modules.poisson_nll_full = nn.PoissonNLLLoss { full = true, reduction = 'none' }
  modules.gaussian_nll_lead = nn.GaussianNLLLoss { full = true, reduction = 'sum' }

  it('match PyTorch in value and gradient, functional and module forms', function()
    for name, fn in pairs(cases) do against(name, fn) end
    for name, m in pairs(modules) do against(name, function(...) return m(...) end) end
    for _, name in ipairs { 'margin_ranking_mean', 'multilabel_margin', 'multi_margin', 'triplet_margin', 'gaussian_nll' } do
      against32(name, cases[name])
    end
  end)

  it('a module keeps its weight as a buffer', function()
    local w = torch.tensor({ 1.0, 2.0, 1.0, 1.0, 0.5 })
    local m = nn.MultiMarginLoss { weight = w }
    assert.are.equal(w, m.weight)
    local names = {}
    for name in m:named_buffers() do names[#names + 1] = name end
    assert.are.same({ 'weight' }, names)
  end)

  it('unbatched inputs give the sample loss', function()
    local x = torch.tensor({ 0.1, 0.9, -0.3 }, { dtype = 'float64' })
    local batched = F.multi_margin_loss(x:reshape(1, 3), torch.tensor({ 2 }), 'none')
    close(F.multi_margin_loss(x, torch.tensor(2), 'none'), batched[1], 1e-15)
    assert.are.equal(0, F.multi_margin_loss(x, torch.tensor(2), 'none'):dim())
    close(F.multilabel_margin_loss(x, torch.tensor({ 2, 0, 0 })), F.multilabel_margin_loss(x:reshape(1, 3), torch.tensor({ { 2, 0, 0 } })), 1e-15)
  end)

  it('pass float64 gradchecks', function()
    local y = torch.tensor({ 1.0, -1.0, 1.0 }, { dtype = 'float64' })
    gradcheck(function(a, b) return F.margin_ranking_loss(a, b, y, { margin = 0.1 }) end, { f64(3), f64(3) })
    gradcheck(function(a) return F.soft_margin_loss(a, y) end, { f64(3) })
    local labels = torch.tensor({ { 1.0, 0.0, 0.0, 1.0 }, { 0.0, 1.0, 1.0, 1.0 } }, { dtype = 'float64' })
    gradcheck(function(a) return F.multilabel_soft_margin_loss(a, labels) end, { f64(2, 4) })
    gradcheck(function(a, b) return F.cosine_embedding_loss(a, b, torch.tensor({ 1.0, -1.0 }, { dtype = 'float64' })) end, { f64(2, 3), f64(2, 3) })
    gradcheck(function(a, p, n) return F.triplet_margin_loss(a, p, n, { margin = 5 }) end, { f64(2, 3), f64(2, 3), f64(2, 3) })
    gradcheck(function(a) return F.poisson_nll_loss(a, torch.tensor({ 1.0, 0.0, 3.0 }, { dtype = 'float64' }), { full = true }) end, { f64(3) })
    gradcheck(function(a, v) return F.gaussian_nll_loss(a, torch.zeros(3, { dtype = 'float64' }), v) end,
      { f64(3), (torch.rand(3, { dtype = 'float64' }) + 0.5):requires_grad_() })
    gradcheck(function(a) return F.multi_margin_loss(a, torch.tensor({ 1, 3 }), { p = 2, margin = 3 }) end, { f64(2, 4) })
  end)

  it('reject bad arguments with clear errors', function()
    errors(function() F.multi_margin_loss(torch.randn(2, 3), torch.tensor({ 1, 4 })) end, 'target 4 is out of range', 'between 1 and 3',
      'dplua counts classes from 1')
    errors(function() F.multi_margin_loss(torch.randn(2, 3), torch.tensor({ 0, 1 })) end, 'target 0 is out of range')
    errors(function() F.multi_margin_loss(torch.randn(2, 3), torch.tensor({ 1, 2 }), { p = 3 }) end, 'only p == 1 and p == 2')
    errors(function() F.multi_margin_loss(torch.randn(2, 3), torch.tensor({ 1.0, 2.0 })) end, 'int64 tensor of 1-based class indices')
    errors(function() F.multilabel_margin_loss(torch.randn(2, 3), torch.tensor({ { 1, 4, 0 }, { 1, 0, 0 } })) end,
      'target 4 at row 1, position 2 is out of range')
    errors(function() F.multilabel_margin_loss(torch.randn(2, 3), torch.tensor({ 1, 0 })) end, 'must match')
    errors(function() F.margin_ranking_loss(torch.randn(3), torch.randn(3), torch.randn(2, 3)) end, 'same dimension')
    errors(function() F.soft_margin_loss(torch.randn(3), torch.randn(4)) end, 'must match')
    errors(function() F.cosine_embedding_loss(torch.randn(2, 3), torch.randn(2, 3), torch.ones(3)) end, 'target [N]')
    errors(function() F.triplet_margin_loss(torch.randn(2, 3), torch.randn(3), torch.randn(2, 3)) end, 'same number of dimensions')
    errors(function() F.gaussian_nll_loss(torch.randn(2, 3), torch.randn(2, 3), torch.ones(3, 2)) end, 'var is of incorrect size')
    errors(function() F.gaussian_nll_loss(torch.randn(2, 3), torch.randn(2, 3), -torch.ones(2, 3)) end, 'var has negative entry')
    errors(function() F.hinge_embedding_loss(torch.randn(3), torch.ones(3), { reduction = 'avg' }) end, "reduction must be one of")
    errors(function() nn.TripletMarginLoss { margn = 1 } end, 'margn')
    errors(function() nn.MarginRankingLoss()(torch.randn(3), torch.randn(3)) end, 'expected 3 tensors, got 2')
  end)
end)

describe('ctc_loss', function()
  local in_len, tg_len = { 6, 5, 3 }, torch.tensor({ 3, 2, 1 })
  local function ctc(red, o)
    return function(x, t)
      local opts = { reduction = red }
      for k, v in pairs(o or {}) do opts[k] = v end
      return F.ctc_loss(x:log_softmax(3), t, opts.input_lengths or in_len, tg_len, opts)
    end
  end

  it('matches PyTorch in value and gradient (padded and 1-D targets, any blank, impossible alignments)', function()
    against('ctc_mean', ctc('mean'))
    against('ctc_sum', ctc('sum'))
    against('ctc_none', ctc('none'))
    against('ctc_flat', ctc('none'))
    against('ctc_blank_last', ctc('sum', { blank = 5 }))
    local imp = ref.ctc_impossible
    local got = F.ctc_loss(tensor_of(imp.inputs[1]):log_softmax(3), tensor_of(imp.inputs[2]), { 2, 5, 3 }, tg_len, 'none')
    assert.are.equal(math.huge, imp.out[1])
    assert.are.equal(math.huge, got[1])
    close(got:narrow(1, 2, 2), { imp.out[2], imp.out[3] }, 1e-10, 'ctc_impossible')
    against('ctc_zero_infinity', function(x, t)
      return F.ctc_loss(x:log_softmax(3), t, { 2, 5, 3 }, tg_len, { zero_infinity = true })
    end)
    against32('ctc_mean', ctc('mean'))
    local m = nn.CTCLoss { reduction = 'sum' }
    against('ctc_sum', function(x, t) return m(x:log_softmax(3), t, in_len, tg_len) end)
  end)

  it('passes a float64 gradcheck', function()
    local t = torch.tensor({ { 2, 3 }, { 4, 4 } })
    gradcheck(function(x) return F.ctc_loss(x:log_softmax(3), t, { 5, 4 }, { 2, 2 }) end, { f64(5, 2, 4) })
  end)

  it('rejects bad arguments with clear errors', function()
    local lp = torch.randn(4, 2, 3):log_softmax(3)
    errors(function() F.ctc_loss(lp, torch.tensor({ { 1, 2 }, { 2, 2 } }), { 4, 4 }, { 2, 2 }) end,
      'target 1 of sequence 1 is 1', 'not the blank (1)')
    errors(function() F.ctc_loss(lp, torch.tensor({ { 2, 4 }, { 2, 2 } }), { 4, 4 }, { 2, 2 }) end, 'classes must be in 1..3')
    errors(function() F.ctc_loss(lp, torch.tensor({ { 2, 3 }, { 2, 2 } }), { 5, 4 }, { 2, 2 }) end, 'input_lengths[1] = 5 is longer')
    errors(function() F.ctc_loss(lp, torch.tensor({ { 2, 3 }, { 2, 2 } }), { 4 }, { 2, 2 }) end, 'input_lengths must have 2 entries')
    errors(function() F.ctc_loss(lp, torch.tensor({ 2, 3, 2 }), { 4, 4 }, { 2, 2 }) end, 'add up to 4 but the 1-D targets hold 3')
    errors(function() F.ctc_loss(lp, torch.tensor({ { 2, 3 }, { 2, 2 } }), { 4, 4 }, { 2, 2 }, { blank = 0 }) end, 'blank must be in 1..3')
  end)
end)

-- ---------------------------------------------------------------- embedding bags, one_hot

describe('embedding_bag and one_hot', function()
  local cases = {
    embedding_bag_sum = function(w, i, o) return F.embedding_bag(i, w, o, { mode = 'sum' }) end,
    embedding_bag_mean = function(w, i, o) return F.embedding_bag(i, w, o, { mode = 'mean' }) end,
    embedding_bag_max = function(w, i, o) return F.embedding_bag(i, w, o, { mode = 'max' }) end,
    embedding_bag_2d = function(w, i) return F.embedding_bag(i, w, { mode = 'mean' }) end,
    embedding_bag_psw = function(w, i, o, s) return F.embedding_bag(i, w, o, { mode = 'sum', per_sample_weights = s }) end,
    embedding_bag_last = function(w, i, o) return F.embedding_bag(i, w, o, { mode = 'sum', include_last_offset = true }) end,
  }

  it('match PyTorch in value and gradient (offsets count from 1, an empty bag is zeros)', function()
    for name, fn in pairs(cases) do against(name, fn) end
    against32('embedding_bag_mean', cases.embedding_bag_mean)
  end)

  it('nn.EmbeddingBag: its weight, padding_idx left out, repr', function()
    local case = ref.embedding_bag_max
    local m = nn.EmbeddingBag(7, 3, { mode = 'max', _weight = tensor_of(case.inputs[1]) })
    close(m(tensor_of(case.inputs[2]), tensor_of(case.inputs[3])), case.out)
    assert.are.equal("EmbeddingBag(7, 3, mode='max')", tostring(m))
    local p = nn.EmbeddingBag(5, 2, { mode = 'mean', padding_idx = 1 })
    close(p.weight[1], { 0, 0 })
    local got = p(torch.tensor({ { 1, 2, 3 } }))
    close(got, ((p.weight[2] + p.weight[3]) / 2):reshape(1, 2), 1e-6)
    assert.are.equal("EmbeddingBag(5, 2, mode='mean', padding_idx=1)", tostring(p))
    gradcheck(function(w) return F.embedding_bag(torch.tensor({ 1, 3, 2, 2 }), w, torch.tensor({ 1, 3 }), { mode = 'max' }) end,
      { f64(4, 2) })
  end)

  it('reject bad arguments with clear errors', function()
    local w = torch.randn(5, 2)
    errors(function() F.embedding_bag(torch.tensor({ 1, 2 }), w) end, 'offsets has to be a 1-D int64 tensor')
    errors(function() F.embedding_bag(torch.tensor({ 1, 2 }), w, torch.tensor({ 0, 1 })) end, 'offsets[1] has to be 1')
    if dofile('spec/helpers/device.lua').is_cuda then   -- checked on the GPU, reported at the next synchronisation
      errors(function() F.embedding_bag(torch.tensor({ 1, 6 }), w, torch.tensor({ 1 })):tolist() end, 'index 6', 'is out of range')
    else
      errors(function() F.embedding_bag(torch.tensor({ 1, 6 }), w, torch.tensor({ 1 })) end, 'index 6 is out of range', 'dplua counts from 1')
    end
    errors(function() F.embedding_bag(torch.tensor({ 1, 2 }), w, torch.tensor({ 1, 4 })) end, 'non-decreasing positions in 1..3')
    errors(function() F.embedding_bag(torch.tensor({ { 1, 2 } }), w, { mode = 'mean', per_sample_weights = torch.ones(1, 2) }) end,
      "only supported for mode='sum'")
    errors(function() F.embedding_bag(torch.tensor({ 1, 2 }), w, torch.tensor({ 1, 2 }), { include_last_offset = true }) end,
      'the last offset has to be 3')
    errors(function() nn.EmbeddingBag(5, 2, { mode = 'median' }) end, "mode must be 'sum', 'mean' or 'max'")
  end)

  it('F.one_hot counts classes from 1 as the class targets of cross_entropy; -1 takes the largest class', function()
    local t = torch.tensor({ 1, 3, 2 })
    assert.are.same({ { 1, 0, 0 }, { 0, 0, 1 }, { 0, 1, 0 } }, F.one_hot(t):tolist())
    assert.are.same({ 3, 5 }, F.one_hot(t, 5):size():totable())
    assert.are.same({ 3, 3 }, F.one_hot(t, -1):size():totable())
    -- (a GPU checks the classes there and reports at the next synchronisation: tolist)
    errors(function() F.one_hot(torch.tensor({ 0, 1 })):tolist() end, 'dplua counts classes from 1')
    errors(function() F.one_hot(t, 2):tolist() end, 'between 1 and 2')
  end)
end)

-- ---------------------------------------------------------------- packed sequences, rnn utils

local function f64t(v) return torch.tensor(v, { dtype = 'float64' }) end

local function load_state(m, state)
  local sd = {}
  for k, v in pairs(state) do sd[k] = f64t(v) end
  m:load_state_dict(sd)
end

describe('nn.utils.rnn and packed sequences through the recurrent layers', function()
  local R = nn.utils.rnn

  it('pad_sequence pads to the longest, batch_first or not', function()
    local a, b = torch.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }), torch.tensor({ { 5.0, 6.0 } })
    assert.are.same({ { { 1, 2 }, { 5, 6 } }, { { 3, 4 }, { -1, -1 } } }, R.pad_sequence({ a, b }, false, -1):tolist())
    assert.are.same({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 0, 0 } } }, R.pad_sequence({ a, b }, { batch_first = true }):tolist())
    errors(function() R.pad_sequence({ a, torch.randn(2, 3) }) end, 'sequence 2 has shape [2, 3]')
    errors(function() R.pad_sequence({}) end, 'non-empty table of tensors')
  end)

  it('pack_padded_sequence matches PyTorch: data, batch_sizes, sorted_indices', function()
    local case = ref.packed_gru
    local p = R.pack_padded_sequence(f64t(case.x), case.lengths, { enforce_sorted = false })
    close(p.data, case.packed_data, 1e-15)
    assert.are.same(case.batch_sizes, p.batch_sizes:tolist())
    assert.are.same(case.sorted_indices, p.sorted_indices:tolist())
    local back, lens = R.pad_packed_sequence(p)
    assert.are.same(case.lens, lens:tolist())
    -- the padding of the original is not kept: zeros past each length
    local want = f64t(case.x)
    for b, n in ipairs(case.lengths) do
      if n < 4 then want:narrow(1, n + 1, 4 - n):select(2, b):zero_() end
    end
    close(back, want, 1e-15)
    local padded = R.pad_packed_sequence(p, { total_length = 6, padding_value = -1 })
    assert.are.same({ 6, 3, 3 }, padded:size():totable())
    close(padded[6], torch.full({ 3, 3 }, -1.0), 0)
    assert.is_truthy(tostring(p):find('batch_sizes=[3, 3, 2, 1]', 1, true))
  end)

  it('pack_sequence keeps the given order with enforce_sorted', function()
    local p = R.pack_sequence({ torch.tensor({ 1.0, 2.0, 3.0 }), torch.tensor({ 4.0, 5.0 }), torch.tensor({ 6.0 }) })
    assert.are.same({ 1, 4, 6, 2, 5, 3 }, p.data:tolist())
    assert.are.same({ 3, 2, 1 }, p.batch_sizes:tolist())
    assert.is_nil(p.sorted_indices)
    errors(function() R.pack_sequence({ torch.ones(1), torch.ones(2) }) end, 'must be sorted in decreasing order', 'enforce_sorted=false')
    errors(function() R.pack_padded_sequence(torch.randn(3, 2, 1), { 3, 0 }) end, 'has to be greater than 0')
    errors(function() R.pack_padded_sequence(torch.randn(3, 2, 1), { 4, 2 }) end, 'longer than the input')
    errors(function() R.pack_padded_sequence(torch.randn(3, 2, 1), { 3 }) end, 'equal to batch_size, but got 1 (batch_size=2)')
    errors(function() R.pad_packed_sequence(torch.randn(3)) end, 'expected a PackedSequence')
    errors(function() R.pad_packed_sequence(p, { total_length = 2 }) end, 'at least the length of the longest sequence input (3)')
  end)

  it('nn.LSTM / GRU / RNN over packed batches match PyTorch (outputs, h_n from each last valid step, gradients)', function()
    for _, kind in ipairs { 'lstm', 'gru', 'rnn' } do
      for _, bf in ipairs { false, true } do
        local name = 'packed_' .. kind .. (bf and '_bf' or '')
        local case = ref[name]
        local m
        if kind == 'lstm' then m = nn.LSTM(3, 4, { num_layers = 2, bidirectional = true, batch_first = bf })
        elseif kind == 'gru' then m = nn.GRU(3, 4, { batch_first = bf })
        else m = nn.RNN(3, 4, { nonlinearity = 'relu', batch_first = bf }) end
        m:double()
        load_state(m, case.state)
        local x = torch.tensor(case.x, { dtype = 'float64', requires_grad = true })
        local packed = R.pack_padded_sequence(x, case.lengths, { batch_first = bf, enforce_sorted = false })
        local out, h = m(packed)
        assert.are.equal('nn.PackedSequence', torch.typename(out))
        local padded, lens = R.pad_packed_sequence(out, { batch_first = bf })
        assert.are.same(case.lens, lens:tolist())
        close(padded, case.out, 1e-10, name .. ' output')
        local hs = kind == 'lstm' and h or { h }
        local loss = (padded * f64t(case.g_out)):sum()
        for k, t in ipairs(hs) do
          close(t, case.h[k], 1e-10, name .. ' state ' .. k)
          loss = loss + (t * f64t(case.g_h[k])):sum()
        end
        loss:backward()
        close(x.grad, case.grad, 1e-10, name .. ' input gradient')
      end
    end
  end)

  it('an initial state is given in the original batch order', function()
    local m = nn.GRU(2, 3):double()
    local x = torch.randn(3, 2, 2, { dtype = 'float64' })
    local h0 = torch.randn(1, 2, 3, { dtype = 'float64' })
    local p = R.pack_padded_sequence(x, { 2, 3 }, { enforce_sorted = false })
    local _, h = m(p, h0)
    -- the second sequence runs all three steps: the unpacked layer gives its state
    local _, full = m(x:narrow(2, 2, 1), h0:narrow(2, 2, 1))
    close(h:narrow(2, 2, 1), full, 1e-12)
    local _, short = m(x:narrow(1, 1, 2):narrow(2, 1, 1), h0:narrow(2, 1, 1))
    close(h:narrow(2, 1, 1), short, 1e-12)
    errors(function() m(p, torch.randn(1, 3, 3, { dtype = 'float64' })) end, 'expected h_0 of shape [1, 2, 3]')
  end)
end)

-- ---------------------------------------------------------------- the rest

describe('nn.Transformer, weight_norm, init.sparse_, ParameterDict', function()
  it('nn.Transformer matches PyTorch with its state_dict (masks, key padding, gradients)', function()
    local case = ref.transformer
    local m = nn.Transformer { d_model = 4, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 1, dim_feedforward = 6,
                               dropout = 0.0 }
    m:double()
    load_state(m, case.state)
    local src = torch.tensor(case.src, { dtype = 'float64', requires_grad = true })
    local tgt = torch.tensor(case.tgt, { dtype = 'float64', requires_grad = true })
    local pad = torch.tensor(case.pad, { dtype = 'bool' })
    local mask = nn.Transformer.generate_square_subsequent_mask(3, { dtype = 'float64' })
    local out = m(src, tgt, { tgt_mask = mask, src_key_padding_mask = pad, memory_key_padding_mask = pad })
    close(out, case.out, 1e-10, 'Transformer output');
    (out * f64t(case.gout)):sum():backward()
    close(src.grad, case.grad_src, 1e-9, 'Transformer src gradient')
    close(tgt.grad, case.grad_tgt, 1e-9, 'Transformer tgt gradient')
    errors(function() m(torch.randn(5, 2, 4, { dtype = 'float64' }), torch.randn(3, 3, 4, { dtype = 'float64' })) end,
      'the batch number of src and tgt must be equal')
    errors(function() m(torch.randn(5, 2, 3, { dtype = 'float64' }), torch.randn(3, 2, 3, { dtype = 'float64' })) end,
      'equal to d_model (4)')
    errors(function() nn.Transformer { d_model = 0 } end, 'd_model must be a positive integer')
    assert.are.same({ { 0, -math.huge }, { 0, 0 } }, nn.Transformer.generate_square_subsequent_mask(2):tolist())
  end)

  it('nn.Transformer with batch_first, and unbatched, gives the same numbers in its layout', function()
    local case = ref.transformer
    local bf = nn.Transformer { d_model = 4, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 1, dim_feedforward = 6,
                                dropout = 0.0, batch_first = true }
    bf:double()
    load_state(bf, case.state)
    local pad = torch.tensor(case.pad, { dtype = 'bool' })
    local mask = nn.Transformer.generate_square_subsequent_mask(3, { dtype = 'float64' })
    local out = bf(f64t(case.src):transpose(1, 2), f64t(case.tgt):transpose(1, 2),
      { tgt_mask = mask, src_key_padding_mask = pad, memory_key_padding_mask = pad })
    close(out:transpose(1, 2), case.out, 1e-10, 'batch_first Transformer')
    -- the second batch element has no padding: alone and unbatched it gives the same column
    local one = bf(f64t(case.src):select(2, 2), f64t(case.tgt):select(2, 2), { tgt_mask = mask })
    close(one, f64t(case.out):select(2, 2), 1e-10, 'unbatched Transformer')
  end)

  it('weight_norm matches PyTorch: weight_g and weight_v, recomputed each forward; remove_weight_norm folds it back', function()
    for _, c in ipairs { { 'weight_norm', 1 }, { 'weight_norm_dim2', 2 } } do
      local case = ref[c[1]]
      local lin = nn.Linear(3, 4):double()
      nn.utils.weight_norm(lin, { dim = c[2] })
      local names = {}
      for n in pairs(lin:state_dict()) do names[#names + 1] = n end
      table.sort(names)
      assert.are.same({ 'bias', 'weight_g', 'weight_v' }, names)
      torch.no_grad(function()
        lin.weight_g:copy_(f64t(case.g)); lin.weight_v:copy_(f64t(case.v)); lin.bias:copy_(f64t(case.bias))
      end)
      local out = lin(f64t(case.x))
      close(out, case.out, 1e-12, c[1]);
      (out * f64t(case.gout)):sum():backward()
      close(lin.weight_g.grad, case.grad_g, 1e-12, c[1] .. ' g gradient')
      close(lin.weight_v.grad, case.grad_v, 1e-12, c[1] .. ' v gradient')
      nn.utils.remove_weight_norm(lin)
      close(lin(f64t(case.x)), case.out, 1e-12, c[1] .. ' after remove_weight_norm')
      assert.is_nil(lin.weight_g)
      assert.is_true(nn.Parameter.is(lin.weight))
    end
    errors(function() nn.utils.weight_norm(nn.Linear(2, 2), 'kernel') end, "has no parameter 'kernel'")
    errors(function() nn.utils.weight_norm(nn.Linear(2, 2), { dim = 3 }) end, 'dim 3 is out of range')
    errors(function() nn.utils.remove_weight_norm(nn.Linear(2, 2)) end, "weight_norm of 'weight' not found")
  end)

  it('init.sparse_ zeroes ceil(sparsity * rows) entries of each column', function()
    torch.manual_seed(7)
    local w = nn.init.sparse_(torch.empty(10, 6), 0.25, 0.5)
    for c = 1, 6 do assert.are.equal(3, w:select(2, c):eq(0):sum():item()) end
    assert.is_true(w:std():item() > 0.2)
    errors(function() nn.init.sparse_(torch.empty(3), 0.5) end, 'Only tensors with 2 dimensions')
    errors(function() nn.init.sparse_(torch.empty(3, 2)) end, 'sparsity')
  end)

  it('nn.ParameterDict and parameters_to_vector exist (torch.nn names that programs index)', function()
    assert.is_not_nil(nn.ParameterDict)
    local v = nn.utils.parameters_to_vector(nn.Linear(2, 3):parameters())
    assert.are.equal(9, v:numel())
  end)
end)

describe('the modules in float32 on the default device', function()
  it('run forward and backward and agree with their float64 forms (checked against PyTorch above)', function()
    torch.manual_seed(11)
    local x4 = torch.randn(2, 4, 6, 6)
    local x3 = torch.randn(2, 4, 9)
    local cases = {
      { nn.PReLU(4), x4 }, { nn.SELU(), x3 }, { nn.CELU(0.5), x3 }, { nn.GLU(2), x3 }, { nn.Hardswish(), x3 },
      { nn.Hardsigmoid(), x3 }, { nn.Softsign(), x3 }, { nn.Tanhshrink(), x3 }, { nn.Threshold(0.1, -1), x3 },
      { nn.Softmin(2), x3 }, { nn.Softmax2d(), x4 }, { nn.LogSigmoid(), x3 }, { nn.InstanceNorm1d(4, { affine = true }), x3 },
      { nn.InstanceNorm2d(4, { affine = true, track_running_stats = true }), x4 }, { nn.LocalResponseNorm(3), x4 },
      { nn.PixelShuffle(2), x4 }, { nn.PixelUnshuffle(2), x4 }, { nn.ChannelShuffle(2), x4 }, { nn.Unflatten(3, { 3, 3 }), x3 },
      { nn.ReflectionPad1d(2), x3 }, { nn.ReflectionPad2d(1), x4 }, { nn.ReplicationPad1d(1), x3 },
      { nn.ReplicationPad2d(2), x4 }, { nn.ConstantPad1d(1, 2.0), x3 }, { nn.ConstantPad2d({ 1, 0, 0, 1 }, 0.5), x4 },
      { nn.AvgPool1d(3, 2), x3 }, { nn.AdaptiveAvgPool1d(4), x3 }, { nn.AdaptiveMaxPool1d(4), x3 },
      { nn.UpsamplingNearest2d { scale_factor = 2 }, x4 }, { nn.UpsamplingBilinear2d { size = { 8, 9 } }, x4 },
      { nn.Unfold(3, { padding = 1 }), x4 }, { nn.Fold({ 4, 5 }, 2), torch.randn(2, 8, 12) },
    }
    for _, c in ipairs(cases) do
      local m, x = c[1], c[2]
      local xin = x:clone():requires_grad_()
      local y = m(xin)
      assert.are.equal('float32', y.dtype)
      y:sum():backward()
      local m64 = m:double()
      local x64 = x:double():requires_grad_()
      local y64 = m64(x64)
      y64:sum():backward()
      close(y, y64, 1e-4, tostring(m))
      close(xin.grad, x64.grad, 1e-4, tostring(m) .. ' gradient')
    end
  end)
end)
