-- spec/gpu/ops.lua: every CUDA kernel family against the CPU backend, on fresh random
-- inputs: elementwise (broadcast, strided, every dtype), reductions, softmax and losses
-- with their backward passes, indexing, matrix products, random draws and optimizer steps.
--   build-gpu/dplua spec/gpu/ops.lua      (spec/gpu/check runs it with DPLUA_CUDA_POISON=1)
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local G = dofile(here .. 'common.lua')
local E, R = G.ELEMENTWISE, G.REDUCTION
local randn, rand = G.randn, G.rand

G.require_device()

-- ---------------------------------------------------------------- elementwise
for _, dt in ipairs({ 'float32', 'float64' }) do
  local function rn(dev, ...) return randn(dev, ...):to(dt) end
  local function pos(dev, ...) return (rand(dev, ...) + 0.5):to(dt) end
  local s = ' ' .. dt
  G.check('add broadcast' .. s, function(d) return rn(d, 64, 1, 33) + rn(d, 1, 17, 33) end)
  G.check('sub broadcast' .. s, function(d) return rn(d, 17, 33) - rn(d, 33) end)
  G.check('mul broadcast' .. s, function(d) return rn(d, 5, 1) * rn(d, 1, 300) end)
  G.check('div' .. s, function(d) return rn(d, 1000) / pos(d, 1000) end)
  G.check('pow' .. s, function(d) return pos(d, 1000):pow(rn(d, 1000)) end)
  G.check('maximum/minimum' .. s, function(d)
    local a, b = rn(d, 300), rn(d, 300)
    return torch.maximum(a, b), torch.minimum(a, b)
  end)
  G.check('scalar ops' .. s, function(d)
    local a = rn(d, 777)
    return a + 2.5, 3 - a, a * -1.25, a / 7, 2 / pos(d, 10), a ^ 2
  end)
  G.check('unary' .. s, function(d)
    local a, p = rn(d, 50, 40), pos(d, 50, 40)
    return -a, a:exp(), p:log(), p:sqrt(), a:abs(), a:relu(), a:sigmoid(), a:tanh(), a:sign()
  end)
  G.check('clamp' .. s, function(d)
    local a = rn(d, 1000)
    return a:clamp(-0.5, 0.5), a:clamp(-0.2, 1e9)
  end)
  G.check('strided inputs' .. s, function(d)
    local a, b = rn(d, 40, 30), rn(d, 30, 40)
    return a:t() + b, a:t():exp(), a:narrow(2, 3, 10) * 2, rn(d, 4, 5, 6, 7):permute(4, 2, 3, 1):contiguous()
  end)
  G.check('comparisons' .. s, function(d)
    local a, b = rn(d, 64, 64), rn(d, 64, 64)
    b[1] = a[1]
    return a:eq(b), a:ne(b), a:lt(b), a:le(b), a:gt(b), a:ge(b), a:gt(0.25), a:le(-0.5)
  end)
  G.check('in place' .. s, function(d)
    local a, b = rn(d, 100, 10), rn(d, 10)
    a:add_(b); a:mul_(0.5); a:div_(3); a:sub_(b); a:clamp_(-1, 1)
    local z = rn(d, 7, 7); z:zero_()
    local f = rn(d, 7, 7); f:fill_(-2.5)
    local c = rn(d, 9, 9); c:copy_(rn(d, 9))
    return a, z, f, c
  end)
end

