-- spec/gpu/parallel.lua: nn.DataParallel over every CUDA device (spec/gpu/check runs it
-- with DPLUA_CUDA_VIRTUAL=2, so one GPU gives two): outputs, parameter gradients, input
-- gradients and a few SGD steps against the same model on the CPU, gathering on another
-- device, inputs that start on the CPU, and the wrong-device error.
--   DPLUA_CUDA_VIRTUAL=2 build-gpu/dplua spec/gpu/parallel.lua
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local G = dofile(here .. 'common.lua')
G.require_device()
local R = G.REDUCTION
local n = torch.cuda.device_count()
if n < 2 then
  print('one CUDA device: run with DPLUA_CUDA_VIRTUAL=2 to check DataParallel')
  print('0 passed, 1 failed')
  os.exit(1)
end
local ids = {}
for i = 0, n - 1 do ids[#ids + 1] = 'cuda:' .. i end

local function mlp(seed)
  torch.manual_seed(seed)
  return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
end

local function expect_close(what, g, c, tol)
  local ok, msg = G.compare(g, c, tol or R, 1)
  if not ok then error(what .. ': ' .. msg, 0) end
end

G.expect('outputs, parameter and input gradients match the CPU', function()
  local ref, model = mlp(7), mlp(7)
  model:to('cuda:0')
  local dp = nn.DataParallel(model, { device_ids = ids })
  local x, y = torch.randn(37, 6), torch.randn(37, 3)
  local xr, xg = x:clone():requires_grad_(true), x:to('cuda:0'):requires_grad_(true)
  local out_ref, out = ref(xr), dp(xg)
  assert(tostring(out.device) == 'cuda:0', 'output on ' .. tostring(out.device))
  expect_close('output', out, out_ref)
  nn.MSELoss()(out_ref, y):backward()
  nn.MSELoss()(out, y:to('cuda:0')):backward()
  local pr, pm = ref:parameters(), model:parameters()
  for i = 1, #pr do
    assert(pm[i].grad, 'parameter ' .. i .. ' has no gradient')
    assert(tostring(pm[i].grad.device) == 'cuda:0', 'gradient ' .. i .. ' on ' .. tostring(pm[i].grad.device))
    expect_close('gradient of parameter ' .. i, pm[i].grad, pr[i].grad)
  end
  expect_close('input gradient', xg.grad, xr.grad)
  return true
end)

G.expect('SGD steps under DataParallel follow the CPU run', function()
  local function run(dev)
    local model = mlp(3)
    model:to(dev == 'cpu' and 'cpu' or 'cuda:0')
    local net = dev == 'cpu' and model or nn.DataParallel(model, { device_ids = ids })
    local opt = optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 })
    torch.manual_seed(11)
    local x, y = torch.randn(50, 6), torch.randn(50, 3)
    if dev ~= 'cpu' then x, y = x:to('cuda:0'), y:to('cuda:0') end
    local losses = {}
    for i = 1, 6 do
      opt:zero_grad()
      local loss = nn.MSELoss()(net(x), y)
      loss:backward()
      opt:step()
      losses[i] = loss:item()
    end
    return losses
  end
  local lc, lg = run('cpu'), run('cuda')
  for i = 1, #lc do
    assert(math.abs(lc[i] - lg[i]) <= 1e-4 * math.max(1, math.abs(lc[i])),
      string.format('step %d: loss %.7g under DataParallel, %.7g on the CPU', i, lg[i], lc[i]))
  end
  return lg[#lg] < lg[1]
end)

G.expect('output_device and inputs that start on the CPU', function()
  local ref, model = mlp(5), mlp(5)
  model:to('cuda:0')
  local last = ids[#ids]
  local dp = nn.DataParallel(model, { device_ids = ids, output_device = last })
  local x = torch.randn(9, 6)
  local out = dp(x)
  assert(tostring(out.device) == last, 'output on ' .. tostring(out.device) .. ', wanted ' .. last)
  expect_close('output', out, ref(x))
  out:sum():backward()
  ref(x):sum():backward()
  expect_close('gradient', model:parameters()[1].grad, ref:parameters()[1].grad)
  return true
end)

G.expect('a module left on the CPU raises the device error', function()
  local dp = nn.DataParallel(mlp(1), { device_ids = ids })
  local ok, err = pcall(dp, torch.randn(4, 6):to('cuda:0'))
  assert(not ok, 'no error')
  assert(tostring(err):find('cuda:0', 1, true), 'message: ' .. tostring(err))
  return true
end)

os.exit(G.finish() and 0 or 1)
