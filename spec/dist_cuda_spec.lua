-- dist_cuda_spec.lua: the CUDA services DistributedDataParallel relies on that one process
-- can check: the count of host waits (backward with DDP must make none), record_stream in
-- the caching allocator (a bucket freed while another stream uses it is not handed out
-- again), and copies between devices (their events come from a pool now).  Runs where CUDA
-- is available: spec/gpu/specs cuda:0 dist_cuda on the emulated GPU (spec/cudaemu).
local torch = require 'torch'
local dist = require 'torch.distributed'

local function need_cuda(n)
  if not torch.cuda.is_available() or torch.cuda.device_count() < (n or 1) then
    pending(('needs %d CUDA device%s'):format(n or 1, (n or 1) > 1 and 's' or ''))
    return false
  end
  return true
end

local MIB = 1024 * 1024

describe('torch.distributed on CUDA: streams and the allocator', function()
  it('counts the host waits of this thread: kernels make none, reading a value makes one', function()
    if not need_cuda() then return end
    local x = torch.arange(100, { dtype = 'float32', device = 'cuda:0' })
    local before = dist._cuda_host_syncs()
    local y = (x * 2 + 1):sum()
    assert.are.equal(before, dist._cuda_host_syncs())
    assert.are.equal(9900 + 100, y:item())
    assert.is_true(dist._cuda_host_syncs() > before)
    local mid = dist._cuda_host_syncs()
    torch.cuda.synchronize('cuda:0')
    assert.are.equal(mid + 1, dist._cuda_host_syncs())
  end)

  it('record_stream: a freed block waits for the side stream before it is reused', function()
    if not need_cuda() then return end
    collectgarbage(); collectgarbage()
    torch.cuda.empty_cache()
    local m0 = torch.cuda.memory_allocated('cuda:0')
    local a = torch.ones(MIB // 4, { dtype = 'float32', device = 'cuda:0' })
    assert.are.equal(m0 + MIB, torch.cuda.memory_allocated('cuda:0'))
    dist._side_stream_use(a)
    a = nil
    collectgarbage(); collectgarbage()
    -- still held: the side stream's work queued before the free may use it
    assert.are.equal(m0 + MIB, torch.cuda.memory_allocated('cuda:0'))
    torch.cuda.empty_cache()   -- waits for every stream: now it goes back
    assert.are.equal(m0, torch.cuda.memory_allocated('cuda:0'))
  end)

  it('without record_stream a freed block is back at once (the check above can fail)', function()
    if not need_cuda() then return end
    collectgarbage(); collectgarbage()
    local m0 = torch.cuda.memory_allocated('cuda:0')
    local a = torch.ones(MIB // 4, { dtype = 'float32', device = 'cuda:0' })
    a = nil
    collectgarbage(); collectgarbage()
    assert.are.equal(m0, torch.cuda.memory_allocated('cuda:0'))
  end)

  it('record_stream takes only a tensor of a CUDA device', function()
    if not need_cuda() then return end
    local ok, err = pcall(dist._side_stream_use, torch.ones(2, { device = 'cpu' }))
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('expected a CUDA tensor, got one on cpu', 1, true))
  end)

  it('copies between devices keep their values and make the host wait for nothing', function()
    if not need_cuda(2) then return end
    local x = torch.arange(1000, { dtype = 'float64', device = 'cuda:0' })
    local before = dist._cuda_host_syncs()
    local y
    for _ = 1, 50 do   -- more copies than the event pool holds
      y = x:to('cuda:1') * 2
      x = y:to('cuda:0') / 2
    end
    assert.are.equal(before, dist._cuda_host_syncs())
    assert.is_true(torch.equal(x:cpu(), torch.arange(1000, { dtype = 'float64', device = 'cpu' })))
  end)
end)
