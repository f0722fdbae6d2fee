-- optim.AdamW(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=1e-2,
-- amsgrad=false, maximize=false}): Adam
-- with decoupled weight decay (PyTorch 1.13's rule): before the Adam step,
--   p = p * (1 - lr * weight_decay)
-- and the gradient itself is left alone.
local torch = require 'torch'
local utils = require 'nn.utils'

local AdamW, parent = torch.class('optim.AdamW', 'optim.Adam')

-- the settings in PyTorch's positional order (optim.AdamW(params, 0.1)), or by name in a last table
function AdamW:__init(params, ...)
  local opts = utils.positional('optim.AdamW', { 'lr', 'betas', 'eps', 'weight_decay', 'amsgrad' }, ...)
  self:_setup(params, opts, 'optim.AdamW', 1e-2, true)
end

return AdamW
