-- bench/attention_memory.lua: one forward and backward of F.scaled_dot_product_attention at
-- B=1, H=4, L=S=4096, E=64 (causal, float32), for the process's peak memory:
--   /usr/bin/time -v build/dplua bench/attention_memory.lua   ("Maximum resident set size")
-- The inputs are 12 MiB; one head's L x S float32 scores are 64 MiB.
torch.manual_seed(0)
local B, H, L, E = 1, 4, tonumber(os.getenv('ATTN_L') or 4096), 64
local q = torch.randn(B, H, L, E, { requires_grad = true })
local k = torch.randn(B, H, L, E, { requires_grad = true })
local v = torch.randn(B, H, L, E, { requires_grad = true })
local t0 = os.clock()
local out = nn.functional.scaled_dot_product_attention(q, k, v, { is_causal = true })
out:sum():backward()
print(('attention fwd+bwd B=%d H=%d L=S=%d E=%d: %.2f s cpu, grad norm %.4f'):format(B, H, L, E, os.clock() - t0,
  q.grad:norm():item()))
