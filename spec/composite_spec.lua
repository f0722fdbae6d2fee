-- isnan/isinf/isfinite, any/all, logsumexp, var/std, norm/dist: values from PyTorch 1.13
-- for the same inputs, and float64 gradchecks (they are compositions of differentiable ops).
local torch = require 'torch'

local function close(got, want, tol)
  if type(want) == 'number' then got, want = { got }, { want } end
  assert.are.equal(#want, #got)
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) <= (tol or 1e-4) * math.max(1, math.abs(want[i])),
      ('element %d: %s, PyTorch %s'):format(i, got[i], want[i]))
  end
end

describe('predicates', function()
  it('isnan, isinf and isfinite as PyTorch, integers never inf or nan', function()
    local t = torch.tensor({ 1.0, -2.0, 0 / 0, math.huge, -math.huge })
    assert.are.same({ false, false, true, false, false }, t:isnan():tolist())
    assert.are.same({ false, false, false, true, true }, torch.isinf(t):tolist())
    assert.are.same({ true, true, false, false, false }, t:isfinite():tolist())
    assert.are.same({ false, false }, torch.tensor({ 1, 2 }):isinf():tolist())
    assert.are.same({ true, true }, torch.tensor({ 1, 2 }):isfinite():tolist())
  end)

  it('any and all over everything and along a dim', function()
    local t = torch.tensor({ { 0, 1 }, { 0, 0 } })
    assert.is_true(t:any():item())
    assert.is_false(t:all():item())
    assert.are.same({ true, false }, t:any(2):tolist())
    assert.are.same({ { false, true } }, torch.tensor({ { 1, 1 }, { 0, 1 } }):all(1, true):tolist())
  end)
end)

describe('reductions written with ops', function()
  local x = torch.tensor({ { 1.0, 2, 3 }, { 4, 5, 6 } })

  it('logsumexp matches PyTorch, also with huge and infinite values', function()
    close(x:logsumexp(2):tolist(), { 3.4076, 6.4076 })
    local t = torch.tensor({ { 1000., 1000. }, { -math.huge, -math.huge } }):logsumexp(2):tolist()
    close({ t[1] }, { 1000.6932 })
    assert.are.equal(-math.huge, t[2])
    assert.has_error(function() x:logsumexp() end)
  end)

  it('var and std: unbiased by default, correction and keepdim', function()
    close(x:var():item(), 3.5)
    close(x:var(1):tolist(), { 4.5, 4.5, 4.5 })
    close(x:std(2, { unbiased = false }):tolist(), { 0.8165, 0.8165 })
    close(x:var(2, { correction = 0, keepdim = true }):view(-1):tolist(), { 2 / 3, 2 / 3 })
  end)

  it('norm and dist for p = 2, 1, inf and 3', function()
    close(x:norm():item(), 9.5394)
    close(x:norm(1, 2):tolist(), { 6, 15 })
    close(x:norm(math.huge):item(), 6)
    close(torch.dist(x, x * 2, 3):item(), 7.6117)
  end)

  it('differentiate as their compositions', function()
    local a = torch.randn(3, 4, { dtype = 'float64', requires_grad = true })
    for _, f in ipairs({
      function(t) return t:logsumexp(2) end, function(t) return t:var(1) end,
      function(t) return t:std() end, function(t) return t:norm() end, function(t) return t:norm(3, 2) end,
    }) do
      assert.is_true(torch.autograd.gradcheck(f, { a }))
    end
  end)
end)
