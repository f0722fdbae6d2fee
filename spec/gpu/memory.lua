-- spec/gpu/memory.lua: devices, streams and the caching allocator: device counts (with
-- DPLUA_CUDA_VIRTUAL), memory_allocated / max_memory_allocated / empty_cache, the
-- out-of-memory message, copies host <-> device <-> device (blocking and not), and the
-- mixed-device error.   build-gpu/dplua spec/gpu/memory.lua
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local G = dofile(here .. 'common.lua')
local MiB = 1024 * 1024

if not torch.cuda.is_available() then
  print('no CUDA device: nothing to check')
  print('0 passed, 1 failed')
  os.exit(1)
end

local n = torch.cuda.device_count()
local virtual = tonumber(os.getenv('DPLUA_CUDA_VIRTUAL') or '1') or 1
print(string.format('%d CUDA device(s), DPLUA_CUDA_VIRTUAL=%d', n, virtual))

G.expect('is_built and is_available', function() return torch.cuda.is_built() and torch.cuda.is_available() end)
G.expect('device_count is a multiple of DPLUA_CUDA_VIRTUAL', function() return n >= virtual and n % virtual == 0 end)

G.expect('memory_allocated follows tensors', function()
  collectgarbage(); collectgarbage()
  torch.cuda.synchronize()
  local before = torch.cuda.memory_allocated(0)
  local t = torch.empty(64 * MiB // 4, { device = 'cuda:0' })
  local during = torch.cuda.memory_allocated(0)
  assert(during - before >= 64 * MiB, string.format('grew by %d bytes for a 64 MiB tensor', during - before))
  assert(torch.cuda.max_memory_allocated(0) >= during, 'max_memory_allocated below memory_allocated')
  t = nil
  collectgarbage(); collectgarbage()
  local after = torch.cuda.memory_allocated(0)
  assert(after == before, string.format('%d bytes before, %d after the tensor was collected', before, after))
  return true
end)

G.expect('freed blocks are reused (a loop does not grow memory)', function()
  local x = torch.randn(1000, 1000, { device = 'cuda:0' })
  for _ = 1, 5 do local y = x * 2 + 1 end
  collectgarbage(); collectgarbage()
  local base = torch.cuda.memory_allocated(0)
  for _ = 1, 200 do local y = (x * 2 + 1):sum() end
  collectgarbage(); collectgarbage()
  local grown = torch.cuda.memory_allocated(0) - base
  assert(grown <= 8 * MiB, string.format('memory grew by %.1f MiB over 200 iterations', grown / MiB))
  return true
end)

G.expect('a loop that drops 40 tensors of 256 MiB needs no collectgarbage', function()
  local s = 0
  for i = 1, 40 do
    local t = torch.empty(256 * MiB // 4, { device = 'cuda:0' })
    t:narrow(1, 1, 1):fill_(i)
    s = s + t[1]
  end
  return s == 820
end)

G.expect('empty_cache keeps live tensors intact', function()
  local x = torch.arange(0, 1000, { device = 'cuda:0' })
  do local junk = torch.empty(256 * MiB // 4, { device = 'cuda:0' }) end
  collectgarbage(); collectgarbage()
  torch.cuda.empty_cache()
  return x:sum():item() == 499500
end)

G.expect('out of memory raises the documented message', function()
  local ok, err = pcall(torch.empty, 1024 * 1024 * 1024 * 1024, { device = 'cuda:0' })   -- 4 TiB of float32
  assert(not ok, 'a 4 TiB allocation succeeded')
  err = tostring(err)
  assert(err:find('CUDA out of memory. Tried to allocate', 1, true) and err:find('on cuda:0', 1, true)
    and err:find('free', 1, true), 'message: ' .. err)
  -- and the device still works
  return torch.ones(10, { device = 'cuda:0' }):sum():item() == 10
end)

G.expect('host <-> device copies, blocking and not', function()
  local h = torch.randn(300, 301)
  local d = h:to('cuda:0')
  local d2 = h:to { device = 'cuda:0', non_blocking = true }
  local back = d2:cpu()
  return torch.equal(d:cpu(), h) and torch.equal(back, h) and d.is_cuda and not h.is_cuda
end)

G.expect('pinned memory: pin_memory, is_pinned, a non_blocking copy that outlives its source', function()
  local h = torch.randn(1000, 1000)
  local p = h:pin_memory()
  assert(p:is_pinned() and not h:is_pinned() and p:pin_memory():is_pinned(), 'is_pinned')
  assert(torch.equal(p, h), 'pin_memory changed the values')
  local d = p:to { device = 'cuda:0', non_blocking = true }
  local d2 = p:t():to { device = 'cuda:0', non_blocking = true }   -- strided: staged, then copied
  p = nil
  collectgarbage(); collectgarbage()                                  -- the pinned source goes back
  local junk = torch.randn(1000, 1000):pin_memory()                   -- and may be handed out again
  return torch.equal(d:cpu(), h) and torch.equal(d2:cpu(), h:t():contiguous()) and junk:is_pinned()
end)

G.expect('pinned memory is cached: a freed block comes back once the GPU is past it', function()
  local function pinned_ptr(n)
    local p = torch.ones(n):pin_memory()
    return p:data_ptr()
  end
  local ptr = pinned_ptr(300000)
  collectgarbage(); collectgarbage()
  torch.cuda.synchronize()
  local again = torch.ones(300000):pin_memory()           -- the same rounded size: the cached block
  local reused = again:data_ptr() == ptr
  local pending = again:to { device = 'cuda:0', non_blocking = true }   -- queued, maybe not run
  again = nil
  collectgarbage(); collectgarbage()
  local other = torch.full({ 300000 }, 5.0):pin_memory()  -- must not be the block still being read
  local ok = torch.equal(pending:cpu(), torch.ones(300000)) and torch.equal(other, torch.full({ 300000 }, 5.0))
  torch.cuda.empty_cache()                                -- gives every cached block back
  return reused and ok
end)

G.expect('DataLoader with pin_memory and a CUDA device gives the CPU batches', function()
  local ds = torch.data.TensorDataset(torch.randn(100, 7), torch.arange(1, 101))
  local a = torch.data.DataLoader(ds, { batch_size = 16, shuffle = false })
  local b = torch.data.DataLoader(ds, { batch_size = 16, shuffle = false, pin_memory = true, device = 'cuda:0', num_workers = 2 })
  local xs, ys = {}, {}
  for x, y in a:iter() do xs[#xs + 1], ys[#ys + 1] = x, y end
  local i = 0
  for x, y in b:iter() do
    i = i + 1
    assert(x.is_cuda and y.is_cuda, 'batch ' .. i .. ' is not on the GPU')
    assert(torch.equal(x:cpu(), xs[i]) and torch.equal(y:cpu(), ys[i]), 'batch ' .. i .. ' differs')
  end
  return i == #xs
end)

G.expect('strided host -> device copy', function()
  local h = torch.randn(50, 60):t()
  return torch.equal(h:to('cuda:0'):cpu(), h:contiguous())
end)

G.expect('mixed devices raise the same-device error', function()
  local ok, err = pcall(function() return torch.ones(3) + torch.ones(3, { device = 'cuda:0' }) end)
  return not ok and tostring(err):find('expected all tensors to be on the same device', 1, true) ~= nil
end)

G.expect('synchronize on every device', function()
  for i = 0, n - 1 do torch.cuda.synchronize(i) end
  torch.cuda.synchronize()
  return true
end)

if n >= 2 then
  G.expect('device-to-device copies and work on cuda:1', function()
    local a = torch.randn(513, 257)
    local x0 = a:to('cuda:0')
    local x1 = x0:to('cuda:1')
    local y1 = (x1 * 2):exp():sum(2)
    local back = y1:to('cuda:0'):cpu()
    local ref = (a * 2):exp():sum(2)
    assert(tostring(x1.device) == 'cuda:1', 'device ' .. tostring(x1.device))
    return torch.allclose(back, ref, 1e-5, 1e-5) and torch.equal(x1:cpu(), a)
  end)
  G.expect('each device keeps its own memory count', function()
    collectgarbage(); collectgarbage()
    local b0, b1 = torch.cuda.memory_allocated(0), torch.cuda.memory_allocated(1)
    local t = torch.empty(32 * MiB // 4, { device = 'cuda:1' })
    local ok = torch.cuda.memory_allocated(1) - b1 >= 32 * MiB and torch.cuda.memory_allocated(0) == b0
    t = nil
    collectgarbage()
    return ok
  end)
  G.expect('a copy chain across every device', function()
    local a = torch.randn(1000)
    local x = a:to('cuda:0')
    for i = 1, n - 1 do x = (x + 1):to('cuda:' .. i) end
    return torch.allclose(x:cpu(), a + (n - 1), 1e-6, 1e-6)
  end)
end

os.exit(G.finish() and 0 or 1)
