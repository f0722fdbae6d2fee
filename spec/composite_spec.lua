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

describe('shapes and products written with ops', function()
  local t = torch.arange(6):view(2, 3)

  it('flip, roll, repeat, tile and movedim as PyTorch', function()
    -- t.flip(1), t.flip((0, 1)), t.roll(1, 1), t.roll(1), t.repeat(2, 1, 2), t.tile(2)
    assert.are.same({ { 2, 1, 0 }, { 5, 4, 3 } }, t:flip(2):tolist())
    assert.are.same({ { 5, 4, 3 }, { 2, 1, 0 } }, torch.flip(t, { 1, 2 }):tolist())
    assert.are.same({ { 2, 0, 1 }, { 5, 3, 4 } }, t:roll(1, 2):tolist())
    assert.are.same({ { 5, 0, 1 }, { 2, 3, 4 } }, t:roll(1):tolist())
    assert.are.same({ { 1, 2, 0 }, { 4, 5, 3 } }, t:roll(-1, -1):tolist())
    assert.are.same({ 2, 2, 6 }, t['repeat'](t, 2, 1, 2):size():totable())
    assert.are.same({ { 0, 1, 2, 0, 1, 2 }, { 3, 4, 5, 3, 4, 5 } }, t:tile(2):tolist())
    assert.are.same(t:tile(2):tolist(), t:repeatTensor(1, 2):tolist())
    assert.are.same({ 3, 2 }, t:movedim(1, 2):size():totable())
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, t:movedim(1, 2):tolist())
  end)

  it('tril, triu and unbind as PyTorch', function()
    assert.are.same({ { 0, 0, 0 }, { 3, 4, 0 } }, t:tril():tolist())
    assert.are.same({ { 0, 1, 2 }, { 0, 0, 5 } }, t:triu(1):tolist())
    assert.are.same({ { 0, 1, 0 }, { 3, 4, 5 } }, t:tril(1):tolist())
    local cols = t:unbind(2)
    assert.are.equal(3, #cols)
    assert.are.same({ 2, 5 }, cols[3]:tolist())
  end)

  it('outer, dot, mv, lerp, one_hot, hstack and vstack', function()
    assert.are.same({ { 3, 4, 5 }, { 6, 8, 10 } }, torch.outer(torch.tensor({ 1, 2 }), torch.tensor({ 3, 4, 5 })):tolist())
    assert.are.equal(11, torch.dot(torch.tensor({ 1., 2 }), torch.tensor({ 3., 4 })):item())
    assert.are.same({ 6, 6 }, torch.mv(torch.ones(2, 3), torch.tensor({ 1., 2, 3 })):tolist())
    assert.are.same({ 0.25, 0.25 }, torch.lerp(torch.zeros(2), torch.ones(2), 0.25):tolist())
    assert.are.same({ { 1, 0, 0 }, { 0, 0, 1 }, { 0, 1, 0 } }, torch.one_hot(torch.tensor({ 1, 3, 2 })):tolist())
    assert.are.same({ { 0, 1, 0, 0 } }, torch.one_hot(torch.tensor({ 2 }), 4):tolist())
    -- (a GPU checks the classes there and reports at the next synchronisation: tolist)
    assert.has_error(function() torch.one_hot(torch.tensor({ 0, 1 })):tolist() end, nil)
    assert.are.same({ 1, 1, 0, 0, 0 }, torch.hstack({ torch.ones(2), torch.zeros(3) }):tolist())
    assert.are.same({ { 1, 1 }, { 0, 0 } }, torch.vstack({ torch.ones(2), torch.zeros(2) }):tolist())
  end)

  it('differentiate as their compositions', function()
    local a = torch.randn(3, 4, { dtype = 'float64', requires_grad = true })
    for _, f in ipairs({
      function(x) return x:flip(2) end, function(x) return x:roll(2, 2) end,
      function(x) return x['repeat'](x, 2, 1) end, function(x) return x:tril() end,
      function(x) return x:movedim(1, 2) end, function(x) return torch.lerp(x, x * 3, 0.5) end,
    }) do
      assert.is_true(torch.autograd.gradcheck(f, { a }))
    end
  end)
end)
