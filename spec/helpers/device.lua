-- spec/helpers/device.lua: the device the specs run on.  spec/run passes it to busted as
-- --helper with DPLUA_SPEC_DEVICE set (cuda:0, cpu:1, ...): every tensor the specs create
-- without device= is then created there (torch.set_default_device), so the same specs
-- check that device's kernels against the same hand-computed values.  Specs that print
-- or compare devices load it with dofile('spec/helpers/device.lua').
local torch = require 'torch'
local M = {}

local name = os.getenv('DPLUA_SPEC_DEVICE')
if name and name ~= '' then torch.set_default_device(name) end

M.name = tostring(torch.get_default_device())   -- 'cpu', 'cpu:1', 'cuda:0'
M.is_cuda = M.name:match('^cuda') ~= nil
M.tensor_type = M.is_cuda and 'torch.cuda.' or 'torch.'   -- .. 'FloatTensor'

-- what tostring gives on this device for a tensor that prints as s on the cpu.  PyTorch
-- puts device='...' first among the suffixes (before size=, dtype=, requires_grad=,
-- grad_fn=) and lays them out as its _add_suffixes does: a suffix that would pass column
-- 80 starts a new line indented under 'tensor('.
function M.printed(s)
  if M.name == 'cpu' then return s end
  local at = #s
  for _, key in ipairs({ ', size=', ', dtype=', ', requires_grad=', ', grad_fn=' }) do
    local i = s:find(key, 1, true)
    if i and i < at then at = i end
  end
  local body, rest = s:sub(1, at - 1), s:sub(at, -2)
  local suffixes = { "device='" .. M.name .. "'" }
  local pos = 1
  while pos <= #rest do
    local key, at_value = rest:match('^,%s*([%w_]+=)()', pos)
    assert(key, 'cannot read the suffixes of ' .. s)
    local value
    if rest:sub(at_value, at_value) == '(' then value, pos = rest:match('^(%b())()', at_value)
    else value, pos = rest:match('^([^,]+)()', at_value) end
    suffixes[#suffixes + 1] = key .. value
  end
  local out, last = { body }, #body - (body:match('.*()\n') or 0) + 2   -- PyTorch counts 2 over
  for _, suffix in ipairs(suffixes) do
    if last + #suffix + 2 > 80 then
      out[#out + 1] = ',\n       ' .. suffix
      last = 7 + #suffix
    else
      out[#out + 1] = ', ' .. suffix
      last = last + #suffix + 2
    end
  end
  return table.concat(out) .. ')'
end

return M
