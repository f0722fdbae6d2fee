-- Attention and Transformers: F.scaled_dot_product_attention, nn.MultiheadAttention,
-- nn.TransformerEncoderLayer, nn.TransformerEncoder, nn.TransformerDecoderLayer and
-- nn.TransformerDecoder.
--
-- The attention itself is one fused engine op (torch._C.sdpa, src/attention.c) that never
-- stores the L x S attention matrix; the rest is a composition of the engine's
-- differentiable ops (views, linear, layer_norm, dropout).  nn.MultiheadAttention asked
-- for its weights computes them with matmul and softmax instead.  Its masks are turned
-- into additive float masks (0 where attention is allowed, -inf where not), as PyTorch
-- 1.13's multi_head_attention_forward does; a row whose keys are all masked comes out NaN.
local torch = require 'torch'
local Parameter = require 'nn.Parameter'
local F = require 'nn.functional'
local utils = require 'nn.utils'
local amp = require 'torch.amp'
local nn = require 'nn'
local C = require 'torch._C'

local M = {}

local function check_float(who, what, x)
  utils.check_tensor(who, x, what)
  if not torch.FLOAT_DTYPES[x.dtype] then
    utils.error(('%s: %s must be a floating point tensor, got %s'):format(who, what, x.dtype))
  end
end

-- An additive float mask like x from mask: a bool mask is 0 where keep(mask) holds and -inf
-- elsewhere (keep_value: the boolean that means "attend"); a float mask is used as it is.
local function additive(who, what, mask, like, keep_value)
  utils.check_tensor(who, mask, what)
  if mask.dtype == 'bool' then
    local zero = torch.zeros({}, { dtype = like.dtype, device = like.device })
    local ninf = torch.full({}, -math.huge, { dtype = like.dtype, device = like.device })
    if keep_value then return torch.where(mask, zero, ninf) end
    return torch.where(mask, ninf, zero)
  end
  if mask.dtype ~= like.dtype then
    utils.error(('%s: %s must be bool or of the query\'s dtype %s, got %s'):format(who, what, like.dtype, mask.dtype))
  end
  return mask
end

local function causal_mask(L, S, like)
  local keep = torch.ones(L, S, { dtype = 'bool', device = like.device }):tril()
  return additive('causal mask', 'mask', keep, like, true)
end
M.causal_mask = causal_mask

