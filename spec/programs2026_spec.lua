-- Public programs of today translated to dplua (examples/programs/), each against its
-- PyTorch twin (spec/fixtures/make_prog_NAME.py, run with PyTorch 1.13): the same initial
-- weights and data, and every step's loss compared.  The programs run in float64 here, so
-- the losses agree to far better than float32 rounding.
local torch = require 'torch'

local here = debug.getinfo(1, 'S').source:gsub('^@', ''):match('(.*)/') or '.'
local root = here .. '/..'

-- runs examples/programs/NAME.lua with a table of overrides, its printing silenced;
-- returns what the program returns
local function run_program(name, overrides)
  local env = setmetatable({ print = function() end, torch = torch, nn = require 'nn', optim = require 'optim' },
    { __index = _G })
  local chunk = assert(loadfile(root .. '/examples/programs/' .. name .. '.lua', 't', env))
  local ok, res = pcall(chunk, overrides)
  torch.set_default_dtype('float32')
  if not ok then error(res, 0) end
  return res
end

-- every number of got against want, relatively; returns the largest relative difference
local function compare(got, want, what, rtol)
  assert.are.equal(#want, #got, what .. ': how many values')
  local worst = 0
  for i = 1, #want do
    local g, w = got[i], want[i]
    if type(w) == 'table' then
      worst = math.max(worst, compare(g, w, what .. '[' .. i .. ']', rtol))
    else
      local rel = math.abs(g - w) / math.max(math.abs(w), 1e-12)
      if not (rel <= rtol) then
        error(('%s[%d]: dplua %.17g, PyTorch %.17g (relative difference %.3g)'):format(what, i, g, w, rel), 2)
      end
      worst = math.max(worst, rel)
    end
  end
  return worst
end

-- DPLUA_PROGRAMS_VERBOSE=1 prints the largest relative difference of each program's losses
local function report(what, worst)
  if os.getenv('DPLUA_PROGRAMS_VERBOSE') then
    io.stderr:write(('%s: largest relative difference of the losses %.3g\n'):format(what, worst))
  end
end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute('mkdir -p ' .. d))
  return d
end

describe('programs of 2026 against their PyTorch twins', function()
  it('nanoGPT: from_pretrained on a GPT-2 checkpoint, train, save, resume', function()
    local fx = dofile(here .. '/fixtures/prog_nanogpt.lua')
    local out = tmpdir()
    for r, run in ipairs(fx.runs) do
      local overrides = { out_dir = out, default_dtype = 'float64', batch_ix = run.ix,
                          max_iters = run.max_iters, init_from = r == 1 and 'gpt2-tiny' or 'resume',
                          pretrained_path = here .. '/fixtures/gpt2_tiny.safetensors' }
      for k, v in pairs(fx.config) do overrides[k] = v end
      local res = run_program('nanogpt', overrides)
      report('nanoGPT run ' .. r, compare(res.losses, run.losses, 'run ' .. r .. ' training losses', 1e-10))
      compare(res.evals, run.evals, 'run ' .. r .. ' estimate_loss', 1e-10)
    end
    os.execute('rm -rf ' .. out)
  end)
end)
