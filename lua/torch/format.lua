-- torch.format: tostring(t) as PyTorch prints tensors (torch/_tensor_str.py): 4 decimals
-- with one width for all elements, scientific notation when the magnitudes call for it,
-- integers and booleans as they are, summaries with '...' beyond 1000 elements, and the
-- suffixes device=, dtype=, requires_grad=true, grad_fn=<...>.
local options = require 'torch.options'

local format = {}

local opts = { precision = 4, threshold = 1000, edgeitems = 3, linewidth = 80, sci_mode = nil }

-- torch.set_printoptions{precision=, threshold=, edgeitems=, linewidth=, sci_mode=}: every
-- option is checked before any is applied, so a bad one changes nothing.
local limits = { precision = 0, threshold = 0, edgeitems = 1, linewidth = 1 }
function format.set_printoptions(o)
  local none = options.none
  o = options.check('torch.set_printoptions', o,
    { precision = none, threshold = none, edgeitems = none, linewidth = none, sci_mode = none })
  for k, v in pairs(o) do
    if k == 'sci_mode' then
      if type(v) ~= 'boolean' then
        error(('torch.set_printoptions: option sci_mode must be a boolean, got %s'):format(tostring(v)), 2)
      end
    elseif math.type(v) ~= 'integer' and not (math.type(v) == 'float' and v == math.floor(v) and v < 2^53)
        or v < limits[k] then
      error(('torch.set_printoptions: option %s must be an integer >= %d, got %s')
        :format(k, limits[k], tostring(v)), 2)
    end
  end
  for k, v in pairs(o) do opts[k] = k == 'sci_mode' and v or math.tointeger(v) end
end

local ELLIPSIS = {}   -- marks the elided middle of a summarised dimension

