-- bench/data.lua: one epoch of a DataLoader over 60,000 samples of 784 float32 values with
-- int64 labels, batches of 64, shuffled, each batch touched (its sum):
--   data.tensor_b64      a TensorDataset (the engine gathers each batch in one call)
--   data.tensor_b64_w2   the same with num_workers = 2 (batches assembled ahead)
--   data.lua_b64         a dataset written in Lua whose get(i) returns a row (default collate)
-- Rates are batches per second (the median over epochs).  Twin: bench/data.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)

local N, D, B = 60000, 784, 64
local X = torch.randn(N, D)
local Y = torch.randint(0, 10, { N })
local nbatches = (N + B - 1) // B

local Rows, parent = torch.class('BenchRows', 'torch.data.Dataset')
function Rows:__init(x) parent.__init(self); self.x = x end
function Rows:get(i) return self.x[i] end
function Rows:__len() return self.x:size(1) end

local function epoch_of(loader)
  return function()
    local total = 0
    for x in loader:iter() do total = total + x:sum():item() end
    return total
  end
end

local opts = { min_samples = 5, budget = 2.0, warmup = 0.3 }
local tensor_ds = torch.data.TensorDataset(X, Y)
local t = bench.measure(epoch_of(torch.data.DataLoader(tensor_ds, { batch_size = B, shuffle = true })), opts)
bench.report('data.tensor_b64', nbatches / t, 'batches/s')
local w2 = torch.data.DataLoader(tensor_ds, { batch_size = B, shuffle = true, num_workers = 2 })
t = bench.measure(epoch_of(w2), opts)
w2:close()
bench.report('data.tensor_b64_w2', nbatches / t, 'batches/s')
t = bench.measure(epoch_of(torch.data.DataLoader(Rows(X), { batch_size = B, shuffle = true })), opts)
bench.report('data.lua_b64', nbatches / t, 'batches/s')
print('TARGET data.tensor_b64 3')
print('TARGET data.tensor_b64_w2 3')
print('TARGET data.lua_b64 2')
