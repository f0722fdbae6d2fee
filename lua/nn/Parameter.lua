-- nn.Parameter(t [, requires_grad]): marks a tensor as a module parameter.  Assigning a
-- parameter to a field of a module registers it; the optimizer then finds it through
-- module:parameters().  A leaf tensor is marked and returned itself (now requiring grad);
-- a tensor that is the result of an operation is detached first, as PyTorch does.
local torch = require 'torch'
local utils = require 'nn.utils'

local marked = setmetatable({}, { __mode = 'k' })

local Parameter = {}

function Parameter.new(t, requires_grad)
  if t == nil then t = torch.empty(0) end
  if not torch.is_tensor(t) then
    utils.error(('nn.Parameter: expected a tensor, got %s'):format(type(t)))
  end
  if not t.is_leaf then t = t:detach() end
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
