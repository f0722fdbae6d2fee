-- Places where a program translated from PyTorch used to get a wrong answer with no error:
-- repeat's copy, Sequential's add_module, element access under autograd, the distributed
-- PRODUCT reduction, tied parameters in state dicts and the small errors that stopped
-- programs. Expected values come from PyTorch 1.13 run on the same inputs.
local torch = require 'torch'
local nn = require 'nn'

local function close(got, want, tol)
  if type(want) == 'number' then got, want = { got }, { want } end
  assert.are.equal(#want, #got)
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) <= (tol or 1e-5) * math.max(1, math.abs(want[i])),
      ('element %d: %s, PyTorch %s'):format(i, got[i], want[i]))
  end
end

describe('repeat copies', function()
  it('never shares memory with its input, whatever the sizes', function()
    local x = torch.tensor({ { 1, 2 }, { 3, 4 } })
    local r = x['repeat'](x, 1, 1)
    r[1][1] = 9
    assert.are.same({ { 1, 2 }, { 3, 4 } }, x:tolist())
    local y = torch.tensor({ 5 })
    local r2 = torch['repeat'](y, 3)
    r2[1] = 9
    -- PyTorch: y.repeat(3); r[0] = 9 -> y tensor([5.]), r tensor([9., 5., 5.])
    assert.are.same({ 5 }, y:tolist())
    assert.are.same({ 9, 5, 5 }, r2:tolist())
    local r3 = y:repeatTensor(1)
    r3:fill_(0)
    assert.are.same({ 5 }, y:tolist())
  end)

  it('tile copies and in-place ops on the result work', function()
    local z = torch.ones(2, 2)
    local t = z:tile({ 1 })
    t:add_(1)
    assert.are.same({ { 1, 1 }, { 1, 1 } }, z:tolist())
    assert.are.same({ { 2, 2 }, { 2, 2 } }, t:tolist())
    local u = torch.tile(z, { 1, 1 })
    u:mul_(3)
    assert.are.same({ { 1, 1 }, { 1, 1 } }, z:tolist())
  end)

  it('values and gradient as PyTorch', function()
    local x = torch.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = torch.float32, requires_grad = true })
    local r = x['repeat'](x, 2, 1, 3)
    assert.are.same({ 2, 2, 6 }, r:size():totable())
    assert.are.same({ { 1, 2, 1, 2, 1, 2 }, { 3, 4, 3, 4, 3, 4 } }, r[1]:tolist())
    local w = torch.arange(0, r:numel()):reshape(r:size()):float()
    ;(r * w):sum():backward()
    -- PyTorch: x.repeat(2,1,3); (r * arange(24).reshape(r.shape)).sum().backward()
    close(x.grad:flatten():tolist(), { 48, 54, 84, 90 })
    -- repeats of 1 still carry the gradient
    local x2 = torch.tensor({ 1, 2 }, { dtype = torch.float32, requires_grad = true })
    local r2 = x2['repeat'](x2, 1)
    ;(r2 * torch.tensor({ 3, 5 })):sum():backward()
    close(x2.grad:tolist(), { 3, 5 })
  end)
end)

