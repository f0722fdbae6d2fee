-- pytorch/examples time_sequence_prediction: two LSTMCells learn sine waves, trained in
-- float64 with L-BFGS, then predict 200 steps ahead (generate_sine_wave.py inline).
--   dplua examples/programs/time_sequence_prediction.lua [steps]
local steps = tonumber(arg and arg[1]) or 2
-- generate_sine_wave.py, shorter waves (L = 200) and fewer of them (N = 20)
local T, L, N = 20, 200, 20   -- the original: 20, 1000, 100
torch.manual_seed(2)
local x = torch.arange(L):view(1, L) + torch.randint(-4 * T, 4 * T, { N, 1 })
local data = torch.sin(x:double() / T)

local Sequence, parent = torch.class('Sequence', 'nn.Module')
function Sequence:__init()
  parent.__init(self)
  self.lstm1 = nn.LSTMCell(1, 51)
  self.lstm2 = nn.LSTMCell(51, 51)
  self.linear = nn.Linear(51, 1)
end
function Sequence:forward(input, future)
  future = future or 0
  local outputs = {}
  local n = input:size(1)
  local h_t = torch.zeros(n, 51, { dtype = 'float64' })
  local c_t = torch.zeros(n, 51, { dtype = 'float64' })
  local h_t2 = torch.zeros(n, 51, { dtype = 'float64' })
  local c_t2 = torch.zeros(n, 51, { dtype = 'float64' })
  local output
  for _, input_t in ipairs(input:split(1, 2)) do
    h_t, c_t = self.lstm1(input_t, { h_t, c_t })
    h_t2, c_t2 = self.lstm2(h_t, { h_t2, c_t2 })
    output = self.linear(h_t2)
    outputs[#outputs + 1] = output
  end
  for _ = 1, future do   -- if we should predict the future
    h_t, c_t = self.lstm1(output, { h_t, c_t })
    h_t2, c_t2 = self.lstm2(h_t, { h_t2, c_t2 })
    output = self.linear(h_t2)
    outputs[#outputs + 1] = output
  end
  return torch.cat(outputs, 2)
end

-- load data and make training set
local input = data[{ { 4, -1 }, { 1, -2 } }]
local target = data[{ { 4, -1 }, { 2, -1 } }]
local test_input = data[{ { 1, 3 }, { 1, -2 } }]
local test_target = data[{ { 1, 3 }, { 2, -1 } }]
local seq = Sequence()
seq:double()
local criterion = nn.MSELoss()
-- use LBFGS as optimizer since we can load the whole data to train
local optimizer = optim.LBFGS(seq:parameters(), { lr = 0.8 })
for i = 0, steps - 1 do
  print('STEP: ', i)
  optimizer:step(function()
    optimizer:zero_grad()
    local out = seq(input)
    local loss = criterion(out, target)
    print('loss:', loss:item())
    loss:backward()
    return loss
  end)
  -- begin to predict, no need to track gradient here
  torch.no_grad(function()
    local future = 200
    local pred = seq(test_input, future)
    local loss = criterion(pred[{ {}, { 1, -future - 1 } }], test_target)
    print('test loss:', loss:item())
    assert(pred:size(2) == L - 1 + future)
  end)
end
