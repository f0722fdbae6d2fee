-- The PyTorch tutorials' "NLP From Scratch: Translation with a Sequence to Sequence Network
-- and Attention" (intermediate_source/seq2seq_translation_tutorial.py, today's version):
-- an EncoderRNN (embedding, dropout, batch-first GRU), an AttnDecoderRNN with Bahdanau
-- (additive) attention over the encoder's outputs and teacher forcing, NLLLoss and Adam,
-- then greedy decoding of a few sentences. On twelve synthetic French-English pairs of at
-- most five words instead of the Tatoeba download; hidden size 16 instead of 128.
--   dplua examples/programs/seq2seq_translation.lua [epochs [initial.safetensors]]
-- With a second argument the run is spec/fixtures/make_prog_seq2seq_translation.py's, in
-- float64, from its initial weights, with the batches in order and the dropout layers off
-- (dplua's random stream is not PyTorch's).
local F = nn.functional
local n_epochs = tonumber(arg and arg[1]) or 30
local initial = arg and arg[2]
if initial then torch.set_default_dtype('float64') end
torch.manual_seed(0)

-- Indices count from 1 in dplua: SOS is word 1 and EOS word 2 (0 and 1 in the tutorial)
local SOS_token, EOS_token = 1, 2
local MAX_LENGTH = 6

local Lang = {}
Lang.__index = Lang
function Lang.new(name)
  return setmetatable({ name = name, word2index = {}, word2count = {},
    index2word = { [1] = 'SOS', [2] = 'EOS' }, n_words = 2 }, Lang)
end
function Lang:addSentence(sentence)
  for word in sentence:gmatch('[^ ]+') do self:addWord(word) end
end
function Lang:addWord(word)
  if not self.word2index[word] then
    self.n_words = self.n_words + 1
    self.word2index[word] = self.n_words
    self.word2count[word] = 1
    self.index2word[self.n_words] = word
  else
    self.word2count[word] = self.word2count[word] + 1
  end
end

