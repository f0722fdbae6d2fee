-- pytorch/examples regression/main.py: fits a degree-4 polynomial with one nn.Linear,
-- updating the parameters by hand through .data.
local POLY_DEGREE = 4
torch.manual_seed(3)
local W_target = torch.randn(POLY_DEGREE, 1) * 5
local b_target = torch.randn(1) * 5

-- Builds features i.e. a matrix with columns [x, x^2, x^3, x^4].
local function make_features(x)
  x = x:unsqueeze(2)
  local cols = {}
  for i = 1, POLY_DEGREE do cols[i] = x ^ i end
  return torch.cat(cols, 2)
end

-- Approximated function.
local function f(x) return x:mm(W_target) + b_target:item() end

-- Creates a string description of a polynomial.
local function poly_desc(W, b)
  local w, c = W:tolist(), b:tolist()   -- numbers (elements of a tensor that requires grad are tensors)
  local result = 'y = '
  for i = 1, #w do result = result .. ('%+.2f x^%d '):format(w[i], i) end
  return result .. ('%+.2f'):format(c[1])
end

-- Builds a batch i.e. (x, f(x)) pair.
local function get_batch(batch_size)
  local random = torch.randn(batch_size or 32)
  local x = make_features(random)
  return x, f(x)
end

-- Define model
local fc = nn.Linear(W_target:size(1), 1)
local loss, batch_idx = nil, 0
while true do
  batch_idx = batch_idx + 1
  -- Get data
  local batch_x, batch_y = get_batch()
  -- Reset gradients
  fc:zero_grad()
  -- Forward pass
  local output = nn.functional.smooth_l1_loss(fc(batch_x), batch_y)
  loss = output:item()
  -- Backward pass
  output:backward()
  -- Apply gradients
  for _, param in ipairs(fc:parameters()) do
    param.data:add_(-0.1 * param.grad)
  end
  -- Stop criterion
  if loss < 1e-3 then break end
end
print(('Loss: %.6f after %d batches'):format(loss, batch_idx))
print('==> Learned function:\t' .. poly_desc(fc.weight:view(-1), fc.bias))
print('==> Actual function:\t' .. poly_desc(W_target:view(-1), b_target))
