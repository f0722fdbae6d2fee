-- In-place writes whose result would depend on the order of the writes are refused, as
-- PyTorch refuses them (and as a GPU, which writes in parallel, needs): a written-to
-- tensor whose elements share memory (an expanded view), and an input that partly
-- overlaps the output.  The same elements in the same layout (a:add_(a)) are fine.
local torch = require 'torch'
local expect_error = dofile('spec/helpers/check.lua').expect_error

describe('in-place writes and overlapping memory', function()
  it('refuses a write to an expanded view', function()
    local b = torch.ones(1)
    expect_error(function() b:expand(3):add_(1) end, 'more than one element of the written-to tensor')
    expect_error(function() b:expand(3):fill_(2) end, 'more than one element of the written-to tensor')
    assert.are.same({ 1 }, b:tolist())
  end)

  it('refuses a copy between partly overlapping ranges of one tensor', function()
    local x = torch.arange(8):float()
    expect_error(function() x:narrow(1, 2, 4):copy_(x:narrow(1, 1, 4)) end, 'refer to a single memory location')
    expect_error(function() x:narrow(1, 1, 4):add_(x:narrow(1, 3, 4)) end, 'refer to a single memory location')
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7 }, x:tolist())
  end)

  it('refuses a:add_(a:t()), whose elements meet in another order', function()
    local a = torch.ones(3, 3)
    expect_error(function() a:add_(a:t()) end, 'refer to a single memory location')
  end)

  it('allows the same elements in the same layout and disjoint ranges', function()
    local x = torch.arange(8):float()
    x:add_(x)
    x:narrow(1, 1, 4):copy_(x:narrow(1, 5, 4))
    assert.are.same({ 8, 10, 12, 14, 8, 10, 12, 14 }, x:tolist())
    local a = torch.ones(2, 2)
    a:t():mul_(a:t())
    assert.are.same({ { 1, 1 }, { 1, 1 } }, a:tolist())
  end)

  it('lets backward through tensors it did not save be written in place, as PyTorch', function()
    -- fmod(x, d) with d needing no gradient saves nothing: a later d:add_(1) is fine
    local x = torch.randn(3, { dtype = 'float64', requires_grad = true })
    local d = torch.ones(3, { dtype = 'float64' }) * 2
    local z = torch.fmod(x, d)
    d:add_(1)
    z:sum():backward()
    assert.are.same({ 1, 1, 1 }, x.grad:tolist())
    -- k * w saves k for w's gradient: writing k then is an error, as in PyTorch
    local w, k = torch.randn(3, { requires_grad = true }), torch.randn(3)
    local m = k * w
    k:add_(1)
    expect_error(function() m:sum():backward() end, 'modified by an inplace operation')
  end)
end)


describe('in-place forms of the op table unary ops', function()
  it('every generated op has a name_ method that writes the out-of-place result into self', function()
    local n = 0
    for _, row in ipairs(torch._C.ops()) do
      if row.family == 'unary' and row.bind == 'auto' then
        local x = torch.tensor({ 0.25, 0.5, 0.75 }, { dtype = torch.float64 })
        local want = x[row.name](x):tolist()
        local same = x:view(3)
        assert.are.equal(x, x[row.name .. '_'](x), row.name .. '_ returns self')
        local got = same:tolist()
        for i = 1, 3 do   -- NaN where the op is undefined (acosh below 1) must stay NaN
          assert(got[i] == want[i] or (got[i] ~= got[i] and want[i] ~= want[i]), row.name .. '_')
        end
        n = n + 1
      end
    end
    assert.is_true(n >= 35, n .. " generated ops")
  end)

  it('writes through views, as PyTorch', function()
    local x = torch.tensor({ { -1.0, 2 }, { -3, 4 } })
    x:select(2, 1):relu_()
    assert.are.same({ { 0, 2 }, { 0, 4 } }, x:tolist())
    x:t():neg_()
    assert.are.same({ { 0, -2 }, { 0, -4 } }, x:tolist())
    x:pow_(2)
    assert.are.same({ { 0, 4 }, { 0, 16 } }, x:tolist())
  end)

  it('refuses a float result into an integer tensor, as PyTorch', function()
    local i = torch.tensor({ 1, 4 })
    expect_error(function() i:sqrt_() end, "result type float32 can't be cast to the desired output type int64")
    assert.are.same({ 1, 4 }, i:tolist())
    assert.are.same({ -1, -4 }, i:neg_():tolist())
    assert.are.same({ 1, 4 }, i:abs_():tolist())
    expect_error(function() torch.tensor({ true }):neg_() end, 'bool')
  end)
end)

