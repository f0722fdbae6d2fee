-- torch.scope: runs a function inside a scope (no_grad, enable_grad, autocast,
-- detect_anomaly ...) and leaves the scope when it returns or raises.  The scope is left by
-- a to-be-closed variable, not by pcall, so an error raised inside fn keeps fn's frames in
-- its traceback.
local M = {}

local guard_mt = { __close = function(self) self.leave() end }

-- run(leave, fn, ...): fn(...)'s results; leave() runs after fn, whether it returned or raised
function M.run(leave, fn, ...)
  local guard <close> = setmetatable({ leave = leave }, guard_mt)
  return fn(...)
end

return M
