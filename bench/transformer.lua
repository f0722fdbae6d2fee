-- bench/transformer.lua: one training step of nn.TransformerEncoderLayer(256, 4,
-- {dim_feedforward = 1024, dropout = 0, batch_first = true}) on 16x128x256 with a causal
-- float mask, sum of the output as the loss, AdamW.  Twin: bench/transformer.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)

local layer = nn.TransformerEncoderLayer(256, 4, { dim_feedforward = 1024, dropout = 0, batch_first = true })
local opt = optim.AdamW(layer:parameters(), { lr = 1e-4 })
local x = torch.randn(16, 128, 256)
local mask = torch.triu(torch.full({ 128, 128 }, -math.huge), 1)

local function step()
  opt:zero_grad()
  local loss = layer(x, { src_mask = mask }):pow(2):mean()
  loss:backward()
  opt:step()
end

bench.report('transformer.encoder_layer_step_16x128x256', bench.measure(step, { budget = 4.0 }), 's')
