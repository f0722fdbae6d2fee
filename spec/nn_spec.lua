-- nn: module bookkeeping (registration, names, moving, state), layers and losses, checked
-- against hand-computed values and PyTorch 1.13's numbers for the same inputs.
local torch = require 'torch'
local nn = require 'nn'
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function close(a, b, tol)
  tol = tol or 1e-6
  if type(a) == 'number' then
    assert(math.abs(a - b) <= tol * (1 + math.abs(b)), ('%.9g ~= %.9g'):format(a, b))
  else
    b = torch.is_tensor(b) and b or torch.tensor(b, { dtype = a.dtype })
    local diff = (a:detach():double() - b:detach():double()):abs():max():item()
    assert(diff <= tol * (1 + b:detach():double():abs():max():item()),
      ('tensors differ by %g:\n%s\n%s'):format(diff, tostring(a), tostring(b)))
  end
end

local function names(m)
  local out = {}
  for name in m:named_parameters() do out[#out + 1] = name end
  return out
end

describe('nn.Module', function()
  local Model, parent = torch.class('NNSpecModel', 'nn.Module')
  function Model:__init()
    parent.__init(self)
    self.fc2 = nn.Linear(3, 4)
    self.scale = nn.Parameter(torch.ones(1))
    self.fc1 = nn.Linear(4, 2)
    self.hidden = 7                  -- a plain field: not registered
    self.plain = torch.zeros(2)      -- a plain tensor: not registered
  end
  function Model:forward(x, k)
    return self.fc1(self.fc2(x) * self.scale) * (k or 1)
  end

  it('registers modules and parameters in first-assignment order, own parameters first', function()
    local m = Model()
    assert.are.same({ 'scale', 'fc2.weight', 'fc2.bias', 'fc1.weight', 'fc1.bias' }, names(m))
    local ps = m:parameters()
    assert.are.equal(5, #ps)
    assert.is_true(rawequal(ps[1], m.scale))
    assert.is_true(rawequal(ps[2], m.fc2.weight))
    assert.is_true(rawequal(ps[5], m.fc1.bias))
    local ch = m:children()
    assert.are.equal(2, #ch)
    assert.is_true(rawequal(ch[1], m.fc2))
    assert.are.equal(3, #m:modules())
  end)

  it('keeps the place of a name assigned again', function()
    local m = Model()
    m.fc2 = nn.Linear(3, 5, { bias = false })
    assert.are.same({ 'scale', 'fc2.weight', 'fc1.weight', 'fc1.bias' }, names(m))
    m.fc2 = nil
    assert.are.same({ 'scale', 'fc1.weight', 'fc1.bias' }, names(m))
    m.fc2 = nn.Linear(3, 4)
    assert.are.same({ 'scale', 'fc2.weight', 'fc2.bias', 'fc1.weight', 'fc1.bias' }, names(m))
  end)

  it('lists a shared parameter once', function()
    local a = nn.Linear(2, 2)
    local s = nn.Sequential(a, nn.ReLU(), a)
    assert.are.same({ '1.weight', '1.bias' }, names(s))
    assert.are.equal(2, #s:parameters())
  end)

  it('calls forward through m(...) with every argument', function()
    local m = Model()
    local x = torch.randn(5, 3)
    local y = m(x, 2)
    assert.is_true(y:size() == torch.Size { 5, 2 })
    close(y, m:forward(x, 1) * 2, 1e-6)
  end)

  it('names Sequential children by their 1-based position', function()
    local M, p = torch.class('NNSpecSeqHolder', 'nn.Module')
    function M:__init()
      p.__init(self)
      self.seq = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    end
    local m = M()
    assert.are.same({ 'seq.1.weight', 'seq.1.bias', 'seq.3.weight', 'seq.3.bias' }, names(m))
    assert.are.equal(3, #m.seq)
    local mods = {}
    for name, mod in m:named_modules() do mods[#mods + 1] = name .. '=' .. torch.typename(mod) end
    assert.are.same({ '=NNSpecSeqHolder', 'seq=nn.Sequential', 'seq.1=nn.Linear', 'seq.2=nn.Tanh',
      'seq.3=nn.Linear' }, mods)
  end)

  it('prints a tree like PyTorch', function()
    local M, p = torch.class('NNSpecPrinted', 'nn.Module')
    function M:__init()
      p.__init(self)
      self.fc = nn.Linear(5, 2)
    end
    assert.are.equal('NNSpecPrinted(\n  (fc): Linear(in_features=5, out_features=2, bias=true)\n)', tostring(M()))
    local s = nn.Sequential(nn.Linear(4, 3, { bias = false }), nn.ReLU(),
      nn.Sequential(nn.Dropout(0.25), nn.Flatten()), nn.Sigmoid(), nn.Identity())
    assert.are.equal([[
Sequential(
  (1): Linear(in_features=4, out_features=3, bias=false)
  (2): ReLU()
  (3): Sequential(
    (1): Dropout(p=0.25, inplace=false)
    (2): Flatten(start_dim=2, end_dim=-1)
  )
  (4): Sigmoid()
  (5): Identity()
)]], tostring(s))
    assert.are.equal('MSELoss()', tostring(nn.MSELoss()))
    assert.are.equal('CrossEntropyLoss()', tostring(nn.CrossEntropyLoss { reduction = 'sum' }))
  end)

  it('puts nn.Foo classes into nn and resolves unknown names to nil', function()
    local Foo, p = torch.class('nn.NNSpecFoo', 'nn.Module')
    function Foo:__init() p.__init(self) end
    assert.is_true(rawequal(nn.NNSpecFoo, Foo))
    assert.is_nil(nn.NoSuchLayer)
  end)

  it('makes parameters of floating point tensors only', function()
    local t = torch.zeros(2)
    local p0 = nn.Parameter(t)   -- a new leaf sharing t's storage; t is left as it was
    assert.is_false(rawequal(p0, t))
    assert.is_true(p0.requires_grad and p0.is_leaf)
    assert.is_false(t.requires_grad)
    t:fill_(3)
    assert.are.equal(3, p0[1]:item())   -- a parameter: p0[1] is a 0-dim tensor
    assert.is_false(nn.Parameter(torch.zeros(2), false).requires_grad)
    local y = torch.ones(2, { requires_grad = true }) * 2
    local p = nn.Parameter(y)
    assert.is_true(p.is_leaf and p.requires_grad)
    expect_error(function() nn.Parameter(torch.tensor { 1, 2 }) end, 'int64')
    expect_error(function() nn.Parameter('w') end, 'nn.Parameter', 'string')
  end)

  it('explains a subclass that did not call parent.__init', function()
    local Bad = torch.class('NNSpecBad', 'nn.Module')
    function Bad:__init() self.fc = nn.Linear(1, 1) end
    expect_error(function() Bad() end, 'parent.__init(self)')
  end)

  it('says when forward is missing', function()
    local Empty, p = torch.class('NNSpecEmpty', 'nn.Module')
    function Empty:__init() p.__init(self) end
    expect_error(function() Empty()(torch.zeros(1)) end, 'forward is not implemented')
  end)

  it('switches train and eval on every module', function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert.is_true(m.training)
    assert.are.equal(m, m:eval())
    assert.is_false(m.training)
    assert.is_false(m[2][1].training)
    m:train()
    assert.is_true(m[2][1].training)
    m:train(false)
    assert.is_false(m[1].training)
  end)

  it('applies a function to every module, children first', function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    local seen = {}
    assert.are.equal(m, m:apply(function(x) seen[#seen + 1] = torch.typename(x) end))
    assert.are.same({ 'nn.Linear', 'nn.ReLU', 'nn.Sequential' }, seen)
  end)

  it('zeroes gradients in place', function()
    local m = nn.Linear(3, 2)
    m(torch.randn(4, 3)):sum():backward()
    assert.is_true(m.weight.grad:abs():sum():item() > 0)
    m:zero_grad()
    assert.are.equal(0, m.weight.grad:abs():sum():item())
    assert.are.equal(0, m.bias.grad:abs():sum():item())
  end)

  it('registers buffers, which state_dict holds and to() converts', function()
    local M, p = torch.class('NNSpecBuffered', 'nn.Module')
    function M:__init()
      p.__init(self)
      self.fc = nn.Linear(2, 2)
      self:register_buffer('running', torch.ones(2))
      self:register_buffer('count', torch.tensor({ 3 }))
    end
    local m = M()
    local bufs = {}
    for name in m:named_buffers() do bufs[#bufs + 1] = name end
    assert.are.same({ 'running', 'count' }, bufs)
    local sd = m:state_dict()
    assert.is_not_nil(sd.running)
    assert.is_not_nil(sd['fc.weight'])
    m:double()
    assert.are.equal('float64', m.running.dtype)
    assert.are.equal('int64', m.count.dtype)   -- only floating point tensors change dtype
    expect_error(function() m:register_buffer('a.b', torch.ones(1)) end, 'a.b')
    expect_error(function() m:register_buffer('x', 5) end, 'x', 'tensor')
  end)
end)

describe('nn.Module moving and converting', function()
  it('keeps the parameter objects, so an earlier optimizer still works', function()
    local optim = require 'optim'
    local m = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    local before = m:parameters()
    local opt = optim.SGD(m:parameters(), { lr = 0.1 })
    assert.are.equal(m, m:double())
    local after = m:parameters()
    for i = 1, #before do
      assert.is_true(rawequal(before[i], after[i]))
      assert.are.equal('float64', after[i].dtype)
      assert.is_true(after[i].requires_grad)
      assert.is_true(after[i].is_leaf)
    end
    local w0 = m[1].weight:clone()
    local x = torch.randn(4, 3, { dtype = 'float64' })
    m(x):sum():backward()
    assert.are.equal('float64', m[1].weight.grad.dtype)
    opt:step()
    close(m[1].weight, w0 - m[1].weight.grad * 0.1, 1e-12)
    assert.are.equal(m, m:float())
    assert.are.equal('float32', m[1].weight.dtype)
    assert.are.equal('float32', m[1].weight.grad.dtype)
    assert.are.equal(m, m:to('float64'))
    assert.are.equal('float64', m[3].bias.dtype)
    assert.are.equal(m, m:to { dtype = 'float32' })
    assert.are.equal('float32', m[3].bias.dtype)
  end)

  it('moves to another CPU device', function()
    -- CPU devices are fixed before the first tensor, so this runs in a fresh interpreter
    local code = [[
      local torch, nn, optim = require 'torch', require 'nn', require 'optim'
      local m = nn.Linear(3, 2)
      local w = m.weight
      local opt = optim.SGD(m:parameters(), { lr = 0.1 })
      m(torch.randn(2, 3)):sum():backward()
      assert(m:to('cpu:1') == m)
      assert(rawequal(w, m.weight))
      assert(tostring(m.weight.device) == 'cpu:1' and tostring(m.weight.grad.device) == 'cpu:1')
      local y = m(torch.randn(2, 3):to('cpu:1'))
      assert(tostring(y.device) == 'cpu:1')
      opt:step()
      m:cpu()
      assert(tostring(m.bias.device) == 'cpu' and rawequal(w, m.weight))
      print('moved ok')
    ]]
    local p = assert(io.popen("DPLUA_CPU_DEVICES=2 lua5.4 -e '" .. code:gsub("'", "'\\''") .. "' 2>&1"))
    local out = p:read('a')
    p:close()
    assert(out:find('moved ok', 1, true), out)
  end)

  it('moves to CUDA, or says that CUDA is not available', function()
    local m = nn.Linear(3, 2)
    if not torch.cuda.is_available() then
      expect_error(function() m:cuda() end, 'CUDA is not available')
      return
    end
    local w = m.weight
    m:cuda()
    assert.is_true(rawequal(w, m.weight))
    assert.is_true(m.weight.is_cuda)
    assert.is_true(m(torch.randn(2, 3):cuda()).is_cuda)
  end)
end)

describe('state_dict', function()
  it('round-trips into another model', function()
    local a = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    local b = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    local sd = a:state_dict()
    local keys = {}
    for k in pairs(sd) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ '1.bias', '1.weight', '3.bias', '3.weight' }, keys)
    assert.is_false(sd['1.weight'].requires_grad)
    local r = b:load_state_dict(sd)
    assert.are.same({}, r.missing_keys)
    assert.are.same({}, r.unexpected_keys)
    local x = torch.randn(5, 3)
    assert.is_true(torch.equal(a(x), b(x)))
    assert.is_true(b[1].weight.requires_grad)
    -- the copy is a copy
    b[1].weight:detach():fill_(0)
    assert.is_false(torch.equal(a[1].weight, b[1].weight))
  end)

  it('names missing, unexpected and wrongly shaped keys', function()
    local m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    local sd = m:state_dict()
    sd['2.bias'] = nil
    sd['3.weight'] = torch.zeros(1)
    local err = expect_error(function() m:load_state_dict(sd) end,
      'Error(s) in loading state_dict for Sequential', 'Missing key(s) in state_dict: "2.bias"',
      'Unexpected key(s) in state_dict: "3.weight"')
    assert.is_nil(err:find('size mismatch', 1, true))
    local r = m:load_state_dict(sd, { strict = false })
    assert.are.same({ '2.bias' }, r.missing_keys)
    assert.are.same({ '3.weight' }, r.unexpected_keys)
    sd = m:state_dict()
    sd['1.weight'] = torch.zeros(4, 5)
    expect_error(function() m:load_state_dict(sd, { strict = false }) end,
      'size mismatch for 1.weight', '[4, 5]', '[4, 3]')
    expect_error(function() m:load_state_dict(5) end, 'load_state_dict', 'table')
    expect_error(function() m:load_state_dict({}, { strcit = true }) end, 'strcit')
  end)
end)

describe('nn.Linear', function()
  it('has PyTorch shapes and U(-1/sqrt(in), 1/sqrt(in)) initialisation', function()
    torch.manual_seed(1)
    local m = nn.Linear(100, 1000)
    assert.is_true(m.weight:size() == torch.Size { 1000, 100 })
    assert.is_true(m.bias:size() == torch.Size { 1000 })
    local bound = 1 / math.sqrt(100)
    local w = m.weight:detach():double()
    assert.is_true(w:max():item() <= bound and w:min():item() >= -bound)
    assert.is_true(w:max():item() > 0.99 * bound and w:min():item() < -0.99 * bound)
    -- U(-b, b): mean 0, variance b^2 / 3; 100000 draws put both well inside these bounds
    assert.is_true(math.abs(w:mean():item()) < 0.01 * bound)
    assert.is_true(math.abs((w * w):mean():item() / (bound * bound / 3) - 1) < 0.02)
    local b = m.bias:detach()
    assert.is_true(b:max():item() <= bound and b:min():item() >= -bound)
    assert.is_true(m.weight.requires_grad and m.bias.requires_grad)
    -- the same seed, the same weights
    torch.manual_seed(7)
    local a1 = nn.Linear(3, 2)
    torch.manual_seed(7)
    local a2 = nn.Linear(3, 2)
    assert.is_true(torch.equal(a1.weight, a2.weight) and torch.equal(a1.bias, a2.bias))
  end)

  it('computes x W^T + b', function()
    local m = nn.Linear(2, 2)
    m:load_state_dict { weight = torch.tensor { { 1, 2 }, { 3, 4 } }:float(), bias = torch.tensor { 1, -1 }:float() }
    close(m(torch.tensor { { 1, 1 }, { 0.5, -1 } }), { { 4, 6 }, { -0.5, -3.5 } })
    close(m(torch.tensor { 2.0, 0.0 }), { 3, 5 })       -- 1-D input
    local x = torch.randn(2, 3, 2)                        -- batched input
    close(m(x), x:matmul(m.weight:t()) + m.bias, 1e-6)
    local nb = nn.Linear(2, 3, { bias = false })
    assert.is_nil(nb.bias)
    assert.are.equal(1, #nb:parameters())
    close(nb(torch.ones(1, 2)), nb.weight:sum(2):view(1, 3), 1e-6)
  end)

  it('rejects bad arguments and inputs with clear errors', function()
    expect_error(function() nn.Linear(2.5, 3) end, 'in_features', '2.5')
    expect_error(function() nn.Linear(2, 'x') end, 'out_features')
    expect_error(function() nn.Linear(2, 3, { biass = false }) end, 'biass')
    local m = nn.Linear(5, 2)
    expect_error(function() m(torch.zeros(3, 4)) end, 'Linear(in_features=5', '[3, 4]')
    expect_error(function() m('x') end, 'tensor')
  end)
end)

describe('nn.Sequential', function()
  it('chains its children', function()
    local s = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    local x = torch.randn(6, 3)
    close(s(x), s[3](s[1](x):relu()), 1e-6)
    assert.are.equal(s, s:add(nn.Sigmoid()))
    assert.are.equal(4, #s)
    local t = nn.Sequential { nn.Identity(), nn.Tanh() }
    assert.are.equal(2, #t)
  end)

  it('names the failing layer and the input shape', function()
    local s = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(5, 2))
    expect_error(function() s(torch.zeros(2, 3)) end,
      'layer 3', 'Linear(in_features=5, out_features=2, bias=true)', 'input of shape [2, 4]')
    expect_error(function() nn.Sequential(nn.ReLU(), 42) end, 'child 2', 'not a module')
  end)
end)

describe('activations and simple layers', function()
  local x = torch.tensor { { -2, -0.5, 0 }, { 0.5, 1, 3 } }
  local function each(f)
    local out = {}
    for i, row in ipairs(x:tolist()) do
      out[i] = {}
      for j, v in ipairs(row) do out[i][j] = f(v) end
    end
    return out
  end

  it('ReLU, Sigmoid, Tanh match their formulas', function()
    close(nn.ReLU()(x), each(function(v) return math.max(v, 0) end))
    close(nn.Sigmoid()(x), each(function(v) return 1 / (1 + math.exp(-v)) end))
    close(nn.Tanh()(x), each(function(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end))
    expect_error(function() nn.ReLU()(5) end, 'relu', 'tensor')
  end)

  it('Dropout zeroes about p of the elements and scales the rest, and is identity in eval', function()
    torch.manual_seed(3)
    local d = nn.Dropout(0.3)
    local x1 = torch.ones(200, 500)
    local y = d(x1)
    local kept = y:ne(0):sum():item() / y:numel()
    assert.is_true(math.abs(kept - 0.7) < 0.005, 'kept ' .. kept)
    local scaled = y:sum():item() / y:ne(0):sum():item()
    close(scaled, 1 / 0.7, 1e-5)
    d:eval()
    assert.is_true(torch.equal(d(x1), x1))
    assert.is_true(torch.equal(nn.Dropout(0)(x1), x1))
    assert.are.equal(0, nn.Dropout(1)(x1):abs():sum():item())
    expect_error(function() nn.Dropout(1.5) end, 'between 0 and 1', '1.5')
    -- the gradient flows through the kept elements, scaled
    local xg = torch.ones(4, 5, { requires_grad = true })
    local yg = nn.Dropout(0.5)(xg)
    yg:sum():backward()
    assert.is_true(torch.equal(xg.grad, yg:detach()))
  end)

  it('Flatten keeps the batch dimension by default', function()
    local t = torch.randn(2, 3, 4, 5)
    assert.is_true(nn.Flatten()(t):size() == torch.Size { 2, 60 })
    assert.is_true(nn.Flatten(1)(t):size() == torch.Size { 120 })
    assert.is_true(nn.Flatten(2, 3)(t):size() == torch.Size { 2, 12, 5 })
    assert.is_true(nn.Flatten(-2)(t):size() == torch.Size { 2, 3, 20 })
    expect_error(function() nn.Flatten(0) end, 'start_dim')
  end)

  it('Identity returns its input', function()
    local t = torch.randn(3)
    assert.is_true(rawequal(nn.Identity(3, 'x')(t), t))
  end)
end)

describe('losses', function()
  -- PyTorch 1.13: F.cross_entropy(x, t) for x below and t = [3, 0, 1] (0-based)
  local x = torch.tensor { { 0.2, -1.3, 0.7, 2.0 }, { 1.5, 0.1, -0.4, -2.2 }, { -0.3, 0.8, 0.8, 0.0 } }
  local t = torch.tensor { 4, 1, 2 }

  it('MSELoss matches hand values for every reduction', function()
    local a = torch.tensor { { 0.5, -1.0 }, { 2.0, 3.5 } }
    local b = torch.tensor { { 1.0, 1.0 }, { -1.0, 3.0 } }
    -- squared errors 0.25, 4, 9, 0.25
    close(nn.MSELoss()(a, b):item(), 13.5 / 4)
    close(nn.MSELoss { reduction = 'sum' }(a, b):item(), 13.5)
    close(nn.MSELoss { reduction = 'none' }(a, b), { { 0.25, 4 }, { 9, 0.25 } })
    expect_error(function() nn.MSELoss()(torch.zeros(2, 3), torch.zeros(3, 2)) end, '[2, 3]', '[3, 2]')
    expect_error(function() nn.MSELoss { reduction = 'avg' } end, 'reduction', 'avg')
    expect_error(function() nn.MSELoss { reductoin = 'sum' } end, 'reductoin')
  end)

  it('CrossEntropyLoss matches PyTorch and the formula, with 1-based targets', function()
    close(nn.CrossEntropyLoss()(x, t):item(), 0.587662876, 1e-6)
    close(nn.CrossEntropyLoss { reduction = 'sum' }(x, t):item(), 1.76298869, 1e-6)
    close(nn.CrossEntropyLoss()(x, { 4, 1, 2 }):item(), 0.587662876, 1e-6)   -- a Lua array
    close(nn.CrossEntropyLoss { reduction = 'none' }(x, t), { 0.388463944, 0.351282835, 1.02324188 }, 1e-6)
    -- by hand: -log softmax(row)[target]
    local rows, total = x:tolist(), 0
    for i, row in ipairs(rows) do
      local z = 0
      for _, v in ipairs(row) do z = z + math.exp(v) end
      total = total + math.log(z) - row[t[i]]
    end
    close(nn.CrossEntropyLoss()(x, t):item(), total / 3, 1e-6)
    -- its gradient, from PyTorch
    local xg = x:clone():requires_grad_(true)
    nn.CrossEntropyLoss()(xg, t):backward()
    close(xg.grad, { { 0.0373629332, 0.00833679736, 0.0616010651, -0.107300781 },
      { -0.0987384319, 0.0578503907, 0.0350880399, 0.0058000125 },
      { 0.0398810431, -0.213524073, 0.11980927, 0.0538337752 } }, 1e-6)
  end)

  it('NLLLoss takes log-probabilities', function()
    close(nn.NLLLoss()(x:log_softmax(2), t):item(), 0.587662876, 1e-6)
    local lp = torch.tensor { { -1, -2, -3 }, { -0.5, -1, -2 } }
    close(nn.NLLLoss()(lp, torch.tensor { 1, 3 }):item(), 1.5)
    close(nn.NLLLoss { reduction = 'sum' }(lp, torch.tensor { 1, 3 }):item(), 3)
  end)

  it('rejects bad targets', function()
    expect_error(function() nn.CrossEntropyLoss()(x, torch.tensor { 1.0, 2.0, 3.0 }) end, 'int64', 'float32')
    -- (:item(): a GPU checks the targets there and reports at the next synchronisation)
    expect_error(function() nn.CrossEntropyLoss()(x, torch.tensor { 0, 1, 2 }):item() end, '0')
    expect_error(function() nn.CrossEntropyLoss()(x, torch.tensor { 1, 2, 5 }):item() end, '5')
    expect_error(function() nn.NLLLoss()(x, 3) end, 'target', 'tensor')
  end)
end)

describe('nn.functional', function()
  local F = nn.functional

  it('offers the stateless forms', function()
    local x = torch.randn(4, 3)
    local w, b = torch.randn(2, 3), torch.randn(2)
    close(F.linear(x, w, b), x:matmul(w:t()) + b, 1e-6)
    close(F.linear(x, w), x:matmul(w:t()), 1e-6)
    close(F.relu(x), x:clamp(0, math.huge))
    close(F.sigmoid(x), (-x):exp():add(1):pow(-1), 1e-6)
    close(F.tanh(x), x:tanh())
    close(F.softmax(x, 2):sum(2), torch.ones(4), 1e-6)
    close(F.log_softmax(x, 2):exp(), F.softmax(x, 2), 1e-6)
    assert.is_true(torch.equal(F.dropout(x, 0.5, false), x))
    close(F.mse_loss(x, torch.zeros(4, 3)):item(), (x * x):mean():item(), 1e-6)
    close(F.mse_loss(x, torch.zeros(4, 3), { reduction = 'sum' }):item(), (x * x):sum():item(), 1e-6)
    local t = torch.tensor { 1, 3, 2, 2 }
    close(F.cross_entropy(x, t):item(), F.nll_loss(F.log_softmax(x, 2), t):item(), 1e-6)
    expect_error(function() F.softmax(x) end, 'softmax', 'dim')
    expect_error(function() F.linear(x, 'w') end, 'linear', 'weight')
  end)
end)

describe('examples/mlp.lua', function()
  it('trains to at least 95% accuracy, printing the loss of each epoch', function()
    local p = assert(io.popen('lua5.4 examples/mlp.lua 3 2>/dev/null'))
    local out = p:read('a')
    local ok = p:close()
    assert(ok, 'examples/mlp.lua failed:\n' .. out)
    assert.is_truthy(out:find('epoch 1  loss', 1, true))
    assert.is_truthy(out:find('epoch 3  loss', 1, true))
    local acc = tonumber(out:match('training accuracy ([%d.]+)%%'))
    assert(acc and acc >= 95, out)
  end)
end)
