-- gnuplot: Torch7's plotting module, driving the gnuplot program through a pipe.
--
--   gnuplot.pngfigure('loss.png')            -- or svgfigure, epsfigure, dumbfigure, figure
--   gnuplot.plot('train', steps, losses, '-')
--   gnuplot.xlabel('step'); gnuplot.ylabel('loss'); gnuplot.title('training')
--   gnuplot.plotflush()                      -- the file is complete (gnuplot.close() too)
--
-- Series are given as Torch7 does: plot(y), plot(x, y), plot(x, y, style),
-- plot(name, x, y, style), or several tables {name, x, y, style}; x and y are 1-D tensors
-- or Lua arrays; style is '-' (lines), '+' or '.' (points), '+-' (both), '|' (impulses).
-- Also hist(t [, bins, min, max]), imagesc(matrix [, 'gray' | 'color']), title, xlabel,
-- ylabel, grid, axis, logscale, raw, close, closeall.  figure() opens a window where gnuplot
-- has one, and otherwise (no DISPLAY) draws in the console.  Debian: gnuplot-nox.
local gnuplot = {}

local figures, current = {}, nil

local function available()
  return os.execute('command -v gnuplot >/dev/null 2>&1') == true
end
gnuplot.available = available

local function quote(s)
  return '"' .. tostring(s):gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n') .. '"'
end

local function open(id, terminal, output)
  if not available() then
    error('gnuplot: the gnuplot program was not found; install it (Debian: apt-get install gnuplot-nox)', 3)
  end
  if figures[id] then gnuplot.close(id) end
  local pipe = assert(io.popen('gnuplot', 'w'))
  local fig = { id = id, pipe = pipe, terminal = terminal, output = output }
  pipe:write('set terminal ', terminal, '\n')
  if output then pipe:write('set output ', quote(output), '\n') end
  figures[id] = fig
  current = fig
  return id
end

local next_id = 1
local function new_id(n)
  if n then return n end
  while figures[next_id] do next_id = next_id + 1 end
  return next_id
end

-- figure([n]): a window (x11/qt/wxt when gnuplot has one and there is a display), else the
-- console's text terminal
function gnuplot.figure(n)
  local id = new_id(n)
  if figures[id] and not figures[id].output then current = figures[id]; return id end
  local term = os.getenv('DISPLAY') and 'wxt' or 'dumb size 79,24'
  return open(id, term, nil)
end

local function size(w, h, default_w, default_h)
  return ('size %d,%d'):format(w or default_w, h or default_h)
end

function gnuplot.pngfigure(fname, w, h) return open(new_id(), 'pngcairo ' .. size(w, h, 640, 480), fname) end
function gnuplot.svgfigure(fname, w, h) return open(new_id(), 'svg ' .. size(w, h, 640, 480), fname) end
function gnuplot.epsfigure(fname) return open(new_id(), 'postscript eps color', fname) end
-- dumbfigure([w, h]): plots drawn with characters on stdout
function gnuplot.dumbfigure(w, h) return open(new_id(), 'dumb ' .. size(w, h, 79, 24), nil) end

local function fig()
  return current or figures[gnuplot.figure()]
end

local function cmd(...)
  local f = fig()
  f.pipe:write(...)
  f.pipe:write('\n')
end

function gnuplot.raw(s) cmd(s) end
function gnuplot.title(s) cmd('set title ', quote(s)) end
function gnuplot.xlabel(s) cmd('set xlabel ', quote(s)) end
function gnuplot.ylabel(s) cmd('set ylabel ', quote(s)) end
function gnuplot.grid(on) cmd(on == false and 'unset grid' or 'set grid') end
function gnuplot.logscale(on) cmd(on == false and 'unset logscale' or 'set logscale') end
function gnuplot.movelegend(h, v) cmd('set key ', h or 'right', ' ', v or 'top') end
-- axis({xmin, xmax, ymin, ymax}) (nil or '' keeps that bound automatic) or axis('auto')
function gnuplot.axis(a)
  if a == 'auto' then cmd('set autoscale'); return end
  local function b(v) return (v == nil or v == '') and '*' or tostring(v) end
  cmd(('set xrange [%s:%s]'):format(b(a[1]), b(a[2])))
  cmd(('set yrange [%s:%s]'):format(b(a[3]), b(a[4])))
end

-- a 1-D tensor or a Lua array as a Lua array of numbers
local function numbers(v, what)
  if type(v) == 'table' then return v end
  local ok, list = pcall(function()
    if v:dim() ~= 1 then error(('%s must be 1-D, got %d-D'):format(what, v:dim())) end
    return v:double():tolist()
  end)
  if not ok then error('gnuplot.plot: ' .. tostring(list), 4) end
  return list
