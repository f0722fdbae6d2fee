-- pytorch/examples word_language_model: an LSTM (or Transformer) language model with tied
-- embeddings, batchify / get_batch over a token stream, truncated BPTT with
-- repackage_hidden, gradient clipping and a plain SGD update through p.data.  A small
-- generated corpus replaces Wikitext-2.
--   dplua examples/programs/word_language_model.lua [LSTM|Transformer] [epochs]
local F = nn.functional
local model_type = arg and arg[1] or 'LSTM'
local epochs = tonumber(arg and arg[2]) or 1
local emsize, nhid, nlayers, clip, bptt, dropout = 32, 32, 2, 0.25, 12, 0.2
local lr = model_type == "Transformer" and 5 or 20   -- the README: --lr 20, and --lr 5 for the Transformer
local batch_size, eval_batch_size, log_interval = 8, 4, 10
torch.manual_seed(1111)

-- data.Corpus: a dictionary and the token ids of train / valid / test
local words = { 'the', 'cat', 'dog', 'sat', 'on', 'mat', 'ran', 'to', 'a', 'house', 'big', 'small', 'and' }
local Dictionary = { word2idx = {}, idx2word = {} }
function Dictionary:add_word(word)
  if not self.word2idx[word] then
    self.idx2word[#self.idx2word + 1] = word
    self.word2idx[word] = #self.idx2word
  end
  return self.word2idx[word]
end
local function tokenize(nsentences)
  local ids = {}
  for _ = 1, nsentences do
    local s = { 'the', words[math.random(11, 12)], words[math.random(2, 3)], words[math.random(4, 7)], 'on', 'a',
                words[math.random(6, 6)], '<eos>' }
    for _, w in ipairs(s) do ids[#ids + 1] = Dictionary:add_word(w) end
  end
  return torch.tensor(ids)
end
math.randomseed(1111)
local corpus = { train = tokenize(300), valid = tokenize(40), test = tokenize(40) }

-- Starting from sequential data, batchify arranges the dataset into columns.
local function batchify(data, bsz)
  local nbatch = data:size(1) // bsz
  data = data:narrow(1, 1, nbatch * bsz)
  return data:view(bsz, -1):t():contiguous()
end
local train_data = batchify(corpus.train, batch_size)
local val_data = batchify(corpus.valid, eval_batch_size)
local test_data = batchify(corpus.test, eval_batch_size)
local ntokens = #Dictionary.idx2word

-- model.py: RNNModel
local RNNModel, RNNparent = torch.class('RNNModel', 'nn.Module')
function RNNModel:__init(rnn_type, ntoken, ninp, nhid_, nlayers_, dropout_, tie_weights)
  RNNparent.__init(self)
  self.ntoken = ntoken
  self.drop = nn.Dropout(dropout_)
  self.encoder = nn.Embedding(ntoken, ninp)
  self.rnn = nn[rnn_type](ninp, nhid_, nlayers_, { dropout = dropout_ })
  self.decoder = nn.Linear(nhid_, ntoken)
  if tie_weights then
    assert(nhid_ == ninp, 'When using the tied flag, nhid must be equal to emsize')
    self.decoder.weight = self.encoder.weight
  end
  self:init_weights()
  self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid_, nlayers_
end
function RNNModel:init_weights()
  local initrange = 0.1
  nn.init.uniform_(self.encoder.weight, -initrange, initrange)
  nn.init.zeros_(self.decoder.bias)
  nn.init.uniform_(self.decoder.weight, -initrange, initrange)
end
function RNNModel:forward(input, hidden)
  local emb = self.drop(self.encoder(input))
  local output
  output, hidden = self.rnn(emb, hidden)
  output = self.drop(output)
  local decoded = self.decoder(output)
  decoded = decoded:view(-1, self.ntoken)
  return F.log_softmax(decoded, 2), hidden
end
function RNNModel:init_hidden(bsz)
  local weight = self:parameters()[1]
  if self.rnn_type == 'LSTM' then
    return { weight:new_zeros({ self.nlayers, bsz, self.nhid }), weight:new_zeros({ self.nlayers, bsz, self.nhid }) }
  end
  return weight:new_zeros({ self.nlayers, bsz, self.nhid })
end

-- model.py: PositionalEncoding and TransformerModel
local PositionalEncoding, PEparent = torch.class('PositionalEncoding', 'nn.Module')
function PositionalEncoding:__init(d_model, dropout_, max_len)
  PEparent.__init(self)
  max_len = max_len or 5000
  self.dropout = nn.Dropout(dropout_)
  local pe = torch.zeros(max_len, d_model)
  local position = torch.arange(0, max_len, { dtype = torch.float }):unsqueeze(2)
  local div_term = torch.exp(torch.arange(0, d_model, 2):float() * (-math.log(10000.0) / d_model))
  pe[{ {}, { 1, -1, 2 } }] = torch.sin(position * div_term)
  pe[{ {}, { 2, -1, 2 } }] = torch.cos(position * div_term)
  pe = pe:unsqueeze(1):transpose(1, 2)
  self:register_buffer('pe', pe)
end
function PositionalEncoding:forward(x)
  x = x + self.pe[{ { 1, x:size(1) } }]
  return self.dropout(x)
end

local TransformerModel, TMparent = torch.class('TransformerModel', 'nn.Module')
function TransformerModel:__init(ntoken, ninp, nhead, nhid_, nlayers_, dropout_)
  TMparent.__init(self)
  self.model_type = 'Transformer'
  self.src_mask = nil
  self.pos_encoder = PositionalEncoding(ninp, dropout_)
  local encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, { dim_feedforward = nhid_, dropout = dropout_ })
  self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers_)
  self.encoder = nn.Embedding(ntoken, ninp)
  self.ninp = ninp
  self.decoder = nn.Linear(ninp, ntoken)
  self:init_weights()
