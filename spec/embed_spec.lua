-- embed_spec.lua: the embedding examples (examples/embed/host.c, threads.c, grad_mode.c), built by
-- `make` against libdplua.a: their output and exit status.
local shell = dofile('spec/helpers/shell.lua')
local HOST = shell.build .. '/examples/embed/host'
local THREADS = shell.build .. '/examples/embed/threads'
local GRAD_MODE = shell.build .. '/examples/embed/grad_mode'
local q = shell.q
local slurp, run = shell.slurp, shell.run

-- true when out has the line "<name>   ok" that host prints for a passed check
local function passed(out, name)
  for line in out:gmatch('[^\n]+') do
    if line:sub(1, #name) == name then return line:match('%s+ok$') ~= nil end
  end
  return false
end

describe('examples/embed/host', function()
  local out, err, code

  setup(function()
    out, err, code = run(q(HOST))
  end)

  it('exists', function()
    local f = io.open(HOST, 'rb')
    assert.truthy(f, HOST .. ' was not built')
    f:close()
  end)

  it('exits 0 with every check passed', function()
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find('all checks passed', 1, true), out)
    assert.falsy(out:find('FAILED', 1, true), out)
  end)

  it('reads back y = x x^T * 2 + 1 computed by Lua', function()
    assert.truthy(out:find('y = [[29, 65], [65, 155]]', 1, true), out)
    assert.truthy(passed(out, 'y has shape 2x2'), out)
    assert.truthy(passed(out, 'y == x x^T * 2 + 1'), out)
  end)

  it('shows the tensor as Lua prints it', function()
    assert.truthy(out:find('tensor([[ 29.,  65.],', 1, true), out)
  end)

  it('reads back an nn.Linear forward pass with fixed weights', function()
    -- x = {{1,2,3},{4,5,6}}, w = {{0.5,-1,0.25},{2,0,-0.5}}, b = 0.1
    assert.truthy(out:find('z = [[-0.65, 0.6], [-1.4, 5.1]]', 1, true), out)
    assert.truthy(passed(out, 'nn.Linear forward matches C'), out)
  end)

  it('gets Lua errors and size mismatches back as messages', function()
    local msg = out:match('Lua error: ([^\n]*)')
    assert.truthy(msg and msg ~= '(none)', out)
    assert.truthy(passed(out, 'a Lua error comes back as a message'), out)
    assert.truthy(passed(out, 'a size mismatch is reported, not a crash'), out)
    local mismatch = out:match('reading y into 3 floats: ([^\n]*)')
    assert.truthy(mismatch and mismatch ~= '(no error)' and mismatch ~= '', out)
    assert.truthy(passed(out, 'a non-tensor is reported, not a crash'), out)
    assert.truthy(passed(out, 'the state still works afterwards'), out)
  end)

  it('prints nothing on stderr', function()
    assert.are.equal('', err)
  end)
end)

describe('examples/embed/threads', function()
  it('runs four states on four threads, each right', function()
    local out, err, code = run(q(THREADS))
    assert.are.equal(0, code, out .. err)
    for _, name in ipairs { 'matmul', 'autograd', 'train', 'reduce' } do
      assert.truthy(out:find('thread %d ' .. name .. '%s+200 iterations: ok\n'), out)
    end
    assert.truthy(out:find('all 4 threads ok', 1, true), out)
    assert.are.equal('', err)
  end)

  it('takes the number of iterations as an argument', function()
    local out, _, code = run(q(THREADS) .. ' 500')
    assert.are.equal(0, code, out)
    assert.truthy(out:find('thread 1 matmul%s+500 iterations: ok'), out)
    assert.truthy(out:find('all 4 threads ok', 1, true), out)
  end)

  it('rejects a bad iteration count with status 2', function()
    local _, err, code = run(q(THREADS) .. ' 0')
    assert.are.equal(2, code)
    assert.truthy(err:find('usage:', 1, true), err)
  end)
end)

describe('examples/embed/grad_mode', function()
  it('keeps grad mode per state: states alternating on a thread, a state moving threads', function()
    local out, err, code = run(q(GRAD_MODE))
    assert.are.equal(0, code, out .. err)
    for _, name in ipairs { 'B, after A, is on and backward works', 'A, after B, is still off',
                            'B trains a model while A is off', 'thread 2: state C arrives off',
                            'thread 2: its own state is still off', 'C, back on the main thread, is on',
                            'D, moved here, is still off' } do
      assert.truthy(passed(out, name), name .. '\n' .. out)
    end
    assert.truthy(out:find('all checks passed', 1, true), out)
    assert.are.equal('', err)
  end)
end)
