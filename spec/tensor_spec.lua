-- Tensors from Lua (SPEC section 3): creation and dtype inference, fields, sizes, indexing,
-- views, copies, arithmetic, reductions, conversions, printing and errors.  Expected
-- values are hand-computed, come from naive Lua references, or were printed by PyTorch 1.13.
local torch = require 'torch'
local D = dofile('spec/helpers/device.lua')
local check = dofile('spec/helpers/check.lua')
local err, assert_contains = check.err, check.assert_contains

local function assert_near(expected, got, tol)
  tol = tol or 1e-5
  if type(expected) == 'table' then
    assert.are.equal(#expected, #got)
    for i = 1, #expected do assert_near(expected[i], got[i], tol) end
  else
    assert.is_true(math.abs(expected - got) <= tol, ('expected %s, got %s'):format(expected, got))
  end
end

local function naive_matmul(a, b)
  local c = {}
  for i = 1, #a do
    c[i] = {}
    for j = 1, #b[1] do
      local s = 0
      for k = 1, #b do s = s + a[i][k] * b[k][j] end
      c[i][j] = s
    end
  end
  return c
end

describe('tensor creation', function()
  it('infers dtypes as PyTorch does', function()
    assert.are.equal('int64', torch.tensor({ 1, 2, 3 }).dtype)
    assert.are.equal('float32', torch.tensor({ 1, 2.5 }).dtype)
    assert.are.equal('float32', torch.tensor({ { 1, 2 }, { 3, 4.0 } }).dtype)
    assert.are.equal('bool', torch.tensor({ true, false }).dtype)
    assert.are.equal('int64', torch.tensor(7).dtype)
    assert.are.equal('float32', torch.tensor(7.5).dtype)
    assert.are.equal('int64', torch.full({ 2 }, 3).dtype)
    assert.are.equal('float32', torch.full({ 2 }, 3.0).dtype)
    assert.are.equal('int64', torch.arange(5).dtype)
    assert.are.equal('float32', torch.arange(0, 1, 0.25).dtype)
    assert.are.equal('float64', torch.tensor({ 1, 2 }, { dtype = 'float64' }).dtype)
    assert.are.equal('float32', torch.zeros(2).dtype)
  end)

  it('keeps values and shapes', function()
    local t = torch.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t:tolist())
    assert.are.equal(2, t:dim())
    assert.are.equal(6, t:numel())
    assert.are.equal(4611686018427387905, torch.tensor({ 4611686018427387905 })[1])
    assert.are.same({}, torch.tensor({}):tolist())
    assert.are.equal(3.5, torch.tensor(3.5):item())
    assert.are.equal(true, torch.tensor(true):item())
  end)

  it('makes filled, ranged and random tensors', function()
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, torch.zeros(2, 3):tolist())
    assert.are.same({ { 1, 1 } }, torch.ones({ 1, 2 }):tolist())
    assert.are.same({ 7, 7 }, torch.full({ 2 }, 7):tolist())
    assert.are.same({ 0, 1, 2, 3 }, torch.arange(4):tolist())
    assert.are.same({ 2, 4, 6 }, torch.arange(2, 8, 2):tolist())
    assert.are.same({ 0, 0.25, 0.5, 0.75 }, torch.arange(0, 1, 0.25):tolist())
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, torch.eye(3):tolist())
    assert.are.equal('float64', torch.eye(2, { dtype = 'float64' }).dtype)
    local r = torch.rand(1000)
    assert.is_true(r:min():item() >= 0 and r:max():item() < 1)
    local n = torch.randn(10000)
    assert.is_true(math.abs(n:mean():item()) < 0.05)
    local i = torch.randint(3, 6, { 1000 })
    assert.are.equal('int64', i.dtype)
    assert.are.equal(3, i:min():item())
    assert.are.equal(5, i:max():item())
    assert.are.equal(torch.Size({ 2, 3 }), torch.zeros_like(torch.ones(2, 3)):size())
    assert.are.same({ 1, 1 }, torch.ones_like(torch.zeros(2, { dtype = 'int64' })):tolist())
    assert.are.equal('int64', torch.ones_like(torch.zeros(2, { dtype = 'int64' })).dtype)
    assert.are.equal(torch.Size({ 4 }), torch.randn_like(torch.zeros(4)).shape)
    local perm = torch.randperm(20):tolist()
    table.sort(perm)
    for k = 1, 20 do assert.are.equal(k, perm[k]) end
  end)

  it('sets requires_grad from the options', function()
    local t = torch.zeros(2, { requires_grad = true })
    assert.is_true(t.requires_grad)
    assert.is_true(t.is_leaf)
  end)

  it('repeats random draws after manual_seed', function()
    torch.manual_seed(42)
    local a, b = torch.randn(5):tolist(), torch.rand(3):tolist()
    torch.manual_seed(42)
    assert.are.same(a, torch.randn(5):tolist())
    assert.are.same(b, torch.rand(3):tolist())
    assert.are.equal(42, torch.initial_seed())
    assert.are_not.same(a, torch.randn(5):tolist())
  end)

  it('names what is wrong with bad arguments', function()
    assert_contains(err(torch.zeros, 2, -1), 'non-negative')
    assert_contains(err(torch.zeros, 2.5), 'non-negative integer')
    assert_contains(err(torch.tensor, { { 1, 2 }, { 3 } }), 'expected a sequence of length 2 at dimension 2, got 1')
    assert_contains(err(torch.tensor, { 1, 'x' }), 'expected a number or a boolean, got string (at [2])')
    assert_contains(err(torch.zeros, 2, { dtype = 'float8' }), "unknown dtype 'float8'")
    assert_contains(err(torch.zeros, 2, { dtyp = 'float32' }), "unknown option dtyp = 'float32'")
    assert_contains(err(torch.randint, 5, 2, { 3 }), 'high (2) must be greater than low (5)')
    assert_contains(err(torch.arange, 0, 3, 0), 'step nonzero')
  end)
