-- ddp.lua: the notes' model trained with nn.DistributedDataParallel, one process per rank.
--
--   mpirun --allow-run-as-root --oversubscribe -np 2 dplua examples/ddp.lua
--
-- A global batch of 30 is split by a DistributedSampler: with 2 ranks each rank's model
-- sees 15 rows ("In Model" lines), and after every step all ranks hold the same weights,
-- the ones a single process would get on the whole batch.  Add --cuda to train on one GPU
-- per rank with the nccl backend.
local dist = require 'torch.distributed'

local use_cuda = arg[1] == '--cuda'
dist.init_process_group { backend = use_cuda and 'nccl' or 'mpi' }
local rank, world = dist.get_rank(), dist.get_world_size()
local device = use_cuda and torch.device('cuda', dist.get_local_rank() % torch.cuda.device_count())
                         or torch.device('cpu')
torch.set_num_threads(1)   -- one core per rank

-- Parameters and DataLoaders
local input_size = 5
local output_size = 2

local batch_size = 30        -- global: each rank takes batch_size / world
local data_size = 100

-- Dummy Dataset: the same on every rank (same seed); the sampler picks each rank's rows
local RandomDataset, Dataset = torch.class('RandomDataset', 'torch.data.Dataset')

function RandomDataset:__init(size, length)
  Dataset.__init(self)
  self.len = length
  torch.manual_seed(0)
  self.data = torch.randn(length, size)
  self.target = torch.randn(length, output_size)
end

function RandomDataset:get(index)
  return { self.data[index], self.target[index] }
end

function RandomDataset:__len()
  return self.len
end

local dataset = RandomDataset(input_size, data_size)
local sampler = torch.data.DistributedSampler(dataset)   -- rank and world size from the group
local loader = torch.data.DataLoader(dataset, { batch_size = batch_size // world, sampler = sampler })

-- Simple Model
local Model, Module = torch.class('Model', 'nn.Module')

function Model:__init(input_size, output_size)
  Module.__init(self)
  self.fc = nn.Linear(input_size, output_size)
end

function Model:forward(input)
  local output = self.fc(input)
  print(('\trank %d In Model: input size %s output size %s'):format(rank, input:size(), output:size()))
  return output
end

torch.manual_seed(42 + rank)   -- each rank starts differently; DDP takes rank 0's weights
local model = Model(input_size, output_size):to(device)
local ddp = nn.DistributedDataParallel(model, use_cuda and { device_ids = { device.index } } or nil)
if rank == 0 then print(("Let's use %d processes!"):format(world)) end

local crit = nn.MSELoss()
local opt = optim.SGD(ddp:parameters(), { lr = 0.1 })

for epoch = 1, 2 do
  sampler:set_epoch(epoch)
  for input, target in loader:iter() do
    input, target = input:to(device), target:to(device)
    local output = ddp(input)
    local loss = crit(output, target)
    opt:zero_grad()
    loss:backward()          -- gradients are averaged over the ranks here
    opt:step()
    print(('rank %d Outside: input size %s output_size %s loss %.4f'):format(
      rank, input:size(), output:size(), loss:item()))
  end
end

-- Every rank ends with the same weights.
local w = model.fc.weight:detach():clone()
local w0 = w:clone()
dist.broadcast(w0, 0)
local same = torch.tensor({ torch.equal(w, w0) and 1 or 0 }, { dtype = 'int64', device = device })
dist.all_reduce(same, 'min')
if rank == 0 then
  print(('weights equal on all %d ranks: %s'):format(world, tostring(same:item() == 1)))
end
dist.destroy_process_group()
