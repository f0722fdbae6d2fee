-- examples/lstm_lm.lua: pytorch/examples' word language model: an embedding, a 2-layer
-- nn.LSTM, a decoder to the vocabulary (optionally tied to the embedding), trained with
-- truncated backpropagation through time (the hidden state carried over and detached
-- between chunks), gradient clipping and plain SGD with the learning rate divided by 4
-- when the validation loss stops falling; it ends with the test perplexity.
--
--   dplua examples/lstm_lm.lua [--epochs 3] [--device cpu|cuda:0] [--data examples/data/lighthouse.txt]
--     [--emsize 64] [--nhid 64] [--nlayers 2] [--lr 20] [--clip 0.25] [--bptt 20]
--     [--batch-size 10] [--dropout 0.2] [--tied 1] [--seed 1] [--log-interval 2]
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional

local args = { epochs = 3, device = torch.cuda.is_available() and 'cuda:0' or 'cpu',
               data = 'examples/data/lighthouse.txt', emsize = 64, nhid = 64, nlayers = 2, lr = 20,
               clip = 0.25, bptt = 20, ['batch-size'] = 10, dropout = 0.2, tied = 1, seed = 1,
               ['log-interval'] = 2 }
local i = 1
while arg and arg[i] do
  local key = arg[i]:match('^%-%-(.+)$')
  if not key or args[key] == nil or arg[i + 1] == nil then
    error(('usage: dplua examples/lstm_lm.lua [--epochs N] [--device D] ...; got %q'):format(arg[i]), 0)
  end
  local v = arg[i + 1]
  args[key] = type(args[key]) == 'number' and assert(tonumber(v), 'a number after ' .. arg[i]) or v
  i = i + 2
end
torch.manual_seed(args.seed)
local device = torch.device(args.device)

-- ------------------------------------------------------------------ the corpus: words and <eos>
local words, index, ids = {}, {}, {}
for line in io.lines(args.data) do
  for w in (line .. ' <eos>'):gmatch('%S+') do
    if not index[w] then words[#words + 1] = w; index[w] = #words end
    ids[#ids + 1] = index[w]
  end
end
local n = #ids
local cut1, cut2 = math.floor(n * 0.8), math.floor(n * 0.9)
local function part(a, b) return torch.tensor({ table.unpack(ids, a, b) }) end

-- a stream of tokens as [rows, batch] columns, as pytorch/examples' batchify
local function batchify(t, bsz)
  local rows = t:size(1) // bsz
  return t:narrow(1, 1, rows * bsz):view(bsz, rows):t():contiguous():to(device)
end
local eval_bsz = 5
local train = batchify(part(1, cut1), args['batch-size'])
local val = batchify(part(cut1 + 1, cut2), eval_bsz)
local test = batchify(part(cut2 + 1, n), eval_bsz)
local ntokens = #words
print(('%d words, a vocabulary of %d'):format(n, ntokens))

-- ------------------------------------------------------------------ the model
local RNNModel, parent = torch.class('WordLM', 'nn.Module')
function RNNModel:__init(ntoken, ninp, nhid, nlayers, dropout, tie)
  parent.__init(self)
  self.drop = nn.Dropout(dropout)
  self.encoder = nn.Embedding(ntoken, ninp)
  self.rnn = nn.LSTM(ninp, nhid, { num_layers = nlayers, dropout = dropout })
  self.decoder = nn.Linear(nhid, ntoken)
  if tie then
    assert(nhid == ninp, 'tied weights need --nhid equal to --emsize')
    self.decoder.weight = self.encoder.weight
  end
  nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
  nn.init.zeros_(self.decoder.bias)
  if not tie then nn.init.uniform_(self.decoder.weight, -0.1, 0.1) end
  self.nhid, self.nlayers = nhid, nlayers
end
function RNNModel:forward(input, hidden)
  local emb = self.drop(self.encoder(input))
  local output, h = self.rnn(emb, hidden)
  output = self.drop(output)
  return self.decoder(output):view(-1, self.decoder.out_features), h
end
function RNNModel:init_hidden(bsz)
  return { torch.zeros(self.nlayers, bsz, self.nhid, { device = device }),
           torch.zeros(self.nlayers, bsz, self.nhid, { device = device }) }
end

local model = RNNModel(ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied ~= 0):to(device)

-- the hidden state without its history: truncated backpropagation through time
local function repackage(h) return { h[1]:detach(), h[2]:detach() } end

local function get_batch(source, k)
  local len = math.min(args.bptt, source:size(1) - k)
  return source:narrow(1, k, len), source:narrow(1, k + 1, len):reshape(-1)
end

local function evaluate(source)
  model:eval()
  local total, count = 0, 0
  local hidden = model:init_hidden(eval_bsz)
  torch.no_grad(function()
    for k = 1, source:size(1) - 1, args.bptt do
      local data, targets = get_batch(source, k)
      local output
      output, hidden = model(data, hidden)
      total = total + data:size(1) * F.cross_entropy(output, targets):item()
      count = count + data:size(1)
      hidden = repackage(hidden)
    end
  end)
  return total / count
end

local lr, best_val = args.lr, math.huge
local function train_epoch(epoch)
  model:train()
  local total, batch = 0, 0
  local hidden = model:init_hidden(args['batch-size'])
  local start = torch.Timer()
  for k = 1, train:size(1) - 1, args.bptt do
    local data, targets = get_batch(train, k)
    hidden = repackage(hidden)
    model:zero_grad()
    local output
    output, hidden = model(data, hidden)
    local loss = F.cross_entropy(output, targets)
    loss:backward()
    nn.utils.clip_grad_norm_(model:parameters(), args.clip)
    torch.no_grad(function()
      for _, p in ipairs(model:parameters()) do p:add_(p.grad, -lr) end
    end)
    total = total + loss:item()
    batch = batch + 1
    if batch % args['log-interval'] == 0 then
      local cur = total / args['log-interval']
      print(('| epoch %3d | %5d batches | lr %.2f | ms/batch %6.2f | loss %5.2f | ppl %8.2f'):format(
        epoch, batch, lr, start:time().real * 1000 / args['log-interval'], cur, math.exp(cur)))
      total = 0
      start:reset()
    end
  end
end

for epoch = 1, args.epochs do
  local t0 = torch.Timer()
  train_epoch(epoch)
  local v = evaluate(val)
  print(('| end of epoch %3d | time: %5.2fs | valid loss %5.2f | valid ppl %8.2f'):format(epoch,
    t0:time().real, v, math.exp(v)))
  if v < best_val then best_val = v else lr = lr / 4 end
end
local t = evaluate(test)
print(('| End of training | test loss %5.2f | test ppl %8.2f'):format(t, math.exp(t)))
