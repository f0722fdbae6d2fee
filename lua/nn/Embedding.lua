-- nn.Embedding(num_embeddings, embedding_dim [, {padding_idx=, max_norm=, norm_type=2,
-- scale_grad_by_freq=false, sparse=false, device=, dtype=}]): a lookup table.  m(idx) is
-- the rows of weight [num_embeddings, embedding_dim] that the int64 indices idx name, with
-- shape idx.shape .. {embedding_dim}.  Indices and padding_idx count from 1.  weight is
-- drawn from N(0, 1) and its padding_idx row set to zeros, as PyTorch does; that row gets
-- no gradient.
local torch = require 'torch'
local Parameter = require 'nn.Parameter'
local F = require 'nn.functional'
local FL = require 'nn.functional_layers'
local utils = require 'nn.utils'

local Embedding, parent = torch.class('nn.Embedding', 'nn.Module')

local defaults = { padding_idx = false, max_norm = false, norm_type = 2, scale_grad_by_freq = false, sparse = false,
                   device = false, dtype = false, _weight = false }

local function check_size(what, n)
  if math.type(n) ~= 'integer' or n < 0 then
    utils.error(('nn.Embedding: %s must be a non-negative integer, got %s'):format(what, tostring(n)))
  end
end

function Embedding:__init(num_embeddings, embedding_dim, opts)
  parent.__init(self)
  check_size('num_embeddings', num_embeddings)
  check_size('embedding_dim', embedding_dim)
  local o = utils.options('nn.Embedding', opts, defaults)
  if o.sparse then utils.error('nn.Embedding: sparse gradients are not supported (use sparse=false)') end
  self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
  self.padding_idx = FL.padding_index('nn.Embedding', o.padding_idx, num_embeddings)
  self.max_norm, self.norm_type = o.max_norm or nil, o.norm_type
  self.scale_grad_by_freq, self.sparse = o.scale_grad_by_freq, false
  if o._weight then
    local w = o._weight
    if w:dim() ~= 2 or w:size(1) ~= num_embeddings or w:size(2) ~= embedding_dim then
      utils.error(('nn.Embedding: weight must have shape [%d, %d], got %s'):format(num_embeddings, embedding_dim,
        utils.shape(w)))
    end
    self.weight = Parameter(w)
  else
    self.weight = Parameter(torch.empty(num_embeddings, embedding_dim,
      { device = o.device or nil, dtype = o.dtype or nil }))
    self:reset_parameters()
  end
end

function Embedding:reset_parameters()
  torch.no_grad(function()
    self.weight:normal_(0, 1)
    if self.padding_idx then self.weight:narrow(1, self.padding_idx, 1):zero_() end
  end)
end

-- nn.Embedding.from_pretrained(weights [, {freeze=true, padding_idx=, max_norm=, ...}]):
-- an embedding whose weight is (shares the storage of) weights; frozen: no gradient.
function Embedding.from_pretrained(weights, opts)
  utils.check_tensor('nn.Embedding.from_pretrained', weights, 'weights')
  if weights:dim() ~= 2 then
    utils.error(('nn.Embedding.from_pretrained: weights must be 2-D, got shape %s'):format(utils.shape(weights)))
  end
  local o = utils.options('nn.Embedding.from_pretrained', opts,
    { freeze = true, padding_idx = false, max_norm = false, norm_type = 2, scale_grad_by_freq = false, sparse = false })
  local m = Embedding(weights:size(1), weights:size(2), {
    _weight = weights, padding_idx = o.padding_idx, max_norm = o.max_norm, norm_type = o.norm_type,
    scale_grad_by_freq = o.scale_grad_by_freq, sparse = o.sparse })
  m.weight:requires_grad_(not o.freeze)
  return m
end

function Embedding:forward(idx)
  return F.embedding(idx, self.weight, {
    padding_idx = self.padding_idx or false, max_norm = self.max_norm or false, norm_type = self.norm_type,
    scale_grad_by_freq = self.scale_grad_by_freq })
end

function Embedding:extra_repr()
  local s = ('%d, %d'):format(self.num_embeddings, self.embedding_dim)
  if self.padding_idx then s = s .. ', padding_idx=' .. self.padding_idx end
  if self.max_norm then s = s .. ', max_norm=' .. tostring(self.max_norm) end
  if self.norm_type ~= 2 then s = s .. ', norm_type=' .. tostring(self.norm_type) end
  if self.scale_grad_by_freq then s = s .. ', scale_grad_by_freq=true' end
  return s
end

return Embedding