-- the data: subject, verb, (tres / very), adjective, full stop
local function synthetic_pairs(n)
  local fr_s, fr_v = { 'je', 'tu', 'il', 'elle', 'nous', 'vous' }, { 'suis', 'es', 'est', 'est', 'sommes', 'etes' }
  local en_s, en_v = { 'i', 'you', 'he', 'she', 'we', 'you' }, { 'am', 'are', 'is', 'is', 'are', 'are' }
  local fr_a, en_a = { 'grand', 'petit', 'content', 'fatigue', 'pret' }, { 'tall', 'small', 'happy', 'tired', 'ready' }
  local out = {}
  for k = 0, n - 1 do
    local s, a, very = k % 6 + 1, (k * 3) % 5 + 1, k % 4 == 0
    local fr = fr_s[s] .. ' ' .. fr_v[s] .. (very and ' tres ' or ' ') .. fr_a[a] .. ' .'
    local en = en_s[s] .. ' ' .. en_v[s] .. (very and ' very ' or ' ') .. en_a[a] .. ' .'
    out[#out + 1] = { fr, en }
  end
  return out
end

local input_lang, output_lang = Lang.new('fra'), Lang.new('eng')
local lang_pairs = synthetic_pairs(12)
for _, p in ipairs(lang_pairs) do
  input_lang:addSentence(p[1])
  output_lang:addSentence(p[2])
end
print(('Counted words: %s %d, %s %d'):format(input_lang.name, input_lang.n_words, output_lang.name, output_lang.n_words))

-- The Encoder
local EncoderRNN, EncoderRNN_parent = torch.class('EncoderRNN', 'nn.Module')
function EncoderRNN:__init(input_size, hidden_size, dropout_p)
  EncoderRNN_parent.__init(self)
  self.hidden_size = hidden_size
  self.embedding = nn.Embedding(input_size, hidden_size)
  self.gru = nn.GRU(hidden_size, hidden_size, { batch_first = true })
  self.dropout = nn.Dropout(dropout_p or 0.1)
end
function EncoderRNN:forward(input)
  local embedded = self.dropout(self.embedding(input))
  local output, hidden = self.gru(embedded)
  return output, hidden
end

-- The Decoder with Bahdanau attention
local BahdanauAttention, BahdanauAttention_parent = torch.class('BahdanauAttention', 'nn.Module')
function BahdanauAttention:__init(hidden_size)
  BahdanauAttention_parent.__init(self)
  self.Wa = nn.Linear(hidden_size, hidden_size)
  self.Ua = nn.Linear(hidden_size, hidden_size)
  self.Va = nn.Linear(hidden_size, 1)
end
function BahdanauAttention:forward(query, keys)
  local scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
  scores = scores:squeeze(3):unsqueeze(2)
  local weights = F.softmax(scores, -1)
  local context = torch.bmm(weights, keys)
  return context, weights
end

local AttnDecoderRNN, AttnDecoderRNN_parent = torch.class('AttnDecoderRNN', 'nn.Module')
function AttnDecoderRNN:__init(hidden_size, output_size, dropout_p)
  AttnDecoderRNN_parent.__init(self)
  self.embedding = nn.Embedding(output_size, hidden_size)
  self.attention = BahdanauAttention(hidden_size)
  self.gru = nn.GRU(2 * hidden_size, hidden_size, { batch_first = true })
  self.out = nn.Linear(hidden_size, output_size)
  self.dropout = nn.Dropout(dropout_p or 0.1)
end
function AttnDecoderRNN:forward(encoder_outputs, encoder_hidden, target_tensor)
  local batch_size = encoder_outputs:size(1)
  local decoder_input = torch.empty(batch_size, 1, { dtype = 'int64' }):fill_(SOS_token)
  local decoder_hidden = encoder_hidden
  local decoder_outputs = {}
  local attentions = {}
  for i = 1, MAX_LENGTH do
    local decoder_output, attn_weights
    decoder_output, decoder_hidden, attn_weights = self:forward_step(decoder_input, decoder_hidden, encoder_outputs)
    decoder_outputs[#decoder_outputs + 1] = decoder_output
    attentions[#attentions + 1] = attn_weights
    if target_tensor then
      decoder_input = target_tensor[{ {}, i }]:unsqueeze(2)   -- Teacher forcing: Feed the target as the next input
    else
      -- Without teacher forcing: use its own predictions as the next input
      local _, topi = decoder_output:topk(1)
      decoder_input = topi:squeeze(-1):detach()   -- detach from history as input
    end
  end
  decoder_outputs = torch.cat(decoder_outputs, 2)
  decoder_outputs = F.log_softmax(decoder_outputs, -1)
  attentions = torch.cat(attentions, 2)
  return decoder_outputs, decoder_hidden, attentions
end
function AttnDecoderRNN:forward_step(input, hidden, encoder_outputs)
  local embedded = self.dropout(self.embedding(input))
  local query = hidden:permute(2, 1, 3)
  local context, attn_weights = self.attention(query, encoder_outputs)
  local input_gru = torch.cat({ embedded, context }, 3)
  local output
  output, hidden = self.gru(input_gru, hidden)
  output = self.out(output)
  return output, hidden, attn_weights
end

-- Preparing Training Data
local function indexesFromSentence(lang, sentence)
  local ids = {}
  for word in sentence:gmatch('[^ ]+') do ids[#ids + 1] = lang.word2index[word] end
  return ids
end
local function tensorFromSentence(lang, sentence)
  local indexes = indexesFromSentence(lang, sentence)
  indexes[#indexes + 1] = EOS_token
  return torch.tensor(indexes, { dtype = 'int64' }):view(1, -1)
end
local function get_dataloader(batch_size)
  local n = #lang_pairs
  -- np.zeros in the tutorial: its padding is word 0, the SOS token, here word 1
  local input_ids = torch.full({ n, MAX_LENGTH }, SOS_token, { dtype = 'int64' })
  local target_ids = torch.full({ n, MAX_LENGTH }, SOS_token, { dtype = 'int64' })
  for idx, p in ipairs(lang_pairs) do
    local inp_ids = indexesFromSentence(input_lang, p[1])
    local tgt_ids = indexesFromSentence(output_lang, p[2])
    inp_ids[#inp_ids + 1] = EOS_token
    tgt_ids[#tgt_ids + 1] = EOS_token
    input_ids[{ idx, { 1, #inp_ids } }] = torch.tensor(inp_ids)
    target_ids[{ idx, { 1, #tgt_ids } }] = torch.tensor(tgt_ids)
  end
  local train_data = torch.utils.data.TensorDataset(input_ids, target_ids)
  return torch.utils.data.DataLoader(train_data, { batch_size = batch_size, shuffle = not initial })
end

-- Training the Model
local record = { loss = {}, epoch_loss = {}, decoded = {}, attn_sum = {} }
local function train_epoch(dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)
  local total_loss = 0
  for input_tensor, target_tensor in dataloader:iter() do
    encoder_optimizer:zero_grad()
    decoder_optimizer:zero_grad()

    local encoder_outputs, encoder_hidden = encoder(input_tensor)
    local decoder_outputs = decoder(encoder_outputs, encoder_hidden, target_tensor)

    local loss = criterion(
      decoder_outputs:view(-1, decoder_outputs:size(-1)),
      target_tensor:view(-1))
    loss:backward()

    encoder_optimizer:step()
    decoder_optimizer:step()

    total_loss = total_loss + loss:item()
    record.loss[#record.loss + 1] = loss:item()
  end
  return total_loss / #dataloader
end

local function train(train_dataloader, encoder, decoder, epochs, learning_rate, print_every)
  local start = os.clock()
  local print_loss_total = 0   -- Reset every print_every
  local encoder_optimizer = optim.Adam(encoder:parameters(), { lr = learning_rate })
  local decoder_optimizer = optim.Adam(decoder:parameters(), { lr = learning_rate })
  local criterion = nn.NLLLoss()
  for epoch = 1, epochs do
    local loss = train_epoch(train_dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)
    print_loss_total = print_loss_total + loss
    record.epoch_loss[#record.epoch_loss + 1] = loss
    if epoch % print_every == 0 then
      local print_loss_avg = print_loss_total / print_every
      print_loss_total = 0
      print(('%.1fs (%d %d%%) %.4f'):format(os.clock() - start, epoch, math.floor(epoch / epochs * 100), print_loss_avg))
    end
  end
end

-- Evaluation
local function evaluate(encoder, decoder, sentence, lang_in, lang_out)
  return torch.no_grad(function()
    local input_tensor = tensorFromSentence(lang_in, sentence)
    local encoder_outputs, encoder_hidden = encoder(input_tensor)
    local decoder_outputs, _, decoder_attn = decoder(encoder_outputs, encoder_hidden)
    local _, topi = decoder_outputs:topk(1)
    local decoded_ids = topi:squeeze()
    local decoded_words = {}
    for i = 1, decoded_ids:size(1) do
      local idx = decoded_ids[i]   -- an element of a plain tensor is a Lua number (idx.item() in the tutorial)
      record.decoded[#record.decoded + 1] = idx
      if idx == EOS_token then
        decoded_words[#decoded_words + 1] = '<EOS>'
        break
      end
      decoded_words[#decoded_words + 1] = lang_out.index2word[idx]
    end
    return decoded_words, decoder_attn, decoder_outputs
  end)
end

local hidden_size, batch_size = 16, 4
local train_dataloader = get_dataloader(batch_size)
local encoder = EncoderRNN(input_lang.n_words, hidden_size)
local decoder = AttnDecoderRNN(hidden_size, output_lang.n_words)
if initial then
  local sd, parts = torch.load(initial), { encoder = {}, decoder = {} }
  for k, v in pairs(sd) do
    local net, name = k:match('^(%w+)%.(.*)$')
    parts[net][name] = v
  end
  encoder:load_state_dict(parts.encoder)
  decoder:load_state_dict(parts.decoder)
  encoder.dropout:eval()
  decoder.dropout:eval()
end
train(train_dataloader, encoder, decoder, n_epochs, 0.01, initial and 1 or 5)

encoder:eval()
decoder:eval()
for _, k in ipairs { 1, 6 } do
  local output_words, attentions, outputs = evaluate(encoder, decoder, lang_pairs[k][1], input_lang, output_lang)
  print('>', lang_pairs[k][1])
  print('=', lang_pairs[k][2])
  print('<', table.concat(output_words, ' '))
  record.attn_sum[#record.attn_sum + 1] = (attentions * torch.arange(0, attentions:size(-1))):sum():item()
  record.logprob_sum = outputs:sum():item()
end

if initial then
  -- every value the twin recorded, at full precision, for spec/programs2026_spec.lua
  for _, k in ipairs { 'loss', 'epoch_loss', 'decoded', 'attn_sum' } do
    local s = {}
    for i, v in ipairs(record[k]) do s[i] = ('%.17g'):format(v) end
    print(('record %s %s'):format(k, table.concat(s, ' ')))
  end
  print(('record logprob_sum %.17g'):format(record.logprob_sum))
end
