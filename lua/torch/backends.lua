-- torch.backends: the backends' switches.  torch.backends.cudnn.deterministic = true makes
-- cuDNN's convolutions use only deterministic algorithms (torch.use_deterministic_algorithms
-- does too); benchmark is kept for programs that set it: dplua's cuDNN path always takes
-- cuDNN's heuristic choice, it does not time the algorithms.
local C = require 'torch._C'

local backends = {}

local FLAGS = {
  deterministic = { get = C._get_cudnn_deterministic, set = C._set_cudnn_deterministic },
  benchmark = { get = C._get_cudnn_benchmark, set = C._set_cudnn_benchmark },
}

backends.cudnn = setmetatable({}, {
  __index = function(_, k)
    local f = FLAGS[k]
    if f then return f.get() end
    return nil
  end,
  __newindex = function(_, k, v)
    local f = FLAGS[k]
    if not f then
      error(("torch.backends.cudnn has no setting '%s' (it has deterministic and benchmark)"):format(tostring(k)), 2)
    end
    if type(v) ~= 'boolean' then
      error(("torch.backends.cudnn.%s must be a boolean, got %s"):format(k, type(v)), 2)
    end
    f.set(v)
  end,
})

return backends
