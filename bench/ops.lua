-- bench/ops.lua: the cost of single tensor operations, from a few elements (where the
-- time is the call's overhead) to 2^25 elements and a large matmul (where it is memory
-- bandwidth and arithmetic).  Twin: bench/ops.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)

-- a + b on 4 floats: the per-op overhead (dispatch, result allocation, userdata).
do
  local a, b = torch.randn(4), torch.randn(4)
  bench.report('ops.add_4', bench.measure(function() local c = a + b end), 's')
end

-- 64x64 matmul: overhead plus a small GEMM.
do
  local a, b = torch.randn(64, 64), torch.randn(64, 64)
  bench.report('ops.matmul_64', bench.measure(function() local c = a:matmul(b) end), 's')
end

-- a + b on 2^25 floats (128 MiB per tensor): a fresh result each time, dropped as a
-- user's loop drops it.
do
  local n = 1 << 25
  local a, b = torch.randn(n), torch.randn(n)
  bench.report('ops.add_2p25', bench.measure(function() local c = a + b end,
    {min_samples = 10}), 's')
  bench.report('ops.sum_2p25', bench.measure(function() local s = a:sum() end,
    {min_samples = 10}), 's')
end

-- (4096 x 1024) @ (1024 x 1024): a large GEMM, 8.6 GFLOP.
do
  local a, b = torch.randn(4096, 1024), torch.randn(1024, 1024)
  bench.report('ops.matmul_4096x1024x1024', bench.measure(function() local c = a:matmul(b) end,
    {min_samples = 10}), 's')
end
