-- Out of device memory: before it raises, the engine runs the Lua collector (the binding's
-- out-of-memory hook), empties the cache and retries, so tensors only the collector still
-- held do not make an allocation fail.  Run on the emulated GPU with a 64 MiB device.
local shell = dofile('spec/helpers/shell.lua')

describe('out of device memory', function()
  local emu, why = shell.emulated_cuda()
  if not emu then pending(why) return end

  it('collects dead tensors and retries before it raises, then names the sizes', function()
    local script = os.tmpname() .. '.lua'
    local out = io.open(script, 'w')
    out:write([[
collectgarbage('stop')   -- only the out-of-memory hook may collect
for i = 1, 40 do local t = torch.empty(4 * 1024 * 1024, { device = 'cuda:0' }) end
print('dropped tensors were collected')
local keep = {}
local ok, err = pcall(function()
  for i = 1, 10 do keep[i] = torch.empty(4 * 1024 * 1024, { device = 'cuda:0' }) end
end)
print(ok, #keep, err)
]])
    out:close()
    local cmd = ('env DPLUA_CUDA_LIB=%s DPLUA_EMU_GPUS=1 DPLUA_EMU_GPU_MEMORY_MIB=64 %s %s 2>&1')
      :format(shell.q(emu), shell.q(shell.bin), shell.q(script))
    local p = io.popen(cmd)
    local text = p:read('a')
    p:close()
    os.remove(script)
    assert.is_truthy(text:find('dropped tensors were collected', 1, true), text)
    assert.is_truthy(text:find('false\t4\t', 1, true), text)   -- four 16 MiB tensors fit in 64 MiB
    assert.is_truthy(text:find('CUDA out of memory. Tried to allocate 16.00 MiB on cuda:0', 1, true), text)
  end)
end)
