-- kuangliu/pytorch-cifar: ResNet18 (models/resnet.py, BasicBlock) trained by main.py's loop
-- (SGD with momentum 0.9 and weight decay 5e-4, CosineAnnealingLR, CrossEntropyLoss, a test
-- pass after each epoch, a checkpoint when the accuracy is the best so far), on synthetic
-- 32x32 images instead of CIFAR-10. What is smaller than the original: the width (8
-- channels in the first stage instead of 64; the architecture is the same), 64 training
-- and 32 test images in batches of 16, T_max = the number of epochs instead of 200, and no
-- RandomCrop / RandomHorizontalFlip.
--   dplua examples/programs/resnet_cifar.lua [epochs [initial.safetensors]]
-- With a second argument the run is spec/fixtures/make_prog_resnet_cifar.py's, in float64:
-- the initial weights come from the file and the batches come in order (no shuffle).
local F = nn.functional
local epochs = tonumber(arg and arg[1]) or 2
local initial = arg and arg[2]
local width = 8
if initial then torch.set_default_dtype('float64') end
torch.manual_seed(0)

-- models/resnet.py
local BasicBlock, BasicBlock_parent = torch.class('BasicBlock', 'nn.Module')
BasicBlock.expansion = 1
function BasicBlock:__init(in_planes, planes, stride)
  BasicBlock_parent.__init(self)
  stride = stride or 1
  self.conv1 = nn.Conv2d(in_planes, planes, { kernel_size = 3, stride = stride, padding = 1, bias = false })
  self.bn1 = nn.BatchNorm2d(planes)
  self.conv2 = nn.Conv2d(planes, planes, { kernel_size = 3, stride = 1, padding = 1, bias = false })
  self.bn2 = nn.BatchNorm2d(planes)
  self.shortcut = nn.Sequential()
  if stride ~= 1 or in_planes ~= self.expansion * planes then
    self.shortcut = nn.Sequential(
      nn.Conv2d(in_planes, self.expansion * planes, { kernel_size = 1, stride = stride, bias = false }),
      nn.BatchNorm2d(self.expansion * planes))
  end
end
function BasicBlock:forward(x)
  local out = F.relu(self.bn1(self.conv1(x)))
  out = self.bn2(self.conv2(out))
  out = out + self.shortcut(x)
  out = F.relu(out)
  return out
end

local ResNet, ResNet_parent = torch.class('ResNet', 'nn.Module')
function ResNet:__init(block, num_blocks, num_classes, w)
  ResNet_parent.__init(self)
  num_classes, w = num_classes or 10, w or 64
  self.in_planes = w
  self.conv1 = nn.Conv2d(3, w, { kernel_size = 3, stride = 1, padding = 1, bias = false })
  self.bn1 = nn.BatchNorm2d(w)
  self.layer1 = self:_make_layer(block, w, num_blocks[1], 1)
  self.layer2 = self:_make_layer(block, 2 * w, num_blocks[2], 2)
  self.layer3 = self:_make_layer(block, 4 * w, num_blocks[3], 2)
  self.layer4 = self:_make_layer(block, 8 * w, num_blocks[4], 2)
  self.linear = nn.Linear(8 * w * block.expansion, num_classes)
