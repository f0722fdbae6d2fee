-- torch.signature: one argument parser for every op, read from signature lines written as
-- PyTorch writes them (native_functions.yaml), with dplua's types:
--
--   'sum(Tensor self, dims? dim=None, bool keepdim=False, *, dtype? dtype=None)'
--
-- A call passes its arguments by position or, as PyTorch's keywords, in an options table in
-- last position (`x:sum(2, {keepdim = true})`, `x:sum{dim = 2}`); a parameter after `*` is an
-- option only.  The parser hands the op's implementation every parameter in order, defaults
-- filled in, each checked against its type.  An unknown option, a value of the wrong type
-- or outside an enum, a missing argument, or an argument given twice is an error that names
-- the op, the parameter, the value and what was expected: nothing is ignored.
--
-- Types:  Tensor  Scalar (a number or boolean)  int  float  bool  dim (an integer, 1-based,
-- negative from the end)  dims (a dim or a table of dims)  int[] (an integer or a table of
-- integers)  dtype  device  str  str{a,b} (one of the listed strings)  any,
-- and unions written A|B.  A `?` allows nil.  Defaults: None, True, False, numbers,
-- 'strings', [] (an empty table).
local options = require 'torch.options'
local C = require 'torch._C'
local Size = require 'torch.Size'

local M = {}

M.is_tensor = C.is_tensor
function M.is_size(v) return getmetatable(v) == Size end
function M.is_device(v)
  local mt = getmetatable(v)
  return type(v) == 'userdata' and type(mt) == 'table' and mt.__name == 'torch.device'
end

local DTYPES = {
  float32 = true, float = true, float64 = true, double = true, float16 = true, half = true,
  bfloat16 = true, int64 = true, long = true, int = true, int32 = true, bool = true,
}

