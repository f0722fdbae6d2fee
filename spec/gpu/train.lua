-- spec/gpu/train.lua: a short training run of a 784-256-10 MLP with SGD (momentum) and
-- cross-entropy on random data, on the GPU and on the CPU from the same seed: the losses
-- must agree step by step (relative 1e-3, rounding compounds over steps).  Also the
-- script spec/gpu/check runs under compute-sanitizer (GPU_TRAIN_STEPS=3 keeps it short).
--   build-gpu/dplua spec/gpu/train.lua [steps]
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local G = dofile(here .. 'common.lua')
local steps = tonumber(arg and arg[1] or os.getenv('GPU_TRAIN_STEPS') or '') or 20

G.require_device()

local function run(dev)
  torch.manual_seed(7)
  local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
  local x = torch.randn(64, 784)
  local y = torch.randint(1, 11, { 64 })
  model:to(dev)
  x, y = x:to(dev), y:to(dev)
  local opt = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
  local crit = nn.CrossEntropyLoss()
  local losses = {}
  for i = 1, steps do
    opt:zero_grad()
    local loss = crit(model(x), y)
    loss:backward()
    opt:step()
    losses[i] = loss:item()
  end
  return losses, model
end

local ok, err = pcall(function()
  local lc = run('cpu')
  local lg, model = run(G.dev)
  for _, p in ipairs(model:parameters()) do
    assert(p.is_cuda == G.on_gpu, 'a parameter left the device')
  end
  for i = 1, steps do
    local d = math.abs(lg[i] - lc[i])
    assert(d <= 1e-3 * math.max(math.abs(lc[i]), 1e-3),
      string.format('step %d: loss %.7g on the GPU, %.7g on the CPU', i, lg[i], lc[i]))
  end
  assert(lg[steps] < lg[1] or steps < 3, string.format('the loss did not fall (%.4g -> %.4g)', lg[1], lg[steps]))
  print(string.format('loss %.5f -> %.5f over %d steps', lg[1], lg[steps], steps))
end)
G.record(string.format('MLP training, %d steps, GPU matches CPU', steps), ok, err)
os.exit(G.finish() and 0 or 1)
