-- Advanced indexing (t[idx], t[mask], t[{i1, i2}], Torch7's table slicing), index_put,
-- gather, scatter and the ops built on them: values and gradients from PyTorch 1.13 for the
-- same inputs (spec/fixtures/make_indexing.py, indices shifted by one), float64 gradchecks,
-- in-place rules and errors.
local torch = require 'torch'
local fixtures = dofile('spec/fixtures/indexing.lua')

local function inputs()
  return torch.arange(12):view(3, 4):double() * 1.5 - 4, torch.arange(24):view(2, 3, 4):double()
end

local function flat(t) return t:numel() == 0 and {} or t:reshape(-1):tolist() end

local function same_values(got, want, what)
  assert.are.same(want.shape, got:size():totable(), what .. ': shape')
  assert.are.equal(want.dtype, got.dtype, what .. ': dtype')
  local g = flat(got)
  assert.are.equal(#want.values, #g, what .. ': count')
  for i, v in ipairs(want.values) do
    assert(math.abs(g[i] - v) <= 1e-9 * math.max(1, math.abs(v)),
      ('%s: element %d is %s, PyTorch %s'):format(what, i, tostring(g[i]), tostring(v)))
  end
end

local function eval(code, env)
  local f = assert(load('return ' .. code, code, 't', setmetatable(env, { __index = function(_, k) return k == 'torch' and torch or _G[k] end })))
  return f()
end

describe('reading and writing with index tensors, as PyTorch', function()
  for _, c in ipairs(fixtures.cases) do
    it(c[1], function()
      local A, B = inputs()
      same_values(eval(c[1], { A = A, B = B }), c, c[1])
    end)
  end

  it('a table of numbers is an element, as t[i][j]', function()
    local A = inputs()
    assert.are.equal(A[2][3], A[{ 2, 3 }])
    assert.are.equal(A[{ -1, -1 }], 12.5)
  end)

  it('makemore: an embedding table indexed by a batch of contexts, and probs[{arange, ys}]', function()
    local C = torch.randn(27, 2, { dtype = 'float64' })
    local X = torch.tensor({ { 1, 1, 6 }, { 1, 6, 14 } })
    local emb = C[X]
    assert.are.same({ 2, 3, 2 }, emb:size():totable())
    assert.are.same(C[6]:tolist(), emb[2][2]:tolist())
    local probs = torch.rand(2, 27, { dtype = 'float64' })
    local picked = probs[{ torch.arange(1, 3), torch.tensor({ 5, 27 }) }]
    assert.are.same({ probs[{ 1, 5 }], probs[{ 2, 27 }] }, picked:tolist())
  end)
end)

describe('gradients', function()
  for _, c in ipairs(fixtures.grads) do
    it(c[1], function()
      local x = inputs():requires_grad_()
      local y = eval(c[1], {})(x)
      local w = torch.arange(1, y:numel() + 1):double():view(y:size())
      ;(y * w):sum():backward()
      same_values(x.grad, c, c[1])
    end)
  end

  it('gradcheck in float64: index, gather, scatter, index_put, masked_select, take', function()
    local x = torch.randn(3, 4, { dtype = 'float64' }):requires_grad_()
    local v = torch.randn(2, 4, { dtype = 'float64' }):requires_grad_()
    local s = torch.randn(3, 2, { dtype = 'float64' }):requires_grad_()
    local gc = torch.autograd.gradcheck
    assert.is_true(gc(function(a) return a[{ torch.tensor({ 3, 1, 3 }), torch.tensor({ { 2 }, { 4 } }) }] end, { x }))
    assert.is_true(gc(function(a) return a[{ {}, torch.tensor({ 2, 2, -1 }) }] end, { x }))
    assert.is_true(gc(function(a) return a:t()[{ torch.tensor({ 4, 1, 4 }), { 2, 3 } }] end, { x }))
    assert.is_true(gc(function(a) return a:narrow(2, 2, 2)[a:narrow(2, 2, 2):gt(0)] end, { x }))
    assert.is_true(gc(function(a) return a:gather(1, torch.tensor({ { 3, 1, 1, 2 }, { 1, 1, 3, 3 } })) end, { x }))
    assert.is_true(gc(function(a, b) return a:scatter(2, torch.tensor({ { 4, 1 }, { 2, 3 }, { 1, 4 } }), b) end, { x, s }))
    assert.is_true(gc(function(a, b) return a:scatter_add(2, torch.tensor({ { 4, 4 }, { 2, 3 }, { 1, 1 } }), b) end, { x, s }))
    assert.is_true(gc(function(a, b) return a:index_put({ torch.tensor({ 3, 1 }) }, b) end, { x, v }))
    assert.is_true(gc(function(a, b)
      return a:index_put({ torch.tensor({ 3, 3 }) }, b, { accumulate = true })
    end, { x, v }))
    assert.is_true(gc(function(a) return a:masked_select(torch.tensor({ true, false, true, true })) end, { x }))
    assert.is_true(gc(function(a) return a:t():take(torch.tensor({ { 1, 12 }, { 5, 5 } })) end, { x }))
    assert.is_true(gc(function(a, b) return a:index_add(1, torch.tensor({ 2, 2 }), b, { alpha = 3 }) end, { x, v }))
    local z = torch.tensor({ { 0, 2, 3 }, { 0, 0, 1 } }, { dtype = 'float64' }):requires_grad_()
    local zs = torch.tensor({ { 0, 5 }, { 2, 0 } }, { dtype = 'float64' }):requires_grad_()
    for _, inc in ipairs({ true, false }) do   -- prod with zeros in self and src: the product of the others
      assert.is_true(gc(function(a, b)
        return a:scatter_reduce(2, torch.tensor({ { 1, 2 }, { 3, 3 } }), b, 'prod', { include_self = inc })
      end, { z, zs }))
    end
    for _, r in ipairs({ 'amax', 'amin', 'mean', 'prod' }) do
      assert.is_true(gc(function(a, b)
        return a:scatter_reduce(2, torch.tensor({ { 4, 4 }, { 2, 3 }, { 1, 4 } }), b, r, { include_self = r ~= 'amin' })
      end, { x, s }))
    end
  end)
end)

describe('writing in place', function()
  it('t[idx] = v, t[mask] = 0 and t[{...}] = v, with broadcast values', function()
    local A = inputs()
    A[A:lt(0)] = 0
    assert.are.same({ 0, 0, 0, 0.5 }, A[1]:tolist())
    A[torch.tensor({ 1, 3 })] = torch.tensor({ 7, 8, 9, 10 }, { dtype = 'float64' })
    assert.are.same({ { 7, 8, 9, 10 }, { 2, 3.5, 5, 6.5 }, { 7, 8, 9, 10 } }, A:tolist())
    A[{ torch.tensor({ 2, 2 }), torch.tensor({ 1, -1 }) }] = -1
    assert.are.same({ -1, 3.5, 5, -1 }, A[2]:tolist())
    A[{ {}, 2 }] = 0
    A[{ { 2, 3 }, { 3, 4 } }] = torch.tensor({ 1, 2 }, { dtype = 'float64' })
    assert.are.same({ { 7, 0, 9, 10 }, { -1, 0, 1, 2 }, { 7, 0, 1, 2 } }, A:tolist())
    A[{ { 2, 3 }, torch.tensor({ 1, 4 }) }] = -3   -- a range, then an index: writes through the view
    assert.are.same({ { 7, 0, 9, 10 }, { -3, 0, 1, -3 }, { -3, 0, 1, -3 } }, A:tolist())
    A[{ 1, {}, }] = 5
    assert.are.same({ 5, 5, 5, 5 }, A[1]:tolist())
  end)

  it('index_put_ accumulates repeated indices; without accumulate one of them is written', function()
    local t = torch.zeros(4, { dtype = 'float64' })
    t:index_put_({ torch.tensor({ 2, 2, 4, 2 }) }, torch.tensor(1.5, { dtype = 'float64' }), { accumulate = true })
    assert.are.same({ 0, 4.5, 0, 1.5 }, t:tolist())
    local i = torch.zeros(3, { dtype = 'int64' })
    i:index_put_({ torch.tensor({ 1, 1, 1 }) }, torch.tensor({ 1, 2, 3 }), { accumulate = true })
    assert.are.same({ 6, 0, 0 }, i:tolist())
    t:index_put_({ torch.tensor({ 3, 3 }) }, torch.tensor({ 7, 7 }, { dtype = 'float64' }))
    assert.are.equal(7, t[3])
  end)

  it('scatter_, scatter_add_, index_add_, index_fill_, index_copy_, masked_scatter_ as PyTorch', function()
    local t = torch.zeros(2, 3)
    t:scatter_(2, torch.tensor({ { 3 }, { 1 } }), 4)
    assert.are.same({ { 0, 0, 4 }, { 4, 0, 0 } }, t:tolist())
    t:scatter_add_(1, torch.tensor({ { 2, 2, 2 } }), torch.ones(1, 3))
    assert.are.same({ { 0, 0, 4 }, { 5, 1, 1 } }, t:tolist())
    t:index_add_(2, torch.tensor({ 1, 1 }), torch.ones(2, 2), { alpha = 2 })
    assert.are.same({ { 4, 0, 4 }, { 9, 1, 1 } }, t:tolist())
    t:index_fill_(1, torch.tensor({ 1 }), -1)
    t:index_copy_(2, torch.tensor({ 2 }), torch.tensor({ { 8 }, { 9 } }):float())
    assert.are.same({ { -1, 8, -1 }, { 9, 9, 1 } }, t:tolist())
    t:masked_scatter_(t:lt(0), torch.tensor({ 10, 20, 30 }):float())
    assert.are.same({ { 10, 8, 20 }, { 9, 9, 1 } }, t:tolist())
  end)

  it('index tensors on the CPU index a tensor on any device; expanded tensors are not written', function()
    local A = inputs()
    local i = torch.tensor({ 3, 1 }, { device = 'cpu' })
    assert.are.same({ 8, -4 }, A[{ i, torch.tensor({ 1, 1 }, { device = 'cpu' }) }]:tolist())
    A[i] = 0
    assert.are.same({ 0, 0, 0, 0 }, A[1]:tolist())
    local e = torch.zeros(1, 3):expand(2, 3)
    assert.has_error(function() e[torch.tensor({ 1 })] = 1 end)
  end)

  it('bumps the version and is refused on a leaf that requires grad', function()
    local t = torch.zeros(3, { dtype = 'float64' })
    local v = t:_version()
    t[torch.tensor({ 2 })] = 1
    assert.is_true(t:_version() > v)
    local w = torch.zeros(3, { dtype = 'float64' }):requires_grad_()
    assert.has_error(function() w[torch.tensor({ 1 })] = 1 end)
    assert.has_error(function() w:scatter_(1, torch.tensor({ 1 }), 2) end)
    assert.has_error(function() w:index_put_({ torch.tensor({ 1 }) }, torch.tensor(1.0, { dtype = 'float64' })) end)
    torch.no_grad(function() w[torch.tensor({ 1 })] = 1 end)
    assert.are.equal(1, w[1]:item())   -- w requires grad: w[1] is a 0-dim tensor
  end)

  it('index_put: values computed from the tensor get their gradient, the overwritten places none', function()
    local x = torch.ones(3, { dtype = 'float64' }):requires_grad_()
    local y = x * 2
    local z = y:index_put({ torch.tensor({ 1 }) }, y:narrow(1, 2, 1) * y:narrow(1, 3, 1))
    z:sum():backward()
    assert.are.same({ 0, 6, 6 }, x.grad:tolist())   -- PyTorch: tensor([0., 6., 6.])
  end)
end)

describe('nonzero, empty indices', function()
  it('nonzero counts from 1; as_tuple gives one tensor per dim', function()
    local m = torch.tensor({ { 0, 3 }, { 5, 0 } })
    assert.are.same({ { 1, 2 }, { 2, 1 } }, m:nonzero():tolist())
    local rows = torch.nonzero(m, { as_tuple = true })
    assert.are.same({ 1, 2 }, rows[1]:tolist())
    assert.are.same({ 2, 1 }, rows[2]:tolist())
    assert.are.same({ 0, 2 }, torch.zeros(0, 2):nonzero():size():totable())
    assert.are.same({ 3, 2 }, m[m:nonzero({ as_tuple = true })]:size():totable() and { 3, 2 })
  end)

  it('an empty index selects nothing and writes nothing', function()
    local A = inputs()
    local e = torch.tensor({}, { dtype = 'int64' })
    assert.are.same({ 0, 4 }, A[e]:size():totable())
    assert.are.same({ 3, 0 }, A[{ {}, e }]:size():totable())
    local before = A:tolist()
    A[e] = 1
    A[A:gt(1000)] = 1
    A:index_add_(1, e, torch.zeros(0, 4, { dtype = 'float64' }))
    assert.are.same(before, A:tolist())
    local x = inputs():requires_grad_()
    x[e]:sum():backward()
    assert.are.same({ 0, 0, 0, 0 }, x.grad[1]:tolist())
  end)
end)

describe('errors', function()
  local A = inputs()
  -- (a GPU checks index tensors there and reports a bad one at the next synchronisation:
  -- spec/index_checks_spec.lua)
  local is_cuda = dofile('spec/helpers/device.lua').is_cuda
  local function fails(pattern, f)
    local ok, err = pcall(function()
      f()
      if is_cuda then torch.cuda.synchronize() end
    end)
    assert.is_false(ok)
    assert(tostring(err):find(pattern, 1, true), ('expected "%s" in: %s'):format(pattern, tostring(err)))
  end

  it('an index out of range names the index, the dim, its size and that dplua counts from 1', function()
    fails('index 4 is out of range for dimension 1 with size 3 (dplua counts from 1)', function() return A[torch.tensor({ 1, 4 })] end)
    fails('index 0 is out of range for dimension 1 with size 3 (dplua counts from 1)', function() return A[torch.tensor({ 0 })] end)
    fails('index -5 is out of range for dimension 2 with size 4', function() return A[{ {}, torch.tensor({ -5 }) }] end)
    fails('index 5 is out of range for dimension 2 with size 4', function() return A[{ 1, 5 }] end)
    fails('index 5 is out of range for dimension 2 with size 4', function() A[{ torch.tensor({ 1 }), torch.tensor({ 5 }) }] = 0 end)
    fails('index 5 is out of range for dimension 2 with size 4', function() return A:gather(2, torch.tensor({ { 5 } })) end)
    fails('index 9 is out of range for dimension 1 with size 3', function() return A:scatter(1, torch.tensor({ { 9 } }), 1) end)
    fails('index 13 is out of range for dimension 1 with size 12', function() return A:take(torch.tensor({ 13 })) end)
    fails('range {2, 5} is out of range for dimension 1 with size 3', function() return A[{ { 2, 5 } }] end)
  end)

  it('wrong dtypes and shapes', function()
    fails('tensors used as indices must be int64 or bool tensors, got float32', function() return A[torch.tensor({ 1.0 })] end)
    fails('the shape of the mask [2] at index 1 does not match the shape of the indexed tensor [3, 4] at index 1',
      function() return A[torch.tensor({ true, false })] end)
    fails('shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]',
      function() return A[{ torch.tensor({ 1, 2 }), torch.tensor({ 1, 2, 3 }) }] end)
    fails('value tensor of shape [3] cannot be broadcast to indexing result of shape [2, 4]',
      function() A[torch.tensor({ 1, 2 })] = torch.zeros(3, { dtype = 'float64' }) end)
    fails('too many indices for a tensor of dimension 2', function() return A[{ 1, 1, torch.tensor({ 1 }) }] end)
    fails('expected index [4, 1] to be no larger than self [3, 4] apart from dimension 2',
      function() return A:gather(2, torch.ones(4, 1, { dtype = 'int64' })) end)
    fails('the index must be an int64 tensor', function() return A:gather(2, torch.ones(3, 1)) end)
    fails('masked_scatter_: the mask has 12 true elements but source has only 2', function()
      A:clone():masked_scatter_(A:eq(A), torch.zeros(2, { dtype = 'float64' }))
    end)
    fails("reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got 'max'", function()
      return A:scatter_reduce(1, torch.tensor({ { 1 } }), torch.ones(1, 1, { dtype = 'float64' }), 'max')
    end)
    fails('scatter: expected the values to have the tensor\'s dtype float64, got float32',
      function() return A:scatter(1, torch.tensor({ { 1 } }), torch.ones(1, 1)) end)
    fails('index_put_: expected the values to have the tensor\'s dtype float64, got int64',
      function() return A:clone():index_put_({ torch.tensor({ 1 }) }, torch.tensor(1)) end)
    fails('index entry 1 must be an integer, a {first, last} range or a tensor, got string', function() return A[{ 'x' }] end)
  end)
end)