end)

describe('tensor fields and sizes', function()
  local t = torch.zeros(3, 5)

  it('exposes fields', function()
    assert.are.equal(D.is_cuda, t.is_cuda)
    assert.are.equal(D.name, tostring(t.device))
    assert.are.equal(torch.device(D.name), t.device)
    assert.are.equal('float32', t.dtype)
    assert.is_false(t.requires_grad)
    assert.is_nil(t.grad)
    assert.is_nil(t.grad_fn)
    assert.is_true(t.is_leaf)
  end)

  it('returns torch.Size', function()
    local s = t:size()
    assert.are.equal(3, s[1])
    assert.are.equal(5, s[2])
    assert.are.equal(2, #s)
    assert.are.equal(torch.Size({ 3, 5 }), s)
    assert.are.equal(s, t.shape)
    assert.are.equal('torch.Size([3, 5])', tostring(s))
    assert.are.equal(15, s:numel())
    assert.are.equal(5, t:size(2))
    assert.are.equal(5, t:size(-1))
    assert.are.equal(3, #t)
    assert.are.same({ 5, 1 }, t:stride())
    assert.is_true(t:is_contiguous())
    assert.are.equal('torch.Size([])', tostring(torch.tensor(1):size()))
    assert_contains(err(function() return torch.tensor(1):size(1) end), 'a 0-d tensor has no dimensions')
  end)

  it('keeps user fields on the tensor object', function()
    local u = torch.ones(1)
    u.tag = 'weights'
    assert.are.equal('weights', u.tag)
    assert_contains(err(function() u.dtype = 'int64' end), "tensor field 'dtype' is read-only")
  end)

  it('rejects a 0-d length', function()
    assert_contains(err(function() return #torch.tensor(1) end), '0-d tensor')
  end)
end)

describe('indexing', function()
  it('indexes 1-based, negative from the end', function()
    local t = torch.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.are.same({ 4, 5, 6 }, t[2]:tolist())
    assert.are.same({ 4, 5, 6 }, t[-1]:tolist())
    assert.are.equal(6, t[2][3])
    assert.are.equal(4, t[-1][1])
    assert.are.equal('number', type(torch.tensor({ 1.5 })[1]))
    assert.are.equal(1.5, torch.tensor({ 1.5 })[1])
    assert.are.same({ 2, 5 }, t:select(2, 2):tolist())
  end)

  it('assigns numbers and tensors to slices', function()
    local t = torch.zeros(2, 3)
    t[1] = 5
    t[2] = torch.tensor({ 1, 2, 3 })
    t[2][2] = 9
    assert.are.same({ { 5, 5, 5 }, { 1, 9, 3 } }, t:tolist())
  end)

  it('names the index, dimension and size when out of range', function()
    local t = torch.zeros(4)
    assert_contains(err(function() return t[5] end), 'index 5 is out of range for dimension 1 with size 4')
    assert_contains(err(function() return t[0] end), 'index 0 is out of range for dimension 1 with size 4')
    assert_contains(err(function() return t[-5] end), 'index -5 is out of range')
    assert_contains(err(function() t[7] = 1 end), 'index 7 is out of range for dimension 1 with size 4')
    assert_contains(err(function() return torch.zeros(2, 3):select(2, 4) end),
      'index 4 is out of range for dimension 2 with size 3')
    assert_contains(err(function() return torch.zeros(2, 3):select(3, 1) end), 'dimension 3 is out of range for a 2-D tensor')
  end)
end)

describe('views', function()
  it('share storage', function()
    local t = torch.zeros(2, 3)
    t:view(6)[4] = 1
    t:narrow(2, 3, 1):fill_(2)
    t:t()[1][1] = 3
    t[1]:add_(10)
    assert.are.same({ { 13, 10, 12 }, { 1, 0, 2 } }, t:tolist())
    assert.are.equal(t:data_ptr(), t:view(3, 2):data_ptr())
  end)

  it('reshape, transpose, permute, squeeze and expand', function()
    local t = torch.arange(6)
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, t:view(2, -1):tolist())
    assert.are.same({ { 0, 1 }, { 2, 3 }, { 4, 5 } }, t:reshape({ -1, 2 }):tolist())
    local m = t:view(2, 3)
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, m:t():tolist())
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, m:transpose(1, 2):tolist())
    assert.is_false(m:t():is_contiguous())
    assert.is_true(m:t():contiguous():is_contiguous())
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, m:t():reshape(3, 2):tolist())
    local p = torch.zeros(2, 3, 4):permute(3, 1, 2)
    assert.are.equal(torch.Size({ 4, 2, 3 }), p:size())
    assert.are.equal(torch.Size({ 2, 1, 3 }), m:unsqueeze(2):size())
    assert.are.equal(torch.Size({ 2, 3, 1 }), m:unsqueeze(-1):size())
    assert.are.equal(torch.Size({ 2, 3 }), torch.zeros(2, 1, 3, 1):squeeze():size())
    assert.are.equal(torch.Size({ 2, 3, 1 }), torch.zeros(2, 1, 3, 1):squeeze(2):size())
    assert.are.same({ { 1, 1, 1 }, { 2, 2, 2 } }, torch.tensor({ { 1 }, { 2 } }):expand(2, 3):tolist())
    assert.are.same({ { 1, 2 }, { 1, 2 } }, torch.tensor({ 1, 2 }):expand(2, -1):tolist())
    assert.are.equal(torch.Size({ 24 }), torch.zeros(2, 3, 4):flatten():size())
    assert.are.equal(torch.Size({ 2, 12 }), torch.zeros(2, 3, 4):flatten(2):size())
    assert.are.equal(torch.Size({ 6, 4 }), torch.zeros(2, 3, 4):flatten(1, 2):size())
  end)

  it('chunk and split into views', function()
    local t = torch.arange(10)
    local c = t:chunk(3)
    assert.are.equal(3, #c)
    assert.are.same({ 0, 1, 2, 3 }, c[1]:tolist())
    assert.are.same({ 8, 9 }, c[3]:tolist())
    local s = t:split(4)
    assert.are.same({ 4, 4, 2 }, { #s[1], #s[2], #s[3] })
    local s2 = t:view(2, 5):split({ 2, 3 }, 2)
    assert.are.same({ { 2, 3, 4 }, { 7, 8, 9 } }, s2[2]:tolist())
    c[1][1] = 100
    assert.are.equal(100, t[1])
  end)

  it('copies with clone, cat, stack and index_select', function()
    local a = torch.tensor({ { 1, 2 }, { 3, 4 } })
    local b = a:clone()
    b[1][1] = 9
    assert.are.equal(1, a[1][1])
    assert.are.same({ { 1, 2 }, { 3, 4 }, { 1, 2 }, { 3, 4 } }, torch.cat({ a, a }):tolist())
    assert.are.same({ { 1, 2, 1, 2 }, { 3, 4, 3, 4 } }, torch.cat({ a, a }, 2):tolist())
    assert.are.equal(torch.Size({ 2, 2, 2 }), torch.stack({ a, a }):size())
    assert.are.same({ { 1, 2 }, { 1, 2 } }, torch.stack({ a, a }, 2)[1]:tolist())
    assert.are.same({ { 3, 4 }, { 1, 2 }, { 3, 4 } }, a:index_select(1, torch.tensor({ 2, 1, 2 })):tolist())
    assert.are.same({ { 2 }, { 4 } }, a:index_select(2, { 2 }):tolist())
    -- (on a GPU a bad index tensor there is reported at the next synchronisation: tolist)
    assert_contains(err(function() return a:index_select(1, torch.tensor({ 1, 3 })):tolist() end),
      'index 3 (at position 2) is out of range for dimension 1 with size 2')
    assert_contains(err(torch.cat, { a, 3 }), 'element 2 is a number, expected a tensor')
  end)
end)

describe('arithmetic', function()
  local a = torch.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = 'float32' })

  it('broadcasts between tensors and numbers', function()
    local row = torch.tensor({ 10, 20, 30 }, { dtype = 'float32' })
    assert.are.same({ { 11, 22, 33 }, { 14, 25, 36 } }, (a + row):tolist())
    assert.are.same({ { -9, -18, -27 }, { -6, -15, -24 } }, (a - row):tolist())
    assert.are.same({ { 2, 4, 6 }, { 8, 10, 12 } }, (a * 2):tolist())
    assert.are.same({ { 2, 4, 6 }, { 8, 10, 12 } }, (2 * a):tolist())
    assert.are.same({ { 9, 8, 7 }, { 6, 5, 4 } }, (10 - a):tolist())
    assert.are.same({ { 0.5, 1, 1.5 }, { 2, 2.5, 3 } }, (a / 2):tolist())
    assert.are.same({ { 1, 4, 9 }, { 16, 25, 36 } }, (a ^ 2):tolist())
    assert.are.same({ { 2, 4, 8 }, { 16, 32, 64 } }, (2 ^ a):tolist())
    assert.are.same({ { -1, -2, -3 }, { -4, -5, -6 } }, (-a):tolist())
    assert.are.same({ { 1, 1, 1 }, { 1, 1, 1 } }, (a / a):tolist())
    assert.are.same({ { 3, 6, 9 }, { 12, 15, 18 } }, a:add(a, 2):tolist())
    assert.are.same({ { 11, 22, 33 }, { 14, 25, 36 } }, torch.add(a, row):tolist())
  end)

  it('promotes with Lua numbers as PyTorch does', function()
    local i = torch.tensor({ 1, 2, 3 })
    assert.are.equal('int64', (i + 1).dtype)
    assert.are.equal('float32', (i * 0.5).dtype)
    assert.are.same({ 0.5, 1, 1.5 }, (i * 0.5):tolist())
    assert.are.equal('int64', (torch.tensor({ true, false }) + 1).dtype)
  end)

  it('applies unary functions', function()
    local x = torch.tensor({ -1, 0, 2 }, { dtype = 'float64' })
    assert_near({ math.exp(-1), 1, math.exp(2) }, x:exp():tolist(), 1e-12)
    assert_near({ 1, 0, 2 }, x:abs():tolist())
    assert_near({ 0, 0, 2 }, x:relu():tolist())
    assert_near({ 1 / (1 + math.exp(1)), 0.5, 1 / (1 + math.exp(-2)) }, x:sigmoid():tolist(), 1e-12)
    assert_near({ -0.7615941559557649, 0, 0.9640275800758169 }, torch.tanh(x):tolist(), 1e-12)
    assert_near({ 0, math.log(2) }, torch.tensor({ 1, 2 }, { dtype = 'float64' }):log():tolist(), 1e-12)
    assert_near({ 2, 3 }, torch.tensor({ 4, 9 }, { dtype = 'float64' }):sqrt():tolist())
    assert.are.same({ -0.5, 0, 1 }, x:clamp(-0.5, 1):tolist())
    assert.are.same({ -1, 0, 1 }, x:clamp(nil, 1):tolist())
    assert.are.same({ 0, 0, 2 }, x:clamp(0):tolist())
    assert.are.same({ 0, 0, 2 }, x:clamp({ min = 0 }):tolist())
  end)

  it('reduces with optional dim and keepdim', function()
    assert.are.equal(21, a:sum():item())
    assert.are.same({ 5, 7, 9 }, a:sum(1):tolist())
    assert.are.same({ { 6 }, { 15 } }, a:sum(2, true):tolist())
    assert.are.same({ 2, 5 }, a:mean(-1):tolist())
    assert.are.equal(6, a:max():item())
    assert.are.equal(1, a:min():item())
    local t = torch.tensor({ { 3, 1, 4 }, { 1, 5, 9 } })
    local v, i = t:max(2)
    assert.are.same({ 4, 9 }, v:tolist())
    assert.are.same({ 3, 3 }, i:tolist())
    local v2, i2 = torch.min(t, 1)
    assert.are.same({ 1, 1, 4 }, v2:tolist())
    assert.are.same({ 2, 1, 1 }, i2:tolist())
    assert.are.equal(6, t:argmax():item())
    assert.are.same({ 2, 1, 1 }, t:argmin(1):tolist())
    assert.are.same({ { 3 }, { 3 } }, t:argmax(2, true):tolist())
    assert.are.same({ { 3, 3, 4 }, { 3, 5, 9 } }, t:max(torch.tensor({ 3, 3, 3 })):tolist())
    assert.are.same({ 1, 3, 3 }, torch.minimum(t[2], torch.tensor({ 3, 3, 3 })):tolist())
  end)

  it('computes softmax and log_softmax', function()
    local x = torch.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = 'float32' })
    local s = x:softmax(2):tolist()
    local p = { 0.09003057330846786, 0.2447284758090973, 0.6652409434318542 } -- PyTorch
    assert_near(p, s[1])
    assert_near(p, s[2])
    local l = torch.log_softmax(x, 1):tolist()
    assert_near({ -3.0485873222351074, -3.0485873222351074, -3.0485873222351074 }, l[1])
    assert_near({ -0.04858732968568802, -0.04858732968568802, -0.04858732968568802 }, l[2])
  end)

  it('multiplies matrices like a naive reference', function()
    torch.manual_seed(1)
    local x, w = torch.randn(5, 7, { dtype = 'float64' }), torch.randn(7, 3, { dtype = 'float64' })
    local ref = naive_matmul(x:tolist(), w:tolist())
    for i, row in ipairs(x:matmul(w):tolist()) do assert_near(ref[i], row, 1e-12) end
    for i, row in ipairs(torch.mm(x, w):tolist()) do assert_near(ref[i], row, 1e-12) end
    local c = torch.ones(5, 3, { dtype = 'float64' })
    local r = torch.addmm(c, x, w, { beta = 2, alpha = 0.5 }):tolist()
    for i = 1, 5 do
      for j = 1, 3 do assert_near(2 + 0.5 * ref[i][j], r[i][j], 1e-12) end
    end
    local a = torch.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, { dtype = 'float32' })
    local b = torch.tensor({ { 0.5, -1 }, { 2, 0.25 } })
    assert.are.same({ { 4.5, -0.5 }, { 9.5, -2 }, { 14.5, -3.5 } }, a:matmul(b):tolist()) -- PyTorch
  end)

  it('compares elementwise and as a whole', function()
    local x = torch.tensor({ 1, 2, 3 })
    assert.are.same({ false, true, false }, x:eq(2):tolist())
    assert.are.same({ true, false, true }, x:ne(2):tolist())
    assert.are.same({ true, false, false }, x:lt(2):tolist())
    assert.are.same({ true, true, false }, x:le(2):tolist())
    assert.are.same({ false, false, true }, x:gt(2):tolist())
    assert.are.same({ false, true, true }, x:ge(torch.tensor({ 2, 2, 2 })):tolist())
    assert.are.equal('bool', x:eq(2).dtype)
    local f = torch.tensor({ 1, 2 }, { dtype = 'float32' })
    assert.is_true(torch.allclose(f, f + 1e-7))
    assert.is_false(torch.allclose(f, f + 1e-3))
    assert.is_true(torch.allclose(f, f + 1e-3, 1e-5, 1e-2))
    assert.is_true(torch.equal(x, torch.tensor({ 1, 2, 3 })))
    assert.is_false(torch.equal(x, torch.tensor({ 1, 2, 4 })))
  end)

  it('updates in place and returns the same tensor', function()
    local t = torch.zeros(3)
    assert.are.equal(t, t:add_(1))
    assert.are.equal(t, t:mul_(torch.tensor({ 1, 2, 3 }, { dtype = 'float32' })))
    t:sub_(1):div_(2)
    assert.are.same({ 0, 0.5, 1 }, t:tolist())
    assert.are.same({ 0, 0.5, 0.75 }, t:clamp_(nil, 0.75):tolist())
    assert.are.same({ 4, 4, 4 }, t:fill_(4):tolist())
    assert.are.same({ 0, 0, 0 }, t:zero_():tolist())
    t:copy_(torch.tensor({ 7, 8, 9 }))
    assert.are.same({ 7, 8, 9 }, t:tolist())
    local u = torch.empty(1000):uniform_(2, 3)
    assert.is_true(u:min():item() >= 2 and u:max():item() < 3)
    local n = torch.empty(10000):normal_(5, 0.1)
    assert.is_true(math.abs(n:mean():item() - 5) < 0.01)
  end)

  it('raises the engine message for mismatched shapes', function()
    local e = err(function() return torch.zeros(3, 4) + torch.zeros(5) end)
    assert_contains(e:lower(), 'the size of tensor a (4) must match the size of tensor b (5) at non-singleton dimension')
  end)

  it('names wrong argument types', function()
    assert_contains(err(function() return torch.zeros(2) + 'x' end), 'tensor or number expected, got string')
    assert_contains(err(function() return torch.zeros(2):matmul(3) end), 'torch.Tensor expected, got number')
    assert_contains(err(function() return torch.zeros(2):sum('a') end),
      "sum: dim must be an integer dimension or a table of them (counted from 1), got 'a'")
  end)
