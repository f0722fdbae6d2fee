-- examples/char_transformer.lua: a small GPT-style character model (token and position
-- embeddings, pre-norm causal self-attention blocks, weight tying, AdamW with warm-up and a
-- cosine schedule, gradient clipping) trained on a text file, then sampled with a
-- temperature and top-k through torch.multinomial.  With several GPUs the model runs under
-- nn.DataParallel.
--
--   dplua examples/char_transformer.lua [--steps 300] [--device cpu|cuda:0]
--     [--data examples/data/lighthouse.txt] [--block-size 32] [--batch-size 32]
--     [--n-embd 64] [--n-head 4] [--n-layer 2] [--lr 3e-3] [--warmup 20]
--     [--sample 200] [--temperature 0.8] [--top-k 10] [--seed 1]
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'
local F = nn.functional

local args = { steps = 300, device = torch.cuda.is_available() and 'cuda:0' or 'cpu',
               data = 'examples/data/lighthouse.txt', ['block-size'] = 32, ['batch-size'] = 32,
               ['n-embd'] = 64, ['n-head'] = 4, ['n-layer'] = 2, lr = 3e-3, warmup = 20,
               sample = 200, temperature = 0.8, ['top-k'] = 10, seed = 1, ['eval-every'] = 100 }
local i = 1
while arg and arg[i] do
  local key = arg[i]:match('^%-%-(.+)$')
  if not key or args[key] == nil or arg[i + 1] == nil then
    error(('usage: dplua examples/char_transformer.lua [--steps N] [--device D] ...; got %q'):format(arg[i]), 0)
  end
  local v = arg[i + 1]
  args[key] = type(args[key]) == 'number' and assert(tonumber(v), 'a number after ' .. arg[i]) or v
  i = i + 2
end
torch.manual_seed(args.seed)
local device = torch.device(args.device)

-- ------------------------------------------------------------------ the data
local f = assert(io.open(args.data, 'rb'))
local text = f:read('a')
f:close()
local chars, stoi = {}, {}
for c in text:gmatch('.') do
  if not stoi[c] then stoi[c] = true; chars[#chars + 1] = c end
end
table.sort(chars)
for k, c in ipairs(chars) do stoi[c] = k end   -- token ids count from 1
local ids = {}
for c in text:gmatch('.') do ids[#ids + 1] = stoi[c] end
local data = torch.tensor(ids):to(device)
local n_train = math.floor(0.9 * #ids)
local splits = { train = data:narrow(1, 1, n_train), val = data:narrow(1, n_train + 1, #ids - n_train) }
local V, T, B = #chars, args['block-size'], args['batch-size']
print(('%d characters, %d distinct; %d for training'):format(#ids, V, n_train))

-- B random windows of T characters and the characters that follow them
local offsets = torch.arange(0, T, { device = device }):view(1, T)
local function batch(split)
  local d = splits[split]
  local starts = torch.randint(1, d:size(1) - T + 1, { B, 1 }, { device = device })
  local idx = starts + offsets
  return d[idx], d[idx + 1]
end

-- ------------------------------------------------------------------ the model
local Block, block_parent = torch.class('CharBlock', 'nn.Module')
function Block:__init(C, heads)
  block_parent.__init(self)
  self.ln1 = nn.LayerNorm(C)
  self.attn = nn.MultiheadAttention(C, heads, { batch_first = true })
  self.ln2 = nn.LayerNorm(C)
  self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))
end
function Block:forward(x, mask)
  local h = self.ln1(x)
  x = x + self.attn(h, h, h, { attn_mask = mask, need_weights = false })
  return x + self.mlp(self.ln2(x))
end

local GPT, gpt_parent = torch.class('CharGPT', 'nn.Module')
function GPT:__init(V, T, C, heads, layers)
  gpt_parent.__init(self)
  self.tok = nn.Embedding(V, C)
  self.pos = nn.Embedding(T, C)
  self.blocks = nn.ModuleList()
  for _ = 1, layers do self.blocks:append(Block(C, heads)) end
  self.ln_f = nn.LayerNorm(C)
  self.head = nn.Linear(C, V, { bias = false })
  self.head.weight = self.tok.weight     -- weight tying: one parameter, two uses
  for _, p in ipairs({ self.tok.weight, self.pos.weight }) do nn.init.normal_(p, 0, 0.02) end   -- as GPT-2
end
function GPT:forward(idx)
  local t = idx:size(2)
  local x = self.tok(idx) + self.pos(torch.arange(1, t + 1, { device = idx.device }))
  local mask = torch.ones(t, t, { device = idx.device }):triu(1):bool()   -- true: may not attend
  for _, blk in ipairs(self.blocks) do x = blk(x, mask) end
  return self.head(self.ln_f(x))
end

local model = GPT(V, T, args['n-embd'], args['n-head'], args['n-layer']):to(device)
local n_params = 0
for _, p in ipairs(model:parameters()) do n_params = n_params + p:numel() end
print(('%d parameters on %s'):format(n_params, tostring(device)))
local net = model
if device.type == 'cuda' and torch.cuda.device_count() > 1 then
  net = nn.DataParallel(model)
  print(('nn.DataParallel over %d GPUs'):format(torch.cuda.device_count()))
end

local opt = optim.AdamW(model:parameters(), { lr = args.lr, weight_decay = 0.01 })
local steps, warmup = args.steps, args.warmup
local sched = optim.lr_scheduler.LambdaLR(opt, function(step)
  if step < warmup then return (step + 1) / warmup end
  return 0.5 * (1 + math.cos(math.pi * (step - warmup) / math.max(1, steps - warmup)))
end)

local function loss_of(x, y)
  return F.cross_entropy(net(x):view(-1, V), y:view(-1))
end

local function estimate(split, n)
  model:eval()
  local total = 0
  torch.no_grad(function()
    for _ = 1, n do total = total + loss_of(batch(split)):item() end
  end)
  model:train()
  return total / n
end

-- ------------------------------------------------------------------ training
print(('step 0: train loss %.4f, val loss %.4f'):format(estimate('train', 4), estimate('val', 4)))
for step = 1, steps do
  local x, y = batch('train')
  local loss = loss_of(x, y)
  opt:zero_grad()
  loss:backward()
  nn.utils.clip_grad_norm_(model:parameters(), 1.0)
  opt:step()
  sched:step()
  if step % args['eval-every'] == 0 or step == steps then
    print(('step %d: train loss %.4f, val loss %.4f, lr %.2e'):format(step, loss:item(), estimate('val', 4),
      sched:get_last_lr()[1]))
  end
end

-- ------------------------------------------------------------------ sampling
model:eval()
local out = { '\n' }
local idx = torch.tensor({ { stoi['\n'] or 1 } }, { device = device })
torch.no_grad(function()
  for _ = 1, args.sample do
    local ctx = idx:size(2) > T and idx:narrow(2, idx:size(2) - T + 1, T) or idx
    local logits = model(ctx):select(2, ctx:size(2)) / args.temperature   -- [1, V]
    local k = math.min(args['top-k'], V)
    local top = logits:topk(k, 2)
    logits = logits:masked_fill(logits:lt(top:narrow(2, k, 1)), -math.huge)
    local nxt = torch.multinomial(F.softmax(logits, 2), 1)
    idx = torch.cat({ idx, nxt }, 2)
    out[#out + 1] = chars[nxt:item()]
  end
end)
print('sample:' .. table.concat(out))
