-- torch.utils: SummaryWriter, a scalar logger in the shape of PyTorch's
-- torch.utils.tensorboard.SummaryWriter that writes CSV (and plots with gnuplot).
--
--   local writer = torch.utils.SummaryWriter('runs/mlp')
--   writer:add_scalar('loss/train', loss, step)
--   writer:add_scalars('loss', {train = a, test = b}, step)   -- tags loss/train, loss/test
--   writer:plot({'loss/train', 'loss/test'}, 'runs/mlp/loss.png')
--   writer:close()
--
-- The file is LOGDIR/scalars.csv with the header "tag,step,value,wall_time", one row per
-- value, flushed every `flush_every` rows (default 1) and at close.
local torch = require 'torch'

local utils = {}

local SummaryWriter = {}
SummaryWriter.__index = SummaryWriter

local function csv_field(s)
  s = tostring(s)
  if s:find('[,"\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

local function number(v, who)
  if torch.is_tensor(v) then
    if v:numel() ~= 1 then error(('%s: the value must be a number or a one-element tensor, got %d elements'):format(who, v:numel()), 3) end
    v = v:item()
  end
  if type(v) ~= 'number' then error(('%s: the value must be a number, got %s'):format(who, type(v)), 3) end
  return v
end

-- SummaryWriter([logdir = 'runs/<date>-<time>'] [, {flush_every = 1}])
function utils.SummaryWriter(logdir, opts)
  logdir = logdir or ('runs/' .. os.date('%Y%m%d-%H%M%S'))
  opts = opts or {}
  if os.execute(('mkdir -p %q'):format(logdir)) ~= true then
    error(('SummaryWriter: cannot create the folder %s'):format(logdir), 2)
  end
  local path = logdir .. '/scalars.csv'
  local existed = io.open(path, 'r')
  if existed then existed:close() end
  local f, err = io.open(path, 'a')
  if not f then error('SummaryWriter: ' .. tostring(err), 2) end
  if not existed then f:write('tag,step,value,wall_time\n') end
  return setmetatable({ logdir = logdir, path = path, file = f, rows = 0,
                        flush_every = opts.flush_every or 1, steps = {} }, SummaryWriter)
end

function SummaryWriter:add_scalar(tag, value, step, wall_time)
  if not self.file then error('SummaryWriter: add_scalar after close', 2) end
  if type(tag) ~= 'string' then error('add_scalar: the tag must be a string', 2) end
  value = number(value, 'add_scalar')
  if step == nil then step = (self.steps[tag] or -1) + 1 end
  self.steps[tag] = step
  self.file:write(csv_field(tag), ',', ('%d'):format(step), ',', ('%.9g'):format(value), ',',
    ('%.3f'):format(wall_time or os.time()), '\n')
  self.rows = self.rows + 1
  if self.rows % self.flush_every == 0 then self.file:flush() end
end

function SummaryWriter:add_scalars(main_tag, values, step, wall_time)
  local keys = {}
  for k in pairs(values) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do self:add_scalar(main_tag .. '/' .. k, values[k], step, wall_time) end
end

function SummaryWriter:flush() if self.file then self.file:flush() end end

function SummaryWriter:close()
  if self.file then self.file:close(); self.file = nil end
end
SummaryWriter.__close = SummaryWriter.close

-- read_scalars(path) -> {tag = {steps = {...}, values = {...}}}
function utils.read_scalars(path)
  local out = {}
  local f = assert(io.open(path, 'r'))
  local header = true
  for line in f:lines() do
    if header then header = false else
      local tag, step, value = line:match('^(.*),(%-?%d+),([^,]+),[^,]*$')
      if tag then
        tag = tag:match('^"(.*)"$') and tag:sub(2, -2):gsub('""', '"') or tag
        local s = out[tag] or { steps = {}, values = {} }
        out[tag] = s
        s.steps[#s.steps + 1] = tonumber(step)
        s.values[#s.values + 1] = tonumber(value)
      end
    end
  end
  f:close()
  return out
end

-- plot(tags, file [, {title=, width=, height=}]): the tags' curves as a PNG (or SVG when
-- file ends in .svg), with gnuplot
function SummaryWriter:plot(tags, file, opts)
  opts = opts or {}
  self:flush()
  if type(tags) == 'string' then tags = { tags } end
  local data = utils.read_scalars(self.path)
  local gnuplot = require 'gnuplot'
  if file:match('%.svg$') then gnuplot.svgfigure(file, opts.width, opts.height)
  else gnuplot.pngfigure(file, opts.width, opts.height) end
  gnuplot.xlabel('step')
  if opts.title then gnuplot.title(opts.title) end
  local series = {}
  for _, tag in ipairs(tags) do
    local s = data[tag]
    if not s then error(("SummaryWriter:plot: no values were logged under '%s'"):format(tag), 2) end
    series[#series + 1] = { tag, s.steps, s.values, '-' }
  end
  gnuplot.plot(table.unpack(series))
  gnuplot.close()
end

-- torch.utils.data: PyTorch's name for torch.data (DataLoader, TensorDataset, Subset ...)
setmetatable(utils, {
  __index = function(t, k)
    if k ~= 'data' then return nil end
    local v = require 'torch.data'
    rawset(t, k, v)
    return v
  end,
})

return utils
