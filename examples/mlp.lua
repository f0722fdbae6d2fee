-- examples/mlp.lua: trains a 2-layer MLP to classify points drawn from three Gaussian
-- blobs, printing the loss of each epoch and the final training accuracy, and draws the
-- loss curve into a PNG (with gnuplot; Debian: gnuplot-nox).
--
--   dplua examples/mlp.lua [epochs] [curve.png (default mlp_loss.png)]
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'

torch.manual_seed(0)
local epochs = tonumber(arg and arg[1]) or 8
local curve = arg and arg[2] or 'mlp_loss.png'
local logdir = os.tmpname()
os.remove(logdir)
local writer = torch.utils.SummaryWriter(logdir)

-- 3000 points in 2-D around three centres; the class of a point is its blob (1, 2 or 3)
local n = 3000
local centres = torch.tensor { { 0.0, 3.0 }, { -2.6, -1.5 }, { 2.6, -1.5 } }
local labels = torch.randint(1, 4, { n })
local points = centres:index_select(1, labels) + torch.randn(n, 2) * 0.8

local dataset = torch.data.TensorDataset(points, labels)
local loader = torch.data.DataLoader(dataset, { batch_size = 64, shuffle = true, num_workers = 2, progress = true })

local model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 3))
local criterion = nn.CrossEntropyLoss()
local optimizer = optim.Adam(model:parameters(), { lr = 0.01 })
print(model)

for epoch = 1, epochs do
  local total, batches = 0, 0
  for x, y in loader:iter() do
    optimizer:zero_grad()
    local loss = criterion(model(x), y)
    loss:backward()
    optimizer:step()
    total, batches = total + loss:item(), batches + 1
  end
  print(('epoch %d  loss %.4f'):format(epoch, total / batches))
  writer:add_scalar('loss/train', total / batches, epoch)
end
if require('gnuplot').available() then
  writer:plot('loss/train', curve, { title = 'examples/mlp.lua' })
  print('loss curve written to ' .. curve)
else
  print('gnuplot is not installed (Debian: apt-get install gnuplot-nox): no loss curve drawn')
end
writer:close()
os.execute(('rm -rf %q'):format(logdir))

model:eval()
local predicted = torch.no_grad(function() return model(points):argmax(2) end)
local accuracy = predicted:eq(labels):sum():item() / n
print(('training accuracy %.1f%%'):format(100 * accuracy))
assert(accuracy >= 0.95, 'the model should reach 95% training accuracy')
