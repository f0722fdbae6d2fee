-- The PyTorch tutorials' spatial transformer network: a localisation network predicts an
-- affine transform, F.affine_grid and F.grid_sample apply it, then the MNIST LeNet
-- classifies.  Synthetic MNIST-shaped digits (random strokes, shifted and rotated).
--   dplua examples/programs/spatial_transformer.lua [epochs]
local F = nn.functional
local epochs = tonumber(arg and arg[1]) or 1
torch.manual_seed(4)

-- ten stroke templates, each sample randomly rotated and shifted with affine_grid itself
local templates = torch.zeros(10, 1, 28, 28)
for c = 1, 10 do
  for _ = 1, 3 do
    local r = torch.randint(6, 22, { 4 }):tolist()
    for t = 0, 1, 1 / 20 do
      local y, x = math.floor(r[1] + t * (r[3] - r[1])), math.floor(r[2] + t * (r[4] - r[2]))
      templates[{ c, 1, { y - 1, y + 1 }, { x - 1, x + 1 } }] = 1
    end
  end
end
local function digits(n)
  local y = torch.randint(1, 11, { n })
  local angle = (torch.rand(n) - 0.5) * 0.6
  local shift = (torch.rand(n, 2) - 0.5) * 0.3
  local theta = torch.stack({ torch.stack({ angle:cos(), -angle:sin(), shift[{ {}, 1 }] }, 2),
                              torch.stack({ angle:sin(), angle:cos(), shift[{ {}, 2 }] }, 2) }, 2)
  local x = F.grid_sample(templates:index_select(1, y), F.affine_grid(theta, { n, 1, 28, 28 }))
  return ((x - 0.1307) / 0.3081), y
end
local train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits(512)),
  { batch_size = 64, shuffle = true })
local test_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits(256)),
  { batch_size = 64 })

local Net, parent = torch.class('Net', 'nn.Module')
function Net:__init()
  parent.__init(self)
  self.conv1 = nn.Conv2d(1, 10, { kernel_size = 5 })
  self.conv2 = nn.Conv2d(10, 20, { kernel_size = 5 })
  self.conv2_drop = nn.Dropout2d()
  self.fc1 = nn.Linear(320, 50)
  self.fc2 = nn.Linear(50, 10)
  -- Spatial transformer localization-network
  self.localization = nn.Sequential(
    nn.Conv2d(1, 8, { kernel_size = 7 }),
    nn.MaxPool2d(2, { stride = 2 }),
    nn.ReLU(true),
    nn.Conv2d(8, 10, { kernel_size = 5 }),
    nn.MaxPool2d(2, { stride = 2 }),
    nn.ReLU(true))
  -- Regressor for the 3 * 2 affine matrix
  self.fc_loc = nn.Sequential(
    nn.Linear(10 * 3 * 3, 32),
    nn.ReLU(true),
    nn.Linear(32, 3 * 2))
  -- Initialize the weights/bias with identity transformation
  self.fc_loc[3].weight.data:zero_()
  self.fc_loc[3].bias.data:copy_(torch.tensor({ 1, 0, 0, 0, 1, 0 }, { dtype = torch.float }))
end
-- Spatial transformer network forward function
function Net:stn(x)
  local xs = self.localization(x)
  xs = xs:view(-1, 10 * 3 * 3)
  local theta = self.fc_loc(xs)
  theta = theta:view(-1, 2, 3)
  local grid = F.affine_grid(theta, x:size())
  x = F.grid_sample(x, grid)
  return x
end
function Net:forward(x)
  -- transform the input
  x = self:stn(x)
  -- Perform the usual forward pass
  x = F.relu(F.max_pool2d(self.conv1(x), 2))
  x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
  x = x:view(-1, 320)
  x = F.relu(self.fc1(x))
  x = F.dropout(x, { training = self.training })
  x = self.fc2(x)
  return F.log_softmax(x, 2)
end

local model = Net()
local optimizer = optim.SGD(model:parameters(), { lr = 0.01 })

local function train(epoch)
  model:train()
  local batch_idx = 0
  for data, target in train_loader:iter() do
    optimizer:zero_grad()
    local output = model(data)
    local loss = F.nll_loss(output, target)
    loss:backward()
    optimizer:step()
    if batch_idx % 4 == 0 then
      print(('Train Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f'):format(epoch, batch_idx * data:size(1),
        #train_loader.dataset, 100 * batch_idx / #train_loader, loss:item()))
    end
    batch_idx = batch_idx + 1
  end
end

local function test()
  torch.no_grad(function()
    model:eval()
    local test_loss, correct = 0, 0
    for data, target in test_loader:iter() do
      local output = model(data)
      -- sum up batch loss
      test_loss = test_loss + F.nll_loss(output, target, { reduction = 'sum' }):item()
      -- get the index of the max log-probability
      local _, pred = output:max(2, true)
      correct = correct + pred:eq(target:view_as(pred)):sum():item()
    end
    test_loss = test_loss / #test_loader.dataset
    print(('\nTest set: Average loss: %.4f, Accuracy: %d/%d (%.0f%%)\n'):format(test_loss, correct,
      #test_loader.dataset, 100 * correct / #test_loader.dataset))
  end)
end

for epoch = 1, epochs do
  train(epoch)
  test()
end
