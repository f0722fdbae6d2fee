-- spec/gpu/errors.lua: bad input on CUDA devices gives a Lua error that says what happened
-- and leaves the devices usable: a device that does not exist, devices mixed in one op,
-- malformed device names, an out-of-range index, and memory exhaustion followed by work.
--   build-gpu/dplua spec/gpu/errors.lua
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local G = dofile(here .. 'common.lua')
G.require_device()
local n = torch.cuda.device_count()

local function raises(fn, ...)
  local parts = { ... }
  local ok, err = pcall(fn)
  assert(not ok, 'no error')
  err = tostring(err)
  for _, p in ipairs(parts) do assert(err:find(p, 1, true), 'message "' .. err .. '" lacks "' .. p .. '"') end
  return true
end

local function still_works()
  local x = torch.arange(1, 101, { device = 'cuda:0' })
  return (x * 2):sum():item() == 10100
end

G.expect('a device that does not exist names it and the count', function()
  raises(function() return torch.zeros(3, { device = 'cuda:' .. (n + 5) }) end, 'cuda:' .. (n + 5))
  raises(function() return torch.ones(3):to('cuda:' .. n) end, 'cuda:' .. n)
  return still_works()
end)

G.expect('malformed device names', function()
  raises(function() return torch.zeros(3, { device = 'cuda:x' }) end, 'cuda:x')
  raises(function() return torch.zeros(3, { device = 'cuda:-1' }) end, 'cuda:-1')
  return still_works()
end)

G.expect('mixing the CPU and a GPU in one op', function()
  raises(function() return torch.ones(3, { device = 'cuda:0' }) * torch.ones(3) end,
    'expected all tensors to be on the same device')
  raises(function() return torch.ones(2, 3, { device = 'cuda:0' }):matmul(torch.ones(3, 2)) end,
    'expected all tensors to be on the same device')
  return still_works()
end)

if n >= 2 then
  G.expect('mixing two GPUs in one op', function()
    raises(function() return torch.ones(3, { device = 'cuda:0' }) + torch.ones(3, { device = 'cuda:1' }) end,
      'expected all tensors to be on the same device', 'cuda:0', 'cuda:1')
    return still_works()
  end)
end

-- checked on the device (no copy of the indices to the host), reported at the next
-- synchronisation: item(), tolist, a copy to the host, torch.cuda.synchronize()
G.expect('an index out of range on the device, reported at the next synchronisation', function()
  local x = torch.randn(5, 3):to('cuda:0')
  local y = x:index_select(1, torch.tensor({ 1, 9, 0 }):to('cuda:0'))   -- no error yet
  raises(function() return y:sum():item() end,
    'index_select: index 9 (at position 2) is out of range for dimension 1 with size 5',
    '(reported at the next synchronisation; CUDA_LAUNCH_BLOCKING=1 reports it at the op)')
  assert(still_works(), 'the device works after the report')
  x:index_select(2, torch.tensor({ 4 }):to('cuda:0'))
  raises(function() torch.cuda.synchronize() end, 'index 4 (at position 1) is out of range for dimension 2 with size 3')
  x:index_select(1, torch.tensor({ 2, 6 }):to('cuda:0'))
  raises(function() return x:tolist() end, 'index 6 (at position 2)')
  x:index_select(1, torch.tensor({ -1 }):to('cuda:0'))
  raises(function() return x:cpu() end, 'index -1 (at position 1)')
  -- indices from the host are still checked at the op
  raises(function() return x:index_select(1, { 1, 9 }) end, 'index 9 (at position 2) is out of range')
  return still_works()
end)

G.expect('an embedding lookup out of range on the device, reported at the next synchronisation', function()
  local emb = nn.Embedding(6, 3):to('cuda:0')
  local out = emb:forward(torch.tensor({ { 1, 2 }, { 7, 3 } }):to('cuda:0'))
  raises(function() return out:sum():item() end, 'index 7 (at position 3) is out of range for dimension 1 with size 6',
    'reported at the next synchronisation')
  return still_works()
end)

G.expect('a class target out of range on the device, reported at the next synchronisation', function()
  local logits = torch.randn(3, 4):to('cuda:0')
  local t = torch.tensor({ 1, 7, 2 }):to('cuda:0')
  local l = torch.nn.functional.cross_entropy(logits, t)
  raises(function() return l:item() end,
    'cross_entropy: target 7 at position 2 is out of bounds: class indices must be between 1 and 4 (dplua counts classes from 1)',
    'reported at the next synchronisation')
  local l2 = torch.nn.functional.nll_loss(logits:log_softmax(2), torch.tensor({ 4, 1, 5 }):to('cuda:0'), { reduction = 'none' })
  raises(function() return l2:tolist() end, 'target 5 at position 3')
  -- the good targets give the CPU's value once the bad ones are gone
  local good = torch.tensor({ 1, 4, 2 })
  local want = torch.nn.functional.cross_entropy(logits:cpu(), good):item()
  local got = torch.nn.functional.cross_entropy(logits, good:to('cuda:0')):item()
  return math.abs(want - got) < 1e-5 and still_works()
end)

G.expect('exhausting memory twice, then ordinary work', function()
  for _ = 1, 2 do
    raises(function() return torch.empty(1024 * 1024 * 1024 * 1024, { device = 'cuda:0' }) end,
      'CUDA out of memory. Tried to allocate', 'on cuda:0')
  end
  local keep = {}
  for i = 1, 20 do keep[i] = torch.randn(1000, { device = 'cuda:0' }) end
  return still_works()
end)

os.exit(G.finish() and 0 or 1)
