-- spec/gpu/check on this machine, without a GPU: its dry run, a run on a machine without
-- python3 or a GPU (a PATH of the programs a bare CUDA machine has, spec/gpu/barepath),
-- the overall deadline and a signal on the emulated GPU, with the table of the steps
-- printed every time.
local shell = dofile('spec/helpers/shell.lua')
local build, q, run, write = shell.build, shell.q, shell.run, shell.write
local emu, emu_why = shell.emulated_cuda()

local root = io.popen('pwd'):read('l')
local abs_build = build:sub(1, 1) == '/' and build or root .. '/' .. build

-- a folder of links to bash, coreutils and the like (no lua5.4, busted, python3), with
-- the extra scripts of files (name -> text) in it
local function bare_path(files)
  local dir = os.tmpname()
  os.remove(dir)
  local out, err, code = run('spec/gpu/barepath ' .. q(dir))
  assert(code == 0, err)
  for name, text in pairs(files or {}) do
    write(dir .. '/' .. name, text)
    os.execute('chmod +x ' .. q(dir .. '/' .. name))
  end
  return (out:gsub('%s+$', '')), dir
end

-- runs spec/gpu/check with the environment prefix env (without the emulated GPU that the
-- spec's own run may have); returns its output, exit status and the seconds it took
local function check(env, args)
  local t = os.time()
  local out, err, code = run(('env -u DPLUA_CUDA_LIB BUILD=%s CUDA_HOME=/nonexistent %s spec/gpu/check %s 2>&1'):format(
    q(abs_build), env or '', args or ''))
  return out .. err, code, os.time() - t
end

-- the rows of the final table: step name -> result
local function table_rows(out)
  local rows, n = {}, 0
  local tail = out:match('==== summary.-\n(.*)$')
  assert.is_truthy(tail, 'no summary table in:\n' .. out)
  for line in tail:gmatch('[^\n]+') do
    local name, result = line:match('^(%S.-)%s%s+(%S.-)%s+%d+s$')
    if name and name ~= 'step' then rows[name] = result; n = n + 1 end
  end
  return rows, n
end

local function count(s, part)
  local n, i = 0, 1
  while true do
    local a, b = s:find(part, i, true)
    if not a then return n end
    n, i = n + 1, b + 1
  end
end

-- the check runs the build's libdplua_cuda.so: a build without it (ASAN=1, CUDA=0) only
-- has the checks of bad arguments and of a missing build folder
local f = io.open(abs_build .. '/libdplua_cuda.so')
local has_cuda_lib = f ~= nil
if f then f:close() end
local function it_cuda(name, fn)
  it(name, function()
    if not has_cuda_lib then
      pending(abs_build .. ' has no libdplua_cuda.so (a build without the CUDA backend)')
      return
    end
    fn()
  end)
end

describe('spec/gpu/check', function()
  it_cuda('--dry-run lists every step with its limit, finds no GPU here and exits 0', function()
    local out, code, secs = check('', '--dry-run')
    assert.are.equal(0, code, out)
    assert.is_true(secs < 30)
    local rows, n = table_rows(out)
    assert.is_true(n >= 20, out)
    assert.are.equal('PASS', rows['libraries found'])
    local seen = rows['dplua sees the GPU']
    assert.is_truthy(seen == 'PASS' or seen:find('^FAIL: CUDA is not available'), seen)
    assert.are.equal('DRY (limit 150s)', rows['ops on cuda:0'])
    assert.are.equal('DRY (limit 60s)', rows['training on cuda:0'])
    assert.is_truthy(rows['bench gpu_mlp']:find('^DRY'))
    -- CUDA_HOME=/nonexistent: no compute-sanitizer, said once, and a skipped step
    assert.are.equal('SKIP (not installed)', rows['compute-sanitizer memcheck'])
    assert.are.equal(1, count(out, 'compute-sanitizer: not found'))
    assert.is_truthy(out:find('spec/gpu/check: dry run, nothing was run', 1, true))
    assert.is_truthy(out:find('the limits add up to %d+ s'))
  end)

  it_cuda('without python3 or a GPU: a table, "PyTorch: not available", exit status 1', function()
    local path = bare_path()
    local out, code, secs = check('PATH=' .. q(path))
    assert.are.equal(1, code, out)
    assert.is_true(secs < 30)
    assert.is_falsy(out:find('command not found', 1, true), out)
    local rows = table_rows(out)
    assert.are.equal('PASS', rows['libraries found'])
    assert.is_truthy(rows['dplua sees the GPU']:find('^FAIL: CUDA is not available: no CUDA driver was found'),
      rows['dplua sees the GPU'])
    assert.is_truthy(out:find('PyTorch: not available (no python3 on PATH)', 1, true), out)
    assert.is_truthy(out:find('spec/gpu/check: FAILED\n', 1, true))
  end)

  it_cuda('runs PyTorch without the CUDA toolkit or the build on LD_LIBRARY_PATH', function()
    local path = bare_path({ python3 = '#!/bin/sh\n[ "$1" = -c ] && echo "9.9 CUDA 13.0 GPU LD=${LD_LIBRARY_PATH-unset}"\n' })
    local ld = '/usr/local/cuda/lib64:' .. abs_build .. ':/opt/keep:/nonexistent/lib64'
    local out, code = check(('PATH=%s LD_LIBRARY_PATH=%s CUDA_HOME=/nonexistent'):format(q(path), q(ld)), '--dry-run')
    assert.are.equal(0, code, out)
    assert.is_truthy(out:find('PyTorch: 9.9 CUDA 13.0 GPU LD=/opt/keep\n', 1, true), out)
    -- and dplua itself gets the toolkit's folders
    assert.is_truthy(out:find('\nLD_LIBRARY_PATH=[^\n]*/usr/local/cuda/lib64'))
  end)

  it('a bad CHECK_DEADLINE or argument is a usage error', function()
    local out, code = check('CHECK_DEADLINE=soon', '--dry-run')
    assert.are.equal(2, code)
    assert.is_truthy(out:find("CHECK_DEADLINE must be a number of seconds, not 'soon'", 1, true))
    out, code = check('', '--bogus')
    assert.are.equal(2, code)
    assert.is_truthy(out:find('usage: spec/gpu/check [--dry-run]', 1, true))
  end)

  it('a missing build folder says how to make one, with the table, exit status 2', function()
    local out, _, code = run('env BUILD=/nonexistent/build-gpu spec/gpu/check 2>&1')
    assert.are.equal(2, code)
    assert.is_truthy(out:find('Build the folder with spec/gpu/bundle', 1, true))
    assert.is_truthy(table_rows(out)['build folder /nonexistent/build-gpu'])
  end)

  describe('on the emulated GPU', function()
    if not emu then
      pending(emu_why)
      return
    end

    it('stops at the overall deadline: the step that runs over times out, the rest are not run', function()
      local out, code, secs = check(('DPLUA_CUDA_LIB=%s CHECK_DEADLINE=14 CHECK_STALL="ops on cuda:0" PATH=%s'):format(q(emu), q(bare_path())))
      assert.are.equal(1, code, out)
      assert.is_true(secs <= 16, 'took ' .. secs .. ' s')
      local rows = table_rows(out)
      assert.are.equal('PASS', rows['dplua sees the GPU'], out)
      assert.is_truthy(rows['ops on cuda:0']:find('^TIMEOUT%(%d+s%)'), rows['ops on cuda:0'])
      for _, name in ipairs({ 'sweep on cuda:0', 'DataParallel, 2 virtual', 'example mlp.lua', 'bench gpu_ops' }) do
        assert.are.equal('NOT RUN (deadline)', rows[name], name)
      end
      assert.is_truthy(out:find('PyTorch: not available', 1, true))
    end)

    it('SIGTERM stops the running step at once and still prints the table', function()
      local log = os.tmpname()
      local script = ([[
        env BUILD=%s DPLUA_CUDA_LIB=%s CUDA_HOME=/nonexistent CHECK_STALL='ops on cuda:0' spec/gpu/check > %s 2>&1 &
        p=$!; sleep 5; kill -TERM $p; wait $p; echo "rc=$?" >> %s]]):format(q(abs_build), q(emu), q(log), q(log))
      local t = os.time()
      os.execute(script)
      local secs = os.time() - t
      local out = shell.slurp(log)
      os.remove(log)
      assert.is_true(secs <= 12, 'took ' .. secs .. ' s')
      assert.is_truthy(out:find('\nrc=1\n', 1, true), out)
      local rows = table_rows(out)
      assert.are.equal('STOPPED (interrupted by SIGTERM)', rows['ops on cuda:0'], out)
      assert.are.equal('NOT RUN (interrupted by SIGTERM)', rows['bench gpu_linear'])
      assert.is_truthy(out:find('spec/gpu/check: FAILED', 1, true))
    end)
  end)
end)
