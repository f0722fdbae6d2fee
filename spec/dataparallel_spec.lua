-- nn.DataParallel and the engine's parallel primitives, on eight CPU devices, each result
-- compared with the same computation on one device.
--
-- CPU devices must be set before the first tensor.  When another spec file has already
-- made tensors in this process, this file runs itself again in a child process with
-- DPLUA_CPU_DEVICES=8 and reports that run's result.
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'

local NDEV = 8
local in_process = pcall(torch.cpu.set_device_count, NDEV) or torch.cpu.device_count() >= NDEV

local sh_quote = dofile('spec/helpers/shell.lua').q

-- Runs this file again in a child busted (same interpreter and CPATH) with NDEV CPU
-- devices and the environment `env`; asserts that at least `min_passed` checks passed and
-- none failed.
local function rerun(env, min_passed, filter)
  local file = debug.getinfo(1, 'S').source:gsub('^@', '')
  local lua = arg and arg[-1] or 'lua5.4'
  local busted = arg and arg[0] or '/usr/bin/busted'
  if not busted:find('busted') then busted = '/usr/bin/busted' end
  local cmd = ('DPLUA_CPU_DEVICES=%d %s %s %s --no-auto-insulate -o plainTerminal %s %s 2>&1')
    :format(NDEV, env, sh_quote(lua), sh_quote(busted), filter and '--filter=' .. sh_quote(filter) or '',
            sh_quote(file))
  local p = assert(io.popen(cmd))
  local out = p:read('a')
  p:close()
  local ok, fails, errs = out:match('(%d+) success%a* / (%d+) failures? / (%d+) errors?')
  assert(ok, 'the child run printed no summary:\n' .. out)
  assert(tonumber(ok) >= min_passed and fails == '0' and errs == '0', out)
end

if not in_process then
  describe('nn.DataParallel (in a child process with ' .. NDEV .. ' CPU devices)', function()
    it('passes every check', function() rerun('', 20) end)
  end)
  return
end

local P = torch._C.parallel
local bytes_copied = torch._C.bytes_copied

local function dev(i) return torch.device('cpu:' .. i) end
local ALL = { 'cpu:0', 'cpu:1', 'cpu:2', 'cpu:3' }

local function assert_close(a, b, what, rtol, atol)
  assert.is_true(torch.is_tensor(a) and torch.is_tensor(b), what .. ': not tensors')
  assert.are.equal(tostring(b:size()), tostring(a:size()), what .. ': shapes differ')
  local ca, cb = a:to('cpu:0'), b:to('cpu:0')
  local ok = torch.allclose(ca, cb, rtol or 1e-5, atol or 1e-6)
  if not ok then
    local diff = (ca - cb):abs():max():item()
    error(('%s: values differ (max |a - b| = %g)'):format(what, diff), 2)
  end
end

-- A two-layer network built from a seed, so two copies start with equal weights.
local function mlp(seed, din, dhidden, dout)
  torch.manual_seed(seed)
  return nn.Sequential(nn.Linear(din, dhidden), nn.Tanh(), nn.Linear(dhidden, dout))
end

-- A module that records the size and device of every input it sees.
local Recorder, RecorderParent = torch.class('DPSpecRecorder', 'nn.Module')
function Recorder:__init(din, dout)
  RecorderParent.__init(self)
  self.fc = nn.Linear(din, dout)
  rawset(self, 'seen', {})
