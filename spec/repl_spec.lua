-- The REPL as th and IPython users expect it: a `local` typed at the prompt lasts to the
-- next line, `_` is the last result, plain tables print as tables.
local shell = dofile('spec/helpers/shell.lua')

local function repl(input)
  local f = os.tmpname()
  local h = io.open(f, 'w')
  h:write(input)
  h:close()
  local p = io.popen(('%s -i < %s 2>&1'):format(shell.q(shell.bin), shell.q(f)))
  local out = p:read('a')
  p:close()
  os.remove(f)
  return out
end

describe('the REPL', function()
  it('keeps locals between lines and the last result in _', function()
    local out = repl('local x = 5\nx * 2\n_ + 1\nlocal function sq(v) return v * v end\nsq(4)\n')
    assert.is_truthy(out:find('> 10\n', 1, true), out)
    assert.is_truthy(out:find('> 11\n', 1, true), out)
    assert.is_truthy(out:find('> 16\n', 1, true), out)
  end)

  it('prints plain tables as tables, nested to a depth, long ones wrapped', function()
    local out = repl('{1, 2, {a = 3, b = "q"}, n = torch.ones(2)}\n{x = {y = {z = {w = 1}}}}\n'
      .. 't = {} for i = 1, 50 do t[i] = i end\nt\n')
    assert.is_truthy(out:find('{1, 2, {a = 3, b = "q"}, n = tensor([1., 1.])}', 1, true), out)
    assert.is_truthy(out:find('{x = {y = {z = {...}}}}', 1, true), out)
    assert.is_truthy(out:find('\n  1, 2, 3, 4,', 1, true), out)
    assert.is_truthy(out:find('... (10 more)\n}', 1, true), out)
  end)

  it('prints tensors and modules as themselves', function()
    local out = repl('torch.zeros(2)\nnn.Linear(2, 3)\n')
    assert.is_truthy(out:find('> tensor([0., 0.])\n', 1, true), out)
    assert.is_truthy(out:find('> Linear(in_features=2, out_features=3, bias=true)\n', 1, true), out)
  end)
end)
