-- pytorch/examples fast_neural_style: the image transformation network (transformer_net.py:
-- reflection-padded convolutions, instance norm, five residual blocks, nearest-neighbour
-- upsampling instead of transposed convolutions) trained with Adam on the content loss
-- (relu2_2 features) and the style loss (Gram matrices of four feature maps) of a VGG
-- network (neural_style.py's train, utils.py's gram_matrix and normalize_batch).
-- Smaller than the original: the channels divided by 4 (8, 16, 32), 32x32 synthetic images
-- (4 training images in batches of 2; a synthetic style image), and a small VGG-like
-- feature extractor with random weights in place of the pretrained VGG16 (the same four
-- slices ending at relu1_2, relu2_2, relu3_3, relu4_3, with 8 to 32 channels).
--   dplua examples/programs/fast_neural_style.lua [epochs [initial.safetensors]]
-- With a second argument the run is spec/fixtures/make_prog_fast_neural_style.py's, in
-- float64, from its initial weights.
local epochs = tonumber(arg and arg[1]) or 2
local initial = arg and arg[2]
if initial then torch.set_default_dtype('float64') end
local args = { batch_size = 2, image_size = 32, content_weight = 1e5, style_weight = 1e10,
  lr = 1e-3, log_interval = 1, seed = 42 }
torch.manual_seed(args.seed)

-- transformer_net.py
local ConvLayer, ConvLayer_parent = torch.class('ConvLayer', 'nn.Module')
function ConvLayer:__init(in_channels, out_channels, kernel_size, stride)
  ConvLayer_parent.__init(self)
  local reflection_padding = kernel_size // 2
  self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
  self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)
end
function ConvLayer:forward(x)
  local out = self.reflection_pad(x)
  out = self.conv2d(out)
  return out
end

-- introduced in: https://arxiv.org/abs/1512.03385
local ResidualBlock, ResidualBlock_parent = torch.class('ResidualBlock', 'nn.Module')
function ResidualBlock:__init(channels)
  ResidualBlock_parent.__init(self)
  self.conv1 = ConvLayer(channels, channels, 3, 1)
  self.in1 = nn.InstanceNorm2d(channels, { affine = true })
  self.conv2 = ConvLayer(channels, channels, 3, 1)
  self.in2 = nn.InstanceNorm2d(channels, { affine = true })
  self.relu = nn.ReLU()
end
function ResidualBlock:forward(x)
  local residual = x
  local out = self.relu(self.in1(self.conv1(x)))
  out = self.in2(self.conv2(out))
  out = out + residual
  return out
end

-- Upsamples the input and then does a convolution (better than ConvTranspose2d:
-- http://distill.pub/2016/deconv-checkerboard/)
local UpsampleConvLayer, UpsampleConvLayer_parent = torch.class('UpsampleConvLayer', 'nn.Module')
function UpsampleConvLayer:__init(in_channels, out_channels, kernel_size, stride, upsample)
  UpsampleConvLayer_parent.__init(self)
  self.upsample = upsample
  if upsample then
    self.upsample_layer = nn.Upsample { mode = 'nearest', scale_factor = upsample }
  end
  local reflection_padding = kernel_size // 2
  self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
  self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)
end
function UpsampleConvLayer:forward(x)
  local x_in = x
  if self.upsample then
    x_in = self.upsample_layer(x_in)
  end
  local out = self.reflection_pad(x_in)
  out = self.conv2d(out)
  return out
end