describe('nn.Sequential runs every registered child', function()
  local function model()
    local s = nn.Sequential(nn.Linear(2, 3))
    s:add_module('act', nn.ReLU())
    s:add_module('out', nn.Linear(3, 1))
    s.extra = nn.Tanh()
    torch.no_grad(function()
      s[1].weight:copy_(torch.tensor({ { 1, -2 }, { 0.5, 1 }, { -1, 1 } }))
      s[1].bias:copy_(torch.tensor({ 0.1, -0.2, 0.3 }))
      s.out.weight:copy_(torch.tensor({ { 0.3, -0.7, 0.2 } }))
      s.out.bias:fill_(0.05)
    end)
    return s
  end
  local x = torch.tensor({ { 1, 2 }, { -1, 0.5 } })

  it('children added by add_module and by assignment run in registration order', function()
    local s = model()
    -- PyTorch: the same model; s(x) -> [[-0.8617231], [0.3884727]], len(s) == 4
    close(s(x):flatten():tolist(), { -0.8617231249809265, 0.38847267627716064 })
    assert.are.equal(4, #s)
    local names = {}
    for k in s:named_parameters() do names[#names + 1] = k end
    assert.are.same({ '1.weight', '1.bias', 'out.weight', 'out.bias' }, names)
  end)

  it('indexes by position, counts every child and appends after them', function()
    local s = model()
    assert.are.equal(s.act, s[2])
    assert.are.equal(s.out, s[3])
    assert.are.equal(s.extra, s[-1])
    assert.are.equal(s.act, s[-3])
    assert.is_nil(s[5])
    s:append(nn.Sigmoid())
    local kinds = {}
    for i, m in ipairs(s) do kinds[i] = torch.typename(m) end
    assert.are.same({ 'nn.Linear', 'nn.ReLU', 'nn.Linear', 'nn.Tanh', 'nn.Sigmoid' }, kinds)
    local names = {}
    for k in s:named_children() do names[#names + 1] = k end
    -- PyTorch's keys: ['0', 'act', 'out', 'extra', '4'], counted from 1 here
    assert.are.same({ '1', 'act', 'out', 'extra', '5' }, names)
    close(s(x):flatten():tolist(), { 0.29697945713996887, 0.5959149599075317 })
    assert.has_error(function() s:insert(1, nn.ReLU()) end)
  end)

  it('ModuleList and ModuleDict count children added by add_module', function()
    local ml = nn.ModuleList({ nn.ReLU() })
    ml:add_module('x', nn.Tanh())
    assert.are.equal(2, #ml)            -- PyTorch: len(ml) == 2
    ml:append(nn.Sigmoid())
    local names = {}
    for k in ml:named_children() do names[#names + 1] = k end
    assert.are.same({ '1', 'x', '3' }, names)   -- PyTorch: ['0', 'x', '2']
    local md = nn.ModuleDict()
    md:add_module('a', nn.ReLU())
    assert.are.equal(1, #md)
    assert.are.same({ 'a' }, md:keys())
  end)
end)

describe('0-dim tensors compared with numbers', function()
  it('give Lua booleans for <, <=, > and >= on either side', function()
    local loss = torch.tensor(0.25, { requires_grad = true }) * 2
    local best = 1.0
    -- PyTorch: loss < best True, best > loss True, loss <= 0.5 True, 0.5 >= loss True, loss >= 0.6 False
    assert.are.equal(true, loss < best)
    assert.are.equal(true, best > loss)
    assert.are.equal(true, loss <= 0.5)
    assert.are.equal(true, 0.5 >= loss)
    assert.are.equal(false, loss >= 0.6)
    assert.are.equal(false, loss < loss)
    assert.are.equal(true, torch.tensor({ 1 }) < 3)
    assert.are.equal(false, torch.tensor(0 / 0) < 1)   -- NaN compares false
  end)

  it('refuse a tensor of several elements, as PyTorch bool() does', function()
    assert.has_error(function() return torch.ones(2) < 3 end,
      'a < b: the comparison has shape [2], and a tensor with 2 elements has no single truth value (use torch.lt for the element-wise result, then :all() or :any())')
  end)
end)

describe('t % n', function()
  it('is the remainder with the divisor\'s sign, as PyTorch', function()
    -- PyTorch: tensor([-3,3,5]) % 2 -> [1,1,1]; tensor([-3.5,2.5]) % -2 -> [-1.5,-1.5];
    -- 5 % tensor([3,-3]) -> [2,-1]; tensor([-3,3]) % tensor([2,-2]) -> [1,-1]; % 2.5 -> [2.0, 0.5]
    assert.are.same({ 1, 1, 1 }, (torch.tensor({ -3, 3, 5 }) % 2):tolist())
    close((torch.tensor({ -3.5, 2.5 }) % -2):tolist(), { -1.5, -1.5 })
    assert.are.same({ 2, -1 }, (5 % torch.tensor({ 3, -3 })):tolist())
    assert.are.same({ 1, -1 }, (torch.tensor({ -3, 3 }) % torch.tensor({ 2, -2 })):tolist())
    close((torch.tensor({ -3, 3 }) % 2.5):tolist(), { 2.0, 0.5 })
    local x = torch.tensor({ -3.5, 2.5, 7.0 }, { requires_grad = true })
    local y = x % 2
    y:sum():backward()
    close(y:tolist(), { 0.5, 0.5, 1.0 })
    close(x.grad:tolist(), { 1, 1, 1 })
  end)

  it('refuses an integer remainder by zero (PyTorch: ZeroDivisionError); floats give nan', function()
    assert.has_error(function() return torch.tensor({ -3, 3 }) % 0 end)
    assert.has_error(function() return torch.tensor({ -3, 3 }) % torch.tensor({ 1, 0 }) end)
    local r = (torch.tensor({ -3.0, 3.0 }) % 0):tolist()
    assert.is_true(r[1] ~= r[1] and r[2] ~= r[2])
  end)
end)

describe('element access under autograd', function()
  it('gives a 0-dim tensor carrying the history when the tensor requires grad', function()
    local w = torch.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = torch.float32, requires_grad = true })
    local v = torch.ones(3, { requires_grad = true })
    local y = w[{ 1, 2 }] * 3 + v[2]
    assert.is_true(torch.is_tensor(y))
    assert.are.equal(7, y:item())
    y:backward()
    -- PyTorch: y = w[0, 1] * 3 + v[1]; y.backward() -> w.grad [[0,3,0],[0,0,0]], v.grad [0,1,0]
    assert.are.same({ { 0, 3, 0 }, { 0, 0, 0 } }, w.grad:tolist())
    assert.are.same({ 0, 1, 0 }, v.grad:tolist())
    -- a tensor with a history too, and t[i][j]
    local h = w * 2
    assert.is_true(torch.is_tensor(h[2][3]))
    assert.are.equal(12, h[{ 2, 3 }]:item())
    assert.are.equal(0, h[2][3]:dim())
  end)

  it('keeps giving numbers for a plain tensor and under torch.no_grad', function()
    local t = torch.tensor({ { 1, 2 }, { 3, 4 } })
    assert.are.equal('number', type(t[{ 2, 1 }]))
    assert.are.equal(3, t[2][1])
    local w = torch.ones(2, 2, { requires_grad = true })
    torch.no_grad(function()
      assert.are.equal('number', type(w[{ 1, 2 }]))
      assert.are.equal('number', type(w[1][2]))
      assert.are.equal(1, w[1][1])
    end)
  end)
end)

describe('torch.distributed ReduceOp', function()
  local shell = dofile('spec/helpers/shell.lua')

  it('PRODUCT multiplies and a missing op name is an error, on a world of 1', function()
    -- a process of its own, as MPI is initialised once per process
    local script = shell.write(os.tmpname(), [[
      local dist = require 'torch.distributed'
      dist.init_process_group { backend = 'mpi' }
      local t = torch.tensor({ 2.5, -3 })
      dist.all_reduce(t, dist.ReduceOp.PRODUCT)
      print('product', table.concat(t:tolist(), ' '))
      local i = torch.tensor({ 6, 5 })
      dist.all_reduce(i, dist.ReduceOp.BXOR)
      print('bxor', table.concat(i:tolist(), ' '))
      print('prod', select(2, pcall(function() return dist.ReduceOp.PROD end)))
      print('band', select(2, pcall(dist.all_reduce, t, dist.ReduceOp.BAND)))
      print('bogus', select(2, pcall(dist.all_reduce, t, 'bogus')))
      dist.destroy_process_group()
    ]])
    local out, err, code = shell.run(shell.q(shell.bin) .. ' ' .. shell.q(script))
    os.remove(script)
    assert.are.equal(0, code, err)
    assert.truthy(out:find('product\t2.5 -3.0', 1, true), out)
    assert.truthy(out:find('bxor\t6 5', 1, true), out)
    assert.truthy(out:find('prod\t[^\n]*torch.distributed.ReduceOp has no op PROD'), out)
    assert.truthy(out:find("band\t[^\n]*op 'band' takes integer or bool tensors, got a float32 tensor"), out)
    assert.truthy(out:find("bogus\t[^\n]*unknown op 'bogus'"), out)
  end)

  it('knows PyTorch\'s op names', function()
    local dist = require 'torch.distributed'
    assert.are.equal('product', dist.ReduceOp.PRODUCT)
    for _, k in ipairs { 'SUM', 'AVG', 'MIN', 'MAX', 'BAND', 'BOR', 'BXOR' } do
      assert.are.equal(k:lower(), dist.ReduceOp[k])
    end
    assert.has_error(function() return dist.ReduceOp.PROD end,
      'torch.distributed.ReduceOp has no op PROD (its ops: SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR)')
  end)
end)

describe('tied parameters', function()
  local Tied, parent = torch.class('surface_spec.Tied', 'nn.Module')
  function Tied:__init()
    parent.__init(self)
    self.wte = nn.Embedding(5, 3)
    self.lm_head = nn.Linear(3, 5, { bias = false })
    self.wte.weight = self.lm_head.weight
  end

  local function keys(sd)
    local out = {}
    for k in pairs(sd) do out[#out + 1] = k end
    table.sort(out)
    return out
  end

  it('state_dict lists every name of a tied tensor; named_parameters lists it once', function()
    local m = Tied()
    local sd = m:state_dict()
    -- PyTorch: ['wte.weight', 'lm_head.weight'], the same storage; named_parameters: ['wte.weight']
    assert.are.same({ 'lm_head.weight', 'wte.weight' }, keys(sd))
    sd['wte.weight'][1][1] = 42
    assert.are.equal(42, sd['lm_head.weight'][1][1])
    local names = {}
    for k in m:named_parameters() do names[#names + 1] = k end
    assert.are.same({ 'wte.weight' }, names)
    assert.are.equal(1, #m:parameters())
    -- a module shared by two parents: PyTorch ['0.weight', '0.bias', '1.weight', '1.bias']
    local l = nn.Linear(2, 2)
    assert.are.same({ '1.bias', '1.weight', '2.bias', '2.weight' }, keys(nn.Sequential(l, l):state_dict()))
  end)

  it('load_state_dict takes both keys, strictly, and keeps the tie', function()
    local m = Tied()
    local res = m:load_state_dict({ ['wte.weight'] = torch.ones(5, 3), ['lm_head.weight'] = torch.full({ 5, 3 }, 2.0) })
    assert.are.same({}, res.missing_keys)
    assert.are.same({}, res.unexpected_keys)
    assert.is_true(rawequal(m.wte.weight, m.lm_head.weight))
    -- PyTorch: the last in registration order wins -> 2.0
    assert.are.equal(2, m.wte.weight:sum():item() / 15)
    -- PyTorch: Missing key(s) in state_dict: "lm_head.weight".
    assert.has_error(function() m:load_state_dict({ ['wte.weight'] = torch.ones(5, 3) }) end,
      'Error(s) in loading state_dict for Tied:\n\tMissing key(s) in state_dict: "lm_head.weight".')
  end)

  it('survives a save and load round trip', function()
    local m = Tied()
    local path = os.tmpname()
    torch.save(path, m)
    local loaded = torch.load(path)
    os.remove(path)
    assert.are.same({ 'lm_head.weight', 'wte.weight' }, keys(loaded))
    local m2 = Tied()
    m2:load_state_dict(loaded)
    assert.is_true(rawequal(m2.wte.weight, m2.lm_head.weight))
    assert.is_true(torch.equal(m2.lm_head.weight, m.lm_head.weight))
    assert.are.equal(1, #m2:parameters())
  end)
end)

describe('errors that used to stop PyTorch programs', function()
  it('retain_grad fills a non-leaf .grad', function()
    local x = torch.ones(3, { requires_grad = true })
    local y = x * 2
    y:retain_grad()
    assert.is_true(y.retains_grad)
    assert.is_false(x.retains_grad)
    ;(y * y):sum():backward()
    -- PyTorch: y.grad [4, 4, 4], x.grad [8, 8, 8]
    assert.are.same({ 4, 4, 4 }, y.grad:tolist())
    assert.are.same({ 8, 8, 8 }, x.grad:tolist())
    assert.is_nil((x * 3).grad)
    -- accumulates over passes: PyTorch h.grad [2, 2], w.grad [4, 8]
    local w = torch.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local h = w * w
    h:retain_grad()
    h:sum():backward({ retain_graph = true })
    h:sum():backward()
    assert.are.same({ 2, 2 }, h.grad:tolist())
    assert.are.same({ 4, 8 }, w.grad:tolist())
    x:retain_grad()   -- a leaf: nothing to do
    assert.has_error(function() torch.zeros(3):retain_grad() end,
      "can't retain_grad on Tensor that has requires_grad=False")
  end)

  it('load_state_dict takes a [1]-shaped value for a 0-dim buffer', function()
    local bn = nn.BatchNorm1d(3)
    local sd = bn:state_dict()
    sd.num_batches_tracked = torch.tensor({ 5 })
    local res = bn:load_state_dict(sd)
    -- PyTorch: <All keys matched successfully>, bn.num_batches_tracked tensor(5)
    assert.are.same({}, res.missing_keys)
    assert.are.equal(0, bn.num_batches_tracked:dim())
    assert.are.equal(5, bn.num_batches_tracked:item())
    sd.num_batches_tracked = torch.tensor({ { 5 } })
    assert.has_error(function() bn:load_state_dict(sd) end)   -- PyTorch: size mismatch
  end)

  it('assignment drops the value\'s leading size-1 dims', function()
    local l = torch.zeros(2, 4)
    l[1] = torch.ones(1, 4)
    l[2] = torch.ones(1, 1, 4) * 2
    l[{ {}, { 2, 3 } }] = torch.ones(1, 2, 2) * 5
    -- PyTorch: l[0] = ones(1,4); l[1] = ones(1,1,4)*2; l[:,1:3] = ones(1,2,2)*5
    assert.are.same({ { 1, 5, 5, 1 }, { 2, 5, 5, 2 } }, l:tolist())
    assert.has_error(function() l[1] = torch.ones(2, 4) end)
  end)

  it('torch.load takes map_location as a device, a name, a table or a function', function()
    local path = os.tmpname()
    torch.save(path, { a = torch.ones(2) })
    assert.are.equal('cpu', tostring(torch.load(path, { map_location = 'cpu' }).a.device))
    assert.are.same({ 1, 1 }, torch.load(path, { map_location = torch.device('cpu') }).a:tolist())
    assert.are.same({ 1, 1 }, torch.load(path, 'cpu').a:tolist())
    assert.are.same({ 1, 1 }, torch.load(path, { map_location = { ['cuda:0'] = 'cpu' } }).a:tolist())
    local seen
    local got = torch.load(path, { map_location = function(t, loc) seen = loc; return t * 2 end })
    assert.are.equal('cpu', seen)
    assert.are.same({ 2, 2 }, got.a:tolist())
    assert.are.same({ 1, 1 }, torch.load(path, { map_location = function() end }).a:tolist())
    assert.has_error(function() torch.load(path, { map_location = 3 }) end)
    assert.has_error(function() torch.load(path, { map_locaton = 'cpu' }) end)
    os.remove(path)
  end)
end)
