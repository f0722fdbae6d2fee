-- bench/gpu_mlp.lua: one training step of a 784-256-10 MLP (Linear, ReLU, Linear,
-- cross-entropy, SGD with momentum) at batch 64 on cuda:0: small kernels, so this
-- measures the per-step overhead of the engine and the launches.  Twin: bench/gpu_mlp.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
local dev = bench.gpu_setup('gpu_mlp')
if not dev then return end
local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)):to(dev)
local opt = optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
local crit = nn.CrossEntropyLoss()
local x = torch.randn(64, 784, { device = dev })
local y = torch.randint(1, 11, { 64 }, { device = dev })
local REPS = 20

local function steps()
  for _ = 1, REPS do
    opt:zero_grad()
    local loss = crit(model(x), y)
    loss:backward()
    opt:step()
  end
  torch.cuda.synchronize()
end

bench.report('gpu_mlp.step_784_256_10_b64', bench.measure(steps, { min_samples = 10 }) / REPS, 's')
