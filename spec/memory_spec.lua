-- Memory (SPEC section 3): the collector is told what tensors hold, so a loop that drops
-- large tensors runs in bounded memory without collectgarbage(); <close> frees at once.
-- Peak memory (VmHWM) is measured in a child lua5.4 so this process doesn't skew it.
local torch = require 'torch'
local run_child = dofile('spec/helpers/check.lua').run_child

-- ASan's quarantine keeps freed blocks (256 MB by default) before reusing them, so under
-- ASAN=1 the peak of a loop that allocates a lot would measure the quarantine, not the
-- collector: the loops of small tensors run with a small one
local asan_env = os.getenv('ASAN') == '1'
  and ("ASAN_OPTIONS='%s:quarantine_size_mb=32'"):format(os.getenv('ASAN_OPTIONS') or '') or nil

describe('tensor memory', function()
  it('stays bounded in a loop that drops 4 MB tensors (no collectgarbage)', function()
    -- 2000 x 4 MB = 8 GB if nothing were freed
    local out, status = run_child([[
      local torch = require 'torch'
      for i = 1, 2000 do
        local t = torch.ones(1024 * 1024)
      end
      local f = io.open('/proc/self/status')
      print(f:read('a'):match('VmHWM:%s*(%d+) kB'))
      f:close()
    ]])
    assert.are.equal(0, status, out)
    local peak_kb = tonumber(out:match('(%d+)'))
    assert.is_number(peak_kb, out)
    assert.is_true(peak_kb < 400 * 1024, ('peak memory %d MB'):format(peak_kb // 1024))
  end)

  for _, mode in ipairs({ 'generational', 'incremental' }) do
    it('stays bounded in a loop of small tensor ops (' .. mode .. ' collector)', function()
      local out, status = run_child(([[
        local torch = require 'torch'
        collectgarbage('%s')
        local a = torch.ones(4)
        for i = 1, 500000 do
          local b = (a + i) * 2
        end
        local f = io.open('/proc/self/status')
        print(f:read('a'):match('VmHWM:%%s*(%%d+) kB'))
        f:close()
      ]]):format(mode), asan_env)
      assert.are.equal(0, status, out)
      local peak_kb = tonumber(out:match('(%d+)'))
      assert.is_number(peak_kb, out)
      assert.is_true(peak_kb < 150 * 1024, ('peak memory %d MB'):format(peak_kb // 1024))
    end)
  end

  it('releases storage at the end of a <close> scope', function()
    local ok = load([[
      local torch = ...
      local t <close> = torch.ones(4)
      return t
    ]])
    local t = ok(torch)
    assert.has_error(function() return t + 1 end, nil)
    local e = select(2, pcall(function() return t:sum() end))
    assert.is_truthy(tostring(e):find('the tensor was closed', 1, true))
  end)

  it('keeps the storage alive while a view exists', function()
    local v
    do
      local t = torch.arange(10)
      v = t:narrow(1, 3, 2)
    end
    collectgarbage()
    collectgarbage()
    assert.are.same({ 2, 3 }, v:tolist())
  end)
end)
