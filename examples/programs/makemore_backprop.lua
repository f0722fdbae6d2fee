-- Karpathy's "Building makemore" part 4, "becoming a backprop ninja": the two-layer MLP with
-- BatchNorm, its forward pass broken into small steps, then backpropagated by hand through
-- every step (exercise 1), through cross_entropy (exercise 2) and BatchNorm (exercise 3) in
-- one go, each gradient compared with autograd's by `cmp`; then trained with the
-- hand-written backward pass alone (exercise 4).  A short list of names replaces names.txt;
-- '.' is 1 and the letters 2 to 27.
--   dplua examples/programs/makemore_backprop.lua [steps]
-- Loaded with a table (the spec: dtype, init = safetensors file, batch_ix) it returns its results.
local F = nn.functional
local opts = ...
if type(opts) ~= 'table' then opts = { steps = tonumber(opts) } end
local max_steps = opts.steps or 200
torch.set_default_dtype(opts.dtype or 'float32')

local words = {}
for w in ([[emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily
  elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace chloe
  penelope layla riley zoey nora lily eleanor hannah lillian addison aubrey ellie stella
  natalie zoe leah hazel violet aurora savannah audrey brooklyn bella claire skylar lucy
  paisley everly anna caroline nova genesis emilia kennedy samantha maya willow kinsley
  naomi aaliyah elena sarah ariana allison gabriella alice madelyn cora ruby eva serenity
  autumn adeline hailey gianna valentina isla eliana quinn nevaeh ivy sadie piper lydia
  alexa josephine emery julia delilah arianna vivian kaylee sophie brielle madeline]]):gmatch('%a+') do
  words[#words + 1] = w
end
local chars, seen = {}, {}
for _, ch in ipairs({ 'b', 'd', 'f', 'j', 'k', 'q', 'w', 'x' }) do seen[ch] = true; chars[#chars + 1] = ch end
for _, w in ipairs(words) do
  for ch in w:gmatch('.') do
    if not seen[ch] then seen[ch] = true; chars[#chars + 1] = ch end
  end
end
table.sort(chars)
local stoi, itos = { ['.'] = 1 }, { '.' }
for i, s in ipairs(chars) do stoi[s] = i + 1; itos[i + 1] = s end
local vocab_size = #itos

local block_size = 3
local function build_dataset(ws)
  local X, Y = {}, {}
  for _, w in ipairs(ws) do
    local context = { 1, 1, 1 }
    for ch in (w .. '.'):gmatch('.') do
      local ix = stoi[ch]
      X[#X + 1] = context
      Y[#Y + 1] = ix
      context = { context[2], context[3], ix }
    end
  end
  return torch.tensor(X), torch.tensor(Y)
end
-- the lecture shuffles names.txt with Python's random.seed(42); this list stays in order
local Xtr, Ytr = build_dataset(table.move(words, 1, math.floor(0.8 * #words), 1, {}))

-- utility function we will use later when comparing manual gradients to PyTorch gradients
local cmps = {}
local function cmp(s, dt, t)
  local ex = torch.all(dt:eq(t.grad)):item()
  local app = torch.allclose(dt, t.grad)
  local maxdiff = (dt - t.grad):abs():max():item()
  print(('%-15s | exact: %-5s | approximate: %-5s | maxdiff: %g'):format(s, tostring(ex), tostring(app), maxdiff))
  cmps[#cmps + 1] = { name = s, exact = ex, approximate = app, maxdiff = maxdiff }
end

local n_embd = 10     -- the dimensionality of the character embedding vectors
local n_hidden = 64   -- the number of neurons in the hidden layer of the MLP

local g = torch.Generator():manual_seed(2147483647)   -- for reproducibility
local C = torch.randn({ vocab_size, n_embd }, { generator = g })
-- Layer 1
local W1 = torch.randn({ n_embd * block_size, n_hidden }, { generator = g }) * (5 / 3) / ((n_embd * block_size) ^ 0.5)
local b1 = torch.randn(n_hidden, { generator = g }) * 0.1   -- using b1 just for fun, it's useless because of BN
-- Layer 2
local W2 = torch.randn({ n_hidden, vocab_size }, { generator = g }) * 0.1
local b2 = torch.randn(vocab_size, { generator = g }) * 0.1
-- BatchNorm parameters
local bngain = torch.randn({ 1, n_hidden }, { generator = g }) * 0.1 + 1.0
local bnbias = torch.randn({ 1, n_hidden }, { generator = g }) * 0.1
-- Note: the parameters are initialized in non-standard ways because sometimes initializing
-- with e.g. all zeros could mask an incorrect implementation of the backward pass.
local parameters = { C, W1, b1, W2, b2, bngain, bnbias }
if opts.init then   -- the spec: PyTorch's initial values
  local sd = torch.load(opts.init)
  for i, p in ipairs(parameters) do p:copy_(sd[opts.prefix .. (i - 1)]) end
end
local nparams = 0
for _, p in ipairs(parameters) do nparams = nparams + p:nelement() end
print(nparams)   -- number of parameters in total
for _, p in ipairs(parameters) do p.requires_grad = true end

local batch_size = 32
local n = batch_size   -- a shorter variable also, for convenience
local drawn = 0
local function minibatch()
  local ix = torch.randint(0, Xtr:size(1), { batch_size }, { generator = g }) + 1
  if opts.batch_ix then
    ix = torch.tensor(table.move(opts.batch_ix, drawn + 1, drawn + batch_size, 1, {})) + 1
    drawn = drawn + batch_size
  end
  return Xtr[ix], Ytr[ix]   -- batch X,Y
end
local Xb, Yb = minibatch()

-- forward pass, "chunkated" into smaller steps that are possible to backward one at a time
local emb = C[Xb]   -- embed the characters into vectors
local embcat = emb:view(emb:size(1), -1)   -- concatenate the vectors
-- Linear layer 1
local hprebn = embcat:matmul(W1) + b1   -- hidden layer pre-activation
-- BatchNorm layer
local bnmeani = 1 / n * hprebn:sum(1, { keepdim = true })
local bndiff = hprebn - bnmeani
local bndiff2 = bndiff ^ 2
local bnvar = 1 / (n - 1) * bndiff2:sum(1, { keepdim = true })   -- note: Bessel's correction (dividing by n-1, not n)
local bnvar_inv = (bnvar + 1e-5) ^ -0.5
local bnraw = bndiff * bnvar_inv
local hpreact = bngain * bnraw + bnbias
-- Non-linearity
local h = torch.tanh(hpreact)   -- hidden layer
-- Linear layer 2
local logits = h:matmul(W2) + b2   -- output layer
-- cross entropy loss (same as F.cross_entropy(logits, Yb))
local logit_maxes = logits:max(2, { keepdim = true })
local norm_logits = logits - logit_maxes   -- subtract max for numerical stability
local counts = norm_logits:exp()
local counts_sum = counts:sum(2, { keepdims = true })
local counts_sum_inv = counts_sum ^ -1   -- if I use (1.0 / counts_sum) instead then I can't get backprop to be bit exact...
local probs = counts * counts_sum_inv
local logprobs = probs:log()
local loss = -logprobs[{ torch.arange(1, n + 1), Yb }]:mean()

-- PyTorch backward pass
for _, p in ipairs(parameters) do p.grad = nil end
for _, t in ipairs({ logprobs, probs, counts, counts_sum, counts_sum_inv,   -- afaik there is no cleaner way
                     norm_logits, logit_maxes, logits, h, hpreact, bnraw,
                     bnvar_inv, bnvar, bndiff2, bndiff, hprebn, bnmeani,
                     embcat, emb }) do
  t:retain_grad()
end
loss:backward()
print(loss:item())
local result = { loss = loss:item(), cmps = cmps }

-- Exercise 1: backprop through the whole thing manually, backpropagating through exactly
-- all of the variables as they are defined in the forward pass above, one by one
torch.no_grad(function()
  local dlogprobs = torch.zeros_like(logprobs)
  dlogprobs[{ torch.arange(1, n + 1), Yb }] = -1.0 / n
  local dprobs = (1.0 / probs) * dlogprobs
  local dcounts_sum_inv = (counts * dprobs):sum(2, { keepdim = true })
  local dcounts = counts_sum_inv * dprobs
  local dcounts_sum = (-counts_sum ^ -2) * dcounts_sum_inv
  dcounts = dcounts + torch.ones_like(counts) * dcounts_sum
  local dnorm_logits = counts * dcounts
  local dlogits = dnorm_logits:clone()
  local dlogit_maxes = (-dnorm_logits):sum(2, { keepdim = true })
  local _, max_ix = logits:max(2)
  dlogits = dlogits + F.one_hot(max_ix, { num_classes = logits:size(2) }) * dlogit_maxes
  local dh = dlogits:matmul(W2:t())
  local dW2 = h:t():matmul(dlogits)
  local db2 = dlogits:sum(1)
  local dhpreact = (1.0 - h ^ 2) * dh
  local dbngain = (bnraw * dhpreact):sum(1, { keepdim = true })
  local dbnraw = bngain * dhpreact
  local dbnbias = dhpreact:sum(1, { keepdim = true })
  local dbndiff = bnvar_inv * dbnraw
  local dbnvar_inv = (bndiff * dbnraw):sum(1, { keepdim = true })
  local dbnvar = (-0.5 * (bnvar + 1e-5) ^ -1.5) * dbnvar_inv
  local dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(bndiff2) * dbnvar
  dbndiff = dbndiff + (2 * bndiff) * dbndiff2
  local dhprebn = dbndiff:clone()
  local dbnmeani = (-dbndiff):sum(1)
  dhprebn = dhprebn + 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)
  local dembcat = dhprebn:matmul(W1:t())
  local dW1 = embcat:t():matmul(dhprebn)
  local db1 = dhprebn:sum(1)
  local demb = dembcat:view(emb:size())
  local dC = torch.zeros_like(C)
  for k = 1, Xb:size(1) do
    for j = 1, Xb:size(2) do
      local ix = Xb[{ k, j }]
      dC[ix]:add_(demb[{ k, j }])
    end
  end

  cmp('logprobs', dlogprobs, logprobs)
  cmp('probs', dprobs, probs)
  cmp('counts_sum_inv', dcounts_sum_inv, counts_sum_inv)
  cmp('counts_sum', dcounts_sum, counts_sum)
  cmp('counts', dcounts, counts)
  cmp('norm_logits', dnorm_logits, norm_logits)
  cmp('logit_maxes', dlogit_maxes, logit_maxes)
  cmp('logits', dlogits, logits)
  cmp('h', dh, h)
  cmp('W2', dW2, W2)
  cmp('b2', db2, b2)
  cmp('hpreact', dhpreact, hpreact)
  cmp('bngain', dbngain, bngain)
  cmp('bnbias', dbnbias, bnbias)
  cmp('bnraw', dbnraw, bnraw)
  cmp('bnvar_inv', dbnvar_inv, bnvar_inv)
  cmp('bnvar', dbnvar, bnvar)
  cmp('bndiff2', dbndiff2, bndiff2)
  cmp('bndiff', dbndiff, bndiff)
  cmp('bnmeani', dbnmeani, bnmeani)
  cmp('hprebn', dhprebn, hprebn)
  cmp('embcat', dembcat, embcat)
  cmp('W1', dW1, W1)
  cmp('b1', db1, b1)
  cmp('emb', demb, emb)
  cmp('C', dC, C)
end)

-- Exercise 2: backprop through cross_entropy in one go
local loss_fast = F.cross_entropy(logits, Yb)
print(loss_fast:item(), 'diff:', (loss_fast - loss):item())
result.loss_fast = loss_fast:item()
torch.no_grad(function()
  local dlogits = F.softmax(logits, 2)
  dlogits[{ torch.arange(1, n + 1), Yb }] = dlogits[{ torch.arange(1, n + 1), Yb }] - 1
  dlogits = dlogits / n
  cmp('logits', dlogits, logits)   -- I can only get approximate to be true, my maxdiff is 6e-9
end)

-- Exercise 3: backprop through batchnorm in one go
local hpreact_fast = bngain * (hprebn - hprebn:mean(1, { keepdim = true }))
  / torch.sqrt(hprebn:var(1, { keepdim = true, unbiased = true }) + 1e-5) + bnbias
print('max diff:', (hpreact_fast - hpreact):abs():max():item())
torch.no_grad(function()
  local dhpreact = hpreact.grad
  local dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact:sum(1) - n / (n - 1) * bnraw * (dhpreact * bnraw):sum(1))
  cmp('hprebn', dhprebn, hprebn)   -- I can only get approximate to be true, my maxdiff is 9e-10
end)

-- Exercise 4: putting it all together, training with our own backward pass
local lossi = {}
torch.no_grad(function()
  for _, p in ipairs(parameters) do p.grad = nil end
  for i = 0, max_steps - 1 do
    -- minibatch construct
    Xb, Yb = minibatch()
    -- forward pass
    emb = C[Xb]
    embcat = emb:view(emb:size(1), -1)
    hprebn = embcat:matmul(W1) + b1
    local bnmean = hprebn:mean(1, { keepdim = true })
    bnvar = hprebn:var(1, { keepdim = true, unbiased = true })
    bnvar_inv = (bnvar + 1e-5) ^ -0.5
    bnraw = (hprebn - bnmean) * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = torch.tanh(hpreact)
    logits = h:matmul(W2) + b2
    loss = F.cross_entropy(logits, Yb)
    -- manual backprop
    local dlogits = F.softmax(logits, 2)
    dlogits[{ torch.arange(1, n + 1), Yb }] = dlogits[{ torch.arange(1, n + 1), Yb }] - 1
    dlogits = dlogits / n
    -- 2nd layer backprop
    local dh = dlogits:matmul(W2:t())
    local dW2 = h:t():matmul(dlogits)
    local db2 = dlogits:sum(1)
    -- tanh
    local dhpreact = (1.0 - h ^ 2) * dh
    -- batchnorm backprop
    local dbngain = (bnraw * dhpreact):sum(1, { keepdim = true })
    local dbnbias = dhpreact:sum(1, { keepdim = true })
    local dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact:sum(1) - n / (n - 1) * bnraw * (dhpreact * bnraw):sum(1))
    -- 1st layer
    local dembcat = dhprebn:matmul(W1:t())
    local dW1 = embcat:t():matmul(dhprebn)
    local db1 = dhprebn:sum(1)
    -- embedding
    local demb = dembcat:view(emb:size())
    local dC = torch.zeros_like(C)
    for k = 1, Xb:size(1) do
      for j = 1, Xb:size(2) do
        dC[Xb[{ k, j }]]:add_(demb[{ k, j }])
      end
    end
    local grads = { dC, dW1, db1, dW2, db2, dbngain, dbnbias }
    -- update
    local lr = i < max_steps // 2 and 0.1 or 0.01   -- step learning rate decay
    for j, p in ipairs(parameters) do p.data:add_(-lr * grads[j]) end
    -- track stats
    if i % 10 == 0 then print(('%7d/%7d: %.4f'):format(i, max_steps, loss:item())) end
    lossi[#lossi + 1] = loss:item()
  end
end)
result.losses = lossi
torch.set_default_dtype('float32')
return result
