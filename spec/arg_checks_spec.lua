-- arg_checks: arguments PyTorch 1.13 refuses that dplua used to take with a wrong result or
-- a hang: a negative index to gather and scatter (PyTorch: "index -1 is out of bounds for
-- dimension 1 with size 3"; advanced indexing still counts negative indices from the end, as
-- PyTorch's does), an infinite or NaN scale_factor or a huge output size to interpolate
-- (checked before any loop over the output), and ignore_index with class-probability targets
-- (PyTorch: "ignore_index is not supported for floating point target").
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional

local expect_error = dofile('spec/helpers/check.lua').expect_error

describe('gather and scatter take no negative index', function()
  local x = torch.tensor({ { 0, 1, 2 }, { 3, 4, 5 } }, { dtype = 'float64' })
  local neg = torch.tensor({ { -1 }, { 1 } })

  -- a GPU checks the indices on the device and reports a bad one at the next
  -- synchronisation: reading the result back is one
  local on_gpu = torch.get_default_device().type == 'cuda'

  it('gather', function()
    expect_error(function() return x:gather(2, neg):tolist() end, 'gather',
      'index -1 is out of range for dimension 2 with size 3', 'takes no negative indices')
    expect_error(function() return torch.gather(x, 2, torch.tensor({ { 1 }, { -3 } })):tolist() end, 'index -3')
    assert.are.same({ { 2 }, { 3 } }, x:gather(2, torch.tensor({ { 3 }, { 1 } })):tolist())
  end)

  it('scatter_, scatter, scatter_add_', function()
    local y = x:clone()
    expect_error(function() return y:scatter_(2, neg, 5):tolist() end, 'scatter_', 'index -1')
    expect_error(function() return y:scatter(2, neg, torch.ones(2, 1, { dtype = 'float64' })):tolist() end, 'scatter', 'index -1')
    expect_error(function() return y:scatter_add_(2, neg, torch.ones(2, 1, { dtype = 'float64' })):tolist() end,
      'scatter_add_', 'index -1')
    -- nothing written (on the CPU, which checks before it writes; a GPU's check runs beside
    -- the write and reports afterwards, as PyTorch's device asserts do)
    if not on_gpu then assert.are.same(x:tolist(), y:tolist()) end
  end)

  it('advanced indexing still counts negative indices from the end', function()
    assert.are.same({ 2, 5 }, x[{ {}, -1 }]:tolist())
    assert.are.same({ { 2, 0 }, { 5, 3 } }, x[{ {}, torch.tensor({ -1, 1 }) }]:tolist())
  end)
end)

describe('interpolate checks the output size before it loops', function()
  local img = torch.randn(1, 1, 4, 4)

  it('refuses an infinite, NaN, zero or negative scale_factor', function()
    for _, sf in ipairs { math.huge, 0 / 0, -math.huge, 0, -1 } do
      for _, mode in ipairs { 'nearest', 'bilinear' } do
        expect_error(function() F.interpolate(img, { scale_factor = sf, mode = mode }) end, 'interpolate',
          'scale_factor must be a finite positive number')
      end
    end
    expect_error(function() F.interpolate(img, { scale_factor = { 2, math.huge } }) end, 'finite positive')
    expect_error(function() nn.Upsample({ scale_factor = math.huge })(img) end, 'finite positive')
  end)

  it('refuses output sizes of 2^31 and more', function()
    expect_error(function() F.interpolate(img, { size = { 1 << 31, 1 } }) end, 'interpolate',
      'output size along dim 3 would be 2147483648')
    expect_error(function() F.interpolate(img, { scale_factor = 1e10 }) end, 'would be 40000000000')
    expect_error(function() F.interpolate(torch.randn(1, 1, 4), { size = 1 << 40, mode = 'linear' }) end,
      'would be 1099511627776')
  end)

  it('still interpolates', function()
    local y = torch.tensor({ { { 1, 2 } } }, { dtype = 'float64' })
    assert.are.same({ { { 1, 1, 2, 2 } } }, F.interpolate(y, { scale_factor = 2 }):tolist())
    local z = F.interpolate(img, { size = { 8, 8 }, mode = 'bilinear' })
    assert.are.same({ 8, 8 }, { z:size(3), z:size(4) })
  end)
end)

describe('cross_entropy with class probabilities', function()
  it('refuses ignore_index other than the default', function()
    local x, p = torch.randn(3, 4), torch.rand(3, 4)
    expect_error(function() F.cross_entropy(x, p, { ignore_index = 2 }) end, 'cross_entropy',
      'ignore_index is not supported for floating point target')
    expect_error(function() nn.CrossEntropyLoss({ ignore_index = 0 })(x, p) end, 'ignore_index')
    -- the default (-100), given or not, is fine: PyTorch 1.13 gives the same value
    assert.are.equal(F.cross_entropy(x, p):item(), F.cross_entropy(x, p, { ignore_index = -100 }):item())
  end)
end)
