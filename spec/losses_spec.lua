-- nn's losses against PyTorch 1.13's values and input gradients for the same inputs
-- (spec/fixtures/make_train.py), every reduction, in float64; float64 gradchecks; the
-- module forms; and bad inputs.
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local fx = dofile('spec/fixtures/train.lua')
local I = fx.loss_inputs
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function flat(v, out)
  out = out or {}
  if type(v) == 'table' then for _, x in ipairs(v) do flat(x, out) end else out[#out + 1] = v end
  return out
end

local function close(got, want, what, tol)
  tol = tol or 1e-10
  got, want = flat(got), flat(want)
  assert(#got == #want, ('%s: %d values, expected %d'):format(what, #got, #want))
  for i = 1, #want do
    local g, w = got[i], want[i]
    local ok = (g ~= g and w ~= w) or g == w or math.abs(g - w) <= tol * (1 + math.abs(w))
    assert(ok, ('%s, element %d: %.12g, expected %.12g'):format(what, i, g, w))
  end
end

local function f64(v) return torch.tensor(v, { dtype = 'float64' }) end
local function cls(v) return torch.tensor(v, { dtype = 'int64' }) end

-- fn(input, target, reduction) against the fixture: the value and the gradient of the
-- first input (from value:sum():backward())
local function against(name, fn, input, target, reductions)
  local c = fx.losses[name]
  assert(c, 'no fixture ' .. name)
  for _, r in ipairs(reductions or { 'mean', 'sum', 'none' }) do
    local x = input:clone():requires_grad_(true)
    local v = fn(x, target, r)
    close(v:detach():tolist(), c[r].value, ('%s %s value'):format(name, r))
    v:sum():backward()
    close(x.grad:tolist(), c[r].grad, ('%s %s grad'):format(name, r))
  end
end

describe('losses against PyTorch 1.13', function()
  local X, Y = f64(I.X), f64(I.Y)
  it('l1, smooth_l1 (beta 1, 0.4, 0), huber (delta 1, 0.3)', function()
    against('l1', F.l1_loss, X, Y)
    against('smooth_l1', F.smooth_l1_loss, X, Y)
    against('smooth_l1_beta', function(x, y, r) return F.smooth_l1_loss(x, y, { reduction = r, beta = 0.4 }) end, X, Y)
    against('smooth_l1_beta0', function(x, y, r) return F.smooth_l1_loss(x, y, { reduction = r, beta = 0 }) end, X, Y)
    against('huber', F.huber_loss, X, Y)
    against('huber_delta', function(x, y, r) return F.huber_loss(x, y, { reduction = r, delta = 0.3 }) end, X, Y)
  end)

  it('binary_cross_entropy (with weight; logs clamped at -100)', function()
    local P, B = f64(I.PROB), f64(I.BIN)
    against('bce', F.binary_cross_entropy, P, B)
    against('bce_weight', function(x, y, r)
      return F.binary_cross_entropy(x, y, { reduction = r, weight = f64 { 0.5, 1.0, 2.0, 0.1 } })
    end, P, B)
    -- at 0 and 1 the value is PyTorch's (100 per clamped log); the gradient there is not
    -- (PyTorch divides by max(x (1 - x), 1e-12), the composition's clamp gives 0)
    local c = fx.losses.bce_clamp
    for _, r in ipairs { 'mean', 'sum', 'none' } do
      local v = F.binary_cross_entropy(f64 { 0.0, 1.0, 0.0, 1.0, 0.5 }, f64 { 1.0, 0.0, 0.0, 1.0, 0.5 }, r)
      close(v:tolist(), c[r].value, 'bce_clamp ' .. r)
    end
  end)

  it('binary_cross_entropy_with_logits (stable for |x| = 800; weight and pos_weight)', function()
    against('bce_logits', F.binary_cross_entropy_with_logits, X, f64(I.BIN))
    against('bce_logits_big', F.binary_cross_entropy_with_logits, f64 { 100, -100, 800, -800 }, f64 { 0, 1, 1, 0 })
    against('bce_logits_pos', function(x, y, r)
      return F.binary_cross_entropy_with_logits(x, y, { reduction = r, weight = f64 { { 1.0 }, { 0.5 }, { 2.0 } },
        pos_weight = f64 { 1.0, 3.0, 0.5, 2.0 } })
    end, X, f64(I.BIN))
  end)

  it('kl_div (zeros in the target; log_target; batchmean)', function()
    local logp = X:log_softmax(2)
    local rs = { 'mean', 'sum', 'none', 'batchmean' }
    against('kl_div', F.kl_div, logp, f64(I.PROB), rs)
    against('kl_div_zero', F.kl_div, logp, f64(I.BIN), rs)
    against('kl_div_log', function(x, y, r) return F.kl_div(x, y, { reduction = r, log_target = true }) end,
      logp, f64(I.Y) - 1, rs)
  end)

  local L, T, W = f64(I.LOGITS), cls(I.CLS), f64(I.CW)
  it('cross_entropy with weight, ignore_index and label_smoothing', function()
    against('ce_weight', function(x, y, r) return F.cross_entropy(x, y, { weight = W, reduction = r }) end, L, T)
    -- PyTorch's ignore_index=2 (0-based) is class 3 here
    against('ce_ignore', function(x, y, r) return F.cross_entropy(x, y, { ignore_index = 3, reduction = r }) end, L, T)
    against('ce_weight_ignore', function(x, y, r)
      return F.cross_entropy(x, y, { weight = W, ignore_index = 1, reduction = r })
    end, L, T)
    against('ce_smooth', function(x, y, r) return F.cross_entropy(x, y, { label_smoothing = 0.2, reduction = r }) end, L, T)
    against('ce_smooth_all', function(x, y, r)
      return F.cross_entropy(x, y, { weight = W, ignore_index = 5, label_smoothing = 0.1, reduction = r })
    end, L, T)
    against('ce_1d', function(x, y, r)
      return F.cross_entropy(x, y, { weight = W, label_smoothing = 0.1, reduction = r })
    end, f64(I.LOGITS[2]), torch.tensor(4))
  end)

  it('cross_entropy with class probabilities', function()
    against('ce_probs', F.cross_entropy, L, f64(I.SOFT))
    against('ce_probs_all', function(x, y, r)
      return F.cross_entropy(x, y, { weight = W, label_smoothing = 0.3, reduction = r })
    end, L, f64(I.SOFT))
  end)

  it('nll_loss with weight and ignore_index (all ignored: the mean is nan, as PyTorch)', function()
    local lp = L:log_softmax(2)
    against('nll_weight', function(x, y, r) return F.nll_loss(x, y, { weight = W, reduction = r }) end, lp, T)
    against('nll_weight_ignore', function(x, y, r)
      return F.nll_loss(x, y, { weight = W, ignore_index = 3, reduction = r })
    end, lp, T)
    local c = fx.losses.nll_all_ignored
    for _, r in ipairs { 'mean', 'sum', 'none' } do
      close(F.nll_loss(lp:narrow(1, 1, 2), cls { 3, 3 }, { ignore_index = 3, reduction = r }):tolist(), c[r].value,
        'nll_all_ignored ' .. r)
    end
  end)

  it('the module forms take the same options', function()
    local c = fx.losses
    close(nn.CrossEntropyLoss({ weight = W, ignore_index = 1 })(L, T):item(), c.ce_weight_ignore.mean.value, 'CrossEntropyLoss')
    close(nn.NLLLoss({ weight = W, reduction = 'sum' })(L:log_softmax(2), T):item(), c.nll_weight.sum.value, 'NLLLoss')
    close(nn.L1Loss({ reduction = 'sum' })(X, Y):item(), c.l1.sum.value, 'L1Loss')
    close(nn.SmoothL1Loss({ beta = 0.4 })(X, Y):item(), c.smooth_l1_beta.mean.value, 'SmoothL1Loss')
    close(nn.HuberLoss({ delta = 0.3 })(X, Y):item(), c.huber_delta.mean.value, 'HuberLoss')
    close(nn.BCELoss()(f64(I.PROB), f64(I.BIN)):item(), c.bce.mean.value, 'BCELoss')
    close(nn.BCEWithLogitsLoss({ pos_weight = f64 { 1.0, 3.0, 0.5, 2.0 }, weight = f64 { { 1.0 }, { 0.5 }, { 2.0 } } })(X, f64(I.BIN)):item(),
      c.bce_logits_pos.mean.value, 'BCEWithLogitsLoss')
    close(nn.KLDivLoss({ reduction = 'batchmean' })(X:log_softmax(2), f64(I.PROB)):item(), c.kl_div.batchmean.value, 'KLDivLoss')
    local m = nn.BCEWithLogitsLoss({ pos_weight = torch.ones(4) })
    local found = false
    for name in m:named_buffers() do found = found or name == 'pos_weight' end
    assert.is_true(found, 'pos_weight is a buffer')
    assert.are.equal('KLDivLoss()', tostring(nn.KLDivLoss({ reduction = 'batchmean' })))   -- as PyTorch prints it
  end)

  it('the fused path and the composed one agree (float32, N-d inputs)', function()
    torch.manual_seed(3)
    local x = torch.randn(3, 4, 2, 5)
    local t = torch.randint(1, 5, { 3, 2, 5 })
    local got = F.cross_entropy(x, t, { weight = torch.ones(4), reduction = 'none' })
    local flat_rows = x:movedim(2, 4):reshape(-1, 4)
    local want = F.cross_entropy(flat_rows, t:reshape(-1), { reduction = 'none' }):reshape({ 3, 2, 5 })
    close(got:tolist(), want:tolist(), 'N-d cross_entropy', 1e-5)
  end)
end)

describe('loss gradchecks (float64)', function()
  local gc = torch.autograd.gradcheck
  local function x64(v) return f64(v):requires_grad_(true) end
  it('pass for every loss and option', function()
    local X, Y = x64(I.X), f64(I.Y)
    assert.is_true(gc(function(x) return F.smooth_l1_loss(x, Y, { beta = 0.4 }) end, { X }))
    assert.is_true(gc(function(x) return F.huber_loss(x, Y, { delta = 0.3, reduction = 'none' }) end, { X }))
    assert.is_true(gc(function(x) return F.l1_loss(x, Y) end, { X }))
    assert.is_true(gc(function(x) return F.binary_cross_entropy(x, f64(I.BIN), { weight = f64 { 0.5, 1, 2, 0.1 } }) end, { x64(I.PROB) }))
    assert.is_true(gc(function(x, pw)
      return F.binary_cross_entropy_with_logits(x, f64(I.BIN), { pos_weight = pw, reduction = 'none' })
    end, { X, x64 { 1.0, 3.0, 0.5, 2.0 } }))
    assert.is_true(gc(function(x) return F.kl_div(x, f64(I.BIN), { reduction = 'batchmean' }) end, { X }))
    assert.is_true(gc(function(x, y) return F.kl_div(x, y, { log_target = true }) end, { X, x64(I.Y) }))
    local L, T, W = x64(I.LOGITS), cls(I.CLS), f64(I.CW)
    assert.is_true(gc(function(x) return F.cross_entropy(x, T, { weight = W, ignore_index = 1, label_smoothing = 0.2 }) end, { L }))
    assert.is_true(gc(function(x, p) return F.cross_entropy(x, p, { weight = W, label_smoothing = 0.1 }) end,
      { L, x64(I.SOFT) }))
    assert.is_true(gc(function(x) return F.nll_loss(x, T, { weight = W, reduction = 'none' }) end, { L }))
  end)
end)

describe('loss errors', function()
  local x = torch.randn(4, 5)
  it('name the bad target, with the numbering', function()
    expect_error(function() F.cross_entropy(x, cls { 1, 0, 2, 3 }, { weight = torch.ones(5) }):item() end,
      'target 0 at position 2 is out of bounds', 'between 1 and 5', 'dplua counts classes from 1')
    -- (on a GPU the targets are checked there: reported at the next synchronisation)
    expect_error(function() F.cross_entropy(x, cls { 1, 2, 6, 3 }):item() end, 'target 6 at position 3', 'dplua counts classes from 1')
    expect_error(function() F.nll_loss(x, cls { 1, 2, 3, 0 }, { ignore_index = -1 }):item() end, 'target 0 at position 4')
    -- a target equal to ignore_index is no error, even out of range
    assert.is_true(torch.is_tensor(F.cross_entropy(x, cls { 1, 0, 2, 3 }, { ignore_index = 0 })))
    assert.is_true(torch.is_tensor(F.cross_entropy(x, cls { 1, -100, 2, 3 })))
  end)
  it('name bad options and shapes', function()
    expect_error(function() F.cross_entropy(x, cls { 1, 2, 3, 4 }, { weight = torch.ones(4) }) end,
      'weight tensor should be defined either for all 5 classes')
    expect_error(function() F.cross_entropy(x, cls { 1, 2, 3 }) end, 'got input [4, 5] and target [3]')
    expect_error(function() F.cross_entropy(x, cls { 1, 2, 3, 4 }, { label_smoothing = 1.5 }) end,
      'label_smoothing must be between 0.0 and 1.0')
    expect_error(function() F.cross_entropy(x, cls { 1, 2, 3, 4 }, { smoothing = 0.1 }) end, 'unknown option smoothing')
    expect_error(function() F.l1_loss(x, torch.randn(4)) end, 'the input has shape [4, 5] but the target has shape [4]')
    expect_error(function() F.binary_cross_entropy(torch.tensor { 0.5, 1.5 }, torch.tensor { 0., 1. }) end,
      'all elements of input should be between 0 and 1')
    expect_error(function() F.binary_cross_entropy_with_logits(x, torch.randn(5)) end, 'Target size ([5]) must be the same as input size ([4, 5])')
    expect_error(function() F.kl_div(x, x, 'batchsum') end, "reduction must be one of 'batchmean', 'mean', 'none', 'sum'")
    expect_error(function() F.l1_loss(x, x, 'avg') end, "reduction must be one of 'mean', 'none', 'sum'")
    expect_error(function() F.smooth_l1_loss(x, x, { beta = -1 }) end, 'beta must be a non-negative number')
    expect_error(function() nn.HuberLoss({ delta = 0 })(x, x) end, 'delta must be a positive number')
  end)
end)
