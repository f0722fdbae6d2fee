-- bench/data_workers.lua: a dataset written in Lua whose get(i) costs 1 ms (a busy wait,
-- as decoding a file would), 64 items in batches of 8, read by a DataLoader:
--   data_workers.busy1ms_w0   on the caller's thread (num_workers = 0)
--   data_workers.busy1ms_w2   by two worker threads, each with its own Lua state
-- Rates are items per second; the line `RATIO` is w2 over w0 (the aim: 1.8 or more on two
-- cores).  Twin: bench/data_workers.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()

local N, B, COST = 64, 8, 0.001

local Busy, parent = torch.class('BenchBusy', 'torch.data.Dataset')
function Busy:__init(n) parent.__init(self); self.n = n end
function Busy:get(i)
  local timer = torch.Timer()
  while timer:time().real < COST do end
  return torch.full({ 16 }, i)
end
function Busy:__len() return self.n end

local function epoch_of(loader)
  return function()
    local total = 0
    for x in loader:iter() do total = total + x:size(1) end
    return total
  end
end

local opts = { min_samples = 5, budget = 2.0, warmup = 0.3 }
local ds = Busy(N)
local t0 = bench.measure(epoch_of(torch.data.DataLoader(ds, { batch_size = B })), opts)
bench.report('data_workers.busy1ms_w0', N / t0, 'items/s')
local w2 = torch.data.DataLoader(ds, { batch_size = B, num_workers = 2, persistent_workers = true })
local t2 = bench.measure(epoch_of(w2), opts)
w2:close()
bench.report('data_workers.busy1ms_w2', N / t2, 'items/s')
print(string.format('RATIO data_workers w2/w0 %.2f', t0 / t2))
print('TARGET data_workers.busy1ms_w0 0.9')
print('TARGET data_workers.busy1ms_w2 0.9')
