-- The PyTorch tutorials' quickstart: an MLP on FashionMNIST-shaped data (synthetic 28x28
-- images of ten classes), a train and a test loop, saving and loading the model.
--   dplua examples/programs/quickstart.lua [epochs]
local epochs = tonumber(arg and arg[1]) or 2
torch.manual_seed(0)

local function fake_fashion(n)
  local protos = torch.Generator():manual_seed(7)
  local templates = torch.rand(10, 1, 28, 28, { generator = protos })
  local y = torch.randint(1, 11, { n })
  local X = (templates:index_select(1, y) + 0.5 * torch.rand(n, 1, 28, 28)):clamp(0, 1)
  return torch.utils.data.TensorDataset(X, y)
end
local training_data, test_data = fake_fashion(1024), fake_fashion(256)

local batch_size = 64
local train_dataloader = torch.utils.data.DataLoader(training_data, { batch_size = batch_size })
local test_dataloader = torch.utils.data.DataLoader(test_data, { batch_size = batch_size })
for X, y in test_dataloader:iter() do
  print(('Shape of X [N, C, H, W]: %s'):format(X.shape))
  print(('Shape of y: %s %s'):format(y.shape, y.dtype))
  break
end

local device = torch.cuda.is_available() and 'cuda' or 'cpu'
print(('Using %s device'):format(device))

local NeuralNetwork, parent = torch.class('NeuralNetwork', 'nn.Module')
function NeuralNetwork:__init()
  parent.__init(self)
  self.flatten = nn.Flatten()
  self.linear_relu_stack = nn.Sequential(
    nn.Linear(28 * 28, 512),
    nn.ReLU(),
    nn.Linear(512, 512),
    nn.ReLU(),
    nn.Linear(512, 10))
end
function NeuralNetwork:forward(x)
  x = self.flatten(x)
  local logits = self.linear_relu_stack(x)
  return logits
end

local model = NeuralNetwork():to(device)
print(model)

local loss_fn = nn.CrossEntropyLoss()
local optimizer = torch.optim.SGD(model:parameters(), { lr = 1e-3 })

local function train(dataloader, model, loss_fn, optimizer)
  local size = #dataloader.dataset
  model:train()
  local batch = 0
  for X, y in dataloader:iter() do
    X, y = X:to(device), y:to(device)
    -- Compute prediction error
    local pred = model(X)
    local loss = loss_fn(pred, y)
    -- Backpropagation
    loss:backward()
    optimizer:step()
    optimizer:zero_grad()
    if batch % 10 == 0 then
      local current = (batch + 1) * #X
      print(('loss: %7f  [%5d/%5d]'):format(loss:item(), current, size))
    end
    batch = batch + 1
  end
end

local function test(dataloader, model, loss_fn)
  local size = #dataloader.dataset
  local num_batches = #dataloader
  model:eval()
  local test_loss, correct = 0, 0
  torch.no_grad(function()
    for X, y in dataloader:iter() do
      X, y = X:to(device), y:to(device)
      local pred = model(X)
      test_loss = test_loss + loss_fn(pred, y):item()
      correct = correct + pred:argmax(2):eq(y):type(torch.float):sum():item()
    end
  end)
  test_loss = test_loss / num_batches
  correct = correct / size
  print(('Test Error: \n Accuracy: %.1f%%, Avg loss: %8f \n'):format(100 * correct, test_loss))
end

for t = 1, epochs do
  print(('Epoch %d\n-------------------------------'):format(t))
  train(train_dataloader, model, loss_fn, optimizer)
  test(test_dataloader, model, loss_fn)
end
print('Done!')

local path = os.tmpname()
torch.save(model:state_dict(), path)
print('Saved PyTorch Model State to model.pth')
model = NeuralNetwork():to(device)
model:load_state_dict(torch.load(path))
os.remove(path)

local classes = { 'T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt',
  'Sneaker', 'Bag', 'Ankle boot' }
model:eval()
local x, y = test_data:get(1)[1], test_data:get(1)[2]
torch.no_grad(function()
  x = x:to(device)
  local pred = model(x)
  local predicted, actual = classes[pred[1]:argmax(1):item()], classes[y]
  print(('Predicted: "%s", Actual: "%s"'):format(predicted, actual))
end)