G.check('int64 ops', function(d)
  local a = torch.randint(-50, 50, { 300 }):to(d)
  local b = torch.randint(1, 9, { 300 }):to(d)
  return a + b, a - b, a * b, a / b, a:abs(), -a, a:clamp(-10, 10), a:eq(b), a:lt(3), a:pow(2), torch.maximum(a, b)
end)
G.check('bool ops', function(d)
  local a, b = randn(d, 200):gt(0), randn(d, 200):gt(0)
  return a + b, a * b, a:eq(b), a:ne(b)
end)
G.check('dtype conversion', function(d)
  local a = randn(d, 500) * 40
  return a:double(), a:long(), a:long():float(), a:gt(0):float(), a:double():float(), a:to('bool')
end)
G.check('creation', function(d)
  local o = { device = d }
  return torch.zeros(3, 4, o), torch.ones(5, o), torch.full({ 2, 3 }, 7.5, o), torch.arange(0, 10, 0.5, o),
    torch.eye(5, o), torch.arange(1, 20, 3, o)
end)
G.check('cat and stack', function(d)
  local a, b = randn(d, 3, 4), randn(d, 5, 4)
  return torch.cat({ a, b }, 1), torch.cat({ a:t(), b:t() }, 2), torch.stack({ a, a * 2 }, 2)
end)

-- ---------------------------------------------------------------- reductions
G.check('sum and mean', function(d)
  local a = randn(d, 37, 129, 65)
  return a:sum(), a:mean(), a:sum(1), a:sum(2), a:sum(3), a:sum(2, true), a:mean(3), a:transpose(1, 3):sum(1)
end, { tol = R, floor = 1 })
G.check('sum of 2^22 elements', function(d) return randn(d, 4194304):sum(), rand(d, 2048, 2048):mean() end,
  { tol = R, floor = 1 })
G.check('column sums (bias gradient shape)', function(d) return randn(d, 8192, 256):sum(1) end, { tol = R, floor = 1 })
G.check('max and min', function(d)
  local a = randn(d, 33, 250, 7)
  local v1, i1 = a:max(2)
  local v2, i2 = a:min(3, true)
  local v3, i3 = a:transpose(1, 2):max(1)   -- strided input
  return a:max(), a:min(), v1, i1, v2, i2, v3, i3
end, { tol = R })
G.check('argmax and argmin', function(d)
  local a = randn(d, 64, 1000)
  return a:argmax(2), a:argmin(1), a:argmax(), a:transpose(1, 2):argmax(2)
end)
G.check('argmax ties pick the first', function(d)
  local a = torch.tensor({ { 1, 3, 3, 0 }, { 2, 2, 2, 2 } }, { dtype = 'float32' }):to(d)
  return a:argmax(2), a:argmin(2)
end)
G.check('int64 reductions', function(d)
  local a = torch.randint(-1000, 1000, { 50, 300 }):to(d)
  local v, i = a:max(2)
  return a:sum(), a:sum(1), v, i, a:argmin(2)
end)
G.check('bool sum', function(d) return randn(d, 1000):gt(0):sum() end)

-- ---------------------------------------------------------------- softmax and losses
for _, dt in ipairs({ 'float32', 'float64' }) do
  G.check('softmax and log_softmax ' .. dt, function(d)
    local a = randn(d, 64, 1000):to(dt) * 3
    return a:softmax(2), a:log_softmax(2), a:softmax(1), a:log_softmax(1)
  end)
end
G.check('softmax backward', function(d)
  local x = randn(d, 32, 300):requires_grad_(true)
  local g = randn(d, 32, 300)
  local y = x:softmax(2)
  y:backward(g)
  local x2 = randn(d, 32, 300):requires_grad_(true)
  x2:log_softmax(1):backward(g)
  return y, x.grad, x2.grad
end)
G.check('cross entropy forward and backward', function(d)
  local x = randn(d, 64, 10):requires_grad_(true)
  local t = torch.randint(1, 11, { 64 }):to(d)
  local loss = nn.CrossEntropyLoss()(x, t)
  loss:backward()
  return loss, x.grad
end, { tol = R })
G.check('nll and mse losses', function(d)
  local x = randn(d, 100, 7):log_softmax(2):detach():requires_grad_(true)
  local t = torch.randint(1, 8, { 100 }):to(d)
  local nll = nn.NLLLoss()(x, t)
  nll:backward()
  local a, b = randn(d, 30, 5):requires_grad_(true), randn(d, 30, 5)
  local mse = nn.MSELoss()(a, b)
  mse:backward()
  return nll, x.grad, mse, a.grad
end, { tol = R })

