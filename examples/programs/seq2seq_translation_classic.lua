-- The PyTorch tutorials' seq2seq translation with attention as it was written until 2023
-- (intermediate_source/seq2seq_translation_tutorial.py, one sentence at a time): the
-- EncoderRNN stepped word by word, its outputs copied into encoder_outputs =
-- torch.zeros(max_length, hidden_size), the AttnDecoderRNN whose attention weights come
-- from a Linear over the embedded input and the hidden state, teacher forcing at random,
-- NLLLoss summed over the target, SGD, and greedy evaluate. On twelve synthetic
-- French-English pairs (those of seq2seq_translation.lua); hidden size 16 instead of 256.
--   dplua examples/programs/seq2seq_translation_classic.lua [n_iters [initial.safetensors]]
-- With a second argument the run is spec/fixtures/make_prog_seq2seq_translation_classic.py's,
-- in float64, from its initial weights: the pairs in order, teacher forcing at the odd
-- iterations, dropout off (dplua's random stream is not PyTorch's).
local F = nn.functional
local n_iters = tonumber(arg and arg[1]) or 600
local initial = arg and arg[2]
if initial then torch.set_default_dtype('float64') end
torch.manual_seed(1)
math.randomseed(1)

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
function EncoderRNN:__init(input_size, hidden_size)
  EncoderRNN_parent.__init(self)
  self.hidden_size = hidden_size
  self.embedding = nn.Embedding(input_size, hidden_size)
  self.gru = nn.GRU(hidden_size, hidden_size)
end
function EncoderRNN:forward(input, hidden)
  local embedded = self.embedding(input):view(1, 1, -1)
  local output = embedded
  output, hidden = self.gru(output, hidden)
  return output, hidden
end
function EncoderRNN:initHidden()
  return torch.zeros(1, 1, self.hidden_size)
end

-- Attention Decoder
local AttnDecoderRNN, AttnDecoderRNN_parent = torch.class('AttnDecoderRNN', 'nn.Module')
function AttnDecoderRNN:__init(hidden_size, output_size, dropout_p, max_length)
  AttnDecoderRNN_parent.__init(self)
  self.hidden_size = hidden_size
  self.output_size = output_size
  self.dropout_p = dropout_p or 0.1
  self.max_length = max_length or MAX_LENGTH

  self.embedding = nn.Embedding(self.output_size, self.hidden_size)
  self.attn = nn.Linear(self.hidden_size * 2, self.max_length)
  self.attn_combine = nn.Linear(self.hidden_size * 2, self.hidden_size)
  self.dropout = nn.Dropout(self.dropout_p)
  self.gru = nn.GRU(self.hidden_size, self.hidden_size)
  self.out = nn.Linear(self.hidden_size, self.output_size)
end
function AttnDecoderRNN:forward(input, hidden, encoder_outputs)
  local embedded = self.embedding(input):view(1, 1, -1)
  embedded = self.dropout(embedded)

  local attn_weights = F.softmax(
    self.attn(torch.cat({ embedded[1], hidden[1] }, 2)), 2)
  local attn_applied = torch.bmm(attn_weights:unsqueeze(1),
    encoder_outputs:unsqueeze(1))

  local output = torch.cat({ embedded[1], attn_applied[1] }, 2)
  output = self.attn_combine(output):unsqueeze(1)

  output = F.relu(output)
  output, hidden = self.gru(output, hidden)

  output = F.log_softmax(self.out(output[1]), 2)
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
  return torch.tensor(indexes, { dtype = 'int64' }):view(-1, 1)
end
local function tensorsFromPair(pair)
  return tensorFromSentence(input_lang, pair[1]), tensorFromSentence(output_lang, pair[2])
end

-- Training the Model
local teacher_forcing_ratio = 0.5
local function train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion,
                     use_teacher_forcing, max_length)
  max_length = max_length or MAX_LENGTH
  local encoder_hidden = encoder:initHidden()

  encoder_optimizer:zero_grad()
  decoder_optimizer:zero_grad()

  local input_length = input_tensor:size(1)
  local target_length = target_tensor:size(1)

  local encoder_outputs = torch.zeros(max_length, encoder.hidden_size)

  local loss = 0

  for ei = 1, input_length do
    local encoder_output
    encoder_output, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
    encoder_outputs[ei] = encoder_output[{ 1, 1 }]
  end

  local decoder_input = torch.tensor({ { SOS_token } })

  local decoder_hidden = encoder_hidden

  if use_teacher_forcing then
    -- Teacher forcing: Feed the target as the next input
    for di = 1, target_length do
      local decoder_output
      decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
      loss = loss + criterion(decoder_output, target_tensor[di])
      decoder_input = target_tensor[di]   -- Teacher forcing
    end
  else
    -- Without teacher forcing: use its own predictions as the next input
    for di = 1, target_length do
      local decoder_output
      decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
      local _, topi = decoder_output:topk(1)
      decoder_input = topi:squeeze():detach()   -- detach from history as input

      loss = loss + criterion(decoder_output, target_tensor[di])
      if decoder_input:item() == EOS_token then break end
    end
  end

  loss:backward()

  encoder_optimizer:step()
  decoder_optimizer:step()

  return loss:item() / target_length
