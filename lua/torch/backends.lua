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

local function flag_table(name, flags)
  return setmetatable({}, {
    __index = function(_, k)
      local f = flags[k]
      if f then return f.get() end
      return nil
    end,
    __newindex = function(_, k, v)
      local f = flags[k]
      if not f then
        local names = {}
        for n in pairs(flags) do names[#names + 1] = n end
        table.sort(names)
        error(("%s has no setting '%s' (it has %s)"):format(name, tostring(k), table.concat(names, ', ')), 2)
      end
      if type(v) ~= 'boolean' then error(("%s.%s must be a boolean, got %s"):format(name, k, type(v)), 2) end
      f.set(v)
    end,
  })
end

backends.cudnn = flag_table('torch.backends.cudnn', FLAGS)

-- TF32: torch.backends.cuda.matmul.allow_tf32 (default false, as PyTorch's) lets CUDA
-- matrix products use TF32 tensor cores; torch.set_float32_matmul_precision('high' or
-- 'medium') is the same switch, 'highest' turns it off, and each reads the other.
-- torch.backends.cudnn.allow_tf32 (default true, as PyTorch's) is kept for the programs
-- that set it; cuDNN's convolutions take cuDNN's default math either way.
local precision = 'highest'
function backends._set_matmul_precision(p)
  C.set_float32_matmul_precision(p)   -- checks the name and sets the engine's switch
  precision = p
end
function backends._get_matmul_precision() return precision end

local reduced_fp16 = true
backends.cuda = {
  matmul = flag_table('torch.backends.cuda.matmul', {
    allow_tf32 = {
      get = function() return precision ~= 'highest' end,
      set = function(v) backends._set_matmul_precision(v and 'high' or 'highest') end,
    },
    allow_fp16_reduced_precision_reduction = {
      get = function() return reduced_fp16 end, set = function(v) reduced_fp16 = v end,
    },
  }),
  is_built = function() return C.cuda.is_built() end,
}

local cudnn_tf32 = true
FLAGS.allow_tf32 = { get = function() return cudnn_tf32 end, set = function(v) cudnn_tf32 = v end }
FLAGS.enabled = { get = function() return true end, set = function() end }

return backends
