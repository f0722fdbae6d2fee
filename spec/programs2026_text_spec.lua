-- Public programs of today (nanoGPT, makemore parts 3-5, the BiLSTM-CRF tutorial) translated to dplua (examples/programs/), each against its
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

-- every number of got (tables, records, tensors) against want, within rtol relatively or
-- atol absolutely; returns the largest relative difference
local function compare(got, want, what, rtol, atol)
  if torch.is_tensor(got) then got = got:tolist() end
  assert.are.equal(#want, #got, what .. ': how many values')
  local worst = 0
  for i = 1, #want do
    local g, w = got[i], want[i]
    if type(w) == 'table' and w[1] == nil then   -- a record: its fields
      for k, v in pairs(w) do
        local cmp = type(v) == 'table' and compare or function(a, b, n, r) return compare({ a }, { b }, n, r, atol) end
        worst = math.max(worst, cmp(g[k], v, what .. '[' .. i .. '].' .. k, rtol, atol))
      end
    elseif type(w) == 'table' then
      worst = math.max(worst, compare(g, w, what .. '[' .. i .. ']', rtol, atol))
    else
      local rel = math.abs(g - w) / math.max(math.abs(w), 1e-12)
      if not (rel <= rtol or math.abs(g - w) <= (atol or 0)) then
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

  local mm = dofile(here .. '/fixtures/prog_makemore.lua')
  local mm_init = here .. '/fixtures/makemore_init.safetensors'

  it('makemore part 3: BatchNorm MLP, activation and gradient statistics, histograms', function()
    local want = mm.part3
    local res = run_program('makemore_mlp_bn', { steps = mm.steps, dtype = 'float64', init = mm_init,
                                                 prefix = 'p3.', batch_ix = want.ix })
    report('makemore part 3', compare(res.losses, want.losses, 'losses', 1e-12))
    compare(res.ud, want.ud, 'update:data ratios (log10)', 1e-9, 1e-12)
    compare(res.acts, want.acts, 'Tanh activations', 1e-9, 1e-14)
    compare(res.grads, want.grads, 'Tanh gradients', 1e-9, 1e-14)
    compare(res.wgrads, want.wgrads, 'weight gradients', 1e-9, 1e-14)
    compare({ res.train, res.val }, { want.train, want.val }, 'split losses', 1e-12)
  end)

  it('makemore part 4: the hand-written backward pass against autograd, then trained with it', function()
    local want = mm.part4
    local ix = table.move(want.ix, 1, #want.ix, 1, {})
    table.move(want.train_ix, 1, #want.train_ix, #ix + 1, ix)
    local res = run_program('makemore_backprop', { steps = mm.steps, dtype = 'float64', init = mm_init,
                                                   prefix = 'p4.', batch_ix = ix })
    compare({ res.loss, res.loss_fast }, { want.loss, want.loss_fast }, 'first loss, F.cross_entropy', 1e-13)
    -- cmp: the 26 gradients of exercise 1 agree with autograd's exactly (as in the
    -- lecture), exercises 2 and 3 to rounding
    assert.are.equal(28, #res.cmps)
    for i, c in ipairs(res.cmps) do
      assert.is_true(c.approximate, c.name)
      if i <= 26 then assert.is_true(c.exact and c.maxdiff == 0, c.name) else assert.is_true(c.maxdiff < 1e-15, c.name) end
    end
    report('makemore part 4', compare(res.losses, want.losses, 'losses', 1e-12))
  end)

  it('makemore part 5: the WaveNet of Embedding, FlattenConsecutive, BatchNorm1d over 3-D input', function()
    local want = mm.part5
    local res = run_program('makemore_wavenet', { steps = mm.steps, dtype = 'float64', init = mm_init,
                                                  prefix = 'p5.', batch_ix = want.ix })
    report('makemore part 5', compare(res.losses, want.losses, 'losses', 1e-12))
    compare({ res.train, res.val }, { want.train, want.val }, 'split losses (eval mode)', 1e-12)
  end)

  it('BiLSTM-CRF: transitions[{i, j}] carries its gradient; forward algorithm, Viterbi', function()
    local fx = dofile(here .. '/fixtures/prog_bilstm_crf.lua')
    local res = run_program('bilstm_crf', { epochs = fx.epochs, dtype = 'float64', init = fx.init, hidden = fx.hidden })
    report('BiLSTM-CRF', compare(res.losses, fx.losses, 'negative log likelihoods', 1e-12))
    for _, when in ipairs({ 'before', 'after' }) do
      compare({ res[when].score }, { fx[when].score }, when .. ' training: Viterbi score', 1e-12)
      local want = {}
      for i, t in ipairs(fx[when].path) do want[i] = t + 1 end   -- tags count from 1
      assert.are.same(want, res[when].path)
    end
  end)
end)