end
function ResNet:_make_layer(block, planes, n, stride)
  local strides = { stride }
  for _ = 2, n do strides[#strides + 1] = 1 end
  local layers = {}
  for _, s in ipairs(strides) do
    layers[#layers + 1] = block(self.in_planes, planes, s)
    self.in_planes = planes * block.expansion
  end
  return nn.Sequential(table.unpack(layers))
end
function ResNet:forward(x)
  local out = F.relu(self.bn1(self.conv1(x)))
  out = self.layer1(out)
  out = self.layer2(out)
  out = self.layer3(out)
  out = self.layer4(out)
  out = F.avg_pool2d(out, 4)
  out = out:view(out:size(1), -1)
  out = self.linear(out)
  return out
end
local function ResNet18(w) return ResNet(BasicBlock, { 2, 2, 2, 2 }, 10, w) end

-- Data: n images [3, 32, 32] in [-1, 1) and labels 1..10, a linear congruential hash of
-- the position (integer arithmetic, so the PyTorch twin makes the same bits)
local function synthetic(n, seed)
  local idx = torch.arange(n * 3 * 32 * 32, { dtype = 'int64' }) + seed * 1000003
  local v = (idx * 1103515245 + 12345):remainder(2147483648)   -- 2 ** 31, an integer
  local x = (v:to(torch.get_default_dtype()) / 2 ^ 30 - 1):reshape(n, 3, 32, 32)
  local y = (torch.arange(n, { dtype = 'int64' }) * 7 + seed):remainder(10) + 1
  return x, y
end
print('==> Preparing data..')
local trainset = torch.utils.data.TensorDataset(synthetic(64, 1))
local testset = torch.utils.data.TensorDataset(synthetic(32, 2))
local trainloader = torch.utils.data.DataLoader(trainset, { batch_size = 16, shuffle = not initial })
local testloader = torch.utils.data.DataLoader(testset, { batch_size = 16, shuffle = false })

print('==> Building model..')
local net = ResNet18(width)
if initial then net:load_state_dict(torch.load(initial)) end
local best_acc = 0
local criterion = nn.CrossEntropyLoss()
local optimizer = optim.SGD(net:parameters(), { lr = 0.1, momentum = 0.9, weight_decay = 5e-4 })
local scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, { T_max = epochs })
local checkpoint_dir = os.tmpname()
os.remove(checkpoint_dir)
local record = { train_loss = {}, test_loss = {}, acc = {}, lr = {} }

local function train(epoch)
  print(('\nEpoch: %d'):format(epoch))
  net:train()
  local train_loss, correct, total, batch_idx = 0, 0, 0, 0
  for inputs, targets in trainloader:iter() do
    batch_idx = batch_idx + 1
    optimizer:zero_grad()
    local outputs = net(inputs)
    local loss = criterion(outputs, targets)
    loss:backward()
    optimizer:step()

    train_loss = train_loss + loss:item()
    local _, predicted = outputs:max(2)
    total = total + targets:size(1)
    correct = correct + predicted:eq(targets):sum():item()
    record.train_loss[#record.train_loss + 1] = loss:item()
    print(('%d/%d Loss: %.3f | Acc: %.3f%% (%d/%d)'):format(batch_idx, #trainloader,
      train_loss / batch_idx, 100 * correct / total, correct, total))
  end
end

local function test(epoch)
  net:eval()
  local test_loss, correct, total, batch_idx = 0, 0, 0, 0
  torch.no_grad(function()
    for inputs, targets in testloader:iter() do
      batch_idx = batch_idx + 1
      local outputs = net(inputs)
      local loss = criterion(outputs, targets)

      test_loss = test_loss + loss:item()
      local _, predicted = outputs:max(2)
      total = total + targets:size(1)
      correct = correct + predicted:eq(targets):sum():item()
      print(('%d/%d Loss: %.3f | Acc: %.3f%% (%d/%d)'):format(batch_idx, #testloader,
        test_loss / batch_idx, 100 * correct / total, correct, total))
    end
  end)
  record.test_loss[#record.test_loss + 1] = test_loss / batch_idx

  -- Save checkpoint.
  local acc = 100 * correct / total
  record.acc[#record.acc + 1] = acc
  if acc > best_acc then
    print('Saving..')
    local state = { net = net:state_dict(), acc = acc, epoch = epoch }
    os.execute('mkdir -p ' .. checkpoint_dir)
    torch.save(checkpoint_dir .. '/ckpt.safetensors', state)
    best_acc = acc
  end
end

for epoch = 0, epochs - 1 do
  record.lr[#record.lr + 1] = scheduler:get_last_lr()[1]
  train(epoch)
  test(epoch)
  scheduler:step()
end

-- resuming as main.py --resume does: the checkpoint gives the best epoch's weights back
local checkpoint = torch.load(checkpoint_dir .. '/ckpt.safetensors')
local resumed = ResNet18(width)
resumed:load_state_dict(checkpoint.net)
print(('==> Best checkpoint: epoch %d, acc %.3f%%'):format(checkpoint.epoch, checkpoint.acc))
os.remove(checkpoint_dir .. '/ckpt.safetensors')
os.remove(checkpoint_dir)

record.final_linear_weight_norm = net.linear.weight:norm():item()
record.final_running_var_sum = net.layer4[2].bn2.running_var:sum():item()
if initial then
  -- every value the twin recorded, at full precision, for spec/programs2026_spec.lua
  for _, k in ipairs { 'train_loss', 'test_loss', 'acc', 'lr' } do
    local s = {}
    for i, v in ipairs(record[k]) do s[i] = ('%.17g'):format(v) end
    print(('record %s %s'):format(k, table.concat(s, ' ')))
  end
  print(('record final_linear_weight_norm %.17g'):format(record.final_linear_weight_norm))
  print(('record final_running_var_sum %.17g'):format(record.final_running_var_sum))
end
