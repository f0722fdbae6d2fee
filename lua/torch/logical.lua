-- torch.logical_and, logical_or, logical_xor, logical_not (and the methods): bool tensors,
-- any nonzero element counting as true, with broadcasting, as PyTorch's.
local define = require('torch.composite').define

local M = {}

function M.install(torch)
  local function truth(who, v)
    if torch.is_tensor(v) then return v:ne(0) end
    error(('torch.%s: expected a tensor as the other argument, got %s'):format(who, type(v)), 3)
  end
  define(torch, 'logical_not', function(t) return t:eq(0) end)
  define(torch, 'logical_and', function(a, b) return a:ne(0) * truth('logical_and', b) end)
  define(torch, 'logical_or', function(a, b) return (a:ne(0):long() + truth('logical_or', b):long()):gt(0) end)
  define(torch, 'logical_xor', function(a, b) return a:ne(0):ne(truth('logical_xor', b)) end)
end

return M
