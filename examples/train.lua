-- train.lua: the data-parallel example from the notes this project grew from, in Lua.
--
--   dplua examples/train.lua                          one model, on cuda:0 or the CPU
--   dplua examples/train.lua --devices cpu:0,cpu:1    nn.DataParallel over two CPU devices
--   DPLUA_DEVICES=cuda:0,cuda:1 dplua examples/train.lua
--
-- With more than one GPU (or with --devices) the model is wrapped in nn.DataParallel, and
-- each replica prints the size of its slice of the batch: with two devices a batch of 30
-- shows two "In Model" lines of 15 rows and one "Outside" line of 30.

-- Devices for DataParallel, from --devices or DPLUA_DEVICES ("cpu:0,cpu:1", "0,1", ...).
local function requested_devices()
  local spec = os.getenv('DPLUA_DEVICES')
  local i = 1
  while arg and arg[i] do
    local a = arg[i]
    if a == '--devices' then
      spec = arg[i + 1] or error('--devices needs a list, e.g. --devices cpu:0,cpu:1', 0)
      i = i + 1
    elseif a:match('^%-%-devices=') then
      spec = a:match('^%-%-devices=(.*)$')
    else
      error(('unknown argument %s (usage: dplua examples/train.lua [--devices cpu:0,cpu:1])'):format(a), 0)
    end
    i = i + 1
  end
  if spec == nil or spec == '' then return nil end
  local list = {}
  for item in spec:gmatch('[^,%s]+') do
    list[#list + 1] = item:match('^%d+$') and math.tointeger(tonumber(item)) or item
  end
  return list
end

-- CPU devices are made before the first tensor: enough for the devices named and for the
-- to() demonstration below.
local function make_cpu_devices(list)
  local need = 2
  for _, d in ipairs(list or {}) do
    local index = type(d) == 'string' and d:match('^cpu:(%d+)$')
    if index then need = math.max(need, tonumber(index) + 1) end
  end
  if torch.cpu.device_count() < need then pcall(torch.cpu.set_device_count, need) end
end

local devices = requested_devices()
make_cpu_devices(devices)

-- Parameters and DataLoaders
local input_size = 5
local output_size = 2

local batch_size = 30
local data_size = 100

local device = torch.device(torch.cuda.is_available() and 'cuda:0' or 'cpu')
print('device ' .. tostring(device))

-- Dummy Dataset
local RandomDataset, Dataset = torch.class('RandomDataset', 'torch.data.Dataset')

function RandomDataset:__init(size, length)
  Dataset.__init(self)
  self.len = length
  self.data = torch.randn(length, size)
end

function RandomDataset:get(index)
  return self.data[index]
end

function RandomDataset:__len()
  return self.len
end

local rand_loader = torch.data.DataLoader(RandomDataset(input_size, data_size),
                                          { batch_size = batch_size, shuffle = true })

-- Simple Model
local Model, Module = torch.class('Model', 'nn.Module')

function Model:__init(input_size, output_size)
  Module.__init(self)
  self.fc = nn.Linear(input_size, output_size)
end

function Model:forward(input)
  local output = self.fc(input)
  print(('\tIn Model: input size %s output size %s'):format(input:size(), output:size()))
  return output
end

-- Create Model and DataParallel
local model = Model(input_size, output_size)
if devices then
  print(("Let's use %d device%s!"):format(#devices, #devices == 1 and '' or 's'))
  model = nn.DataParallel(model, { device_ids = devices })
  device = model.device_ids[1]
elseif torch.cuda.device_count() > 1 then
  print(("Let's use %d GPUs!"):format(torch.cuda.device_count()))
  model = nn.DataParallel(model)
elseif not torch.cuda.is_available() and (tonumber(os.getenv('DPLUA_CPU_DEVICES') or '') or 1) > 1 then
  -- no GPU, but the user made several CPU devices (DPLUA_CPU_DEVICES=N): split across them
  local cpus = {}
  for i = 0, torch.cpu.device_count() - 1 do cpus[#cpus + 1] = 'cpu:' .. i end
  print(("Let's use %d devices!"):format(#cpus))
  model = nn.DataParallel(model, { device_ids = cpus })
  device = model.device_ids[1]
end
model:to(device)

-- tensor:to(device) returns a copy and leaves the tensor where it was; module:to(device)
-- moves the module itself.  Without CUDA the same is shown with two CPU devices.
local function to_checks()
  local target, where
  if torch.cuda.is_available() then
    target = torch.device('cuda:0')
    where = function(t) return t.is_cuda end
    print('tensors:to(device)')
  elseif torch.cpu.device_count() >= 2 then
    target = torch.device('cpu:1')
    where = function(t) return t.device == target end
    print('tensors:to(device)  [CUDA is not available: shown with cpu:0 -> cpu:1, "is_cuda" read as "is on cpu:1"]')
  else
    print('tensors:to(device)  [skipped: no CUDA and a single CPU device]')
    return
  end
  local a = torch.randn(3, 4)
  print('a is_cuda ' .. tostring(where(a)))
  local b = a:to(target)
  print('a is_cuda ' .. tostring(where(a)))
  print('b is_cuda ' .. tostring(where(b)))

  print('models:to(device)')
  local m = Model(3, 4)
  print(where(m:parameters()[1]))
  local moved = m:to(target)
  print(where(m:parameters()[1]))
  print(where(moved:parameters()[1]))
end
to_checks()

-- Run the Model
for data in rand_loader:iter() do
  -- the input can be on any device, including the CPU: DataParallel splits and moves it
  local input = data:to(device)
  local output = model(input)
  print(('Outside: input size %s output_size %s'):format(input:size(), output:size()))
end
