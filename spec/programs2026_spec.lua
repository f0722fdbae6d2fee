-- Public PyTorch programs people train today, translated to dplua (examples/programs/),
-- each run against its PyTorch twin (spec/fixtures/make_prog_NAME.py, PyTorch 1.13): the
-- program is run with the twin's initial weights (spec/fixtures/prog_NAME.safetensors),
-- prints every value the twin recorded as `record NAME v1 v2 ...`, and each must equal
-- spec/fixtures/prog_NAME.lua within the tolerance given (the runs are float64, so the
-- tolerances are far below what a wrong layer, loss or optimizer step would give).
local shell = dofile('spec/helpers/shell.lua')
local dplua, q = shell.bin, shell.q
local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*)/') or '.'

-- runs examples/programs/FILE with args; returns the table of recorded values by name
local function run(file, args)
  local cmd = ('env -u DPLUA_DEVICES -u DPLUA_CPU_DEVICES %s %s %s 2>&1'):format(q(dplua),
    q('examples/programs/' .. file), args)
  local p = assert(io.popen(cmd))
  local out = p:read('a')
  assert(p:close() == true, file .. ' failed:\n' .. out)
  local rec = {}
  for name, values in out:gmatch('\nrecord (%S+) ([^\n]*)') do
    local list = {}
    for v in values:gmatch('%S+') do list[#list + 1] = tonumber(v) end
    rec[name] = list
  end
  return rec, out
end

-- every value in want (a number or a list) against got within relative tol; returns the
-- largest relative difference
local function compare(got, want, tol, out)
  local worst = 0
  for name, w in pairs(want) do
    local ws = type(w) == 'table' and w or { w }
    local g = got[name]
    assert(g, ('%s was not recorded:\n%s'):format(name, out))
    assert.are.equal(#ws, #g, name .. ': number of values')
    for i, wv in ipairs(ws) do
      local rel = math.abs(g[i] - wv) / math.max(math.abs(wv), 1e-300)
      if wv == 0 then rel = math.abs(g[i]) end
      if rel > worst then worst = rel end
      if rel > tol then
        error(('%s[%d]: dplua %.17g, PyTorch %.17g (relative difference %.3g > %g)'):format(
          name, i, g[i], wv, rel, tol), 2)
      end
    end
  end
  return worst
end

local function check_program(name, args, tol)
  local want = dofile(here .. '/fixtures/prog_' .. name .. '.lua')
  local got, out = run(name .. '.lua', args .. ' ' .. q(here .. '/fixtures/prog_' .. name .. '.safetensors'))
  return compare(got, want, tol, out)
end

describe('programs of 2026 against their PyTorch twins', function()
  it('resnet_cifar.lua (kuangliu/pytorch-cifar ResNet18, SGD, cosine schedule) matches every loss', function()
    check_program('resnet_cifar', '2', 1e-9)
  end)

  it('mobilenet_v2.lua (torchvision MobileNetV2: depthwise convolutions, ReLU6, inverted residuals) matches forward and backward', function()
    check_program('mobilenet_v2', '4', 1e-9)
  end)
end)
