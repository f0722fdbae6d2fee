-- float16 and bfloat16: the dtypes, conversions bit for bit as PyTorch 1.13's (a fixture
-- of many values, spec/fixtures/make_half.py), printing, safetensors, modules, type
-- promotion, ops in float32 inside against PyTorch's values, autograd, autocast and
-- GradScaler.  Runs on cpu, cpu:1 and the emulated cuda:0 (spec/gpu/specs).
local torch = require 'torch'
local nn = require 'nn'
local check = dofile('spec/helpers/check.lua')
local device = dofile('spec/helpers/device.lua')
local expect_error = check.expect_error
local F = dofile('spec/fixtures/half.lua')

local function is_nan(v) return v ~= v end

-- a and b equal as float32 values, NaN equal to NaN, -0 distinct from 0
local function same_values(expected, got, what)
  assert.are.equal(#expected, #got, what .. ': lengths')
  for i = 1, #expected do
    local e, g = expected[i], got[i]
    local ok = (is_nan(e) and is_nan(g)) or (e == g and (e ~= 0 or 1 / e == 1 / g))
    if not ok then
      error(('%s: element %d: expected %.17g, got %.17g'):format(what, i, e, g), 2)
    end
  end
end

-- within n units in the last place of the dtype (relative to the larger magnitude)
local ULP = { float16 = 2 ^ -10, bfloat16 = 2 ^ -7 }
local function close(expected, got, dtype, n, what)
  local e, g = check.flat(expected), check.flat(got)
  assert.are.equal(#e, #g, what .. ': lengths')
  for i = 1, #e do
    local tol = n * ULP[dtype] * math.max(math.abs(e[i]), 2 ^ -14)
    if not (math.abs(e[i] - g[i]) <= tol) then
      error(('%s: element %d: expected %.9g, got %.9g (tolerance %.3g)'):format(what, i, e[i], g[i], tol), 2)
    end
  end
end

describe('float16 and bfloat16 dtypes', function()
  it('are named as PyTorch names them, with element size 2', function()
    assert.are.equal('float16', torch.float16)
    assert.are.equal('float16', torch.half)
    assert.are.equal('bfloat16', torch.bfloat16)
    for _, dt in ipairs { 'float16', 'bfloat16' } do
      local t = torch.zeros(2, { dtype = dt })
      assert.are.equal(dt, t.dtype)
      assert.are.equal(2, t:element_size())
      assert.is_true(t:is_floating_point())
      assert.are.same({ 0, 0 }, t:tolist())
    end
    assert.are.equal('float16', torch.zeros(2, { dtype = 'half' }).dtype)
    assert.are.equal(device.tensor_type .. 'HalfTensor', torch.zeros(1):half():type())
    assert.are.equal(device.tensor_type .. 'BFloat16Tensor', torch.zeros(1):bfloat16():type())
    assert.are.equal('float16', torch.zeros(1):type('torch.HalfTensor').dtype)
    assert.are.equal('bfloat16', torch.HalfTensor({ 1, 2 }):to(torch.bfloat16).dtype)
  end)

  it('make tensors from tables, and give numbers back (item, tolist)', function()
    local t = torch.tensor({ { 1, 2.5 }, { -3, 0.1 } }, { dtype = torch.float16 })
    assert.are.same({ { 1, 2.5 }, { -3, 0.0999755859375 } }, t:tolist())
    local b = torch.tensor({ 0.1, 300.7 }, { dtype = torch.bfloat16 })
    assert.are.same({ 0.10009765625, 300 }, b:tolist())
    assert.are.equal(2.5, t[1][2])
    assert.are.equal(-3, torch.tensor(-3, { dtype = 'float16' }):item())
    assert.are.equal(65504, torch.full({ 1 }, 65504, { dtype = 'float16' }):item())
    assert.are.equal(math.huge, torch.full({ 1 }, 65520, { dtype = 'float16' }):item())
    assert.are.same({ 1, 1 }, torch.ones(2, { dtype = 'bfloat16' }):tolist())
  end)

  it('round float32 values to nearest even exactly as PyTorch (overflow, subnormals, NaN)', function()
    local x = torch.tensor(F.conv.input)
    assert.are.equal('float32', x.dtype)
    same_values(F.conv.f16, x:half():float():tolist(), 'float32 -> float16')
    same_values(F.conv.bf16, x:bfloat16():float():tolist(), 'float32 -> bfloat16')
    same_values(F.conv.f16, x:to('float16'):to('float64'):tolist(), 'float32 -> float16 -> float64')
    same_values(F.conv.f16_to_bf16, x:half():bfloat16():float():tolist(), 'float16 -> bfloat16')
    same_values(F.conv.bf16_to_f16, x:bfloat16():half():float():tolist(), 'bfloat16 -> float16')
  end)

  it('convert float64 through float32 and int64 as PyTorch', function()
    local d = torch.tensor(F.conv.f64_input, { dtype = 'float64' })
    same_values(F.conv.f64_f16, d:half():double():tolist(), 'float64 -> float16')
    same_values(F.conv.f64_bf16, d:bfloat16():double():tolist(), 'float64 -> bfloat16')
    local i = torch.tensor(F.conv.i64_input)
    assert.are.equal('int64', i.dtype)
    same_values(F.conv.i64_f16, i:half():double():tolist(), 'int64 -> float16')
    same_values(F.conv.i64_bf16, i:bfloat16():double():tolist(), 'int64 -> bfloat16')
    local h = torch.tensor(F.conv.int_input)
    assert.are.same(F.conv.f16_i64, h:half():long():tolist())
    assert.are.same(F.conv.bf16_i64, h:bfloat16():long():tolist())
    assert.are.same(F.conv.f16_bool, h:half():bool():tolist())
    assert.are.same({ 1, 0, 1 }, torch.tensor({ true, false, true }):half():tolist())
  end)

  it('print as PyTorch prints them', function()
    local t = torch.tensor({ 1.0, 2.5, -3.0 })
    local want = F.conv.print_f16:gsub('torch%.', '')
    assert.are.equal(device.printed(want), tostring(t:half()))
    assert.are.equal(device.printed((F.conv.print_bf16:gsub('torch%.', ''))), tostring(t:bfloat16()))
    assert.are.equal(device.printed((F.conv.print_f16_scalar:gsub('torch%.', ''))),
                     tostring(torch.tensor(3.140625, { dtype = 'float16' })))
  end)

  it('move between devices and dtypes together', function()
    local t = torch.tensor({ 1.5, -2 }, { dtype = 'float16' })
    local c = t:to('cpu')
    assert.are.equal('float16', c.dtype)
    assert.are.same({ 1.5, -2 }, c:tolist())
    assert.are.same({ 1.5, -2 }, c:to { device = t.device, dtype = 'bfloat16' }:tolist())
  end)

  it('name the new dtypes in the unknown-dtype error', function()
    expect_error(function() torch.zeros(2, { dtype = 'float8' }) end, "unknown dtype 'float8'", 'float16, bfloat16')
  end)
end)

describe('float16 and bfloat16 in safetensors and modules', function()
  local path = os.tmpname()
  after_each(function() os.remove(path) end)

  it('are written as F16 and BF16 and read back as themselves', function()
    local h = torch.tensor({ 1, 0.1, -65504, 2 ^ -24 }, { dtype = 'float16' })
    local b = torch.tensor({ 1, 0.1, -3e38, 1e-40 }, { dtype = 'bfloat16' })
    torch.save(path, { h = h, b = b })
    local f = io.open(path, 'rb')
    local bytes = f:read('a')
    f:close()
    assert.truthy(bytes:find('"dtype":"F16"', 1, true))
    assert.truthy(bytes:find('"dtype":"BF16"', 1, true))
    local back = torch.load(path)
    assert.are.equal('float16', back.h.dtype)
    assert.are.equal('bfloat16', back.b.dtype)
    same_values(h:float():tolist(), back.h:float():tolist(), 'F16')
    same_values(b:float():tolist(), back.b:float():tolist(), 'BF16')
  end)

  it('save_npy writes float16 as <f2 and load_npy reads it; bfloat16 has no NumPy dtype', function()
    local h = torch.tensor({ 1.5, -0.1, 65504 }, { dtype = 'float16' })
    torch.save_npy(path, h)
    local f = io.open(path, 'rb')
    local bytes = f:read('a')
    f:close()
    assert.truthy(bytes:find("'<f2'", 1, true))
    local back = torch.load_npy(path)
    assert.are.equal('float16', back.dtype)
    same_values(h:float():tolist(), back:float():tolist(), 'npy')
    expect_error(function() torch.save_npy(path, h:bfloat16()) end, 'NumPy has no bfloat16 dtype')
  end)

  it('module half(), bfloat16() and float() convert parameters and buffers', function()
    local m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    m:half()
    for _, p in ipairs(m:parameters()) do assert.are.equal('float16', p.dtype) end
    assert.are.equal('float16', m[2].running_mean.dtype)
    m:bfloat16()
    for _, p in ipairs(m:parameters()) do assert.are.equal('bfloat16', p.dtype) end
    m:float()
    for _, p in ipairs(m:parameters()) do assert.are.equal('float32', p.dtype) end
    assert.are.equal('float32', m[2].running_mean.dtype)
  end)
end)

describe('float16 and bfloat16 compute', function()
  it('promote as PyTorch', function()
    local h, b = torch.ones(2, { dtype = 'float16' }), torch.ones(2, { dtype = 'bfloat16' })
    assert.are.equal('float32', (h + torch.ones(2)).dtype)
    assert.are.equal('float64', (b + torch.ones(2, { dtype = 'float64' })).dtype)
    assert.are.equal('float32', (h + b).dtype)
    assert.are.equal('float16', (h + 1.5).dtype)
    assert.are.equal('bfloat16', (b * 2).dtype)
    assert.are.equal('float16', (h + torch.ones(2, { dtype = 'int64' })).dtype)
    assert.are.equal('float16', (h + torch.tensor(2.5)).dtype)   -- a 0-dim float32 does not promote
    assert.are.equal('bool', h:gt(0).dtype)
    assert.are.equal('float16', h:exp().dtype)
    assert.are.equal('bfloat16', b:sum().dtype)
    assert.are.equal('float16', torch.ones(2, { dtype = 'int64' }):to('float16'):mean().dtype)
  end)

  for _, dt in ipairs { 'float16', 'bfloat16' } do
    local R = F.ops[dt]
    local function T(v) return torch.tensor(v, { dtype = dt }) end

    it(dt .. ': elementwise ops, reductions, softmax and matmul give PyTorch\'s values', function()
      local a, b, c = T(R.a), T(R.b), T(R.c)
      close(R.add, (a + c):double():tolist(), dt, 0, 'add')
      close(R.add_scalar, (a + 0.3):double():tolist(), dt, 0, 'add scalar')
      close(R.mul_f32, (a * c:float()):double():tolist(), dt, 0, 'mul float32')
      close(R.exp, a:exp():double():tolist(), dt, 1, 'exp')
      close(R.softmax, torch.softmax(a, 2):double():tolist(), dt, 1, 'softmax')
      close({ R.sum }, { a:sum():item() }, dt, 1, 'sum')
      close(R.sum_dim, a:sum(1):double():tolist(), dt, 1, 'sum(1)')
      close({ R.mean }, { a:mean():item() }, dt, 1, 'mean')
      local ab = a:matmul(b):double():tolist()
      close(R.matmul, ab, dt, 1, 'matmul')
      close(R.matmul_native, ab, dt, 32, 'matmul against PyTorch\'s CPU GEMM')
      assert.are.same(R.gt, a:gt(c):tolist())
    end)

    it(dt .. ': linear forward and backward, gradients in the parameter\'s dtype', function()
      local x = T(R.x):requires_grad_(true)
      local w, bias = T(R.w):requires_grad_(true), T(R.bias):requires_grad_(true)
      local y = nn.functional.linear(x, w, bias)
      assert.are.equal(dt, y.dtype)
      close(R.linear, y:double():tolist(), dt, 1, 'linear')
      y:backward(T(R.linear_gy))
      assert.are.equal(dt, w.grad.dtype)
      assert.are.equal(dt, x.grad.dtype)
      close(R.linear_gx, x.grad:double():tolist(), dt, 1, 'grad x')
      close(R.linear_gw, w.grad:double():tolist(), dt, 1, 'grad w')
      close(R.linear_gb, bias.grad:double():tolist(), dt, 1, 'grad bias')
    end)

    it(dt .. ': a small model trains (conv, pooling, layer norm, loss, Adam)', function()
      torch.manual_seed(3)
      local m = nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.LayerNorm(16), nn.Linear(16, 3)):to(dt)
      local opt = torch.optim.Adam(m:parameters(), { lr = 0.01 })
      local x, y = torch.randn(8, 1, 4, 4):to(dt), torch.tensor({ 1, 2, 3, 1, 2, 3, 1, 2 })
      local first, last
      for _ = 1, 30 do
        opt:zero_grad()
        local loss = nn.functional.cross_entropy(m(x), y)
        assert.are.equal(dt, loss.dtype)
        loss:backward()
        opt:step()
        first = first or loss:item()
        last = loss:item()
      end
      for _, p in ipairs(m:parameters()) do assert.are.equal(dt, p.dtype) end
      assert.is_true(last < first * 0.5, ('loss %g -> %g'):format(first, last))
    end)

    it(dt .. ': in-place ops, random draws, embedding, batch norm and pooling keep the dtype', function()
      local h = T({ 1, -2, 3.5, 0.25 })
      h:add_(1)
      h:mul_(T({ 2, 2, 2, 2 }))
      assert.are.same({ 4, -2, 9, 2.5 }, h:tolist())
      h:masked_fill_(h:gt(8), 0)
      assert.are.same({ 4, -2, 0, 2.5 }, h:tolist())
      assert.are.equal(4 + 1 + 1 + 2.5, h:clamp(1, 4):sum():item())
      local r = torch.rand(1000, { dtype = dt })
      assert.are.equal(dt, r.dtype)
      assert.is_true(r:min():item() >= 0 and r:max():item() <= 1)
      assert.are.same({ 2 }, torch.multinomial(T({ 0, 1, 0 }), 1):tolist())
      local n = torch.randn(3, 4, { dtype = dt })
      assert.are.equal(dt, n:topk(2, 2)[1].dtype)
      assert.is_true(n:softmax(2):sum(2):sub(1):abs():max():item() < 0.02)
      assert.are.equal(dt, nn.Embedding(5, 3):to(dt)(torch.tensor({ 1, 2 })).dtype)
      local x = torch.randn(2, 3, 8, 8, { dtype = dt })
      assert.are.equal(dt, nn.BatchNorm2d(3):to(dt)(x).dtype)
      assert.are.equal(dt, nn.functional.max_pool2d(x, 2).dtype)
      assert.are.equal(dt, nn.functional.avg_pool2d(x, 2).dtype)
    end)

    it(dt .. ': indexing, sorting, cat and where keep the dtype and the values', function()
      local t = T({ 3, -1, 2.5, 0.5 })
      assert.are.same({ -1, 0.5, 2.5, 3 }, t:sort():tolist())
      assert.are.equal(dt, t:sort().dtype)
      assert.are.same({ 2.5, 3 }, t:index_select(1, torch.tensor({ 3, 1 })):tolist())
      assert.are.same({ 3, -1, 2.5, 0.5, 3, -1, 2.5, 0.5 }, torch.cat({ t, t }):tolist())
      assert.are.same({ 3, 0, 2.5, 0.5 }, torch.where(t:gt(0), t, T({ 0, 0, 0, 0 })):tolist())
      local u = t:clone()
      u[2] = 7
      assert.are.same({ 3, 7, 2.5, 0.5 }, u:tolist())
      assert.are.same({ 3, 2, 4.5, 5 }, t:cumsum(1):tolist())
    end)
  end
end)

describe('torch.autocast', function()
  local A = F.autocast
  local F_ = nn.functional
  local function T(v) return torch.tensor(v) end
  local dev_type = device.is_cuda and 'cuda' or 'cpu'

  it('runs linear, mm and conv2d in bfloat16 and the loss in float32, with PyTorch 1.13\'s values', function()
    local x, w1, b1, w2 = T(A.x), T(A.w1), T(A.b1), T(A.w2)
    local r = torch.autocast(dev_type, { dtype = torch.bfloat16 }, function()
      local h = F_.linear(x, w1, b1)
      local o = F_.linear(F_.relu(h), w2)
      return { h = h, o = o, loss = F_.cross_entropy(o, torch.tensor(A.target)), softmax = torch.softmax(o, 2),
               mm = torch.mm(x, w1:t()), conv = F_.conv2d(T(A.img), T(A.kern)) }
    end)
    assert.are.equal(A.h_dtype, r.h.dtype)
    assert.are.equal(A.o_dtype, r.o.dtype)
    assert.are.equal(A.mm_dtype, r.mm.dtype)
    assert.are.equal(A.conv_dtype, r.conv.dtype)
    assert.are.equal(A.loss_dtype, r.loss.dtype)
    assert.are.equal('float32', r.softmax.dtype)   -- the CUDA list; PyTorch's CPU list keeps bfloat16
    close(A.h, r.h:double():tolist(), 'bfloat16', 1, 'linear')
    close(A.o, r.o:double():tolist(), 'bfloat16', 1, 'second linear')
    close(A.mm, r.mm:double():tolist(), 'bfloat16', 1, 'mm')
    close(A.conv_f32, r.conv:double():tolist(), 'bfloat16', 1, 'conv2d')
    close(A.conv, r.conv:double():tolist(), 'bfloat16', 16, 'conv2d against PyTorch\'s oneDNN')
    close({ A.loss }, { r.loss:item() }, 'bfloat16', 1, 'cross_entropy')
    close(A.softmax, r.softmax:double():tolist(), 'bfloat16', 1, 'softmax')
  end)

  it('is a to-be-closed scope too, nests, and is restored after an error', function()
    local x = torch.randn(2, 3)
    assert.is_false(torch.is_autocast_enabled(dev_type))
    do
      local ac <close> = torch.autocast(dev_type, { dtype = 'float16' })
      assert.is_true(torch.is_autocast_enabled(dev_type))
      assert.are.equal('float16', torch.matmul(x, x:t()).dtype)
      assert.are.equal('float32', x:half():sum().dtype)
      assert.are.equal('float32', F_.log_softmax(x:half(), 2).dtype)
      torch.autocast(dev_type, { enabled = false }, function()
        assert.are.equal('float32', torch.matmul(x, x:t()).dtype)
      end)
      torch.autocast(dev_type, { dtype = 'bfloat16' }, function()
        assert.are.equal('bfloat16', x:mm(x:t()).dtype)
      end)
      assert.are.equal('float16', x:matmul(x:t()).dtype)
      assert.are.equal('float64', x:double():matmul(x:double():t()).dtype)   -- float64 is left alone
      assert.are.equal('float32', x:exp().dtype)                           -- not on a list: as given
    end
    assert.is_false(torch.is_autocast_enabled(dev_type))
    local ok, e = pcall(torch.autocast, dev_type, function() error('boom') end)
    assert.is_false(ok)
    assert.truthy(tostring(e):find('boom', 1, true))
    assert.is_false(torch.is_autocast_enabled(dev_type))
    assert.are.equal('float32', torch.matmul(x, x:t()).dtype)
  end)

  it('gives gradients in the parameters\' dtype through the casts', function()
    local m = nn.Linear(4, 2)
    local x = torch.randn(3, 4)
    local loss = torch.autocast(dev_type, function() return m(x):float():pow(2):mean() end)
    loss:backward()
    assert.are.equal('float32', m.weight.grad.dtype)
    local ref = (nn.functional.linear(x:to(torch.get_autocast_dtype(dev_type)), m.weight:to(torch.get_autocast_dtype(dev_type)),
                                      m.bias:to(torch.get_autocast_dtype(dev_type))):float() ^ 2):mean()
    close({ ref:item() }, { loss:item() }, torch.get_autocast_dtype(dev_type), 1, 'loss')
  end)

  it('casts at the entry of scaled_dot_product_attention', function()
    local q = torch.randn(1, 2, 4)
    local o = torch.autocast(dev_type, { dtype = 'bfloat16' }, function()
      return nn.functional.scaled_dot_product_attention(q, q, q)
    end)
    assert.are.equal('bfloat16', o.dtype)
  end)

  it('names bad arguments', function()
    expect_error(function() torch.autocast('tpu') end, "device_type must be 'cpu' or 'cuda', got tpu")
    expect_error(function() torch.autocast('cpu', { dtype = 'float64' }) end, 'dtype must be float16 or bfloat16, got float64')
    expect_error(function() torch.autocast('cpu', { dtyp = 'float16' }) end, "unknown option 'dtyp'")
    expect_error(function() torch.autocast('cpu', { enabled = 1 }) end, 'enabled must be a boolean')
  end)
end)

describe('GradScaler', function()
  -- one parameter p (loss = sum(p * x)) so the gradients are known: grad = x * scale
  local function setup(opts)
    local p = nn.Parameter(torch.tensor({ 1.0, 2.0 }))
    local opt = torch.optim.SGD({ p }, { lr = 0.5 })
    return p, opt, torch.amp.GradScaler('cpu', opts)
  end

  it('scales the loss, unscales the gradients and steps (init_scale 2^16)', function()
    local p, opt, scaler = setup()
    assert.are.equal(65536, scaler:get_scale())
    local loss = (p * torch.tensor({ 3.0, -1.0 })):sum()
    local scaled = scaler:scale(loss)
    assert.are.equal(65536 * loss:item(), scaled:item())
    scaled:backward()
    assert.are.same({ 3 * 65536, -65536 }, p.grad:tolist())
    scaler:step(opt)
    assert.are.same({ 3, -1 }, p.grad:tolist())            -- unscaled in place
    assert.are.same({ 1 - 1.5, 2 + 0.5 }, p:tolist())      -- p - lr * grad
    scaler:update()
    assert.are.equal(65536, scaler:get_scale())
  end)

  it('skips the step and halves the scale when a gradient is inf or NaN', function()
    for _, bad in ipairs { math.huge, 0 / 0 } do
      local p, opt, scaler = setup({ init_scale = 8.0 })
      scaler:scale((p * torch.tensor({ bad, 1.0 })):sum()):backward()
      assert.is_nil(scaler:step(opt))
      assert.are.same({ 1, 2 }, p:tolist())                -- not stepped
      scaler:update()
      assert.are.equal(4, scaler:get_scale())
      assert.are.equal(0, scaler:state_dict()._growth_tracker)
    end
  end)

  it('doubles the scale after growth_interval clean steps, unscale_ before step for clipping', function()
    local p, opt, scaler = setup({ init_scale = 4.0, growth_interval = 3, growth_factor = 2.0, backoff_factor = 0.25 })
    local scales = {}
    for i = 1, 7 do
      opt:zero_grad()
      scaler:scale((p * torch.tensor({ 1.0, i == 5 and math.huge or 1.0 })):sum()):backward()
      scaler:unscale_(opt)
      if i ~= 5 then assert.are.same({ 1, 1 }, p.grad:tolist()) end
      scaler:step(opt)
      scaler:update()
      scales[i] = scaler:get_scale()
    end
    -- 3 clean steps: x2; step 5 inf: x0.25 and the count restarts; 2 more clean: no growth yet
    assert.are.same({ 4, 4, 8, 8, 2, 2, 2 }, scales)
    expect_error(function() scaler:unscale_(opt); scaler:unscale_(opt) end, 'unscale_() has already been called')
  end)

  it('saves and loads its state; disabled, it passes everything through', function()
    local _, _, scaler = setup({ init_scale = 1024.0, growth_interval = 10 })
    local sd = scaler:state_dict()
    assert.are.same({ scale = 1024, growth_factor = 2, backoff_factor = 0.5, growth_interval = 10, _growth_tracker = 0 }, sd)
    local other = torch.amp.GradScaler('cpu')
    other:load_state_dict(sd)
    assert.are.equal(1024, other:get_scale())
    local p, opt, off = setup({ enabled = false })
    local loss = (p * torch.tensor({ 2.0, 2.0 })):sum()
    assert.are.equal(loss, off:scale(loss))
    loss:backward()
    off:step(opt)
    off:update()
    assert.are.same({ 0, 1 }, p:tolist())
    assert.are.equal(1, off:get_scale())
    assert.are.same({}, off:state_dict())
    expect_error(function() torch.amp.GradScaler({ growth_factor = 0.5 }) end, 'growth_factor should be > 1')
    expect_error(function() torch.amp.GradScaler({ init_scal = 1 }) end, "unknown option 'init_scal'")
  end)
end)
