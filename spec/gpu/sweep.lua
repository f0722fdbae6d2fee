-- spec/gpu/sweep.lua: the device against the CPU over what the op table (src/ops.def) does
-- not cover: pow with scalar and negative exponents, scalar operands of each kind, dtype
-- casts, copies and views, cat and stack, reductions that split across blocks, softmax
-- along every dim, matrix products of every shape and transposition (vectors, batches,
-- k = 0, leading dimensions of one-row operands), indexing on every dim, and the gradients
-- of each.  Every op of the op table, on every dtype, is swept against PyTorch by
-- spec/op_sweep_spec.lua (spec/gpu/specs runs it on cpu:1 and cuda:0).  Where the CPU
-- raises an error the device must raise the same one.
--   build-gpu/dplua spec/gpu/sweep.lua     (spec/gpu/check runs it with DPLUA_CUDA_POISON=1)
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local G = dofile(here .. 'common.lua')
G.require_device()
local R = G.REDUCTION
local DTYPES = { 'float32', 'float64', 'int64', 'bool' }

-- Fresh values of a dtype (drawn on the CPU, so both sides see the same numbers).
local function val(d, dt, ...)
  if dt == 'bool' then return torch.randn(...):gt(0):to(d) end
  if dt == 'int64' then return torch.randint(-6, 7, { ... }):to(d) end
  return torch.randn(...):to(dt):to(d)
end
local function positive(d, dt, ...)
  if dt == 'bool' then return torch.ones(..., { dtype = 'bool' }):to(d) end
  if dt == 'int64' then return torch.randint(1, 7, { ... }):to(d) end
  return (torch.rand(...) + 0.5):to(dt):to(d)
end

-- ---------------------------------------------------------------- pow exponents
for _, da in ipairs({ 'float32', 'float64', 'int64' }) do
  G.parity('pow ' .. da, function(d)
    local base = positive(d, da, 200)
    local e = da == 'int64' and torch.randint(0, 4, { 200 }):to(d) or val(d, da, 200)
    return base:pow(e), base:pow(2), base:pow(0.5), base ^ 3
  end)
end
G.parity('pow int64 to a negative int64 power', function(d)
  return torch.randint(1, 5, { 10 }):to(d):pow(torch.randint(-3, -1, { 10 }):to(d))
end)

-- ---------------------------------------------------------------- scalar operands
for _, dt in ipairs(DTYPES) do
  G.parity('scalar operands on ' .. dt, function(d)
    local a = val(d, dt, 257)
    return a + 2, a + 2.5, 3 - a, 1.5 - a, a * 3, a * -0.75, a / 4, a / 2.5, a:gt(0.5), a:le(1), a:eq(1)
  end)
  G.parity('scalar / tensor on ' .. dt, function(d) return 7 / positive(d, dt, 100) end)
end

-- ---------------------------------------------------------------- copies, views, dtype casts
for _, from in ipairs(DTYPES) do
  G.parity('casts from ' .. from, function(d)
    local a = val(d, from, 9, 11):t()
    return a:float(), a:double(), a:long(), a:bool(), a:contiguous()
  end)
end
G.check('copy_ from broadcast, permuted and other-dtype sources', function(d)
  local o = val(d, 'float32', 5, 6, 7)
  o:copy_(val(d, 'float64', 7))
  local p = val(d, 'float64', 5, 6, 7)
  p:copy_(val(d, 'float32', 7, 6, 5):permute(3, 2, 1))
  local q = val(d, 'int64', 6, 7)
  q:copy_(val(d, 'bool', 6, 1))
  return o, p, q
end)
G.check('expand, narrow, select, transpose, contiguous', function(d)
  local a = val(d, 'float32', 4, 1, 6)
  return a:expand(4, 5, 6):contiguous(), a:expand(4, 5, 6):transpose(1, 3):contiguous(),
    val(d, 'float64', 8, 9, 10):narrow(2, 3, 4):select(3, 7):contiguous(), a:expand(4, 5, 6) * 2
end)
G.check('cat along every dim, stack', function(d)
  local a, b = val(d, 'float32', 3, 4, 5), val(d, 'float32', 3, 4, 5):permute(1, 2, 3)
  return torch.cat({ a, b }, 1), torch.cat({ a, b:transpose(1, 2):transpose(1, 2) }, 2), torch.cat({ a, b }, 3),
    torch.stack({ a, b }, 2), torch.cat({ val(d, 'int64', 2, 3), val(d, 'int64', 5, 3) }, 1)
end)

