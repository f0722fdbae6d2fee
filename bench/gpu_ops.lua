-- bench/gpu_ops.lua: the cost of one small op on cuda:0 (16 float32 elements), i.e. the
-- engine's dispatch plus the kernel launch: an add, a unary op, a whole-tensor sum, an
-- in-place add and a 64x64 matmul.  The device is synchronized once per batch of calls,
-- so this is throughput of back-to-back launches.  Twin: bench/gpu_ops.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
local dev = bench.gpu_setup('gpu_ops')
if not dev then return end
local a, b = torch.randn(16, { device = dev }), torch.randn(16, { device = dev })
local m = torch.randn(64, 64, { device = dev })
local REPS = 200

local function timed(name, op)
  local function run()
    for _ = 1, REPS do op() end
    torch.cuda.synchronize()
  end
  bench.report('gpu_ops.' .. name, bench.measure(run, { min_samples = 10 }) / REPS, 's')
end

timed('add_16', function() local c = a + b end)
timed('exp_16', function() local c = a:exp() end)
timed('sum_16', function() local c = a:sum() end)
timed('add_inplace_16', function() a:add_(b) end)
timed('matmul_64', function() local c = m:matmul(m) end)
