-- help(x): a line of usage from the docs (the index tools/helpindex.lua builds from doc/*.md),
-- for names, function and class values, tensors and objects; close names for a typo.
local torch = require 'torch'
local nn = require 'nn'
local optim = require 'optim'

-- what torch.help(...) prints
local function help(...)
  local lines = {}
  local saved = _G.print
  _G.print = function(...)
    local parts = {}
    for i = 1, select('#', ...) do parts[i] = tostring((select(i, ...))) end
    lines[#lines + 1] = table.concat(parts, '\t')
  end
  local ok, err = pcall(torch.help, ...)
  _G.print = saved
  assert(ok, err)
  return table.concat(lines, '\n')
end

local function has(text, ...)
  for _, s in ipairs({ ... }) do
    assert.is_truthy(text:find(s, 1, true), ('expected %q in:\n%s'):format(s, text))
  end
end

-- the docs' own line for a name, so the expectations follow the docs
local function doc_line(page, needle)
  for line in io.lines(page) do
    if line:find(needle, 1, true) then return line end
  end
  error(needle .. ' not in ' .. page)
end

describe('help', function()
  it('finds a function by its name and by its value, with its usage and page', function()
    assert.is_truthy(doc_line('doc/tensor.md', '`torch.randn(...)`'))
    for _, x in ipairs({ 'torch.randn', torch.randn }) do
      local text = help(x)
      has(text, 'torch.randn(...)', 'N(0, 1)', 'doc/tensor.md', 'Creating tensors')
    end
  end)

  it('finds layers, optimizers and nn.functional under the names people use', function()
    has(help(nn.Linear), 'nn.Linear(in, out', 'doc/nn.md', 'Layers')
    has(help('nn.Linear'), 'nn.Linear(in, out')
    has(help(optim.SGD), 'optim.SGD(params, {lr=', 'doc/nn.md')
    has(help('F.cross_entropy'), 'nn.functional.cross_entropy', 'doc/nn.md')
    has(help(nn.functional.linear), 'F.linear(x, w [, b])')
  end)

  it('finds Tensor methods as Tensor:view, x:view or the method value', function()
    has(help('Tensor:view'), 't:view(...)', 'doc/tensor.md', 'Indexing and views')
    _G.x = torch.zeros(2, 3)   -- a global, as typed in the REPL
    has(help('x:view'), 't:view(...)')
    _G.x = nil
    has(help(torch.zeros(1).view), 'Tensor:view')
  end)

  it('describes a tensor: shape, dtype, device, and where its methods are', function()
    local t = torch.zeros(2, 3, { dtype = 'float64' })
    has(help(t), 'shape [2x3]', 'float64', 'on ' .. tostring(t.device), 'doc/tensor.md')
  end)

  it('names the class of an object', function()
    has(help(nn.Linear(2, 3)), 'an instance of nn.Linear', 'nn.Linear(in, out')
  end)

  it('says when there are no docs and suggests close names', function()
    local text = help('torch.randnn')
    has(text, "no docs for 'torch.randnn'", 'did you mean', 'torch.randn')
    has(help('nn.Linaer'), 'nn.Linear')
    has(help(function() end), 'no docs for this function value')
    has(help(nil), 'got nil')
  end)

  it('alone says how to use it', function()
    has(help(), 'help(x)', "help('nn.Linear')", '?name')
  end)
end)
