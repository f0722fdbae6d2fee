-- Torch7's nn protocol (lua/nn/legacy.lua): criteria against PyTorch 1.13's losses for the
-- same inputs (values printed by F.mse_loss etc. in float64), the module protocol against
-- hand-computed gradients, Torch7's XOR tutorial, torch.CmdLine.
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function close(got, want, tol)
  if type(got) == 'number' then got, want = { got }, { want } end
  assert.are.equal(#want, #got)
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) <= (tol or 1e-8), ('element %d: %s, want %s'):format(i, got[i], want[i]))
  end
end

local function flat(t) return t:reshape(t:numel()):tolist() end

describe('Torch7 criteria', function()
  local x = torch.tensor({ { 0.2, -1.0, 0.5 }, { 1.5, 0.3, -0.7 } }, { dtype = 'float64' })
  local t = torch.tensor({ { 0.0, 1, 0.5 }, { 1, -1, 0 } }, { dtype = 'float64' })

  local cases = {
    { 'MSECriterion', {}, 1.0783333333, { 0.0666666667, -0.6666666667, 0.0, 0.1666666667, 0.4333333333, -0.2333333333 } },
    { 'MSECriterion', { false }, 6.47, { 0.4, -4.0, 0.0, 1.0, 2.6, -1.4 } },
    { 'AbsCriterion', {}, 0.7833333333, { 0.1666666667, -0.1666666667, 0.0, 0.1666666667, 0.1666666667, -0.1666666667 } },
    { 'SmoothL1Criterion', {}, 0.4483333333, { 0.0333333333, -0.1666666667, 0.0, 0.0833333333, 0.1666666667, -0.1166666667 } },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ' forward is a number and backward the gradient, as PyTorch', function()
      local crit = nn[c[1]](table.unpack(c[2]))
      local loss = crit:forward(x, t)
      assert.are.equal('number', type(loss))
      close(loss, c[3], 1e-9)
      assert.are.equal(loss, crit.output)
      close(flat(crit:backward(x, t)), c[4], 1e-9)
      assert.is_nil(x.grad)
    end)
  end

  it('ClassNLLCriterion and CrossEntropyCriterion take 1-based classes and weights', function()
    local classes = torch.tensor({ 3, 1 })
    local w = torch.tensor({ 0.5, 2.0, 1.0 }, { dtype = 'float64' })
    local nll = nn.ClassNLLCriterion(w)
    close(nll:forward(x, classes), -0.8333333333, 1e-9)
    close(flat(nll:backward(x, classes)), { 0, 0, -0.6666666667, -0.3333333333, 0, 0 }, 1e-9)
    local ce = nn.CrossEntropyCriterion(w)
    close(ce:forward(x, classes), 0.5649730435, 1e-9)
    close(flat(ce:backward(x, classes)),
      { 0.2514724005, 0.0757420315, -0.327214432, -0.0972611279, 0.0711035819, 0.026157546 }, 1e-9)
    close(nn.CrossEntropyCriterion():forward(x, classes), 0.5099811018, 1e-9)
    -- one sample: a [C] input and a number
    close(nn.CrossEntropyCriterion():forward(x[2], 1), -(x[2]:log_softmax(1)[1]), 1e-12)
  end)

  it('BCECriterion on probabilities', function()
    local p = torch.tensor({ { 0.2, 0.9, 0.5 }, { 0.7, 0.1, 0.3 } }, { dtype = 'float64' })
    local tb = torch.tensor({ { 0.0, 1, 1 }, { 1, 0, 0 } }, { dtype = 'float64' })
    local bce = nn.BCECriterion()
    close(bce:forward(p, tb), 0.3067269418, 1e-9)
    close(flat(bce:backward(p, tb)), { 0.2083333333, -0.1851851852, -0.3333333333, -0.2380952381, 0.1851851852, 0.2380952381 }, 1e-9)
  end)
end)

