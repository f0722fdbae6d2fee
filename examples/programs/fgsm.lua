-- The PyTorch tutorials' FGSM adversarial example: the MNIST LeNet (trained here for a few
-- steps on synthetic digits, the tutorial loads a pretrained one), attacked with the fast
-- gradient sign method for several epsilons.
local F = nn.functional
torch.manual_seed(42)
local epsilons = { 0, .05, .1, .2, .3 }

-- LeNet Model definition
local Net, parent = torch.class('Net', 'nn.Module')
function Net:__init()
  parent.__init(self)
  self.conv1 = nn.Conv2d(1, 10, 5)
  self.conv2 = nn.Conv2d(10, 20, 5)
  self.conv2_drop = nn.Dropout2d()
  self.fc1 = nn.Linear(320, 50)
  self.fc2 = nn.Linear(50, 10)
end
function Net:forward(x)
  x = F.relu(F.max_pool2d(self.conv1(x), 2))
  x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
  x = x:view(-1, 320)
  x = F.relu(self.fc1(x))
  x = F.dropout(x, { training = self.training })
  x = self.fc2(x)
  return F.log_softmax(x, 2)
end

local templates = torch.rand(10, 1, 28, 28, { generator = torch.Generator():manual_seed(5) }):gt(0.6):float()
local function digits(n)
  local y = torch.randint(1, 11, { n })
  return (templates:index_select(1, y) + 0.3 * torch.randn(n, 1, 28, 28)):clamp(0, 1), y
end

local model = Net()
local opt = optim.Adam(model:parameters(), { lr = 1e-3 })
for _ = 1, 30 do
  local x, y = digits(64)
  opt:zero_grad()
  local loss = F.nll_loss(model(x), y)
  loss:backward()
  opt:step()
end
-- Set the model in evaluation mode. In this case this is for the Dropout layers
model:eval()

-- FGSM attack code
local function fgsm_attack(image, epsilon, data_grad)
  -- Collect the element-wise sign of the data gradient
  local sign_data_grad = data_grad:sign()
  -- Create the perturbed image by adjusting each pixel of the input image
  local perturbed_image = image + epsilon * sign_data_grad
  -- Adding clipping to maintain [0,1] range
  perturbed_image = torch.clamp(perturbed_image, 0, 1)
  return perturbed_image
end

local test_x, test_y = digits(200)
local function test(epsilon)
  local correct, adv_examples = 0, {}
  for i = 1, test_x:size(1) do
    local data, target = test_x[{ { i } }]:clone(), test_y[{ { i } }]
    -- Set requires_grad attribute of tensor. Important for Attack
    data.requires_grad = true
    local output = model(data)
    local init_pred = output:max(2, true)[1]   -- get the index of the max log-probability
    local _, idx = output:max(2, true)
    init_pred = idx
    -- If the initial prediction is wrong, don't bother attacking, just move on
    if init_pred:item() == target:item() then
      local loss = F.nll_loss(output, target)
      model:zero_grad()
      loss:backward()
      -- Collect datagrad
      local data_grad = data.grad.data
      local perturbed_data = fgsm_attack(data, epsilon, data_grad)
      -- Re-classify the perturbed image
      output = model(perturbed_data)
      local _, final_pred = output:max(2, true)
      if final_pred:item() == target:item() then
        correct = correct + 1
      elseif #adv_examples < 5 then
        local adv_ex = perturbed_data:squeeze():detach():cpu()
        adv_examples[#adv_examples + 1] = { init_pred:item(), final_pred:item(), adv_ex }
      end
    end
  end
  local final_acc = correct / test_x:size(1)
  print(('Epsilon: %s\tTest Accuracy = %d / %d = %s'):format(epsilon, correct, test_x:size(1), final_acc))
  return final_acc, adv_examples
end

local accuracies = {}
for _, eps in ipairs(epsilons) do
  local acc = test(eps)
  accuracies[#accuracies + 1] = acc
end
assert(accuracies[#accuracies] <= accuracies[1])
