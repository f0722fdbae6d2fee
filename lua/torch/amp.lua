-- torch.amp: mixed precision.  torch.autocast(device_type, {dtype=, enabled=} [, fn]) runs
-- the matrix products and convolutions in a lower precision dtype (PyTorch's "lower
-- precision" op list: linear, matmul, mm, bmm, addmm, baddbmm, conv1d/2d, conv
-- transposes, scaled_dot_product_attention) and the ops that need the range or the
-- accuracy in float32 (softmax, log_softmax, the losses, sum, prod, cumsum, the norms),
-- as PyTorch's CUDA autocast does; everything else runs in the dtype it is given.  The
-- casts are ordinary differentiable conversions, so the gradients come back in each
-- parameter's dtype.  torch.amp.GradScaler (torch.cuda.amp.GradScaler): loss scaling for
-- float16 training.
local M = {}

local torch   -- set by install

-- ------------------------------------------------------------------ autocast state

-- one state per device type: enabled and dtype; a stack of saved states for nesting
local DEFAULT_DTYPE = { cpu = 'bfloat16', cuda = 'float16' }
local state = { cpu = { enabled = false, dtype = 'bfloat16' }, cuda = { enabled = false, dtype = 'float16' } }
local active = 0        -- how many device types have autocast on (the wrappers' fast path)

local set_swapped   -- below: puts the torch and Tensor wrappers in place while a scope is on
local function recount()
  active = (state.cpu.enabled and 1 or 0) + (state.cuda.enabled and 1 or 0)
  set_swapped(active > 0)
end

local LOWER_OK = { float16 = true, bfloat16 = true }

-- the device type ('cpu' or 'cuda') of a tensor
local function device_type(t) return tostring(t.device):match('^(%a+)') end

-- the autocast state that applies to tensor t, or nil
local function scope_of(t)
  if torch.is_tensor(t) then
    local s = state[device_type(t)]
    if s and s.enabled then return s end
  end
  return nil
end

local function cast(v, dtype)
  if torch.is_tensor(v) and torch.FLOAT_DTYPES[v.dtype] and v.dtype ~= dtype and v.dtype ~= 'float64' then
    return v:to(dtype)
  end
  return v
end

-- fn with its floating tensor arguments (float64 excepted, as PyTorch) cast to the
-- autocast dtype (lower) or to float32 (fp32) when autocast is on for their device
local function wrap(fn, lower)
  local w = function(...)
    if active == 0 then return fn(...) end
    local n = select('#', ...)
    local args = { ... }
    local s
    for i = 1, n do s = s or scope_of(args[i]) end
    if not s then return fn(...) end
    local dtype = lower and s.dtype or 'float32'
    for i = 1, n do args[i] = cast(args[i], dtype) end
    return fn(table.unpack(args, 1, n))
  end
  -- the wrapper takes the signature of what it wraps (help() shows it)
  local registry = require('torch.signature').registry
  registry[w] = registry[fn]
  return w
end

-- the arguments cast as a lower precision op's (an op that is not one of the wrapped
-- functions calls it at its entry)
function M.cast_lower(...)
  if active == 0 then return ... end
  local n = select('#', ...)
  local args = { ... }
  local s
  for i = 1, n do s = s or scope_of(args[i]) end
  if not s then return ... end
  for i = 1, n do args[i] = cast(args[i], s.dtype) end
  return table.unpack(args, 1, n)
end

-- the ops of PyTorch's autocast lists that dplua has, by where they are found
local LOWER = { 'linear', 'matmul', 'mm', 'bmm', 'addmm', 'baddbmm', 'addbmm', 'conv1d', 'conv2d',
                'conv_transpose1d', 'conv_transpose2d', 'scaled_dot_product_attention' }
local FP32 = { 'softmax', 'log_softmax', 'layer_norm', 'group_norm', 'batch_norm', 'normalize', 'sum', 'prod',
               'cumsum', 'cumprod', 'logsumexp', 'norm', 'dist', 'mse_loss', 'l1_loss', 'smooth_l1_loss',
               'huber_loss', 'cross_entropy', 'nll_loss', 'binary_cross_entropy', 'binary_cross_entropy_with_logits',
               'kl_div', 'cosine_similarity', 'pdist', 'cdist', 'exp', 'log', 'log10', 'log2', 'log1p',
               'expm1', 'pow', 'reciprocal', 'rsqrt', 'erfinv', 'acos', 'asin', 'cosh', 'sinh', 'tan' }

