-- ddp.lua: the cost of nn.DistributedDataParallel per training step.  Every rank times the
-- same step twice, at the same per-rank batch and with the same load on the machine: a
-- plain model (what one process alone would run), then the model wrapped in DDP, whose
-- backward also averages the gradients over the ranks.  Prints both times and the
-- overhead of DDP (the all-reduce of ~6 MB of gradients not hidden behind backward).
--   mpirun --allow-run-as-root --oversubscribe -np 2 dplua bench/ddp.lua
-- Sizes: BENCH_DDP_BATCH (default 64 rows per rank), BENCH_DDP_STEPS (default 30).
local dist = require 'torch.distributed'
dist.init_process_group { backend = 'mpi' }
torch.set_num_threads(tonumber(os.getenv('BENCH_THREADS') or '1'))
local rank, world = dist.get_rank(), dist.get_world_size()
local B = tonumber(os.getenv('BENCH_DDP_BATCH') or '64')
local steps = tonumber(os.getenv('BENCH_DDP_STEPS') or '30')

local function model()
  torch.manual_seed(1)
  return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                       nn.Linear(1024, 10))
end

torch.manual_seed(2 + rank)
local x, y = torch.randn(B, 512), torch.randint(1, 11, { B })
local crit = nn.CrossEntropyLoss()

-- Median seconds per step over `steps` steps (after 3 warm-up steps), the slowest rank's.
local function time_steps(m)
  local opt = optim.SGD(m:parameters(), { lr = 0.01 })
  local function step()
    opt:zero_grad()
    crit(m(x), y):backward()
    opt:step()
  end
  for _ = 1, 3 do step() end
  local samples = {}
  local dt = torch.zeros(1, { dtype = 'float64' })
  for s = 1, steps do
    dist.barrier()
    local timer = torch.Timer()
    step()
    dt[1] = timer:time().real
    dist.all_reduce(dt, 'max')
    samples[s] = dt[1]
  end
  table.sort(samples)
  return samples[(steps + 1) // 2]
end

local plain = time_steps(model())
local net = model()
local ddp = nn.DistributedDataParallel(net)
local with_ddp = time_steps(ddp)
local nparams = 0
for _, p in ipairs(net:parameters()) do nparams = nparams + p:numel() end
if rank == 0 then
  print(('model: %d parameters (%.1f MB of gradients), batch %d per rank, %d ranks, %d thread(s) each')
    :format(nparams, nparams * 4 / 2^20, B, world, torch.get_num_threads()))
  print(('BENCH ddp.step_plain_b%d %.6g s'):format(B, plain))
  print(('BENCH ddp.step_ddp%d_b%d %.6g s'):format(world, B, with_ddp))
  print(('DDP overhead per step: %.3g ms (%.1f%%); buckets: %d; all-reduces started during backward: %d of %d')
    :format((with_ddp - plain) * 1e3, (with_ddp / plain - 1) * 100, #ddp:buckets(),
            ddp:reducer_stats().early, ddp:reducer_stats().allreduces))
end
dist.destroy_process_group()
