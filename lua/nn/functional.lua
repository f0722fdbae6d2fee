-- nn.functional: the stateless forms of the layers and losses.  Most are one engine call;
-- the layer classes (nn.Linear, nn.MSELoss ...) call these.
local torch = require 'torch'
local C = require 'torch._C'
local utils = require 'nn.utils'

local F = {}

local check = utils.check_tensor

function F.linear(x, weight, bias)
  check('linear', x, 'input')
  check('linear', weight, 'weight')
  if bias ~= nil then check('linear', bias, 'bias') end
  return C.linear(x, weight, bias)
end

-- relu(x [, inplace]) or relu(x, {inplace = true}): with inplace, x itself is overwritten and
-- returned (PyTorch's F.relu(x, inplace=True)); autograd records it as any in-place op
function F.relu(x, ...)
  check('relu', x)
  if utils.activation_args('relu', { 'inplace' }, { inplace = false }, ...).inplace then return x:relu_() end
  return x:relu()
end
function F.sigmoid(x) return check('sigmoid', x):sigmoid() end
function F.tanh(x) return check('tanh', x):tanh() end

local function check_dim(who, dim)
  if math.type(dim) ~= 'integer' then
    utils.error(('%s: dim must be an integer (1-based), got %s'):format(who, tostring(dim)))
  end
end

function F.softmax(x, dim)
  check('softmax', x); check_dim('softmax', dim)
  return x:softmax(dim)
end

function F.log_softmax(x, dim)
  check('log_softmax', x); check_dim('log_softmax', dim)
  return x:log_softmax(dim)
end

-- Zeroes each element with probability p while training and scales the rest by 1/(1-p).
function F.dropout(x, p, training, inplace)
  check('dropout', x)
  p, training = utils.dropout_args('dropout', p, training, inplace)
  if p == nil then p = 0.5 end
  if type(p) ~= 'number' or p < 0 or p > 1 then
    utils.error(('dropout: probability has to be between 0 and 1, but got %s'):format(tostring(p)))
  end
  if training == nil then training = true end
  return C.dropout(x, p, training and true or false)
end

-- The reduction of a loss: opts is nil, a string, or {reduction=}.
local function reduction(who, opts)
  local r = opts
  if type(opts) == 'table' then r = utils.options(who, opts, { reduction = 'mean' }).reduction end
  r = r or 'mean'
  if r ~= 'mean' and r ~= 'sum' and r ~= 'none' then
    utils.error(("%s: reduction must be 'mean', 'sum' or 'none', got %s"):format(who, tostring(r)))
  end
  return r
end
F._reduction = reduction

function F.mse_loss(input, target, opts)
  check('mse_loss', input, 'input'); check('mse_loss', target, 'target')
  return C.mse_loss(input, target, reduction('mse_loss', opts))
end

-- The other losses (l1, smooth_l1, huber, binary_cross_entropy[_with_logits], kl_div) and
-- cross_entropy / nll_loss with their options: lua/nn/losses.lua.
for name, fn in pairs(require 'nn.losses') do
  if type(fn) == 'function' and name ~= 'options' and name ~= 'reduce' then F[name] = fn end
end

-- pooling, batch_norm, dropout2d, pad, interpolate
require('nn.functional_vision')(F)

-- conv1d, conv2d, conv_transpose1d, conv_transpose2d (nn/convolution.lua)
local conv_functional = require('nn.convolution').functional
require('torch.amp').install_ops(conv_functional)   -- the conv layers call these themselves
for name, f in pairs(conv_functional) do F[name] = f end

-- Embedding, normalization and activations (lua/nn/functional_layers.lua) --------------
require('nn.functional_layers').install(F)

-- the rest of PyTorch's activations, shuffles, 1-d pools, distances, instance and local
-- response norms, feature dropouts, unfold / fold (lua/nn/functional_more.lua)
require('nn.functional_more').install(F)
-- affine_grid and grid_sample (lua/nn/functional_grid.lua)
require('nn.functional_grid').install(F)
-- the margin, embedding and likelihood losses (lua/nn/losses_more.lua)
require('nn.losses_more').install(F)
-- PyTorch's in-place forms: F.relu_(x), F.elu_(x [, alpha]), F.leaky_relu_(x [, negative_slope]),
-- F.hardtanh_(x [, min_val [, max_val]]), F.threshold_(x, threshold, value), F.celu_(x [, alpha]),
-- F.selu_(x): the activation with inplace = true (its options also by name in a table)
for _, p in ipairs { { 'relu', 0 }, { 'elu', 1 }, { 'leaky_relu', 1 }, { 'hardtanh', 2 }, { 'threshold', 2 },
                     { 'celu', 1 }, { 'selu', 0 } } do
  local name, nparams = p[1], p[2]
  F[name .. '_'] = function(x, ...)
    local n = select('#', ...)
    local last = n > 0 and select(n, ...) or nil
    if type(last) == 'table' and getmetatable(last) == nil then
      local opts = {}
      for k, v in pairs(last) do opts[k] = v end
      if opts.inplace ~= nil then utils.error(('%s_: unknown option inplace (it is always in place)'):format(name)) end
      opts.inplace = true
      local args = table.pack(...)
      args[n] = opts
      return F[name](x, table.unpack(args, 1, n))
    end
    if n > nparams then utils.error(('%s_: expected at most %d options after the input, got %d'):format(name, nparams, n)) end
    local args = table.pack(...)
    args[nparams + 1] = true
    return F[name](x, table.unpack(args, 1, nparams + 1))
  end
end

-- the ops whose arguments come from lua/torch/signatures.lua
require('torch.signatures').install_functional(F)
-- the compositions that compute float16 and bfloat16 in float32 and round once
-- (lua/torch/half.lua)
local half = require 'torch.half'
half.wrap(F, half.FUNCTIONAL)
-- autocast's casts (lua/torch/amp.lua), last: they wrap what the lines above installed
require('torch.amp').install_ops(F)

return F
