-- torch.finfo and torch.iinfo: the numerical properties of a dtype, as PyTorch's
-- (torch.finfo(torch.float32).eps is the usual "small number" of programs that port
-- np.finfo(np.float32).eps).
local M = {}

-- bits, eps, max, tiny (the smallest normal), resolution (10^-digits), for each float dtype
local FLOATS = {
  float32 = { bits = 32, eps = 2.0 ^ -23, max = (2 - 2.0 ^ -23) * 2.0 ^ 127, tiny = 2.0 ^ -126, resolution = 1e-6 },
  float64 = { bits = 64, eps = 2.0 ^ -52, max = (2 - 2.0 ^ -52) * 2.0 ^ 1023, tiny = 2.0 ^ -1022, resolution = 1e-15 },
  float16 = { bits = 16, eps = 2.0 ^ -10, max = 65504.0, tiny = 2.0 ^ -14, resolution = 1e-3 },
  bfloat16 = { bits = 16, eps = 2.0 ^ -7, max = (2 - 2.0 ^ -7) * 2.0 ^ 127, tiny = 2.0 ^ -126, resolution = 1e-2 },
}

local function dtype_of(torch, who, dtype, default)
  if dtype == nil then return default end
  if torch.is_tensor(dtype) then return dtype.dtype end
  if type(dtype) ~= 'string' then
    error(('%s: expected a dtype (such as torch.float32), got %s'):format(who, type(dtype)), 3)
  end
  local ok, canon = pcall(function() return torch.zeros(0, { dtype = dtype }).dtype end)
  if not ok then error(('%s: unknown dtype %q'):format(who, dtype), 3) end
  return canon
end

local function info_string(kind, t, fields)
  local parts = {}
  for _, k in ipairs(fields) do
    local v = t[k]
    parts[#parts + 1] = ('%s=%s'):format(k, type(v) == 'string' and v or ('%.6g'):format(v))
  end
  return ('%s(%s)'):format(kind, table.concat(parts, ', '))
end

local finfo_mt = {
  __tostring = function(t)
    return info_string('finfo', t, { 'resolution', 'min', 'max', 'eps', 'smallest_normal', 'tiny', 'dtype' })
  end,
}
local iinfo_mt = {
  __tostring = function(t) return info_string('iinfo', t, { 'min', 'max', 'dtype' }) end,
}

function M.install(torch)
  -- torch.finfo([dtype]): bits, eps, max, min, tiny, smallest_normal, resolution, dtype
  -- of a floating point dtype (the default dtype without an argument)
  function torch.finfo(dtype)
    local dt = dtype_of(torch, 'torch.finfo', dtype, torch.get_default_dtype())
    local f = FLOATS[dt]
    if not f then
      error(('torch.finfo: %s is not a floating point dtype (use torch.iinfo for integers)'):format(dt), 2)
    end
    return setmetatable({ bits = f.bits, eps = f.eps, max = f.max, min = -f.max, tiny = f.tiny,
                          smallest_normal = f.tiny, resolution = f.resolution, dtype = dt }, finfo_mt)
  end

  -- torch.iinfo(dtype): bits, min, max, dtype of an integer dtype
  function torch.iinfo(dtype)
    local dt = dtype_of(torch, 'torch.iinfo', dtype, nil)
    if dt ~= 'int64' then
      error(('torch.iinfo: %s is not an integer dtype (use torch.finfo for floating point)'):format(tostring(dt)), 2)
    end
    return setmetatable({ bits = 64, min = math.mininteger, max = math.maxinteger, dtype = dt }, iinfo_mt)
  end
end

return M