end)

describe('conversions', function()
  it('returns the same object when nothing changes', function()
    local t = torch.zeros(2)
    assert.are.equal(t, t:to('float32'))
    assert.are.equal(t, t:to(D.name))
    assert.are.equal(t, t:to({ device = D.name, dtype = 'float32' }))
    assert.are.equal(t, t:float())
    if D.name == 'cpu' then assert.are.equal(t, t:cpu()) else assert.are_not.equal(t, t:cpu()) end
    assert.are.equal(t, t:contiguous())
  end)

  it('converts dtypes into new tensors', function()
    local t = torch.tensor({ 1.7, -2.5 })
    local d = t:double()
    assert.are_not.equal(t, d)
    assert.are.equal('float64', d.dtype)
    assert.are.equal('float32', t.dtype)
    assert.are.same({ 1, -2 }, t:long():tolist())
    assert.are.equal('int64', t:to('int64').dtype)
    assert.are.same({ true, false }, torch.tensor({ 3, 0 }):bool():tolist())
    assert.are.equal(D.tensor_type .. 'FloatTensor', t:type())
    assert.are.equal('torch.DoubleTensor', t:type('torch.DoubleTensor'):type())
    assert.are.equal(D.tensor_type .. 'LongTensor', torch.type(torch.tensor({ 1 })))
  end)

  it('reads values', function()
    assert.are.equal(5, torch.tensor({ { 5 } }):item())
    assert.are.equal('integer', math.type(torch.tensor(5):item()))
    assert_contains(err(function() return torch.zeros(2):item() end), 'a tensor with 2 elements cannot be converted')
    assert.are.equal(3, torch.tensor(3):tolist())
  end)
end)

