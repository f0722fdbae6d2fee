-- spec/constructors_spec.lua: layers take PyTorch's positional arguments in PyTorch's order
-- (then an options table), so nn.MaxPool2d((3, 3), (2, 2), (1, 1)) keeps its padding; a
-- setting given twice, or too many by position, is an error.  Shapes are PyTorch 1.13's.
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local check = dofile('spec/helpers/check.lua')

describe('layer constructors by position', function()
  it('pooling: nn.MaxPool2d((3, 3), (2, 2), (1, 1)) pads (PyTorch: [1, 3, 4, 4]), return_indices by position', function()
    local x = torch.randn(1, 3, 7, 7)
    local y = nn.MaxPool2d({ 3, 3 }, { 2, 2 }, { 1, 1 })(x)
    assert.are.same({ 1, 3, 4, 4 }, y:size():totable())
    assert.is_true(torch.equal(y, F.max_pool2d(x, { 3, 3 }, { stride = { 2, 2 }, padding = { 1, 1 } })))
    local v, i = nn.MaxPool2d(2, 2, 0, 1, true)(x)
    assert.are.same({ 1, 3, 3, 3 }, v:size():totable())
    assert.are.equal('int64', i.dtype)
    -- AvgPool2d(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    local a = nn.AvgPool2d(3, 2, 1, true, false)(x)
    assert.are.same({ 1, 3, 4, 4 }, a:size():totable())
    assert.is_true(torch.allclose(a, F.avg_pool2d(x, 3, { stride = 2, padding = 1, ceil_mode = true, count_include_pad = false })))
    check.expect_error(function() nn.MaxPool2d(2, 1, { stride = 2 }) end, 'nn.MaxPool2d: stride is given twice')
    check.expect_error(function() nn.MaxPool2d(2, 1, 0, 1, false, false, 7) end, 'nn.MaxPool2d: 6 arguments by position is too many')
  end)

  it('transformer layers: nn.TransformerEncoderLayer(4, 2, 16, 0.0) has a 16-wide feed-forward', function()
    local enc = nn.TransformerEncoderLayer(4, 2, 16, 0.0)
    assert.are.same({ 16, 4 }, enc.linear1.weight:size():totable())
    assert.are.equal(0.0, enc.dropout.p)
    local dec = nn.TransformerDecoderLayer(4, 2, 8, 0.0, 'gelu', 1e-6, true)
    assert.are.same({ 8, 4 }, dec.linear1.weight:size():totable())
    assert.is_true(dec.batch_first)
    check.expect_error(function() nn.TransformerEncoderLayer(4, 2, 16, { dim_feedforward = 8 }) end, 'dim_feedforward is given twice')
  end)

  it('nn.MultiheadAttention by position; add_bias_kv, add_zero_attn false and kdim = vdim = embed_dim accepted', function()
    local m = nn.MultiheadAttention(4, 2, 0.0, false, false, false, 4, 4, true)
    assert.is_nil(m.in_proj_bias)
    assert.is_true(m.batch_first)
    local q = torch.randn(2, 3, 4)
    assert.are.same({ 2, 3, 4 }, m(q, q, q):size():totable())
    check.expect_error(function() nn.MultiheadAttention(4, 2, { add_bias_kv = true }) end, 'add_bias_kv = true is not supported')
    check.expect_error(function() nn.MultiheadAttention(4, 2, { kdim = 3 }) end, 'kdim = 3 different from embed_dim')
  end)

  it('nn.LSTM takes proj_size = 0 (no projection) and refuses a projection it does not have', function()
    local m = nn.LSTM(3, 4, { proj_size = 0 })
    local out = m(torch.randn(5, 2, 3))
    assert.are.same({ 5, 2, 4 }, out:size():totable())
    check.expect_error(function() nn.LSTM(3, 4, { proj_size = 2 }) end, 'proj_size = 2 is not supported')
  end)
end)
