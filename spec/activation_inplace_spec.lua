-- activation_inplace: PyTorch's inplace=True of the activation layers and functional forms
-- (and F.relu_, F.elu_ ...): the input itself is overwritten and returned, the layer prints
-- inplace=True, a gradient flows back through a non-leaf that was overwritten, and a leaf that
-- requires grad is refused; F.hardtanh with min_val > max_val computes as PyTorch's functional
-- form does (every element max_val, zero gradient) while nn.Hardtanh refuses it.  Against
-- PyTorch 1.13 (spec/fixtures/make_activation_inplace.py).
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local fixture = dofile('spec/fixtures/activation_inplace.lua')

local function close(got, want, what)
  assert.are.equal(#want, #got, what)
  for k = 1, #want do
    assert(math.abs(got[k] - want[k]) <= 1e-12 * math.max(1, math.abs(want[k])),
      ('%s: element %d is %s, PyTorch gives %s'):format(what, k, tostring(got[k]), tostring(want[k])))
  end
end

local function error_matches(fn, pattern)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  assert(tostring(err):find(pattern), ('error %q does not match %q'):format(tostring(err), pattern))
end

describe('activations with inplace', function()
  for _, c in ipairs(fixture.cases) do
    it(c.expr, function()
      local fn = assert(load(c.expr, c.expr, 't', { nn = nn, F = F }))()
      if c.layer then assert.are.equal(c.repr, tostring(fn)) end
      local x = torch.tensor(fixture.x, { dtype = 'float64' })
      local y = fn(x)
      assert.are.equal(c.same, y == x, 'the result is the input itself')
      close(x:totable(), c.x, 'the input after the call')
      close(y:totable(), c.y, 'the result')
      local a = torch.tensor(fixture.x, { dtype = 'float64', requires_grad = true })
      local out = fn(a * 1)
      out:sum():backward()
      close(a.grad:totable(), c.grad, 'the gradient')
      if c.same then
        -- PyTorch: a leaf Variable that requires grad is being used in an in-place operation
        error_matches(function() fn(torch.tensor(fixture.x, { requires_grad = true })) end,
          'a leaf tensor that requires grad is being used in an in%-place operation')
        -- under no_grad a leaf may be overwritten, as in PyTorch
        local leaf = torch.tensor(fixture.x, { dtype = 'float64', requires_grad = true })
        torch.no_grad(function() fn(leaf) end)
        close(leaf:detach():totable(), c.x, 'a leaf under no_grad')
      end
    end)
  end

  it('keeps the dtype of the input, or refuses', function()
    local h = torch.tensor({ -1.0, 0.5, 8.0 }, { dtype = 'float16' })
    assert.are.equal(h, F.relu6(h, true))
    assert.are.same({ 0, 0.5, 6 }, h:to('float64'):totable())
    local i = torch.tensor({ -3, 0, 3 })
    assert.are.equal(i, F.hardtanh(i, -1, 1, true))
    assert.are.same({ -1, 0, 1 }, i:totable())
    error_matches(function() F.elu(torch.tensor({ 1, 2 }), { inplace = true }) end, "elu: result type float32 can't be cast to the desired output type int64")
  end)

  it('F.hardtanh of integers with min_val > max_val gives max_val, as PyTorch', function()
    assert.are.same(fixture.hardtanh_int, F.hardtanh(torch.tensor({ -3, 0, 3 }), 1, -1):totable())
  end)

  it('refuses bad inplace values and layers without inplace', function()
    error_matches(function() nn.ReLU6('yes') end, 'nn.ReLU6: inplace must be a boolean, got yes')
    error_matches(function() F.relu6(torch.randn(2), 'yes') end, 'relu6: inplace must be a boolean, got yes')
    error_matches(function() F.elu(torch.randn(2), { inplce = true }) end, 'elu: unknown option inplce')
    error_matches(function() F.relu(torch.randn(2), { inplce = true }) end, 'relu: unknown option inplce')
    error_matches(function() nn.GELU { inplace = true } end, 'nn.GELU: unknown option inplace')
    error_matches(function() nn.Softmax(1, true) end, 'nn.Softmax: expected at most 1 arguments, got 2')
    error_matches(function() F.elu_(torch.randn(2), 1, 2) end, 'elu_: expected at most 1 options')
  end)

  it('nn.Hardtanh refuses max_val <= min_val when made, as PyTorch asserts', function()
    error_matches(function() nn.Hardtanh(1, -1) end, 'nn.Hardtanh: max_val %(%-1.0%) must be greater than min_val %(1.0%)')
    error_matches(function() nn.Hardtanh(2, 2) end, 'nn.Hardtanh: max_val %(2.0%) must be greater than min_val %(2.0%)')
  end)
end)
