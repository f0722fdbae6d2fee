-- Parity with PyTorch 1.13: spec/fixtures/parity.lua holds reference runs (written by
-- spec/fixtures/make_parity.py) of a 2-layer MLP trained for 5 steps with SGD (momentum,
-- weight decay, Nesterov), Adam and AdamW on cross-entropy and MSE losses.  The same
-- initial weights are loaded here and every step's loss, gradients and weights must agree
-- to 1e-5 relative.
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'spec'
local fixtures = dofile(here .. '/fixtures/parity.lua')

-- Relative to the largest magnitude in each tensor: an element near zero (an Adam update
-- of a parameter whose gradient is tiny) is judged against the tensor's scale.
local RTOL = 1e-5

local function f32(values) return torch.tensor(values, { dtype = 'float32' }) end

local function agree(what, got, expected)
  local e = f32(expected)
  assert(got:size() == e:size(), ('%s: shape %s, expected %s'):format(what, tostring(got:size()), tostring(e:size())))
  local g, r = got:detach():double(), e:double()
  local err, scale = (g - r):abs():max():item(), r:abs():max():item()
  assert(err <= RTOL * scale, ('%s differs from PyTorch by %g (%g relative):\n%s\n%s')
    :format(what, err, err / scale, tostring(got), tostring(e)))
end

local function make_optimizer(fx, params)
  local opts = {}
  for k, v in pairs(fx.options) do opts[k] = v end
  return optim[fx.optimizer](params, opts)
end

local names = {}
for name in pairs(fixtures) do names[#names + 1] = name end
table.sort(names)

describe('parity with PyTorch 1.13', function()
  for _, name in ipairs(names) do
    local fx = fixtures[name]
    it(('%s: %s MLP, %s, %s, 5 steps'):format(name, fx.activation, fx.loss, fx.optimizer), function()
      local model = nn.Sequential(nn.Linear(6, 8), nn[fx.activation](), nn.Linear(8, 3))
      local init = {}
      for k, v in pairs(fx.init) do init[k] = f32(v) end
      model:load_state_dict(init)
      local x = f32(fx.x)
      local y, criterion
      if fx.loss == 'cross_entropy' then
        y, criterion = torch.tensor(fx.y, { dtype = 'int64' }), nn.CrossEntropyLoss()
      else
        y, criterion = f32(fx.y), nn.MSELoss()
      end
      local opt = make_optimizer(fx, model:parameters())
      local params = {}
      for pname, p in model:named_parameters() do params[pname] = p end
      for step, ref in ipairs(fx.steps) do
        opt:zero_grad()
        local loss = criterion(model(x), y)
        loss:backward()
        local l = loss:item()
        assert(math.abs(l - ref.loss) <= RTOL * math.abs(ref.loss),
          ('step %d: loss %.9g, PyTorch %.9g'):format(step, l, ref.loss))
        for pname, g in pairs(ref.grads) do
          assert(params[pname], 'no parameter ' .. pname)
          agree(('step %d: gradient of %s'):format(step, pname), params[pname].grad, g)
        end
        opt:step()
        for pname, w in pairs(ref.weights) do
          agree(('step %d: %s after the update'):format(step, pname), params[pname], w)
        end
      end
    end)
  end

  it('the fixture generator still runs (when PyTorch 1.13 is installed)', function()
    local probe = io.popen('/usr/bin/python3 -c "import torch; print(torch.__version__)" 2>/dev/null')
    local version = probe and probe:read('l')
    if probe then probe:close() end
    if not version or not version:match('^1%.13') then
      pending('PyTorch 1.13 is not installed')
      return
    end
    local out = os.tmpname()
    local ok = os.execute(('/usr/bin/python3 %s/fixtures/make_parity.py %s'):format(here, out))
    assert.is_true(ok == true or ok == 0)
    local regenerated = dofile(out)
    os.remove(out)
    for _, name in ipairs(names) do
      assert.are.same(fixtures[name].init, regenerated[name].init)
      local a, b = fixtures[name].steps[5].loss, regenerated[name].steps[5].loss
      assert(math.abs(a - b) <= 1e-6 * math.abs(a), ('%s: loss %.9g, regenerated %.9g'):format(name, a, b))
    end
  end)
end)
