-- karpathy/nanoGPT: model.py (the GPT: CausalSelfAttention, MLP, Block, weight tying,
-- from_pretrained on a Hugging Face GPT-2 checkpoint, configure_optimizers, generate) and
-- train.py's loop (get_batch, estimate_loss, the cosine learning rate with warmup, gradient
-- accumulation, GradScaler, clipping, checkpoints and resuming), on generated character
-- text instead of shakespeare_char, with a tiny GPT-2 shaped checkpoint
-- (spec/fixtures/gpt2_tiny.safetensors, written by spec/fixtures/make_prog_nanogpt.py).
--   dplua examples/programs/nanogpt.lua [max_iters] [--key=value ...]   (configurator.py's overrides)
-- Loaded with a table of overrides instead of arguments, it returns its losses (the spec).
local F = nn.functional

-------------------------------------------------------------------------------- model.py
local LayerNorm, LNparent = torch.class('nanogpt.LayerNorm', 'nn.Module')
-- LayerNorm but with an optional bias
function LayerNorm:__init(ndim, bias)
  LNparent.__init(self)
  self.weight = nn.Parameter(torch.ones(ndim))
  self.bias = bias and nn.Parameter(torch.zeros(ndim)) or nil
end
function LayerNorm:forward(input)
  return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)
end

local CausalSelfAttention, CSAparent = torch.class('nanogpt.CausalSelfAttention', 'nn.Module')
function CausalSelfAttention:__init(config)
  CSAparent.__init(self)
  assert(config.n_embd % config.n_head == 0)
  -- key, query, value projections for all heads, but in a batch
  self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, { bias = config.bias })
  -- output projection
  self.c_proj = nn.Linear(config.n_embd, config.n_embd, { bias = config.bias })
  -- regularization
  self.attn_dropout = nn.Dropout(config.dropout)
  self.resid_dropout = nn.Dropout(config.dropout)
  self.n_head = config.n_head
  self.n_embd = config.n_embd
  self.dropout = config.dropout
  self.flash = F.scaled_dot_product_attention ~= nil
  if not self.flash then
    print('WARNING: using slow attention.')
    -- causal mask to ensure that attention is only applied to the left in the input sequence
    self:register_buffer('bias', torch.tril(torch.ones(config.block_size, config.block_size))
                                   :view(1, 1, config.block_size, config.block_size))
  end
