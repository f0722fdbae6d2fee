-- Buffers across devices, as PyTorch 1.13 keeps them: nn.DataParallel copies the buffers
-- of device_ids[1] to every replica at each forward and keeps only the in-place updates
-- made on device_ids[1] (batch norm's running statistics), on two CPU devices.
--
-- CPU devices must be set before the first tensor: when another spec file has already
-- made tensors in this process, this file runs itself again in a child process with
-- DPLUA_CPU_DEVICES=2 and reports that run's result.
local torch = require 'torch'
local nn = require 'nn'

local NDEV = 2
local in_process = pcall(torch.cpu.set_device_count, NDEV) or torch.cpu.device_count() >= NDEV
local sh_quote = dofile('spec/helpers/shell.lua').q

if not in_process then
  describe('buffers under nn.DataParallel (in a child process with ' .. NDEV .. ' CPU devices)', function()
    it('passes every check', function()
      local file = debug.getinfo(1, 'S').source:gsub('^@', '')
      local lua = arg and arg[-1] or 'lua5.4'
      local busted = arg and arg[0] or '/usr/bin/busted'
      if not busted:find('busted') then busted = '/usr/bin/busted' end
      local cmd = ('DPLUA_CPU_DEVICES=%d DPLUA_SPEC_DEVICE= %s %s --no-auto-insulate -o plainTerminal %s 2>&1')
        :format(NDEV, sh_quote(lua), sh_quote(busted), sh_quote(file))
      local p = assert(io.popen(cmd))
      local out = p:read('a')
      p:close()
      local ok, fails, errs = out:match('(%d+) success%a* / (%d+) failures? / (%d+) errors?')
      assert(ok, 'the child run printed no summary:\n' .. out)
      assert(tonumber(ok) >= 3 and fails == '0' and errs == '0', out)
    end)
  end)
  return
end

local function close(a, b, what, tol)
  tol = tol or 1e-12
  a, b = a:to('cpu:0'), b:to('cpu:0')
  if not torch.allclose(a, b, tol, tol) then
    error(('%s: values differ (max |a - b| = %g)'):format(what, (a - b):abs():max():item()), 2)
  end
end

-- Linear then BatchNorm1d, float64, equal weights for equal seeds
local function net(seed)
  torch.manual_seed(seed)
  local m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6, { momentum = 0.25 }))
  return m:double():to('cpu:0')   -- whatever the default device of the run
end

-- device_ids for the first check: two CPU devices, and two CUDA devices where there are
-- (the emulation's DPLUA_EMU_GPUS=2)
local device_sets = { { 'cpu:0', 'cpu:1' } }
if torch.cuda.is_available() and torch.cuda.device_count() >= 2 then device_sets[2] = { 'cuda:0', 'cuda:1' } end

describe('buffers under nn.DataParallel', function()
  for _, devices in ipairs(device_sets) do
  it('each forward starts every replica from device_ids[1]\'s buffers and keeps only its updates, on '
     .. table.concat(devices, ' and '), function()
    local model, ref = net(5), net(5)
    model:to(devices[1])
    local dp = nn.DataParallel(model, { device_ids = devices })
    torch.manual_seed(9)
    local batches = { torch.randn(8, 4, { dtype = 'float64', device = 'cpu:0' }), torch.randn(8, 4, { dtype = 'float64', device = 'cpu:0' }),
                      torch.randn(8, 4, { dtype = 'float64', device = 'cpu:0' }) }
    for step, x in ipairs(batches) do
      local y = dp(x:to(devices[1]))
      -- the reference: device_ids[1]'s half updates the buffers; the other half is
      -- normalised by its own batch statistics from a copy of the same buffers
      local copy = net(5)
      copy:load_state_dict(ref:state_dict())
      local want = torch.cat({ ref(x:narrow(1, 1, 4)), copy(x:narrow(1, 5, 4)) }, 1)
      close(y, want, 'output of step ' .. step)
      close(model[2].running_mean, ref[2].running_mean, 'running_mean after step ' .. step)
      close(model[2].running_var, ref[2].running_var, 'running_var after step ' .. step)
      assert.are.equal(step, model[2].num_batches_tracked:item())
      assert.are.equal(tostring(torch.device(devices[1])), tostring(model[2].running_mean.device))
    end
    -- the second half's statistics never reached the module
    local other = net(5)
    other(batches[1]:narrow(1, 5, 4))
    assert.is_false(torch.allclose(other[2].running_mean, model[2].running_mean:to('cpu:0'), 1e-6, 1e-6))
  end)
  end

  it('gradients through batch norm on two devices equal the reference\'s', function()
    local model, ref = net(6), net(6)
    local dp = nn.DataParallel(model, { device_ids = { 'cpu:0', 'cpu:1' } })
    torch.manual_seed(10)
    local x = torch.randn(8, 4, { dtype = 'float64', device = 'cpu:0' })
    dp(x):pow(2):sum():backward()
    local copy = net(6)
    local y = torch.cat({ ref(x:narrow(1, 1, 4)), copy(x:narrow(1, 5, 4)) }, 1)
    y:pow(2):sum():backward()
    local pm, pr, pc = model:parameters(), ref:parameters(), copy:parameters()
    for i = 1, #pm do close(pm[i].grad, pr[i].grad + pc[i].grad, 'gradient of parameter ' .. i, 1e-10) end
  end)

  it('eval mode uses device_ids[1]\'s running statistics on every replica', function()
    local model = net(7)
    local dp = nn.DataParallel(model, { device_ids = { 'cpu:0', 'cpu:1' } })
    torch.manual_seed(11)
    for _ = 1, 3 do dp(torch.randn(8, 4, { dtype = 'float64', device = 'cpu:0' }) * 3 + 1) end
    dp:eval()
    local x = torch.randn(8, 4, { dtype = 'float64', device = 'cpu:0' })
    close(dp(x), model(x), 'eval output')
    assert.are.equal(3, model[2].num_batches_tracked:item())
  end)

  it('buffers move with :to() onto another device and stay there', function()
    local m = net(8):to('cpu:1')
    assert.are.equal('cpu:1', tostring(m[2].running_var.device))
    assert.are.equal('cpu:1', tostring(m[2].num_batches_tracked.device))
    m(torch.randn(5, 4, { dtype = 'float64', device = 'cpu:1' }))
    assert.are.equal(1, m[2].num_batches_tracked:item())
    assert.are.equal('cpu:1', tostring(m[2].running_mean.device))
  end)
end)