describe('autograd from Lua', function()
  it('records, backpropagates and accumulates', function()
    local w = torch.tensor({ 1, 2, 3 }, { dtype = 'float32', requires_grad = true })
    local y = (w * w):sum()
    assert.is_false(y.is_leaf)
    assert.is_truthy(tostring(y.grad_fn):match('^<%w+Backward%d*>$'))
    assert.is_string(y.grad_fn.name)
    y:backward()
    assert.are.same({ 2, 4, 6 }, w.grad:tolist())
    ; (w * 2):sum():backward()
    assert.are.same({ 4, 6, 8 }, w.grad:tolist())
    w.grad = nil
    assert.is_nil(w.grad)
  end)

  it('frees the graph unless retain_graph is given', function()
    local w = torch.ones(2, { requires_grad = true })
    local y = (w * 3):sum()
    y:backward(nil, { retain_graph = true })
    y:backward()
    assert.are.same({ 6, 6 }, w.grad:tolist())
    assert.has_error(function() y:backward() end)
  end)

  it('detaches and turns recording off', function()
    local w = torch.ones(2, { requires_grad = true })
    assert.is_false(w:detach().requires_grad)
    local r = torch.no_grad(function(a) return a * 2, 'x' end, w)
    assert.is_false(r.requires_grad)
    assert.is_true(torch.is_grad_enabled())
    assert.has_error(function() torch.no_grad(function() error('boom') end) end)
    assert.is_true(torch.is_grad_enabled())
    local v = torch.zeros(2)
    assert.are.equal(v, v:requires_grad_())
    assert.is_true(v.requires_grad)
    v.requires_grad = false
    assert.is_false(v.requires_grad)
  end)
end)

