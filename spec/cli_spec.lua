-- cli_spec.lua: the `dplua` program: scripts and their arguments, exit status and error
-- format, -e -l -v -i - -- -E, LUA_INIT, the REPL on a pipe and (under tmux) on a terminal.
local shell = dofile('spec/helpers/shell.lua')
local BIN, q = shell.bin, shell.q
local slurp, write = shell.slurp, shell.write

local tmpfiles = {}
local function tmp(suffix)
  local base = os.tmpname()   -- creates the file, so it is removed too
  tmpfiles[#tmpfiles + 1] = base
  if not suffix then return base end
  tmpfiles[#tmpfiles + 1] = base .. suffix
  return base .. suffix
end

-- Runs `dplua ARGS` (a shell fragment) with stdin from `input` (a string, or nil for
-- /dev/null) and `env` (a shell prefix such as "LUA_INIT=x"); returns stdout, stderr
-- and the exit code.
local function run(args, input, env)
  local out, err = tmp(), tmp()
  local inp = input and write(tmp(), input) or '/dev/null'
  local cmd = ('%s %s %s < %s > %s 2> %s'):format(env or '', q(BIN), args, q(inp), q(out), q(err))
  local ok, how, code = os.execute(cmd)
  if how == 'signal' then code = 128 + code end
  return slurp(out), slurp(err), ok and 0 or code
end

local function script(src)
  return write(tmp('.lua'), src)
end

teardown(function()
  for _, p in ipairs(tmpfiles) do os.remove(p) end
end)

describe('dplua FILE [ARGS]', function()
  it('runs the file with arg set as lua does', function()
    local f = script([[
      print('n', #arg)
      print('0', arg[0])
      print('1', arg[1])
      print('2', arg[2])
      print('-1', arg[-1])
      print('dots', select('#', ...), ...)
    ]])
    local out, err, code = run(q(f) .. ' alpha "b c"')
    assert.are.equal('', err)
    assert.are.equal(0, code)
    assert.truthy(out:find('n\t2\n', 1, true))
    assert.truthy(out:find('0\t' .. f .. '\n', 1, true))
    assert.truthy(out:find('1\talpha\n', 1, true))
    assert.truthy(out:find('2\tb c\n', 1, true))
    assert.truthy(out:find('-1\t' .. BIN .. '\n', 1, true))
    assert.truthy(out:find('dots\t2\talpha\tb c\n', 1, true))
  end)

  it('puts the options before the script at negative indices', function()
    local f = script('print(arg[-1], arg[-2], arg[-3], arg[1])')
    local out, _, code = run('-e "x=1" ' .. q(f) .. ' -e')
    assert.are.equal(0, code)
    assert.are.equal('x=1\t-e\t' .. BIN .. '\t-e\n', out)
  end)

  it('has torch, nn and optim loaded as globals, the same tables require returns', function()
    local f = script([[
      assert(type(torch) == 'table' and type(nn) == 'table' and type(optim) == 'table')
      assert(require('torch') == torch and require('nn') == nn and require('optim') == optim)
      assert(torch.nn == nn and torch.optim == optim)
      print((torch.ones(2) * 3):sum():item())
    ]])
    local out, err, code = run(q(f))
    assert.are.equal('', err)
    assert.are.equal(0, code)
    assert.are.equal('6.0\n', out)
  end)

  it('exits with status 0 after the script ends, whatever it returns', function()
    local _, _, code = run(q(script('return false')))
    assert.are.equal(0, code)
  end)

  it('exits 1 with "dplua: FILE:LINE: message" and a traceback on an error', function()
    local f = script('local function inner()\n  error("boom")\nend\ninner()\n')
    local out, err, code = run(q(f))
    assert.are.equal(1, code)
    assert.are.equal('', out)
    assert.truthy(err:find('^dplua: ' .. f:gsub('%p', '%%%0') .. ':2: boom\n'), err)
    assert.truthy(err:find('stack traceback:', 1, true), err)
    assert.truthy(err:find(f .. ':2: in', 1, true), err)   -- the frame of inner
    assert.truthy(err:find(f .. ':4: in main chunk', 1, true), err)
  end)

  it('reports an error from the engine with its message', function()
    local f = script('local a = torch.ones(2, 3)\nlocal b = a:matmul(torch.ones(2, 3))\n')
    local _, err, code = run(q(f))
    assert.are.equal(1, code)
    assert.truthy(err:find('^dplua: ' .. f:gsub('%p', '%%%0') .. ':2: '), err)
    assert.truthy(err:find('stack traceback:', 1, true))
  end)

  it('names the type of an error object that is not a string', function()
    local _, err, code = run(q(script('error({})')))
    assert.are.equal(1, code)
    assert.truthy(err:find('(error object is a table value)', 1, true), err)
  end)

  it('uses __tostring of an error object', function()
    local _, err, code = run(q(script('error(setmetatable({}, {__tostring = function() return "custom" end}))')))
    assert.are.equal(1, code)
    assert.truthy(err:find('custom', 1, true), err)
  end)

  it('reports a syntax error and a missing file with status 1', function()
    local f = script('x = = 1')
    local _, err, code = run(q(f))
    assert.are.equal(1, code)
    assert.truthy(err:find('^dplua: ' .. f:gsub('%p', '%%%0') .. ':1: '), err)
    _, err, code = run(q('/nonexistent/dir/none.lua'))
    assert.are.equal(1, code)
    assert.truthy(err:find('cannot open /nonexistent/dir/none.lua', 1, true), err)
  end)

  it('lets os.exit set the status', function()
    local _, _, code = run(q(script('os.exit(3)')))
    assert.are.equal(3, code)
  end)
end)

describe('dplua options', function()
  it('-e runs statements in order, before the script', function()
    local f = script('print("script", x)')
    local out, err, code = run('-e "x = 1" -e "x = x + 1; print(x)" ' .. q(f))
    assert.are.equal('', err)
    assert.are.equal(0, code)
    assert.are.equal('2\nscript\t2\n', out)
  end)

  it('-e accepts the statement glued to the option', function()
    local out, _, code = run("'-eprint(40 + 2)'")
    assert.are.equal(0, code)
    assert.are.equal('42\n', out)
  end)

  it('-e with an error exits 1 and names the command line', function()
    local _, err, code = run([[-e "error('bad')"]])
    assert.are.equal(1, code)
    assert.truthy(err:find("^dplua: %(command line%):1: bad\n"), err)
    assert.truthy(err:find('stack traceback:', 1, true), err)
  end)

  it('-e sees torch', function()
    local out, _, code = run([[-e "print(torch.zeros(2, 3):numel())"]])
    assert.are.equal(0, code)
    assert.are.equal('6\n', out)
  end)

  it('-l MOD requires into global MOD and -l g=MOD into global g', function()
    local dir = tmp('_dir')
    os.execute('mkdir -p ' .. q(dir))
    write(dir .. '/specmod.lua', 'return {answer = 42}')
    local env = 'LUA_PATH=' .. q(dir .. '/?.lua;;')
    local out, err, code = run('-l specmod -e "print(specmod.answer)"', nil, env)
    assert.are.equal('', err)
    assert.are.equal(0, code)
    assert.are.equal('42\n', out)
    out, err, code = run('-l g=specmod -e "print(g.answer, specmod)"', nil, env)
    assert.are.equal('', err)
    assert.are.equal(0, code)
    assert.are.equal('42\tnil\n', out)
    os.remove(dir .. '/specmod.lua')
    os.remove(dir)
  end)

  it('-l works with the modules dplua carries', function()
    local out, _, code = run('-l d=torch.data -e "print(d == torch.data)"')
    assert.are.equal(0, code)
    assert.are.equal('true\n', out)
  end)

  it('-l of a missing module exits 1', function()
    local _, err, code = run('-l no_such_module_here')
    assert.are.equal(1, code)
    assert.truthy(err:find("module 'no_such_module_here' not found", 1, true), err)
  end)

  it('-v prints the version and the backends built in', function()
    local out, err, code = run('-v')
    assert.are.equal('', err)
    assert.are.equal(0, code)
    assert.truthy(out:find('^dplua 0%.1%.0 on Lua 5%.4%.%d+'), out)
    local backends = out:match('backends: ([^\n]*)')
    assert.truthy(backends, out)
    assert.truthy(backends:find('cpu', 1, true))
    local built = run([[-e "io.write(tostring(torch.cuda.is_built()))"]])
    assert.are.equal(built == 'true', backends:find('cuda', 1, true) ~= nil)
    assert.are.equal(built == 'true', backends:find('nccl', 1, true) ~= nil)
  end)

  it('-v with a script prints the version, then runs it', function()
    local out, _, code = run('-v ' .. q(script('print("ran")')))
    assert.are.equal(0, code)
    assert.truthy(out:find('^dplua 0%.1%.0'))
    assert.truthy(out:find('\nran\n$'), out)
  end)

  it('- runs stdin as the script, with arguments', function()
    local out, err, code = run('- one two', 'print("stdin", ...)\nprint(arg[0])')
    assert.are.equal('', err)
    assert.are.equal(0, code)
    assert.are.equal('stdin\tone\ttwo\n-\n', out)
  end)

  it('runs stdin as a file when it is not a terminal and there are no options', function()
    local out, _, code = run('', 'local x = 0\nfor i = 1, 4 do x = x + i end\nprint(x)\n')
    assert.are.equal(0, code)
    assert.are.equal('10\n', out)
  end)

  it('an error in stdin is reported as "dplua: stdin:LINE:"', function()
    local _, err, code = run('-', '\nerror("from stdin")\n')
    assert.are.equal(1, code)
    assert.truthy(err:find('^dplua: stdin:2: from stdin'), err)
  end)

  it('-- stops handling options', function()
    local f = script('print(...)')
    local out, _, code = run('-- ' .. q(f) .. ' -e -v')
    assert.are.equal(0, code)
    assert.are.equal('-e\t-v\n', out)
  end)

  it('rejects an unknown option, and -e without an argument, with usage and status 1', function()
    local out, err, code = run('-z')
    assert.are.equal(1, code)
    assert.are.equal('', out)
    assert.truthy(err:find("unrecognized option '-z'", 1, true), err)
    assert.truthy(err:find('usage: dplua', 1, true), err)
    _, err, code = run('-e')
    assert.are.equal(1, code)
    assert.truthy(err:find("'-e' needs argument", 1, true), err)
  end)

  it('-W turns warnings on', function()
    local _, err, code = run([[-W -e "warn('careful')"]])
    assert.are.equal(0, code)
    assert.truthy(err:find('Lua warning: careful', 1, true), err)
    _, err = run([[-e "warn('careful')"]])
    assert.are.equal('', err)
  end)

  it('runs LUA_INIT first, and LUA_INIT_5_4 in its place', function()
    local out, _, code = run([[-e "print(init)"]], nil, [[LUA_INIT='init = "plain"']])
    assert.are.equal(0, code)
    assert.are.equal('plain\n', out)
    out, _, code = run([[-e "print(init)"]], nil, [[LUA_INIT='init = 1' LUA_INIT_5_4='init = "5.4"']])
    assert.are.equal(0, code)
    assert.are.equal('5.4\n', out)
  end)

  it('runs LUA_INIT=@FILE as a file, after torch is loaded', function()
    local f = script('init = torch.ones(3):numel()')
    local out, _, code = run([[-e "print(init)"]], nil, 'LUA_INIT=@' .. q(f))
    assert.are.equal(0, code)
    assert.are.equal('3\n', out)
  end)

  it('an error in LUA_INIT stops the program with status 1', function()
    local _, err, code = run([[-e "print('not reached')"]], nil, [[LUA_INIT='error("init failed")']])
    assert.are.equal(1, code)
    assert.truthy(err:find('init failed', 1, true), err)
  end)

  it('-E ignores LUA_INIT', function()
    local out, _, code = run([[-E -e "print(init)"]], nil, [[LUA_INIT='init = 1']])
    assert.are.equal(0, code)
    assert.are.equal('nil\n', out)
  end)

  it('stops a running script on SIGINT with "interrupted!" and status 1', function()
    local out, err = tmp(), tmp()
    -- the loop ends by itself after 20 s, so a missed signal fails the test, not the run
    local src = [[io.stderr:write('started\n') local t = os.time() while os.time() - t < 20 do end]]
    local cmd = ('%s -e %s > %s 2> %s & pid=$!; '):format(q(BIN), q(src), q(out), q(err))
      .. ('for i in $(seq 100); do grep -q started %s && break; sleep 0.1; done; '):format(q(err))
      .. 'sleep 0.2; kill -INT $pid; wait $pid; echo $?'
    local p = io.popen(cmd)
    local status = p:read('a')
    p:close()
    assert.are.equal('1\n', status)
    assert.truthy(slurp(err):find('interrupted!', 1, true), slurp(err))
  end)
end)

describe('dplua -i on a pipe', function()
  it('prints the value of an expression, and tensors pretty-printed', function()
    local out, err, code = run('-i', '1+1\nx = torch.ones(2)\nx\n')
    assert.are.equal(0, code)
    assert.truthy(out:find('^2\n'), out)
    assert.truthy(out:find('tensor([1., 1.])', 1, true), out)
    assert.truthy(err:find('dplua 0.1.0', 1, true), err)   -- the banner is not mixed into stdout
  end)

  it('prints several values separated by tabs, and nothing for a statement', function()
    local out, _, code = run('-i', '1, "a", nil, true\nlocal y = 3\n')
    assert.are.equal(0, code)
    assert.are.equal('1\ta\tnil\ttrue\n', out)
  end)

  it('continues an incomplete statement on the next lines', function()
    local out, err, code = run('-i', 'for i = 1, 3 do\n  io.write(i, ";")\nend\nprint()\nfunction f(a,\n b)\n return a + b\n end\nf(2, 3)\n')
    assert.are.equal(0, code)
    assert.are.equal('1;2;3;\n5\n', out)
    assert.truthy(err:find('>> ', 1, true), err)   -- the continuation prompt
  end)

  it('reports an error and goes on with the next line', function()
    local out, err, code = run('-i', 'error("oops")\nnil + 1\n6 * 7\n')
    assert.are.equal(0, code)
    assert.are.equal('42\n', out)
    assert.truthy(err:find('stdin:1: oops', 1, true), err)
    assert.truthy(err:find('attempt to perform arithmetic', 1, true), err)
    assert.falsy(err:find('dplua: stdin', 1, true))   -- no program name in the REPL
  end)

  it('reports a statement left incomplete at the end of input as a syntax error', function()
    local _, err, code = run('-i', 'for i = 1, 2 do\n')
    assert.are.equal(0, code)
    assert.truthy(err:find("'end' expected", 1, true), err)
  end)

  it('takes its prompts from _PROMPT and _PROMPT2', function()
    local _, err, code = run('-i', '_PROMPT = "P1: "; _PROMPT2 = "P2: "\nif true then\nend\n')
    assert.are.equal(0, code)
    assert.truthy(err:find('P1: P2: P1: ', 1, true), err)
  end)

  it('runs the script before the REPL, which sees its globals', function()
    local f = script('answer = 41')
    local out, _, code = run('-i ' .. q(f), 'answer + 1\n')
    assert.are.equal(0, code)
    assert.are.equal('42\n', out)
  end)

  it('has torch, nn and optim', function()
    local out, _, code = run('-i', 'type(torch), type(nn), type(optim), type(nn.Linear)\n')
    assert.are.equal(0, code)
    assert.truthy(out:find('table\ttable\ttable\t', 1, true), out)
  end)

  it('prints a tensor expression with its shape and values', function()
    local out, _, code = run('-i', 'torch.arange(1, 5):view(2, 2)\n')
    assert.are.equal(0, code)
    assert.truthy(out:find('tensor([[1, 2],', 1, true), out)
    assert.truthy(out:find('[3, 4]])', 1, true), out)
  end)
end)

-- The REPL on a real terminal, driven through tmux.
local function have_tmux()
  local ok = os.execute('command -v tmux > /dev/null 2>&1')
  return ok == true or ok == 0
end

describe('the dplua REPL on a terminal', function()
  if not have_tmux() then
    pending('tmux is not installed (apt-get install tmux): terminal REPL checks skipped')
    return
  end

  -- one tmux server per test (a server that is shutting down can swallow the next session)
  local socket_base = 'dplua-spec-' .. tostring(os.time()) .. '-' .. tostring(math.random(1e6))
  local socket, serial = nil, 0
  local history = tmp('_history')
  local session = 'repl'
  local function tmux(args)
    return os.execute('tmux -L ' .. socket .. ' ' .. args .. ' > /dev/null 2>&1')
  end
  local function keys(...)   -- key names (Enter, Tab, C-c)
    tmux('send-keys -t ' .. session .. ' ' .. table.concat({ ... }, ' '))
  end
  local function type_text(s)  -- literal text
    tmux('send-keys -t ' .. session .. ' -l ' .. q(s))
  end
  local function screen()
    local p = io.popen('tmux -L ' .. socket .. ' capture-pane -p -J -S -200 -t ' .. session .. ' 2>/dev/null')
    local s = p:read('a')
    p:close()
    return s
  end
  -- waits until the screen matches pattern (plain text unless is_pattern)
  local function wait_for(text, is_pattern, timeout)
    for _ = 1, (timeout or 10) * 10 do
      local s = screen()
      if s:find(text, 1, not is_pattern) then return s end
      os.execute('sleep 0.1')
    end
    return nil, screen()
  end
  local function expect(text, is_pattern)
    local s, last = wait_for(text, is_pattern)
    assert(s, ('expected %q on the terminal, got:\n%s'):format(text, last))
    return s
  end

  local function start(extra_env)
    local env = ('env -u NO_COLOR -u DPLUA_COLOR DPLUA_HISTORY=%s LUA_CPATH=%s TERM=xterm %s'):format(q(history),
      q(os.getenv('LUA_CPATH') or ''), extra_env or '')
    tmux(('new-session -d -s %s -x 150 -y 50 %s'):format(session, q(env .. ' ' .. q(BIN))))
    expect('> ')
  end

  before_each(function()
    serial = serial + 1
    socket = socket_base .. '-' .. serial
    os.remove(history)
    start()
  end)

  after_each(function()
    tmux('kill-server')
  end)

  it('prints the banner, evaluates expressions and pretty-prints tensors', function()
    local s = expect('> ')
    assert.truthy(s:find('dplua 0.1.0 on Lua 5.4', 1, true), s)
    type_text('1+1')
    keys('Enter')
    expect('\n2\n', false)
    type_text('torch.ones(2)')
    keys('Enter')
    expect('tensor([1., 1.])')
  end)

  -- the screen with its colours (tmux writes them as SGR sequences)
  local function colored_screen()
    local p = io.popen('tmux -L ' .. socket .. ' capture-pane -e -p -J -t ' .. session .. ' 2>/dev/null')
    local s = p:read('a')
    p:close()
    return s
  end

  it('colours results and errors on a terminal, and not with NO_COLOR', function()
    type_text('6 * 7')
    keys('Enter')
    expect('\n42\n')
    type_text('error("boom")')
    keys('Enter')
    expect('boom')
    local s = colored_screen()
    assert.truthy(s:find('\27%[[0-9;]*36m42'), s)
    assert.truthy(s:find('\27%[[0-9;]*31m[^\n]*boom'), s)
    keys('C-d')
    local t0 = os.time()
    while tmux('has-session -t ' .. session) and os.time() - t0 < 10 do os.execute('sleep 0.1') end
    start('NO_COLOR=1')
    type_text('6 * 7')
    keys('Enter')
    expect('\n42\n')
    s = colored_screen()
    assert.falsy(s:find('\27%[[0-9;]*36m'), s)
  end)

  it('answers ?name with the docs', function()
    type_text('?torch.randn')
    keys('Enter')
    expect('see doc/tensor.md, "Creating tensors"')
  end)

  it('completes table fields after a dot', function()
    type_text('torch.ra')
    keys('Tab', 'Tab')
    local s = expect('torch.randn')
    assert.truthy(s:find('torch.randint', 1, true), s)
    assert.truthy(s:find('torch.rand ', 1, true) or s:find('torch.rand\n', 1, true), s)
  end)

  it('completes globals', function()
    type_text('optim.SG')
    keys('Tab')
    expect('optim.SGD')
    keys('C-u')
    type_text('tor')
    keys('Tab')
    expect('> torch')
  end)

  it('completes methods of a tensor after a colon', function()
    type_text('t = torch.ones(2, 3)')
    keys('Enter')
    type_text('t:si')
    keys('Tab', 'Tab')
    local s = expect('t:size')
    keys('C-u')
    type_text('t:resh')
    keys('Tab')
    expect('t:reshape')
    keys('C-u')
    type_text('t:numel()')
    keys('Enter')
    assert.truthy(expect('\n6\n'))
    assert.truthy(s)
  end)

  it('completes methods of a module', function()
    type_text('m = nn.Linear(2, 3)')
    keys('Enter')
    type_text('m:zero_gr')
    keys('Tab')
    expect('m:zero_grad')
  end)

  it('Ctrl-C interrupts a running statement, not the REPL', function()
    type_text('while true do end')
    keys('Enter')
    expect('> while true do end\n')
    -- the terminal drops a Ctrl-C that comes before the statement starts running, as
    -- it would for a user: send it until the statement reports the interruption
    local interrupted
    for _ = 1, 10 do
      os.execute('sleep 0.3')
      keys('C-c')
      interrupted = wait_for('interrupted!', false, 1)
      if interrupted then break end
    end
    expect('interrupted!')
    type_text('40+2')
    keys('Enter')
    expect('\n42\n')
  end)

  it('Ctrl-C at the prompt abandons the line, also in a continued statement', function()
    type_text('this is not lua')
    expect('> this is not lua')   -- read by the REPL (a Ctrl-C flushes unread input)
    keys('C-c')
    expect('this is not lua^C')
    type_text('for i = 1, 2 do')
    keys('Enter')
    expect('>> ')
    keys('C-c')
    type_text('6*7')
    keys('Enter')
    local s = expect('\n42\n')
    assert.falsy(s:find('syntax error', 1, true), s)
  end)

  it('continues incomplete statements with a >> prompt', function()
    type_text('for i = 1, 3 do')
    keys('Enter')
    expect('>> ')
    type_text('io.write(i, ";")')
    keys('Enter')
    type_text('end')
    keys('Enter')
    expect('1;2;3;')
  end)

  it('recalls and keeps the history in DPLUA_HISTORY', function()
    type_text('x = 123')
    keys('Enter')
    type_text('x = x + 1')
    keys('Enter')
    keys('Up', 'Enter')        -- runs x = x + 1 again
    type_text('x * 1000')
    keys('Enter')
    expect('\n125000\n')
    keys('C-d')
    local t0 = os.time()
    while slurp(history) == '' and os.time() - t0 < 10 do os.execute('sleep 0.1') end
    -- libedit's file format: one entry a line, spaces and newlines escaped as \040, \012
    local h = slurp(history):gsub('\\(%d%d%d)', function(o) return string.char(tonumber(o, 8)) end)
    assert.truthy(h:find('x = 123', 1, true), h)
    assert.truthy(h:find('x * 1000', 1, true), h)
    local _, n = h:gsub('x = 123', '')
    assert.are.equal(1, n, h)   -- each statement once
  end)

  it('brings a multi-line statement back as one history entry in the next session', function()
    type_text('for i = 1, 3 do')
    keys('Enter')
    type_text('io.write(i * 11, " ")')
    keys('Enter')
    type_text('end')
    keys('Enter')
    expect('11 22 33')
    keys('C-d')
    local t0 = os.time()
    while tmux('has-session -t ' .. session) and os.time() - t0 < 10 do os.execute('sleep 0.1') end
    start()
    local s = screen()
    assert.falsy(s:find('11 22 33', 1, true), s)   -- a fresh terminal
    keys('Up')
    expect('end')
    keys('Enter')
    expect('11 22 33')
  end)
end)
