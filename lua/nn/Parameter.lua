-- nn.Parameter(t [, requires_grad]): a parameter made from a tensor: a new leaf sharing
-- t's storage (t itself is left as it was, as in PyTorch), marked as a parameter and
-- requiring grad.  Assigning a parameter to a field of a module registers it; the
-- optimizer then finds it through module:parameters().
local torch = require 'torch'
local utils = require 'nn.utils'

local marked = setmetatable({}, { __mode = 'k' })

local Parameter = {}

function Parameter.new(t, requires_grad)
  if t == nil then t = torch.empty(0) end
  if not torch.is_tensor(t) then
    utils.error(('nn.Parameter: expected a tensor, got %s'):format(type(t)))
  end
  t = t:detach()
  if requires_grad == nil then requires_grad = true end
  if requires_grad ~= t.requires_grad then t:requires_grad_(requires_grad) end
  marked[t] = true
  return t
end

-- True when t was made by nn.Parameter (or registered with register_parameter).
function Parameter.is(t)
  return marked[t] == true
end

return setmetatable(Parameter, {
  __call = function(_, t, requires_grad) return Parameter.new(t, requires_grad) end,
})
