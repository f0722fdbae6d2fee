-- torch.data.progress: the DataLoader's progress bar on stderr.
--
-- On a terminal one line is redrawn in place with \r:
--    37/100 [==========>                  ]  37%  812.4 batches/s  0:00:00 left  loss=0.31
-- While it is shown, print() first clears it and it is redrawn below what was printed, so
-- the loop's own lines never land on the bar's line (tqdm.write's behaviour for print).
-- When stderr is not a terminal (a log file, a pipe), a plain line is written each quarter
-- of the epoch.  set_postfix{...} adds `key=value` fields after the bar.
local C = require('torch._C').data

local Progress = {}
Progress.__index = Progress

local WIDTH = 30

local function clock_str(s)
  if s ~= s or s == math.huge or s < 0 then return '?' end
  s = math.floor(s + 0.5)
  return ('%d:%02d:%02d'):format(s // 3600, s // 60 % 60, s % 60)
end

-- out: where to write (io.stderr by default); tty: whether to redraw in place (default:
-- whether stderr is a terminal).
function Progress.new(total, out, tty)
  local self = setmetatable({}, Progress)
  self.total = total
  self.out = out or io.stderr
  if tty == nil then tty = C.stderr_isatty() end
  self.tty = tty
  self.start = C.clock()
  self.last_draw = -1
  self.next_quarter = 1
  self.done = 0
  self.finished = false
  return self
end

local active   -- the bar on the terminal now, whose print wrapper is installed

local function postfix_str(t)
  if not t then return '' end
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for i, k in ipairs(keys) do
    local v = t[k]
    if type(v) == 'userdata' and v.item then v = v:item() end
    parts[i] = ('%s=%s'):format(k, math.type(v) == 'float' and ('%.4g'):format(v) or tostring(v))
  end
  return #parts > 0 and '  ' .. table.concat(parts, ', ') or ''
end

-- set_postfix{loss = 0.31, epoch = 2}: shown after the bar from the next redraw on
function Progress:set_postfix(t)
  if t ~= nil and type(t) ~= 'table' then error('set_postfix: expected a table of name = value', 2) end
  self.postfix = t
  if self.tty and not self.finished and self.done > 0 then
    self.last_draw = -1
    self:step(self.done)
  end
end

-- the bar's line erased (the cursor back at its start)
function Progress:clear()
  if self.width and self.width > 0 then
    self.out:write('\r' .. (' '):rep(self.width) .. '\r')
    self.out:flush()
    self.width = 0
  end
end

-- while a terminal bar is shown, print() clears it first and redraws it after
local function hook_print(bar)
  if active then return end
  active = bar
  local print0 = _G.print
  bar.print0 = print0
  _G.print = function(...)
    if active and active.tty and not active.finished then
      active:clear()
      print0(...)
      active.last_draw = -1
      active:step(active.done)
    else
      print0(...)
    end
  end
end

local function unhook_print(bar)
  if active == bar then
    _G.print = bar.print0
    active = nil
  end
end

function Progress:line(done)
  local elapsed = C.clock() - self.start
  local rate = elapsed > 0 and done / elapsed or 0
  local left = rate > 0 and (self.total - done) / rate or (done == self.total and 0 or math.huge)
  local pct = self.total > 0 and math.floor(100 * done / self.total) or 100
  return ('%d/%d'):format(done, self.total), pct, rate, clock_str(left), elapsed
end

function Progress:step(done)
  self.done = done
  local count, pct, rate, left = self:line(done)
  if self.tty then
    local now = C.clock()
    if done < self.total and now - self.last_draw < 0.1 then return end
    self.last_draw = now
    local fill = self.total > 0 and math.floor(WIDTH * done / self.total) or WIDTH
    local bar = ('='):rep(fill) .. (fill < WIDTH and '>' or '') .. (' '):rep(math.max(WIDTH - fill - 1, 0))
    local line = ('%s [%s] %3d%%  %.1f batches/s  %s left%s'):format(count, bar, pct, rate, left,
      postfix_str(self.postfix))
    hook_print(self)
    -- pad over the end of a longer previous line
    local pad = (' '):rep(math.max((self.width or 0) - #line, 0))
    self.width = #line
    self.out:write('\r' .. line .. pad)
    self.out:flush()
  else
    -- a plain line each time another quarter is done (and at the end)
    local quarter = self.total > 0 and (4 * done) // self.total or 4
    if quarter >= self.next_quarter or done == self.total then
      self.next_quarter = quarter + 1
      self.out:write(('%s batches (%d%%), %.1f batches/s, %s left%s\n'):format(count, pct, rate, left,
        postfix_str(self.postfix)))
      self.out:flush()
    end
  end
end

function Progress:finish()
  if self.finished then return end
  self.finished = true
  if self.tty then
    self.last_draw = -1
    self.finished = false
    self:step(self.done)
    self.finished = true
    self.out:write('\n')
    self.out:flush()
    unhook_print(self)
  elseif self.done < self.total then
    local count, pct, rate = self:line(self.done)
    self.out:write(('%s batches (%d%%), %.1f batches/s, stopped\n'):format(count, pct, rate))
  end
end

return Progress
