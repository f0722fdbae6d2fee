-- bench/cnn.lua: one training step of pytorch/examples' MNIST network (two 3x3 convs
-- 1->32->64, max pool, two dropouts, 9216->128->10, log_softmax, nll_loss) on a batch of
-- 64, with Adadelta (lr 1.0).  Twin: bench/cnn.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)
local F = nn.functional

local Net, parent = torch.class('BenchMnistNet', 'nn.Module')
function Net:__init()
  parent.__init(self)
  self.conv1 = nn.Conv2d(1, 32, 3, 1)
  self.conv2 = nn.Conv2d(32, 64, 3, 1)
  self.dropout1 = nn.Dropout(0.25)
  self.dropout2 = nn.Dropout(0.5)
  self.fc1 = nn.Linear(9216, 128)
  self.fc2 = nn.Linear(128, 10)
end
function Net:forward(x)
  x = F.relu(self.conv1(x))
  x = F.relu(self.conv2(x))
  x = F.max_pool2d(x, 2)
  x = self.dropout1(x)
  x = torch.flatten(x, 2)
  x = F.relu(self.fc1(x))
  x = self.dropout2(x)
  return F.log_softmax(self.fc2(x), 2)
end

local model = Net()
local opt = optim.Adadelta(model:parameters(), { lr = 1.0 })
local x = torch.randn(64, 1, 28, 28)
local y = torch.randint(1, 11, { 64 })

local function step()
  opt:zero_grad()
  local loss = F.nll_loss(model(x), y)
  loss:backward()
  opt:step()
end

bench.report('cnn.mnist_step_b64', bench.measure(step, { budget = 4.0 }), 's')
