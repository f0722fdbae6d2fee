-- torch.linspace, torch.logspace, torch.full_like and the t:new_* methods: creation
-- functions written with the engine's ones, with PyTorch 1.13's semantics (float32 unless
-- a dtype is given; the *_like and new_* forms take the tensor's dtype and device).
local M = {}

-- start, end, steps [, opts]: steps values from start to end, both included.  As PyTorch,
-- the first half counts up from start and the second half down from end, so both ends are
-- exact.
function M.install(torch)
  local function check_steps(who, steps)
    if math.type(steps) ~= 'integer' or steps < 0 then
      error(('%s: steps must be a non-negative integer, got %s'):format(who, tostring(steps)), 3)
    end
  end
  local function check_number(who, name, v)
    if type(v) ~= 'number' then error(('%s: %s must be a number, got %s'):format(who, name, type(v)), 3) end
  end

  local function spaced(who, start, stop, steps, opts)
    check_number(who, 'start', start)
    check_number(who, 'end', stop)
    check_steps(who, steps)
    local dtype = opts and opts.dtype or torch.get_default_dtype()
    local i = torch.arange(steps, { dtype = 'float64', device = opts and opts.device })
    if steps <= 1 then return (i + start):to(dtype) end
    if dtype == 'int64' then   -- PyTorch's own rounding (see _linspace_int64 in lua/l_torch.c)
      return require('torch._C')._linspace_int64(start, stop, steps):to(i.device)
    end
    local step = (stop - start) / (steps - 1)
    local half = steps // 2
    local up = i:narrow(1, 1, half) * step + start
    local down = -((steps - 1) - i:narrow(1, half + 1, steps - half)) * step + stop
    return torch.cat({ up, down }):to(dtype)
  end

  function torch.linspace(start, stop, steps, opts)
    local t = spaced('torch.linspace', start, stop, steps, opts)
    if opts and opts.requires_grad then t:requires_grad_(true) end
    return t
  end

  -- base ^ linspace(start, end, steps) (base 10 by default)
  function torch.logspace(start, stop, steps, base, opts)
    if type(base) == 'table' then base, opts = nil, base end
    base = base or 10
    check_number('torch.logspace', 'base', base)
    local e = spaced('torch.logspace', start, stop, steps, { device = opts and opts.device, dtype = 'float64' })
    local t = (torch.full({ 1 }, base, { dtype = 'float64', device = opts and opts.device }) ^ e):to(opts and opts.dtype or torch.get_default_dtype())
    if opts and opts.requires_grad then t:requires_grad_(true) end
    return t
  end

  -- full_like(t, value [, opts]): t's shape, dtype and device unless opts say otherwise
  function torch.full_like(t, value, opts)
    if not torch.is_tensor(t) then error(('torch.full_like: expected a tensor, got %s'):format(type(t)), 2) end
    local o = { dtype = t.dtype, device = t.device }
    for k, v in pairs(opts or {}) do o[k] = v end
    return torch.full(t:size():totable(), value, o)
  end

  -- t:new_zeros(sizes...), new_ones, new_empty, new_full(sizes, value), new_tensor(data):
  -- t's dtype and device unless the options say otherwise
  local Tensor = torch.Tensor
  local function new_opts(t, opts)
    local o = { dtype = t.dtype, device = t.device }
    for k, v in pairs(opts or {}) do o[k] = v end
    return o
  end
  -- sizes as numbers or one table (or torch.Size), then an optional options table
  local function sized(name, make)
    Tensor[name] = function(t, ...)
      local args = { ... }
      local opts
      if #args > 1 and type(args[#args]) == 'table' and not getmetatable(args[#args]) then opts = table.remove(args) end
      if #args == 1 and type(args[1]) == 'table' then args = args[1] end
      return make(args, new_opts(t, opts))
    end
  end
  sized('new_zeros', torch.zeros)
  sized('new_ones', torch.ones)
  sized('new_empty', torch.empty)
  function Tensor.new_full(t, sizes, value, opts) return torch.full(sizes, value, new_opts(t, opts)) end
  function Tensor.new_tensor(t, data, opts) return torch.tensor(data, new_opts(t, opts)) end
end

return M
