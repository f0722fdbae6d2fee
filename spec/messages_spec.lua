-- Messages for the mistakes people moving from Python (or from Torch7) make, pointing at
-- their own line.
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'
local expect_error = dofile('spec/helpers/check.lua').expect_error

describe('messages for common slips', function()
  it('x.size() asks for the colon', function()
    local x = torch.zeros(2)
    expect_error(function() return x.size() end, 'call methods with a colon: x:size()')
  end)

  it('an optimizer given the module names the fix', function()
    expect_error(function() optim.SGD(nn.Linear(2, 2), { lr = 0.1 }) end,
      'got the module itself (nn.Linear); pass model:parameters()')
  end)

  it("an engine error inside a loss points at the caller's line, not the library's", function()
    local ok, err = pcall(function() nn.MSELoss()(torch.zeros(2), torch.zeros(3)) end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('^spec/messages_spec.lua:%d+: mse_loss: the input has shape %[2%]'),
      tostring(err))
  end)

  it('an unknown option lists the valid ones', function()
    expect_error(function() torch.zeros(2, { dtpye = 'float64' }) end, "unknown option dtpye = 'float64'",
      'the options are device, dtype, requires_grad')
  end)

  -- the draws that take a generator= are Lua wrappers around the engine's functions: their
  -- errors name the public function and point at the caller's line
  it('an unknown option to a random draw names the function and the caller', function()
    local function at_line(f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      return tostring(err)
    end
    for name, f in pairs({
      ['torch.randn'] = function() torch.randn(2, { dtpye = torch.float64 }) end,
      ['torch.rand_like'] = function() torch.rand_like(torch.zeros(2), { dtpye = 'float64' }) end,
      ['torch.randint'] = function() torch.randint(5, { 2 }, { dtpye = 'int64' }) end,
      ['torch.randperm'] = function() torch.randperm(5, { dtpye = 'int64' }) end,
    }) do
      local err = at_line(f)
      assert.is_truthy(err:find('^spec/messages_spec.lua:%d+: ' .. name:gsub('%.', '%%.') .. ': unknown option dtpye'), err)
      assert.is_truthy(err:find('the options are device, dtype, requires_grad', 1, true), err)
      assert.is_falsy(err:find('orig', 1, true), err)
      assert.is_falsy(err:find('random.lua', 1, true), err)
    end
    local err = at_line(function() torch.randn('x') end)
    assert.is_truthy(err:find("bad argument #1 to 'torch.randn'", 1, true), err)
    assert.is_truthy(err:find('^spec/messages_spec.lua:'), err)
  end)

  it('unknown options are refused, listing the valid ones, across torch, nn, optim and data', function()
    local p = nn.Linear(2, 2):parameters()
    for _, case in ipairs({
      { function() torch.multinomial(torch.ones(3), 2, { replace = true }) end, 'the options are generator, replacement' },
      { function() torch.zeros(2):uniform_({ fro = 1 }) end, 'uniform_: unknown option fro = 1 (the options are from, generator, to)' },
      { function() torch.zeros(2):normal_({ sdt = 1 }) end, 'the options are generator, mean, std' },
      { function() torch.zeros(2):bernoulli_({ q = 1 }) end, 'the options are generator, p' },
      { function() torch.zeros(2):random_(1, 5, { gen = 1 }) end, 'the options are generator' },
      { function() torch.normal(0, 1, { 2 }, { generatr = 1 }) end, 'torch.normal: unknown option generatr' },
      { function() torch.bernoulli(torch.zeros(2), { generatr = 1 }) end, 'torch.bernoulli: unknown option generatr' },
      { function() nn.Dropout(0.5, { inplac = true }) end, 'nn.Dropout: unknown option inplac = true (the options are inplace, p)' },
      { function() nn.Linear(2, 3, { biass = false }) end, 'the options are bias, device, dtype' },
      { function() nn.Conv2d(1, 2, 3, { strid = 2 }) end, 'padding_mode, stride' },
      { function() nn.LSTM(2, 3, { num_layer = 2 }) end, 'num_layers' },
      { function() nn.CrossEntropyLoss({ reductio = 'sum' }) end, 'label_smoothing, reduction, weight' },
      { function() optim.SGD(p, { lr = 0.1, momentun = 0.9 }) end, 'the options are dampening, lr, maximize, momentum' },
      { function() optim.Adam(p, { betas2 = 1 }) end, 'amsgrad, betas, eps' },
      { function() torch.data.DataLoader(torch.data.TensorDataset(torch.zeros(4)), { batchsize = 2 }) end, 'batch_size' },
      { function() torch.load('x.safetensors', { map_locaton = 'cpu' }) end, "torch.load: unknown option map_locaton = 'cpu' (the options are map_location)" },
      { function() torch.load_npy('x.npy', { map_location = 'cpu' }) end, 'torch.load_npy takes no options' },
    }) do
      expect_error(case[1], case[2])
    end
  end)
end)
