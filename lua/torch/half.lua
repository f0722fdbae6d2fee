-- torch.half: float16 and bfloat16 through the ops written in Lua as compositions of
-- engine ops.  Each engine op computes in float32 and rounds its result once, but a
-- composition of several would round every intermediate to the half dtype (x * x
-- overflows float16 past 256, and underflows below 2^-12), so these ops instead run their
-- composition on float32 copies of their half inputs and round the results once.
local M = {}

local HALF = { float16 = true, bfloat16 = true }
local is_tensor = require('torch._C').is_tensor

-- the half dtype the result takes, and whether any argument is a half tensor: tensors are
-- the arguments and the tensors one level inside an options table (weight =, fweights =)
local function scan(n, args)
  local half, other, any = nil, false, false
  local function see(v)
    if not is_tensor(v) then return end
    local dt = v.dtype
    if HALF[dt] then
      any = true
      if half and half ~= dt then other = true end
      half = half or dt
    elseif dt == 'float32' or dt == 'float64' then
      other = true
    end
  end
  for i = 1, n do
    local v = args[i]
    if type(v) == 'table' and getmetatable(v) == nil then
      for _, x in pairs(v) do see(x) end
      if v.dtype ~= nil then other = true end   -- the result dtype asked for stays
    else
      see(v)
    end
  end
  -- float16 with bfloat16, or with float32 or float64, promotes to float32 or wider anyway
  return (not other) and half or nil, any
end

local function up(v)
  if is_tensor(v) and HALF[v.dtype] then return v:to('float32') end
  return v
end

local function down(v, half)
  if is_tensor(v) and v.dtype == 'float32' then return v:to(half) end
  return v
end

-- fn, computing in float32 where it is given float16 or bfloat16 tensors: its half
-- arguments are converted (autograd carries the gradient back through the conversion) and
-- its float32 results rounded once to the half dtype of the inputs.  Integer and boolean
-- results (indices, masks) come back as fn gives them.
function M.in_float32(fn)
  local w = function(...)
    local n = select('#', ...)
    local args = { ... }
    local half, any = scan(n, args)
    if not any then return fn(...) end
    for i = 1, n do
      local v = args[i]
      if type(v) == 'table' and getmetatable(v) == nil then
        local copy = {}
        for k, x in pairs(v) do copy[k] = up(x) end
        args[i] = copy
      else
        args[i] = up(v)
      end
    end
    local out = table.pack(fn(table.unpack(args, 1, n)))
    if half then
      for i = 1, out.n do out[i] = down(out[i], half) end
    end
    return table.unpack(out, 1, out.n)
  end
  -- the wrapper takes the signature of what it wraps (help() shows it)
  local registry = require('torch.signature').registry
  registry[w] = registry[fn]
  return w
end

-- puts the float32-computing form of each named function of tbl in its place (and of
-- methods[name] where methods is given and has it)
function M.wrap(tbl, names, methods)
  for _, name in ipairs(names) do
    local fn = rawget(tbl, name)
    assert(type(fn) == 'function', name)
    local w = M.in_float32(fn)
    if methods and rawget(methods, name) == fn then
      rawset(methods, name, w)
    elseif methods and type(rawget(methods, name)) == 'function' then
      rawset(methods, name, M.in_float32(rawget(methods, name)))
    end
    rawset(tbl, name, w)
  end
end

-- the compositions of torch (and Tensor) that compute in float32 for half inputs
M.TORCH = { 'addcmul', 'addcdiv', 'floor_divide', 'cdist', 'cosine_similarity', 'pairwise_distance',
            'cov', 'corrcoef', 'norm', 'dist', 'histc', 'std', 'std_mean', 'trapezoid', 'trapz',
            'cumulative_trapezoid' }
-- and of nn.functional
M.FUNCTIONAL = { 'normalize', 'cosine_similarity', 'pairwise_distance', 'local_response_norm',
                 'binary_cross_entropy_with_logits', 'kl_div' }

return M
