-- hardening2_spec.lua: bad inputs that once gave unclear errors or broke later calls; each
-- error names the function, the argument and the bad value.
local torch = require 'torch'

local function err(fn, ...)
  local ok, msg = pcall(fn, ...)
  assert.is_false(ok, 'expected an error')
  return tostring(msg)
end

local function has(msg, s) assert.truthy(msg:find(s, 1, true), msg) end

describe('torch.autograd.backward with a bad argument', function()
  it('names the function, the argument and the value', function()
    local m = err(torch.autograd.backward, 5)
    has(m, 'torch.autograd.backward: argument 1 (tensors) must be a tensor or a table of tensors, got number 5')
    has(err(torch.autograd.backward, { 5 }), 'tensors[1] must be a tensor, got number')
    has(err(torch.autograd.backward, {}), 'empty table')
    has(err(torch.autograd.backward, torch.ones(1, { requires_grad = true }), 7), 'argument 2 (grad_tensors)')
  end)
end)

describe('torch.set_printoptions with bad options', function()
  after_each(function() torch.set_printoptions { precision = 4 } end)

  it('rejects a non-table', function()
    has(err(torch.set_printoptions, 5), 'torch.set_printoptions: options must be a table')
    has(err(torch.set_printoptions, 5), 'got number 5')
  end)

  it('rejects negative or fractional values and leaves printing working', function()
    has(err(torch.set_printoptions, { precision = -1 }), 'option precision must be an integer >= 0, got -1')
    has(err(torch.set_printoptions, { linewidth = 0 }), 'option linewidth must be an integer >= 1, got 0')
    has(err(torch.set_printoptions, { threshold = 'x' }), 'option threshold')
    has(err(torch.set_printoptions, { sci_mode = 1 }), 'option sci_mode must be a boolean')
    has(err(torch.set_printoptions, { bogus = 1 }), 'unknown option bogus = 1')
    assert.truthy(tostring(torch.tensor({ 0.5, 0.25 })):find('tensor([0.5000, 0.2500]', 1, true))
  end)
end)

describe('dtype and options of the creation functions', function()
  it('names the function and the option instead of "bad argument #-1"', function()
    local m = err(torch.zeros, 2, { dtype = 'float8' })
    has(m, "torch.zeros: option dtype: unknown dtype 'float8'")
    assert.falsy(m:find('#-1', 1, true), m)
    has(err(torch.full, { 2 }, 1, { dtype = 'f16' }), "torch.full: option dtype: unknown dtype 'f16'")
    has(err(torch.arange, 1, 5, { dtype = 'x' }), "torch.arange: option dtype: unknown dtype 'x'")
    has(err(torch.zeros, 2, { dtype = 5 }), 'torch.zeros: option dtype must be a string')
    has(err(torch.zeros, 2, { bogus = 1 }), 'torch.zeros: unknown option bogus = 1 (the options are')
    has(err(torch.ones, 2, { device = 'gpu' }), "torch.ones: option device: unknown device 'gpu'")
  end)
end)

describe('internal names in messages', function()
  it('are the public ones, never torch._C', function()
    for _ = 1, 3 do
      local m = err(torch.arange, 'a')
      assert.falsy(m:find('_C', 1, true), m)
      has(m, 'torch.arange')
      m = err(torch.zeros, 'a')
      assert.falsy(m:find('_C', 1, true), m)
    end
    -- torch._C still reads and iterates as before
    assert.are.equal('function', type(torch._C.arange))
    local n = 0
    for _ in pairs(require 'torch._C') do n = n + 1 end
    assert.truthy(n > 50)
  end)
end)

describe('Tensor:to with a bad table', function()
  it('says what the table is, not "invalid option number"', function()
    local m = err(function() return torch.ones(2):to({ 1, 2 }) end)
    has(m, 'Tensor:to: argument 1: expected an options table')
    assert.falsy(m:find("invalid option 'number'", 1, true), m)
    has(err(function() return torch.ones(2):to({ dtype = 'f16' }) end), 'Tensor:to: option dtype: unknown dtype f16')
    has(err(function() return torch.ones(2):to({ bogus = 1 }) end), "Tensor:to: unknown option 'bogus'")
  end)
end)

describe('torch.save and torch.load errors', function()
  it('name the function once', function()
    for _, m in ipairs {
      err(torch.save, '/nonexistent-dir/x.safetensors', { a = torch.ones(1) }),
      err(torch.load, '/nonexistent-dir/x.safetensors'),
      err(torch.save, '/tmp', { a = torch.ones(1) }),
      err(torch.load_npy, '/nonexistent-dir/x.npy'),
    } do
      local _, count = m:gsub('torch%.[%w_]+: ', '')
      assert.are.equal(1, count, m)
    end
  end)
end)

describe('one option check for torch, nn, optim, torch.data and torch.distributed', function()
  local nn, optim = require 'nn', require 'optim'
  local data, dist = require 'torch.data', require 'torch.distributed'

  it('reports an unknown option the same way everywhere', function()
    local ds = data.TensorDataset(torch.ones(4, 2))
    local cases = {
      { 'nn.Linear', function() return nn.Linear(2, 2, { bogus = 1 }) end },
      { 'optim.SGD', function() return optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1, bogus = 1 }) end },
      { 'DataLoader', function() return data.DataLoader(ds, { bogus = 1 }) end },
      { 'RandomSampler', function() return data.RandomSampler(ds, { bogus = 1 }) end },
      { 'torch.set_printoptions', function() return torch.set_printoptions { bogus = 1 } end },
      { 'torch.distributed.init_process_group', function() return dist.init_process_group { bogus = 1 } end },
    }
    for _, c in ipairs(cases) do
      local m = err(c[2])
      has(m, c[1] .. ': unknown option bogus = 1 (the options are ')
    end
    has(err(function() return data.DataLoader(ds, 5) end), 'DataLoader: options must be a table, got number 5')
  end)

  it('is the one torch.options that nn.utils uses', function()
    local options = require 'torch.options'
    local utils = require 'nn.utils'
    assert.are.equal(options.check, utils.options)
    assert.are.equal(options.required, utils.required)
    assert.are.equal(options.required, optim.Optimizer.required)
  end)
end)

describe('zero_grad', function()
  local nn, optim = require 'nn', require 'optim'

  it('behaves the same on a module and an optimizer', function()
    local m = nn.Linear(2, 1)
    local opt = optim.SGD(m:parameters(), { lr = 0.1 })
    m(torch.ones(3, 2)):sum():backward()
    m:zero_grad()
    assert.are.equal(0, m.weight.grad:abs():sum():item())
    opt:zero_grad({ set_to_none = true })
    assert.is_nil(m.weight.grad)
    has(err(function() m:zero_grad({ bogus = 1 }) end), 'zero_grad: unknown option bogus = 1')
    has(err(function() opt:zero_grad({ bogus = 1 }) end), 'zero_grad: unknown option bogus = 1')
  end)
end)

describe('DataLoader prefetch without workers', function()
  it('is refused, naming the value, as PyTorch refuses prefetch_factor with num_workers = 0', function()
    local data = require 'torch.data'
    local ds = data.TensorDataset(torch.ones(4, 2))
    local ok, err = pcall(data.DataLoader, ds, { prefetch = 2 ^ 40 })
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('prefetch only applies with worker threads', 1, true), tostring(err))
    assert.is_truthy(tostring(err):find('1099511627776', 1, true), tostring(err))
    assert.is_true((pcall(data.DataLoader, ds, { prefetch = 4, num_workers = 1 })))
  end)
end)