end

local record = { loss = {} }
local function trainIters(encoder, decoder, iters, print_every, learning_rate)
  local start = os.clock()
  local print_loss_total = 0   -- Reset every print_every

  local encoder_optimizer = optim.SGD(encoder:parameters(), { lr = learning_rate })
  local decoder_optimizer = optim.SGD(decoder:parameters(), { lr = learning_rate })
  local training_pairs = {}
  for i = 1, iters do
    local pair = initial and lang_pairs[(i - 1) % #lang_pairs + 1] or lang_pairs[math.random(#lang_pairs)]
    training_pairs[i] = { tensorsFromPair(pair) }
  end
  local criterion = nn.NLLLoss()

  for iter = 1, iters do
    local training_pair = training_pairs[iter]
    local input_tensor = training_pair[1]
    local target_tensor = training_pair[2]
    local use_teacher_forcing
    if initial then use_teacher_forcing = iter % 2 == 1 else use_teacher_forcing = math.random() < teacher_forcing_ratio end

    local loss = train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion,
      use_teacher_forcing)
    print_loss_total = print_loss_total + loss
    record.loss[iter] = loss

    if iter % print_every == 0 then
      local print_loss_avg = print_loss_total / print_every
      print_loss_total = 0
      print(('%.1fs (%d %d%%) %.4f'):format(os.clock() - start, iter, math.floor(iter / iters * 100), print_loss_avg))
    end
  end
end

-- Evaluation
local function evaluate(encoder, decoder, sentence, max_length)
  max_length = max_length or MAX_LENGTH
  return torch.no_grad(function()
    local input_tensor = tensorFromSentence(input_lang, sentence)
    local input_length = input_tensor:size(1)
    local encoder_hidden = encoder:initHidden()

    local encoder_outputs = torch.zeros(max_length, encoder.hidden_size)

    for ei = 1, input_length do
      local encoder_output
      encoder_output, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
      encoder_outputs[ei] = encoder_outputs[ei] + encoder_output[{ 1, 1 }]
    end

    local decoder_input = torch.tensor({ { SOS_token } })   -- SOS

    local decoder_hidden = encoder_hidden

    local decoded_words = {}
    local decoder_attentions = torch.zeros(max_length, max_length)

    local last = max_length
    for di = 1, max_length do
      local decoder_output, decoder_attention
      decoder_output, decoder_hidden, decoder_attention = decoder(decoder_input, decoder_hidden, encoder_outputs)
      decoder_attentions[di] = decoder_attention:detach()
      local _, topi = decoder_output:detach():topk(1)
      record.decoded = record.decoded or {}
      record.decoded[#record.decoded + 1] = topi:item()
      if topi:item() == EOS_token then
        decoded_words[#decoded_words + 1] = '<EOS>'
        last = di
        break
      else
        decoded_words[#decoded_words + 1] = output_lang.index2word[topi:item()]
      end

      decoder_input = topi:squeeze():detach()
    end

    return decoded_words, decoder_attentions[{ { 1, last } }]
  end)
end

local hidden_size = 16
local encoder1 = EncoderRNN(input_lang.n_words, hidden_size)
local attn_decoder1 = AttnDecoderRNN(hidden_size, output_lang.n_words, 0.1)
if initial then
  local sd, parts = torch.load(initial), { encoder = {}, decoder = {} }
  for k, v in pairs(sd) do
    local net, name = k:match('^(%w+)%.(.*)$')
    parts[net][name] = v
  end
  encoder1:load_state_dict(parts.encoder)
  attn_decoder1:load_state_dict(parts.decoder)
  attn_decoder1.dropout:eval()
end

trainIters(encoder1, attn_decoder1, n_iters, initial and 1 or 100, 0.05)

local output_words, attentions = evaluate(encoder1, attn_decoder1, lang_pairs[1][1])
print('input =', lang_pairs[1][1])
print('output =', table.concat(output_words, ' '))
record.attn_sum = (attentions * torch.arange(0, MAX_LENGTH)):sum():item()

if initial then
  -- every value the twin recorded, at full precision, for spec/programs2026_spec.lua
  for _, k in ipairs { 'loss', 'decoded' } do
    local s = {}
    for i, v in ipairs(record[k]) do s[i] = ('%.17g'):format(v) end
    print(('record %s %s'):format(k, table.concat(s, ' ')))
  end
  print(('record attn_sum %.17g'):format(record.attn_sum))
end
