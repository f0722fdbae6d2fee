-- Devices (SPEC section 2): torch.device, the cuda and cpu tables, logical CPU devices and
-- cross-device errors.  The device count is fixed once the first tensor exists, so the
-- multi-device checks run in a child lua5.4 with DPLUA_CPU_DEVICES set.
local torch = require 'torch'
local check = dofile('spec/helpers/check.lua')
local err, assert_contains = check.err, check.assert_contains

-- runs Lua code in a fresh lua5.4 (same LUA_CPATH) and returns its output and exit status
local function run_child(code, env)
  return check.run_child("local torch = require 'torch'\n" .. code, env)
end

describe('torch.device', function()
  it('parses the accepted forms', function()
    local cases = {
      { torch.device('cpu'), 'cpu', 0, 'cpu' },
      { torch.device('cpu:2'), 'cpu', 2, 'cpu:2' },
      { torch.device('cuda:1'), 'cuda', 1, 'cuda:1' },
      { torch.device('cuda', 1), 'cuda', 1, 'cuda:1' },
      { torch.device('cuda'), 'cuda', 0, 'cuda:0' },
      { torch.device(3), 'cuda', 3, 'cuda:3' },
    }
    for _, c in ipairs(cases) do
      assert.are.equal(c[2], c[1].type)
      assert.are.equal(c[3], c[1].index)
      assert.are.equal(c[4], tostring(c[1]))
    end
  end)

  it('compares with ==', function()
    assert.are.equal(torch.device('cuda:1'), torch.device('cuda', 1))
    assert.are.equal(torch.device('cpu'), torch.device('cpu:0'))
    assert.are_not.equal(torch.device('cpu'), torch.device('cpu:1'))
    assert.are_not.equal(torch.device('cpu'), torch.device('cuda:0'))
    assert.are.equal(torch.device('cpu:1'), torch.device(torch.device('cpu:1')))
  end)

  it('rejects bad devices', function()
    assert.has_error(function() torch.device('gpu') end)
    assert.has_error(function() torch.device('cuda:x') end)
    assert_contains(err(torch.device, 'cuda', -1), 'must be non-negative')
    assert_contains(err(torch.device, {}), 'device (a string, a torch.device or a CUDA ordinal) expected')
  end)
end)

describe('without a GPU', function()
  if torch.cuda.is_available() then
    pending('a CUDA device is present')
    return
  end

  it('reports no CUDA devices', function()
    assert.is_false(torch.cuda.is_available())
    assert.are.equal(0, torch.cuda.device_count())
    assert.is_boolean(torch.cuda.is_built())
  end)

  it('loads no CUDA library when there is no driver (probing libcuda.so.1 first)', function()
    local msg = err(function() return torch.ones(1):cuda() end)
    if not msg:find('no CUDA driver', 1, true) or os.getenv('DPLUA_CUDA_LIB') then
      pending('a CUDA driver is present, or DPLUA_CUDA_LIB names a backend: ' .. msg)
      return
    end
    local f = assert(io.open('/proc/self/maps'))
    local maps = f:read('a')
    f:close()
    assert.is_nil(maps:find('libdplua_cuda', 1, true))
    assert.is_nil(maps:find('libcublas', 1, true))
    assert.is_nil(maps:find('libnccl', 1, true))
  end)

  it('raises CUDA is not available for every use of a cuda device', function()
    local t = torch.ones(2)
    assert_contains(err(function() return t:cuda() end), 'CUDA is not available')
    assert_contains(err(function() return t:to('cuda:0') end), 'CUDA is not available')
    assert_contains(err(function() return t:to(0) end), 'CUDA is not available')
    assert_contains(err(function() return t:to({ device = 'cuda' }) end), 'CUDA is not available')
    assert_contains(err(torch.zeros, 2, { device = 'cuda' }), 'CUDA is not available')
    assert_contains(err(torch.randn, 2, { device = torch.device('cuda', 1) }), 'CUDA is not available')
    assert_contains(err(torch.cuda.synchronize), 'CUDA is not available')
  end)
end)