describe('printing', function()
  -- expected strings printed by PyTorch 1.13 (dtype names as dplua writes them)
  local cases = {
    { function() return torch.tensor({ { 0.1940, -2.1721 }, { 0.5, 3.25 } }) end,
      'tensor([[ 0.1940, -2.1721],\n        [ 0.5000,  3.2500]])' },
    { function() return torch.tensor({ 1, 2, 3 }) end, 'tensor([1, 2, 3])' },
    { function() return torch.tensor({ true, false }) end, 'tensor([ True, False])' },
    { function() return torch.tensor({ 1.5, 2.25 }, { dtype = 'float64' }) end, 'tensor([1.5000, 2.2500], dtype=float64)' },
    { function() return torch.tensor(3.0) end, 'tensor(3.)' },
    { function() return torch.tensor(3.5) end, 'tensor(3.5000)' },
    { function() return torch.tensor(7) end, 'tensor(7)' },
    { function() return torch.tensor({ 1e-5, 1.0 }) end, 'tensor([1.0000e-05, 1.0000e+00])' },
    { function() return torch.tensor({ 1e9, 1.0 }) end, 'tensor([1.0000e+09, 1.0000e+00])' },
    { function() return torch.tensor({ 0.0, 0.0 }) end, 'tensor([0., 0.])' },
    { function() return torch.tensor({ 1.0, 0 / 0, math.huge }) end, 'tensor([1., nan, inf])' },
    { function() return torch.tensor({ { 1, -2 }, { 30, 4 } }) end, 'tensor([[ 1, -2],\n        [30,  4]])' },
    { function() return torch.zeros(0) end, 'tensor([])' },
    { function() return torch.zeros(0, 3) end, 'tensor([], size=(0, 3))' },
    { function() return torch.zeros(2, 0, { dtype = 'int64' }) end, 'tensor([], size=(2, 0), dtype=int64)' },
    { function() return torch.ones(2, { requires_grad = true }) end, 'tensor([1., 1.], requires_grad=true)' },
    { function() return torch.arange(30.0):view(2, 3, 5) end,
      'tensor([[[ 0.,  1.,  2.,  3.,  4.],\n         [ 5.,  6.,  7.,  8.,  9.],\n         [10., 11., 12., 13., 14.]],\n\n' ..
      '        [[15., 16., 17., 18., 19.],\n         [20., 21., 22., 23., 24.],\n         [25., 26., 27., 28., 29.]]])' },
    { function() return torch.arange(25.0) / 7 end,
      'tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n' ..
      '        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n' ..
      '        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286])' },
    { function() return torch.arange(2000):float() end,
      'tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])' },
    { function() return torch.arange(2000):view(40, 50) end,
      'tensor([[   0,    1,    2,  ...,   47,   48,   49],\n        [  50,   51,   52,  ...,   97,   98,   99],\n' ..
      '        [ 100,  101,  102,  ...,  147,  148,  149],\n        ...,\n' ..
      '        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n' ..
      '        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])' },
    { function() return torch.tensor({ -0.0, 1.5 }) end, 'tensor([-0.0000, 1.5000])' },
    { function() return torch.tensor({ 100000.0, 1.5 }) end, 'tensor([1.0000e+05, 1.5000e+00])' },
  }
  for i, case in ipairs(cases) do
    it('prints like PyTorch (case ' .. i .. ')', function()
      assert.are.equal(D.printed(case[2]), tostring(case[1]()))
    end)
  end

  it('appends grad_fn', function()
    local a = torch.ones(2, 2, { requires_grad = true })
    local s = tostring(a * 2)
    assert.is_truthy(s:match('^tensor%(%[%[2%., 2%.%],\n        %[2%., 2%.%]%], grad_fn=<Mul%w*>%)$')
      or D.name ~= 'cpu' and s:match("^tensor%(%[%[2%., 2%.%],\n        %[2%., 2%.%]%], device='[%w:]+', grad_fn=<Mul%w*>%)$"), s)
  end)
end)

