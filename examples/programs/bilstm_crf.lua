-- The PyTorch tutorials' "Advanced: Making Dynamic Decisions and the Bi-LSTM CRF"
-- (beginner_source/nlp/advanced_tutorial.py): a bidirectional LSTM gives each word's tag
-- scores, a CRF on top scores tag transitions (self.transitions[{next_tag, prev_tag}], one
-- element that carries its gradient); the forward algorithm (log_sum_exp) gives the
-- partition function, the gold path's score is subtracted, and Viterbi decodes.  Tags and
-- words count from 1.
--   dplua examples/programs/bilstm_crf.lua [epochs]
-- Loaded with a table (the spec: dtype, init = a state_dict, hidden = init_hidden's draws)
-- it returns its losses and decodes.
local opts = ...
if type(opts) ~= 'table' then opts = { epochs = tonumber(opts) } end
torch.set_default_dtype(opts.dtype or 'float32')
torch.manual_seed(1)

local START_TAG = '<START>'
local STOP_TAG = '<STOP>'

-- helper functions to make the code more readable
local function argmax(vec)
  -- return the argmax as a number
  local _, idx = torch.max(vec, 2)
  return idx:item()
end

local function prepare_sequence(seq, to_ix)
  local idxs = {}
  for i, w in ipairs(seq) do idxs[i] = to_ix[w] end
  return torch.tensor(idxs, { dtype = torch.long })
end

-- compute log sum exp in a numerically stable way for the forward algorithm
local function log_sum_exp(vec)
  local max_score = vec[{ 1, argmax(vec) }]
  local max_score_broadcast = max_score:view(1, -1):expand(1, vec:size(2))
  return max_score + torch.log(torch.sum(torch.exp(vec - max_score_broadcast)))
end

local draws = 0
local BiLSTM_CRF, parent = torch.class('BiLSTM_CRF', 'nn.Module')

function BiLSTM_CRF:__init(vocab_size, tag_to_ix, embedding_dim, hidden_dim)
  parent.__init(self)
  self.embedding_dim = embedding_dim
  self.hidden_dim = hidden_dim
  self.vocab_size = vocab_size
  self.tag_to_ix = tag_to_ix
  self.tagset_size = 0
  for _ in pairs(tag_to_ix) do self.tagset_size = self.tagset_size + 1 end

  self.word_embeds = nn.Embedding(vocab_size, embedding_dim)
  self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, { num_layers = 1, bidirectional = true })

  -- maps the output of the LSTM into tag space
  self.hidden2tag = nn.Linear(hidden_dim, self.tagset_size)

  -- matrix of transition parameters: entry i,j is the score of transitioning *to* i *from* j
  self.transitions = nn.Parameter(torch.randn(self.tagset_size, self.tagset_size))

  -- these two statements enforce the constraint that we never transfer to the start tag
  -- and we never transfer from the stop tag
  self.transitions.data[{ tag_to_ix[START_TAG], {} }] = -10000
  self.transitions.data[{ {}, tag_to_ix[STOP_TAG] }] = -10000

  self.hidden = self:init_hidden()
end