describe("Torch7's module protocol", function()
  local function linear()
    local m = nn.Linear(3, 2)
    torch.no_grad(function()
      m.weight:copy_(torch.tensor({ { 1.0, 2, 3 }, { -1, 0, 1 } }))
      m.bias:copy_(torch.tensor({ 0.5, -0.5 }))
    end)
    return m
  end

  it('forward keeps output, backward returns gradInput and fills the gradients', function()
    local m = linear()
    local x = torch.tensor({ { 1.0, 1, 1 }, { 0, 1, 2 } })
    local out = m:forward(x)
    assert.are.equal(out, m.output)
    assert.are.same({ { 6.5, -0.5 }, { 8.5, 1.5 } }, out:tolist())
    local g = torch.tensor({ { 1.0, 0 }, { 0, 2 } })
    local gin = m:backward(x, g)
    assert.are.same({ { 1, 2, 3 }, { -2, 0, 2 } }, gin:tolist())            -- g W
    assert.are.same({ { 1, 1, 1 }, { 0, 2, 4 } }, m.weight.grad:tolist())   -- g^T x
    assert.are.same({ 1, 2 }, m.bias.grad:tolist())
    assert.is_false(x.requires_grad)
    m:zeroGradParameters()
    assert.are.same({ 0, 0 }, m.bias.grad:tolist())
  end)

  it('updateParameters steps against the gradient; m(x) keeps nothing', function()
    local m = linear()
    m:forward(torch.tensor({ { 1.0, 1, 1 } }))
    m:backward(nil, torch.tensor({ { 1.0, 1 } }))
    m:updateParameters(0.5)
    assert.are.same({ { 0.5, 1.5, 2.5 }, { -1.5, -0.5, 0.5 } }, m.weight:tolist())
    assert.are.same({ 0, -1 }, m.bias:tolist())
    local fresh = linear()
    fresh(torch.ones(1, 3))
    assert.is_nil(rawget(fresh, 'output'))
    expect_error(function() fresh:backward(torch.ones(1, 3), torch.ones(1, 2)) end, 'call nn.Linear:forward(input) first')
  end)

  it("runs Torch7's XOR tutorial unchanged and learns XOR", function()
    torch.manual_seed(1)
    local mlp = nn.Sequential()
    mlp:add(nn.Linear(2, 20))
    mlp:add(nn.Tanh())
    mlp:add(nn.Linear(20, 1))
    local criterion = nn.MSECriterion()
    for _ = 1, 2500 do
      local input = torch.randn(2)
      local output = torch.Tensor(1)
      if input[1] * input[2] > 0 then output[1] = -1 else output[1] = 1 end
      criterion:forward(mlp:forward(input), output)
      mlp:zeroGradParameters()
      mlp:backward(input, criterion:backward(mlp.output, output))
      mlp:updateParameters(0.01)
    end
    local x = torch.Tensor(2)
    for _, p in ipairs({ { 0.5, 0.5, -1 }, { 0.5, -0.5, 1 }, { -0.5, 0.5, 1 }, { -0.5, -0.5, -1 } }) do
      x[1], x[2] = p[1], p[2]
      assert.are.equal(p[3], mlp:forward(x)[1] > 0 and 1 or -1)
    end
  end)

  it('nn.StochasticGradient trains on a Torch7 dataset table', function()
    torch.manual_seed(2)
    local dataset = {}
    function dataset:size() return 64 end
    for i = 1, dataset:size() do
      local input = torch.randn(2)
      dataset[i] = { input, torch.Tensor({ input[1] + 2 * input[2] }) }
    end
    local mlp = nn.Sequential():add(nn.Linear(2, 1))
    local trainer = nn.StochasticGradient(mlp, nn.MSECriterion())
    trainer.learningRate, trainer.maxIteration, trainer.verbose = 0.05, 20, false
    local errors = {}
    trainer.hookIteration = function(_, it, err) errors[it] = err end
    trainer:train(dataset)
    assert.are.equal(20, #errors)
    assert.is_true(errors[20] < 1e-3 and errors[20] < errors[1] / 100)
  end)
end)

describe('torch.CmdLine', function()
  it('parses options with their defaults, flips booleans and explains mistakes', function()
    local cmd = torch.CmdLine()
    cmd:text('Train')
    cmd:option('-lr', 0.1, 'learning rate')
    cmd:option('-cuda', false, 'use the GPU')
    cmd:option('-name', 'run', 'name')
    local o = cmd:parse({ '-lr', '0.5', '-cuda' })
    assert.are.same({ lr = 0.5, cuda = true, name = 'run' }, o)
    assert.are.same({ lr = 0.1, cuda = false, name = 'run' }, cmd:parse({}))
    assert.are.equal('exp,cuda=true,lr=0.5', cmd:string('exp', o))
    assert.is_truthy(cmd:help('train.lua'):find('-lr%s+learning rate %[0.1%]'))
    expect_error(function() cmd:parse({ '-lrr', '1' }) end, "unknown option '-lrr'")
    expect_error(function() cmd:parse({ '-lr', 'x' }) end, 'expects a number')
  end)
end)

describe('Torch7 helpers', function()
  it('torch.cat(a, b, dim), isTensor, manualSeed, random, uniform', function()
    assert.are.same({ 0, 0, 1, 1 }, torch.cat(torch.zeros(2), torch.ones(2)):tolist())
    assert.are.same({ { 0, 1 } }, torch.cat(torch.zeros(1, 1), torch.ones(1, 1), 2):tolist())
    assert.is_true(torch.isTensor(torch.zeros(1)))
    torch.manualSeed(5)
    local a = { torch.random(3), torch.random(2, 4), torch.uniform(1, 2) }
    torch.manualSeed(5)
    assert.are.same(a, { torch.random(3), torch.random(2, 4), torch.uniform(1, 2) })
    for _ = 1, 50 do
      local r = torch.random(2, 4)
      assert.is_true(r >= 2 and r <= 4 and math.type(r) == 'integer')
      local u = torch.uniform(1, 2)
      assert.is_true(u >= 1 and u < 2)
    end
  end)
end)

describe("Torch7's flat parameters and functional optimizers", function()
  it('getParameters gives views: writing x writes the weights, backward fills dx', function()
    local m = nn.Sequential():add(nn.Linear(2, 2)):add(nn.Linear(2, 1))
    local x, dx = m:getParameters()
    assert.are.same({ 9 }, x:size():totable())
    x:copy_(torch.arange(1, 10):float())
    assert.are.same({ { 1, 2 }, { 3, 4 } }, m[1].weight:tolist())
    assert.are.same({ 5, 6 }, m[1].bias:tolist())
    assert.are.same({ { 7, 8 } }, m[2].weight:tolist())
    local input = torch.tensor({ { 1.0, 1 } })
    m:zeroGradParameters()
    m:forward(input)
    m:backward(input, torch.ones(1, 1))
    -- h = W1 x + b1 = (8, 13); out = 7*8 + 8*13 + 9; d out/d W1 = W2^T x^T ...
    assert.are.same({ 7, 7, 8, 8, 7, 8, 8, 13, 1 }, dx:tolist())
  end)

  it('optim.sgd and optim.adam follow Torch7 on f(x) = sum(x^2) / 2 (gradient x)', function()
    local x = torch.tensor({ 1.0, -2 }, { dtype = 'float64' })
    local function feval(p) return 0.5 * (p * p):sum():item(), p:clone() end
    local cfg = { learningRate = 0.1, momentum = 0.5 }
    local _, fs = optim.sgd(feval, x, cfg)
    assert.are.same({ 2.5 }, fs)
    assert.are.same({ 0.9, -1.8 }, x:tolist())          -- first step: the buffer is the gradient
    optim.sgd(feval, x, cfg)                             -- buffer 0.5 * (1, -2) + 0.5 * (0.9, -1.8)
    local want = { 0.9 - 0.1 * 0.95, -1.8 + 0.1 * 1.9 }
    for i = 1, 2 do assert(math.abs(x[i] - want[i]) < 1e-12) end
    local y = torch.tensor({ 1.0, -2 }, { dtype = 'float64' })
    optim.adam(feval, y, { learningRate = 0.01 })
    -- first Adam step moves each coordinate by lr * sign(g) (up to epsilon)
    assert(math.abs(y[1] - 0.99) < 1e-7 and math.abs(y[2] + 1.99) < 1e-7, tostring(y))
    expect_error(function() optim.sgd(feval, 3) end, 'expected the parameters as a tensor')
  end)
end)

describe("Torch7's layer names", function()
  it('build the LeNet of the Torch7 tutorial and keep a batch dim in View', function()
    local net = nn.Sequential()
    net:add(nn.SpatialConvolution(3, 6, 5, 5)):add(nn.ReLU()):add(nn.SpatialMaxPooling(2, 2, 2, 2))
    net:add(nn.SpatialConvolution(6, 16, 5, 5)):add(nn.ReLU()):add(nn.SpatialMaxPooling(2, 2, 2, 2))
    net:add(nn.View(16 * 5 * 5)):add(nn.Linear(400, 120)):add(nn.Linear(120, 10)):add(nn.LogSoftMax())
    assert.are.same({ 10 }, net:forward(torch.rand(3, 32, 32)):size():totable())
    assert.are.same({ 4, 10 }, net:forward(torch.rand(4, 3, 32, 32)):size():totable())
    local p = net:forward(torch.rand(2, 3, 32, 32)):exp():sum(2)
    local q = p:tolist()   -- p has a history, so p[1] would be a 0-dim tensor
    assert(math.abs(q[1] - 1) < 1e-5 and math.abs(q[2] - 1) < 1e-5)
    assert.are.equal('SpatialConvolution(3, 6, kernel_size=(5, 5), stride=(1, 1))', tostring(net[1]))
  end)

  it('SpatialConvolution takes kW, kH, dW, dH, padW, padH in that order', function()
    local c = nn.SpatialConvolution(1, 1, 3, 1, 2, 1, 1, 0)   -- 3 wide, 1 high, stride 2 across
    assert.are.same({ 1, 1, 4, 3 }, c(torch.zeros(1, 1, 4, 5)):size():totable())
  end)

  it('Threshold, SoftMax and SpatialMaxPooling:ceil', function()
    assert.are.same({ 7, 2, 7 }, nn.Threshold(1, 7)(torch.tensor({ 0.5, 2, 1 })):tolist())
    local s = nn.SoftMax()(torch.tensor({ { 0.0, 0 } }))
    assert.are.same({ { 0.5, 0.5 } }, s:tolist())
    assert.are.same({ 1, 1, 2, 2 }, nn.SpatialMaxPooling(2, 2):ceil()(torch.zeros(1, 1, 3, 3)):size():totable())
    expect_error(function() nn.View(0) end, 'size 1 must be a positive integer or -1')
  end)
end)