-- The leading (batch) dims of q, k, v and the mask broadcast together, as matmul and the
-- mask's addition do in the composed formula; the fused op takes one set of leading dims.
local function broadcast_batch(who, q, k, v, mask)
  local shapes = { q:size():totable(), k:size():totable(), v:size():totable() }
  local n = 0
  for _, s in ipairs(shapes) do n = math.max(n, #s - 2) end
  if mask and mask:dim() > 2 then n = math.max(n, mask:dim() - 2) end
  local batch = {}
  local function join(s, lead)
    for d = 1, lead do
      local i = n - lead + d
      local x = s[d]
      if batch[i] == nil or batch[i] == 1 then batch[i] = x
      elseif x ~= 1 and x ~= batch[i] then return false end
    end
    return true
  end
  for i = 1, n do batch[i] = 1 end
  local ok = true
  for _, s in ipairs(shapes) do ok = join(s, #s - 2) and ok end
  if not ok then
    utils.error(('%s: the leading dims of query, key and value must broadcast, got shapes %s, %s and %s')
      :format(who, utils.shape(q), utils.shape(k), utils.shape(v)))
  end
  if mask and mask:dim() > 2 then
    local ms = mask:size():totable()
    if not join(ms, #ms - 2) then return q, k, v, false end   -- the op reports the mask's shape
  end
  local function widen(t)
    local s = t:size():totable()
    local want = {}
    for i = 1, n do want[i] = batch[i] end
    want[n + 1], want[n + 2] = s[#s - 1], s[#s]
    for i = 1, n + 2 do if want[i] ~= (s[#s - (n + 2) + i] or -1) then return t:expand(table.unpack(want)) end end
    return t
  end
  return widen(q), widen(k), widen(v), true
end

-- F.scaled_dot_product_attention(q, k, v [, {attn_mask=, dropout_p=0, is_causal=false,
-- scale=1/sqrt(E)}]): softmax(q k^T * scale + mask) v for q [..., L, E], k [..., S, E],
-- v [..., S, Ev] (PyTorch 2.x's semantics: a bool attn_mask is true where attention is
-- allowed, a float one is added to the scores; is_causal masks out the keys after each
-- query).  One fused op (src/attention.c): the L x S attention matrix is never stored, in
-- the forward or for the backward; a row whose keys are all masked comes out NaN.
function M.scaled_dot_product_attention(q, k, v, opts)
  local who = 'scaled_dot_product_attention'
  q, k, v = amp.cast_lower(q, k, v)   -- autocast: runs in its lower precision dtype
  local o = utils.options(who, opts, { attn_mask = false, dropout_p = 0, is_causal = false, scale = false })
  check_float(who, 'query', q); check_float(who, 'key', k); check_float(who, 'value', v)
  if q:dim() < 2 or k:dim() < 2 or v:dim() < 2 then
    utils.error(('%s: query, key and value need at least 2 dimensions [..., L, E], got shapes %s, %s and %s')
      :format(who, utils.shape(q), utils.shape(k), utils.shape(v)))
  end
  local E, S = q:size(q:dim()), k:size(k:dim() - 1)
  if k:size(k:dim()) ~= E then
    utils.error(('%s: the last dimension of key (%d) must match that of query (%d); shapes %s and %s')
      :format(who, k:size(k:dim()), E, utils.shape(q), utils.shape(k)))
  end
  if v:size(v:dim() - 1) ~= S then
    utils.error(('%s: key and value must have the same sequence length, got %d and %d (shapes %s and %s)')
      :format(who, S, v:size(v:dim() - 1), utils.shape(k), utils.shape(v)))
  end
  if type(o.dropout_p) ~= 'number' or o.dropout_p < 0 or o.dropout_p > 1 then
    utils.error(('%s: dropout_p must be a number in [0, 1], got %s'):format(who, tostring(o.dropout_p)))
  end
  if o.scale and (type(o.scale) ~= 'number' or not (o.scale > 0)) then
    utils.error(('%s: scale must be a positive number, got %s'):format(who, tostring(o.scale)))
  end
  if o.is_causal and o.attn_mask then
    utils.error(('%s: give either attn_mask or is_causal=true, not both'):format(who))
  end
  local mask = o.attn_mask or nil
  if mask then
    utils.check_tensor(who, mask, 'attn_mask')
    if mask.dtype ~= 'bool' and mask.dtype ~= q.dtype then
      utils.error(('%s: attn_mask must be bool or of the query\'s dtype %s, got %s'):format(who, q.dtype, mask.dtype))
    end
  end
  q, k, v = broadcast_batch(who, q, k, v, mask)
  local dtype = q.dtype
  if dtype == 'float16' or dtype == 'bfloat16' then
    -- the 2-byte types compute in float32 inside, as every other op does (src/half.c)
    q, k, v = q:float(), k:float(), v:float()
    if mask and mask.dtype ~= 'bool' then mask = mask:float() end
    return C.sdpa(q, k, v, mask, o.is_causal, o.dropout_p, o.scale or nil):to(dtype)
  end
  return C.sdpa(q, k, v, mask, o.is_causal, o.dropout_p, o.scale or nil)
end
F.scaled_dot_product_attention = M.scaled_dot_product_attention

-- Deep copies -----------------------------------------------------------------------------

-- A copy of module m that shares nothing with it: its tensors cloned (parameters stay
-- parameters, with the same requires_grad), its tables copied, functions shared.
local function deepcopy(v, seen)
  if torch.is_tensor(v) then
    if seen[v] then return seen[v] end
    local c = v:detach():clone()
    if Parameter.is(v) then c = Parameter(c, v.requires_grad) end
    seen[v] = c
    return c
  end
  if type(v) ~= 'table' then return v end
  if seen[v] then return seen[v] end
  local c = {}
  seen[v] = c
  for key, x in next, v do rawset(c, deepcopy(key, seen), deepcopy(x, seen)) end
  return setmetatable(c, getmetatable(v))
end
M.deepcopy = function(m) return deepcopy(m, {}) end

-- nn.MultiheadAttention ------------------------------------------------------------------

-- nn.MultiheadAttention(embed_dim, num_heads [, {dropout=0, bias=true, batch_first=false,
-- device=, dtype=}]): PyTorch's parameters in_proj_weight [3E, E], in_proj_bias [3E] and
-- out_proj (an nn.Linear), initialised as PyTorch's (xavier_uniform_ and zero biases).
local MHA, parent = torch.class('nn.MultiheadAttention', 'nn.Module')
M.MultiheadAttention = MHA

-- nn.MultiheadAttention(embed_dim, num_heads [, dropout, bias, add_bias_kv, add_zero_attn,
-- kdim, vdim, batch_first] [, opts]): PyTorch's positional order, or options
local MHA_POSITIONAL = { 'dropout', 'bias', 'add_bias_kv', 'add_zero_attn', 'kdim', 'vdim', 'batch_first' }
function MHA:__init(embed_dim, num_heads, ...)
  parent.__init(self)
  local who = 'nn.MultiheadAttention'
  local opts = utils.positional(who, MHA_POSITIONAL, ...)
  for what, n in pairs { embed_dim = embed_dim, num_heads = num_heads } do
    if math.type(n) ~= 'integer' or n < 1 then
      utils.error(('%s: %s must be a positive integer, got %s'):format(who, what, tostring(n)))
    end
  end
  if embed_dim % num_heads ~= 0 then
    utils.error(('%s: embed_dim (%d) must be divisible by num_heads (%d)'):format(who, embed_dim, num_heads))
  end
  local o = utils.options(who, opts, { dropout = 0, bias = true, batch_first = false, device = false, dtype = false,
                                       add_bias_kv = false, add_zero_attn = false, kdim = false, vdim = false })
  for _, k in ipairs { 'add_bias_kv', 'add_zero_attn' } do
    if o[k] then utils.error(('%s: %s = true is not supported (only false)'):format(who, k)) end
  end
  for _, k in ipairs { 'kdim', 'vdim' } do
    if o[k] and o[k] ~= embed_dim then
      utils.error(('%s: %s = %s different from embed_dim (%d) is not supported'):format(who, k, tostring(o[k]), embed_dim))
    end
  end
  local topts = { device = o.device or nil, dtype = o.dtype or nil }
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
  self.dropout, self.batch_first = o.dropout, o.batch_first
  self.in_proj_weight = Parameter(torch.empty(3 * embed_dim, embed_dim, topts))
  if o.bias then self.in_proj_bias = Parameter(torch.empty(3 * embed_dim, topts)) end
  self.out_proj = nn.Linear(embed_dim, embed_dim, { bias = o.bias, device = o.device, dtype = o.dtype })
  self:reset_parameters()
end

function MHA:reset_parameters()
  nn.init.xavier_uniform_(self.in_proj_weight)
  torch.no_grad(function()
    if self.in_proj_bias ~= nil then self.in_proj_bias:zero_() end
    if self.out_proj.bias ~= nil then self.out_proj.bias:zero_() end
  end)
end

local function check_input(self, what, x)
  check_float(tostring(self), what, x)
  local E = self.embed_dim
  if (x:dim() ~= 2 and x:dim() ~= 3) or x:size(x:dim()) ~= E then
    utils.error(('%s: %s must be [L, N, %d] (or [N, L, %d] with batch_first, or unbatched [L, %d]), got shape %s')
      :format(tostring(self), what, E, E, E, utils.shape(x)))
  end
end

-- The additive mask of attn_mask and key_padding_mask (nil when neither is given), shaped
-- to broadcast to [N, H, L, S]: attn_mask [L, S] or [N, H, L, S], key_padding_mask
-- [N, 1, 1, S], their sum when both are given.
local function mha_mask(name, o, like, L, S, N, H)
  local mask
  if o.attn_mask then
    mask = additive(name, 'attn_mask', o.attn_mask, like, false)
    local ok = (mask:dim() == 2 and mask:size(1) == L and mask:size(2) == S)
      or (mask:dim() == 3 and mask:size(1) == N * H and mask:size(2) == L and mask:size(3) == S)
    if not ok then
      utils.error(('%s: attn_mask must be [%d, %d] or [%d, %d, %d] (N * num_heads, L, S), got shape %s')
        :format(name, L, S, N * H, L, S, utils.shape(mask)))
    end
    if mask:dim() == 3 then mask = mask:reshape(N, H, L, S) end
  end
  if o.key_padding_mask then
    local kpm = additive(name, 'key_padding_mask', o.key_padding_mask, like, false)
    if kpm:dim() ~= 2 or kpm:size(1) ~= N or kpm:size(2) ~= S then
      utils.error(('%s: key_padding_mask must be [%d, %d] (N, S), got shape %s')
        :format(name, N, S, utils.shape(o.key_padding_mask)))
    end
    kpm = kpm:reshape(N, 1, 1, S)
    mask = mask and mask + kpm or kpm
  end
  return mask
end

-- forward(query, key, value [, {key_padding_mask=, need_weights=true, attn_mask=,
-- average_attn_weights=true, is_causal=false}]): returns the output and the attention
-- weights (averaged over heads, or per head [N, H, L, S]; nil when need_weights is false).
-- As PyTorch 1.13: a bool attn_mask or key_padding_mask is true where attention is NOT
-- allowed; a float one is added.  attn_mask is [L, S] or [N * H, L, S]; key_padding_mask is
-- [N, S] (or [S]); is_causal without an attn_mask masks the keys after each query.
-- Without weights the heads go through the fused F.scaled_dot_product_attention (no L x S
-- matrix kept); with them, through matmul and softmax, whose result is the weights.
-- forward(query, key, value [, key_padding_mask, need_weights, attn_mask,
-- average_attn_weights, is_causal] [, opts]): PyTorch's positional order, or the options
local MHA_FORWARD = { 'key_padding_mask', 'need_weights', 'attn_mask', 'average_attn_weights', 'is_causal' }
function MHA:forward(query, key, value, ...)
  local name = tostring(self)
  local o = utils.options(name, utils.positional(name, MHA_FORWARD, ...),
                          { key_padding_mask = false, need_weights = true, attn_mask = false,
                            average_attn_weights = true, is_causal = false })
  check_input(self, 'query', query); check_input(self, 'key', key); check_input(self, 'value', value)
  if key:dim() ~= query:dim() or value:dim() ~= query:dim() then
    utils.error(('%s: query, key and value must all be batched (3-D) or all unbatched (2-D), got shapes %s, %s and %s')
      :format(name, utils.shape(query), utils.shape(key), utils.shape(value)))
  end
  local batched = query:dim() == 3
  if not batched then
    query, key, value = query:unsqueeze(2), key:unsqueeze(2), value:unsqueeze(2)
    if o.key_padding_mask then o.key_padding_mask = o.key_padding_mask:unsqueeze(1) end
  elseif self.batch_first then
    query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2)
  end
  -- from here on [L, N, E]
  local L, N, E = query:size(1), query:size(2), self.embed_dim
  local S, H, hd = key:size(1), self.num_heads, self.head_dim
  if key:size(2) ~= N or value:size(2) ~= N then
    utils.error(('%s: query, key and value must have the same batch size, got %d, %d and %d')
      :format(name, N, key:size(2), value:size(2)))
  end
  if value:size(1) ~= S then
    utils.error(('%s: key and value must have the same sequence length, got %d and %d'):format(name, S, value:size(1)))
  end

  local w = self.in_proj_weight
  local b = self.in_proj_bias
  local function proj(x, i)
    return F.linear(x, w:narrow(1, (i - 1) * E + 1, E), b and b:narrow(1, (i - 1) * E + 1, E) or nil)
  end
  -- [L, N, E] -> [N, H, L, hd]
  local function heads(x, len) return x:reshape(len, N, H, hd):permute(2, 3, 1, 4) end
  local q, k, v = heads(proj(query, 1), L), heads(proj(key, 2), S), heads(proj(value, 3), S)

  -- the causal flag of the fused op, unless other masks join it
  local causal = o.is_causal and not o.attn_mask
  if causal and (o.need_weights or o.key_padding_mask) then
    o.attn_mask, causal = causal_mask(L, S, q), false
  end
  local mask = mha_mask(name, o, q, L, S, N, H)
  local p = self.training and self.dropout or 0
  local out, attn
  if o.need_weights then
    local scores = torch.matmul(q * (1 / math.sqrt(hd)), k:transpose(3, 4))   -- [N, H, L, S]
    if mask then scores = scores + mask end
    attn = F.softmax(scores, 4)
    if p > 0 then attn = F.dropout(attn, p, true) end
    out = torch.matmul(attn, v)
  else
    out = M.scaled_dot_product_attention(q, k, v, { attn_mask = mask, is_causal = causal, dropout_p = p })
  end
  out = self.out_proj(out:permute(3, 1, 2, 4):reshape(L, N, E))

  local weights
  if o.need_weights then
    weights = attn
    if o.average_attn_weights then weights = weights:mean(2) end
    if not batched then weights = weights:squeeze(1) end
  end
  if not batched then
    out = out:squeeze(2)
  elseif self.batch_first then
    out = out:transpose(1, 2)
  end
  return out, weights
end

function MHA:extra_repr()
  return ('embed_dim=%d, num_heads=%d, dropout=%s, batch_first=%s'):format(self.embed_dim, self.num_heads,
    tostring(self.dropout), tostring(self.batch_first))
end

-- nn.TransformerEncoderLayer -------------------------------------------------------------

-- nn.TransformerEncoderLayer(d_model, nhead [, {dim_feedforward=2048, dropout=0.1,
-- activation='relu' | 'gelu' | function, layer_norm_eps=1e-5, batch_first=false,
-- norm_first=false, device=, dtype=}]): self-attention and a feed-forward block, each with
-- a residual connection and a LayerNorm (after it, or before it with norm_first).
local EncoderLayer = torch.class('nn.TransformerEncoderLayer', 'nn.Module')
M.TransformerEncoderLayer = EncoderLayer

local function activation_fn(who, a)
  if a == 'relu' then return F.relu end
  if a == 'gelu' then return F.gelu end
  if type(a) == 'function' then return a end
  if type(a) == 'table' and getmetatable(a) and getmetatable(a).__call then return a end
  utils.error(("%s: activation must be 'relu', 'gelu' or a function, got %s"):format(who, tostring(a)))
end

-- PyTorch's positional order after d_model and nhead, for the encoder and decoder layers
M.LAYER_POSITIONAL = { 'dim_feedforward', 'dropout', 'activation', 'layer_norm_eps', 'batch_first', 'norm_first' }

function EncoderLayer:__init(d_model, nhead, ...)
  parent.__init(self)
  local who = 'nn.TransformerEncoderLayer'
  local opts = utils.positional(who, M.LAYER_POSITIONAL, ...)
  local o = utils.options(who, opts, { dim_feedforward = 2048, dropout = 0.1, activation = 'relu',
    layer_norm_eps = 1e-5, batch_first = false, norm_first = false, device = false, dtype = false })
  local t = { device = o.device or nil, dtype = o.dtype or nil }
  self.activation = activation_fn(who, o.activation)
  self.activation_name = type(o.activation) == 'string' and o.activation or 'custom'
  self.norm_first, self.batch_first = o.norm_first, o.batch_first
  self.self_attn = MHA(d_model, nhead, { dropout = o.dropout, batch_first = o.batch_first,
                                         device = t.device, dtype = t.dtype })
  self.linear1 = nn.Linear(d_model, o.dim_feedforward, t)
  self.dropout = nn.Dropout(o.dropout)
  self.linear2 = nn.Linear(o.dim_feedforward, d_model, t)
  self.norm1 = nn.LayerNorm(d_model, { eps = o.layer_norm_eps, device = t.device, dtype = t.dtype })
  self.norm2 = nn.LayerNorm(d_model, { eps = o.layer_norm_eps, device = t.device, dtype = t.dtype })
  self.dropout1 = nn.Dropout(o.dropout)
  self.dropout2 = nn.Dropout(o.dropout)
end

local function sa_block(self, x, mask, kpm, causal)
  local out = self.self_attn(x, x, x, { attn_mask = mask, key_padding_mask = kpm, need_weights = false,
                                        is_causal = causal })
  return self.dropout1(out)
end

-- the feed-forward block; out_dropout: dropout2 in the encoder layer, dropout3 in the decoder's
local function ff_block(self, x, out_dropout)
  return out_dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

-- forward(src [, {src_mask=, src_key_padding_mask=, is_causal=false}]): masks as in
-- nn.MultiheadAttention; is_causal without a src_mask applies the causal mask.
function EncoderLayer:forward(src, opts)
  local o = utils.options(tostring(self), opts, { src_mask = false, src_key_padding_mask = false, is_causal = false })
  check_float(tostring(self), 'src', src)
  local mask = o.src_mask or nil
  local causal = o.is_causal and not mask   -- the fused attention's causal flag, no mask made
  local kpm = o.src_key_padding_mask or nil
  local x = src
  if self.norm_first then
    x = x + sa_block(self, self.norm1(x), mask, kpm, causal)
    x = x + ff_block(self, self.norm2(x), self.dropout2)
  else
    x = self.norm1(x + sa_block(self, x, mask, kpm, causal))
    x = self.norm2(x + ff_block(self, x, self.dropout2))
  end
  return x
end

function EncoderLayer:extra_repr()
  return ('activation=%s, norm_first=%s, batch_first=%s'):format(self.activation_name, tostring(self.norm_first),
    tostring(self.batch_first))
end

-- nn.TransformerEncoder(encoder_layer, num_layers [, {norm=}]): num_layers deep copies of
-- encoder_layer in self.layers (an nn.ModuleList), then the optional norm module.
local Encoder = torch.class('nn.TransformerEncoder', 'nn.Module')
M.TransformerEncoder = Encoder

-- self.layers = num_layers deep copies of layer, self.norm = opts.norm (who, what: for errors)
local function stack_init(self, who, what, layer, num_layers, opts)
  parent.__init(self)
  if not parent.is_module(layer) then
    utils.error(('%s: %s must be a module, got %s'):format(who, what, type(layer)))
  end
  if math.type(num_layers) ~= 'integer' or num_layers < 1 then
    utils.error(('%s: num_layers must be a positive integer, got %s'):format(who, tostring(num_layers)))
  end
  local o = utils.options(who, opts, { norm = false })
  local layers = {}
  for i = 1, num_layers do layers[i] = M.deepcopy(layer) end
  self.layers = nn.ModuleList(layers)
  self.num_layers = num_layers
  if o.norm then self.norm = o.norm end
end

function Encoder:__init(encoder_layer, num_layers, opts)
  stack_init(self, 'nn.TransformerEncoder', 'encoder_layer', encoder_layer, num_layers, opts)
end

-- forward(src [, {mask=, src_key_padding_mask=, is_causal=false}])
function Encoder:forward(src, opts)
  local o = utils.options(tostring(self), opts, { mask = false, src_key_padding_mask = false, is_causal = false })
  local x = src
  for _, layer in ipairs(self.layers) do
    x = layer(x, { src_mask = o.mask or nil, src_key_padding_mask = o.src_key_padding_mask or nil,
                   is_causal = o.is_causal })
  end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

-- nn.TransformerDecoderLayer --------------------------------------------------------------

-- nn.TransformerDecoderLayer(d_model, nhead [, opts as nn.TransformerEncoderLayer's]):
-- self-attention, attention over the encoder's output (memory) and a feed-forward block,
-- each with a residual connection and a LayerNorm (norm1, norm2, norm3).
local DecoderLayer = torch.class('nn.TransformerDecoderLayer', 'nn.Module')
M.TransformerDecoderLayer = DecoderLayer

function DecoderLayer:__init(d_model, nhead, ...)
  parent.__init(self)
  local who = 'nn.TransformerDecoderLayer'
  local opts = utils.positional(who, M.LAYER_POSITIONAL, ...)
  local o = utils.options(who, opts, { dim_feedforward = 2048, dropout = 0.1, activation = 'relu',
    layer_norm_eps = 1e-5, batch_first = false, norm_first = false, device = false, dtype = false })
  local t = { device = o.device or nil, dtype = o.dtype or nil }
  self.activation = activation_fn(who, o.activation)
  self.activation_name = type(o.activation) == 'string' and o.activation or 'custom'
  self.norm_first, self.batch_first = o.norm_first, o.batch_first
  local mha_opts = { dropout = o.dropout, batch_first = o.batch_first, device = t.device, dtype = t.dtype }
  self.self_attn = MHA(d_model, nhead, mha_opts)
  self.multihead_attn = MHA(d_model, nhead, mha_opts)
  self.linear1 = nn.Linear(d_model, o.dim_feedforward, t)
  self.dropout = nn.Dropout(o.dropout)
  self.linear2 = nn.Linear(o.dim_feedforward, d_model, t)
  local ln_opts = { eps = o.layer_norm_eps, device = t.device, dtype = t.dtype }
  -- one assignment each: Lua's multiple assignment may register them in any order
  self.norm1 = nn.LayerNorm(d_model, ln_opts)
  self.norm2 = nn.LayerNorm(d_model, ln_opts)
  self.norm3 = nn.LayerNorm(d_model, ln_opts)
  self.dropout1 = nn.Dropout(o.dropout)
  self.dropout2 = nn.Dropout(o.dropout)
  self.dropout3 = nn.Dropout(o.dropout)
end

local function mha_block(self, x, mem, mask, kpm)
  local out = self.multihead_attn(x, mem, mem, { attn_mask = mask, key_padding_mask = kpm, need_weights = false })
  return self.dropout2(out)
end

local decoder_opts = { tgt_mask = false, memory_mask = false, tgt_key_padding_mask = false,
                       memory_key_padding_mask = false, tgt_is_causal = false }

-- forward(tgt, memory [, {tgt_mask=, memory_mask=, tgt_key_padding_mask=,
-- memory_key_padding_mask=, tgt_is_causal=false}]): tgt_is_causal without a tgt_mask
-- applies the causal mask to the self-attention.
function DecoderLayer:forward(tgt, memory, opts)
  local o = utils.options(tostring(self), opts, decoder_opts)
  check_float(tostring(self), 'tgt', tgt)
  check_float(tostring(self), 'memory', memory)
  local tmask = o.tgt_mask or nil
  local causal = o.tgt_is_causal and not tmask
  local tkpm, mmask, mkpm = o.tgt_key_padding_mask or nil, o.memory_mask or nil, o.memory_key_padding_mask or nil
  local x = tgt
  if self.norm_first then
    x = x + sa_block(self, self.norm1(x), tmask, tkpm, causal)
    x = x + mha_block(self, self.norm2(x), memory, mmask, mkpm)
    x = x + ff_block(self, self.norm3(x), self.dropout3)
  else
    x = self.norm1(x + sa_block(self, x, tmask, tkpm, causal))
    x = self.norm2(x + mha_block(self, x, memory, mmask, mkpm))
    x = self.norm3(x + ff_block(self, x, self.dropout3))
  end
  return x
end

DecoderLayer.extra_repr = EncoderLayer.extra_repr

-- nn.TransformerDecoder(decoder_layer, num_layers [, {norm=}]): as nn.TransformerEncoder;
-- forward(tgt, memory [, the decoder layer's options]).
local Decoder = torch.class('nn.TransformerDecoder', 'nn.Module')
M.TransformerDecoder = Decoder

function Decoder:__init(decoder_layer, num_layers, opts)
  stack_init(self, 'nn.TransformerDecoder', 'decoder_layer', decoder_layer, num_layers, opts)
end

function Decoder:forward(tgt, memory, opts)
  local o = utils.options(tostring(self), opts, decoder_opts)
  local x = tgt
  for _, layer in ipairs(self.layers) do x = layer(x, memory, o) end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

return M