describe('logical CPU devices', function()
  it('default to one', function()
    assert.are.equal(1, torch.cpu.device_count())
    assert.are.equal('cpu', tostring(torch.zeros(1).device))
  end)

  it('are distinct devices for every check', function()
    local out, status = run_child([[
      assert(torch.cpu.device_count() == 2)
      local a = torch.tensor({ 1, 2, 3 }, { dtype = 'float32' })
      local b = a:to('cpu:1')
      assert(b.device == torch.device('cpu:1') and a.device == torch.device('cpu'))
      assert(a:to(torch.device('cpu', 0)) == a, 'to() the same device returns the same object')
      assert(tostring(b) == "tensor([1., 2., 3.], device='cpu:1')", tostring(b))
      local ok, e = pcall(function() return a + b end)
      assert(not ok)
      print(e)
      local c = torch.zeros(2, { device = 'cpu:1' })
      assert(c.device == torch.device('cpu:1') and not c.is_cuda)
      assert(torch.zeros_like(c).device == torch.device('cpu:1'))
      local w = torch.ones(3, { requires_grad = true })
      local y = (w:to('cpu:1') * b):sum()
      y:backward()
      assert(w.grad.device == torch.device('cpu'))
      print(table.concat(w.grad:tolist(), ','))
      local ok2, e2 = pcall(torch.zeros, 1, { device = 'cpu:2' })
      print(ok2, e2)
    ]], 'DPLUA_CPU_DEVICES=2')
    assert.are.equal(0, status, out)
    assert_contains(out, 'expected all tensors to be on the same device, but found at least two devices, cpu and cpu:1')
    assert_contains(out, '1.0,2.0,3.0')
    assert_contains(out, 'false')
  end)

  it('are set with torch.cpu.set_device_count before the first tensor', function()
    local out, status = run_child([[
      torch.cpu.set_device_count(3)
      print(torch.cpu.device_count())
      local t = torch.zeros(1, { device = 'cpu:2' })
      print(tostring(t.device))
      print(pcall(torch.cpu.set_device_count, 4))
    ]])
    assert.are.equal(0, status, out)
    assert_contains(out, '3\ncpu:2\nfalse')
    assert_contains(err(torch.cpu.set_device_count, 0), 'device count must be positive, got 0')
  end)
end)

describe('torch.set_default_device', function()
  it('sends the factories without device= to that device, until reset', function()
    local out, status = run_child([[
      print(tostring(torch.get_default_device()))
      torch.set_default_device('cpu:1')
      print(tostring(torch.get_default_device()))
      local made = {
        torch.zeros(2), torch.ones(2, 3), torch.empty(1), torch.rand(2), torch.randn(2),
        torch.full({ 2 }, 7), torch.arange(3), torch.eye(2), torch.randint(5, { 2 }),
        torch.randperm(3), torch.tensor({ 1.5, 2 }), require('nn').Linear(3, 2).weight,
      }
      for i, t in ipairs(made) do assert(tostring(t.device) == 'cpu:1', i .. ': ' .. tostring(t.device)) end
      -- an explicit device wins; _like and tensor(t) keep their argument's device
      local c = torch.zeros(2, { device = 'cpu' })
      assert(tostring(c.device) == 'cpu')
      assert(tostring(torch.zeros_like(c).device) == 'cpu')
      assert(tostring(torch.tensor(c).device) == 'cpu')
      print(torch.randn(2, 2):sum().device)
      print(pcall(torch.set_default_device, 'cpu:5'))
      print(pcall(torch.set_default_device, 'gpu'))
      print(tostring(torch.get_default_device()))
      torch.set_default_device(nil)
      print(tostring(torch.zeros(1).device))
    ]], 'DPLUA_CPU_DEVICES=2')
    assert.are.equal(0, status, out)
    assert_contains(out, 'cpu\ncpu:1\ncpu:1\nfalse')
    assert_contains(out, 'device cpu:5 does not exist: there are 2 CPU devices')
    assert_contains(out, "invalid device 'gpu'")
    assert_contains(out, 'cpu:1\ncpu\n')
  end)

  it('refuses a CUDA device that is not there and keeps the old default', function()
    assert_contains(err(torch.set_default_device, 'cuda:99'), 'cuda:99')
    assert.are.equal('cpu', tostring(torch.get_default_device()))
    if torch.cuda.is_available() then
      torch.set_default_device('cuda:0')
      local t = torch.ones(2)
      torch.set_default_device(nil)
      assert.are.equal('cuda:0', tostring(t.device))
    else
      assert_contains(err(torch.set_default_device, 'cuda:0'), 'CUDA is not available')
    end
    assert.are.equal('cpu', tostring(torch.get_default_device()))
  end)
end)