-- wraps each listed name of tbl that is a function (once)
local wrapped = setmetatable({}, { __mode = 'k' })
local function wrap_names(tbl, names, lower)
  for _, name in ipairs(names) do
    local fn = rawget(tbl, name)
    if type(fn) == 'function' and not wrapped[fn] then
      local w = wrap(fn, lower)
      wrapped[w] = true
      rawset(tbl, name, w)
    end
  end
end

-- Installs the casts into a table of functions (nn.functional, the convolutions): called
-- for each, before other code captures the functions.
function M.install_ops(tbl)
  wrap_names(tbl, LOWER, true)
  wrap_names(tbl, FP32, false)
end

-- torch's and Tensor's functions (C functions) are swapped for their wrappers only while a
-- scope is on: outside one they are called as they are, so an error still names the
-- line that called them when that call is a tail call.
local swaps, swapped = {}, false
local function prepare_swaps(tbl, names, lower)
  for _, name in ipairs(names) do
    local fn = rawget(tbl, name)
    if type(fn) == 'function' and not wrapped[fn] then
      local w = wrap(fn, lower)
      wrapped[w] = true
      swaps[#swaps + 1] = { tbl = tbl, name = name, orig = fn, wrapper = w }
    end
  end
end

set_swapped = function(on)
  if on == swapped then return end
  swapped = on
  for _, sw in ipairs(swaps) do
    -- a function replaced since (by other code) is left alone
    if rawget(sw.tbl, sw.name) == (on and sw.orig or sw.wrapper) then rawset(sw.tbl, sw.name, on and sw.wrapper or sw.orig) end
  end
end

-- ------------------------------------------------------------------ torch.autocast

local Scope = {}
Scope.__index = Scope
Scope.__name = 'torch.autocast'

local function leave(self)
  if self.closed then return end
  self.closed = true
  state[self.device_type] = self.saved
  recount()
end
Scope.__close = function(self) leave(self) end
Scope.__tostring = function(self)
  return ("torch.autocast('%s', {dtype=%s, enabled=%s})"):format(self.device_type, self.dtype, tostring(self.enabled))
end
function Scope:close() leave(self) end

-- torch.autocast(device_type [, {dtype=, enabled=true, cache_enabled=}] [, fn]): with fn,
-- runs fn() in the scope and returns what it returns (the scope ends on an error too);
-- without, returns a to-be-closed scope: local ac <close> = torch.autocast('cuda').
function M.autocast(device_type, opts, fn)
  if type(opts) == 'function' and fn == nil then opts, fn = nil, opts end
  if device_type ~= 'cpu' and device_type ~= 'cuda' then
    error(("torch.autocast: device_type must be 'cpu' or 'cuda', got %s"):format(tostring(device_type)), 2)
  end
  if opts ~= nil and type(opts) ~= 'table' then
    error(('torch.autocast: expected an options table {dtype=, enabled=}, got %s'):format(type(opts)), 2)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= 'dtype' and k ~= 'enabled' and k ~= 'cache_enabled' then
      error(("torch.autocast: unknown option '%s' (the options are dtype, enabled, cache_enabled)"):format(tostring(k)), 2)
    end
  end
  local dtype = opts.dtype or DEFAULT_DTYPE[device_type]
  if dtype == 'half' then dtype = 'float16' end
  if not LOWER_OK[dtype] then
    error(("torch.autocast: dtype must be float16 or bfloat16, got %s"):format(tostring(dtype)), 2)
  end
  local enabled = opts.enabled
  if enabled == nil then enabled = true end
  if type(enabled) ~= 'boolean' then
    error(('torch.autocast: enabled must be a boolean, got %s'):format(type(enabled)), 2)
  end
  if fn ~= nil and type(fn) ~= 'function' then
    error(('torch.autocast: expected a function to run in the scope, got %s'):format(type(fn)), 2)
  end
  local scope = setmetatable({ device_type = device_type, dtype = dtype, enabled = enabled,
                               saved = state[device_type] }, Scope)
  state[device_type] = { enabled = enabled, dtype = dtype }
  recount()
  if fn == nil then return scope end
  return require('torch.scope').run(function() leave(scope) end, fn)
end

function M.is_autocast_enabled(device_type)
  local s = state[device_type or 'cuda']
  return s ~= nil and s.enabled
end

function M.get_autocast_dtype(device_type)
  local s = state[device_type or 'cuda']
  return s and s.dtype
end

-- ------------------------------------------------------------------ GradScaler

local GradScaler = {}
GradScaler.__index = GradScaler
GradScaler.__name = 'GradScaler'

local READY, UNSCALED, STEPPED = 0, 1, 2

-- GradScaler([device='cuda',] {init_scale=2^16, growth_factor=2, backoff_factor=0.5,
-- growth_interval=2000, enabled=true}): for 'cuda' on a machine without CUDA it turns
-- itself off with a warning, as PyTorch's (every call then passes through)
local warned_no_cuda = false
function M.GradScaler(device, opts)
  if type(device) ~= 'string' then device, opts = 'cuda', device end
  if device ~= 'cuda' and device ~= 'cpu' then
    error(("GradScaler: device must be 'cuda' or 'cpu', got '%s'"):format(device), 2)
  end
  opts = opts or {}
  if type(opts) ~= 'table' then error(('GradScaler: expected an options table, got %s'):format(type(opts)), 2) end
  local known = { init_scale = true, growth_factor = true, backoff_factor = true, growth_interval = true, enabled = true }
  for k in pairs(opts) do
    if not known[k] then
      error(("GradScaler: unknown option '%s' (the options are init_scale, growth_factor, backoff_factor, "
             .. "growth_interval, enabled)"):format(tostring(k)), 2)
    end
  end
  local self = setmetatable({
    _scale = opts.init_scale or 2.0 ^ 16,
    _growth_factor = opts.growth_factor or 2.0,
    _backoff_factor = opts.backoff_factor or 0.5,
    _growth_interval = opts.growth_interval or 2000,
    _growth_tracker = 0,
    _enabled = opts.enabled ~= false,
    _device = device,
    _per_optimizer = setmetatable({}, { __mode = 'k' }),
  }, GradScaler)
  if self._enabled and device == 'cuda' and not torch.cuda.is_available() then
    if not warned_no_cuda then
      io.stderr:write('UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not available. Disabling.\n')
      warned_no_cuda = true
    end
    self._enabled = false
  end
  if not (self._growth_factor > 1) then
    error(('GradScaler: growth_factor should be > 1, got %s'):format(tostring(self._growth_factor)), 2)
  end
  if not (self._backoff_factor < 1 and self._backoff_factor > 0) then
    error(('GradScaler: backoff_factor should be in (0, 1), got %s'):format(tostring(self._backoff_factor)), 2)
  end
  if math.type(self._growth_interval) ~= 'integer' or self._growth_interval <= 0 then
    error(('GradScaler: growth_interval should be a positive integer, got %s'):format(tostring(self._growth_interval)), 2)
  end
  return self
end

function GradScaler:is_enabled() return self._enabled end
function GradScaler:get_scale() return self._enabled and self._scale or 1.0 end
function GradScaler:get_growth_factor() return self._growth_factor end
function GradScaler:get_backoff_factor() return self._backoff_factor end
function GradScaler:get_growth_interval() return self._growth_interval end

-- scale(loss): loss * scale (a tensor, or a table of tensors); loss unchanged when disabled
function GradScaler:scale(outputs)
  if not self._enabled then return outputs end
  if torch.is_tensor(outputs) then return outputs * self._scale end
  if type(outputs) == 'table' then
    local r = {}
    for k, v in pairs(outputs) do r[k] = self:scale(v) end
    return r
  end
  error(('GradScaler:scale: expected a tensor or a table of tensors, got %s'):format(type(outputs)), 2)
end

local function opt_state(self, opt)
  local s = self._per_optimizer[opt]
  if not s then
    s = { stage = READY, found_inf = false }
    self._per_optimizer[opt] = s
  end
  return s
end

-- unscale_(opt): divides opt's gradients by the scale, in place, noting whether any is inf/NaN
function GradScaler:unscale_(opt)
  if not self._enabled then return end
  local s = opt_state(self, opt)
  if s.stage == UNSCALED then error('GradScaler:unscale_() has already been called on this optimizer since the last update().', 2) end
  if s.stage == STEPPED then error('GradScaler:unscale_() is being called after step().', 2) end
  local inv = 1.0 / self._scale
  local found = false
  torch.no_grad(function()
    for _, group in ipairs(opt.param_groups) do
      for _, p in ipairs(group.params) do
        local g = p.grad
        if g ~= nil then
          if not found and not g:isfinite():all():item() then found = true end
          g:mul_(inv)
        end
      end
    end
  end)
  s.found_inf = found
  s.stage = UNSCALED
end

-- step(opt [, ...]): unscales (if not done yet) and runs opt:step(...) unless a gradient
-- was inf or NaN; returns what opt:step returned, or nil when the step was skipped
function GradScaler:step(opt, ...)
  if not self._enabled then return opt:step(...) end
  local s = opt_state(self, opt)
  if s.stage == STEPPED then error('GradScaler:step() has already been called since the last update().', 2) end
  if s.stage == READY then self:unscale_(opt) end
  s.stage = STEPPED
  if s.found_inf then return nil end
  return opt:step(...)
end

-- update([new_scale]): backs the scale off if any optimizer saw inf/NaN since the last
-- update, else grows it after growth_interval clean steps in a row
function GradScaler:update(new_scale)
  if not self._enabled then return end
  if new_scale ~= nil then
    if torch.is_tensor(new_scale) then new_scale = new_scale:item() end
    if type(new_scale) ~= 'number' then
      error(('GradScaler:update: new_scale must be a number or a 1-element tensor, got %s'):format(type(new_scale)), 2)
    end
    self._scale = new_scale
  else
    local found, any = false, false
    for _, s in pairs(self._per_optimizer) do
      if s.stage ~= READY then any = true end
      found = found or s.found_inf
    end
    if not any then error('GradScaler:update: no inf checks were recorded prior to update (call step first).', 2) end
    if found then
      self._scale = self._scale * self._backoff_factor
      self._growth_tracker = 0
    else
      self._growth_tracker = self._growth_tracker + 1
      if self._growth_tracker == self._growth_interval then
        self._scale = self._scale * self._growth_factor
        self._growth_tracker = 0
      end
    end
  end
  self._per_optimizer = setmetatable({}, { __mode = 'k' })
end

function GradScaler:state_dict()
  if not self._enabled then return {} end
  return { scale = self._scale, growth_factor = self._growth_factor, backoff_factor = self._backoff_factor,
           growth_interval = self._growth_interval, _growth_tracker = self._growth_tracker }
end

function GradScaler:load_state_dict(sd)
  if not self._enabled then return end
  if type(sd) ~= 'table' or next(sd) == nil then
    error('GradScaler:load_state_dict: the state dict is empty; it was saved by a disabled GradScaler', 2)
  end
  self._scale = sd.scale
  self._growth_factor = sd.growth_factor
  self._backoff_factor = sd.backoff_factor
  self._growth_interval = sd.growth_interval
  self._growth_tracker = sd._growth_tracker
end

GradScaler.__tostring = function(self)
  return ('GradScaler(scale=%s, enabled=%s)'):format(tostring(self:get_scale()), tostring(self._enabled))
end

function M.install(t)
  torch = t
  torch.autocast = M.autocast
  torch.is_autocast_enabled = M.is_autocast_enabled
  torch.get_autocast_dtype = M.get_autocast_dtype
  torch.amp = { autocast = M.autocast, GradScaler = M.GradScaler }
  -- torch.cuda.amp.autocast([opts] [, fn]) is torch.autocast('cuda', ...)
  if type(torch.cuda) == 'table' then
    torch.cuda.amp = {
      GradScaler = function(opts) return M.GradScaler('cuda', opts) end,
      autocast = function(opts, fn) return M.autocast('cuda', opts, fn) end,
    }
  end
  for _, tbl in ipairs { torch, torch.Tensor } do
    prepare_swaps(tbl, LOWER, true)
    prepare_swaps(tbl, FP32, false)
  end
end

return M