local show = options.show
local function describe(v)
  local tv = type(v)
  if tv == 'userdata' and M.is_tensor(v) then
    return ('a %s tensor of shape [%s]'):format(v.dtype, table.concat(v:size():totable(), ', '))
  elseif tv == 'table' then
    local parts, n = {}, 0
    for k, x in pairs(v) do
      n = n + 1
      if n > 4 then parts[#parts + 1] = '...'; break end
      parts[#parts + 1] = math.type(k) == 'integer' and show(x) or ('%s = %s'):format(tostring(k), show(x))
    end
    return ('the table {%s}'):format(table.concat(parts, ', '))
  elseif tv == 'string' then
    return ("'%s'"):format(v)
  end
  return ('%s %s'):format(tv, tostring(v))
end
M.describe = describe

-- ------------------------------------------------------------------ types

local function is_int(v)
  return math.type(v) == 'integer' or (math.type(v) == 'float' and v == math.floor(v) and v == v and math.abs(v) < 2^53)
end

local function int_list(v)
  if is_int(v) then return true end
  if type(v) ~= 'table' then return false end
  if getmetatable(v) ~= nil and not M.is_size(v) then return false end
  local n = #v
  for k, x in pairs(v) do
    if math.type(k) ~= 'integer' or k < 1 or k > n or not is_int(x) then return false end
  end
  return true
end

-- name -> {test = fn(v) -> ok, what = 'what an argument of this type is'}
local TYPES = {
  Tensor = { test = function(v) return M.is_tensor(v) end, what = 'a tensor' },
  Scalar = { test = function(v) return type(v) == 'number' or type(v) == 'boolean' end, what = 'a number' },
  int = { test = is_int, what = 'an integer' },
  float = { test = function(v) return type(v) == 'number' end, what = 'a number' },
  ['float[]'] = {
    test = function(v)
      if type(v) == 'number' then return true end
      if type(v) ~= 'table' or getmetatable(v) ~= nil then return false end
      for k, x in pairs(v) do
        if math.type(k) ~= 'integer' or type(x) ~= 'number' then return false end
      end
      return true
    end,
    what = 'a number or a table of numbers',
  },
  bool = { test = function(v) return type(v) == 'boolean' end, what = 'a boolean' },
  dim = { test = is_int, what = 'an integer dimension (counted from 1)' },
  dims = { test = int_list, what = 'an integer dimension or a table of them (counted from 1)' },
  ['int[]'] = { test = int_list, what = 'an integer or a table of integers' },
  dtype = { test = function(v) return DTYPES[v] == true end, what = 'a dtype (torch.float32, torch.int64, ...)' },
  device = {
    test = function(v)
      return type(v) == 'string' or math.type(v) == 'integer' or M.is_device(v)
    end,
    what = "a device ('cpu', 'cuda:0', torch.device(...))",
  },
  str = { test = function(v) return type(v) == 'string' end, what = 'a string' },
  table = { test = function(v) return type(v) == 'table' and getmetatable(v) == nil end, what = 'a table' },
  ['Tensor[]'] = {
    test = function(v)
      if type(v) ~= 'table' or getmetatable(v) ~= nil then return false end
      for k, x in pairs(v) do
        if math.type(k) ~= 'integer' then return false end
        if not M.is_tensor(x) then return false, ('element %d is a %s, expected a tensor'):format(k, type(x)) end
      end
      return true
    end,
    what = 'a table of tensors',
  },
  any = { test = function() return true end, what = 'any value' },
}

-- the check of one parameter's type text ('dims', 'Tensor|Scalar', "str{trunc,floor}")
local function make_type(text)
  local enum = text:match('^str{(.*)}$')
  if enum then
    local set, list = {}, {}
    for s in enum:gmatch('[^,%s]+') do set[s] = true; list[#list + 1] = ("'%s'"):format(s) end
    return {
      test = function(v) return set[v] == true end,
      what = #list == 1 and list[1] or table.concat(list, ', ', 1, #list - 1) .. ' or ' .. list[#list],
    }
  end
  local alts = {}
  for name in text:gmatch('[^|]+') do
    local ty = TYPES[name]
    if not ty then error(('torch.signature: unknown type %s in %s'):format(name, text), 3) end
    alts[#alts + 1] = ty
  end
  if #alts == 1 then return alts[1] end
  local whats = {}
  for i, ty in ipairs(alts) do whats[i] = ty.what end
  return {
    test = function(v)
      for _, ty in ipairs(alts) do if ty.test(v) then return true end end
      return false
    end,
    what = table.concat(whats, ' or '),
  }
end

-- ------------------------------------------------------------------ parsing signature lines

local function parse_default(text, where)
  if text == 'None' then return nil end
  if text == 'True' then return true end
  if text == 'False' then return false end
  if text == '[]' then return {} end
  local s = text:match("^'(.*)'$")
  if s then return s end
  local n = math.tointeger(text) or tonumber(text)
  if n then return n end
  if text == 'inf' then return math.huge end
  if text == '-inf' then return -math.huge end
  error(('torch.signature: bad default %s in %s'):format(text, where), 3)
end


-- Enums are written str{a,b}: the commas inside braces are not separators, so they are
-- read as \1 while the parameters are split.
local function protect(line)
  return (line:gsub('{(.-)}', function(inner) return '{' .. inner:gsub(',', '\1') .. '}' end))
end

-- 'sum(Tensor self, dims? dim=None, ...)' -> {name=, text=, params={...}, npos=, by_name={}}
function M.parse(text)
  local line = protect(text)
  local name, body = line:match('^%s*([%w_%.]+)%((.*)%)%s*$')
  if not name then error(('torch.signature: cannot read %s'):format(line), 2) end
  local sig = { name = name, text = text, params = {}, by_name = {}, npos = 0 }
  local kwonly = false
  for item in body:gmatch('[^,]+') do
    item = item:match('^%s*(.-)%s*$')
    if item == '*' then
      kwonly = true
    elseif item ~= '' then
      local ty, opt, pname, default = item:match('^(%S-)(%??)%s+([%w_]+)%s*=?%s*(.*)$')
      if not ty then error(('torch.signature: cannot read parameter %s of %s'):format(item, line), 2) end
      ty = ty:gsub('\1', ',')
      local p = { name = pname, type_text = ty, optional = opt == '?', type = make_type(ty), kwonly = kwonly }
      if default ~= '' then
        p.default = parse_default(default, line)
        p.has_default = true
        if default == 'None' then p.optional = true end
      end
      sig.params[#sig.params + 1] = p
      sig.by_name[pname] = p
      if not kwonly then sig.npos = sig.npos + 1 end
    end
  end
  return sig
end

-- ------------------------------------------------------------------ binding a call

-- whether the last argument v is the options table: a plain table whose keys are names
local function is_options(v)
  if type(v) ~= 'table' or getmetatable(v) ~= nil then return false end
  return next(v) == nil or v[1] == nil
end

-- NumPy's names that PyTorch's parser takes too: axis for dim, keepdims for keepdim
local NUMPY_NAMES = { dim = 'axis', keepdim = 'keepdims' }
local NUMPY_OF = { axis = 'dim', keepdims = 'keepdim' }

-- Fills out (a table) with sig's parameters from the n arguments in args (the options table
-- already split off as opts).  Returns true, or false and why not.
local function bind(sig, args, n, opts, out)
  local params = sig.params
  if n > sig.npos then
    local names = {}
    for i = 1, sig.npos do names[i] = params[i].name end
    return false, ('too many arguments (%d before the options): its positional parameters are %s')
      :format(n, table.concat(names, ', '))
  end
  for i = 1, #params do
    local p, v = params[i], nil
    local given_pos = i <= n and not p.kwonly
    if given_pos then v = args[i] end
    local ov = opts and opts[p.name]
    local alias = opts and NUMPY_NAMES[p.name]
    if alias and opts[alias] ~= nil then
      if ov ~= nil then return false, ('%s given twice (as %s and as %s)'):format(p.name, p.name, alias) end
      ov = opts[alias]
    end
    if ov ~= nil then
      if given_pos and v ~= nil then
        return false, ('%s given twice (as argument %d and as an option)'):format(p.name, i)
      end
      v = ov
    end
    -- false for an optional non-boolean parameter is Lua's "absent" (size = false)
    if v == false and (p.optional or p.has_default) and not p.type.test(false) then v = nil end
    if v == nil then
      if p.has_default then
        local d = p.default
        if type(d) == 'table' then d = {} end
        v = d
      elseif not p.optional then
        return false, ('%s must be %s, got nil (it has no default)'):format(p.name, p.type.what)
      end
    else
      local ok, why = p.type.test(v)
      if not ok then
        local where = ov ~= nil and ('option %s'):format(p.name) or p.name
        return false, ('%s must be %s, got %s%s'):format(where, p.type.what, describe(v), why and '; ' .. why or '')
      end
    end
    out[i] = v
  end
  if opts then
    for k, v in pairs(opts) do
      if sig.by_name[k] == nil and not (NUMPY_OF[k] and sig.by_name[NUMPY_OF[k]]) then
        local names = {}
        for _, p in ipairs(params) do
          if p.name ~= 'self' then names[#names + 1] = p.name end
        end
        return false, ('unknown option %s = %s (the options are %s)'):format(tostring(k), show(v), table.concat(names, ', ')), true
      end
    end
  end
  return true
end

local function kinds(args, n, opts)
  local out = {}
  for i = 1, n do
    local v = args[i]
    out[i] = M.is_tensor(v) and 'tensor' or type(v)
  end
  if opts then out[#out + 1] = 'options' end
  return table.concat(out, ', ')
end

-- M.wrap(name, lines, impl): a function taking the op's arguments as users pass them and
-- calling impl with every parameter of the first signature that binds them, in order;
-- when there are several signatures, the values are padded with nils to the longest one's
-- count and followed by the index of the signature that bound them.
function M.wrap(name, lines, impl)
  local sigs = {}
  for i, line in ipairs(lines) do sigs[i] = M.parse(line) end
  local width, known, names = 0, {}, {}
  for _, s in ipairs(sigs) do
    width = math.max(width, #s.params)
    for _, p in ipairs(s.params) do
      if not known[p.name] and p.name ~= 'self' then names[#names + 1] = p.name end
      known[p.name] = true
    end
  end
  local known_list = table.concat(names, ', ')
  local unpack = table.unpack
  local single = #sigs == 1
  local fn = function(...)
    local n = select('#', ...)
    local args = { ... }
    while n > 0 and args[n] == nil do n = n - 1 end   -- trailing nils are absent arguments
    local opts
    if n > 0 and is_options(args[n]) then
      -- an empty table where the first form takes dims is that argument ({} is every dim),
      -- anywhere else it is an empty options table
      local p = sigs[1].params[n]
      if not (next(args[n]) == nil and p and not p.kwonly and p.type_text:find('dims', 1, true)) then
        opts = args[n]
        args[n] = nil
        n = n - 1
      end
    elseif n > 0 and type(args[n]) == 'table' and getmetatable(args[n]) == nil and args[n][1] ~= nil then
      for k in pairs(args[n]) do
        if math.type(k) ~= 'integer' then
          options.error(('%s: the last table mixes values and options (%s); pass options in a table of their own')
            :format(name, describe(args[n])))
        end
      end
    end
    -- the error to show: from a form that takes this many arguments, else any form's
    if opts and not single then
      -- an option that no form knows is named as such, not as a failed overload
      for k, v in pairs(opts) do
        if not known[k] and not (NUMPY_OF[k] and known[NUMPY_OF[k]]) then
          options.error(('%s: unknown option %s = %s (the options are %s)'):format(name, tostring(k), show(v), known_list))
        end
      end
    end
    local out, first_err, arity_err, unknown_err = {}, nil, nil, nil
    for si = 1, #sigs do
      local ok, err, unknown = bind(sigs[si], args, n, opts, out)
      if ok then
        if single then return impl(unpack(out, 1, width)) end
        out[width + 1] = si
        return impl(unpack(out, 1, width + 1))
      end
      if unknown then unknown_err = unknown_err or err
      elseif n <= sigs[si].npos then arity_err = arity_err or err
      else first_err = first_err or err end
      for k in pairs(out) do out[k] = nil end
    end
    first_err = arity_err or first_err or unknown_err
    if single then options.error(('%s: %s'):format(name, first_err)) end
    local forms = {}
    for i, s in ipairs(sigs) do forms[i] = '  ' .. s.text end
    options.error(('%s: no form of it takes (%s): %s; its forms are\n%s')
      :format(name, kinds(args, n, opts), first_err, table.concat(forms, '\n')))
  end
  fn = M.fast_path(sigs, impl, fn, width)
  M.registry[fn] = { name = name, sigs = sigs }
  return fn
end

-- The common call, positional arguments of the right types and no table among them, runs
-- through code generated for the signatures: straight-line checks and defaults, no table
-- built.  Anything else (options, tables of dims, a wrong type, nil for a required
-- argument) goes to `slow`, the general binder above, which also gives every error.
function M.fast_path(sigs, impl, slow, width)
  local W = 0
  for _, s in ipairs(sigs) do W = math.max(W, s.npos) end
  local a = {}
  for i = 1, W do a[i] = 'a' .. i end
  local args = table.concat(a, ', ')
  local env, lines = { impl = impl, slow = slow, select = select, type = type }, {}
  local function emit(fmt, ...) lines[#lines + 1] = fmt:format(...) end
  emit('return function(%s, ...)', args)
  emit('  if select("#", ...) > 0 then return slow(%s, ...) end', args)
  for i = 1, W do emit('  if type(a%d) == "table" then return slow(%s) end', i, args) end
  for si, s in ipairs(sigs) do
    emit('  do')
    local vals = {}
    for i, p in ipairs(s.params) do
      local test, default = ('t%d_%d'):format(si, i), ('d%d_%d'):format(si, i)
      env[test], env[default] = p.type.test, p.default
      local dv = type(p.default) == 'table' and '{}' or default
      if p.kwonly then
        vals[i] = p.has_default and dv or 'nil'
        if not p.has_default and not p.optional then vals[i] = nil end
      else
        emit('    local b%d = a%d', i, i)
        if p.has_default then
          emit('    if b%d == nil then b%d = %s elseif not %s(b%d) then goto f%d end', i, i, dv, test, i, si)
        elseif p.optional then
          emit('    if b%d ~= nil and not %s(b%d) then goto f%d end', i, test, i, si)
        else
          emit('    if b%d == nil or not %s(b%d) then goto f%d end', i, test, i, si)
        end
        vals[i] = 'b' .. i
      end
    end
    local complete = true
    for i = 1, #s.params do if vals[i] == nil then complete = false end end   -- a required option
    for j = s.npos + 1, W do emit('    if a%d ~= nil then goto f%d end', j, si) end
    if complete then
      for i = #s.params + 1, width do vals[i] = 'nil' end
      if #sigs > 1 then vals[width + 1] = tostring(si) end
      emit('    return impl(%s)', table.concat(vals, ', '))
    else
      emit('    goto f%d', si)
    end
    emit('  end')
    emit('  ::f%d::', si)
  end
  emit('  return slow(%s)', args)
  emit('end')
  local src = table.concat(lines, '\n')
  local chunk = assert(load(src, '=signature ' .. sigs[1].name, 't', env))
  return chunk()
end

-- function value -> {name=, sigs=}: what help() and the docs show
M.registry = setmetatable({}, { __mode = 'k' })

-- the signature lines of a wrapped function, or nil
function M.lines(fn)
  local r = M.registry[fn]
  if not r then return nil end
  local out = {}
  for i, s in ipairs(r.sigs) do out[i] = s.text end
  return out
end

return M
