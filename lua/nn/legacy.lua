-- Torch7's nn protocol on top of autograd, so Torch7 training code runs unchanged:
--
--   local out = mlp:forward(input)                 -- keeps mlp.output
--   criterion:forward(out, target)                 -- a number
--   mlp:zeroGradParameters()
--   mlp:backward(input, criterion:backward(out, target))   -- returns gradInput
--   mlp:updateParameters(0.01)
--
-- How it maps: calling m:forward(x) directly (Torch7's way) runs the module's forward and
-- keeps the result in m.output, with x taken as a leaf that requires grad (a detached
-- alias) so that backward can hand back gradInput; m(x) (PyTorch's way, and how
-- containers call their children) keeps nothing.  m:backward(x, gradOutput) runs autograd
-- from m.output.  Criteria are modules whose forward returns a Lua number and whose
-- backward returns the gradient with respect to the input.  Also nn.StochasticGradient,
-- Module:evaluate(), and torch.CmdLine (in torch.cmdline).
local torch = require 'torch'
local nn = require 'nn'
local Module = require 'nn.Module'
local F = require 'nn.functional'
local utils = require 'nn.utils'

-- ------------------------------------------------------------------ m:forward keeps output

-- Looking up `forward` on an instance gives a wrapper that keeps the output; everything
-- else (and Module.__call, which calls the class's forward) is looked up as before.
local keeping = setmetatable({}, { __mode = 'k' })   -- forward function -> its wrapper

-- the hooks of Module:register_forward_pre_hook, in order, before every forward
local function pre_hooks(self, ...)
  local hooks = rawget(self, '_forward_pre_hooks')
  if hooks then
    for _, h in ipairs(hooks) do h(self, ...) end
  end
end

local function keeps_output(forward)
  local w = keeping[forward]
  if not w then
    w = function(self, input, ...)
      pre_hooks(self, input, ...)
      if torch.is_tensor(input) and not input.requires_grad and torch.is_grad_enabled()
          and torch.FLOAT_DTYPES[input.dtype] then
        input = input:detach():requires_grad_()
        rawset(self, '_input_leaf', input)
      else
        rawset(self, '_input_leaf', nil)
      end
      local out = forward(self, input, ...)
      rawset(self, 'output', out)
      return out
    end
    keeping[forward] = w
  end
  return w
end

function Module.__index(self, k)
  local v = getmetatable(self)[k]
  if k == 'forward' and type(v) == 'function' then return keeps_output(v) end
  return v
end

function Module:__call(...)
  pre_hooks(self, ...)
  return getmetatable(self).forward(self, ...)
end

-- m:backward(input, gradOutput [, scale]): gradients of the parameters from the last
-- m:forward(input), accumulated into .grad; returns gradInput (also m.gradInput)
function Module:backward(input, gradOutput, scale)
  local out = rawget(self, 'output')
  if not torch.is_tensor(out) then
    utils.error(('%s:backward: call %s:forward(input) first (the Torch7 protocol keeps the output there)')
      :format(torch.typename(self) or 'Module', torch.typename(self) or 'Module'))
  end
  if not out.requires_grad then
    utils.error('backward: the last forward recorded no graph (it ran under torch.no_grad, or nothing requires grad)')
  end
  if scale ~= nil and scale ~= 1 then gradOutput = gradOutput * scale end
  local leaf = rawget(self, '_input_leaf')
  if leaf then leaf.grad = nil end
  out:backward(gradOutput)
  rawset(self, 'output', out:detach())   -- the graph is spent; the values stay readable
  rawset(self, 'gradInput', leaf and leaf.grad or nil)
  return rawget(self, 'gradInput')
end

function Module:zeroGradParameters()
  for _, p in ipairs(self:parameters()) do
    if p.grad then p.grad:zero_() end
  end
end

-- p = p - lr * p.grad for every parameter that has a gradient
function Module:updateParameters(lr)
  torch.no_grad(function()
    for _, p in ipairs(self:parameters()) do
      if p.grad then p:add_(p.grad, -lr) end
    end
  end)
end

-- Torch7's names for PyTorch's: evaluate() is eval() (training() cannot be a method here:
-- m.training is PyTorch's mode flag)
function Module:evaluate() return self:eval() end

-- m:getParameters(): Torch7's flat views, two 1-D tensors holding every parameter and every
-- gradient; the parameters and their .grad become views into them, so optim.sgd(feval, x)
-- and the like update the model in place.  Call it once, after moving the model; a later
-- :to() or zero_grad({set_to_none = true}) undoes the sharing, as in Torch7.
function Module:getParameters()
  local params = self:parameters()
  if #params == 0 then utils.error('getParameters: the module has no parameters') end
  local n, first = 0, params[1]
  for _, p in ipairs(params) do
    if p.dtype ~= first.dtype or tostring(p.device) ~= tostring(first.device) then
      utils.error(('getParameters: the parameters must share one dtype and device (%s on %s and %s on %s)')
        :format(first.dtype, tostring(first.device), p.dtype, tostring(p.device)))
    end
    n = n + p:numel()
  end
  local flat = torch.zeros(n, { dtype = first.dtype, device = first.device })
  local grads = torch.zeros(n, { dtype = first.dtype, device = first.device })
  torch.no_grad(function()
    local at = 1
    for _, p in ipairs(params) do
      local k = p:numel()
      local view = flat:narrow(1, at, k):view(p.shape)
      view:copy_(p)
      torch._C.set_data(p, view)
      p.grad = grads:narrow(1, at, k):view(p.shape)   -- backward adds into it in place
      at = at + k
    end
  end)
  return flat, grads
end

-- ------------------------------------------------------------------ Torch7's layer names

-- nn.SpatialConvolution(nInputPlane, nOutputPlane, kW, kH [, dW=1, dH=1, padW=0, padH=padW])
local SpatialConvolution = torch.class('nn.SpatialConvolution', 'nn.Conv2d')
function SpatialConvolution:__init(nin, nout, kW, kH, dW, dH, padW, padH)
  kH = kH or kW
  dW = dW or 1
  padW = padW or 0
  nn.Conv2d.__init(self, nin, nout, { kH, kW }, { stride = { dH or dW, dW }, padding = { padH or padW, padW } })
end

-- nn.SpatialConvolutionMM: Torch7's im2col variant, the same layer here
torch.class('nn.SpatialConvolutionMM', 'nn.SpatialConvolution')

-- nn.SpatialMaxPooling(kW, kH [, dW=kW, dH=kH, padW=0, padH=0]), :ceil() as in Torch7
local SpatialMaxPooling = torch.class('nn.SpatialMaxPooling', 'nn.MaxPool2d')
function SpatialMaxPooling:__init(kW, kH, dW, dH, padW, padH)
  kH = kH or kW
  nn.MaxPool2d.__init(self, { kH, kW }, { stride = { dH or kH, dW or kW }, padding = { padH or 0, padW or 0 } })
end
function SpatialMaxPooling:ceil() self.ceil_mode = true; return self end
function SpatialMaxPooling:floor() self.ceil_mode = false; return self end

local SpatialAveragePooling = torch.class('nn.SpatialAveragePooling', 'nn.AvgPool2d')
function SpatialAveragePooling:__init(kW, kH, dW, dH, padW, padH)
  kH = kH or kW
  nn.AvgPool2d.__init(self, { kH, kW }, { stride = { dH or kH, dW or kW }, padding = { padH or 0, padW or 0 } })
end

-- nn.View(sizes...) / nn.Reshape(sizes...): the input viewed with these sizes, keeping a
-- leading batch dim when the input has more elements than the sizes hold (Torch7's rule)
local View, view_parent = torch.class('nn.View', 'nn.Module')
function View:__init(...)
  view_parent.__init(self)
  local sizes = select('#', ...) == 1 and type((...)) == 'table' and { table.unpack((...)) } or { ... }
  local known = 1
  for i, s in ipairs(sizes) do
    if math.type(s) ~= 'integer' or (s < 1 and s ~= -1) then
      utils.error(('nn.View: size %d must be a positive integer or -1, got %s'):format(i, tostring(s)))
    end
    if s ~= -1 then known = known * s end
  end
  self.sizes, self.known, self.has_free = sizes, known, false
  for _, s in ipairs(sizes) do if s == -1 then self.has_free = true end end
end
function View:forward(x)
  local n = x:numel()
  if not self.has_free and n ~= self.known and n % self.known == 0 then
    return x:reshape(-1, table.unpack(self.sizes))   -- a batch of them
  end
  return x:reshape(table.unpack(self.sizes))
end
function View:extra_repr() return table.concat(self.sizes, ', ') end
local Reshape = torch.class('nn.Reshape', 'nn.View')
function Reshape:__init(...) nn.View.__init(self, ...) end

-- nn.LogSoftMax() / nn.SoftMax(): over the last dim (Torch7's classes per row)
local LogSoftMax, lsm_parent = torch.class('nn.LogSoftMax', 'nn.Module')
function LogSoftMax:__init() lsm_parent.__init(self) end
function LogSoftMax:forward(x) return x:log_softmax(x:dim()) end
local SoftMax, sm_parent = torch.class('nn.SoftMax', 'nn.Module')
function SoftMax:__init() sm_parent.__init(self) end
function SoftMax:forward(x) return x:softmax(x:dim()) end

-- nn.Threshold(th=1e-6, v=0): x where x > th, else v
local Threshold, th_parent = torch.class('nn.Threshold', 'nn.Module')
function Threshold:__init(th, v)
  th_parent.__init(self)
  self.threshold, self.value = th or 1e-6, v or 0
end
function Threshold:forward(x) return torch.where(x:gt(self.threshold), x, self.value) end
function Threshold:extra_repr() return ('threshold=%s, value=%s'):format(self.threshold, self.value) end

local SpatialBatchNormalization = torch.class('nn.SpatialBatchNormalization', 'nn.BatchNorm2d')
function SpatialBatchNormalization:__init(n, eps, momentum, affine)
  nn.BatchNorm2d.__init(self, n, { eps = eps or 1e-5, momentum = momentum or 0.1, affine = affine ~= false })
end
local BatchNormalization = torch.class('nn.BatchNormalization', 'nn.BatchNorm1d')
function BatchNormalization:__init(n, eps, momentum, affine)
  nn.BatchNorm1d.__init(self, n, { eps = eps or 1e-5, momentum = momentum or 0.1, affine = affine ~= false })
end
local SpatialDropout = torch.class('nn.SpatialDropout', 'nn.Dropout2d')
function SpatialDropout:__init(p) nn.Dropout2d.__init(self, p or 0.5) end

-- ------------------------------------------------------------------ criteria

local Criterion, parent = torch.class('nn.Criterion', 'nn.Module')

function Criterion:__init() parent.__init(self) end

-- the loss as a tensor, differentiable (subclasses define it)
function Criterion:loss(input, target)
  utils.error(('%s: loss is not implemented'):format(torch.typename(self)))
end

-- criterion:forward(input, target): the loss as a number (also criterion.output)
function Criterion:forward(input, target)
  local loss = torch.no_grad(function() return self:loss(input, target) end)
  rawset(self, 'output', loss:item())
  return self.output
end
Criterion.updateOutput = Criterion.forward

-- criterion:backward(input, target): d loss / d input (also criterion.gradInput)
function Criterion:backward(input, target)
  local x = input:detach():requires_grad_()
  torch.enable_grad(function() self:loss(x, target):backward() end)
  rawset(self, 'gradInput', x.grad)
  return x.grad
end
Criterion.updateGradInput = Criterion.backward

function Criterion:__call(input, target) return self:forward(input, target) end

local function reduction(size_average)
  return (size_average == false) and 'sum' or 'mean'
end

-- nn.NAME([sizeAverage]) and friends: one loss each
local function criterion(name, init, loss)
  local cls, base = torch.class('nn.' .. name, 'nn.Criterion')
  function cls:__init(...)
    base.__init(self)
    init(self, ...)
  end
  cls.loss = loss
  return cls
end

criterion('MSECriterion', function(self, size_average) self.sizeAverage = size_average ~= false end,
  function(self, x, t) return F.mse_loss(x, t, reduction(self.sizeAverage)) end)

criterion('AbsCriterion', function(self, size_average) self.sizeAverage = size_average ~= false end,
  function(self, x, t)
    local d = (x - t):abs()
    return self.sizeAverage and d:mean() or d:sum()
  end)

criterion('SmoothL1Criterion', function(self, size_average) self.sizeAverage = size_average ~= false end,
  function(self, x, t)
    local d = (x - t):abs()
    local l = torch.where(d:lt(1), d * d * 0.5, d - 0.5)
    return self.sizeAverage and l:mean() or l:sum()
  end)

-- targets: class indices counting from 1 (a tensor, or a number for a single [C] input)
local function class_args(x, t)
  if type(t) == 'number' then t = torch.tensor({ math.tointeger(t) or t }, { device = x.device }) end
  if x:dim() == 1 then x = x:view(1, -1) end
  if t:dim() == 0 then t = t:view(1) end
  return x, t:long()
end

local function weighted(self, per_item, t)
  if not self.weights then
    return self.sizeAverage and per_item:mean() or per_item:sum()
  end
  local w = self.weights:to(per_item.device):index_select(1, t)
  local total = (per_item * w):sum()
  return self.sizeAverage and total / w:sum() or total
end

criterion('ClassNLLCriterion', function(self, weights, size_average)
    self.weights, self.sizeAverage = weights, size_average ~= false
  end,
  function(self, x, t)
    x, t = class_args(x, t)
    return weighted(self, F.nll_loss(x, t, 'none'), t)
  end)

criterion('CrossEntropyCriterion', function(self, weights, size_average)
    self.weights, self.sizeAverage = weights, size_average ~= false
  end,
  function(self, x, t)
    x, t = class_args(x, t)
    return weighted(self, F.nll_loss(x:log_softmax(2), t, 'none'), t)
  end)

-- binary cross entropy of probabilities, the log clamped at -100 as Torch7 and PyTorch do
criterion('BCECriterion', function(self, weights, size_average)
    self.weights, self.sizeAverage = weights, size_average ~= false
  end,
  function(self, x, t)
    local l = -(t * x:log():clamp(-100, math.huge) + (1 - t) * (1 - x):log():clamp(-100, math.huge))
    if self.weights then l = l * self.weights end
    return self.sizeAverage and l:mean() or l:sum()
  end)

-- ------------------------------------------------------------------ StochasticGradient

-- nn.StochasticGradient(module, criterion):train(dataset): Torch7's trainer.  dataset has
-- dataset:size() and dataset[i] = {input, target}.
local SG = torch.class('nn.StochasticGradient')

function SG:__init(module, criterion)
  self.learningRate = 0.01
  self.learningRateDecay = 0
  self.maxIteration = 25
  self.shuffleIndices = true
  self.verbose = true
  self.module = module
  self.criterion = criterion
end

function SG:train(dataset)
  local iteration = 1
  local lr = self.learningRate
  local module, criterion = self.module, self.criterion
  local n = dataset:size()
  if self.verbose then print('# StochasticGradient: training') end
  while true do
    local order = self.shuffleIndices and torch.randperm(n):tolist() or nil
    local err = 0
    for i = 1, n do
      local example = dataset[order and order[i] or i]
      local input, target = example[1], example[2]
      err = err + criterion:forward(module:forward(input), target)
      module:zeroGradParameters()
      module:backward(input, criterion:backward(module.output, target))
      module:updateParameters(lr)
      if self.hookExample then self.hookExample(self, example) end
    end
    err = err / n
    if self.hookIteration then self.hookIteration(self, iteration, err) end
    if self.verbose then print('# current error = ' .. err) end
    iteration = iteration + 1
    lr = self.learningRate / (1 + iteration * self.learningRateDecay)
    if self.maxIteration > 0 and iteration > self.maxIteration then
      if self.verbose then print('# StochasticGradient: you have reached the maximum number of iterations') end
      break
    end
  end
end

return true
