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
end)