describe('torch utilities', function()
  it('measures time with Timer', function()
    local timer = torch.Timer()
    local t0 = timer:time().real
    os.execute('sleep 0.05')
    local t1 = timer:time().real
    assert.is_true(t1 >= 0.045 and t1 < 2, 'elapsed ' .. t1)
    assert.is_true(t0 >= 0 and t0 < t1)
    timer:reset()
    assert.is_true(timer:time().real < t1)
  end)

  it('sets the number of threads', function()
    local n = torch.get_num_threads()
    torch.set_num_threads(1)
    assert.are.equal(1, torch.get_num_threads())
    torch.set_num_threads(n)
    assert_contains(err(torch.set_num_threads, 0), 'must be positive')
  end)

  it('offers dtype names and matmul precision', function()
    assert.are.equal('float64', torch.double)
    assert.are.equal('int64', torch.long)
    torch.set_float32_matmul_precision('highest')
    assert_contains(err(torch.set_float32_matmul_precision, 'fast'), "invalid option 'fast'")
  end)

  it('reaches the other modules through torch', function()
    for name, mod in pairs({ nn = 'nn', optim = 'optim', data = 'torch.data' }) do
      if package.preload[mod] then assert.are.equal(require(mod), torch[name]) end
    end
    assert.is_nil(torch.no_such_module)
  end)
end)