local TransformerNet, TransformerNet_parent = torch.class('TransformerNet', 'nn.Module')
function TransformerNet:__init(w)
  TransformerNet_parent.__init(self)
  w = w or 32
  -- Initial convolution layers
  self.conv1 = ConvLayer(3, w, 9, 1)
  self.in1 = nn.InstanceNorm2d(w, { affine = true })
  self.conv2 = ConvLayer(w, 2 * w, 3, 2)
  self.in2 = nn.InstanceNorm2d(2 * w, { affine = true })
  self.conv3 = ConvLayer(2 * w, 4 * w, 3, 2)
  self.in3 = nn.InstanceNorm2d(4 * w, { affine = true })
  -- Residual layers
  self.res1 = ResidualBlock(4 * w)
  self.res2 = ResidualBlock(4 * w)
  self.res3 = ResidualBlock(4 * w)
  self.res4 = ResidualBlock(4 * w)
  self.res5 = ResidualBlock(4 * w)
  -- Upsampling Layers
  self.deconv1 = UpsampleConvLayer(4 * w, 2 * w, 3, 1, 2)
  self.in4 = nn.InstanceNorm2d(2 * w, { affine = true })
  self.deconv2 = UpsampleConvLayer(2 * w, w, 3, 1, 2)
  self.in5 = nn.InstanceNorm2d(w, { affine = true })
  self.deconv3 = ConvLayer(w, 3, 9, 1)
  -- Non-linearities
  self.relu = nn.ReLU()
end
function TransformerNet:forward(X)
  local y = self.relu(self.in1(self.conv1(X)))
  y = self.relu(self.in2(self.conv2(y)))
  y = self.relu(self.in3(self.conv3(y)))
  y = self.res1(y)
  y = self.res2(y)
  y = self.res3(y)
  y = self.res4(y)
  y = self.res5(y)
  y = self.relu(self.in4(self.deconv1(y)))
  y = self.relu(self.in5(self.deconv2(y)))
  y = self.deconv3(y)
  return y
end

-- vgg.py's Vgg16, smaller and with random weights: its four slices end at relu1_2,
-- relu2_2, relu3_3 and relu4_3
local Vgg, Vgg_parent = torch.class('Vgg', 'nn.Module')
function Vgg:__init(requires_grad)
  Vgg_parent.__init(self)
  local function C(i, o) return nn.Conv2d(i, o, 3, { padding = 1 }) end
  local R, P = nn.ReLU, nn.MaxPool2d
  self.slice1 = nn.Sequential(C(3, 8), R(), C(8, 8), R())
  self.slice2 = nn.Sequential(P(2, 2), C(8, 16), R(), C(16, 16), R())
  self.slice3 = nn.Sequential(P(2, 2), C(16, 32), R(), C(32, 32), R(), C(32, 32), R())
  self.slice4 = nn.Sequential(P(2, 2), C(32, 32), R(), C(32, 32), R(), C(32, 32), R())
  if not requires_grad then
    for _, param in ipairs(self:parameters()) do
      param.requires_grad = false
    end
  end
end
function Vgg:forward(X)
  local h = self.slice1(X)
  local h_relu1_2 = h
  h = self.slice2(h)
  local h_relu2_2 = h
  h = self.slice3(h)
  local h_relu3_3 = h
  h = self.slice4(h)
  local h_relu4_3 = h
  -- the namedtuple VggOutputs: the four in order, and each by its name
  return { h_relu1_2, h_relu2_2, h_relu3_3, h_relu4_3,
    relu1_2 = h_relu1_2, relu2_2 = h_relu2_2, relu3_3 = h_relu3_3, relu4_3 = h_relu4_3 }
end

-- utils.py
local function gram_matrix(y)
  local b, ch, h, w = table.unpack(y:size())
  local features = y:view(b, ch, w * h)
  local features_t = features:transpose(2, 3)
  local gram = features:bmm(features_t) / (ch * h * w)
  return gram
end

local function normalize_batch(batch)
  -- normalize using imagenet mean and std
  local mean = batch:new_tensor({ 0.485, 0.456, 0.406 }):view(-1, 1, 1)
  local std = batch:new_tensor({ 0.229, 0.224, 0.225 }):view(-1, 1, 1)
  batch = batch:div_(255.0)
  return (batch - mean) / std
end

-- n images [3, size, size] with values in [0, 255) (what ToTensor and mul(255) give): a
-- linear congruential hash of the position, so the PyTorch twin makes the same bits
local function synthetic(n, seed)
  local size = args.image_size
  local idx = torch.arange(n * 3 * size * size, { dtype = 'int64' }) + seed * 1000003
  local v = (idx * 1103515245 + 12345):remainder(2147483648)
  return (v:to(torch.get_default_dtype()) / 2 ^ 31 * 255):reshape(n, 3, size, size)
