-- nn.Transformer: PyTorch 1.13's encoder-decoder model built from the layers of
-- lua/nn/transformer.lua, with its parameter names (encoder.layers.0.self_attn ...,
-- encoder.norm, decoder.norm), so its state_dicts load as they are.
--
-- nn.Transformer([{d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
--   dim_feedforward=2048, dropout=0.1, activation='relu', custom_encoder=, custom_decoder=,
--   layer_norm_eps=1e-5, batch_first=false, norm_first=false, device=, dtype=}])
-- m(src, tgt [, {src_mask=, tgt_mask=, memory_mask=, src_key_padding_mask=,
--   tgt_key_padding_mask=, memory_key_padding_mask=}]): src [S, N, E], tgt [T, N, E]
--   ([N, S, E], [N, T, E] with batch_first; unbatched [S, E], [T, E]) -> [T, N, E].
-- nn.Transformer.generate_square_subsequent_mask(sz): the [sz, sz] float mask with -inf
--   above the diagonal and 0 elsewhere.
local torch = require 'torch'
local nn = require 'nn'
local utils = require 'nn.utils'

-- a bad value as an error shows it: numbers and strings as they are, tensors by shape
local function show(v)
  if torch.is_tensor(v) then return 'a tensor of shape ' .. utils.shape(v) end
  if type(v) == 'table' then return 'a table' end
  return tostring(v)
end

local Transformer, parent = torch.class('nn.Transformer', 'nn.Module')

local DEFAULTS = { d_model = 512, nhead = 8, num_encoder_layers = 6, num_decoder_layers = 6, dim_feedforward = 2048,
                   dropout = 0.1, activation = 'relu', custom_encoder = false, custom_decoder = false,
                   layer_norm_eps = 1e-5, batch_first = false, norm_first = false, device = false, dtype = false }

function Transformer:__init(opts)
  parent.__init(self)
  local who = 'nn.Transformer'
  local o = utils.options(who, opts, DEFAULTS)
  for _, k in ipairs { 'd_model', 'nhead', 'num_encoder_layers', 'num_decoder_layers', 'dim_feedforward' } do
    if math.type(o[k]) ~= 'integer' or o[k] < 1 then
      utils.error(('%s: %s must be a positive integer, got %s'):format(who, k, show(o[k])))
    end
  end
  local layer_opts = { dim_feedforward = o.dim_feedforward, dropout = o.dropout, activation = o.activation,
                       layer_norm_eps = o.layer_norm_eps, batch_first = o.batch_first, norm_first = o.norm_first,
                       device = o.device or nil, dtype = o.dtype or nil }
  local norm_opts = { eps = o.layer_norm_eps, device = o.device or nil, dtype = o.dtype or nil }
  if o.custom_encoder then
    self.encoder = o.custom_encoder
  else
    self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(o.d_model, o.nhead, layer_opts), o.num_encoder_layers,
      { norm = nn.LayerNorm(o.d_model, norm_opts) })
  end
  if o.custom_decoder then
    self.decoder = o.custom_decoder
  else
    self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(o.d_model, o.nhead, layer_opts), o.num_decoder_layers,
      { norm = nn.LayerNorm(o.d_model, norm_opts) })
  end
  self.d_model, self.nhead, self.batch_first = o.d_model, o.nhead, o.batch_first
  self:_reset_parameters()
end

-- every matrix Xavier-uniform, as PyTorch's Transformer._reset_parameters
function Transformer:_reset_parameters()
  for _, p in ipairs(self:parameters()) do
    if p:dim() > 1 then nn.init.xavier_uniform_(p) end
  end
end

local FORWARD_OPTS = { src_mask = false, tgt_mask = false, memory_mask = false, src_key_padding_mask = false,
                       tgt_key_padding_mask = false, memory_key_padding_mask = false }

function Transformer:forward(src, tgt, opts)
  local o = utils.options('nn.Transformer', opts, FORWARD_OPTS)
  utils.check_tensor('nn.Transformer', src, 'src')
  utils.check_tensor('nn.Transformer', tgt, 'tgt')
  local batched = src:dim() == 3
  if src:dim() ~= tgt:dim() or (src:dim() ~= 2 and src:dim() ~= 3) then
    utils.error(('nn.Transformer: src and tgt must both be 3-D (batched) or 2-D (unbatched), got %s and %s')
      :format(utils.shape(src), utils.shape(tgt)))
  end
  local bd = self.batch_first and 1 or 2
  if batched and src:size(bd) ~= tgt:size(bd) then
    utils.error(('nn.Transformer: the batch number of src and tgt must be equal, got %d and %d'):format(src:size(bd), tgt:size(bd)))
  end
  if src:size(src:dim()) ~= self.d_model or tgt:size(tgt:dim()) ~= self.d_model then
    utils.error(('nn.Transformer: the feature number of src and tgt must be equal to d_model (%d), got %d and %d')
      :format(self.d_model, src:size(src:dim()), tgt:size(tgt:dim())))
  end
  local memory = self.encoder(src, { mask = o.src_mask or nil, src_key_padding_mask = o.src_key_padding_mask or nil })
  return self.decoder(tgt, memory, { tgt_mask = o.tgt_mask or nil, memory_mask = o.memory_mask or nil,
                                     tgt_key_padding_mask = o.tgt_key_padding_mask or nil,
                                     memory_key_padding_mask = o.memory_key_padding_mask or nil })
end

function Transformer.generate_square_subsequent_mask(sz, opts)
  if math.type(sz) ~= 'integer' or sz < 0 then
    utils.error(('nn.Transformer.generate_square_subsequent_mask: sz must be a non-negative integer, got %s'):format(show(sz)))
  end
  local o = utils.options('nn.Transformer.generate_square_subsequent_mask', opts, { device = false, dtype = false })
  return torch.full({ sz, sz }, -math.huge, { device = o.device or nil, dtype = o.dtype or nil }):triu(1)
end

return Transformer