function BiLSTM_CRF:init_hidden()
  local h = { torch.randn(2, 1, self.hidden_dim // 2), torch.randn(2, 1, self.hidden_dim // 2) }
  draws = draws + 1
  if opts.hidden then   -- the spec: PyTorch's draws
    h = { torch.tensor(opts.hidden[draws][1]), torch.tensor(opts.hidden[draws][2]) }
  end
  return h
end

function BiLSTM_CRF:_forward_alg(feats)
  -- do the forward algorithm to compute the partition function
  local init_alphas = torch.full({ 1, self.tagset_size }, -10000.)
  -- START_TAG has all of the score
  init_alphas[1][self.tag_to_ix[START_TAG]] = 0.

  -- wrap in a variable so that we will get automatic backprop
  local forward_var = init_alphas

  -- iterate through the sentence
  for i = 1, feats:size(1) do
    local feat = feats[i]
    local alphas_t = {}   -- the forward tensors at this timestep
    for next_tag = 1, self.tagset_size do
      -- broadcast the emission score: it is the same regardless of the previous tag
      local emit_score = feat[next_tag]:view(1, -1):expand(1, self.tagset_size)
      -- the ith entry of trans_score is the score of transitioning to next_tag from i
      local trans_score = self.transitions[next_tag]:view(1, -1)
      -- the ith entry of next_tag_var is the value for the edge (i -> next_tag) before we do log-sum-exp
      local next_tag_var = forward_var + trans_score + emit_score
      -- the forward variable for this tag is log-sum-exp of all the scores
      alphas_t[#alphas_t + 1] = log_sum_exp(next_tag_var):view(1)
    end
    forward_var = torch.cat(alphas_t):view(1, -1)
  end
  local terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
  return log_sum_exp(terminal_var)
end

function BiLSTM_CRF:_get_lstm_features(sentence)
  self.hidden = self:init_hidden()
  local embeds = self.word_embeds(sentence):view(#sentence, 1, -1)
  local lstm_out
  lstm_out, self.hidden = self.lstm(embeds, self.hidden)
  lstm_out = lstm_out:view(#sentence, self.hidden_dim)
  return self.hidden2tag(lstm_out)
end

function BiLSTM_CRF:_score_sentence(feats, tags)
  -- gives the score of a provided tag sequence
  local score = torch.zeros(1)
  tags = torch.cat({ torch.tensor({ self.tag_to_ix[START_TAG] }, { dtype = torch.long }), tags })
  for i = 1, feats:size(1) do
    local feat = feats[i]
    score = score + self.transitions[{ tags[i + 1], tags[i] }] + feat[tags[i + 1]]
  end
  return score + self.transitions[{ self.tag_to_ix[STOP_TAG], tags[-1] }]
end

function BiLSTM_CRF:_viterbi_decode(feats)
  local backpointers = {}

  -- initialize the viterbi variables in log space
  local init_vvars = torch.full({ 1, self.tagset_size }, -10000.)
  init_vvars[1][self.tag_to_ix[START_TAG]] = 0

  -- forward_var at step i holds the viterbi variables for step i-1
  local forward_var = init_vvars
  for i = 1, feats:size(1) do
    local feat = feats[i]
    local bptrs_t = {}         -- holds the backpointers for this step
    local viterbivars_t = {}   -- holds the viterbi variables for this step

    for next_tag = 1, self.tagset_size do
      -- next_tag_var[i] holds the viterbi variable for tag i at the previous step, plus the
      -- score of transitioning from tag i to next_tag.  We don't include the emission scores
      -- here because the max does not depend on them (we add them in below)
      local next_tag_var = forward_var + self.transitions[next_tag]
      local best_tag_id = argmax(next_tag_var)
      bptrs_t[#bptrs_t + 1] = best_tag_id
      -- dplua: next_tag_var[0][best_tag_id].view(1) in the tutorial; under no_grad an
      -- element of dplua's 1-D tensor is a Lua number, so the range {i} keeps it a tensor
      viterbivars_t[#viterbivars_t + 1] = next_tag_var[1][{ { best_tag_id } }]
    end
    -- now add in the emission scores, and assign forward_var to the set of viterbi variables we just computed
    forward_var = (torch.cat(viterbivars_t) + feat):view(1, -1)
    backpointers[#backpointers + 1] = bptrs_t
  end

  -- transition to STOP_TAG
  local terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
  local best_tag_id = argmax(terminal_var)
  local path_score = terminal_var[1][best_tag_id]

  -- follow the back pointers to decode the best path
  local best_path = { best_tag_id }
  for i = #backpointers, 1, -1 do
    best_tag_id = backpointers[i][best_tag_id]
    best_path[#best_path + 1] = best_tag_id
  end
  -- pop off the start tag (we dont want to return that to the caller)
  local start = table.remove(best_path)
  assert(start == self.tag_to_ix[START_TAG])   -- sanity check
  local reversed = {}
  for i = #best_path, 1, -1 do reversed[#reversed + 1] = best_path[i] end
  return path_score, reversed
end

function BiLSTM_CRF:neg_log_likelihood(sentence, tags)
  local feats = self:_get_lstm_features(sentence)
  local forward_score = self:_forward_alg(feats)
  local gold_score = self:_score_sentence(feats, tags)
  return forward_score - gold_score
end

function BiLSTM_CRF:forward(sentence)   -- don't confuse this with _forward_alg above
  -- get the emission scores from the BiLSTM
  local lstm_feats = self:_get_lstm_features(sentence)
  -- find the best path, given the features
  return self:_viterbi_decode(lstm_feats)
end

local EMBEDDING_DIM = 5
local HIDDEN_DIM = 4

-- make up some training data
local function split(s)
  local t = {}
  for w in s:gmatch('%S+') do t[#t + 1] = w end
  return t
end
local training_data = {
  { split('the wall street journal reported today that apple corporation made money'), split('B I I I O O O B I O O') },
  { split('georgia tech is a university in georgia'), split('B I O O O O B') },
}
local word_to_ix = {}
local nwords = 0
for _, pair in ipairs(training_data) do
  for _, word in ipairs(pair[1]) do
    if not word_to_ix[word] then nwords = nwords + 1; word_to_ix[word] = nwords end
  end
end
local tag_to_ix = { B = 1, I = 2, O = 3, [START_TAG] = 4, [STOP_TAG] = 5 }

local model = BiLSTM_CRF(nwords, tag_to_ix, EMBEDDING_DIM, HIDDEN_DIM)
if opts.init then   -- the spec: PyTorch's initial state_dict (a table of number tables)
  local sd = {}
  for k, v in pairs(opts.init) do sd[k] = torch.tensor(v) end
  model:load_state_dict(sd)
end
local optimizer = optim.SGD(model:parameters(), { lr = 0.01, weight_decay = 1e-4 })

local result = { losses = {} }
-- check predictions before training
torch.no_grad(function()
  local precheck_sent = prepare_sequence(training_data[1][1], word_to_ix)
  local score, path = model(precheck_sent)
  print(score, table.concat(path, ' '))
  result.before = { score = score, path = path }
end)

-- make sure prepare_sequence from earlier in the LSTM section is loaded
for _ = 1, opts.epochs or 300 do   -- normally you would NOT do 300 epochs, it is toy data
  for _, pair in ipairs(training_data) do
    local sentence, tags = pair[1], pair[2]
    -- Step 1. Remember that Pytorch accumulates gradients.  We need to clear them out
    -- before each instance
    model:zero_grad()

    -- Step 2. Get our inputs ready for the network, that is, turn them into tensors of word indices.
    local sentence_in = prepare_sequence(sentence, word_to_ix)
    local tag_ids = {}
    for i, t in ipairs(tags) do tag_ids[i] = tag_to_ix[t] end
    local targets = torch.tensor(tag_ids, { dtype = torch.long })

    -- Step 3. Run our forward pass.
    local loss = model:neg_log_likelihood(sentence_in, targets)

    -- Step 4. Compute the loss, gradients, and update the parameters by calling optimizer.step()
    loss:backward()
    optimizer:step()
    result.losses[#result.losses + 1] = loss:item()
  end
end

-- check predictions after training
torch.no_grad(function()
  local precheck_sent = prepare_sequence(training_data[1][1], word_to_ix)
  local score, path = model(precheck_sent)
  print(score, table.concat(path, ' '))
  result.after = { score = score, path = path }
end)
-- we got it!
torch.set_default_dtype('float32')
return result
