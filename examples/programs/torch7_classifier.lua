-- Torch7's classic "train a digit classifier" (torch/demos train-a-digit-classifier):
-- torch.CmdLine options, an nn.Sequential of Spatial* layers, a ClassNLLCriterion,
-- getParameters() and a feval closure for optim.sgd, a ConfusionMatrix, and
-- optim.Logger for the accuracy.  Synthetic 32x32 digits instead of the MNIST download.
--   dplua examples/programs/torch7_classifier.lua [-maxIter 2] [-batchSize 10] [-learningRate 0.05]
require 'nn'
require 'optim'

local cmd = torch.CmdLine()
cmd:text()
cmd:text('Training a simple network')
cmd:text()
cmd:text('Options')
cmd:option('-seed', 1, 'fixed input seed for repeatable experiments')
cmd:option('-learningRate', 0.05, 'learning rate at t=0')
cmd:option('-batchSize', 10, 'mini-batch size (1 = pure stochastic)')
cmd:option('-momentum', 0, 'momentum (SGD only)')
cmd:option('-maxIter', 2, 'number of epochs')
cmd:option('-trainSize', 300, 'number of training samples')
cmd:text()
local opt = cmd:parse(arg or {})

torch.manualSeed(opt.seed)
torch.setdefaulttensortype('torch.FloatTensor')

local classes = { '1', '2', '3', '4', '5', '6', '7', '8', '9', '10' }
local geometry = { 32, 32 }

-- convolutional network
local model = nn.Sequential()
-- stage 1 : mean suppresion -> filter bank -> squashing -> max pooling
model:add(nn.SpatialConvolutionMM(1, 32, 5, 5))
model:add(nn.Tanh())
model:add(nn.SpatialMaxPooling(3, 3, 3, 3))
-- stage 2 : mean suppresion -> filter bank -> squashing -> max pooling
model:add(nn.SpatialConvolutionMM(32, 64, 5, 5))
model:add(nn.Tanh())
model:add(nn.SpatialMaxPooling(2, 2, 2, 2))
-- stage 3 : standard 2-layer MLP:
model:add(nn.Reshape(64 * 2 * 2))
model:add(nn.Linear(64 * 2 * 2, 200))
model:add(nn.Tanh())
model:add(nn.Linear(200, #classes))
model:add(nn.LogSoftMax())

local parameters, gradParameters = model:getParameters()
print('<mnist> using model:')
print(model)
local criterion = nn.ClassNLLCriterion()

-- the data set: {data = [N, 1, 32, 32], labels = [N]}, with size() as Torch7's mnist loader
local function dataset(n)
  local templates = torch.rand(10, 1, 32, 32, { generator = torch.Generator():manual_seed(9) }):gt(0.7):float()
  local labels = torch.randint(1, 11, { n })
  local ds = { data = templates:index_select(1, labels) + torch.randn(n, 1, 32, 32) * 0.3, labels = labels }
  function ds:size() return n end
  return ds
end
local trainData, testData = dataset(opt.trainSize), dataset(100)

local confusion = optim.ConfusionMatrix(classes)
local trainLogger = optim.Logger(os.tmpname())
local sgdState = { learningRate = opt.learningRate, momentum = opt.momentum, learningRateDecay = 5e-7 }

local function train(epoch)
  print('<trainer> on training set:')
  print("<trainer> online epoch # " .. epoch .. ' [batchSize = ' .. opt.batchSize .. ']')
  for t = 1, trainData:size(), opt.batchSize do
    -- create mini batch
    local inputs = torch.Tensor(opt.batchSize, 1, geometry[1], geometry[2])
    local targets = torch.Tensor(opt.batchSize)
    local k = 1
    for i = t, math.min(t + opt.batchSize - 1, trainData:size()) do
      inputs[k] = trainData.data[i]:clone()
      targets[k] = trainData.labels[i]
      k = k + 1
    end
    -- create closure to evaluate f(X) and df/dX
    local feval = function(x)
      collectgarbage()
      -- get new parameters
      if x ~= parameters then parameters:copy(x) end
      -- reset gradients
      gradParameters:zero()
      -- evaluate function for complete mini batch
      local outputs = model:forward(inputs)
      local f = criterion:forward(outputs, targets)
      -- estimate df/dW
      local df_do = criterion:backward(outputs, targets)
      model:backward(inputs, df_do)
      -- update confusion
      for i = 1, opt.batchSize do confusion:add(outputs[i], targets[i]) end
      return f, gradParameters
    end
    optim.sgd(feval, parameters, sgdState)
  end
  print(confusion)
  trainLogger:add { ['% mean class accuracy (train set)'] = confusion.totalValid * 100 }
  confusion:zero()
end

local function test()
  for t = 1, testData:size(), opt.batchSize do
    local inputs = testData.data:narrow(1, t, math.min(opt.batchSize, testData:size() - t + 1))
    local targets = testData.labels:narrow(1, t, inputs:size(1))
    local preds = model:forward(inputs)
    for i = 1, inputs:size(1) do confusion:add(preds[i], targets[i]) end
  end
  print(confusion)
  local acc = confusion.totalValid
  confusion:zero()
  return acc
end

for epoch = 1, opt.maxIter do
  train(epoch)
  print(('test accuracy: %.2f'):format(test()))
end
