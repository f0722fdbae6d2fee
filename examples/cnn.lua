-- examples/cnn.lua: pytorch/examples' MNIST network (two 3x3 convolutions, max pooling,
-- two dropouts, 9216 -> 128 -> 10, log_softmax; Adadelta with StepLR), trained on generated
-- MNIST-shaped data: ten classes of 28x28 images, each a fixed random stroke pattern drawn
-- again with a random shift and noise.  It prints PyTorch's example's log lines and ends
-- with the test accuracy.
--
--   dplua examples/cnn.lua [--epochs 3] [--device cpu|cuda:0] [--train-size 2560]
--                          [--test-size 512] [--batch-size 64] [--lr 1.0] [--gamma 0.7]
--                          [--log-interval 10] [--min-accuracy 0.95]
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'
local F = nn.functional

local args = { epochs = 3, device = torch.cuda.is_available() and 'cuda:0' or 'cpu',
               ['train-size'] = 2560, ['test-size'] = 512, ['batch-size'] = 64, lr = 1.0,
               gamma = 0.7, ['log-interval'] = 10, ['min-accuracy'] = 0.95, seed = 1 }
local i = 1
while arg and arg[i] do
  local key = arg[i]:match('^%-%-(.+)$')
  if not key or args[key] == nil or arg[i + 1] == nil then
    error(('usage: dplua examples/cnn.lua [--%s VALUE] ...; got %q'):format('epochs', arg[i]), 0)
  end
  args[key] = key == 'device' and arg[i + 1] or assert(tonumber(arg[i + 1]), 'a number after ' .. arg[i])
  i = i + 2
end
torch.manual_seed(args.seed)
local device = torch.device(args.device)

-- the network of pytorch/examples/mnist/main.py
local Net, parent = torch.class('Net', 'nn.Module')

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

-- MNIST-shaped data: class c is a pattern of a few thick strokes; a sample is its class's
-- pattern shifted by up to 2 pixels, with noise, in [0, 1], then normalised as MNIST is
local patterns = torch.zeros(10, 28, 28)
for c = 1, 10 do
  for _ = 1, 4 do
    local r, s = torch.randint(5, 22, { 2 }):tolist(), torch.randint(5, 22, { 2 }):tolist()
    for t = 0, 1, 1 / 24 do
      local y, x = math.floor(r[1] + t * (s[1] - r[1])), math.floor(r[2] + t * (s[2] - r[2]))
      patterns[c]:narrow(1, y - 1, 3):narrow(2, x - 1, 3):fill_(1)
    end
  end
end

local function make(n)
  local labels = torch.randint(1, 11, { n })
  local images = torch.zeros(n, 1, 28, 28)
  local shifts = torch.randint(-2, 3, { n, 2 }):tolist()
  local clean = patterns:index_select(1, labels)
  for k = 1, n do
    local dy, dx = shifts[k][1], shifts[k][2]
    images[k][1]:copy_(torch.roll(clean[k], { dy, dx }, { 1, 2 }))
  end
  images = (images * 0.8 + torch.rand(n, 1, 28, 28) * 0.3):clamp(0, 1)
  return (images - 0.1307) / 0.3081, labels
end

local train_x, train_y = make(args['train-size'])
local test_x, test_y = make(args['test-size'])
local train_loader = torch.data.DataLoader(torch.data.TensorDataset(train_x, train_y),
  { batch_size = args['batch-size'], shuffle = true })
local test_loader = torch.data.DataLoader(torch.data.TensorDataset(test_x, test_y),
  { batch_size = 256 })

local function train(model, optimizer, epoch)
  model:train()
  local batch = 0
  for data, target in train_loader:iter() do
    data, target = data:to(device), target:to(device)
    optimizer:zero_grad()
    local output = model(data)
    local loss = F.nll_loss(output, target)
    loss:backward()
    optimizer:step()
    if batch % args['log-interval'] == 0 then
      local seen = batch * args['batch-size']
      print(('Train Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f'):format(epoch, seen, #train_loader.dataset,
        100 * batch / #train_loader, loss:item()))
    end
    batch = batch + 1
  end
end

local function test(model)
  model:eval()
  local test_loss, correct = 0, 0
  torch.no_grad(function()
    for data, target in test_loader:iter() do
      data, target = data:to(device), target:to(device)
      local output = model(data)
      test_loss = test_loss + F.nll_loss(output, target, { reduction = 'sum' }):item()
      local pred = output:argmax(2, true)
      correct = correct + pred:eq(target:view_as(pred)):sum():item()
    end
  end)
  local n = #test_loader.dataset
  test_loss = test_loss / n
  print(('\nTest set: Average loss: %.4f, Accuracy: %d/%d (%.0f%%)\n'):format(test_loss, correct, n,
    100 * correct / n))
  return correct / n
end

local model = Net():to(device)
local optimizer = optim.Adadelta(model:parameters(), { lr = args.lr })
local scheduler = optim.lr_scheduler.StepLR(optimizer, { step_size = 1, gamma = args.gamma })
local accuracy
for epoch = 1, args.epochs do
  train(model, optimizer, epoch)
  accuracy = test(model)
  scheduler:step()
end
if accuracy < args['min-accuracy'] then
  error(('the network reached %.1f%% test accuracy, below %.1f%%'):format(100 * accuracy,
    100 * args['min-accuracy']), 0)
end
