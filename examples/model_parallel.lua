-- model_parallel.lua: one model split over two devices.  The first half lives on one
-- device, the second on another; forward moves the activations between them with
-- x:to(dev), and autograd carries the gradients back the same way.
--
--   dplua examples/model_parallel.lua             two GPUs when there are, else cpu:0 and cpu:1
--
-- It trains the split model for a few SGD steps next to the same model on one device and
-- checks, step by step, that losses, gradients and weights agree.

local cuda = torch.cuda.device_count() >= 2
if not cuda and torch.cpu.device_count() < 2 then
  pcall(torch.cpu.set_device_count, 2)   -- only possible before the first tensor
end
local dev0 = torch.device(cuda and 'cuda:0' or 'cpu:0')
local dev1 = torch.device(cuda and 'cuda:1' or 'cpu:1')
if not cuda and torch.cpu.device_count() < 2 then
  error('model_parallel.lua needs two devices: run it with DPLUA_CPU_DEVICES=2', 0)
end

local TwoHalves, Module = torch.class('TwoHalves', 'nn.Module')

function TwoHalves:__init(first, second)
  Module.__init(self)
  self.net1 = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
  self.net2 = nn.Linear(32, 5)
  self.net1:to(first)
  self.net2:to(second)
  rawset(self, 'first', first)
  rawset(self, 'second', second)
end

function TwoHalves:forward(x)
  local h = self.net1(x:to(self.first))
  return self.net2(h:to(self.second))
end

local function build(first, second)
  torch.manual_seed(42)          -- the same initial weights for both models
  return TwoHalves(first, second)
end

local split = build(dev0, dev1)    -- net1 on dev0, net2 on dev1
local whole = build(dev0, dev0)    -- everything on dev0
print(('split model: net1 on %s, net2 on %s; reference: everything on %s')
  :format(split.net1[1].weight.device, split.net2.weight.device, whole.net2.weight.device))

local loss_fn = nn.MSELoss()
local opt_split = optim.SGD(split:parameters(), { lr = 0.05 })
local opt_whole = optim.SGD(whole:parameters(), { lr = 0.05 })

-- The largest difference between two lists of tensors (compared on dev0).
local function max_diff(xs, ys)
  local worst = 0
  for i = 1, #xs do
    local d = (xs[i]:to(dev0) - ys[i]:to(dev0)):abs():max():item()
    worst = math.max(worst, d)
  end
  return worst
end

local function grads(m)
  local out = {}
  for i, p in ipairs(m:parameters()) do out[i] = p.grad end
  return out
end

torch.manual_seed(0)
local tolerance, all_ok = 1e-5, true
for step = 1, 5 do
  local x, y = torch.randn(20, 10), torch.randn(20, 5)

  opt_split:zero_grad()
  local out = split(x)                         -- ends on dev1
  local loss = loss_fn(out, y:to(dev1))
  loss:backward()

  opt_whole:zero_grad()
  local loss_ref = loss_fn(whole(x), y:to(dev0))
  loss_ref:backward()

  local gdiff = max_diff(grads(split), grads(whole))
  opt_split:step()
  opt_whole:step()
  local wdiff = max_diff(split:parameters(), whole:parameters())
  local ok = gdiff <= tolerance and wdiff <= tolerance
  all_ok = all_ok and ok
  print(('step %d  loss %.6f (one device %.6f)  max gradient difference %.2g  max weight difference %.2g  %s')
    :format(step, loss:item(), loss_ref:item(), gdiff, wdiff, ok and 'ok' or 'MISMATCH'))
end

print(('gradients of the split model equal those of the one-device model: %s'):format(tostring(all_ok)))
if not all_ok then os.exit(1) end
