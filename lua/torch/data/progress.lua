-- torch.data.progress: the DataLoader's progress bar on stderr.
--
-- On a terminal one line is redrawn in place with \r:
--    37/100 [==========>                  ]  37%  812.4 batches/s  0:00:00 left
-- When stderr is not a terminal (a log file, a pipe), a plain line is written every ~10%.
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
  self.next_decile = 1
  self.done = 0
  self.finished = false
  return self
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
    local line = ('%s [%s] %3d%%  %.1f batches/s  %s left'):format(count, bar, pct, rate, left)
    -- pad over the end of a longer previous line
    local pad = (' '):rep(math.max((self.width or 0) - #line, 0))
    self.width = #line
    self.out:write('\r' .. line .. pad)
    self.out:flush()
  else
    -- a plain line each time another tenth is done (and at the end)
    local decile = self.total > 0 and (10 * done) // self.total or 10
    if decile >= self.next_decile or done == self.total then
      self.next_decile = decile + 1
      self.out:write(('%s batches (%d%%), %.1f batches/s, %s left\n'):format(count, pct, rate, left))
      self.out:flush()
    end
  end
end

function Progress:finish()
  if self.finished then return end
  self.finished = true
  if self.tty then
    self.last_draw = -1
    self:step(self.done)
    self.out:write('\n')
    self.out:flush()
  elseif self.done < self.total then
    local count, pct, rate = self:line(self.done)
    self.out:write(('%s batches (%d%%), %.1f batches/s, stopped\n'):format(count, pct, rate))
  end
end

return Progress
