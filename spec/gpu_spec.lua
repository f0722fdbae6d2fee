-- The CUDA backend (SPEC section 2).  Without a GPU: the no-GPU behaviour (is_built() true
-- when the build has libdplua_cuda.so, is_available() false, device_count() 0, a clear
-- 'CUDA is not available' error for any use of a cuda device, and no crash while the
-- backend library finds no driver); the GPU checks are marked pending.  With a GPU: each
-- spec/gpu/*.lua script runs under the dplua binary and must report no failure.
local torch = require 'torch'
local shell = dofile('spec/helpers/shell.lua')
local check = dofile('spec/helpers/check.lua')
local build, BIN = shell.build, shell.bin
local err, assert_contains = check.err, check.assert_contains

local function exists(path)
  local f = io.open(path, 'rb')
  if f then f:close() end
  return f ~= nil
end

-- Runs a dplua script; returns its output and whether it exited with 0.
local function run_script(path, env)
  local cmd = string.format('%s%s %s 2>&1', env or '', BIN, path)
  local p = assert(io.popen(cmd))
  local out = p:read('a')
  local ok = p:close()
  return out, ok
end

local built = exists(build .. '/libdplua_cuda.so')

describe('CUDA without a GPU', function()
  if torch.cuda.is_available() then
    pending('a CUDA device is present: the no-GPU behaviour cannot be checked here')
    return
  end

  it('is built when the build has the CUDA backend', function()
    if not built then
      pending('this build has no libdplua_cuda.so (built with CUDA=0 or without nvcc)')
      return
    end
    assert.is_true(torch.cuda.is_built())
  end)

  it('is not available and counts no device', function()
    assert.is_false(torch.cuda.is_available())
    assert.are.equal(0, torch.cuda.device_count())
  end)

  it('raises CUDA is not available for a cuda tensor', function()
    assert_contains(err(torch.zeros, 2, { device = 'cuda:0' }), 'CUDA is not available')
    assert_contains(err(function() return torch.ones(3):cuda() end), 'CUDA is not available')
    assert_contains(err(function() return torch.ones(3):to('cuda:1') end), 'CUDA is not available')
  end)

  it('refuses pin_memory with a clear error, and a DataLoader with pin_memory still loads', function()
    assert_contains(err(function() return torch.randn(3):pin_memory() end), 'pinned memory needs CUDA')
    assert.is_false(torch.randn(3):is_pinned())
    local dl = torch.data.DataLoader(torch.data.TensorDataset(torch.arange(1, 11)), { batch_size = 4, pin_memory = true })
    local sizes = {}
    for x in dl:iter() do sizes[#sizes + 1] = x:size(1); assert.is_false(x:is_pinned()) end
    assert.are.same({ 4, 4, 2 }, sizes)
  end)

  it('keeps working on the CPU after a refused cuda use', function()
    pcall(torch.zeros, 2, { device = 'cuda:0' })
    assert.are.equal(6, torch.ones(2, 3):sum():item())
  end)

  it('starts the dplua binary without a driver and says why CUDA is missing', function()
    local out, ok = run_script('-e "print(torch.cuda.is_available(), torch.cuda.device_count()) ' ..
      'local ok, e = pcall(torch.zeros, 1, {device=\'cuda:0\'}) print(e)"')
    assert.is_true(ok, out)
    assert_contains(out, 'false\t0')
    assert_contains(out, 'CUDA is not available')
  end)
end)

describe('CUDA on a GPU', function()
  if not torch.cuda.is_available() then
    pending('no GPU is present (torch.cuda.is_available() is false): run spec/gpu/check on a GPU machine')
    return
  end

  it('counts at least one device', function()
    assert.is_true(torch.cuda.is_built())
    assert.is_true(torch.cuda.device_count() >= 1)
  end)

  for _, script in ipairs({ 'ops', 'sweep', 'memory', 'errors', 'train' }) do
    it('passes spec/gpu/' .. script .. '.lua', function()
      local out, ok = run_script('spec/gpu/' .. script .. '.lua', 'DPLUA_CUDA_POISON=1 ')
      assert.is_true(ok, out)
      assert_contains(out, ' 0 failed')
    end)
  end

  it('passes spec/gpu/memory.lua with two virtual devices per GPU', function()
    local out, ok = run_script('spec/gpu/memory.lua', 'DPLUA_CUDA_VIRTUAL=2 ')
    assert.is_true(ok, out)
    assert_contains(out, ' 0 failed')
  end)

  it('passes spec/gpu/parallel.lua (DataParallel) with two virtual devices per GPU', function()
    local out, ok = run_script('spec/gpu/parallel.lua', 'DPLUA_CUDA_VIRTUAL=2 ')
    assert.is_true(ok, out)
    assert_contains(out, ' 0 failed')
  end)
end)
