-- nn.init (gains against PyTorch 1.13's, each initializer's range and moments over many
-- draws, orthogonality, in-place and without history) and nn.utils' gradient clipping and
-- parameter vectors (against the formulas computed here by hand).
local torch = require 'torch'
local nn = require 'nn'
local init = nn.init
local fx = dofile('spec/fixtures/train.lua')
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function moments(t)
  local x = t:double()
  local mean = x:mean():item()
  local var = ((x - mean) ^ 2):mean():item()
  return mean, math.sqrt(var), x:min():item(), x:max():item()
end

-- |got - want| within k standard errors of a mean of n draws with spread sd
local function within(got, want, sd, n, what)
  local se = sd / math.sqrt(n)
  assert(math.abs(got - want) <= 5 * se, ('%s: %.6g, expected %.6g (5 sigma = %.3g)'):format(what, got, want, 5 * se))
end

describe('nn.init', function()
  it('is its own table, apart from the package loader', function()
    assert.are.equal('table', type(nn.init))
    assert.are.equal('function', type(nn.init.xavier_uniform_))
    assert.are.equal(nn.init, require 'nn.initializers')
  end)

  it('calculate_gain matches PyTorch', function()
    local g = fx.gains
    for name, v in pairs { linear = g.linear, conv2d = g.conv2d, sigmoid = g.sigmoid, tanh = g.tanh, relu = g.relu,
      leaky_relu = g.leaky_relu, selu = g.selu } do
      assert(math.abs(init.calculate_gain(name) - v) < 1e-15, name)
    end
    assert(math.abs(init.calculate_gain('leaky_relu', 0.2) - g.leaky_relu_02) < 1e-15)
    expect_error(function() init.calculate_gain('swish') end, "Unsupported nonlinearity 'swish'")
  end)

  it('fills in place without history and returns the tensor', function()
    torch.manual_seed(1)
    local w = nn.Parameter(torch.empty(8, 4))
    assert.are.equal(w, init.xavier_uniform_(w))
    assert.is_true(w.is_leaf)
    assert.is_nil(w.grad_fn)
    assert.are.same({ 0, 0 }, { init.zeros_(torch.ones(2)):sum():item(), init.constant_(torch.ones(3), 0):sum():item() })
    assert.are.equal(6, init.ones_(torch.zeros(2, 3)):sum():item())
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 } }, init.eye_(torch.empty(2, 3)):tolist())
    local d = init.dirac_(torch.empty(2, 2, 3))
    assert.are.same({ { { 0, 1, 0 }, { 0, 0, 0 } }, { { 0, 0, 0 }, { 0, 1, 0 } } }, d:tolist())
  end)

  it('uniform_, normal_ and the fan-scaled initializers have their distributions', function()
    torch.manual_seed(7)
    local n = 200 * 100
    local m, sd, lo, hi = moments(init.uniform_(torch.empty(200, 100), -0.5, 1.5))
    within(m, 0.5, 2 / math.sqrt(12), n, 'uniform_ mean')
    assert(lo >= -0.5 and hi <= 1.5 and lo < -0.49 and hi > 1.49)
    m, sd = moments(init.normal_(torch.empty(200, 100), { mean = 2, std = 3 }))
    within(m, 2, 3, n, 'normal_ mean')
    assert(math.abs(sd - 3) < 0.05 * 3, 'normal_ std ' .. sd)
    -- a conv weight [64, 32, 3, 3]: fan_in 288, fan_out 576
    local w = torch.empty(64, 32, 3, 3)
    local nw = w:numel()
    local bound = math.sqrt(3) * 1 * math.sqrt(2 / (288 + 576))
    m, sd, lo, hi = moments(init.xavier_uniform_(w))
    assert(lo >= -bound and hi <= bound and hi > 0.99 * bound, 'xavier_uniform_ bound')
    assert(math.abs(sd - bound / math.sqrt(3)) < 0.03 * sd, 'xavier_uniform_ std')
    m, sd = moments(init.xavier_normal_(w, 2.0))
    assert(math.abs(sd - 2 * math.sqrt(2 / 864)) < 0.03 * sd, 'xavier_normal_ std ' .. sd)
    within(m, 0, sd, nw, 'xavier_normal_ mean')
    -- nn.Linear's default: kaiming_uniform_(a = sqrt(5)) has bound 1 / sqrt(fan_in)
    m, sd, lo, hi = moments(init.kaiming_uniform_(w, { a = math.sqrt(5) }))
    assert(hi <= 1 / math.sqrt(288) and hi > 0.99 / math.sqrt(288), 'kaiming_uniform_ bound ' .. hi)
    m, sd = moments(init.kaiming_normal_(w, 0, 'fan_out', 'relu'))
    assert(math.abs(sd - math.sqrt(2) / math.sqrt(576)) < 0.03 * sd, 'kaiming_normal_ std ' .. sd)
  end)

  it('orthogonal_ gives orthonormal rows or columns, scaled by gain', function()
    torch.manual_seed(3)
    for _, shape in ipairs { { 6, 10 }, { 10, 6 }, { 4, 3, 2 } } do
      local t = init.orthogonal_(torch.empty(table.unpack(shape)), 2.0):double()
      local q = t:reshape(shape[1], -1)
      local g = q:size(1) <= q:size(2) and q:mm(q:t()) or q:t():mm(q)
      local k = g:size(1)
      local err = (g - torch.eye(k, { dtype = 'float64' }) * 4):abs():max():item()
      assert(err < 1e-5, ('orthogonal_ %s: off by %g'):format(table.concat(shape, 'x'), err))
    end
  end)

  it('trunc_normal_ keeps every draw in [a, b] with the truncated moments', function()
    torch.manual_seed(5)
    local t = init.trunc_normal_(torch.empty(40000), { mean = 0, std = 1, a = -1, b = 1 })
    local m, sd, lo, hi = moments(t)
    assert(lo >= -1 and hi <= 1)
    -- a standard normal truncated to [-1, 1]: mean 0, variance 1 - 2 phi(1) / (2 Phi(1) - 1)
    local phi1 = math.exp(-0.5) / math.sqrt(2 * math.pi)
    local var = 1 - 2 * phi1 / 0.6826894921370859
    within(m, 0, math.sqrt(var), 40000, 'trunc_normal_ mean')
    assert(math.abs(sd - math.sqrt(var)) < 0.02, 'trunc_normal_ std ' .. sd)
  end)

  it('names bad arguments', function()
    expect_error(function() init.xavier_uniform_(torch.empty(5)) end, 'fewer than 2 dimensions', '[5]')
    expect_error(function() init.kaiming_uniform_(torch.empty(3, 3), { mode = 'fan_avg' }) end, "Mode 'fan_avg' not supported")
    expect_error(function() init.kaiming_normal_(torch.empty(3, 3), { nonlinearity = 'gelu' }) end, 'Unsupported nonlinearity')
    expect_error(function() init.uniform_(torch.empty(3), { low = 0 }) end, 'unknown option low')
    expect_error(function() init.normal_(torch.zeros(3, { dtype = 'int64' })) end, 'floating point')
    expect_error(function() init.eye_(torch.empty(2, 2, 2)) end, 'Only tensors with 2 dimensions')
    expect_error(function() init.trunc_normal_(torch.empty(2), 0, 1, 1, -1) end, 'expected a < b')
  end)