end

local STYLES = { ['-'] = 'lines', ['+'] = 'points pt 1', ['.'] = 'dots', ['+-'] = 'linespoints', ['-+'] = 'linespoints',
                 ['|'] = 'impulses', ['~'] = 'lines smooth csplines' }

local function series(args)
  -- {name, x, y, style}, {x, y, style}, {y} with the name and style optional
  local name, x, y, style
  local i = 1
  if type(args[i]) == 'string' then name = args[i]; i = i + 1 end
  local a, b = args[i], args[i + 1]
  if b ~= nil and type(b) ~= 'string' then x, y, style = a, b, args[i + 2] else y, style = a, b end
  if y == nil then error('gnuplot.plot: a series needs y values', 4) end
  y = numbers(y, 'y')
  if x then
    x = numbers(x, 'x')
    if #x ~= #y then error(('gnuplot.plot: x has %d values and y %d'):format(#x, #y), 4) end
  else
    x = {}
    for k = 1, #y do x[k] = k end
  end
  style = style or '-'
  if not STYLES[style] then error(('gnuplot.plot: unknown style %s (use -, +, ., +-, | or ~)'):format(quote(style)), 4) end
  return { name = name or '', x = x, y = y, style = STYLES[style] }
end

local function draw(list)
  local parts = {}
  for k, s in ipairs(list) do
    parts[k] = ("'-' using 1:2 title %s with %s"):format(quote(s.name), s.style)
  end
  local out = { 'plot ' .. table.concat(parts, ', ') }
  for _, s in ipairs(list) do
    for k = 1, #s.y do out[#out + 1] = ('%.17g %.17g'):format(s.x[k], s.y[k]) end
    out[#out + 1] = 'e'
  end
  cmd(table.concat(out, '\n'))
  fig().pipe:flush()
end

function gnuplot.plot(...)
  local args = { ... }
  local list = {}
  if type(args[1]) == 'table' and not getmetatable(args[1]) and (type(args[1][1]) == 'string' or type(args[1][1]) == 'userdata') then
    for k, a in ipairs(args) do list[k] = series(a) end   -- plot({name, x, y, style}, ...)
  else
    list[1] = series(args)
  end
  draw(list)
end

-- hist(t [, bins = 100, min, max]): a histogram of the values of t
function gnuplot.hist(t, bins, lo, hi)
  bins = bins or 100
  local v = type(t) == 'table' and t or t:double():reshape(t:numel()):tolist()
  if #v == 0 then error('gnuplot.hist: no values', 2) end
  lo, hi = lo or math.min(table.unpack(v)), hi or math.max(table.unpack(v))
  if hi == lo then hi = lo + 1 end
  local counts, width = {}, (hi - lo) / bins
  for k = 1, bins do counts[k] = 0 end
  for _, x in ipairs(v) do
    if x >= lo and x <= hi then
      local k = math.min(bins, math.floor((x - lo) / width) + 1)
      counts[k] = counts[k] + 1
    end
  end
  local centres = {}
  for k = 1, bins do centres[k] = lo + (k - 0.5) * width end
  cmd(('set boxwidth %.17g'):format(width))
  cmd('set style fill solid 0.5')
  draw({ { name = '', x = centres, y = counts, style = 'boxes' } })
end

-- imagesc(m [, 'gray' | 'color']): a 2-D tensor as an image, rows from the top
function gnuplot.imagesc(m, palette)
  if m:dim() ~= 2 then error(('gnuplot.imagesc: expected a 2-D tensor, got %d-D'):format(m:dim()), 2) end
  cmd(palette == 'color' and 'set palette color' or 'set palette gray')
  cmd('set yrange [] reverse')
  local rows = m:double():tolist()
  local out = { "plot '-' matrix with image notitle" }
  for _, r in ipairs(rows) do
    local cells = {}
    for k, x in ipairs(r) do cells[k] = ('%.9g'):format(x) end
    out[#out + 1] = table.concat(cells, ' ')
  end
  out[#out + 1] = 'e'
  cmd(table.concat(out, '\n'))
  fig().pipe:flush()
end

-- plotflush(): finishes the current file (a later plot on the same figure starts it again)
function gnuplot.plotflush()
  local f = fig()
  if f.output then f.pipe:write('set output\n') end
  f.pipe:flush()
end

-- close([n]): ends the figure's gnuplot (waiting for it, so its file is complete)
function gnuplot.close(n)
  local f = n and figures[n] or current
  if not f then return end
  f.pipe:write('quit\n')
  f.pipe:close()
  figures[f.id] = nil
  if current == f then current = nil end
end

function gnuplot.closeall()
  for id in pairs(figures) do gnuplot.close(id) end
end

return gnuplot
