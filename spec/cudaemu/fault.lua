-- spec/cudaemu/fault.lua: what a kernel fault does to the library, with DPLUA_EMU_FAULT
-- making index_select's kernel fault (spec/cudaemu/run checks the printout): the op
-- returns, the next synchronisation raises a Lua error saying a kernel failed, every later
-- use of cuda:0 raises it too, and cuda:1 and the CPU go on working.
local x = torch.randn(4, 3, { device = 'cuda:0' })
local y = x:index_select(1, torch.tensor({ 1, 2 }, { device = 'cuda:0' }))
print('op ok', y ~= nil)
print(pcall(function() return y:sum():item() end))
print(pcall(torch.zeros, 3, { device = 'cuda:0' }))
print(pcall(function() return x:cpu() end))
print(pcall(function() torch.cuda.synchronize() end))
print(pcall(function() return torch.ones(3, { device = 'cuda:1' }):sum():item() end))
print(torch.ones(2):sum():item())
