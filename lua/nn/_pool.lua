-- The pooling layers' shared class builder: nn.NAME(kernel_size [, stride | opts]) whose
-- forward calls fn(x, kernel_size, opts) with the layer's settings (fields); printed with
-- the fields of `shown`, as PyTorch prints the layer.
local torch = require 'torch'
local utils = require 'nn.utils'

return function(name, fn, defaults, fields, shown)
  local cls, parent = torch.class('nn.' .. name, 'nn.Module')
  -- nn.NAME(kernel_size, ...): the settings by position in PyTorch's order (fields), then
  -- by name in an options table
  function cls:__init(kernel_size, ...)
    parent.__init(self)
    local given = utils.positional('nn.' .. name, fields, ...)
    local o = utils.options('nn.' .. name, given, defaults)
    if kernel_size == nil then utils.error(('nn.%s: kernel_size is required'):format(name)) end
    self.kernel_size = kernel_size
    for _, f in ipairs(fields) do self[f] = o[f] end
    if not self.stride then self.stride = kernel_size end
  end
  function cls:forward(x)
    local o = {}
    for _, f in ipairs(fields) do o[f] = self[f] end
    return fn(x, self.kernel_size, o)
  end
  local function show(v)
    if type(v) == 'table' then
      local p = {}
      for i, x in ipairs(v) do p[i] = tostring(x) end
      return '(' .. table.concat(p, ', ') .. ')'
    end
    return tostring(v)
  end
  function cls:extra_repr()
    local parts = { 'kernel_size=' .. show(self.kernel_size) }
    for _, f in ipairs(shown) do parts[#parts + 1] = f .. '=' .. show(self[f]) end
    return table.concat(parts, ', ')
  end
  return cls
end