-- PyTorch 1.13 gives the same values and raises in the same places (checked by hand with it).
describe('in-place ops that autograd sees', function()
  it('a non-leaf written in place takes the op into its history', function()
    local a = torch.tensor({ -1.0, 2, -3, 4 }, { requires_grad = true })
    local x = a * 1
    x:mul_(3):add_(1):relu_()
    assert.are.same({ 0, 7, 0, 13 }, x:tolist())
    assert.are.equal('ReluBackward0', x.grad_fn.name)
    ;(x * x):sum():backward()
    assert.are.same({ 0, 42, 0, 78 }, a.grad:tolist())   -- 2 * relu(3a + 1) * 3
  end)

  it('a tensor that needs no grad takes an operand that does into its history', function()
    local w = torch.tensor({ 1.0, 2 }, { requires_grad = true })
    local acc = torch.zeros(2)
    acc:add_(w):mul_(w)
    assert.is_true(acc.requires_grad)
    acc:sum():backward()
    assert.are.same({ 2, 4 }, w.grad:tolist())
  end)

  it('fill_ and copy_ cut the old value off and pass the gradient to the source', function()
    local a = torch.tensor({ 1.0, 2 }, { requires_grad = true })
    local x = a * 1
    x:fill_(2)
    ;(x * a):sum():backward()
    assert.are.same({ 2, 2 }, a.grad:tolist())
    a.grad = nil
    local b = torch.tensor({ 5.0 }, { dtype = torch.float64, requires_grad = true })
    local y = a * 1
    y:copy_(b)
    assert.are.equal('CopyBackwards', y.grad_fn.name)
    ;(y * 3):sum():backward()
    assert.are.same({ 0, 0 }, a.grad:tolist())
    assert.are.same({ 6 }, b.grad:tolist())
  end)

  it('a value an earlier node saved and then overwrote stops backward, as PyTorch', function()
    local b = torch.tensor({ 0.5, 1.0 }, { requires_grad = true })
    local y = b * 1
    y:exp_()          -- ExpBackward0 saves its result, which is y
    y:mul_(2)
    expect_error(function() y:sum():backward() end, 'modified by an inplace operation')
    local e = torch.tensor({ 1.0, 2 }, { requires_grad = true }) * 1
    local s = e:sin()  -- SinBackward0 saves e
    e:mul_(2)
    expect_error(function() (s:sum() + e:sum()):backward() end, 'modified by an inplace operation')
  end)

  it('refuses leaves and tensors with recorded views', function()
    local leaf = torch.tensor({ 1.0, -2 }, { requires_grad = true })
    expect_error(function() leaf:relu_() end, 'a leaf tensor that requires grad')
    local d = leaf * 1
    local v = d:narrow(1, 1, 1)
    expect_error(function() v:relu_() end, 'shares its memory with a view')
    expect_error(function() d:relu_() end, 'shares its memory with a view')
    torch.no_grad(function() leaf:mul_(2) end)
    assert.are.same({ 2, -4 }, leaf:tolist())
  end)
end)

describe('nn.ReLU(true) and F.relu(x, true)', function()
  local nn = require 'nn'
  it('overwrite their input, print as PyTorch, and differentiate', function()
    assert.are.equal('ReLU(inplace=True)', tostring(nn.ReLU(true)))
    assert.are.equal('ReLU()', tostring(nn.ReLU()))
    local a = torch.tensor({ -1.0, 2, -3 }, { requires_grad = true })
    local x = a * 2
    local y = nn.ReLU(true)(x)
    assert.is_true(rawequal(x, y))
    assert.are.same({ 0, 4, 0 }, x:tolist())
    y:sum():backward()
    assert.are.same({ 0, 2, 0 }, a.grad:tolist())
    local z = torch.tensor({ -1.0, 1 })
    assert.is_true(rawequal(z, nn.functional.relu(z, true)))
    assert.are.same({ 0, 1 }, z:tolist())
    expect_error(function() nn.ReLU(3) end, 'inplace must be a boolean')
  end)
end)