-- ---------------------------------------------------------------- reductions across blocks
G.check('sums that split across blocks (long rows, long columns)', function(d)
  local a, b = G.randn(d, 3, 300000), G.randn(d, 300000, 3)
  return a:sum(2), b:sum(1), a:max(2), b:min(1), a:t():sum(1), b:argmax(1), a:argmin()
end, { tol = R, floor = 1 })

-- ---------------------------------------------------------------- softmax
for _, dt in ipairs({ 'float32', 'float64' }) do
  G.check('softmax and log_softmax along every dim, permuted, with backward ' .. dt, function(d)
    local out = {}
    for dim = 1, 3 do
      local x = val(d, dt, 5, 6, 7):permute(3, 1, 2):requires_grad_(true)
      local g = val(d, dt, 7, 5, 6)
      local y, z = x:softmax(dim), x:log_softmax(dim)
      ;((y * g):sum() + (z * g):sum()):backward()
      out[#out + 1] = y; out[#out + 1] = z; out[#out + 1] = x.grad
    end
    return table.unpack(out)
  end, { tol = R })
end

-- ---------------------------------------------------------------- matrix products
for _, dt in ipairs({ 'float32', 'float64', 'int64' }) do
  local tol = dt == 'int64' and 0 or R
  G.parity('matmul ' .. dt .. ': vectors, matrices, every transposition', function(d)
    local a, b = val(d, dt, 13, 7), val(d, dt, 7, 5)
    local at, bt = val(d, dt, 7, 13):t(), val(d, dt, 5, 7):t()
    local v, w = val(d, dt, 7), val(d, dt, 13)
    return a:matmul(b), at:matmul(b), a:matmul(bt), at:matmul(bt), a:matmul(v), w:matmul(a), v:matmul(v),
      at:matmul(v), w:matmul(at)
  end, { tol = tol, floor = 1 })
  G.parity('matmul ' .. dt .. ': one row, one column, k = 1', function(d)
    local r, c = val(d, dt, 1, 9), val(d, dt, 9, 1)
    local wide = val(d, dt, 9, 4)
    return r:matmul(wide), c:matmul(val(d, dt, 1, 6)), r:matmul(c), c:matmul(r),
      val(d, dt, 9, 3):narrow(2, 2, 1):t():matmul(wide),          -- a [1, 9] row with stride 3
      wide:t():matmul(val(d, dt, 9, 5):narrow(2, 4, 1))           -- a [9, 1] column with ld 5
  end, { tol = tol, floor = 1 })
  G.parity('matmul ' .. dt .. ': batches, broadcast and strided batches', function(d)
    local a = val(d, dt, 4, 6, 8)
    return a:matmul(val(d, dt, 4, 8, 3)), a:matmul(val(d, dt, 8, 3)), val(d, dt, 6, 8):matmul(val(d, dt, 4, 8, 3)),
      a:matmul(val(d, dt, 1, 8, 3)), val(d, dt, 2, 1, 6, 8):matmul(val(d, dt, 3, 8, 2)),
      val(d, dt, 6, 4, 8):permute(2, 1, 3):matmul(val(d, dt, 4, 3, 8):transpose(2, 3)), a:matmul(val(d, dt, 8))
  end, { tol = tol, floor = 1 })
  G.parity('matmul ' .. dt .. ': empty inner dimension (k = 0) and empty outputs', function(d)
    return val(d, dt, 5, 0):matmul(val(d, dt, 0, 4)), val(d, dt, 0, 3):matmul(val(d, dt, 3, 4)),
      val(d, dt, 2, 5, 0):matmul(val(d, dt, 2, 0, 4))
  end, { tol = tol })
end
G.check('addmm and mm with strided operands', function(d)
  local c = G.randn(d, 20, 30)
  return torch.addmm(c, G.randn(d, 40, 20):t(), G.randn(d, 40, 30)), torch.addmm(G.randn(d, 30), G.randn(d, 20, 40), G.randn(d, 30, 40):t()),
    G.randn(d, 20, 40):mm(G.randn(d, 40, 30))
end, { tol = R, floor = 1 })
G.parity('bool matmul', function(d) return val(d, 'bool', 3, 4):matmul(val(d, 'bool', 4, 2)) end)
G.parity('matmul of mismatched shapes', function(d) return val(d, 'float32', 3, 4):matmul(val(d, 'float32', 5, 2)) end)

-- ---------------------------------------------------------------- indexing
for _, dt in ipairs(DTYPES) do
  G.parity('index_select on every dim with repeats, ' .. dt, function(d)
    local a = val(d, dt, 5, 6, 7):transpose(1, 3)   -- [7, 6, 5], strided
    local out = {}
    for dim = 1, 3 do
      local idx = torch.randint(1, a:size(dim) + 1, { 9 }):to(d)
      out[#out + 1] = a:index_select(dim, idx)
    end
    return table.unpack(out)
  end)
end
-- a bad index: the CPU raises at the op; the device checks it there and raises at the next
-- synchronisation, with the same index, position, dimension and size
G.expect('index_select with an index out of range: the CPU at the op, the device at the next synchronisation', function()
  local function msg(fn)
    local ok, e = pcall(fn)
    assert(not ok, 'no error')
    return tostring(e)
  end
  local want = 'index 6 (at position 2) is out of range for dimension 1 with size 5'
  local c = msg(function() return val('cpu', 'float32', 5, 3):index_select(1, torch.tensor({ 1, 6 })) end)
  local g = msg(function()
    val(G.dev, 'float32', 5, 3):index_select(1, torch.tensor({ 1, 6 }):to(G.dev))
    G.sync()
  end)
  return c:find(want, 1, true) ~= nil and g:find(want, 1, true) ~= nil
end)
G.check('index_select backward with repeated indices accumulates', function(d)
  local x = G.randn(d, 6, 5):requires_grad_(true)
  local idx = torch.tensor({ 2, 2, 6, 1, 2, 6 }):to(d)
  local y = x:index_select(1, idx)
  y:backward(G.randn(d, 6, 5))
  local x2 = G.randn(d, 6, 5):requires_grad_(true)
  x2:index_select(2, torch.tensor({ 5, 5, 5 }):to(d)):backward(G.randn(d, 6, 3))
  return y, x.grad, x2.grad
end, { tol = R })

-- ---------------------------------------------------------------- gradients of a mixed graph
G.check('gradients through broadcasting, views and reductions', function(d)
  local a = G.randn(d, 4, 1, 6):requires_grad_(true)
  local b = G.randn(d, 5, 6):requires_grad_(true)
  local w = G.randn(d, 6, 3):requires_grad_(true)
  local h = ((a * b):tanh() + (a - b):sigmoid() * 0.5):relu()
  local y = h:matmul(w):permute(3, 1, 2):exp():mean(1)
  local loss = y:sum() + h:max() - h:transpose(1, 2):narrow(1, 2, 3):sum() / 7
  loss:backward()
  return loss, a.grad, b.grad, w.grad
end, { tol = R, floor = 1 })
G.check('nn.Linear (fused) with and without bias, forward and backward', function(d)
  torch.manual_seed(3)
  local l1, l2 = nn.Linear(37, 19), nn.Linear(19, 5, { bias = false })
  l1:to(d); l2:to(d)
  local x = G.randn(d, 23, 37):requires_grad_(true)
  local y = l2(l1(x):relu())
  y:backward(G.randn(d, 23, 5))
  return y, x.grad, l1.weight.grad, l1.bias.grad, l2.weight.grad
end, { tol = R, floor = 1 })
for _, red in ipairs({ 'mean', 'sum', 'none' }) do
  G.check('losses with reduction ' .. red, function(d)
    local x = G.randn(d, 17, 9):requires_grad_(true)
    local t = torch.randint(1, 10, { 17 }):to(d)
    local y = G.randn(d, 17, 9)
    local ce = nn.CrossEntropyLoss({ reduction = red })(x, t)
    local nll = nn.NLLLoss({ reduction = red })(x:log_softmax(2), t)
    local mse = nn.MSELoss({ reduction = red })(x, y)
    ;(ce:sum() + nll:sum() * 0.5 + mse:sum() * 0.25):backward()
    return ce, nll, mse, x.grad
  end, { tol = R })
end

os.exit(G.finish() and 0 or 1)