-- ---------------------------------------------------------------- indexing
G.check('index_select and its backward', function(d)
  local x = randn(d, 50, 20):requires_grad_(true)
  local idx = torch.tensor({ 3, 1, 3, 50, 7, 7, 7 }):to(d)
  local y = x:index_select(1, idx)
  local z = x:index_select(2, torch.tensor({ 20, 1, 2 }):to(d))
  local loss = y:sum() * 2 + (z * z):sum()
  loss:backward()
  return y, z, x.grad
end, { tol = R })

-- ---------------------------------------------------------------- matrix products
for _, dt in ipairs({ 'float32', 'float64' }) do
  G.check('matmul ' .. dt, function(d)
    local a, b = randn(d, 128, 256):to(dt), randn(d, 256, 64):to(dt)
    local at, bt = randn(d, 256, 128):to(dt), randn(d, 64, 256):to(dt)
    return a:matmul(b), at:t():matmul(b), a:matmul(bt:t()), at:t():mm(bt:t()),
      torch.addmm(randn(d, 128, 64):to(dt), a, b)
  end, { tol = R, floor = 1 })
  G.check('batched matmul ' .. dt, function(d)
    local a, b = randn(d, 8, 32, 48):to(dt), randn(d, 8, 48, 16):to(dt)
    return a:matmul(b), a:matmul(randn(d, 48, 16):to(dt)), a:matmul(randn(d, 48):to(dt)), randn(d, 48):to(dt):matmul(randn(d, 48, 5):to(dt))
  end, { tol = R, floor = 1 })
end
G.check('int64 matmul', function(d)
  return torch.randint(-5, 5, { 7, 9 }):to(d):matmul(torch.randint(-5, 5, { 9, 4 }):to(d))
end)
G.check('linear forward and backward', function(d)
  local x = randn(d, 64, 784):requires_grad_(true)
  local w = randn(d, 256, 784):requires_grad_(true)
  local b = randn(d, 256):requires_grad_(true)
  local y = x:matmul(w:t()) + b
  y:backward(randn(d, 64, 256))
  return y, x.grad, w.grad, b.grad
end, { tol = R, floor = 1 })

-- ---------------------------------------------------------------- random draws on the device
G.check('rand, randn, randint on the device', function(d)
  local o = { device = d }
  return torch.rand(1000, o), torch.randn(1001, o), torch.randint(-3, 17, { 999 }, o),
    torch.rand(100, { device = d, dtype = 'float64' }), torch.randn(100, { device = d, dtype = 'float64' })
end, { tol = 1e-6 })
G.check('uniform_ and normal_ on a strided view', function(d)
  local a = torch.zeros(40, 30, { device = d })
  a:uniform_(-2, 3)
  local b = torch.zeros(40, 30, { device = d }):t()
  b:normal_(1, 0.5)
  return a, b
end, { tol = 1e-6 })
G.check('dropout mask', function(d)
  local x = torch.ones(5000, { device = d })
  local m = nn.Dropout(0.3)
  m:train()
  return m(x)
end)

-- ---------------------------------------------------------------- optimizers
local function optim_check(name, make)
  G.check(name, function(d)
    local p = randn(d, 1000):requires_grad_(true)
    local w = randn(d, 1000)
    local opt = make({ p })
    for _ = 1, 5 do
      opt:zero_grad()
      local loss = (p * w):sum() + (p * p):sum() * 0.1
      loss:backward()
      opt:step()
    end
    return p:detach()
  end)
end
optim_check('SGD momentum nesterov weight decay', function(ps)
  return optim.SGD(ps, { lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 1e-2 })
end)
optim_check('SGD momentum dampening', function(ps) return optim.SGD(ps, { lr = 0.1, momentum = 0.5, dampening = 0.1 }) end)
optim_check('Adam', function(ps) return optim.Adam(ps, { lr = 1e-2, weight_decay = 1e-3 }) end)
optim_check('AdamW', function(ps) return optim.AdamW(ps, { lr = 1e-2, weight_decay = 1e-1 }) end)

os.exit(G.finish() and 0 or 1)