end

-- neural_style.py's train
local train_dataset = torch.utils.data.TensorDataset(synthetic(4, 5))
local train_loader = torch.utils.data.DataLoader(train_dataset, { batch_size = args.batch_size })

local transformer = TransformerNet(8)
local vgg = Vgg(false)
if initial then
  local sd, parts = torch.load(initial), { transformer = {}, vgg = {} }
  for k, v in pairs(sd) do
    local net, name = k:match('^(%w+)%.(.*)$')
    parts[net][name] = v
  end
  transformer:load_state_dict(parts.transformer)
  vgg:load_state_dict(parts.vgg)
end
local optimizer = optim.Adam(transformer:parameters(), args.lr)
local mse_loss = nn.MSELoss()

local style = synthetic(1, 6)[1]
style = style:repeatTensor(args.batch_size, 1, 1, 1)   -- style.repeat(...): repeat is a Lua keyword

local features_style = vgg(normalize_batch(style))
local gram_style = {}
for i, y in ipairs(features_style) do gram_style[i] = gram_matrix(y) end

local record = { content = {}, style = {}, total = {} }
for e = 0, epochs - 1 do
  transformer:train()
  local agg_content_loss, agg_style_loss, count, batch_id = 0., 0., 0, -1
  for x in train_loader:iter() do
    batch_id = batch_id + 1
    local n_batch = #x
    count = count + n_batch
    optimizer:zero_grad()

    local y = transformer(x)

    y = normalize_batch(y)
    x = normalize_batch(x)

    local features_y = vgg(y)
    local features_x = vgg(x)

    local content_loss = args.content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)

    local style_loss = 0.
    for i, ft_y in ipairs(features_y) do
      local gm_s = gram_style[i]
      local gm_y = gram_matrix(ft_y)
      style_loss = style_loss + mse_loss(gm_y, gm_s[{ { 1, n_batch }, {}, {} }])
    end
    style_loss = style_loss * args.style_weight

    local total_loss = content_loss + style_loss
    total_loss:backward()
    optimizer:step()

    agg_content_loss = agg_content_loss + content_loss:item()
    agg_style_loss = agg_style_loss + style_loss:item()
    record.content[#record.content + 1] = content_loss:item()
    record.style[#record.style + 1] = style_loss:item()
    record.total[#record.total + 1] = total_loss:item()

    if (batch_id + 1) % args.log_interval == 0 then
      print(('%s\tEpoch %d:\t[%d/%d]\tcontent: %.6f\tstyle: %.6f\ttotal: %.6f'):format(
        os.date('%c'), e + 1, count, #train_dataset,
        agg_content_loss / (batch_id + 1),
        agg_style_loss / (batch_id + 1),
        (agg_content_loss + agg_style_loss) / (batch_id + 1)))
    end
  end
end

-- save model
transformer:eval()
local save_model_path = os.tmpname() .. ('_epoch_%d_%s_%s.safetensors'):format(epochs, args.content_weight, args.style_weight)
torch.save(transformer:state_dict(), save_model_path)
print('\nDone, trained model saved at', save_model_path)

-- stylize: the saved model on a new image
local style_model = TransformerNet(8)
style_model:load_state_dict(torch.load(save_model_path))
os.remove(save_model_path)
torch.no_grad(function()
  local output = style_model(synthetic(1, 7))
  record.stylized_sum = output:sum():item()
  print('stylized image', output:size(), output:clamp(0, 255):mean():item())
end)

if initial then
  -- every value the twin recorded, at full precision, for spec/programs2026_spec.lua
  for _, k in ipairs { 'content', 'style', 'total' } do
    local s = {}
    for i, v in ipairs(record[k]) do s[i] = ('%.17g'):format(v) end
    print(('record %s %s'):format(k, table.concat(s, ' ')))
  end
  print(('record stylized_sum %.17g'):format(record.stylized_sum))
end
