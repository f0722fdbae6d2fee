-- bench/gpu_linear.lua: forward and backward of nn.Linear(4096, 4096) on an 8192x4096 batch
-- on cuda:0 (the input requires its gradient too, so the step is three 275 GFLOP GEMMs
-- plus a bias column sum), against the three GEMMs alone through matmul: the difference
-- is what the engine adds around cuBLAS.  FP32 (no TF32).  Twin: bench/gpu_linear.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
local dev = bench.gpu_setup('gpu_linear')
if not dev then return end
local model = nn.Linear(4096, 4096):to(dev)
local x = torch.randn(8192, 4096, { device = dev }):requires_grad_(true)
local grad = torch.randn(8192, 4096, { device = dev })
local w = model.weight:detach()
local xd = x:detach()
local REPS = 5

local function step()
  for _ = 1, REPS do
    model:zero_grad()
    local y = model(x)
    y:backward(grad)
  end
  torch.cuda.synchronize()
end

local function gemms()
  for _ = 1, REPS do
    local y = xd:matmul(w:t())     -- forward
    local gx = grad:matmul(w)      -- input gradient
    local gw = grad:t():matmul(xd) -- weight gradient
  end
  torch.cuda.synchronize()
end

local flops = 3 * 2 * 8192 * 4096 * 4096
local t_step = bench.measure(step, { min_samples = 5, budget = 3 }) / REPS
local t_gemm = bench.measure(gemms, { min_samples = 5, budget = 3 }) / REPS
bench.report('gpu_linear.fwd_bwd_4096_b8192', t_step, 's')
bench.report('gpu_linear.three_gemms_4096_b8192', t_gemm, 's')
bench.report('gpu_linear.fwd_bwd_tflops', flops / t_step / 1e12, 'TFLOP/s')
print(string.format('gpu_linear: the step takes %.1f%% longer than its three GEMMs', (t_step / t_gemm - 1) * 100))
