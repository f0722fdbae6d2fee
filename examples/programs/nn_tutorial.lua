-- The PyTorch tutorials' "What is torch.nn really?": logistic regression on MNIST-shaped
-- data written from scratch (weights, log_softmax, nll, accuracy, a manual update), then
-- refactored step by step with nn.functional, nn.Module, nn.Linear, optim, TensorDataset,
-- DataLoader and a validation set, and finally a CNN of nn.Sequential with Lambda layers.
-- Synthetic 28x28 digits instead of the MNIST download.
--   dplua examples/programs/nn_tutorial.lua [epochs]
local F = nn.functional
local epochs = tonumber(arg and arg[1]) or 2
torch.manual_seed(0)

local templates = torch.rand(10, 784, { generator = torch.Generator():manual_seed(11) }):gt(0.75):float()
local function digits(n)
  local y = torch.randint(1, 11, { n })
  return (templates:index_select(1, y) * 0.8 + torch.rand(n, 784) * 0.2), y
end
local x_train, y_train = digits(1000)
local x_valid, y_valid = digits(200)
local n, c = x_train.shape[1], x_train.shape[2]
print(x_train.shape, y_train:min():item(), y_train:max():item())

-- Neural net from scratch (no torch.nn)
local weights = torch.randn(784, 10) / math.sqrt(784)
weights:requires_grad_()
local bias = torch.zeros(10, { requires_grad = true })

local function log_softmax(x) return x - x:exp():sum(-1):log():unsqueeze(-1) end
local function model(xb) return log_softmax(xb:matmul(weights) + bias) end

local bs = 64
local xb = x_train[{ { 1, bs } }]
local preds = model(xb)
print(preds[1], preds.shape)

local function nll(input, target) return -input[{ torch.arange(1, target.shape[1] + 1), target }]:mean() end
local loss_func = nll
local yb = y_train[{ { 1, bs } }]
print(loss_func(preds, yb))

local function accuracy(out, yb_)
  local predsb = torch.argmax(out, 2)
  return predsb:eq(yb_):float():mean()
end
print(accuracy(preds, yb))

local lr = 0.5
for _ = 1, epochs do
  for i = 0, (n - 1) // bs do
    local start_i = i * bs + 1
    local end_i = math.min(start_i + bs - 1, n)
    xb = x_train[{ { start_i, end_i } }]
    yb = y_train[{ { start_i, end_i } }]
    local pred = model(xb)
    local loss = loss_func(pred, yb)
    loss:backward()
    torch.no_grad(function()
      weights:sub_(weights.grad * lr)
      bias:sub_(bias.grad * lr)
      weights.grad:zero_()
      bias.grad:zero_()
    end)
  end
end
print(loss_func(model(xb), yb), accuracy(model(xb), yb))

-- Using torch.nn.functional, nn.Module, nn.Linear, optim
loss_func = F.cross_entropy
local Mnist_Logistic, parent = torch.class('Mnist_Logistic', 'nn.Module')
function Mnist_Logistic:__init()
  parent.__init(self)
  self.lin = nn.Linear(784, 10)
end
function Mnist_Logistic:forward(xb_) return self.lin(xb_) end

-- Add validation: TensorDataset, DataLoader, fit
local train_ds = torch.utils.data.TensorDataset(x_train, y_train)
local valid_ds = torch.utils.data.TensorDataset(x_valid, y_valid)
local function get_data(train, valid, bs_)
  return torch.utils.data.DataLoader(train, { batch_size = bs_, shuffle = true }),
         torch.utils.data.DataLoader(valid, { batch_size = bs_ * 2 })
end

local function loss_batch(mdl, lf, xb_, yb_, opt)
  local loss = lf(mdl(xb_), yb_)
  if opt then
    loss:backward()
    opt:step()
    opt:zero_grad()
  end
  return loss:item(), #xb_
end

local function fit(epochs_, mdl, lf, opt, train_dl, valid_dl)
  for epoch = 0, epochs_ - 1 do
    mdl:train()
    for xb_, yb_ in train_dl:iter() do loss_batch(mdl, lf, xb_, yb_, opt) end
    mdl:eval()
    local losses, nums = {}, {}
    torch.no_grad(function()
      for xb_, yb_ in valid_dl:iter() do
        local l, num = loss_batch(mdl, lf, xb_, yb_)
        losses[#losses + 1], nums[#nums + 1] = l, num
      end
    end)
    local total, count = 0, 0
    for i = 1, #losses do total, count = total + losses[i] * nums[i], count + nums[i] end
    print(epoch, total / count)   -- np.sum(np.multiply(losses, nums)) / np.sum(nums)
  end
end

local function get_model()
  local m = Mnist_Logistic()
  return m, optim.SGD(m:parameters(), { lr = lr })
end
local train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
local m, opt = get_model()
fit(epochs, m, loss_func, opt, train_dl, valid_dl)

-- Switch to a CNN, with nn.Sequential and Lambda layers
local Lambda, lparent = torch.class('Lambda', 'nn.Module')
function Lambda:__init(func)
  lparent.__init(self)
  self.func = func
end
function Lambda:forward(x) return self.func(x) end

local function preprocess(x) return x:view(-1, 1, 28, 28) end
local cnn = nn.Sequential(
  Lambda(preprocess),
  nn.Conv2d(1, 16, { kernel_size = 3, stride = 2, padding = 1 }),
  nn.ReLU(),
  nn.Conv2d(16, 16, { kernel_size = 3, stride = 2, padding = 1 }),
  nn.ReLU(),
  nn.Conv2d(16, 10, { kernel_size = 3, stride = 2, padding = 1 }),
  nn.ReLU(),
  nn.AdaptiveAvgPool2d(1),
  Lambda(function(x) return x:view(x:size(1), -1) end))
local cnn_opt = optim.SGD(cnn:parameters(), { lr = 0.1, momentum = 0.9 })
fit(epochs, cnn, loss_func, cnn_opt, train_dl, valid_dl)
