-- Values that once differed from PyTorch 1.13's: 1-D nearest interpolate with a fractional
-- scale_factor, mode over -0.0/0.0 and NaN, cumprod's gradient where NaN or inf meets a
-- zero upstream gradient, cov and corrcoef of one variable, searchsorted and bucketize of
-- NaN.  Expected values: spec/fixtures/make_wrong_values.py (PyTorch 1.13), and where
-- PyTorch 1.13 is itself wrong, the values worked out by hand (said so at the case).
local torch = require 'torch'
local F = require('nn').functional
local W = dofile('spec/fixtures/wrong_values.lua')

local function is_nan(v) return v ~= v end
local function same(expected, got, what)
  assert.are.equal(#expected, #got, what .. ': length')
  for i = 1, #expected do
    local e, g = expected[i], got[i]
    if type(e) == 'table' then same(e, g, what .. '[' .. i .. ']')
    elseif not (e == g or (is_nan(e) and is_nan(g))) then
      error(('%s: element %d: expected %s, got %s'):format(what, i, tostring(e), tostring(g)), 2)
    end
  end
end

describe('interpolate, 1-D nearest', function()
  it('sizes and picks as PyTorch for fractional scale factors', function()
    for _, c in ipairs(W.interpolate) do
      local x = torch.arange(1, c.n + 1):float():reshape(1, 1, c.n)
      local y = F.interpolate(x, { scale_factor = c.scale, mode = 'nearest', recompute_scale_factor = c.recompute or nil })
      same(c.out, y:reshape(-1):tolist(), ('n=%d scale=%s recompute=%s'):format(c.n, c.scale, tostring(c.recompute)))
    end
  end)
end)

describe('mode', function()
  local function input(c)
    local v = {}
    for i, x in ipairs(c.x) do v[i] = (x == 0 and c.signbit[i]) and -0.0 or x + 0.0 end
    return torch.tensor(v, { dtype = 'float32' })
  end
  it('counts -0.0 and 0.0 as one value and gives the element at the index, as PyTorch', function()
    for _, c in ipairs(W.mode) do
      local v, i = torch.mode(input(c))
      local what = table.concat(c.x, ' ')
      assert.are.equal(c.index + 1, i:item(), what .. ': index')
      local got = v:item()
      assert.is_true(got == c.value or (is_nan(got) and is_nan(c.value)), what .. ': value')
      if got == 0 then assert.are.equal(c.negative, 1 / got < 0, what .. ': sign of zero') end
    end
  end)
  it('counts each NaN once, after every number', function()
    -- by hand: 1 occurs twice, the NaNs once each.  PyTorch 1.13 gives NaN at index 0 here:
    -- it sorts with a comparison that NaN makes no ordering
    local v, i = torch.mode(torch.tensor({ 0 / 0, 1, 0 / 0, 1, 2 }))
    assert.are.equal(1, v:item())
    assert.are.equal(4, i:item())
    -- along a dim, the rows independently
    local vals, idx = torch.mode(torch.tensor({ { 1, 0 / 0, 0 / 0 }, { 0.0, -0.0, -0.0 } }), 2)
    assert.are.same({ 1, 0 }, vals:tolist())
    assert.are.same({ 1, 3 }, idx:tolist())
    assert.is_true(1 / vals:tolist()[2] < 0)
  end)
end)

describe('cumprod backward', function()
  it('matches PyTorch over zeros, NaN and inf with zero upstream gradients', function()
    for k, c in ipairs(W.cumprod) do
      local x = torch.tensor(c.x, { dtype = 'float64', requires_grad = true })
      x:cumprod(c.dim + 1):backward(torch.tensor(c.g, { dtype = 'float64' }))
      same(c.grad, x.grad:tolist(), ('case %d'):format(k))
    end
  end)
  it('leaves a NaN after the first zero out of the others', function()
    local x = torch.tensor({ 0, 0 / 0, 2 }, { dtype = 'float64', requires_grad = true })
    x:cumprod(1):backward(torch.tensor({ 1, 0, 0 }, { dtype = 'float64' }))
    local g = x.grad:tolist()
    assert.is_true(is_nan(g[1]))
    assert.are.same({ 0, 0 }, { g[2], g[3] })
  end)
end)

describe('cov and corrcoef of one variable', function()
  it('give a 0-dim result, as PyTorch', function()
    local c = W.cov
    local r = torch.cov(torch.tensor(c.x1))
    assert.are.equal(0, r:dim()); assert.is_true(math.abs(r:item() - c.cov1) < 1e-6)
    r = torch.cov(torch.tensor(c.row))
    assert.are.equal(0, r:dim()); assert.is_true(math.abs(r:item() - c.cov_row) < 1e-6)
    r = torch.cov(torch.tensor(c.row), { fweights = torch.tensor(c.fweights) })
    assert.are.equal(0, r:dim()); assert.is_true(math.abs(r:item() - c.cov_fw) < 1e-6)
    r = torch.corrcoef(torch.tensor(c.x1))
    assert.are.equal(0, r:dim()); assert.are.equal(c.corr1, r:item())
    r = torch.corrcoef(torch.tensor(c.row))
    assert.are.equal(0, r:dim()); assert.are.equal(c.corr_row, r:item())
    assert.are.same({ 2, 2 }, torch.cov(torch.tensor({ { 1, 2, 4 }, { 0, 1, 1 } })):size():totable())
  end)
end)

describe('searchsorted and bucketize of NaN', function()
  local S = W.searchsorted
  local function plus1(t) local r = {} for i, v in ipairs(t) do r[i] = v + 1 end return r end
  it('put NaN after every number, as PyTorch', function()
    local seq, vals = torch.tensor(S.seq, { dtype = 'float32' }), torch.tensor(S.values)
    same(plus1(S.left), torch.searchsorted(seq, vals):tolist(), 'left')
    same(plus1(S.right), torch.searchsorted(seq, vals, { right = true }):tolist(), 'right')
    same(plus1(S.bucketize), torch.bucketize(vals, seq):tolist(), 'bucketize')
    same(plus1(S.bucketize_right), torch.bucketize(vals, seq, { right = true }):tolist(), 'bucketize right')
    assert.are.equal(4, torch.searchsorted(seq, 0 / 0):item())
  end)
  it('keep a sequence ending in NaNs sorted', function()
    -- by hand, NaN sorting last as sort puts it: a number goes before the NaNs, a NaN after
    -- the numbers (left) or after everything (right).  PyTorch 1.13 puts 3.5 after the NaN
    -- ({1, 2, 3, NaN, 3.5} is not sorted)
    local seq = torch.tensor({ 1, 2, 3, 0 / 0 })
    assert.are.same({ 4, 1, 4 }, torch.searchsorted(seq, torch.tensor({ 0 / 0, 0, 3.5 })):tolist())
    assert.are.same({ 5, 1, 4 }, torch.searchsorted(seq, torch.tensor({ 0 / 0, 0, 3.5 }), { right = true }):tolist())
  end)
end)

-- once refused where PyTorch 1.13 computes (shapes as PyTorch 1.13 gives them)
describe('empty batches', function()
  local nn = require 'nn'
  it('run through RNN, GRU and LSTM', function()
    for _, kind in ipairs { 'RNN', 'GRU', 'LSTM' } do
      local m = nn[kind](3, 4)
      local y, h = m(torch.zeros(5, 0, 3))
      assert.are.same({ 5, 0, 4 }, y:size():totable(), kind)
      assert.are.same({ 1, 0, 4 }, (kind == 'LSTM' and h[1] or h):size():totable(), kind)
    end
    local m = nn.LSTM(3, 4, { num_layers = 2, bidirectional = true, batch_first = true })
    local x = torch.zeros(0, 5, 3, { requires_grad = true })
    local y, hc = m(x)
    assert.are.same({ 0, 5, 8 }, y:size():totable())
    assert.are.same({ 4, 0, 4 }, hc[2]:size():totable())
    ;(y:sum() + hc[1]:sum()):backward()
    assert.are.same({ 0, 5, 3 }, x.grad:size():totable())
    assert.are.equal(0, m.weight_ih_l0.grad:abs():sum():item())
    -- a sequence of no steps stays an error, as PyTorch's
    local ok, err = pcall(m, torch.zeros(2, 0, 3))
    assert.is_false(ok)
    assert.matches('at least one step', err)
  end)
  it('give cross_entropy with label_smoothing a gradient', function()
    for _, reduction in ipairs { 'mean', 'sum', 'none' } do
      local x = torch.zeros(0, 3, { requires_grad = true })
      local l = F.cross_entropy(x, torch.zeros(0):long(), { label_smoothing = 0.1, reduction = reduction })
      l:sum():backward()
      assert.are.same({ 0, 3 }, x.grad:size():totable(), reduction)
      if reduction == 'mean' then assert.is_true(is_nan(l:item())) end   -- PyTorch: nan
      if reduction == 'sum' then assert.are.equal(0, l:item()) end
    end
    local x = torch.zeros(0, 3, { requires_grad = true })
    F.cross_entropy(x, torch.zeros(0, 3), { label_smoothing = 0.1 }):backward()
    assert.are.same({ 0, 3 }, x.grad:size():totable())
  end)
end)

describe('nanmedian', function()
  local nan = 0 / 0
  it('leaves the NaNs out, as PyTorch 1.13 (indices from 1)', function()
    local x = torch.tensor({ { 1, nan, 3, 2 }, { nan, nan, 5, 4 }, { nan, nan, nan, nan } })
    -- PyTorch: values [2, 4, nan], indices [3, 3, 2] (0-based; the all-NaN row's index is
    -- wherever its partial sort left a NaN: dplua gives the first NaN's)
    local v, i = torch.nanmedian(x, 2)
    same({ 2, 4, nan }, v:tolist(), 'values')
    same({ 4, 4 }, { i:tolist()[1], i:tolist()[2] }, 'indices')
    assert.are.equal(3, torch.nanmedian(x):item())
    assert.is_true(is_nan(torch.nanmedian(torch.tensor({ nan, nan })):item()))
    assert.are.same({ 3, 1 }, torch.nanmedian(x, 2, true):size():totable())
    v, i = torch.nanmedian(torch.tensor({ 1, nan, 2, 2 }), 1)
    assert.are.equal(2, v:item()); assert.are.equal(3, i:item())
    v, i = torch.nanmedian(torch.tensor({ 3, 1, 2, 5 }), 1)   -- int64: PyTorch 2 at 2
    assert.are.equal(2, v:item()); assert.are.equal(3, i:item())
  end)
  it('sends the gradient to the element picked', function()
    local y = torch.tensor({ { 1, nan, 3, 2 } }, { requires_grad = true })
    torch.nanmedian(y, 2):sum():backward()
    assert.are.same({ { 0, 0, 0, 1 } }, y.grad:tolist())
  end)
end)
