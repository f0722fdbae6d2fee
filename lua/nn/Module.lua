-- nn.Module: the base class of every layer and model.
--
-- A module keeps its parameters, buffers and child modules in ordinary fields.  The first
-- assignment of a module or an nn.Parameter to a field registers the field's name (see
-- __newindex); registration order is the order names were first assigned, and assigning
-- again to a registered name keeps its place.  Internals, kept out of the way with rawset:
--   self._order  registered names in order (numbers for Sequential's children)
--   self._kind   name -> 'parameter' | 'buffer' | 'module'
--   self._non_persistent  names of buffers kept out of state_dict (absent when none)
local torch = require 'torch'
local Parameter = require 'nn.Parameter'
local utils = require 'nn.utils'

local Module = torch.class('nn.Module')

local function is_module(v)
  return type(v) == 'table' and torch.isinstance(v, Module)
end
Module.is_module = is_module

local function class_name(m)
  local name = torch.typename(m) or 'Module'
  return name:match('[^.]+$')
end

function Module:__init()
  rawset(self, '_order', {})
  rawset(self, '_kind', {})
  rawset(self, 'training', true)
end

local function register(self, name, kind)
  local kinds = rawget(self, '_kind')
  if not kinds then
    utils.error(('cannot assign %s %s before %s.__init(self) has run (call parent.__init(self) first)')
      :format(kind, tostring(name), class_name(self)))
  end
  if kinds[name] == nil then table.insert(rawget(self, '_order'), name) end
  kinds[name] = kind
end

-- Registers modules and parameters assigned to new fields; other values are stored as is.
function Module:__newindex(name, value)
  if is_module(value) then
    register(self, name, 'module')
  elseif torch.is_tensor(value) and Parameter.is(value) then
    register(self, name, 'parameter')
  end
  rawset(self, name, value)
end

-- m(input, ...) is m:forward(input, ...).
function Module:__call(...)
  return self:forward(...)
end

function Module:forward()
  utils.error(('%s: forward is not implemented (define %s:forward(input))')
    :format(class_name(self), class_name(self)))
end

local function check_name(self, who, name)
  if type(name) ~= 'string' or name == '' or name:find('.', 1, true) then
    utils.error(('%s: name must be a non-empty string without dots, got %s'):format(who, tostring(name)))
  end
  local kind = rawget(self, '_kind')[name]
  if kind == nil and rawget(self, name) ~= nil then
    utils.error(('%s: attribute %s already exists'):format(who, name))
  end
end

-- a tensor field of kind 'parameter' or 'buffer' (who: the method, for errors)
local function register_tensor(self, who, kind, name, t)
  check_name(self, who, name)
  if t ~= nil and not torch.is_tensor(t) then
    utils.error(('%s: %s must be a tensor or nil, got %s'):format(who, name, type(t)))
  end
  if kind == 'parameter' and t ~= nil and not Parameter.is(t) then t = Parameter(t) end
  register(self, name, kind)
  rawset(self, name, t)
end

function Module:register_parameter(name, t) register_tensor(self, 'register_parameter', 'parameter', name, t) end
-- persistent = false keeps the buffer out of state_dict (and load_state_dict), as PyTorch's.
function Module:register_buffer(name, t, persistent)
  register_tensor(self, 'register_buffer', 'buffer', name, t)
  local transient = rawget(self, '_non_persistent')
  if persistent == false then
    if not transient then transient = {}; rawset(self, '_non_persistent', transient) end
    transient[name] = true
  elseif transient then
    transient[name] = nil
  end
end

function Module:add_module(name, m)
  if not is_module(m) then
    utils.error(('add_module: %s is not a module (got %s)'):format(tostring(name), type(m)))
  end
  register(self, name, 'module')
  rawset(self, name, m)
  return self
end

-- register_forward_pre_hook(fn): fn(module, inputs...) runs before every forward (m(x) and
-- m:forward(x)), as PyTorch's forward pre-hooks (its return value is ignored); returns a
-- handle whose :remove() takes it off again.
function Module:register_forward_pre_hook(fn)
  if type(fn) ~= 'function' then
    utils.error(('register_forward_pre_hook: expected a function, got %s'):format(type(fn)))
  end
  local hooks = rawget(self, '_forward_pre_hooks')
  if not hooks then hooks = {}; rawset(self, '_forward_pre_hooks', hooks) end
  hooks[#hooks + 1] = fn
  return { remove = function()
    for i, h in ipairs(hooks) do
      if h == fn then table.remove(hooks, i); break end
    end
    if #hooks == 0 and rawget(self, '_forward_pre_hooks') == hooks then rawset(self, '_forward_pre_hooks', nil) end
  end }
end

-- A registered field must still hold what it was registered as (a later plain assignment
-- such as m.fc = 5 bypasses __newindex): say which field, and what it holds now.
local function check_kind(self, name, kind, v)
  local ok = (kind == 'module' and is_module(v)) or (kind ~= 'module' and torch.is_tensor(v))
  if not ok then
    utils.error(('%s: field %s was registered as a %s but now holds a %s; assign a %s or nil')
      :format(class_name(self), tostring(name), kind, type(v), kind == 'module' and 'module' or 'tensor'))
  end
end

-- The registered entries of one kind, in order, as {name, value} pairs.
local function entries(self, kind)
  local out, kinds = {}, rawget(self, '_kind') or {}
  for _, name in ipairs(rawget(self, '_order') or {}) do
    local v = rawget(self, name)
    if kinds[name] == kind and v ~= nil then
      check_kind(self, name, kind, v)
      out[#out + 1] = { tostring(name), v }
    end
  end
  return out
end

local function iterate(list)
  local i = 0
  return function()
    i = i + 1
    if list[i] then return list[i][1], list[i][2] end
  end
end

-- Modules in pre-order (self first), each once, with their dotted names.
local function collect_modules(m, prefix, out, seen)
  if seen[m] then return end
  seen[m] = true
  out[#out + 1] = { prefix, m }
  for _, e in ipairs(entries(m, 'module')) do
    collect_modules(e[2], prefix == '' and e[1] or prefix .. '.' .. e[1], out, seen)
  end
end

-- Own tensors of `kind` of every module, each tensor once, PyTorch's order; with
-- persistent_only, buffers registered with persistent = false are left out.
local function collect_tensors(self, kind, prefix, persistent_only)
  local mods, out, seen = {}, {}, {}
  collect_modules(self, prefix or '', mods, {})
  for _, me in ipairs(mods) do
    local transient = persistent_only and rawget(me[2], '_non_persistent') or {}
    for _, e in ipairs(entries(me[2], kind)) do
      if not seen[e[2]] and not transient[e[1]] then
        seen[e[2]] = true
        out[#out + 1] = { me[1] == '' and e[1] or me[1] .. '.' .. e[1], e[2] }
      end
    end
  end
  return out
end

-- Own tensors of `kind` under every name they have, as PyTorch's state_dict lists them: a
-- tensor tied to two fields (lm_head.weight = wte.weight) or a module shared by two parents
-- appears under each name; a module that contains itself is walked once per path.
local function collect_state(self, kind, persistent_only)
  local out, active = {}, {}
  local function walk(m, prefix)
    if active[m] then return end
    active[m] = true
    local transient = persistent_only and rawget(m, '_non_persistent') or {}
    for _, e in ipairs(entries(m, kind)) do
      if not transient[e[1]] then out[#out + 1] = { prefix .. e[1], e[2] } end
    end
    for _, e in ipairs(entries(m, 'module')) do walk(e[2], prefix .. e[1] .. '.') end
    active[m] = nil
  end
  walk(self, '')
  return out
end

function Module:named_parameters(prefix) return iterate(collect_tensors(self, 'parameter', prefix)) end
function Module:named_buffers(prefix) return iterate(collect_tensors(self, 'buffer', prefix)) end
function Module:named_children() return iterate(entries(self, 'module')) end

function Module:named_modules(prefix)
  local out = {}
  collect_modules(self, prefix or '', out, {})
  return iterate(out)
end

-- An array of the values that is also callable as an iterator, so that both
-- `for _, m in ipairs(model:modules())` and `for m in model:modules()` work.
local callable = {
  __call = function(arr)
    local i = (rawget(arr, 0) or 0) + 1
    rawset(arr, 0, arr[i] ~= nil and i or nil)
    return arr[i]
  end,
}

local function values(list)
  local out = {}
  for i, e in ipairs(list) do out[i] = e[2] end
  return setmetatable(out, callable)
end

-- Arrays, as Torch7 users expect: parameters() is what an optimizer takes.
function Module:parameters() return values(collect_tensors(self, 'parameter')) end
function Module:buffers() return values(collect_tensors(self, 'buffer')) end
function Module:children() return values(entries(self, 'module')) end

function Module:modules()
  local out = {}
  collect_modules(self, '', out, {})
  return values(out)
end

function Module:apply(fn)
  for _, child in ipairs(self:children()) do child:apply(fn) end
  fn(self)
  return self
end

function Module:train(mode)
  if mode == nil then mode = true end
  for _, m in ipairs(self:modules()) do rawset(m, 'training', mode and true or false) end
  return self
end

function Module:eval() return self:train(false) end

-- Sets requires_grad of every parameter (true when not given), e.g. to freeze a part.
function Module:requires_grad_(requires_grad)
  if requires_grad == nil then requires_grad = true end
  for _, p in ipairs(self:parameters()) do p:requires_grad_(requires_grad and true or false) end
  return self
end

-- PyTorch 1.13's default: gradients are zeroed in place; with {set_to_none=true} dropped.
function Module:zero_grad(opts)
  utils.zero_grad('zero_grad', self:parameters(), opts)
end

-- Moving and converting --------------------------------------------------------------

-- Makes parameter p take the storage, sizes, device and dtype of new in place, keeping
-- its identity, requires_grad and gradient (PyTorch's `p.data = new`).
local function set_data(p, new)
  if not rawequal(new, p) then torch._C.set_data(p, new) end
end

-- Applies fn (tensor -> tensor) to every parameter and its gradient, and to every buffer,
-- of every module.  Parameters change in place, so an optimizer holding them keeps
-- working; buffers are replaced.
function Module:_apply(fn)
  local done = {}
  torch.no_grad(function()
    for _, m in ipairs(self:modules()) do
      for _, e in ipairs(entries(m, 'parameter')) do
        local p = e[2]
        if not done[p] then
          done[p] = true
          local g = p.grad
          set_data(p, fn(p))
          if g ~= nil then set_data(g, fn(g)) end
        end
      end
      for _, e in ipairs(entries(m, 'buffer')) do
        rawset(m, e[1], fn(e[2]))
      end
    end
  end)
  return self
end

local dtype_names = { float32 = true, float64 = true, int64 = true, bool = true,
                      float = true, double = true, long = true, float16 = true, half = true, bfloat16 = true }

-- to(device), to(dtype), to{device=, dtype=}: floating point tensors take the dtype, every
-- tensor the device.
function Module:to(arg)
  local device, dtype
  if type(arg) == 'table' and getmetatable(arg) == nil then
    local o = utils.options('Module:to', arg, { device = false, dtype = false, non_blocking = false })
    device, dtype = o.device or nil, o.dtype or nil
  elseif type(arg) == 'string' and dtype_names[arg] then
    dtype = arg
  elseif arg ~= nil then
    device = arg
  else
    utils.error('Module:to: expected a device, a dtype or {device=, dtype=}')
  end
  if dtype and not dtype_names[dtype] then
    utils.error(('Module:to: unknown dtype %s'):format(tostring(dtype)))
  end
  return self:_apply(function(t)
    local floating = torch.FLOAT_DTYPES[t.dtype] == true
    local dt = floating and dtype or nil
    if device == nil and dt == nil then return t end
    return t:to{ device = device, dtype = dt }
  end)
end

function Module:cuda(index)
  return self:to(torch.device('cuda', index or 0))
end
function Module:cpu() return self:to('cpu') end
function Module:double() return self:to('float64') end
function Module:float() return self:to('float32') end
function Module:half() return self:to('float16') end
function Module:bfloat16() return self:to('bfloat16') end

-- State ---------------------------------------------------------------------------------

-- Key names as PyTorch spells them and back: the numbers in a key ("layers.0.weight") are
-- the positions of nn.Sequential and list children, counted from 0 there and from 1 here.
local function shift_keys(sd, delta)
  local out = {}
  for k, v in pairs(sd) do
    if type(k) == 'string' then
      k = ('.' .. k .. '.'):gsub('%.(%d+)%f[.]', function(n) return '.' .. (tonumber(n) + delta) end):sub(2, -2)
    end
    out[k] = v
  end
  return out
end

-- A table name -> tensor of every parameter and buffer (detached, sharing storage), under
-- every name it has (tied weights appear once per name, as in PyTorch; named_parameters
-- lists each once); {to_pytorch = true} numbers children from 0, as PyTorch's keys do.
function Module:state_dict(opts)
  local o = utils.options('state_dict', opts, { to_pytorch = false })
  local sd = {}
  for _, e in ipairs(collect_state(self, 'parameter')) do sd[e[1]] = e[2]:detach() end
  for _, e in ipairs(collect_state(self, 'buffer', true)) do sd[e[1]] = e[2]:detach() end
  return o.to_pytorch and shift_keys(sd, -1) or sd
end

local function quoted(list)
  local q = {}
  for i, k in ipairs(list) do q[i] = '"' .. k .. '"' end
  return table.concat(q, ', ')
end

-- Copies the tensors of sd into the module's parameters and buffers, in place, so tied
-- weights stay one tensor (every name of it is expected, as state_dict lists them; the
-- last in registration order wins, as in PyTorch).  With strict (the default) missing and
-- unexpected keys are errors; wrong shapes always are.  Returns {missing_keys=, unexpected_keys=}.
function Module:load_state_dict(sd, opts)
  if type(sd) ~= 'table' then
    utils.error(('load_state_dict: expected a table name -> tensor, got %s'):format(type(sd)))
  end
  local o = utils.options('load_state_dict', opts, { strict = true, from_pytorch = false })
  if o.from_pytorch then sd = shift_keys(sd, 1) end
  local own, names = {}, {}
  for _, e in ipairs(collect_state(self, 'parameter')) do own[e[1]] = e[2]; names[#names + 1] = e[1] end
  for _, e in ipairs(collect_state(self, 'buffer', true)) do own[e[1]] = e[2]; names[#names + 1] = e[1] end
  local missing, unexpected, problems = {}, {}, {}
  for _, name in ipairs(names) do
    if sd[name] == nil then missing[#missing + 1] = name end
  end
  -- a 1-D value for a 0-dim tensor gives its first element, as PyTorch's loading of old
  -- checkpoints (num_batches_tracked saved with shape [1])
  local values = {}
  for _, name in ipairs(names) do
    local v = sd[name]
    if torch.is_tensor(v) and own[name]:dim() == 0 and v:dim() == 1 and v:numel() >= 1 then v = v:select(1, 1) end
    values[name] = v
  end
  for name, v in pairs(sd) do
    if own[name] == nil then unexpected[#unexpected + 1] = tostring(name) end
  end
  table.sort(unexpected)
  for _, name in ipairs(names) do
    local v, t = values[name], own[name]
    if v ~= nil then
      if not torch.is_tensor(v) then
        problems[#problems + 1] = ('value for %s is a %s, not a tensor'):format(name, type(v))
      elseif v:size() ~= t:size() then
        problems[#problems + 1] = ('size mismatch for %s: copying a param with shape %s from checkpoint, the shape in current model is %s.')
          :format(name, utils.shape(v), utils.shape(t))
      end
    end
  end
  if o.strict then
    if #missing > 0 then table.insert(problems, 1, 'Missing key(s) in state_dict: ' .. quoted(missing) .. '.') end
    if #unexpected > 0 then table.insert(problems, #missing > 0 and 2 or 1, 'Unexpected key(s) in state_dict: ' .. quoted(unexpected) .. '.') end
  end
  if #problems > 0 and #unexpected > 0 and not o.from_pytorch then
    -- keys counted from 0 that would fit counted from 1: a PyTorch state_dict
    local shifted, fits = shift_keys(sd, 1), 0
    for _, name in ipairs(names) do if shifted[name] ~= nil then fits = fits + 1 end end
    if fits > #names - #missing then
      problems[#problems + 1] = 'The keys look like PyTorch\'s, whose nn.Sequential children count from 0 '
        .. '("0.weight"): load them with load_state_dict(sd, {from_pytorch = true}).'
    end
  end
  if #problems > 0 then
    utils.error(('Error(s) in loading state_dict for %s:\n\t%s'):format(class_name(self), table.concat(problems, '\n\t')))
  end
  torch.no_grad(function()
    for _, name in ipairs(names) do
      if values[name] ~= nil then own[name]:copy_(values[name]) end
    end
  end)
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- Printing ------------------------------------------------------------------------------

-- One line describing the module's settings, e.g. Linear's "in_features=5, ...".
function Module:extra_repr() return '' end

function Module:__tostring()
  local extra = self:extra_repr()
  local lines = {}
  if extra ~= '' then
    for line in (extra .. '\n'):gmatch('(.-)\n') do lines[#lines + 1] = line end
  end
  local nextra = #lines
  for _, e in ipairs(entries(self, 'module')) do
    local s = tostring(e[2]):gsub('\n', '\n  ')
    lines[#lines + 1] = '(' .. e[1] .. '): ' .. s
  end
  local s = class_name(self) .. '('
  if nextra == 1 and #lines == 1 then
    s = s .. lines[1]
  elseif #lines > 0 then
    s = s .. '\n  ' .. table.concat(lines, '\n  ') .. '\n'
  end
  return s .. ')'
end

return Module
