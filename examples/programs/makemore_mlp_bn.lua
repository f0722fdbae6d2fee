-- Karpathy's "Building makemore" part 3 (activations, gradients, BatchNorm): the MLP
-- "PyTorch-ified" into Linear, BatchNorm1d and Tanh classes of our own, six Linear layers
-- deep, trained by hand (p.data += -lr * p.grad), then the lecture's diagnostics: the
-- mean, std, saturation and histogram (torch.histogram, density) of every Tanh layer's
-- output and of its gradient (retain_grad), the weights' gradient to data ratios, the
-- update to data ratios (ud), and the loss of each split with BatchNorm's running statistics.
-- A short list of names replaces names.txt; '.' is 1 and the letters 2 to 27.
--   dplua examples/programs/makemore_mlp_bn.lua [steps]
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
local block_size = 3   -- context length: how many characters do we take to predict the next one?
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

local g = torch.Generator():manual_seed(2147483647)   -- for reproducibility

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
  self.weight = torch.randn({ fan_in, fan_out }, { generator = g }) / fan_in ^ 0.5
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
    xmean = x:mean(1, { keepdim = true })   -- batch mean
    xvar = x:var(1, { keepdim = true })     -- batch variance
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

local n_embd = 10     -- the dimensionality of the character embedding vectors
local n_hidden = 32   -- the number of neurons in the hidden layers of the MLP (100 in the lecture)

local C = torch.randn({ vocab_size, n_embd }, { generator = g })
local layers = { Linear(n_embd * block_size, n_hidden, false), BatchNorm1d(n_hidden), Tanh() }
for _ = 1, 4 do
  for _, l in ipairs({ Linear(n_hidden, n_hidden, false), BatchNorm1d(n_hidden), Tanh() }) do layers[#layers + 1] = l end
end
layers[#layers + 1] = Linear(n_hidden, vocab_size, false)
layers[#layers + 1] = BatchNorm1d(vocab_size)

torch.no_grad(function()
  -- last layer: make less confident
  layers[#layers].gamma:mul_(0.1)
  -- all other layers: apply gain
  for i = 1, #layers - 1 do
    if getmetatable(layers[i]) == Linear then layers[i].weight:mul_(5 / 3) end
  end
end)

local parameters = { C }
for _, layer in ipairs(layers) do
  for _, p in ipairs(layer:parameters()) do parameters[#parameters + 1] = p end
end
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
local lossi, ud, ixs = {}, {}, {}
for i = 0, max_steps - 1 do
  -- minibatch construct
  local ix = torch.randint(0, Xtr:size(1), { batch_size }, { generator = g }) + 1
  if opts.batch_ix then ix = torch.tensor(table.move(opts.batch_ix, i * batch_size + 1, (i + 1) * batch_size, 1, {})) + 1 end
  local Xb, Yb = Xtr[ix], Ytr[ix]   -- batch X,Y

  -- forward pass
  local emb = C[Xb]   -- embed the characters into vectors
  local x = emb:view(emb:size(1), -1)   -- concatenate the vectors
  for _, layer in ipairs(layers) do x = layer(x) end
  local loss = F.cross_entropy(x, Yb)   -- loss function

  -- backward pass
  for _, layer in ipairs(layers) do layer.out:retain_grad() end   -- AFTER_DEBUG: would take out retain_grad
  for _, p in ipairs(parameters) do p.grad = nil end
  loss:backward()

  -- update
  local lr = i < max_steps // 2 and 0.1 or 0.01   -- step learning rate decay
  for _, p in ipairs(parameters) do p.data:add_(-lr * p.grad) end

  -- track stats
  if i % 10 == 0 then print(('%7d/%7d: %.4f'):format(i, max_steps, loss:item())) end
  lossi[#lossi + 1] = loss:item()
  torch.no_grad(function()
    local r = {}
    for _, p in ipairs(parameters) do r[#r + 1] = ((lr * p.grad):std() / p.data:std()):log10():item() end
    ud[#ud + 1] = r
  end)
end

-- visualize histograms: the forward pass activations, then the gradients, of the Tanh layers
local acts, grads = {}, {}
for i = 1, #layers - 1 do
  local layer = layers[i]
  if getmetatable(layer) == Tanh then
    local t = layer.out
    local saturated = (t:abs():gt(0.97):float():mean() * 100):item()
    print(('layer %d (%10s): mean %+.2f, std %.2f, saturated: %.2f%%'):format(i, 'Tanh', t:mean():item(), t:std():item(), saturated))
    local hy, hx = torch.histogram(t, { density = true })
    acts[#acts + 1] = { mean = t:mean():item(), std = t:std():item(), saturated = saturated, hy = hy, hx = hx }
    t = layer.out.grad
    print(('layer %d (%10s): mean %+f, std %e'):format(i, 'Tanh', t:mean():item(), t:std():item()))
    hy, hx = torch.histogram(t, { density = true })
    grads[#grads + 1] = { mean = t:mean():item(), std = t:std():item(), hy = hy, hx = hx }
  end
end
-- the weights' gradient distributions
local wgrads = {}
for i, p in ipairs(parameters) do
  local t = p.grad
  if p:dim() == 2 then
    print(('weight %10s | mean %+f | std %e | grad:data ratio %e'):format(tostring(p:size()), t:mean():item(),
      t:std():item(), (t:std() / p:std()):item()))
    wgrads[#wgrads + 1] = { mean = t:mean():item(), std = t:std():item(), ratio = (t:std() / p:std()):item() }
  end
end

-- put the layers into eval mode (needed for batchnorm especially)
for _, layer in ipairs(layers) do layer.training = false end

-- the loss on a split, without gradients
local function split_loss(split)
  return torch.no_grad(function()
    local x, y = table.unpack(({ train = { Xtr, Ytr }, val = { Xdev, Ydev } })[split])
    local emb = C[x]   -- (N, block_size, n_embd)
    x = emb:view(emb:size(1), -1)   -- concat into (N, block_size * n_embd)
    for _, layer in ipairs(layers) do x = layer(x) end
    local loss = F.cross_entropy(x, y)
    print(split, loss:item())
    return loss:item()
  end)
end
local result = { losses = lossi, ud = ud, acts = acts, grads = grads, wgrads = wgrads,
                 train = split_loss('train'), val = split_loss('val') }

-- sample from the model
local g2 = torch.Generator():manual_seed(2147483647 + 10)
for _ = 1, 5 do
  local out, context = {}, { 1, 1, 1 }   -- initialize with all ...
  while true do
    torch.no_grad(function()
      local emb = C[torch.tensor({ context })]   -- (1, block_size, n_embd)
      local x = emb:view(emb:size(1), -1)
      for _, layer in ipairs(layers) do x = layer(x) end
      local probs = F.softmax(x, 2)
      local ix = torch.multinomial(probs, 1, { generator = g2 }):item()
      context = { context[2], context[3], ix }
      out[#out + 1] = itos[ix]
    end)
    if context[3] == 1 or #out > 30 then break end
  end
  print(table.concat(out))
end
torch.set_default_dtype('float32')
return result
