-- The examples under examples/, run through the dplua program: the notes' program prints
-- exactly the per-replica and outside sizes for one, two and three devices.
local shell = dofile('spec/helpers/shell.lua')
local dplua, sh_quote = shell.bin, shell.q

-- Runs `dplua file args` with env prefix; returns stdout+stderr and whether it exited 0.
local function run(env, file, args)
  local cmd = ('env -u DPLUA_DEVICES -u DPLUA_CPU_DEVICES %s %s %s %s 2>&1')
    :format(env or '', sh_quote(dplua), sh_quote(file), args or '')
  local p = assert(io.popen(cmd))
  local out = p:read('a')
  local ok = p:close() == true
  return out, ok
end

local function lines_of(out)
  local lines = {}
  for line in out:gmatch('([^\n]*)\n') do lines[#lines + 1] = line end
  return lines
end

local function count(lines, exact)
  local n = 0
  for _, l in ipairs(lines) do if l == exact then n = n + 1 end end
  return n
end

local function in_model(rows)
  return ('\tIn Model: input size torch.Size([%d, 5]) output size torch.Size([%d, 2])'):format(rows, rows)
end
local function outside(rows)
  return ('Outside: input size torch.Size([%d, 5]) output_size torch.Size([%d, 2])'):format(rows, rows)
end

-- The lines of the run loop, in order: In Model lines, then Outside, per batch.
local function loop_lines(lines)
  local out = {}
  for _, l in ipairs(lines) do
    if l:find('In Model:', 1, true) or l:find('^Outside:') then out[#out + 1] = l end
  end
  return out
end

local function expected_loop(per_replica_full, per_replica_last)
  local out = {}
  for _, rows in ipairs({ 30, 30, 30, 10 }) do
    local parts = rows == 30 and per_replica_full or per_replica_last
    for _, r in ipairs(parts) do out[#out + 1] = in_model(r) end
    out[#out + 1] = outside(rows)
  end
  return out
end

describe('examples/train.lua (the notes\' program)', function()
  local cuda_devices
  setup(function()
    local p = assert(io.popen(sh_quote(dplua) .. " -e 'print(torch.cuda.device_count())' 2>&1"))
    cuda_devices = tonumber(p:read('a'):match('(%d+)')) or 0
    p:close()
  end)

  it('runs one model on the whole batch without --devices', function()
    local out, ok = run('', 'examples/train.lua')
    assert.is_true(ok, out)
    local lines = lines_of(out)
    if cuda_devices > 1 then return end   -- wrapped in DataParallel over every GPU
    assert.are.same(expected_loop({ 30 }, { 10 }), loop_lines(lines), out)
    assert.are.equal(0, count(lines, "Let's use 2 devices!"))
  end)

  it('with --devices cpu:0 wraps the model on one device, which sees whole batches', function()
    local out, ok = run('', 'examples/train.lua', '--devices cpu:0')
    assert.is_true(ok, out)
    local lines = lines_of(out)
    assert.are.equal(1, count(lines, "Let's use 1 device!"), out)
    assert.are.same(expected_loop({ 30 }, { 10 }), loop_lines(lines), out)
  end)

  it('splits every batch in two with --devices cpu:0,cpu:1', function()
    local out, ok = run('', 'examples/train.lua', '--devices cpu:0,cpu:1')
    assert.is_true(ok, out)
    local lines = lines_of(out)
    assert.are.equal(1, count(lines, "Let's use 2 devices!"), out)
    assert.are.same(expected_loop({ 15, 15 }, { 5, 5 }), loop_lines(lines), out)
    assert.are.equal(6, count(lines, in_model(15)))
    assert.are.equal(2, count(lines, in_model(5)))
    assert.are.equal(3, count(lines, outside(30)))
    assert.are.equal(1, count(lines, outside(10)))
  end)

  it('splits across every CPU device that DPLUA_CPU_DEVICES makes when there is no GPU', function()
    if cuda_devices > 0 then return end
    local out, ok = run('DPLUA_CPU_DEVICES=2', 'examples/train.lua')
    assert.is_true(ok, out)
    local lines = lines_of(out)
    assert.are.equal(1, count(lines, "Let's use 2 devices!"), out)
    assert.are.same(expected_loop({ 15, 15 }, { 5, 5 }), loop_lines(lines), out)
  end)

  it('takes the devices from DPLUA_DEVICES too', function()
    local out, ok = run('DPLUA_DEVICES=cpu:0,cpu:1', 'examples/train.lua')
    assert.is_true(ok, out)
    assert.are.same(expected_loop({ 15, 15 }, { 5, 5 }), loop_lines(lines_of(out)), out)
  end)

  it('splits 30 into 10, 10, 10 and 10 into 4, 4, 2 over three devices', function()
    local out, ok = run('DPLUA_CPU_DEVICES=3', 'examples/train.lua', '--devices cpu:0,cpu:1,cpu:2')
    assert.is_true(ok, out)
    local lines = lines_of(out)
    assert.are.equal(1, count(lines, "Let's use 3 devices!"), out)
    assert.are.same(expected_loop({ 10, 10, 10 }, { 4, 4, 2 }), loop_lines(lines), out)
  end)

  it('shows the notes\' to() checks', function()
    local out, ok = run('', 'examples/train.lua')
    assert.is_true(ok, out)
    local lines = lines_of(out)
    local function index_of(s)
      for i, l in ipairs(lines) do if l == s then return i end end
      error('missing line ' .. s .. ' in:\n' .. out)
    end
    local t = index_of('a is_cuda false')
    assert.are.same({ 'a is_cuda false', 'a is_cuda false', 'b is_cuda true' }, { lines[t], lines[t + 1], lines[t + 2] })
    local m = index_of(lines[t + 3])
    assert.are.same({ 'false', 'true', 'true' }, { lines[m + 1], lines[m + 2], lines[m + 3] })
  end)

  it('rejects an unknown argument with a message', function()
    local out, ok = run('', 'examples/train.lua', '--gpus 2')
    assert.is_false(ok)
    assert.matches('unknown argument --gpus', out, 1, true)
  end)
end)

describe('examples/tensors.lua', function()
  it('prints false / false, true and false, true, true', function()
    local out, ok = run('', 'examples/tensors.lua')
    assert.is_true(ok, out)
    local lines = lines_of(out)
    local text = table.concat(lines, '\n')
    assert.matches('a is_cuda false\na is_cuda false\nb is_cuda true\n', text .. '\n', 1, true)
    assert.matches('models:to(device)\nfalse\ntrue\ntrue\n', text .. '\n', 1, true)
  end)
end)

describe('examples/model_parallel.lua', function()
  it('trains a model split over two devices with the gradients of one device', function()
    local out, ok = run('', 'examples/model_parallel.lua')
    assert.is_true(ok, out)
    assert.matches('equal those of the one-device model: true', out, 1, true)
    local steps = 0
    for _ in out:gmatch('step %d+ .- ok\n') do steps = steps + 1 end
    assert.are.equal(5, steps, out)
  end)
end)

-- Runs an example with args on the CPU and on the emulated cuda:0 (one GPU); returns both
-- outputs, or nil after marking the test pending when there is no emulation.
local function on_cpu_and_emulated_gpu(file, args)
  local emu, why = shell.emulated_cuda()
  if not emu then pending(why) return nil end
  local cpu, ok1 = run('', file, '--device cpu ' .. args)
  local gpu, ok2 = run(('DPLUA_CUDA_LIB=%s DPLUA_EMU_GPUS=1'):format(sh_quote(emu)), file, '--device cuda:0 ' .. args)
  assert.is_true(ok1, cpu)
  assert.is_true(ok2, gpu)
  return cpu, gpu
end

describe('examples/cnn.lua (pytorch/examples MNIST network)', function()
  local small = '--epochs 1 --train-size 128 --test-size 64 --batch-size 32 --log-interval 1 --min-accuracy 0'
  local function losses(out)
    local l = {}
    for v in out:gmatch('Loss: ([%d.]+)') do l[#l + 1] = tonumber(v) end
    return l
  end

  it('fits its generated MNIST-shaped data on the CPU', function()
    if os.getenv('ASAN') == '1' then
      local out, ok = run('', 'examples/cnn.lua', '--device cpu ' .. small)
      assert.is_true(ok, out)
      assert.are.equal(4, #losses(out))
      return
    end
    local out, ok = run('', 'examples/cnn.lua', '--device cpu --epochs 1 --train-size 2560 --test-size 256')
    assert.is_true(ok, out)   -- the example raises below 95% test accuracy
    assert.is_truthy(out:find('Train Epoch: 1 [0/2560 (0%)]\tLoss: ', 1, true), out)
    assert.is_truthy(out:find('\nTest set: Average loss: [%d.]+, Accuracy: %d+/256 %(%d+%%%)\n'), out)
  end)

  it('gives the same losses on the emulated cuda:0 as on the CPU', function()
    local cpu, gpu = on_cpu_and_emulated_gpu('examples/cnn.lua', small)
    if not cpu then return end
    local a, b = losses(cpu), losses(gpu)
    assert.are.equal(4, #a)
    assert.are.equal(#a, #b)
    for i = 1, #a do
      assert(math.abs(a[i] - b[i]) <= 1e-4 * math.max(1, a[i]), ('step %d: cpu %s, cuda:0 %s'):format(i, a[i], b[i]))
    end
  end)
end)

describe('examples/char_transformer.lua (a small GPT on a shipped text)', function()
  local small = '--steps 4 --eval-every 2 --sample 10 --block-size 16 --batch-size 8 --n-embd 32'
  local function numbers(out)
    local l = {}
    for v in out:gmatch('loss ([%d.]+)') do l[#l + 1] = tonumber(v) end
    return l
  end

  it('learns: the validation loss falls well below the uniform guess, and it samples text', function()
    local steps = os.getenv('ASAN') == '1' and 20 or 60
    local out, ok = run('', 'examples/char_transformer.lua', ('--device cpu --steps %d --eval-every %d --sample 30'):format(steps, steps))
    assert.is_true(ok, out)
    local l = numbers(out)
    assert.is_true(l[1] > 3.7 and l[1] < 3.9, out)                -- log(45 characters) at the start
    assert.is_true(l[#l] < l[1] - (steps >= 60 and 0.8 or 0.3), out)
    assert.is_truthy(out:find('\nsample:\n', 1, true), out)
  end)

  it('gives the same losses and sample on the emulated cuda:0 as on the CPU', function()
    local cpu, gpu = on_cpu_and_emulated_gpu('examples/char_transformer.lua', small)
    if not cpu then return end
    local a, b = numbers(cpu), numbers(gpu)
    assert.are.equal(6, #a)
    assert.are.equal(#a, #b)
    for k = 1, #a do assert(math.abs(a[k] - b[k]) <= 1e-3, ('loss %d: cpu %s, cuda:0 %s'):format(k, a[k], b[k])) end
    assert.are.equal(cpu:match('sample:\n([^\n]*)'), gpu:match('sample:\n([^\n]*)'))
  end)
end)

describe('examples/lstm_lm.lua (pytorch/examples word language model)', function()
  local function values(out, what)
    local l = {}
    for v in out:gmatch(what .. ' +([%d.]+)') do l[#l + 1] = tonumber(v) end
    return l
  end

  it('trains with truncated BPTT and ends with a test perplexity below the vocabulary size', function()
    local out, ok = run('', 'examples/lstm_lm.lua', '--device cpu --epochs 3')
    assert.is_true(ok, out)
    local vocab = tonumber(out:match('a vocabulary of (%d+)'))
    local test = values(out, 'test ppl')
    assert.are.equal(1, #test, out)
    assert.is_true(test[1] < vocab * 0.6, out)   -- a uniform guess has perplexity = vocabulary
    assert.is_truthy(out:find('| epoch   3 |', 1, true), out)
  end)

  it('gives the same numbers on the emulated cuda:0 as on the CPU', function()
    local cpu, gpu = on_cpu_and_emulated_gpu('examples/lstm_lm.lua', '--epochs 1')
    if not cpu then return end
    for _, what in ipairs({ 'loss', 'valid loss', 'test loss' }) do
      local a, b = values(cpu, what), values(gpu, what)
      assert.is_true(#a > 0 and #a == #b, what)
      for k = 1, #a do assert(math.abs(a[k] - b[k]) <= 0.011, ('%s %d: cpu %s, cuda:0 %s'):format(what, k, a[k], b[k])) end
    end
  end)
end)
