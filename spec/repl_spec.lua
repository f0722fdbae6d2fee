-- The REPL as th and IPython users expect it: a `local` typed at the prompt lasts to the
-- next line, `_` is the last result, plain tables print as tables, `?name` is help(name),
-- results are coloured on a terminal (forced here with DPLUA_COLOR=1, as stdout is a pipe).
local shell = dofile('spec/helpers/shell.lua')

local function repl(input, env)
  local f = os.tmpname()
  local h = io.open(f, 'w')
  h:write(input)
  h:close()
  local p = io.popen(('env -u DPLUA_COLOR -u NO_COLOR %s %s -i < %s 2>&1'):format(env or '', shell.q(shell.bin), shell.q(f)))
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

  it('answers ?name with the docs, and help(x) is a global', function()
    local out = repl('?torch.randn\n?nn.Linaer\nx = torch.zeros(2, 3)\n?x\n? x:view\nhelp(optim.SGD)\n?\n')
    assert.is_truthy(out:find('torch.randn(...) -- U[0, 1), N(0, 1)\n  see doc/tensor.md, "Creating tensors"', 1, true), out)
    assert.is_truthy(out:find("no docs for 'nn.Linaer'; did you mean nn.Linear", 1, true), out)
    assert.is_truthy(out:find('a tensor of shape [2x3], dtype float32, on cpu', 1, true), out)
    assert.is_truthy(out:find('Tensor:view\n  t:view(...)', 1, true), out)
    assert.is_truthy(out:find('optim.SGD(params, {lr=', 1, true), out)
    assert.is_truthy(out:find('help(x) prints a line of usage', 1, true), out)
  end)

  it('colours numbers, strings, tensors and errors when asked, and only then', function()
    local input = '6 * 7\n"hi"\ntorch.zeros(2, {dtype = "float64"})\nerror("boom")\n'
    local plain = repl(input)
    assert.is_falsy(plain:find('\27[', 1, true), plain)
    assert.is_truthy(plain:find('> 42\n', 1, true), plain)
    local out = repl(input, 'DPLUA_COLOR=1')
    assert.is_truthy(out:find('\27[36m42\27[0m', 1, true), out)
    assert.is_truthy(out:find('\27[32mhi\27[0m', 1, true), out)
    assert.is_truthy(out:find('\27[1;34mtensor\27[0m([0., 0.], \27[2mdtype=float64\27[0m)', 1, true), out)
    assert.is_truthy(out:find('\27[31mstdin:1: boom', 1, true), out)
    -- NO_COLOR and TERM=dumb turn it off (DPLUA_COLOR=1 would still force it)
    for _, env in ipairs({ 'NO_COLOR=1', 'TERM=dumb' }) do
      local off = repl(input, env)
      assert.is_falsy(off:find('\27[', 1, true), off)
    end
    assert.is_falsy(repl(input, 'DPLUA_COLOR=0'):find('\27[', 1, true))
  end)
end)
