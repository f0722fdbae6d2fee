-- optim.Logger: Torch7's logger of columns of numbers, with a plot through gnuplot.
--
--   local logger = optim.Logger('accuracy.log')
--   logger:setNames{'train acc', 'test acc'}
--   logger:add{train, test}                  -- one row per call
--   logger:style{'+-', '+-'}
--   logger:plot()                            -- accuracy.log.png
--
-- The file has the names on its first line and one row of numbers per add, separated by
-- tabs, flushed at every add.
local Logger = {}
Logger.__index = Logger

local function new(_, path)
  if path ~= nil and type(path) ~= 'string' then error('optim.Logger: the file name must be a string', 2) end
  local f
  if path then
    local err
    f, err = io.open(path, 'w')
    if not f then error('optim.Logger: ' .. tostring(err), 2) end
  end
  return setmetatable({ path = path, file = f, names = {}, columns = {}, styles = {} }, Logger)
end

function Logger:setNames(names)
  self.names = names
  for i = 1, #names do self.columns[i] = self.columns[i] or {} end
  if self.file then
    self.file:write(table.concat(names, '\t'), '\n')
    self.file:flush()
  end
  return self
end

function Logger:add(row)
  if #self.names == 0 then
    for i = 1, #row do self.names[i] = tostring(i); self.columns[i] = {} end
  end
  if #row ~= #self.names then
    error(('Logger:add: the row has %d values, the logger %d columns (%s)'):format(#row, #self.names,
      table.concat(self.names, ', ')), 2)
  end
  local cells = {}
  for i, v in ipairs(row) do
    if type(v) ~= 'number' then v = v.item and v:item() or error('Logger:add: values must be numbers', 2) end
    table.insert(self.columns[i], v)
    cells[i] = ('%g'):format(v)
  end
  if self.file then
    self.file:write(table.concat(cells, '\t'), '\n')
    self.file:flush()
  end
  return self
end

function Logger:style(styles) self.styles = styles; return self end

-- plot([file]): every column against the row number, as PNG (default: the log's name .. '.png')
function Logger:plot(file)
  local gnuplot = require 'gnuplot'
  file = file or ((self.path or 'logger') .. '.png')
  if file:match('%.svg$') then gnuplot.svgfigure(file) else gnuplot.pngfigure(file) end
  local series = {}
  for i, name in ipairs(self.names) do
    if #self.columns[i] > 0 then series[#series + 1] = { name, nil, self.columns[i], self.styles[i] or '-' } end
  end
  if #series == 0 then error('Logger:plot: nothing was logged', 2) end
  for _, s in ipairs(series) do   -- {name, nil, y, style} -> {name, y, style}
    s[2], s[3], s[4] = s[3], s[4], nil
  end
  gnuplot.plot(table.unpack(series))
  gnuplot.close()
  return file
end

function Logger:close()
  if self.file then self.file:close(); self.file = nil end
end

return setmetatable(Logger, { __call = new })
