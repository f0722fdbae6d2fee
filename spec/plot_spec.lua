-- Loss curves: torch.utils.SummaryWriter (CSV), optim.Logger, and the gnuplot module that
-- draws them (PNG files checked by their header: an image of the asked size).
local torch = require 'torch'
local optim = require 'optim'
local gnuplot = require 'gnuplot'
local shell = dofile('spec/helpers/shell.lua')
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function png_size(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local head = f:read(24)
  f:close()
  if not head or #head < 24 or head:sub(1, 8) ~= '\137PNG\r\n\26\n' or head:sub(13, 16) ~= 'IHDR' then return nil end
  return (string.unpack('>I4', head, 17)), (string.unpack('>I4', head, 21))
end

local dir
before_each(function()
  dir = os.tmpname()
  os.remove(dir)
  os.execute('mkdir -p ' .. dir)
end)
after_each(function() os.execute('rm -rf ' .. dir) end)

describe('SummaryWriter', function()
  it('writes tag,step,value rows, numbers steps itself when none is given, and reads them back', function()
    local w = torch.utils.SummaryWriter(dir .. '/run')
    w:add_scalar('loss', 0.5, 10)
    w:add_scalar('loss', torch.tensor(0.25), 11)
    w:add_scalars('acc', { test = 0.5, train = 0.75 }, 11)
    w:add_scalar('lr', 0.1)
    w:add_scalar('lr', 0.05)
    w:add_scalar('odd,"tag"', 1, 1)
    w:close()
    local lines = {}
    for line in io.lines(dir .. '/run/scalars.csv') do lines[#lines + 1] = line:gsub(',[^,]*$', '') end
    assert.are.same({ 'tag,step,value', 'loss,10,0.5', 'loss,11,0.25', 'acc/test,11,0.5', 'acc/train,11,0.75',
      'lr,0,0.1', 'lr,1,0.05', '"odd,""tag""",1,1' }, lines)
    local back = torch.utils.read_scalars(dir .. '/run/scalars.csv')
    assert.are.same({ steps = { 10, 11 }, values = { 0.5, 0.25 } }, back.loss)
    assert.are.same({ 1 }, back['odd,"tag"'].values)
    expect_error(function() w:add_scalar('x', 1) end, 'after close')
    local w2 = torch.utils.SummaryWriter(dir .. '/run2')
    expect_error(function() w2:add_scalar('x', 'high') end, 'the value must be a number, got string')
    expect_error(function() w2:add_scalar('x', torch.ones(2)) end, 'one-element tensor, got 2 elements')
    w2:close()
  end)
end)

describe('gnuplot', function()
  if not gnuplot.available() then
    pending('gnuplot is not installed (apt-get install gnuplot-nox): plots are not checked')
    return
  end

  it('draws a PNG of the asked size, and an SVG', function()
    gnuplot.pngfigure(dir .. '/a.png', 320, 200)
    gnuplot.title('a "title"')
    gnuplot.plot({ 'squares', torch.arange(10):double(), torch.arange(10):double():pow(2), '-' },
      { 'line', { 1, 2, 3 }, { 3, 2, 1 }, '+' })
    gnuplot.close()
    assert.are.same({ 320, 200 }, { png_size(dir .. '/a.png') })
    gnuplot.svgfigure(dir .. '/h.svg')
    gnuplot.hist(torch.randn(500), 20)
    gnuplot.close()
    assert.is_truthy(io.open(dir .. '/h.svg'):read('a'):find('<svg', 1, true))
    gnuplot.pngfigure(dir .. '/i.png')
    gnuplot.imagesc(torch.rand(6, 6), 'color')
    gnuplot.close()
    assert.are.same({ 640, 480 }, { png_size(dir .. '/i.png') })
  end)

  it('explains bad series', function()
    gnuplot.pngfigure(dir .. '/bad.png')
    expect_error(function() gnuplot.plot(torch.ones(3), torch.ones(2)) end, 'x has 3 values and y 2')
    expect_error(function() gnuplot.plot(torch.ones(2, 2)) end, 'y must be 1-D, got 2-D')
    expect_error(function() gnuplot.plot(torch.ones(3), 'x') end, 'unknown style "x"')
    gnuplot.close()
  end)

  it('SummaryWriter:plot and optim.Logger:plot write PNGs', function()
    local w = torch.utils.SummaryWriter(dir .. '/run')
    for i = 1, 5 do w:add_scalar('loss', 1 / i, i) end
    w:plot('loss', dir .. '/loss.png', { width = 400, height = 300 })
    w:close()
    assert.are.same({ 400, 300 }, { png_size(dir .. '/loss.png') })
    expect_error(function() w:plot('nothing', dir .. '/n.png') end, "no values were logged under 'nothing'")
    local logger = optim.Logger(dir .. '/acc.log')
    logger:setNames({ 'train', 'test' })
    for i = 1, 4 do logger:add({ i, 2 * i }) end
    logger:style({ '+-', '-' })
    assert.are.equal(dir .. '/acc.log.png', logger:plot())
    logger:close()
    assert.are.same({ 640, 480 }, { png_size(dir .. '/acc.log.png') })
    local text = io.open(dir .. '/acc.log'):read('a')
    assert.are.equal('train\ttest\n1\t2\n2\t4\n3\t6\n4\t8\n', text)
    expect_error(function() logger:add({ 1 }) end, 'the row has 1 values, the logger 2 columns')
  end)

  it('examples/mlp.lua draws its loss curve', function()
    local p = io.popen(('%s examples/mlp.lua 2 %s 2>&1'):format(shell.q(shell.bin), shell.q(dir .. '/curve.png')))
    local out = p:read('a')
    assert.is_true(p:close(), out)
    assert.is_truthy(out:find('loss curve written to', 1, true), out)
    assert.are.same({ 640, 480 }, { png_size(dir .. '/curve.png') })
  end)
end)

describe('gnuplot without the program', function()
  it('names the package to install', function()
    local cmd = ('env PATH=/nonexistent %s -e %s 2>&1'):format(shell.q(shell.bin),
      shell.q("require('gnuplot').pngfigure('/tmp/x.png')"))
    local p = io.popen(cmd)
    local out = p:read('a')
    p:close()
    assert.is_truthy(out:find('apt-get install gnuplot-nox', 1, true), out)
  end)
end)
