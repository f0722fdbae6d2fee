-- Karpathy's makemore, part 1: a bigram character model of names, first by counting, then
-- as a one-layer network trained by hand (W.data += -50 * W.grad), on a few names instead
-- of names.txt.  Letters count from 2 and '.' (start and end) is 1: dplua counts from 1.
local F = nn.functional
local words = { 'emma', 'olivia', 'ava', 'isabella', 'sophia', 'charlotte', 'mia', 'amelia',
  'harper', 'evelyn', 'abigail', 'emily', 'elizabeth', 'mila', 'ella', 'avery', 'sofia',
  'camila', 'aria', 'scarlett', 'victoria', 'madison', 'luna', 'grace', 'chloe', 'penelope',
  'layla', 'riley', 'zoey', 'nora', 'lily', 'eleanor', 'hannah', 'lillian', 'addison' }
local steps = tonumber(arg and arg[1]) or 20

local chars = {}
do
  local seen = {}
  for _, w in ipairs(words) do
    for ch in w:gmatch('.') do
      if not seen[ch] then seen[ch] = true; chars[#chars + 1] = ch end
    end
  end
  for _, ch in ipairs({ 'b', 'd', 'f', 'j', 'k', 'q', 'u', 'w', 'x' }) do   -- all 26 letters
    if not seen[ch] then seen[ch] = true; chars[#chars + 1] = ch end
  end
  table.sort(chars)
end
local stoi, itos = { ['.'] = 1 }, { '.' }
for i, s in ipairs(chars) do stoi[s] = i + 1; itos[i + 1] = s end
local V = #itos   -- 27

local function bigrams(w, fn)
  local chs = { '.' }
  for ch in w:gmatch('.') do chs[#chs + 1] = ch end
  chs[#chs + 1] = '.'
  for i = 1, #chs - 1 do fn(stoi[chs[i]], stoi[chs[i + 1]]) end
end

-- counting
local N = torch.zeros({ V, V }, { dtype = torch.int32 })
for _, w in ipairs(words) do
  bigrams(w, function(ix1, ix2) N[{ ix1, ix2 }] = N[{ ix1, ix2 }] + 1 end)
end
local P = (N + 1):float()
P = P / P:sum(2, true)

local g = torch.Generator():manual_seed(2147483647)
for _ = 1, 5 do
  local out, ix = {}, 1
  while true do
    local p = P[ix]
    ix = torch.multinomial(p, 1, { replacement = true, generator = g }):item()
    out[#out + 1] = itos[ix]
    if ix == 1 then break end
  end
  print(table.concat(out))
end

local log_likelihood, n = 0.0, 0
for _, w in ipairs(words) do
  bigrams(w, function(ix1, ix2)
    log_likelihood = log_likelihood + math.log(P[{ ix1, ix2 }])   -- all-number keys give the element
    n = n + 1
  end)
end
print(('log_likelihood=%.4f'):format(log_likelihood))
print(('nll/n=%.4f'):format(-log_likelihood / n))

-- the neural network
local xs, ys = {}, {}
for _, w in ipairs(words) do
  bigrams(w, function(ix1, ix2) xs[#xs + 1] = ix1; ys[#ys + 1] = ix2 end)
end
xs, ys = torch.tensor(xs), torch.tensor(ys)
local num = xs:nelement()
print('number of examples: ', num)

g = torch.Generator():manual_seed(2147483647)
local W = torch.randn({ V, V }, { generator = g, requires_grad = true })
for _ = 1, steps do
  -- forward pass
  local xenc = F.one_hot(xs, V):float()   -- input to the network: one-hot encoding
  local logits = xenc:matmul(W)            -- predict log-counts
  local counts = logits:exp()              -- counts, equivalent to N
  local probs = counts / counts:sum(2, true)   -- probabilities for next character
  local loss = -probs[{ torch.arange(1, num + 1), ys }]:log():mean() + 0.01 * (W ^ 2):mean()
  print(loss:item())
  -- backward pass
  W.grad = nil   -- set to zero the gradient
  loss:backward()
  -- update
  W.data:add_(-50 * W.grad)
end
