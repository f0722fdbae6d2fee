-- bench/dp.lua: one training step (forward, cross-entropy, zero_grad, backward, SGD) of a
-- 784-256-10 MLP at batch 256, on one device and under nn.DataParallel over two devices,
-- and the bytes DataParallel copies between devices per step.  The devices are two GPUs
-- when there are (DPLUA_CUDA_VIRTUAL=2 makes two of one), else the CPU devices cpu:0 and
-- cpu:1, which share the host: there the parallel step can only cost more, and the
-- overhead line says how much (the aim is at most 20%).  Twin: bench/dp.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')

-- Two CUDA devices, else two CPU devices; a lone GPU has no second device to split over.
local ngpu = torch.cuda.device_count()
local cuda = ngpu >= 1
if not cuda and torch.cpu.device_count() < 2 then torch.cpu.set_device_count(2) end
bench.setup()
local devices = ngpu >= 2 and { 'cuda:0', 'cuda:1' } or not cuda and { 'cpu:0', 'cpu:1' } or nil
local home = torch.device(cuda and 'cuda:0' or 'cpu:0')

local D, H, C, B = 784, 256, 10, 256
torch.manual_seed(0)
local X = torch.randn(B, D):to(home)
local Y = torch.randint(1, C + 1, { B }):to(home)
local criterion = nn.CrossEntropyLoss()

local function trainer(model)
  local opt = optim.SGD(model:parameters(), { lr = 0.01 })
  return function()
    local loss = criterion(model(X), Y)
    opt:zero_grad()
    loss:backward()
    opt:step()
    if cuda then torch.cuda.synchronize() end
  end
end

local function mlp()
  torch.manual_seed(1)
  return nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C)):to(home)
end

local single = bench.measure(trainer(mlp()))
bench.report('dp.step_mlp_b256_1dev', single, 's')
if not devices then
  print('bench/dp.lua: one CUDA device; DPLUA_CUDA_VIRTUAL=2 splits it in two for DataParallel')
  return
end

local dp = nn.DataParallel(mlp(), { device_ids = devices })
local dp_step = trainer(dp)
local parallel = bench.measure(dp_step)
local before = torch._C.bytes_copied()
for _ = 1, 10 do dp_step() end
local bytes = (torch._C.bytes_copied() - before) / 10

local kind = cuda and 'cuda' or 'cpu'
bench.report('dp.step_mlp_b256_2dev_' .. kind, parallel, 's')
bench.report('dp.overhead_2dev_' .. kind, (parallel / single - 1) * 100, '%')
bench.report('dp.bytes_per_step_2dev_' .. kind, bytes, 'B')
