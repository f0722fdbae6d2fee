-- bench/conv.lua: the two convolutions of pytorch/examples' MNIST network, batch 64,
-- forward and backward (weight and bias gradients; the second layer's input gradient
-- too, the first layer's input is the data): Conv2d(1, 32, 3) on 28x28 and
-- Conv2d(32, 64, 3) on 26x26, plus each layer's forward alone.  Twin: bench/conv.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)

local conv1 = nn.Conv2d(1, 32, 3, { stride = 1 })
local conv2 = nn.Conv2d(32, 64, 3, { stride = 1 })
local x1 = torch.randn(64, 1, 28, 28)
local x2 = torch.randn(64, 32, 26, 26):requires_grad_()
local g1 = torch.randn(64, 32, 26, 26)
local g2 = torch.randn(64, 64, 24, 24)

local function step1()
  conv1:zero_grad()
  conv1(x1):backward(g1)
end

local function step2()
  conv2:zero_grad()
  x2.grad = nil
  conv2(x2):backward(g2)
end

bench.report('conv.mnist_conv1_fwd_bwd_b64', bench.measure(step1, { min_samples = 10 }), 's')
bench.report('conv.mnist_conv2_fwd_bwd_b64', bench.measure(step2, { min_samples = 10 }), 's')
bench.report('conv.mnist_conv1_fwd_b64', bench.measure(function() torch.no_grad(function() return conv1(x1) end) end,
  { min_samples = 10 }), 's')
bench.report('conv.mnist_conv2_fwd_b64', bench.measure(function() torch.no_grad(function() return conv2(x2) end) end,
  { min_samples = 10 }), 's')
