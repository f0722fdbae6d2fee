-- nn: modules, layers, losses and nn.functional.
--
-- The table is registered before its parts load, so each part may require 'nn'.  Names
-- that are not loaded yet resolve on first use: nn.Foo requires 'nn.Foo' (so layers
-- defined in other files, nn.DataParallel for one, need no list here).
local torch = require 'torch'

local nn = {}
package.loaded.nn = nn

setmetatable(nn, {
  __index = function(t, name)
    if type(name) ~= 'string' then return nil end
    local ok, mod = pcall(require, 'nn.' .. name)
    if not ok then
      -- a module that exists but fails to load is an error worth seeing
      if not tostring(mod):find("module 'nn." .. name .. "' not found", 1, true) then error(mod, 2) end
      return nil
    end
    local v = rawget(t, name)
    if v == nil and mod ~= true then v = mod end
    rawset(t, name, v)
    return v
  end,
})

for _, name in ipairs {
  'Parameter', 'Module', 'functional', 'utils',
  'Linear', 'Sequential', 'ReLU', 'Sigmoid', 'Tanh', 'Dropout', 'Flatten', 'Identity',
  'MSELoss', 'CrossEntropyLoss', 'NLLLoss',
} do
  rawset(nn, name, require('nn.' .. name))
end
require 'nn.legacy'   -- Torch7's protocol: m:forward keeps m.output, backward, criteria
-- nn.init, the weight initializers (this file is the package's loader, so they live apart)
rawset(nn, 'init', require 'nn.initializers')

-- files that define several classes (torch.class puts each into nn)
for _, part in ipairs { 'activation', 'normalization', 'containers', 'Embedding', 'transformer', 'rnn',
                         'layers_more', 'losses_more', 'transformer_model' } do require('nn.' .. part) end

return nn
