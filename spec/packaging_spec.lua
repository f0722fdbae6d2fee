-- The things packagers and users check first: the version everywhere it is shown, the
-- command-line help, the shared library's SONAME, make install (with the Lua sources that
-- tracebacks name) and make uninstall, the licence, no GNU readline in the program.
local torch = require 'torch'
local shell = dofile('spec/helpers/shell.lua')
local build, BIN, q, run = shell.build, shell.bin, shell.q, shell.run
local sanitized = os.getenv('ASAN') == '1'

local function makefile_version()
  for line in io.lines('Makefile') do
    local v = line:match('^VERSION%s*:=%s*(%S+)')
    if v then return v end
  end
end

describe('version and help', function()
  local version = makefile_version()

  it('torch.__version__, dplua --version and dplua.pc give the Makefile VERSION', function()
    assert.is_truthy(version and version:match('^%d+%.%d+%.%d+$'))
    assert.are.equal(version, torch.__version__)
    local out, _, code = run(q(BIN) .. ' --version')
    assert.are.equal(0, code)
    assert.is_truthy(out:find('dplua ' .. version .. ' on Lua 5.4', 1, true))
    local pc = io.open(build .. '/dplua.pc'):read('a')
    assert.is_truthy(pc:find('Version: ' .. version, 1, true))
  end)

  it('-h and --help print the options to stdout and exit 0; a bad option exits 1', function()
    for _, flag in ipairs({ '-h', '--help' }) do
      local out, _, code = run(q(BIN) .. ' ' .. flag)
      assert.are.equal(0, code)
      assert.is_truthy(out:find('usage: dplua [options] [script [args]]', 1, true))
      assert.is_truthy(out:find('-v, --version', 1, true))
    end
    local _, e, code = run(q(BIN) .. ' --bogus')
    assert.are.equal(1, code)
    assert.is_truthy(e:find("unrecognized option '--bogus'", 1, true))
  end)

  it('links the line editor through libedit, not GNU readline (the program stays MIT)', function()
    local out = run('ldd ' .. q(BIN))
    assert.is_truthy(out:find('libedit', 1, true), out)
    assert.is_falsy(out:find('libreadline', 1, true), out)
  end)

  it('ships an MIT licence', function()
    assert.is_truthy(io.open('LICENSE'):read('a'):find('MIT License', 1, true))
  end)
end)

describe('the Lua sources behind tracebacks', function()
  it('an uninstalled build names the files of the source tree it was built from', function()
    local _, tb = run(q(BIN) .. ' -e ' .. q('nn.Linear(2, 3)(torch.zeros(4, 5))'))
    local file = tb:match('\n%s*(/[^:\n]+/lua/nn/[%w_]+%.lua):%d+:')
    assert.is_truthy(file, tb)
    assert.is_truthy(io.open(file), file)
  end)
end)

describe('the shared library and make uninstall', function()
  if sanitized then pending('make install is checked in the normal build, not under ASAN=1') return end

  it('has the SONAME libdplua.so.0, installs with its links, and uninstalls cleanly', function()
    local out = run('readelf -d ' .. q(build .. '/libdplua.so'))
    assert.is_truthy(out:find('Library soname: [libdplua.so.0]', 1, true), out)
    local prefix = os.tmpname()
    os.remove(prefix)
    local _, e, code = run(('make -s BUILD=%s install PREFIX=%s'):format(q(build), q(prefix)))
    assert.are.equal(0, code, e)
    local v = makefile_version()
    assert.are.equal('libdplua.so.0', (run('readlink ' .. q(prefix .. '/lib/libdplua.so')):gsub('%s+$', '')))
    assert.are.equal('libdplua.so.' .. v, (run('readlink ' .. q(prefix .. '/lib/libdplua.so.0')):gsub('%s+$', '')))
    -- the Lua sources are installed, and tracebacks from the installed program and from
    -- stock lua5.4 with the installed module name them
    local src = prefix .. '/share/lua/5.4/dplua/'
    for _, f in ipairs({ 'torch/init.lua', 'nn/functional.lua', 'nn/Linear.lua', 'torch/_help.lua' }) do
      assert.is_truthy(io.open(src .. f), src .. f .. ' is missing')
    end
    local bad = 'nn.Linear(2, 3)(torch.zeros(4, 5))'
    local _, tb1 = run(q(prefix .. '/bin/dplua') .. ' -e ' .. q(bad))
    local _, tb2 = run(('LUA_CPATH=%s lua5.4 -e %s'):format(q(prefix .. '/lib/lua/5.4/?.so;;'),
      q("local torch, nn = require 'torch', require 'nn'; " .. bad)))
    for _, tb in ipairs({ tb1, tb2 }) do
      local file = tb:match('\n%s*(' .. src:gsub('%p', '%%%0') .. 'nn/[%w_]+%.lua):%d+:')
      assert.is_truthy(file, tb)
      assert.is_truthy(io.open(file), file)
    end
    _, e, code = run(('make -s BUILD=%s uninstall PREFIX=%s'):format(q(build), q(prefix)))
    assert.are.equal(0, code, e)
    assert.are.equal('', (run('find ' .. q(prefix) .. ' -type f -o -type l')))
    os.execute('rm -rf ' .. q(prefix))
  end)
end)