end
function Recorder:forward(x)
  local seen = rawget(self, 'seen')
  seen[#seen + 1] = { n = x:size(1), device = tostring(x.device), fc_device = tostring(self.fc.weight.device) }
  return self.fc(x)
end

local function sizes_of(seen)
  local s = {}
  for i, e in ipairs(seen) do s[i] = e.n end
  return s
end

describe('parallel primitives', function()
  it('split a batch into chunks of ceil(n / #devices)', function()
    local cases = {
      { 30, 2, { 15, 15 } }, { 10, 3, { 4, 4, 2 } }, { 1, 2, { 1 } }, { 10, 8, { 2, 2, 2, 2, 2 } },
      { 100, 3, { 34, 34, 32 } }, { 7, 4, { 2, 2, 2, 1 } },
    }
    for _, c in ipairs(cases) do
      assert.are.same(c[3], P.scatter_sizes(c[1], c[2]), ('%d over %d'):format(c[1], c[2]))
    end
  end)

  it('scatter puts chunk i on device i and is differentiable', function()
    local x = torch.randn(10, 3, { requires_grad = true })
    local chunks = P.scatter(x, { 'cpu:0', 'cpu:1', 'cpu:2' }, 1)
    assert.are.equal(3, #chunks)
    local starts = { 1, 5, 9 }
    for i, c in ipairs(chunks) do
      assert.are.equal(dev(i - 1), c.device)
      assert.is_true(torch.equal(c:to('cpu:0'), x:detach():narrow(1, starts[i], c:size(1))))
    end
    -- backward of a scatter is a gather: d/dx sum_i (i * chunk_i) is i on chunk i's rows
    local loss = chunks[1]:sum() + (chunks[2]:sum() * 2):to('cpu:0') + (chunks[3]:sum() * 3):to('cpu:0')
    loss:backward()
    local expect = torch.cat({ torch.full({ 4, 3 }, 1), torch.full({ 4, 3 }, 2), torch.full({ 2, 3 }, 3) }, 1)
    assert.is_true(torch.equal(x.grad, expect))
  end)

  it('scatter along dim 2 and with negative dims', function()
    local x = torch.arange(24):view(2, 12):float()
    local chunks = P.scatter(x, { 'cpu:1', 'cpu:2' }, 2)
    assert.are.equal(tostring(torch.Size { 2, 6 }), tostring(chunks[2]:size()))
    assert.is_true(torch.equal(chunks[2]:to('cpu:0'), x:narrow(2, 7, 6)))
    local last = P.scatter(x, { 'cpu:1', 'cpu:2' }, -1)
    assert.is_true(torch.equal(last[1]:to('cpu:0'), x:narrow(2, 1, 6)))
  end)

  it('broadcast_coalesced copies a list to every device and sums gradients back', function()
    local a = torch.randn(3, 4, { requires_grad = true })
    local b = torch.randn(5, { requires_grad = true })
    local n = torch.arange(6):view(2, 3)   -- int64 travels in its own buffer
    local copies = P.broadcast_coalesced({ a, b, n }, { 'cpu:0', 'cpu:1', 'cpu:2' })
    assert.are.equal(3, #copies)
    assert.are.equal(a:data_ptr(), copies[1][1]:data_ptr())   -- on the source device: the tensor itself
    assert.is_true(copies[1][1].is_leaf)
    for d = 2, 3 do
      assert.are.equal(dev(d - 1), copies[d][1].device)
      assert.are.equal(dev(d - 1), copies[d][3].device)
      assert.are.equal('int64', copies[d][3].dtype)
      assert.is_true(torch.equal(copies[d][1]:to('cpu:0'), a:detach()))
      assert.is_true(torch.equal(copies[d][2]:to('cpu:0'), b:detach()))
      assert.is_true(torch.equal(copies[d][3]:to('cpu:0'), n))
    end
    local loss = copies[1][1]:sum() + (copies[2][1]:sum() * 2):to('cpu:0') + (copies[3][1]:sum() * 3):to('cpu:0')
      + copies[2][2]:pow(2):sum():to('cpu:0')
    loss:backward()
    assert.is_true(torch.allclose(a.grad, torch.full({ 3, 4 }, 6)))
    assert.is_true(torch.allclose(b.grad, b:detach() * 2))
  end)

  it('broadcast_coalesced reuses the previous copies and copies only what changed', function()
    local a, b = torch.randn(64, 32), torch.randn(64)
    local devs = { 'cpu:0', 'cpu:1', 'cpu:2' }
    local before = bytes_copied()
    local first = P.broadcast_coalesced({ a, b }, devs)
    local nbytes = (64 * 32 + 64) * 4
    assert.are.equal(2 * nbytes, bytes_copied() - before)
    before = bytes_copied()
    local again = P.broadcast_coalesced({ a, b }, devs, first, { false, false })
    assert.are.equal(0, bytes_copied() - before)
    a:add_(1)
    before = bytes_copied()
    local third = P.broadcast_coalesced({ a, b }, devs, again, { true, false })
    assert.are.equal(2 * 64 * 32 * 4, bytes_copied() - before)
    assert.is_true(torch.equal(third[3][1]:to('cpu:0'), a))
    assert.is_true(torch.equal(third[3][2]:to('cpu:0'), b))
    -- the copies live in the first call's memory
    third[2][2]:fill_(7)
    assert.is_true(torch.equal(first[2][2]:to('cpu:0'), torch.full({ 64 }, 7)))
  end)

  it('gather concatenates on one device, and its backward scatters', function()
    local x1 = torch.randn(2, 3, { device = 'cpu:1', requires_grad = true })
    local x2 = torch.randn(3, 3, { device = 'cpu:2', requires_grad = true })
    local g = P.gather({ x1, x2 }, 'cpu:0', 1)
    assert.are.equal(dev(0), g.device)
    assert.is_true(torch.equal(g, torch.cat({ x1:detach():to('cpu:0'), x2:detach():to('cpu:0') }, 1)))
    local w = torch.arange(15):view(5, 3):float()
    ;(g * w):sum():backward()
    assert.are.equal(dev(2), x2.grad.device)
    assert.is_true(torch.equal(x2.grad:to('cpu:0'), w:narrow(1, 3, 3)))
  end)

  it('gather refuses shapes that do not concatenate', function()
    local ok, err = pcall(P.gather, { torch.zeros(2, 3), torch.zeros(2, 4, { device = 'cpu:1' }) }, 'cpu:0', 1)
    assert.is_false(ok)
    assert.matches('cannot be concatenated along dim 1', err, 1, true)
    assert.matches('[2, 4]', err, 1, true)
  end)

  it('reduce_add_coalesced sums lists from several devices', function()
    local lists, expect_a, expect_b = {}, torch.zeros(4, 2), torch.zeros(3)
    for d = 0, 2 do
      local a, b = torch.randn(4, 2), torch.randn(3)
      expect_a:add_(a); expect_b:add_(b)
      lists[d + 1] = { a:to('cpu:' .. d), b:to('cpu:' .. d) }
    end
    local sums = P.reduce_add_coalesced(lists, 'cpu:3')
    assert.are.equal(dev(3), sums[1].device)
    assert_close(sums[1], expect_a, 'sum a')
    assert_close(sums[2], expect_b, 'sum b')
    assert.has_error(function() P.reduce_add_coalesced({ { torch.zeros(2) }, { torch.zeros(3) } }, 'cpu:0') end)
  end)

  it('resolves device lists and names the bad ones', function()
    local d = P.devices({ 'cpu:1', torch.device('cpu:2') })
    assert.are.equal(dev(1), d[1])
    assert.are.equal(dev(2), d[2])
    local ok, err = pcall(P.devices, { 'cpu:1', 'cpu:2', 'cpu:1' }, 'devs')
    assert.is_false(ok)
    assert.matches('devs: device cpu:1 is listed twice (elements 1 and 3)', err, 1, true)
    ok, err = pcall(P.devices, { 'cpu:9' }, 'devs')
    assert.is_false(ok)
    assert.matches('cpu:9', err, 1, true)
    ok, err = pcall(P.devices, { 'gpu:1' }, 'devs')
    assert.is_false(ok)
  end)
end)

describe('nn.DataParallel', function()
  it('splits 30 over 2, 10 over 3, 1 over 2, 10 over 8 (fewer replicas), 100 over 3, 7 over 4', function()
    local cases = {
      { 30, 2, { 15, 15 } }, { 10, 3, { 4, 4, 2 } }, { 1, 2, { 1 } }, { 10, 8, { 2, 2, 2, 2, 2 } },
      { 10, 4, { 3, 3, 3, 1 } }, { 100, 3, { 34, 34, 32 } }, { 7, 4, { 2, 2, 2, 1 } },
    }
    for _, c in ipairs(cases) do
      local m = Recorder(5, 2)
      local ids = {}
      for i = 1, c[2] do ids[i] = 'cpu:' .. (i - 1) end
      local dp = nn.DataParallel(m, { device_ids = ids })
      local out = dp(torch.randn(c[1], 5))
      local seen = rawget(m, 'seen')
      assert.are.same(c[3], sizes_of(seen), ('%d over %d'):format(c[1], c[2]))
      for r, e in ipairs(seen) do
        assert.are.equal(tostring(torch.device(ids[r])), e.device)
        assert.are.equal(tostring(torch.device(ids[r])), e.fc_device)    -- each replica's parameters on its device
      end
      assert.are.equal(tostring(torch.Size { c[1], 2 }), tostring(out:size()))
      assert.are.equal(dev(0), out.device)
    end
  end)

  it('gives the outputs and gradients of the single-device run', function()
    local ref, model = mlp(7, 6, 16, 3), mlp(7, 6, 16, 3)
    local dp = nn.DataParallel(model, { device_ids = ALL })
    local x, y = torch.randn(30, 6), torch.randn(30, 3)
    local out_ref, out = ref(x), dp(x)
    assert_close(out, out_ref, 'output')
    local loss_fn = nn.MSELoss()
    loss_fn(out_ref, y):backward()
    loss_fn(out, y):backward()
    local pr, pm = ref:parameters(), model:parameters()
    assert.are.equal(#pr, #pm)
    for i = 1, #pr do
      assert.is_not_nil(pm[i].grad, 'parameter ' .. i .. ' has no gradient')
      assert.are.equal(dev(0), pm[i].grad.device)
      assert_close(pm[i].grad, pr[i].grad, 'gradient of parameter ' .. i)
    end
  end)

  it('gives input gradients on the input device', function()
    local ref, model = mlp(3, 4, 8, 2), mlp(3, 4, 8, 2)
    local dp = nn.DataParallel(model, { device_ids = { 'cpu:0', 'cpu:1', 'cpu:2' } })
    local x = torch.randn(11, 4)
    local xr, xd = x:clone():requires_grad_(true), x:clone():requires_grad_(true)
    ref(xr):pow(2):sum():backward()
    dp(xd):pow(2):sum():backward()
    assert_close(xd.grad, xr.grad, 'input gradient')
  end)

  it('gathers on output_device', function()
    local ref, model = mlp(11, 5, 8, 2), mlp(11, 5, 8, 2)
    local dp = nn.DataParallel(model, { device_ids = { 'cpu:0', 'cpu:1' }, output_device = 'cpu:3' })
    local x = torch.randn(9, 5)
    local out = dp(x)
    assert.are.equal(dev(3), out.device)
    assert_close(out, ref(x), 'output')
    out:sum():backward()
    ref(x):sum():backward()
    assert_close(model:parameters()[1].grad, ref:parameters()[1].grad, 'gradient')
  end)

  it('splits along dim 2', function()
    local Scale, ScaleParent = torch.class('DPSpecScale', 'nn.Module')
    function Scale:__init()
      ScaleParent.__init(self)
      self.w = nn.Parameter(torch.randn(3, 1))
    end
    function Scale:forward(x) return (x * self.w):tanh() end
    torch.manual_seed(5)
    local ref = Scale()
    torch.manual_seed(5)
    local model = Scale()
    local dp = nn.DataParallel(model, { device_ids = { 'cpu:0', 'cpu:1', 'cpu:2' }, dim = 2 })
    local x = torch.randn(3, 10)
    local out = dp(x)
    assert.are.equal(tostring(torch.Size { 3, 10 }), tostring(out:size()))
    assert_close(out, ref(x), 'output')
    out:sum():backward()
    ref(x):sum():backward()
    assert_close(model.w.grad, ref.w.grad, 'gradient')
  end)

  it('splits tensors inside tables, passes other arguments as they are, gathers tables', function()
    local Two, TwoParent = torch.class('DPSpecTwo', 'nn.Module')
    function Two:__init()
      TwoParent.__init(self)
      self.a = nn.Linear(4, 2)
      self.b = nn.Linear(3, 2)
    end
    function Two:forward(inp, scale, tag)
      assert(tag == 'tag', 'non-tensor argument changed')
      local ya = self.a(inp.x)
      return { sum = ya + self.b(inp.more[1]) * scale, parts = { ya } }
    end
    torch.manual_seed(9)
    local ref = Two()
    torch.manual_seed(9)
    local model = Two()
    local dp = nn.DataParallel(model, { device_ids = ALL })
    local x, z = torch.randn(13, 4), torch.randn(13, 3)
    local out = dp({ x = x, more = { z } }, 0.5, 'tag')
    local expect = ref({ x = x, more = { z } }, 0.5, 'tag')
    assert_close(out.sum, expect.sum, 'sum')
    assert_close(out.parts[1], expect.parts[1], 'parts[1]')
    out.sum:sum():backward()
    expect.sum:sum():backward()
    assert_close(model.b.weight.grad, ref.b.weight.grad, 'gradient of b')
  end)

  it('stacks scalar outputs into a vector, one per replica', function()
    local m = nn.Sequential(nn.Linear(3, 1))
    local Loss, LossParent = torch.class('DPSpecLoss', 'nn.Module')
    function Loss:__init(inner) LossParent.__init(self); self.inner = inner end
    function Loss:forward(x) return self.inner(x):sum() end
    local dp = nn.DataParallel(Loss(m), { device_ids = { 'cpu:0', 'cpu:1' } })
    local x = torch.randn(6, 3)
    local out = dp(x)
    assert.are.equal(tostring(torch.Size { 2 }), tostring(out:size()))
    assert.is_true(math.abs(out:sum():item() - m(x):sum():item()) < 1e-4)
  end)

  it('raises the exact error when the module is not on device_ids[1]', function()
    local m = nn.Linear(5, 2):to('cpu:1')
    local dp = nn.DataParallel(m, { device_ids = { 'cpu:0', 'cpu:1' } })
    local ok, err = pcall(dp, torch.randn(4, 5))
    assert.is_false(ok)
    assert.are.equal('module must have its parameters and buffers on device ' .. tostring(dev(0)) ..
      ' (device_ids[1]) but found one of them on device: cpu:1', err)
    -- a buffer counts too
    local m2 = nn.Linear(5, 2)
    m2:register_buffer('stat', torch.zeros(2, { device = 'cpu:2' }))
    ok, err = pcall(nn.DataParallel(m2, { device_ids = { 'cpu:0', 'cpu:1' } }), torch.randn(4, 5))
    assert.is_false(ok)
    assert.matches('found one of them on device: cpu:2', err, 1, true)
  end)

  it('refuses bad device lists, dims, inputs and outputs with clear errors', function()
    local m = nn.Linear(5, 2)
    local function err_of(fn, ...)
      local ok, e = pcall(fn, ...)
      assert.is_false(ok, 'expected an error')
      return tostring(e)
    end
    assert.matches('device_ids is empty', err_of(nn.DataParallel, m, { device_ids = {} }), 1, true)
    assert.matches('cpu:17', err_of(nn.DataParallel, m, { device_ids = { 'cpu:0', 'cpu:17' } }), 1, true)
    assert.matches('listed twice', err_of(nn.DataParallel, m, { device_ids = { 'cpu:1', 'cpu:1' } }), 1, true)
    assert.matches('unknown option', err_of(nn.DataParallel, m, { devices = { 'cpu:1' } }), 1, true)
    assert.matches('dim must be', err_of(nn.DataParallel, m, { device_ids = ALL, dim = 0 }), 1, true)
    assert.matches('expected a module', err_of(nn.DataParallel, 42), 1, true)
    local dp = nn.DataParallel(m, { device_ids = { 'cpu:0', 'cpu:1' }, dim = 3 })
    assert.matches('cannot split an input of shape [8, 5] along dim 3', err_of(dp, torch.randn(8, 5)), 1, true)
    dp = nn.DataParallel(m, { device_ids = { 'cpu:0', 'cpu:1' } })
    assert.matches('no tensor', err_of(dp, { 1, 2, 3 }), 1, true)
    assert.matches('differ in size along dim 1', err_of(dp, { torch.randn(8, 5), torch.randn(6, 5) }), 1, true)
    local Odd, OddParent = torch.class('DPSpecOdd', 'nn.Module')
    function Odd:__init() OddParent.__init(self); self.fc = nn.Linear(5, 2) end
    function Odd:forward(x)
      -- the replica on cpu:1 returns a wider output: nothing to concatenate
      local width = x.device == torch.device('cpu:1') and 3 or 2
      return torch.zeros(x:size(1), width, { device = x.device })
    end
    local e = err_of(nn.DataParallel(Odd(), { device_ids = { 'cpu:0', 'cpu:1' } }), torch.randn(8, 5))
    assert.matches('cannot be concatenated along dim 1', e, 1, true)
    assert.matches('[4, 3]', e, 1, true)
    local Str, StrParent = torch.class('DPSpecStr', 'nn.Module')
    function Str:__init() StrParent.__init(self) end
    function Str:forward() return 'hello' end
    e = err_of(nn.DataParallel(Str(), { device_ids = { 'cpu:0', 'cpu:1' } }), torch.randn(8, 5))
    assert.matches('outputs must be tensors or tables of tensors', e, 1, true)
  end)

  it('with one device or none simply calls the module', function()
    local m = mlp(4, 3, 5, 2)
    local x = torch.randn(6, 3)
    local expect = m(x)
    local one = nn.DataParallel(m, { device_ids = { 'cpu:0' } })
    assert_close(one(x), expect, 'one device')
    assert_close(one(x:to('cpu:2')), expect, 'input on another device')
    local moved = nn.DataParallel(m, { device_ids = { 'cpu:0' }, output_device = 'cpu:1' })(x)
    assert.are.equal(dev(1), moved.device)
    if torch.cuda.device_count() == 0 then
      local none = nn.DataParallel(m)
      assert.are.same({}, none.device_ids)
      assert_close(none(x), expect, 'no devices')
    end
  end)

  it('exposes the module: parameters, state_dict with module., train/eval, to', function()
    local m = mlp(2, 3, 4, 2)
    local dp = nn.DataParallel(m, { device_ids = { 'cpu:0', 'cpu:1' } })
    assert.are.equal(m, dp.module)
    local pm, pd = m:parameters(), dp:parameters()
    assert.are.equal(#pm, #pd)
    for i = 1, #pm do assert.are.equal(pm[i], pd[i]) end
    local keys = {}
    for k in pairs(dp:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ 'module.1.bias', 'module.1.weight', 'module.3.bias', 'module.3.weight' }, keys)
    dp:eval()
    assert.is_false(m.training)
    assert.is_false(m[1].training)
    dp:train()
    assert.is_true(m[1].training)
    dp:to('cpu:1')
    assert.are.equal(dev(1), m[1].weight.device)
    local ok, err = pcall(dp, torch.randn(4, 3))
    assert.is_false(ok)
    assert.matches('found one of them on device: cpu:1', err, 1, true)
    dp:to('cpu:0')
    assert.are.equal(tostring(torch.Size { 4, 2 }), tostring(dp(torch.randn(4, 3)):size()))
  end)

  it('replicas follow train() and eval() of the module', function()
    local Mode, ModeParent = torch.class('DPSpecMode', 'nn.Module')
    function Mode:__init() ModeParent.__init(self); self.fc = nn.Linear(2, 1) end
    function Mode:forward(x)
      return self.fc(x) * 0 + (self.training and 1 or 0)
    end
    local dp = nn.DataParallel(Mode(), { device_ids = { 'cpu:0', 'cpu:1', 'cpu:2' } })
    local x = torch.randn(6, 2)
    assert.are.equal(6, dp(x):sum():item())
    dp:eval()
    assert.are.equal(0, dp(x):sum():item())
    dp:train()
    assert.are.equal(6, dp(x):sum():item())
  end)

  it('trains for 20 SGD steps to the weights of the single-device loop', function()
    local ref, model = mlp(21, 8, 32, 4), mlp(21, 8, 32, 4)
    local dp = nn.DataParallel(model, { device_ids = ALL })
    local opt_ref = optim.SGD(ref:parameters(), { lr = 0.05, momentum = 0.9 })
    local opt = optim.SGD(dp:parameters(), { lr = 0.05, momentum = 0.9 })
    local loss_fn = nn.MSELoss()
    torch.manual_seed(123)
    local first_loss, last_loss
    for step = 1, 20 do
      local x, y = torch.randn(30, 8), torch.randn(30, 4)
      opt_ref:zero_grad()
      local lr = loss_fn(ref(x), y)
      lr:backward()
      opt_ref:step()
      opt:zero_grad()
      local l = loss_fn(dp(x), y)
      l:backward()
      opt:step()
      assert.is_true(math.abs(l:item() - lr:item()) <= 1e-4 * math.max(1, math.abs(lr:item())),
        ('step %d: loss %g vs %g'):format(step, l:item(), lr:item()))
      first_loss = first_loss or l:item()
      last_loss = l:item()
    end
    local pr, pm = ref:parameters(), model:parameters()
    for i = 1, #pr do assert_close(pm[i], pr[i], 'parameter ' .. i .. ' after 20 steps', 1e-4, 1e-5) end
    assert.is_true(last_loss == last_loss and first_loss == first_loss)
  end)

  it('copies parameters only when they changed', function()
    local din, dh, dout, n = 6, 10, 3, 30
    local model = mlp(31, din, dh, dout)
    local ids = { 'cpu:0', 'cpu:1', 'cpu:2' }
    local dp = nn.DataParallel(model, { device_ids = ids })
    local opt = optim.SGD(dp:parameters(), { lr = 0.1 })
    local param_bytes = ((din * dh + dh) + (dh * dout + dout)) * 4
    -- input on cpu:0: chunks 2 and 3 (20 of 30 rows) move; so do their outputs
    local io_bytes = 20 * din * 4 + 20 * dout * 4
    local x = torch.randn(n, din)

    local before = bytes_copied()
    local out1 = dp(x)
    assert.are.equal(2 * param_bytes + io_bytes, bytes_copied() - before, 'first forward')
    out1:sum():backward()
    local grads1 = {}
    for i, p in ipairs(model:parameters()) do grads1[i] = p.grad:clone() end

    before = bytes_copied()
    local out2 = dp(x)
    assert.are.equal(io_bytes, bytes_copied() - before, 'second forward, no step')
    -- the backward of the second forward still reaches the parameters: the output's
    -- gradient goes to the replicas, their parameters' gradients come back
    opt:zero_grad()
    before = bytes_copied()
    out2:sum():backward()
    assert.are.equal(2 * param_bytes + 20 * dout * 4, bytes_copied() - before, 'backward')
    for i, p in ipairs(model:parameters()) do assert_close(p.grad, grads1[i], 'gradient ' .. i) end

    opt:step()
    before = bytes_copied()
    local out3 = dp(x)
    assert.are.equal(2 * param_bytes + io_bytes, bytes_copied() - before, 'after an optimizer step')
    assert_close(out3, model(x), 'output after the step')

    -- load_state_dict and in-place writes count as changes too
    local ref = mlp(32, din, dh, dout)
    dp.module:load_state_dict(ref:state_dict())
    before = bytes_copied()
    assert_close(dp(x), ref(x), 'output after load_state_dict')
    assert.are.equal(2 * param_bytes + io_bytes, bytes_copied() - before, 'after load_state_dict')
    torch.no_grad(function() model[3].bias:add_(1) end)
    before = bytes_copied()
    assert_close(dp(x), model(x), 'output after an in-place write')
    assert.are.equal(2 * dout * 4 + io_bytes, bytes_copied() - before, 'only the changed bias moves')
  end)
end)

-- On CUDA: two devices (two GPUs, or one GPU split in two with DPLUA_CUDA_VIRTUAL=2), each
-- result compared with the same model on the CPU.
describe('nn.DataParallel on CUDA devices', function()
  if torch.cuda.device_count() < 2 then
    if torch.cuda.is_available() then
      it('passes its checks with DPLUA_CUDA_VIRTUAL=2 (in a child process)', function()
        rerun('DPLUA_CUDA_VIRTUAL=2', 4, 'on CUDA devices')
      end)
    else
      pending('no CUDA device: run on a GPU machine (one GPU is split in two with DPLUA_CUDA_VIRTUAL=2)')
    end
    return
  end
  local GPUS = { 'cuda:0', 'cuda:1' }
  local function close(a, b, what)
    local ca, cb = a:to('cpu'):double(), b:to('cpu'):double()
    local scale = math.max(cb:abs():max():item(), 1e-3)
    local diff = (ca - cb):abs():max():item()
    assert(diff <= 1e-3 * scale, ('%s: max |a - b| = %g (scale %g)'):format(what, diff, scale))
  end

  it('gives the outputs and gradients of the model on the CPU', function()
    local ref = mlp(41, 20, 64, 5)
    local model = mlp(41, 20, 64, 5):to('cuda:0')
    local dp = nn.DataParallel(model, { device_ids = GPUS })
    local x, y = torch.randn(30, 20), torch.randn(30, 5)
    local out = dp(x:to('cuda:0'))
    assert.are.equal('cuda:0', tostring(out.device))
    close(out, ref(x), 'output')
    nn.MSELoss()(out, y:to('cuda:0')):backward()
    nn.MSELoss()(ref(x), y):backward()
    local pr, pm = ref:parameters(), model:parameters()
    for i = 1, #pr do
      assert.are.equal('cuda:0', tostring(pm[i].grad.device))
      close(pm[i].grad, pr[i].grad, 'gradient ' .. i)
    end
  end)

  it('takes its input from the CPU and gathers on another device', function()
    local ref = mlp(42, 6, 8, 3)
    local dp = nn.DataParallel(mlp(42, 6, 8, 3):to('cuda:0'), { device_ids = { 0, 1 }, output_device = 'cuda:1' })
    local x = torch.randn(7, 6)
    local out = dp(x)
    assert.are.equal('cuda:1', tostring(out.device))
    close(out, ref(x), 'output')
  end)

  it('trains for 20 SGD steps to the weights of the CPU loop', function()
    local ref, model = mlp(43, 8, 32, 4), mlp(43, 8, 32, 4):to('cuda:0')
    local dp = nn.DataParallel(model, { device_ids = GPUS })
    local opt_ref = optim.SGD(ref:parameters(), { lr = 0.05, momentum = 0.9 })
    local opt = optim.SGD(dp:parameters(), { lr = 0.05, momentum = 0.9 })
    torch.manual_seed(5)
    for _ = 1, 20 do
      local x, y = torch.randn(30, 8), torch.randn(30, 4)
      opt_ref:zero_grad(); nn.MSELoss()(ref(x), y):backward(); opt_ref:step()
      opt:zero_grad(); nn.MSELoss()(dp(x:to('cuda:0')), y:to('cuda:0')):backward(); opt:step()
    end
    local pr, pm = ref:parameters(), model:parameters()
    for i = 1, #pr do close(pm[i], pr[i], 'parameter ' .. i) end
  end)

  it('copies parameters only when they changed', function()
    local model = mlp(44, 6, 10, 3):to('cuda:0')
    local dp = nn.DataParallel(model, { device_ids = GPUS })
    local opt = optim.SGD(dp:parameters(), { lr = 0.1 })
    local param_bytes = ((6 * 10 + 10) + (10 * 3 + 3)) * 4
    local io_bytes = 15 * 6 * 4 + 15 * 3 * 4
    local x = torch.randn(30, 6, { device = 'cuda:0' })
    local before = bytes_copied()
    dp(x):sum():backward()
    before = bytes_copied()
    dp(x)
    assert.are.equal(io_bytes, bytes_copied() - before, 'second forward, no step')
    opt:step()
    before = bytes_copied()
    dp(x)
    assert.are.equal(param_bytes + io_bytes, bytes_copied() - before, 'after an optimizer step')
  end)
end)
