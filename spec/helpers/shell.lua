-- spec/helpers/shell.lua: what the specs that run programs share (where the build is,
-- quoting, files, running a command with its output captured).
-- Load with dofile('spec/helpers/shell.lua').
local M = {}

-- the build the specs check (spec/run sets DPLUA_BUILD) and its dplua program
M.build = os.getenv('DPLUA_BUILD') or 'build'
M.bin = M.build .. '/dplua'

-- s quoted for the shell
function M.q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- a file's contents, or '' when it can't be read
function M.slurp(path)
  local f = io.open(path, 'rb')
  if not f then return '' end
  local s = f:read('a')
  f:close()
  return s
end

function M.write(path, s)
  local f = assert(io.open(path, 'wb'))
  f:write(s)
  f:close()
  return path
end

-- runs a shell command with no input; returns stdout, stderr and the exit code
-- (128 + the signal's number when a signal ended it)
function M.run(cmd)
  local out, err = os.tmpname(), os.tmpname()
  local ok, how, code = os.execute(('%s > %s 2> %s < /dev/null'):format(cmd, M.q(out), M.q(err)))
  if how == 'signal' then code = 128 + code end
  local o, e = M.slurp(out), M.slurp(err)
  os.remove(out)
  os.remove(err)
  return o, e, ok and 0 or code
end

-- The emulated CUDA library (make cuda-emu) as an absolute path, or nil and why it is not
-- used: not built, or an ASan run (the emulation's fibers switch stacks under ASan).
function M.emulated_cuda()
  local lib = (os.getenv('EMU') or 'build-emu') .. '/libdplua_cuda.so'
  if lib:sub(1, 1) ~= '/' then lib = io.popen('pwd'):read('l') .. '/' .. lib end
  local f = io.open(lib)
  if not f or os.getenv('ASAN') == '1' then
    return nil, 'the emulated CUDA library (make cuda-emu) is needed, and is not used under ASAN=1'
  end
  f:close()
  return lib
end

return M
