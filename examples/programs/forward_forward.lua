-- pytorch/examples mnist_forward_forward: Hinton's forward-forward algorithm, each layer
-- (a subclass of nn.Linear with its own Adam) trained alone to tell positive data (the
-- right label written into the first pixels) from negative data (a wrong label).
-- Synthetic MNIST-shaped data; smaller layers and fewer epochs than the original.
--   dplua examples/programs/forward_forward.lua [epochs]
local num_epochs = tonumber(arg and arg[1]) or 60
torch.manual_seed(1234)

local templates = torch.rand(10, 784, { generator = torch.Generator():manual_seed(3) }):gt(0.8):float()
local function data(n)
  local y = torch.randint(1, 11, { n })
  local x = (templates:index_select(1, y) + 0.2 * torch.randn(n, 784) - 0.1307) / 0.3081
  return x, y
end

-- Replace the first 10 pixels of data [x] with one-hot-encoded label [y]
local function overlay_y_on_x(x, y)
  local x_ = x:clone()
  x_[{ {}, { 1, 10 } }]:mul_(0.0)
  if torch.is_tensor(y) then
    x_[{ torch.arange(1, x:size(1) + 1), y }] = x:max():item()
  else
    x_[{ {}, y }] = x:max():item()
  end
  return x_
end

local Layer, LayerBase = torch.class('Layer', 'nn.Linear')
function Layer:__init(in_features, out_features)
  LayerBase.__init(self, in_features, out_features)
  self.relu = nn.ReLU()
  self.opt = optim.Adam(self:parameters(), { lr = 0.03 })
  self.threshold = 2.0
  self.num_epochs = num_epochs
end
function Layer:forward(x)
  local x_direction = x / (x:norm(2, 2, true) + 1e-4)
  return self.relu(torch.mm(x_direction, self.weight.T) + self.bias:unsqueeze(1))
end
function Layer:train(x_pos, x_neg)
  for _ = 1, self.num_epochs do
    local g_pos = self:forward(x_pos):pow(2):mean(2)
    local g_neg = self:forward(x_neg):pow(2):mean(2)
    -- The following loss pushes pos (neg) samples to values larger (smaller) than the threshold.
    local loss = torch.log(1 + torch.exp(torch.cat({ -g_pos + self.threshold, g_neg - self.threshold }))):mean()
    self.opt:zero_grad()
    -- this backward just compute the derivative and hence is not considered backpropagation.
    loss:backward()
    self.opt:step()
  end
  return self:forward(x_pos):detach(), self:forward(x_neg):detach()
end

local Net, NetBase = torch.class('Net', 'nn.Module')
function Net:__init(dims)
  NetBase.__init(self)
  self.layers = {}
  for d = 1, #dims - 1 do
    self.layers[#self.layers + 1] = Layer(dims[d], dims[d + 1])
  end
end
function Net:predict(x)
  local goodness_per_label = {}
  for label = 1, 10 do
    local h = overlay_y_on_x(x, label)
    local goodness = 0
    for _, layer in ipairs(self.layers) do
      h = layer(h)
      goodness = goodness + h:pow(2):mean(2)
    end
    goodness_per_label[#goodness_per_label + 1] = goodness:unsqueeze(2)
  end
  return torch.cat(goodness_per_label, 2):argmax(2)
end
function Net:train(x_pos, x_neg)
  local h_pos, h_neg = x_pos, x_neg
  for i, layer in ipairs(self.layers) do
    print('training layer', i - 1, '...')
    h_pos, h_neg = layer:train(h_pos, h_neg)
  end
end

local x, y = data(500)
local net = Net({ 784, 100, 100 })
local x_pos = overlay_y_on_x(x, y)
local rnd = torch.randperm(x:size(1))
local x_neg = overlay_y_on_x(x, y[rnd])
net:train(x_pos, x_neg)
print('train error:', 1.0 - net:predict(x):eq(y):float():mean():item())
local x_te, y_te = data(200)
print('test error:', 1.0 - net:predict(x_te):eq(y_te):float():mean():item())