end)

describe('nn.utils gradient clipping', function()
  local function params_with(grads)
    local ps = {}
    for i, g in ipairs(grads) do
      ps[i] = nn.Parameter(torch.zeros(#g, { dtype = 'float64' }))
      ps[i].grad = torch.tensor(g, { dtype = 'float64' })
    end
    return ps
  end

  it('clip_grad_norm_ scales by max_norm / (norm + 1e-6) and returns the total norm', function()
    local ps = params_with { { 3, 0 }, { 0, 4, 0 } }
    local total = nn.utils.clip_grad_norm_(ps, 1.0)
    assert(math.abs(total:item() - 5) < 1e-12)
    local c = 1 / (5 + 1e-6)
    assert(math.abs(ps[1].grad:tolist()[1] - 3 * c) < 1e-12 and math.abs(ps[2].grad:tolist()[2] - 4 * c) < 1e-12)
    -- below max_norm: untouched
    ps = params_with { { 0.3, 0.4 } }
    assert(math.abs(nn.utils.clip_grad_norm_(ps, 1.0):item() - 0.5) < 1e-12)
    assert.are.same({ 0.3, 0.4 }, ps[1].grad:tolist())
  end)

  it('clip_grad_norm_ takes norm_type 1 and inf, and an iterator of parameters', function()
    local ps = params_with { { 3, -1 }, { 2, -6 } }
    local total = nn.utils.clip_grad_norm_(ps, 3.0, math.huge)
    assert.are.equal(6, total:item())
    assert(math.abs(ps[2].grad:tolist()[2] + 6 * 3 / (6 + 1e-6)) < 1e-12)
    local m = nn.Linear(2, 1)
    m.weight.grad = torch.tensor({ { 1.0, -2.0 } })
    m.bias.grad = torch.tensor({ 3.0 })
    assert(math.abs(nn.utils.clip_grad_norm_(m:parameters(), 10, { norm_type = 1 }):item() - 6) < 1e-6)
    assert.are.equal(0, nn.utils.clip_grad_norm_({ nn.Parameter(torch.zeros(2)) }, 1):item())
  end)

  it('clip_grad_norm_ refuses a non-finite norm when asked to', function()
    local ps = params_with { { 0 / 0, 1 } }
    expect_error(function() nn.utils.clip_grad_norm_(ps, 1, { error_if_nonfinite = true }) end, 'is non-finite')
  end)

  it('clip_grad_value_ clamps, parameters_to_vector and vector_to_parameters round-trip', function()
    local ps = params_with { { 3, -0.5 }, { -7 } }
    nn.utils.clip_grad_value_(ps, 1)
    assert.are.same({ { 1, -0.5 }, { -1 } }, { ps[1].grad:tolist(), ps[2].grad:tolist() })
    local a, b = torch.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }), torch.tensor({ 5.0 })
    local v = nn.utils.parameters_to_vector({ a, b })
    assert.are.same({ 1, 2, 3, 4, 5 }, v:tolist())
    nn.utils.vector_to_parameters(v * 2, { a, b })
    assert.are.same({ { 2, 4 }, { 6, 8 } }, a:tolist())
    expect_error(function() nn.utils.vector_to_parameters(torch.zeros(4), { a, b }) end, 'expected a vector of 5 elements')
  end)
end)
