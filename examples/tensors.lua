-- tensors.lua: the notes' checks of to(): a tensor's to(device) returns a copy and leaves
-- the tensor where it was; a module's to(device) moves the module itself.
--
--   dplua examples/tensors.lua
--
-- With CUDA it prints what the notes print (false / false, true; and false, true, true).
-- Without CUDA it says so and shows the same with two CPU devices, cpu:0 and cpu:1.

if not torch.cuda.is_available() and torch.cpu.device_count() < 2 then
  pcall(torch.cpu.set_device_count, 2)   -- only possible before the first tensor
end

local target, on_target
if torch.cuda.is_available() then
  target = torch.device('cuda:0')
  on_target = function(t) return t.is_cuda end
elseif torch.cpu.device_count() >= 2 then
  target = torch.device('cpu:1')
  on_target = function(t) return t.device == target end
  print('CUDA is not available: the same checks with cpu:0 -> cpu:1 ("is_cuda" below reads "is on cpu:1")')
else
  print('CUDA is not available and there is one CPU device: run with DPLUA_CPU_DEVICES=2')
  return
end

print('tensors:to(device)')
local a = torch.randn(3, 4)
print('a is_cuda ' .. tostring(on_target(a)))
local b = a:to(target)
print('a is_cuda ' .. tostring(on_target(a)))
print('b is_cuda ' .. tostring(on_target(b)))
print(('a on %s, b on %s'):format(a.device, b.device))

print('models:to(device)')
local m = nn.Linear(3, 4)
print(on_target(m:parameters()[1]))
local moved = m:to(target)
print(on_target(m:parameters()[1]))
print(on_target(moved:parameters()[1]))
print(('the same module: %s'):format(tostring(rawequal(m, moved))))
