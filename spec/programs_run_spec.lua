-- The public PyTorch (and Torch7) programs translated to dplua under examples/programs/,
-- run through the dplua program with small sizes: each must finish and print its usual
-- lines, and the ones that learn must get better.  (The values against PyTorch are in
-- spec/programs_spec.lua for the features these programs needed.)
local shell = dofile('spec/helpers/shell.lua')
local dplua, q = shell.bin, shell.q

local function run(file, args)
  local cmd = ('env -u DPLUA_DEVICES -u DPLUA_CPU_DEVICES %s %s %s 2>&1'):format(q(dplua), q('examples/programs/' .. file), args or '')
  local p = assert(io.popen(cmd))
  local out = p:read('a')
  local ok = p:close() == true
  assert(ok, file .. ' failed:\n' .. out)
  return out
end

-- the numbers captured by pattern, matched against each line of out
local function numbers(out, pattern)
  local list = {}
  for line in out:gmatch('[^\n]+') do
    local v = line:match(pattern)
    if v then list[#list + 1] = tonumber(v) end
  end
  return list
end

describe('examples/programs', function()
  it('regression.lua fits the polynomial', function()
    local out = run('regression.lua')
    assert.truthy(out:find('==> Learned function:', 1, true), out)
    assert.is_true(numbers(out, '^Loss: ([%d.]+) after')[1] < 1e-3, out)
  end)

  it('makemore_bigram.lua samples names and its loss falls', function()
    local out = run('makemore_bigram.lua', '10')
    local losses = numbers(out, '^(%d%.%d+)$')
    assert.are.equal(10, #losses, out)
    assert.is_true(losses[10] < losses[1], out)
    assert.truthy(out:find('nll/n=2.4', 1, true), out)
  end)

  it('custom_function.lua fits sin with the Legendre Function', function()
    local out = run('custom_function.lua', '300')
    local losses = numbers(out, '^%d+\t([%d.]+)$')
    assert.are.equal(3, #losses, out)
    assert.is_true(losses[3] < losses[1], out)
    assert.truthy(out:find('Result: y = ', 1, true), out)
  end)

  it('vae.lua trains and tests', function()
    local out = run('vae.lua', '1')
    assert.truthy(out:find('Train Epoch: 1 [0/1024 (0%)]', 1, true), out)
    assert.truthy(out:find('====> Test set loss:', 1, true), out)
  end)

  it('dcgan.lua runs both updates', function()
    local out = run('dcgan.lua', '2')
    assert.truthy(out:find('[1/1][2/2] Loss_D:', 1, true), out)
    assert.truthy(out:find('torch.Size([16, 3, 32, 32])', 1, true), out)
  end)

  it('reinforce.lua and actor_critic.lua run episodes of CartPole', function()
    assert.truthy(run('reinforce.lua', '10'):find('Episode 10\tLast reward:', 1, true))
    assert.truthy(run('actor_critic.lua', '10'):find('Episode 10\tLast reward:', 1, true))
  end)

  it('quickstart.lua trains, tests, saves and loads', function()
    local out = run('quickstart.lua', '1')
    assert.truthy(out:find('Accuracy: ', 1, true), out)
    assert.truthy(out:find('Predicted: "', 1, true), out)
  end)

  it('spatial_transformer.lua trains through affine_grid and grid_sample', function()
    local out = run('spatial_transformer.lua', '1')
    assert.truthy(out:find('Test set: Average loss:', 1, true), out)
  end)

  it('time_sequence_prediction.lua runs L-BFGS over the LSTMCells', function()
    local out = run('time_sequence_prediction.lua', '1')
    assert.truthy(out:find('test loss:', 1, true), out)
  end)

  it('word_language_model.lua trains the LSTM and the Transformer', function()
    assert.truthy(run('word_language_model.lua', 'LSTM 1'):find('End of training', 1, true))
    assert.truthy(run('word_language_model.lua', 'Transformer 1'):find('End of training', 1, true))
  end)

  it('nn_tutorial.lua refactors logistic regression into a CNN, each stage learning', function()
    local out = run('nn_tutorial.lua', '2')
    local val = numbers(out, '^%d\t([%d.]+)$')
    assert.are.equal(4, #val, out)   -- two epochs of the logistic model, two of the CNN
    assert.is_true(val[2] < val[1] and val[4] < val[3], out)
    assert.truthy(out:find('grad_fn=<SelectBackward0>', 1, true), out)
  end)

  it('super_resolution.lua, fgsm.lua, forward_forward.lua and torch7_classifier.lua run', function()
    assert.truthy(run('super_resolution.lua', '1'):find('Avg. PSNR', 1, true))
    assert.truthy(run('fgsm.lua'):find('Epsilon: 0.3\tTest Accuracy', 1, true))
    assert.truthy(run('forward_forward.lua', '5'):find('test error:', 1, true))
    assert.truthy(run('torch7_classifier.lua', '-maxIter 1 -trainSize 100'):find('global correct', 1, true))
  end)
end)
