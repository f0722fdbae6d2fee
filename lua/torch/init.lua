-- torch: the module users require.  The tensor engine's functions come from torch._C (the
-- C binding); this file adds the Lua parts (classes, Size, printing, Timer, dtype names)
-- and reaches nn, optim, torch.data, torch.distributed and torch.autograd lazily, since
-- those modules require 'torch' themselves.
local C = require 'torch._C'
local class = require 'torch.class'
local Size = require 'torch.Size'
local format = require 'torch.format'

local torch = {}

-- the engine's functions, without the internals that nn and optim use (they stay in _C)
local INTERNAL = {
  linear = true, mse_loss = true, nll_loss = true, cross_entropy = true, dropout = true,
  sgd_step = true, adam_step = true, adadelta_step = true, bytes_copied = true, clock = true,
  set_data = true, ops = true,
  data = true, dist = true, parallel = true,
}
for k, v in pairs(C) do
  if not INTERNAL[k] and not k:match('^_') then torch[k] = v end
end
torch._C = C
torch.__version__ = C.__version__
torch.Size = Size

C._hooks.Size = Size
C._hooks.format = format.tensor
torch.set_printoptions = format.set_printoptions

-- dtype names, as torch.float32 etc. (a dtype is its name)
torch.float32, torch.float = 'float32', 'float32'
torch.float64, torch.double = 'float64', 'float64'
torch.int64, torch.long = 'int64', 'int64'
torch.bool = 'bool'
torch.float16, torch.half = 'float16', 'float16'
torch.bfloat16 = 'bfloat16'
-- the floating point dtypes (float16 and bfloat16 compute in float32 inside)
torch.FLOAT_DTYPES = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
-- PyTorch's narrower integer dtypes: int64 is dplua's one integer dtype, so these name it
-- (values keep 64 bits; there is no wrap-around at 32, 16 or 8 bits)
torch.int32, torch.int, torch.int16, torch.short = 'int64', 'int64', 'int64', 'int64'
torch.int8, torch.uint8 = 'int64', 'int64'