-- The values to print as nested tables, the middle of long dimensions replaced by ELLIPSIS.
local function summarized(t, summarize)
  if not summarize then return t:tolist() end
  local n = t:size(1)
  local edge = opts.edgeitems
  local keep = {}
  if summarize and n > 2 * edge then
    for i = 1, edge do keep[#keep + 1] = i end
    keep[#keep + 1] = ELLIPSIS
    for i = n - edge + 1, n do keep[#keep + 1] = i end
  else
    for i = 1, n do keep[i] = i end
  end
  local out = {}
  for k, i in ipairs(keep) do
    if i == ELLIPSIS then
      out[k] = ELLIPSIS
    elseif t:dim() == 1 then
      out[k] = t[i]
    else
      out[k] = summarized(t:select(1, i), summarize)
    end
  end
  return out
end

local function flatten(list, out)
  for _, v in ipairs(list) do
    if type(v) == 'table' then
      if v ~= ELLIPSIS then flatten(v, out) end
    else
      out[#out + 1] = v
    end
  end
  return out
end

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

local function nonfinite_str(v)
  if v ~= v then return 'nan' end
  return v > 0 and 'inf' or '-inf'
end

local function plain_str(v)
  if type(v) == 'boolean' then return v and 'True' or 'False' end
  return tostring(v)
end

-- PyTorch's _Formatter: decides int mode, scientific mode and the common width.
local function new_formatter(values, floating)
  local f = { floating = floating, int_mode = true, sci = false, width = 1 }
  local sci_fmt = '%.' .. opts.precision .. 'e'
  local fix_fmt = '%.' .. opts.precision .. 'f'
  if not floating then
    for _, v in ipairs(values) do f.width = math.max(f.width, #plain_str(v)) end
    return f
  end
  local nz, lo, hi = {}, math.huge, 0
  for _, v in ipairs(values) do
    if v ~= 0 and finite(v) then
      nz[#nz + 1] = v
      lo, hi = math.min(lo, math.abs(v)), math.max(hi, math.abs(v))
      if v ~= math.ceil(v) then f.int_mode = false end
    end
  end
  if #nz == 0 then return f end
  local fmt, extra
  if f.int_mode then
    f.sci = hi / lo > 1000 or hi > 1e8
    fmt, extra = f.sci and sci_fmt or '%.0f', f.sci and 0 or 1
  else
    f.sci = hi / lo > 1000 or hi > 1e8 or lo < 1e-4
    fmt, extra = f.sci and sci_fmt or fix_fmt, 0
  end
  if opts.sci_mode ~= nil then f.sci = opts.sci_mode end
  for _, v in ipairs(nz) do f.width = math.max(f.width, #fmt:format(v) + extra) end
  return f
end

local function format_value(f, v)
  local s
  if not f.floating then
    s = plain_str(v)
  elseif not finite(v) then
    s = nonfinite_str(v)
  elseif f.sci then
    s = ('%.' .. opts.precision .. 'e'):format(v)
  elseif f.int_mode then
    s = ('%.0f'):format(v) .. '.'
  else
    s = ('%.' .. opts.precision .. 'f'):format(v)
  end
  return (' '):rep(f.width - #s) .. s
end

local function vector_str(list, indent, f)
  local per_line = math.max(1, (opts.linewidth - indent) // (f.width + 2))
  local lines, line = {}, {}
  for _, v in ipairs(list) do
    line[#line + 1] = v == ELLIPSIS and ' ...' or format_value(f, v)
    if #line == per_line then
      lines[#lines + 1] = table.concat(line, ', ')
      line = {}
    end
  end
  if #line > 0 then lines[#lines + 1] = table.concat(line, ', ') end
  return '[' .. table.concat(lines, ',\n' .. (' '):rep(indent + 1)) .. ']'
end

local function nested_str(list, dim, indent, f)
  if dim == 1 then return vector_str(list, indent, f) end
  local slices = {}
  for k, v in ipairs(list) do
    slices[k] = v == ELLIPSIS and '...' or nested_str(v, dim - 1, indent + 1, f)
  end
  return '[' .. table.concat(slices, ',' .. ('\n'):rep(dim - 1) .. (' '):rep(indent + 1)) .. ']'
end

local function add_suffixes(s, suffixes, indent)
  local parts = { s }
  local nl = s:match('.*()\n')
  local last = nl and #s - nl + 2 or #s + 2
  for _, suffix in ipairs(suffixes) do
    if last + #suffix + 2 > opts.linewidth then
      parts[#parts + 1] = ',\n' .. (' '):rep(indent) .. suffix
      last = indent + #suffix
    else
      parts[#parts + 1] = ', ' .. suffix
      last = last + #suffix + 2
    end
  end
  parts[#parts + 1] = ')'
  return table.concat(parts)
end

local function shape_tuple(t)
  local s = t:size()
  return #s == 1 and ('(%d,)'):format(s[1]) or '(' .. table.concat(s, ', ') .. ')'
end

-- tostring(t)
function format.tensor(t)
  local prefix = 'tensor('
  local indent = #prefix
  local suffixes = {}
  local dev = tostring(t.device)
  if dev ~= 'cpu' then suffixes[#suffixes + 1] = "device='" .. dev .. "'" end
  local dtype = t.dtype
  local default = require('torch._C').get_default_dtype()   -- PyTorch names every other floating dtype
  local body
  local data = t:detach()
  if t:numel() == 0 then
    if t:dim() ~= 1 then suffixes[#suffixes + 1] = 'size=' .. shape_tuple(t) end
    if dtype ~= default then suffixes[#suffixes + 1] = 'dtype=' .. dtype end
    body = '[]'
  else
    if dtype ~= default and dtype ~= 'int64' and dtype ~= 'bool' then suffixes[#suffixes + 1] = 'dtype=' .. dtype end
    local floating = dtype ~= 'int64' and dtype ~= 'bool'
    if t:dim() == 0 then
      local v = data:item()
      body = format_value(new_formatter({ v }, floating), v)
    else
      local list = summarized(data, t:numel() > opts.threshold)
      body = nested_str(list, t:dim(), indent, new_formatter(flatten(list, {}), floating))
    end
  end
  local grad_fn = t.grad_fn
  if grad_fn then
    suffixes[#suffixes + 1] = 'grad_fn=' .. tostring(grad_fn)
  elseif t.requires_grad then
    suffixes[#suffixes + 1] = 'requires_grad=true'
  end
  return add_suffixes(prefix .. body, suffixes, indent)
end

return format
