-- bench/mlp.lua: one epoch of a 784-256-10 MLP (ReLU, cross-entropy, SGD lr 0.01,
-- batch 64) over 60,000 synthetic samples held in tensors; batches are gathered with
-- index_select along a fresh random permutation each epoch, the last one partial.
-- Reports samples per second.  Twin: bench/mlp.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)
math.randomseed(0)

local N, D, H, C, B = 60000, 784, 256, 10, 64
local X = torch.randn(N, D)
local Y = torch.randint(1, C + 1, {N})          -- class indices 1..C, int64
local model = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C))
local criterion = nn.CrossEntropyLoss()
local opt = optim.SGD(model:parameters(), {lr = 0.01})

-- A random permutation of 1..n as an int64 tensor (Fisher-Yates).
local function permutation(n)
  local p = {}
  for i = 1, n do p[i] = i end
  for i = n, 2, -1 do
    local j = math.random(i)
    p[i], p[j] = p[j], p[i]
  end
  return torch.tensor(p)
end

-- Trains on the first `batches` batches of a fresh permutation (all when nil).
local function epoch(batches)
  local perm = permutation(N)
  local done = 0
  for s = 1, N, B do
    local idx = perm:narrow(1, s, math.min(B, N - s + 1))
    local loss = criterion(model(X:index_select(1, idx)), Y:index_select(1, idx))
    opt:zero_grad()
    loss:backward()
    opt:step()
    done = done + 1
    if batches and done >= batches then break end
  end
end

epoch(100)                                      -- warm up
local times = {}
local timer = torch.Timer()
for i = 1, tonumber(os.getenv('BENCH_MLP_EPOCHS') or '3') do
  timer:reset()
  epoch()
  times[i] = timer:time().real
end
bench.report('mlp.epoch_784_256_10_b64', N / bench.median(times), 'samples/s')
