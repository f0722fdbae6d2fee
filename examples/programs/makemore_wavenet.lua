-- Karpathy's "Building makemore" part 5, "building a WaveNet": the layers of part 3 plus
-- Embedding, FlattenConsecutive and Sequential, all classes of our own in torch.nn's
-- names, stacked into a tree that fuses two characters (then two groups) at a time, with a
-- BatchNorm1d that normalizes over the batch and time dims of a 3-D input; trained by hand.
-- A short list of names replaces names.txt; '.' is 1 and the letters 2 to 27.
--   dplua examples/programs/makemore_wavenet.lua [steps]
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

-- build the vocabulary of characters and mappings to/from integers
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

-- build the dataset
local block_size = 8   -- context length: how many characters do we take to predict the next one?
local function build_dataset(ws)
  local X, Y = {}, {}
  for _, w in ipairs(ws) do
    local context = {}
    for _ = 1, block_size do context[#context + 1] = 1 end
    for ch in (w .. '.'):gmatch('.') do
      local ix = stoi[ch]
      X[#X + 1] = context
      Y[#Y + 1] = ix
      context = { table.unpack(context, 2) }   -- crop and append
      context[#context + 1] = ix
    end
  end
  local Xt, Yt = torch.tensor(X), torch.tensor(Y)
  print(Xt:size(), Yt:size())
  return Xt, Yt
end
-- the lecture shuffles names.txt with Python's random.seed(42); this list stays in order
local n1, n2 = math.floor(0.8 * #words), math.floor(0.9 * #words)
local Xtr, Ytr = build_dataset(table.move(words, 1, n1, 1, {}))
local Xdev, Ydev = build_dataset(table.move(words, n1 + 1, n2, 1, {}))
local Xte, Yte = build_dataset(table.move(words, n2 + 1, #words, 1, {}))

torch.manual_seed(42)   -- seed rng for reproducibility

-- the layers, as the lecture writes them (torch.nn's names, without nn.Module)
local function class()
  local c = {}
  c.__index = c
  setmetatable(c, { __call = function(cls, ...)
    local o = setmetatable({}, cls)
    o:__init(...)
    return o
  end })
  c.__call = function(self, ...) return self:forward(...) end
  return c
end

local Linear = class()
function Linear:__init(fan_in, fan_out, bias)
  self.weight = torch.randn({ fan_in, fan_out }) / fan_in ^ 0.5   -- note: kaiming init
  if bias ~= false then self.bias = torch.zeros(fan_out) end
end
function Linear:forward(x)
  self.out = x:matmul(self.weight)
  if self.bias ~= nil then self.out:add_(self.bias) end
  return self.out
end
function Linear:parameters()
  return self.bias ~= nil and { self.weight, self.bias } or { self.weight }
end

local BatchNorm1d = class()
function BatchNorm1d:__init(dim, eps, momentum)
  self.eps = eps or 1e-5
  self.momentum = momentum or 0.1
  self.training = true
  -- parameters (trained with backprop)
  self.gamma = torch.ones(dim)
  self.beta = torch.zeros(dim)
  -- buffers (trained with a running 'momentum update')
  self.running_mean = torch.zeros(dim)
  self.running_var = torch.ones(dim)
end
function BatchNorm1d:forward(x)
  local xmean, xvar
  if self.training then
    local dim = x:dim() == 2 and 1 or { 1, 2 }   -- (B, C), or (B, T, C): over batch and time
    xmean = x:mean(dim, { keepdim = true })   -- batch mean
    xvar = x:var(dim, { keepdim = true })     -- batch variance
  else
    xmean = self.running_mean
    xvar = self.running_var
  end
  local xhat = (x - xmean) / torch.sqrt(xvar + self.eps)   -- normalize to unit variance
  self.out = self.gamma * xhat + self.beta
  -- update the buffers
  if self.training then
    torch.no_grad(function()
      self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
      self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
    end)
  end
  return self.out
end
function BatchNorm1d:parameters() return { self.gamma, self.beta } end

local Tanh = class()
function Tanh:__init() end
function Tanh:forward(x)
  self.out = torch.tanh(x)
  return self.out
end
function Tanh:parameters() return {} end

local Embedding = class()
function Embedding:__init(num_embeddings, embedding_dim)
  self.weight = torch.randn({ num_embeddings, embedding_dim })
end
function Embedding:forward(IX)
  self.out = self.weight[IX]
  return self.out
end
function Embedding:parameters() return { self.weight } end

local FlattenConsecutive = class()
function FlattenConsecutive:__init(n) self.n = n end
function FlattenConsecutive:forward(x)
  local B, T, C = table.unpack(x:size())
  x = x:view(B, T // self.n, C * self.n)
  if x:size(2) == 1 then x = x:squeeze(2) end
  self.out = x
  return self.out
end
function FlattenConsecutive:parameters() return {} end

local Sequential = class()
function Sequential:__init(layers) self.layers = layers end
function Sequential:forward(x)
  for _, layer in ipairs(self.layers) do x = layer(x) end
  self.out = x
  return self.out
end
function Sequential:parameters()
  -- get parameters of all layers and stretch them out into one list
  local ps = {}
  for _, layer in ipairs(self.layers) do
    for _, p in ipairs(layer:parameters()) do ps[#ps + 1] = p end
  end
  return ps
end

-- hierarchical network
local n_embd = 12     -- the dimensionality of the character embedding vectors (24 in the lecture)
local n_hidden = 32   -- the number of neurons in the hidden layer of the MLP (128 in the lecture)
local model = Sequential({
  Embedding(vocab_size, n_embd),
  FlattenConsecutive(2), Linear(n_embd * 2, n_hidden, false), BatchNorm1d(n_hidden), Tanh(),
  FlattenConsecutive(2), Linear(n_hidden * 2, n_hidden, false), BatchNorm1d(n_hidden), Tanh(),
  FlattenConsecutive(2), Linear(n_hidden * 2, n_hidden, false), BatchNorm1d(n_hidden), Tanh(),
  Linear(n_hidden, vocab_size),
})

-- parameter init
torch.no_grad(function()
  model.layers[#model.layers].weight:mul_(0.1)   -- last layer make less confident
end)

local parameters = model:parameters()
if opts.init then   -- the spec: PyTorch's initial values
  local sd = torch.load(opts.init)
  for i, p in ipairs(parameters) do p:copy_(sd[opts.prefix .. (i - 1)]) end
end
local nparams = 0
for _, p in ipairs(parameters) do nparams = nparams + p:nelement() end
print(nparams)   -- number of parameters in total
for _, p in ipairs(parameters) do p.requires_grad = true end

-- same optimization as last time
local batch_size = 32
local lossi = {}
for i = 0, max_steps - 1 do
  -- minibatch construct
  local ix = torch.randint(0, Xtr:size(1), { batch_size }) + 1
  if opts.batch_ix then ix = torch.tensor(table.move(opts.batch_ix, i * batch_size + 1, (i + 1) * batch_size, 1, {})) + 1 end
  local Xb, Yb = Xtr[ix], Ytr[ix]   -- batch X,Y

  -- forward pass
  local logits = model(Xb)
  local loss = F.cross_entropy(logits, Yb)   -- loss function

  -- backward pass
  for _, p in ipairs(parameters) do p.grad = nil end
  loss:backward()

  -- update: simple SGD
  local lr = i < max_steps // 2 and 0.1 or 0.01   -- step learning rate decay
  for _, p in ipairs(parameters) do p.data:add_(-lr * p.grad) end

  -- track stats
  if i % 10 == 0 then print(('%7d/%7d: %.4f'):format(i, max_steps, loss:item())) end
  lossi[#lossi + 1] = loss:item()
end

-- put layers into eval mode (needed for batchnorm especially)
for _, layer in ipairs(model.layers) do layer.training = false end

-- evaluate the loss
local function split_loss(split)
  return torch.no_grad(function()
    local x, y = table.unpack(({ train = { Xtr, Ytr }, val = { Xdev, Ydev }, test = { Xte, Yte } })[split])
    local logits = model(x)
    local loss = F.cross_entropy(logits, y)
    print(split, loss:item())
    return loss:item()
  end)
end
local result = { losses = lossi, train = split_loss('train'), val = split_loss('val') }

-- sample from the model
for _ = 1, 5 do
  local out, context = {}, {}
  for _ = 1, block_size do context[#context + 1] = 1 end   -- initialize with all ...
  while true do
    torch.no_grad(function()
      -- forward pass the neural net
      local logits = model(torch.tensor({ context }))
      local probs = F.softmax(logits, 2)
      -- sample from the distribution
      local ix = torch.multinomial(probs, 1):item()
      -- shift the context window and track the samples
      context = { table.unpack(context, 2) }
      context[#context + 1] = ix
      out[#out + 1] = itos[ix]
    end)
    -- if we sample the special '.' token, break
    if context[#context] == 1 or #out > 30 then break end
  end
  print(table.concat(out))   -- decode and print the generated word
end
torch.set_default_dtype('float32')
return result
