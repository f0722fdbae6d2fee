-- bench/train_step.lua: one training step of a tiny model, nn.Linear(5, 2) on a 30x5
-- batch (forward, MSE loss, zero_grad, backward, SGD step); at this size the time is
-- the framework's overhead, not arithmetic.  Twin: bench/train_step.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)

local model = nn.Linear(5, 2)
local criterion = nn.MSELoss()
local opt = optim.SGD(model:parameters(), {lr = 0.01})
local x, y = torch.randn(30, 5), torch.randn(30, 2)

local function step()
  local loss = criterion(model(x), y)
  opt:zero_grad()
  loss:backward()
  opt:step()
end

bench.report('train_step.linear_5x2_b30', bench.measure(step), 's')