describe('torch._C internals', function()
  local C = torch._C

  it('computes linear, losses and dropout', function()
    local x = torch.tensor({ { 1, 2 } }, { dtype = 'float32' })
    local w = torch.tensor({ { 1, 0 }, { 0, 1 }, { 1, 1 } }, { dtype = 'float32' })
    assert.are.same({ { 1, 2, 3 } }, C.linear(x, w, nil):tolist())
    assert.are.same({ { 2, 3, 4 } }, C.linear(x, w, torch.ones(3)):tolist())
    local mse = C.mse_loss(torch.tensor({ 1, 2, 3.0 }), torch.tensor({ 1.5, 2, 1.0 }), 'mean')
    assert_near(1.4166666269302368, mse:item()) -- PyTorch
    local logits = torch.tensor({ { 1, 2, 3 }, { 1, 0, -1 } }, { dtype = 'float32' })
    assert_near(0.40760594606399536, C.cross_entropy(logits, torch.tensor({ 3, 1 }), 'mean'):item()) -- PyTorch
    local nll = C.nll_loss(logits:log_softmax(2), torch.tensor({ 3, 1 }), 'sum'):item()
    assert_near(2 * 0.40760594606399536, nll)
    -- (a GPU checks the targets there and reports at the next synchronisation: item)
    local function ce(t) return function() return C.cross_entropy(logits, torch.tensor(t), 'mean'):item() end end
    local on_gpu = dofile('spec/helpers/device.lua').is_cuda
    assert_contains(err(ce({ 3, 4 })), on_gpu and 'target 4 at position 2 is out of bounds: class indices must be between 1 and 3'
      or 'target 4 at position 2 is out of range (expected 1 to 3)')
    assert_contains(err(ce({ 0, 1 })), 'target 0 at position 1')
    assert_contains(err(C.mse_loss, x, x, 'avg'), "invalid option 'avg'")
    assert.are.same({ 1, 1 }, C.dropout(torch.ones(2), 0.5, false):tolist())
    local d = C.dropout(torch.ones(1000), 0.5, true):tolist()
    for _, v in ipairs(d) do assert.is_true(v == 0 or v == 2) end
  end)

  it('steps optimizers in place', function()
    local p, g = torch.tensor({ 1, 2 }, { dtype = 'float32' }), torch.tensor({ 0.5, -1 }, { dtype = 'float32' })
    C.sgd_step(p, g, nil, { lr = 0.1, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false })
    assert_near({ 0.95, 2.1 }, p:tolist())
    local m, v = torch.zeros(2), torch.zeros(2)
    C.adam_step(p, g, m, v, { lr = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, step = 1 })
    assert_near({ 0.85, 2.2 }, p:tolist(), 1e-5) -- the first Adam step moves by lr * sign(g)
    assert.is_number(C.bytes_copied())
  end)
end)
