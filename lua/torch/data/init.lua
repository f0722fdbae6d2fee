-- torch.data: datasets, samplers, collation and the DataLoader (see doc/data.md).
local data = {}

local dataset = require 'torch.data.dataset'
local sampler = require 'torch.data.sampler'
local collate = require 'torch.data.collate'
local loader = require 'torch.data.loader'

data.Dataset = dataset.Dataset
data.TensorDataset = dataset.TensorDataset
data.Sampler = sampler.Sampler
data.SequentialSampler = sampler.SequentialSampler
data.RandomSampler = sampler.RandomSampler
data.SubsetRandomSampler = sampler.SubsetRandomSampler
data.WeightedRandomSampler = sampler.WeightedRandomSampler
data.DistributedSampler = sampler.DistributedSampler
data.default_collate = collate.default_collate
data.DataLoader = loader.DataLoader
data.get_worker_info = require('torch.data.worker').get_worker_info

-- Subset, ConcatDataset, random_split, IterableDataset, BatchSampler
for k, v in pairs(require 'torch.data.subsets') do data[k] = v end

return data
