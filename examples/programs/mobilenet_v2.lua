-- torchvision's MobileNetV2 (torchvision/models/mobilenetv2.py, with _make_divisible and
-- ops.misc.Conv2dNormActivation, the ConvBNReLU of older versions): 1x1 expansion,
-- depthwise 3x3 (groups = channels) and linear 1x1 projection with ReLU6 and batch norm,
-- the residual connection when the shape allows it, and the dropout classifier; trained a
-- few steps with SGD on synthetic 32x32 images in 10 classes. Smaller than the original:
-- width_mult 0.25 and the first three rows of the inverted residual setting.
--   dplua examples/programs/mobilenet_v2.lua [steps [initial.safetensors]]
-- With a second argument the run is spec/fixtures/make_prog_mobilenet_v2.py's, in float64,
-- from its initial weights.
local steps = tonumber(arg and arg[1]) or 4
local initial = arg and arg[2]
if initial then torch.set_default_dtype('float64') end
torch.manual_seed(0)

-- torchvision/models/_utils.py
local function _make_divisible(v, divisor, min_value)
  min_value = min_value or divisor
  local new_v = math.max(min_value, (math.floor(v + divisor / 2) // divisor) * divisor)
  -- Make sure that round down does not go down by more than 10%.
  if new_v < 0.9 * v then new_v = new_v + divisor end
  return math.tointeger(new_v)
end

-- torchvision/ops/misc.py
local Conv2dNormActivation, Conv2dNormActivation_parent = torch.class('Conv2dNormActivation', 'nn.Sequential')
function Conv2dNormActivation:__init(in_channels, out_channels, opts)
  opts = opts or {}
  local kernel_size, stride, groups, dilation = opts.kernel_size or 3, opts.stride or 1, opts.groups or 1, opts.dilation or 1
  local norm_layer = opts.norm_layer == nil and nn.BatchNorm2d or opts.norm_layer
  local activation_layer = opts.activation_layer == nil and nn.ReLU or opts.activation_layer
  local padding = opts.padding or (kernel_size - 1) // 2 * dilation
  local bias = opts.bias
  if bias == nil then bias = not norm_layer end
  local layers = { nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
    { dilation = dilation, groups = groups, bias = bias }) }
  if norm_layer then layers[#layers + 1] = norm_layer(out_channels) end
  if activation_layer then layers[#layers + 1] = activation_layer { inplace = opts.inplace ~= false } end
  Conv2dNormActivation_parent.__init(self, table.unpack(layers))
  self.out_channels = out_channels
end

-- torchvision/models/mobilenetv2.py
local InvertedResidual, InvertedResidual_parent = torch.class('InvertedResidual', 'nn.Module')
function InvertedResidual:__init(inp, oup, stride, expand_ratio, norm_layer)
  InvertedResidual_parent.__init(self)
  self.stride = stride
  assert(stride == 1 or stride == 2)
  norm_layer = norm_layer or nn.BatchNorm2d
  local hidden_dim = math.tointeger(math.floor(inp * expand_ratio + 0.5))   -- int(round(...))
  self.use_res_connect = self.stride == 1 and inp == oup
  local layers = {}
  if expand_ratio ~= 1 then
    -- pw
    layers[#layers + 1] = Conv2dNormActivation(inp, hidden_dim,
      { kernel_size = 1, norm_layer = norm_layer, activation_layer = nn.ReLU6 })
  end
  -- dw
  layers[#layers + 1] = Conv2dNormActivation(hidden_dim, hidden_dim,
    { stride = stride, groups = hidden_dim, norm_layer = norm_layer, activation_layer = nn.ReLU6 })
  -- pw-linear
  layers[#layers + 1] = nn.Conv2d(hidden_dim, oup, 1, 1, 0, { bias = false })
  layers[#layers + 1] = norm_layer(oup)
  self.conv = nn.Sequential(table.unpack(layers))
  self.out_channels = oup
  self._is_cn = stride > 1
end
function InvertedResidual:forward(x)
  if self.use_res_connect then
    return x + self.conv(x)
  else
    return self.conv(x)
  end
end

local MobileNetV2, MobileNetV2_parent = torch.class('MobileNetV2', 'nn.Module')
function MobileNetV2:__init(opts)
  MobileNetV2_parent.__init(self)
  opts = opts or {}
  local num_classes, width_mult = opts.num_classes or 1000, opts.width_mult or 1.0
  local round_nearest, dropout = opts.round_nearest or 8, opts.dropout or 0.2
  local block = opts.block or InvertedResidual
  local norm_layer = opts.norm_layer or nn.BatchNorm2d
  local input_channel = 32
  local last_channel = 1280
  local inverted_residual_setting = opts.inverted_residual_setting or {
    -- t, c, n, s
    { 1, 16, 1, 1 },
    { 6, 24, 2, 2 },
    { 6, 32, 3, 2 },
    { 6, 64, 4, 2 },
    { 6, 96, 3, 1 },
    { 6, 160, 3, 2 },
    { 6, 320, 1, 1 },
  }
  if #inverted_residual_setting == 0 or #inverted_residual_setting[1] ~= 4 then
    error('inverted_residual_setting should be non-empty or a 4-element list')
  end

  -- building first layer
  input_channel = _make_divisible(input_channel * width_mult, round_nearest)
  self.last_channel = _make_divisible(last_channel * math.max(1.0, width_mult), round_nearest)
  local features = { Conv2dNormActivation(3, input_channel,
    { stride = 2, norm_layer = norm_layer, activation_layer = nn.ReLU6 }) }
  -- building inverted residual blocks
  for _, row in ipairs(inverted_residual_setting) do
    local t, c, n, s = table.unpack(row)
    local output_channel = _make_divisible(c * width_mult, round_nearest)
    for i = 0, n - 1 do
      local stride = i == 0 and s or 1
      features[#features + 1] = block(input_channel, output_channel, stride, t, norm_layer)
      input_channel = output_channel
    end
  end
  -- building last several layers
  features[#features + 1] = Conv2dNormActivation(input_channel, self.last_channel,
    { kernel_size = 1, norm_layer = norm_layer, activation_layer = nn.ReLU6 })
  self.features = nn.Sequential(table.unpack(features))

  -- building classifier
  self.classifier = nn.Sequential(
    nn.Dropout { p = dropout },
    nn.Linear(self.last_channel, num_classes))

  -- weight initialization
  for _, m in ipairs(self:modules()) do
    if torch.isinstance(m, nn.Conv2d) then
      nn.init.kaiming_normal_(m.weight, { mode = 'fan_out' })
      if m.bias then nn.init.zeros_(m.bias) end
    elseif torch.isinstance(m, { nn.BatchNorm2d, nn.GroupNorm }) then
      nn.init.ones_(m.weight)
      nn.init.zeros_(m.bias)
    elseif torch.isinstance(m, nn.Linear) then
      nn.init.normal_(m.weight, 0, 0.01)
      nn.init.zeros_(m.bias)
    end
  end
end
function MobileNetV2:forward(x)
  x = self.features(x)
  -- Cannot use "squeeze" as batch-size can be 1
  x = nn.functional.adaptive_avg_pool2d(x, { 1, 1 })
  x = torch.flatten(x, 2)
  x = self.classifier(x)
  return x
end

-- n images [3, 32, 32] in [-1, 1) and labels 1..10, a linear congruential hash of the
-- position (integer arithmetic, so the PyTorch twin makes the same bits)
local function synthetic(n, seed)
  local idx = torch.arange(n * 3 * 32 * 32, { dtype = 'int64' }) + seed * 1000003
  local v = (idx * 1103515245 + 12345):remainder(2147483648)
  local x = (v:to(torch.get_default_dtype()) / 2 ^ 30 - 1):reshape(n, 3, 32, 32)
  local y = (torch.arange(n, { dtype = 'int64' }) * 7 + seed):remainder(10) + 1
  return x, y
end

local model = MobileNetV2 { num_classes = 10, width_mult = 0.25,
  inverted_residual_setting = { { 1, 16, 1, 1 }, { 6, 24, 2, 2 }, { 6, 32, 2, 2 } } }
nn.init.normal_(model.classifier[2].weight, 0, 0.1)   -- the twin's: the loss moves at once
if initial then model:load_state_dict(torch.load(initial)) end
print(model)
local n_params = 0
for _, p in ipairs(model:parameters()) do n_params = n_params + p:numel() end
print(('%d parameters'):format(n_params))

local record = { loss = {}, grad_dw = {}, grad_bn = {}, grad_fc = {} }
local x, y = synthetic(8, 3)
model:eval()
torch.no_grad(function() record.eval_logits = model(x)[1]:totable() end)

local criterion = nn.CrossEntropyLoss()
local optimizer = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
model:train()
if initial then model.classifier[1]:eval() end   -- dropout off: dplua's random stream is not PyTorch's
local dw = model.features[3].conv[2]              -- the first expanding block's depthwise conv and norm
for step = 1, steps do
  optimizer:zero_grad()
  local loss = criterion(model(x), y)
  loss:backward()
  record.loss[step] = loss:item()
  record.grad_dw[step] = dw[1].weight.grad:norm():item()
  record.grad_bn[step] = dw[2].weight.grad:norm():item()
  record.grad_fc[step] = model.classifier[2].weight.grad:norm():item()
  optimizer:step()
  print(('step %d loss %.4f'):format(step, loss:item()))
end
model:eval()
torch.no_grad(function() record.eval_after = model(x)[1]:totable() end)
record.running_mean = model.features[4].conv[4].running_mean:totable()

if initial then
  -- every value the twin recorded, at full precision, for spec/programs2026_spec.lua
  for _, k in ipairs { 'loss', 'grad_dw', 'grad_bn', 'grad_fc', 'eval_logits', 'eval_after', 'running_mean' } do
    local s = {}
    for i, v in ipairs(record[k]) do s[i] = ('%.17g'):format(v) end
    print(('record %s %s'):format(k, table.concat(s, ' ')))
  end
end
