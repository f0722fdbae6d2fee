-- pytorch/examples super_resolution: the efficient sub-pixel CNN (ESPCN) upscaling the Y
-- channel by 3, trained with Adam on synthetic 33x33 crops downscaled to 11x11 (BSDS300
-- in the original), with the PSNR of a test set and a saved checkpoint.
--   dplua examples/programs/super_resolution.lua [epochs]
local init = nn.init
local epochs = tonumber(arg and arg[1]) or 2
local upscale_factor = 3
torch.manual_seed(123)

local Net, parent = torch.class('Net', 'nn.Module')
function Net:__init(upscale)
  parent.__init(self)
  self.relu = nn.ReLU()
  self.conv1 = nn.Conv2d(1, 64, { 5, 5 }, { 1, 1 }, { 2, 2 })
  self.conv2 = nn.Conv2d(64, 64, { 3, 3 }, { 1, 1 }, { 1, 1 })
  self.conv3 = nn.Conv2d(64, 32, { 3, 3 }, { 1, 1 }, { 1, 1 })
  self.conv4 = nn.Conv2d(32, upscale * upscale, { 3, 3 }, { 1, 1 }, { 1, 1 })
  self.pixel_shuffle = nn.PixelShuffle(upscale)
  self:_initialize_weights()
end
function Net:forward(x)
  x = self.relu(self.conv1(x))
  x = self.relu(self.conv2(x))
  x = self.relu(self.conv3(x))
  x = self.pixel_shuffle(self.conv4(x))
  return x
end
function Net:_initialize_weights()
  init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
  init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
  init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
  init.orthogonal_(self.conv4.weight)
end

-- smooth random images: a few sinusoids each
local function images(n, size)
  local yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), { indexing = 'ij' })
  local f = torch.rand(n, 4, 1, 1) * 8
  local img = ((xx * f[{ {}, { 1 } }] + yy * f[{ {}, { 2 } }]):sin() * (xx * f[{ {}, { 3 } }]):cos()
    + (yy * f[{ {}, { 4 } }]):sin()) / 4 + 0.5
  return img
end
local function dataset(n)
  local target = images(n, 33)
  local input = nn.functional.interpolate(target, { size = { 11, 11 }, mode = 'bilinear', align_corners = false })
  return torch.utils.data.TensorDataset(input, target)
end
local training_data_loader = torch.utils.data.DataLoader(dataset(64), { batch_size = 16, shuffle = true })
local testing_data_loader = torch.utils.data.DataLoader(dataset(32), { batch_size = 16 })

print('===> Building model')
local model = Net(upscale_factor)
local criterion = nn.MSELoss()
local optimizer = optim.Adam(model:parameters(), { lr = 0.01 })

local function train(epoch)
  local epoch_loss, iteration = 0, 0
  for input, target in training_data_loader:iter() do
    iteration = iteration + 1
    optimizer:zero_grad()
    local loss = criterion(model(input), target)
    epoch_loss = epoch_loss + loss:item()
    loss:backward()
    optimizer:step()
    print(('===> Epoch[%d](%d/%d): Loss: %.4f'):format(epoch, iteration, #training_data_loader, loss:item()))
  end
  print(('===> Epoch %d Complete: Avg. Loss: %.4f'):format(epoch, epoch_loss / #training_data_loader))
end

local function test()
  local avg_psnr = 0
  torch.no_grad(function()
    for input, target in testing_data_loader:iter() do
      local prediction = model(input)
      local mse = criterion(prediction, target)
      local psnr = 10 * math.log(1 / mse:item(), 10)
      avg_psnr = avg_psnr + psnr
    end
  end)
  print(('===> Avg. PSNR: %.4f dB'):format(avg_psnr / #testing_data_loader))
end

local function checkpoint(epoch)
  local model_out_path = os.tmpname() .. ('model_epoch_%d.pth'):format(epoch)
  torch.save(model, model_out_path)   -- a module is saved as its state_dict (doc/data.md)
  print(('Checkpoint saved to %s'):format(model_out_path))
  local back = Net(upscale_factor)
  back:load_state_dict(torch.load(model_out_path))
  os.remove(model_out_path)
  return back
end

for epoch = 1, epochs do
  train(epoch)
  test()
  local m = checkpoint(epoch)
  assert(torch.equal(m.conv1.weight, model.conv1.weight))
end
