-- spec/gpu/common.lua: what the GPU checks share.  Each check runs an operation on cuda:0
-- (or the device in DPLUA_GPU_DEVICE) and on the CPU with the same fresh random inputs and
-- compares: relative error under 1e-5 elementwise, 1e-4 for reductions and matrix
-- products (an absolute floor keeps values near zero from dominating); integer and bool
-- results must be equal.  spec/gpu/check runs the scripts with DPLUA_CUDA_POISON=1, so
-- every new allocation on the GPU starts as NaN and an output left unwritten fails.
--
--   local G = dofile(here .. 'common.lua')
--   G.check('add', function(d) return G.randn(d, 3, 4) + G.randn(d, 4) end)
--   os.exit(G.finish() and 0 or 1)
local M = {}

-- DPLUA_GPU_DEVICE=cpu:1 (with DPLUA_CPU_DEVICES=2) runs the checks on a second CPU device:
-- a dry run of the scripts themselves on a machine without a GPU.
M.dev = os.getenv('DPLUA_GPU_DEVICE') or 'cuda:0'
M.on_gpu = M.dev:match('^cuda') ~= nil
local dev_type = M.on_gpu and 'cuda' or 'cpu'

function M.sync() if M.on_gpu then torch.cuda.synchronize() end end

-- Exits (as a failure) when the device to check is a GPU and none is available.
function M.require_device()
  if M.on_gpu and not torch.cuda.is_available() then
    print('no CUDA device: nothing to check')
    print('0 passed, 1 failed')
    os.exit(1)
  end
end

M.ELEMENTWISE, M.REDUCTION = 1e-5, 1e-4
local passed, failed = 0, 0

-- Largest violation of |g - c| <= tol * max(|c|, floor) (<= 0 passes); NaN and
-- infinities must sit in the same places.
local function excess(g, c, tol, floor)
  local gl = g:cpu():double():reshape(-1):tolist()
  local cl = c:cpu():double():reshape(-1):tolist()
  local worst, worst_rel, at = -math.huge, 0, 0
  for i = 1, #cl do
    local x, y = gl[i], cl[i]
    if y ~= y or x ~= x or math.abs(y) == math.huge or math.abs(x) == math.huge then
      if not ((x ~= x and y ~= y) or x == y) then
        return math.huge, string.format('element %d is %s on the GPU, %s on the CPU', i, x, y)
      end
    else
      local scale = math.max(math.abs(y), floor)
      local d = math.abs(x - y)
      if d - tol * scale > worst then worst, worst_rel, at = d - tol * scale, d / scale, i end
    end
  end
  if #cl == 0 then worst = 0 end
  return worst, string.format('max relative error %.3g at element %d (%.9g vs %.9g; tolerance %.0e)',
    worst_rel, at, gl[at] or 0, cl[at] or 0, tol)
end

-- Compares a GPU result with the CPU result (tensors, or tables of tensors).
function M.compare(g, c, tol, floor)
  if type(c) ~= 'table' or getmetatable(c) then g, c = { g }, { c } end
  for i = 1, #c do
    local gi, ci = g[i], c[i]
    if gi == nil then return false, 'result ' .. i .. ' missing' end
    if type(ci) == 'number' then
      if type(gi) ~= 'number' then gi = gi:item() end
      local d = math.abs(gi - ci)
      if not (d <= tol * math.max(math.abs(ci), floor or 1)) then
        return false, string.format('result %d: %.9g on the GPU, %.9g on the CPU', i, gi, ci)
      end
    else
      if gi.device.type ~= dev_type then return false, 'result ' .. i .. ' is on ' .. tostring(gi.device) end
      if gi:size() ~= ci:size() then
        return false, string.format('result %d: shape %s on the GPU, %s on the CPU', i, tostring(gi:size()), tostring(ci:size()))
      end
      if gi.dtype ~= ci.dtype then return false, string.format('result %d: dtype %s vs %s', i, gi.dtype, ci.dtype) end
      if ci.dtype == 'int64' or ci.dtype == 'bool' then
        if not torch.equal(gi:cpu(), ci) then return false, 'result ' .. i .. ' differs (exact dtype ' .. ci.dtype .. ')' end
      else
        local e, msg = excess(gi, ci, tol, floor or 1e-3)
        if not (e <= 0) then return false, 'result ' .. i .. ': ' .. msg end
      end
    end
  end
  return true
end

local function record(name, ok, msg)
  if ok then
    passed = passed + 1
    print('PASS ' .. name)
  else
    failed = failed + 1
    print('FAIL ' .. name .. ': ' .. tostring(msg))
  end
  io.stdout:flush()
end
M.record = record

-- Runs fn(dev) on the GPU and on the CPU after the same manual_seed, so random inputs
-- drawn inside fn are the same on both, and compares the results.
-- opts: tol (default elementwise), floor (absolute floor of the relative error).
function M.check(name, fn, opts)
  opts = opts or {}
  local ok, err = pcall(function()
    torch.manual_seed(opts.seed or 1234)
    local c = table.pack(fn('cpu'))
    torch.manual_seed(opts.seed or 1234)
    local g = table.pack(fn(M.dev))
    M.sync()
    local good, msg = M.compare(g, c, opts.tol or M.ELEMENTWISE, opts.floor)
    if not good then error(msg, 0) end
  end)
  record(name, ok, err)
end

-- As check, but an error is a result too: when fn fails on the CPU it must fail on the
-- device with the same message (device names aside), as with a bad dtype combination.
function M.parity(name, fn, opts)
  opts = opts or {}
  torch.manual_seed(opts.seed or 1234)
  local okc, c = pcall(function() return table.pack(fn('cpu')) end)
  torch.manual_seed(opts.seed or 1234)
  local okg, g = pcall(function() local r = table.pack(fn(M.dev)); M.sync(); return r end)
  local function norm(e) return (tostring(e):gsub('cuda:%d+', 'DEV'):gsub('cpu:%d+', 'DEV'):gsub('cpu', 'DEV')) end
  if not okc then
    if okg then return record(name, false, 'the CPU raised "' .. tostring(c) .. '" but the device did not') end
    if norm(c) ~= norm(g) then
      return record(name, false, string.format('errors differ: CPU "%s", device "%s"', tostring(c), tostring(g)))
    end
    return record(name, true)
  end
  if not okg then return record(name, false, 'the device raised: ' .. tostring(g)) end
  local good, msg = M.compare(g, c, opts.tol or M.ELEMENTWISE, opts.floor)
  record(name, good, msg)
end

-- A condition that must hold (pcall'd; an error is a failure with its message).
function M.expect(name, fn)
  local ok, res = pcall(fn)
  if ok and res == false then ok, res = false, 'condition false' end
  record(name, ok, res)
end

-- Random inputs drawn on the CPU and moved to dev (identical on both sides).
function M.randn(dev, ...) return torch.randn(...):to(dev) end
function M.rand(dev, ...) return torch.rand(...):to(dev) end

function M.finish()
  print(string.format('%d passed, %d failed', passed, failed))
  return failed == 0
end

return M
