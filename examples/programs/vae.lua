-- pytorch/examples vae/main.py: a variational auto-encoder on MNIST-shaped data
-- (synthetic: blurred random blobs in [0, 1] instead of the download).
--   dplua examples/programs/vae.lua [epochs]
local F = nn.functional
local epochs = tonumber(arg and arg[1]) or 2
local batch_size, log_interval = 128, 4
torch.manual_seed(1)

local function blobs(n)
  local x = torch.rand(n, 1, 7, 7):gt(0.7):float()
  return F.interpolate(x, { scale_factor = 4, mode = 'bilinear', align_corners = false }):clamp(0, 1)
end
local train_loader = torch.utils.data.DataLoader(
  torch.utils.data.TensorDataset(blobs(1024), torch.zeros(1024, { dtype = 'int64' })),
  { batch_size = batch_size, shuffle = true })
local test_loader = torch.utils.data.DataLoader(
  torch.utils.data.TensorDataset(blobs(256), torch.zeros(256, { dtype = 'int64' })),
  { batch_size = batch_size })

local VAE, parent = torch.class('VAE', 'nn.Module')
function VAE:__init()
  parent.__init(self)
  self.fc1 = nn.Linear(784, 400)
  self.fc21 = nn.Linear(400, 20)
  self.fc22 = nn.Linear(400, 20)
  self.fc3 = nn.Linear(20, 400)
  self.fc4 = nn.Linear(400, 784)
end
function VAE:encode(x)
  local h1 = F.relu(self.fc1(x))
  return self.fc21(h1), self.fc22(h1)
end
function VAE:reparameterize(mu, logvar)
  local std = torch.exp(0.5 * logvar)
  local eps = torch.randn_like(std)
  return mu + eps * std
end
function VAE:decode(z)
  local h3 = F.relu(self.fc3(z))
  return torch.sigmoid(self.fc4(h3))
end
function VAE:forward(x)
  local mu, logvar = self:encode(x:view(-1, 784))
  local z = self:reparameterize(mu, logvar)
  return self:decode(z), mu, logvar
end

local model = VAE()
local optimizer = optim.Adam(model:parameters(), { lr = 1e-3 })

-- Reconstruction + KL divergence losses summed over all elements and batch
local function loss_function(recon_x, x, mu, logvar)
  local BCE = F.binary_cross_entropy(recon_x, x:view(-1, 784), { reduction = 'sum' })
  local KLD = -0.5 * torch.sum(1 + logvar - mu:pow(2) - logvar:exp())
  return BCE + KLD
end

local function train(epoch)
  model:train()
  local train_loss = 0
  local n = #train_loader.dataset
  local batch_idx = 0
  for data in train_loader:iter() do
    batch_idx = batch_idx + 1
    optimizer:zero_grad()
    local recon_batch, mu, logvar = model(data)
    local loss = loss_function(recon_batch, data, mu, logvar)
    loss:backward()
    train_loss = train_loss + loss:item()
    optimizer:step()
    if (batch_idx - 1) % log_interval == 0 then
      print(('Train Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f'):format(epoch, (batch_idx - 1) * data:size(1), n,
        100 * (batch_idx - 1) / #train_loader, loss:item() / data:size(1)))
    end
  end
  print(('====> Epoch: %d Average loss: %.4f'):format(epoch, train_loss / n))
end

local function test(epoch)
  model:eval()
  local test_loss = 0
  torch.no_grad(function()
    local i = 0
    for data in test_loader:iter() do
      i = i + 1
      local recon_batch, mu, logvar = model(data)
      test_loss = test_loss + loss_function(recon_batch, data, mu, logvar):item()
      if i == 1 then
        local n = math.min(data:size(1), 8)
        local comparison = torch.cat({ data[{ { 1, n } }], recon_batch:view(-1, 1, 28, 28)[{ { 1, n } }] })
        assert(comparison:size(1) == 2 * n)
      end
    end
  end)
  test_loss = test_loss / #test_loader.dataset
  print(('====> Test set loss: %.4f'):format(test_loss))
  return test_loss
end

local first
for epoch = 1, epochs do
  train(epoch)
  local l = test(epoch)
  first = first or l
  torch.no_grad(function()
    local sample = model:decode(torch.randn(64, 20))
    assert(sample:view(64, 1, 28, 28):size(1) == 64)
  end)
end