-- no_grad(fn, ...) / enable_grad(fn, ...): fn(...) with grad mode off / on, restored after
-- it returns or raises (an error keeps fn's frames in its traceback)
local scope = require 'torch.scope'
local function with_grad_mode(name, on)
  return function(fn, ...)
    if type(fn) ~= 'function' then
      error(('torch.%s: expected a function to run without recording, got %s'):format(name, type(fn)), 2)
    end
    local prev = C.is_grad_enabled()
    C.set_grad_enabled(on)
    return scope.run(function() C.set_grad_enabled(prev) end, fn, ...)
  end
end
torch.no_grad = with_grad_mode('no_grad', false)
torch.enable_grad = with_grad_mode('enable_grad', true)

-- inference_mode(fn, ...): fn(...) without recording autograd graphs (no_grad's meaning
-- here: dplua has no separate inference tensors)
function torch.inference_mode(fn, ...) return torch.no_grad(fn, ...) end

-- ------------------------------------------------------------------ what PyTorch 2 programs set

-- torch.set_float32_matmul_precision / get_: one switch with torch.backends.cuda.matmul.allow_tf32
function torch.set_float32_matmul_precision(p) require('torch.backends')._set_matmul_precision(p) end
function torch.get_float32_matmul_precision() return require('torch.backends')._get_matmul_precision() end

-- torch.cuda.manual_seed(_all)(seed): dplua has one random stream for every device (a seed
-- gives the same draws on the CPU and on a GPU), so with CUDA present it reseeds that
-- stream, as torch.manual_seed does; without CUDA there is nothing to seed (PyTorch too)
local function cuda_seed(name)
  return function(seed)
    if math.type(seed) ~= 'integer' then
      error(('torch.cuda.%s: expected an integer seed, got %s'):format(name, tostring(seed)), 2)
    end
    if C.cuda.is_available() then C.manual_seed(seed) end
  end
end
torch.cuda.manual_seed = cuda_seed('manual_seed')
torch.cuda.manual_seed_all = cuda_seed('manual_seed_all')
-- bfloat16 runs on every GPU that dplua's kernels are built for (compute capability 8.0 on)
function torch.cuda.is_bf16_supported() return C.cuda.is_available() end

-- torch.compile(model_or_fn [, {mode=, fullgraph=, dynamic=, backend=, options=, disable=}]):
-- dplua has no graph compiler; the model (or function) runs as it is and is returned itself,
-- so its state_dict keeps its own names (no '_orig_mod.' prefix)
local COMPILE_OPTS = { mode = true, fullgraph = true, dynamic = true, backend = true, options = true, disable = true }
function torch.compile(model, opts)
  if model == nil then error('torch.compile: expected a module or a function, got nil', 2) end
  if opts ~= nil then
    if type(opts) ~= 'table' then error(('torch.compile: options must be a table, got %s'):format(type(opts)), 2) end
    for k in pairs(opts) do
      if not COMPILE_OPTS[k] then
        error(('torch.compile: unknown option %s (the options are backend, disable, dynamic, fullgraph, mode, options)')
          :format(tostring(k)), 2)
      end
    end
  end
  return model
end

-- ------------------------------------------------------------------ classes

-- local Model, parent = torch.class('Model', 'nn.Module')
function torch.class(name, parent)
  return class.new(name, parent)
end

-- the class name of obj ('torch.FloatTensor' for tensors, 'torch.device', 'torch.Size'
-- ...), else nil
function torch.typename(obj)
  if C.is_tensor(obj) then return obj:type() end
  local name = class.name_of(obj)
  if name then return name end
  local mt = getmetatable(obj)
  name = type(mt) == 'table' and rawget(mt, '__name')
  return type(name) == 'string' and name or nil
end

-- Torch7's torch.type: the class name, or Lua's type
function torch.type(obj)
  return torch.typename(obj) or type(obj)
end

-- torch.isinstance(obj, 'nn.Module' | class): obj's class is that class or a subclass
function torch.isinstance(obj, cls)
  if C.is_tensor(obj) then
    return cls == 'torch.Tensor' or cls == C.Tensor or cls == obj:type()
  end
  return class.isinstance(obj, cls)
end

-- the class called name (Torch7's torch.getmetatable)
function torch.getmetatable(name)
  return class.get(name)
end

-- ------------------------------------------------------------------ Timer

local Timer = torch.class('torch.Timer')
torch.Timer = Timer

function Timer:__init()
  self:reset()
end

-- restarts the count from 0 (keeps a stopped timer stopped)
function Timer:reset()
  self._real, self._cpu = 0, 0
  if not self._stopped then self._since, self._cpu_since = C.clock(), os.clock() end
  return self
end

function Timer:stop()
  if not self._stopped then
    self._real = self._real + C.clock() - self._since
    self._cpu = self._cpu + os.clock() - self._cpu_since
    self._stopped = true
  end
  return self
end

function Timer:resume()
  if self._stopped then
    self._since, self._cpu_since = C.clock(), os.clock()
    self._stopped = false
  end
  return self
end

-- {real = wall-clock seconds, user = CPU seconds of this process, sys = 0}
function Timer:time()
  local real, cpu = self._real, self._cpu
  if not self._stopped then
    real = real + C.clock() - self._since
    cpu = cpu + os.clock() - self._cpu_since
  end
  return { real = real, user = cpu, sys = 0 }
end

-- ------------------------------------------------------------------ saving and loading

for _, name in ipairs({ 'save', 'load', 'save_npy', 'load_npy' }) do
  torch[name] = function(...)
    return require('torch.serialize')[name](...)
  end
end

-- help(x): a line of usage from the docs (lua/torch/help.lua); dplua makes it a global
function torch.help(...)
  return require('torch.help')(...)
end

require('torch.creation').install(torch)
require('torch.composite').install(torch)
require('torch.habits').install(torch)
require('torch.mathops').install(torch)
require('torch.indexing').install(torch)
require('torch.mathmore').install(torch)
require('torch.dtypeinfo').install(torch)
require('torch.logical').install(torch)

-- ------------------------------------------------------------------ lazily reached modules

local SUBMODULES = {
  nn = 'nn', optim = 'optim', data = 'torch.data', distributed = 'torch.distributed',
  autograd = 'torch.autograd', utils = 'torch.utils', distributions = 'torch.distributions',
  linalg = 'torch.linalg', backends = 'torch.backends',
}

-- torch.Generator(): a random stream of its own, for samplers and DataLoader's generator=
-- option (a table {seed =, offset =} that remembers how far it has drawn).
local Generator = {}
Generator.__index = Generator
function torch.Generator()
  return setmetatable({ seed = torch.initial_seed(), offset = 0 }, Generator)
end
function Generator:manual_seed(seed)
  if math.type(seed) ~= 'integer' then error(('manual_seed: expected an integer seed, got %s'):format(tostring(seed)), 2) end
  self.seed, self.offset = seed, 0
  return self
end
function Generator:initial_seed() return self.seed end

-- every op's arguments parsed from its signature (before amp, whose autocast wraps them)
require('torch.signatures').install(torch)
-- the compositions that compute float16 and bfloat16 in float32 and round once
local half = require 'torch.half'
half.wrap(torch, half.TORCH, torch.Tensor)
-- Torch7's function forms and result-tensor forms, around the parsed ops
require('torch.torch7').install(torch)

-- the random draws with a generator= option (torch.rand ..., t:uniform_ ..., multinomial)
require('torch.random').install(torch)
require('torch.amp').install(torch)

-- PyTorch's older names of the linear algebra (torch.inverse, torch.det ...): each loads
-- torch.linalg on first use, which puts its own functions in their places
for _, name in ipairs { 'inverse', 'det', 'slogdet', 'logdet', 'svd', 'qr', 'cholesky', 'cholesky_solve',
                        'triangular_solve', 'matrix_power', 'pinverse' } do
  local function first_use(...)
    require('torch.linalg').install_torch_names()
    return torch[name](...)
  end
  torch[name], torch.Tensor[name] = first_use, first_use
end

-- the module, or nil when this build doesn't have it
local function load_module(name)
  if package.loaded[name] ~= nil or package.preload[name] then return require(name) end
  local ok, mod = pcall(require, name)
  return ok and mod or nil
end

return setmetatable(torch, {
  __index = function(t, k)
    local name = SUBMODULES[k]
    if not name then return nil end
    local mod = load_module(name)
    if mod ~= nil then rawset(t, k, mod) end
    return mod
  end,
})
