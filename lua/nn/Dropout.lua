-- nn.Dropout([p=0.5] [, {inplace=false}]): while training zeroes each element with
-- probability p and scales the others by 1/(1-p); in eval mode returns its input unchanged.
-- inplace is accepted for PyTorch's signature; the result is always a new tensor.
local torch = require 'torch'
local F = require 'nn.functional'
local utils = require 'nn.utils'
local options = require 'torch.options'

local Dropout, parent = torch.class('nn.Dropout', 'nn.Module')

function Dropout:__init(p, opts)
  parent.__init(self)
  if type(p) == 'table' and opts == nil then p, opts = p.p, p end
  opts = options.check('nn.Dropout', opts, { p = options.none, inplace = false })
  if p == nil then p = 0.5 end
  if type(p) ~= 'number' or p < 0 or p > 1 then
    utils.error(('nn.Dropout: probability has to be between 0 and 1, but got %s'):format(tostring(p)))
  end
  self.p = p
  self.inplace = opts.inplace and true or false
end

function Dropout:forward(x)
  return F.dropout(x, self.p, self.training)
end

function Dropout:extra_repr()
  return ('p=%s, inplace=%s'):format(tostring(self.p), tostring(self.inplace))
end

return Dropout
