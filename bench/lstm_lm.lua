-- bench/lstm_lm.lua: one training step of pytorch/examples' word language model at its
-- default size: embedding 10000x200, nn.LSTM(200, 200, 2), bptt 35, batch 20, decoder to
-- 10000, CrossEntropyLoss, clip_grad_norm_(0.25), SGD (lr 20), dropout 0.2.
-- Twin: bench/lstm_lm.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)
local F = nn.functional

local ntoken, ninp, nhid, bptt, bsz = 10000, 200, 200, 35, 20
local encoder = nn.Embedding(ntoken, ninp)
local rnn = nn.LSTM(ninp, nhid, { num_layers = 2, dropout = 0.2 })
local decoder = nn.Linear(nhid, ntoken)
local drop = nn.Dropout(0.2)
local model = nn.ModuleList({ encoder, rnn, decoder })
local opt = optim.SGD(model:parameters(), { lr = 20 })
local data = torch.randint(1, ntoken + 1, { bptt, bsz })
local targets = torch.randint(1, ntoken + 1, { bptt * bsz })
local hidden = { torch.zeros(2, bsz, nhid), torch.zeros(2, bsz, nhid) }

local function step()
  hidden = { hidden[1]:detach(), hidden[2]:detach() }
  opt:zero_grad()
  local out
  out, hidden = rnn(drop(encoder(data)), hidden)
  local loss = F.cross_entropy(decoder(drop(out)):view(-1, ntoken), targets)
  loss:backward()
  nn.utils.clip_grad_norm_(model:parameters(), 0.25)
  opt:step()
end

bench.report('lstm_lm.step_bptt35_b20', bench.measure(step, { budget = 4.0 }), 's')