end
function CausalSelfAttention:forward(x)
  local B, T, C = table.unpack(x:size())   -- batch size, sequence length, n_embd

  -- query, key, values for all heads in batch, and the head moved forward to be the batch dim
  local q, k, v = table.unpack(self.c_attn(x):split(self.n_embd, 3))
  k = k:view(B, T, self.n_head, C // self.n_head):transpose(2, 3)   -- (B, nh, T, hs)
  q = q:view(B, T, self.n_head, C // self.n_head):transpose(2, 3)   -- (B, nh, T, hs)
  v = v:view(B, T, self.n_head, C // self.n_head):transpose(2, 3)   -- (B, nh, T, hs)

  -- causal self-attention: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
  local y
  if self.flash then
    y = F.scaled_dot_product_attention(q, k, v, { attn_mask = nil,
      dropout_p = self.training and self.dropout or 0, is_causal = true })
  else
    local att = q:matmul(k:transpose(-2, -1)) * (1.0 / math.sqrt(k:size(-1)))
    att = att:masked_fill(self.bias[{ {}, {}, { 1, T }, { 1, T } }]:eq(0), -math.huge)
    att = F.softmax(att, -1)
    att = self.attn_dropout(att)
    y = att:matmul(v)   -- (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
  end
  y = y:transpose(2, 3):contiguous():view(B, T, C)   -- re-assemble all head outputs side by side

  -- output projection
  return self.resid_dropout(self.c_proj(y))
end

local MLP, MLPparent = torch.class('nanogpt.MLP', 'nn.Module')
function MLP:__init(config)
  MLPparent.__init(self)
  self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, { bias = config.bias })
  self.gelu = nn.GELU()
  self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, { bias = config.bias })
  self.dropout = nn.Dropout(config.dropout)
end
function MLP:forward(x)
  x = self.c_fc(x)
  x = self.gelu(x)
  x = self.c_proj(x)
  return self.dropout(x)
end

local Block, Bparent = torch.class('nanogpt.Block', 'nn.Module')
function Block:__init(config)
  Bparent.__init(self)
  self.ln_1 = LayerNorm(config.n_embd, config.bias)
  self.attn = CausalSelfAttention(config)
  self.ln_2 = LayerNorm(config.n_embd, config.bias)
  self.mlp = MLP(config)
end
function Block:forward(x)
  x = x + self.attn(self.ln_1(x))
  return x + self.mlp(self.ln_2(x))
end

-- the dataclass GPTConfig: defaults, then the given fields
local function GPTConfig(args)
  local c = { block_size = 1024, vocab_size = 50304, n_layer = 12, n_head = 12, n_embd = 768,
              dropout = 0.0, bias = true }   -- bias: True like GPT-2
  for k, v in pairs(args or {}) do
    assert(c[k] ~= nil, 'GPTConfig: unknown field ' .. tostring(k))
    c[k] = v
  end
  return c
end

local GPT, GPTparent = torch.class('nanogpt.GPT', 'nn.Module')
function GPT:__init(config)
  GPTparent.__init(self)
  assert(config.vocab_size ~= nil)
  assert(config.block_size ~= nil)
  self.config = config

  local h = nn.ModuleList()
  for _ = 1, config.n_layer do h:append(Block(config)) end
  self.transformer = nn.ModuleDict({
    wte = nn.Embedding(config.vocab_size, config.n_embd),
    wpe = nn.Embedding(config.block_size, config.n_embd),
    drop = nn.Dropout(config.dropout),
    h = h,
    ln_f = LayerNorm(config.n_embd, config.bias),
  })
  self.lm_head = nn.Linear(config.n_embd, config.vocab_size, { bias = false })
  self.transformer.wte.weight = self.lm_head.weight   -- weight tying

  -- init all weights
  self:apply(function(m) self:_init_weights(m) end)
  -- apply special scaled init to the residual projections, per GPT-2 paper
  for pn, p in self:named_parameters() do
    if pn:sub(-#'c_proj.weight') == 'c_proj.weight' then
      nn.init.normal_(p, { mean = 0.0, std = 0.02 / math.sqrt(2 * config.n_layer) })
    end
  end

  -- report number of parameters
  print(('number of parameters: %.2fM'):format(self:get_num_params() / 1e6))
end

-- the parameters, less the position embeddings when non_embedding (the token embeddings
-- count: they are the lm_head's weights too)
function GPT:get_num_params(non_embedding)
  if non_embedding == nil then non_embedding = true end
  local n_params = 0
  for _, p in ipairs(self:parameters()) do n_params = n_params + p:numel() end
  if non_embedding then n_params = n_params - self.transformer.wpe.weight:numel() end
  return n_params
end

function GPT:_init_weights(module)
  if torch.isinstance(module, 'nn.Linear') then
    nn.init.normal_(module.weight, { mean = 0.0, std = 0.02 })
    if module.bias ~= nil then nn.init.zeros_(module.bias) end
  elseif torch.isinstance(module, 'nn.Embedding') then
    nn.init.normal_(module.weight, { mean = 0.0, std = 0.02 })
  end
end

function GPT:forward(idx, targets)
  local device = idx.device
  local b, t = table.unpack(idx:size())
  assert(t <= self.config.block_size,
    ('Cannot forward sequence of length %d, block size is only %d'):format(t, self.config.block_size))
  local pos = torch.arange(1, t + 1, { dtype = torch.long, device = device })   -- shape (t); rows count from 1

  -- forward the GPT model itself
  local tok_emb = self.transformer.wte(idx)   -- token embeddings of shape (b, t, n_embd)
  local pos_emb = self.transformer.wpe(pos)   -- position embeddings of shape (t, n_embd)
  local x = self.transformer.drop(tok_emb + pos_emb)
  for _, block in ipairs(self.transformer.h) do x = block(x) end
  x = self.transformer.ln_f(x)

  local logits, loss
  if targets ~= nil then
    logits = self.lm_head(x)
    loss = F.cross_entropy(logits:view(-1, logits:size(-1)), targets:view(-1), { ignore_index = -1 })
  else
    -- inference-time mini-optimization: only forward the lm_head on the very last position
    logits = self.lm_head(x[{ {}, { -1 }, {} }])   -- the range {-1} keeps the time dim
  end
  return logits, loss
end

-- model surgery to decrease the block size (a checkpoint's 1024 to a smaller model's)
function GPT:crop_block_size(block_size)
  assert(block_size <= self.config.block_size)
  self.config.block_size = block_size
  self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[{ { 1, block_size } }])
  for _, block in ipairs(self.transformer.h) do
    if block.attn.bias ~= nil then
      block.attn.bias = block.attn.bias[{ {}, {}, { 1, block_size }, { 1, block_size } }]
    end
  end
end

-- GPT.from_pretrained: the Hugging Face GPT2LMHeadModel state dict, read from a safetensors
-- file (as `transformers` would download it), copied into a nanoGPT model.
function GPT.from_pretrained(model_type, override_args, path)
  local config_args = ({
    ['gpt2']        = { n_layer = 12, n_head = 12, n_embd = 768 },    -- 124M params
    ['gpt2-medium'] = { n_layer = 24, n_head = 16, n_embd = 1024 },   -- 350M params
    ['gpt2-large']  = { n_layer = 36, n_head = 20, n_embd = 1280 },   -- 774M params
    ['gpt2-xl']     = { n_layer = 48, n_head = 25, n_embd = 1600 },   -- 1558M params
    -- the tiny checkpoint of spec/fixtures (same layout, made by make_prog_nanogpt.py)
    ['gpt2-tiny']   = { n_layer = 2, n_head = 2, n_embd = 16, vocab_size = 29, block_size = 16 },
  })[model_type]
  assert(config_args, 'unknown model_type ' .. tostring(model_type))
  override_args = override_args or {}
  -- only dropout can be overridden
  for k in pairs(override_args) do assert(k == 'dropout') end
  print('loading weights from pretrained gpt: ' .. model_type)
  if model_type ~= 'gpt2-tiny' then
    print('forcing vocab_size=50257, block_size=1024, bias=True')
    config_args.vocab_size = 50257   -- always 50257 for GPT model checkpoints
    config_args.block_size = 1024    -- always 1024 for GPT model checkpoints
  end
  config_args.bias = true            -- always True for GPT model checkpoints
  if override_args.dropout ~= nil then
    print(('overriding dropout rate to %s'):format(override_args.dropout))
    config_args.dropout = override_args.dropout
  end
  -- create a from-scratch initialized minGPT model
  local config = GPTConfig(config_args)
  local model = GPT(config)
  local sd = model:state_dict({ to_pytorch = true })   -- PyTorch's keys: transformer.h.0....
  local sd_keys = {}
  for k in pairs(sd) do
    if not k:match('%.attn%.bias$') then sd_keys[#sd_keys + 1] = k end   -- the mask buffer
  end

  -- the huggingface/transformers model's state dict
  local sd_hf = torch.load(path or (model_type .. '.safetensors'))

  -- copy while ensuring all of the parameters are aligned and match in names and shapes
  local sd_keys_hf = {}
  for k in pairs(sd_hf) do
    if not k:match('%.attn%.masked_bias$') and not k:match('%.attn%.bias$') then   -- buffers
      sd_keys_hf[#sd_keys_hf + 1] = k
    end
  end
  table.sort(sd_keys_hf)
  local transposed = { 'attn.c_attn.weight', 'attn.c_proj.weight', 'mlp.c_fc.weight', 'mlp.c_proj.weight' }
  -- the openai checkpoints use a "Conv1D" module, but we only want to use a vanilla Linear:
  -- these weights are transposed when imported
  assert(#sd_keys_hf == #sd_keys, ('mismatched keys: %d != %d'):format(#sd_keys_hf, #sd_keys))
  torch.no_grad(function()
    for _, k in ipairs(sd_keys_hf) do
      local is_conv1d = false
      for _, w in ipairs(transposed) do
        if k:sub(-#w) == w then is_conv1d = true end
      end
      if is_conv1d then
        -- special treatment for the Conv1D weights we need to transpose
        assert(sd_hf[k]:t():size() == sd[k]:size(), k)
        sd[k]:copy_(sd_hf[k]:t())
      else
        -- vanilla copy over the other parameters
        assert(sd_hf[k]:size() == sd[k]:size(), k)
        sd[k]:copy_(sd_hf[k])
      end
    end
  end)
  return model
end

function GPT:configure_optimizers(weight_decay, learning_rate, betas, device_type)
  -- every candidate parameter that requires grad
  local param_dict = {}
  for pn, p in self:named_parameters() do
    if p.requires_grad then param_dict[#param_dict + 1] = { pn, p } end
  end
  -- every 2-D parameter (matmul weights, embeddings) is weight decayed; biases and
  -- layernorms are not
  local decay_params, nodecay_params = {}, {}
  local num_decay_params, num_nodecay_params = 0, 0
  for _, np in ipairs(param_dict) do
    local p = np[2]
    if p:dim() >= 2 then
      decay_params[#decay_params + 1] = p; num_decay_params = num_decay_params + p:numel()
    else
      nodecay_params[#nodecay_params + 1] = p; num_nodecay_params = num_nodecay_params + p:numel()
    end
  end
  local optim_groups = {
    { params = decay_params, weight_decay = weight_decay },
    { params = nodecay_params, weight_decay = 0.0 },
  }
  print(('num decayed parameter tensors: %d, with %d parameters'):format(#decay_params, num_decay_params))
  print(('num non-decayed parameter tensors: %d, with %d parameters'):format(#nodecay_params, num_nodecay_params))
  -- dplua's AdamW on CUDA is always a fused kernel (doc/cuda.md): no `fused` switch to pass
  local optimizer = optim.AdamW(optim_groups, { lr = learning_rate, betas = betas })
  print('using fused AdamW: ' .. tostring(device_type == 'cuda'))
  return optimizer
end

-- model flops utilization in units of the A100's bfloat16 peak (312 TFLOPS)
function GPT:estimate_mfu(fwdbwd_per_iter, dt)
  local N = self:get_num_params()
  local cfg = self.config
  local L, H, Q, T = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, cfg.block_size
  local flops_per_token = 6 * N + 12 * L * H * Q * T
  local flops_per_iter = flops_per_token * T * fwdbwd_per_iter
  return (flops_per_iter * (1.0 / dt)) / 312e12
end

-- complete the sequences idx (b, t) max_new_tokens times, feeding the predictions back
function GPT:generate(idx, max_new_tokens, temperature, top_k)
  temperature = temperature or 1.0
  return torch.no_grad(function()
    for _ = 1, max_new_tokens do
      -- crop the context to at most block_size
      local idx_cond = idx:size(2) <= self.config.block_size and idx
        or idx[{ {}, { -self.config.block_size, -1 } }]
      local logits = self(idx_cond)
      -- the logits at the final step, scaled by the temperature
      logits = logits[{ {}, -1, {} }] / temperature
      if top_k ~= nil then
        local v = torch.topk(logits, math.min(top_k, logits:size(-1)))
        logits[logits:lt(v[{ {}, { -1 } }])] = -math.huge
      end
      local probs = F.softmax(logits, -1)
      local idx_next = torch.multinomial(probs, 1)
      idx = torch.cat({ idx, idx_next }, 2)
    end
    return idx
  end)
end

-------------------------------------------------------------------------------- train.py
local overrides = ...
local config = {
  -- I/O
  out_dir = 'out', eval_interval = 4, log_interval = 1, eval_iters = 2, eval_only = false,
  always_save_checkpoint = true, init_from = 'gpt2-tiny',   -- 'scratch' or 'resume' or 'gpt2*'
  pretrained_path = 'spec/fixtures/gpt2_tiny.safetensors',
  -- data
  dataset = 'generated_char', gradient_accumulation_steps = 2, batch_size = 4, block_size = 8,
  -- model
  n_layer = 2, n_head = 2, n_embd = 16, dropout = 0.0, bias = false,
  -- adamw optimizer
  learning_rate = 1e-2, max_iters = 8, weight_decay = 1e-1, beta1 = 0.9, beta2 = 0.95, grad_clip = 1.0,
  -- learning rate decay settings
  decay_lr = true, warmup_iters = 3, lr_decay_iters = 12, min_lr = 1e-3,
  -- system
  device = 'cpu', dtype = 'float32', compile = false,
  default_dtype = 'float32',   -- the spec compares with PyTorch in float64
  batch_ix = nil,              -- the spec: the offsets PyTorch's torch.randint drew, in order
}
-- configurator.py: `--key=value` overrides (a first bare number is max_iters), or a table
if type(overrides) == 'table' then
  for k, v in pairs(overrides) do config[k] = v end
else
  for _, a in ipairs({ ... }) do
    local key, val = a:match('^%-%-([%w_]+)=(.*)$')
    if key then
      if val == 'true' or val == 'false' then val = val == 'true'
      elseif tonumber(val) then val = tonumber(val) end
      config[key] = val
    elseif tonumber(a) then
      config.max_iters = tonumber(a)
    else
      error('nanogpt.lua: unknown argument ' .. a)
    end
  end
end
local C = config
local config_saved = {}   -- what the checkpoint keeps of the config (its numbers, strings, booleans)
for k, v in pairs(config) do
  if type(v) ~= 'table' then config_saved[k] = v end
end
torch.set_default_dtype(C.default_dtype)

local tokens_per_iter = C.gradient_accumulation_steps * C.batch_size * C.block_size
print(('tokens per iteration will be: %d'):format(tokens_per_iter))
os.execute('mkdir -p ' .. C.out_dir)
torch.manual_seed(1337)
local device_type = C.device:find('cuda') and 'cuda' or 'cpu'
-- autocast: a no-op on the CPU, as nullcontext is in train.py
local ctx = device_type == 'cpu' and function(f) return f() end
  or function(f) return torch.autocast(device_type, { dtype = C.dtype }, f) end

-- data/shakespeare_char/prepare.py, on generated text: characters to integers, 90% / 10%
local function generated_text()
  local words = { 'to', 'be', 'or', 'not', 'that', 'is', 'the', 'question', 'whether', 'tis',
    'nobler', 'in', 'mind', 'suffer', 'slings', 'and', 'arrows', 'of', 'fortune' }
  local out, s = {}, 7
  for i = 0, 399 do
    s = (s * 1103515245 + 12345) % 2147483648
    out[#out + 1] = words[(s >> 16) % #words + 1] .. (i % 9 == 8 and '\n' or ' ')
  end
  return table.concat(out)
end
local text = generated_text()
local chars, seen = {}, {}
for ch in text:gmatch('.') do
  if not seen[ch] then seen[ch] = true; chars[#chars + 1] = ch end
end
table.sort(chars)
local stoi = {}
for i, ch in ipairs(chars) do stoi[ch] = i end   -- token ids count from 1 (embedding rows and classes)
local ids = {}
for ch in text:gmatch('.') do ids[#ids + 1] = stoi[ch] end
local n = math.floor(0.9 * #ids)
local train_data = torch.tensor(ids):narrow(1, 1, n)
local val_data = torch.tensor(ids):narrow(1, n + 1, #ids - n)
local meta_vocab_size = #chars
print(('found vocab_size = %d'):format(meta_vocab_size))

local drawn = 0
local function get_batch(split)
  local data = split == 'train' and train_data or val_data
  local ix = torch.randint(#data - C.block_size, { C.batch_size })
  if C.batch_ix then   -- the spec replays PyTorch's draws
    ix = torch.tensor(table.move(C.batch_ix, drawn + 1, drawn + C.batch_size, 1, {}))
    drawn = drawn + C.batch_size
  end
  local xs, ys = {}, {}
  for _, i in ipairs(ix:tolist()) do
    xs[#xs + 1] = data:narrow(1, i + 1, C.block_size)
    ys[#ys + 1] = data:narrow(1, i + 2, C.block_size)
  end
  return torch.stack(xs):to(C.device), torch.stack(ys):to(C.device)
end

local iter_num, best_val_loss = 0, 1e9
local model_args = { n_layer = C.n_layer, n_head = C.n_head, n_embd = C.n_embd,
                     block_size = C.block_size, bias = C.bias, vocab_size = nil, dropout = C.dropout }
local model, checkpoint
local ckpt_path = C.out_dir .. '/ckpt.safetensors'
if C.init_from == 'scratch' then
  print('Initializing a new model from scratch')
  model_args.vocab_size = meta_vocab_size or 50304
  model = GPT(GPTConfig(model_args))
elseif C.init_from == 'resume' then
  print('Resuming training from ' .. C.out_dir)
  checkpoint = torch.load(ckpt_path, { map_location = C.device })
  -- force these config attributes to be equal otherwise we can't even resume training
  for _, k in ipairs({ 'n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size' }) do
    model_args[k] = checkpoint.model_args[k]
  end
  model = GPT(GPTConfig(model_args))
  local state_dict = checkpoint.model
  -- the prefix torch.compile's wrapper adds in PyTorch (dplua's compile adds none)
  local unwanted_prefix = '_orig_mod.'
  for k, v in pairs(state_dict) do
    if k:sub(1, #unwanted_prefix) == unwanted_prefix then
      state_dict[k:sub(#unwanted_prefix + 1)] = v; state_dict[k] = nil
    end
  end
  model:load_state_dict(state_dict)
  iter_num = checkpoint.iter_num
  best_val_loss = checkpoint.best_val_loss
elseif C.init_from:sub(1, 4) == 'gpt2' then
  print('Initializing from OpenAI GPT-2 weights: ' .. C.init_from)
  model = GPT.from_pretrained(C.init_from, { dropout = C.dropout }, C.pretrained_path)
  for _, k in ipairs({ 'n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size' }) do
    model_args[k] = model.config[k]
  end
end
-- crop down the model block size if desired, using model surgery
if C.block_size < model.config.block_size then
  model:crop_block_size(C.block_size)
  model_args.block_size = C.block_size
end
model:to(C.device)

-- a GradScaler: with enabled=false a no-op
local scaler = torch.cuda.amp.GradScaler({ enabled = C.dtype == 'float16' })
local optimizer = model:configure_optimizers(C.weight_decay, C.learning_rate, { C.beta1, C.beta2 }, device_type)
if C.init_from == 'resume' then optimizer:load_state_dict(checkpoint.optimizer) end
checkpoint = nil

if C.compile then
  print('compiling the model...')
  model = torch.compile(model)
end

-- an estimate of the loss over either split, using many batches
local function estimate_loss()
  return torch.no_grad(function()
    local out = {}
    model:eval()
    for _, split in ipairs({ 'train', 'val' }) do
      local losses = torch.zeros(C.eval_iters)
      for k = 1, C.eval_iters do
        local X, Y = get_batch(split)
        local _, loss = ctx(function() return model(X, Y) end)
        losses[k] = loss:item()
      end
      out[split] = losses:mean()
    end
    model:train()
    return out
  end)
end

-- learning rate decay scheduler (cosine with warmup)
local function get_lr(it)
  -- 1) linear warmup for warmup_iters steps
  if it < C.warmup_iters then return C.learning_rate * (it + 1) / (C.warmup_iters + 1) end
  -- 2) if it > lr_decay_iters, return min learning rate
  if it > C.lr_decay_iters then return C.min_lr end
  -- 3) in between, use cosine decay down to min learning rate
  local decay_ratio = (it - C.warmup_iters) / (C.lr_decay_iters - C.warmup_iters)
  assert(0 <= decay_ratio and decay_ratio <= 1)
  local coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))   -- coeff ranges 0..1
  return C.min_lr + coeff * (C.learning_rate - C.min_lr)
end

-- training loop
local result = { losses = {}, evals = {} }
local X, Y = get_batch('train')   -- fetch the very first batch
local t0 = os.clock()
local local_iter_num, running_mfu = 0, -1.0
local raw_model = model
while true do
  -- the learning rate for this iteration
  local lr = C.decay_lr and get_lr(iter_num) or C.learning_rate
  for _, param_group in ipairs(optimizer.param_groups) do param_group.lr = lr end

  -- evaluate the loss on train/val sets and write checkpoints
  if iter_num % C.eval_interval == 0 then
    local losses = estimate_loss()
    print(('step %d: train loss %.4f, val loss %.4f'):format(iter_num, losses.train:item(), losses.val:item()))
    result.evals[#result.evals + 1] = { iter_num, losses.train:item(), losses.val:item() }
    if losses.val < best_val_loss or C.always_save_checkpoint then
      best_val_loss = losses.val
      if iter_num > 0 then
        local ck = { model = raw_model:state_dict(), optimizer = optimizer:state_dict(),
                     model_args = model_args, iter_num = iter_num, best_val_loss = best_val_loss,
                     config = config_saved }
        print('saving checkpoint to ' .. C.out_dir)
        torch.save(ck, ckpt_path)
      end
    end
  end
  if iter_num == 0 and C.eval_only then break end

  -- forward backward update, with optional gradient accumulation to simulate larger batch size
  local loss
  for _ = 1, C.gradient_accumulation_steps do
    ctx(function()
      local _
      _, loss = model(X, Y)
      loss = loss / C.gradient_accumulation_steps   -- scale the loss to account for gradient accumulation
    end)
    -- immediately async prefetch next batch while model is doing the forward pass
    X, Y = get_batch('train')
    -- backward pass, with gradient scaling if training in fp16
    scaler:scale(loss):backward()
  end
  -- clip the gradient
  if C.grad_clip ~= 0.0 then
    scaler:unscale_(optimizer)
    nn.utils.clip_grad_norm_(model:parameters(), C.grad_clip)
  end
  -- step the optimizer and scaler if training in fp16
  scaler:step(optimizer)
  scaler:update()
  -- flush the gradients as soon as we can, no need for this memory anymore
  optimizer:zero_grad({ set_to_none = true })

  -- timing and logging
  local t1 = os.clock()
  local dt = t1 - t0
  t0 = t1
  local lossf = loss:item() * C.gradient_accumulation_steps
  result.losses[#result.losses + 1] = lossf
  if iter_num % C.log_interval == 0 then
    if local_iter_num >= 5 then   -- let the training loop settle a bit
      local mfu = raw_model:estimate_mfu(C.batch_size * C.gradient_accumulation_steps, dt)
      running_mfu = running_mfu == -1.0 and mfu or 0.9 * running_mfu + 0.1 * mfu
    end
    print(('iter %d: loss %.4f, time %.2fms, mfu %.2f%%'):format(iter_num, lossf, dt * 1000, running_mfu * 100))
  end
  iter_num = iter_num + 1
  local_iter_num = local_iter_num + 1

  -- termination conditions
  if iter_num > C.max_iters then break end
end

-- sample.py, briefly: a few characters from the trained model
local itos = {}
for ch, i in pairs(stoi) do itos[i] = ch end
local sample = raw_model:generate(torch.tensor({ { stoi['\n'] } }), 20, 0.8, 5)
local s = {}
for _, i in ipairs(sample[1]:tolist()) do s[#s + 1] = itos[i] end
print(table.concat(s))
torch.set_default_dtype('float32')
return result
