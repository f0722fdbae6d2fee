-- bench/common.lua: timing helpers shared by the Lua benchmarks.
--
--   local bench = dofile(debug.getinfo(1, 'S').source:match('^@?(.*[/\\])') .. 'common.lua')
--   bench.setup()                                  -- thread count from BENCH_THREADS
--   bench.report('ops.add_4', bench.measure(function() local c = a + b end), 's')
--
-- Every benchmark has a PyTorch twin (bench/X.py) that times the same work the same way,
-- so the two numbers can be compared line by line (see bench/README.md for the protocol).

local M = {}

-- The number of CPU threads both sides use; bench/run sets it (default: every core).
function M.setup()
  local n = tonumber(os.getenv('BENCH_THREADS') or '')
  if n and n > 0 then torch.set_num_threads(math.floor(n)) end
  return torch.get_num_threads()
end

-- setup() for a GPU benchmark, seed 0: the device, or nil (after saying so) without a GPU.
function M.gpu_setup(name)
  M.setup()
  if not torch.cuda.is_available() then print(name .. ': no CUDA device') return nil end
  torch.manual_seed(0)
  return 'cuda:0'
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  if n % 2 == 1 then return xs[(n + 1) // 2] end
  return (xs[n // 2] + xs[n // 2 + 1]) / 2
end
M.median = median

-- Seconds per call of fn, the median over samples.  fn runs first for `warmup` seconds
-- (at least 3 calls), which also estimates its cost; then each sample times enough calls
-- in a row to last about `sample` seconds (so the clock's resolution and the cost of
-- reading it do not show), and samples are taken for about `budget` seconds, at least
-- `min_samples` of them.  Garbage made by fn is collected when Lua decides, as it is in a
-- user's program, and its cost is part of the time.
function M.measure(fn, opt)
  opt = opt or {}
  local warmup = opt.warmup or 0.3
  local sample = opt.sample or 0.01
  local budget = opt.budget or 2.0
  local min_samples = opt.min_samples or 5
  local timer = torch.Timer()
  local calls = 0
  repeat
    fn()
    calls = calls + 1
  until calls >= 3 and timer:time().real >= warmup
  local per_call = timer:time().real / calls
  local inner = math.max(1, math.floor(sample / per_call))
  local samples = {}
  timer:reset()
  local total = 0
  while #samples < min_samples or total < budget do
    local t0 = timer:time().real
    for _ = 1, inner do fn() end
    local t1 = timer:time().real
    samples[#samples + 1] = (t1 - t0) / inner
    total = t1
  end
  return median(samples)
end

-- One result line: BENCH <name> <value> <unit>; unit is 's' (lower is better) or ends in
-- '/s' (higher is better).
function M.report(name, value, unit)
  print(string.format('BENCH %s %.6g %s', name, value, unit))
  io.stdout:flush()
end

return M