end
function TransformerModel:_generate_square_subsequent_mask(sz)
  return torch.log(torch.tril(torch.ones(sz, sz)))
end
function TransformerModel:init_weights()
  local initrange = 0.1
  nn.init.uniform_(self.encoder.weight, -initrange, initrange)
  nn.init.zeros_(self.decoder.bias)
  nn.init.uniform_(self.decoder.weight, -initrange, initrange)
end
function TransformerModel:forward(src, has_mask)
  if has_mask ~= false then
    if self.src_mask == nil or self.src_mask:size(1) ~= #src then
      self.src_mask = self:_generate_square_subsequent_mask(#src):to(src.device)
    end
  else
    self.src_mask = nil
  end
  src = self.encoder(src) * math.sqrt(self.ninp)
  src = self.pos_encoder(src)
  local output = self.transformer_encoder(src, { mask = self.src_mask })
  output = self.decoder(output)
  return F.log_softmax(output, -1)
end

local model
if model_type == 'Transformer' then
  model = TransformerModel(ntokens, emsize, 2, nhid, nlayers, dropout)
else
  model = RNNModel(model_type, ntokens, emsize, nhid, nlayers, dropout, true)
end
local criterion = nn.NLLLoss()

-- Wraps hidden states in new Tensors, to detach them from their history.
local function repackage_hidden(h)
  if torch.is_tensor(h) then return h:detach() end
  local out = {}
  for i, v in ipairs(h) do out[i] = repackage_hidden(v) end
  return out
end

local function get_batch(source, i)
  local seq_len = math.min(bptt, source:size(1) - i)
  local data = source:narrow(1, i, seq_len)
  local target = source:narrow(1, i + 1, seq_len):reshape(-1)
  return data, target
end

local function evaluate(data_source)
  model:eval()
  local total_loss = 0
  local hidden
  if model_type ~= 'Transformer' then hidden = model:init_hidden(eval_batch_size) end
  torch.no_grad(function()
    for i = 1, data_source:size(1) - 1, bptt do
      local data, targets = get_batch(data_source, i)
      local output
      if model_type == 'Transformer' then
        output = model(data)
        output = output:view(-1, ntokens)
      else
        output, hidden = model(data, hidden)
        hidden = repackage_hidden(hidden)
      end
      total_loss = total_loss + #data * criterion(output, targets):item()
    end
  end)
  return total_loss / (data_source:size(1) - 1)
end

local function train(epoch)
  model:train()
  local total_loss, start_time = 0, os.clock()
  local hidden
  if model_type ~= 'Transformer' then hidden = model:init_hidden(batch_size) end
  local batch = 0
  for i = 1, train_data:size(1) - 1, bptt do
    local data, targets = get_batch(train_data, i)
    model:zero_grad()
    local output
    if model_type == 'Transformer' then
      output = model(data)
      output = output:view(-1, ntokens)
    else
      hidden = repackage_hidden(hidden)
      output, hidden = model(data, hidden)
    end
    local loss = criterion(output, targets)
    loss:backward()
    -- `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
    nn.utils.clip_grad_norm_(model:parameters(), clip)
    for _, p in ipairs(model:parameters()) do
      p.data:add_(p.grad, { alpha = -lr })
    end
    total_loss = total_loss + loss:item()
    batch = batch + 1
    if batch % log_interval == 0 then
      local cur_loss = total_loss / log_interval
      local elapsed = os.clock() - start_time
      print(('| epoch %3d | %5d/%5d batches | lr %02.2f | ms/batch %5.2f | loss %5.2f | ppl %8.2f')
        :format(epoch, batch, train_data:size(1) // bptt, lr, elapsed * 1000 / log_interval, cur_loss, math.exp(cur_loss)))
      total_loss, start_time = 0, os.clock()
    end
  end
end

local best_val_loss
for epoch = 1, epochs do
  train(epoch)
  local val_loss = evaluate(val_data)
  print(string.rep('-', 89))
  print(('| end of epoch %3d | valid loss %5.2f | valid ppl %8.2f'):format(epoch, val_loss, math.exp(val_loss)))
  print(string.rep('-', 89))
  if not best_val_loss or val_loss < best_val_loss then
    best_val_loss = val_loss
  else
    lr = lr / 4.0
  end
end
local test_loss = evaluate(test_data)
print(string.rep('=', 89))
print(('| End of training | test loss %5.2f | test ppl %8.2f'):format(test_loss, math.exp(test_loss)))
print(string.rep('=', 89))
