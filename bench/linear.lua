-- bench/linear.lua: forward and backward of nn.Linear(1024, 1024) on a 4096x1024 batch
-- (the output's gradient given; weight and bias gradients computed, the input needs
-- none): two 8.6 GFLOP GEMMs and a column sum.  Twin: bench/linear.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)

local model = nn.Linear(1024, 1024)
local x = torch.randn(4096, 1024)
local grad = torch.randn(4096, 1024)

local function step()
  model:zero_grad()
  local y = model(x)
  y:backward(grad)
end

bench.report('linear.fwd_bwd_1024_b4096', bench.measure(step, {min_samples = 10}), 's')
